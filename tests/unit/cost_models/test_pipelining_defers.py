"""Data-parallel collectives and memory of sharded data parallelism under gradient
accumulation with pipeline parallelism, counted by hand from the framework source (not from the
code under test):

- torch 2.14 torch/distributed/pipelining/stage.py backward_maybe_with_nosync: every backward
  of an FSDPModule stage runs with set_requires_gradient_sync(False) and
  set_reshard_after_backward(False); perform_reduce_grad after the m-th backward reduces once.
- torchtitan 0.3.0 ZeRO-3 = fsdp_reshard_after_forward 'always': every forward reshards
  (FSDPParamGroup.post_forward), a backward leaves its units unsharded, and unshard() returns
  when already unsharded. Schedule1F1B on a stage with w warm-up forwards runs
  F^w (B F)^(m-w) B^w: the w forwards gather, each B after an F gathers (m - w + 1), an F
  after a B does not: m + 1. GPipe F^m B^m: m + 1.
- ZeRO-2 = 'never': one gather, kept to the end of the step.
- The unsharded gradients are accumulated in the fp32 reduce dtype
  (FSDPParam.to_accumulated_grad_if_needed) until the one reduce-scatter.
- Megatron-FSDP (megatron-core 0.19.2 megatron_fsdp.py grad_reduce_every_bprop): optim_grads
  and optim_grads_params reduce-scatter in every backward; DeepSpeed stage3 the same
  (engine.py: partition_gradients 'communicates during non gradient accumulation boundaries').
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from factories import cluster, dense_model, workload

from cost_models.accumulation import dp_rounds, grads_sharded_between_micro_batches
from cost_models import framework
from cost_models.framework import TORCHTITAN
from cost_models.memory import StageParams, state_bytes
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload
from cost_models.pipeline import num_microbatches
from cost_models.stage import _per_microbatch_bytes, dp_tier_times_s, fsdp_copies_s
from cost_models.units import GIB
from planner.export import launch

P = 1e9
HBM = 1e12
SP = StageParams(dense=P, expert=0.0, largest_layer=0.1 * P, num_layers=8)
TT = "every_micro_batch"  # the torchtitan profile's mode


@pytest.mark.parametrize(
    "zero,pp,vp,m,expected",
    [
        (3, 2, 1, 4, (1, 5)),  # 'always': m + 1 gathers, one reduce-scatter
        (3, 4, 1, 8, (1, 9)),
        (3, 2, 1, 1, (1, 2)),  # one micro-batch: its forward and its backward gather
        (3, 2, 2, 4, (1, 5)),  # per model chunk (Interleaved1F1B, vp <= 3)
        (2, 2, 1, 4, (1, 1)),  # 'never': gathered once, reduced once
        (2, 4, 2, 8, (1, 1)),
        (3, 1, 1, 4, (4, 8)),  # no pipelining: FSDP2 hooks every micro-batch
    ],
)
def test_torchtitan_rounds_by_hand(zero, pp, vp, m, expected):
    assert dp_rounds(Layout(dp=8, pp=pp, vp=vp, zero_stage=zero), m, TT) == expected


@pytest.mark.parametrize("mode", ["last_micro_batch", "zero2_every_micro_batch"])
def test_megatron_fsdp_and_deepspeed_zero3_reduce_every_backward(mode):
    """Megatron-FSDP optim_grads_params and DeepSpeed stage 3, with or without PP: a
    reduce-scatter per backward, a gather per forward and per backward."""
    for pp in (1, 4):
        assert dp_rounds(Layout(dp=8, pp=pp, zero_stage=3), 4, mode) == (4, 8)
    # Megatron-FSDP optim_grads / DeepSpeed ZeRO-2: every backward, one gather after the step
    assert dp_rounds(Layout(dp=8, pp=4, zero_stage=2), 4, "zero2_every_micro_batch") == (4, 1)


def _stage(lo: Layout, global_batch: int):
    """(link-busy total, one reduction s, one gather s, exposed at zero compute) of the first
    stage of a torchtitan-like layout on 2 nodes, with the Pricer's own spans."""
    model, cl = dense_model(num_layers=8), cluster(16)
    w = workload(seq_len=4096, global_batch=global_batch, dp_sync="fsdp", dp_accumulation=TT)
    p = Pricer(model, cl, w)
    span = p.spans(lo)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    parts = p.stage_dp_parts(lo, sp, 0.0, span, 0)
    exposed, total = parts.exposed_s, parts.total_s
    grads, gather = dp_tier_times_s(cl, lo, sp, span, None, 1, dp_sync="fsdp", comm=p.comm)
    return total, sum(grads), sum(gather), exposed


def test_zero3_with_pp_prices_one_reduce_and_m_plus_one_gathers():
    """dp 8 x pp 2, micro-batch 1, global batch 32: m = 4 per rank. One reduce-scatter and
    5 all-gathers per step (main priced 4 and 8); with no compute to hide behind, all of it is
    exposed."""
    lo = Layout(dp=8, pp=2, zero_stage=3, micro_batch=1)
    total, rs, ag, exposed = _stage(lo, 32)
    assert rs > 0 and ag > 0
    assert total == pytest.approx(rs + 5 * ag, rel=1e-12)
    assert exposed == pytest.approx(rs + 5 * ag, rel=1e-12)


def test_zero3_with_pp_memory_holds_unsharded_weights_and_fp32_grads():
    """ZeRO-3 'always' under pipelining, dp 8, 1e9 parameters on the stage: the fp32 shard
    (4 B x P/8), every unit's bf16 weights at the end of a backward (2 B x P), the unsharded
    fp32 gradient accumulators (4 B x P), Adam's moments on the shard (8 B x P/8)."""
    # torchtitan's FSDP2: the fp32 shard is the parameter (no 16-bit shard beside it)
    w = Workload(
        seq_len=4096,
        global_batch_seqs=64,
        dp_accumulation=TT,
        zero3_16bit_shard=False,
        zero3_prefetch_elements=None,
    )
    weights, grads, optim = state_bytes(SP, Layout(dp=8, pp=2, zero_stage=3), 4, w)
    assert (weights, grads, optim) == pytest.approx((4 * P / 8 + 2 * P, 4 * P, 8 * P / 8))
    # without PP the FSDP2 hooks reshard: shard + two gathered layers, sharded gradients
    weights, grads, _ = state_bytes(SP, Layout(dp=8, zero_stage=3), 4, w)
    assert (weights, grads) == pytest.approx((4 * P / 8 + 2 * 0.1 * P * 2, 4 * P / 8))


@pytest.mark.parametrize(
    "mode,pp,m,sharded",
    [
        (TT, 1, 4, True),  # FSDP2 reduce-scatters each backward into sharded_param.grad
        (TT, 2, 4, False),  # pipelining: unsharded fp32 accumulators to the end
        (TT, 2, 1, False),  # ... even with one micro-batch
        ("zero2_every_micro_batch", 2, 4, True),  # DeepSpeed / Megatron-FSDP optim_grads
        ("last_micro_batch", 1, 4, False),  # one reduction after the last micro-batch
        ("last_micro_batch", 1, 1, True),
    ],
)
def test_zero2_gradients_between_micro_batches(mode, pp, m, sharded):
    lo = Layout(dp=8, pp=pp, zero_stage=2)
    assert grads_sharded_between_micro_batches(lo, m, mode) is sharded
    w = Workload(seq_len=4096, global_batch_seqs=64, dp_accumulation=mode)
    _, grads, _ = state_bytes(SP, lo, m, w)
    assert grads == pytest.approx(4 * P / 8 if sharded else 4 * P)


def test_zero3_with_pp_fsdp2_copies_by_hand():
    """shard 4, m = 2, ZeRO-3 under pipelining: 3 gathers (copy-in 6 B per shard element,
    copy-out 4 B per element), the first backward's cast into fp32 (6 B per element), the
    second's add (10 B), one fp32 chunk_cat (8 B)."""
    w = Workload(seq_len=4096, global_batch_seqs=64, fsdp_copies="fsdp2", dp_accumulation=TT)
    got = fsdp_copies_s(Layout(dp=4, pp=2, zero_stage=3), SP, 2, HBM, w)
    by_hand = 3 * (P / 4 * 6 + P * 4) + P * (6 + 10 + 8)
    assert got == pytest.approx(by_hand / HBM, rel=1e-12)


def _estimate(zero: int, m: int, tp: int = 2):
    return SimpleNamespace(layout=Layout(dp=4, tp=tp, zero_stage=zero), num_microbatches=m)


def test_megatron_export_runs_the_priced_zero2():
    """The Megatron profile prices ZeRO-2 with one reduction after the last micro-batch: with
    m > 1 that is the distributed optimizer, not Megatron-FSDP optim_grads (which reduces in
    every backward); with one micro-batch, or a workload stating Megatron-FSDP's mode, it is."""
    assert launch.megatron_fsdp_strategy(_estimate(2, 4)) is None
    assert launch.megatron_fsdp_strategy(_estimate(2, 1)) == "optim_grads"
    assert launch.megatron_fsdp_strategy(_estimate(2, 4), "zero2_every_micro_batch") == (
        "optim_grads"
    )
    assert launch.megatron_fsdp_strategy(_estimate(3, 4)) == "optim_grads_params"
    assert launch.megatron_env(_estimate(2, 4)) == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert launch.megatron_env(_estimate(2, 1)) == {}


def test_torchtitan_refuses_more_chunks_than_pipelining_keeps_gathered():
    """More than 3 model chunks per rank with FSDP2 sharding under PP: the runtime schedule
    reshards and re-gathers chunks (schedules.py max_active_stages 3), which is not priced, so
    the torchtitan profile (search and export) refuses it."""
    model = dense_model(num_layers=16)
    bad = framework.profile_violations(TORCHTITAN, model, Layout(dp=2, pp=2, vp=4, zero_stage=3))
    assert any("max_active_stages" in v for v in bad)
    for ok in (Layout(dp=2, pp=2, vp=2, zero_stage=3), Layout(dp=2, pp=2, vp=4, zero_stage=0)):
        assert not any("max_active_stages" in v for v in framework.profile_violations(
            TORCHTITAN, model, ok
        ))


def test_zero3_with_pp_peak_counts_the_weights_beside_one_micro_batch_less():
    """The same stage's peak is max(k A, (k-1) A + W) + the rest, A one micro-batch's
    activations, W the unsharded bf16 weights (2 B per parameter): the estimate's memory and
    the partition caps' agree, and equal state_bytes' weights less min(W, A)."""
    model, cl = dense_model(num_layers=8), cluster(16)
    w = workload(seq_len=4096, global_batch=64, dp_sync="fsdp", dp_accumulation=TT)
    p = Pricer(model, cl, w)
    lo = Layout(dp=8, pp=2, zero_stage=3, micro_batch=1)
    counts = p.stage_counts(lo)
    sp = p.stage_params(lo, counts[0], 0)
    per_mb = _per_microbatch_bytes(lo, counts[0], p.activations_per_mb(lo))
    full_w = 2 * (sp.dense + sp.expert)
    weights, _, _ = state_bytes(sp, lo, num_microbatches(64, lo), p.workload)
    got = p.stage_memory(lo, 0, counts).weights_gib * GIB
    assert got == pytest.approx(weights - min(full_w, per_mb), rel=1e-12)
    # without pipelining (FSDP2 hooks) or under Megatron-FSDP: no credit, nothing unsharded
    mg = Pricer(model, cl, workload(seq_len=4096, global_batch=64))
    mg_weights, _, _ = state_bytes(sp, lo, num_microbatches(64, lo), mg.workload)
    assert mg.stage_memory(lo, 0, counts).weights_gib * GIB == pytest.approx(mg_weights)


def test_partition_caps_price_the_same_peak():
    """The CP-SAT stage split's memory caps (stage.stage_memory) and the estimate's memory
    (Pricer) count the credit alike."""
    from planner.search.partition_caps import MemoryCaps

    model, cl = dense_model(num_layers=8), cluster(16)
    w = workload(seq_len=4096, global_batch=64, dp_sync="fsdp", dp_accumulation=TT)
    p = Pricer(model, cl, w)
    lo = Layout(dp=8, pp=2, zero_stage=3, micro_batch=1)
    counts = p.stage_counts(lo)
    caps = MemoryCaps(model, p.workload, 80.0, p)
    for r, (nd, nm) in enumerate(counts):
        want = p.stage_memory(lo, r, counts).total_gib
        assert caps.stage_memory_gib(lo, r, nd, nm) == pytest.approx(want, rel=1e-12)


def test_stage_peak_takes_the_credit_once_on_hand_bytes():
    """The one composition both memory paths use (stage.stage_peak): W = 2 B x 1e9
    parameters = 2e9 B of unsharded weights, A = 4 layers x a bytes per micro-batch. a = 1e8:
    A = 4e8 < W, credit 4e8; a = 1e9: A = 4e9 > W, credit W = 2e9. No credit with interleaving,
    without PP, or under Megatron's accumulation (nothing deferred)."""
    from cost_models.stage import LayerActivations, stage_memory, stage_peak
    from cost_models.terms import ByKind

    sp = StageParams(dense=1e9, expert=0.0, largest_layer=2.5e8, num_layers=4)
    w = Workload(
        seq_len=4096,
        global_batch_seqs=64,
        dp_accumulation="every_micro_batch",
        zero3_prefetch_elements=None,  # FSDP2's: no Megatron-FSDP gradient queue
    )
    lo = Layout(dp=8, pp=2, zero_stage=3, micro_batch=1)
    parts = (1.0, 2.0, 10e9, 3.0, 4.0)

    def acts(a: float) -> LayerActivations:
        return LayerActivations(own=ByKind(dense=a, moe=None), none=ByKind(dense=a, moe=None))

    for a, credit in ((1e8, 4e8), (1e9, 2e9)):
        got = stage_peak(w, lo, sp, (4, 0), lambda a=a: acts(a), parts, 4)[0]
        assert got == (1.0, 2.0, 10e9 - credit, 3.0, 4.0)
    for lo_, w_ in (
        (lo.with_update({"vp": 2}), w),
        (Layout(dp=16, zero_stage=3), w),
        (lo, w.model_copy(update={"dp_accumulation": "last_micro_batch"})),
    ):
        assert stage_peak(w_, lo_, sp, (4, 0), lambda: acts(1e8), parts, 4)[0] == parts
    # the CP-SAT caps' composition subtracts it once too (was a second copy of the rule)
    model = dense_model(num_layers=8)
    mem = stage_memory(model, w, lo, 0, (4, 0), acts(1e8), 4, 10e9, 3.0, 4.0, sp=sp)
    assert mem.weights_gib * GIB == pytest.approx(10e9 - 4e8, rel=1e-12)
