"""The branch-and-bound lower bound never exceeds the cost model's step time, and the pruned
table holds the exhaustive top k."""

import random

import factories

from cost_models.estimate import estimate
from cost_models.specs import Workload
from planner import exhaustive
from planner.candidates import enumerate_layouts
from planner.sat.bounds import StepLowerBound
from planner.sat.table import PRUNED, build_table
from planner.types import SearchSpace, SolverOptions


def test_lower_bound_below_every_estimate():
    rng = random.Random(7)
    for model in (factories.dense_model(num_layers=16), factories.moe_model()):
        cluster = factories.cluster(32, ib_gb_per_s=25)
        work = Workload(seq_len=4096, global_batch_seqs=64)
        layouts, _ = enumerate_layouts(model, cluster, work, SearchSpace(max_vp=2))
        bound = StepLowerBound(model, cluster, work)
        sample = rng.sample(layouts, min(150, len(layouts)))
        tight = 0
        for lo in sample:
            lb, step = bound.step_s(lo), estimate(model, cluster, work, lo).step_time_s
            assert 0 < lb <= step, lo
            placed = bound.placement_step_s(lo)
            assert lb * (1 - 1e-6) <= placed <= step, lo
            tight += lb > 0.5 * step
        assert tight > 0  # the bound is not vacuous


def test_pruned_table_contains_the_exhaustive_top_k():
    model, cluster = factories.dense_model(num_layers=16), factories.cluster(16)
    work = Workload(seq_len=4096, global_batch_seqs=32)
    space = SearchSpace(max_vp=2, micro_batches=(1, 2))
    oracle, _, _ = exhaustive.search(model, cluster, work, space, SolverOptions(top_k=5))
    table = build_table(model, cluster, work, space, 5)
    assert table.rejected[PRUNED] > 0  # pruning happened
    kept = {(e.layout, e.step_time_s) for e in table.estimates}
    assert all((e.layout, e.step_time_s) in kept for e in oracle)


def test_memory_shortcut_equals_the_estimate_exactly():
    rng = random.Random(11)
    for model in (factories.dense_model(num_layers=16), factories.moe_model()):
        cluster = factories.cluster(32)
        work = Workload(seq_len=4096, global_batch_seqs=64)
        layouts, _ = enumerate_layouts(model, cluster, work, SearchSpace(max_vp=2))
        bound = StepLowerBound(model, cluster, work)
        for lo in rng.sample(layouts, min(150, len(layouts))):
            assert bound.peak_memory_gib(lo) == estimate(model, cluster, work, lo).peak_memory_gib
