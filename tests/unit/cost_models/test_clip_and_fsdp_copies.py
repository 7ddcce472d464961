"""Gradient clipping (Workload.grad_clip) and FSDP2's parameter / gradient copies
(Workload.fsdp_copies): issue 32 item 4, per-step work a single-GPU profile showed the model did
not price (bench/results/h100-2026-11-26/single-gpu-steps). Expected values by hand from the
framework code the docstrings cite."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, workload

from cost_models.framework import DEEPSPEED, MEGATRON, TORCHTITAN, record_profile
from cost_models.memory import StageParams
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload
from cost_models.stage import fsdp_copies_s, optimizer_bytes_per_param, stage_optimizer_s

P = 1e9  # parameters one GPU of the stage holds (after TP / EP), before ZeRO
HBM = 1e12
SP = StageParams(dense=0.75 * P, expert=0.25 * P, largest_layer=0.1 * P, num_layers=8)


def _w(**over) -> Workload:
    # these price the optimizer step's own bytes; the gradient memset of the same tail is
    # tests/unit/cost_models/test_grad_zeroing.py's, the buckets' NaN check
    # test_grad_bucket_passes.py's
    return Workload(seq_len=4096, global_batch_seqs=64, **{"grad_zeroing": False, "grad_nan_check": False, **over})


@pytest.mark.parametrize("clip,extra", [("none", 0), ("norm", 4), ("clip", 12)])
@pytest.mark.parametrize("zero,dp,shard", [(0, 8, 1), (1, 8, 8), (3, 4, 4)])
def test_clip_passes_by_hand(clip, extra, zero, dp, shard):
    """Norm: read the fp32 gradient (4 B); clip: + read and write it scaled (8 B); over the
    optimizer's shard (none under ZeRO-0, the ZeRO group otherwise)."""
    lo = Layout(dp=dp, zero_stage=zero)
    w = _w(grad_clip=clip)
    assert optimizer_bytes_per_param(w) == 30
    expected = P / shard * (30 + extra) / HBM
    assert stage_optimizer_s(lo, SP, HBM, w) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("ep,expert_shard", [(1, 8), (4, 2), (8, 1)])
def test_expert_states_step_over_the_expert_data_parallel_group(ep, expert_shard):
    """Under EP the expert parameters' optimizer states are sharded over the expert
    data-parallel group, dp x cp x tp / (ep x etp) (memory.shard_groups; Megatron's
    distributed optimizer over the expert DP group), not the dense ZeRO group: the step's
    passes cover the rank's own shard of each (memory.shard_elements), as its memory counts
    it. Priced over the dense group (dp 8) until 2026-11-29, the step of an EP8 rank was
    short by its whole expert shard."""
    lo = Layout(dp=8, ep=ep, zero_stage=1)
    w = _w(grad_clip="clip")
    expected = (SP.dense / 8 + SP.expert / expert_shard) * (30 + 12) / HBM
    if ep > 1:  # the expert buckets' EDP / DP pre-scale, read + write of 4 B each
        expected += SP.expert * 2 * 4 / HBM  # (stage.grad_bucket_pass_bytes)
    assert stage_optimizer_s(lo, SP, HBM, w) == pytest.approx(expected, rel=1e-12)


def test_fsdp2_copies_shard_experts_beside_ep_by_hand():
    """FSDP2 with EP shards the experts over the mesh beside EP (shard_groups' expert group):
    the copy-in and the accumulation read the rank's expert shard, and where that group is one
    rank (EP over the whole DP mesh) no collective runs for them and FSDP2 copies their reduce
    buffer into the output (4 + 4 B per element), as for the one-rank dense case."""
    w, m = _w(fsdp_copies="fsdp2"), 2
    for ep, es in ((4, 2), (8, 1)):
        got = fsdp_copies_s(Layout(dp=8, ep=ep, zero_stage=3), SP, m, HBM, w)
        shard = SP.dense / 8 + SP.expert / es
        one_rank = SP.expert if es == 1 else 0.0
        gathers = 2 * m * (shard * 6 + P * 4)
        reduces = m * (P * 6 + one_rank * 8) + (m - 1) * shard * 12
        assert got == pytest.approx((gathers + reduces) / HBM, rel=1e-12), ep


def test_clip_matches_the_measured_single_gpu_pass():
    """One H100, torch clip_grad_norm_ foreach over the 2,795,573,248 fp32 gradients of the
    8-layer Llama 3 8B-dims step: 12.4 ms measured (profile_s8b8-seq4096-mb1.json,
    _foreach_norm 4.16 ms + _foreach_mul_ 8.27 ms). 12 B per parameter at the H100's
    3.35 TB/s x 0.85: 11.8 ms, 5 % under."""
    params = 2_795_573_248
    sp = StageParams(dense=params, expert=0.0, largest_layer=0.0, num_layers=8)
    lo, hbm = Layout(zero_stage=3), 3350e9 * 0.85
    clip_s = stage_optimizer_s(lo, sp, hbm, _w(grad_clip="clip")) - stage_optimizer_s(
        lo, sp, hbm, _w(grad_clip="none")
    )
    assert clip_s == pytest.approx(params * 12 / hbm)
    assert clip_s == pytest.approx(12.4e-3, rel=0.06)


def test_fsdp2_copies_zero3_by_hand():
    """ZeRO-3 (reshard after forward), m micro-batches, shard group 8: per micro-batch two
    all-gathers (copy-in cast fp32 -> bf16 of the shard, 4 + 2 B per shard element; copy-out
    into the unsharded parameters, 2 + 2 B per element) and one reduce-scatter (chunk_cat bf16
    -> fp32, 2 + 4 B per element); every reduction after the first accumulates into the sharded
    fp32 gradient (4 + 4 + 4 B per shard element)."""
    lo, m, s = Layout(dp=8, zero_stage=3), 4, 8
    got = fsdp_copies_s(lo, SP, m, HBM, _w(fsdp_copies="fsdp2"))
    gathers = 2 * m * (P / s * 6 + P * 4)
    reduces = m * P * 6 + (m - 1) * P / s * 12
    assert got == pytest.approx((gathers + reduces) / HBM, rel=1e-12)


def test_fsdp2_copies_one_rank_and_zero2_by_hand():
    """One rank (shard group 1): FSDP2 copies the reduce buffer into the output instead of a
    collective (4 + 4 B per element). ZeRO-2 under the default dp_accumulation
    ('last_micro_batch') is gathered and reduced once per step, as stage_dp_parts counts it: no
    accumulation (torchtitan's per-micro-batch count: test_dp_accumulation.py)."""
    w = _w(fsdp_copies="fsdp2")
    one = fsdp_copies_s(Layout(zero_stage=3), SP, 1, HBM, w)
    assert one == pytest.approx((2 * (P * 6 + P * 4) + P * (6 + 8)) / HBM, rel=1e-12)
    z2 = fsdp_copies_s(Layout(dp=4, zero_stage=2), SP, 8, HBM, w)
    assert z2 == pytest.approx((P / 4 * 6 + P * 4 + P * 6) / HBM, rel=1e-12)
    # off: the switch, or a ZeRO stage that keeps parameters whole
    assert fsdp_copies_s(Layout(dp=4, zero_stage=3), SP, 8, HBM, _w()) == 0.0
    assert fsdp_copies_s(Layout(dp=4, zero_stage=1), SP, 8, HBM, w) == 0.0


def test_fsdp2_copies_match_the_measured_single_gpu_step():
    """The 8-layer Llama 3 8B-dims step on one H100 (FSDP2 on one rank, ZeRO-3, one
    micro-batch): bfloat16_copy_kernel 10.8 ms (the copy-in casts, plus ~2 ms of the model's own
    casts), Memcpy DtoD 13.5 ms (copy-outs and the one-rank reduce copies), chunk_cat 9.1 ms:
    33.3 ms. Priced at 3.35 TB/s x 0.85: 33.4 ms."""
    params = 2_795_573_248
    sp = StageParams(dense=params, expert=0.0, largest_layer=0.0, num_layers=8)
    got = fsdp_copies_s(Layout(zero_stage=3), sp, 1, 3350e9 * 0.85, _w(fsdp_copies="fsdp2"))
    assert got == pytest.approx(params * 34 / (3350e9 * 0.85))
    assert got == pytest.approx(33.3e-3, rel=0.03)


def test_profiles_switch_the_terms():
    base = _w()
    # the defaults are Megatron's, as for every physics field
    assert (base.grad_clip, base.fsdp_copies) == ("clip", "none")
    for prof, clip, copies in (
        (MEGATRON, "clip", "none"),
        (TORCHTITAN, "clip", "fsdp2"),
        (DEEPSPEED, "clip", "none"),
        (record_profile("llm-foundry"), "clip", "none"),
    ):
        w = prof.workload(base)
        assert (w.grad_clip, w.fsdp_copies) == (clip, copies), prof.name
        assert prof.physics["grad_clip"].source and prof.physics["fsdp_copies"].source
    # a field the user sets wins over the profile
    mine = TORCHTITAN.workload(_w(grad_clip="norm", fsdp_copies="none"))
    assert (mine.grad_clip, mine.fsdp_copies) == ("norm", "none")


def test_estimate_reports_copies_as_compute_and_clip_as_optimizer():
    """The copies run on the compute stream (breakdown compute), the clip passes in the
    optimizer term; the step grows by exactly both."""
    model, cl = dense_model(num_layers=8), cluster(8)
    lo = Layout(dp=8, zero_stage=3)
    plain = workload(seq_len=4096, global_batch=32, grad_clip="none")
    both = plain.model_copy(update={"grad_clip": "clip", "fsdp_copies": "fsdp2"})
    a, b = Pricer(model, cl, plain), Pricer(model, cl, both)
    ea, eb = a.estimate(lo), b.estimate(lo)
    sp = b.stage_params(lo, b.stage_counts(lo)[0], 0)
    copies = b.stage_fsdp_copies_s(lo, sp)
    clip = (sp.dense + sp.expert) / 8 * 12 / b.hbm_bytes_per_s
    assert copies > 0
    da = {k: eb.breakdown_s[k] - ea.breakdown_s[k] for k in ea.breakdown_s}
    assert da["compute"] == pytest.approx(copies, rel=1e-9)
    assert da["optimizer"] == pytest.approx(clip, rel=1e-9)
    assert eb.step_time_s - ea.step_time_s == pytest.approx(copies + clip, rel=1e-6)
