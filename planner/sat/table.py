"""The candidate table: every legal (layout, placement), scored only where it can still matter.

Exact branch and bound in two levels (planner/sat/bounds.py). Each (shape, recompute, ZeRO) gets
a compute-only lower bound that holds for every placement; when it is the smallest open bound, its
placements are expanded, each with its own tighter bound (everything but dp_comm and optimizer).
A placement is scored with the full cost model when its bound is the smallest open one; the first
placement scored of a shape also decides whether the shape fits (memory does not depend on the
order). Once the smallest open bound exceeds the k-th best step time found, no remaining
candidate can enter the top k and the search stops. The table therefore holds
every plan of the exhaustive top k, with the same floats; tests check it against exhaustive.py.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

from cost_models.estimate import estimate
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..candidates import CANONICAL_ORDER, OrderCache, legal_bases
from ..exhaustive import usable_memory_gib
from ..types import SearchSpace
from .bounds import StepLowerBound
from .partition import PartitionSolver, Split, score
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
    num_partition_solves: int = 0  # CP-SAT stage-partition models solved (partition.py)


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
    parts = PartitionSolver(model, cluster, workload, usable, bound)
    # (bound in quanta, bound, base index, recompute, zero): sorted, this is the visiting order.
    queue: list[tuple[int, float, int, int, int]] = []
    for b, base in enumerate(bases):
        n_orders = len(orders.orders(base))
        for ri, recompute in enumerate(space.recompute):
            lo = base.model_copy(update={"recompute": recompute})
            # The split is decided when the shape is expanded: until then, a bound for any split.
            lb = parts.free_step_s(lo) if lo.pp > 1 else bound.step_s(lo)
            for zi in range(len(space.zero_stages)):
                queue.append((time_to_quanta(lb), lb, b, ri, zi))
                table.num_legal += n_orders
    table.num_candidates = table.num_legal + sum(table.rejected.values())
    # Heap entries (bound quanta, kind, base, recompute, zero, order index): kind 0 is a shape
    # (bound for all its placements), kind 1 one placement (its own, tighter bound).
    heap: list[tuple[int, int, int, int, int, int]] = [
        (q, 0, b, ri, zi, -1) for q, _, b, ri, zi in queue
    ]
    heapq.heapify(heap)
    fits: dict[tuple[int, int, int], bool] = {}  # memory is the same for every placement
    splits: dict[tuple[int, int, int], list[Split | None]] = {}  # None: the even split
    peaks: dict[tuple[int, int, int], float] = {}  # even-split peak of a pending shape
    placement_bound: dict[tuple, int] = {}  # zero stage enters only through the split
    kth: list[int] = []  # max-heap (negated) of the k best step times in quanta
    smallest: tuple[float, Layout] | None = None  # (peak GiB, layout) closest to fitting
    shapes: dict[tuple[int, int, int], Layout] = {}
    while heap:
        lb_q, kind, b, ri, zi, oi = heap[0]
        if prune and len(kth) == top_k and lb_q > -kth[0]:
            table.rejected[PRUNED] += _left(heap, bases, orders, fits)
            break
        heapq.heappop(heap)
        key = (b, ri, zi)
        if fits.get(key) is False:
            continue  # already counted as out of memory
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = bases[b].model_copy(
                update={"recompute": space.recompute[ri], "zero_stage": space.zero_stages[zi]}
            )
        shape_orders = orders.orders(bases[b])
        if kind == 0 and key not in fits:
            # Memory first; an out-of-memory even split (pp > 1) waits for a CP-SAT split
            # (planner/sat/partition.py) until one of its placements is the best open candidate,
            # its placements queued with bounds valid for any split meanwhile.
            peak = bound.peak_memory_gib(shape)
            if peak <= usable:
                fits[key], splits[key] = True, [None]
                lb = bound.step_s(shape)
                heapq.heappush(heap, (max(time_to_quanta(lb), lb_q), 0, b, ri, zi, oi))
                continue
            if shape.pp == 1:
                fits[key] = False
                table.rejected[OOM] += len(shape_orders)
                if smallest is None or peak < smallest[0]:
                    smallest = (peak, shape)
                continue
            fits[key], splits[key] = True, []  # pending
            peaks[key] = peak
        if kind == 0:
            pending = not splits[key]
            for o, order in enumerate(shape_orders):
                q = placement_bound.get((b, ri, o, pending))
                if q is None:
                    lo = shape.model_copy(update={"order": order})
                    lb = bound.placement_step_s(lo, orders.spans(lo), any_split=pending)
                    q = placement_bound[(b, ri, o, pending)] = time_to_quanta(lb)
                heapq.heappush(heap, (max(q, lb_q), 1, b, ri, zi, o))
            continue
        if not splits[key]:
            splits[key] = parts.splits(shape, False)
            if not splits[key]:
                fits[key] = False
                table.rejected[OOM] += len(shape_orders)
                if smallest is None or peaks[key] < smallest[0]:
                    smallest = (peaks[key], shape)
                continue
        order = shape_orders[oi]
        lo = shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
        e = score(model, cluster, workload, lo, splits[key])
        table.num_scored += 1
        table.estimates.append(e)
        q = time_to_quanta(e.step_time_s)
        if len(kth) < top_k:
            heapq.heappush(kth, -q)
        elif q < -kth[0]:
            heapq.heapreplace(kth, -q)
    if not table.estimates and smallest is not None:
        table.smallest = _score(model, cluster, workload, smallest[1])  # for the message
    table.num_partition_solves = parts.num_solves
    return table


def _left(heap, bases, orders: OrderCache, fits) -> int:
    """Placements never scored: every placement of an unexpanded shape, and expanded ones whose
    shape is not already known to be out of memory."""
    n = 0
    for _, kind, b, _ri, _zi, _ in heap:
        if kind == 0:
            n += len(orders.orders(bases[b]))
        elif fits.get((b, _ri, _zi)) is not False:
            n += 1
    return n


def _score(model: ModelSpec, cluster: Cluster, workload: Workload, lo: Layout) -> Estimate:
    return estimate(model, cluster, workload, lo)


__all__ = ["OOM", "PRUNED", "TIME_QUANTUM_S", "CandidateTable", "build_table"]
