"""`planner design` as a reader sees it: the JSON object of CONTRACT.md "Network design", rich
tables that read at 80 and 120 columns (the frontier, the best design per budget, every
evaluated design, the best design's plans and the term that decides each), one offline HTML
page and the frontier chart. Nothing here prints."""

from __future__ import annotations

import base64
import io
from html import escape
from typing import Any

from rich.console import Group
from rich.text import Text

from ..design.decide import Decision, decide
from ..design.search import DesignResult, Evaluated
from .dicts import plan_dict
from .terminal import compact_table, titled
from .text import TERM_LABELS, compact_layout

RULES = {
    "dominated": "a design at least as fast costs no more (no plan searched)",
    "bounded": "an evaluated design that costs no more reaches its throughput bound",
    "infeasible": "a workload has no plan that fits",
}


def decisions(e: Evaluated) -> list[Decision]:
    c = e.candidate
    return [decide(c.design, c.cluster, p) for p in e.plans]


def _design_dict(r: DesignResult, e: Evaluated) -> dict[str, Any]:
    c = e.candidate
    plans = []
    for entry, plan, status, why in zip(r.mix, e.plans, e.statuses, decisions(e), strict=True):
        plans.append(
            {
                "workload": entry.label,
                "share": entry.share,
                **plan_dict(plan),
                "solver_status": status,
                "decides": why.as_dict(),
            }
        )
    return {
        "name": c.design.name,
        "design": c.design.as_dict(),
        "cluster": c.cluster.model_dump(mode="json"),
        "network_capex_usd_per_gpu": c.capex,
        "network_power_w_per_gpu": c.bill.power_w_per_gpu,
        "network_usd_per_gpu_hour": c.network_usd_per_gpu_hour,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "usd_per_m_tokens": e.usd_per_m_tokens,
        "plans": plans,
    }


def design_dict(r: DesignResult) -> dict[str, Any]:
    """CONTRACT.md "Network design": designs, frontier, best; plus the search's counts, the
    designs it skipped and why, the cost assumptions and the best design per budget."""
    counts = {rule: sum(s.rule == rule for s in r.skipped) for rule in RULES}
    return {
        "designs": [_design_dict(r, e) for e in r.designs],
        "frontier": list(r.frontier),
        "best": r.best,
        "gpu": r.gpu,
        "num_gpus": r.num_gpus,
        "workloads": [{**m.as_point(), "name": m.label, "share": m.share} for m in r.mix],
        "constraints": {
            "network_budget_usd_per_gpu": r.network_budget_usd_per_gpu,
            "min_tokens_per_s_per_gpu": r.min_tokens_per_s_per_gpu,
        },
        "per_budget": [{"network_budget_usd_per_gpu": b, "design": i} for b, i in r.per_budget],
        "assumptions": r.costs.assumptions(),
        "search": {
            "designs": r.total,
            "evaluated": r.total - counts["dominated"] - counts["bounded"],
            "skipped": counts,
            "rules": RULES,
        },
        "skipped": [
            {
                "name": s.candidate.design.name,
                "rule": s.rule,
                "by": s.by,
                "bound_tokens_per_s_per_gpu": s.bound,
                "network_capex_usd_per_gpu": s.candidate.capex,
                "reason": s.reason or None,
            }
            for s in r.skipped
        ],
    }


# ------------------------------------------------------------------------------ terminal


def _decision_text(d: Decision) -> str:
    if d.term is None:
        crossing = "/".join(a.upper() for a in d.axes) or "nothing"
        return f"{d.tier} ({d.thinned}): {crossing} crosses it, nothing exposed"
    label = TERM_LABELS.get(d.term, d.term)
    return f"{label} {d.share:.1%} of the step over {d.tier} ({d.thinned})"


def _header(r: DesignResult) -> list[Any]:
    counts = {rule: sum(s.rule == rule for s in r.skipped) for rule in RULES}
    mix = ", ".join(f"{m.label} {m.share:.0%}" for m in r.mix)
    evaluated = r.total - counts["dominated"] - counts["bounded"]
    lines = [
        Text(f"design: {mix} on {r.num_gpus:,} x {r.gpu}", style="bold"),
        Text(
            f"{r.total} designs: {evaluated} evaluated ({len(r.designs)} with a plan for every "
            f"workload), {counts['dominated']} dominated (a design at least as fast costs no "
            f"more), {counts['bounded']} bounded (a cheaper evaluated design reaches their "
            f"throughput bound), {counts['infeasible']} infeasible",
        ),
    ]
    return lines


def _frontier_table(r: DesignResult) -> Any:
    t = compact_table("design", "net $/GPU", "W/GPU", "tok/s/GPU", "$/M tok", right_from=1)
    for i in r.frontier:
        e = r.designs[i]
        mark = " *" if i == r.best else ""
        t.add_row(
            e.candidate.design.name + mark,
            f"{e.candidate.capex:,.0f}",
            f"{e.candidate.bill.power_w_per_gpu:,.0f}",
            f"{e.tokens_per_s_per_gpu:,.1f}",
            f"{e.usd_per_m_tokens:.4f}",
        )
    return titled("Frontier: throughput vs network capital per GPU (* best $/M tokens)", t)


def _budget_table(r: DesignResult) -> Any:
    t = compact_table("budget $/GPU", "best design", "tok/s/GPU", "$/M tok", right_from=2)
    for budget, i in r.per_budget:
        e = r.designs[i]
        t.add_row(
            f"<= {budget:,.0f}",
            e.candidate.design.name,
            f"{e.tokens_per_s_per_gpu:,.1f}",
            f"{e.usd_per_m_tokens:.4f}",
        )
    return titled("Best design per network budget", t)


def _all_table(r: DesignResult) -> Any:
    names = [f"w{i + 1}" for i in range(len(r.mix))]
    t = compact_table("design", "net $/GPU", "tok/s/GPU", "$/Mtok", *names, right_from=1)
    for e in sorted(r.designs, key=lambda e: (e.candidate.capex, e.candidate.index)):
        t.add_row(
            e.candidate.design.name,
            f"{e.candidate.capex:,.0f}",
            f"{e.tokens_per_s_per_gpu:,.1f}",
            f"{e.usd_per_m_tokens:.4f}",
            *(f"{p.tokens_per_s_per_gpu:,.1f}" for p in e.plans),
        )
    legend = "; ".join(f"w{i + 1} {m.label}" for i, m in enumerate(r.mix))
    return titled(f"Evaluated designs (tok/s/GPU of each workload: {legend})", t)


def _best_table(r: DesignResult) -> Any:
    e = r.designs[r.best]
    t = compact_table("workload", "layout", "tok/s/GPU", "MFU", "decides", right_from=2)
    t.columns[1].no_wrap = False
    t.columns[4].no_wrap = False
    t.columns[4].justify = "left"
    for m, p, d in zip(r.mix, e.plans, decisions(e), strict=True):
        t.add_row(
            m.label,
            compact_layout(p),
            f"{p.tokens_per_s_per_gpu:,.1f}",
            f"{p.mfu:.1%}",
            _decision_text(d),
        )
    c = e.candidate
    title = (
        f"Best: {c.design.name}: ${c.capex:,.0f} of network per GPU, "
        f"{c.bill.power_w_per_gpu:,.0f} W, {e.usd_per_m_tokens:.4f} $/M tokens"
    )
    return titled(title, t)


def _assumption_lines(r: DesignResult) -> list[Text]:
    out = [
        Text(
            "Cost assumptions (--gpu-hour-price, --amortization-years, --network-prices):",
            style="dim",
        )
    ]
    for key, a in r.costs.assumptions().items():
        out.append(Text(f"  {key} = {a['value']:g}: {a['source']}", style="dim"))
    return out


def render_design(r: DesignResult) -> Group:
    parts: list[Any] = [*_header(r), Text("")]
    parts += [_frontier_table(r), Text(""), _budget_table(r), Text("")]
    parts += [_best_table(r), Text(""), _all_table(r), Text("")]
    parts += _assumption_lines(r)
    return Group(*parts)


# ------------------------------------------------------------------------------ chart, HTML


def save_frontier_plot(r: DesignResult, path: str, plt: Any) -> None:
    """Throughput against network capital per GPU: every evaluated design, the frontier as a
    line, the best design ringed. `plt` is report.plot.pyplot(path) (matplotlib, Agg)."""
    fig = _figure(r, plt)
    fig.savefig(path)
    plt.close(fig)


def _figure(r: DesignResult, plt: Any) -> Any:
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [e.candidate.capex for e in r.designs]
    ys = [e.tokens_per_s_per_gpu for e in r.designs]
    ax.scatter(xs, ys, s=14, color="tab:gray", label="evaluated design")
    fx = [xs[i] for i in r.frontier]
    fy = [ys[i] for i in r.frontier]
    ax.plot(fx, fy, marker="o", color="tab:blue", label="frontier")
    for i in r.frontier:
        ax.annotate(
            r.designs[i].candidate.design.name,
            (xs[i], ys[i]),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=6,
        )
    if r.best is not None:
        ax.scatter(
            [xs[r.best]],
            [ys[r.best]],
            s=120,
            facecolors="none",
            edgecolors="tab:red",
            label="best $/M tokens",
        )
    ax.set_xlabel("network capital per GPU, $")
    ax.set_ylabel("tokens/s/GPU (share-weighted)")
    mix = ", ".join(m.label for m in r.mix)
    ax.set_title(f"planner design: {mix} on {r.num_gpus:,} x {r.gpu}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def render_design_html(r: DesignResult, plt: Any | None) -> str:
    """One offline page: the chart (inline SVG, where matplotlib is installed) and the tables."""
    chart = ""
    if plt is not None:
        fig = _figure(r, plt)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        chart = f'<img alt="frontier" src="data:image/png;base64,{data}">'
    rows = []
    for i, e in enumerate(r.designs):
        c = e.candidate
        cls = ' class="best"' if i == r.best else (' class="front"' if i in r.frontier else "")
        plans = "<br>".join(
            f"{escape(m.label)}: {escape(compact_layout(p))} ({p.tokens_per_s_per_gpu:,.1f}); "
            f"{escape(_decision_text(d))}"
            for m, p, d in zip(r.mix, e.plans, decisions(e), strict=True)
        )
        rows.append(
            f"<tr{cls}><td>{escape(c.design.name)}</td><td>{c.capex:,.0f}</td>"
            f"<td>{c.bill.power_w_per_gpu:,.0f}</td><td>{e.tokens_per_s_per_gpu:,.1f}</td>"
            f"<td>{e.usd_per_m_tokens:.4f}</td><td>{plans}</td></tr>"
        )
    head = "".join(escape(str(t.plain)) + "<br>" for t in _header(r))
    notes = "".join(escape(t.plain) + "<br>" for t in _assumption_lines(r))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>planner design</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px}"
        "table{border-collapse:collapse;font-size:13px}"
        "td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "tr.front{background:#eef4fb}tr.best{background:#fde2c8}</style></head><body>"
        f"<h1>Network design</h1><p>{head}</p>{chart}"
        "<h2>Evaluated designs (frontier shaded, best in orange)</h2><table><tr><th>design</th>"
        "<th>net $/GPU</th><th>W/GPU</th><th>tok/s/GPU</th><th>$/M tokens</th>"
        "<th>plans; what decides</th></tr>"
        + "".join(rows)
        + f"</table><p>{notes}</p></body></html>\n"
    )
