"""--time-limit bounds the whole search: a deadline during the branch and bound stops it, hands
what was scored to CP-SAT and reports FEASIBLE with a valid bound and gap."""

import time

import factories

from cost_models.specs import Workload
from planner.search import solve as sat
from planner.search.table import PRUNED, TIMED_OUT, build_table
from planner.types import SearchSpace, SolverOptions


def _instance():
    model = factories.dense_model(num_layers=32, hidden_size=4096)
    cluster = factories.cluster(256, ib_gb_per_s=50)
    work = Workload(seq_len=4096, global_batch_seqs=512)
    return model, cluster, work, SearchSpace(max_vp=4)


def test_deadline_in_the_past_stops_the_branch_and_bound_after_the_first_plan():
    model, cluster, work, space = _instance()
    full = build_table(model, cluster, work, space, 3)
    cut = build_table(model, cluster, work, space, 3, deadline=time.perf_counter() - 1.0)
    assert full.open_bound_s is None and cut.open_bound_s is not None
    assert 1 <= cut.num_scored < full.num_scored
    assert cut.rejected[TIMED_OUT] > 0 and PRUNED not in cut.rejected
    # Every legal placement is scored, out of memory or left open (counted), as in the full run.
    counted = (
        cut.num_scored
        + sum(cut.rejected.values())
        - sum(
            v for k, v in full.rejected.items() if k not in (PRUNED, "peak memory above usable HBM")
        )
    )
    assert counted == cut.num_legal == full.num_legal
    # The open bound is a valid lower bound on every plan the cut search did not score ...
    seen = {e.layout for e in cut.estimates}
    unseen = [e.step_time_s for e in full.estimates if e.layout not in seen]
    assert unseen and min(unseen) >= cut.open_bound_s
    # ... so with the best plan scored it bounds the optimum.
    optimum = min(e.step_time_s for e in full.estimates)
    assert min(cut.open_bound_s, min(e.step_time_s for e in cut.estimates)) <= optimum


def test_tiny_time_limit_gives_feasible_with_a_valid_bound_and_gap():
    model, cluster, work, space = _instance()
    _, stats, _ = sat.search(model, cluster, work, space, SolverOptions(top_k=3))
    assert stats.status == "PROVED" and stats.gap == 0.0
    optimum = stats.objective
    ranked, cut, _ = sat.search(
        model, cluster, work, space, SolverOptions(top_k=3, time_limit_s=1e-9)
    )
    assert cut.status == "STOPPED"
    assert cut.objective == ranked[0].step_time_s >= optimum
    # best_bound is the smallest bound left open, also above #1 (issue 28: then #1 is proved,
    # the rest of the top k and the tie-break are not), so it bounds the optimum with #1.
    assert min(cut.best_bound, cut.objective) <= optimum <= cut.objective
    assert cut.gap >= 0
    assert abs(cut.gap - max(0.0, cut.objective - cut.best_bound) / cut.objective) < 1e-12
    assert cut.num_scored < stats.num_scored


def test_generous_time_limit_is_optimal():
    model, cluster, work, space = _instance()
    _, stats, rejected = sat.search(model, cluster, work, space, SolverOptions(time_limit_s=600))
    assert stats.status == "PROVED" and stats.best_bound == stats.objective
    assert TIMED_OUT not in rejected
