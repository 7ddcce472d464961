"""Where each parallel group lands on the link tiers: the one place that decides it.

Ranks are numbered with the layout's `order` (innermost axis fastest, as Megatron's `--order`
string and torchtitan's device-mesh order do), and rank r sits on GPU r: consecutive ranks share
the NVLink domain first, then the next tier, and so on. A group of an axis with degree n and rank
stride k (the product of the degrees inside it) has min(n, D // k) members inside one tier domain
of D GPUs. EP groups follow Megatron-Core's expert order (etp, ep, edp, pp): stride etp x the
stride of TP. Derivation: docs/cost_model.md#placement.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from .specs import Axis, Cluster, Layout, LinkTier

# group_span(cluster, degree, stride) with the cluster bound: (degree, stride) -> span
GroupSpan = Callable[[int, int], Sequence[int]]


_NAMES = {axis: axis.value for axis in Axis}  # a dict lookup: the search calls this per order


def axis_strides(layout: Layout, order: tuple[Axis, ...] | None = None) -> dict[str, int]:
    """Rank stride of every axis (and of EP) under the layout's order (or `order`)."""
    degrees = axis_degrees(layout)
    strides: dict[str, int] = {}
    stride = 1
    for axis in layout.order if order is None else order:
        name = _NAMES[axis]
        strides[name] = stride
        stride *= degrees[name]
    strides["ep"] = strides["tp"] * layout.etp
    return strides


def axis_degrees(layout: Layout) -> dict[str, int]:
    return {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp, "ep": layout.ep}


def tier_domains(cluster: Cluster) -> list[int]:
    """GPUs in one domain of each tier, capped at the cluster size."""
    return [min(t.domain_size or cluster.num_gpus, cluster.num_gpus) for t in cluster.tiers]


@functools.cache
def _largest_divisor_at_most(n: int, cap: int) -> int:
    cap = min(n, max(1, cap))
    if n % cap == 0:  # the common case: nested power-of-two domains
        return cap
    best = 1
    for d in range(1, math.isqrt(n) + 1):  # O(sqrt n): degrees reach 131,072
        if n % d == 0:
            best = max([best] + [x for x in (d, n // d) if x <= cap])
    return best


def group_span(cluster: Cluster, degree: int, stride: int) -> list[int]:
    """Members of one group inside one domain of each tier (cumulative, ends at `degree`).

    Where a domain does not hold a whole number of sub-groups (a 72-GPU NVL72 domain, a 3,072-GPU
    pod) the count is rounded down to a divisor of the degree, so every tier's factor is whole
    and a group straddling such a boundary pays for crossing it.
    """
    span, inner = [], 1
    for domain in tier_domains(cluster):
        members = _largest_divisor_at_most(degree, domain // stride)
        inner = max(inner, members if members % inner == 0 else inner)
        span.append(inner)
    span[-1] = degree  # the outermost tier holds the whole cluster
    return span


def combined_span(
    cluster: Cluster, members: list[tuple[int, int]], group: GroupSpan | None = None
) -> list[int]:
    """Span of a group that varies several axes at once, given (degree, stride) per axis.

    With nested power-of-two strides the members inside a domain multiply across the axes.
    `group` replaces group_span (the search passes a memoized one).
    """
    group = group or functools.partial(group_span, cluster)
    span = [1] * len(cluster.tiers)
    for degree, stride in members:
        span = [s * n for s, n in zip(span, group(degree, stride), strict=True)]
    return span


def spans(
    cluster: Cluster,
    layout: Layout,
    order: tuple[Axis, ...] | None = None,
    group: GroupSpan | None = None,
) -> dict[str, Sequence[int]]:
    """Span of every axis group, plus the DP x CP gradient group (`dp_cp`) and expert-DP (`edp`).

    `order` replaces the layout's own; `group` replaces group_span (the search passes one
    memoized by (degree, stride) that returns shared tuples, planner.search.candidates.OrderCache)."""
    group = group or functools.partial(group_span, cluster)
    strides, degrees = axis_strides(layout, order), axis_degrees(layout)
    out = {a: group(degrees[a], strides[a]) for a in degrees}
    dp_cp = [(layout.dp, strides["dp"]), (layout.cp, strides["cp"])]
    out["dp_cp"] = combined_span(cluster, dp_cp, group)
    edp = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    out["edp"] = group(edp, strides["ep"] * layout.ep)
    # HSDP (Layout.dp_shard): the shard group is the inner dp_shard part of dp (with cp), the
    # replicas the outer part, as torchtitan's mesh (..., dp_replicate, dp_shard, cp, tp) nests
    # them. Without HSDP: the whole dp x cp group, and groups of one.
    shard = [(layout.shard_dp, strides["dp"]), (layout.cp, strides["cp"])]
    out["dp_shard"] = combined_span(cluster, shard, group)
    out["dp_replicate"] = group(layout.replicate_dp, strides["dp"] * layout.shard_dp)
    return out


def placement(cluster: Cluster, layout: Layout) -> dict[str, dict[str, int]]:
    """Factor of each axis's degree on each tier (one axis's factors multiply to its degree)."""
    out: dict[str, dict[str, int]] = {}
    for axis, span in spans(cluster, layout).items():
        if axis in ("dp_cp", "edp", "dp_shard", "dp_replicate"):
            continue
        factors, inner = {}, 1
        for tier, n in zip(cluster.tiers, span, strict=True):
            factors[tier.name] = max(1, n // inner)
            inner = max(inner, n)
        out[axis] = factors
    return out


def outermost_tier(cluster: Cluster, span: list[int]) -> LinkTier | None:
    """The slowest tier a group crosses (None for a group of one GPU)."""
    if span[-1] <= 1:
        return None
    for tier, n in zip(cluster.tiers, span, strict=True):
        if n >= span[-1]:
            return tier
    return cluster.tiers[-1]
