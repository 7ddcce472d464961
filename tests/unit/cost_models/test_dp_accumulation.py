"""Data-parallel collectives under gradient accumulation (Workload.dp_accumulation): how many
gradient reductions and parameter gathers a stage runs per step over its m micro-batches.
Counts by hand from the framework code stage.dp_rounds cites (torchtitan 0.3.0 trainer.py
train_step + FSDP2 post_backward; torch.distributed.pipelining's no-sync until the last
backward; DeepSpeed stage_1_and_2.py partition_gradients; Megatron's no_sync)."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, workload

from cost_models.calibration import overlap_slowdown_s
from cost_models.framework import DEEPSPEED, MEGATRON, TORCHTITAN, record_profile
from cost_models.memory import StageParams
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload
from cost_models.accumulation import dp_rounds
from cost_models.stage import dp_edge_buckets_s, dp_tier_times_s, fsdp_copies_s

P = 1e9
HBM = 1e12
SP = StageParams(dense=P, expert=0.0, largest_layer=0.1 * P, num_layers=8)


@pytest.mark.parametrize(
    "mode,zero,pp,expected",
    [
        # Megatron: one reduction after the last micro-batch, whatever the ZeRO stage below 3
        ("last_micro_batch", 0, 1, (1, 0)),
        ("last_micro_batch", 1, 1, (1, 1)),
        ("last_micro_batch", 2, 1, (1, 1)),
        # ZeRO-3 gathers before each forward and backward (Megatron-FSDP, DeepSpeed, FSDP2
        # without PP); FSDP2 under pipelining: test_pipelining_defers.py
        ("last_micro_batch", 3, 1, (4, 8)),
        ("every_micro_batch", 3, 1, (4, 8)),
        # torchtitan without PP: each micro-batch's backward reduces; ZeRO-2 ('never' reshard
        # after forward) gathers once per micro-batch; DDP (ZeRO-0) gathers nothing
        ("every_micro_batch", 0, 1, (4, 0)),
        ("every_micro_batch", 2, 1, (4, 4)),
        # ... with PP the pipelining schedule defers sync to the last backward
        ("every_micro_batch", 0, 2, (1, 0)),
        ("every_micro_batch", 2, 2, (1, 1)),
        # DeepSpeed: ZeRO-2 reduces every micro-batch, gathers once after the step; ZeRO-1 once
        ("zero2_every_micro_batch", 2, 1, (4, 1)),
        ("zero2_every_micro_batch", 1, 1, (1, 1)),
        ("zero2_every_micro_batch", 0, 1, (1, 0)),
    ],
)
def test_rounds_by_hand(mode, zero, pp, expected):
    assert dp_rounds(Layout(dp=8, pp=pp, zero_stage=zero), 4, mode) == expected


def test_one_micro_batch_is_one_round_in_every_mode():
    for mode in ("last_micro_batch", "every_micro_batch", "zero2_every_micro_batch"):
        for zero in (0, 1, 2):
            r, g = dp_rounds(Layout(dp=8, zero_stage=zero), 1, mode)
            assert (r, g) == (1, 0 if zero == 0 else 1)


def _stage_dp(mode: str, lo: Layout, compute_s: float, global_batch: int):
    """(exposed, total, one reduction s, one gather s) of the first stage of a 2-node
    torchtitan-like layout, with the Pricer's own spans."""
    model, cl = dense_model(num_layers=8), cluster(16)
    w = workload(seq_len=4096, global_batch=global_batch, dp_sync="fsdp", dp_accumulation=mode)
    p = Pricer(model, cl, w)
    span = p.spans(lo)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    parts = p.stage_dp_parts(lo, sp, compute_s, span, 0)
    exposed, total = parts.exposed_s, parts.total_s
    grads, gather = dp_tier_times_s(cl, lo, sp, span, None, 1, dp_sync="fsdp", comm=p.comm)
    return exposed, total, sum(grads), sum(gather), p


def test_two_micro_batch_fsdp_zero2_collectives_by_hand():
    """dp 16, ZeRO-2, micro-batch 1, global batch 32: m = 2 micro-batches per rank. torchtitan
    (no PP) runs per micro-batch one all-gather of every block in the forward and one
    reduce-scatter in the backward: 2 all-gathers + 2 reduce-scatters of the stage's
    parameters per step; Megatron's count is 1 + 1."""
    lo = Layout(dp=16, zero_stage=2, micro_batch=1)
    _, tt_total, rs, ag, p = _stage_dp("every_micro_batch", lo, 0.0, 32)
    _, mg_total, rs2, ag2, _ = _stage_dp("last_micro_batch", lo, 0.0, 32)
    assert (rs, ag) == (rs2, ag2) and rs > 0 and ag > 0
    assert tt_total == pytest.approx(2 * rs + 2 * ag, rel=1e-12)
    assert mg_total == pytest.approx(rs + ag, rel=1e-12)
    # nothing overlaps with no compute: all of it is exposed
    exposed, *_ = _stage_dp("every_micro_batch", lo, 0.0, 32)
    assert exposed == pytest.approx(2 * rs + 2 * ag, rel=1e-12)


def test_per_micro_batch_reductions_hide_behind_their_own_backward():
    """Each micro-batch's reduce-scatter overlaps its backward (2/3 of compute_s), each gather
    its forward (1/3): exposed m x (max(0, rs - bwd) + max(0, ag - fwd)), plus the edge buckets
    nothing hides (the step's last reduction bucket and its first gather bucket,
    stage.dp_edge_buckets_s) beyond that, plus the slowdown of the compute beside the hidden
    part."""
    lo = Layout(dp=16, zero_stage=2, micro_batch=1)
    _, _, rs, ag, p = _stage_dp("every_micro_batch", lo, 0.0, 32)
    compute_s = 1.5 * (rs + ag)  # fwd = (rs + ag) / 2, bwd = rs + ag
    exposed, total, *_ = _stage_dp("every_micro_batch", lo, compute_s, 32)
    fwd, bwd = compute_s / 3, 2 * compute_s / 3
    span = p.spans(lo)
    sp = p.stage_params(lo, p.stage_counts(lo)[0], 0)
    last, first = dp_edge_buckets_s(p.cluster, lo, sp, span, None, dp_sync="fsdp", comm=p.comm)
    assert 0 < last < rs and 0 < first < ag
    bare = 2 * (max(0.0, rs - bwd) + max(0.0, ag - fwd))
    bare += max(0.0, last - max(0.0, rs - bwd)) + max(0.0, first - max(0.0, ag - fwd))
    assert total == pytest.approx(2 * (rs + ag), rel=1e-12)
    assert exposed == pytest.approx(bare + overlap_slowdown_s(total - bare, p.cal), rel=1e-9)


def test_pipeline_and_ddp_counts_by_hand():
    """With pp 2 the same torchtitan ZeRO-2 layout reduces once per step; ZeRO-0 (DDP /
    replicate) without PP all-reduces every micro-batch and gathers nothing."""
    pp = Layout(dp=8, pp=2, zero_stage=2, micro_batch=1)
    _, tt, rs, ag, _ = _stage_dp("every_micro_batch", pp, 0.0, 32)
    assert tt == pytest.approx(rs + ag, rel=1e-12)
    ddp = Layout(dp=16, zero_stage=0, micro_batch=1)
    _, tt0, ar, ag0, _ = _stage_dp("every_micro_batch", ddp, 0.0, 64)  # m = 4
    assert ag0 == 0.0 and tt0 == pytest.approx(4 * ar, rel=1e-12)


def test_fsdp2_copies_follow_the_rounds():
    """ZeRO-2, shard 4, m = 2, torchtitan without PP: per micro-batch one gather's copy-in
    (6 B per shard element) and copy-out (4 B per element), one reduce's chunk_cat (6 B per
    element); the second reduction accumulates into the sharded gradient (12 B per shard
    element). With PP: one gather; the first backward casts its bf16 gradients into fp32
    accumulators (6 B per element), the second adds into them (10 B), and the one reduction
    copies fp32 into fp32 (8 B). Without FSDP2 under PP ('last_micro_batch'): once."""
    w = Workload(seq_len=4096, global_batch_seqs=64, fsdp_copies="fsdp2")
    every = w.model_copy(update={"dp_accumulation": "every_micro_batch"})
    lo = Layout(dp=4, zero_stage=2)
    got = fsdp_copies_s(lo, SP, 2, HBM, every)
    by_hand = 2 * (P / 4 * 6 + P * 4) + 2 * P * 6 + 1 * P / 4 * 12
    assert got == pytest.approx(by_hand / HBM, rel=1e-12)
    deferred = (P / 4 * 6 + P * 4 + P * (6 + 10 + 8)) / HBM
    assert fsdp_copies_s(lo.with_update({"pp": 2}), SP, 2, HBM, every) == pytest.approx(deferred)
    once = (P / 4 * 6 + P * 4 + P * 6) / HBM
    assert fsdp_copies_s(lo, SP, 2, HBM, w) == pytest.approx(once)


def test_profiles_switch_the_count():
    base = Workload(seq_len=4096, global_batch_seqs=64)
    assert base.dp_accumulation == "last_micro_batch"
    for prof, mode in (
        (MEGATRON, "last_micro_batch"),
        (TORCHTITAN, "every_micro_batch"),
        (DEEPSPEED, "zero2_every_micro_batch"),
        (record_profile("llm-foundry"), "last_micro_batch"),
    ):
        assert prof.workload(base).dp_accumulation == mode, prof.name
        assert prof.physics["dp_accumulation"].source
    mine = TORCHTITAN.workload(base.model_copy(update={"dp_accumulation": "last_micro_batch"}))
    assert mine.dp_accumulation == "last_micro_batch"


def test_estimate_grows_by_the_extra_rounds():
    """A torchtitan ZeRO-2 step with 2 micro-batches and no PP: the DP link time of the step
    (comm_total_s['dp']) doubles against the once-per-step count."""
    model, cl = dense_model(num_layers=8), cluster(16)
    lo = Layout(dp=16, zero_stage=2, micro_batch=1)
    w = workload(seq_len=4096, global_batch=32, dp_sync="fsdp")
    once = Pricer(model, cl, w).estimate(lo)
    every = Pricer(model, cl, w.model_copy(update={"dp_accumulation": "every_micro_batch"}))
    twice = every.estimate(lo)
    assert twice.comm_total_s["dp"] == pytest.approx(2 * once.comm_total_s["dp"], rel=1e-12)
    assert twice.step_time_s >= once.step_time_s
