"""What the search's work units cost in wall time on this machine (planner/search/work.py
WORK_PER_*; docs/search.md "Work limit").

The deterministic work limit counts what a search did (entries popped, plans priced, stage-partition
CP-SAT models and memory caps), weighted so that one unit is about a millisecond on the reference
machine (2 cores). This script runs a few searches of different kinds (even splits at 1,024 to
16,384 GPUs, every rank order, the CP-SAT stage partition cut short by its work limit), each
`--repeat` times, and prints per search its counts, work units, wall seconds and milliseconds per
unit (best of the repeats), and whether the repeats returned the same plans (the point of the
limit). Units cheaper or dearer than a millisecond here only move how long a default search runs
(work.default_work_limit takes half the time limit's worth), never which plan it returns.

Usage: python bench/search_work.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.convenience import plan_for
from planner.search import partition, partition_caps
from planner.search import table as table_module
from planner.search import work as work_module

CASES = [
    ("llama3-405b, 16,384 H100", {"model": "llama3-405b", "cluster": "dgx-h100", "num_gpus": 16384,
                                      "global_batch": 2048, "seq_len": 8192}),
    ("deepseek-v3, 2,048 H100", {"model": "deepseek-v3", "cluster": "dgx-h100", "num_gpus": 2048,
                                     "global_batch": 4096, "seq_len": 4096}),
    ("llama3-70b, 1,024 H100, all orders, every variant",
     {"model": "llama3-70b", "cluster": "dgx-h100", "num_gpus": 1024, "global_batch": 1024, "seq_len": 8192,
          "rank_orders": None, "top_variants": True}),
    ("deepseek-v3, 1,024 H100, PP 16, stage split search",
     {"model": "deepseek-v3", "cluster": "dgx-h100", "num_gpus": 1024, "global_batch": 4096, "seq_len": 4096,
          "pp": 16, "stage_split": "search", "time_limit_s": 20.0}),
    ("llama3-405b, 512 H100, stage split search",
     {"model": "llama3-405b", "cluster": "dgx-h100", "num_gpus": 512, "global_batch": 512, "seq_len": 8192,
          "stage_split": "search", "time_limit_s": 20.0}),
]  # fmt: skip


TIMED: dict[str, list[float]] = {}


def timed(owner: object, name: str, label: str) -> None:
    """Wrap owner.name to add its seconds (outermost calls only) to TIMED[label]."""
    inner = getattr(owner, name)
    TIMED[label] = [0.0]
    depth = [0]

    def wrapper(*a, **k):
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                TIMED[label][0] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def counted_runs() -> list[dict]:
    """Wrap BranchAndBound.run to record each table's counts."""
    seen: list[dict] = []
    original = table_module.BranchAndBound.run

    def run(self, *, prune, deadline, work_limit=None):
        out = original(self, prune=prune, deadline=deadline, work_limit=work_limit)
        parts = self.parts
        seen.append({
            "pops": self.pops, "scored": out.num_scored,
            "models": parts.num_solves if parts else 0,
            "caps": parts.num_prepared if parts else 0,
            "mem": parts.num_memory_evals if parts else 0,
            "cells": parts.num_table_cells if parts else 0,
            "sat": parts.sat_deterministic_time if parts else 0.0,
            "work": out.work_units, "stopped_by": out.stopped_by,
        })  # fmt: skip
        return out

    table_module.BranchAndBound.run = run
    timed(partition.PartitionSolver, "rank_terms_s", "cells")
    timed(partition_caps.MemoryCaps, "stage_memory_gib", "mem")
    timed(partition.cp_model.CpSolver, "solve", "sat")
    timed(table_module.BranchAndBound, "_score", "score")
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="the first two cases only")
    args = ap.parse_args()
    seen = counted_runs()
    cases = CASES[:2] if args.quick else CASES
    print(f"{'search':52} {'pops':>6} {'scored':>6} {'cells':>6} {'mem':>6} {'sat':>6} "
          f"{'work':>7} {'wall s':>6} {'ms/unit':>7}  stopped by, same plans")  # fmt: skip
    keys = ("pops", "scored", "models", "caps", "mem", "cells", "sat", "work")
    totals = dict.fromkeys(keys, 0.0)
    seconds = dict.fromkeys(("cells", "mem", "sat", "score", "rest"), 0.0)
    total_s = 0.0
    for name, kw in cases:
        walls, answers = [], []
        for _ in range(args.repeat):
            seen.clear()
            for v in TIMED.values():
                v[0] = 0.0
            t0 = time.perf_counter()
            result = plan_for(**kw)
            walls.append(time.perf_counter() - t0)
            answers.append([e.layout.model_dump_json() for e in result.ranked])
            counts = {k: sum(s[k] for s in seen) for k in keys}
            stopped = result.solver.stopped_by
        # The last repeat's component seconds (the repeats do the same work).
        parts_s = {k: v[0] for k, v in TIMED.items()}
        for k, v in parts_s.items():
            seconds[k] += v
        seconds["rest"] += walls[-1] - sum(parts_s.values())
        wall = min(walls)
        total_s += wall
        for k in keys:
            totals[k] += counts[k]
        same = all(a == answers[0] for a in answers)
        print(f"{name:52} {counts['pops']:6.0f} {counts['scored']:6.0f} {counts['cells']:6.0f} "
              f"{counts['mem']:6.0f} {counts['sat']:6.2f} {counts['work']:7.0f} {wall:6.2f} "
              f"{1e3 * wall / counts['work']:7.3f}  {stopped}, {'yes' if same else 'NO'}")  # fmt: skip
    print(f"all: {totals['work']:.0f} units in {total_s:.2f} s, "
          f"{1e3 * total_s / totals['work']:.3f} ms per unit (the weights assume about 1)")
    print("measured cost of each counted thing here (ms; work.WORK_PER_* in work units):")
    per = [
        ("table cell", seconds["cells"], totals["cells"], work_module.WORK_PER_TABLE_CELL),
        ("memory eval", seconds["mem"], totals["mem"], work_module.WORK_PER_MEMORY_EVAL),
        ("CP-SAT det. unit", seconds["sat"], totals["sat"], work_module.WORK_PER_SAT_UNIT),
        ("plan scored", seconds["score"], totals["scored"], work_module.WORK_PER_SCORE),
        ("pop (the rest)", seconds["rest"], totals["pops"], work_module.WORK_PER_POP),
    ]
    for label, sec, n, weight in per:
        ms = 1e3 * sec / n if n else float("nan")
        print(f"  {label:18} {ms:9.4f} ms each over {n:9.2f}; weight {weight:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
