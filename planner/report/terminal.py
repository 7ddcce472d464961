"""PlanResult / Estimate -> rich renderables. Nothing here prints.

Every table reads at 80 and at 120 columns (issue 20; snapshots in tests/unit/planner/snapshots):
short headers, compact layout cells (`text.compact_layout`), titles as their own lines (a rich
table title wraps to the table's width), and only free text (reasons, warnings) wraps. A table too
wide for the console falls back to a narrower form (`Responsive`) instead of cutting cells.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cost_models import topology
from cost_models.specs import MAX_GPUS, Cluster, Estimate, ModelSpec, Workload

from ..place import ranks
from ..types import PlanResult
from . import findings
from .goodput_view import goodput_line
from .placed import PlacedView, search_title
from .text import (
    LAYOUT_LEGEND,
    MEMORY_HEADER,
    RANK_MAP_NODES,
    TERM_LABELS,
    attention_text,
    cp_text,
    defaults_text,
    explain_text,
    fp4_text,
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
    streaming_text,
    summary_text,
)

BAR_WIDTH = 24


class Responsive:
    """The first renderable that fits the console width, else the last (narrowest) one."""

    def __init__(self, *choices: RenderableType) -> None:
        self.choices = choices

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        natural = options.update_width(10_000)  # unclamped: the width the choice wants
        for choice in self.choices[:-1]:
            if console.measure(choice, options=natural).maximum <= options.max_width:
                yield choice
                return
        yield self.choices[-1]


def compact_table(*columns: str, right_from: int = 1) -> Table:
    """A compact table: header rule only, no outer edge, numbers right-aligned."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for i, col in enumerate(columns):
        table.add_column(col, justify="right" if i >= right_from else "left", no_wrap=True)
    return table


def titled(title: str, body: RenderableType) -> Group:
    return Group(Text(title, style="bold"), body)


def render_breakdown(e: Estimate, width: int = BAR_WIDTH) -> Group:
    table = compact_table("term", "seconds", "share", "")
    for term, seconds in e.breakdown_s.items():
        if seconds <= 0:
            continue
        share = seconds / e.step_time_s
        bar = "#" * max(1, round(share * width))
        table.add_row(TERM_LABELS.get(term, term), f"{seconds:,.3f}", f"{share:.1%}", bar)
    table.columns[-1].justify = "left"
    table.add_row("step", f"{e.step_time_s:,.3f}", "100.0%", "", style="bold")
    return titled("Step time breakdown (communication: exposed time only)", table)


def render_memory(
    e: Estimate, usable_gib: float | None = None, hbm_gib: float | None = None
) -> Group:
    limit = usable_gib if usable_gib is not None else e.usable_memory_gib
    table = compact_table(*MEMORY_HEADER)
    for s in memory_rows(e.stage_memory):
        if s is None:
            table.add_row(*(["…"] * len(MEMORY_HEADER)))
            continue
        style = "red" if s.total_gib > limit else None
        table.add_row(*stage_memory_cells(s, limit), style=style)
    note = Text(
        "\n".join(
            [
                "buffers: communication buffers and the allocator reserve; use: total / usable",
                *gathered_notes(e.stage_memory),
                *memory_phase_notes(e.stage_memory),
            ]
        )
    )
    return titled(memory_title(limit, hbm_gib), Group(table, note))


def _ranking_table(result: PlanResult, with_reasons: bool, narrow: bool = False) -> Table:
    cols = ["#", "layout", "tok/s/GPU", "MFU", "step s", "GiB", "vs best"]
    drop = {3, 4} if narrow else set()  # MFU and step time follow tokens/s at one batch
    table = compact_table(*(c for i, c in enumerate(cols) if i not in drop), right_from=2)
    table.columns[0].justify = "right"
    if with_reasons:
        table.add_column("loses on", overflow="fold")
    best = result.best

    def cells(i: int, e: Estimate) -> list[str]:
        return [c for j, c in enumerate(rank_cells(i, e, best)) if j not in drop]

    table.add_row(*cells(1, best), *(["-"] * with_reasons))
    for r in findings.runner_ups(result):
        table.add_row(*cells(r.rank, r.estimate), *([r.reason] * with_reasons))
    return table


def render_ranking(result: PlanResult) -> Group:
    """Ranked plans; each runner-up names the term that loses it its place (in a column when
    the table fits the width, else one line per runner-up under the table)."""
    wide = _ranking_table(result, with_reasons=True)
    reasons = [
        f"#{r.rank} {r.reason}" if r.fastest else f"#{r.rank} loses on {r.reason}"
        for r in findings.runner_ups(result)
    ]
    medium = Group(_ranking_table(result, with_reasons=False), *map(Text, reasons))
    narrow = Group(_ranking_table(result, False, narrow=True), *map(Text, reasons))
    notes = [Text(n) for n in findings.ranking_notes(result)]  # free text: wraps
    return titled(
        "Ranked plans",
        Group(Responsive(wide, medium, narrow), *notes, Text(LAYOUT_LEGEND, style="dim")),
    )


def render_rank_map(e: Estimate, cluster: Cluster) -> Group:
    """The first nodes rank by rank, a rule for the rest, and the tier each group crosses."""
    lo = e.layout
    keys = [k for k in ranks.MAP_KEYS if k != "ep" or lo.ep > 1]
    rows = ranks.rank_map(cluster, lo, RANK_MAP_NODES)
    shown = min(RANK_MAP_NODES, cluster.num_nodes)
    title = (
        f"Rank map: order {'-'.join(a.value for a in lo.order)} (innermost first); "
        f"first {shown} of {cluster.num_nodes} nodes in full"
    )
    table = compact_table("rank", "node", "gpu", *keys, right_from=0)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("rank", "node", "gpu", *keys)))
    rule = Text(f"All ranks: {ranks.compact_rule(cluster, lo)}")
    return Group(titled(title, table), rule, render_group_tiers(e, cluster))


def render_group_tiers(e: Estimate, cluster: Cluster) -> Group:
    tiers = [t.name for t in cluster.tiers]
    crossed = ranks.group_tiers(cluster, e.layout)
    strides = topology.axis_strides(e.layout)
    table = compact_table("axis", "size", "stride", *tiers, "slowest tier crossed")
    spans = topology.spans(cluster, e.layout)
    for axis in ("tp", "cp", "dp", "pp", "ep"):
        degree = topology.axis_degrees(e.layout)[axis]
        if axis == "ep" and degree == 1:
            continue
        table.add_row(
            axis,
            str(degree),
            str(strides[axis]),
            *(str(n) for n in spans[axis]),
            crossed[axis] or "-",
        )
    return titled("Groups: GPUs of one group inside one domain of each tier", table)


def render_warnings(result: PlanResult) -> RenderableType | None:
    panel = _warning_panel(findings.warnings(result))
    return panel[0] if panel else None


def _warning_panel(found: list[str]) -> list[RenderableType]:
    if not found:
        return []
    return [Panel("\n".join(f"! {w}" for w in found), title="Warnings", title_align="left")]


def render_placement(e: Estimate, cluster: Cluster) -> Group:
    tiers = [t.name for t in cluster.tiers]
    table = compact_table("axis", *tiers)
    for axis, factors in e.placement.items():
        if axis == "ep" and e.layout.ep == 1:
            continue
        table.add_row(axis, *(str(factors.get(t, 1)) for t in tiers))
    return titled("Placement: factor of each axis per tier", table)


def render_header(cluster: Cluster, workload: Workload, model: ModelSpec) -> Text:
    return Text(header_text(cluster, workload, model), style="bold")


def render_estimate(
    e: Estimate,
    cluster: Cluster,
    workload: Workload,
    model: ModelSpec,
    violations: list[str] | None = None,
    explain: bool = False,
) -> Group:
    """`planner estimate`'s report; its warnings are plan's (findings.plan_warnings) plus what
    the framework cannot run (`violations`); `explain`: which table priced each term."""
    verdict = "fits" if e.fits_in_memory else "DOES NOT FIT"
    hbm = cluster.gpu.hbm_gib
    summary = Text(
        f"{layout_line(e)}\n{e.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU {e.mfu:.1%}, "
        f"step {e.step_time_s:,.3f} s, peak memory {e.peak_memory_gib:.1f} GiB of "
        f"{e.usable_memory_gib:.1f} GiB usable ({verdict})"
    )
    attention = attention_text(e)
    cp = cp_text(e, workload, model)
    return Group(
        render_header(cluster, workload, model),
        Text(defaults_text(hbm, e.usable_memory_gib), style="dim"),
        summary,
        *([Text(attention)] if attention else []),
        *([Text(cp)] if cp else []),
        render_breakdown(e),
        *(
            [Text(explain_text(e) + "\n" + streaming_text(cluster) + fp4_text(cluster, workload))]
            if explain
            else []
        ),
        render_links(e),
        render_memory(e, e.usable_memory_gib, hbm),
        render_placement(e, cluster),
        render_rank_map(e, cluster),
        *_warning_panel(findings.plan_warnings(cluster, e) + list(violations or [])),
    )


def render_links(e: Estimate) -> Table:
    """Per link tier: seconds per step it is busy with every flow crossing it, and its share of
    the step (cost_models.estimate: no tier is busy longer than the step)."""
    table = Table(title="Links: busy time per step", title_justify="left")
    for col in ("tier", "busy s", "utilisation"):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for name, busy in e.tier_busy_s.items():
        share = busy / e.step_time_s if e.step_time_s > 0 else 0.0
        table.add_row(name, f"{busy:,.3f}", f"{share:.0%}")
    return table


def render_plan(result: PlanResult, placed: PlacedView | None = None) -> RenderableType:
    """The plan report; with `placed` (a plan on an allocation) the rank map and groups are the
    placed map's and the Allocation section follows them."""
    best = result.best
    stats = Panel(solver_line(result), title=search_title(placed), title_align="left")
    if placed is None:
        maps: list[RenderableType] = [render_rank_map(best, result.cluster)]
    else:
        maps = [render_placed_map(placed), render_allocation_section(placed)]
    parts: list[RenderableType] = [
        render_header(result.cluster, result.workload, result.model),
        Text(defaults_text(result.cluster.gpu.hbm_gib, result.usable_memory_gib), style="dim"),
        Text(summary_text(result)),
        *([Text(cp)] if (cp := cp_text(best, result.workload, result.model)) else []),
        render_breakdown(best),
        render_memory(best, result.usable_memory_gib, result.cluster.gpu.hbm_gib),
        render_placement(best, result.cluster),
        *maps,
        render_ranking(result),
    ]
    if result.goodput:
        lines = [f"#{i} {goodput_line(g)}" for i, g in enumerate(result.goodput, start=1)]
        parts.append(Panel("\n".join(lines), title="Goodput (docs/goodput.md)", title_align="left"))
    warn = render_warnings(result)
    if warn is not None:
        parts.append(warn)
    parts.append(stats)
    if result.rejections:
        body = "\n".join(rejection_lines(result))
        parts.append(Panel(body, title="Rejected candidates", title_align="left"))
    return Group(*parts)



# ----------------------------------------------------------------------------------- allocation


def render_placed_map(view: PlacedView) -> Group:
    """The placed rank map (hosts named) and the groups on the placed map: every tier's span
    where the table fits the width, else the slowest tier crossed and the counts alone."""
    table = compact_table(*view.rank_header, right_from=0)
    table.columns[1].justify = "left"
    for row in view.rank_rows:
        table.add_row(*row)
    wide = compact_table(*view.group_header)
    narrow = compact_table(*(view.group_header[i] for i in view.narrow_columns))
    for row in view.group_rows:
        wide.add_row(*row)
        narrow.add_row(*(row[i] for i in view.narrow_columns))
    for t in (wide, narrow):
        for col in t.columns[-3:]:
            col.justify = "left"
    return Group(
        titled(view.rank_title, table),
        Text(view.rank_rule),
        titled(
            "Groups on the placed map: GPUs of one group inside one domain of each tier",
            Responsive(wide, narrow),
        ),
    )


def render_allocation_section(view: PlacedView) -> Group:
    """Hosts read and dropped, the step time of each map, the solver and the placed hostfile."""
    steps = compact_table(*view.step_header)
    for row in view.step_rows:
        steps.add_row(*row)
    lines = [Text(f"  dropped {d}") for d in view.dropped]
    return Group(
        Text(view.title, style="bold"),
        *lines,
        steps,
        Text(view.solver),
        Text(view.hosts_line),
        Text(view.saved),
    )


def presets_table(kind: str, rows: list[dict[str, Any]]) -> RenderableType:
    """`planner presets KIND`: one row per preset with its key specs (issue 28)."""
    if kind == "clusters":
        table = compact_table("cluster", "GPU", "GPUs", "up to", "NVLink", "scale-out", right_from=2)
        for r in rows:
            fabric = "\n".join(f"{t['tier']} {t['gb_per_s']:g}" for t in r["fabric"][1:])
            most = "any" if r["max_gpus"] >= MAX_GPUS else f"{r['max_gpus']:,}"
            table.add_row(r["name"], r["gpu"], f"{r['num_gpus']:,}", most,
                          str(r["nvlink_domain"]), fabric)  # fmt: skip
        table.columns[-1].justify = "left"  # one tier per line
        table.padding = (0, 1, 0, 0)  # one space between columns: 80 columns hold every cell
        title = "clusters (scale-out: tier and GB/s per GPU; up to: the most --gpus, any: up to "
        title += f"{MAX_GPUS:,})"
    elif kind == "models":
        table = compact_table("preset", "params", "active", "layers", "hidden", "experts")
        for r in rows:
            table.add_row(r["name"], f"{r['params_total'] / 1e9:,.1f}B",
                          f"{r['params_active'] / 1e9:,.1f}B", str(r["num_layers"]),
                          f"{r['hidden_size']:,}", str(r["num_experts"] or "-"))  # fmt: skip
        title = "models (active: the weights one token's forward multiplies)"
    else:
        table = compact_table("gpu", "bf16 TFLOPs", "fp8 TFLOPs", "HBM GiB", "NVLink GB/s")
        for r in rows:
            fp8 = "-" if r["peak_fp8_tflops"] is None else f"{r['peak_fp8_tflops']:,.0f}"
            table.add_row(r["name"], f"{r['peak_bf16_tflops']:,.0f}", fp8, f"{r['hbm_gib']:g}",
                          f"{r['nvlink_gb_per_s']:g}")  # fmt: skip
        title = "gpus"
    return titled(title, table)
