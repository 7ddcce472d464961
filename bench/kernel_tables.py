"""Shipped kernel tables vs the measured folders, and how well the look-up interpolates (issue 32).

Prints two Markdown tables (docs/calibration.md quotes them):

1. Per GPU and file, every row of the shipped table (models_zoo/kernels/<gpu>/) against the same
   shape's row in ../shared/data/kernels/<gpu>/ (rows matched by their shape columns, not by
   position): rows, rows matched, max |shipped / measured - 1| of the time. 0 % where the files
   are the same measurement.
2. Per GPU and kind (GEMM bf16 by layout, GEMM fp8, attention by kernel, grouped GEMM,
   memory-bound): the look-up's leave-one-out error, each row priced from the table without it
   (cost_models.kernels.leave_one_out_errors; rows outside the others' box are extrapolated to
   the curve and not counted), median / P90 / max of |error|, signed median, beside the
   tables' run-to-run spread per shape from ../shared/data/kernels/README.md (bf16 GEMM median
   1.1 %, P90 3.3 %; fp8 2.8 %, P90 8.5 %; measured for GEMMs only). Interpolating between
   measured shapes is as good as the table where its error is near that spread.
3. The H100 table (its rows as measured, without the sustained-rate cap) looking up the H200's
   shapes (same silicon, other memory): how far a table measured on a sibling GPU is from the
   GPU's own.
4. With --calculon FILE (a Calculon system file of an H100, e.g. its systems/h100_80g_nvl8.json):
   the file imported by `calibrate --system-file` (planner/calibrate/system_file.py), looked up
   at the measured H100 table's GEMM shapes, against Calculon's own step rule (how faithfully the
   import follows it) and against the measured times (how far the file's settings are from an
   H100).

    python bench/kernel_tables.py [--measured ../shared/data/kernels] [--calculon FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from cost_models.kernels import KernelBook, attention_fwd_flops, leave_one_out_errors
from cost_models.specs import KernelTables
from models_zoo import load_gpu
from models_zoo.kernel_tables import BUILTIN_ROOT, builtin_index, builtin_tables
from planner.calibrate.system_file import efficiency_at, read_system_file

ROOT = Path(__file__).resolve().parents[1]
SPREAD = {"bf16": "1.1 / 3.3", "fp8": "2.8 / 8.5"}
"""Run-to-run spread per shape, median / P90 % (../shared/data/kernels/README.md)."""
SHAPE_COLUMNS = {
    "gemm.csv": ("m", "n", "k", "dtype", "layout"),
    "attention.csv": ("batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "kernel"),
    "attention_window.csv": ("batch", "seq", "heads", "kv_heads", "head_dim", "window"),
    "grouped_gemm.csv": ("experts", "rows_per_expert", "n", "k", "dtype"),
    "memory_bound.csv": ("op", "tokens", "width", "dtype"),
    "moe_ops.csv": ("model", "op", "tokens"),
    "sustained.csv": ("workload", "t_s"),
}
TIME_COLUMN = {"sustained.csv": "tflops"}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 100 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def identity_table(measured: Path) -> list[str]:
    lines = [
        "| GPU | file | rows | matched | max abs diff |",
        "|---|---|---:|---:|---:|",
    ]
    for gpu, entry in sorted(builtin_index().items()):
        if not entry["folder"]:
            continue
        for shipped in sorted((BUILTIN_ROOT / entry["folder"]).glob("*.csv")):
            cols, tcol = SHAPE_COLUMNS[shipped.name], TIME_COLUMN.get(shipped.name, "time_ms")
            measured_rows = _rows(measured / gpu / shipped.name)
            ref = {tuple(r[c] for c in cols): float(r[tcol]) for r in measured_rows}
            diffs = [
                abs(float(r[tcol]) / ref[key] - 1)
                for r in _rows(shipped)
                if (key := tuple(r[c] for c in cols)) in ref
            ]
            n = len(_rows(shipped))
            worst = f"{100 * max(diffs):.2f} %" if diffs else "-"
            lines.append(f"| {gpu} | {shipped.name} | {n} | {len(diffs)} | {worst} |")
    return lines


def _kind_label(kind: str, key) -> tuple[str, str]:
    """(label, spread key) of one look-up group."""
    if kind == "gemm":
        return f"GEMM {key[0]} {key[1]}", key[0]
    if kind == "grouped_gemm":
        return f"grouped GEMM {key}", ""
    if kind == "attention":
        return f"attention {key[0]}{' causal' if key[1] else ''}", ""
    return f"memory-bound {key}", ""


def loo_table() -> list[str]:
    lines = [
        "| GPU | kind | rows | covered | median | P90 | max | signed median "
        "| run-to-run median / P90 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for gpu, entry in sorted(builtin_index().items()):
        if not entry["folder"]:
            continue
        tables = KernelTables.model_validate(builtin_tables(gpu, gpu))
        merged: dict[str, tuple[list[float], int, str]] = {}
        for kind, groups in leave_one_out_errors(tables).items():
            for key, errs in groups.items():
                label, spread = _kind_label(kind, key)
                if kind == "memory_bound":
                    label = "memory-bound (per op)"
                old = merged.get(label, ([], 0, spread))
                size = _group_size(tables, kind, key)
                merged[label] = (old[0] + errs, old[1] + size, spread)
        for label, (errs, rows, spread) in merged.items():
            if not errs:
                lines.append(f"| {gpu} | {label} | {rows} | 0 | - | - | - | - | - |")
                continue
            a = [abs(e) for e in errs]
            lines.append(
                f"| {gpu} | {label} | {rows} | {len(errs)} | {100 * statistics.median(a):.1f} % "
                f"| {_pct(a, 0.9):.1f} % | {100 * max(a):.1f} % | "
                f"{100 * statistics.median(errs):+.1f} % | {SPREAD.get(spread, 'not measured')} |"
            )
    return lines


def _group_size(tables: KernelTables, kind: str, key) -> int:
    if kind == "gemm":
        return sum(1 for r in tables.gemm if (r[3], r[4]) == key)
    if kind == "grouped_gemm":
        return sum(1 for r in tables.grouped_gemm if r[4] == key)
    if kind == "attention":
        return sum(1 for r in tables.attention if (r[8], r[6], r[7]) == key)
    return sum(1 for r in tables.memory_bound if r[0] == key)


def cross_gpu_table() -> list[str]:
    """The H100 table looking up the H200 rows' shapes."""
    # the rows as measured: without the H100's sustained-rate cap (sustained.csv), which the
    # H200 folder does not have
    raw = {**builtin_tables("h100-sxm-80gb", "h100"), "sustained_bf16_tflops": None}
    h100 = KernelBook(KernelTables.model_validate(raw))
    h200 = KernelTables.model_validate(builtin_tables("h200-sxm-141gb", "h200"))
    groups: dict[str, list[float]] = {}
    for r in h200.gemm:
        got = h100.gemm_s(*r[:5])[0]
        groups.setdefault(f"GEMM {r[3]}", []).append(got / (r[5] * 1e-3) - 1)
    for r in h200.grouped_gemm:
        got = h100.grouped_gemm_s(*r[:5])[0]
        groups.setdefault("grouped GEMM", []).append(got / (r[5] * 1e-3) - 1)
    for r in h200.attention:
        b, s, h, kv, d, dv, causal, window, kernel, ms, _f = r
        per_flop, _ = h100.attention_s_per_flop(
            b, s, h, kv, d, dv, causal=causal, window=window, kernel=kernel
        )
        got = per_flop[0] * attention_fwd_flops(b, s, h, d, dv, causal)
        groups.setdefault(f"attention {kernel}", []).append(got / (ms * 1e-3) - 1)
    for r in h200.memory_bound:
        got = h100.memory_bound_s(r[0], r[1])[0]
        groups.setdefault("memory-bound", []).append(got / (r[2] * 1e-3) - 1)
    lines = ["| H200 rows | rows | signed median (H100 / H200 - 1) | median abs | P90 abs |"]
    lines.append("|---|---:|---:|---:|---:|")
    for label, errs in groups.items():
        a = [abs(e) for e in errs]
        lines.append(
            f"| {label} | {len(errs)} | {100 * statistics.median(errs):+.1f} % | "
            f"{100 * statistics.median(a):.1f} % | {_pct(a, 0.9):.1f} % |"
        )
    return lines


def calculon_table(path: Path) -> list[str]:
    """Calculon's file imported, at the measured H100 GEMM shapes (module docstring, 4)."""
    data, _rep = read_system_file(str(path), load_gpu("h100-sxm-80gb"))
    book = KernelBook(KernelTables.model_validate(data))
    raw = json.loads(path.read_text())["matrix"]
    lines = [
        "| dtype | shapes | looked up | vs Calculon's rule: median / P90 / max abs | same, > 2x "
        "from a step edge | time vs measured H100: signed median / median abs |",
        "|---|---:|---:|---|---|---|",
    ]
    measured = KernelTables.model_validate(builtin_tables("h100-sxm-80gb", "h100"))
    for dtype, key in (("bf16", "float16"), ("fp8", "float8")):
        if key not in raw:
            continue
        steps = [tuple(x) for x in raw[key]["gflops_efficiency"]]
        edges = [t * 1e9 for t, _ in steps if t > 0]
        rule, far, vs_measured = [], [], []
        rows = [r for r in measured.gemm if r[3] == dtype]
        for m, n, k, _dt, layout, ms in rows:
            flops = 2.0 * m * n * k
            got = book.gemm_s(m, n, k, dtype, layout)[0]
            if got is None:
                continue
            calc = flops / (raw[key]["tflops"] * 1e12 * efficiency_at(steps, flops / 1e9))
            rule.append(abs(got / calc - 1))
            if all(max(flops / e, e / flops) > 2 for e in edges):
                far.append(abs(got / calc - 1))
            vs_measured.append(got / (ms * 1e-3) - 1)
        lines.append(
            f"| {dtype} | {len(rows)} | {len(rule)} | {100 * statistics.median(rule):.1f} / "
            f"{_pct(rule, 0.9):.1f} / {100 * max(rule):.1f} % | {len(far)} shapes, max "
            f"{100 * max(far, default=0):.2f} % | {100 * statistics.median(vs_measured):+.1f} % / "
            f"{100 * statistics.median([abs(x) for x in vs_measured]):.1f} % |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", type=Path, default=ROOT.parent / "shared" / "data" / "kernels")
    ap.add_argument("--calculon", type=Path, help="a Calculon system file of an H100")
    args = ap.parse_args()
    print("Shipped tables vs the measured folder, per shape:\n")
    print("\n".join(identity_table(args.measured)))
    print("\nLeave-one-out interpolation error of the look-up, per kind:\n")
    print("\n".join(loo_table()))
    print("\nThe H100 table looking up the H200's measured shapes:\n")
    print("\n".join(cross_gpu_table()))
    if args.calculon:
        print(f"\nCalculon's {args.calculon.name} imported, at the measured H100 GEMM shapes:\n")
        print("\n".join(calculon_table(args.calculon)))


if __name__ == "__main__":
    main()
