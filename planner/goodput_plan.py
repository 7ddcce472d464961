"""Goodput in plan() and estimate(): score ranked plans, or search by goodput (--objective goodput).

Thin glue between the search (planner/search) and the pure model (cost_models.goodput); the
proof rule of the goodput ranking is in planner/search/goodput_rank.py.
"""

from __future__ import annotations

import time

from cost_models import goodput as _goodput
from cost_models.goodput import Goodput, Reliability
from cost_models.specs import Cluster, Estimate, ModelSpec, Workload

from .search.candidates import family_key, plan_key
from .search.goodput_rank import GoodputRanking, rank_by_goodput
from .search.work import default_work_limit
from .types import SearchSpace, SolverOptions

OBJECTIVES = ("step_time", "goodput")
"""SolverOptions.objective's choices (the CLI's --objective)."""


def plan_workload(workload: Workload, e: Estimate) -> Workload:
    """The workload a plan was scored with (its own global batch under a batch range)."""
    return workload.model_copy(update={"global_batch_seqs": e.global_batch_seqs})


def score(
    model: ModelSpec, cluster: Cluster, workload: Workload, e: Estimate, rel: Reliability
) -> Goodput:
    return _goodput.goodput(model, cluster, plan_workload(workload, e), e, rel)


def search_by_goodput(
    engine,
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
    rel: Reliability,
) -> GoodputRanking:
    """The engine's throughput search, every plan ranked on its own (top_variants), re-ranked by
    goodput with the admissible bound of cost_models.goodput.ettr_upper_bound."""
    deadline = time.perf_counter() + options.time_limit_s
    # One work budget for every search of the growing K, spent in order, so that where it runs
    # out (not the clock) the same input ranks the same plans (work.default_work_limit).
    budget = default_work_limit(options)
    used = [0.0]

    def search(k: int):
        left = max(1e-3, deadline - time.perf_counter())
        update = {"top_k": k, "top_variants": True, "time_limit_s": left}
        if budget is not None:
            update["work_limit"] = max(1e-3, budget - used[0])
        ranked, stats, rejections = engine.search(
            model, cluster, workload, space, options.model_copy(update=update)
        )
        used[0] += stats.work_units
        return ranked, stats.model_copy(update={"work_units": used[0]}), rejections

    return rank_by_goodput(
        search,
        lambda e: score(model, cluster, workload, e, rel),
        _goodput.ettr_upper_bound(rel, cluster),
        options.top_k,
        deadline,
        plan_key if options.top_variants else family_key,
        out_of_work=lambda: budget is not None and used[0] >= budget,
    )
