"""Hand-computed values for the context-parallel terms (cost_models/cp.py)."""

from dataclasses import replace

import pytest
from factories import cluster, dense_model, layout, workload

from cost_models.calibration import calibration_for
from cost_models.compute import LayerTime
from cost_models.cp import cp_layer_s

HBM_BYTES_PER_S = 3350e9 * 0.85  # test H100 HBM x hopper hbm_efficiency
NVLINK_BYTES_PER_S = 450e9 * 0.8
SLOWDOWN = 24 / (132 - 24)  # NCCL kernel's SMs (24 of 132) taken from the overlapped attention


def _lt(attention_s: float) -> LayerTime:
    return LayerTime(
        gemm_s=0.0, attention_s=attention_s, elementwise_s=0.0, overhead_s=0.0, model_flops=0.0
    )


def _torch_ring(attention_s: float, recompute: str = "none"):
    m, c = dense_model(), cluster(num_gpus=8)
    w = workload(seq_len=131072, global_batch=2, cp_attention="torch_ring")
    lay = layout(cp=4, dp=2, recompute=recompute)
    return cp_layer_s(m, c, calibration_for("hopper"), w, lay, _lt(attention_s), [4, 4])


def test_torch_ring_hidden_gather_leaves_merges_accumulation_and_last_hop():
    # Llama 3 8B shape, 128K over cp=4: 32768 tokens per GPU, K/V expanded to 32 heads of 128.
    t, heads, d = 32768, 32, 128
    # Ring all-gather over 4 GPUs: 3 steps of latency (NCCL tuning.cc nsteps = n - 1).
    gather_s = 3 / 4 * (4 * t * heads * 2 * d * 2) / NVLINK_BYTES_PER_S + 3e-6 * 3
    hop_s = 3e-6 + t * heads * 2 * d * 4 / NVLINK_BYTES_PER_S  # fp32 dK/dV
    merge_s = 3 * t * heads * (42 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    accum_s = 3 * t * heads * (14 * d + 22 * 2 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    exposed, total = _torch_ring(attention_s=0.4)  # step 0 = 0.1 s fwd, 0.25 s bwd: hides all
    hidden_s = 2 * gather_s + 2 * hop_s  # both gathers and the two middle hops
    assert exposed == pytest.approx(merge_s + accum_s + hop_s + SLOWDOWN * hidden_s, rel=1e-9)
    assert total == pytest.approx(2 * gather_s + 3 * hop_s, rel=1e-9)


def test_torch_ring_exposes_gather_beyond_the_local_step_and_repeats_it_under_recompute():
    t, heads, d = 32768, 32, 128
    # Ring all-gather over 4 GPUs: 3 steps of latency (NCCL tuning.cc nsteps = n - 1).
    gather_s = 3 / 4 * (4 * t * heads * 2 * d * 2) / NVLINK_BYTES_PER_S + 3e-6 * 3
    hop_s = 3e-6 + t * heads * 2 * d * 4 / NVLINK_BYTES_PER_S
    merge_s = 3 * t * heads * (42 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    accum_s = 3 * t * heads * (14 * d + 22 * 2 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    a = 4e-3  # step 0: 1 ms forward, 2.5 ms backward
    fwd = gather_s - a / 4 + merge_s
    bwd = gather_s - 2.5 * a / 4 + accum_s + 2 * (hop_s - 2.5 * a / 4) + hop_s
    hidden_fwd, hidden_bwd = a / 4, 3 * 2.5 * a / 4  # comm runs beside each step it overlaps
    one = fwd + bwd + SLOWDOWN * (hidden_fwd + hidden_bwd)
    two = 2 * fwd + bwd + SLOWDOWN * (2 * hidden_fwd + hidden_bwd)
    assert _torch_ring(a)[0] == pytest.approx(one, rel=1e-9)
    assert _torch_ring(a, recompute="full")[0] == pytest.approx(two, rel=1e-9)


def test_fused_ring_hidden_behind_attention_and_no_cp_no_cost():
    m, c = dense_model(), cluster(num_gpus=8)
    w = workload(seq_len=131072, global_batch=2)
    cal = calibration_for("hopper")
    exposed, total = cp_layer_s(m, c, cal, w, layout(cp=4, dp=2), _lt(0.4), [4, 4])
    step_s = 3e-6 + 32768 * 2 * 8 * 128 * 2 / NVLINK_BYTES_PER_S  # 8 KV heads, bf16
    assert exposed == pytest.approx(SLOWDOWN * 9 * step_s, rel=1e-9)  # hidden, slows attention
    assert total == pytest.approx(9 * step_s, rel=1e-9)
    assert cp_layer_s(m, c, cal, w, layout(dp=8), _lt(0.4), [1, 1]) == (0.0, 0.0)


def test_fused_ring_reruns_its_forward_exchange_where_the_attention_core_is_recomputed():
    """TE's p2p ring runs inside the checkpointed core attention: full recompute and selective
    with core_attn redo the forward exchange (3 more steps here), hidden behind the rerun
    attention as the first was; selective without core_attn (layernorm) does not."""
    m, c, cal = dense_model(), cluster(num_gpus=8), calibration_for("hopper")
    w = workload(seq_len=131072, global_batch=2)
    step_s = 3e-6 + 32768 * 2 * 8 * 128 * 2 / NVLINK_BYTES_PER_S
    small = replace(_lt(1e-4), attention_backward_s=1.2e-4)  # the steps show past the attention
    shown = 2 * (3 * step_s - 0.75e-4) + (6 * step_s - 0.75 * 1.2e-4)
    for rc, mods in (("full", None), ("selective", None), ("selective", ("core_attn", "mlp"))):
        lay = layout(cp=4, dp=2, recompute=rc, recompute_modules=mods)
        exposed, total = cp_layer_s(m, c, cal, w, lay, small, [4, 4])
        assert total == pytest.approx(12 * step_s, rel=1e-9)
        assert exposed == pytest.approx(shown + SLOWDOWN * (12 * step_s - shown), rel=1e-9)
    lay = layout(cp=4, dp=2, recompute="selective", recompute_modules=("layernorm",))
    assert cp_layer_s(m, c, cal, w, lay, small, [4, 4]) == cp_layer_s(
        m, c, cal, w, layout(cp=4, dp=2), small, [4, 4]
    )
    # a2a and PyTorch's ring: the same rule (layernorm alone reruns no exchange)
    for cp_attention in ("a2a", "torch_ring"):
        wa = workload(seq_len=131072, global_batch=2, cp_attention=cp_attention)
        assert cp_layer_s(m, c, cal, wa, lay, small, [4, 4]) == cp_layer_s(
            m, c, cal, wa, layout(cp=4, dp=2), small, [4, 4]
        )


def test_ring_hides_behind_the_backward_attention_as_priced_not_an_assumed_ratio():
    """With the backward priced on its own (kernel tables, per-part speeds), the rings hide
    behind that figure: a backward 1.2x the forward (not FlashAttention's 2.5x) exposes more."""
    t, heads, d = 32768, 32, 128
    gather_s = 3 / 4 * (4 * t * heads * 2 * d * 2) / NVLINK_BYTES_PER_S + 3e-6 * 3
    hop_s = 3e-6 + t * heads * 2 * d * 4 / NVLINK_BYTES_PER_S
    accum_s = 3 * t * heads * (14 * d + 22 * 2 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    merge_s = 3 * t * heads * (42 * d + 4 * 2 * d) / HBM_BYTES_PER_S
    a, b = 4e-3, 4.8e-3  # forward, backward attention of the layer
    lt = LayerTime(
        gemm_s=0.0,
        attention_s=a,
        elementwise_s=0.0,
        overhead_s=0.0,
        model_flops=0.0,
        attention_backward_s=b,
    )
    assert lt.attention_bwd_s == b and _lt(a).attention_bwd_s == pytest.approx(2.5 * a)
    m, c, cal = dense_model(), cluster(num_gpus=8), calibration_for("hopper")
    w = workload(seq_len=131072, global_batch=2, cp_attention="torch_ring")
    exposed = cp_layer_s(m, c, cal, w, layout(cp=4, dp=2), lt, [4, 4])[0]
    fwd = gather_s - a / 4 + merge_s
    bwd = gather_s - b / 4 + accum_s + 2 * (hop_s - b / 4) + hop_s
    assert exposed == pytest.approx(fwd + bwd + SLOWDOWN * (a / 4 + 3 * b / 4), rel=1e-9)
    # the fused (TE p2p) ring: 3 forward and 6 backward steps against 3/4 of each pass
    wf = workload(seq_len=131072, global_batch=2)
    step_s = 3e-6 + t * 2 * 8 * d * 2 / NVLINK_BYTES_PER_S
    small = replace(lt, attention_s=1e-4, attention_backward_s=1.2e-4)
    fused = cp_layer_s(m, c, cal, wf, layout(cp=4, dp=2), small, [4, 4])[0]
    shown = (3 * step_s - 0.75e-4) + (6 * step_s - 0.75 * 1.2e-4)
    assert fused == pytest.approx(shown + SLOWDOWN * (9 * step_s - shown), rel=1e-9)


def test_torch_ring_never_cheaper_than_fused_ring():
    m, c = dense_model(), cluster(num_gpus=8)
    cal = calibration_for("hopper")
    for a in (1e-4, 4e-3, 0.4):
        fused = cp_layer_s(
            m, c, cal, workload(seq_len=131072, global_batch=2), layout(cp=4, dp=2), _lt(a), [4, 4]
        )[0]
        assert _torch_ring(a)[0] >= fused


def test_fa2_attention_runs_at_its_relative_speed_on_hopper_and_full_speed_on_ampere():
    from cost_models.compute import attention_efficiency

    hopper, ampere = calibration_for("hopper"), calibration_for("ampere")
    fa2 = workload(attention_kernel="fa2")
    assert attention_efficiency(hopper, workload()) == hopper.attention_efficiency == 0.35
    assert attention_efficiency(hopper, fa2) == pytest.approx(0.35 * 0.6, rel=1e-12)
    assert attention_efficiency(ampere, fa2) == ampere.attention_efficiency  # FA2 is Ampere's


def test_fa2_layer_attention_time_by_hand():
    from cost_models.compute import layer_time

    m = dense_model()  # 32 heads of 128
    w = workload(seq_len=8192, global_batch=8, attention_kernel="fa2")
    lt = layer_time(m, cluster().gpu, calibration_for("hopper"), w, layout(dp=8), is_moe=False)
    flops = 8192 * 8192 * 32 * 256  # causal half of 2 * s^2 * heads * d, QK^T and PV
    assert lt.attention_s == pytest.approx(flops / (989.4e12 * 0.35 * 0.6), rel=1e-12)


def _a2a(recompute: str = "none", span=(4, 4)):
    m, c = dense_model(), cluster(num_gpus=8)
    w = workload(seq_len=131072, global_batch=2, cp_attention="a2a")
    lay = layout(cp=4, dp=2, recompute=recompute)
    return cp_layer_s(m, c, calibration_for("hopper"), w, lay, _lt(0.4), list(span)), m, c


def test_a2a_exchanges_q_k_v_and_the_output_both_ways_exposed():
    """Transformer Engine's AttnFuncWithCPAndQKVOA2A: forward all-to-alls of Q, K, V and O,
    backward of dO, dQ, dK, dV, each the rank's own tensor (32,768 tokens of 32 query / 8 KV
    heads of 128), none hidden by the kernel, which needs them all."""
    from cost_models.comm import all_to_all_time_s

    (exposed, total), _m, c = _a2a()
    t, d = 32768, 128

    def one(heads: int) -> float:
        return all_to_all_time_s(t * heads * d * 2, [4, 4], c.tiers)

    q, kv = one(32), one(8)
    assert exposed == total == pytest.approx(2 * (2 * q + 2 * kv), rel=1e-12)
    assert kv == pytest.approx(q / 4, rel=0.05)  # GQA: K and V carry a quarter of Q's bytes
    (full, _), _m, _c = _a2a(recompute="full")  # the forward exchanges run again
    assert full == pytest.approx(3 * (2 * q + 2 * kv), rel=1e-12)


def test_a2a_needs_each_tp_ranks_heads_divisible_by_cp_and_takes_windows_and_sinks():
    from cost_models.rules import layout_violations

    c = cluster(num_gpus=16)
    oss = dense_model(attention_sinks=True, sliding_window=128, full_attention_every=2)
    a2a = workload(seq_len=8192, global_batch=8, cp_attention="a2a")
    ring = workload(seq_len=8192, global_batch=8)
    ok = layout(cp=4, dp=4)
    assert not layout_violations(oss, c, a2a, ok)  # 32 query and 8 KV heads over cp 4
    assert any("--cp-comm-type a2a" in v for v in layout_violations(oss, c, ring, ok))
    tp4 = layout(tp=4, cp=4)  # 2 KV heads per TP rank over cp 4
    (why,) = [v for v in layout_violations(oss, c, a2a, tp4) if "all-to-all" in v]
    assert "key / value heads (2)" in why
