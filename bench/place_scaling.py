"""Placement on fragmented allocations: scheduler's order vs best rank order vs CP-SAT.

    python bench/place_scaling.py [--sizes 1024 16384 131072] [--seed 0] [--model llama3.1-405b]

A three-tier fat-tree of H100 nodes (8 GPUs, NVLink inside): 32-node leaves (1:1 inside a
leaf), 16 leaves per pod behind 3:1 leaf uplinks, pods behind 7:1 uplinks to the core. Other jobs hold a seeded share of every leaf; of the free
nodes the job gets enough for N GPUs plus 2-5 % that are drained (--exclude). Hosts come in
Slurm's order (sorted names, so leaf-contiguous with gaps). For each size the best plan under
ideal placement (the branch and bound's top --place-top, default 1) is placed
(planner.api.plan_on_allocation via planner.plan_on_allocation_for, which adds the best layout with TP x CP blocks of one node
when the shortlist has none: CP-SAT places whole-node blocks) and
the bench prints the placed step time with the scheduler's order, the best rank order and
CP-SAT (every map priced with its uplink sharing, cost_models/uplink.py), the solver's status,
bound, gap and wall time (on 32 leaves or more: both phases, planner/place/joint.py), and the
whole placement's wall time. `--decompose` adds the pods-first warm start
(planner/place/decompose.py). `--solver-seeds 0 1 2` re-places the best layout with each
further CP-SAT seed and prints the spread of the placed step.
`--record FILE` also writes the figures as JSON (step times, gain, solver status / bound / gap,
seed spread, wall and CPU seconds, the revision and the load average), and `render(record)`
turns such a record into the Markdown table the docs quote (bench/docs_figures.py).
Timings are wall-clock on whatever machine runs it (noisy on a shared 2-core box).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from revision import revision as _revision  # bench/revision.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models.specs import Cluster, LinkTier
from models_zoo import load_gpu
from planner.convenience import plan_on_allocation_for
from planner.place.allocation import Allocation, synthetic
from planner.place.joint import place_layout

NODES_PER_LEAF, LEAVES_PER_POD, GPN = 32, 16, 8
LIMITS = {1024: 10.0, 16384: 2.5, 131072: 10.0}  # CP-SAT per layout; deterministic time is half
TARGETS = {16384: 10.0, 131072: 60.0}


def fat_tree(num_gpus: int) -> Cluster:
    """Three-tier fat-tree, 400 Gb/s per GPU; oversubscription 1:1 / 3:1 / 7:1 bottom-up."""
    return Cluster(
        name="fat-tree-3tier",
        gpu=load_gpu("h100-sxm-80gb"),
        gpus_per_node=GPN,
        num_gpus=num_gpus,
        tiers=(
            LinkTier(name="nvlink", domain_size=8, bandwidth_gb_per_s=450, latency_us=3.0,
                     kind="nvlink"),
            LinkTier(name="leaf", domain_size=NODES_PER_LEAF * GPN, bandwidth_gb_per_s=50,
                     latency_us=5.0, efficiency=0.9),
            LinkTier(name="spine", domain_size=NODES_PER_LEAF * LEAVES_PER_POD * GPN,
                     bandwidth_gb_per_s=50, latency_us=7.0, efficiency=0.9, oversubscription=3.0),
            LinkTier(name="core", domain_size=None, bandwidth_gb_per_s=50, latency_us=10.0,
                     efficiency=0.9, oversubscription=7.0),
        ),
        source="bench/place_scaling.py synthetic three-tier fat-tree",
    )  # fmt: skip


def allocation(cluster: Cluster, num_gpus: int, seed: int) -> tuple[Allocation, int]:
    """A seeded fragmented allocation with exactly num_gpus healthy GPUs; returns (allocation,
    drained host count)."""
    rng = random.Random(seed)
    need = num_gpus // GPN
    drain_share = rng.uniform(0.02, 0.05)
    want = int(need / (1 - drain_share)) + 1
    hosts, leaf, pod = [], {}, {}
    index = 0
    while len(hosts) < want:
        p, _lf = divmod(index, LEAVES_PER_POD)
        taken = rng.uniform(0.0, 0.6)  # other jobs' share of this leaf
        for n in range(NODES_PER_LEAF):
            name = f"gpu{index * NODES_PER_LEAF + n:06d}"
            if rng.random() >= taken and len(hosts) < want:
                hosts.append(name)
                leaf[name], pod[name] = f"leaf{index:04d}", f"pod{p:03d}"
        index += 1
    drained = set(rng.sample(hosts, len(hosts) - need))
    healthy = [h for h in hosts if h not in drained]
    levels = [{h: leaf[h] for h in healthy}, {h: pod[h] for h in healthy}]
    alloc = synthetic(cluster, healthy, levels, name=f"seed {seed}")
    alloc.excluded = dict.fromkeys(sorted(drained), "drained")
    return alloc, len(drained)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 16384, 131072])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="llama3.1-405b")
    parser.add_argument("--global-batch", type=int, default=2048)
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="CP-SAT time limit per layout (default: what leaves the targets room: 10 s at 1,024 "
        "GPUs, 2.5 s at 16,384, 10 s at 131,072; deterministic mode stops at half that in "
        "CP-SAT deterministic seconds)",
    )
    parser.add_argument("--max-tp", type=int, default=None, help="largest TP tried")
    parser.add_argument("--place-top", type=int, default=1, help="layouts placed per size")
    parser.add_argument(
        "--decompose",
        action="store_true",
        help="add the pods-first warm start (planner/place/decompose.py) to every placement",
    )
    parser.add_argument(
        "--max-cp",
        type=int,
        default=None,
        help="largest CP tried (1: TP x CP blocks of one node, which CP-SAT places whole)",
    )
    parser.add_argument(
        "--solver-seeds",
        type=int,
        nargs="+",
        default=[0],
        help="CP-SAT seeds: the first places every layout, the others re-place the best layout "
        "(the spread of its placed step across seeds)",
    )
    parser.add_argument("--record", default=None, help="write the figures as JSON to this file")
    args = parser.parse_args()
    print(f"model {args.model}, global batch {args.global_batch}, seed {args.seed}")
    rows = []
    for n in args.sizes:
        cluster = fat_tree(n)
        alloc, drained = allocation(cluster, n, args.seed + n)
        leaves = len(set(alloc.names[1]))
        start, cpu = time.perf_counter(), time.process_time()
        placed = plan_on_allocation_for(
            args.model,
            cluster,
            topology=alloc,
            global_batch=args.global_batch,
            place_top=args.place_top,
            place_time_limit_s=args.time_limit or LIMITS.get(n, 30.0),
            place_decompose=args.decompose,
            seed=args.solver_seeds[0],
            **({"max_cp": args.max_cp} if args.max_cp else {}),
            **({"max_tp": args.max_tp} if args.max_tp else {}),
        )
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        p = placed.best
        s = p.solver
        lo = p.placed.layout
        print(
            f"\n{n:,} GPUs: {len(alloc.hosts)} healthy hosts on {leaves} leaves, {drained} drained;"
            f" best TP{lo.tp} PP{lo.pp} DP{lo.dp} CP{lo.cp} (ideal {p.ideal.step_time_s:.4f} s)"
        )
        print(
            f"  step: scheduler's order {p.scheduler.step_time_s:.4f} s | best rank order"
            f" {p.best_order.step_time_s:.4f} s | placed {p.placed.step_time_s:.4f} s"
            f" (from {p.source})"
        )
        gain = 1 - p.placed.step_time_s / min(p.scheduler.step_time_s, p.best_order.step_time_s)
        print(f"  gain over the better baseline: {100 * gain:.2f}%")
        if s["objective"] is not None:
            print(
                f"  solver {s['status']}: objective {s['objective']:.6f} s, bound"
                f" {s['best_bound']:.6f} s, gap {100 * s['gap']:.3f}%, {s['wall_time_s']:.2f} s"
            )
        else:
            print(f"  solver {s['status']}")
        for other in placed.placements[1:]:
            o = other.placed.layout
            print(
                f"  runner-up TP{o.tp} PP{o.pp} DP{o.dp} CP{o.cp}: scheduler's order"
                f" {other.scheduler.step_time_s:.4f} s | best rank order"
                f" {other.best_order.step_time_s:.4f} s | placed {other.placed.step_time_s:.4f} s"
                f" ({other.source}, solver {other.solver['status']},"
                f" {other.solver['wall_time_s']:.2f} s)"
            )
        target = f" (target {TARGETS[n]:.0f} s)" if n in TARGETS else ""
        print(
            f"  whole plan + placement of {args.place_top} layout(s): {wall:.1f} s wall"
            f" ({cpu:.1f} s CPU){target}"
        )
        steps = _seed_spread(args, placed, p, n) if len(args.solver_seeds) > 1 else None
        rows.append(_row(n, alloc, drained, leaves, p, gain, wall, cpu, steps))
    if args.record:
        record = {
            "command": "python bench/place_scaling.py " + " ".join(sys.argv[1:]),
            "revision": _revision(),
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],  # at the end
            "model": args.model,
            "global_batch": args.global_batch,
            "allocation_seed": args.seed,
            "rows": rows,
        }
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _row(n, alloc, drained, leaves, p, gain, wall, cpu, steps) -> dict:
    lo = p.placed.layout
    row = {
        "gpus": n,
        "hosts": len(alloc.hosts),
        "leaves": leaves,
        "drained": drained,
        "layout": {"tp": lo.tp, "pp": lo.pp, "dp": lo.dp, "cp": lo.cp},
        "unit_nodes": max(1, lo.tp * lo.cp // GPN),
        "ideal_s": p.ideal.step_time_s,
        "scheduler_s": p.scheduler.step_time_s,
        "best_order_s": p.best_order.step_time_s,
        "placed_s": p.placed.step_time_s,
        "source": p.source,
        "gain_pct": 100 * gain,
        "solver": p.solver,
        "time_limit_s": LIMITS.get(n, 30.0),
        "wall_s": wall,
        "cpu_s": cpu,
    }
    if steps:
        lo_s, hi_s = min(steps.values()), max(steps.values())
        row["seeds"] = {str(k): v for k, v in steps.items()}
        row["seed_spread_pct"] = 100 * (hi_s / lo_s - 1)
    return row


def render(record: dict) -> str:
    """The record as the docs' Markdown table (one row per size)."""
    head = [
        "| GPUs | layout placed | scheduler's order | best rank order | placement | solver |"
        " CP-SAT seeds | wall (CPU) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    out = []
    for r in record["rows"]:
        lo, s = r["layout"], r["solver"]
        blocks = f" ({r['unit_nodes']}-node blocks)" if r["unit_nodes"] > 1 else ""
        layout = f"TP{lo['tp']} PP{lo['pp']} DP{lo['dp']}"
        layout += f" CP{lo['cp']}" if lo["cp"] > 1 else ""
        gain = "tie" if r["gain_pct"] < 0.005 else f"-{r['gain_pct']:.2f} %"
        solver = s["status"]
        if s.get("gap") is not None:
            solver += f", gap {100 * s['gap']:.1f} %, {s['wall_time_s']:.1f} s"
        seeds = "-"
        if "seeds" in r:
            vals = list(r["seeds"].values())
            names = ", ".join(r["seeds"])
            seeds = f"{names}: {min(vals):.3f}-{max(vals):.3f} s ({r['seed_spread_pct']:.1f} %)"
            if max(vals) == min(vals):
                seeds = f"{names}: {vals[0]:.3f} s (0 %)"
        out.append(
            f"| {r['gpus']:,} | {layout}{blocks} | {r['scheduler_s']:.3f} s |"
            f" {r['best_order_s']:.3f} s | {r['placed_s']:.3f} s ({gain}) | {solver} | {seeds} |"
            f" {r['wall_s']:.1f} s ({r['cpu_s']:.1f} s) |"
        )
    return "\n".join(head + out)


def _seed_spread(args: argparse.Namespace, placed, p, n: int) -> dict[int, float]:
    """The best layout re-placed with each further CP-SAT seed (deterministic mode)."""
    steps = {args.solver_seeds[0]: p.placed.step_time_s}
    for seed in args.solver_seeds[1:]:
        again = place_layout(
            placed.ideal.model,
            placed.ideal.cluster,
            p.workload,
            p.ideal,
            placed.allocation,
            time_limit_s=args.time_limit or LIMITS.get(n, 30.0),
            seed=seed,
            decompose=args.decompose,
        )
        steps[seed] = again.placed.step_time_s
        s = again.solver
        print(
            f"  seed {seed}: placed {again.placed.step_time_s:.4f} s ({again.source}, solver"
            f" {s['status']}, gap {100 * (s['gap'] or 0):.3f}%, {s['wall_time_s']:.2f} s)"
        )
    lo, hi = min(steps.values()), max(steps.values())
    print(
        f"  seeds {', '.join(map(str, steps))}: placed {lo:.4f}-{hi:.4f} s,"
        f" spread {100 * (hi / lo - 1):.2f}%"
    )
    return steps


if __name__ == "__main__":
    main()
