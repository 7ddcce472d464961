"""The placement report as GitHub Markdown (same content as the terminal report). No printing."""

from __future__ import annotations

from cost_models import topology
from cost_models.specs import Estimate

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
    defaults_text,
    gathered_notes,
    layout_line,
    memory_options_text,
    memory_phase_notes,
    memory_rows,
    memory_title,
    params_text,
    rank_cells,
    solver_line,
    stage_memory_cells,
)

BAR_WIDTH = 30


def _table(header: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    align = ["---:" if i in right else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _batch_range_lines(result: PlanResult) -> list[str]:
    """With a global batch range each plan has its own batch (plans rank by tokens/s)."""
    batch_range = getattr(result, "global_batch_range", None)
    if batch_range is None:
        return []
    batches = ", ".join(str(e.global_batch_seqs) for e in result.ranked)
    return [
        "",
        (
            f"Global batch range [{batch_range[0]}, {batch_range[1]}] seqs, ranked by tokens/s; "
            f"batch of each ranked plan: {batches}."
        ),
    ]


def render_markdown(result: PlanResult, placed: PlacedView | None = None) -> str:
    """The plan report; with `placed` the rank map and groups are the placed map's and the
    Allocation section follows them (the terminal report's placed view)."""
    best, cluster, w = result.best, result.cluster, result.workload
    lines = [
        f"# Placement plan: {result.model.name} on {cluster.num_gpus:,} x {cluster.gpu.name}",
        "",
        (
            f"{params_text(result.model)}. Cluster `{cluster.name}`, seq {w.seq_len}, global "
            f"batch {w.global_batch_seqs} seqs, {w.precision}{memory_options_text(w)}."
        ),
        "",
        defaults_text(cluster.gpu.hbm_gib, result.usable_memory_gib) + ".",
        "",
        f"**Best:** {layout_line(best)}  ",
        (
            f"{best.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU {best.mfu:.1%}, step "
            f"{best.step_time_s:,.3f} s, peak memory {best.peak_memory_gib:.1f} GiB"
        ),
        *_batch_range_lines(result),
        "",
        "## Step time breakdown",
        "",
    ]
    rows = []
    for term, seconds in best.breakdown_s.items():
        if seconds <= 0:
            continue
        share = seconds / best.step_time_s
        bar = "#" * max(1, round(share * BAR_WIDTH))
        rows.append([TERM_LABELS.get(term, term), f"{seconds:,.3f}", f"{share:.1%}", f"`{bar}`"])
    rows.append(["step", f"{best.step_time_s:,.3f}", "100.0%", ""])
    lines += _table(["term", "seconds", "share", "bar"], rows, {1, 2})
    lines += _memory(best, result.usable_memory_gib, cluster.gpu.hbm_gib)
    tiers = [t.name for t in cluster.tiers]
    lines += ["## Placement: factor per tier", ""]
    rows = [
        [axis, *(str(factors.get(t, 1)) for t in tiers)]
        for axis, factors in best.placement.items()
        if axis != "ep" or best.layout.ep > 1
    ]
    lines += _table(["axis", *tiers], rows, set(range(1, len(tiers) + 1)))
    lines += _rank_map(result) if placed is None else placed_markdown(placed)
    lines += ["## Ranked plans", ""]
    rows = [[*rank_cells(1, best, best), "-"]]
    for r in findings.runner_ups(result):
        rows.append([*rank_cells(r.rank, r.estimate, best), r.reason])
    header = ["#", "layout", "tok/s/GPU", "MFU", "step s", "GiB", "vs best", "loses on"]
    lines += _table(header, rows, {0, 2, 3, 4, 5, 6})
    notes = findings.ranking_notes(result)
    if notes:
        lines += [*(f"- {x}" for x in notes), ""]
    lines += [LAYOUT_LEGEND + ".", ""]
    if result.goodput:
        lines += ["## Goodput", "", *(f"{i}. {goodput_line(g)}" for i, g in
                                      enumerate(result.goodput, start=1)), ""]
    warns = findings.warnings(result)
    if warns:
        lines += ["## Warnings", "", *(f"- {x}" for x in warns), ""]
    lines += [f"## {search_title(placed)}", "", solver_line(result), ""]
    if result.rejections:
        top = sorted(result.rejections.items(), key=lambda kv: -kv[1])[:6]
        lines += ["Rejected candidates:", "", *(f"- {n:,} x {reason}" for reason, n in top), ""]
    return "\n".join(lines)


def _memory(e: Estimate, usable_gib: float, hbm_gib: float) -> list[str]:
    lines = [f"## {memory_title(usable_gib, hbm_gib)}", ""]
    rows = [
        ["…"] * len(MEMORY_HEADER) if s is None else stage_memory_cells(s, usable_gib)
        for s in memory_rows(e.stage_memory)
    ]
    lines_of = (*gathered_notes(e.stage_memory), *memory_phase_notes(e.stage_memory))
    notes = [f"{line}." for line in lines_of]
    return lines + _table(list(MEMORY_HEADER), rows, set(range(8))) + [
        "buffers: communication buffers and the allocator reserve; use: total / usable.",
        *notes,
        "",
    ]


def _rank_map(result: PlanResult) -> list[str]:
    e, cluster = result.best, result.cluster
    lo = e.layout
    keys = [k for k in ranks.MAP_KEYS if k != "ep" or lo.ep > 1]
    order = "-".join(a.value for a in lo.order)
    shown = min(RANK_MAP_NODES, cluster.num_nodes)
    lines = [
        "## Rank map",
        "",
        f"Order {order} (innermost first); first {shown} of {cluster.num_nodes} nodes:",
        "",
    ]
    cols = ["rank", "node", "gpu", *keys]
    rows = [[str(row[c]) for c in cols] for row in ranks.rank_map(cluster, lo, RANK_MAP_NODES)]
    lines += _table(cols, rows, set(range(len(cols))))
    lines += [f"All ranks: `{ranks.compact_rule(cluster, lo)}`", ""]
    tiers = [t.name for t in cluster.tiers]
    spans = topology.spans(cluster, lo)
    crossed = ranks.group_tiers(cluster, lo)
    strides = topology.axis_strides(lo)
    rows = []
    for axis, degree in topology.axis_degrees(lo).items():
        if axis == "ep" and degree == 1:
            continue
        rows.append(
            [axis, str(degree), str(strides[axis]), *map(str, spans[axis]), crossed[axis] or "-"]
        )
    header = ["axis", "degree", "rank stride", *tiers, "slowest tier crossed"]
    return lines + _table(header, rows, set(range(1, len(header))))


def placed_markdown(view: PlacedView) -> list[str]:
    """The placed rank map, the groups on the placed map and the Allocation section."""
    lines = ["## Rank map (placed)", "", view.rank_title + ":", ""]
    lines += _table(view.rank_header, view.rank_rows, {0, 2, *range(3, len(view.rank_header))})
    lines += [view.rank_rule, ""]
    lines += ["## Groups on the placed map", ""]
    lines += ["GPUs of one group inside one domain of each tier:", ""]
    last = len(view.group_header) - 3
    lines += _table(view.group_header, view.group_rows, set(range(1, last)))
    lines += ["## Allocation", "", view.title, ""]
    if view.dropped:
        lines += [*(f"- dropped {d}" for d in view.dropped), ""]
    lines += _table(view.step_header, view.step_rows, {1, 2})
    return lines + [view.solver, "", view.hosts_line, "", view.saved, ""]
