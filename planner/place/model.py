"""CP-SAT placement of one layout on an allocation: pipeline stages and data-parallel blocks to
leaves and pods (DESIGN.md "Where CP-SAT earns its place", issue 17).

Unit of placement: U = max(GPUs per node, tp x cp, etp x ep) consecutive stage-local ranks (one
TP x CP block of one or more DP indices of one stage, whole EP groups), i.e. B = U / GPUs-per-node
whole nodes under one leaf. The placed layout numbers ranks tp, cp, dp, pp (innermost first), so a
stage's ranks are contiguous and a unit is D = tp*cp*dp / U-th of a stage. Nodes under one switch
are interchangeable, so the model counts units per switch: x[s, leaf] = units of stage s under
that leaf (no node-level symmetry).

Objective, integer microseconds, precomputed with cost_models.estimate on the spans a map with
those counts has (planner/place/pricing.py reads the same spans off the map it builds):

- DP, DP x CP and expert-DP groups of stage s have y[s, d] * u members in domain d of level L
  (y: the stage's units under d); the smallest piece over stages and domains,
  k_L = min{y[s, d] : y[s, d] > 0}, sets the kind's span at that tier (rounded to whole factors
  per tier, pricing.nest). Encoded as k_L <= every used piece, plus, where the table does not fall
  monotonically as pieces grow, a witness piece equal to k_L;
- PP groups stay inside the domains of level L iff every stage has the same count in every
  domain of L (pigeonhole: otherwise some dp index has two stages in different domains; equal
  counts let the map give chunk c of every stage the same domain). b_L => equal counts (and the
  converse, reified, where PP does not get cheaper inward); b_L is fixed false where no domain
  split can hold pp equal shares;
- uplink sharing (cost_models/uplink.py): per tapered tier j, the step q_j of the gradient
  window, 4 x (GPUs of stages not wholly inside switch d) <= (job's GPUs under d) x q_j for every
  switch d (a bool per stage and switch: wholly inside), and the step p_j of the pipeline window
  (PP groups inside d: the intersection of the stages' chunk ranges along build_map's order,
  from prefix-count variables; split blocks' GPUs always leave);
- step = T_dp[class(k_0, k_1, ..., lone flags), q_1, ...] + T_pp[lowest balanced level, p_1, ...]
  (AddAllowedAssignments: the pieces pick a class, the class and the steps the cost; the PP
  table over level and steps): the DP and PP terms are separate terms of the step sum
  (estimate's breakdown), so the table is additive in them; each entry is rounded to a
  microsecond, so the objective matches re-pricing the map to within 2 us.

Blocks of B > 1 nodes (TP x CP over several nodes) stay inside one leaf where the leaves hold
enough of them; where they do not (leaves with a remainder of fewer than B nodes), just enough
split blocks are made of the leftover nodes (inside one pod first), each a pseudo-leaf of
capacity 1. A split block belongs to the domains of a level that hold all its nodes; at a level
whose domains it spans, PP groups are not balanced there and the DP kinds' piece is taken as
min(k x u, the smallest part of a split block): a lower bound on the map's piece, so there the
objective is an upper bound on re-pricing (the map is always re-priced exactly, joint.py);
without split blocks the objective is the re-priced step.

Constraints: every stage gets its D units; each leaf holds at most floor(healthy nodes / B)
units; stages are interchangeable, so their counts on the first leaf are ordered. The full hint
is the cheapest of: the scheduler's order packed stage by stage into leaves, a best-fit packing
(pods, then leaves), and the baselines' own maps read as counts (joint.py), so CP-SAT starts at
the better baseline. Deterministic mode: one worker, fixed seed, a deterministic-time limit; probing is off (it spent the
time limit at 16,384 GPUs). The result carries CP-SAT's status, objective, bound, gap and wall
time; out of time before any solution (UNKNOWN) the hint is returned with CP-SAT's bound.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from cost_models import uplink
from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.specs import Axis, Cluster, Layout, ModelSpec, Workload

from .allocation import Allocation
from .pricing import PIPELINE_KINDS, group_keys, nest, placed_pieces, uplink_steps

CANONICAL = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
US = 1e6  # objective unit: microseconds
# From this many leaves on, solve first without the uplink steps (joint.place_layout): at
# 16,384 GPUs (95 leaves, TP8 PP16 DP64 CP2) the exact model alone reached 7.70 s in 2 s, the
# two phases 7.16 s.
LARGE_LEAVES = 32
LARGE_COUNTS = 4096  # stages x leaves above which the model is large (joint.py, solve)


class Unplaceable(Exception):
    """The layout does not split into whole units under leaves; the baselines stand."""


@dataclass
class UnitModel:
    """The counted form of one layout on one allocation (shared by CP-SAT and the oracle)."""

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
    # (k_0, k_1, ..., lone flag of each crossing level) -> step (pp at the top) in us at the
    # uplink steps q (cost_models.uplink): dp_table[key] = class_cost[dp_class[key]][q index]
    dp_class: dict[tuple[int, ...], int]
    class_cost: list[list[int]]  # class -> q grid index -> us
    q_grid: list[tuple[int, ...]]  # every combination of the uplink tiers' steps
    # lowest balanced level (len(levels): none) -> pipeline-window q grid index -> delta in us
    pp_table: list[list[int]]
    # Uplink sharing: tapered tiers whose switches are a model level (their step q varies with
    # the counts), that level, the job's GPUs under each of its domains, and the GPUs of split
    # blocks that span that level's domains, per domain (always used, always leaving).
    uplink_tiers: list[int]
    uplink_levels: list[int]
    uplink_ports: list[list[int]]
    uplink_split: list[list[int]]
    uplink_fixed: dict[int, int]  # tapered tiers whose step no count changes (nodes, one domain)
    # The pipeline window (PP sends, TP / CP / EP exchanges) on the same uplink tiers where
    # pp > 1 (else its steps are all fixed): chunk order of build_map, and per level and domain
    # its leaves' positions [lo, hi) in that order.
    pipe: bool
    pipe_fixed: dict[int, int]
    chunk_order: list[int]
    domain_span: list[list[tuple[int, int]]]


def unit_model(
    model: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout, alloc: Allocation
) -> UnitModel:
    """Build the counted model; raises Unplaceable when the layout's stages are not whole
    units of nodes or the leaves cannot hold the units whole."""
    lo = layout.model_copy(update={"order": CANONICAL})
    gpn = cluster.gpus_per_node
    stage = lo.tp * lo.cp * lo.dp
    unit = max(gpn, lo.tp * lo.cp, lo.etp * lo.ep)
    if unit % gpn or stage % unit or unit % (lo.tp * lo.cp) or unit % (lo.etp * lo.ep):
        raise Unplaceable(
            f"a stage ({stage} GPUs) is not whole blocks of {unit} GPUs on whole nodes"
        )
    nodes_per_unit, per_stage = unit // gpn, stage // unit
    if lo.world_size > len(alloc.hosts) * gpn:
        raise InvalidInput(
            f"allocation: the layout needs {lo.world_size} GPUs, the allocation has "
            f"{len(alloc.hosts) * gpn}"
        )
    # Model levels: the distinct host partitions of the tiers strictly inside the outermost one
    # with more than one domain (a level above which nothing splits adds nothing).
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
    leaf_of_host = partitions[0]
    leaf_ids = list(dict.fromkeys(leaf_of_host.tolist()))  # first-appearance order
    leaf_index = {d: i for i, d in enumerate(leaf_ids)}
    leaf_hosts: list[list[int]] = [[] for _ in leaf_ids]
    for h, d in enumerate(leaf_of_host.tolist()):
        leaf_hosts[leaf_index[d]].append(h)
    capacity = [len(hs) // nodes_per_unit for hs in leaf_hosts]
    n_leaves = len(leaf_hosts)
    short = per_stage * lo.pp - sum(capacity)
    if short > 0 and nodes_per_unit > 1:
        # Leaves with a remainder of fewer than B nodes: just enough blocks are made of the
        # leftover nodes (inside pods first, neighbouring leaves), each a pseudo-leaf of
        # capacity 1 that every count matrix then uses (the capacity is exactly the need).
        blocks = _split_blocks(partitions[-1], leaf_hosts, capacity, nodes_per_unit)
        short = per_stage * lo.pp - sum(capacity)  # whole blocks freed to join pods' residues
        for hosts in blocks[:short]:
            leaf_hosts.append(hosts)
            capacity.append(1)
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
    um = UnitModel(
        layout=lo,
        unit_gpus=unit,
        nodes_per_unit=nodes_per_unit,
        units_per_stage=per_stage,
        levels=levels,
        leaf_hosts=leaf_hosts,
        capacity=capacity,
        split_blocks=len(leaf_hosts) - n_leaves,
        crossing=[any(t) for t in touch],
        split_touch=touch,
        level_of_tier=level_of_tier,
        lowest_tier=lowest,
        dp_class={},
        class_cost=[],
        q_grid=[()],
        pp_table=[],
        uplink_tiers=[],
        uplink_levels=[],
        uplink_ports=[],
        uplink_split=[],
        uplink_fixed={},
        pipe=False,
        pipe_fixed={},
        chunk_order=[],
        domain_span=[],
    )
    # Uplink sharing (cost_models.uplink): a tapered tier j's switches are the domains of tier
    # j-1; where those are a model level, the step q_j follows the counts.
    for j in uplink.tapered_tiers(cluster):
        lv = level_of_tier[j - 1]
        if lv is None:
            continue  # nodes or one domain: the base map's step (_tables)
        real = [[i for i in dom if i < n_leaves] for dom in levels[lv]]
        dom_of_leaf = {i: k for k, r in enumerate(real) for i in r}
        split = [0] * len(real)
        for b, hs in enumerate(leaf_hosts[n_leaves:]):
            if touch[lv][b]:  # spans this level's domains: its GPUs leave them
                for h in hs:
                    split[dom_of_leaf[leaf_of[h]]] += gpn
        um.uplink_tiers.append(j)
        um.uplink_levels.append(lv)
        um.uplink_ports.append([gpn * sum(len(leaf_hosts[i]) for i in r) for r in real])
        um.uplink_split.append(split)
    um.pipe = lo.pp > 1 and bool(um.uplink_tiers)
    um.chunk_order = sorted(
        range(len(leaf_hosts)),
        key=lambda i: tuple(_domain_of(um, lv, i) for lv in range(len(levels) - 1, -1, -1)),
    )
    pos = {leaf: k for k, leaf in enumerate(um.chunk_order)}
    for doms in levels:
        spans = []
        for dom in doms:
            at = sorted(pos[j] for j in dom)
            assert at[-1] - at[0] + 1 == len(at)  # a domain's leaves are contiguous in the order
            spans.append((at[0], at[-1] + 1))
        um.domain_span.append(spans)
    if sum(capacity) < per_stage * lo.pp:
        raise Unplaceable(
            f"allocation: {lo.pp * per_stage} blocks of {nodes_per_unit} node(s) under one leaf "
            f"needed, the leaves hold {sum(capacity)}"
        )
    _tables(model, cluster, workload, alloc, um)
    if not _q_monotone(um):  # more senders never help (checked, as the k tables are)
        raise Unplaceable("placement: the step falls as an uplink's senders grow")
    return um


def _split_blocks(
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


def _k_values(um: UnitModel, level: int) -> list[int]:
    """Possible smallest pieces at a level: 1..min(D, the largest domain's capacity), and D."""
    cap = max(sum(um.capacity[i] for i in dom) for dom in um.levels[level])
    d = um.units_per_stage
    return sorted(set(range(1, min(d, cap) + 1)) | ({d} if cap >= d else set()))


def _tables(
    model: ModelSpec, cluster: Cluster, workload: Workload, alloc: Allocation, um: UnitModel
) -> None:
    lo = um.layout
    base_map = build_map(um, greedy_counts(um))
    moe = model.moe is not None
    raw = placed_pieces(alloc, lo, base_map, moe=moe)
    base = {kind: nest(p) for kind, p in raw.items()}
    per_unit = {
        "dp": um.unit_gpus // (lo.tp * lo.cp),
        "dp_cp": um.unit_gpus // lo.tp,
        "edp": um.unit_gpus // (lo.etp * lo.ep),
    }
    tiers = len(cluster.tiers)
    # Split blocks: at a tier whose domains a split block spans, a group's piece in a domain
    # holding part of one is at least that part (its whole blocks there only add), so the
    # kind's piece is taken as min(k x u, the smallest part of any split block) there: a lower
    # bound on the map's piece, hence an upper bound on its step where the table falls as
    # pieces grow (exact where no block is split). The parts depend on the blocks' fixed hosts
    # only, not on the stage that takes them.
    keys = group_keys(lo, moe=moe)
    split_ranks = [
        np.flatnonzero(np.isin(base_map, um.leaf_hosts[p]))
        for p in range(len(um.leaf_hosts) - um.split_blocks, len(um.leaf_hosts))
    ]

    def split_piece(kind: str, t: int) -> int | None:
        lv = um.level_of_tier[t]
        if lv is None or not um.crossing[lv] or not split_ranks:
            return None
        dom = alloc.domains[t]
        out = None
        for ranks in split_ranks:
            key = keys[kind][ranks]
            pair = key * (int(dom.max()) + 1) + dom[base_map[ranks]]
            low = int(np.unique(pair, return_counts=True)[1].min())
            out = low if out is None else min(out, low)
        return out

    parts = {
        (kind, t): split_piece(kind, t) for kind in per_unit if kind in base for t in range(tiers)
    }

    n = len(um.levels)
    cross = [lv for lv in range(n) if um.crossing[lv]]

    def spans_for(key: tuple[int, ...], pp_level: int) -> dict[str, list[int]]:
        ks, lone = key[:n], dict(zip(cross, key[n:], strict=True))
        out = dict(base)
        for kind, u in per_unit.items():
            if kind not in base:
                continue
            whole = base[kind][-1]
            span = []
            for t in range(tiers):
                lv = um.level_of_tier[t]
                if t == tiers - 1:
                    span.append(whole)
                elif lv is not None:
                    part = parts[kind, t] if lone.get(lv) else None
                    span.append(min(whole, ks[lv] * u, part if part is not None else whole))
                elif t == 0:
                    span.append(raw[kind][0])
                else:
                    span.append(whole)
            out[kind] = nest(span)
        if lo.pp > 1:
            # Groups inside the domains of level L reach its lowest tier; groups balanced
            # nowhere reach the first tier above every level (one domain holds them all).
            mapped = [t for t in range(tiers) if um.level_of_tier[t] is not None]
            level_tiers = [
                min(t for t in mapped if um.level_of_tier[t] == lv)
                for lv in range(len(um.levels))
                if lv in um.level_of_tier
            ]
            above = max(mapped) + 1 if mapped else um.lowest_tier
            top = level_tiers[pp_level] if pp_level < len(level_tiers) else above
            out["pp"] = [1 if t < top else lo.pp for t in range(tiers)]
            out["pp"][-1] = lo.pp
        return out

    # Uplink steps: the tiers whose step the counts set take every q of the grid; the others
    # (switches that are nodes, or one domain) keep the base map's step.
    fixed = uplink_steps(cluster, alloc, lo, base_map, moe=moe)
    um.uplink_fixed = {j: q for j, q in fixed.items() if j not in um.uplink_tiers}
    fixed = uplink_steps(cluster, alloc, lo, base_map, moe=moe, kinds=PIPELINE_KINDS)
    um.pipe_fixed = {j: q for j, q in fixed.items() if not (um.pipe and j in um.uplink_tiers)}
    pipe_kinds = [k for k in PIPELINE_KINDS if k in base]
    um.q_grid = list(itertools.product(range(uplink.UPLINK_STEPS + 1), repeat=len(um.uplink_tiers)))
    grad_kinds = [k for k in ("dp", "dp_cp", "edp") if k in base]
    memo: dict[tuple, int] = {}
    span_memo: dict[tuple, dict[str, list[int]]] = {}

    def spans_key(ks: tuple[int, ...], pp_level: int) -> tuple:
        # Many piece combinations nest to the same spans (whole factors per tier): price once.
        spans = spans_for(ks, pp_level)
        key = tuple(tuple(spans[k]) for k in sorted(spans))
        span_memo.setdefault(key, spans)
        return key

    def step_us(key: tuple, qs: tuple[int, ...], pqs: tuple[int, ...] | None = None) -> int:
        spans = span_memo[key]
        if pqs is None:  # the DP table: the pipeline window at its reference (every q at top)
            pqs = um.q_grid[-1] if um.pipe else ()
        norm = []

        def fill(fixed: dict[int, int], vary: bool, q_of: tuple[int, ...], kinds: list[str]):
            steps = dict(fixed)
            if vary:
                for j, q in zip(um.uplink_tiers, q_of, strict=True):
                    steps[j] = q
                    # q matters only where a group of the window crosses tier j, above 1 / o
                    crosses = any(spans[k][j] > spans[k][j - 1] for k in kinds)
                    o = cluster.tiers[j].oversubscription
                    norm.append(uplink.effective_oversubscription(o, q) if crosses else None)
            return steps

        steps = fill(um.uplink_fixed, True, qs, grad_kinds)
        pipe = fill(um.pipe_fixed, um.pipe, pqs, pipe_kinds)
        mkey = (key, tuple(norm))
        if mkey not in memo:
            e = estimate(
                model,
                cluster,
                workload,
                lo,
                spans=spans,
                uplink_steps=steps,
                pipeline_uplink_steps=pipe,
            )
            memo[mkey] = round(e.step_time_s * US)
        return memo[mkey]

    # A key's class: the spans of it and of every key with fewer lone flags (a lone part never
    # prices below none: the entry is the largest of them, at every q).
    top_ks = tuple(um.units_per_stage for _ in range(n)) + (0,) * len(cross)
    flags = list(itertools.product((0, 1), repeat=len(cross)))
    sig_of: dict[tuple[int, ...], frozenset] = {}
    class_index: dict[frozenset, int] = {}
    for ks in itertools.product(*(_k_values(um, lv) for lv in range(n))):
        if all(a <= b for a, b in itertools.pairwise(ks)):  # pieces nest
            for f in flags:  # fewer flags first
                sig = {spans_key((*ks, *f), n)}
                for i in range(len(f)):
                    if f[i]:
                        sig |= sig_of[(*ks, *f[:i], 0, *f[i + 1 :])]
                sig_of[(*ks, *f)] = frozenset(sig)
                um.dp_class[(*ks, *f)] = class_index.setdefault(frozenset(sig), len(class_index))
    um.class_cost = [[0] * len(um.q_grid) for _ in class_index]
    for sig, c in class_index.items():
        for g, qs in enumerate(um.q_grid):
            um.class_cost[c][g] = max(step_us(key, qs) for key in sig)
    zero = (0,) * len(um.uplink_tiers)
    top_key = spans_key(top_ks, n)
    ref = step_us(top_key, zero)
    pp_grid = um.q_grid if um.pipe else [()]
    um.pp_table = [
        [step_us(spans_key(top_ks, lv), zero, g) - ref for g in pp_grid] for lv in range(n)
    ] + [[step_us(top_key, zero, g) - ref for g in pp_grid]]


def q_index(um: UnitModel, qs: Sequence[int]) -> int:
    """Index of the steps qs in um.q_grid (mixed radix, the first tier slowest)."""
    out = 0
    for q in qs:
        out = out * (uplink.UPLINK_STEPS + 1) + int(q)
    return out


def dp_cost(um: UnitModel, key: tuple[int, ...], qs: Sequence[int]) -> int:
    return um.class_cost[um.dp_class[key]][q_index(um, qs)]


def _dp_monotone(um: UnitModel) -> bool:
    """The DP table never rises when one level's smallest piece grows (to its next value), at
    every uplink step."""
    values = [_k_values(um, lv) for lv in range(len(um.levels))]
    n = len(values)
    for ks, c in um.dp_class.items():
        for lv, k in enumerate(ks[:n]):
            i = values[lv].index(k)
            if i + 1 < len(values[lv]):
                up = (*ks[:lv], values[lv][i + 1], *ks[lv + 1 :])
                if up in um.dp_class:
                    cu = um.dp_class[up]
                    if cu != c and any(
                        a > b for a, b in zip(um.class_cost[cu], um.class_cost[c], strict=True)
                    ):
                        return False
    return True


def _q_monotone(um: UnitModel) -> bool:
    """Every class's cost, and every PP level's, never falls as one tier's uplink step grows
    (more senders)."""
    radix = uplink.UPLINK_STEPS + 1
    for costs in [*um.class_cost, *(um.pp_table if um.pipe else [])]:
        for g, qs in enumerate(um.q_grid):
            for t, q in enumerate(qs):
                if q < uplink.UPLINK_STEPS:
                    up = g + radix ** (len(qs) - 1 - t)
                    if costs[up] < costs[g]:
                        return False
    return True


def greedy_counts(um: UnitModel) -> list[list[int]]:
    """The scheduler's order packed into leaves: stage 0 first, leaves in first-appearance
    order (the hint, and the hint-quality baseline)."""
    return _pack_in_order(list(um.capacity), [um.units_per_stage] * um.layout.pp, len(um.capacity))


def _pack_in_order(left: list[int], needs: list[int], width: int) -> list[list[int]]:
    """counts[stage][leaf]: each stage's `needs` units in turn into the first leaves of `left`
    (free units per leaf, consumed) that have room, in the scheduler's leaf order."""
    counts = [[0] * width for _ in needs]
    leaf = 0
    for s, need in enumerate(needs):
        while need:
            while left[leaf] == 0:
                leaf += 1
            take = min(need, left[leaf])
            counts[s][leaf] += take
            left[leaf] -= take
            need -= take
    return counts


def host_order_counts(um: UnitModel) -> list[list[int]]:
    """Whole blocks stage by stage along the scheduler's leaf order, each stage leaving room
    for its share of the split blocks; then the split blocks matched to stages that hold whole
    blocks in every domain the block spans at the highest level split blocks span (no lone
    part there; augmenting paths), the rest where room is left. A third hint, for allocations with split blocks."""
    pp, d = um.layout.pp, um.units_per_stage
    first = len(um.leaf_hosts) - um.split_blocks
    share = [um.split_blocks // pp + (s < um.split_blocks % pp) for s in range(pp)]
    counts = _pack_in_order(
        list(um.capacity[:first]), [d - share[s] for s in range(pp)], len(um.leaf_hosts)
    )
    ys = [level_counts(um, counts, lv) for lv in range(len(um.levels))]
    # The highest level that split blocks span (the slowest uplinks): no lone part there.
    top = [max((lv for lv in range(len(um.levels)) if um.crossing[lv]), default=0)]
    fits = [
        [
            s
            for s in range(pp)
            if all(ys[lv][s][dm] > 0 for lv in top for dm in um.split_touch[lv][i])
        ]
        for i in range(um.split_blocks)
    ]
    owner: list[int | None] = [None] * um.split_blocks
    held: list[list[int]] = [[] for _ in range(pp)]

    def augment(i: int, seen: set[int]) -> bool:
        for s in fits[i]:
            if s in seen:
                continue
            seen.add(s)
            if len(held[s]) < share[s]:
                held[s].append(i)
                owner[i] = s
                return True
            for j in held[s]:
                if augment(j, seen):
                    held[s].remove(j)
                    held[s].append(i)
                    owner[i] = s
                    return True
        return False

    for i in range(um.split_blocks):
        augment(i, set())
    for i in range(um.split_blocks):
        if owner[i] is None:
            s = next(s for s in range(pp) if len(held[s]) < share[s])
            held[s].append(i)
            owner[i] = s
        counts[owner[i]][first + i] = 1
    return counts


def best_fit_counts(um: UnitModel) -> list[list[int]]:
    """Stage by stage, the top-level domain (pod) that holds the whole stage most tightly (else
    the emptiest), and inside it the leaf that holds the rest most tightly (else the emptiest):
    large DP pieces, a second hint."""
    left = list(um.capacity)
    counts = [[0] * len(left) for _ in range(um.layout.pp)]
    inside = {j for dom in um.levels[-1] for j in dom}
    tops = um.levels[-1] + [[j] for j in range(len(left)) if j not in inside]
    for s in range(um.layout.pp):
        need = um.units_per_stage
        while need:
            free = {i: sum(left[j] for j in dom) for i, dom in enumerate(tops)}
            fits = [i for i in free if free[i] >= need]
            top = min(fits, key=lambda i: (free[i], i)) if fits else max(free, key=free.get)
            while need and any(left[j] for j in tops[top]):
                leaves = [j for j in tops[top] if left[j] >= need]
                j = (
                    min(leaves, key=lambda j: (left[j], j))
                    if leaves
                    else max(tops[top], key=lambda j: (left[j], -j))
                )
                take = min(need, left[j])
                counts[s][j] += take
                left[j] -= take
                need -= take
    return counts


def level_counts(um: UnitModel, counts: list[list[int]], level: int) -> list[list[int]]:
    return [[sum(row[i] for i in dom) for dom in um.levels[level]] for row in counts]


def objective_us(um: UnitModel, counts: list[list[int]], *, full_uplinks: bool = False) -> int:
    """The model's objective for given counts (the oracle and the hint use it); with
    `full_uplinks` every uplink step at its top (solve(full_uplinks=True)'s objective)."""
    ks, balanced, lone = _summary(um, counts)
    pp_level = next((lv for lv, b in enumerate(balanced) if b), len(um.levels))
    if um.layout.pp == 1:
        pp_level = len(um.levels)
    qs = uplink_qs(um, counts)
    pp_q = q_index(um, pipe_qs(um, counts)) if um.pipe else 0
    if full_uplinks:
        qs, pp_q = um.q_grid[-1], len(um.pp_table[0]) - 1
    return dp_cost(um, _dp_choice(um, ks, lone, qs), qs) + um.pp_table[pp_level][pp_q]


def pipe_qs(um: UnitModel, counts: list[list[int]]) -> tuple[int, ...]:
    """The pipeline window's step of each uplink tier: in domain d, chunk c of every stage lies
    in d for c in the intersection of the stages' chunk ranges there (build_map), so the PP
    groups inside d are its length I_d, and U x (units in d - pp x I_d) GPUs send upward, plus
    the split blocks spanning d (their TP / CP / EP groups leave it)."""
    pp, u = um.layout.pp, um.unit_gpus
    prefix = [
        list(itertools.accumulate((row[j] for j in um.chunk_order), initial=0)) for row in counts
    ]
    out = []
    for lv, ports, split in zip(um.uplink_levels, um.uplink_ports, um.uplink_split, strict=True):
        q = 0
        for i, (a, b) in enumerate(um.domain_span[lv]):
            inside = max(0, min(p[b] for p in prefix) - max(p[a] for p in prefix))
            units = sum(p[b] - p[a] for p in prefix)
            q = max(q, uplink.uplink_step(u * (units - pp * inside) + split[i], ports[i]))
        out.append(q)
    return tuple(out)


def uplink_qs(um: UnitModel, counts: list[list[int]]) -> tuple[int, ...]:
    """The step of each uplink tier for given counts: per domain of its level, the GPUs of
    stages not wholly inside it (whole units, plus the parts of split blocks spanning it) over
    the job's GPUs under it, rounded up (cost_models.uplink.uplink_step); the busiest domain."""
    out = []
    d = um.units_per_stage
    for lv, ports, split in zip(um.uplink_levels, um.uplink_ports, um.uplink_split, strict=True):
        y = level_counts(um, counts, lv)
        q = 0
        for i, p in enumerate(ports):
            col = [row[i] for row in y]
            leaving = um.unit_gpus * (sum(col) - d * sum(v == d for v in col)) + split[i]
            q = max(q, uplink.uplink_step(leaving, p))
        out.append(q)
    return tuple(out)


def _summary(
    um: UnitModel, counts: list[list[int]]
) -> tuple[list[int | None], list[bool], list[int]]:
    """Smallest used piece per level (None: none), balance per level, lone flag per crossing
    level."""
    ks, balanced, lone = [], [], []
    first = len(um.leaf_hosts) - um.split_blocks
    for lv in range(len(um.levels)):
        y = level_counts(um, counts, lv)
        ks.append(min((v for row in y for v in row if v > 0), default=None))
        balanced.append(all(row == y[0] for row in y) and not um.crossing[lv])
        if um.crossing[lv]:
            # some stage's split block has a part in a domain holding none of its whole blocks
            lone.append(
                int(
                    any(
                        counts[s][first + i] and y[s][d] == 0
                        for s in range(len(counts))
                        for i, doms in enumerate(um.split_touch[lv])
                        for d in doms
                    )
                )
            )
    return ks, balanced, lone


def _dp_choice(
    um: UnitModel, ks: list[int | None], lone: list[int], qs: Sequence[int] = ()
) -> tuple[int, ...]:
    """The table's key at the smallest pieces and lone flags; a level with no whole block in
    any of its domains (only split blocks) leaves its k free, as in the CP-SAT model."""
    # A pod holding only a split block of a stage can make its piece there smaller than at the
    # leaves; the leaf piece is then no larger either (the nesting CP-SAT's table imposes).
    ks = list(ks)
    for lv in range(len(ks) - 2, -1, -1):
        if ks[lv] is not None and ks[lv + 1] is not None:
            ks[lv] = min(ks[lv], ks[lv + 1])
    if None not in ks:
        return (*ks, *lone)
    want = [*ks, *lone]
    return min(
        (c for c in um.dp_class if all(k is None or a == k for a, k in zip(c, want, strict=True))),
        key=lambda c: (dp_cost(um, c, qs), c),
    )


def build_map(um: UnitModel, counts: list[list[int]]) -> np.ndarray:
    """host index of every rank: chunk c of every stage goes to the c-th leaf of the stage's
    leaves listed in (top level, ..., leaf) order, so equal counts in a domain put the same dp
    indices of all stages there; a unit takes B hosts of its leaf in the scheduler's order."""
    lo, gpn = um.layout, um.unit_gpus // um.nodes_per_unit
    order = sorted(
        range(len(um.leaf_hosts)),
        key=lambda i: tuple(_domain_of(um, lv, i) for lv in range(len(um.levels) - 1, -1, -1)),
    )
    next_host = [0] * len(um.leaf_hosts)
    stage_size = lo.world_size // lo.pp
    host = np.empty(lo.world_size, dtype=np.int64)
    offsets = np.arange(um.unit_gpus)
    for s in range(lo.pp):
        c = 0
        for leaf in order:
            for _ in range(counts[s][leaf]):
                first = next_host[leaf]
                hosts = um.leaf_hosts[leaf][first : first + um.nodes_per_unit]
                next_host[leaf] += um.nodes_per_unit
                ranks = s * stage_size + c * um.unit_gpus + offsets
                host[ranks] = np.asarray(hosts)[offsets // gpn]
                c += 1
    return host


def _domain_of(um: UnitModel, level: int, leaf: int) -> int:
    for i, dom in enumerate(um.levels[level]):
        if leaf in dom:
            return i
    return len(um.levels[level])  # a split block across this level's domains: after them


@dataclass
class Solution:
    status: str
    objective_us: int
    bound_us: float
    gap: float
    wall_time_s: float
    counts: list[list[int]]
    host_of_rank: np.ndarray


def _uplink_constraints(
    m: cp_model.CpModel,
    um: UnitModel,
    x: list[list[Any]],
    level_ys: list[list[list[Any]]],
    hint: list[list[int]],
    hints: list[tuple[Any, int]],
) -> list[Any]:
    """One step variable q per uplink tier with UPLINK_STEPS x (GPUs leaving domain i) <=
    (the job's GPUs under i) x q for every domain of its level (uplink_qs, linear): a stage wholly
    inside i (full) sends nothing upward. The objective grows with q (_q_monotone), so q sits at
    the busiest domain's rounded share."""
    q_steps = uplink.UPLINK_STEPS
    pp, d, u = um.layout.pp, um.units_per_stage, um.unit_gpus
    hint_q = uplink_qs(um, hint)
    out = []
    for t, (j, lv) in enumerate(zip(um.uplink_tiers, um.uplink_levels, strict=True)):
        q = m.new_int_var(0, q_steps, f"q{j}")
        hints.append((q, hint_q[t]))
        hy = level_counts(um, hint, lv)
        for i, dom in enumerate(um.levels[lv]):
            units = sum(x[s][leaf] for s in range(pp) for leaf in dom)
            fulls = []
            for s in range(pp):
                y = level_ys[lv][s][i]
                if y is None or sum(um.capacity[leaf] for leaf in dom) < d:
                    continue
                f = m.new_bool_var(f"full{j}_{s}_{i}")
                m.add(y >= d).only_enforce_if(f)
                hints.append((f, int(hy[s][i] == d)))
                fulls.append(f)
            leaving = u * units + um.uplink_split[t][i] - u * d * sum(fulls)
            m.add(q_steps * leaving <= um.uplink_ports[t][i] * q)
        out.append(q)
    return out


def _pipe_constraints(
    m: cp_model.CpModel,
    um: UnitModel,
    x: list[list[Any]],
    hint: list[list[int]],
    hints: list[tuple[Any, int]],
) -> list[Any]:
    """pipe_qs, linear: prefix counts P[s][k] of every stage along build_map's chunk order; in
    domain [a, b) the chunks of every stage lie in [max_s P[s][a], min_s P[s][b]), whose length
    I (<= that, the objective pushes it up) counts the PP groups inside; then UPLINK_STEPS x
    (U x (units - pp x I) + split GPUs) <= ports x q."""
    q_steps = uplink.UPLINK_STEPS
    pp, d, u = um.layout.pp, um.units_per_stage, um.unit_gpus
    order = um.chunk_order
    hp = [list(itertools.accumulate((row[j] for j in order), initial=0)) for row in hint]
    pref: list[list[Any]] = []
    for s in range(pp):
        row: list[Any] = [0]
        for k, leaf in enumerate(order):
            v = m.new_int_var(0, d, f"pf{s}_{k}")
            m.add(v == row[-1] + x[s][leaf])
            hints.append((v, hp[s][k + 1]))
            row.append(v)
        pref.append(row)
    out = []
    hint_q = pipe_qs(um, hint)
    for t, (j, lv) in enumerate(zip(um.uplink_tiers, um.uplink_levels, strict=True)):
        q = m.new_int_var(0, q_steps, f"qp{j}")
        hints.append((q, hint_q[t]))
        for i, (a, b) in enumerate(um.domain_span[lv]):
            lo_end = m.new_int_var(0, d, f"me{j}_{i}")
            hi_start = m.new_int_var(0, d, f"ms{j}_{i}")
            inside = m.new_int_var(0, d, f"in{j}_{i}")
            for s in range(pp):
                m.add(lo_end <= pref[s][b])
                m.add(hi_start >= pref[s][a])
            # inside <= max(0, lo_end - hi_start): the ranges may not meet at all
            meet = m.new_bool_var(f"mt{j}_{i}")
            m.add(inside <= lo_end - hi_start).only_enforce_if(meet)
            m.add(inside == 0).only_enforce_if(~meet)
            he, hs = min(p[b] for p in hp), max(p[a] for p in hp)
            hints += [(lo_end, he), (hi_start, hs), (inside, max(0, he - hs))]
            hints.append((meet, int(he >= hs)))
            units = sum(pref[s][b] - pref[s][a] for s in range(pp))
            leaving = u * (units - pp * inside) + um.uplink_split[t][i]
            m.add(q_steps * leaving <= um.uplink_ports[t][i] * q)
        out.append(q)
    return out


def counts_of_map(
    um: UnitModel, alloc_hosts: int, host_of_rank: np.ndarray
) -> list[list[int]] | None:
    """Counts of a node-aligned map where every node holds one stage (a baseline's map as a
    hint); None when it is not of that form or units span several nodes."""
    lo = um.layout
    if um.nodes_per_unit != 1:
        return None
    gpn = um.unit_gpus
    stage_of_rank = np.repeat(np.arange(lo.pp), lo.world_size // lo.pp)
    per_node = host_of_rank.reshape(-1, gpn)
    if not (per_node == per_node[:, :1]).all():
        return None
    leaf_of_host = np.empty(alloc_hosts, dtype=np.int64)
    for i, hs in enumerate(um.leaf_hosts):
        leaf_of_host[hs] = i
    counts = [[0] * len(um.leaf_hosts) for _ in range(lo.pp)]
    for node, host in enumerate(per_node[:, 0].tolist()):
        stages = stage_of_rank[node * gpn : (node + 1) * gpn]
        if (stages != stages[0]).any():
            return None
        counts[int(stages[0])][int(leaf_of_host[host])] += 1
    return counts


def solve(
    um: UnitModel,
    *,
    time_limit_s: float = 60.0,
    deterministic: bool = True,
    seed: int = 0,
    hints: tuple[list[list[int]], ...] | list[list[list[int]]] = (),
    fixed_top: list[list[int]] | None = None,
    full_uplinks: bool = False,
) -> Solution:
    """CP-SAT over the counts; status, objective, bound and gap are CP-SAT's own. The hint is
    the cheapest of the greedy packing and `hints` (counts, e.g. of the better baseline).
    `fixed_top` (units of each stage per top-level domain) restricts the model to those pod
    counts (planner/place/decompose.py): its status and bound then hold for the restriction
    only. `full_uplinks` prices every uplink at its full taper (no q variables: the objective is
    an upper bound of the map's price, re-priced here), a warm start."""
    start = time.perf_counter()
    pp, d = um.layout.pp, um.units_per_stage
    nl = len(um.leaf_hosts)
    m = cp_model.CpModel()
    x = [
        [m.new_int_var(0, min(d, um.capacity[j]), f"x{s}_{j}") for j in range(nl)]
        for s in range(pp)
    ]
    for s in range(pp):
        m.add(sum(x[s]) == d)
    for j in range(nl):
        m.add(sum(x[s][j] for s in range(pp)) <= um.capacity[j])
    for s in range(pp - 1):  # stages are interchangeable: order them by their first leaf
        m.add(x[s][0] >= x[s + 1][0])
    # Where the tables fall as pieces grow and as PP groups move inward (the usual case; checked,
    # not assumed), k_L <= every used piece and "balanced => equal counts" suffice: the
    # objective pushes k_L up to the smallest piece and takes the lowest balanced level. Else
    # both are tied exactly (k equals a witness piece; balance reified both ways).
    dp_falls = _dp_monotone(um)
    pp_falls = all(
        all(x <= y for x, y in zip(a, b, strict=True))
        for a, b in itertools.pairwise(um.pp_table)
    )
    starts = [greedy_counts(um), best_fit_counts(um), *hints]
    if um.split_blocks:
        starts.append(host_order_counts(um))
    hint = min(starts, key=lambda c: objective_us(um, c, full_uplinks=full_uplinks))
    hint = sorted(hint, key=lambda row: -row[0])  # the stage order the symmetry cut asks
    hints: list[tuple[Any, int]] = [(x[s][j], hint[s][j]) for s in range(pp) for j in range(nl)]
    hint_bal = []
    hint_qs = uplink_qs(um, hint)
    hint_choice = _dp_choice(um, *_summary(um, hint)[::2], hint_qs)
    first = nl - um.split_blocks
    xb = {}  # (stage, split block) -> the block is the stage's
    for s in range(pp):
        for i in range(um.split_blocks):
            xb[s, i] = m.new_bool_var(f"xb{s}_{i}")
            m.add(x[s][first + i] == xb[s, i])
            hints.append((xb[s, i], hint[s][first + i]))
    lones = []
    ks, bals, level_ys = [], [], []
    belows: list[tuple[int, Any]] = []
    for lv, doms in enumerate(um.levels):
        hy = level_counts(um, hint, lv)
        hint_bal.append(all(row == hy[0] for row in hy) and not um.crossing[lv])
        zs, ys, useds, used_at = [], [], [], {}
        k_vals = _k_values(um, lv)
        k = m.new_int_var_from_domain(cp_model.Domain.from_values(k_vals), f"k{lv}")
        for s in range(pp):
            row = []
            for i, dom in enumerate(doms):
                cap = min(d, sum(um.capacity[j] for j in dom))
                if cap == 0:
                    row.append(None)
                    continue
                y = x[s][dom[0]] if len(dom) == 1 else m.new_int_var(0, cap, f"y{lv}_{s}_{i}")
                if len(dom) > 1:
                    m.add(y == sum(x[s][j] for j in dom))
                    hints.append((y, hy[s][i]))
                used = m.new_bool_var(f"u{lv}_{s}_{i}")
                useds.append(used)
                used_at[s, i] = used
                hints.append((used, int(hy[s][i] > 0)))
                m.add(y >= 1).only_enforce_if(used)
                m.add(y == 0).only_enforce_if(~used)
                m.add(k <= y).only_enforce_if(used)
                if not dp_falls:  # k is also some used piece: a witness per piece
                    w = m.new_bool_var(f"w{lv}_{s}_{i}")
                    m.add(k == y).only_enforce_if(w)
                    m.add_implication(w, used)
                    zs.append(w)
                    hints.append((w, int(hy[s][i] == hint_choice[lv])))
                row.append(y)
            ys.append(row)
        if not dp_falls:
            # k is free where no whole block lies at this level (only split blocks).
            none = m.new_bool_var(f"none{lv}")
            for lit in useds:
                m.add_implication(none, ~lit)
            used_pieces = {v for row in hy for v in row if v > 0}
            hints.append((none, int(not used_pieces)))  # a complete hint is tried first
            if um.split_blocks and lv + 1 < len(um.levels):
                # k may sit below every used piece where the level above has the smaller piece
                # (a split block there; _dp_choice nests k_L = min(k_L, k_L+1)): k_L = k_L+1.
                below = m.new_bool_var(f"below{lv}")
                zs.append(below)
                belows.append((lv, below))
                lies_below = bool(used_pieces) and hint_choice[lv] not in used_pieces
                hints.append((below, int(lies_below)))
            m.add_bool_or([*zs, none])
        ks.append(k)
        level_ys.append(ys)
        hints.append((k, hint_choice[lv]))
        if um.crossing[lv]:
            # lone <= some stage's split block has a part in a domain with none of its whole
            # blocks (the table never prices lone below not lone, so this direction suffices)
            lone = m.new_bool_var(f"lone{lv}")
            hints.append((lone, hint_choice[len(um.levels) + len(lones)]))
            for s in range(pp):
                for i, spans in enumerate(um.split_touch[lv]):
                    for dm in spans:
                        lits = [lone, ~xb[s, i]]
                        if (s, dm) in used_at:
                            lits.append(used_at[s, dm])
                        m.add_bool_or(lits)
            lones.append(lone)
        if pp > 1:
            b = m.new_bool_var(f"b{lv}")
            hints.append((b, int(hint_bal[-1])))
            # Equal counts need every domain to hold pp x its per-stage count.
            room = sum(min(d, sum(um.capacity[j] for j in dom) // pp) for dom in doms)
            if room < d or um.crossing[lv]:  # a split block's PP groups leave the domains
                m.add(b == 0)
            eqs = []
            for s in range(1, pp):
                for i in range(len(doms)):
                    if ys[s][i] is None:
                        continue
                    if pp_falls:
                        m.add(ys[s][i] == ys[0][i]).only_enforce_if(b)
                        continue
                    e = m.new_bool_var(f"e{lv}_{s}_{i}")
                    m.add(ys[s][i] == ys[0][i]).only_enforce_if(e)
                    m.add(ys[s][i] != ys[0][i]).only_enforce_if(~e)
                    eqs.append(e)
                    hints.append((e, int(hy[s][i] == hy[0][i])))
            if not pp_falls:
                m.add_bool_and(eqs).only_enforce_if(b)
                m.add_bool_or([~e for e in eqs] or [m.new_constant(0)]).only_enforce_if(~b)
            bals.append(b)
    for lv, below in belows:
        m.add(ks[lv] == ks[lv + 1]).only_enforce_if(below)
    # Objective: the DP table as allowed (k_0, k_1, ..., cost) tuples (AddAllowedAssignments:
    # only combinations whose pieces nest are listed).
    costs = [v for row in um.class_cost for v in row]
    dp_var = m.new_int_var(min(costs), max(costs), "dp_cost")
    if um.uplink_tiers and not full_uplinks:
        # Two tables: the pieces pick a class (the spans they price), the class and the uplink
        # steps pick the cost (classes x steps rows instead of keys x steps).
        cls = m.new_int_var(0, len(um.class_cost) - 1, "dp_class")
        m.add_allowed_assignments([*ks, *lones, cls], [(*c, v) for c, v in um.dp_class.items()])
        qv = _uplink_constraints(m, um, x, level_ys, hint, hints)
        m.add_allowed_assignments(
            [cls, *qv, dp_var],
            [
                (c, *qs, row[g])
                for c, row in enumerate(um.class_cost)
                for g, qs in enumerate(um.q_grid)
            ],
        )
        hints.append((cls, um.dp_class[hint_choice]))
        dp_hint = dp_cost(um, hint_choice, hint_qs)
    else:
        # No uplink tier, or every uplink at its full taper (q at the top of its grid).
        col = [row[-1] for row in um.class_cost]
        m.add_allowed_assignments(
            [*ks, *lones, dp_var], [(*c, col[v]) for c, v in um.dp_class.items()]
        )
        dp_hint = col[um.dp_class[hint_choice]]
    hints.append((dp_var, dp_hint))
    pp_cost = 0
    if pp > 1:
        lvl = m.new_int_var(0, len(um.levels), "pp_level")
        m.add(lvl == len(um.levels) - sum(bals))
        for a, b2 in itertools.pairwise(bals):  # balanced below implies balanced above
            m.add_implication(a, b2)
        flat = [v for row in um.pp_table for v in row]
        pv = m.new_int_var(min(flat), max(flat), "pp_cost")
        hint_lvl = len(um.levels) - sum(hint_bal)
        if um.pipe and not full_uplinks:
            qp = _pipe_constraints(m, um, x, hint, hints)
            m.add_allowed_assignments(
                [lvl, *qp, pv],
                [
                    (lv, *qs, row[g])
                    for lv, row in enumerate(um.pp_table)
                    for g, qs in enumerate(um.q_grid)
                ],
            )
            pp_hint = um.pp_table[hint_lvl][q_index(um, pipe_qs(um, hint))]
        else:  # one column, or every pipeline step at its top (full_uplinks)
            col = [row[-1] for row in um.pp_table]
            m.add_element(lvl, col, pv)
            pp_hint = col[hint_lvl]
        pp_cost = pv
        hints += [(lvl, hint_lvl), (pv, pp_hint)]
    if fixed_top is not None:
        for s, row in enumerate(level_ys[-1]):
            for i, y in enumerate(row):
                if y is None:
                    if fixed_top[s][i]:
                        raise ValueError("fixed_top: a domain with no room")
                else:
                    m.add(y == fixed_top[s][i])
    m.minimize(dp_var + pp_cost)
    for var, value in hints:
        m.add_hint(var, value)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    if deterministic:
        # Reproducible: stop on CP-SAT's deterministic clock (its seconds ran ~2.4x slower than
        # wall seconds at 16,384 GPUs here), the wall limit only a backstop.
        solver.parameters.max_deterministic_time = time_limit_s / 2
        solver.parameters.max_time_in_seconds = 4 * time_limit_s
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = 1 if deterministic else 8
    # Probing spends seconds on the thousands of piece literals before the search starts; the
    # search with the hint improves faster without it (16,384 GPUs: first improvement at 5 s
    # instead of none in 10 s).
    solver.parameters.cp_model_probing_level = 0
    if pp * nl > LARGE_COUNTS:
        # Presolve of the large model (131,072 GPUs: 81,000 variables) took 7 of its 18 wall
        # seconds at a 10 s limit and changed neither the solution nor the bound.
        solver.parameters.cp_model_presolve = False
    status = solver.solve(m)
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        counts = [[int(solver.value(v)) for v in row] for row in x]
        obj = round(solver.objective_value)
        if full_uplinks:  # the model's upper bound; the counts' own value
            obj = objective_us(um, counts)
    elif status == cp_model.UNKNOWN:  # out of time before a solution: the hint stands
        counts, obj = hint, objective_us(um, hint)
    else:
        raise InvalidInput(f"placement: CP-SAT found no assignment ({name})")
    bound = min(solver.best_objective_bound, obj)
    return Solution(
        status=name,
        objective_us=obj,
        bound_us=bound,
        gap=max(0.0, (obj - bound) / obj) if obj else 0.0,
        wall_time_s=time.perf_counter() - start,
        counts=counts,
        host_of_rank=build_map(um, counts),
    )
