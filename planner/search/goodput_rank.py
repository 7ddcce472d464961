"""`--objective goodput`: an exact top-K by goodput from the throughput search, with its proof rule.

Goodput is not a sum of step terms, so the branch and bound (planner/search/table.py) keeps
ranking by step time and this module re-ranks its exact top-K. The rule that makes the
re-ranking exact (docs/goodput.md#search):

  goodput(plan) <= tokens/s/GPU(plan) x U, with U = cost_models.goodput.ettr_upper_bound: an
  ETTR no plan on the cluster can beat (Daly's ETTR <= e^(-R/M) at any interval, R at least the
  relaunch; stragglers only add time; the spares' share of GPUs is the same for every plan).

The search ranks every plan (top_variants: each ZeRO stage and rank order its own entry) and
proves that nothing it did not rank is faster than its K-th plan. So every unranked plan has
goodput <= U x tokens/s/GPU of that K-th plan. When that is no more than the k-th best goodput
among the ranked plans, the goodput top-k is proved (PROVED); else K grows (x4) and the search
runs again, up to MAX_K or the time limit, after which the status is STOPPED with that bound as
best_bound. A search itself STOPPED keeps STOPPED, its open step-time bound turned into a
goodput bound the same way. The objective and bound are goodput tokens/s/GPU (higher is better).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from cost_models.goodput import Goodput
from cost_models.specs import Estimate

from ..types import SolveStats
from .candidates import family_key
from .scale import TIME_QUANTUM_S

MAX_K = 1024
"""Largest search top-K the re-ranking asks for before it reports STOPPED."""
GROWTH = 4


@dataclass(frozen=True, slots=True)
class GoodputRanking:
    ranked: list[Estimate]
    figures: list[Goodput]
    stats: SolveStats
    rejections: dict[str, int]


Search = Callable[[int], tuple[list[Estimate], SolveStats, dict[str, int]]]


def throughput_above(e: Estimate) -> float:
    """Tokens/s/GPU no plan ranked after `e` can beat: the ranks compare times in TIME_QUANTUM_S,
    so a later plan may be up to one quantum faster than e."""
    return e.tokens_per_s_per_gpu * e.step_time_s / max(e.step_time_s - TIME_QUANTUM_S, 1e-12)


def open_throughput(stats: SolveStats, e: Estimate) -> float:
    """The search's own open bound (a time, STOPPED) as tokens/s/GPU, scaled from plan e:
    a step time (fixed batch) or seconds per sequence (a batch range) both scale inversely."""
    if stats.best_bound is None or stats.objective is None or stats.best_bound <= 0:
        return float("inf")
    return e.tokens_per_s_per_gpu * stats.objective / stats.best_bound


def unranked_bound(ranked: list[Estimate], stats: SolveStats, k: int, upper: float) -> float:
    """Goodput no plan outside `ranked` can beat (0 when the search ranked every plan)."""
    bound = 0.0
    if len(ranked) >= k:
        bound = upper * throughput_above(ranked[k - 1])
    if stats.status != "PROVED":
        bound = max(bound, upper * open_throughput(stats, ranked[0]))
    return bound


def distinct(scored: list, top_k: int, family: Callable = family_key) -> list:
    """The best-goodput plan of each of the first top_k families (candidates.family_key: ZeRO
    stages and rank orders are variants of one plan, as in the step-time ranking; plan_key with
    top_variants). Keeping fewer than the search ranked only makes the proof's k-th goodput
    smaller, so the rule stays sound."""
    seen: set[tuple] = set()
    out = []
    for t in scored:
        key = family(t[2].layout)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out[:top_k]


def rank_by_goodput(
    search: Search,
    score: Callable[[Estimate], Goodput],
    upper: float,
    top_k: int,
    deadline: float,
    family: Callable = family_key,
    out_of_work: Callable[[], bool] = lambda: False,
) -> GoodputRanking:
    """Re-rank the throughput search's top-K by goodput, growing K until the rule proves it,
    K reaches MAX_K, or the searches' work budget (`out_of_work`) or the deadline is spent."""
    start = time.perf_counter()
    k = top_k * GROWTH
    while True:
        ranked, stats, rejections = search(k)
        scored = sorted(
            ((score(e), i, e) for i, e in enumerate(ranked)),
            key=lambda t: (-t[0].goodput_tokens_per_s_per_gpu, t[1]),
        )
        bound = unranked_bound(ranked, stats, k, upper)
        kept = distinct(scored, top_k, family)
        kth = kept[-1][0].goodput_tokens_per_s_per_gpu
        proved = stats.status == "PROVED" and bound <= kth
        if proved or k >= MAX_K or out_of_work() or time.perf_counter() > deadline:
            break
        k *= GROWTH
    best = scored[0][0].goodput_tokens_per_s_per_gpu
    open_bound = best if proved else max(best, bound)
    stopped_by = stats.stopped_by
    if not proved and stopped_by is None and k < MAX_K:  # the K loop itself ran out
        stopped_by = "work_limit" if out_of_work() else "time_limit"
    final = stats.model_copy(
        update={
            "status": "PROVED" if proved else "STOPPED",
            "stopped_by": None if proved else stopped_by,
            "objective": best,
            "best_bound": open_bound,
            "gap": (open_bound - best) / open_bound if open_bound > 0 else 0.0,
            "objective_unit": "goodput_tokens_per_s_per_gpu",
            "wall_time_s": time.perf_counter() - start,
        }
    )
    kept = distinct(scored, top_k, family)
    return GoodputRanking([t[2] for t in kept], [t[0] for t in kept], final, rejections)
