"""`planner measure`: the kernels a model looks up, GEMM / attention sweeps on this machine's GPU,
nccl-tests command lines.

`measure kernels --model M --cluster C` measures the rows the cost model looks up for that model on
that cluster (cost_models.kernel_shapes) into a folder of kernel tables that `planner calibrate
--kernels DIR` reads; `--shapes-only FILE.json` writes the shapes without measuring (no torch
needed), for `python3 planner/calibrate/sweep.py kernels --shapes FILE.json --out-dir DIR` on a GPU
machine that has torch alone. The sweeps need torch (the `[measure]` extra); sweep.py and
kernel_sweep.py hold them. The nccl-tests commands cover
each tier of a cluster: one run inside the innermost domain, one across each outer tier, with the
flags of nccl-tests' README (`-b` min bytes, `-e` max bytes, `-f` step factor, `-g` GPUs per
process) under Slurm (`srun`, `--switches=1` to keep a leaf-tier run under one leaf switch) and
Open MPI (`mpirun -np N --map-by ppr:G:node`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.kernel_shapes import kernel_shapes, tp_ok
from cost_models.specs import Cluster

from ..api import make_workload
from ..types import SearchSpace
from . import kernel_sweep, sweep

SEARCH_MICRO_BATCHES: tuple[int, ...] = SearchSpace.model_fields["micro_batches"].default
"""The micro-batch sizes the search tries by default: the token counts measure covers."""

TESTS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
SIZES = "-b 1K -e 8G -f 2 -g 1"


def run_sweep(what: str, out: str, *, device: str = "cuda", tiny: bool = False) -> tuple[int, str]:
    """Run one sweep and write its CSV; returns (rows, device description)."""
    _torch(what, device)
    if what == "gemm":
        shapes = sweep.TINY_GEMM_SHAPES if tiny else sweep.DEFAULT_GEMM_SHAPES
        rows = sweep.gemm_sweep(
            shapes, device=device, warmup=1 if tiny else 5, iters=3 if tiny else 20
        )
        fields = sweep.GEMM_FIELDS
    else:
        configs = sweep.TINY_ATTENTION if tiny else sweep.DEFAULT_ATTENTION
        rows = sweep.attention_sweep(
            configs, device=device, warmup=1 if tiny else 3, iters=3 if tiny else 10
        )
        fields = sweep.ATTENTION_FIELDS
    try:
        sweep.write_csv(rows, fields, out)
    except OSError as err:
        raise InvalidInput(f"--out: cannot write {out}: {err.strerror}") from None
    return len(rows), sweep.device_description(device)


def shapes_document(
    model_name: str,
    cluster_name: str,
    *,
    seq_len: int | None = None,
    tps: Sequence[int] = (1, 2, 4, 8),
    dtypes: Sequence[str] = ("bf16", "fp8"),
    micro_batches: Sequence[int] = SEARCH_MICRO_BATCHES,
    cps: Sequence[int] = (1, 2, 4, 8),
    eps: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
) -> dict[str, Any]:
    """The shapes file (kernel_sweep.FORMAT) of what the model looks up on the cluster: the
    rows cost_models.kernel_shapes derives, with what they were derived for."""
    model = models_zoo.load_model(model_name)
    cluster = models_zoo.load_cluster(cluster_name)
    seq = make_workload(model, seq_len=seq_len).seq_len
    bad = [tp for tp in tps if not tp_ok(model, tp)]
    if len(bad) == len(tps):
        raise InvalidInput(
            f"--tp: none of {','.join(map(str, tps))} splits {model.name} (TP must divide "
            f"num_attention_heads {model.num_attention_heads} and ffn_hidden_size, and divide "
            f"num_kv_heads {model.kv_heads} or be a multiple of it)"
        )
    ks = kernel_shapes(
        model, cluster, seq_len=seq, tps=tps, dtypes=dtypes, micro_batches=micro_batches,
        cps=cps, eps=eps,
    )  # fmt: skip
    return {
        "format": kernel_sweep.FORMAT,
        "model": model_name,
        "cluster": cluster_name,
        "gpu": cluster.gpu.name,
        "seq_len": seq,
        "tps": [tp for tp in tps if tp not in bad],
        "micro_batches": list(micro_batches),
        "cps": list(cps),
        "dtypes": list(dtypes),
        "tokens": ks.tokens,
        "gemm": [list(r) for r in ks.gemm],
        "grouped_gemm": [list(r) for r in ks.grouped_gemm],
        "attention": [list(r) for r in ks.attention],
        "memory_bound": [list(r) for r in ks.memory_bound],
    }


def write_shapes(doc: dict[str, Any], path: str) -> None:
    try:
        Path(path).write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    except OSError as err:
        raise InvalidInput(f"--shapes-only: cannot write {path}: {err.strerror}") from None


def run_kernels(
    doc: dict[str, Any],
    out_dir: str,
    *,
    device: str = "cuda",
    tiny: bool = False,
    min_time_ms: float = 10.0,
    budget_s: float | None = None,
    sustained_s: float = 0.0,
) -> dict[str, Any]:
    """Measure a shapes document into `out_dir` (kernel_sweep.measure); its metadata."""
    _torch("kernels", device)
    shapes = {
        "sources": [{k: doc[k] for k in ("model", "cluster", "gpu", "seq_len", "tps",
                                          "micro_batches", "cps", "dtypes")}],
        **{k: [tuple(r) for r in doc[k]] for k in kernel_sweep.KINDS},
    }  # fmt: skip
    if tiny:
        shapes = {**kernel_sweep.tiny_shapes(shapes), "tiny": True}
    try:
        return kernel_sweep.measure(
            shapes, out_dir, device=device, min_time_s=min_time_ms / 1e3,
            warm_s=0.0 if tiny else 2.0, budget_s=budget_s,
            sustained_s=0.0 if tiny else sustained_s,
        )  # fmt: skip
    except OSError as err:
        raise InvalidInput(f"--out-dir: cannot write {out_dir}: {err.strerror}") from None


def _torch(what: str, device: str) -> Any:
    """torch, or one line saying why this machine cannot measure."""
    try:
        import torch
    except ImportError:
        raise InvalidInput(
            f"measure {what}: needs torch (pip install 'planner-placement[measure]'), or write "
            "the shapes with --shapes-only and measure them where torch is"
        ) from None
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise InvalidInput(
            f"--device: {device!r} is not a torch device (cuda, cuda:1, cpu)"
        ) from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise InvalidInput(
            f"measure {what}: no CUDA device here (use --device cpu for a smoke test)"
        )
    return torch


def tier_runs(cluster: Cluster) -> list[tuple[str, int, int]]:
    """(tier name, ranks, nodes) of one nccl-tests run per tier, on whole nodes."""
    runs = []
    inner = 1
    for tier in cluster.tiers:
        # The innermost tier is measured over its whole domain; an outer tier over two of its
        # inner domains (the cheapest run that crosses it).
        ranks = tier.domain_size if inner == 1 and tier.domain_size else 2 * inner
        ranks = min(ranks, tier.domain_size or ranks, cluster.num_gpus)
        if ranks <= inner:
            continue
        nodes = max(1, math.ceil(ranks / cluster.gpus_per_node))
        runs.append((tier.name, ranks, nodes))
        inner = tier.domain_size or ranks
    return runs


def nccl_commands_text(cluster: Cluster) -> str:
    g = cluster.gpus_per_node
    lines = [
        f"# nccl-tests runs covering each tier of {cluster.name} ({g} GPUs per node).",
        "# Build nccl-tests with MPI=1 (github.com/NVIDIA/nccl-tests), then run each block on the",
        "# cluster and pass the outputs to:",
        f"#   planner calibrate --cluster {cluster.name} --nccl-tests nccl_*.txt --out my.yaml",
        "# NCCL_NVLS_ENABLE=0 NCCL_COLLNET_ENABLE=0 measure the ring/tree algorithms the cost",
        "# model prices (in-switch reductions report bus bandwidth above line rate).",
    ]
    for name, ranks, nodes in tier_runs(cluster):
        per_node = min(g, ranks)
        leaf = " --switches=1" if nodes > 1 and name != cluster.tiers[-1].name else ""
        lines += ["", f"# tier {name}: {ranks} GPUs on {nodes} node(s)"]
        for test in TESTS:
            out = f"nccl_{name}_{test.removesuffix('_perf')}.txt"
            lines.append(
                f"NCCL_NVLS_ENABLE=0 srun -N {nodes} --ntasks-per-node={per_node} --gpus-per-node={per_node}{leaf} "
                f"--mpi=pmix ./build/{test} {SIZES} > {out}"
            )
        for test in TESTS:
            out = f"nccl_{name}_{test.removesuffix('_perf')}.txt"
            lines.append(
                f"mpirun -np {ranks} --map-by ppr:{per_node}:node -x NCCL_NVLS_ENABLE=0 "
                f"./build/{test} {SIZES} > {out}"
            )
        if nodes > 1:
            lines += _one_per_node_lines(name, nodes)
    return "\n".join(lines) + "\n"


def _one_per_node_lines(name: str, nodes: int) -> list[str]:
    """The same tier with one GPU per node: the groups a plan spreads one GPU per node (DP
    beside TP 8, the PP hop of sendrecv over two nodes), which the collective curves look up by
    that span (cost_models.commtable.group_span)."""
    lines = ["", f"# tier {name}, one GPU per node: {nodes} GPUs on {nodes} nodes"]
    for test in (*TESTS, "sendrecv_perf"):
        out = f"nccl_{name}_1pn_{test.removesuffix('_perf')}.txt"
        lines.append(
            f"mpirun -np {nodes} --map-by ppr:1:node -x NCCL_NVLS_ENABLE=0 "
            f"./build/{test} {SIZES} > {out}"
        )
    return lines
