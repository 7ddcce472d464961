"""`planner calibrate` and `planner presets --constants` as a reader sees them: what each fit
found and how well it reproduces the measurements; where each constant comes from. Lines with
rich markup (free text escaped); nothing here prints."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from ..calibrate.result import CalibrationReport, KernelTablesCheck, SystemFileImport


def calibration_lines(rep: CalibrationReport) -> list[str]:
    """The calibrated cluster file written; then one "residual" line per stored kernel table
    (its rows looked up through the written cluster); then each fitted constant (the GEMM and
    attention curves labelled as the fallback outside the tables), each nccl-tests file's tier
    and residual, and the measured steps' errors."""
    lines = [f"[bold]calibrated[/bold] {escape(rep.cluster)} -> {escape(rep.out or '-')}"]
    if rep.system_file is not None:
        lines += _system_file_lines(rep.system_file)
    if rep.kernels is not None:
        lines += _kernel_lines(rep.kernels)
    for f in rep.fits:
        default = "" if f.default is None else f" (was {f.default:.4g})"
        label = "fallback curve " if f.note.startswith("fallback curve") else ""
        lines.append(
            f"  {label}{f.constant} = {f.value:.4g}{default}; {f.points} points, max"
            f" residual {f.max_residual_pct:.2f}%; from {escape(f.source)}"
        )
    for text in rep.fallback_skipped or ():
        lines.append(f"  fallback curve not fitted: {escape(text)}")
    for row in rep.nccl or ():
        lines.append(
            f"  {escape(row.file)}: {row.collective} on {row.ranks} ranks /"
            f" {row.nodes} nodes -> tier {row.tier}; bus bandwidth reproduced within"
            f" {row.max_busbw_error_pct:.2f}%"
        )
    if rep.steps is not None:
        lines.append(
            f"  steps: max |error| {rep.steps.max_abs_error_pct:.1f}%, leave-one-out"
            f" {rep.steps.max_abs_leave_one_out_pct:.1f}%"
        )
    return lines


def _system_file_lines(sf: SystemFileImport) -> list[str]:
    lines = [
        f"  system file {escape(sf.file)} ({sf.format}; its settings imported as"
        " tables, basis assumption):"
    ]
    lines += [f"  imported {escape(x)}" for x in sf.imported]
    return lines + [f"  not imported {escape(x)}" for x in sf.not_imported]


def _kernel_lines(k: KernelTablesCheck) -> list[str]:
    lines = [f"  kernel tables from {escape(k.source)} (looked up, not fitted):"]
    for kind, r in k.tables.items():
        lines.append(
            f"  {kind}: {r.rows} rows reproduced with max residual"
            f" {r.max_residual_pct:.2f}%, median residual {r.median_residual_pct:.2f}%;"
            f" each left out and interpolated from the rest ({r.loo_rows} rows): max"
            f" {r.loo_max_pct:.1f}%, median {r.loo_median_pct:.1f}%"
        )
    for dtype, name, cap in (
        ("bf16", "sustained.csv", k.sustained_bf16_tflops),
        ("fp8", "sustained_fp8.csv", k.sustained_fp8_tflops),
    ):
        if cap is None:
            continue
        if k.sustained_applied:
            lines.append(
                f"  sustained: {dtype} GEMMs capped at {cap:.0f} TFLOP/s"
                f" (held under the power cap, {name}; kernels.apply_sustained_cap)"
            )
        else:
            lines.append(
                f"  sustained: {dtype} GEMMs back to back held {cap:.0f} TFLOP/s under the"
                f" power cap ({name}); not applied: training steps held burst clocks"
                " (docs/calibration.md#sustained-clocks)"
            )
    return lines


def constants_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per constant: name, value, basis (datasheet, measured, assumption), why."""
    return [
        f"{r['constant']:<34} {r['value']!s:>10}  {r['basis']:<10} {escape(str(r['why']))}"
        for r in rows
    ]
