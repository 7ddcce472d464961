"""Design points per second: planner.design.backends.evaluate serially, in a local process pool
and on a local Ray, each point a real plan search (the per-point work of `planner design`).

    python bench/design_points.py [--workers 2] [--backends serial,local,ray] [--grid small]
                                  [--record bench/results/design_points.json]

A point is one network variant of a preset cluster (the scale-out bandwidth per GPU set by
planner.whatif.vary_cluster, as `planner whatif --vary nic-gbps` does) and one model; its
evaluation is the full plan search (plan_for, top_k=1) and returns the best plan's figures.
Every backend must return the same list (checked); the script prints points/s per backend.
Ray is timed twice: "cold" (evaluate starts a local Ray with `workers` CPUs, as
`planner design --backend ray` does without RAY_ADDRESS) and "warm" (the same points again on
that running Ray, its workers already started).
The load average is printed too: on a shared machine it moves the figures. `--record JSON`
writes the timings with the command, revision and load (docs/search.md's table is rendered from
bench/results/design_points.json by bench/docs_figures.py; timings cannot be regenerated).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from revision import revision as _revision  # bench/revision.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models_zoo
from planner.convenience import plan_for
from planner.design.backends import evaluate
from planner.whatif import vary_cluster

GRIDS = {
    # (model, GPUs) x scale-out Gb/s per GPU: one dense and one MoE model, 8 points.
    "small": ([("llama3-8b", 256), ("mixtral-8x7b", 256)], (100, 200, 400, 800)),
    # Heavier searches (a 70B and a 671B MoE at 1,024 GPUs), 8 points.
    "large": ([("llama3-70b", 1024), ("deepseek-v3", 1024)], (100, 200, 400, 800)),
}


def plan_point(point: tuple[str, int, float]) -> dict:
    """One design point: the best plan of `model` on `gpus` DGX H100s at `nic_gbps` per GPU."""
    model, gpus, nic_gbps = point
    cluster = vary_cluster(models_zoo.load_cluster("dgx-h100", gpus), "nic-gbps", nic_gbps)
    best = plan_for(model, cluster, num_gpus=gpus, top_k=1).best
    return {
        "layout": best.layout.model_dump(mode="json"),
        "step_time_s": best.step_time_s,
        "tokens_per_s_per_gpu": best.tokens_per_s_per_gpu,
    }


TIMINGS: list[dict] = []
"""Each timed run: backend label, points, wall seconds, 1-minute load average at its end."""


def timed(label: str, points: list, **kwargs) -> tuple[list, float]:
    start = time.perf_counter()
    out = evaluate(points, plan_point, progress=False, **kwargs)
    elapsed = time.perf_counter() - start
    TIMINGS.append(
        {"backend": label, "points": len(points), "wall_s": round(elapsed, 2),
         "load_average": os.getloadavg()[0]}
    )  # fmt: skip
    print(
        f"{label:<28} {len(points)} points in {elapsed:6.2f} s = {len(points) / elapsed:5.2f} "
        f"points/s   (load average {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    return out, elapsed


def run_ray(points: list, workers: int) -> list[list]:
    import ray

    # Cold: evaluate starts a local Ray (no RAY_ADDRESS) with `workers` CPUs, whose workers
    # then import planner; warm: the same call again on that running Ray.
    os.environ.pop("RAY_ADDRESS", None)
    try:
        cold, _ = timed(
            f"Ray, {workers} CPUs, cold (includes starting a local Ray)", points, backend="ray",
            workers=workers,
        )  # fmt: skip
        warm, _ = timed(f"Ray, {workers} CPUs, warm (Ray already up)", points, backend="ray")
    finally:
        ray.shutdown()
    return [cold, warm]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backends", default="local,ray,serial")  # serial last: a pool forked
    # from a process that already ran the points would inherit its warm caches
    parser.add_argument("--grid", choices=sorted(GRIDS), default="small")
    parser.add_argument("--record", metavar="JSON", help="also write the timings and conditions")
    parser.add_argument("--note", default="", help="the run's conditions, kept in the record")
    args = parser.parse_args()
    models, speeds = GRIDS[args.grid]
    points = [(m, g, s) for m, g in models for s in speeds]
    print(f"{len(points)} design points ({args.grid}); {os.cpu_count()} CPUs on this machine")
    outputs = []
    for backend in args.backends.split(","):
        if backend == "serial":
            outputs.append(timed("serial, in-process", points, workers=1)[0])
        elif backend == "local":
            label = f"local pool, {args.workers} workers"
            outputs.append(timed(label, points, workers=args.workers)[0])
        elif backend == "ray":
            outputs += run_ray(points, args.workers)
        else:
            parser.error(f"unknown backend {backend!r}")
    same = all(out == outputs[0] for out in outputs)
    print("identical results across backends:", "yes" if same else "NO")
    if not same:
        sys.exit(1)
    if args.record:
        record = {
            "command": "python bench/design_points.py " + shlex.join(sys.argv[1:]),
            "revision": _revision(),
            "cpus": os.cpu_count(),
            "note": args.note,
            "grid": args.grid,
            "points": [list(p) for p in points],
            "identical": same,
            "runs": TIMINGS,
            "results": outputs[0],
        }
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
