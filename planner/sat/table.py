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

from ..candidates import CANONICAL_ORDER, OrderCache, largest_fitting, legal_bases_batched
from ..exhaustive import plan_batch, usable_memory_gib
from ..types import SearchSpace
from .bounds import StepLowerBound
from .scale import TIME_QUANTUM_S, per_sequence_quanta

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
    bases, batches, table.rejected = legal_bases_batched(model, cluster, workload, space)
    orders = OrderCache(cluster, space.search_order)
    # Global batch range: every key is time per sequence (scale.per_sequence_quanta), a base's
    # bounds are taken at its largest legal batch, and a shape is scored at the largest batch that
    # fits (candidates.largest_fitting). Time per sequence never rises with the batch, so a bound
    # at the largest batch, per sequence, also bounds every smaller one. Fixed batch: unchanged.
    batch_max = (space.global_batch_range or (0, workload.global_batch_seqs))[1]
    bound_at = _PerBatch(model, cluster, workload)
    usable = usable_memory_gib(cluster, space)
    # (bound in quanta, bound, base index, recompute, zero): sorted, this is the visiting order.
    queue: list[tuple[int, float, int, int, int]] = []
    for b, base in enumerate(bases):
        n_orders = len(orders.orders(base))
        for ri, recompute in enumerate(space.recompute):
            lb = bound_at(batches[b][0]).step_s(base.model_copy(update={"recompute": recompute}))
            q = per_sequence_quanta(lb, batches[b][0], batch_max)
            for zi in range(len(space.zero_stages)):
                queue.append((q, lb, b, ri, zi))
                table.num_legal += n_orders
    table.num_candidates = table.num_legal + sum(table.rejected.values())
    # Heap entries (bound quanta, kind, base, recompute, zero, order index): kind 0 is a shape
    # (bound for all its placements), kind 1 one placement (its own, tighter bound), kind 2 one
    # placement bounded at the smaller batch memory allows it (global batch range only).
    heap: list[tuple[int, int, int, int, int, int]] = [
        (q, 0, b, ri, zi, -1) for q, _, b, ri, zi in queue
    ]
    heapq.heapify(heap)
    fits: dict[tuple[int, int, int], bool] = {}  # memory is the same for every placement
    batch_of: dict[tuple[int, int, int], int] = {}  # the batch each fitting shape is scored at
    placement_bound: dict[tuple[int, int, int], int] = {}  # zero stage does not enter the bound
    kth: list[int] = []  # max-heap (negated) of the k best step times in quanta
    smallest: tuple[float, Layout, Workload] | None = None  # (peak GiB, ...) closest to fitting
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
        if kind == 0:
            for o, order in enumerate(shape_orders):
                q = placement_bound.get((b, ri, o))
                if q is None:
                    lo = shape.model_copy(update={"order": order})
                    lb = bound_at(batches[b][0]).placement_step_s(lo, orders.spans(lo))
                    q = placement_bound[(b, ri, o)] = per_sequence_quanta(
                        lb, batches[b][0], batch_max
                    )
                heapq.heappush(heap, (max(q, lb_q), 1, b, ri, zi, o))
            continue
        if key not in fits:
            peaks: dict[int, float] = {}

            def fit(batch: int, shape=shape, peaks=peaks) -> bool:
                peaks[batch] = bound_at(batch).peak_memory_gib(shape)
                return peaks[batch] <= usable

            chosen, last = largest_fitting(batches[b], fit)
            fits[key] = chosen is not None
            if chosen is not None:
                batch_of[key] = chosen
            else:
                peak = peaks[batches[b][last]]
                table.rejected[OOM] += len(shape_orders)
                if smallest is None or peak < smallest[0]:
                    smallest = (peak, shape, bound_at(batches[b][last]).workload)
        if not fits[key]:
            continue
        order = shape_orders[oi]
        lo = shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
        if kind == 1 and batch_of[key] != batches[b][0]:
            # Memory forced a smaller batch than the bound assumed: re-queue (kind 2) with the
            # tighter bound at that batch instead of scoring now.
            lb = bound_at(batch_of[key]).placement_step_s(lo, orders.spans(lo))
            q = max(lb_q, per_sequence_quanta(lb, batch_of[key], batch_max))
            heapq.heappush(heap, (q, 2, b, ri, zi, oi))
            continue
        e = _score(model, cluster, bound_at(batch_of[key]).workload, lo)
        table.num_scored += 1
        table.estimates.append(e)
        q = per_sequence_quanta(e.step_time_s, plan_batch(e), batch_max)
        if len(kth) < top_k:
            heapq.heappush(kth, -q)
        elif q < -kth[0]:
            heapq.heapreplace(kth, -q)
    if not table.estimates and smallest is not None:
        table.smallest = _score(model, cluster, smallest[2], smallest[1])  # for the message
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


class _PerBatch:
    """One StepLowerBound (and its workload) per global batch; a fixed batch has just one."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self._bounds: dict[int, StepLowerBound] = {}

    def __call__(self, batch: int) -> StepLowerBound:
        found = self._bounds.get(batch)
        if found is None:
            w = self.workload
            if batch != w.global_batch_seqs:
                w = w.model_copy(update={"global_batch_seqs": batch})
            found = self._bounds[batch] = StepLowerBound(self.model, self.cluster, w)
        return found


def _score(model: ModelSpec, cluster: Cluster, workload: Workload, lo: Layout) -> Estimate:
    return estimate(model, cluster, workload, lo)


__all__ = ["OOM", "PRUNED", "TIME_QUANTUM_S", "CandidateTable", "build_table"]
