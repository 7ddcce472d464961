"""The allocation section of `plan --topology ...`: step times on the real hosts, the solver's
result, which groups cross which switches, and the step-time terms the placement moved."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from cost_models.specs import Cluster

KIND_NAMES = {
    "tp": "TP",
    "cp": "CP",
    "dp": "DP",
    "pp": "PP",
    "ep": "EP",
    "dp_cp": "DP x CP gradient",
    "edp": "expert-DP",
}


def render_allocation(cluster: Cluster, placed: Any) -> str:
    """Plain text (rich markup escaped) for the terminal."""
    p, alloc = placed.best, placed.allocation
    lines = [
        "",
        (
            f"[bold]Allocation[/bold]: {len(alloc.hosts)} healthy hosts"
            f" ({len(alloc.hosts) * cluster.gpus_per_node} GPUs) under {escape(alloc.topology)}"
        ),
    ]
    for host, why in list(alloc.excluded.items())[:8]:
        lines.append(f"  excluded {escape(host)}: {escape(why)}")
    if len(alloc.excluded) > 8:
        lines.append(f"  ... and {len(alloc.excluded) - 8} more excluded")
    ideal = p.ideal.step_time_s
    lines.append(
        f"step time: ideal block {ideal:.4f} s | scheduler's order {p.scheduler.step_time_s:.4f}"
        f" s | best rank order {p.best_order.step_time_s:.4f} s | placed"
        f" {p.placed.step_time_s:.4f} s (from {p.source})"
    )
    s = p.solver
    if s["objective"] is None:
        lines.append(f"solver: {s['status']} ({escape(p.note)}); the better baseline is kept")
    else:
        lines.append(
            f"solver: CP-SAT {s['status']}, objective {s['objective']:.6f} s, bound"
            f" {s['best_bound']:.6f} s, gap {100 * s['gap']:.2f}%, {s['wall_time_s']:.2f} s"
        )
    lines.append(
        "groups (slowest tier crossed, groups crossing it): placed map | scheduler's order"
    )
    before = p.scheduler_crossings or {}
    for kind, c in p.crossings.items():
        line = (
            f"  {KIND_NAMES[kind]:<17} {c['groups']:>6} groups: {escape(str(c['slowest_tier']))}"
            f" ({c['groups_crossing']} crossing)"
        )
        b = before.get(kind)
        if b is not None:
            line += f" | {escape(str(b['slowest_tier']))} ({b['groups_crossing']} crossing)"
        lines.append(line)
    moved = {k: p.scheduler.breakdown_s[k] - p.placed.breakdown_s[k] for k in p.placed.breakdown_s}
    why = [f"{k} {v * 1e3:+.1f} ms" for k, v in sorted(moved.items(), key=lambda kv: -abs(kv[1]))]
    why = [w for w, v in zip(why, sorted(moved.values(), key=lambda v: -abs(v))) if abs(v) > 5e-5]
    lines.append(
        "saved vs the scheduler's order: " + (", ".join(why) if why else "nothing (same terms)")
    )
    return "\n".join(lines)
