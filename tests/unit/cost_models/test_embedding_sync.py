"""The shared word embedding's gradient all-reduce between the first and last pipeline stages
(Megatron finalize_model_grads._allreduce_word_embedding_grads; DeepSpeed's tied-weight reduce):
tied LM heads and MTP's look-up at pp > 1, priced in the stages' exposed DP time."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, workload

from cost_models import estimate
from cost_models.commtable import collective_tier_s
from cost_models.memory import stage_params
from cost_models.rankmap import Group
from cost_models.specs import Layout
from cost_models.stage import GRAD_REDUCE_BYTES, embedding_sync_tier_s

TIED = dense_model(tied_embeddings=True)
WORD = 128256 * 4096  # vocab x hidden


def test_only_the_end_stages_of_a_shared_embedding_hold_the_copy():
    lo = Layout(pp=4, tp=2)
    shared = [stage_params(TIED, lo, 8, 0, r).shared_embedding for r in range(4)]
    assert shared == [WORD / 2, 0.0, 0.0, WORD / 2]
    mtp = dense_model(mtp_num_layers=1)
    assert stage_params(mtp, lo, 8, 0, 3).shared_embedding == WORD / 2
    assert stage_params(mtp, lo, 8, 0, 0).shared_embedding == WORD / 2
    untied = dense_model()
    assert all(stage_params(untied, lo, 8, 0, r).shared_embedding == 0 for r in range(4))
    # one stage holds both ends: nothing is duplicated
    assert stage_params(TIED, Layout(pp=1), 32, 0, 0).shared_embedding == 0


def _span(pp_members: list[int]) -> dict:
    return {Group.PP: pp_members, Group.DP_CP: [1, 1]}


def test_the_all_reduce_is_the_two_ends_full_main_gradient():
    c = cluster(64)
    lo = Layout(pp=4)
    sp = stage_params(TIED, lo, 8, 0, 0)
    # the PP group over 4 nodes (1 member per NVLink domain): the two ends meet over IB
    got = embedding_sync_tier_s(c, lo, sp, _span([1, 4]))
    want = collective_tier_s("all_reduce", WORD * GRAD_REDUCE_BYTES, [1, 2], c.tiers, 1)
    assert got == pytest.approx(want) and got[1] > 0 and got[0] == 0
    # the PP group inside one node: over NVLink, faster
    inside = embedding_sync_tier_s(c, lo, sp, _span([4, 4]))
    assert inside[1] == 0 and 0 < sum(inside) < sum(got)
    # bf16 main gradients halve the bytes
    half = embedding_sync_tier_s(c, lo, sp, _span([1, 4]), grad_bytes=2)
    assert half == pytest.approx(
        collective_tier_s("all_reduce", WORD * 2, [1, 2], c.tiers, 1)
    )


@pytest.mark.parametrize(
    "lo,dp_sync",
    [
        (Layout(pp=4, pp_schedule="dualpipe"), "megatron"),  # both ends on the same ranks
        (Layout(pp=4), "fsdp"),  # torchtitan: no shared copy reduced
        (Layout(pp=1), "megatron"),
    ],
)
def test_no_all_reduce_where_the_ends_share_a_rank_or_the_framework_has_none(lo, dp_sync):
    c = cluster(64)
    sp = stage_params(TIED, Layout(pp=4), 8, 0, 0)
    assert sum(embedding_sync_tier_s(c, lo, sp, _span([1, 4]), dp_sync=dp_sync)) == 0


def test_estimate_reports_and_charges_it():
    c = cluster(64)
    w = workload(global_batch=64)
    lo = Layout(tp=8, pp=4, dp=2)
    tied = estimate(TIED, c, w, lo)
    d = tied.dp_exposure
    assert d is not None and d["stage"] in (0, 3) and d["shared_embedding_all_reduce_s"] > 0
    # the end stage's exposed DP is at least the all-reduce, which nothing hides
    assert tied.breakdown_s["dp_comm"] >= d["shared_embedding_all_reduce_s"]
    untied = estimate(dense_model(), c, w, lo)
    assert (untied.dp_exposure or {}).get("shared_embedding_all_reduce_s", 0) == 0
