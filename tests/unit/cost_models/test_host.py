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
    layer_modules,
)
from models_zoo import load_gpu


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


def test_clamped_activations_launch_their_clamps():
    """gpt-oss's swiglu_limit (ModelSpec.activation_clamp): forward the gate's clamp(max) and the
    up half's clamp(min, max), and on Megatron's fused path the cat joining them; backward
    PyTorch's clamp_backward (a 0-dim zero fill, the comparisons, logical_and_ for the two-sided
    clamp, where: 3 + 5) and the chunk's backward cat. One clamped activation in a dense layer;
    in a MoE layer the routed experts' and the shared expert's, after the dispatcher's sync."""
    for fused, forward in ((True, 3), (False, 2)):
        w = workload(fused_elementwise=fused)
        plain = layer_launches(dense_model(), layout(), w, None, is_moe=False)
        clamped = layer_launches(dense_model(activation_clamp=7.0), layout(), w, None, False)
        assert (clamped.forward - plain.forward, clamped.backward - plain.backward) == (forward, 9)
        assert clamped.graphed_forward - plain.graphed_forward == forward  # the MLP's graph
        lo = layout(ep=4)
        plain = layer_launches(moe_model(), lo, w, None, is_moe=True)
        clamped = layer_launches(moe_model(activation_clamp=7.0), lo, w, None, is_moe=True)
        assert clamped.forward - plain.forward == 2 * forward
        assert clamped.after_sync - plain.after_sync == 2 * forward
        assert clamped.backward - plain.backward == 2 * 9
        assert clamped.graphed_forward == plain.graphed_forward  # experts stay eager


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
    model, lo, w = moe_model(), layout(ep=4), workload(host_issue="kernels")
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
    w = workload(seq_len=128, global_batch=8, host_issue="kernels")
    lt = layer_time(tiny, H100, cal, w, layout(), is_moe=False)
    n = layer_launches(tiny, layout(), w, None, False)
    assert lt.forward_s == pytest.approx(n.forward * w.host_s_per_kernel)
    assert lt.backward_s == pytest.approx(n.backward * w.host_s_per_kernel)
    # the field default (Megatron's TE modules): the pass takes the modules' host time
    te = workload(seq_len=128, global_batch=8)
    lt = layer_time(tiny, H100, cal, te, layout(), is_moe=False)
    host = host_time(n, te, "x86", layer_modules(tiny, layout(), None, False))
    assert (lt.forward_s, lt.backward_s) == pytest.approx((host.forward_s, host.backward_s))
    big = layer_time(dense_model(), H100, cal, workload(), layout(), is_moe=False)
    assert big.overhead_s == big.overhead_backward_s == cal.kernel_overhead_s


# ---- Transformer Engine module calls (Workload.host_issue "te_modules") and the host CPU
# TE PR #3523, GB200, CPU time per call (forward, forward + backward), in us
GRACE_LN_LINEAR_BF16 = (83.48, 397.73)
GRACE_LINEAR_BF16 = (59.19, 311.30)
GRACE_LINEAR_FP8 = (114.51, 440.93)
X86_OVER_GRACE = 13.48 / 37.08  # TE issue #2053: torch Linear forward, H100 DGX / GB200


def _fb_s(pair_us, scale):
    """(forward, backward) seconds from a (forward, forward + backward) pair in us."""
    return pair_us[0] * 1e-6 * scale, (pair_us[1] - pair_us[0]) * 1e-6 * scale


def test_te_modules_replace_their_kernels_dense_by_hand():
    # bf16 dense layer, TP 1: 12 forward / 16 backward kernels (test above). Two
    # LayerNormLinear calls (QKV, fc1: norm 1 + GEMM 1 forward, norm 2 + GEMMs 2 backward) and
    # two Linear calls (proj, fc2: 1 / 2) issue 6 / 12 of them; the other 6 / 4 keep 6.26 us
    lo, w = layout(tp=1), workload(host_issue="te_modules")
    n = layer_launches(dense_model(), lo, w, None, is_moe=False)
    mods = layer_modules(dense_model(), lo, None, is_moe=False)
    assert (mods.layernorm_linear, mods.linear, mods.expert_linear) == (2, 2, 0)
    assert mods.kernels == (6, 12)
    ln_f, ln_b = _fb_s(GRACE_LN_LINEAR_BF16, X86_OVER_GRACE)
    lin_f, lin_b = _fb_s(GRACE_LINEAR_BF16, X86_OVER_GRACE)
    x86 = host_time(n, w, "x86", mods)
    assert x86.forward_s == pytest.approx(6 * 6.26e-6 + 2 * ln_f + 2 * lin_f)
    assert x86.backward_s == pytest.approx(4 * 6.26e-6 + 2 * ln_b + 2 * lin_b)
    # Grace: the module times as measured on GB200, the x86 launch cost 37.08 / 13.48 x
    ln_f, ln_b = _fb_s(GRACE_LN_LINEAR_BF16, 1.0)
    lin_f, lin_b = _fb_s(GRACE_LINEAR_BF16, 1.0)
    grace = host_time(n, w, "grace", mods)
    launch = 6.26e-6 * 37.08 / 13.48
    assert grace.forward_s == pytest.approx(6 * launch + 2 * ln_f + 2 * lin_f)
    assert grace.backward_s == pytest.approx(4 * launch + 2 * ln_b + 2 * lin_b)
    # CUDA graphs capture the whole dense layer: every kernel replays, no module time left
    graphed = host_time(n, workload(host_issue="te_modules", cuda_graphs=True), "x86", mods)
    assert graphed.forward_s == pytest.approx(12 * GRAPH_REPLAY_S_PER_KERNEL)
    assert graphed.backward_s == pytest.approx(16 * GRAPH_REPLAY_S_PER_KERNEL)


def test_te_grouped_linear_one_module_call_plus_per_expert_kernels():
    # MoE layer, 4 local experts, 1 shared expert, fp8 current scaling (3 quantize kernels
    # per GEMM operand): modules QKV (LayerNormLinear) and proj (Linear) in the attention block;
    # after the sync GroupedLinear fc1 and fc2 and the shared expert's two Linears, each priced
    # as one fp8 Linear call issuing one GEMM + its quantization (4 forward, 5 backward
    # kernels); the other 3 experts' GEMMs of each GroupedLinear keep their launches
    model, lo, w = moe_model(), layout(ep=4), workload(precision="fp8", host_issue="te_modules")
    n = layer_launches(model, lo, w, "tensorwise", is_moe=True)
    mods = layer_modules(model, lo, "tensorwise", is_moe=True)
    assert (mods.layernorm_linear, mods.linear, mods.expert_linear) == (1, 1, 4)
    assert mods.kernels == (1 * (1 + 4) + 4, 1 * (2 + 5) + 5)
    assert mods.expert_kernels == (4 * 4, 4 * 5)
    lin_f, lin_b = _fb_s(GRACE_LINEAR_FP8, X86_OVER_GRACE)
    host = host_time(n, w, "x86", mods)
    assert host.after_sync_s == pytest.approx((n.after_sync - 16) * 6.26e-6 + 4 * lin_f)
    # CUDA graphs take the attention block's modules, not the experts after the sync
    gw = workload(precision="fp8", host_issue="te_modules", cuda_graphs=True)
    graphed = host_time(n, gw, "x86", mods)
    assert graphed.after_sync_s == pytest.approx(host.after_sync_s)
    eager_rest = (n.backward - n.graphed_backward - 20) * 6.26e-6
    assert graphed.backward_s == pytest.approx(
        n.graphed_backward * GRAPH_REPLAY_S_PER_KERNEL + eager_rest + 4 * lin_b
    )


def test_host_issue_and_host_cpu_are_explicit_inputs():
    mega = profile("megatron").workload(workload())
    titan = profile("torchtitan").workload(workload())
    assert mega.host_issue == "te_modules" and titan.host_issue == "kernels"
    assert profile("deepspeed").workload(workload()).host_issue == "kernels"
    assert load_gpu("gb200").host_cpu == load_gpu("gb300").host_cpu == "grace"
    for gid in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "a100-sxm-80gb"):
        gpu = load_gpu(gid)
        assert gpu.host_cpu == "x86" and gpu.host_cpu_source
    # the same tiny layer under Megatron's TE modules binds harder on a Grace host
    tiny = dense_model(hidden_size=256, ffn_hidden_size=512, num_attention_heads=4,
                       num_kv_heads=4)  # fmt: skip
    lo, gpu_s = layout(), (1e-5, 2e-5, 0.0)
    x86 = host_floor_s(tiny, lo, mega, False, gpu_s, 0.0, "x86")
    grace = host_floor_s(tiny, lo, mega, False, gpu_s, 0.0, "grace")
    plain = host_floor_s(tiny, lo, titan, False, gpu_s, 0.0, "x86")
    assert plain[0] < x86[0] < grace[0] and plain[1] < x86[1] < grace[1]
