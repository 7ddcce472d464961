"""The deterministic work limit (planner/search/work.py WORK_PER_*, work.default_work_limit): a
search it cuts short stops at the same entry every time, so the same input gives the same plans
whatever the machine's speed; the wall-clock time limit stays the backstop and says so."""

import factories
import pytest
from test_sat_partition import _deep_pipeline_case

from cost_models.specs import Workload
from planner.goodput_plan import search_by_goodput
from planner.search import solve as sat
from planner.search.table import PRUNED, WORK_LIMITED, WORK_PER_MODEL, build_table
from planner.types import SearchSpace, SolverOptions


def _instance():
    model = factories.dense_model(num_layers=32, hidden_size=4096)
    cluster = factories.cluster(256, ib_gb_per_s=50)
    work = Workload(seq_len=4096, global_batch_seqs=512)
    return model, cluster, work, SearchSpace(max_vp=4)


def _plans(table):
    return [(e.layout, e.step_time_s) for e in table.estimates]


def test_a_work_limit_stops_at_the_same_point_every_time():
    model, cluster, work, space = _instance()
    full = build_table(model, cluster, work, space, 3)
    assert full.stopped_by is None and full.work_units > 0
    limit = full.work_units / 3
    cuts = [build_table(model, cluster, work, space, 3, work_limit=limit) for _ in range(2)]
    for cut in cuts:
        assert cut.stopped_by == "work_limit" and cut.timed_out
        assert 1 <= cut.num_scored < full.num_scored
        assert cut.rejected[WORK_LIMITED] > 0 and PRUNED not in cut.rejected
        # Past the limit by at most the one entry popped last (and what it scored).
        assert limit < cut.work_units < full.work_units
        # The open bound is a valid lower bound on every plan the cut search did not score.
        seen = {e.layout for e in cut.estimates}
        unseen = [e.step_time_s for e in full.estimates if e.layout not in seen]
        assert unseen and min(unseen) >= cut.open_bound_s
    assert _plans(cuts[0]) == _plans(cuts[1])
    assert cuts[0].open_bound_s == cuts[1].open_bound_s
    assert cuts[0].work_units == cuts[1].work_units
    # A limit above the whole search's work changes nothing.
    roomy = build_table(model, cluster, work, space, 3, work_limit=2 * full.work_units)
    assert roomy.stopped_by is None and _plans(roomy) == _plans(full)
    assert roomy.work_units == full.work_units


def test_default_work_limit_is_half_the_time_limits_worth_and_only_when_deterministic():
    assert sat.default_work_limit(SolverOptions(time_limit_s=60)) == pytest.approx(
        sat.WORK_SHARE_OF_TIME * sat.WORK_UNITS_PER_S * 60
    )
    assert sat.default_work_limit(SolverOptions(work_limit=123.0)) == 123.0
    assert sat.default_work_limit(SolverOptions(deterministic=False, work_limit=123.0)) is None


def test_search_says_which_limit_stopped_it():
    model, cluster, work, space = _instance()
    _, proved, rejected = sat.search(model, cluster, work, space, SolverOptions(top_k=3))
    assert proved.status == "PROVED" and proved.stopped_by is None and proved.work_units > 0
    assert WORK_LIMITED not in rejected
    opts = SolverOptions(top_k=3, work_limit=proved.work_units / 4)
    ranked, by_work, rejected = sat.search(model, cluster, work, space, opts)
    again, _, _ = sat.search(model, cluster, work, space, opts)
    assert by_work.status == "STOPPED" and by_work.stopped_by == "work_limit"
    assert rejected[WORK_LIMITED] > 0
    assert [e.layout for e in ranked] == [e.layout for e in again]
    # Without `deterministic` only the clock limits it.
    clock = SolverOptions(top_k=3, deterministic=False, time_limit_s=1e-9, work_limit=1e9)
    _, by_time, _ = sat.search(model, cluster, work, space, clock)
    assert by_time.status == "STOPPED" and by_time.stopped_by == "time_limit"


def test_the_partition_search_counts_its_models_and_a_limit_waits_for_the_first_plan():
    """stage_split search: the even split's search and the partition search share one budget,
    and the partition's CP-SAT models, tables and memory caps are counted in it. Here the even
    split is out of memory, so no plan exists before the partition's: a limit below the work
    that plan takes still ends with it (as the time limit does), the same way every time."""
    model, cluster, work, _lo, _even, space = _deep_pipeline_case()
    ranked, full, _ = sat.search(model, cluster, work, space, SolverOptions(top_k=1))
    assert full.status == "PROVED" and full.num_partition_models >= 1
    plain = space.model_copy(update={"stage_split": "even"})
    even_work = build_table(model, cluster, work, plain, 1).work_units
    assert full.work_units > even_work + WORK_PER_MODEL * full.num_partition_models
    opts = SolverOptions(top_k=1, work_limit=even_work * 1.01)
    runs = [sat.search(model, cluster, work, space, opts) for _ in range(2)]
    for plans, stats, _ in runs:
        assert [e.step_time_s for e in plans] == [e.step_time_s for e in ranked]
        assert stats.work_units == full.work_units


def test_goodput_ranking_spends_one_budget_across_its_searches():
    from cost_models.goodput import Reliability
    from planner.search import solve

    model, cluster, work, space = _instance()
    rel = Reliability()
    opts = SolverOptions(top_k=2, objective="goodput")
    full = search_by_goodput(solve, model, cluster, work, space, opts, rel)
    assert full.stats.work_units > 0
    tight = opts.model_copy(update={"work_limit": full.stats.work_units / 3})
    runs = [search_by_goodput(solve, model, cluster, work, space, tight, rel) for _ in range(2)]
    assert [e.layout for e in runs[0].ranked] == [e.layout for e in runs[1].ranked]
    assert runs[0].stats.work_units == runs[1].stats.work_units
    assert runs[0].stats.work_units < full.stats.work_units


def test_the_exhaustive_oracle_counts_the_same_work_and_repeats():
    from planner.search import exhaustive

    model, cluster, work, _space = _instance()
    small = SearchSpace(max_vp=1, micro_batches=(1,), tp=2)
    _, full, _ = exhaustive.search(model, cluster, work, small, SolverOptions(top_k=3))
    assert full.status == "PROVED" and full.stopped_by is None and full.work_units > 0
    opts = SolverOptions(top_k=3, work_limit=full.work_units / 3)
    runs = [exhaustive.search(model, cluster, work, small, opts) for _ in range(2)]
    for ranked, stats, rejected in runs:
        assert stats.status == "STOPPED" and stats.stopped_by == "work_limit"
        assert rejected[WORK_LIMITED] > 0 and stats.num_scored < full.num_scored
        # the same candidates, reached or not (as the branch and bound counts them)
        assert stats.num_candidates == full.num_candidates
    assert [e.layout for e in runs[0][0]] == [e.layout for e in runs[1][0]]
    assert runs[0][1].work_units == runs[1][1].work_units
