"""The candidate table: every legal (layout, placement), scored only where it can still matter.

Exact best-first branch and bound (bounds in planner/search/bounds.py). A heap holds `Entry`
records of the node kinds in `Kind` (SPLIT only with stage_split "search"), each with a lower
bound on the step time of everything it stands for; `BranchAndBound` has one method per kind.
Popping an entry tightens it to the next kind (re-queued if the bound rose) and pays for the next
check only then: placement bounds of a shape, then its memory per ZeRO stage (order-independent),
then the DP terms, then the full cost model. Once the smallest open bound exceeds the k-th best
family's time (and the simplicity tolerance line), nothing left can enter the ranking and the
search stops. The table therefore holds the best plan of every family of the exhaustive ranking,
with the same floats; tests check it against exhaustive.py.

SearchSpace.stage_split "search" (planner/search/partition.py): a pp > 1 shape's split is known only
after its memory check, so kinds 0 and 1 use bounds valid for every split (total compute / pp for
the slowest stage); the memory check keeps the even split where it fits; where it does not, the
partition solver's memory caps decide whether any split fits, its placements are queued as kind 4
and the CP-SAT split is solved at the first pop (shapes pruned before that cost no CP-SAT model),
then each placement is bounded on that split. "even" (default): no partition solver, exactly the
search above.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from cost_models.bounds import SAFETY
from cost_models.estimate import estimate
from cost_models.pricer import Pricer
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..types import SearchSpace
from .candidates import (
    CANONICAL_ORDER,
    HARD_MARGIN_S,
    LIMIT_REJECTIONS,
    NO_ORDER,
    TIMED_OUT,
    WORK_LIMITED,
    DeadlinePassed,
    OrderCache,
    allowed_orders,
    extends_chain,
    family_key,
    framework_violations,
    largest_fitting,
    legal_bases_batched,
    reason_key,
    recompute_chain_heads,
    recompute_choices,
    sharding_variants,
)
from .exhaustive import usable_memory_gib, within
from .partition import PartitionSolver, SatResult, Split
from .scale import TIME_QUANTUM_S, per_sequence_quanta
from .work import (
    WORK_PER_MEMORY_EVAL,
    WORK_PER_MODEL,
    WORK_PER_POP,
    WORK_PER_SAT_UNIT,
    WORK_PER_SCORE,
    WORK_PER_TABLE_CELL,
)

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
    open_bound_s: float | None = None  # smallest bound left open when a limit stopped it
    timed_out: bool = False  # a limit stopped the search (with or without a plan scored)
    stopped_by: str | None = None  # "work_limit" or "time_limit" where one stopped it
    work_units: float = 0.0  # the search's work (WORK_PER_*), the work limit's measure
    # stage_split "search": partition models stopped unproved, the smallest bound they leave
    # open, and every partition model's own report.
    num_unproved_partitions: int = 0
    unproved_bound_s: float | None = None
    partition_results: list[SatResult] = field(default_factory=list)


class Kind(IntEnum):
    """What a heap entry stands for, in the order a candidate is refined."""

    BASE = -1  # a base, every recompute choice: its bound without recompute (queued first)
    SHAPE = 0  # base x recompute, every ZeRO stage and order: compute-only bound
    SHAPE_PLACED = 1  # the same, bound raised to its best placement's (no DP / optimizer)
    PLACEMENT = 2  # one order of a shape x ZeRO stage that fits in memory (no DP / optimizer)
    PLACEMENT_DP = 3  # the same with the DP and optimizer terms (the step time up to 1e-9)
    SPLIT = 4  # stage_split "search": a placement whose even split is out of memory but some
    # split fits, its CP-SAT split not yet solved: a bound for every split that fits


class Entry(NamedTuple):
    """One heap entry (compared as a tuple: bound first, then kind)."""

    bound_q: int  # lower bound, time quanta (per sequence with a batch range)
    kind: Kind
    base: int  # index into the legal bases
    recompute: int  # index into the base's candidates.recompute_choices
    zero: int = -1  # index into the base's (ZeRO, dp_shard) variants (-1: all, shape kinds)
    order: int = -1  # index into the base's distinct orders (-1: every order, shape kinds)


@dataclass
class Fitting:
    """A shape x ZeRO stage that fits in memory: the batch it is scored at and its split."""

    layout: Layout
    batch: int
    # stage_split "search" with the even split out of memory: the CP-SAT split of each order
    # (its index in base_orders), solved when that placement is popped. The best split depends
    # on the placement (per-layer TP/CP/EP and DP traffic, planner/search/partition.py).
    searched: bool = False
    splits: dict[int, Split] = field(default_factory=dict)


def build_table(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    top_k: int,
    *,
    prune: bool = True,
    deadline: float | None = None,
    family: Callable[[Layout], tuple] = family_key,
    tolerance: float = 0.0,
    seed: Sequence[Estimate] = (),
    work_limit: float | None = None,
) -> CandidateTable:
    """`deadline` (a time.perf_counter() value) or `work_limit` (work units, WORK_PER_*) stops
    the search early once at least one plan that fits has been scored; `open_bound_s` then holds
    the smallest bound left open and `stopped_by` names the limit.

    `seed`: plans of this space already scored (solve.search passes the even-split search's for
    stage_split "search", whose every plan this space holds too): they start the table and its
    cutoff, so the branch and bound prunes against them from the first entry on.

    The top k counts families (`family`: candidates.family_key by default, plan_key for every
    plan), each by its best plan, and every family within `tolerance` of the best plan is kept
    too (the simplicity tolerance chooses among them): the table holds the best plan of each.

    Past deadline + HARD_MARGIN_S it stops even with nothing scored (`timed_out`, no estimates):
    the enumeration, the first bounds and the first scored plan must fit in the limit plus that
    margin too, so a huge space ends with "nothing scored" instead of running on (issue 19)."""
    hard = None if deadline is None else deadline + HARD_MARGIN_S
    with _cyclic_gc_paused():
        try:
            search = BranchAndBound(
                model, cluster, workload, space, top_k, family, tolerance, hard_deadline=hard
            )
        except DeadlinePassed:
            return CandidateTable(timed_out=True)
        search.add_seed(seed)
        return search.run(prune=prune, deadline=deadline, work_limit=work_limit)


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the search, back as it was after it. The
    search allocates some 10^5 short-lived objects (layouts, heap entries, key tuples) that
    reference counting frees; their count alone triggers the collector, whose full passes
    rescan the whole long-lived heap of the process (pydantic schemas, ortools, the caches).
    Measured (issue 32, two back-to-back rounds, 5 plans each): 5-11 % of the CPU time of the
    Llama 3 405B plan on 1,024 GPUs, 12-17 % of DeepSeek-V3's on 2,048. Objects in reference
    cycles, if any, wait for the next collection after the search."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class BranchAndBound:
    """The search state and one method per node kind (`Kind`)."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: Cluster,
        workload: Workload,
        space: SearchSpace,
        top_k: int,
        family: Callable[[Layout], tuple],
        tolerance: float,
        hard_deadline: float | None = None,
    ) -> None:
        self.model, self.cluster, self.space, self.family = model, cluster, space, family
        self.workload = workload  # the ZeRO rules' inputs (candidates.zero_stages)
        self.hard = hard_deadline  # DeadlinePassed / timed_out past it (build_table)
        self.table = CandidateTable()
        self.bases, self.batches, self.table.rejected = legal_bases_batched(
            model, cluster, workload, space, deadline=hard_deadline
        )
        self.orders = OrderCache(
            cluster, space.search_order, allowed_orders(model, space), moe=model.moe is not None
        )
        # Global batch range: every key is time per sequence (scale.per_sequence_quanta, scaled
        # to the range's MAX), a base's bounds are taken at its largest legal batch, and a shape
        # is scored at the largest batch that fits (candidates.largest_fitting). Time per
        # sequence never rises with the batch, so a bound at the largest batch also bounds every
        # smaller one. Fixed batch: one batch, factor exactly 1, the step time as before.
        self.batch_max = space.batch_max
        self.bound_at = _PerBatch(model, cluster, workload)
        self.usable = usable_memory_gib(cluster, space)
        # stage_split "search" (fixed batch only: SearchSpace refuses it with a range).
        self.parts: PartitionSolver | None = None
        if space.stage_split == "search" and self.bases:
            self.parts = PartitionSolver(
                model, cluster, workload, self.usable, self.bound_at(self.batches[0][0])
            )
        # Distinct placements of each base (they depend only on the degrees).
        self.base_orders = []
        for b, base in enumerate(self.bases):
            self._check_hard(b)
            self.base_orders.append(self.orders.orders(base))
        # Recompute settings tried per base (Layout updates; candidates.recompute_choices).
        self.choices = [recompute_choices(model, workload, space, b) for b in self.bases]
        self.queued: set[tuple[int, int]] = set()  # (base, choice) successors already queued
        self.variants = [self._sharding_variants(b) for b in range(len(self.bases))]
        self.base_spans: dict[int, list[dict[str, tuple[int, ...]]]] = {}  # per base, per order
        # (base, recompute) -> placement bounds (quanta, DP and optimizer left out) per order.
        self.placement_q: dict[tuple[int, int], list[int]] = {}
        self.even_q: dict[tuple[int, int], list[int]] = {}  # even-split bounds ("search")
        self.fitting: dict[tuple[int, int, int], Fitting] = {}  # by (base, recompute, zero)
        self.smallest: tuple[float, Layout, Workload] | None = None  # closest to fitting
        self.top = _TopFamilies(top_k, tolerance)  # the k best families' times in quanta
        self.heap: list[Entry] = []
        self.cutoff: int | None = None  # entries above it are never queued
        self.pops = 0  # heap entries popped (work_units)

    def _sharding_variants(self, b: int) -> list[tuple[int, int | None]]:
        """(ZeRO stage, dp_shard) pairs of base b: the space's ZeRO stages, and HSDP shard sizes
        for a framework that has HSDP (candidates.sharding_variants). A pair the framework
        cannot run on the base is rejected here, once per recompute x order it stands for
        (recompute does not change the framework's rules)."""
        base, kept = self.bases[b], []
        moe = self.model.moe is not None
        for zero, shard in sharding_variants(self.space, base, moe, self.workload):
            lo = base.with_update({"zero_stage": zero, "dp_shard": shard})
            problems = framework_violations(self.model, self.space, lo)
            if problems:
                n = len(self.choices[b]) * len(self.base_orders[b])
                self.table.rejected[reason_key(problems[0])] += n
            else:
                kept.append((zero, shard))
        return kept

    # ------------------------------------------------------------------------------ the loop

    def _check_hard(self, i: int) -> None:
        """DeadlinePassed every 64th call once the hard deadline has passed (pre-loop work)."""
        if self.hard is not None and i % 64 == 0 and time.perf_counter() > self.hard:
            raise DeadlinePassed()

    def add_seed(self, seed: Sequence[Estimate]) -> None:
        """Plans scored before this search (build_table's `seed`), as if _score had scored them
        (not counted in num_scored: the search that scored them counted them)."""
        for e in seed:
            self.table.estimates.append(e)
            self.top.add(self.family(e.layout), self._quanta(e.step_time_s, e.global_batch_seqs))

    def work_units(self) -> float:
        """The search's work so far (WORK_PER_*): deterministic, unlike its wall time."""
        work = WORK_PER_POP * self.pops + WORK_PER_SCORE * self.table.num_scored
        parts = self.parts
        if parts is not None:
            work += WORK_PER_MEMORY_EVAL * parts.num_memory_evals
            work += WORK_PER_TABLE_CELL * parts.num_table_cells + WORK_PER_MODEL * parts.num_solves
            work += WORK_PER_SAT_UNIT * parts.sat_deterministic_time
        return work

    def run(
        self, *, prune: bool, deadline: float | None, work_limit: float | None = None
    ) -> CandidateTable:
        """Pop best bound first until nothing open can enter the top k. Once a plan that fits
        is scored, `work_limit` (work_units) or the `deadline` (time.perf_counter()) stops it
        early: the smallest bound left open is kept (open_bound_s) and which limit says
        `stopped_by`."""
        table = self.table
        for b in range(len(self.bases)):
            if self.hard is not None and b % 64 == 0 and time.perf_counter() > self.hard:
                return CandidateTable(timed_out=True)  # nothing scored in the limit + margin
            per_base = len(self.choices[b]) * len(self.variants[b])
            if not self.base_orders[b]:
                table.rejected[NO_ORDER] += per_base
                continue
            if self.parts is None:
                # One entry per base, bounded below every recompute choice's bound: its choices
                # are bounded only when it is popped (_base), and most never are.
                self.heap.append(Entry(self._base_bound_q(b), Kind.BASE, b, -1))
            else:
                self._queue_heads(b)
            table.num_legal += len(self.base_orders[b]) * per_base
        table.num_candidates = table.num_legal + sum(table.rejected.values())
        heapq.heapify(self.heap)
        handlers = {
            Kind.BASE: self._base,
            Kind.SHAPE: self._shape,
            Kind.SHAPE_PLACED: self._memory,
            Kind.PLACEMENT: self._dp_terms,
            Kind.PLACEMENT_DP: self._score,
            Kind.SPLIT: self._split,
        }
        timed_out = False
        while self.heap:
            entry = self.heap[0]
            self.cutoff = self.top.cutoff() if prune else None
            if self.cutoff is not None and entry.bound_q > self.cutoff:
                break
            now = time.perf_counter() if deadline is not None else 0.0
            if self.hard is not None and not table.estimates and now > self.hard:
                timed_out = table.timed_out = True  # nothing scored within the limit + margin
                table.stopped_by = "time_limit"
                break
            stop = None
            if table.estimates:
                # The work limit first: where both have passed, the repeatable one says so.
                if work_limit is not None and self.work_units() > work_limit:
                    stop = "work_limit"
                elif deadline is not None and now > deadline:
                    stop = "time_limit"
            if stop is not None:
                table.open_bound_s = _seconds(entry.bound_q, self.batch_max)
                timed_out = table.timed_out = True
                table.stopped_by = stop
                break
            heapq.heappop(self.heap)
            self.pops += 1
            handlers[entry.kind](entry)
        # Every legal placement not scored and not out of memory was left out by its bound (or
        # by the deadline): unexpanded shapes, open placements, placements never pushed.
        left = table.num_legal - table.num_scored - table.rejected[OOM]
        if left > 0:
            why = LIMIT_REJECTIONS[table.stopped_by] if timed_out else PRUNED
            table.rejected[why] += left
        table.work_units = self.work_units()
        if self.parts is not None:
            table.num_unproved_partitions = self.parts.num_unproved
            table.partition_results = list(self.parts.results)
        if not table.estimates and self.smallest is not None:
            peak_layout, work = self.smallest[1], self.smallest[2]
            table.smallest = estimate(self.model, self.cluster, work, peak_layout)  # message
        return table

    def _queue_heads(self, b: int) -> None:
        """Queue the first choice of each of base b's recompute chains. The next one of a chain
        recomputes more (candidates.extends_chain), so its bound is no lower, and it is queued
        when this one is first popped (_shape)."""
        for ri in recompute_chain_heads(self.choices[b]):
            self._push(Entry(self._choice_bound_q(b, ri), Kind.SHAPE, b, ri))

    def _base_bound_q(self, b: int) -> int:
        """BASE bound of base b: its compute-only bound without recompute, which every recompute
        choice only adds to (recompute seconds >= 0 per layer, and the schedule is
        non-decreasing in every stage's time: cost_models/bounds.py), shaved by SAFETY (1e-9
        relative) so that float rounding cannot lift it above a choice's own bound. Being
        below every SHAPE entry of the base (and before them in a tie: Kind.BASE < SHAPE),
        it is popped before any of them would have been, so the search pops the same SHAPE
        entries in the same order as if they had been queued at the start."""
        b0 = self.batches[b][0]
        none_s = self.bound_at(b0).step_bound_s(self.bases[b], "none")
        return self._quanta(none_s * SAFETY, b0)

    def _base(self, e: Entry) -> None:
        """BASE: queue the base's recompute choices (_queue_heads) with their own bounds."""
        self._queue_heads(e.base)

    def _choice_bound_q(self, b: int, ri: int) -> int:
        """SHAPE bound of base b with its recompute choice ri (compute only, every placement)."""
        base, choice, b0 = self.bases[b], self.choices[b][ri], self.batches[b][0]
        if self._any_split(base):
            return self._quanta(self.parts.free_step_s(base.with_update(choice)), b0)
        return self._quanta(self.bound_at(b0).step_bound_s(base, choice), b0)

    # ----------------------------------------------------------------------- one per node kind

    def _shape(self, e: Entry) -> None:
        """SHAPE: tighten the bound to the shape's best placement's before paying for the
        memory check; re-queue it if that moved it back, else check memory now."""
        b, ri = e.base, e.recompute
        choices, nxt = self.choices[b], ri + 1
        if (
            nxt < len(choices)
            and extends_chain(choices[ri], choices[nxt])
            and (b, nxt) not in self.queued
        ):
            self.queued.add((b, nxt))
            self._push(Entry(max(e.bound_q, self._choice_bound_q(b, nxt)), Kind.SHAPE, b, nxt))
        shape = self.bases[b].with_update(choices[ri])
        spans = self.base_spans.get(b)
        if spans is None:
            spans = self.base_spans[b] = [self.orders.spans(shape, o) for o in self.base_orders[b]]
        b0 = self.batches[b][0]
        at = self.bound_at(b0).placement_bounds_s(shape, spans, any_split=self._any_split(shape))
        qs = self.placement_q[(b, ri)] = [self._quanta(lb, b0) for lb in at]
        q = max(e.bound_q, min(qs))
        if q > e.bound_q:
            self._push(e._replace(bound_q=q, kind=Kind.SHAPE_PLACED))
            return
        self._memory(e)

    def _memory(self, e: Entry) -> None:
        """SHAPE_PLACED: memory does not depend on the order; decide it once per ZeRO stage and
        queue the placements of each stage that fits (SPLIT where only another split fits)."""
        b, ri = e.base, e.recompute
        batches = self.batches[b]
        for zi, (zero, shard) in enumerate(self.variants[b]):
            update = {**self.choices[b][ri], "zero_stage": zero, "dp_shard": shard}
            shape = self.bases[b].with_update(update)
            chosen, last, peaks = self._largest_fitting(shape, batches)
            pending = None
            if chosen is None and self._any_split(shape):
                # Even split out of memory: does any split fit (memory caps, no CP-SAT)?
                pending = self.parts.fewest_max_layers(shape)
                chosen = None if pending is None else batches[0]
            if chosen is None:
                peak = peaks[batches[last]]
                self.table.rejected[OOM] += len(self.base_orders[b])
                if self.smallest is None or peak < self.smallest[0]:
                    self.smallest = (peak, shape, self.bound_at(batches[last]).workload)
                continue
            self.fitting[(b, ri, zi)] = Fitting(shape, chosen, searched=pending is not None)
            kind, qs = Kind.PLACEMENT, self._placement_q(b, ri, shape, chosen, pending)
            if pending is not None:
                # Queued with a bound for every split that fits; the CP-SAT split is solved when
                # one of these placements is the best open candidate.
                kind = Kind.SPLIT
            for o, q in enumerate(qs):
                # The k-th best only falls: an entry above the cutoff would never be popped.
                self._push(Entry(max(q, e.bound_q), kind, b, ri, zi, o))

    def _split(self, e: Entry) -> None:
        """SPLIT: solve this placement's CP-SAT split (once), bound the placement on it."""
        key = (e.base, e.recompute, e.zero)
        fit = self.fitting.get(key)
        if fit is None:  # its split turned out not to fit
            return
        split = fit.splits.get(e.order)
        if split is None:
            # The spans estimate() reads for this order (HSDP's DP groups included).
            span = self.orders.spans(fit.layout, self.base_orders[e.base][e.order])
            split = self.parts.split(fit.layout, span)
            if self.parts.is_unproved(fit.layout, span):
                # Its plans may be beaten by a split CP-SAT did not reach: this entry's bound
                # holds for every split that fits, so it stays an open bound.
                open_s = _seconds(e.bound_q, self.batch_max)
                t = self.table
                if t.unproved_bound_s is None or open_s < t.unproved_bound_s:
                    t.unproved_bound_s = open_s
            if split is None:  # no split fits (memory is order-independent), or the work limit
                del self.fitting[key]
                self.table.rejected[OOM] += len(self.base_orders[e.base])
                return
            fit.splits[e.order] = split
        counts = self.parts.counts(fit.layout, split)
        span = self.base_spans[e.base][e.order]
        at = self.bound_at(fit.batch).placement_bounds_s(fit.layout, [span], counts=counts)
        q = max(e.bound_q, self._quanta(at[0], fit.batch))
        if q > e.bound_q:
            self._push(e._replace(bound_q=q, kind=Kind.PLACEMENT))
            return
        self._score(e)

    def _dp_terms(self, e: Entry) -> None:
        """PLACEMENT: add the DP and optimizer terms (they need the ZeRO stage) before scoring;
        a CP-SAT split is scored directly (bounds.dp_optimizer_s covers the even split only)."""
        fit = self.fitting.get((e.base, e.recompute, e.zero))
        if fit is None:
            return
        if not fit.searched:
            span = self.base_spans[e.base][e.order]
            if fit.layout.dp_shard is not None:  # HSDP: the DP term reads its own groups' spans
                span = self.orders.spans(fit.layout, self.base_orders[e.base][e.order])
            full = self.bound_at(fit.batch).placement_bound_s(fit.layout, span, with_dp=True)
            q = max(e.bound_q, self._quanta(full, fit.batch))
            if q > e.bound_q:
                self._push(e._replace(bound_q=q, kind=Kind.PLACEMENT_DP))
                return
        self._score(e)

    def _score(self, e: Entry) -> None:
        """PLACEMENT_DP (or a tight bound): score the plan with the full cost model."""
        fit = self.fitting.get((e.base, e.recompute, e.zero))
        if fit is None:
            return
        order = self.base_orders[e.base][e.order]
        lo = fit.layout
        if order != CANONICAL_ORDER:
            lo = lo.with_update({"order": order})
        split = fit.splits.get(e.order)  # None: the even split
        scored = self.bound_at(fit.batch).estimate(lo, layers_per_stage=split)
        self.table.num_scored += 1
        self.table.estimates.append(scored)
        self.top.add(self.family(lo), self._quanta(scored.step_time_s, fit.batch))

    # ------------------------------------------------------------------------------- helpers

    def _push(self, e: Entry) -> None:
        if self.cutoff is None or e.bound_q <= self.cutoff:
            heapq.heappush(self.heap, e)

    def _quanta(self, step_s: float, batch: int) -> int:
        return per_sequence_quanta(step_s, batch, self.batch_max)

    def _any_split(self, lo: Layout) -> bool:
        return self.parts is not None and lo.pp > 1

    def _largest_fitting(
        self, shape: Layout, batches: Sequence[int]
    ) -> tuple[int | None, int, dict[int, float]]:
        """(largest batch that fits, index of the last tried, peak GiB per batch tried). Stop
        early only when the shape can neither fit nor be the closest to fitting (the first shape
        out of memory gets its exact peak)."""
        stop = math.inf if self.smallest is None else max(self.usable, self.smallest[0])
        peaks: dict[int, float] = {}

        def fits(batch: int) -> bool:
            peaks[batch] = self.bound_at(batch).peak_memory_gib(shape, stop_above=stop)
            return peaks[batch] <= self.usable

        chosen, last = largest_fitting(batches, fits)
        return chosen, last, peaks

    def _placement_q(
        self, b: int, ri: int, shape: Layout, batch: int, pending: int | None
    ) -> list[int]:
        """Placement bounds (quanta) of a fitting shape's orders at the batch it is scored at."""
        spans = self.base_spans[b]
        if pending is not None:  # any split that fits, the busiest rank holding >= N* layers
            at = self.bound_at(batch).placement_bounds_s(
                shape, spans, any_split=True, min_max_layers=pending
            )
            return [self._quanta(lb, batch) for lb in at]
        if self._any_split(shape):  # the even split fits: its own (tighter) bounds
            qs = self.even_q.get((b, ri))
            if qs is None:
                at = self.bound_at(batch).placement_bounds_s(shape, spans)
                qs = self.even_q[(b, ri)] = [self._quanta(lb, batch) for lb in at]
            return qs
        if batch != self.batches[b][0]:
            # Memory forced a smaller batch than the bounds assumed: bound the placements
            # again at that batch (tighter per sequence).
            at = self.bound_at(batch).placement_bounds_s(shape, spans)
            return [self._quanta(lb, batch) for lb in at]
        return self.placement_q[(b, ri)]


class _TopFamilies:
    """Best time (quanta) per family; the cutoff no unexplored plan above it can matter to."""

    def __init__(self, k: int, tolerance: float) -> None:
        self.k, self.tolerance = k, tolerance
        self.best: dict[tuple, int] = {}
        self._cutoff: int | None = None

    def add(self, family: tuple, q: int) -> None:
        if q < self.best.get(family, q + 1):
            self.best[family] = q
            self._cutoff = None

    def cutoff(self) -> int | None:
        """max(k-th best family time, best time x (1 + tolerance)); None: fewer than k."""
        if len(self.best) < self.k:
            return None
        if self._cutoff is None:
            times = sorted(self.best.values())
            self._cutoff = max(times[self.k - 1], within(times[0], self.tolerance))
        return self._cutoff


def _seconds(bound_q: int, batch_max: int | None) -> float:
    """A heap bound in quanta back in the objective's unit, less the rounding (still a bound)."""
    seconds = (bound_q - 1) * TIME_QUANTUM_S
    return seconds if batch_max is None else seconds / batch_max  # per sequence with a range


class _PerBatch:
    """One Pricer (and its workload) per global batch; a fixed batch has just one. It prices
    the bounds, the memory checks and the scored plans of that batch from one set of caches."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self._bounds: dict[int, Pricer] = {}

    def __call__(self, batch: int) -> Pricer:
        found = self._bounds.get(batch)
        if found is None:
            w = self.workload
            if batch != w.global_batch_seqs:
                w = w.model_copy(update={"global_batch_seqs": batch})
            found = self._bounds[batch] = Pricer(self.model, self.cluster, w)
        return found


__all__ = [
    "OOM",
    "PRUNED",
    "TIMED_OUT",
    "TIME_QUANTUM_S",
    "WORK_LIMITED",
    "BranchAndBound",
    "CandidateTable",
    "Entry",
    "Kind",
    "build_table",
]
