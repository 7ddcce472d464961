"""torchtitan's local MoE token dispatch (Workload.moe_dispatch "index", issue 32): the gather,
score multiply and scatter_add around the experts and their autograd inverses. Expected values
by hand from torchtitan 0.3.0 models/common/token_dispatcher.py LocalTokenDispatcher."""

from __future__ import annotations

import pytest
from factories import H100, layout, moe_model, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import layer_time, moe_dispatch_s
from cost_models.framework import MEGATRON, TORCHTITAN, record_profile
from cost_models.kernels import KernelBook, KernelTables

# moe_model: hidden 2048, top_k 2; tp 1, etp 1: N h = 2 x 2048 = 4096 elements per token
NH, H = 4096.0, 2048.0


def test_dispatch_by_hand_on_hbm():
    model, t, hbm = moe_model(), 1000.0, 1e12
    fwd, bwd, looks = moe_dispatch_s(model, layout(), t, False, hbm, None)
    # forward: gather 2 NH, eager fp32 score multiply 10 NH, zeros H, sorted scatter_add 3 NH
    assert fwd == pytest.approx((2 * NH + 10 * NH + H + 3 * NH) * t * 2 / hbm)
    # backward: gather of the output gradient 2 NH, two products 20 NH, index_put_ 3 NH
    assert bwd == pytest.approx((2 * NH + 20 * NH + 3 * NH) * t * 2 / hbm)
    assert looks == ()  # no kernel tables
    # compiled (fused): the multiply is one read and one write of the bf16 rows
    ffwd, fbwd, _ = moe_dispatch_s(model, layout(), t, True, hbm, None)
    assert ffwd == pytest.approx((2 * NH + 2 * NH + H + 3 * NH) * t * 2 / hbm)
    assert fbwd == pytest.approx((2 * NH + 4 * NH + 3 * NH) * t * 2 / hbm)


def test_dispatch_rows_follow_tp_and_etp():
    model, hbm = moe_model(), 1e12
    one, _, _ = moe_dispatch_s(model, layout(), 1000.0, True, hbm, None)
    tp2, _, _ = moe_dispatch_s(model, layout(tp=2), 1000.0, True, hbm, None)
    # rows per token top_k x etp / tp: half the rows under TP 2 (the zero fill h / tp too)
    assert tp2 == pytest.approx(one / 2)


def test_gathers_and_scatters_take_the_copy_row():
    model, t = moe_model(), 4096.0
    rows = [("copy", size, size / 1e9) for size in (1e6, 1e10)]  # copy row at 1 TB/s
    book = KernelBook(KernelTables(source="hand-built", memory_bound=rows))
    fwd, bwd, looks = moe_dispatch_s(model, layout(), t, True, 4e12, book)
    assert len(looks) == 4  # two copy-row look-ups per pass
    copied = 5 * NH * t * 2  # gather + scatter (2 + 3 element moves) through the copy row
    assert fwd == pytest.approx(copied / 1e12 + (2 * NH + H) * t * 2 / 4e12, rel=1e-9)
    assert bwd == pytest.approx(copied / 1e12 + 4 * NH * t * 2 / 4e12, rel=1e-9)


def test_layer_time_swaps_the_permute_copies_for_the_dispatch():
    model, lo, cal = moe_model(), layout(), calibration_for("hopper")
    hbm = hbm_bytes_per_s(H100, cal)
    permute = layer_time(model, H100, cal, workload(), lo, is_moe=True)
    index = layer_time(model, H100, cal, workload(moe_dispatch="index"), lo, is_moe=True)
    t = 4096.0
    fwd, bwd, _ = moe_dispatch_s(model, lo, t, True, hbm, None)
    assert index.dispatch_s == pytest.approx(fwd) and index.dispatch_backward_s == pytest.approx(bwd)
    # Megatron's path: no torchtitan dispatch; its all-to-all dispatcher sorts the rows of the
    # 16 local experts and restores them (2 copies of t x top_k x h, read + write, each pass)
    sort_s = 2 * (2 * NH) * t * 2 / hbm
    assert permute.dispatch_s == pytest.approx(sort_s)
    assert permute.dispatch_backward_s == pytest.approx(sort_s)
    flex = layer_time(model, H100, cal, workload(moe_dispatcher="deepep"), lo, is_moe=True)
    assert flex.dispatch_s == 0.0 and flex.dispatch_backward_s == 0.0
    # the permute / unpermute copies (4 h per routed row) leave the elementwise term
    assert permute.elementwise_s - index.elementwise_s == pytest.approx(4 * NH * t * 2 / hbm)
    assert index.gemm_s == permute.gemm_s
    bare = index.forward_s - index.overhead_s - (permute.forward_s - permute.overhead_s)
    assert bare == pytest.approx(fwd - 4 * NH * t * 2 / hbm - sort_s)
    # a dense layer never dispatches
    dense = layer_time(model, H100, cal, workload(moe_dispatch="index"), lo, is_moe=False)
    assert dense.dispatch_s == 0.0


def test_only_torchtitan_dispatches_by_index():
    assert TORCHTITAN.workload(workload()).moe_dispatch == "index"
    assert MEGATRON.workload(workload()).moe_dispatch == "permute"
    assert record_profile("deepspeed").workload(workload()).moe_dispatch == "permute"
    stated = TORCHTITAN.workload(workload(moe_dispatch="permute"))
    assert stated.moe_dispatch == "permute"  # a field the workload sets wins over the profile
