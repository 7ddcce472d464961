"""The `planner design` answers of docs/networks.md, run and recorded (bench/results/design_answers.json).

Each case is one `planner design` command of the page: the whole default space for the 16,384-H100
mix, then the four narrower questions (docs/design/*.yaml, `--no-prune`). A case runs twice on one
cache folder: `--json` first (every design point computed; its wall and CPU time are recorded),
then the text report at the page's terminal width (every point read back from the cache, so the
text is the same evaluation's). The cases share the cache, as on the page: a narrow question reads
the points it shares with the default space.

A full run takes minutes of CPU (the default space: 66 plan searches at 16,384 GPUs), so the page's
blocks are rendered from the record (bench/docs_figures.py: `design-*` blocks) and a slow test
(tests/integration/test_docs_figures.py) re-runs a cheap part: the bill and $ per million tokens
of every recorded design from its recorded throughput.

Usage: python bench/design_answers.py --record bench/results/design_answers.json [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIX = "--workload docs/design/mix-405b-dsv3.yaml --gpus 16384"
CASES: list[tuple[str, str, int]] = [
    # (name, planner design arguments, terminal columns of the page's block)
    ("default", f"{MIX} --gpu h100-sxm-80gb", 120),
    ("ib-vs-roce", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/ib-vs-roce.yaml --no-prune", 100),
    ("rail-only", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/rail-only.yaml --no-prune", 100),
    ("nic-speed", f"{MIX} --gpu h100-sxm-80gb --designs docs/design/nic-speed.yaml --no-prune", 100),
    ("nvl72", f"{MIX} --gpu gb200 --designs docs/design/nvl72.yaml --no-prune", 100),
]  # fmt: skip


def _planner(args: str, columns: int, cache: str, workers: int) -> tuple[str, float, float]:
    """stdout of `planner design ARGS --workers K --cache-dir CACHE`, wall and CPU seconds (the
    CPU of the command and its worker processes)."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-m", "planner", "design", *shlex.split(args)]
    cmd += ["--workers", str(workers), "--cache-dir", cache]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"planner design {args}: exit {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return "\n".join(line.rstrip() for line in done.stdout.splitlines()), wall, cpu


def _trimmed(answer: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer without each design's cluster file (rebuilt from `design` by the space)."""
    return {
        **answer,
        "designs": [{k: v for k, v in d.items() if k != "cluster"} for d in answer["designs"]],
    }


def run(only: list[str] | None, workers: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="design-answers-") as cache:
        for name, args, columns in CASES:
            if only and name not in only:
                continue
            printed, wall, cpu = _planner(args + " --json", columns, cache, workers)
            text, _, _ = _planner(args, columns, cache, workers)
            rows.append(
                {
                    "name": name,
                    "args": args,
                    "columns": columns,
                    "workers": workers,
                    "wall_s": round(wall, 1),
                    "cpu_s": round(cpu, 1),
                    "load_average": list(os.getloadavg()),
                    "text": text,
                    "json": _trimmed(json.loads(printed)),
                }
            )
            print(f"{name}: {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    return rows


def _revision() -> str:
    if os.environ.get("PLANNER_REVISION"):  # a frozen copy (git archive) names its revision
        return os.environ["PLANNER_REVISION"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", metavar="JSON", required=True)
    ap.add_argument("--only", nargs="*", help="case names to run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--note", default="", help="the run's conditions, kept in the record")
    args = ap.parse_args()
    cases = run(args.only, args.workers)
    record = {
        "command": "python bench/design_answers.py " + shlex.join(sys.argv[1:]),
        "revision": _revision(),
        "cpus": os.cpu_count(),
        "note": args.note,
        "cases": cases,
    }
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
