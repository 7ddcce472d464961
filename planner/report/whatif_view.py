"""`planner whatif` as a reader sees it: rich tables that read at 80 and 120 columns, the
conclusions (what the rows show, in words) and the JSON object. Nothing here prints."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from cost_models.calibration import calibration_for_cluster
from cost_models.specs import Cluster, ModelSpec

from ..whatif import (
    COMM_TERMS,
    TERM_AXIS,
    WhatIfPoint,
    WhatIfResult,
    exposed_share,
    is_baseline,
    ordered_points,
    plan_key,
)
from .dicts import plan_dict
from .goodput_view import goodput_conclusions, goodput_dict, goodput_line
from .terminal import compact_table, titled
from .text import TERM_LABELS, LAYOUT_KEY, compact_layout, defaults_text, params_text

COLUMN = {"tp_comm": "TP", "cp_comm": "CP", "ep_comm": "EP", "pp_comm": "PP", "dp_comm": "DP"}


def _label(p: WhatIfPoint) -> str:
    if is_baseline(p):
        return "baseline"
    return p.value if isinstance(p.value, str) else f"{p.value:g}"


def render_whatif(
    r: WhatIfResult, cluster: Cluster, model: ModelSpec | None = None, framework: str = ""
) -> Group:
    """The sweep: one row per value (baseline first), exposed terms as % of the step, costs
    when priced, then the conclusions (`conclusions`) that read those same numbers."""
    rows = [r.baseline, *r.points]
    who = r.model if model is None else f"{model.name} ({params_text(model)})"
    plans_for = f", plans for {framework}" if framework else ""
    title = Text(
        f"whatif {r.parameter}: {who} on {r.cluster} ({r.num_gpus:,} GPUs){plans_for}",
        style="bold",
    )
    plans = compact_table("value", "layout", "tok/s/GPU", "MFU", "step s", "vs base", right_from=2)
    # The layout cell wraps (at its spaces) where 80 columns cannot hold the row, so no number
    # and no value is cut (issue 28: "baseli…", "42.…").
    plans.columns[1].no_wrap = False
    for p in rows:
        e = p.best
        plans.add_row(
            _label(p),
            compact_layout(e),
            f"{e.tokens_per_s_per_gpu:,.1f}",
            f"{e.mfu:.1%}",
            f"{e.step_time_s:,.3f}",
            "-" if p is r.baseline else f"{p.change:+.1%}",
        )
    cal = r.calibration if r.calibration is not None else calibration_for_cluster(cluster)
    terms = [t for t in COMM_TERMS if any(p.best.breakdown_s.get(t, 0) > 0 for p in rows)]
    cols = [COLUMN[t] for t in terms]
    if "dp_comm" in terms:
        cols.insert(terms.index("dp_comm") + 1, "DP wire")
    comm = compact_table("value", *cols, "bubble")
    for p in rows:
        e = p.best
        cells = []
        for t in terms:
            cells.append(f"{e.breakdown_s.get(t, 0.0) / e.step_time_s:.1%}")
            if t == "dp_comm":
                cells.append(f"{exposed_share(e, t, cal):.1%}")
        comm.add_row(_label(p), *cells, f"{e.breakdown_s.get('bubble', 0.0) / e.step_time_s:.1%}")
    parts: list = [title]
    if r.hbm_gib is not None:
        parts.append(Text(defaults_text(r.hbm_gib, r.baseline.best.usable_memory_gib), style="dim"))
    parts += [
        titled("Fastest plan at each value", plans),
        Text(LAYOUT_KEY, style="dim"),
        titled("Exposed time, % of the step (comm: exposed only; DP wire: see below)", comm),
    ]
    if r.baseline.cost_per_m_tokens is not None:
        costs = compact_table("value", "$/M tokens", "train days", "train $")
        for p in rows:
            costs.add_row(
                _label(p),
                f"{p.cost_per_m_tokens:.3f}",
                "-" if p.train_days is None else f"{p.train_days:,.1f}",
                "-" if p.train_cost is None else f"{p.train_cost:,.0f}",
            )
        parts.append(titled("Cost", costs))
        if any(p.network_capex_usd_per_gpu or p.network_power_w_per_gpu for p in rows):
            parts.append(titled("Scale-out network per GPU (bill of materials)", _bom(rows)))
            if r.baseline.network_capex_usd_per_gpu_hour is None:
                note = "not in $/M tokens: add --amortization-years to price capex and energy"
                parts.append(Text(note, style="dim"))
    if r.baseline.goodput is not None:  # a reliability sweep: vs base and costs are on goodput
        lines = [f"{_label(p)}: {goodput_line(p.goodput)}" for p in rows if p.goodput]
        lines += reliability_conclusions(r)
        parts.append(titled_text("Goodput at each value (vs base and $ on kept tokens)", lines))
    parts.append(Text("Conclusions", style="bold"))
    parts += [Text(f"- {c}") for c in conclusions(r)]
    return Group(*parts)


def reliability_conclusions(r: WhatIfResult) -> list[str]:
    """A reliability sweep's verdict (goodput_view.goodput_conclusions); [] for a network one."""
    rows = [r.baseline, *r.points]
    if any(p.goodput is None for p in rows):
        return []
    return goodput_conclusions([(_label(p), p.goodput, p.cost_per_m_tokens) for p in rows])


def titled_text(title: str, lines: list[str]) -> Group:
    return Group(Text(title, style="bold"), *(Text(x) for x in lines))


def _bom(rows: list[WhatIfPoint]) -> object:
    """Capital, power and energy of the scale-out network per GPU (planner.network_bom); the
    hourly columns are what --amortization-years adds to the GPU-hour price."""
    amortised = any(p.network_capex_usd_per_gpu_hour is not None for p in rows)
    cols = ["value", "capex $", "power W", "energy $/h"]
    if amortised:
        cols.append("capex $/h")
    if any(p.train_network_energy_usd is not None for p in rows):
        cols.append("energy $ (run)")
    table = compact_table(*cols)
    for p in rows:
        cells = [
            _label(p),
            f"{p.network_capex_usd_per_gpu or 0:,.0f}",
            f"{p.network_power_w_per_gpu or 0:,.1f}",
            f"{p.network_energy_usd_per_gpu_hour or 0:.4f}",
        ]
        if amortised:
            hourly = p.network_capex_usd_per_gpu_hour
            cells.append("-" if hourly is None else f"{hourly:.4f}")
        if "energy $ (run)" in cols:
            run = p.train_network_energy_usd
            cells.append("-" if run is None else f"{run:,.0f}")
        table.add_row(*cells)
    return table


# ------------------------------------------------------------------------------------ conclusions


def conclusions(r: WhatIfResult) -> list[str]:
    """What the rows show, in words, and nothing else (issue 20): which plan each value picked,
    where each exposed term stops being exposed (and whether the plan changed there), and when
    the parameter cannot matter."""
    ordered = ordered_points(list(r.points))
    out = _plan_changes(r.baseline, ordered)
    out += _recommended(r, [r.baseline, *ordered])
    out += _hidden_terms(r, ordered)
    if r.varied_tiers and r.parameter != "nvlink-domain":
        first = min(r.tier_names.index(t) for t in r.varied_tiers)
        reach = [r.tier_names.index(t) for t in r.crossed_tiers if t is not None]
        if not reach or max(reach) < first:
            out.append(
                f"Warning: no group of any plan here crosses the {', '.join(r.varied_tiers)} "
                f"tier, so {r.parameter} cannot change these step times (use more GPUs or a "
                "layout whose groups span it)."
            )
    if len({round(p.best.step_time_s, 9) for p in [r.baseline, *ordered]}) == 1:
        out.append("Every row has the same step time.")
    if r.baseline_slice is not None:
        out.append(f"The baseline is the preset's torus as the job fills it: {r.baseline_slice}.")
    if r.point_tiers:
        tiers = {id(p): t for p, t in zip(r.points, r.point_tiers, strict=True)}
        out += against_trend([(p, tiers[id(p)]) for p in ordered])
    cut = [_label(p) for p, s in zip([r.baseline, *r.points], r.stopped, strict=False) if s]
    if cut:
        out.append(
            f"Warning: the search at {', '.join(cut)} was not proved within its work or time "
            "limit (STOPPED): that row is the best plan found, not the best; comparisons with it "
            "can move with the limits (raise --time-limit / --work-limit)."
        )
    return out


AGAINST_TREND_SHARE = 0.001
"""A step between adjacent values is explained when throughput moves against the sweep's overall
trend by more than this share (0.1 %; smaller moves are rounding-level)."""


def against_trend(steps: list[tuple[WhatIfPoint, dict[str, str | None]]]) -> list[str]:
    """Issue 28: every step of a numeric sweep that moves against its overall trend (a bigger
    NVLink domain that is slower), explained by the breakdown term that moved most and the axes
    whose groups now cross another tier. `steps`: (point, axis -> slowest tier crossed) in
    value order."""
    if len(steps) < 3 or any(isinstance(p.value, str) for p, _ in steps):
        return []
    trend = steps[-1][0].best.tokens_per_s_per_gpu - steps[0][0].best.tokens_per_s_per_gpu
    out = []
    for (a, tiers_a), (b, tiers_b) in zip(steps, steps[1:], strict=False):
        change = b.best.tokens_per_s_per_gpu / a.best.tokens_per_s_per_gpu - 1
        if trend == 0 or abs(change) <= AGAINST_TREND_SHARE or (change > 0) == (trend > 0):
            continue
        da, db = a.best.breakdown_s, b.best.breakdown_s
        moved = max(sorted(set(da) | set(db)), key=lambda t: abs(db.get(t, 0.0) - da.get(t, 0.0)))
        delta = db.get(moved, 0.0) - da.get(moved, 0.0)
        crossed = [
            f"{axis.upper()} groups cross {tiers_b[axis] or 'no tier'} (at {value_text(a.value)}: "
            f"{tiers_a.get(axis) or 'no tier'})"
            for axis in tiers_b
            if tiers_b[axis] != tiers_a.get(axis)
        ]
        why = "; ".join(crossed) if crossed else "no group crosses another tier"
        if plan_key(a.best) != plan_key(b.best):
            why += f" (plan {a.best.layout.label} -> {b.best.layout.label})"
        out.append(
            f"From {value_text(a.value)} to {value_text(b.value)} throughput moves "
            f"{change:+.1%}, against the trend: {TERM_LABELS.get(moved, moved)} {delta:+.3f} s; "
            f"{why}."
        )
    return out


def value_text(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def _plan_changes(baseline: WhatIfPoint, ordered: list[WhatIfPoint]) -> list[str]:
    """Which plan each value picked: every change named against the previous row."""
    prev_key, prev_layout = plan_key(baseline.best), compact_layout(baseline.best)
    changes = []
    for p in ordered:
        key = plan_key(p.best)
        if key != prev_key:
            now = compact_layout(p.best)
            what = f"{prev_layout} -> {now}" if now != prev_layout else f"{now}, new placement"
            changes.append(f"At {value_text(p.value)} the plan changes: {what}.")
        prev_key, prev_layout = key, compact_layout(p.best)
    if changes:
        return changes
    return [f"Every value keeps the baseline plan ({compact_layout(baseline.best)})."]


def _recommended(r: WhatIfResult, rows: list[WhatIfPoint]) -> list[str]:
    """Where `planner plan` would recommend a simpler plan than the row's fastest: named once,
    with why the rows compare the fastest plans (planner/whatif.py docstring)."""
    simpler = [
        f"{_label(p)} ({compact_layout(p.recommended)}, "
        f"{1 - p.recommended.tokens_per_s_per_gpu / p.best.tokens_per_s_per_gpu:.1%} slower)"
        for p in rows
        if p.recommended is not None
    ]
    if not simpler:
        return []
    tolerance = f"{r.simplicity_tolerance * 100:g}%"
    return [
        f"`planner plan` would recommend a simpler plan within its {tolerance} "
        f"simplicity tolerance at {', '.join(simpler)}. Every row is the fastest plan at its "
        "value, so a better network never shows as slower because a simpler plan came within "
        "the tolerance."
    ]


def _hidden_terms(r: WhatIfResult, ordered: list[WhatIfPoint]) -> list[str]:
    """Where each term exposed at the first value stops being exposed, and why."""
    out = []
    for term, value in r.hidden_from.items():
        label = term.split("_")[0].upper()
        col = f"{label} wire" if term == "dp_comm" else label
        if value is None:
            last = ordered[-1]
            share = exposed_share(last.best, term, r.calibration)
            out.append(
                f"{col} stays exposed (> 1% of the step) at every value: {share:.1%} at "
                f"{value_text(last.value)}."
            )
            continue
        at = next(p for p in ordered if p.value == value)
        axis = TERM_AXIS[term]
        degree = getattr(at.best.layout, axis)
        if degree == 1:
            why = f"because the plan there has no {label} group ({label}1), not because it hides"
        else:
            before = ordered[ordered.index(at) - 1]
            same = plan_key(before.best) == plan_key(at.best)
            why = "same plan as the value before" if same else "with a different plan"
        out.append(f"{col} is <= 1% of the step from {value_text(value)} on ({why}).")
    if "dp_comm" in r.hidden_from:
        out.append(
            "DP wire is the DP collective's exposed wire time; the DP column also holds the "
            "compute slowed beside the hidden part (SM contention), which no network removes."
        )
    return out


# ------------------------------------------------------------------------------------------ JSON


def whatif_dict(r: WhatIfResult) -> dict[str, Any]:
    """The `whatif --json` object: every row with its plan (CONTRACT.md PLAN) and the
    conclusions."""
    return {
        "parameter": r.parameter,
        "cluster": r.cluster,
        "num_gpus": r.num_gpus,
        "baseline": _point_dict(r.baseline, r.hbm_gib),
        "points": [_point_dict(p, r.hbm_gib) for p in r.points],
        "model": r.model,
        **r.params,
        "hidden_from": r.hidden_from,
        "conclusions": conclusions(r) + reliability_conclusions(r),
    }


def _point_dict(p: WhatIfPoint, hbm_gib: float | None = None) -> dict[str, Any]:
    plan = plan_dict(p.best)
    if hbm_gib is not None:
        plan["estimate"]["hbm_gib"] = hbm_gib
    return {
        "value": None if is_baseline(p) else p.value,
        "plan": plan,
        "tokens_per_s_per_gpu": p.best.tokens_per_s_per_gpu,
        "mfu": p.best.mfu,
        "step_time_s": p.best.step_time_s,
        "breakdown_s": p.best.breakdown_s,
        "recommended": None if p.recommended is None else plan_dict(p.recommended),
        "change_vs_baseline": p.change,
        "cost_per_m_tokens": p.cost_per_m_tokens,
        "train_days": p.train_days,
        "train_cost": p.train_cost,
        "network_capex_usd_per_gpu": p.network_capex_usd_per_gpu,
        "network_power_w_per_gpu": p.network_power_w_per_gpu,
        "network_energy_usd_per_gpu_hour": p.network_energy_usd_per_gpu_hour,
        "network_capex_usd_per_gpu_hour": p.network_capex_usd_per_gpu_hour,
        "train_network_energy_usd": p.train_network_energy_usd,
        **({} if p.goodput is None else {"goodput": goodput_dict(p.goodput)}),
    }
