"""The shared runs priced with the Hopper presets on the efficiency curve vs on the measured tables.

Reads two or more `planner validate --data RUNS --json` outputs (the first: the presets; the
others: `--cluster-file` runs, each pricing the records of its cluster's GPU on that cluster) and
the runs file, and prints, per GPU and for all / dense / MoE records: median and P90 of
|error| and the signed median (error = predicted / measured tokens per second - 1, in %).
A record takes its figure from the first later file that changed it (its GPU's tables), else
from the presets' file.

Usage: python bench/tables_vs_curve.py RUNS.yaml CURVE.json TABLES.json [TABLES2.json ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import yaml

import models_zoo


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def summary(errs: list[float]) -> str:
    if not errs:
        return "-"
    a = [abs(e) for e in errs]
    return (
        f"n {len(errs):3d}  median {statistics.median(a):5.1f}  P90 {_q(a, 0.9):5.1f}  "
        f"signed {statistics.median(errs):+5.1f}"
    )


def main(argv: list[str]) -> int:
    runs = {r["id"]: r for r in yaml.safe_load(Path(argv[0]).read_text())}
    curve = {r["id"]: r for r in json.loads(Path(argv[1]).read_text())}
    tables = dict(curve)
    for path in argv[2:]:
        for r in json.loads(Path(path).read_text()):
            if r != curve[r["id"]]:
                tables[r["id"]] = r
    for name, res in (("curve", curve), ("tables", tables)):
        groups: dict[str, list[float]] = {}
        for rid, r in res.items():
            if r.get("tokens_error_pct") is None:
                continue
            run = runs[rid]
            model = run["model"]
            if isinstance(model, str):
                moe = models_zoo.load_model(model).moe is not None
            else:
                moe = bool(model.get("moe"))
            kind = "moe" if moe else "dense"
            for key in ("all", kind, run["gpu"], f"{run['gpu']} {kind}"):
                groups.setdefault(key, []).append(r["tokens_error_pct"])
        for key in sorted(groups, key=lambda k: (k not in ("all", "dense", "moe"), k)):
            print(f"{name:6} {key:32} {summary(groups[key])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
