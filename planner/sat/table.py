"""The candidate table: every legal (layout, placement), scored only where it can still matter.

Exact branch and bound. Each (shape, recompute, ZeRO) gets a lower bound on its step time that
holds for every placement (planner/sat/bounds.py). Candidates are scored with the full cost model
in bound order, all distinct placements of a shape together (memory does not depend on the order,
so one estimate decides whether all of them fit). Once the bound exceeds the k-th best step time
found, no remaining candidate can enter the top k and the search stops. The table therefore holds
every plan of the exhaustive top k, with the same floats; tests check it against exhaustive.py.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

from cost_models.estimate import estimate
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..candidates import CANONICAL_ORDER, OrderCache, legal_bases
from ..types import SearchSpace
from .bounds import StepLowerBound
from .scale import TIME_QUANTUM_S, time_to_quanta

OOM = "peak memory above usable HBM"
PRUNED = "step-time lower bound above the k-th best plan (not scored)"


@dataclass
class CandidateTable:
    """Scored plans that fit (the top k is guaranteed among them) and the search counts."""

    estimates: list[Estimate] = field(default_factory=list)
    num_candidates: int = 0  # every layout x distinct placement, legal or not
    num_legal: int = 0
    num_scored: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    smallest: Estimate | None = None  # the legal layout closest to fitting, when none fits


def usable_memory_gib(cluster: Cluster, space: SearchSpace) -> float:
    return cluster.gpu.hbm_gib * (1 - space.memory_headroom)


def build_table(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    top_k: int,
    *,
    prune: bool = True,
) -> CandidateTable:
    table = CandidateTable()
    bases, table.rejected = legal_bases(model, cluster, workload, space)
    orders = OrderCache(cluster, space.search_order)
    bound = StepLowerBound(model, cluster, workload)
    usable = usable_memory_gib(cluster, space)
    # (bound in quanta, bound, base index, recompute, zero): sorted, this is the visiting order.
    queue: list[tuple[int, float, int, int, int]] = []
    for b, base in enumerate(bases):
        n_orders = len(orders.orders(base))
        for ri, recompute in enumerate(space.recompute):
            lb = bound.step_s(base.model_copy(update={"recompute": recompute}))
            for zi in range(len(space.zero_stages)):
                queue.append((time_to_quanta(lb), lb, b, ri, zi))
                table.num_legal += n_orders
    table.num_candidates = table.num_legal + sum(table.rejected.values())
    queue.sort()
    kth: list[int] = []  # max-heap (negated) of the k best step times in quanta
    for pos, (lb_q, _, b, ri, zi) in enumerate(queue):
        if prune and len(kth) == top_k and lb_q > -kth[0]:
            skipped = queue[pos:]
            table.rejected[PRUNED] += sum(len(orders.orders(bases[e[2]])) for e in skipped)
            break
        shape = bases[b].model_copy(
            update={"recompute": space.recompute[ri], "zero_stage": space.zero_stages[zi]}
        )
        for order in orders.orders(shape):
            lo = shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
            e = _score(model, cluster, workload, lo)
            table.num_scored += 1
            if e.peak_memory_gib > usable:
                # Memory does not depend on the order: every placement of this shape is out.
                table.rejected[OOM] += len(orders.orders(shape))
                if table.smallest is None or e.peak_memory_gib < table.smallest.peak_memory_gib:
                    table.smallest = e
                break
            table.estimates.append(e)
            q = time_to_quanta(e.step_time_s)
            if len(kth) < top_k:
                heapq.heappush(kth, -q)
            elif q < -kth[0]:
                heapq.heapreplace(kth, -q)
    return table


def _score(model: ModelSpec, cluster: Cluster, workload: Workload, lo: Layout) -> Estimate:
    return estimate(model, cluster, workload, lo)


__all__ = ["OOM", "PRUNED", "TIME_QUANTUM_S", "CandidateTable", "build_table", "usable_memory_gib"]
