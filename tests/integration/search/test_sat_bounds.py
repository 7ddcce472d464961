"""The branch-and-bound lower bound never exceeds the cost model's step time, and the pruned
table holds the exhaustive top k."""

import random

import factories

from cost_models import topology
from cost_models.estimate import estimate
from cost_models.specs import Workload
from planner.search import exhaustive
from planner.search.bounds import StepLowerBound
from planner.search.candidates import enumerate_layouts
from planner.search.table import PRUNED, build_table
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


def test_dp_terms_and_memory_equal_the_estimate_on_deep_pipelines():
    """The DP + optimizer terms and the peak memory, computed from the stages that can hold the
    maximum (first, last, first middle stage of each layer count), equal the estimate's over
    all stages; the bound with them stays below the step time."""
    rng = random.Random(5)
    cluster = factories.cluster(64, ib_gb_per_s=25)
    for model in (factories.dense_model(num_layers=30), factories.moe_model(num_layers=16)):
        work = Workload(seq_len=4096, global_batch_seqs=128)
        space = SearchSpace(max_vp=4, micro_batches=(1, 2))
        layouts, _ = enumerate_layouts(model, cluster, work, space)
        deep = [lo for lo in layouts if lo.pp >= 4]
        assert deep
        bound = StepLowerBound(model, cluster, work)
        for lo in rng.sample(deep, min(150, len(deep))):
            e = estimate(model, cluster, work, lo)
            dp_opt = e.breakdown_s["dp_comm"] + e.breakdown_s["optimizer"]
            assert bound.dp_optimizer_s(lo, topology.spans(cluster, lo)) == dp_opt, lo
            assert bound.peak_memory_gib(lo) == e.peak_memory_gib, lo
            full = bound.placement_step_s(lo, with_dp=True)
            assert bound.placement_step_s(lo) <= full <= e.step_time_s, lo
            assert full >= e.step_time_s * (1 - 1e-8)  # tight: the step time up to rounding


def test_lower_bound_below_every_estimate_under_all_to_all_cp():
    """The all-to-all CP (Workload.cp_attention "a2a") enters the bound through the same
    per-layer term as the estimate; layouts with CP > 1 are compared directly."""
    model = factories.dense_model(num_layers=16, sliding_window=256, full_attention_every=2)
    cluster = factories.cluster(32, ib_gb_per_s=25)
    work = Workload(seq_len=16384, global_batch_seqs=32, cp_attention="a2a")
    layouts, _ = enumerate_layouts(model, cluster, work, SearchSpace(max_vp=2))
    with_cp = [lo for lo in layouts if lo.cp > 1]
    assert with_cp  # the window does not rule CP out under a2a
    bound = StepLowerBound(model, cluster, work)
    for lo in random.Random(5).sample(with_cp, min(120, len(with_cp))):
        step = estimate(model, cluster, work, lo).step_time_s
        assert 0 < bound.step_s(lo) <= step, lo
        assert bound.placement_step_s(lo) <= step, lo
    space = SearchSpace(max_vp=1, micro_batches=(1,), cp=2)
    oracle, _, _ = exhaustive.search(model, cluster, work, space, SolverOptions(top_k=3))
    table = build_table(model, cluster, work, space, 3)
    kept = {(e.layout, e.step_time_s) for e in table.estimates}
    assert all((e.layout, e.step_time_s) in kept for e in oracle)
