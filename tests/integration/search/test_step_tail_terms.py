"""The per-step terms over a stage's parameters (gradient clipping, FSDP2 copies: issue 32 item
4) stay inside the search's invariants: every bound <= the estimate, the with-DP placement bound
is the step itself, and the CP-SAT stage partition's objective is the priced step."""

from __future__ import annotations

import random
from itertools import combinations, pairwise

import factories
import pytest

from cost_models import topology
from cost_models.estimate import estimate
from cost_models.framework import TORCHTITAN
from cost_models.specs import Layout, Workload
from planner.search.bounds import StepLowerBound
from planner.search.candidates import enumerate_layouts
from planner.search.partition import PartitionSolver
from planner.types import SearchSpace

TERMS = {"grad_clip": "clip", "fsdp_copies": "fsdp2"}


def _work(seq: int, batch: int) -> Workload:
    return Workload(seq_len=seq, global_batch_seqs=batch, **TERMS)


def test_bounds_hold_with_clip_and_fsdp_copies():
    """Random layouts over ZeRO 0-3 (the shape bound is computed once per shape and must hold
    for every ZeRO stage; the copies exist only under ZeRO 2 / 3)."""
    rng = random.Random(32)
    cluster = factories.cluster(32, ib_gb_per_s=25)
    for model in (factories.dense_model(num_layers=16), factories.moe_model()):
        work = _work(4096, 64)
        space = SearchSpace(max_vp=2, micro_batches=(1, 2), zero_stages=(0, 1, 2, 3))
        layouts, _ = enumerate_layouts(model, cluster, work, space)
        assert {lo.zero_stage for lo in layouts} >= {2, 3}
        bound = StepLowerBound(model, cluster, work)
        copies_seen = False
        for lo in rng.sample(layouts, min(120, len(layouts))):
            e = estimate(model, cluster, work, lo)
            shape = lo.model_copy(update={"zero_stage": 0, "dp_shard": None})
            assert 0 < bound.step_s(shape) <= e.step_time_s, lo
            assert bound.placement_step_s(shape) <= e.step_time_s, lo
            full = bound.placement_step_s(lo, with_dp=True)
            assert e.step_time_s * (1 - 1e-8) <= full <= e.step_time_s, lo
            copies_seen |= lo.zero_stage >= 2
        assert copies_seen


def _compositions(total: int, parts: int):
    for cuts in combinations(range(1, total), parts - 1):
        yield tuple(b - a for a, b in pairwise((0, *cuts, total)))


@pytest.mark.parametrize("pp,vp", [(2, 1), (4, 1), (2, 2)])
@pytest.mark.parametrize("zero", [2, 3])
def test_partition_objective_is_the_priced_step_with_the_terms(pp, vp, zero):
    """tp 2, dp 4 (ZeRO group 4): the copies and the clip passes are per stage and proportional
    to its parameters; the split CP-SAT picks is as fast as the best composition, in
    estimate()'s own step."""
    model = factories.moe_model(num_layers=8)
    cluster = factories.cluster(8 * pp, ib_gb_per_s=25)
    work = TORCHTITAN.workload(Workload(seq_len=4096, global_batch_seqs=32))
    assert (work.grad_clip, work.fsdp_copies) == ("clip", "fsdp2")
    lo = Layout(tp=2, pp=pp, dp=4, vp=vp, zero_stage=zero)
    scored = [
        estimate(model, cluster, work, lo, layers_per_stage=c)
        for c in _compositions(model.num_layers, pp * vp)
    ]
    best = min(e.step_time_s for e in scored)
    split = PartitionSolver(model, cluster, work, 1e9).split(lo, topology.spans(cluster, lo))
    e = estimate(model, cluster, work, lo, layers_per_stage=split)
    assert e.step_time_s == pytest.approx(best, rel=1e-9, abs=1e-9)
    off = estimate(model, cluster, work.model_copy(update={"fsdp_copies": "none"}), lo)
    assert estimate(model, cluster, work, lo).breakdown_s["compute"] > off.breakdown_s["compute"]
