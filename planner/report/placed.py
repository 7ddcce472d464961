"""The placed view of `plan` on an allocation, as plain cells every format prints (issue 27).

With an allocation the report shows one map, the placed one: the rank map names each rank's host
(node n is the n-th line of the placed hostfile), the groups table reads each kind's spans off
the real hosts (planner/place/pricing.py placed_spans, the spans the placed step time is priced
with) and the slowest tier its groups cross, and the Allocation section gives the hosts read and
dropped, the step times (ideal block, scheduler's order, best rank order, placed) and the
solver's result. The terminal, Markdown and HTML reports print these same strings, and `--json`
carries the same numbers and hosts in its `allocation` object (CONTRACT.md), so every format
shows the same placed view. Nothing here renders or prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cost_models.specs import Cluster

from ..place import ranks
from ..place.pricing import placed_spans

KIND_NAMES = {
    "tp": "TP",
    "cp": "CP",
    "dp": "DP",
    "pp": "PP",
    "ep": "EP",
    "etp": "expert-TP",
    "dp_cp": "DP x CP grad",
    "edp": "expert-DP",
    "dp_shard": "HSDP shard x CP",
    "dp_replicate": "HSDP replicas",
    "edp_shard": "HSDP expert shard",
    "edp_replicate": "HSDP expert replicas",
}
RANK_MAP_NODES = 2  # nodes of the rank map shown rank by rank
HOSTS_SHOWN = 32  # hosts of the placed hostfile listed in text reports (JSON lists every one)
DROPPED_SHOWN = 8


@dataclass(frozen=True)
class PlacedView:
    """Every cell of the placed view, formatted once (the formats print these strings)."""

    title: str
    dropped: list[str]
    hostfile: list[str]  # every used host in node-rank order (JSON: allocation.hostfile)
    hosts_line: str
    step_header: list[str]
    step_rows: list[list[str]]
    solver: str
    saved: str
    group_header: list[str]
    group_rows: list[list[str]]
    narrow_columns: list[int]  # group columns kept at 80 columns
    rank_title: str
    rank_header: list[str]
    rank_rows: list[list[str]]
    rank_rule: str
    tiers: list[str] = field(default_factory=list)


def search_title(view: PlacedView | None) -> str:
    """The search's panel: with an allocation its objective is the ideal block's (the layouts
    were shortlisted there), not the placed step time."""
    return "Search" if view is None else "Search (on an ideal block, before placement)"


def step_cells(placed: Any) -> list[list[str]]:
    """(map, step time s, vs ideal block) rows."""
    p = placed.best
    ideal = p.ideal.step_time_s
    rows = [
        ("ideal block (no allocation)", ideal),
        ("scheduler's order", p.scheduler.step_time_s),
        ("best rank order", p.best_order.step_time_s),
        (f"placed (from {p.source})", p.placed.step_time_s),
    ]
    return [[name, f"{s:.4f}", f"{s / ideal - 1:+.2%}"] for name, s in rows]


def solver_text(p: Any) -> str:
    s = p.solver
    if s["objective"] is None:
        return f"solver: {s['status']} ({p.note}); the better baseline is kept"
    text = (
        f"solver: CP-SAT {s['status']}, objective {s['objective']:.4f} s, bound "
        f"{s['best_bound']:.4f} s, gap {100 * s['gap']:.2f}%, {s['wall_time_s']:.2f} s wall"
    )
    split = getattr(p, "split_blocks", 0)
    if split:  # what the status proves: the model's objective, priced from below on the parts
        text += (
            f" (status and bound on the model's objective, an upper bound of the placed step: "
            f"{split} block(s) split over leaves are priced at their smallest parts; the "
            f"placed step is the map re-priced)"
        )
    return text


def saved_text(p: Any) -> str:
    moved = {k: p.scheduler.breakdown_s[k] - p.placed.breakdown_s[k] for k in p.placed.breakdown_s}
    real = [(k, v) for k, v in sorted(moved.items(), key=lambda kv: -abs(kv[1])) if abs(v) > 5e-5]
    terms = ", ".join(f"{k} {v * 1e3:+.1f} ms" for k, v in real)
    return "saved vs the scheduler's order: " + (terms or "nothing (same terms)")


def group_cells(cluster: Cluster, placed: Any) -> tuple[list[str], list[list[str]]]:
    """Per kind of group on the placed map: size, GPUs of one group inside one domain of each
    tier (the priced spans), the slowest tier crossed, how many groups cross it, and the same
    for the scheduler's order."""
    p, alloc = placed.best, placed.allocation
    moe = placed.result.model.moe is not None
    spans = placed_spans(alloc, p.placed.layout, p.host_of_rank, moe=moe)
    before = p.scheduler_crossings or {}
    tiers = [t.name for t in cluster.tiers]
    header = ["group", "size", *tiers, "slowest tier crossed", "crossing", "scheduler's order"]
    rows = []
    for kind, c in p.crossings.items():
        b = before.get(kind)
        was = "-" if b is None else f"{b['slowest_tier']} ({b['groups_crossing']})"
        rows.append(
            [
                KIND_NAMES.get(kind, kind),
                str(spans[kind][-1]),
                *(str(n) for n in spans[kind]),
                str(c["slowest_tier"]),
                f"{c['groups_crossing']} of {c['groups']}",
                was,
            ]
        )
    return header, rows


def rank_cells(cluster: Cluster, placed: Any, hostfile: list[str]) -> tuple[list, list]:
    """The first RANK_MAP_NODES nodes of the placed map, rank by rank, with their hosts."""
    lo = placed.best.placed.layout
    keys = [k for k in ranks.MAP_KEYS if k != "ep" or lo.ep > 1]
    header = ["rank", "host", "gpu", *keys]
    gpn = cluster.gpus_per_node
    rows = []
    for r in range(min(lo.world_size, RANK_MAP_NODES * gpn)):
        c = ranks.coordinates(lo, r)
        rows.append([str(r), hostfile[r // gpn], str(r % gpn), *(str(c[k]) for k in keys)])
    return header, rows


def placed_view(cluster: Cluster, placed: Any, hostfile: list[str]) -> PlacedView:
    """The placed view of the best plan (`placed`: planner.place.joint.PlacedPlan; `hostfile`:
    its hosts in node-rank order, planner.place.joint.node_hosts)."""
    p, alloc = placed.best, placed.allocation
    gpn = cluster.gpus_per_node
    lo = p.placed.layout
    dropped = [f"{h}: {why}" for h, why in list(alloc.excluded.items())[:DROPPED_SHOWN]]
    if len(alloc.excluded) > DROPPED_SHOWN:
        dropped.append(f"... and {len(alloc.excluded) - DROPPED_SHOWN} more")
    shown = " ".join(hostfile[:HOSTS_SHOWN])
    more = len(hostfile) - HOSTS_SHOWN
    group_header, group_rows = group_cells(cluster, placed)
    rank_header, rank_rows = rank_cells(cluster, placed, hostfile)
    order = "-".join(a.value for a in lo.order)
    nodes = min(RANK_MAP_NODES, len(hostfile))
    last = len(group_header) - 1
    return PlacedView(
        title=(
            f"Allocation: {len(alloc.hosts)} hosts kept x {gpn} GPUs = {len(alloc.hosts) * gpn}"
            f" GPUs under {alloc.source or alloc.topology}; {len(hostfile)} used"
        ),
        dropped=dropped,
        hostfile=list(hostfile),
        hosts_line=(
            "hosts in node-rank order (the placed hostfile): "
            + shown
            + (f" ... and {more} more (--json, --out-dir)" if more > 0 else "")
        ),
        step_header=["map", "step s", "vs ideal"],
        step_rows=step_cells(placed),
        solver=solver_text(p),
        saved=saved_text(p),
        group_header=group_header,
        group_rows=group_rows,
        narrow_columns=[0, 1, last - 2, last - 1, last],
        rank_title=(
            f"Rank map, placed: order {order} (innermost first); first {nodes} of "
            f"{len(hostfile)} nodes, node n on the n-th host of the placed hostfile"
        ),
        rank_header=rank_header,
        rank_rows=rank_rows,
        rank_rule=f"All ranks: {ranks.compact_rule(cluster, lo)}; host = hostfile[node]",
        tiers=[t.name for t in cluster.tiers],
    )
