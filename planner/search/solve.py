"""The search: the branch and bound of planner/search/table.py and the certificate it earns.

The branch and bound scores candidates best bound first and stops once every open bound is above
the k-th best plan, so its ranking is proved by construction; no solver call restates it.
Certificate (SolveStats.status, docs/search.md#certificate):

  PROVED      nothing left unexplored can beat the k-th plan: best_bound == objective, gap 0.
  STOPPED     cut short by the work limit (work.default_work_limit: the same input stops at the
              same point) or the time limit (the wall-clock backstop; SolveStats.stopped_by says
              which), or a stage-partition CP-SAT model (stage_split "search") stopped at its
              own work limit before a proof: best_bound is the smallest
              bound left open (above the objective when #1 is proved but not the ranking below it),
              gap = max(0, objective - bound) / objective.
  INFEASIBLE  proved that nothing fits: NoFeasiblePlan is raised (the CLI exits 1).
"""

from __future__ import annotations

import time

from cost_models.errors import NoFeasiblePlan
from cost_models.specs import Cluster, Estimate, ModelSpec, Workload

from ..types import SearchSpace, SolverOptions, SolveStats
from .candidates import family_key, nothing_scored, plan_key
from .exhaustive import objective_s as objective_of
from .exhaustive import select_families, usable_memory_gib, why_none
from .table import build_table
from .work import WORK_SHARE_OF_TIME, WORK_UNITS_PER_S, default_work_limit  # noqa: F401 (re-exported)

PROVED, STOPPED, INFEASIBLE = "PROVED", "STOPPED", "INFEASIBLE"


def search(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
) -> tuple[list[Estimate], SolveStats, dict[str, int]]:
    """Ranked plans (best first, top_k), stats, and rejection counts; same contract as exhaustive."""
    start = time.perf_counter()
    # The time limit bounds the whole search: the branch and bound stops at the deadline once a
    # plan that fits is scored.
    family = plan_key if options.top_variants else family_key
    work_limit = default_work_limit(options)
    seed: list[Estimate] = []
    seed_scored, seed_work = 0, 0.0
    if space.stage_split == "search":
        # The even-split search first (seconds): its plans are plans of this space too (a shape
        # whose even split fits keeps it), so they seed the partition search's cutoff, which
        # then never ends on a plan slower than the default's, even when its time limit stops it.
        even = build_table(
            model, cluster, workload, space.model_copy(update={"stage_split": "even"}),
            options.top_k, deadline=start + options.time_limit_s, family=family,
            tolerance=options.simplicity_tolerance, work_limit=work_limit,
        )  # fmt: skip
        seed, seed_scored, seed_work = list(even.estimates), even.num_scored, even.work_units
    table = build_table(
        model,
        cluster,
        workload,
        space,
        options.top_k,
        deadline=start + options.time_limit_s,
        family=family,
        tolerance=options.simplicity_tolerance,
        seed=seed,
        # One budget for both searches; a seeded search ends once a plan is in its table.
        work_limit=None if work_limit is None else max(0.0, work_limit - seed_work),
    )
    if not table.estimates and table.timed_out:
        raise NoFeasiblePlan(nothing_scored(options.time_limit_s))
    if not table.estimates:
        usable = usable_memory_gib(cluster, space)
        raise NoFeasiblePlan(
            why_none(cluster, space, usable, table.num_legal, table.smallest, table.rejected)
        )
    batch_max = space.batch_max
    # Same order and families as the oracle: time (per sequence with a range) in quanta, then
    # simplicity; the best plan of each family.
    ranked = select_families(table.estimates, options, batch_max)
    objective = objective_of(ranked[0], space)
    open_bounds = [b for b in (table.open_bound_s, table.unproved_bound_s) if b is not None]
    status, bound = PROVED, objective
    if open_bounds:
        # The real smallest open bound, also when it is above the objective (then nothing
        # unscored beats #1, but the ranking below it is not proved; issue 28).
        status, bound = STOPPED, min(open_bounds)
    gap = max(0.0, (objective - bound) / objective) if objective > 0 else 0.0
    stats = SolveStats(
        engine="branch-and-bound",
        status=status,
        objective=objective,
        best_bound=bound,
        gap=gap,
        wall_time_s=time.perf_counter() - start,
        work_units=seed_work + table.work_units,
        stopped_by=table.stopped_by if table.timed_out else None,
        num_candidates=table.num_candidates,
        num_scored=table.num_scored + seed_scored,
        num_feasible=len(table.estimates),
        objective_unit=space.objective_unit,
        num_partition_models=len(table.partition_results),
        num_unproved_partitions=table.num_unproved_partitions,
        partition_max_gap=max(
            (r.gap for r in table.partition_results if r.gap is not None), default=None
        ),
    )
    return ranked, stats, dict(table.rejected)
