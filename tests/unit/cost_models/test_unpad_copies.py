"""Varlen attention's unpad / pad copies (Workload.attention_unpad, issue 32 item 4: a term
outside the measured kernels). Expected values by hand from flash-attn's bert_padding, as
llm-foundry's MPT flash_attn_fn calls it."""

from __future__ import annotations

import pytest
from factories import H100, dense_model, layout, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import layer_time, unpad_copies_s
from cost_models.framework import MEGATRON, TORCHTITAN, record_profile
from cost_models.host import UNPAD_KERNELS, layer_launches
from cost_models.kernels import KernelBook, KernelTables


def _widths(tp: int) -> tuple[float, float, float, float]:
    # dense_model: 32 heads, 8 KV heads, head_dim 4096 / 32 = 128
    heads, kv = 32 / tp, max(8, tp) / tp
    return heads * 128, kv * 128, kv * 128, heads * 128


def test_unpad_copies_by_hand_on_hbm():
    model, lo, t, hbm = dense_model(), layout(tp=2), 4096.0, 1e12
    q, k, v, o = _widths(2)
    fwd, bwd, looks = unpad_copies_s(model, lo, t, hbm, None)
    # forward: gather q, k, v (read + write each), pad_input: zeros + index_put (3 x o)
    assert fwd == pytest.approx((2 * (q + k + v) + 3 * o) * t * 2 / hbm)
    # backward: zeros + scatter_ for q, k, v (3 moves each), gather of the output gradient
    assert bwd == pytest.approx((3 * (q + k + v) + 2 * o) * t * 2 / hbm)
    assert looks == ()


def test_unpad_copies_take_the_tables_copy_row():
    model, lo, t = dense_model(), layout(), 8192.0
    q, k, v, o = _widths(1)
    # a copy row at 1 TB/s over the sizes asked; the zero fills stay on HBM (4e12 B/s here)
    rows = [("copy", size, size / 1e9) for size in (1e6, 1e9)]
    book = KernelBook(KernelTables(source="hand-built", memory_bound=rows))
    fwd, bwd, looks = unpad_copies_s(model, lo, t, 4e12, book)
    copied = 2 * (q + k + v + o) * t * 2  # bytes through the copy row, each pass
    assert fwd == pytest.approx(copied / 1e12 + o * t * 2 / 4e12, rel=1e-9)
    assert bwd == pytest.approx(copied / 1e12 + (q + k + v) * t * 2 / 4e12, rel=1e-9)
    assert len(looks) == 8  # 4 copies per pass


def test_layer_time_adds_the_copies_to_both_passes_and_to_a_full_recompute():
    model, lo, cal = dense_model(), layout(tp=1), calibration_for("hopper")
    plain = layer_time(model, H100, cal, workload(), lo, is_moe=False)
    unpad = layer_time(model, H100, cal, workload(attention_unpad=True), lo, is_moe=False)
    fwd, bwd, _ = unpad_copies_s(model, lo, 4096.0, hbm_bytes_per_s(H100, cal), None)
    assert unpad.forward_s - plain.forward_s == pytest.approx(fwd, rel=1e-9)
    assert unpad.backward_s - plain.backward_s == pytest.approx(bwd, rel=1e-9)
    assert unpad.recompute_s("full") - plain.recompute_s("full") == pytest.approx(fwd, rel=1e-9)
    assert unpad.gemm_s == plain.gemm_s and unpad.attention_s == plain.attention_s


def test_only_llm_foundry_unpads():
    # llm-foundry's flash_attn_fn wraps flash_attn_varlen_func in unpad_input / pad_input;
    # Megatron (TE, sbhd) and torchtitan (SDPA on [b, h, s, d]) attend on the padded layout
    assert record_profile("llm-foundry").workload(workload()).attention_unpad
    assert not MEGATRON.workload(workload()).attention_unpad
    assert not TORCHTITAN.workload(workload()).attention_unpad
    # a field the workload sets wins over the profile
    off = record_profile("llm-foundry").workload(workload(attention_unpad=False))
    assert not off.attention_unpad


def test_unpad_copies_are_launches_of_their_own():
    model, lo = dense_model(), layout()
    plain = layer_launches(model, lo, workload(), None, is_moe=False)
    unpad = layer_launches(model, lo, workload(attention_unpad=True), None, is_moe=False)
    assert UNPAD_KERNELS == (5, 7)  # 3 gathers + zeros + index_put; 3 x (zeros + scatter_) + gather
    assert unpad.forward - plain.forward == 5 and unpad.backward - plain.backward == 7
