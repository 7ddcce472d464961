"""Plan wall time vs cluster size (issue 4). Prints a Markdown table for the README.

Wall time is inputs-to-result inside one process (presets already imported; interpreter start
excluded), measured with time.perf_counter around planner.plan(). The exhaustive oracle is run
only where --oracle-max-gpus and --oracle-max-space allow (it scores every layout x placement at
~0.6 ms each, so beyond ~1,024 GPUs or ~300k candidates it takes longer than 5 minutes);
"skipped" says so.

    python bench/plan_scaling.py            # all cases, oracle up to 1,024 GPUs
    python bench/plan_scaling.py --only 0 1 # a subset by index
    python bench/plan_scaling.py --only 1 5 --stage-split search --oracle-max-gpus 0
                                            # the CP-SAT stage partition (SearchSpace.stage_split)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from revision import revision as _revision  # bench/revision.py, beside this script

import models_zoo
from cost_models.errors import NoFeasiblePlan
from planner import api
from planner.convenience import search_inputs

# (label, model preset, cluster preset, GPUs, global batch in sequences, sequence length)
CASES = [
    ("Llama-3.1-405B", "llama3.1-405b", "dgx-h100", 64, 64, 8192),
    ("Llama-3.1-405B", "llama3.1-405b", "dgx-h100", 1024, 1024, 8192),
    ("Llama-3.1-405B", "llama3.1-405b", "dgx-h100", 16384, 2048, 8192),
    ("Llama-3.1-405B", "llama3.1-405b", "dgx-h100", 131072, 16384, 8192),
    ("DeepSeek-V3", "deepseek-v3", "h800", 2048, 15360, 4096),
    ("Qwen3-235B-A22B", "qwen3-235b-a22b", "dgx-b200", 256, 1024, 4096),
]


def measure(
    index: int,
    oracle_max_gpus: int,
    oracle_max_space: int,
    time_limit_s: float,
    stage_split: str = "even",
    repeat: int = 3,
    cluster_file: str | None = None,
) -> dict[str, Any]:
    """One case planned `repeat` times: its deterministic result (space, scored, status, gap,
    objective, best plan) and the wall and CPU times (median and range)."""
    label, m, c, n, gb, seq = CASES[index]
    c = cluster_file or c  # e.g. a cluster carrying kernel tables (planner calibrate --kernels)
    model = models_zoo.load_model(m)
    cluster = models_zoo.load_cluster(c, n)
    workload = api.make_workload(model, seq_len=seq, global_batch=gb)

    def plan_once():
        start, cpu = time.perf_counter(), time.process_time()
        try:
            found = api.plan(
                model,
                cluster,
                workload,
                *search_inputs(
                    deterministic=True,
                    top_k=1,
                    time_limit_s=time_limit_s,
                    stage_split=stage_split,
                ),
            )
        except NoFeasiblePlan:
            found = None
        return time.perf_counter() - start, time.process_time() - cpu, found

    # The 2-core machine is noisy: plan `repeat` times in this process (deterministic, so the
    # same result each time) and report the median wall and CPU time with the range.
    runs = [plan_once() for _ in range(repeat)]
    walls, cpus = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
    result = runs[-1][2]
    row: dict[str, Any] = {
        "case": index, "label": label, "model": m, "cluster": c, "gpus": n,
        "global_batch": gb, "seq_len": seq, "stage_split": stage_split, "repeat": repeat,
        "wall_s": [round(t, 3) for t in (statistics.median(walls), walls[0], walls[-1])],
        "cpu_s": [round(t, 3) for t in (statistics.median(cpus), cpus[0], cpus[-1])],
    }  # fmt: skip
    row.update(deterministic_fields(result))
    row["oracle"] = "skipped"
    # The oracle scores every layout x placement (~0.6 ms each): beyond ~300k it passes 5 min.
    space = row["space"]
    if n <= oracle_max_gpus and (space is None or space <= oracle_max_space):
        t0 = time.perf_counter()
        try:
            o = api.plan(
                model,
                cluster,
                workload,
                *search_inputs(
                    engine="exhaustive",
                    top_k=1,
                    time_limit_s=time_limit_s,
                    stage_split=stage_split,
                ),
            )
            if o.solver.status == "STOPPED":  # its time limit: it proves nothing either way
                agree = "stopped at the time limit"
            else:
                agree = "agrees" if o.solver.objective == row["objective_s"] else "DISAGREES"
        except NoFeasiblePlan:
            agree = "agrees" if row["objective_s"] is None else "DISAGREES"
        row["oracle"] = f"{time.perf_counter() - t0:.1f} s, {agree}"
    return row


def deterministic_fields(result: Any) -> dict[str, Any]:
    """What repeats run to run (the slow docs test re-plans and compares these)."""
    if result is None:
        return {"status": "INFEASIBLE", "space": None, "scored": None, "gap": None,
                "objective_s": None, "best": None}  # fmt: skip
    s = result.solver
    return {
        "status": s.status,
        "space": s.num_candidates,
        "scored": s.num_scored,
        "gap": s.gap,
        "objective_s": s.objective,  # the fastest plan's (best may be a simpler one within 1 %)
        "best": result.best.layout.label,
    }


HEADER = (
    "| model | cluster | GPUs | batch x seq | space (layouts x placements) | scored | status | gap "
    "| wall s, median (range) | CPU s, median | best plan | oracle |\n"
    "|---|---|---:|---|---:|---:|---|---:|---:|---:|---|---|"
)


def markdown_row(r: dict[str, Any]) -> str:
    wall, cpu = r["wall_s"], r["cpu_s"]
    spread = f" ({wall[1]:.2f}-{wall[2]:.2f})" if r["repeat"] > 1 else ""
    num = lambda v: "-" if v is None else f"{v:,}"
    status = "INFEASIBLE (proved)" if r["status"] == "INFEASIBLE" else r["status"]
    gap = "-" if r["gap"] is None else f"{r['gap']:.0%}"
    oracle = "skipped (> 5 min)" if r["oracle"] == "skipped" else r["oracle"]
    return (
        f"| {r['label']} | {r['cluster']} | {r['gpus']:,} | {r['global_batch']:,}x{r['seq_len']} "
        f"| {num(r['space'])} | {num(r['scored'])} | {status} | {gap} | {wall[0]:.2f}{spread} "
        f"| {cpu[0]:.2f} | {r['best'] or '-'} | {oracle} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", type=int, nargs="*", help="case indices to run")
    ap.add_argument("--oracle-max-gpus", type=int, default=1024)
    ap.add_argument("--oracle-max-space", type=int, default=300_000)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--stage-split", choices=("even", "search"), default="even")
    ap.add_argument("--repeat", type=int, default=3, help="plans per case; the median is shown")
    ap.add_argument("--cluster-file", help="cluster YAML replacing each case's preset")
    ap.add_argument(
        "--record",
        metavar="JSON",
        help="also write the rows with the run's conditions (bench/results/plan_scaling.json is "
        "what the README table is generated from: bench/docs_figures.py)",
    )
    ap.add_argument("--note", default="", help="the run's conditions, kept in the record")
    args = ap.parse_args()
    load_start = list(os.getloadavg())  # the machine is shared: its load before and after
    print(HEADER)
    rows = []
    for i in args.only if args.only is not None else range(len(CASES)):
        row = measure(
            i,
            args.oracle_max_gpus,
            args.oracle_max_space,
            args.time_limit,
            args.stage_split,
            args.repeat,
            args.cluster_file,
        )
        rows.append(row)
        print(markdown_row(row), flush=True)
    if args.record:
        record = {
            "command": "python bench/plan_scaling.py " + shlex.join(sys.argv[1:]),
            "revision": _revision(),
            "load_average_start": load_start,
            "load_average": list(os.getloadavg()),
            "cpus": os.cpu_count(),
            "note": args.note,
            "rows": rows,
        }
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
