"""PlanResult / Estimate -> rich renderables and JSON-ready dicts. Nothing here prints."""

from __future__ import annotations

import html
import io
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cost_models import topology
from cost_models.pipeline import global_batch_seqs
from cost_models.specs import Cluster, Estimate, Layout, StageMemory, Workload

from ..place import ranks
from ..types import PlanResult
from . import findings

RANK_MAP_NODES = 2  # nodes shown in full; a compact rule covers the rest

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
    "compute": "compute (fwd+bwd)",
    "recompute": "recompute",
    "tp_comm": "TP comm (exposed)",
    "cp_comm": "CP comm (exposed)",
    "ep_comm": "EP all-to-all (exposed)",
    "pp_comm": "PP p2p (exposed)",
    "dp_comm": "DP grad/param (exposed)",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
}


# ------------------------------------------------------------------------------------------ JSON


def plan_dict(e: Estimate) -> dict[str, Any]:
    """One PLAN object of CONTRACT.md: `layout` (with placement) and `estimate`."""
    layout = {k: getattr(e.layout, k) for k in LAYOUT_KEYS}
    layout["num_microbatches"] = e.num_microbatches
    layout["global_batch_seqs"] = _batch(e)
    layout["order"] = [a.value for a in e.layout.order]
    layout["placement"] = e.placement
    # The plan's own stage split (--stage-split search); None: the cost model's even split.
    layout["layers_per_stage"] = None if e.layers_per_stage is None else list(e.layers_per_stage)
    return {"layout": layout, "estimate": estimate_dict(e)}


def estimate_dict(e: Estimate) -> dict[str, Any]:
    """The `estimate ... --json` object of CONTRACT.md (plus breakdowns)."""
    return {
        "step_time_s": e.step_time_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "peak_memory_gib": e.peak_memory_gib,
        "hbm_gib": e.usable_memory_gib,
        "fits_in_memory": e.fits_in_memory,
        "num_microbatches": e.num_microbatches,
        "breakdown_s": e.breakdown_s,
        "comm_total_s": e.comm_total_s,
        "stage_memory_gib": [{**s.model_dump(), "total_gib": s.total_gib} for s in e.stage_memory],
    }


def result_dict(result: PlanResult) -> dict[str, Any]:
    """The `plan ... --json` object of CONTRACT.md."""
    ranked = [plan_dict(e) for e in result.ranked]
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
            "cluster": result.cluster.name,
            "num_gpus": result.cluster.num_gpus,
            "workload": result.workload.model_dump(),
        },
    }


# ------------------------------------------------------------------------------------------ rich


def layout_line(e: Estimate) -> str:
    lo = e.layout
    parts = [f"TP{lo.tp}", f"PP{lo.pp}", f"DP{lo.dp}", f"CP{lo.cp}"]
    if lo.ep > 1:
        parts.append(f"EP{lo.ep}")
    if lo.vp > 1:
        parts.append(f"VP{lo.vp}")
    extras = [
        f"micro-batch {lo.micro_batch} x {e.num_microbatches}",
        f"recompute {lo.recompute}",
        f"ZeRO-{lo.zero_stage}",
    ]
    if lo.dp_shard is not None:
        extras.append(f"HSDP {lo.replicate_dp}x{lo.dp_shard}")
    if lo.sequence_parallel:
        extras.append("SP")
    if lo.order != Layout.model_fields["order"].default:
        extras.append("order " + "-".join(a.value for a in lo.order))
    return " ".join(parts) + "  |  " + ", ".join(extras)


def short_layout(e: Estimate) -> str:
    """The layout in a few words, for tables of many plans."""
    lo = e.layout
    parts = [f"TP{lo.tp} PP{lo.pp} DP{lo.dp} CP{lo.cp}"]
    parts += [f"EP{lo.ep}"] if lo.ep > 1 else []
    parts += [f"VP{lo.vp}"] if lo.vp > 1 else []
    parts.append(f"mb{lo.micro_batch}x{e.num_microbatches} rc-{lo.recompute} Z{lo.zero_stage}")
    parts += ["SP"] if lo.sequence_parallel else []
    if lo.order != Layout.model_fields["order"].default:  # plans can differ only in placement
        parts.append("order " + "-".join(a.value for a in lo.order))
    return " ".join(parts)


def render_breakdown(e: Estimate, width: int = 30) -> Table:
    table = Table(title="Step time breakdown", title_justify="left", expand=False)
    table.add_column("term")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    for term, seconds in e.breakdown_s.items():
        if seconds <= 0:
            continue
        share = seconds / e.step_time_s
        bar = "#" * max(1, round(share * width))
        table.add_row(TERM_LABELS.get(term, term), f"{seconds:,.3f}", f"{share:.1%}", bar)
    table.add_row("step", f"{e.step_time_s:,.3f}", "100.0%", "")
    return table


def render_memory(e: Estimate, usable_gib: float | None = None) -> Table:
    limit = usable_gib if usable_gib is not None else e.usable_memory_gib
    table = Table(
        title=f"Memory per GPU by pipeline stage (GiB; usable {limit:.1f})", title_justify="left"
    )
    for col in (
        "stage",
        "weights",
        "grads",
        "optimizer",
        "activations",
        "buffers+reserve",
        "total",
        "of usable",
    ):
        table.add_column(col, justify="right")
    stages = e.stage_memory
    shown = stages if len(stages) <= 6 else (*stages[:3], *stages[-3:])
    for s in shown:
        total = s.total_gib
        style = "red" if total > limit else None
        table.add_row(*stage_memory_cells(s, limit), style=style)
    return table


def render_ranking(result: PlanResult) -> Table:
    table = Table(title="Ranked plans (runner-ups: the term that loses them)", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("layout")
    table.add_column("tok/s/GPU", justify="right")
    table.add_column("MFU", justify="right")
    table.add_column("step s", justify="right")
    table.add_column("peak GiB", justify="right")
    table.add_column("vs best", justify="right")
    table.add_column("loses on")
    best = result.best
    table.add_row(*rank_cells(1, best, best), "-")
    for r in findings.runner_ups(result):
        table.add_row(*rank_cells(r.rank, r.estimate, best), r.reason)
    notes = findings.ranking_notes(result)
    if notes:
        table.caption, table.caption_justify = "\n".join(notes), "left"
    return table


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
        short_layout(e),
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
    title = Text(
        f"Rank map: order {'-'.join(a.value for a in lo.order)} (innermost first); "
        f"first {shown} of {cluster.num_nodes} nodes in full",
        style="italic",
    )
    table = Table()
    for col in ("rank", "node", "gpu", *keys):
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("rank", "node", "gpu", *keys)))
    rule = Text(f"All ranks: {ranks.compact_rule(cluster, lo)}")
    return Group(title, table, rule, render_group_tiers(e, cluster))


def render_group_tiers(e: Estimate, cluster: Cluster) -> Table:
    tiers = [t.name for t in cluster.tiers]
    crossed = ranks.group_tiers(cluster, e.layout)
    strides = topology.axis_strides(e.layout)
    table = Table(title="Groups: GPUs of one group per tier domain", title_justify="left")
    for col in ("axis", "degree", "rank stride", *tiers, "slowest tier crossed"):
        table.add_column(col, justify="right" if col != "axis" else "left")
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
    return table


def render_warnings(result: PlanResult) -> RenderableType | None:
    found = findings.warnings(result)
    if not found:
        return None
    return Panel("\n".join(f"! {w}" for w in found), title="Warnings", title_align="left")


def render_placement(e: Estimate, cluster: Cluster) -> Table:
    tiers = [t.name for t in cluster.tiers]
    table = Table(title="Placement: factor per tier", title_justify="left")
    table.add_column("axis")
    for t in tiers:
        table.add_column(t, justify="right")
    for axis, factors in e.placement.items():
        if axis == "ep" and e.layout.ep == 1:
            continue
        table.add_row(axis, *(str(factors.get(t, 1)) for t in tiers))
    return table


def render_header(cluster: Cluster, workload: Workload, model_name: str) -> Text:
    return Text(
        f"{model_name} on {cluster.num_gpus} x {cluster.gpu.name} ({cluster.name}), "
        f"seq {workload.seq_len}, global batch {workload.global_batch_seqs} seqs, "
        f"{workload.precision}",
        style="bold",
    )


def render_estimate(e: Estimate, cluster: Cluster, workload: Workload, model_name: str) -> Group:
    verdict = "fits" if e.fits_in_memory else "DOES NOT FIT"
    summary = Text(
        f"{layout_line(e)}\n{e.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU {e.mfu:.1%}, "
        f"step {e.step_time_s:,.3f} s, peak memory {e.peak_memory_gib:.1f} GiB of "
        f"{e.usable_memory_gib:.0f} GiB ({verdict})"
    )
    return Group(
        render_header(cluster, workload, model_name),
        summary,
        render_breakdown(e),
        render_memory(e),
        render_placement(e, cluster),
        render_rank_map(e, cluster),
    )


def solver_line(result: PlanResult) -> str:
    """Status, objective, bound, gap, time and counts of the search in one line."""
    s = result.solver

    unit = " s/sequence" if s.objective_unit == "s_per_sequence" else " s"

    def secs(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g}{unit}" if unit != " s" else f"{v:.4f} s"

    gap = "n/a" if s.gap is None else f"{s.gap:.2%}"
    seed = getattr(s, "seed", None)
    seed_text = "" if seed is None else f", seed {seed}"
    return (
        f"engine {s.engine}, status {s.status}, objective {secs(s.objective)}, bound "
        f"{secs(s.best_bound)}, gap {gap}{seed_text}, {s.wall_time_s:.2f} s wall; "
        f"{s.num_candidates} candidates, {s.num_scored} scored, {s.num_feasible} fit in memory"
    )


def render_plan(result: PlanResult) -> RenderableType:
    best = result.best
    stats = Panel(solver_line(result), title="Search", title_align="left")
    target = f" for {result.framework_version}" if result.framework else ""
    summary = Text(
        f"Best{target}: {layout_line(best)}\n{best.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU "
        f"{best.mfu:.1%}, step {best.step_time_s:,.3f} s, peak memory "
        f"{best.peak_memory_gib:.1f} GiB"
    )
    batch_range = getattr(result, "global_batch_range", None)
    if batch_range is not None:  # each plan has its own batch; ranked by tokens/s
        batches = ", ".join(str(result.global_batch(i)) for i in range(len(result.ranked)))
        summary.append(
            f"\nglobal batch range [{batch_range[0]}, {batch_range[1]}] seqs, ranked by tokens/s;"
            f" batch of each ranked plan: {batches}"
        )
    parts: list[RenderableType] = [
        render_header(result.cluster, result.workload, result.model.name),
        summary,
        render_breakdown(best),
        render_memory(best, result.usable_memory_gib),
        render_placement(best, result.cluster),
        render_rank_map(best, result.cluster),
        render_ranking(result),
    ]
    warn = render_warnings(result)
    if warn is not None:
        parts.append(warn)
    parts.append(stats)
    if result.rejections:
        lines = [
            f"{n:>7} x {reason}"
            for reason, n in sorted(result.rejections.items(), key=lambda kv: -kv[1])[:6]
        ]
        parts.append(Panel("\n".join(lines), title="Rejected candidates", title_align="left"))
    return Group(*parts)


def render_html(result: PlanResult, width: int = 120) -> str:
    """The report as one self-contained HTML page: inline CSS, no scripts, nothing fetched."""
    console = Console(record=True, width=width, file=io.StringIO(), color_system="truecolor")
    console.print(render_plan(result))
    page = console.export_html(inline_styles=True)
    title = html.escape(f"planner: {result.model.name} on {result.cluster.name}")
    return page.replace("<head>", f"<head>\n<title>{title}</title>", 1)
