"""Exact pricing of a layout on an explicit rank -> (host, GPU) map over the switch graph.

Group by group: the groups are the launchers' (planner.place.ranks.rank_groups, computed here
with numpy on the same coordinates so 131,072 ranks price in milliseconds; the tests check the
partition equals rank_groups'), and each group's span per tier is read off the real hosts.

A group's span at tier t is the size of its smallest piece (rounded down to whole multiples
of the piece inside it, `nest`): the fewest members it has inside
one domain of tier t that it touches (a hierarchical collective moves share S / n_{t-1} per
GPU over tier t+1, so the smallest piece carries the most bytes upward: cost_models.comm).
Every kind (tp, cp, dp, pp, ep, the gradient groups dp_cp, edp and, with HSDP, the
dp_shard x cp and dp_replicate groups FSDP2 reduces over) takes the element-wise smallest
piece over its groups, so the worst group sets the cost; for a group that never leaves a
domain the piece is the whole group. These spans replace the layout-derived ones in
cost_models.estimate.estimate(spans=...): every kind the Pricer reads, so no group is priced
on the layout's own rank order once it is placed.

Uplink sharing (cost_models/uplink.py): for every tapered tier, the share of the job's GPUs
under each switch below it whose gradient group (DP, DP x CP, expert-DP) leaves that switch,
rounded up to a step, the busiest switch's step passed as estimate(uplink_steps=...).
Under HSDP the gradient window's collectives are FSDP2's reduce-scatter / all-gather over
dp_shard x cp and the replicas' all-reduce over dp_replicate (cost_models.stage._hsdp_tier_s),
so a rank sends upward iff one of those two groups leaves the switch (gradient_kinds), not its
DP x CP group (their product, which can leave where both stay).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cost_models import rankmap, uplink
from cost_models.estimate import estimate
from cost_models.specs import Axis, Cluster, Estimate, Layout, ModelSpec, Workload

from . import traffic
from .allocation import Allocation

KINDS = ("tp", "cp", "dp", "pp", "dp_cp", "ep", "etp", "edp")


def _grid_keys(dims: rankmap.Dims, kinds: Mapping[str, tuple[str, ...]]) -> dict[str, np.ndarray]:
    """Per rank and kind an integer that two ranks share iff Megatron-Core's
    generate_masked_orthogonal_rank_groups puts them in one group (cost_models.rankmap): the
    rank with the kind's grid coordinates zeroed."""
    world = int(np.prod([size for _, size in dims]))
    r = np.arange(world, dtype=np.int64)
    stride = rankmap.strides(dims)
    coord = {name: (r // stride[name]) % size for name, size in dims}
    return {
        kind: r - sum((coord[t] * stride[t] for t in tokens), np.zeros_like(r))
        for kind, tokens in kinds.items()
    }


def group_keys(layout: Layout, *, moe: bool = True) -> dict[str, np.ndarray]:
    """An integer per rank and kind; two ranks share a group of the kind iff their keys match
    (the groups of cost_models.rankmap.rank_groups, which the launchers build; with HSDP,
    Layout.dp_shard, also torchtitan's dp_shard x cp and dp_replicate groups, and with EP the
    experts' edp_shard and edp_replicate)."""
    keys: dict[str, np.ndarray] = {}
    for dims, kinds in rankmap.kind_grids(layout, moe=moe):
        keys.update(_grid_keys(dims, kinds))
    return keys


def _grid_rows(dims: rankmap.Dims, kinds: Mapping[str, tuple[str, ...]]) -> dict[str, np.ndarray]:
    """Per kind a (groups, members) array of ranks, one group per row: the groups of
    _grid_keys, read off the rank grid with the kind's axes moved last (no sort)."""
    sizes = [size for _, size in dims][::-1]  # numpy axis a holds dims[-1 - a]
    names = [name for name, _ in dims][::-1]
    grid = np.arange(int(np.prod(sizes)), dtype=np.int64).reshape(sizes)
    out = {}
    for kind, tokens in kinds.items():
        inner = [a for a, name in enumerate(names) if name in tokens]
        outer = [a for a in range(len(names)) if a not in inner]
        members = int(np.prod([sizes[a] for a in inner]))
        out[kind] = grid.transpose(outer + inner).reshape(-1, members)
    return out


def group_rows(layout: Layout, *, moe: bool = True) -> dict[str, np.ndarray]:
    """group_keys' groups as (groups, members) rank arrays."""
    rows: dict[str, np.ndarray] = {}
    for dims, kinds in rankmap.kind_grids(layout, moe=moe):
        rows.update(_grid_rows(dims, kinds))
    return rows


def _fewest_together(dom: np.ndarray) -> int:
    """Fewest members of one row (group) that share a value (domain), over all rows."""
    if dom.shape[1] > 1 and (dom[:, 1:] < dom[:, :-1]).any():
        dom = np.sort(dom, axis=1)
    change = np.ones(dom.shape, dtype=bool)
    change[:, 1:] = dom[:, 1:] != dom[:, :-1]
    starts = np.flatnonzero(change.ravel())
    return int(np.diff(np.append(starts, dom.size)).min())


def group_lists(layout: Layout, *, moe: bool = True) -> dict[str, list[list[int]]]:
    """The rank lists of every group of each kind (sorted, as rankmap.rank_groups)."""
    out = {}
    for kind, key in group_keys(layout, moe=moe).items():
        groups: dict[int, list[int]] = {}
        for rank, k in enumerate(key.tolist()):
            groups.setdefault(k, []).append(rank)
        out[kind] = sorted(groups.values())
    return out


def nest(pieces: Sequence[int]) -> list[int]:
    """cost_models.rankmap's rule for whole factors per tier: the outermost tier holds the whole
    group; inward, each tier's span is the largest divisor of the next tier's span that is at
    most the tier's smallest piece (rankmap._whole, restated: no private imports)."""
    out = [int(pieces[-1])] * len(pieces)
    for t in range(len(pieces) - 2, -1, -1):
        out[t] = _largest_divisor_at_most(out[t + 1], int(pieces[t]))
    return out


def _largest_divisor_at_most(n: int, cap: int) -> int:
    cap = min(n, max(1, cap))
    if n % cap == 0:
        return cap
    return max(d for d in range(1, cap + 1) if n % d == 0)


def placed_pieces(
    alloc: Allocation, layout: Layout, host_of_rank: np.ndarray, *, moe: bool = True
) -> dict[str, list[int]]:
    """Smallest piece of every kind per tier over every group (raw; the last entry is the group
    size)."""
    out: dict[str, list[int]] = {}
    for kind, rows in group_rows(layout, moe=moe).items():
        n = rows.shape[1]
        if n <= 1:
            out[kind] = [1] * len(alloc.domains)
            continue
        hosts = host_of_rank[rows]
        out[kind] = [*(_fewest_together(d[hosts]) for d in alloc.domains[:-1]), n]
    return out


GRADIENT_KINDS = ("dp", "dp_cp", "edp")  # the gradient window's groups (cost_models.uplink)
# With HSDP: the groups FSDP2 reduces over (the experts' own two with EP; absent kinds are skipped).
HSDP_GRADIENT_KINDS = ("dp_shard", "dp_replicate", "edp_shard", "edp_replicate")
PIPELINE_KINDS = ("pp", "tp", "cp", "ep", "etp")  # the pipeline window's


def gradient_kinds(layout: Layout) -> tuple[str, ...]:
    """The gradient window's groups: HSDP_GRADIENT_KINDS where the layout is HSDP (Layout
    forbids ZeRO-0 with it; cost_models.stage.dp_tier_times_s then prices exactly those, the
    experts' pair only with EP), else GRADIENT_KINDS."""
    return HSDP_GRADIENT_KINDS if layout.dp_shard is not None else GRADIENT_KINDS


def gradient_leavers(
    rows: Mapping[str, np.ndarray], dom: np.ndarray, kinds: Sequence[str] = GRADIENT_KINDS
) -> np.ndarray:
    """Per rank: its group of one of `kinds` has a member in another domain of `dom` (domain
    per rank; rows: group_rows)."""
    out = np.zeros(len(dom), dtype=bool)
    for kind in kinds:
        if kind in rows:
            d = dom[rows[kind]]
            leaving = d.min(axis=1) != d.max(axis=1)
            out[rows[kind][leaving]] = True
    return out


def uplink_steps(
    cluster: Cluster,
    alloc: Allocation,
    layout: Layout,
    host_of_rank: np.ndarray,
    *,
    moe: bool = True,
    kinds: Sequence[str] | None = None,
) -> dict[int, int]:
    """Tapered tier j -> the largest step over the switches of tier j-1 (cost_models.uplink):
    UPLINK_STEPS x (GPUs under it with a group of `kinds` that leaves it) / (the job's GPUs
    under it), rounded up (kinds: None, the gradient window's (gradient_kinds), or
    PIPELINE_KINDS, the two windows); where
    other jobs' traffic takes part of a switch's uplink, over the ports' share left to the job
    (planner/place/traffic.py)."""
    rows = group_rows(layout, moe=moe)
    kinds = gradient_kinds(layout) if kinds is None else kinds
    gpn = cluster.gpus_per_node
    k = traffic.scale(alloc)
    out = {}
    for j in traffic.shared_tiers(cluster, alloc):
        host_dom = alloc.domains[j - 1]
        dom = host_dom[host_of_rank]
        leaving = gradient_leavers(rows, dom, kinds)
        sending = np.bincount(dom[leaving], minlength=int(host_dom.max()) + 1)
        ports = gpn * np.bincount(host_dom, minlength=int(host_dom.max()) + 1)
        ports = traffic.effective_ports(alloc, j, ports)
        top = traffic.max_step(alloc, j)
        out[j] = max(
            (
                uplink.uplink_step(k * int(c), int(p), top)
                for c, p in zip(sending, ports, strict=True)
            ),
            default=0,
        )
    return out


def placed_spans(
    alloc: Allocation, layout: Layout, host_of_rank: np.ndarray, *, moe: bool = True
) -> dict[str, list[int]]:
    """Span of every kind (smallest piece per tier over every group, whole factors) on the map."""
    pieces = placed_pieces(alloc, layout, host_of_rank, moe=moe)
    return {kind: nest(p) for kind, p in pieces.items()}


def price(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    alloc: Allocation,
    host_of_rank: np.ndarray,
) -> Estimate:
    """The estimate of `layout` with rank r on host alloc.hosts[host_of_rank[r]]."""
    moe = model.moe is not None
    spans = placed_spans(alloc, layout, host_of_rank, moe=moe)
    steps = uplink_steps(cluster, alloc, layout, host_of_rank, moe=moe)
    pipe = uplink_steps(cluster, alloc, layout, host_of_rank, moe=moe, kinds=PIPELINE_KINDS)
    return estimate(
        model,
        cluster,
        workload,
        layout,
        spans=spans,
        uplink_steps=steps,
        pipeline_uplink_steps=pipe,
    )


def host_order_map(cluster: Cluster, layout: Layout) -> np.ndarray:
    """Rank r on host r // gpus_per_node of the given host order (torchrun's node ranks)."""
    return np.arange(layout.world_size, dtype=np.int64) // cluster.gpus_per_node


@dataclass
class Baselines:
    """Step times with the hosts in the scheduler's order: the plan's own order and the best of
    the launchable rank orders on that host order."""

    scheduler: Estimate
    best_order: Estimate


def launchable_orders(
    model: ModelSpec, layout: Layout, orders: Sequence[tuple[Axis, ...]] | None = None
) -> list[tuple[Axis, ...]]:
    """The rank orders of `orders` (None: all 24) a launcher builds for this plan: for an MoE
    model only those whose dense and expert grids give the same PP groups
    (cost_models.rankmap.expert_pp_mismatch, Megatron-Core's initialize_model_parallel assert)."""
    pool = itertools.permutations(tuple(Axis)) if orders is None else orders
    moe = model.moe is not None
    return [o for o in pool if not (moe and rankmap.expert_pp_mismatch(layout, o) is not None)]


def baselines(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    alloc: Allocation,
    orders: Sequence[tuple[Axis, ...]] | None = None,
) -> Baselines:
    """The plan's own order and the best of the launchable `orders` (launchable_orders) on the
    scheduler's host order."""
    hosts = host_order_map(cluster, layout)
    own = price(model, cluster, workload, layout, alloc, hosts)
    best = own
    for order in launchable_orders(model, layout, orders):
        lo = layout.model_copy(update={"order": order})
        e = price(model, cluster, workload, lo, alloc, hosts)
        if e.step_time_s < best.step_time_s - 1e-12:
            best = e
    return Baselines(scheduler=own, best_order=best)


def crossings(
    cluster: Cluster,
    alloc: Allocation,
    layout: Layout,
    host_of_rank: np.ndarray,
    *,
    moe: bool = True,
) -> dict[str, dict[str, object]]:
    """For each kind of group: the slowest tier any of its groups crosses, and how many groups
    cross it (the report's "which groups cross which switches")."""
    out: dict[str, dict[str, object]] = {}
    for kind, rows in group_rows(layout, moe=moe).items():
        if rows.shape[1] == 1:
            continue  # groups of one rank
        hosts = host_of_rank[rows]
        worst, count = None, 0
        for t in range(len(alloc.domains) - 1, -1, -1):
            # a group crosses tier t+1's links if it touches more than one tier-t domain
            d = alloc.domains[t][hosts]
            crossing = int((d.min(axis=1) != d.max(axis=1)).sum())
            if crossing and t + 1 < len(cluster.tiers):
                worst, count = cluster.tiers[t + 1].name, crossing
                break
        out[kind] = {
            "groups": rows.shape[0],
            "slowest_tier": worst or cluster.tiers[0].name,
            "groups_crossing": count,
        }
    return out


def spans_equal(a: Mapping[str, Sequence[int]], b: Mapping[str, Sequence[int]]) -> bool:
    return all(list(a[k]) == list(b[k]) for k in KINDS)
