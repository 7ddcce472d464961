"""The optimizer step's fp32 gradient copies (Workload.step_grad_copies, memory.step_grad_bytes):
a memory phase after the activations are freed, charged to the gradients where it is the peak
(stage.peak_grads). Hand-computed bytes from the frameworks' own step code (the docstrings)."""

from __future__ import annotations

import pytest
from factories import layout, workload

import models_zoo
from cost_models import framework
from cost_models.memory import StageParams, state_bytes, step_grad_bytes
from cost_models.stage import peak_grads
from cost_models.units import GIB
from planner import api

P = 1e9  # parameters on the stage
SP = StageParams(dense=P, expert=0.0, largest_layer=P / 8, num_layers=8)


def ds(**over):
    return framework.DEEPSPEED.workload(workload(**over))


def test_deepspeed_zero0_fp16_optimizer_holds_two_fp32_copies_over_the_bf16_gradients():
    # FP16_Optimizer.step: every p.grad.to(fp32) (4 B) and their flat concatenation (4 B)
    # beside the 2 B gradients
    lo = layout(dp=8, zero_stage=0)
    w = ds()
    _, grads, _ = state_bytes(SP, lo, 1, w)
    assert grads == 2 * P
    assert step_grad_bytes(SP, lo, w, 1, grads) == 10 * P


@pytest.mark.parametrize("zero", [1, 2])
def test_deepspeed_zero12_flatten_and_cast_the_partition(zero):
    # the rank's partition (2 B), its flat copy (2 B) and the fp32 cast (4 B); the gradients
    # outside the partition are freed first
    lo = layout(dp=4, zero_stage=zero)
    assert step_grad_bytes(SP, lo, ds(), 1, 2 * P) == 8 * P / 4


def test_deepspeed_zero3_casts_one_sub_group_at_a_time():
    big = StageParams(dense=16e9, expert=0.0, largest_layer=1e9, num_layers=16)
    lo = layout(dp=2, zero_stage=3)
    g = 2 * 8e9  # the persistent 16-bit partition
    # 8e9 partition elements > the 1e9 sub-group: 6 B over one sub-group only
    assert step_grad_bytes(big, lo, ds(), 1, g) == g + 6 * 1e9
    small = layout(dp=16, zero_stage=3)  # 1e9 / 16 per rank, one sub-group
    assert step_grad_bytes(big, small, ds(), 1, 2e9) == 2e9 + 6 * 1e9


def test_megatron_casts_the_shard_of_bf16_main_grads_only():
    lo = layout(dp=8, zero_stage=1)
    bf16 = workload(main_grads="bf16")
    assert step_grad_bytes(SP, lo, bf16, 1, 2 * P) == 2 * P + 4 * P / 8
    # ZeRO-0: Float16OptimizerWithFloat16Params casts every main_grad
    assert step_grad_bytes(SP, layout(dp=8, zero_stage=0), bf16, 1, 2 * P) == 6 * P
    # fp32 main grads: the buffer is the optimizer's gradient, no copy
    assert step_grad_bytes(SP, lo, workload(), 1, 4 * P) == 4 * P
    # the precision-aware optimizer takes the bf16 shard as decoupled_grad...
    aware = workload(main_grads="bf16", optimizer_moments="bf16")
    assert step_grad_bytes(SP, lo, aware, 1, 2 * P) == 2 * P
    # ...except under an fp8 recipe other than delayed (use_precision_aware_optimizer_no_fp8...)
    fp8 = workload(
        precision="fp8", main_grads="bf16", optimizer_moments="bf16", fp8_recipe="blockwise"
    )
    assert step_grad_bytes(SP, lo, fp8, 1, 2 * P) == 2 * P + 4 * P / 8
    # Megatron-FSDP returns early from the copy
    assert step_grad_bytes(SP, layout(dp=8, zero_stage=3), bf16, 1, 2 * P / 8) == 2 * P / 8
    assert framework.TORCHTITAN.workload(workload()).step_grad_copies == "none"


def test_the_step_phase_is_the_peak_only_above_the_backward_start():
    lo = layout(dp=8, zero_stage=0)
    w = ds()
    weights, grads, optim = state_bytes(SP, lo, 1, w)  # 2, 2, 12 B per parameter
    step = weights + 10 * P + optim
    for acts in (1e8, 5e9):  # under and over the step's extra 8 B x 1e9
        got = peak_grads(w, lo, SP, (acts, 1e7, weights, grads, optim), 1)[0]
        assert acts + 1e7 + weights + got + optim == pytest.approx(
            max(step, acts + 1e7 + weights + grads + optim)
        )
    # without copies the gradients stay as priced
    none = w.model_copy(update={"step_grad_copies": "none"})
    assert peak_grads(none, lo, SP, (1e8, 1e7, weights, grads, optim), 1)[0] == grads


def test_a_deepspeed_zero0_plan_counts_the_step_and_zero1_does_not_need_to():
    """megatron-gpt-3.6b on 8 H100 under DeepSpeed, full recompute: at ZeRO-0 the step's fp32
    copies (8 B x 3.6e9 = 27 GiB) are the peak and the plan no longer fits 72 GiB; at ZeRO-1
    the backward start stays the peak."""
    model = models_zoo.load_model("megatron-gpt-3.6b")
    cluster = models_zoo.load_cluster("dgx-h100", 8)
    w = ds(seq_len=2048, global_batch=64)
    zero0 = api.estimate(model, cluster, layout(dp=8, zero_stage=0, recompute="full"), w)
    stage = zero0.stage_memory[0]
    params = stage.weights_gib * GIB / 2
    assert stage.gradients_gib * GIB + stage.activations_gib * GIB + stage.buffers_gib * GIB == (
        pytest.approx(10 * params, rel=1e-9)
    )
    assert not zero0.fits_in_memory
    zero1 = api.estimate(model, cluster, layout(dp=8, zero_stage=1, recompute="full"), w)
    assert zero1.stage_memory[0].gradients_gib == pytest.approx(
        zero1.stage_memory[0].weights_gib
    )


def test_deepspeed_ipg_bucket_is_zeros_reduce_bucket_in_the_16_bit_dtype():
    """DeepSpeed's gradient bucket (memory.buffer_bytes, dp_sync 'deepspeed'): ZeRO's ipg
    buffer, reduce_bucket_size x 2 B whatever the DP degree, doubled at ZeRO-1/2 under the
    overlap_comm the export writes, one at ZeRO-3, none at ZeRO-0 (the engine all-reduces
    after the backward); Megatron keeps its two 40M-element buckets."""
    from factories import dense_model

    from cost_models.memory import DP_BUCKET_ELEMENTS, buffer_bytes

    model = dense_model()
    w = ds()
    for zero, dp, want in ((1, 8, 2e9), (2, 8, 2e9), (3, 8, 1e9), (1, 1, 2e9), (0, 8, 0.0)):
        assert buffer_bytes(model, w, layout(dp=dp, zero_stage=zero), 1) == want
    small = w.model_copy(update={"dp_bucket_elements": 50_000_000})
    assert buffer_bytes(model, small, layout(dp=8, zero_stage=1), 1) == 2e8
    # under pipelining the engine turns overlap_comm off: one buffer
    assert buffer_bytes(model, w, layout(dp=4, pp=2, zero_stage=1), 1) == 1e9
    megatron = buffer_bytes(model, workload(), layout(dp=8, zero_stage=1), 1)
    assert megatron == DP_BUCKET_ELEMENTS * 4


def test_the_peak_phase_is_named_and_the_reports_say_it():
    """StageMemory.peak_phase: the ZeRO-0 DeepSpeed stage above peaks at the optimizer step and
    every report's memory section says so; ZeRO-1 peaks at the backward start and says
    nothing more."""
    from factories import result_for

    from planner.report.html import render_html
    from planner.report.markdown import render_markdown

    model = models_zoo.load_model("megatron-gpt-3.6b")
    cluster = models_zoo.load_cluster("dgx-h100", 8)
    w = ds(seq_len=2048, global_batch=64)
    zero0 = result_for(model, cluster, w, layout(dp=8, zero_stage=0, recompute="full"))
    assert [s.peak_phase for s in zero0.best.stage_memory] == ["optimizer_step"]
    note = "stage 0: peak at the optimizer step"
    assert note in render_markdown(zero0)
    assert note in render_html(zero0)
    zero1 = result_for(model, cluster, w, layout(dp=8, zero_stage=1, recompute="full"))
    assert [s.peak_phase for s in zero1.best.stage_memory] == ["backward"]
    assert "peak at" not in render_markdown(zero1)


def test_zero3_keeps_a_16bit_shard_in_megatron_fsdp_and_deepspeed_only():
    """Workload.zero3_16bit_shard per profile: Megatron-FSDP's model_weight_buffer and
    DeepSpeed's lp_param_buffer sit beside the fp32 master (6 B per shard element); torch FSDP
    (torchtitan, llm-foundry) keeps the fp32 shard only (4 B). Gathered beside them: two
    layers, DeepSpeed's reuse window, the last 5e8 elements of the stage (1e9 / 2) and one
    module (memory.zero3_reuse_window_elements; the layer stands in for an uncounted module,
    1.25e8) with one more prefetched (memory.deepspeed_gathered_elements), and
    Megatron-FSDP's running layer with the 4 layers of 1.25e8 it prefetches to reach 5e8
    (memory.zero3_gathered_elements)."""
    lo = layout(dp=8, zero_stage=3)
    two_layers, window = 2 * SP.largest_layer * 2, (5e8 + 2 * SP.largest_layer) * 2
    for p, per_element, gather in (
        (framework.MEGATRON, 6, 5 * SP.largest_layer * 2),
        (framework.DEEPSPEED, 6, window),
        (framework.TORCHTITAN, 4, two_layers),
        (framework.LLM_FOUNDRY, 4, two_layers),
    ):
        w = p.workload(workload())
        assert state_bytes(SP, lo, 1, w)[0] == per_element * P / 8 + gather, p.name


def test_deepspeed_without_zero_waits_for_its_whole_all_reduce():
    """DeepSpeed ZeRO-0 all-reduces after the backward on the compute stream (stage.
    stage_dp_parts, dp_sync 'deepspeed'): the whole reduction is exposed and nothing runs
    beside it; ZeRO-1 reduces under overlap_comm beside the last backward, then gathers the
    updated parameters inside the optimizer step (stage_1_and_2.py step ->
    all_gather_dp_groups), where nothing hides them."""
    from cost_models.pricer import Pricer

    model = models_zoo.load_model("megatron-gpt-3.6b")
    cluster = models_zoo.load_cluster("dgx-h100", 16)
    w = ds(seq_len=2048, global_batch=64)
    pricer = Pricer(model, cluster, w)
    zero0 = pricer.estimate(layout(dp=16, zero_stage=0, recompute="full"))
    exposure = zero0.dp_exposure
    assert exposure["beyond_overlap_window_s"] == pytest.approx(exposure["link_busy_s"])
    assert exposure["compute_slowed_beside_nccl_s"] == 0.0
    assert exposure["last_gradient_bucket_s"] == 0.0
    zero1 = pricer.estimate(layout(dp=16, zero_stage=1, recompute="full"))
    assert zero1.breakdown_s["dp_comm"] < zero0.breakdown_s["dp_comm"]
    # the reduce-scatter of bf16 gradients hides behind the backward but its last bucket; the
    # all-gather of as many bf16 parameters, half the link time, is exposed whole
    exposure = zero1.dp_exposure
    assert exposure["beyond_overlap_window_s"] == pytest.approx(exposure["link_busy_s"] / 2)
    assert exposure["last_gradient_bucket_s"] > 0.0
    assert exposure["first_parameter_bucket_s"] == 0.0
    # under pipelining ZeRO-1 reduces at the schedule's ReduceGrads, after the last backward,
    # without overlap_comm: exposed too
    piped = pricer.estimate(layout(dp=8, pp=2, zero_stage=1, recompute="full"))
    exposure = piped.dp_exposure
    # the whole reduction and the in-step gather past any window, no edge bucket apart; the
    # tied embedding's all-reduce between the first and last stage is its own term
    assert exposure["last_gradient_bucket_s"] == 0.0
    assert exposure["shared_embedding_all_reduce_s"] > 0.0
    assert exposure["beyond_overlap_window_s"] == pytest.approx(
        exposure["link_busy_s"] - exposure["shared_embedding_all_reduce_s"]
    )


def test_deepspeed_zero_with_one_rank_still_steps_zeros_partition():
    """DeepSpeed builds ZeRO's optimizer whenever the config asks for it, also over one DP rank
    (the partition is then the whole model): 8 B per parameter at the step, not FP16_Optimizer's
    10 B, and the ipg buckets stay."""
    lo = layout(dp=1, zero_stage=1)
    assert step_grad_bytes(SP, lo, ds(), 1, 2 * P) == 8 * P
    assert step_grad_bytes(SP, layout(dp=1, zero_stage=0), ds(), 1, 2 * P) == 10 * P
