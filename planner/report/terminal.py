"""PlanResult / Estimate -> rich renderables and JSON-ready dicts. Nothing here prints.

Every table reads at 80 and at 120 columns (issue 20; snapshots in tests/planner/snapshots):
short headers, compact layout cells (`compact_layout`), titles as their own lines (a rich table
title wraps to the table's width), and only free text (reasons, warnings) wraps. A table too wide
for the console falls back to a narrower form (`Responsive`) instead of cutting cells.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cost_models import topology
from cost_models.params import total_params
from cost_models.pipeline import global_batch_seqs
from cost_models.specs import (
    MAX_GPUS,
    Cluster,
    Estimate,
    Layout,
    ModelSpec,
    StageMemory,
    Workload,
)

from ..place import ranks
from ..types import PlanResult
from . import findings

RANK_MAP_NODES = 2  # nodes shown in full; a compact rule covers the rest
MEMORY_ROWS_EACH_END = 3  # stages shown at each end of a deep pipeline (plus the peak stage)
BAR_WIDTH = 24

LAYOUT_KEYS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vp",
    "micro_batch",
    "recompute",
    "zero_stage",
    "dp_shard",
    "sequence_parallel",
)
TERM_LABELS = {
    "compute": "compute",
    "recompute": "recompute",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP all-to-all",
    "pp_comm": "PP p2p",
    "dp_comm": "DP grad/param",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
}
LAYOUT_KEY = (
    "layout: degrees (CP/EP/VP shown when > 1), mb micro-batch size, sel/full recompute (none "
    "when absent), Z ZeRO stage, o: rank order when not tp-cp-dp-pp (first letters, innermost "
    "first); sequence parallel whenever TP > 1 unless noSP"
)
"""The layout cell's key, for tables without a memory column (whatif)."""
LAYOUT_LEGEND = LAYOUT_KEY + "; GiB: peak memory per GPU"

# ------------------------------------------------------------------------------------------ JSON


def model_params(model: ModelSpec) -> dict[str, int]:
    """Total parameters and those one token touches (equal for a dense model)."""
    return {
        "params_total": total_params(model),
        "params_active": total_params(model, active_only=True),
    }


def params_text(model: ModelSpec) -> str:
    """'70.6B params' or '671.0B params, 37.5B active'."""
    p = model_params(model)
    text = f"{_count(p['params_total'])} params"
    if p["params_active"] != p["params_total"]:
        text += f", {_count(p['params_active'])} active"
    return text


def _count(n: int) -> str:
    return f"{n / 1e12:.2f}T" if n >= 1e12 else f"{n / 1e9:.1f}B" if n >= 1e8 else f"{n / 1e6:.0f}M"


def plan_dict(e: Estimate) -> dict[str, Any]:
    """One PLAN object of CONTRACT.md: `layout` (with placement) and `estimate`."""
    layout = {k: getattr(e.layout, k) for k in LAYOUT_KEYS}
    layout["num_microbatches"] = e.num_microbatches
    layout["global_batch_seqs"] = _batch(e)
    layout["order"] = [a.value for a in e.layout.order]
    layout["placement"] = e.placement
    # The plan's own stage split (--stage-split search); None: the cost model's even split.
    layout["layers_per_stage"] = None if e.layers_per_stage is None else list(e.layers_per_stage)
    layout["pp_schedule"] = e.layout.pp_schedule
    layout["ep_overlap"] = e.layout.ep_overlap
    return {"layout": layout, "estimate": estimate_dict(e)}


def estimate_dict(
    e: Estimate, model: ModelSpec | None = None, hbm_gib: float | None = None
) -> dict[str, Any]:
    """The `estimate ... --json` object of CONTRACT.md (plus breakdowns).

    `hbm_gib` is the GPU's HBM; `usable_memory_gib` what fit is judged against (HBM minus the
    memory headroom, the same for plan and estimate). With `model`, its parameter counts.
    """
    out: dict[str, Any] = {
        "step_time_s": e.step_time_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "peak_memory_gib": e.peak_memory_gib,
        "hbm_gib": e.usable_memory_gib if hbm_gib is None else hbm_gib,
        "usable_memory_gib": e.usable_memory_gib,
        "fits_in_memory": e.fits_in_memory,
        "memory_validated": e.memory_validated,
        "num_microbatches": e.num_microbatches,
        "layout": {k: getattr(e.layout, k) for k in LAYOUT_KEYS},
        "breakdown_s": e.breakdown_s,
        "comm_total_s": e.comm_total_s,
        "tier_busy_s": e.tier_busy_s,
        "tier_utilisation": {
            k: v / e.step_time_s if e.step_time_s > 0 else 0.0 for k, v in e.tier_busy_s.items()
        },
        "stage_memory_gib": [{**s.model_dump(), "total_gib": s.total_gib} for s in e.stage_memory],
    }
    if model is not None:
        out["model"] = {"name": model.name, **model_params(model)}
    return out


def result_dict(result: PlanResult) -> dict[str, Any]:
    """The `plan ... --json` object of CONTRACT.md."""
    ranked = [plan_dict(e) for e in result.ranked]
    hbm = result.cluster.gpu.hbm_gib
    for plan in ranked:
        plan["estimate"]["hbm_gib"] = hbm
    for plan, r in zip(ranked[1:], findings.runner_ups(result), strict=True):
        plan["loses_on"] = {"term": r.binding_term, "delta_s": r.binding_delta_s}
        if r.fastest:
            plan["loses_on"] = None
            plan["fastest"] = {"faster_share": -r.slower_share, "gains_on": r.binding_term}
    for plan, same in zip(ranked, result.equivalents, strict=False):
        plan["equivalent_layouts"] = [
            {"zero_stage": lo.zero_stage, "order": [a.value for a in lo.order]} for lo in same
        ]
    return {
        "best": ranked[0],
        "warnings": findings.warnings(result),
        "ranked": ranked,
        "solver": result.solver.model_dump(),
        "rejections": result.rejections,
        "framework": {"name": result.framework, "version": result.framework_version},
        "inputs": {
            "model": result.model.name,
            **model_params(result.model),
            "cluster": result.cluster.name,
            "num_gpus": result.cluster.num_gpus,
            "workload": result.workload.model_dump(),
            "hbm_gib": hbm,
            "usable_memory_gib": result.usable_memory_gib,
            "memory_headroom": 1 - result.usable_memory_gib / hbm,
        },
    }


# ------------------------------------------------------------------------------------------ rich


def _recompute_words(lo: Layout) -> str:
    """recompute mode, with Megatron modules / full-recompute method when set."""
    if lo.recompute == "selective" and lo.recompute_modules is not None:
        return "selective:" + "+".join(lo.recompute_modules)
    if lo.recompute == "full" and lo.recompute_method is not None:
        return f"full:{lo.recompute_method}{lo.recompute_num_layers or 1}"
    return lo.recompute


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


def _table(*columns: str, right_from: int = 1) -> Table:
    """A compact table: header rule only, no outer edge, numbers right-aligned."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for i, col in enumerate(columns):
        table.add_column(col, justify="right" if i >= right_from else "left", no_wrap=True)
    return table


def _titled(title: str, body: RenderableType) -> Group:
    return Group(Text(title, style="bold"), body)


def layout_line(e: Estimate) -> str:
    lo = e.layout
    parts = [f"TP{lo.tp}", f"PP{lo.pp}", f"DP{lo.dp}", f"CP{lo.cp}"]
    if lo.ep > 1:
        parts.append(f"EP{lo.ep}")
    if lo.etp > 1:
        parts.append(f"ETP{lo.etp}")
    if lo.vp > 1:
        parts.append(f"VP{lo.vp}")
    extras = [
        f"micro-batch {lo.micro_batch} x {e.num_microbatches}",
        f"recompute {_recompute_words(lo)}",
        f"ZeRO-{lo.zero_stage}",
        "SP" if lo.sequence_parallel else "no SP",
    ]
    if lo.dp_shard is not None:
        extras.append(f"HSDP {lo.replicate_dp}x{lo.dp_shard}")
    if lo.pp_schedule == "dualpipe":
        extras.append("DualPipe")
    if lo.ep_overlap:
        extras.append("EP all-to-all overlapped")
    if lo.order != Layout.model_fields["order"].default:
        extras.append("order " + "-".join(a.value for a in lo.order))
    return " ".join(parts) + "  |  " + ", ".join(extras)


def compact_layout(e: Estimate) -> str:
    """The layout in one short cell, e.g. 'TP8 PP4 DP2 VP5 mb1 sel Z1' (Layout.label;
    LAYOUT_LEGEND)."""
    return e.layout.label


short_layout = compact_layout  # the name tables of many plans used before issue 20


def render_breakdown(e: Estimate, width: int = BAR_WIDTH) -> Group:
    table = _table("term", "seconds", "share", "")
    for term, seconds in e.breakdown_s.items():
        if seconds <= 0:
            continue
        share = seconds / e.step_time_s
        bar = "#" * max(1, round(share * width))
        table.add_row(TERM_LABELS.get(term, term), f"{seconds:,.3f}", f"{share:.1%}", bar)
    table.columns[-1].justify = "left"
    table.add_row("step", f"{e.step_time_s:,.3f}", "100.0%", "", style="bold")
    return _titled("Step time breakdown (communication: exposed time only)", table)


def memory_rows(stages: tuple[StageMemory, ...]) -> list[StageMemory | None]:
    """The stages a memory table shows: all up to 2*MEMORY_ROWS_EACH_END + 1, else both ends
    and the peak stage, with None where stages are skipped (an ellipsis row)."""
    n = len(stages)
    if n <= 2 * MEMORY_ROWS_EACH_END + 1:
        return list(stages)
    peak = max(range(n), key=lambda i: stages[i].total_gib)
    keep = sorted(
        set(range(MEMORY_ROWS_EACH_END)) | set(range(n - MEMORY_ROWS_EACH_END, n)) | {peak}
    )
    out: list[StageMemory | None] = []
    for prev, i in zip([-1, *keep], keep, strict=False):
        if i != prev + 1:
            out.append(None)
        out.append(stages[i])
    return out


MEMORY_HEADER = ("stage", "weights", "grads", "optim", "activ", "buffers", "total", "use")


def memory_title(usable_gib: float, hbm_gib: float | None) -> str:
    what = "Memory per GPU by pipeline stage, GiB"
    if hbm_gib is None or abs(hbm_gib - usable_gib) < 0.05:
        return f"{what} (usable {usable_gib:.1f})"
    headroom = 1 - usable_gib / hbm_gib
    return f"{what} (usable {usable_gib:.1f} = {hbm_gib:.0f} HBM - {headroom:.0%} headroom)"


def render_memory(
    e: Estimate, usable_gib: float | None = None, hbm_gib: float | None = None
) -> Group:
    limit = usable_gib if usable_gib is not None else e.usable_memory_gib
    table = _table(*MEMORY_HEADER)
    for s in memory_rows(e.stage_memory):
        if s is None:
            table.add_row(*(["…"] * len(MEMORY_HEADER)))
            continue
        style = "red" if s.total_gib > limit else None
        table.add_row(*stage_memory_cells(s, limit), style=style)
    note = Text("buffers: communication buffers and the allocator reserve; use: total / usable")
    return _titled(memory_title(limit, hbm_gib), Group(table, note))


def _ranking_table(result: PlanResult, with_reasons: bool, narrow: bool = False) -> Table:
    cols = ["#", "layout", "tok/s/GPU", "MFU", "step s", "GiB", "vs best"]
    drop = {3, 4} if narrow else set()  # MFU and step time follow tokens/s at one batch
    table = _table(*(c for i, c in enumerate(cols) if i not in drop), right_from=2)
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
    return _titled(
        "Ranked plans",
        Group(Responsive(wide, medium, narrow), *notes, Text(LAYOUT_LEGEND, style="dim")),
    )


def stage_memory_cells(s: StageMemory, usable_gib: float) -> list[str]:
    """One pipeline stage's memory cells (terminal and Markdown tables)."""
    return [
        str(s.stage),
        f"{s.weights_gib:.1f}",
        f"{s.gradients_gib:.1f}",
        f"{s.optimizer_gib:.1f}",
        f"{s.activations_gib:.1f}",
        f"{s.buffers_gib + s.reserve_gib:.1f}",
        f"{s.total_gib:.1f}",
        f"{s.total_gib / usable_gib:.0%}",
    ]


def rank_cells(i: int, e: Estimate, best: Estimate) -> list[str]:
    """One ranked plan's cells (terminal and Markdown tables)."""
    return [
        str(i),
        compact_layout(e),
        f"{e.tokens_per_s_per_gpu:,.1f}",
        f"{e.mfu:.1%}",
        f"{e.step_time_s:,.3f}",
        f"{e.peak_memory_gib:.1f}",
        f"{_vs_best(e, best):+.1%}",
    ]


def _batch(e: Estimate) -> int:
    return global_batch_seqs(e.num_microbatches, e.layout)


def _vs_best(e: Estimate, best: Estimate) -> float:
    """Time per sequence against the best (the step time when both have the same batch)."""
    if _batch(e) == _batch(best):
        return e.step_time_s / best.step_time_s - 1
    return (e.step_time_s / _batch(e)) / (best.step_time_s / _batch(best)) - 1


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
    table = _table("rank", "node", "gpu", *keys, right_from=0)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("rank", "node", "gpu", *keys)))
    rule = Text(f"All ranks: {ranks.compact_rule(cluster, lo)}")
    return Group(_titled(title, table), rule, render_group_tiers(e, cluster))


def render_group_tiers(e: Estimate, cluster: Cluster) -> Group:
    tiers = [t.name for t in cluster.tiers]
    crossed = ranks.group_tiers(cluster, e.layout)
    strides = topology.axis_strides(e.layout)
    table = _table("axis", "size", "stride", *tiers, "slowest tier crossed")
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
    return _titled("Groups: GPUs of one group inside one domain of each tier", table)


def render_warnings(result: PlanResult) -> RenderableType | None:
    panel = _warning_panel(findings.warnings(result))
    return panel[0] if panel else None


def render_placement(e: Estimate, cluster: Cluster) -> Group:
    tiers = [t.name for t in cluster.tiers]
    table = _table("axis", *tiers)
    for axis, factors in e.placement.items():
        if axis == "ep" and e.layout.ep == 1:
            continue
        table.add_row(axis, *(str(factors.get(t, 1)) for t in tiers))
    return _titled("Placement: factor of each axis per tier", table)


def memory_options_text(workload: Workload) -> str:
    """The workload's non-default memory options (Workload.optimizer_moments, ...), as
    ", a, b" to append to a header; "" when none is set."""
    parts = []
    if workload.optimizer_moments != "fp32":
        parts.append(f"{workload.optimizer_moments} Adam moments")
    if workload.activation_func_fp8_input_store:
        parts.append("fp8 SwiGLU inputs")
    if workload.attention_output_store != "separate":
        parts.append(f"{workload.attention_output_store.upper()} attention output")
    return "".join(", " + p for p in parts)


def header_text(cluster: Cluster, workload: Workload, model: ModelSpec) -> str:
    return (
        f"{model.name} ({params_text(model)}) on {cluster.num_gpus:,} x {cluster.gpu.name} "
        f"({cluster.name}), seq {workload.seq_len:,}, global batch "
        f"{workload.global_batch_seqs:,} seqs, {workload.precision}"
        f"{memory_options_text(workload)}"
    )


def defaults_text(hbm_gib: float, usable_gib: float) -> str:
    """The defaults plan, estimate and whatif share, stated in every report."""
    headroom = 1 - usable_gib / hbm_gib
    return (
        f"Defaults: sequence parallel whenever TP > 1; fit judged against {usable_gib:.1f} GiB "
        f"usable = {hbm_gib:.0f} GiB HBM - {headroom:.0%} headroom"
    )


def render_header(cluster: Cluster, workload: Workload, model: ModelSpec) -> Text:
    return Text(header_text(cluster, workload, model), style="bold")


def render_estimate(
    e: Estimate,
    cluster: Cluster,
    workload: Workload,
    model: ModelSpec,
    violations: list[str] | None = None,
) -> Group:
    """`planner estimate`'s report; its warnings are plan's (findings.plan_warnings) plus what
    the framework cannot run (`violations`)."""
    verdict = "fits" if e.fits_in_memory else "DOES NOT FIT"
    hbm = cluster.gpu.hbm_gib
    summary = Text(
        f"{layout_line(e)}\n{e.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU {e.mfu:.1%}, "
        f"step {e.step_time_s:,.3f} s, peak memory {e.peak_memory_gib:.1f} GiB of "
        f"{e.usable_memory_gib:.1f} GiB usable ({verdict})"
    )
    return Group(
        render_header(cluster, workload, model),
        Text(defaults_text(hbm, e.usable_memory_gib), style="dim"),
        summary,
        render_breakdown(e),
        render_links(e),
        render_memory(e, e.usable_memory_gib, hbm),
        render_placement(e, cluster),
        render_rank_map(e, cluster),
        *_warning_panel(findings.plan_warnings(cluster, e) + list(violations or [])),
    )


def _warning_panel(found: list[str]) -> list[RenderableType]:
    if not found:
        return []
    return [Panel("\n".join(f"! {w}" for w in found), title="Warnings", title_align="left")]


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


def solver_line(result: PlanResult) -> str:
    """Status, objective, bound, gap, time and counts of the search in one line."""
    s = result.solver

    unit = " s/sequence" if s.objective_unit == "s_per_sequence" else " s"

    def secs(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g}{unit}" if unit != " s" else f"{v:.4f} s"

    gap = "n/a" if s.gap is None else f"{s.gap:.2%}"
    if s.status == "STOPPED" and s.gap is not None and s.gap == 0:
        gap = "0 for #1 only (the ranking below it is not proved)"
    seed = getattr(s, "seed", None)
    seed_text = "" if seed is None else f", seed {seed}"
    bound = "open bound" if s.status == "STOPPED" else "bound"
    return (
        f"engine {s.engine}, status {s.status}, objective {secs(s.objective)}, {bound} "
        f"{secs(s.best_bound)}, gap {gap}{seed_text}, {s.wall_time_s:.2f} s wall; "
        f"{s.num_candidates:,} candidates, {s.num_scored:,} scored, {s.num_feasible:,} fit in "
        "memory"
    )


def summary_text(result: PlanResult) -> str:
    best = result.best
    target = f" for {result.framework_version}" if result.framework else ""
    text = (
        f"Best{target}: {layout_line(best)}\n{best.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU "
        f"{best.mfu:.1%}, step {best.step_time_s:,.3f} s, peak memory "
        f"{best.peak_memory_gib:.1f} GiB of {result.usable_memory_gib:.1f} GiB usable"
    )
    batch_range = getattr(result, "global_batch_range", None)
    if batch_range is not None:  # each plan has its own batch; ranked by tokens/s
        batches = ", ".join(str(result.global_batch(i)) for i in range(len(result.ranked)))
        text += (
            f"\nglobal batch range [{batch_range[0]}, {batch_range[1]}] seqs, ranked by tokens/s;"
            f" batch of each ranked plan: {batches}"
        )
    return text


def rejection_lines(result: PlanResult) -> list[str]:
    top = sorted(result.rejections.items(), key=lambda kv: -kv[1])[:6]
    return [f"{n:>7} x {reason}" for reason, n in top]


def render_plan(result: PlanResult) -> RenderableType:
    best = result.best
    stats = Panel(solver_line(result), title="Search", title_align="left")
    parts: list[RenderableType] = [
        render_header(result.cluster, result.workload, result.model),
        Text(defaults_text(result.cluster.gpu.hbm_gib, result.usable_memory_gib), style="dim"),
        Text(summary_text(result)),
        render_breakdown(best),
        render_memory(best, result.usable_memory_gib, result.cluster.gpu.hbm_gib),
        render_placement(best, result.cluster),
        render_rank_map(best, result.cluster),
        render_ranking(result),
    ]
    warn = render_warnings(result)
    if warn is not None:
        parts.append(warn)
    parts.append(stats)
    if result.rejections:
        body = "\n".join(rejection_lines(result))
        parts.append(Panel(body, title="Rejected candidates", title_align="left"))
    return Group(*parts)


def render_html(result: PlanResult) -> str:
    """The report as one self-contained HTML page (report/html.py)."""
    from .html import render_html as _render

    return _render(result)


def presets_table(kind: str, rows: list[dict[str, Any]]) -> RenderableType:
    """`planner presets KIND`: one row per preset with its key specs (issue 28)."""
    if kind == "clusters":
        table = _table("cluster", "GPU", "GPUs", "up to", "NVLink", "scale-out", right_from=2)
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
        table = _table("preset", "params", "active", "layers", "hidden", "experts")
        for r in rows:
            table.add_row(r["name"], f"{r['params_total'] / 1e9:,.1f}B",
                          f"{r['params_active'] / 1e9:,.1f}B", str(r["num_layers"]),
                          f"{r['hidden_size']:,}", str(r["num_experts"] or "-"))  # fmt: skip
        title = "models (active: the weights one token's forward multiplies)"
    else:
        table = _table("gpu", "bf16 TFLOPs", "fp8 TFLOPs", "HBM GiB", "NVLink GB/s")
        for r in rows:
            fp8 = "-" if r["peak_fp8_tflops"] is None else f"{r['peak_fp8_tflops']:,.0f}"
            table.add_row(r["name"], f"{r['peak_bf16_tflops']:,.0f}", fp8, f"{r['hbm_gib']:g}",
                          f"{r['nvlink_gb_per_s']:g}")  # fmt: skip
        title = "gpus"
    return _titled(title, table)
