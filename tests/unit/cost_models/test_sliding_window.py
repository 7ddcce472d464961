"""Sliding-window attention priced from the model config (issue 32, item 5): FLOPs of a causal
window counted by hand, the layer pattern, the kernel table's measured saving, memory, the
context-parallel rule and the report."""

from __future__ import annotations

import csv

import pytest
from conftest import SHARED
from factories import H100, cluster, dense_model, moe_model, workload

from cost_models import estimate
from cost_models.calibration import calibration_for_cluster
from cost_models.compute import (
    ATTENTION_BACKWARD,
    attention_core_flops,
    attention_times,
    effective_window,
    layer_attention,
    model_flops_per_token,
    rotary_heads,
    windowed_layers,
    windowed_share,
)
from cost_models.kernels import (
    MEASURED,
    WINDOW_QUERY_TILE_OVERHEAD,
    KernelBook,
    attended_keys,
    window_tile_counts,
    window_tile_ratio,
)
from cost_models.memory import layer_activation_bytes
from cost_models.rules import layout_violations
from cost_models.specs import KernelTables, Layout
from models_zoo.kernel_tables import read_kernel_files

WINDOW_CSV = SHARED / "data" / "kernels" / "h100-sxm-80gb" / "attention_window.csv"
CAL = calibration_for_cluster(cluster())


def test_windowed_causal_flops_by_hand():
    # s = 8 tokens, window W = 3: query i (0-based) sees min(i + 1, 3) keys, 1 + 2 + 3 * 6 = 21
    # pairs; the continuous count s W - W^2 / 2 = 19.5 (the causal convention s^2 / 2 = 32 at
    # W = s) is the discrete one less W / 2.
    assert attended_keys(8, 3) * 8 == 19.5
    assert sum(min(i + 1, 3) for i in range(8)) - 3 / 2 == 19.5
    assert attended_keys(8, 0) * 8 == 32 == attended_keys(8, 8) * 8 == attended_keys(8, 64) * 8
    # one layer: b 1, s 8, 2 heads of 4 dims: 2 FLOPs x pairs x heads x (d_qk + d_v)
    m = dense_model(num_layers=2, hidden_size=8, num_attention_heads=2, num_kv_heads=1,
                    ffn_hidden_size=16, vocab_size=None, sliding_window=3)
    w = workload(seq_len=8, global_batch=1)
    assert attention_core_flops(m, w, Layout(), window=3) == 2 * 19.5 * 2 * (4 + 4) == 624
    assert attention_core_flops(m, w, Layout()) == 2 * 32 * 2 * (4 + 4) == 1024
    # TP splits the heads, CP the queries
    assert attention_core_flops(m, w, Layout(tp=2, cp=2), window=3) == 624 / 4


def test_model_flops_count_the_window_on_the_windowed_layers_only():
    full = dense_model()
    alt = dense_model(sliding_window=1024, full_attention_every=2)  # gpt-oss / Gemma 2 pattern
    s, heads, d = 8192, 32, 128
    scores = s * heads * 2 * d  # forward score FLOPs per token of a causal layer (2 s/2 h 2d)
    ratio = (1024 - 1024**2 / (2 * s)) / (s / 2)
    saved = 16 * scores * (1 - ratio)
    assert model_flops_per_token(full, s) - model_flops_per_token(alt, s) == pytest.approx(saved)
    # a window wider than the sequence is causal attention
    assert model_flops_per_token(dense_model(sliding_window=8192), s) == model_flops_per_token(
        full, s
    )


@pytest.mark.parametrize(
    ("every", "layers", "full"),
    [
        (None, 32, []),  # Mistral v0.1, Phi-3: every layer windowed
        (2, 36, list(range(1, 36, 2))),  # gpt-oss, Gemma 2: odd layers full
        (6, 62, [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]),  # Gemma 3 27B: 5 local, 1 global
    ],
)
def test_layer_pattern(every, layers, full):
    m = dense_model(num_layers=layers, sliding_window=1024, full_attention_every=every)
    assert windowed_layers(m) == tuple(i for i in range(layers) if i not in full)


def test_windowed_share_per_layer_kind():
    # MoE model, layer 0 dense, layers 1..15 MoE; layers 1, 3, ..., 15 full (N = 2)
    m = moe_model(sliding_window=512, full_attention_every=2)
    w = workload(seq_len=4096)
    assert windowed_share(m, w, is_moe=False) == 1.0  # layer 0 is windowed
    assert windowed_share(m, w, is_moe=True) == 7 / 15  # layers 2, 4, ..., 14
    assert windowed_share(m, workload(seq_len=512), is_moe=True) == 0.0  # window spans it
    assert effective_window(m, workload(seq_len=512)) == 0


def test_window_tile_counts_by_hand():
    # 4K tokens, 128-token tiles: 32 query tiles; causal 1 + 2 + ... + 32 = 528 key tiles; a
    # 128 window touches its own tile and the one before (tile 0: itself): 1 + 31 * 2 = 63
    assert window_tile_counts(4096, 128) == (63, 528, 32)
    # a 1,024 window: query tile i sees key tiles from max(0, i*128 - 1023) // 128 = i - 8 (i >= 8)
    w, c, n = window_tile_counts(4096, 1024)
    assert (c, n) == (528, 32) and w == sum(i + 1 for i in range(8)) + 24 * 9
    x_f, x_b = WINDOW_QUERY_TILE_OVERHEAD["forward"], WINDOW_QUERY_TILE_OVERHEAD["backward"]
    assert window_tile_ratio(4096, 128) == pytest.approx((63 + 32 * x_f) / (528 + 32 * x_f))
    assert window_tile_ratio(4096, 128, "backward") == pytest.approx(
        (63 + 32 * x_b) / (528 + 32 * x_b)
    )
    assert window_tile_ratio(4096, 4096) == window_tile_ratio(4096, 0) == 1.0


def test_tile_model_reproduces_the_measured_window_rows_better_than_flops():
    """Every window row of the shipped H100 table (FlexAttention): the tile model within 15 %,
    the FLOP ratio (what the curve used before) off by far more at small windows."""
    rows = list(csv.DictReader(WINDOW_CSV.open()))
    full = {(r["batch"], r["seq"]): r for r in rows if not r["window"]}
    tile_errs, flop_errs = [], []
    for r in (r for r in rows if r["window"]):
        f = full[(r["batch"], r["seq"])]
        seq, window = int(r["seq"]), int(r["window"])
        fwd = float(r["forward_ms"]) / float(f["forward_ms"])
        bwd = (float(r["time_ms"]) - float(r["forward_ms"])) / (
            float(f["time_ms"]) - float(f["forward_ms"])
        )
        for measured, direction in ((fwd, "forward"), (bwd, "backward")):
            tile_errs.append(abs(window_tile_ratio(seq, window, direction) / measured - 1))
            flop_errs.append(abs(attended_keys(seq, window) / attended_keys(seq) / measured - 1))
    assert len(tile_errs) == 22 and max(tile_errs) < 0.15
    assert sorted(tile_errs)[11] < 0.05 and sorted(flop_errs)[11] > 0.2  # the medians


def test_curve_prices_windowed_layers_on_the_tile_model():
    mistral = dense_model(sliding_window=4096)
    w = workload(seq_len=32768, global_batch=8)
    full_s, _, _ = attention_times(mistral, H100, CAL, w, Layout(), None)
    fwd, bwd, looks, flops = layer_attention(mistral, H100, CAL, w, Layout(), None, False)
    ratio = 2 * 4096 / 32768 - (4096 / 32768) ** 2  # (W - W^2/2s) / (s/2) = 0.234375
    f_tiles = window_tile_ratio(32768, 4096, "forward")
    b_tiles = window_tile_ratio(32768, 4096, "backward")
    assert ratio < f_tiles < b_tiles < 0.27
    assert fwd == pytest.approx(full_s * f_tiles) and looks == ()
    assert bwd == pytest.approx(ATTENTION_BACKWARD * full_s * b_tiles)
    # the model FLOPs (MFU) stay the attended keys'
    assert flops == pytest.approx(attention_core_flops(mistral, w, Layout()) * ratio)
    # gpt-oss pattern: half the layers at the ratio, half full
    alt = dense_model(sliding_window=4096, full_attention_every=2)
    fwd_alt, bwd_alt = layer_attention(alt, H100, CAL, w, Layout(), None, False)[:2]
    assert fwd_alt == pytest.approx(full_s * (1 + f_tiles) / 2)
    assert bwd_alt == pytest.approx(ATTENTION_BACKWARD * full_s * (1 + b_tiles) / 2)


@pytest.fixture(scope="module")
def window_book() -> KernelBook:
    data = read_kernel_files({"attention_window": WINDOW_CSV}, str(WINDOW_CSV))
    return KernelBook(KernelTables.model_validate(data))


def test_table_prices_windowed_layers_at_the_measured_saving(window_book):
    # attention_window.csv (FlexAttention, H100): 2 x 8192 tokens, full 10.24848 ms (2.70442
    # forward), window 1024 3.22396 ms (0.80154 forward).
    fwd_ratio = 0.80154 / 2.70442
    bwd_ratio = (3.22396 - 0.80154) / (10.24848 - 2.70442)
    found, status, kernel = window_book.window_ratio(
        2, 8192, 32, 8, 128, 128, window=1024, kernel="fused"
    )
    assert (status, kernel) == (MEASURED, "flex")
    assert found == pytest.approx((fwd_ratio, bwd_ratio), rel=1e-12)
    m = dense_model(sliding_window=1024)
    w = workload(seq_len=8192, global_batch=16)
    lo = Layout(micro_batch=2)
    full_fwd, full_bwd, _ = attention_times(m, H100, CAL, w, lo, window_book)
    assert full_bwd is None  # no fused rows in this table: the full layer is on the curve
    fwd, bwd, looks, _ = layer_attention(m, H100, CAL, w, lo, window_book, False)
    assert fwd == pytest.approx(full_fwd * fwd_ratio)
    assert bwd == pytest.approx(2.5 * full_fwd * bwd_ratio)
    assert looks == (("attention", "extrapolated"), ("attention_window", MEASURED))
    # measured saving is smaller than the FLOP saving (0.3 vs 0.23 of full)
    assert fwd_ratio > attended_keys(8192, 1024) / attended_keys(8192)


def test_table_outside_its_windows_falls_back_to_the_tile_model(window_book):
    # below the 4K-32K rows
    found, status, _ = window_book.window_ratio(8, 2048, 32, 8, 128, 128, window=128, kernel="fa2")
    assert found is None and status == "extrapolated"
    m = dense_model(sliding_window=128)
    w = workload(seq_len=2048)
    full_fwd, _, _ = attention_times(m, H100, CAL, w, Layout(), window_book)
    fwd, bwd, looks, _ = layer_attention(m, H100, CAL, w, Layout(), window_book, False)
    assert fwd == pytest.approx(full_fwd * window_tile_ratio(2048, 128, "forward"))
    assert bwd == pytest.approx(ATTENTION_BACKWARD * full_fwd * window_tile_ratio(2048, 128, "backward"))
    assert looks[-1] == ("attention_window", "extrapolated")


def test_flash_attention_memory_does_not_change_with_the_window():
    # Q, K, V, O and the row log-sum-exp are kept per token: O(s) either way; no s x s scores
    w = workload(seq_len=8192)
    for rc in ("none", "selective", "full"):
        a = layer_activation_bytes(dense_model(), w, Layout(), is_moe=False, recompute=rc)
        b = layer_activation_bytes(
            dense_model(sliding_window=128), w, Layout(), is_moe=False, recompute=rc
        )
        assert a == b


def test_context_parallel_with_a_window_needs_a2a_under_transformer_engine():
    m = dense_model(sliding_window=4096)
    c = cluster(num_gpus=16)
    lo = Layout(tp=2, cp=2, dp=4)
    problems = layout_violations(m, c, workload(seq_len=8192), lo)
    assert any("sliding-window" in p and "p2p" in p for p in problems)
    assert not layout_violations(m, c, workload(seq_len=8192, cp_attention="torch_ring"), lo)
    assert not layout_violations(dense_model(), c, workload(seq_len=8192), lo)


def test_context_parallel_with_attention_sinks_needs_a2a_under_transformer_engine():
    # TE get_attention_backend: learnable softmax under CP only in FusedAttention, and only
    # with cp_comm_type a2a; the Megatron profile prices the p2p ring -> refused, with or
    # without a window; one reason per variant
    c = cluster(num_gpus=16)
    lo = Layout(tp=2, cp=2, dp=4)
    sinks = layout_violations(dense_model(attention_sinks=True), c, workload(seq_len=8192), lo)
    assert len(sinks) == 1 and "attention sinks" in sinks[0] and "a2a" in sinks[0]
    both = dense_model(attention_sinks=True, sliding_window=128)
    assert len(layout_violations(both, c, workload(seq_len=8192), lo)) == 2
    no_cp = Layout(tp=2, dp=8)
    assert not layout_violations(dense_model(attention_sinks=True), c, workload(), no_cp)
    torch_ring = workload(seq_len=8192, cp_attention="torch_ring")
    assert not layout_violations(dense_model(attention_sinks=True), c, torch_ring, lo)


def test_estimate_reports_the_windowed_layers():
    m = dense_model(sliding_window=1024, full_attention_every=4)
    e = estimate(m, cluster(num_gpus=8), workload(seq_len=8192), Layout(tp=8))
    a = e.attention
    assert a["sliding_window"] == 1024 and a["full_layers"] == [3, 7, 11, 15, 19, 23, 27, 31]
    assert len(a["windowed_layers"]) == 24 and a["priced_as"] == "tile_model"
    assert a["flop_ratio"] == pytest.approx(attended_keys(8192, 1024) / attended_keys(8192))
    assert a["forward_ratio"] == pytest.approx(window_tile_ratio(8192, 1024, "forward"))
    assert a["backward_ratio"] == pytest.approx(window_tile_ratio(8192, 1024, "backward"))
    assert estimate(dense_model(), cluster(num_gpus=8), workload(), Layout(tp=8)).attention is None
    faster = estimate(m, cluster(num_gpus=8), workload(seq_len=8192), Layout(tp=8))
    slower = estimate(dense_model(), cluster(num_gpus=8), workload(seq_len=8192), Layout(tp=8))
    assert faster.step_time_s < slower.step_time_s


def test_mla_rotary_rotates_the_rope_dims_and_one_shared_key():
    # DeepSeek-V3: 128 heads, qk_rope_head_dim 64; the rotary key is one head for all
    v3 = dense_model(num_attention_heads=128, num_kv_heads=None, hidden_size=7168, mla=True)
    assert rotary_heads(v3, 4) == (33, 64)
    assert rotary_heads(dense_model(), 4) == (8 + 2, 128)  # 32 / 4 query + 8 / 4 KV heads


def test_measure_lists_the_windowed_call_beside_the_full_one():
    from cost_models.kernel_shapes import kernel_shapes

    m = dense_model(sliding_window=1024, full_attention_every=2)
    ks = kernel_shapes(m, cluster(num_gpus=8), seq_len=8192, tps=(1,), micro_batches=(2,), cps=(1,))
    windows = {row[7] for row in ks.attention}
    assert windows == {0, 1024}  # the saving is the windowed call over the full call


@pytest.mark.parametrize(
    ("framework", "expected"),
    [
        ("deepspeed", "deepspeed has no option for sliding-window attention (4096 tokens on 32 of"),
        ("torchtitan", "torchtitan builds sliding-window attention (4096 tokens on 32 of 32 layers)"),
        ("megatron", None),
        (None, None),
    ],
)
def test_the_plan_says_when_its_framework_cannot_launch_the_window(framework, expected):
    from factories import result_for

    from planner.report.findings import attention_warnings

    m = dense_model(sliding_window=4096)
    r = result_for(m, cluster(num_gpus=8), workload(seq_len=8192), Layout(tp=8))
    said = attention_warnings(r.model_copy(update={"framework": framework}))
    assert said == [] if expected is None else said[0].startswith(expected)
