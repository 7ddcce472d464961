"""Enumerate the legal layouts for a model on a cluster, one small generator per choice.

A candidate that breaks a rule is recorded as data (its reason, counted), never raised, so the
report can say "212 candidates exceeded usable HBM; 40 had tp that does not divide the heads".
The legality rules themselves live in cost_models.rules (one copy, shared with `estimate`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence

from cost_models import topology
from cost_models.errors import InvalidInput
from cost_models.rules import layout_violations
from cost_models.specs import Axis, Cluster, Layout, ModelSpec, Workload

from ..types import SearchSpace

NO_BATCH = "no global batch in the range is a multiple of micro_batch*dp (*pp when interleaving)"
_NUMBERS = re.compile(r"\d+(?:[.*]\d+)*")


@functools.cache
def divisors(n: int) -> tuple[int, ...]:
    """Divisors of n, ascending, by trial division up to sqrt(n): O(sqrt n), so a 1,048,576-GPU
    cluster (the largest Cluster accepts) costs ~1,000 steps, not a million per call."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


HARD_MARGIN_S = 2.0
"""How far past its deadline a search may run to score its first plan (candidate enumeration
included): past deadline + HARD_MARGIN_S it stops with nothing scored, which the engines report
as "nothing scored within the time limit" (exit 1). README.md#reliability documents it."""
TIMED_OUT = "not scored before the time limit"


class DeadlinePassed(Exception):
    """Raised by the enumeration when the search's hard deadline passes (planner.search.table)."""


def reason_key(message: str) -> str:
    """A rule message with its numbers blanked, to count rejections by rule."""
    return _NUMBERS.sub("N", message)


def _pinned_or(values: list[int], pin: int | None, cap: int | None) -> list[int]:
    if pin is not None:
        return [pin] if pin in values else []
    return [v for v in values if cap is None or v <= cap]


def degree_tuples(
    model: ModelSpec, cluster: Cluster, space: SearchSpace
) -> Iterator[tuple[int, int, int, int]]:
    """(tp, pp, cp, dp) with tp*pp*cp*dp == num_gpus, honouring pins and caps."""
    n = cluster.num_gpus
    for tp in _pinned_or(divisors(n), space.tp, space.max_tp):
        for pp in _pinned_or(divisors(n // tp), space.pp, space.max_pp):
            for cp in _pinned_or(divisors(n // (tp * pp)), space.cp, space.max_cp):
                dp = n // (tp * pp * cp)
                if space.dp is not None and dp != space.dp:
                    continue
                yield tp, pp, cp, dp


def _vps(model: ModelSpec, pp: int, space: SearchSpace) -> list[int]:
    # Interleaving needs whole chunks of equal size, where the embedding and the LM head may each
    # count as one layer (Megatron --account-for-embedding/loss-in-pipeline-split): the first
    # and last chunks then hold one layer fewer, as pipeline.chunk_layer_counts splits them.
    # Llama 3 405B (126 layers = 128 - 2) trained at pp 16 with interleaving this way (Llama 3
    # paper sec. 3.3.2); an equal-chunks rule alone (num_layers % (pp * vp) == 0) excludes it.
    if pp == 1:
        return [1]
    return [1] + [
        v
        for v in range(2, space.max_vp + 1)
        if pp * v <= model.num_layers
        and any((model.num_layers + extra) % (pp * v) == 0 for extra in (0, 1, 2))
    ]


def _eps(model: ModelSpec, tp: int, dp: int, cp: int, space: SearchSpace) -> list[int]:
    # EP is carved from the tp*dp*cp ranks of a stage (expert-TP 1, Megatron MoE folding).
    if model.moe is None:
        return [1]
    legal = [e for e in divisors(tp * dp * cp) if model.moe.num_experts % e == 0]
    return _pinned_or(legal, space.ep, space.max_ep)


def _shape_tuples(
    model: ModelSpec, cluster: Cluster, space: SearchSpace
) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """(tp, pp, cp, dp, ep, vp, micro_batch): everything that legality depends on."""
    for tp, pp, cp, dp in degree_tuples(model, cluster, space):
        for ep in _eps(model, tp, dp, cp, space):
            for vp in _vps(model, pp, space):
                for mb in space.micro_batches:
                    yield tp, pp, cp, dp, ep, vp, mb


def batch_choices(
    workload: Workload, space: SearchSpace, micro_batch: int, dp: int, pp: int = 1, vp: int = 1
) -> Sequence[int]:
    """The global batches a (micro_batch, dp) base may take, largest first (a lazy range: a wide
    range costs nothing, the search only ever reads a few of them by bisection).

    Fixed batch: the workload's own. Range: every multiple of micro_batch*dp in [MIN, MAX], of
    micro_batch*dp*pp when interleaving (the two batch rules of cost_models.rules; no other rule
    reads the batch). The search only ever
    needs the largest of them that fits in memory (see `largest_fitting`).
    """
    if space.global_batch_range is None:
        return [workload.global_batch_seqs]
    lo, hi = space.global_batch_range
    step = micro_batch * dp * (pp if vp > 1 else 1)
    return range(hi // step * step, lo - 1, -step)


def largest_fitting(batches: Sequence[int], fits) -> tuple[int | None, int]:
    """(largest batch in `batches` (descending) with fits(batch), the index of the last one tried).

    Why the largest: for a fixed layout the cost model's step is m*T + C with m = batch /
    (micro_batch*dp) the number of micro-batches and T, C >= 0 independent of m:
      * stage times per micro-batch, the slowest stage and the bubble (sum - max) / vp do not read
        m (cost_models.pipeline.schedule_time_s); compute, recompute, TP/CP/EP terms are m * stage;
      * pp_comm is 2(pp-1) p2p sends, the optimizer step one pass over the stage's parameters;
      * dp_comm: ZeRO-0/1/2 expose max(0, grads - 2 fwd) + max(0, gather - fwd) once per step, ZeRO-3
        m times the per-micro-batch excess (estimate.py), plus overlap_slowdown_s, linear in it.
    So time per sequence (m*T + C) / (m*micro_batch*dp) = T/(micro_batch*dp) + C/(m*micro_batch*dp)
    is non-increasing in m: a larger legal batch is never worse in tokens/s. Memory is
    non-decreasing in m (in-flight micro-batches min(p - r, m) and the interleaved warm-up
    min(chunks, m*v), pipeline.inflight_chunks; ZeRO-2 keeps unsharded gradients once m > 1,
    memory.state_bytes), so the batches that fit are a suffix of the descending list and the best
    is the first that fits: found by bisection. tests/planner/test_sat_batch_range.py checks both
    claims against estimate() at every batch of small ranges.
    """
    if fits(batches[0]):
        return batches[0], 0
    last = len(batches) - 1
    if last == 0 or not fits(batches[last]):
        return None, last
    bad, good = 0, last  # fits(batches[bad]) is False, fits(batches[good]) is True
    while good - bad > 1:
        mid = (bad + good) // 2
        if fits(batches[mid]):
            good = mid
        else:
            bad = mid
    return batches[good], good


def legal_bases_batched(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], list[Sequence[int]], Counter[str]]:
    """legal_bases, and for each base its legal global batches (largest first).

    `deadline` (a time.perf_counter() value): raise DeadlinePassed once it has passed, so a huge
    space's enumeration cannot outlive the search's time limit."""
    bases: list[Layout] = []
    batches: list[Sequence[int]] = []
    rejected: Counter[str] = Counter()
    per_shape = len(space.recompute) * len(space.zero_stages)
    num_shapes = no_batch = 0
    for tp, pp, cp, dp, ep, vp, mb in _shape_tuples(model, cluster, space):
        num_shapes += 1
        if deadline is not None and num_shapes % 64 == 0 and time.perf_counter() > deadline:
            raise DeadlinePassed()
        choices = batch_choices(workload, space, mb, dp, pp, vp)
        if not choices:
            no_batch += 1
            rejected[NO_BATCH] += per_shape
            continue
        base = Layout(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            vp=vp,
            micro_batch=mb,
            recompute=space.recompute[0],
            zero_stage=space.zero_stages[0],
            sequence_parallel=tp > 1,
        )
        work = workload
        if choices[0] != workload.global_batch_seqs:
            work = workload.model_copy(update={"global_batch_seqs": choices[0]})
        problems = layout_violations(model, cluster, work, base)
        if problems:
            rejected[reason_key(problems[0])] += per_shape
        else:
            bases.append(base)
            batches.append(choices)
    if space.global_batch_range is not None and num_shapes and no_batch == num_shapes:
        lo, hi = space.global_batch_range
        raise InvalidInput(
            f"global_batch_range: no batch in [{lo}, {hi}] is a multiple of micro_batch*dp "
            f"for any layout in the space (widen the range or allow other micro-batches)"
        )
    if space.ep is not None and model.moe is None and space.ep > 1:
        rejected[f"ep ({space.ep}) > 1 needs a mixture-of-experts model"] += 1
    return bases, batches, rejected


def legal_bases(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """One legal layout per (degrees, ep, vp, micro_batch), canonical order, the first recompute
    and ZeRO choice; and rejection counts (once per recompute x ZeRO x order it stands for).

    The rules in cost_models.rules read neither recompute, ZeRO stage nor order, so legality is
    checked once per base and the other choices are copied onto it. With a global batch range a
    base is legal when some batch in the range is (its largest legal batch is checked).
    """
    bases, _, rejected = legal_bases_batched(model, cluster, workload, space, deadline)
    return bases, rejected


def legal_shapes(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """Every legal base with every recompute and ZeRO choice (canonical order)."""
    bases, rejected = legal_bases(model, cluster, workload, space, deadline)
    shapes = [
        base.model_copy(update={"recompute": recompute, "zero_stage": zero})
        for base in bases
        for recompute in space.recompute
        for zero in space.zero_stages
    ]
    return shapes, rejected


CANONICAL_ORDER: tuple[Axis, ...] = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
# Every rank order, canonical first, then the rest in a fixed (lexicographic) order.
ALL_ORDERS: tuple[tuple[Axis, ...], ...] = (CANONICAL_ORDER,) + tuple(
    o for o in itertools.permutations(CANONICAL_ORDER) if o != CANONICAL_ORDER
)


def placement_key(cluster: Cluster, layout: Layout) -> tuple:
    """What the cost model sees of the order: the span of every group on every tier.

    Two orders with the same spans give the same estimate and the same placement, so only the
    first of them (in ALL_ORDERS) is kept. Spans are finer than `topology.placement` (they also
    carry the DP x CP and expert-DP groups), so deduplicating on them loses nothing.
    """
    return tuple(sorted((k, tuple(v)) for k, v in topology.spans(cluster, layout).items()))


class OrderCache:
    """Distinct orders per degree tuple (spans depend only on the degrees, ep and etp)."""

    def __init__(self, cluster: Cluster, search: bool = True) -> None:
        self.cluster = cluster
        self.search = search
        self._cache: dict[tuple[int, ...], tuple[tuple[Axis, ...], ...]] = {}
        self._spans: dict[tuple, dict[str, tuple[int, ...]]] = {}
        self._group: dict[tuple[int, int], tuple[int, ...]] = {}

    def spans(
        self, layout: Layout, order: tuple[Axis, ...] | None = None
    ) -> dict[str, tuple[int, ...]]:
        """topology.spans of `layout` (with `order` instead of its own, if given) as tuples
        (hashable keys for the bounds, safe to share), cached by what it reads (degrees, ep,
        etp, order)."""
        order = layout.order if order is None else order
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp, order)
        found = self._spans.get(key)
        if found is None:
            found = self._spans[key] = self._assemble(layout, order)
        return found

    def _assemble(self, layout: Layout, order: tuple[Axis, ...]) -> dict[str, tuple[int, ...]]:
        """topology.spans(cluster, layout with `order`), with topology.group_span memoized by
        (degree, stride): the 24 orders of thousands of shapes repeat few of them."""
        found = topology.spans(self.cluster, layout, order, self._group_span)
        return {axis: tuple(span) for axis, span in found.items()}

    def _group_span(self, degree: int, stride: int) -> tuple[int, ...]:
        found = self._group.get((degree, stride))
        if found is None:
            found = self._group[(degree, stride)] = tuple(
                topology.group_span(self.cluster, degree, stride)
            )
        return found

    def orders(self, layout: Layout) -> tuple[tuple[Axis, ...], ...]:
        if not self.search:
            return (CANONICAL_ORDER,)
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        found = self._cache.get(key)
        if found is None:
            seen: dict[tuple, tuple[Axis, ...]] = {}
            for order in ALL_ORDERS:
                # Every spans dict has the same keys in the same order: its values identify it.
                seen.setdefault(tuple(self.spans(layout, order).values()), order)
            found = self._cache[key] = tuple(seen.values())
        return found


def enumerate_layouts(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """All legal layouts in the space, one per distinct placement, and rejection counts
    (DeadlinePassed once `deadline`, a time.perf_counter() value, has passed)."""
    shapes, rejected = legal_shapes(model, cluster, workload, space, deadline)
    cache = OrderCache(cluster, space.search_order)
    layouts = []
    for i, shape in enumerate(shapes):
        if deadline is not None and i % 64 == 0 and time.perf_counter() > deadline:
            raise DeadlinePassed()
        for order in cache.orders(shape):
            layouts.append(
                shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
            )
    return layouts, rejected


def simplicity_rank(layout: Layout) -> tuple[int, ...]:
    """Tie-break toward simpler plans: fewer stages, less TP/CP/EP, no interleaving, less state."""
    recompute = ("none", "selective", "full").index(layout.recompute)
    return (
        layout.pp,
        layout.tp,
        layout.cp,
        layout.ep,
        layout.vp,
        recompute,
        layout.zero_stage,
        -layout.micro_batch,
        ALL_ORDERS.index(layout.order),
    )
