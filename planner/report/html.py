"""The placement report as one self-contained HTML page: tables, the step-time breakdown as a CSS
bar chart, memory per stage as stacked bars, and the rank map as a grid of GPUs coloured by the
domain of the tier above NVLink. Inline CSS only: no scripts, no fonts, no remote resources, so
the file opens offline. Nothing here prints.
"""

from __future__ import annotations

from html import escape

from cost_models import topology
from cost_models.specs import Cluster, Estimate

from ..place import ranks
from ..types import PlanResult
from . import findings
from .goodput_view import goodput_html, goodput_line
from .placed import PlacedView, search_title
from .text import (
    LAYOUT_LEGEND,
    MEMORY_HEADER,
    TERM_LABELS,
    compact_layout,
    defaults_text,
    gathered_notes,
    header_text,
    layout_line,
    memory_phase_notes,
    memory_rows,
    memory_title,
    rank_cells,
    rejection_lines,
    solver_line,
    stage_memory_cells,
    summary_text,
)

MAX_GRID_GPUS = 256  # GPUs drawn in the rank-map grid; the compact rule covers the rest
TERM_COLOURS = {
    "compute": "#4e79a7",
    "recompute": "#a0cbe8",
    "tp_comm": "#f28e2b",
    "cp_comm": "#ffbe7d",
    "ep_comm": "#e15759",
    "pp_comm": "#b07aa1",
    "dp_comm": "#59a14f",
    "bubble": "#bab0ac",
    "optimizer": "#9c755f",
}
MEMORY_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#bab0ac")
MEMORY_PARTS = ("weights", "grads", "optimizer", "activations", "buffers")
DOMAIN_COLOURS = ("#dbe9f6", "#fde2c8", "#d9f0d3", "#f3d9ea", "#fff2b3", "#e0e0e0")
TIER_COLOURS = ("#59a14f", "#4e79a7", "#f28e2b", "#e15759", "#b07aa1", "#9c755f")

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1100px; color: #222; line-height: 1.4; padding: 0 16px; }
h1 { font-size: 1.45em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 2px; }
p.sub { color: #555; margin-top: 0; }
.best { background: #f4f8fc; border-left: 4px solid #4e79a7; padding: 8px 12px; }
.best .big { font-size: 1.2em; font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.92em; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e6e6e6; text-align: right;
         white-space: nowrap; }
th { background: #f3f3f3; }
td.l, th.l { text-align: left; }
td.wrap { white-space: normal; text-align: left; }
tr.over td { color: #b00; font-weight: 600; }
tr.best td { background: #f4f8fc; }
.barcell { width: 320px; }
.bar { height: 12px; display: inline-block; vertical-align: middle; }
.stack { display: flex; height: 14px; width: 320px; background: #f6f6f6; position: relative; }
.stack span { display: block; height: 100%; }
.limit { position: absolute; top: -3px; bottom: -3px; width: 2px; background: #b00; }
.legend span { display: inline-block; margin-right: 14px; font-size: 0.88em; }
.sw { display: inline-block; width: 11px; height: 11px; margin-right: 4px;
      vertical-align: -1px; border: 1px solid #999; }
.grid { display: flex; flex-wrap: wrap; gap: 6px; margin: 8px 0; }
.dom { border: 2px solid #555; border-radius: 4px; padding: 3px; display: grid;
       gap: 3px; }
.gpu { font-size: 0.72em; padding: 2px 3px; min-height: 2.6em; border-radius: 2px; line-height: 1.25;
       font-family: ui-monospace, monospace; }
.gpu b { font-size: 1.1em; }
.warn { background: #fff4e5; border-left: 4px solid #f28e2b; padding: 6px 12px; }
code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
"""


def _e(text: object) -> str:
    return escape(str(text))


def _table(header: list[str], rows: list[list[str]], left: set[int], classes: list[str]) -> str:
    """An HTML table; cells are already-escaped HTML."""
    th = "".join(f'<th class="l">{h}</th>' if i in left else f"<th>{h}</th>" for i, h in
                 enumerate(header))  # fmt: skip
    body = []
    for row, cls in zip(rows, classes, strict=True):
        tds = "".join(f'<td class="l">{c}</td>' if i in left else f"<td>{c}</td>" for i, c in
                      enumerate(row))  # fmt: skip
        body.append(f'<tr class="{cls}">{tds}</tr>' if cls else f"<tr>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _breakdown(e: Estimate) -> str:
    rows, classes = [], []
    for term, seconds in e.breakdown_s.items():
        if seconds <= 0:
            continue
        share = seconds / e.step_time_s
        colour = TERM_COLOURS.get(term, "#888")
        bar = (
            f'<span class="bar" style="width:{max(0.5, share * 100):.1f}%;'
            f'background:{colour}"></span>'
        )
        rows.append([_e(TERM_LABELS.get(term, term)), f"{seconds:,.3f}", f"{share:.1%}", bar])
        classes.append("")
    rows.append(["<b>step</b>", f"<b>{e.step_time_s:,.3f}</b>", "100.0%", ""])
    classes.append("")
    table = _table(["term", "seconds", "share", ""], rows, {0, 3}, classes)
    return table.replace('<td class="l"><span', '<td class="l barcell"><span')


def _memory(e: Estimate, usable_gib: float, hbm_gib: float) -> str:
    scale = max(hbm_gib, e.peak_memory_gib)
    rows, classes = [], []
    for s in memory_rows(e.stage_memory):
        if s is None:
            rows.append(["…"] * (len(MEMORY_HEADER) + 1))
            classes.append("")
            continue
        parts = (
            s.weights_gib,
            s.gradients_gib,
            s.optimizer_gib,
            s.activations_gib,
            s.buffers_gib + s.reserve_gib,
        )
        spans = "".join(
            f'<span style="width:{100 * v / scale:.2f}%;background:{c}" title="{n}"></span>'
            for v, c, n in zip(parts, MEMORY_COLOURS, MEMORY_PARTS, strict=True)
        )
        limit = f'<i class="limit" style="left:{100 * usable_gib / scale:.2f}%"></i>'
        rows.append(
            [*stage_memory_cells(s, usable_gib), f'<div class="stack">{spans}{limit}</div>']
        )
        classes.append("over" if s.total_gib > usable_gib else "")
    legend = "".join(
        f'<span><i class="sw" style="background:{c}"></i>{n}</span>'
        for c, n in zip(MEMORY_COLOURS, MEMORY_PARTS, strict=True)
    )
    legend += '<span><i class="sw" style="background:#b00"></i>usable limit</span>'
    header = [*MEMORY_HEADER, "per GPU (bar scale: HBM)"]
    lines = (*gathered_notes(e.stage_memory), *memory_phase_notes(e.stage_memory))
    notes = "".join(f"<p>{_e(line)}</p>" for line in lines)
    table = _table(header, rows, {len(header) - 1}, classes)
    return table + f'<div class="legend">{legend}</div>' + notes


def _placement(e: Estimate, cluster: Cluster) -> str:
    tiers = [t.name for t in cluster.tiers]
    rows = [
        [_e(axis), *(str(factors.get(t, 1)) for t in tiers)]
        for axis, factors in e.placement.items()
        if axis != "ep" or e.layout.ep > 1
    ]
    return _table(["axis", *map(_e, tiers)], rows, {0}, [""] * len(rows))


def _groups(e: Estimate, cluster: Cluster) -> str:
    tiers = [t.name for t in cluster.tiers]
    colour = {t: TIER_COLOURS[i % len(TIER_COLOURS)] for i, t in enumerate(tiers)}
    spans = topology.spans(cluster, e.layout)
    crossed = ranks.group_tiers(cluster, e.layout)
    strides = topology.axis_strides(e.layout)
    rows = []
    for axis, degree in topology.axis_degrees(e.layout).items():
        if axis == "ep" and degree == 1:
            continue
        tier = crossed[axis]
        cell = (
            "-"
            if tier is None
            else (f'<i class="sw" style="background:{colour[tier]}"></i>{_e(tier)}')
        )
        rows.append([axis, str(degree), str(strides[axis]), *map(str, spans[axis]), cell])
    header = ["axis", "size", "rank stride", *map(_e, tiers), "slowest tier crossed"]
    return _table(header, rows, {0, len(header) - 1}, [""] * len(rows))


def _grid(e: Estimate, cluster: Cluster) -> str:
    """GPU cells grouped in boxes per NVLink domain (or node), filled by the domain of the next
    tier out, each with its rank and (tp, cp, dp, pp) coordinates."""
    lo = e.layout
    shown = min(cluster.num_gpus, MAX_GRID_GPUS)
    nodes = max(1, -(-shown // cluster.gpus_per_node))
    rows = ranks.rank_map(cluster, lo, nodes)[:shown]
    inner = cluster.tiers[0]
    box_size = min(inner.domain_size or cluster.gpus_per_node, cluster.gpus_per_node * 64)
    outer = cluster.tiers[1] if len(cluster.tiers) > 1 else None
    outer_size = (outer.domain_size if outer is not None else None) or cluster.num_gpus
    degrees = topology.axis_degrees(lo)
    keys = [k for k in ranks.MAP_KEYS if degrees.get(k, 1) > 1]  # coordinates that vary
    boxes: list[str] = []
    cells: list[str] = []
    for row in rows:
        r = row["rank"]
        colour = DOMAIN_COLOURS[(r // outer_size) % len(DOMAIN_COLOURS)]
        coords = " ".join(f"{k}{row[k]}" for k in keys)
        cells.append(
            f'<div class="gpu" style="background:{colour}" title="node {row["node"]} gpu '
            f'{row["gpu"]}"><b>r{r}</b><br>{_e(coords)}</div>'
        )
        if len(cells) == box_size or r == rows[-1]["rank"]:
            style = f"grid-template-columns: repeat({min(8, box_size)}, 64px)"
            boxes.append(f'<div class="dom" style="{style}">{"".join(cells)}</div>')
            cells = []
    what = outer.name if outer is not None else "cluster"
    legend = (
        f"Boxes: one {_e(inner.name)} domain ({box_size} GPUs). Fill: the {_e(what)} domain "
        f"({outer_size} GPUs) each GPU sits in; a new colour is a new domain. Each cell: rank and "
        f"its coordinate on every axis of degree > 1. First {shown} of {cluster.num_gpus} GPUs."
    )
    return f'<p class="sub">{legend}</p><div class="grid">{"".join(boxes)}</div>'


def _ideal_map(best: Estimate, cluster: Cluster) -> list[str]:
    return [
        "<h2>Rank map</h2>",
        (
            f'<p class="sub">Layout {_e(layout_line(best))}; order '
            f"{_e('-'.join(a.value for a in best.layout.order))} (innermost first).</p>"
        ),
        _grid(best, cluster),
        f"<p>All ranks: <code>{_e(ranks.compact_rule(cluster, best.layout))}</code></p>",
        "<h2>Groups: GPUs of one group inside one domain of each tier</h2>",
        _groups(best, cluster),
    ]


def placed_html(view: PlacedView) -> list[str]:
    """The placed rank map, the groups on the placed map and the Allocation section."""

    def table(header: list[str], rows: list[list[str]], left: set[int]) -> str:
        cells = [[_e(c) for c in row] for row in rows]
        return _table([_e(h) for h in header], cells, left, [""] * len(rows))

    n = len(view.group_header)
    dropped = "".join(f"<li>dropped {_e(d)}</li>" for d in view.dropped)
    return [
        "<h2>Rank map (placed)</h2>",
        f'<p class="sub">{_e(view.rank_title)}.</p>',
        table(view.rank_header, view.rank_rows, {1}),
        f"<p><code>{_e(view.rank_rule)}</code></p>",
        "<h2>Groups on the placed map: GPUs of one group inside one domain of each tier</h2>",
        table(view.group_header, view.group_rows, {0, n - 3, n - 2, n - 1}),
        "<h2>Allocation</h2>",
        f"<p>{_e(view.title)}</p>" + (f"<ul>{dropped}</ul>" if dropped else ""),
        table(view.step_header, view.step_rows, {0}),
        f"<p>{_e(view.solver)}</p>",
        f"<p>{_e(view.hosts_line)}</p>",
        f"<p>{_e(view.saved)}</p>",
    ]


def _ranking(result: PlanResult) -> str:
    best = result.best
    rows = [[*map(_e, rank_cells(1, best, best)), "-"]]
    for r in findings.runner_ups(result):
        rows.append([*map(_e, rank_cells(r.rank, r.estimate, best)), _e(r.reason)])
    header = ["#", "layout", "tok/s/GPU", "MFU", "step s", "peak GiB", "vs best", "loses on"]
    found = findings.ranking_notes(result)
    notes = f"<p>{'<br>'.join(map(_e, found))}</p>" if found else ""
    return (
        _table(header, rows, {1, 7}, ["best"] + [""] * (len(rows) - 1))
        + notes
        + f'<p class="sub">{_e(LAYOUT_LEGEND)}</p>'
    )


def _goodput(result: PlanResult) -> list[str]:
    """The best plan's goodput breakdown and a line per ranked plan (--goodput)."""
    if not result.goodput:
        return []
    items = "".join(f"<li>{_e(goodput_line(g))}</li>" for g in result.goodput)
    return [goodput_html(result.goodput[0]), f"<ol>{items}</ol>"]


def render_html(result: PlanResult, placed: PlacedView | None = None) -> str:
    """The report page; with `placed` the rank map and groups are the placed map's and the
    Allocation section follows them (the terminal report's placed view)."""
    best, cluster = result.best, result.cluster
    hbm = cluster.gpu.hbm_gib
    summary = _e(summary_text(result)).replace("\n", "<br>")
    title = _e(f"planner: {result.model.name} on {cluster.num_gpus:,} x {cluster.gpu.name}")
    warns = findings.warnings(result)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(result.model.name)} on {cluster.num_gpus:,} x {_e(cluster.gpu.name)}</h1>",
        (
            f'<p class="sub">{_e(header_text(cluster, result.workload, result.model))}<br>'
            f"{_e(defaults_text(hbm, result.usable_memory_gib))}</p>"
        ),
        f'<div class="best"><div class="big">{_e(compact_layout(best))}</div>{summary}</div>',
    ]
    if warns:
        parts.append(
            '<h2>Warnings</h2><div class="warn">'
            + "<br>".join(f"! {_e(w)}" for w in warns)
            + "</div>"
        )
    parts += [
        "<h2>Step time breakdown</h2>",
        '<p class="sub">Communication terms: exposed time only.</p>',
        _breakdown(best),
        f"<h2>{_e(memory_title(result.usable_memory_gib, hbm))}</h2>",
        _memory(best, result.usable_memory_gib, hbm),
        *(_ideal_map(best, cluster) if placed is None else placed_html(placed)),
        "<h2>Placement: factor of each axis per tier</h2>",
        _placement(best, cluster),
        "<h2>Ranked plans</h2>",
        _ranking(result),
        *_goodput(result),
        f"<h2>{_e(search_title(placed))}</h2>",
        f"<p>{_e(solver_line(result))}</p>",
    ]
    if result.rejections:
        items = "".join(f"<li>{_e(line.strip())}</li>" for line in rejection_lines(result))
        parts.append(f"<p>Rejected candidates:</p><ul>{items}</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
