"""Kernel tables as the compute model's data (issue 32): the look-up rule on hand-built tables,
and the Pricer pricing a layer's GEMM passes and attention from them, on the curve where the
table does not reach."""

from __future__ import annotations

import math

import pytest
from factories import cluster, dense_model, layout, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import attention_core_flops, attention_gemms, layer_time, mlp_gemms
from cost_models.kernels import (
    EXTRAPOLATED,
    INTERPOLATED,
    MEASURED,
    KernelBook,
    attention_fwd_flops,
    table_residuals,
)
from cost_models.pricer import Pricer
from cost_models.specs import KernelTables


def _book(**rows) -> KernelBook:
    return KernelBook(KernelTables(source="hand-built", **rows))


def test_exact_hit_returns_the_measured_time_and_duplicates_average():
    book = _book(
        gemm=[
            (1024, 1024, 1024, "bf16", "TN", 1.0),
            (1024, 1024, 1024, "bf16", "TN", 3.0),
            (4096, 4096, 4096, "bf16", "TN", 40.0),
        ]
    )
    seconds, status = book.gemm_s(1024, 1024, 1024, "bf16", "TN")
    assert status == MEASURED
    # the two rows' log mean: sqrt(1 * 3) ms
    assert seconds == pytest.approx(math.sqrt(3.0) * 1e-3, rel=1e-12)


def test_between_two_shapes_the_time_per_flop_is_their_log_mean():
    book = _book(
        gemm=[(1024, 1024, 1024, "bf16", "NN", 1.0), (4096, 4096, 4096, "bf16", "NN", 40.0)]
    )
    seconds, status = book.gemm_s(2048, 2048, 2048, "bf16", "NN")
    assert status == INTERPOLATED
    per_flop_a = 1e-3 / (2 * 1024**3)
    per_flop_b = 40e-3 / (2 * 4096**3)
    # equidistant in log-shape space from both: equal weights on log(seconds per FLOP)
    expected = math.sqrt(per_flop_a * per_flop_b) * 2 * 2048**3
    assert seconds == pytest.approx(expected, rel=1e-12)


def test_outside_the_tables_box_is_extrapolated_and_other_layouts_are_absent():
    book = _book(
        gemm=[(1024, 1024, 1024, "bf16", "TN", 1.0), (4096, 4096, 4096, "bf16", "TN", 40.0)]
    )
    assert book.gemm_s(8192, 2048, 2048, "bf16", "TN") == (None, EXTRAPOLATED)
    assert book.gemm_s(2048, 2048, 2048, "bf16", "NT") == (None, EXTRAPOLATED)
    # fp8 rows measured as TN stand for every layout (Hopper runs fp8 GEMMs TN only)
    fp8 = _book(gemm=[(1024, 1024, 1024, "fp8", "TN", 0.5)])
    assert fp8.gemm_s(1024, 1024, 1024, "fp8", "NT") == (pytest.approx(0.5e-3), MEASURED)


def test_attention_seconds_per_flop_split_forward_and_backward():
    row = (2, 8192, 8, 2, 128, 128, True, 0, "fused", 10.0, 3.0)
    book = _book(attention=[row])
    found, status = book.attention_s_per_flop(
        2, 8192, 8, 2, 128, 128, causal=True, window=0, kernel="fused"
    )
    flops = attention_fwd_flops(2, 8192, 8, 128, 128, True)
    assert status == MEASURED
    assert found == (pytest.approx(10e-3 / flops), pytest.approx(3e-3 / flops))
    assert book.attention_s_per_flop(
        2, 8192, 8, 2, 128, 128, causal=True, window=0, kernel="fa2"
    ) == (None, EXTRAPOLATED)


def _table_for(model, wl, lo, ms_per_pass: tuple[float, float, float]) -> KernelTables:
    """Rows for exactly the layer's GEMMs (every pass at a fixed time) and its attention call."""
    t = lo.micro_batch * wl.seq_len / lo.cp
    gemms = attention_gemms(model, t, lo.tp) + mlp_gemms(model, t, model.ffn_hidden_size, lo.tp)
    rows = []
    for g in gemms:
        for (layout_, m, n, k), ms in zip(
            (("TN", g.m, g.n, g.k), ("NN", g.m, g.k, g.n), ("NT", g.n, g.k, g.m)),
            ms_per_pass,
            strict=True,
        ):
            rows.append((m, n, k, "bf16", layout_, ms))
    heads, kv = model.num_attention_heads // lo.tp, max(model.kv_heads, lo.tp) // lo.tp
    d = model.attn_head_dim
    attn = (lo.micro_batch, wl.seq_len, heads, kv, d, d, True, 0, "fused", 7.0, 2.0)
    return KernelTables(source="hand-built", gemm=rows, attention=[attn]), len(gemms)


def test_the_pricer_takes_every_pass_from_the_table():
    model, wl, lo = dense_model(), workload(), layout(tp=2, pp=1, dp=32)
    tables, n_gemms = _table_for(model, wl, lo, (1.0, 2.0, 3.0))
    cl = cluster().model_copy(update={"kernels": tables})
    t = Pricer(model, cl, wl).layer_times(lo).layers.dense
    assert t.gemm_s == pytest.approx(n_gemms * 1e-3)
    assert t.gemm_backward_s == pytest.approx(n_gemms * (2e-3 + 3e-3))
    # attention: this rank's FLOPs at the measured seconds per FLOP (here: the whole call)
    flops = attention_core_flops(model, wl, lo)
    d = model.attn_head_dim
    assert flops == pytest.approx(attention_fwd_flops(1, wl.seq_len, 16, d, d, True))
    assert t.attention_s == pytest.approx(2e-3)
    assert t.attention_backward_s == pytest.approx(5e-3)
    assert t.backward_s == pytest.approx(
        5 * n_gemms * 1e-3 + 5e-3 + 2 * t.elementwise_s + t.overhead_s
    )
    est = Pricer(model, cl, wl).estimate(lo)
    assert est.kernels["table"] == "hand-built"
    assert est.kernels["terms"]["attention"] == {MEASURED: 1, INTERPOLATED: 0, EXTRAPOLATED: 0}
    # the LM head's GEMMs are not in this table: priced on the curve, and said so
    assert est.kernels["terms"]["gemm"][EXTRAPOLATED] == 3


def test_shapes_outside_the_table_run_on_the_curve_exactly():
    model, wl, lo = dense_model(), workload(), layout(tp=1, pp=1, dp=64)
    far = KernelTables(source="far", gemm=[(16, 16, 16, "bf16", "TN", 1.0)])
    cl = cluster()
    plain = layer_time(model, cl.gpu, calibration_for("hopper"), wl, lo, is_moe=False)
    t = Pricer(model, cl.model_copy(update={"kernels": far}), wl).layer_times(lo).layers.dense
    assert t.gemm_s == pytest.approx(plain.gemm_s, rel=1e-12)
    assert t.gemm_backward_s == pytest.approx(2 * plain.gemm_s, rel=1e-12)
    assert t.attention_s == plain.attention_s and t.attention_backward_s is None
    # no memory-bound rows either: norms, adds and activation on the HBM constant
    assert t.elementwise_s == pytest.approx(plain.elementwise_s, rel=1e-12)
    assert set(t.lookups) == {
        ("gemm", EXTRAPOLATED), ("attention", EXTRAPOLATED), ("memory_bound", EXTRAPOLATED)
    }  # fmt: skip


def test_memory_bound_ops_from_the_table_and_held_below_its_smallest_size():
    # one RMSNorm row: 1 GB in 1 ms (1,000 GB/s); two sizes: 2 GB at 1,000 GB/s, 4 GB at 500
    book = _book(memory_bound=[("rmsnorm", 1e9, 1.0), ("add", 2e9, 2.0), ("add", 4e9, 8.0)])
    assert book.memory_bound_s("rmsnorm", 1e9) == (pytest.approx(1e-3), MEASURED)
    # below and above the measured sizes: the nearest row's bandwidth, said to be extrapolated
    assert book.memory_bound_s("rmsnorm", 1e6) == (pytest.approx(1e-6), EXTRAPOLATED)
    assert book.memory_bound_s("add", 1e8) == (pytest.approx(1e-4), EXTRAPOLATED)
    assert book.memory_bound_s("add", 8e9) == (pytest.approx(16e-3), EXTRAPOLATED)
    assert book.memory_bound_s("swiglu", 1e9) == (None, EXTRAPOLATED)


def test_rows_below_hbm_streaming_size_never_price_a_larger_call():
    # a toy sweep's 1 MB row (served from L2) says nothing about a 1 GB call: the HBM figure
    book = _book(memory_bound=[("rmsnorm", 1e6, 1e-3)])
    assert book.memory_bound_s("rmsnorm", 1e9) == (None, EXTRAPOLATED)
    assert book.memory_bound_s("rmsnorm", 1e5) == (pytest.approx(1e-7), EXTRAPOLATED)  # 1 TB/s held below


def test_the_layer_prices_norms_adds_and_activation_from_the_table():
    # hand count for dense_model (RMSNorm, gated SwiGLU), tp 1, per forward: norm calls
    # 2 x (2 h t) elements, add calls 2 x (3 h t), SwiGLU 1 x (3 ffn t); rotary on HBM (no copy
    # row here). Fused (Transformer Engine / torch.compile): SwiGLU is one kernel reading gate
    # and up once and writing once, an add's access -> the add row; eager silu(x) * y -> the
    # table's swiglu row (what it measured), its 5 elements per output element at that time.
    model, lo = dense_model(), layout(tp=1, pp=1, dp=64)
    h, ffn = model.hidden_size, model.ffn_hidden_size
    rows = [("rmsnorm", 1e9, 1.0), ("add", 1e9, 0.5), ("swiglu", 1e9, 2.0)]  # 1, 2, 0.5 TB/s
    tables = KernelTables(source="hand-built", memory_bound=rows)
    cl = cluster()
    hbm = hbm_bytes_per_s(cl.gpu, calibration_for("hopper"))
    for fused, act_bytes_per_s in ((True, 2e12), (False, 0.5e12)):
        wl = workload(fused_elementwise=fused)
        t = lo.micro_batch * wl.seq_len
        plain = layer_time(model, cl.gpu, calibration_for("hopper"), wl, lo, is_moe=False)
        pricer = Pricer(model, cl.model_copy(update={"kernels": tables}), wl)
        got = pricer.layer_times(lo).layers.dense
        norm, act = (4 * h, 3 * ffn) if fused else (0, 5 * ffn)  # eager norms: no row
        rest = plain.elementwise_s - (norm + 6 * h + act) * t * 2 / hbm  # rotary (+ eager norms)
        table = (norm * t * 2) / 1e12 + (6 * h * t * 2) / 2e12
        table += (3 * ffn * t * 2) / act_bytes_per_s
        assert got.elementwise_s == pytest.approx(rest + table, rel=1e-9)
        assert ("memory_bound", EXTRAPOLATED) in got.lookups  # 1 GB rows: every call is smaller


def test_fused_rotary_runs_at_the_copy_row_eager_rotary_on_hbm():
    # rotary over q and k heads: (32 + 8) heads x 128 dims per token at tp 1, read + written
    # once by a fused kernel (2 elements each): the copy row's access
    model, lo = dense_model(), layout(tp=1, pp=1, dp=64)
    rot = (32 + 8) * 128
    tables = KernelTables(source="hand-built", memory_bound=[("copy", 1e9, 0.25)])  # 4 TB/s
    cl = cluster()
    hbm = hbm_bytes_per_s(cl.gpu, calibration_for("hopper"))
    for fused in (True, False):
        wl = workload(fused_elementwise=fused)
        t = lo.micro_batch * wl.seq_len
        plain = layer_time(model, cl.gpu, calibration_for("hopper"), wl, lo, is_moe=False)
        got = Pricer(model, cl.model_copy(update={"kernels": tables}), wl).layer_times(lo)
        got_s = got.layers.dense.elementwise_s
        if fused:
            expected = plain.elementwise_s - 2 * rot * t * 2 / hbm + 2 * rot * t * 2 / 4e12
            assert got_s == pytest.approx(expected, rel=1e-9)
        else:
            assert got_s == plain.elementwise_s


def test_without_tables_nothing_is_looked_up():
    model, wl, lo = dense_model(), workload(), layout(tp=1, pp=1, dp=64)
    pricer = Pricer(model, cluster(), wl)
    t = pricer.layer_times(lo).layers.dense
    assert pricer.book is None and t.lookups == () and t.gemm_backward_s is None
    assert pricer.estimate(lo).kernels is None


def test_sustained_rate_is_reported_not_applied_by_default():
    # training steps held burst clocks on the H100 (single-gpu-steps): the rate alone caps nothing
    rows = dict(gemm=[(4096, 4096, 4096, "bf16", "TN", 0.1), (4096, 4096, 4096, "fp8", "TN", 0.1)])
    book = KernelBook(
        KernelTables(source="t", sustained_bf16_tflops=500, sustained_fp8_tflops=500, **rows)
    )
    assert book.gemm_s(4096, 4096, 4096, "bf16", "TN")[0] == pytest.approx(0.1e-3, rel=1e-12)
    assert book.gemm_s(4096, 4096, 4096, "fp8", "TN")[0] == pytest.approx(0.1e-3, rel=1e-12)


def test_sustained_rate_caps_burst_bf16_gemms_only():
    # 4096^3 bf16 in 0.1 ms = 1,374 TFLOP/s burst; a 687.2 TFLOP/s sustained cap doubles it.
    flops = 2.0 * 4096**3
    rows = dict(
        gemm=[
            (4096, 4096, 4096, "bf16", "TN", 0.1),
            (4096, 4096, 4096, "fp8", "TN", 0.1),
            (256, 256, 256, "bf16", "TN", 0.01),  # 3.4 TFLOP/s: below the cap, untouched
        ],
        grouped_gemm=[(8, 512, 4096, 4096, "bf16", 0.1)],
    )
    cap_tflops = flops / 0.2e-3 / 1e12
    capped = dict(sustained_bf16_tflops=cap_tflops, apply_sustained_cap=True)
    book = KernelBook(KernelTables(source="t", **capped, **rows))
    assert book.gemm_s(4096, 4096, 4096, "bf16", "TN")[0] == pytest.approx(0.2e-3, rel=1e-12)
    assert book.gemm_s(4096, 4096, 4096, "fp8", "TN")[0] == pytest.approx(0.1e-3, rel=1e-12)
    assert book.gemm_s(256, 256, 256, "bf16", "TN")[0] == pytest.approx(0.01e-3, rel=1e-12)
    grouped = 2.0 * 8 * 512 * 4096 * 4096  # 2,749 TFLOP/s in 0.1 ms -> capped
    assert book.grouped_gemm_s(8, 512, 4096, 4096, "bf16")[0] == pytest.approx(
        grouped / (cap_tflops * 1e12), rel=1e-12
    )
    # the rows themselves are still reproduced as measured (the cap is a separate step)
    res = table_residuals(KernelTables(source="t", **capped, **rows))
    assert res["gemm"]["max_residual_pct"] == pytest.approx(0.0, abs=1e-9)


def test_tp_overlap_partner_gemms_come_from_the_table():
    from cost_models.stage import tp_partner_gemm_s

    model, wl = dense_model(), workload()
    lo = layout(tp=2, pp=1, dp=32, sequence_parallel=True, tp_comm_overlap=True)
    tables, _ = _table_for(model, wl, lo, (1.0, 2.0, 3.0))  # every forward GEMM 1 ms
    cl = cluster().model_copy(update={"kernels": tables})
    p = Pricer(model, cl, wl)
    lt = p.layer_times(lo).layers.dense
    partners = tp_partner_gemm_s(model, cl, p.cal, wl, lo, lt, 2, p.book)
    # QKV, proj, FC1 (gate + up as one GEMM), FC2: 1 ms each
    assert partners == pytest.approx([1e-3] * 4)


def test_sustained_fp8_rate_caps_fp8_rows_when_measured():
    flops = 2.0 * 4096**3
    rows = dict(gemm=[(4096, 4096, 4096, "fp8", "TN", 0.1), (4096, 4096, 4096, "bf16", "TN", 0.1)])
    cap = flops / 0.25e-3 / 1e12  # 549.8 TFLOP/s: the 0.1 ms burst is held to 0.25 ms
    capped = dict(sustained_fp8_tflops=cap, apply_sustained_cap=True)
    book = KernelBook(KernelTables(source="t", **capped, **rows))
    assert book.gemm_s(4096, 4096, 4096, "fp8", "TN")[0] == pytest.approx(0.25e-3, rel=1e-12)
    # any layout of an fp8 GEMM is its TN row, capped the same
    assert book.gemm_s(4096, 4096, 4096, "fp8", "NN")[0] == pytest.approx(0.25e-3, rel=1e-12)
    assert book.gemm_s(4096, 4096, 4096, "bf16", "TN")[0] == pytest.approx(0.1e-3, rel=1e-12)


def _attention_row(batch, seq, heads, kv, d, causal, ms, fwd_ms):
    return (batch, seq, heads, kv, d, d, causal, 0, "fused", ms, fwd_ms)


def test_attention_tile_work_by_hand():
    """Whole 128 x 128 tiles plus the per-query-tile overhead, per block of attended pairs."""
    from cost_models.kernels import attention_tile_work, tile_rate_ratio

    # causal 256 tokens: 3 tiles (the diagonal two computed whole) over 2 blocks of pairs
    assert attention_tile_work(256, 256, True, 0.0) == pytest.approx(1.5)
    assert attention_tile_work(256, 256, True, 1.0) == pytest.approx((3 + 2) / 2)
    # non-causal 256 queries over 128 keys: 2 tiles, 2 query tiles, 2 blocks
    assert attention_tile_work(256, 128, False, 1.0) == pytest.approx((2 + 2) / 2)
    assert attention_tile_work(300, 300, False, 0.0) == pytest.approx(9 / (300 * 300 / 128**2))
    call = (4096, 2048, False)
    assert tile_rate_ratio(call, call, "backward") == pytest.approx(1.0)


def test_tile_model_carries_the_shipped_tables_causal_rows_to_shorter_calls():
    """On the shipped H100 table's causal cuDNN rows, each head shape's 2K call predicted from its
    8K call (the factor of a CP 4 ring's diagonal): the tile model within 10 % at the median,
    where the full call's rate, the rule before, is 10 % fast forward and 25 % backward."""
    import statistics
    from pathlib import Path

    from cost_models.kernels import attention_row_rate, tile_rate_ratio
    from models_zoo.kernel_tables import attention_rows

    path = Path(__file__).resolve().parents[3] / "models_zoo/kernels/h100-sxm-80gb/attention.csv"
    rates: dict[tuple, dict[int, tuple[float, float]]] = {}
    for row in attention_rows(path):
        _b, s, h, kv, dqk, dv, causal, window, kernel, _ms, _fwd_ms = row
        if kernel == "fused" and causal and not window:
            total, fwd = attention_row_rate(row)
            rates.setdefault((h, kv, dqk, dv), {})[int(s)] = (fwd, total - fwd)
    pairs_ = [v for v in rates.values() if 2048 in v and 8192 in v]
    assert len(pairs_) >= 8
    for i, direction in enumerate(("forward", "backward")):
        scale = tile_rate_ratio((2048, 2048, True), (8192, 8192, True), direction)
        tiles = [v[8192][i] * scale / v[2048][i] - 1 for v in pairs_]
        flat = [v[8192][i] / v[2048][i] - 1 for v in pairs_]
        assert abs(statistics.median(tiles)) < 0.10, (direction, tiles)
        assert statistics.median(flat) < -0.08, (direction, flat)


def test_cp_ring_steps_are_looked_up_at_the_calls_the_ring_runs():
    """CP 2 (compute.cp_step_rate): the diagonal step at the causal call of s / 2 tokens, the
    other at the non-causal call of s / 2 carried to the (s / 2, s / 4) lower-triangle call the
    slowest rank runs (kernels.tile_rate_ratio); each half of the rank's FLOPs at its own rate.
    A step the tables do not hold takes the full call's rate carried to its call."""
    from cost_models.compute import CP_STEP_TERM, attention_times
    from cost_models.kernels import tile_rate_ratio

    model, wl = dense_model(), workload(seq_len=8192)
    lo = layout(tp=1, pp=1, cp=2, dp=32)
    heads, kv, d = 32, 8, model.attn_head_dim
    full = _attention_row(1, 8192, heads, kv, d, True, 20.0, 6.0)
    diag = _attention_row(1, 4096, heads, kv, d, True, 8.0, 2.0)
    off = _attention_row(1, 4096, heads, kv, d, False, 9.0, 3.0)
    hopper, gpu = calibration_for("hopper"), cluster().gpu
    flops = attention_core_flops(model, wl, lo)

    def rate(row):
        per = attention_fwd_flops(row[0], row[1], row[2], d, d, row[6])
        return row[9] * 1e-3 / per, row[10] * 1e-3 / per

    lower, square, whole = (4096, 2048, False), (4096, 4096, False), (8192, 8192, True)
    both = KernelBook(KernelTables(source="t", attention=[full, diag, off]))
    fwd, bwd, looks = attention_times(model, gpu, hopper, wl, lo, both)
    (d_tot, d_fwd), (o_tot, o_fwd) = rate(diag), rate(off)
    o_f = o_fwd * tile_rate_ratio(lower, square, "forward")
    o_b = (o_tot - o_fwd) * tile_rate_ratio(lower, square, "backward")
    assert o_f > o_fwd and o_b > o_tot - o_fwd  # more query tiles per key: slower per FLOP
    assert fwd == pytest.approx(flops * (0.5 * d_fwd + 0.5 * o_f))
    assert bwd == pytest.approx(flops * (0.5 * (d_tot - d_fwd) + 0.5 * o_b))
    assert looks == (("attention", MEASURED), (CP_STEP_TERM, MEASURED), (CP_STEP_TERM, MEASURED))

    # causal rows only (the shipped Hopper tables): the off-diagonal step from the full call
    causal = KernelBook(KernelTables(source="t", attention=[full, diag]))
    fwd, bwd, looks = attention_times(model, gpu, hopper, wl, lo, causal)
    f_tot, f_fwd = rate(full)
    o_f = f_fwd * tile_rate_ratio(lower, whole, "forward")
    o_b = (f_tot - f_fwd) * tile_rate_ratio(lower, whole, "backward")
    assert fwd == pytest.approx(flops * (0.5 * d_fwd + 0.5 * o_f))
    assert bwd == pytest.approx(flops * (0.5 * (d_tot - d_fwd) + 0.5 * o_b))
    assert looks[1:] == ((CP_STEP_TERM, MEASURED), (CP_STEP_TERM, EXTRAPOLATED))

    # the full call only: the diagonal too is carried from it, and runs slower per FLOP than
    # the full call (half the tokens: each query tile's fixed work over fewer keys)
    only_full = KernelBook(KernelTables(source="t", attention=[full]))
    fwd, _bwd, looks = attention_times(model, gpu, hopper, wl, lo, only_full)
    d_f = f_fwd * tile_rate_ratio((4096, 4096, True), whole, "forward")
    assert d_f > f_fwd
    assert fwd == pytest.approx(flops * (0.5 * d_f + 0.5 * o_f))
    assert looks[1:] == ((CP_STEP_TERM, EXTRAPOLATED), (CP_STEP_TERM, EXTRAPOLATED))

    # the layer's own call outside the tables (only the step rows): the curve, as without CP,
    # and no step look-up reported (the shape recorder still sees them: kernel_shapes)
    steps_only = KernelBook(KernelTables(source="t", attention=[diag, off]))
    plain = attention_times(model, gpu, hopper, wl, lo, None)
    fwd, bwd, looks = attention_times(model, gpu, hopper, wl, lo, steps_only)
    assert (fwd, bwd) == plain[:2]
    assert looks == (("attention", EXTRAPOLATED),)

    # CP 1: the one full-sequence call, as before
    one = layout(tp=1, pp=1, cp=1, dp=64)
    fwd, _bwd, looks = attention_times(model, gpu, hopper, wl, one, both)
    assert fwd == pytest.approx(attention_core_flops(model, wl, one) * f_fwd)
    assert looks == (("attention", MEASURED),)
