"""Write models_zoo/kernels/h100-sxm-80gb/gemm_pieces.csv: the TP-overlap split pieces the H100
table lacks, measured on an H100 (bench/results/h100-2026-11-27/), on the shipped table's level.

    python bench/make_gemm_pieces.py [--check]

Which shapes: every GEMM piece cost_models.tp_overlap.pieces cuts (ring_exchange M / tp rows,
pipeline N / num_splits columns) while the H100 records of ../shared/data/published_runs.yaml and
bench/heldout/mbridge_performance_summary.yaml are priced, in the dtype their records look it up
(fp8 rows stand for every layout, cost_models.kernels.KernelBook.gemm_s), less the shapes the
shipped table (a byte-identical copy of ../shared/data/kernels/h100-sxm-80gb) already holds. The
pieces are the shapes `planner measure kernels` lists for those layouts; the 405B TP8 CP2 ones
(M = 512) lie below the table's smallest fp8 M (576), which left their split unpriced.

Times: `planner measure kernels` (planner/calibrate/sweep.py) ran three times over every GEMM the
H100 records look up (rec0, rec1, rec2: seeds 0, 1, 2, two machines of the same kind); a row is
the geometric mean of the three, divided by this machine's level against the shipped table: the
median ratio loan / shipped over the shapes both hold, per dtype, measured in the same runs
(bf16 0.984 over 60 shapes, fp8 0.921 over 96: the loan GPUs ran fp8 about 8 % faster than the
GPU of ../shared/data/kernels, as the 2026-11-26 loan did; bench/results/h100-2026-11-27/
README.md). So a piece and the whole GEMM it is cut from are priced on one level.
A piece the runs do not hold (a record added after the loan) gets no row and is named on stderr.
`--check` compares the file with what the script would write (exit 1 if they differ).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_models import tp_overlap
from cost_models.compute import _gemm_passes
from cost_models.estimate import estimate
from planner.validate import RunRecord, record_inputs

GPU = "h100-sxm-80gb"
RUNS = ROOT / "bench" / "results" / "h100-2026-11-27"
SHIPPED = ROOT / "models_zoo" / "kernels" / GPU
OUT = SHIPPED / "gemm_pieces.csv"
RECORDS = (
    ROOT.parent / "shared" / "data" / "published_runs.yaml",
    ROOT / "bench" / "heldout" / "mbridge_performance_summary.yaml",
)
Shape = tuple[int, int, int, str, str]


def _read(path: Path) -> dict[Shape, float]:
    with path.open() as f:
        return {
            (int(r["m"]), int(r["n"]), int(r["k"]), r["dtype"], r["layout"]): float(r["time_ms"])
            for r in csv.DictReader(f)
        }


def split_pieces() -> set[Shape]:
    """(m, n, k, dtype, layout) of every split piece the H100 records look up."""
    seen: set[tuple[int, int, int, str]] = set()
    cut = tp_overlap.pieces

    def recording(cfg, gemm, tp, pass_index):
        count, piece = cut(cfg, gemm, tp, pass_index)
        if count > 1:
            lay, m, n, k = _gemm_passes(piece)[pass_index]
            seen.add((round(m), round(n), round(k), lay))
        return count, piece

    tp_overlap.pieces = recording
    dtypes: dict[tuple[int, int, int, str], set[str]] = {}
    try:
        for path in RECORDS:
            for r in yaml.safe_load(path.read_text()):
                if r["gpu"] != GPU:
                    continue
                before = set(seen)
                m, c, w, lo = record_inputs(RunRecord.model_validate(r).model_dump(), None)
                estimate(m, c, w, lo)
                fp8 = w.precision == "fp8"
                for s in seen - before:
                    dtypes.setdefault(s, set()).add("fp8" if fp8 else "bf16")
    finally:
        tp_overlap.pieces = cut
    out: set[Shape] = set()
    for (m, n, k, lay), kinds in dtypes.items():
        out |= {(m, n, k, "fp8", "TN") if d == "fp8" else (m, n, k, d, lay) for d in kinds}
    return out


def rows() -> list[list]:
    runs = [_read(RUNS / f"rec{i}" / "gemm.csv") for i in range(3)]
    shipped = _read(SHIPPED / "gemm.csv")
    level = {
        d: statistics.median(
            math.exp(statistics.mean(math.log(r[s]) for r in runs)) / shipped[s]
            for s in runs[0]
            if s in shipped and s[3] == d
        )
        for d in ("bf16", "fp8")
    }
    out = []
    for s in sorted(split_pieces() - set(shipped)):
        if any(s not in r for r in runs):
            # a piece a record added after the loan looks up: no time for it, so no row (the table
            # prices it by interpolation, or leaves the GEMM unsplit outside its box:
            # cost_models.tp_overlap.overlap_s); `planner measure kernels` on an H100 would give one
            print(f"not measured in {RUNS.relative_to(ROOT)}: {s}", file=sys.stderr)
            continue
        t = math.exp(statistics.mean(math.log(r[s]) for r in runs)) / level[s[3]]
        m, n, k, d, lay = s
        out.append([m, n, k, d, lay, f"{t:.5f}", f"{2 * m * n * k / (t * 1e-3) / 1e12:.2f}"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    lines = ["m,n,k,dtype,layout,time_ms,tflops"] + [",".join(map(str, r)) for r in rows()]
    text = "\n".join(lines) + "\n"
    if args.check:
        same = OUT.is_file() and OUT.read_text() == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"{len(lines) - 1} rows -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
