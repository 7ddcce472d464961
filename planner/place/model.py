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
- step = T_dp[k_0, k_1, ...] + T_pp[lowest balanced level] (AddAllowedAssignments over the
  nesting (k_0, k_1, ..., cost) tuples; AddElement for PP): the DP and PP terms are separate
  terms of the step sum (estimate's breakdown), so the table is additive in them; each entry is
  rounded to a microsecond, so the objective matches re-pricing the map to within 2 us.

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
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.specs import Axis, Cluster, Layout, ModelSpec, Workload

from .allocation import Allocation
from .pricing import nest, placed_pieces

CANONICAL = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
US = 1e6  # objective unit: microseconds


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
    capacity: list[int]  # units per leaf
    level_of_tier: list[int | None]  # model level whose pieces set the tier, None: not a level
    lowest_tier: int  # the first tier above a host (0 when NVLink domains span hosts)
    dp_table: dict[tuple[int, ...], int]  # (k_0, k_1, ...) -> step (pp at the top) in us
    pp_table: list[int]  # lowest balanced level (len(levels): none) -> delta in us


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
    levels: list[list[list[int]]] = [[[i] for i in range(len(leaf_ids))]]
    for p in partitions[1:]:
        groups: dict[int, list[int]] = {}
        for i, hs in enumerate(leaf_hosts):
            groups.setdefault(int(p[hs[0]]), []).append(i)
        levels.append(list(groups.values()))
    um = UnitModel(
        layout=lo,
        unit_gpus=unit,
        nodes_per_unit=nodes_per_unit,
        units_per_stage=per_stage,
        levels=levels,
        leaf_hosts=leaf_hosts,
        capacity=capacity,
        level_of_tier=level_of_tier,
        lowest_tier=lowest,
        dp_table={},
        pp_table=[],
    )
    if sum(capacity) < per_stage * lo.pp:
        raise Unplaceable(
            f"allocation: {lo.pp * per_stage} blocks of {nodes_per_unit} node(s) under one leaf "
            f"needed, the leaves hold {sum(capacity)}"
        )
    _tables(model, cluster, workload, alloc, um)
    return um


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

    def spans_for(ks: tuple[int, ...], pp_level: int) -> dict[str, list[int]]:
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
                    span.append(min(whole, ks[lv] * u))
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

    memo: dict[tuple, int] = {}

    def step_us(ks: tuple[int, ...], pp_level: int) -> int:
        # Many piece combinations nest to the same spans (whole factors per tier): price once.
        spans = spans_for(ks, pp_level)
        key = tuple(tuple(spans[k]) for k in sorted(spans))
        if key not in memo:
            e = estimate(model, cluster, workload, lo, spans=spans)
            memo[key] = round(e.step_time_s * US)
        return memo[key]

    n = len(um.levels)
    top_ks = tuple(um.units_per_stage for _ in range(n))
    for ks in itertools.product(*(_k_values(um, lv) for lv in range(n))):
        if all(a <= b for a, b in itertools.pairwise(ks)):  # pieces nest
            um.dp_table[ks] = step_us(ks, n)
    ref = step_us(top_ks, n)
    um.pp_table = [step_us(top_ks, lv) - ref for lv in range(n)] + [0]


def _dp_monotone(um: UnitModel) -> bool:
    """The DP table never rises when one level's smallest piece grows (to its next value)."""
    values = [_k_values(um, lv) for lv in range(len(um.levels))]
    for ks, us in um.dp_table.items():
        for lv, k in enumerate(ks):
            i = values[lv].index(k)
            if i + 1 < len(values[lv]):
                up = (*ks[:lv], values[lv][i + 1], *ks[lv + 1 :])
                if up in um.dp_table and um.dp_table[up] > us:
                    return False
    return True


def greedy_counts(um: UnitModel) -> list[list[int]]:
    """The scheduler's order packed into leaves: stage 0 first, leaves in first-appearance
    order (the hint, and the hint-quality baseline)."""
    left = list(um.capacity)
    counts = [[0] * len(left) for _ in range(um.layout.pp)]
    leaf = 0
    for s in range(um.layout.pp):
        need = um.units_per_stage
        while need:
            while left[leaf] == 0:
                leaf += 1
            take = min(need, left[leaf])
            counts[s][leaf] += take
            left[leaf] -= take
            need -= take
    return counts


def best_fit_counts(um: UnitModel) -> list[list[int]]:
    """Stage by stage, the top-level domain (pod) that holds the whole stage most tightly (else
    the emptiest), and inside it the leaf that holds the rest most tightly (else the emptiest):
    large DP pieces, a second hint."""
    left = list(um.capacity)
    counts = [[0] * len(left) for _ in range(um.layout.pp)]
    tops = um.levels[-1]
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


def objective_us(um: UnitModel, counts: list[list[int]]) -> int:
    """The model's objective for given counts (the oracle and the hint use it)."""
    ks, balanced = [], []
    for lv in range(len(um.levels)):
        y = level_counts(um, counts, lv)
        ks.append(min(v for row in y for v in row if v > 0))
        balanced.append(all(row == y[0] for row in y))
    pp_level = next((lv for lv, b in enumerate(balanced) if b), len(um.levels))
    if um.layout.pp == 1:
        pp_level = len(um.levels)
    return um.dp_table[tuple(ks)] + um.pp_table[pp_level]


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
    raise AssertionError(leaf)


@dataclass
class Solution:
    status: str
    objective_us: int
    bound_us: float
    gap: float
    wall_time_s: float
    counts: list[list[int]]
    host_of_rank: np.ndarray


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
) -> Solution:
    """CP-SAT over the counts; status, objective, bound and gap are CP-SAT's own. The hint is
    the cheapest of the greedy packing and `hints` (counts, e.g. of the better baseline)."""
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
    dp_falls, pp_falls = _dp_monotone(um), all(a <= b for a, b in itertools.pairwise(um.pp_table))
    hint = min([greedy_counts(um), best_fit_counts(um), *hints], key=lambda c: objective_us(um, c))
    hint = sorted(hint, key=lambda row: -row[0])  # the stage order the symmetry cut asks
    hints: list[tuple[Any, int]] = [(x[s][j], hint[s][j]) for s in range(pp) for j in range(nl)]
    hint_ks, hint_bal = [], []
    ks, bals = [], []
    for lv, doms in enumerate(um.levels):
        hy = level_counts(um, hint, lv)
        hint_ks.append(min(v for row in hy for v in row if v > 0))
        hint_bal.append(all(row == hy[0] for row in hy))
        zs = []
        ys = []
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
                hints.append((used, int(hy[s][i] > 0)))
                m.add(y >= 1).only_enforce_if(used)
                m.add(y == 0).only_enforce_if(~used)
                m.add(k <= y).only_enforce_if(used)
                if not dp_falls:  # k is also some used piece: a witness per piece
                    w = m.new_bool_var(f"w{lv}_{s}_{i}")
                    m.add(k == y).only_enforce_if(w)
                    m.add_implication(w, used)
                    zs.append(w)
                    hints.append((w, int(hy[s][i] == hint_ks[-1])))
                row.append(y)
            ys.append(row)
        if not dp_falls:
            m.add_bool_or(zs)
        ks.append(k)
        hints.append((k, hint_ks[-1]))
        if pp > 1:
            b = m.new_bool_var(f"b{lv}")
            hints.append((b, int(hint_bal[-1])))
            # Equal counts need every domain to hold pp x its per-stage count.
            room = sum(min(d, sum(um.capacity[j] for j in dom) // pp) for dom in doms)
            if room < d:
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
    # Objective: the DP table as allowed (k_0, k_1, ..., cost) tuples (AddAllowedAssignments:
    # only combinations whose pieces nest are listed).
    dp_cost = m.new_int_var(min(um.dp_table.values()), max(um.dp_table.values()), "dp_cost")
    m.add_allowed_assignments([*ks, dp_cost], [(*c, v) for c, v in um.dp_table.items()])
    hints.append((dp_cost, um.dp_table[tuple(hint_ks)]))
    pp_cost = 0
    if pp > 1:
        lvl = m.new_int_var(0, len(um.levels), "pp_level")
        m.add(lvl == len(um.levels) - sum(bals))
        for a, b2 in itertools.pairwise(bals):  # balanced below implies balanced above
            m.add_implication(a, b2)
        pv = m.new_int_var(min(um.pp_table), max(um.pp_table), "pp_cost")
        m.add_element(lvl, um.pp_table, pv)
        pp_cost = pv
        hint_lvl = len(um.levels) - sum(hint_bal)
        hints += [(lvl, hint_lvl), (pv, um.pp_table[hint_lvl])]
    m.minimize(dp_cost + pp_cost)
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
    status = solver.solve(m)
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        counts = [[int(solver.value(v)) for v in row] for row in x]
        obj = round(solver.objective_value)
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
