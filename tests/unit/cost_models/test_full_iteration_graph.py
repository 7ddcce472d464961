"""Full-iteration CUDA graphs (Workload.full_iteration_cuda_graph; Megatron --cuda-graph-impl
full_iteration: one graph for the whole forward-backward path): no host-side cost per layer, no
MoE dispatcher sync, every kernel at the graph replay cost. Expected values by hand."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from factories import moe_model, layout, workload

from cost_models.calibration import calibration_for
from cost_models.compute import layer_overhead_s
from cost_models.host import (
    EXPERT_PAD_KERNELS,
    GRAPH_REPLAY_S_PER_KERNEL,
    host_time,
    layer_launches,
    layer_modules,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "heldout"))
import mbridge_recipes  # noqa: E402


def test_no_host_side_cost_per_layer_left():
    cal = calibration_for("blackwell")
    model, lo = moe_model(), layout(ep=4)
    experts = 3 * (model.moe.num_experts / 4) * cal.expert_gemm_overhead_s
    # per-layer TE graphs keep the expert GEMM launches after the sync; one graph keeps none
    graphed = layer_overhead_s(model, lo, cal, workload(cuda_graphs=True), is_moe=True)
    assert graphed == pytest.approx(experts) and graphed > 0
    full = workload(full_iteration_cuda_graph=True)
    assert layer_overhead_s(model, lo, cal, full, is_moe=True) == 0.0
    assert layer_overhead_s(model, lo, cal, full, is_moe=False) == 0.0


def test_every_kernel_replays_and_nothing_waits_on_a_sync():
    model, lo = moe_model(), layout(ep=4)
    full = workload(full_iteration_cuda_graph=True, host_issue="te_modules")
    n = layer_launches(model, lo, full, "tensorwise", is_moe=True)
    assert n.after_sync == 0  # the dispatcher's counts stay on the device
    eager = layer_launches(model, lo, workload(), "tensorwise", is_moe=True)
    # the same kernels but TEGroupedMLP's quantization padding: the full-iteration recipes'
    # HybridEP dispatch pads the rows itself (host.pads_expert_rows)
    pad_f, pad_b = EXPERT_PAD_KERNELS
    assert eager.after_sync > 0
    assert (n.forward, n.backward) == (eager.forward - pad_f, eager.backward - pad_b)
    mods = layer_modules(model, lo, "tensorwise", is_moe=True)
    for cpu in ("x86", "grace"):  # no Python runs inside the graph: the host CPU does not matter
        t = host_time(n, full, cpu, mods)
        assert t.forward_s == pytest.approx(n.forward * GRAPH_REPLAY_S_PER_KERNEL)
        assert t.backward_s == pytest.approx(n.backward * GRAPH_REPLAY_S_PER_KERNEL)
        assert t.after_sync_s == 0.0


RECIPE = '''
def _enable_full(cfg):
    cfg.model.cuda_graph_impl = "full_iteration"
    cfg.model.cuda_graph_scope = []
    cfg.model.use_transformer_engine_op_fuser = True
    if cfg.model.x:
        cfg.model.expert_model_parallel_size = 99
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True, overlap_moe_expert_parallel_comm=True)

def qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config():
    cfg = qwen3_30b_a3b_pretrain_config()
    cfg.model.expert_model_parallel_size = 8
    cfg.train.global_batch_size = 512
    cfg.train.micro_batch_size = 4
    cfg.model.moe_flex_dispatcher_backend = "hybridep"
    _enable_full(cfg)
    return cfg

def qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config():
    cfg = _with_global_batch_size(qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config(), 1024)
    return cfg
'''


def test_perf_recipe_functions_read_in_order_with_their_helpers():
    funcs = {n.name: n for n in ast.parse(RECIPE).body if isinstance(n, ast.FunctionDef)}
    got = {}
    for name in ("qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config", "qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config"):
        fields = dict(mbridge_recipes.DEFAULTS)
        mbridge_recipes._apply(funcs[name].body, fields, funcs, 0)
        got[name] = fields
    gb200 = got["qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config"]
    # the helper's statements apply; the one under `if` does not
    assert gb200["expert_model_parallel_size"] == 8
    assert (gb200["cuda_graph_impl"], gb200["moe_a2a_overlap"]) == ("full_iteration", True)
    assert (gb200["global_batch_size"], gb200["micro_batch_size"]) == (512, 4)
    settings, _, said = mbridge_recipes._map({**gb200, "cutedsl_fused_grouped_mlp": True})
    assert settings == {
        "cuda_graphs": True,
        "full_iteration_cuda_graph": True,
        "moe_dispatcher": "deepep",
        "moe_flex_backend": "hybridep",
        "ep_overlap": True,
    }
    assert "op-fuser fused grouped MLP (not an input)" in said
    # a recipe built from another: its fields, then the new global batch
    gb300 = got["qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config"]
    assert gb300["global_batch_size"] == 1024 and gb300["cuda_graph_impl"] == "full_iteration"
