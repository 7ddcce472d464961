"""The placement model on its top level only: a relaxation whose CP-SAT bound is a lower bound
on the whole model's objective, and whose solution, filled into leaves, is a hint (issue 27).

Variables: Y[s][p], the units of stage s in top-level domain (pod) p (its leaves and the split
blocks inside it), and z[s][c], split block c across pods is stage s's. The top level's terms
are the whole model's (constraints.py, on Y): its smallest piece k_T, its lone flag, its
balance, the uplink steps of both windows at the tiers whose switches are the pods. Every
lower level keeps only what counting proves for any counts (bound.py): k_L <= kmax_L (and the
balanced limit where PP groups are balanced at or below L), lone_L >= the forced flag, steps
>= their least values, balance only where it is possible. The same tables price the summary.

Why a relaxation: any counts x the whole model accepts give Y = x's units per pod, z = x's
split blocks, and x's own summary (evaluate.summary, dp_choice, uplink_qs, pipe_qs), which
satisfy every constraint here, each written in the direction x's own values satisfy it (k_T <=
every used top piece, balanced => equal counts, lone >= a lone part, step >= the senders'
share; bound.py's steps 1-4 for the lower levels), at x's objective. So the optimum here, and
CP-SAT's bound on it, is at most the whole model's optimum, whether or not the tables fall as
pieces grow (the one-way encodings only widen the relaxation). Its solution may take a piece or
a balance it does not have; the fill is priced exactly (evaluate.objective_us) before use.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from cost_models import uplink

from .bound import Limits, limits
from .constraints import hsdp_kept_expr
from .counted import UnitModel
from .counts import best_fit
from .units import k_values


@dataclass
class Top:
    """The relaxation's answer."""

    status: str
    bound_us: int  # CP-SAT's bound on the relaxation: a lower bound on the whole model
    objective_us: int | None
    pods: list[list[int]] | None  # Y[s][p]
    owners: dict[int, int] | None  # split block across pods -> its stage
    spent_s: float = 0.0  # 2 x CP-SAT's deterministic time: what the time limit counts


@dataclass
class _TopVars:
    m: cp_model.CpModel
    y: list[list[Any]]
    z: dict[tuple[int, int], Any]
    used: dict[tuple[int, int], Any]
    ks: list[Any]
    lones: list[Any]
    bals: list[Any]


def _pods_and_blocks(um: UnitModel) -> tuple[list[int], list[int]]:
    top = len(um.levels) - 1
    caps = [sum(um.capacity[j] for j in dom) for dom in um.levels[top]]
    blocks = [b for b, touch in enumerate(um.split_touch[top]) if touch]
    return caps, blocks


def _assignment(um: UnitModel, lim: Limits) -> _TopVars:
    """Y, z, stage totals, room per pod and block, the stages' order, and k_T <= every used
    top piece (k_L of lower levels within their limits)."""
    m, pp, d = cp_model.CpModel(), um.layout.pp, um.units_per_stage
    caps, blocks = _pods_and_blocks(um)
    top = len(um.levels) - 1
    y = [[m.new_int_var(0, min(d, c), f"y{s}_{p}") for p, c in enumerate(caps)] for s in range(pp)]
    z = {(s, c): m.new_bool_var(f"z{s}_{c}") for s in range(pp) for c in blocks}
    for s in range(pp):
        m.add(sum(y[s]) + sum(z[s, c] for c in blocks) == d)
    for p in range(len(caps)):
        m.add(sum(y[s][p] for s in range(pp)) <= caps[p])
    for c in blocks:
        m.add(sum(z[s, c] for s in range(pp)) <= 1)
    for s in range(pp - 1):
        m.add(y[s][0] >= y[s + 1][0])
    ks = []
    for lv in range(len(um.levels)):
        values = [k for k in k_values(um, lv) if lim.kmax[lv] is None or k <= lim.kmax[lv]]
        ks.append(m.new_int_var_from_domain(cp_model.Domain.from_values(values), f"k{lv}"))
    used = {}
    for s in range(pp):
        for p in range(len(caps)):
            u = used[s, p] = m.new_bool_var(f"u{s}_{p}")
            m.add(y[s][p] >= 1).only_enforce_if(u)
            m.add(y[s][p] == 0).only_enforce_if(~u)
            m.add(ks[top] <= y[s][p]).only_enforce_if(u)
    return _TopVars(m, y, z, used, ks, [], [])


def _lones(um: UnitModel, v: _TopVars, lim: Limits) -> None:
    """lone flags: the top level's as the whole model's (constraints.add_lone), the others at
    least the forced flag."""
    top, cross = len(um.levels) - 1, [lv for lv in range(len(um.levels)) if um.crossing[lv]]
    for lv, forced in zip(cross, lim.lone_forced, strict=True):
        lone = v.m.new_bool_var(f"lone{lv}")
        if forced:
            v.m.add(lone == 1)
        if lv == top:
            for (s, c), zc in v.z.items():
                for p in um.split_touch[top][c]:
                    v.m.add_bool_or([lone, ~zc, v.used[s, p]])
        v.lones.append(lone)


def _balance(um: UnitModel, v: _TopVars, lim: Limits) -> Any:
    """b_L => balanced (top: equal counts per pod; lower: only where possible, and then the
    balanced piece limit), balance nesting upward; returns the PP level variable."""
    m, pp, n = v.m, um.layout.pp, len(um.levels)
    top = n - 1
    for lv in range(n):
        b = m.new_bool_var(f"b{lv}")
        if not lim.balance_ok[lv]:
            m.add(b == 0)
        for above in range(lv, n):
            k_lim = lim.kmax_balanced[above]
            if k_lim is not None and above < top:
                m.add(v.ks[above] <= k_lim).only_enforce_if(b)
        v.bals.append(b)
    for s in range(1, pp):
        for p in range(len(v.y[0])):
            m.add(v.y[s][p] == v.y[0][p]).only_enforce_if(v.bals[top])
    for a, b in itertools.pairwise(v.bals):
        m.add_implication(a, b)
    level = m.new_int_var(0, n, "pp_level")
    m.add(level == n - sum(v.bals))
    return level


def _gradient_steps(um: UnitModel, v: _TopVars, lim: Limits) -> list[Any]:
    """Steps at the pods' uplinks as constraints.add_uplink_steps on Y (with HSDP on each
    stage's run of units per pod, pods in chunk order as in _pipe_steps); the others >= q_lb."""
    m, top, d, u = v.m, len(um.levels) - 1, um.units_per_stage, um.unit_gpus
    caps, _ = _pods_and_blocks(um)
    pref = [list(itertools.accumulate(row, initial=0)) for row in v.y]
    out = []
    for t, lv in enumerate(um.uplink_levels):
        q = m.new_int_var(lim.q_lb[t], um.uplink_max[t], f"q{t}")
        if lv == top:
            for p, cap in enumerate(caps):
                fulls: list[Any] = []
                if um.shard_cuts:  # HSDP: the runs [Y prefix] of the pods in chunk order
                    g = um.layout.tp * um.layout.cp
                    fulls = [g * hsdp_kept_expr(m, um, r[p], r[p + 1], f"{t}_{s}_{p}")[0]
                             for s, r in enumerate(pref)]
                elif cap >= d:
                    for s in range(um.layout.pp):
                        f = m.new_bool_var(f"f{t}_{s}_{p}")
                        m.add(v.y[s][p] >= d).only_enforce_if(f)
                        fulls.append(u * d * f)
                units = sum(row[p] for row in v.y)
                leaving = u * units + um.uplink_split[t][p] - sum(fulls)
                steps = uplink.UPLINK_STEPS * um.uplink_scale
                m.add(steps * leaving <= um.uplink_ports[t][p] * q)
        out.append(q)
    return out


def _pipe_steps(um: UnitModel, v: _TopVars, lim: Limits) -> list[Any]:
    """The pipeline window at the pods' uplinks as constraints.add_pipe_steps, the pods in the
    chunk order (build_map's: pods in index order, split blocks across pods after them)."""
    m, top, pp, d, u = v.m, len(um.levels) - 1, um.layout.pp, um.units_per_stage, um.unit_gpus
    pods = len(v.y[0])
    pref = [list(itertools.accumulate(row, initial=0)) for row in v.y]
    out = []
    for t, lv in enumerate(um.uplink_levels):
        q = m.new_int_var(lim.pq_lb[t], um.uplink_max[t], f"qp{t}")
        if lv == top:
            for p in range(pods):
                lo_end, hi_start = m.new_int_var(0, d, ""), m.new_int_var(0, d, "")
                inside, meet = m.new_int_var(0, d, ""), m.new_bool_var("")
                for s in range(pp):
                    m.add(lo_end <= pref[s][p + 1])
                    m.add(hi_start >= pref[s][p])
                m.add(inside <= lo_end - hi_start).only_enforce_if(meet)
                m.add(inside == 0).only_enforce_if(~meet)
                units = sum(row[p] for row in v.y)
                leaving = u * (units - pp * inside) + um.uplink_split[t][p]
                steps = uplink.UPLINK_STEPS * um.uplink_scale
                m.add(steps * leaving <= um.uplink_ports[t][p] * q)
        out.append(q)
    return out


def _objective(um: UnitModel, v: _TopVars, lim: Limits) -> None:
    """The whole model's tables (objective.py) on this summary."""
    m = v.m
    level = _balance(um, v, lim) if um.layout.pp > 1 else 0
    qs = _gradient_steps(um, v, lim)
    cls = m.new_int_var(0, len(um.class_cost) - 1, "class")
    # HSDP shard pieces free (any the table lists): a relaxation, its optimum still a bound.
    hs = [
        m.new_int_var_from_domain(cp_model.Domain.from_values(um.shard_values), f"h{lv}")
        for lv in range(len(um.levels) if um.shard_values else 0)
    ]
    keys = [(*k, c) for k, c in um.dp_class.items()]
    m.add_allowed_assignments([*v.ks, *v.lones, *hs, cls], keys)
    costs = [c for row in um.class_cost for c in row]
    dp = m.new_int_var(min(costs), max(costs), "dp")
    m.add_allowed_assignments(
        [cls, *qs, dp],
        [(c, *q, row[g]) for c, row in enumerate(um.class_cost) for g, q in enumerate(um.q_grid)],
    )
    if um.layout.pp == 1:
        m.minimize(dp + um.pp_table[len(um.levels)][0])
        return
    flat = [c for row in um.pp_table for c in row]
    pv = m.new_int_var(min(flat), max(flat), "pp")
    if um.pipe:
        pq = _pipe_steps(um, v, lim)
        rows = [
            (lv, *q, row[g]) for lv, row in enumerate(um.pp_table) for g, q in enumerate(um.q_grid)
        ]
        m.add_allowed_assignments([level, *pq, pv], rows)
    else:
        m.add_element(level, [row[0] for row in um.pp_table], pv)
    m.minimize(dp + pv)


def solve_top(um: UnitModel, *, time_limit_s: float, seed: int = 0) -> Top | None:
    """The relaxation solved by CP-SAT (deterministic: one worker, stopped on the deterministic
    clock at half the limit, the wall clock a 20x backstop); None where a single level leaves
    nothing to aggregate, or CP-SAT ends without a finite bound."""
    if len(um.levels) < 2:
        return None
    lim = limits(um)
    v = _assignment(um, lim)
    _lones(um, v, lim)
    _objective(um, v, lim)
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers, p.random_seed = 1, seed
    p.max_deterministic_time = time_limit_s / 2
    p.max_time_in_seconds = 20 * time_limit_s
    # Probing at level 1 (not the default 2): on 16,384 GPUs in bench/place_scaling.py level 1
    # proved the relaxation optimal in 0.25 deterministic seconds, level 2 not in 0.5.
    p.cp_model_probing_level = 1
    # No cuts: CP-SAT's deterministic clock undercounts its LP cut rounds (the runner-up
    # layout at 131,072 GPUs, TP8 PP8 DP2048, spent 64 wall seconds on 3 deterministic ones
    # with cuts, 8-30 without, on the loaded box); 16,384 GPUs then proves the relaxation
    # optimal at CP-SAT seeds 0-4 in 0.42-0.69 of its 1.5 s (prefix-count variables instead of
    # the prefix sums proved it at only 3 of those 5 seeds).
    p.cut_level = 0
    status = solver.solve(v.m)
    spent = 2 * solver.response_proto.deterministic_time  # in the limit's units
    # The objective's costs are whole microseconds, so its bound is a whole number too: round
    # it up past CP-SAT's floating-point noise (a bound of k + 1e-10 is k, not k + 1).
    bound = solver.best_objective_bound - 1e-6
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if status != cp_model.UNKNOWN or not math.isfinite(bound):
            return None
        return Top(solver.status_name(status), math.ceil(bound), None, None, None, spent)
    pods = [[int(solver.value(x)) for x in row] for row in v.y]
    owners = {c: s for (s, c), zc in v.z.items() if solver.value(zc)}
    # integer costs: the bound rounds up
    obj = round(solver.objective_value)
    return Top(solver.status_name(status), math.ceil(bound), obj, pods, owners, spent)


def fill_leaves(um: UnitModel, top: Top) -> list[list[int]]:
    """Counts for the whole model from the relaxation's pods: the split blocks across pods to
    their stages, then per pod the split blocks inside it to the stages with the most units
    left there, and each stage's rest best-fit into the pod's leaves, largest first (large
    pieces at the leaves)."""
    assert top.pods is not None and top.owners is not None
    pp, first = um.layout.pp, len(um.leaf_hosts) - um.split_blocks
    counts = [[0] * len(um.leaf_hosts) for _ in range(pp)]
    for c, s in top.owners.items():
        counts[s][first + c] = 1
    left = list(um.capacity)
    for p, dom in enumerate(um.levels[-1]):
        need = [top.pods[s][p] for s in range(pp)]
        for j in (j for j in dom if j >= first):
            s = max(range(pp), key=lambda s: (need[s], -s))
            if need[s]:
                counts[s][j], need[s], left[j] = 1, need[s] - 1, 0
        leaves = [j for j in dom if j < first]
        for s in sorted(range(pp), key=lambda s: (-need[s], s)):
            while need[s]:
                j = best_fit([j for j in leaves if left[j]], left, need[s])
                take = min(need[s], left[j])
                counts[s][j] += take
                left[j] -= take
                need[s] -= take
    return counts


def improve_pods(
    um: UnitModel, top: Top, counts: list[list[int]], *, time_limit_s: float
) -> list[list[int]]:
    """Where leaves sit right under the pods (two levels), each pod's leaves re-packed by CP-SAT
    (deterministic, an equal share of `time_limit_s` per pod re-packed): its split blocks to
    stages holding whole blocks in every leaf each block spans (no lone part, unless one is
    forced), the largest smallest leaf piece, the pod's stage totals kept. Pods whose counts
    already have no lone part and the largest piece bound.py allows are kept. Returns new
    counts."""
    lim = limits(um)
    if len(um.levels) != 2 or lim.kmax[0] is None or top.pods is None or top.owners is None:
        return counts
    lone_free = um.crossing[0] and not lim.lone_forced[0]
    first = len(um.leaf_hosts) - um.split_blocks
    todo = [p for p in range(len(um.levels[1])) if not _pod_done(um, counts, p, lim, lone_free)]
    out = [list(row) for row in counts]
    for p in todo:
        dom = um.levels[1][p]
        pod = _Pod(
            leaves=[j for j in dom if j < first],
            blocks=[j for j in dom if j >= first],
            need=[top.pods[s][p] for s in range(um.layout.pp)],
            # the owners of split blocks across pods need whole blocks where they have a part
            must={(s, j) for c, s in top.owners.items() for j in um.split_touch[0][c]},
        )
        for lone in (True, False) if lone_free else (False,):
            got = _pack_pod(um, pod, lim.kmax[0], lone, time_limit_s / len(todo))
            if got is not None:
                for s, row in enumerate(got):
                    for j, value in row.items():
                        out[s][j] = value
                break
    return out


@dataclass
class _Pod:
    leaves: list[int]
    blocks: list[int]  # split blocks inside the pod
    need: list[int]  # units per stage
    must: set[tuple[int, int]]  # (stage, leaf): whole blocks needed there (no lone part)


def _pod_done(um: UnitModel, counts: list[list[int]], p: int, lim: Limits, lone_free: bool) -> bool:
    """The pod's counts have the largest smallest leaf piece allowed and, where lone parts can
    be avoided, none."""
    first = len(um.leaf_hosts) - um.split_blocks
    dom = um.levels[1][p]
    pieces = [row[j] for row in counts for j in dom if j < first and row[j]]
    if pieces and min(pieces) < (lim.kmax[0] or 0):
        return False
    if not lone_free:
        return True
    return not any(
        row[first + b] and any(row[j] == 0 for j in um.split_touch[0][b])
        for row in counts
        for b in range(um.split_blocks)
        if set(um.split_touch[0][b]) & set(dom)
    )


def _pack_pod(
    um: UnitModel, pod: _Pod, k_most: int, lone: bool, time_limit_s: float
) -> list[dict[int, int]] | None:
    """One pod: units of each stage per leaf and its split blocks' stages, the smallest leaf
    piece as large as possible; with `lone`, a block's stage holds whole blocks in every leaf
    the block spans. None: infeasible, or no answer in time."""
    m, pp, first = cp_model.CpModel(), um.layout.pp, len(um.leaf_hosts) - um.split_blocks
    x = {
        (s, j): m.new_int_var(0, min(um.capacity[j], pod.need[s]), f"x{s}_{j}")
        for s in range(pp)
        for j in pod.leaves
    }
    w = {(s, b): m.new_bool_var(f"w{s}_{b}") for s in range(pp) for b in pod.blocks}
    k = m.new_int_var(1, k_most, "k")
    for s in range(pp):
        m.add(sum(x[s, j] for j in pod.leaves) + sum(w[s, b] for b in pod.blocks) == pod.need[s])
    for j in pod.leaves:
        m.add(sum(x[s, j] for s in range(pp)) <= um.capacity[j])
    for b in pod.blocks:
        m.add(sum(w[s, b] for s in range(pp)) <= 1)
    for (s, j), xv in x.items():
        used = m.new_bool_var(f"u{s}_{j}")
        m.add(xv >= k).only_enforce_if(used)
        m.add(xv == 0).only_enforce_if(~used)
        if lone:
            if (s, j) in pod.must:
                m.add(xv >= 1)
            for b in pod.blocks:
                if j in um.split_touch[0][b - first]:
                    m.add_implication(w[s, b], used)
    m.maximize(k)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = time_limit_s / 2
    solver.parameters.max_time_in_seconds = 20 * time_limit_s
    if solver.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out = [dict.fromkeys(pod.leaves + pod.blocks, 0) for _ in range(pp)]
    for (s, j), xv in x.items():
        out[s][j] = int(solver.value(xv))
    for (s, b), wv in w.items():
        out[s][b] = int(solver.value(wv))
    return out
