"""DeepSpeed ZeRO-3's reuse window (Workload.zero3_max_reuse_distance): a gathered parameter
that recurs within stage3_max_reuse_distance elements of the trace is not released
(deepspeed/runtime/zero/partitioned_param_coordinator.py __params_to_release), so a stage's
last layers stay gathered from their forward to their backward: more memory at the backward
start, less gathering in the backward. Expected values by hand."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, layout, workload

from cost_models import framework
from cost_models.memory import (
    DEEPSPEED_PREFETCH_BUCKET_ELEMENTS,
    StageParams,
    deepspeed_gathered_elements,
    state_bytes,
    zero3_backward_gather_share,
    zero3_reuse_window_elements,
)
from cost_models.pricer import Pricer

P = 1e9  # parameters on the stage (after TP)
MODULE = 2e7  # its largest module (fused QKV or dense_h_to_4h), the unit DeepSpeed gathers
SP = StageParams(dense=P, expert=0.0, largest_layer=P / 16, num_layers=16, largest_module=MODULE)


def ds(**over):
    return framework.DEEPSPEED.workload(workload(**over))


@pytest.mark.parametrize(
    "over, passes",
    [
        ({}, 2),
        ({"recompute": "selective"}, 2),
        # every layer's recomputed forward runs before its backward: a third pass
        ({"recompute": "full"}, 3),
        # block recompute redoes only the first layers; the window is the last ones
        ({"recompute": "full", "recompute_method": "block", "recompute_num_layers": 4}, 2),
    ],
)
def test_window_is_the_reuse_distance_over_the_passes_between_uses(over, passes):
    """A middle stage (no head): the kept suffix is the smallest one reaching T = 1e9 /
    passes, priced at T + one module; the backward start holds it and the 5e7-element
    prefetch (the bucket, the modules being smaller)."""
    lo = layout(dp=8, zero_stage=3, **over)
    w = ds()
    assert w.zero3_max_reuse_distance == 1_000_000_000  # DeepSpeed's default
    window = 1e9 / passes + MODULE
    assert zero3_reuse_window_elements(SP, lo, w) == pytest.approx(window)
    assert zero3_backward_gather_share(SP, lo, w) == pytest.approx(1 - window / P)
    # memory: the 16-bit and fp32 shards (6 B per shard element) and the window with the
    # prefetch gathered in bf16, larger than the two layers (1.25e8) priced without DeepSpeed
    gathered = window + DEEPSPEED_PREFETCH_BUCKET_ELEMENTS
    assert state_bytes(SP, lo, 1, w)[0] == pytest.approx(6 * P / 8 + 2 * gathered)


def test_a_small_stage_stays_gathered_whole_and_other_frameworks_release():
    small = StageParams(dense=2e8, expert=0.0, largest_layer=2.5e7, num_layers=8)
    lo = layout(dp=8, zero_stage=3)
    assert zero3_reuse_window_elements(small, lo, ds()) == 2e8
    assert zero3_backward_gather_share(small, lo, ds()) == 0.0
    assert deepspeed_gathered_elements(small, lo, ds()) == 2e8  # never above the stage
    for p in (framework.MEGATRON, framework.TORCHTITAN, framework.LLM_FOUNDRY):
        w = p.workload(workload())
        assert w.zero3_max_reuse_distance is None, p.name
        assert zero3_reuse_window_elements(SP, lo, w) == 0.0
        assert zero3_backward_gather_share(SP, lo, w) == 1.0
    # only ZeRO-3 gathers per use
    assert zero3_reuse_window_elements(SP, layout(dp=8, zero_stage=1), ds()) == 0.0
    # a stated distance wins over the profile's; a smaller one, a smaller window
    mine = framework.DEEPSPEED.workload(workload(zero3_max_reuse_distance=100_000_000))
    assert zero3_reuse_window_elements(SP, lo, mine) == pytest.approx(5e7 + MODULE)


# Llama 3 70B's last stage at TP 1: the head [128,256 x 8,192] with the final norm, layers of
# 8.6e8 whose largest module is dense_h_to_4h (gate and up fused: 8,192 x 57,344)
HEAD, LAYER, FC1 = 128_256 * 8192 + 8192, 8.6e8, 8192 * 57_344


def _last(head: float, layers: int = 80, tp: int = 1) -> StageParams:
    n = layers * LAYER / tp + head
    return StageParams(
        dense=n, expert=0.0, largest_layer=LAYER / tp, num_layers=layers, head=head,
        largest_module=FC1 / tp,
    )  # fmt: skip


def test_a_head_past_the_reach_is_the_whole_window():
    """The head is the forward's last module: nothing follows it, so it stays gathered into
    the backward; the final norm before it is followed by the head's 1.05e9 elements, past
    T = 5e8, and is released, and so is every layer. At or past the live limit (1e9)
    DeepSpeed prefetches nothing: the peak is the head alone, not the two 8.6e8 layers the
    per-layer model priced (1.72e9)."""
    lo, w = layout(dp=64, zero_stage=3), ds()
    last = _last(HEAD)
    assert zero3_reuse_window_elements(last, lo, w) == pytest.approx(HEAD)
    assert deepspeed_gathered_elements(last, lo, w) == pytest.approx(HEAD)
    assert zero3_backward_gather_share(last, lo, w) == pytest.approx(1 - HEAD / last.dense)
    # at TP 2 the head (5.25e8) still reaches T, under the limit: one module prefetched
    half = _last(HEAD / 2, tp=2)
    assert zero3_reuse_window_elements(half, lo, w) == pytest.approx(HEAD / 2)
    assert deepspeed_gathered_elements(half, lo, w) == pytest.approx(HEAD / 2 + FC1 / 2)
    # a tied head reads the word embedding again at the forward's end (pp = 1): its weight
    # is in the window, counted once in the stage
    tied = StageParams(
        dense=2e9, expert=0.0, largest_layer=1e8, num_layers=12, head=8192, embedding=6e8,
        largest_module=4e7, tied_head=6e8,
    )  # fmt: skip
    assert zero3_reuse_window_elements(tied, lo, w) == pytest.approx(6e8 + 8192)


def test_deepspeed_peak_never_drops_as_layers_are_added():
    """partition_caps reads stage memory as non-decreasing in each layer count: the window
    inside the layers and the running module grow on the envelope max(x, min(x + P, 1e9 +
    P)), even where a larger module kind joins and the live limit is crossed."""
    lo, w = layout(dp=8, zero_stage=3), ds(zero3_max_reuse_distance=3_000_000_000)
    got = []
    for n, module in [(1, 1e8), (4, 1e8), (8, 1e8), (9, 4e8), (12, 4e8), (16, 9e8), (20, 1.2e9)]:
        sp = StageParams(
            dense=n * 1.5e8, expert=0.0, largest_layer=max(1.5e8, module), num_layers=n,
            largest_module=module,
        )  # fmt: skip
        got.append(deepspeed_gathered_elements(sp, lo, w))
    assert got == sorted(got)


def test_the_backward_gathers_only_what_the_forward_released():
    """The DP link time of a DeepSpeed ZeRO-3 step: per micro-batch one reduce-scatter, one
    gather for the forward and (1 - window / stage) of one for the backward. The test model
    at TP 8 holds 1.0e9 parameters a rank; its window is T = 5e8 and one module (its head,
    1.3e7, is under T): the backward gathers about half."""
    model, c = dense_model(), cluster(num_gpus=64)
    lo = layout(tp=8, dp=8, zero_stage=3)
    kept = Pricer(model, c, ds(global_batch=16)).estimate(lo)
    none = Pricer(model, c, ds(global_batch=16, zero3_max_reuse_distance=None))
    released = none.estimate(lo)
    sp = none.stage_params(lo, (model.num_layers, 0), 0)
    assert 0 < sp.largest_module < sp.largest_layer
    window = 5e8 + sp.largest_module
    share = 1 - window / (sp.dense + sp.expert)
    assert 0.4 < share < 0.6
    # link time per step m (g + 2a) without the window, m (g + a) with a window over the whole
    # stage, m (g + (1 + share) a) with DeepSpeed's
    whole = Pricer(model, c, ds(global_batch=16, zero3_max_reuse_distance=10**12)).estimate(lo)
    busy_kept = kept.dp_exposure["link_busy_s"]
    busy_released = released.dp_exposure["link_busy_s"]
    gather_s = busy_released - whole.dp_exposure["link_busy_s"]  # m a
    assert gather_s > 0
    assert busy_kept == pytest.approx(busy_released - (1 - share) * gather_s, rel=1e-12)
    assert kept.step_time_s < released.step_time_s
    # and the peak holds the window and the prefetch (the 5e7 bucket or one module) where
    # the per-layer model (no reuse rule) holds two layers
    prefetch = max(5e7, sp.largest_module)
    two_layers = 2 * sp.largest_layer * 2
    assert kept.peak_memory_gib - released.peak_memory_gib == pytest.approx(
        ((window + prefetch) * 2 - two_layers) / 2**30, rel=1e-6
    )


def test_the_deepspeed_export_writes_the_priced_distance():
    from factories import result_for

    from planner.export import plan_exports

    lo = layout(tp=1, dp=8, zero_stage=3)
    for distance, written in ((1_000_000_000, 1_000_000_000), (None, 0)):
        w = ds(global_batch=16, zero3_max_reuse_distance=distance)
        config = plan_exports.to_deepspeed_config(result_for(dense_model(), cluster(8), w, lo))
        zero = config["zero_optimization"]
        assert zero["stage3_max_reuse_distance"] == written
        # the prefetch and live limit deepspeed_gathered_elements prices with
        assert zero["stage3_prefetch_bucket_size"] == 50_000_000
        assert zero["stage3_max_live_parameters"] == 1_000_000_000
    zero1 = result_for(dense_model(), cluster(8), ds(global_batch=16), layout(dp=8, zero_stage=1))
    assert (
        "stage3_max_reuse_distance"
        not in plan_exports.to_deepspeed_config(zero1)["zero_optimization"]
    )


@pytest.mark.parametrize(
    "layer, layers, gathered",
    [
        (1e8, 16, 6e8),  # the running layer and 5 more to reach 5e8
        (2.18e8, 32, 4 * 2.18e8),  # Llama 3 8B's layers at TP 1: 3 ahead (6.5e8 >= 5e8)
        (8.6e8, 80, 2 * 8.6e8),  # a layer past 5e8 (Llama 3 70B at TP 1): one ahead
        (1e8, 4, 4e8),  # no more than the stage holds
    ],
)
def test_megatron_fsdp_gathers_whole_layers_ahead_until_its_prefetch_size(layer, layers, gathered):
    """Megatron-FSDP extends each all-gather with whole units until the prefetched elements
    reach suggested_AG_prefetch_size, max(1e9, 2 x mean unit) / 2 (megatron_fsdp.py,
    param_and_grad_buffer.py all_gather_params); FSDP1, FSDP2 and DeepSpeed gather one unit
    ahead. memory.zero3_gathered_elements, in the ZeRO-3 weights of state_bytes."""
    from cost_models.memory import zero3_gathered_elements

    sp = StageParams(dense=layer * layers, expert=0.0, largest_layer=layer, num_layers=layers)
    megatron = framework.MEGATRON.workload(workload())
    assert megatron.zero3_prefetch_elements == 500_000_000
    assert zero3_gathered_elements(sp, megatron) == pytest.approx(gathered)
    for p in (framework.TORCHTITAN, framework.DEEPSPEED, framework.LLM_FOUNDRY):
        w = p.workload(workload())
        assert w.zero3_prefetch_elements is None, p.name
        assert zero3_gathered_elements(sp, w) == min(2, layers) * layer
    shard = 6 * layer * layers / 8
    lo = layout(dp=8, zero_stage=3)
    assert state_bytes(sp, lo, 1, megatron)[0] == pytest.approx(shard + 2 * gathered)


def test_the_megatron_export_launches_the_priced_prefetch():
    """Megatron-FSDP's default prefetch needs no flag; another size is written as
    --suggested-communication-unit-size (twice it: megatron_fsdp.py halves it for the
    all-gather), and one unit ahead, which Megatron-FSDP cannot run, is refused."""
    from factories import result_for

    from cost_models.errors import InvalidInput
    from planner.export import plan_exports

    lo, flag = layout(tp=1, dp=8, zero_stage=3), "--suggested-communication-unit-size"

    def args(**over):
        w = framework.MEGATRON.workload(workload(global_batch=16, **over))
        return plan_exports.to_megatron_args(result_for(dense_model(), cluster(8), w, lo))

    assert flag not in args()
    got = args(zero3_prefetch_elements=250_000_000)
    assert got[got.index(flag) + 1] == "500000000"
    with pytest.raises(InvalidInput, match="zero3_prefetch_elements null"):
        args(zero3_prefetch_elements=None)


@pytest.mark.parametrize(
    "layer, freed, expected",
    [
        # 4.28e8 (Llama 3 70B at TP 2): capacity 1e9 -> 2 queued + the reduced + the filling
        # bucket = 4 in Megatron; priced on the envelope K = 1e9 / 4.28e8 + 2 = 4.34 buckets,
        # fp32, less K - 1 layers' freed activations
        (4.28e8, 1e8, (1e9 + 2 * 4.28e8) * 4 - (1e9 / 4.28e8 + 1) * 1e8),
        # 8.6e8 (TP 1): capacity 2 x 8.6e8 -> 2 + 2 = 4 buckets
        (8.6e8, 1e8, 4 * 8.6e8 * 4 - 3 * 1e8),
        # activations that outweigh a bucket: the first bucket is the backward's top
        (4.28e8, 1e10, 4.28e8 * 4),
    ],
)
def test_megatron_fsdp_backward_holds_its_queued_gradient_buckets(layer, freed, expected):
    """Megatron-FSDP queues each unit's unsharded fp32 gradient bucket for its reduce-scatter
    and frees queued buckets only past suggested_RS_queue_capacity, max(1e9, 2 x mean unit)
    (megatron_fsdp.py wait_for_previous_grad_reduce): memory.grad_queue_bytes, the backward's
    excess over its start. FSDP2, FSDP1 and DeepSpeed have no such queue."""
    from cost_models.memory import grad_queue_bytes
    from cost_models.stage import LayerActivations, stage_peak
    from cost_models.terms import ByKind

    sp = StageParams(dense=layer * 40, expert=0.0, largest_layer=layer, num_layers=40)
    lo = layout(tp=2, dp=8, zero_stage=3)
    megatron = framework.MEGATRON.workload(workload())
    assert grad_queue_bytes(sp, lo, megatron, 1, freed) == pytest.approx(expected)
    for p in (framework.TORCHTITAN, framework.DEEPSPEED, framework.LLM_FOUNDRY):
        assert grad_queue_bytes(sp, lo, p.workload(workload()), 1, freed) == 0.0
    assert grad_queue_bytes(sp, layout(tp=2, dp=8, zero_stage=1), megatron, 1, freed) == 0.0
    # a stage's peak: the backward start plus the queue, charged to the gradients, still the
    # backward phase
    acts = LayerActivations(own=ByKind(freed, None), none=ByKind(freed, None))
    parts = (5e10, 1.0, 2.0, 3.0, 4.0)
    got, phase = stage_peak(megatron, lo, sp, (40, 0), lambda: acts, parts, 1)
    assert phase == "backward"
    assert got == pytest.approx((5e10, 1.0, 2.0, 3.0 + expected, 4.0))


def test_megatron_fsdp_zero3_queue_grows_with_the_layer():
    """Megatron's bucket count floor(1e9 / L) + 2 drops from 5 to 4 as the largest layer grows
    past 1e9 / 3: priced on the envelope 1e9 / L + 2, the queue never shrinks as a larger layer
    kind joins a stage (the partition caps read memory as non-decreasing in each count)."""
    from cost_models.memory import grad_queue_bytes

    lo = layout(tp=2, dp=8, zero_stage=3)
    megatron = framework.MEGATRON.workload(workload())
    got = []
    for layer in (3.2e8, 3.3e8, 3.4e8, 3.5e8, 5e8, 6e8):
        sp = StageParams(dense=layer * 40, expert=0.0, largest_layer=layer, num_layers=40)
        got.append(grad_queue_bytes(sp, lo, megatron, 1, 1e8))
    assert got == sorted(got)
    # at most one bucket above Megatron's own count
    sp = StageParams(dense=3.4e8 * 40, expert=0.0, largest_layer=3.4e8, num_layers=40)
    megatrons = 4 * 3.4e8 * 4 - 3 * 1e8
    assert megatrons <= grad_queue_bytes(sp, lo, megatron, 1, 1e8) <= megatrons + 3.4e8 * 4


def test_a_stated_unit_size_is_the_zero3_queues_capacity():
    """A stated suggested_communication_unit_size (2 x a prefetch other than the default, as the
    export writes it) is the queue's capacity itself, even below one layer: C = 2e8 against
    4.28e8-element layers, K = 2e8 / 4.28e8 + 2 on the envelope (Megatron's floor: 2 buckets);
    unset, C = max(1e9, 2 x the layer) (megatron_fsdp.py)."""
    from cost_models.memory import grad_queue_bytes

    layer, freed = 4.28e8, 1e8
    sp = StageParams(dense=layer * 40, expert=0.0, largest_layer=layer, num_layers=40)
    lo = layout(tp=2, dp=8, zero_stage=3)
    stated = framework.MEGATRON.workload(workload(zero3_prefetch_elements=100_000_000))
    k = 2e8 / layer + 2
    assert grad_queue_bytes(sp, lo, stated, 1, freed) == pytest.approx(
        k * layer * 4 - (k - 1) * freed
    )
    unset = framework.MEGATRON.workload(workload())
    assert grad_queue_bytes(sp, lo, unset, 1, freed) > grad_queue_bytes(sp, lo, stated, 1, freed)


def test_megatron_fsdp_zero2_queues_buckets_of_megatrons_bucket_size():
    """optim_grads (ZeRO-2) has no FSDP units (mcore_fsdp_adapter.py), so its gradient buckets
    are Megatron's bucket size, max(4e7, 1e6 x dp x cp) (resolve_ddp_bucket_size), queued up
    to max(1e9, bucket) elements unset (megatron_fsdp.py): K = floor(1e9 / 4e7) + 2 = 27
    buckets. The i-th bucket is allocated whole at its first gradient, after (i - 1) x 4e7
    elements of gradients, floor((i - 1) x 4e7 / layer) layers done: at i = 27, 26 x 4e7 /
    2.14e8 = 4.86, so 4 layers' activations are freed. It applies only where the plan runs
    optim_grads, i.e. reduces in every backward: one micro-batch under the Megatron profile
    (planner/export/launch.py megatron_fsdp_strategy); with four, the distributed optimizer
    runs it, with DDP's bucket buffers instead."""
    from cost_models.memory import DP_BUCKET_ELEMENTS, buffer_bytes, grad_queue_bytes

    layer, freed = 2.14e8, 5.7e8
    sp = StageParams(dense=layer * 20, expert=0.0, largest_layer=layer, num_layers=20)
    lo = layout(tp=4, pp=4, dp=8, zero_stage=2)
    megatron = framework.MEGATRON.workload(workload())
    assert grad_queue_bytes(sp, lo, megatron, 1, freed) == pytest.approx(27 * 4e7 * 4 - 4 * freed)
    assert grad_queue_bytes(sp, lo, megatron, 4, freed) == 0.0
    # the queue replaces DDP's two in-flight buckets where it applies
    model = dense_model()
    assert buffer_bytes(model, megatron, lo, 1) == 0.0
    assert buffer_bytes(model, megatron, lo, 4) == DP_BUCKET_ELEMENTS * 4
    assert buffer_bytes(model, megatron, layout(tp=4, pp=4, dp=8, zero_stage=3), 4) == 0.0
    # Megatron-FSDP's own zero2_every_micro_batch: every backward reduces, any m
    every = megatron.model_copy(update={"dp_accumulation": "zero2_every_micro_batch"})
    assert grad_queue_bytes(sp, lo, every, 4, freed) == pytest.approx(27 * 4e7 * 4 - 4 * freed)
    # 2,000 DP ranks: buckets of 2e9 elements, the capacity max(1e9, 2e9): K = 3, the stage's
    # 4.28e9 elements in three buckets; the third comes 4e9 elements in, 18 layers done
    wide = layout(tp=4, pp=4, dp=2000, zero_stage=2)
    assert grad_queue_bytes(sp, wide, megatron, 1, freed) == pytest.approx(
        max(2e9 * 4, 4e9 * 4 - 9 * freed, 4.28e9 * 4 - 18 * freed)
    )
    # a stated unit size is the capacity itself (2 x 2.5e8 = 5e8): K = 12 + 2 = 14 buckets;
    # the most is held by the 11th, the last before the second layer is done (10 x 4e7 <
    # 2 x 2.14e8), against one layer freed; the 14th has two freed
    stated = megatron.model_copy(update={"zero3_prefetch_elements": 250_000_000})
    assert grad_queue_bytes(sp, lo, stated, 1, freed) == pytest.approx(11 * 4e7 * 4 - freed)
    # interleaved: the chunks after the first are built with disable_bucketing, one bucket of
    # the chunk's elements, allocated at its first gradient (training.py
    # per_chunk_disable_bucketing)
    vp2 = layout(tp=4, pp=4, dp=8, vp=2, zero_stage=2)
    assert grad_queue_bytes(sp, vp2, megatron, 1, freed) == pytest.approx(10 * layer * 4)
    # bf16 main gradients: a layer's buckets (2.14e8 x 2 B) weigh less than its activations,
    # so the top is the 6th bucket, the last before the first layer is done
    bf16 = megatron.model_copy(update={"main_grads": "bf16"})
    assert grad_queue_bytes(sp, lo, bf16, 1, freed) == pytest.approx(6 * 4e7 * 2)


def test_megatron_fsdp_export_states_the_unit_size_at_zero2_too():
    """The ZeRO-2 queue is priced from the same knob: a plan priced with a stated size says
    it to Megatron-FSDP, and one priced without a queue (null) is refused."""
    from factories import result_for

    from cost_models.errors import InvalidInput
    from planner.export import plan_exports

    lo = layout(tp=1, dp=8, zero_stage=2, micro_batch=1)
    flag = "--suggested-communication-unit-size"

    def args(**over):
        w = framework.MEGATRON.workload(workload(global_batch=8, **over))
        return plan_exports.to_megatron_args(result_for(dense_model(), cluster(8), w, lo))

    got = args()
    assert "optim_grads" in got and flag not in got
    got = args(zero3_prefetch_elements=250_000_000)
    assert got[got.index(flag) + 1] == "500000000"
    with pytest.raises(InvalidInput, match="zero3_prefetch_elements null"):
        args(zero3_prefetch_elements=None)


def test_the_estimate_says_how_much_of_the_weights_is_gathered():
    """StageMemory.gathered_gib is the gather part of weights_gib (memory.zero3_gathered_bytes):
    DeepSpeed's head, past the live limit, alone on Llama 3 70B at TP 1; 0 under ZeRO-1. The
    text report says it under the memory table."""
    import models_zoo
    from cost_models.units import GIB
    from planner.report.text import gathered_notes

    model, c = models_zoo.load_model("llama3-70b"), cluster(num_gpus=64)
    w = ds(global_batch=64, seq_len=4096)
    lo = layout(dp=64, zero_stage=3, recompute="full")
    e = Pricer(model, c, w).estimate(lo)
    head = model.vocab_size * model.hidden_size + model.hidden_size
    assert e.stage_memory[0].gathered_gib == pytest.approx(2 * head / GIB)
    note = f"weights: the ZeRO-3 shards and {2 * head / GIB:.1f} GiB of parameters held gathered"
    assert gathered_notes(e.stage_memory) == [f"{note} at the peak"]
    zero1 = Pricer(model, c, w).estimate(lo.with_update({"zero_stage": 1}))
    assert zero1.stage_memory[0].gathered_gib == 0.0 and gathered_notes(zero1.stage_memory) == []
