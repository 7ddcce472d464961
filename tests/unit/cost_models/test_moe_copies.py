"""Megatron's routed-row copies around the experts beyond permute / unpermute (issue 32, the
Hopper MoE expert path): the all-to-all dispatcher's sort by local expert and its restore
(megatron/core/transformer/moe/token_dispatcher.py sort_chunks_by_idxs) and TEGroupedMLP's
quantization padding (TE Fp8Padding / Fp8Unpadding). Expected values by hand."""

from __future__ import annotations

import pytest
from factories import H100, layout, moe_model, workload

from cost_models.calibration import calibration_for
from cost_models.compute import dispatch_copies_s, layer_time, megatron_expert_copies
from cost_models.host import EXPERT_PAD_KERNELS, layer_launches
from cost_models.kernels import KernelBook, KernelTables

# moe_model: 16 experts, hidden 2048, top_k 2; TP 1, ETP 1: one copy of the routed rows moves
# 2 x 2048 = 4096 elements per token, read and written: 8192 element moves
ROW = 2 * 2 * 2048.0


def test_which_copies_megatron_makes():
    model, ep4, ep16 = moe_model(), layout(ep=4), layout(ep=16)
    # bf16, all-to-all, 4 local experts: the sort and its restore only
    assert megatron_expert_copies(model, ep4, workload()) == 2
    # one local expert: the all-to-all delivers its rows in order, nothing to sort
    assert megatron_expert_copies(model, ep16, workload()) == 0
    # fp8 (any quantized recipe): the padding and unpadding copies too
    fp8 = workload(precision="fp8", fp8_recipe="tensorwise")
    assert megatron_expert_copies(model, ep4, fp8) == 4
    assert megatron_expert_copies(model, ep16, fp8) == 2
    assert megatron_expert_copies(model, ep4, workload(precision="mxfp8")) == 4
    # the router pads the routing map to the alignment: no padding copy
    padded = workload(precision="fp8", moe_router_padding=True)
    assert megatron_expert_copies(model, ep4, padded) == 2
    # flex dispatchers (DeepEP / HybridEP) deliver expert-ordered rows; HybridEP pads them
    assert megatron_expert_copies(model, ep4, workload(precision="fp8", moe_dispatcher="deepep")) == 0
    # a full-iteration graph runs HybridEP's static-capacity dispatch
    full = workload(precision="fp8", full_iteration_cuda_graph=True, cuda_graphs=True)
    assert megatron_expert_copies(model, ep4, full) == 0
    # torchtitan's local dispatch is priced by its own ops (moe_dispatch_s)
    assert megatron_expert_copies(model, ep4, workload(moe_dispatch="index")) == 0


def test_copies_by_hand_on_hbm():
    model, t, hbm = moe_model(), 1000.0, 1e12
    fp8 = workload(precision="fp8", fp8_recipe="tensorwise")
    fwd, bwd, looks = dispatch_copies_s(model, layout(ep=4), fp8, t, hbm, None)
    # 4 copies of [2,000 rows, 2,048] bf16, read + written, at 1 TB/s; backward the inverses
    assert fwd == pytest.approx(4 * ROW * t * 2 / hbm)
    assert bwd == pytest.approx(fwd)
    assert looks == ()
    # TP 2 (ETP 1): each rank routes its own sequence shard, half the rows
    tp2, _, _ = dispatch_copies_s(model, layout(ep=4, tp=2), fp8, t, hbm, None)
    assert tp2 == pytest.approx(fwd / 2)
    # nothing to copy: no seconds
    assert dispatch_copies_s(model, layout(ep=16), workload(), t, hbm, None) == (0.0, 0.0, ())


def test_copies_take_the_copy_row():
    model, t = moe_model(), 4096.0
    rows = [("copy", size, size / 1e9) for size in (1e6, 1e10)]  # copy row at 1 TB/s
    book = KernelBook(KernelTables(source="hand-built", memory_bound=rows))
    fp8 = workload(precision="fp8")
    fwd, bwd, looks = dispatch_copies_s(model, layout(ep=4), fp8, t, 4e12, book)
    assert fwd == pytest.approx(4 * ROW * t * 2 / 1e12, rel=1e-9) and bwd == fwd
    assert looks == (("memory_bound", "interpolated"),)


def test_layer_time_carries_the_copies_in_both_passes():
    model, lo, cal = moe_model(), layout(ep=4), calibration_for("hopper")
    fp8 = workload(precision="fp8", fp8_recipe="tensorwise")
    padded = workload(precision="fp8", fp8_recipe="tensorwise", moe_router_padding=True)
    a = layer_time(model, H100, cal, fp8, lo, is_moe=True)
    b = layer_time(model, H100, cal, padded, lo, is_moe=True)
    # the padding pair is half of the four copies, forward and backward alike
    assert a.dispatch_s == pytest.approx(2 * b.dispatch_s) and b.dispatch_s > 0
    assert a.dispatch_backward_s == pytest.approx(a.dispatch_s)
    assert a.gemm_s == b.gemm_s and a.quantize_s == b.quantize_s
    dense = layer_time(model, H100, cal, fp8, lo, is_moe=False)
    assert dense.dispatch_s == 0.0


def test_padding_kernels_launch_after_the_sync():
    model, lo = moe_model(), layout(ep=4)
    fp8 = workload(precision="fp8", fp8_recipe="tensorwise")
    padded = workload(precision="fp8", fp8_recipe="tensorwise", moe_router_padding=True)
    a = layer_launches(model, lo, fp8, "tensorwise", is_moe=True)
    b = layer_launches(model, lo, padded, "tensorwise", is_moe=True)
    pad_f, pad_b = EXPERT_PAD_KERNELS
    assert (a.forward - b.forward, a.backward - b.backward) == (pad_f, pad_b)
    assert a.after_sync - b.after_sync == pad_f  # issued after the dispatcher's host sync
    # bf16: no quantization, no padding
    bf = layer_launches(model, lo, workload(), None, is_moe=True)
    bf_padded = layer_launches(model, lo, workload(moe_router_padding=True), None, is_moe=True)
    assert (bf.forward, bf.backward) == (bf_padded.forward, bf_padded.backward)
