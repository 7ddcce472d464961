"""Unfused attention (Workload.attention_kernel 'unfused'): BMM1 -> softmax (+ dropout) -> BMM2
with the seq x seq score matrix in HBM, as Megatron-LM ran before FlashAttention and Megatron-
Core / Transformer Engine run it under --attention-backend unfused. Priced on the roofline
(cost_models.compute.unfused_attention_times) and kept in memory (memory.unfused_score_tensors),
worked out by hand here."""

import pytest
from factories import H100, cluster, dense_model, layout, workload

import models_zoo
from cost_models import memory
from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import attention_core_flops, layer_attention, layer_time
from cost_models.rules import layout_violations
from planner import api

A100 = H100.model_copy(
    update={
        "id": "test-a100",
        "name": "A100 (test)",
        "generation": "ampere",
        "peak_bf16_tflops": 312.0,
        "peak_fp8_tflops": None,
        "hbm_bandwidth_gb_per_s": 2039,
    }
)


def _by_hand(gpu, cal, heads, seq, d, mb, dropout):
    """(forward, backward) of the six BMMs and the softmax / dropout passes."""
    elements = mb * heads * seq * seq
    flops_per_s = gpu.peak_bf16_tflops * 1e12 * cal.gemm_efficiency_bf16
    bytes_per_s = gpu.hbm_bandwidth_gb_per_s * 1e9 * cal.hbm_efficiency
    bmm = max(2 * elements * d / flops_per_s, 2 * elements / bytes_per_s)
    fwd = 2 * bmm + (3 + 5 * dropout) * elements / bytes_per_s
    bwd = 4 * bmm + (4 + 5 * dropout) * elements / bytes_per_s
    return fwd, bwd


@pytest.mark.parametrize("dropout", [False, True])
def test_layer_attention_by_hand_on_the_a100_compute_side(dropout):
    """A100 at head dim 128: 2 x 128 FLOPs per score element against 2 bytes, past the ridge at
    the A100's 0.71 GEMM ceiling and 0.85 of 2,039 GB/s, so each BMM is the full seq x seq GEMM at
    the ceiling (the causal mask saves it nothing)."""
    m = dense_model(hidden_dropout=dropout)  # 32 heads of 128
    cal = calibration_for("ampere")
    w = workload(seq_len=2048, global_batch=8, attention_kernel="unfused")
    lt = layer_time(m, A100, cal, w, layout(dp=8, micro_batch=1), is_moe=False)
    fwd, bwd = _by_hand(A100, cal, 32, 2048, 128, 1, dropout)
    elements = 32 * 2048 * 2048
    assert 2 * elements * 128 / (312e12 * 0.71) > 2 * elements / (2039e9 * 0.85)  # compute side
    assert (lt.attention_s, lt.attention_bwd_s) == (pytest.approx(fwd), pytest.approx(bwd))
    # the model FLOPs stay the causal count (MFU), not the unmasked work the BMMs do
    fused = w.model_copy(update={"attention_kernel": "fused"})
    assert (
        lt.model_flops
        == layer_time(m, A100, cal, fused, layout(dp=8, micro_batch=1), is_moe=False).model_flops
    )


def test_on_the_h100_the_bmms_are_bound_by_the_score_traffic():
    """H100: 989.4 x 0.68 TFLOP/s against 0.85 x 3,350 GB/s is a ridge of 236 FLOPs per byte, above
    the BMMs' 128 at head dim 128: each BMM takes the 2 bytes per score element it moves."""
    m, cal = dense_model(), calibration_for("hopper")
    w = workload(seq_len=4096, global_batch=8, attention_kernel="unfused")
    lay = layout(tp=2, dp=4, micro_batch=2)
    fwd, bwd, looks, _ = layer_attention(m, H100, cal, w, lay, None, is_moe=False)
    elements = 2 * 16 * 4096 * 4096  # micro-batch 2, 32 heads over TP 2
    score_s = 2 * elements / hbm_bytes_per_s(H100, cal)
    assert fwd == pytest.approx(2 * score_s + 3 * elements / hbm_bytes_per_s(H100, cal))
    assert bwd == pytest.approx(4 * score_s + 4 * elements / hbm_bytes_per_s(H100, cal))
    assert looks == ()  # no kernel table row for it
    fused = layer_attention(
        m, H100, cal, w.model_copy(update={"attention_kernel": "fused"}), lay, None, is_moe=False
    )
    assert fwd > 2 * fused[0]


def _h100_book():
    from cost_models.kernels import KernelBook
    from cost_models.specs import KernelTables
    from models_zoo.kernel_tables import BUILTIN_ROOT, read_kernel_dir

    folder = BUILTIN_ROOT / "h100-sxm-80gb"
    return KernelBook(KernelTables(**read_kernel_dir(folder, "test")))


@pytest.mark.parametrize("dropout", [False, True])
def test_the_h100_tables_price_it_from_megatrons_measured_kernels(dropout):
    """The shipped H100 folder's attention_unfused.csv (Megatron-LM's kernels measured on an H100,
    bench/make_unfused_rows.py) holds one 4,096-token sequence of 16 heads of 128 through the fused
    softmax kernel: 0.97859 ms forward, 2.57145 ms forward + backward. 64 heads (8 KV) over TP 4
    is that call, looked up as MHA (Megatron-Core repeats K and V to every head); dropout adds
    its 5 + 5 bytes per score element."""
    m = dense_model(
        hidden_size=8192, num_attention_heads=64, num_kv_heads=8, hidden_dropout=dropout
    )
    cal = calibration_for("hopper")
    w = workload(seq_len=4096, global_batch=16, attention_kernel="unfused")
    lay = layout(tp=4, dp=2, micro_batch=1)
    fwd, bwd, looks, _ = layer_attention(m, H100, cal, w, lay, _h100_book(), is_moe=False)
    elements = 16 * 4096 * 4096
    drop_s = 5 * elements / hbm_bytes_per_s(H100, cal) if dropout else 0.0
    assert looks == (("attention", "measured"),)
    assert fwd == pytest.approx(0.97859e-3 + drop_s)
    assert fwd + bwd == pytest.approx(2.57145e-3 + 2 * drop_s)
    # the measured kernels take 1.44x the roofline's time at this call: six traffic-bound
    # BMMs of 2 bytes per score element and the fused softmax's 3 + 4 (dropout alike in both)
    roof_fwd, roof_bwd, _, _ = layer_attention(m, H100, cal, w, lay, None, is_moe=False)
    roof_s = (6 * 2 + 3 + 4) * elements / hbm_bytes_per_s(H100, cal)
    assert roof_fwd + roof_bwd - 2 * drop_s == pytest.approx(roof_s)
    assert 2.57145e-3 / roof_s == pytest.approx(1.44, abs=0.01)


def test_past_4096_keys_megatron_core_falls_back_to_pytorchs_softmax():
    """At 8,192 keys Megatron-Core's FusedScaleMaskSoftmax runs PyTorch's softmax (its fused kernel
    takes up to 4,096): the roofline counts that fallback's 9 + 11 bytes per score element, and
    the H100 tables price the call from their `unfused_torch` row (the BMMs and the fallback
    measured at one sequence of 8 heads of 128: 4.87450 ms forward, 10.88872 ms in all)."""
    m = dense_model(num_attention_heads=32, num_kv_heads=8)
    cal = calibration_for("hopper")
    w = workload(seq_len=8192, global_batch=16, attention_kernel="unfused")
    lay = layout(tp=4, dp=2, micro_batch=1)
    elements = 8 * 8192 * 8192
    roof_fwd, roof_bwd, _, _ = layer_attention(m, H100, cal, w, lay, None, is_moe=False)
    bmm_s = 2 * elements / hbm_bytes_per_s(H100, cal)
    assert roof_fwd == pytest.approx(2 * bmm_s + 9 * elements / hbm_bytes_per_s(H100, cal))
    assert roof_bwd == pytest.approx(4 * bmm_s + 11 * elements / hbm_bytes_per_s(H100, cal))
    fwd, bwd, looks, _ = layer_attention(m, H100, cal, w, lay, _h100_book(), is_moe=False)
    assert looks == (("attention", "measured"),)
    assert (fwd, fwd + bwd) == (pytest.approx(4.87450e-3), pytest.approx(10.88872e-3))


@pytest.mark.parametrize(
    ("batch_heads", "seq", "fused"),
    [(16, 4096, True), (6, 4096, False), (16, 8192, False), (4, 64, False), (8, 64, True),
     (8, 16, False), (4, 4098, False)],
)  # fmt: skip
def test_which_softmax_megatron_core_runs(batch_heads, seq, fused):
    """is_kernel_available (core_v0.19.0): 16 < keys <= 4,096, keys % 4, and the matrices a
    multiple of the kernel's rows per block: 4 above 128 keys, 8 at 33-128 (two rows a warp)."""
    from cost_models.compute import megatron_fused_softmax

    assert megatron_fused_softmax(batch_heads, seq) is fused


def test_outside_the_measured_rows_the_roofline_prices_it():
    """Sequence 16,384 lies past the rows (the longest measured is 8,192): extrapolated, and the
    roofline's time."""
    m, cal = dense_model(hidden_size=2048, num_attention_heads=16), calibration_for("hopper")
    w = workload(seq_len=16384, global_batch=8, attention_kernel="unfused")
    lay = layout(tp=4, dp=2, micro_batch=1)
    fwd, bwd, looks, _ = layer_attention(m, H100, cal, w, lay, _h100_book(), is_moe=False)
    assert looks == (("attention", "extrapolated"),)
    assert (fwd, bwd) == layer_attention(m, H100, cal, w, lay, None, is_moe=False)[:2]


def test_the_estimate_names_the_look_up():
    """With the H100 tables (`kernels: builtin`) the estimate's kernel terms count the unfused
    attention look-up as it does the fused one."""
    from factories import with_builtin_tables

    c = with_builtin_tables(models_zoo.load_cluster("dgx-h100", 8))
    w = workload(seq_len=2048, global_batch=64, attention_kernel="unfused")
    m, lay = dense_model(hidden_size=2048, num_attention_heads=16), layout(dp=8, micro_batch=8)
    unfused = api.estimate(m, c, lay, w)
    fused = api.estimate(m, c, lay, w.model_copy(update={"attention_kernel": "fused"}))
    assert unfused.kernels["terms"]["attention"]["measured"] > 0
    assert unfused.step_time_s > fused.step_time_s


def test_a_window_is_a_mask_over_the_full_score_matrix():
    full, windowed = dense_model(), dense_model(sliding_window=1024, full_attention_every=2)
    cal, lay = calibration_for("hopper"), layout(dp=8)
    w = workload(seq_len=8192, global_batch=8, attention_kernel="unfused")
    fwd, bwd, _, flops = layer_attention(windowed, H100, cal, w, lay, None, is_moe=False)
    ref_fwd, ref_bwd, _, ref_flops = layer_attention(full, H100, cal, w, lay, None, is_moe=False)
    assert (fwd, bwd) == (ref_fwd, ref_bwd)
    assert flops == pytest.approx(
        0.5 * ref_flops + 0.5 * attention_core_flops(windowed, w, lay, 1024)
    )


def test_no_context_parallelism():
    m, c = dense_model(), cluster()
    w = workload(seq_len=8192, global_batch=8, attention_kernel="unfused")
    problems = layout_violations(m, c, w, layout(cp=2, dp=4))
    assert any("cp (2) > 1 with attention_kernel unfused" in p for p in problems), problems
    assert not any("unfused" in p for p in layout_violations(m, c, w, layout(dp=8)))


@pytest.mark.parametrize("dropout", [False, True])
def test_memory_keeps_the_score_matrix_korthikanti_5as_over_h(dropout):
    """Korthikanti et al. 2022 sec. 4.1: 5as^2b bytes per layer with attention dropout (softmax
    output 2, mask 1, dropped probabilities 2), the softmax output alone (2as^2b) without; per
    token of one TP rank that is bytes x heads / tp x seq. Selective recompute of core_attn drops
    them; FlashAttention's fp32 row statistics are not kept."""
    m = dense_model(hidden_dropout=dropout)
    w = workload(seq_len=4096, global_batch=8, attention_kernel="unfused")
    lay = layout(tp=4, dp=2, micro_batch=1)
    kept = memory.layer_activation_tensors(m, w, lay, is_moe=False, recompute="none")
    names = {t.name: t for t in kept}
    assert "softmax_lse" not in names
    score = sum(t.bytes_per_token for t in memory.unfused_score_tensors(m, w, lay))
    assert score == (5 if dropout else 2) * 32 / 4 * 4096
    assert names["softmax_out"].elements == 32 / 4 * 4096
    fused = memory.layer_activation_tensors(
        m, w.model_copy(update={"attention_kernel": "fused"}), lay, is_moe=False, recompute="none"
    )
    lse = 32 / 4 * 4  # fp32 per head
    assert sum(t.bytes_per_token for t in kept) == pytest.approx(
        sum(t.bytes_per_token for t in fused) - lse + score
    )
    selective = memory.layer_activation_tensors(
        m, w, lay.model_copy(update={"recompute": "selective"}), is_moe=False, recompute="selective"
    )
    assert not {"softmax_out", "softmax_lse"} & {t.name for t in selective}


def test_slower_than_fused_end_to_end_and_the_gap_shrinks_with_width():
    """heads x seq / hidden^2 sets the score work against the GEMMs: the unfused penalty of a
    narrow model is larger than of a wide one at the same sequence length."""
    c = models_zoo.load_cluster("dgx-a100", 8)
    lay = api.layout_with_defaults({"tp": 1, "pp": 1, "dp": 8})
    ratios = []
    for hidden, heads in ((2048, 16), (8192, 64)):
        m = dense_model(hidden_size=hidden, num_attention_heads=heads, num_kv_heads=heads,
                        ffn_hidden_size=4 * hidden, num_layers=4)  # fmt: skip
        w = workload(seq_len=2048, global_batch=64)
        fused = api.estimate(m, c, lay, w).step_time_s
        unfused = api.estimate(m, c, lay, w.model_copy(update={"attention_kernel": "unfused"}))
        ratios.append(unfused.step_time_s / fused)
    assert ratios[0] > ratios[1] > 1.0


def test_a_record_states_it_and_validate_prices_it():
    """`settings: {attention_kernel: unfused}` in a published-runs record (how Megatron-LM runs
    before FlashAttention, 2022-12, would state it); CP > 1 with it is one line, not a score."""
    from factories import tiny_record

    from planner.validate import RunRecord, record_inputs, validate_record

    stated = tiny_record({"attention_kernel": "unfused"})
    checked = RunRecord.model_validate(stated).model_dump()
    assert record_inputs(checked)[2].attention_kernel == "unfused"
    unfused, fused = validate_record(stated), validate_record(tiny_record())
    # the 2-layer 256-wide model is host-bound (its kernels hide under the launch floor), but it
    # keeps 4 heads x 1,024 scores x 2 bytes per token per layer in place of 4 fp32
    # statistics: 16 MiB more, less 32 KiB
    extra_gib = 2 * 1024 * 4 * 1024 * 2 / 2**30
    acts = [r.estimate.stage_memory[0].activations_gib for r in (unfused, fused)]
    gained = acts[0] - acts[1]  # less FlashAttention's fp32 row statistics
    assert gained == pytest.approx(extra_gib - 2 * 1024 * 4 * 4 / 2**30, rel=1e-6)
    cp = validate_record(tiny_record({"attention_kernel": "unfused"}, layout={"cp": 2, "dp": 4}))
    assert cp.estimate is None and "cp (2) > 1 with attention_kernel unfused" in cp.error
