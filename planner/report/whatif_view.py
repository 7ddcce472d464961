"""`planner whatif` as rich tables that read at 80 and 120 columns. Nothing here prints."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from cost_models.calibration import calibration_for_cluster
from cost_models.specs import Cluster, ModelSpec

from ..whatif import COMM_TERMS, WhatIfPoint, WhatIfResult, exposed_share, is_baseline
from .terminal import (
    LAYOUT_KEY,
    _table,
    _titled,
    compact_layout,
    defaults_text,
    params_text,
)

COLUMN = {"tp_comm": "TP", "cp_comm": "CP", "ep_comm": "EP", "pp_comm": "PP", "dp_comm": "DP"}


def _label(p: WhatIfPoint) -> str:
    if is_baseline(p):
        return "baseline"
    return p.value if isinstance(p.value, str) else f"{p.value:g}"


def render_whatif(
    r: WhatIfResult, cluster: Cluster, model: ModelSpec | None = None, framework: str = ""
) -> Group:
    """The sweep: one row per value (baseline first), exposed terms as % of the step, costs
    when priced, then the conclusions (whatif.conclusions) that read those same numbers."""
    rows = [r.baseline, *r.points]
    who = r.model if model is None else f"{model.name} ({params_text(model)})"
    plans_for = f", plans for {framework}" if framework else ""
    title = Text(
        f"whatif {r.parameter}: {who} on {r.cluster} ({r.num_gpus:,} GPUs){plans_for}",
        style="bold",
    )
    plans = _table("value", "layout", "tok/s/GPU", "MFU", "step s", "vs base", right_from=2)
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
    cal = calibration_for_cluster(cluster)
    terms = [t for t in COMM_TERMS if any(p.best.breakdown_s.get(t, 0) > 0 for p in rows)]
    cols = [COLUMN[t] for t in terms]
    if "dp_comm" in terms:
        cols.insert(terms.index("dp_comm") + 1, "DP wire")
    comm = _table("value", *cols, "bubble")
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
        _titled("Best plan at each value", plans),
        Text(LAYOUT_KEY, style="dim"),
        _titled("Exposed time, % of the step (comm: exposed only; DP wire: see below)", comm),
    ]
    if r.baseline.cost_per_m_tokens is not None:
        costs = _table("value", "$/M tokens", "train days", "train $")
        for p in rows:
            costs.add_row(
                _label(p),
                f"{p.cost_per_m_tokens:.3f}",
                "-" if p.train_days is None else f"{p.train_days:,.1f}",
                "-" if p.train_cost is None else f"{p.train_cost:,.0f}",
            )
        parts.append(_titled("Cost", costs))
        if any(p.network_capex_usd_per_gpu or p.network_power_w_per_gpu for p in rows):
            parts.append(_titled("Scale-out network per GPU (bill of materials)", _bom(rows)))
            if r.baseline.network_capex_usd_per_gpu_hour is None:
                note = "not in $/M tokens: add --amortization-years to price capex and energy"
                parts.append(Text(note, style="dim"))
    parts.append(Text("Conclusions", style="bold"))
    parts += [Text(f"- {c}") for c in r.conclusions]
    return Group(*parts)


def _bom(rows: list[WhatIfPoint]) -> object:
    """Capital, power and energy of the scale-out network per GPU (planner.network_bom); the
    hourly columns are what --amortization-years adds to the GPU-hour price."""
    amortised = any(p.network_capex_usd_per_gpu_hour is not None for p in rows)
    cols = ["value", "capex $", "power W", "energy $/h"]
    if amortised:
        cols.append("capex $/h")
    if any(p.train_network_energy_usd is not None for p in rows):
        cols.append("energy $ (run)")
    table = _table(*cols)
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
