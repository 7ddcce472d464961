"""Megatron's passes over each gradient bucket before its data-parallel collective
(stage.grad_bucket_pass_bytes): the NaN / Inf check's norm (Workload.grad_nan_check,
param_and_grad_buffer.py check_grads) and the pre-scale by 1 / (DP x CP) that averaging in the
collective avoids (Workload.grad_average_in_collective, start_grad_sync `bucket.grad_data *=
gradient_scaling_factor`). Expected bytes by hand from megatron-core 0.19's code as the
function's docstring cites it."""

from __future__ import annotations

import factories as f
import pytest

from cost_models.framework import MEGATRON, TORCHTITAN
from cost_models.memory import StageParams
from cost_models.specs import Layout, Workload
from cost_models.stage import grad_bucket_pass_bytes, stage_optimizer_s

SP = StageParams(dense=6e9, expert=2e9, largest_layer=1e8, num_layers=8)
EVERY = 8e9  # the rank's whole gradient buffer, dense and expert


def _w(**over) -> Workload:
    return MEGATRON.workload(Workload(seq_len=4096, global_batch_seqs=64, **over))


def test_the_nan_check_reads_every_gradient_once_per_reduction():
    """DDP / the distributed optimizer reduce once per step (no_sync until the last
    micro-batch): one norm over the whole buffer, 4 B a gradient in fp32, 2 in bf16; with EP
    equal to TP x ETP the expert data-parallel group is the dense one's and nothing is
    pre-scaled under the profile's averaging collective."""
    lo = Layout(tp=2, dp=8, ep=2, zero_stage=1)
    assert grad_bucket_pass_bytes(lo, SP, _w(), 4) == EVERY * 4
    assert grad_bucket_pass_bytes(lo, SP, _w(main_grads="bf16"), 4) == EVERY * 2
    assert grad_bucket_pass_bytes(lo, SP, _w(grad_nan_check=False), 4) == 0
    # Megatron-LM asserts --no-check-for-nan-in-loss-and-grad under a full-iteration graph
    assert grad_bucket_pass_bytes(lo, SP, _w(full_iteration_cuda_graph=True), 4) == 0


@pytest.mark.parametrize("tp,ep,expert_scaled", [(1, 4, True), (4, 4, False), (2, 8, True)])
def test_expert_buckets_are_pre_scaled_where_their_group_differs(tp, ep, expert_scaled):
    """Averaging in the collective leaves the expert buckets' EDP / (DP x CP) factor, not 1
    where EDP = DP x CP x TP / (EP x ETP) differs from DP x CP (distributed_data_parallel.py
    expert_gradient_scaling_factor): a read and a write of each expert gradient."""
    lo = Layout(tp=tp, dp=8, ep=ep, zero_stage=1)
    scaled = SP.expert * 2 * 4 if expert_scaled else 0
    assert grad_bucket_pass_bytes(lo, SP, _w(), 1) == EVERY * 4 + scaled


def test_without_averaging_in_the_collective_every_bucket_is_pre_scaled():
    """Megatron-LM's own default (--ddp-average-in-collective off): every bucket scaled in place
    by 1 / (DP x CP) before its sum, read + write; a factor of 1 (no DP x CP group) skips it
    and leaves the check."""
    summed = _w(grad_average_in_collective=False)
    lo = Layout(dp=4, cp=2, zero_stage=0)
    assert grad_bucket_pass_bytes(lo, SP, summed, 2) == EVERY * (4 + 2 * 4)
    alone = Layout(tp=8, zero_stage=0)
    assert grad_bucket_pass_bytes(alone, SP, summed, 2) == EVERY * 4
    # averaging, one DP rank: the experts' EDP / (DP x CP) = TP / (EP x ETP) = 4 still scales
    moe_alone = Layout(tp=8, ep=2, zero_stage=0)
    assert grad_bucket_pass_bytes(moe_alone, SP, _w(), 2) == EVERY * 4 + SP.expert * 2 * 4


def test_megatron_fsdp_scales_bf16_buckets_every_micro_batch_and_checks_none():
    """Megatron-FSDP (ZeRO-3) reduces every micro-batch and checks no bucket on its overlapped
    path; averaging in the collective it moves nothing, else it scales bf16 buckets in place
    (grad_data.mul_) and fp32 ones inside NCCL (premul sum)."""
    lo = Layout(dp=8, zero_stage=3)
    assert grad_bucket_pass_bytes(lo, SP, _w(main_grads="bf16"), 4) == 0
    summed = _w(main_grads="bf16", grad_average_in_collective=False)
    assert grad_bucket_pass_bytes(lo, SP, summed, 4) == 4 * EVERY * 2 * 2
    summed32 = _w(grad_average_in_collective=False)
    assert grad_bucket_pass_bytes(lo, SP, summed32, 4) == 0


def test_only_megatrons_data_parallel_path_pays_them():
    w = TORCHTITAN.workload(Workload(seq_len=4096, global_batch_seqs=64))
    assert w.grad_nan_check  # the field's default; torchtitan's FSDP2 path never reads it
    assert grad_bucket_pass_bytes(Layout(dp=8, zero_stage=3), SP, w, 4) == 0


def test_the_passes_are_part_of_the_step_tail_at_the_hbm_figure():
    lo = Layout(dp=8, zero_stage=1)
    on, off = _w(), _w(grad_nan_check=False)
    extra = stage_optimizer_s(lo, SP, 1e12, on, num_microbatches=4) - stage_optimizer_s(
        lo, SP, 1e12, off, num_microbatches=4
    )
    assert extra == pytest.approx(EVERY * 4 / 1e12, rel=1e-12)


def test_the_megatron_export_writes_what_is_priced():
    """--ddp-average-in-collective with a DP x CP group (the profile averages); a workload
    priced without the NaN check turns Megatron-LM's check off."""
    from planner.export import plan_exports

    lo = Layout(tp=4, dp=2, zero_stage=1)
    work = MEGATRON.workload(f.workload(global_batch=16))
    args = plan_exports.to_megatron_args(f.result_for(f.dense_model(), f.cluster(8), work, lo))
    assert "--ddp-average-in-collective" in args
    assert "--no-check-for-nan-in-loss-and-grad" not in args
    unchecked = work.model_copy(
        update={"grad_nan_check": False, "grad_average_in_collective": False}
    )
    result = f.result_for(f.dense_model(), f.cluster(8), unchecked, lo)
    args = plan_exports.to_megatron_args(result)
    assert "--no-check-for-nan-in-loss-and-grad" in args
    assert "--ddp-average-in-collective" not in args


def test_an_expert_data_parallel_group_alone_gets_the_priced_overlap_and_averaging():
    """At DP = CP = 1 a MoE with EP x ETP < TP still reduces its expert gradients over TP x CP x
    DP / (EP x ETP) ranks; the cost model prices that reduction overlapped and averaged (the
    expert pre-scale), so the export asks Megatron for both; with EP x ETP = TP there is no
    group and no flag."""
    from planner.export import plan_exports

    work = MEGATRON.workload(f.workload(global_batch=16))
    model = f.moe_model()
    grouped = Layout(tp=4, ep=2, zero_stage=1)  # expert data-parallel group of 2
    args = plan_exports.to_megatron_args(f.result_for(model, f.cluster(4), work, grouped))
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--ddp-average-in-collective"):
        assert flag in args
    alone = Layout(tp=4, ep=4, zero_stage=1)
    args = plan_exports.to_megatron_args(f.result_for(model, f.cluster(4), work, alone))
    assert not [a for a in args if a.startswith("--overlap-") or "average-in" in a]
