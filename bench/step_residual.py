"""Measured minus priced step time, by measured step length: is there a fixed cost per step the
model lacks? (analysis; nothing is priced from it: docs/accuracy.md "Short steps").

For the shared records (../shared/data/published_runs.yaml) and the held-out rows
(bench/heldout/*_summary.yaml, recipe settings, presets as shipped; rows that are also shared
records left out, as bench/heldout_accuracy.py's HELD-OUT groups): the measured step (the
record's tokens at its measured tokens/s/GPU), the priced step (`planner validate`'s), their
difference, per band of measured step length; then the median / P90 / signed error of both sets
if every priced step were X ms longer (a constant per step, as a fixed host or synchronisation
cost of the training loop would be). A missing per-token or per-layer cost grows with the step;
a per-step one shows as a constant residual on the shortest steps.

Usage: python bench/step_residual.py [--shared FILE] [--offsets-ms 0 10 20 30 50 70]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from heldout_accuracy import shared_twins

from planner.validate import validate_file

BANDS_S = (0.0, 0.2, 0.5, 1.0, 2.0, 5.0, 20.0, float("inf"))


def priced_rows(path: str, skip: set[str]) -> list[tuple[float, float, str]]:
    """(measured step s, priced step s, id) of every scored record of `path` not in `skip`: the
    measured step is the priced step's tokens at the measured tokens/s/GPU (as
    bench/heldout_gap.py)."""
    out = []
    for row in validate_file(path):
        if row.id in skip or row.tokens_error_pct is None or row.estimate is None:
            continue
        e = row.estimate
        measured_s = e.tokens_per_s_per_gpu * e.step_time_s / row.measured_tokens_per_s_per_gpu
        out.append((measured_s, e.step_time_s, row.id))
    return out


def errors_pct(rows: list[tuple[float, float, str]], offset_s: float) -> np.ndarray:
    """Throughput error (predicted / measured - 1, %) with every priced step `offset_s` longer."""
    return np.array([(measured / (priced + offset_s) - 1) * 100 for measured, priced, _ in rows])


def band_table(name: str, rows: list[tuple[float, float, str]]) -> None:
    print(f"{name}: measured step band, rows, median error %, median (measured - priced) ms")
    for lo, hi in pairwise(BANDS_S):
        sel = [r for r in rows if lo <= r[0] < hi]
        if sel:
            err = statistics.median(errors_pct(sel, 0.0))
            resid = statistics.median((m - p) * 1000 for m, p, _ in sel)
            print(f"  {lo:5.1f}-{hi:<5.1f} s  {len(sel):4d}  {err:+6.1f}  {resid:+9.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared", default=str(ROOT.parent / "shared" / "data" / "published_runs.yaml")
    )
    ap.add_argument("--offsets-ms", type=float, nargs="+", default=[0, 10, 20, 30, 50, 70])
    args = ap.parse_args()
    files = sorted((ROOT / "bench" / "heldout").glob("*_summary.yaml"))
    held_runs = [r for f in files for r in yaml.safe_load(f.read_text())]
    twins = set(shared_twins(held_runs, Path(args.shared)))
    with tempfile.TemporaryDirectory() as tmp:
        combined = Path(tmp) / "heldout.yaml"
        combined.write_text(yaml.safe_dump(held_runs, sort_keys=False))
        held = priced_rows(str(combined), twins)
    shared = priced_rows(args.shared, set())
    band_table("shared", shared)
    band_table("held-out", held)
    print("every priced step X ms longer: median / P90 / signed error %, held-out and shared")
    for x in args.offsets_ms:
        cols = []
        for rows in (held, shared):
            e = errors_pct(rows, x / 1000)
            a = np.abs(e)
            cols.append(f"{np.median(a):5.2f} / {np.percentile(a, 90):5.1f} / {np.median(e):+5.2f}")
        print(f"  X = {x:4.0f} ms   held-out {cols[0]}   shared {cols[1]}")
    short = sorted(r for r in held + shared if r[0] < 1.6)
    print("steps under 1.6 s (measured s, priced s, difference ms, id):")
    for m, p, rid in short:
        print(f"  {m:6.3f} {p:6.3f} {(m - p) * 1000:+6.0f}  {rid}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
