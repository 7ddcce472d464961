"""Small hand-built specs for tests that must not depend on preset data."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from cost_models.calibration import GenerationCalibration
from cost_models.specs import Cluster, Estimate, GpuSpec, Layout, LinkTier, ModelSpec, Workload

H100 = GpuSpec(
    id="test-h100",
    name="H100 (test)",
    generation="hopper",
    peak_bf16_tflops=989.4,
    peak_fp8_tflops=1978.9,
    hbm_gib=80,
    hbm_bandwidth_gb_per_s=3350,
    nvlink_gb_per_s=450,
    nvlink_domain_size=8,
)


def cluster(
    num_gpus: int = 64,
    nvlink_gb_per_s: float = 450,
    ib_gb_per_s: float = 50,
    oversubscription: float = 1.0,
) -> Cluster:
    return Cluster(
        name="test",
        gpu=H100,
        gpus_per_node=8,
        num_gpus=num_gpus,
        tiers=(
            LinkTier(
                name="nvlink",
                domain_size=8,
                bandwidth_gb_per_s=nvlink_gb_per_s,
                latency_us=3,
                efficiency=0.8,
            ),
            LinkTier(
                name="ib",
                domain_size=None,
                bandwidth_gb_per_s=ib_gb_per_s,
                latency_us=8,
                efficiency=0.9,
                oversubscription=oversubscription,
            ),
        ),
    )


def dense_model(**over) -> ModelSpec:
    fields = {
        "name": "dense-test",
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 14336,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "vocab_size": 128256,
    }
    fields.update(over)
    return ModelSpec(**fields)


def moe_model(**over) -> ModelSpec:
    fields = {
        "name": "moe-test",
        "num_layers": 16,
        "hidden_size": 2048,
        "ffn_hidden_size": 8192,
        "num_attention_heads": 16,
        "num_kv_heads": 4,
        "vocab_size": 32000,
        "moe": {
            "num_experts": 16,
            "top_k": 2,
            "expert_ffn_hidden_size": 1024,
            "num_shared_experts": 1,
            "first_k_dense_layers": 1,
        },
    }
    fields.update(over)
    return ModelSpec(**fields)


def workload(
    seq_len: int = 4096, global_batch: int = 64, precision: str = "bf16", **over
) -> Workload:
    return Workload(seq_len=seq_len, global_batch_seqs=global_batch, precision=precision, **over)


def layout(**over) -> Layout:
    return Layout(**over)


def result_for(model, cluster, workload, layout: Layout):
    """A PlanResult holding one scored layout (what plan() returns, without the search)."""
    from planner import api
    from planner.types import PlanResult, SolveStats

    e = api.estimate(model, cluster, layout, workload)
    stats = SolveStats(
        engine="exhaustive",
        status="PROVED",
        objective=e.step_time_s,
        best_bound=e.step_time_s,
        gap=0.0,
        wall_time_s=0.0,
        num_candidates=1,
        num_scored=1,
        num_feasible=1,
    )
    return PlanResult(
        model=model,
        cluster=cluster,
        workload=workload,
        ranked=(e,),
        solver=stats,
        rejections={},
        usable_memory_gib=72.0,
    )


def plan(model, cluster, workload, **constraints):
    """planner.plan on typed inputs, the search constraints as keywords (planner.search_inputs:
    SearchSpace and SolverOptions fields, framework megatron unless given)."""
    from planner import api, search_inputs

    return api.plan(model, cluster, workload, *search_inputs(**constraints))


FROZEN = Path(__file__).parent / "unit" / "planner" / "snapshots" / "estimates"
"""Estimates fixed on disk for the report snapshots: a physics change moves none of them."""


def frozen(name: str, compute) -> Estimate:
    """The Estimate stored as NAME.json (what `compute()`, the cost model, gave when it was
    frozen), so a report snapshot tests the rendering, not today's cost model.
    UPDATE_ESTIMATES=1 stores `compute()` afresh (then review the snapshots it moves:
    UPDATE_SNAPSHOTS=1)."""
    path = FROZEN / f"{name}.json"
    if os.environ.get("UPDATE_ESTIMATES") == "1":
        FROZEN.mkdir(parents=True, exist_ok=True)
        path.write_text(compute().model_dump_json(indent=1) + "\n")
    assert path.exists(), f"missing frozen estimate {name}: run with UPDATE_ESTIMATES=1"
    return Estimate.model_validate_json(path.read_text())


def frozen_estimate(name: str, model, cluster, layout: Layout, workload) -> Estimate:
    """planner.api.estimate of the layout, as frozen in NAME.json (`frozen`)."""
    from planner import api

    e = frozen(name, lambda: api.estimate(model, cluster, layout, workload))
    assert e.layout.tp == layout.tp and e.layout.pp == layout.pp and e.layout.dp == layout.dp, (
        f"{name}.json was frozen for another layout"
    )
    return e


def frozen_calibration(name: str, cluster) -> GenerationCalibration:
    """The cluster's GPU-generation calibration as frozen in NAME.json (see frozen_estimate)."""
    path = FROZEN / f"{name}.json"
    if os.environ.get("UPDATE_ESTIMATES") == "1":
        from cost_models.calibration import calibration_for_cluster

        cal = dataclasses.asdict(calibration_for_cluster(cluster))
        FROZEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cal, indent=1) + "\n")
    assert path.exists(), f"missing frozen calibration {name}: run with UPDATE_ESTIMATES=1"
    return GenerationCalibration(**json.loads(path.read_text()))


def tiny_record(
    settings: dict | None = None, *, num_layers: int = 2, layout: dict | None = None, **fields
) -> dict:
    """A published_runs.yaml record of a 2-layer 256-wide Llama on 8 H100s (Megatron, DP 8,
    global batch 8): `settings` (absent when None), the layout fields in `layout` over
    tp 1 / pp 1 / dp 8 / global batch 8, and any other top-level field in `fields`."""
    record = {
        "id": "t",
        "framework": "megatron",
        **({} if settings is None else {"settings": settings}),
        "gpu": "h100-sxm-80gb",
        "num_gpus": 8,
        "gpus_per_node": 8,
        "model": {
            "name": "Llama",
            "num_layers": num_layers,
            "hidden_size": 256,
            "ffn_hidden_size": 512,
            "num_attention_heads": 4,
            "num_kv_heads": 4,
            "vocab_size": 1000,
            "seq_len": 1024,
        },
        "layout": {"tp": 1, "pp": 1, "dp": 8, "global_batch_seqs": 8, **(layout or {})},
        "measured_tokens_per_s_per_gpu": 1000.0,
    }
    return {**record, **fields}


def deepseek_v3_recipe(cluster: str = "h800", **layout_kw: object) -> tuple:
    """DeepSeek-V3 on its own recipe's shape (model, cluster, workload, layout): fp8, DeepEP
    dispatch in fp8 (DeepSeek-V3 sec. 3.3.2; profile 'other'), TP1 PP16 DP128 EP64, selective
    recompute, ZeRO-1; `layout_kw` overrides layout fields."""
    import models_zoo  # deferred: the factories stay importable without the presets

    work = Workload(
        seq_len=4096,
        global_batch_seqs=15360,
        precision="fp8",
        moe_dispatcher="deepep",
        ep_dispatch_fp8=True,
    )
    kw: dict = {"tp": 1, "pp": 16, "dp": 128, "ep": 64, "recompute": "selective", "zero_stage": 1}
    kw.update(layout_kw)
    return (
        models_zoo.load_model("deepseek-v3"),
        models_zoo.load_cluster(cluster),
        work,
        Layout(**kw),
    )


def with_builtin_tables(cluster: Cluster) -> Cluster:
    """`cluster` pricing kernels from its GPU's shipped measured tables (`kernels: builtin`):
    the Hopper presets price on their efficiency curve by default (docs/calibration.md
    "Decision, 2026-11-27"), the tables are one input away."""
    from models_zoo.kernel_tables import builtin_tables

    data = cluster.model_dump()
    data["kernels"] = builtin_tables(cluster.gpu.id, f"{cluster.name}: kernels")
    return Cluster.model_validate(data)


def load_script(path: Path, name: str | None = None):
    """A script outside the packages (bench/..., bench/heldout/...) imported as a module and
    registered in sys.modules under `name` (default: its stem + "_t"), where dataclasses and
    pickling look their module up."""
    import importlib.util
    import sys

    name = name or f"{path.stem}_t"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
