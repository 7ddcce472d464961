"""The counted form of a layout on an allocation, without costs: units, leaves, levels, split
blocks and the uplink structure the placement model counts over (planner/place/model.py).

Unit of placement: U = max(GPUs per node, tp x cp, etp x ep) consecutive stage-local ranks, i.e.
B = U / GPUs-per-node whole nodes under one leaf; a stage is D = tp*cp*dp / U units. Nodes under
one switch are interchangeable, so the model counts units of every stage per leaf. Leaves with a
remainder of fewer than B nodes give just enough split blocks (pseudo-leaves of capacity 1) made
of leftover nodes, inside one pod first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cost_models.errors import InvalidInput
from cost_models.specs import Axis, Cluster, Layout

from . import traffic
from .allocation import Allocation

CANONICAL = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)


class Unplaceable(Exception):
    """The layout does not split into whole units under leaves; the baselines stand."""


@dataclass
class Shape:
    """Units, leaves, levels and uplink structure of one layout on one allocation."""

    layout: Layout  # with the canonical order
    unit_gpus: int
    nodes_per_unit: int
    units_per_stage: int
    levels: list[list[list[int]]]  # level -> domains -> leaf indices (level 0: leaf -> [leaf])
    leaf_hosts: list[list[int]]  # leaf -> host indices in the scheduler's order
    capacity: list[int]  # units per leaf (pseudo-leaves of one split block last, capacity 1)
    split_blocks: int  # blocks made of leftover nodes of several leaves (pseudo-leaves)
    crossing: list[bool]  # level -> some split block spans several of its domains
    split_touch: list[list[list[int]]]  # level -> split block -> domains it spans ([]: inside one)
    level_of_tier: list[int | None]  # model level whose pieces set the tier, None: not a level
    lowest_tier: int  # the first tier above a host (0 when NVLink domains span hosts)
    # Uplink sharing: tapered tiers whose switches are a model level (their step q varies with
    # the counts), that level, the job's GPUs under each of its domains, and the GPUs of split
    # blocks that span that level's domains, per domain (always used, always leaving).
    uplink_tiers: list[int]
    uplink_levels: list[int]
    uplink_ports: list[list[int]]  # in uplink_scale units: x the share other jobs leave
    uplink_split: list[list[int]]
    uplink_max: list[int]  # the largest step of each (UPLINK_STEPS unless other jobs load it)
    uplink_scale: int  # senders count uplink_scale x against the ports (1: no other traffic)
    # The pipeline window (PP sends, TP / CP / EP exchanges) on the same uplink tiers where
    # pp > 1: chunk order of build_map, and per level and domain its leaves' positions [lo, hi).
    pipe: bool
    chunk_order: list[int]
    domain_span: list[list[tuple[int, int]]]


@dataclass
class _Units:
    layout: Layout
    unit_gpus: int
    nodes_per_unit: int
    units_per_stage: int


def _units(cluster: Cluster, layout: Layout, alloc: Allocation) -> _Units:
    lo = layout.model_copy(update={"order": CANONICAL})
    gpn = cluster.gpus_per_node
    stage = lo.tp * lo.cp * lo.dp
    unit = max(gpn, lo.tp * lo.cp, lo.etp * lo.ep)
    if unit % gpn or stage % unit or unit % (lo.tp * lo.cp) or unit % (lo.etp * lo.ep):
        raise Unplaceable(
            f"a stage ({stage} GPUs) is not whole blocks of {unit} GPUs on whole nodes"
        )
    if lo.world_size > len(alloc.hosts) * gpn:
        raise InvalidInput(
            f"allocation: the layout needs {lo.world_size} GPUs, the allocation has "
            f"{len(alloc.hosts) * gpn}"
        )
    return _Units(lo, unit, unit // gpn, stage // unit)


def _partitions(cluster: Cluster, alloc: Allocation) -> tuple[list[np.ndarray], list, int]:
    """Model levels: the distinct host partitions of the tiers strictly inside the outermost one
    with more than one domain (a level above which nothing splits adds nothing); the level of
    each tier; the lowest tier above a host."""
    tiers = len(cluster.tiers)
    partitions: list[np.ndarray] = []
    level_of_tier: list[int | None] = [None] * tiers
    lowest = 0 if len(np.unique(alloc.domains[0])) < len(alloc.hosts) else 1
    for t in range(lowest, tiers - 1):
        d = alloc.domains[t]
        if len(np.unique(d)) <= 1:
            continue
        for i, p in enumerate(partitions):
            if np.array_equal(p, d):
                level_of_tier[t] = i
                break
        else:
            level_of_tier[t] = len(partitions)
            partitions.append(d)
    if not partitions:
        partitions = [np.zeros(len(alloc.hosts), dtype=np.int64)]
    return partitions, level_of_tier, lowest


def _leaves(leaf_of_host: np.ndarray) -> list[list[int]]:
    """Host indices per leaf, leaves in first-appearance order."""
    leaf_ids = list(dict.fromkeys(leaf_of_host.tolist()))
    leaf_index = {d: i for i, d in enumerate(leaf_ids)}
    leaf_hosts: list[list[int]] = [[] for _ in leaf_ids]
    for h, d in enumerate(leaf_of_host.tolist()):
        leaf_hosts[leaf_index[d]].append(h)
    return leaf_hosts


def split_blocks(
    top: np.ndarray, leaf_hosts: list[list[int]], capacity: list[int], b: int
) -> list[list[int]]:
    """Blocks of b leftover nodes (the hosts whole blocks leave in each leaf), leaves in the
    scheduler's order: inside one top-level domain (pod) first; a pod's residue (< b nodes)
    joins the next pod's first leftovers, freeing one of that pod's whole blocks where it has
    too few, so a block spans at most two neighbouring pods where it can (a stage that fills
    them in that order holds whole blocks on both sides). Returns every such block, inside pods
    first, each block's hosts in the scheduler's order; `capacity` (whole blocks per leaf) is
    updated in place."""
    pods: dict[int, list[int]] = {}
    for j, hs in enumerate(leaf_hosts):
        pods.setdefault(int(top[hs[0]]), []).append(j)

    def rest(leaves: list[int]) -> list[int]:
        return [h for j in leaves for h in leaf_hosts[j][capacity[j] * b :]]

    inside, across, carry = [], [], []
    for leaves in pods.values():
        pool = rest(leaves)
        if carry:
            want = b - len(carry)
            if len(pool) < want and any(capacity[j] for j in leaves):
                capacity[next(j for j in leaves if capacity[j])] -= 1
                pool = rest(leaves)
            carry, pool = carry + pool[:want], pool[want:]
            if len(carry) == b:
                across.append(carry)
                carry = []
        whole = len(pool) // b * b
        inside += [pool[i : i + b] for i in range(0, whole, b)]
        carry += pool[whole:]
    return [sorted(hs) for hs in [*inside, *across]]


def _levels(
    partitions: list[np.ndarray], leaf_hosts: list[list[int]], n_leaves: int
) -> tuple[list[list[list[int]]], list[list[list[int]]]]:
    """Domains of every level as leaf lists (a split block inside one domain joins it), and per
    level the domains each split block spans ([]: inside one)."""
    levels: list[list[list[int]]] = [[[i] for i in range(n_leaves)]]
    leaf_of = {h: i for i, hs in enumerate(leaf_hosts[:n_leaves]) for h in hs}
    touch = [[sorted({leaf_of[h] for h in hs}) for hs in leaf_hosts[n_leaves:]]]
    for p in partitions[1:]:
        groups: dict[int, list[int]] = {}
        for i, hs in enumerate(leaf_hosts[:n_leaves]):
            groups.setdefault(int(p[hs[0]]), []).append(i)
        index = {v: i for i, v in enumerate(groups)}
        touch.append([])
        for i, hs in enumerate(leaf_hosts[n_leaves:], start=n_leaves):
            ids = sorted({index[int(v)] for v in p[hs]})
            if len(ids) == 1:
                groups[int(p[hs[0]])].append(i)
                ids = []  # inside one domain: counted there in full
            touch[-1].append(ids)  # else it belongs to none of the domains it spans
        levels.append(list(groups.values()))
    return levels, touch


@dataclass
class _Uplinks:
    tiers: list[int]
    levels: list[int]
    ports: list[list[int]]
    split: list[list[int]]
    max_step: list[int]


def _uplinks(
    cluster: Cluster,
    alloc: Allocation,
    level_of_tier: list[int | None],
    levels: list[list[list[int]]],
    leaf_hosts: list[list[int]],
    touch: list[list[list[int]]],
    n_leaves: int,
) -> _Uplinks:
    """Uplink sharing (cost_models.uplink): a tapered tier j's switches are the domains of tier
    j-1; where those are a model level, the step q_j follows the counts. Other jobs' traffic
    (traffic.py) scales each switch's ports by the share it leaves the job."""
    gpn = cluster.gpus_per_node
    leaf_of = {h: i for i, hs in enumerate(leaf_hosts[:n_leaves]) for h in hs}
    out = _Uplinks([], [], [], [], [])
    for j in traffic.shared_tiers(cluster, alloc):
        lv = level_of_tier[j - 1]
        if lv is None:
            continue  # nodes or one domain: the base map's step (tables.py)
        real = [[i for i in dom if i < n_leaves] for dom in levels[lv]]
        dom_of_leaf = {i: k for k, r in enumerate(real) for i in r}
        split = [0] * len(real)
        for b, hs in enumerate(leaf_hosts[n_leaves:]):
            if touch[lv][b]:  # spans this level's domains: its GPUs leave them
                for h in hs:
                    split[dom_of_leaf[leaf_of[h]]] += gpn
        ports = [gpn * sum(len(leaf_hosts[i]) for i in r) for r in real]
        # the tier-(j-1) switch of each domain: the one above its first host
        switch = [int(alloc.domains[j - 1][leaf_hosts[r[0]][0]]) if r else 0 for r in real]
        full = traffic.effective_ports(alloc, j, np.zeros(len(alloc.names[j - 1]), np.int64) + 1)
        out.tiers.append(j)
        out.levels.append(lv)
        out.ports.append([p * int(full[w]) for p, w in zip(ports, switch, strict=True)])
        out.split.append(split)
        out.max_step.append(traffic.max_step(alloc, j))
    return out


def leaf_order(levels: list[list[list[int]]], leaves: int) -> list[int]:
    """Leaves in (top level, ..., leaf) domain order: build_map's chunk order."""
    return sorted(
        range(leaves),
        key=lambda i: tuple(domain_of(levels, lv, i) for lv in range(len(levels) - 1, -1, -1)),
    )


def domain_of(levels: list[list[list[int]]], level: int, leaf: int) -> int:
    for i, dom in enumerate(levels[level]):
        if leaf in dom:
            return i
    return len(levels[level])  # a split block across this level's domains: after them


def level_cuts(shape: Shape, level: int) -> list[int]:
    """Positions k in build_map's chunk order where a domain of `level` ends: the leaves at k - 1
    and k lie in different domains (a split block across the level's domains is one of its
    own). A stage's units in one domain are the chunks between two cuts."""
    order = shape.chunk_order
    dom = [domain_of(shape.levels, level, leaf) for leaf in order]
    lone = len(shape.levels[level])  # domain_of's value for a split block across the level
    return [
        k
        for k in range(1, len(order))
        if dom[k] != dom[k - 1] or dom[k] == lone
    ]


def _domain_spans(
    levels: list[list[list[int]]], order: list[int]
) -> list[list[tuple[int, int]]]:
    pos = {leaf: k for k, leaf in enumerate(order)}
    out = []
    for doms in levels:
        spans = []
        for dom in doms:
            at = sorted(pos[j] for j in dom)
            assert at[-1] - at[0] + 1 == len(at)  # a domain's leaves are contiguous in the order
            spans.append((at[0], at[-1] + 1))
        out.append(spans)
    return out


def build_shape(cluster: Cluster, layout: Layout, alloc: Allocation) -> Shape:
    """The counted form; raises Unplaceable when the layout's stages are not whole units of
    nodes or the leaves cannot hold the units whole."""
    u = _units(cluster, layout, alloc)
    lo, b, per_stage = u.layout, u.nodes_per_unit, u.units_per_stage
    partitions, level_of_tier, lowest = _partitions(cluster, alloc)
    leaf_hosts = _leaves(partitions[0])
    capacity = [len(hs) // b for hs in leaf_hosts]
    n_leaves = len(leaf_hosts)
    if per_stage * lo.pp > sum(capacity) and b > 1:
        # Leaves with a remainder of fewer than B nodes: just enough blocks are made of the
        # leftover nodes (inside pods first, neighbouring leaves), each a pseudo-leaf of
        # capacity 1 that every count matrix then uses (the capacity is exactly the need).
        blocks = split_blocks(partitions[-1], leaf_hosts, capacity, b)
        short = per_stage * lo.pp - sum(capacity)  # whole blocks freed to join pods' residues
        for hosts in blocks[:short]:
            leaf_hosts.append(hosts)
            capacity.append(1)
    levels, touch = _levels(partitions, leaf_hosts, n_leaves)
    up = _uplinks(cluster, alloc, level_of_tier, levels, leaf_hosts, touch, n_leaves)
    order = leaf_order(levels, len(leaf_hosts))
    shape = Shape(
        layout=lo,
        unit_gpus=u.unit_gpus,
        nodes_per_unit=b,
        units_per_stage=per_stage,
        levels=levels,
        leaf_hosts=leaf_hosts,
        capacity=capacity,
        split_blocks=len(leaf_hosts) - n_leaves,
        crossing=[any(t) for t in touch],
        split_touch=touch,
        level_of_tier=level_of_tier,
        lowest_tier=lowest,
        uplink_tiers=up.tiers,
        uplink_levels=up.levels,
        uplink_ports=up.ports,
        uplink_split=up.split,
        uplink_max=up.max_step,
        uplink_scale=traffic.scale(alloc),
        pipe=lo.pp > 1 and bool(up.tiers),
        chunk_order=order,
        domain_span=_domain_spans(levels, order),
    )
    if sum(capacity) < per_stage * lo.pp:
        raise Unplaceable(
            f"allocation: {lo.pp * per_stage} blocks of {b} node(s) under one leaf "
            f"needed, the leaves hold {sum(capacity)}"
        )
    return shape


def level_counts(shape: Shape, counts: list[list[int]], level: int) -> list[list[int]]:
    """Units of every stage per domain of a level."""
    return [[sum(row[i] for i in dom) for dom in shape.levels[level]] for row in counts]


def k_values(shape: Shape, level: int) -> list[int]:
    """Possible smallest pieces at a level: 1..min(D, the largest domain's capacity), and D.

    A "free" level, where no domain holds a whole block (capacity 0: every unit there is a
    split block, whose parts the forced lone flag prices; k then sets no span, as a part is
    at most one unit's share, see tables._Spans._split_piece), takes the values of the level
    above (just D at the top), so that k_L = k_L+1 nests under every piece above: the DP
    table lists a key for each, and the CP-SAT model (k unconstrained there, `none`) and the
    validator (dp_choice: k None) choose among the same keys. Free levels lie below every
    other level (a domain's capacity includes its leaves')."""
    cap = max(sum(shape.capacity[i] for i in dom) for dom in shape.levels[level])
    d = shape.units_per_stage
    if cap == 0:
        return k_values(shape, level + 1) if level + 1 < len(shape.levels) else [d]
    return sorted(set(range(1, min(d, cap) + 1)) | ({d} if cap >= d else set()))


def build_map(shape: Shape, counts: list[list[int]]) -> np.ndarray:
    """host index of every rank: chunk c of every stage goes to the c-th leaf of the stage's
    leaves listed in (top level, ..., leaf) order, so equal counts in a domain put the same dp
    indices of all stages there; a unit takes B hosts of its leaf in the scheduler's order."""
    lo, gpn = shape.layout, shape.unit_gpus // shape.nodes_per_unit
    order = leaf_order(shape.levels, len(shape.leaf_hosts))
    next_host = [0] * len(shape.leaf_hosts)
    stage_size = lo.world_size // lo.pp
    host = np.empty(lo.world_size, dtype=np.int64)
    offsets = np.arange(shape.unit_gpus)
    for s in range(lo.pp):
        c = 0
        for leaf in order:
            for _ in range(counts[s][leaf]):
                first = next_host[leaf]
                hosts = shape.leaf_hosts[leaf][first : first + shape.nodes_per_unit]
                next_host[leaf] += shape.nodes_per_unit
                ranks = s * stage_size + c * shape.unit_gpus + offsets
                host[ranks] = np.asarray(hosts)[offsets // gpn]
                c += 1
    return host


def counts_of_map(
    shape: Shape, alloc_hosts: int, host_of_rank: np.ndarray
) -> list[list[int]] | None:
    """Counts of a node-aligned map where every node holds one stage (a baseline's map as a
    hint); None when it is not of that form or units span several nodes."""
    lo = shape.layout
    if shape.nodes_per_unit != 1:
        return None
    gpn = shape.unit_gpus
    stage_of_rank = np.repeat(np.arange(lo.pp), lo.world_size // lo.pp)
    per_node = host_of_rank.reshape(-1, gpn)
    if not (per_node == per_node[:, :1]).all():
        return None
    leaf_of_host = np.empty(alloc_hosts, dtype=np.int64)
    for i, hs in enumerate(shape.leaf_hosts):
        leaf_of_host[hs] = i
    counts = [[0] * len(shape.leaf_hosts) for _ in range(lo.pp)]
    for node, host in enumerate(per_node[:, 0].tolist()):
        stages = stage_of_rank[node * gpn : (node + 1) * gpn]
        if (stages != stages[0]).any():
            return None
        counts[int(stages[0])][int(leaf_of_host[host])] += 1
    return counts
