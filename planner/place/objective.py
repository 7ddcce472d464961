"""The placement model's objective (integer microseconds): the DP term looked up from the
smallest pieces, lone flags, HSDP shard pieces and gradient-window uplink steps, plus the PP term looked up from
the lowest balanced level and the pipeline-window uplink steps (tables.py)."""

from __future__ import annotations

from typing import Any

from .constraints import add_balance_nesting, add_pipe_steps, add_uplink_steps
from .evaluate import dp_cost, pipe_qs, q_index
from .variables import PlacementVars


def add_dp_cost(v: PlacementVars, hint_qs: tuple[int, ...], full_uplinks: bool) -> Any:
    """dp_cost from the DP table as allowed (k_0, k_1, ..., cost) tuples (AddAllowedAssignments:
    only combinations whose pieces nest are listed)."""
    m, um = v.sat_model, v.um
    costs = [c for row in um.class_cost for c in row]
    dp_var = m.new_int_var(min(costs), max(costs), "dp_cost")
    if um.uplink_tiers and not full_uplinks:
        # Two tables: the pieces pick a class (the spans they price), the class and the uplink
        # steps pick the cost (classes x steps rows instead of keys x steps).
        cls = m.new_int_var(0, len(um.class_cost) - 1, "dp_class")
        m.add_allowed_assignments(
            [*v.ks, *v.lones, *v.hs, cls], [(*c, n) for c, n in um.dp_class.items()]
        )
        qv = add_uplink_steps(v)
        m.add_allowed_assignments(
            [cls, *qv, dp_var],
            [
                (c, *qs, row[g])
                for c, row in enumerate(um.class_cost)
                for g, qs in enumerate(um.q_grid)
            ],
        )
        v.hint_with(cls, um.dp_class[v.hint_choice])
        dp_hint = dp_cost(um, v.hint_choice, hint_qs)
    else:
        # No uplink tier, or every uplink at its full taper (q at the top of its grid).
        col = [row[-1] for row in um.class_cost]
        m.add_allowed_assignments(
            [*v.ks, *v.lones, *v.hs, dp_var], [(*c, col[n]) for c, n in um.dp_class.items()]
        )
        dp_hint = col[um.dp_class[v.hint_choice]]
    return v.hint_with(dp_var, dp_hint)


def add_pp_cost(v: PlacementVars, hint_lvl: int, full_uplinks: bool) -> Any:
    """pp_cost from the PP table at the lowest balanced level (len(levels) - number of balanced
    levels, balance nesting upward) and the pipeline window's uplink steps; 0 where pp = 1."""
    m, um = v.sat_model, v.um
    if um.layout.pp == 1:
        return 0
    lvl = m.new_int_var(0, len(um.levels), "pp_level")
    m.add(lvl == len(um.levels) - sum(v.bals))
    add_balance_nesting(v)
    flat = [c for row in um.pp_table for c in row]
    pv = m.new_int_var(min(flat), max(flat), "pp_cost")
    if um.pipe and not full_uplinks:
        qp = add_pipe_steps(v)
        m.add_allowed_assignments(
            [lvl, *qp, pv],
            [
                (lv, *qs, row[g])
                for lv, row in enumerate(um.pp_table)
                for g, qs in enumerate(um.q_grid)
            ],
        )
        pp_hint = um.pp_table[hint_lvl][q_index(um, pipe_qs(um, v.hint))]
    else:  # one column, or every pipeline step at its top (full_uplinks)
        col = [row[-1] for row in um.pp_table]
        m.add_element(lvl, col, pv)
        pp_hint = col[hint_lvl]
    v.hints += [(lvl, hint_lvl), (pv, pp_hint)]
    return pv
