"""Solve the CP-SAT model: status, objective, bound, gap, and the top k by forbid-and-resolve."""

from __future__ import annotations

import time

from ortools.sat.python import cp_model

from cost_models.errors import NoFeasiblePlan
from cost_models.specs import Cluster, Estimate, ModelSpec, Workload

from ..types import SearchSpace, SolverOptions, SolveStats
from .build import build
from .exhaustive import objective_s as objective_of
from .exhaustive import usable_memory_gib, why_none
from .scale import bound_s as scaled_bound_s
from .table import HARD_MARGIN_S, build_table


def _solver(options: SolverOptions, remaining_s: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_time_in_seconds = max(0.01, remaining_s)
    p.random_seed = options.seed
    # Deterministic mode: one worker and a fixed seed give the same search every run.
    p.num_workers = 1 if options.deterministic else options.num_workers
    return solver


def nothing_scored(time_limit_s: float) -> str:
    """The NoFeasiblePlan message when the deadline came before any plan was scored."""
    return (
        f"nothing scored within the time limit ({time_limit_s:g} s + {HARD_MARGIN_S:g} s margin "
        "for enumerating candidates and scoring the first plan): raise --time-limit or narrow "
        "the search (pin --tp/--pp, --max-nodes, fewer --micro-batches, --no-order-search)"
    )


def search(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
) -> tuple[list[Estimate], SolveStats, dict[str, int]]:
    """Ranked plans (best first, top_k), stats, and rejection counts; same contract as exhaustive."""
    start = time.perf_counter()
    # The time limit bounds the whole search: the branch and bound stops at the deadline (once a
    # plan that fits is scored) and CP-SAT gets what is left of it.
    table = build_table(
        model, cluster, workload, space, options.top_k, deadline=start + options.time_limit_s
    )
    if not table.estimates and table.timed_out:
        raise NoFeasiblePlan(nothing_scored(options.time_limit_s))
    if not table.estimates:
        usable = usable_memory_gib(cluster, space)
        raise NoFeasiblePlan(
            why_none(cluster, space, usable, table.num_legal, table.smallest, table.rejected)
        )
    batch_max = space.batch_max
    sat = build(table.estimates, batch_max)
    ranked: list[Estimate] = []
    status_name, objective_s, bound_s = "UNKNOWN", None, None
    for k in range(min(options.top_k, len(sat.estimates))):
        if k > 0 and time.perf_counter() - start > options.time_limit_s:
            break  # past the limit: the rest of the top k comes from the sort below
        solver = _solver(options, options.time_limit_s - (time.perf_counter() - start))
        status = solver.solve(sat.model)
        if status != cp_model.OPTIMAL:
            # Out of time mid-solve: a merely FEASIBLE pick may not be the k-th best; the sort
            # below ranks the rest exactly (and the output does not depend on the clock).
            break
        chosen = next(i for i, x in enumerate(sat.choose) if solver.boolean_value(x))
        ranked.append(sat.estimates[chosen])
        if k == 0:
            status_name = solver.status_name(status)
            objective_s = objective_of(sat.estimates[chosen], space)
            bound_s = scaled_bound_s(
                solver.best_objective_bound, sat.tie, batch_max, sat.quantum_s
            )
            if status == cp_model.OPTIMAL:
                bound_s = objective_s  # proved: the bound is the optimum itself
        # Forbid this plan and re-solve for the next one (ranks are distinct, so no ties).
        sat.model.add(sat.choose[chosen] == 0)
        sat.model.clear_hints()
    if len(ranked) < min(options.top_k, len(sat.estimates)):
        # The time limit ran out before CP-SAT ranked the whole top k (or found even the first
        # plan within _solver's 10 ms floor): the rest, in the order of the very coefficients it
        # minimizes (distinct, so the same order its forbid-and-resolve loop would give). The
        # table's branch and bound already guarantees its top k (or is deadline-stopped, below).
        seen = {id(e) for e in ranked}
        order = sorted(range(len(sat.estimates)), key=sat.coefficients.__getitem__)
        rest = [sat.estimates[i] for i in order if id(sat.estimates[i]) not in seen]
        ranked += rest[: options.top_k - len(ranked)]
        if objective_s is None:
            # The sort finds the optimum of the same objective over the same table, so a table
            # the deadline did not cut is as proved as CP-SAT's OPTIMAL (and the output does not
            # depend on whether CP-SAT got its 10 ms); a cut one is FEASIBLE, as below.
            status_name = "OPTIMAL" if table.open_bound_s is None else "FEASIBLE"
            objective_s = objective_of(ranked[0], space)
            bound_s = objective_s if table.open_bound_s is None else table.open_bound_s
    if table.open_bound_s is not None and objective_s is not None:
        # Stopped by the deadline: the optimum of what was scored is only an incumbent. Whatever
        # was left open costs at least its bound, so min(objective, open bound) bounds the optimum.
        status_name = "FEASIBLE"
        bound_s = min(objective_s, bound_s, table.open_bound_s)
    gap = None if objective_s is None else max(0.0, (objective_s - bound_s) / objective_s)
    stats = SolveStats(
        engine="cp-sat",
        status=status_name,
        objective=objective_s,
        best_bound=bound_s,
        gap=gap,
        wall_time_s=time.perf_counter() - start,
        num_candidates=table.num_candidates,
        num_scored=table.num_scored,
        num_feasible=len(table.estimates),
        objective_unit=space.objective_unit,
    )
    return ranked, stats, dict(table.rejected)
