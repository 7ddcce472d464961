"""Exact pricing of a layout on an explicit rank -> (host, GPU) map over the switch graph.

Group by group: the groups are the launchers' (planner.place.ranks.rank_groups, computed here
with numpy on the same coordinates so 131,072 ranks price in milliseconds; the tests check the
partition equals rank_groups'), and each group's span per tier is read off the real hosts.

A group's span at tier t is the size of its smallest piece (rounded down to whole multiples
of the piece inside it, `nest`): the fewest members it has inside
one domain of tier t that it touches (a hierarchical collective moves share S / n_{t-1} per
GPU over tier t+1, so the smallest piece carries the most bytes upward: cost_models.comm).
Every kind (tp, cp, dp, pp, ep and the gradient groups dp_cp, edp) takes the element-wise
smallest piece over its groups, so the worst group sets the cost; for a group that never
leaves a domain the piece is the whole group. These spans replace the layout-derived ones in
cost_models.estimate.estimate(spans=...).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cost_models import topology
from cost_models.estimate import estimate
from cost_models.specs import Axis, Cluster, Estimate, Layout, ModelSpec, Workload

from .allocation import Allocation

KINDS = ("tp", "cp", "dp", "pp", "ep", "dp_cp", "edp")


def coordinates(layout: Layout, world: int | None = None) -> dict[str, np.ndarray]:
    """(tp, cp, dp, pp) coordinates, the stage-local index and ep of every rank (ranks.py)."""
    r = np.arange(layout.world_size if world is None else world, dtype=np.int64)
    strides, degrees = topology.axis_strides(layout), topology.axis_degrees(layout)
    c = {a: (r // strides[a]) % degrees[a] for a in ("tp", "cp", "dp", "pp")}
    # Megatron-Core's expert order: the stage-local index, TP innermost, then the other
    # non-PP axes in the layout's order (planner.place.ranks._stage_local_index).
    local, inner = c["tp"].copy(), layout.tp
    for axis in layout.order:
        if axis.value in ("tp", "pp"):
            continue
        local += c[axis.value] * inner
        inner *= degrees[axis.value]
    c["local"] = local
    c["ep"] = (local // layout.etp) % layout.ep
    return c


def group_keys(layout: Layout) -> dict[str, np.ndarray]:
    """An integer per rank and kind; two ranks share a group of the kind iff their keys match."""
    c = coordinates(layout)
    s = topology.axis_strides(layout)
    r = np.arange(layout.world_size, dtype=np.int64)
    keys = {a: r - c[a] * s[a] for a in ("tp", "cp", "dp", "pp")}
    stage = c["pp"] * layout.world_size
    etp, ep = layout.etp, layout.ep
    keys["ep"] = stage + (c["local"] % etp) + etp * (c["local"] // (etp * ep))
    keys["dp_cp"] = r - c["dp"] * s["dp"] - c["cp"] * s["cp"]
    keys["edp"] = stage + (c["local"] % etp) + etp * c["ep"]
    return keys


def group_lists(layout: Layout) -> dict[str, list[list[int]]]:
    """The rank lists of every group of each kind (sorted, as ranks.rank_groups)."""
    out = {}
    for kind, key in group_keys(layout).items():
        groups: dict[int, list[int]] = {}
        for rank, k in enumerate(key.tolist()):
            groups.setdefault(k, []).append(rank)
        out[kind] = sorted(groups.values())
    return out


def placed_spans(
    alloc: Allocation, layout: Layout, host_of_rank: np.ndarray
) -> dict[str, list[int]]:
    """Span of every kind (smallest piece per tier, worst group) on the given map."""
    keys = group_keys(layout)
    sizes = {
        "tp": layout.tp,
        "cp": layout.cp,
        "dp": layout.dp,
        "pp": layout.pp,
        "ep": layout.ep,
        "dp_cp": layout.dp * layout.cp,
        "edp": max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp)),
    }
    out: dict[str, list[int]] = {}
    dom = [d[host_of_rank] for d in alloc.domains]
    for kind in KINDS:
        n = sizes[kind]
        if n <= 1:
            out[kind] = [1] * len(dom)
            continue
        key = keys[kind]
        span = []
        for d in dom[:-1]:
            pair = key * (int(d.max()) + 1) + d
            _, counts = np.unique(pair, return_counts=True)
            span.append(int(counts.min()))
        span.append(n)
        out[kind] = nest(span)
    return out


def nest(pieces: Sequence[int]) -> list[int]:
    """Whole factors per tier, as cost_models.comm reads a span (f_t = n_t // n_{t-1}): each
    tier's piece is rounded down to a multiple of the piece inside it (a group with pieces of
    3 per leaf and 5 per pod aggregates no whole second leaf-piece in a pod: it is priced as
    3 per pod, the conservative side), the outermost entry stays the group size (its last
    factor is a floor as well, as in topology.group_span)."""
    span = [max(1, int(pieces[0]))]
    for p in pieces[1:-1]:
        span.append(span[-1] * max(1, int(p) // span[-1]))
    if len(pieces) > 1:
        span.append(max(int(pieces[-1]), span[-1]))
    return span


def price(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    alloc: Allocation,
    host_of_rank: np.ndarray,
) -> Estimate:
    """The estimate of `layout` with rank r on host alloc.hosts[host_of_rank[r]]."""
    return estimate(
        model, cluster, workload, layout, spans=placed_spans(alloc, layout, host_of_rank)
    )


def host_order_map(cluster: Cluster, layout: Layout) -> np.ndarray:
    """Rank r on host r // gpus_per_node of the given host order (torchrun's node ranks)."""
    return np.arange(layout.world_size, dtype=np.int64) // cluster.gpus_per_node


@dataclass
class Baselines:
    """Step times with the hosts in the scheduler's order: the plan's own order and the best of
    the 24 rank orders on that host order."""

    scheduler: Estimate
    best_order: Estimate


def baselines(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    alloc: Allocation,
) -> Baselines:
    hosts = host_order_map(cluster, layout)
    own = price(model, cluster, workload, layout, alloc, hosts)
    best = own
    for order in itertools.permutations(tuple(Axis)):
        lo = layout.model_copy(update={"order": order})
        e = price(model, cluster, workload, lo, alloc, hosts)
        if e.step_time_s < best.step_time_s - 1e-12:
            best = e
    return Baselines(scheduler=own, best_order=best)


def crossings(
    cluster: Cluster, alloc: Allocation, layout: Layout, host_of_rank: np.ndarray
) -> dict[str, dict[str, object]]:
    """For each kind of group: the slowest tier any of its groups crosses, and how many groups
    cross it (the report's "which groups cross which switches")."""
    keys = group_keys(layout)
    dom = [d[host_of_rank] for d in alloc.domains]
    out: dict[str, dict[str, object]] = {}
    for kind in KINDS:
        key = keys[kind]
        groups = np.unique(key)
        if len(groups) == len(key):
            continue  # groups of one rank
        worst, count = None, 0
        for t in range(len(dom) - 1, -1, -1):
            # a group crosses tier t+1's links if it touches more than one tier-t domain
            pair = np.unique(key * (int(dom[t].max()) + 1) + dom[t])
            per_group = np.unique(pair // (int(dom[t].max()) + 1), return_counts=True)[1]
            crossing = int((per_group > 1).sum())
            if crossing and t + 1 < len(cluster.tiers):
                worst, count = cluster.tiers[t + 1].name, crossing
                break
        out[kind] = {
            "groups": len(groups),
            "slowest_tier": worst or cluster.tiers[0].name,
            "groups_crossing": count,
        }
    return out


def spans_equal(a: Mapping[str, Sequence[int]], b: Mapping[str, Sequence[int]]) -> bool:
    return all(list(a[k]) == list(b[k]) for k in KINDS)
