"""The candidate table: every legal (layout, placement), scored only where it can still matter.

Exact best-first branch and bound (bounds in planner/search/bounds.py). A heap holds entries of four
kinds (five with stage_split "search"), each with a lower bound on the step time of everything it stands for:
  0  a shape (base x recompute, every ZeRO stage), compute-only bound, valid for every placement;
  1  the same shape, bound raised to its best placement's bound (no DP / optimizer terms);
  2  one placement of a shape x ZeRO stage that fits in memory, its own bound (no DP / optimizer);
  3  the same placement with the DP and optimizer terms added (the step time up to 1e-9);
  4  (stage_split "search") a placement of a shape out of memory with the even split that some
     split fits, its CP-SAT split not yet solved: a bound for every split that fits.
Popping an entry tightens it to the next kind (re-queued if the bound rose) and pays for the next
check only then: placement bounds of a shape, then its memory per ZeRO stage (order-independent),
then the DP terms, then the full cost model. Once the smallest open bound exceeds the
k-th best step time found, no remaining candidate can enter the top k and the search stops. The
table therefore holds every plan of the exhaustive top k, with the same floats; tests check it
against exhaustive.py.

SearchSpace.stage_split "search" (planner/search/partition.py): a pp > 1 shape's split is known only
after its memory check, so kinds 0 and 1 use bounds valid for every split (total compute / pp for
the slowest stage); the memory check keeps the even split where it fits; where it does not, the
partition solver's memory caps decide whether any split fits, its placements are queued as kind 4
and the CP-SAT split is solved at the first pop (shapes pruned before that cost no CP-SAT model),
then each placement is bounded on that split. "even" (default): no partition solver, exactly the
search above.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from dataclasses import dataclass, field

from cost_models.estimate import estimate
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..types import SearchSpace
from .bounds import StepLowerBound
from .candidates import (
    CANONICAL_ORDER,
    HARD_MARGIN_S,
    TIMED_OUT,
    DeadlinePassed,
    OrderCache,
    largest_fitting,
    legal_bases_batched,
)
from .exhaustive import usable_memory_gib
from .partition import PartitionSolver, Split
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
    open_bound_s: float | None = None  # smallest bound left open when a deadline stopped it
    timed_out: bool = False  # the deadline stopped the search (with or without a plan scored)


def build_table(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    top_k: int,
    *,
    prune: bool = True,
    deadline: float | None = None,
) -> CandidateTable:
    """`deadline` (a time.perf_counter() value) stops the search early once at least one plan
    that fits has been scored; `open_bound_s` then holds the smallest bound left open. Past
    deadline + HARD_MARGIN_S it stops even with nothing scored (`timed_out`, no estimates)."""
    table = CandidateTable()
    # Hard stop (issue 19): the enumeration and the first scored plan must fit in the limit
    # plus a margin too, so a huge space ends with "nothing scored" instead of running on.
    hard = None if deadline is None else deadline + HARD_MARGIN_S
    try:
        bases, batches, table.rejected = legal_bases_batched(
            model, cluster, workload, space, deadline=hard
        )
    except DeadlinePassed:
        table.timed_out = True
        return table
    orders = OrderCache(cluster, space.search_order)
    # Global batch range: every key is time per sequence (scale.per_sequence_quanta, scaled to
    # the range's MAX), a base's bounds are taken at its largest legal batch, and a shape is
    # scored at the largest batch that fits (candidates.largest_fitting). Time per sequence never
    # rises with the batch, so a bound at the largest batch also bounds every smaller one.
    # Fixed batch: one batch, factor exactly 1, the step time as before.
    batch_max = space.batch_max
    bound_at = _PerBatch(model, cluster, workload)

    def quanta(step_s: float, batch: int) -> int:
        return per_sequence_quanta(step_s, batch, batch_max)

    usable = usable_memory_gib(cluster, space)
    # stage_split "search" (fixed batch only: SearchSpace refuses it with a range).
    parts = None
    if space.stage_split == "search" and bases:  # no legal base: nothing to split (issue 19)
        parts = PartitionSolver(model, cluster, workload, usable, bound_at(batches[0][0]))
    splits: dict[tuple[int, int, int], Split] = {}  # shapes scored on a CP-SAT split
    even_q: dict[tuple[int, int], list[int]] = {}  # even-split placement bounds ("search")

    def any_split(lo: Layout) -> bool:
        return parts is not None and lo.pp > 1

    # Distinct placements of each base (they depend only on the degrees).
    base_orders = []
    for b, base in enumerate(bases):
        if hard is not None and b % 64 == 0 and time.perf_counter() > hard:
            table.timed_out = True  # a huge space (e.g. MoE EP choices): nothing scored in time
            return table
        base_orders.append(orders.orders(base))
    # Heap entries (bound quanta, kind, base, recompute, zero, order index), kinds as in the
    # module docstring; kinds 0 and 1 stand for every ZeRO stage (zero index -1).
    heap: list[tuple[int, int, int, int, int, int]] = []
    for b, base in enumerate(bases):
        if hard is not None and b % 64 == 0 and time.perf_counter() > hard:
            table.timed_out = True
            return table
        for ri, recompute in enumerate(space.recompute):
            b0 = batches[b][0]
            if any_split(base):
                lb = parts.free_step_s(base.model_copy(update={"recompute": recompute}))
            else:
                lb = bound_at(b0).step_s(base, recompute)
            heap.append((quanta(lb, b0), 0, b, ri, -1, -1))
        table.num_legal += len(base_orders[b]) * len(space.recompute) * len(space.zero_stages)
    table.num_candidates = table.num_legal + sum(table.rejected.values())
    heapq.heapify(heap)
    kth: list[int] = []  # max-heap (negated) of the k best step times in quanta
    # (peak GiB, layout, workload) closest to fitting
    smallest: tuple[float, Layout, Workload] | None = None
    shapes: dict[tuple[int, int, int], Layout] = {}  # shapes that fit, by (base, rc, zero)
    batch_of: dict[tuple[int, int, int], int] = {}  # the batch each fitting shape is scored at
    timed_out = False
    # (base, recompute) -> placement bounds (quanta, DP and optimizer left out) of its orders.
    placement_q: dict[tuple[int, int], list[int]] = {}
    base_spans: dict[int, list[dict[str, tuple[int, ...]]]] = {}  # per base, per order
    while heap:
        lb_q, kind, b, ri, zi, oi = heap[0]
        if prune and len(kth) == top_k and lb_q > -kth[0]:
            break
        now = time.perf_counter() if deadline is not None else 0.0
        if deadline is not None and not table.estimates and now > hard:
            timed_out = table.timed_out = True  # nothing scored within the limit + margin
            break
        if deadline is not None and table.estimates and now > deadline:
            table.timed_out = True
            # A valid bound on every open entry: its bound in quanta, less the rounding.
            table.open_bound_s = (lb_q - 1) * TIME_QUANTUM_S
            if batch_max is not None:
                table.open_bound_s /= batch_max  # per sequence, as the objective
            timed_out = True
            break
        heapq.heappop(heap)
        cutoff = -kth[0] if prune and len(kth) == top_k else None
        if kind == 0:
            # Tighten the shape's bound to its best placement's before paying for the memory
            # check; re-queue it if that moved it back.
            shape = bases[b].model_copy(update={"recompute": space.recompute[ri]})
            spans = base_spans.get(b)
            if spans is None:
                spans = base_spans[b] = [orders.spans(shape, o) for o in base_orders[b]]
            b0 = batches[b][0]
            at = bound_at(b0).placement_bounds_s(shape, spans, any_split=any_split(shape))
            qs = placement_q[(b, ri)] = [quanta(lb, b0) for lb in at]
            q = max(lb_q, min(qs))
            if q > lb_q:
                if cutoff is None or q <= cutoff:
                    heapq.heappush(heap, (q, 1, b, ri, -1, -1))
                continue
            kind = 1
        if kind == 1:
            # Memory does not depend on the order: decide it once per ZeRO stage, before any
            # placement of it is queued.
            for zi, zero in enumerate(space.zero_stages):
                shape = bases[b].model_copy(
                    update={"recompute": space.recompute[ri], "zero_stage": zero}
                )
                # Stop early only when the shape can neither fit nor be the closest to fitting
                # (the first shape out of memory gets its exact peak).
                stop = math.inf if smallest is None else max(usable, smallest[0])
                peaks: dict[int, float] = {}

                def fit(batch: int, shape=shape, peaks=peaks, stop=stop) -> bool:
                    peaks[batch] = bound_at(batch).peak_memory_gib(shape, stop_above=stop)
                    return peaks[batch] <= usable

                chosen, last = largest_fitting(batches[b], fit)
                pending = None
                if chosen is None and any_split(shape):
                    # Even split out of memory: does any split fit (memory caps, no CP-SAT)?
                    pending = parts.fewest_max_layers(shape)
                    chosen = None if pending is None else batches[b][0]
                if chosen is None:
                    peak = peaks[batches[b][last]]
                    table.rejected[OOM] += len(base_orders[b])
                    if smallest is None or peak < smallest[0]:
                        smallest = (peak, shape, bound_at(batches[b][last]).workload)
                    continue
                shapes[(b, ri, zi)] = shape
                batch_of[(b, ri, zi)] = chosen
                qs = placement_q[(b, ri)]
                kind = 2
                if pending is not None:
                    # Queued with a bound for every split that fits (kind 4); the CP-SAT split
                    # is solved when one of these placements is the best open candidate.
                    kind = 4
                    at = bound_at(chosen).placement_bounds_s(
                        shape, base_spans[b], any_split=True, min_max_layers=pending
                    )
                    qs = [quanta(lb, chosen) for lb in at]
                elif any_split(shape):  # the even split fits: its own (tighter) bounds
                    qs = even_q.get((b, ri))
                    if qs is None:
                        at = bound_at(chosen).placement_bounds_s(shape, base_spans[b])
                        qs = even_q[(b, ri)] = [quanta(lb, chosen) for lb in at]
                elif chosen != batches[b][0]:
                    # Memory forced a smaller batch than the bounds assumed: bound the
                    # placements again at that batch (tighter per sequence).
                    at = bound_at(chosen).placement_bounds_s(shape, base_spans[b])
                    qs = [quanta(lb, chosen) for lb in at]
                for o, q in enumerate(qs):
                    q = max(q, lb_q)
                    if cutoff is None or q <= cutoff:  # the k-th best only falls: never popped
                        heapq.heappush(heap, (q, kind, b, ri, zi, o))
            continue
        key = (b, ri, zi)
        shape = shapes.get(key)
        if shape is None:  # its split turned out not to fit (kind 4 below)
            continue
        order = base_orders[b][oi]
        if kind == 4:
            split = splits.get(key)
            if split is None:
                split = parts.split(shape)
                if split is None:  # the work limit stopped CP-SAT before any split
                    del shapes[key]
                    table.rejected[OOM] += len(base_orders[b])
                    continue
                splits[key] = split
            counts = parts.counts(shape, split)
            at = bound_at(batch_of[key]).placement_bounds_s(
                shape, [base_spans[b][oi]], counts=counts
            )
            q = max(lb_q, quanta(at[0], batch_of[key]))
            if q > lb_q:
                if cutoff is None or q <= cutoff:
                    heapq.heappush(heap, (q, 2, b, ri, zi, oi))
                continue
        split = splits.get(key)
        if kind == 2 and split is None:
            # Add the DP and optimizer terms (they need the ZeRO stage) before scoring; a
            # CP-SAT split is scored directly (bounds.dp_optimizer_s covers the even split only).
            batch = batch_of[key]
            full = bound_at(batch).placement_step_s(shape, base_spans[b][oi], with_dp=True)
            q = max(lb_q, quanta(full, batch))
            if q > lb_q:
                if cutoff is None or q <= cutoff:
                    heapq.heappush(heap, (q, 3, b, ri, zi, oi))
                continue
        lo = shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
        e = estimate(model, cluster, bound_at(batch_of[key]).workload, lo, layers_per_stage=split)
        table.num_scored += 1
        table.estimates.append(e)
        q = quanta(e.step_time_s, batch_of[key])
        if len(kth) < top_k:
            heapq.heappush(kth, -q)
        elif q < -kth[0]:
            heapq.heapreplace(kth, -q)
    # Every legal placement not scored and not out of memory was left out by its bound (or by the
    # deadline): unexpanded shapes, open placements, and placements never pushed (bound > k-th).
    left = table.num_legal - table.num_scored - table.rejected[OOM]
    if left > 0:
        table.rejected[TIMED_OUT if timed_out else PRUNED] += left
    if not table.estimates and smallest is not None:
        table.smallest = estimate(model, cluster, smallest[2], smallest[1])  # for the message
    return table


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


__all__ = ["OOM", "PRUNED", "TIMED_OUT", "TIME_QUANTUM_S", "CandidateTable", "build_table"]
