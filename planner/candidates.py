"""Enumerate the legal layouts for a model on a cluster, one small generator per choice.

A candidate that breaks a rule is recorded as data (its reason, counted), never raised, so the
report can say "212 candidates exceeded usable HBM; 40 had tp that does not divide the heads".
The legality rules themselves live in cost_models.rules (one copy, shared with `estimate`).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator

from cost_models import topology
from cost_models.rules import layout_violations
from cost_models.specs import Axis, Cluster, Layout, ModelSpec, Workload

from .types import SearchSpace

_NUMBERS = re.compile(r"\d+(?:[.*]\d+)*")


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


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


def legal_bases(
    model: ModelSpec, cluster: Cluster, workload: Workload, space: SearchSpace
) -> tuple[list[Layout], Counter[str]]:
    """One legal layout per (degrees, ep, vp, micro_batch), canonical order, the first recompute
    and ZeRO choice; and rejection counts (once per recompute x ZeRO x order it stands for).

    The rules in cost_models.rules read neither recompute, ZeRO stage nor order, so legality is
    checked once per base and the other choices are copied onto it.
    """
    bases: list[Layout] = []
    rejected: Counter[str] = Counter()
    per_shape = len(space.recompute) * len(space.zero_stages)
    for tp, pp, cp, dp, ep, vp, mb in _shape_tuples(model, cluster, space):
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
        problems = layout_violations(model, cluster, workload, base)
        if problems:
            rejected[reason_key(problems[0])] += per_shape
        else:
            bases.append(base)
    if space.ep is not None and model.moe is None and space.ep > 1:
        rejected[f"ep ({space.ep}) > 1 needs a mixture-of-experts model"] += 1
    return bases, rejected


def legal_shapes(
    model: ModelSpec, cluster: Cluster, workload: Workload, space: SearchSpace
) -> tuple[list[Layout], Counter[str]]:
    """Every legal base with every recompute and ZeRO choice (canonical order)."""
    bases, rejected = legal_bases(model, cluster, workload, space)
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


def rank_strides(layout: Layout, order: tuple[Axis, ...]) -> tuple[tuple[str, int], ...]:
    """What the spans of `layout` under `order` depend on besides the degrees, ep and etp: the
    rank stride of every axis (the product of the degrees inside it, DESIGN.md: rank order
    innermost first), except that an axis of degree 1 has one-GPU groups wherever it sits, so
    only TP's stride is kept among them (the EP stride is TP's x etp). Orders with equal keys
    place every group alike; tests/planner/test_sat_candidates.py checks equal spans."""
    degrees = {Axis.TP: layout.tp, Axis.CP: layout.cp, Axis.DP: layout.dp, Axis.PP: layout.pp}
    stride, key = 1, []
    for axis in order:
        degree = degrees[axis]
        if degree > 1 or axis is Axis.TP:
            key.append((axis, stride))
        stride *= degree
    return tuple(sorted(key))


class OrderCache:
    """Distinct orders per degree tuple (spans depend only on the degrees, ep and etp)."""

    def __init__(self, cluster: Cluster, search: bool = True) -> None:
        self.cluster = cluster
        self.search = search
        self._cache: dict[tuple[int, ...], tuple[tuple[Axis, ...], ...]] = {}
        self._spans: dict[tuple, dict[str, tuple[int, ...]]] = {}
        self._by_strides: dict[tuple, dict[str, tuple[int, ...]]] = {}

    def spans(
        self, layout: Layout, order: tuple[Axis, ...] | None = None
    ) -> dict[str, tuple[int, ...]]:
        """topology.spans of `layout` (with `order` instead of its own, if given) as tuples,
        cached by what it reads (degrees, ep, etp, rank strides)."""
        order = layout.order if order is None else order
        degrees = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        key = (degrees, order)
        found = self._spans.get(key)
        if found is None:
            strides = (degrees, rank_strides(layout, order))
            found = self._by_strides.get(strides)
            if found is None:
                placed = (
                    layout if order == layout.order else layout.model_copy(update={"order": order})
                )
                spans = topology.spans(self.cluster, placed)
                # Tuples: hashable cache keys for the bounds, and safe to share.
                found = self._by_strides[strides] = {k: tuple(v) for k, v in spans.items()}
            self._spans[key] = found
        return found

    def orders(self, layout: Layout) -> tuple[tuple[Axis, ...], ...]:
        if not self.search:
            return (CANONICAL_ORDER,)
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        found = self._cache.get(key)
        if found is None:
            seen: dict[int, tuple[Axis, ...]] = {}
            keys: dict[tuple, tuple[Axis, ...]] = {}
            for order in ALL_ORDERS:
                span = self.spans(layout, order)
                if id(span) in seen:  # same stride key: the same placement
                    continue
                seen[id(span)] = order
                keys.setdefault(tuple(sorted(span.items())), order)
            found = self._cache[key] = tuple(keys.values())
        return found


def enumerate_layouts(
    model: ModelSpec, cluster: Cluster, workload: Workload, space: SearchSpace
) -> tuple[list[Layout], Counter[str]]:
    """All legal layouts in the space, one per distinct placement, and rejection counts."""
    shapes, rejected = legal_shapes(model, cluster, workload, space)
    cache = OrderCache(cluster, space.search_order)
    layouts = [
        shape if order == CANONICAL_ORDER else shape.model_copy(update={"order": order})
        for shape in shapes
        for order in cache.orders(shape)
    ]
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
