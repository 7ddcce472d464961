"""Host-bound timeline (issue 32 item 4): kernels per layer counted from the structure, host
issue time at the measured launch cost, the floor it puts under a pass, and the MoE dispatcher's
device-to-host sync that exposes the launches after it. Expected values by hand."""

from __future__ import annotations

import pytest
from factories import H100, dense_model, layout, moe_model, workload

from cost_models.calibration import calibration_for
from cost_models.compute import host_floor_s, layer_time
from cost_models.framework import profile
from cost_models.host import (
    DISPATCH_POST_KERNELS,
    DISPATCH_PRE_KERNELS,
    GRAPH_REPLAY_S_PER_KERNEL,
    ROUTER_KERNELS,
    host_time,
    layer_launches,
)


def test_dense_layer_kernels_by_hand():
    # bf16, TP 1: attention norm 1 + QKV 1 + rotary 2 + attention 1 + proj 1 + add 1 = 7,
    # MLP norm 1 + fc1 1 + act 1 + fc2 1 + add 1 = 5; backward: norms 2 + 2, rotary 2,
    # attention 1, two GEMMs per linear (4 linears: 8), act 1
    lo = layout(tp=1)
    n = layer_launches(dense_model(), lo, workload(), None, is_moe=False)
    assert (n.forward, n.backward) == (12, 9 + 7)
    # fp8 current scaling: 3 quantize kernels per GEMM input (4) and output gradient (4);
    # TP 2 adds the all-gather and reduce-scatter of each block, both passes
    n8 = layer_launches(dense_model(), layout(tp=2), workload(), "tensorwise", is_moe=False)
    assert (n8.forward, n8.backward) == (12 + 4 * 3 + 4, 16 + 4 * 3 + 4)
    assert n8.after_sync == 0  # no dispatcher, no sync


def test_moe_layer_kernels_per_expert_and_grouped():
    model = moe_model()  # 16 experts, 1 shared expert, no q/k norm
    lo = layout(ep=4)  # 4 local experts
    per = layer_launches(model, lo, workload(), None, is_moe=True)
    grouped = layer_launches(model, lo, workload(expert_gemm_launch="grouped"), None, True)
    # experts: fc1 + fc2 per local expert, activation and probability scale 2; shared expert:
    # 2 GEMMs + activation; residual add after the combine
    after = DISPATCH_POST_KERNELS[0] + (2 * 4 + 2) + (2 + 1) + 1
    assert per.after_sync == after
    # before it: the attention block (7, as above), the MoE norm, router and preprocessing
    pre = 1 + ROUTER_KERNELS[0] + DISPATCH_PRE_KERNELS
    assert per.forward == 7 + pre + after
    # grouped: one launch per projection instead of one per local expert
    assert per.forward - grouped.forward == 2 * 4 - 2
    assert per.backward - grouped.backward == 2 * (2 * 4 - 2)


def test_sync_points_are_framework_properties():
    model, lo1, lo8 = moe_model(), layout(ep=1), layout(ep=8)
    mega = profile("megatron").workload(workload())
    titan = profile("torchtitan").workload(workload())
    assert mega.moe_host_sync == "every_layer" and titan.moe_host_sync == "expert_parallel"
    assert layer_launches(model, lo1, mega, None, True).after_sync > 0
    assert layer_launches(model, lo1, titan, None, True).after_sync == 0  # local dispatcher
    assert layer_launches(model, lo8, titan, None, True).after_sync > 0
    assert mega.host_s_per_kernel == titan.host_s_per_kernel == 6.26e-6


def test_host_time_graphed_kernels_replay_cheaper():
    model, lo = moe_model(), layout(ep=4)
    n = layer_launches(model, lo, workload(), None, True)
    eager = host_time(n, workload())
    assert eager.forward_s == pytest.approx(n.forward * 6.26e-6)
    assert eager.after_sync_s == pytest.approx(n.after_sync * 6.26e-6)
    graphed = host_time(n, workload(cuda_graphs=True))
    saved = n.graphed_forward * (6.26e-6 - GRAPH_REPLAY_S_PER_KERNEL)
    assert graphed.forward_s == pytest.approx(eager.forward_s - saved)
    assert graphed.after_sync_s == eager.after_sync_s  # the experts stay eager


def test_floor_binds_only_where_the_host_cannot_stay_ahead():
    model, lo, w = moe_model(), layout(ep=4), workload()
    n = layer_launches(model, lo, w, None, True)
    host = host_time(n, w)
    # GPU-bound: the calibrated overhead stays
    assert host_floor_s(model, lo, w, True, (1.0, 2.0, 0.5), 3e-4) == (3e-4, 3e-4)
    # host-bound pass: the overhead is the issue time beyond the GPU time
    fwd, bwd = host_floor_s(model, lo, w, True, (1e-5, 2e-5, 1e-5), 0.0)
    assert fwd == pytest.approx(host.forward_s - 1e-5)
    assert bwd == pytest.approx(host.backward_s - 2e-5)
    # the whole forward has GPU time enough, but after the sync the experts' launches are
    # exposed: the segment's issue time beyond its own GPU time
    g_post = host.after_sync_s / 2
    fwd, _ = host_floor_s(model, lo, w, True, (10 * host.forward_s, 1.0, g_post), 0.0)
    assert fwd == pytest.approx(host.after_sync_s - g_post)


def test_layer_time_carries_the_floor():
    # a tiny layer (one sequence of 128 tokens, hidden 256) is launch-bound: the pass takes
    # its host issue time; a large one keeps its GPU time plus the calibrated overhead
    cal = calibration_for("hopper")
    tiny = dense_model(hidden_size=256, ffn_hidden_size=512, num_attention_heads=4,
                       num_kv_heads=4)  # fmt: skip
    w = workload(seq_len=128, global_batch=8)
    lt = layer_time(tiny, H100, cal, w, layout(), is_moe=False)
    n = layer_launches(tiny, layout(), w, None, False)
    assert lt.forward_s == pytest.approx(n.forward * w.host_s_per_kernel)
    assert lt.backward_s == pytest.approx(n.backward * w.host_s_per_kernel)
    big = layer_time(dense_model(), H100, cal, workload(), layout(), is_moe=False)
    assert big.overhead_s == big.overhead_backward_s == cal.kernel_overhead_s
