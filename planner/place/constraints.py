"""The placement model's constraint families, one function each (cpsat-primer's modules.py):
assignment, split blocks, smallest pieces per level, lone split-block parts, PP balance, the
gradient and pipeline windows' uplink steps, and the pods-first restriction. Each adds its
auxiliary variables with their hinted values (variables.PlacementVars)."""

from __future__ import annotations

import itertools
from typing import Any

from ortools.sat.python import cp_model

from cost_models import uplink

from .evaluate import chunk_prefix, pipe_qs, shard_pieces, uplink_qs
from .units import k_values, level_counts, level_cuts
from .variables import PlacementVars


def add_assignment(v: PlacementVars) -> None:
    """Every stage gets its D units; a leaf holds at most its capacity; stages are
    interchangeable, so they are ordered by their count on the first leaf."""
    m, um, x = v.sat_model, v.um, v.x
    pp = um.layout.pp
    for s in range(pp):
        m.add(sum(x[s]) == um.units_per_stage)
    for j in range(len(um.leaf_hosts)):
        m.add(sum(x[s][j] for s in range(pp)) <= um.capacity[j])
    for s in range(pp - 1):
        m.add(x[s][0] >= x[s + 1][0])


def add_split_blocks(v: PlacementVars) -> None:
    """xb[s, i]: split block i (a pseudo-leaf of capacity 1) is stage s's."""
    m, um = v.sat_model, v.um
    first = len(um.leaf_hosts) - um.split_blocks
    for s in range(um.layout.pp):
        for i in range(um.split_blocks):
            v.xb[s, i] = v.hint_with(m.new_bool_var(f"xb{s}_{i}"), v.hint[s][first + i])
            m.add(v.x[s][first + i] == v.xb[s, i])


def _piece(v: PlacementVars, lv: int, s: int, i: int, k: Any, hy, exact: bool, zs, used_at):
    """y: units of stage s in domain i of level lv; used <=> y >= 1; used => k <= y; with
    `exact` a witness w => k == y (zs collects the witnesses). None where the domain has no
    room."""
    m, um = v.sat_model, v.um
    dom = um.levels[lv][i]
    cap = min(um.units_per_stage, sum(um.capacity[j] for j in dom))
    if cap == 0:
        return None
    y = v.x[s][dom[0]] if len(dom) == 1 else m.new_int_var(0, cap, f"y{lv}_{s}_{i}")
    if len(dom) > 1:
        m.add(y == sum(v.x[s][j] for j in dom))
        v.hint_with(y, hy[s][i])
    used = v.hint_with(m.new_bool_var(f"u{lv}_{s}_{i}"), int(hy[s][i] > 0))
    used_at[s, i] = used
    m.add(y >= 1).only_enforce_if(used)
    m.add(y == 0).only_enforce_if(~used)
    m.add(k <= y).only_enforce_if(used)
    if exact:  # k is also some used piece: a witness per piece
        w = m.new_bool_var(f"w{lv}_{s}_{i}")
        m.add(k == y).only_enforce_if(w)
        m.add_implication(w, used)
        zs.append(w)
        v.hint_with(w, int(hy[s][i] == v.hint_choice[lv]))
    return y


def add_pieces(v: PlacementVars, lv: int, exact: bool) -> tuple[list, dict]:
    """k_lv: the smallest used piece at level lv, k <= every used piece; where the DP table does
    not fall as pieces grow (`exact`), k also equals a witness piece (or no whole block lies at
    this level, or, with split blocks, k equals the level above's). Returns the level's y per
    stage and domain and the used flags."""
    m, um = v.sat_model, v.um
    hy = level_counts(um, v.hint, lv)
    zs: list[Any] = []
    used_at: dict[tuple[int, int], Any] = {}
    k = m.new_int_var_from_domain(cp_model.Domain.from_values(k_values(um, lv)), f"k{lv}")
    ys = [
        [_piece(v, lv, s, i, k, hy, exact, zs, used_at) for i in range(len(um.levels[lv]))]
        for s in range(um.layout.pp)
    ]
    if exact:
        # k is free where no whole block lies at this level (only split blocks).
        none = m.new_bool_var(f"none{lv}")
        for lit in used_at.values():
            m.add_implication(none, ~lit)
        used_pieces = {n for row in hy for n in row if n > 0}
        v.hint_with(none, int(not used_pieces))
        if um.split_blocks and lv + 1 < len(um.levels):
            # k may sit below every used piece where the level above has the smaller piece
            # (a split block there; dp_choice nests k_L = min(k_L, k_L+1)): k_L = k_L+1.
            below = m.new_bool_var(f"below{lv}")
            zs.append(below)
            v.belows.append((lv, below))
            lies_below = bool(used_pieces) and v.hint_choice[lv] not in used_pieces
            v.hint_with(below, int(lies_below))
        m.add_bool_or([*zs, none])
    v.ks.append(v.hint_with(k, v.hint_choice[lv]))
    v.level_ys.append(ys)
    return ys, used_at


def add_lone(v: PlacementVars, lv: int, used_at: dict[tuple[int, int], Any]) -> None:
    """lone_lv <= some stage's split block has a part in a domain with none of its whole blocks
    (the table never prices lone below not lone, so this direction suffices)."""
    m, um = v.sat_model, v.um
    lone = m.new_bool_var(f"lone{lv}")
    v.hint_with(lone, v.hint_choice[len(um.levels) + len(v.lones)])
    for s in range(um.layout.pp):
        for i, spans in enumerate(um.split_touch[lv]):
            for dm in spans:
                lits = [lone, ~v.xb[s, i]]
                if (s, dm) in used_at:
                    lits.append(used_at[s, dm])
                m.add_bool_or(lits)
    v.lones.append(lone)


def add_balance(v: PlacementVars, lv: int, ys: list[list[Any]], exact: bool) -> bool:
    """b_lv => every stage has the same count in every domain of level lv (PP groups inside its
    domains); with `exact` (PP does not get cheaper inward) also the converse. Fixed false where
    no split of the domains holds pp equal shares, or split blocks span them. Returns the
    hint's balance."""
    m, um = v.sat_model, v.um
    pp, d, doms = um.layout.pp, um.units_per_stage, um.levels[lv]
    hy = level_counts(um, v.hint, lv)
    hinted = all(row == hy[0] for row in hy) and not um.crossing[lv]
    b = v.hint_with(m.new_bool_var(f"b{lv}"), int(hinted))
    # Equal counts need every domain to hold pp x its per-stage count.
    room = sum(min(d, sum(um.capacity[j] for j in dom) // pp) for dom in doms)
    if room < d or um.crossing[lv]:  # a split block's PP groups leave the domains
        m.add(b == 0)
    eqs = []
    for s in range(1, pp):
        for i in range(len(doms)):
            if ys[s][i] is None:
                continue
            if not exact:
                m.add(ys[s][i] == ys[0][i]).only_enforce_if(b)
                continue
            e = m.new_bool_var(f"e{lv}_{s}_{i}")
            m.add(ys[s][i] == ys[0][i]).only_enforce_if(e)
            m.add(ys[s][i] != ys[0][i]).only_enforce_if(~e)
            eqs.append(e)
            v.hint_with(e, int(hy[s][i] == hy[0][i]))
    if exact:
        m.add_bool_and(eqs).only_enforce_if(b)
        m.add_bool_or([~e for e in eqs] or [m.new_constant(0)]).only_enforce_if(~b)
    v.bals.append(b)
    return hinted


def add_piece_nesting(v: PlacementVars) -> None:
    """below_L => k_L = k_L+1 (add_pieces)."""
    for lv, below in v.belows:
        v.sat_model.add(v.ks[lv] == v.ks[lv + 1]).only_enforce_if(below)


def add_balance_nesting(v: PlacementVars) -> None:
    """Balanced below implies balanced above."""
    for a, b in itertools.pairwise(v.bals):
        v.sat_model.add_implication(a, b)


def add_uplink_steps(v: PlacementVars) -> list[Any]:
    """One step variable q per uplink tier with UPLINK_STEPS x (GPUs leaving domain i) <=
    (the job's GPUs under i) x q for every domain of its level (evaluate.uplink_qs, linear): a
    stage wholly inside i (full) sends nothing upward; with HSDP the GPUs that stay are
    hsdp_kept_expr's. The objective grows with q (tables.q_monotone), so q sits at the busiest
    domain's rounded share."""
    m, um = v.sat_model, v.um
    q_steps = uplink.UPLINK_STEPS * um.uplink_scale
    hint_q = uplink_qs(um, v.hint)
    out = []
    for t, (j, lv) in enumerate(zip(um.uplink_tiers, um.uplink_levels, strict=True)):
        q = v.hint_with(m.new_int_var(0, um.uplink_max[t], f"q{j}"), hint_q[t])
        for i, dom in enumerate(um.levels[lv]):
            units = sum(v.x[s][leaf] for s in range(um.layout.pp) for leaf in dom)
            kept = _hsdp_kept(v, lv, i, f"{j}_{i}") if um.shard_cuts else _fulls(v, lv, i, j)
            leaving = um.unit_gpus * units + um.uplink_split[t][i] - kept
            m.add(q_steps * leaving <= um.uplink_ports[t][i] * q)
        out.append(q)
    return out


def _fulls(v: PlacementVars, lv: int, i: int, j: int) -> Any:
    """U x D x (stages wholly inside domain i of level lv): a bool per stage, full => y >= D."""
    m, um, d = v.sat_model, v.um, v.um.units_per_stage
    hy = level_counts(um, v.hint, lv)
    fulls = []
    for s in range(um.layout.pp):
        y = v.level_ys[lv][s][i]
        if y is None or sum(um.capacity[leaf] for leaf in um.levels[lv][i]) < d:
            continue
        f = v.hint_with(m.new_bool_var(f"full{j}_{s}_{i}"), int(hy[s][i] == d))
        m.add(y >= d).only_enforce_if(f)
        fulls.append(f)
    return um.unit_gpus * d * sum(fulls)


def _hsdp_kept(v: PlacementVars, lv: int, i: int, tag: str) -> Any:
    """HSDP: the GPUs of domain i of level lv whose dp_shard x cp and dp_replicate groups both
    stay inside it, summed over stages (evaluate.kept_gpus on each stage's run of units
    [P[s][a], P[s][b]) along the chunk order)."""
    um, (a, b) = v.um, v.um.domain_span[lv][i]
    pref, hp = _prefix_counts(v)
    gpus = um.layout.tp * um.layout.cp
    total = 0
    for s, row in enumerate(pref):
        kept, hints = hsdp_kept_expr(
            v.sat_model, um, row[a], row[b], f"{tag}_{s}", hp[s][a], hp[s][b]
        )
        v.hints += hints
        total += gpus * kept
    return total


def hsdp_kept_expr(
    m: cp_model.CpModel, um: Any, lo: Any, hi: Any, tag: str, hlo: int = 0, hhi: int = 0
) -> tuple[Any, list[tuple[Any, int]]]:
    """evaluate.hsdp_kept on a run of units [lo, hi) (variables or ints) as CP-SAT, in dp
    indices, with the values at the hinted run [hlo, hhi): R = 1: D a x (the run is the stage);
    else |J| = max(0, min(S - a lo, a (hi - lo) - (R - 1) S)) (exact), and
    kept <= (R - 2) |J| + |J| [lo = 0] + |J| [hi = D] (each product one-way: a bool that implies
    its equality; the objective, growing with q, takes the largest)."""
    lay, d = um.layout, um.units_per_stage
    s, r, a = lay.shard_dp, lay.replicate_dp, um.unit_gpus // (lay.tp * lay.cp)
    if r == 1:
        full = m.new_bool_var(f"hf{tag}")
        m.add(hi - lo >= d).only_enforce_if(full)
        return a * d * full, [(full, int(hhi - hlo == d))]
    e = m.new_int_var(-(a * d + r * s), s, f"he{tag}")
    m.add_min_equality(e, [s - a * lo, a * (hi - lo) - (r - 1) * s])
    j = m.new_int_var(0, s, f"hj{tag}")
    m.add_max_equality(j, [0, e])
    he = min(s - a * hlo, a * (hhi - hlo) - (r - 1) * s)
    hints = [(e, he), (j, max(0, he))]
    ends = []
    for end, at, hat in ((lo, 0, hlo), (hi, d, hhi)):
        if isinstance(end, int):  # the chunk order's first position: P = 0
            b = m.new_constant(int(end == at))
        else:
            b = m.new_bool_var(f"hb{tag}_{at}")
            m.add(end == at).only_enforce_if(b)
            hints.append((b, int(hat == at)))
        z = m.new_int_var(0, s, f"hz{tag}_{at}")
        m.add(z <= j)
        m.add(z <= s * b)
        hints.append((z, max(0, he) if hat == at else 0))
        ends.append(z)
    return (r - 2) * j + ends[0] + ends[1], hints


def _prefix_counts(v: PlacementVars) -> tuple[list[list[Any]], list[list[int]]]:
    """P[s][k]: units of stage s on the first k leaves of build_map's chunk order (variables,
    made once and shared, and their hinted values)."""
    m, um = v.sat_model, v.um
    order = um.chunk_order
    hp = chunk_prefix(um, v.hint)
    if v.prefix:
        return v.prefix, hp
    for s in range(um.layout.pp):
        row: list[Any] = [0]
        for k, leaf in enumerate(order):
            p = v.hint_with(m.new_int_var(0, um.units_per_stage, f"pf{s}_{k}"), hp[s][k + 1])
            m.add(p == row[-1] + v.x[s][leaf])
            row.append(p)
        v.prefix.append(row)
    return v.prefix, hp


def add_shard_pieces(v: PlacementVars) -> None:
    """HSDP: h_L = the least of tables.shard_cuts at every stage's prefix count at every cut of
    level L (evaluate.shard_pieces), exactly (an element and a min equality: the table need not
    fall as h grows). Nothing without HSDP."""
    m, um = v.sat_model, v.um
    if not um.shard_cuts:
        return
    hint = shard_pieces(um, v.hint)
    whole = um.shard_cuts[0]
    values = cp_model.Domain.from_values(um.shard_values)
    pref, hp = _prefix_counts(v) if len(set(um.shard_cuts)) > 1 else ([], [])
    for lv in range(len(um.levels)):
        h = v.hint_with(m.new_int_var_from_domain(values, f"h{lv}"), hint[lv])
        pieces: list[Any] = [whole]
        for k in level_cuts(um, lv) if pref else []:
            for s, row in enumerate(pref):
                e = m.new_int_var_from_domain(values, f"hc{lv}_{s}_{k}")
                m.add_element(row[k], um.shard_cuts, e)
                v.hint_with(e, um.shard_cuts[hp[s][k]])
                pieces.append(e)
        m.add_min_equality(h, pieces)
        v.hs.append(h)


def add_pipe_steps(v: PlacementVars) -> list[Any]:
    """evaluate.pipe_qs, linear: in domain [a, b) of the chunk order the chunks of every stage
    lie in [max_s P[s][a], min_s P[s][b]), whose length I (<= that, the objective pushes it up)
    counts the PP groups inside; then UPLINK_STEPS x (U x (units - pp x I) + split GPUs) <=
    ports x q."""
    m, um = v.sat_model, v.um
    q_steps = uplink.UPLINK_STEPS * um.uplink_scale
    pp, d, u = um.layout.pp, um.units_per_stage, um.unit_gpus
    pref, hp = _prefix_counts(v)
    out = []
    hint_q = pipe_qs(um, v.hint)
    for t, (j, lv) in enumerate(zip(um.uplink_tiers, um.uplink_levels, strict=True)):
        q = v.hint_with(m.new_int_var(0, um.uplink_max[t], f"qp{j}"), hint_q[t])
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
            v.hints += [(lo_end, he), (hi_start, hs), (inside, max(0, he - hs))]
            v.hint_with(meet, int(he >= hs))
            units = sum(pref[s][b] - pref[s][a] for s in range(pp))
            leaving = u * (units - pp * inside) + um.uplink_split[t][i]
            m.add(q_steps * leaving <= um.uplink_ports[t][i] * q)
        out.append(q)
    return out


def add_fixed_top(v: PlacementVars, fixed_top: list[list[int]]) -> None:
    """Units of each stage per top-level domain fixed (planner/place/decompose.py)."""
    for s, row in enumerate(v.level_ys[-1]):
        for i, y in enumerate(row):
            if y is None:
                if fixed_top[s][i]:
                    raise ValueError("fixed_top: a domain with no room")
            else:
                v.sat_model.add(y == fixed_top[s][i])
