"""One kernel-table folder against another, shape by shape (issue 32 item 3).

For a folder `planner measure kernels` wrote (or bench/device_measure.sh) and a reference folder
(default ../shared/data/kernels/h100-sxm-80gb, measured with ../shared/data/kernels/
measure_kernels.py): per table and kind, the rows both hold (matched by their shape columns),
and the median / P90 / max of |time / reference time - 1| and the signed median. The reference's
own run-to-run spread is a median of 1.1 % (P90 3.3 %) for bf16 GEMMs and 2.8 % (P90 8.5 %) for
fp8 (its README): a measure run that agrees that closely measures the same thing.

    python bench/compare_kernel_tables.py MEASURED_DIR [--reference DIR]

Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "data" / "kernels" / "h100-sxm-80gb"
KEYS = {
    "gemm.csv": (("m", "n", "k", "dtype", "layout"), ("dtype", "layout")),
    "attention.csv": (
        ("batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "kernel"),
        ("kernel",),
    ),
    "grouped_gemm.csv": (("experts", "rows_per_expert", "n", "k", "dtype"), ("dtype",)),
    "memory_bound.csv": (("op", "tokens", "width", "dtype"), ("op",)),
}


def _rows(path: Path, key: tuple[str, ...]) -> dict[tuple, float]:
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        return {tuple(r[c] for c in key): float(r["time_ms"]) for r in csv.DictReader(f)}


def _stats(ratios: list[float]) -> str:
    errs = sorted(abs(x - 1) * 100 for x in ratios)
    p90 = errs[min(len(errs) - 1, int(0.9 * len(errs)))]
    signed = statistics.median((x - 1) * 100 for x in ratios)
    return f"{statistics.median(errs):.1f} | {p90:.1f} | {errs[-1]:.1f} | {signed:+.1f}"


def compare(measured: Path, reference: Path) -> list[str]:
    lines = [
        f"{measured} vs {reference} (time ratio per shape both hold)",
        "",
        "| table | kind | rows | matched | median % | P90 % | max % | signed median % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (key, group) in KEYS.items():
        mine, ref = _rows(measured / name, key), _rows(reference / name, key)
        kinds: dict[tuple, list[float]] = {}
        totals: dict[tuple, int] = {}
        for shape, t in mine.items():
            g = tuple(shape[key.index(c)] for c in group)
            totals[g] = totals.get(g, 0) + 1
            if shape in ref:
                kinds.setdefault(g, []).append(t / ref[shape])
        for g in sorted(totals):
            ratios = kinds.get(g, [])
            stats = _stats(ratios) if ratios else "- | - | - | -"
            lines.append(f"| {name} | {'/'.join(g)} | {totals[g]} | {len(ratios)} | {stats} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("measured", type=Path)
    p.add_argument("--reference", type=Path, default=REFERENCE)
    a = p.parse_args()
    print("\n".join(compare(a.measured, a.reference)))


if __name__ == "__main__":
    main()
