"""`planner calibrate`: the user's measurements in, a calibrated cluster file out (issue 18).

Inputs (CONTRACT.md "Calibration"): nccl-tests logs (nccl.py), GEMM and attention sweeps
(compute_fit.py), measured steps of the user's runs (steps.py). Each fitted constant goes into the
cluster: link tiers' `efficiency` / `latency_us`, the generation constants into
`calibration.values`, and every one of them into `calibration.fits` with the files it came from
and its largest residual. docs/calibration.md walks through the workflow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

import models_zoo
from cost_models.calibration import calibration_for_cluster
from cost_models.errors import InvalidInput
from cost_models.commtable import CollectiveBook
from cost_models.kernels import table_residuals
from cost_models.specs import (
    CalibrationValues,
    Cluster,
    ClusterCalibration,
    FitRecord,
    KernelTables,
)
from models_zoo.kernel_tables import (
    BUILTIN,
    TABLES,
    builtin_folder,
    builtin_source,
    kernel_dir_files,
    read_kernel_files,
)

from . import aic_nccl, compute_fit, nccl, steps, system_file
from .result import (
    CalibrationReport,
    KernelTablesCheck,
    NcclFileCheck,
    StepsFit,
    SystemFileImport,
)

__all__ = ["CalibrationReport", "calibrate", "cluster_yaml", "write_cluster_file"]


def _with(cluster: Cluster, values: dict[str, float], fits: list[FitRecord]) -> Cluster:
    old = cluster.calibration or ClusterCalibration()
    merged = CalibrationValues.model_validate({**old.values.model_dump(), **values})
    cal = ClusterCalibration(values=merged, fits=old.fits + tuple(fits), date=old.date)
    return cluster.model_copy(update={"calibration": cal})


def _nccl(cluster: Cluster, logs: list[nccl.NcclLog], report: dict[str, Any]) -> Cluster:
    """Each tier the logs measured (nccl-tests files, aiconfigurator's NCCL tables), fitted;
    `report["nccl"]` each log's check."""
    gpus = {log.gpu_name for log in logs if log.gpu_name}
    if len(gpus) > 1:
        raise InvalidInput(
            f"--nccl-tests: mixed GPU types across logs ({', '.join(sorted(gpus))}); "
            "calibrate one GPU type at a time"
        )
    by_tier: dict[int, list[nccl.NcclLog]] = {}
    for log in logs:
        nccl.check_gpu(log, cluster)
        by_tier.setdefault(nccl.tier_index_for(log, cluster), []).append(log)
    fits = []
    for j in sorted(by_tier):
        fit = nccl.fit_tier(by_tier[j], cluster, j)
        tier = cluster.tiers[j]
        new = tier.model_copy(update={"efficiency": fit.efficiency, "latency_us": fit.latency_us})
        cluster = cluster.model_copy(
            update={"tiers": cluster.tiers[:j] + (new,) + cluster.tiers[j + 1 :]}
        )
        src = _files(fit.sources)
        for name, value, default in (
            ("efficiency", fit.efficiency, tier.efficiency),
            ("latency_us", fit.latency_us, tier.latency_us),
        ):
            fits.append(
                FitRecord(
                    constant=f"tiers.{tier.name}.{name}",
                    value=value,
                    default=default,
                    source=src,
                    points=fit.points,
                    max_residual_pct=fit.max_residual_pct,
                    note="alpha-beta fit of nccl-tests times to cost_models.comm",
                )
            )
    cluster = _with(cluster, {}, fits)
    # The measured curves themselves go into the cluster's tables (cost_models.commtable): the
    # Pricer reads every covered collective off them; the fit above prices the rest.
    rows = [row for log in logs for row in nccl.table_rows(log)]
    source = "nccl-tests: " + _files(log.path for log in logs)
    cluster = cluster.model_copy(
        update={"kernels": _merged_tables(cluster, {"source": source, "collectives": rows})}
    )
    book = CollectiveBook(cluster)
    report["nccl"] = tuple(_nccl_log_report(log, cluster, book) for log in logs)
    return cluster


def _files(paths: Iterable[str]) -> str:
    """The files the logs came from, once each: an aiconfigurator table holds one log per
    collective and GPU count, named `FILE [collective xN]` (aic_nccl.read_nccl_perf)."""
    return ", ".join(dict.fromkeys(re.sub(r" \[\w+ x\d+\]$", "", p) for p in paths))


def _nccl_log_report(
    log: nccl.NcclLog, cluster: Cluster, book: CollectiveBook
) -> NcclFileCheck:
    """How the calibrated cluster prices one log's rows: with its curves (max_busbw_error_pct,
    what every command now uses) and on the fitted alpha-beta model alone."""

    def worst(predict) -> float:  # type: ignore[no-untyped-def]
        return max(
            (
                abs(predict(r) / r.busbw_gb_per_s - 1) * 100
                for r in log.rows
                if r.busbw_gb_per_s >= 1.0  # printed as %6.2f: smaller values lose digits
            ),
            default=0.0,
        )

    return NcclFileCheck(
        file=log.path,
        collective=log.collective,
        algorithm=log.algorithm,
        ranks=log.ranks,
        nodes=log.num_nodes,
        tier=cluster.tiers[nccl.tier_index_for(log, cluster)].name,
        max_busbw_error_pct=worst(lambda r: nccl.tabled_busbw_gb_per_s(log, cluster, r, book)),
        model_max_busbw_error_pct=worst(lambda r: nccl.predicted_busbw_gb_per_s(log, cluster, r)),
    )


def _gemm(cluster: Cluster, path: str, report: dict[str, Any]) -> Cluster:
    base = calibration_for_cluster(cluster)
    values: dict[str, float] = {}
    fits = []
    gemm_fits, skipped = compute_fit.fit_gemm(path, cluster)
    for f in gemm_fits:
        eff_key = f"gemm_efficiency_{f.dtype}"
        half_key = "gemm_half_dim" if f.dtype == "bf16" else "gemm_half_dim_fp8"
        values[eff_key], values[half_key] = f.ceiling, f.half_dim
        for key, value, default in (
            (eff_key, f.ceiling, getattr(base, eff_key)),
            (half_key, f.half_dim, base.gemm_half_dim),
        ):
            fits.append(
                FitRecord(
                    constant=key,
                    value=value,
                    default=default,
                    source=path,
                    points=f.points,
                    max_residual_pct=f.max_residual_pct,
                    note=f"fallback curve: {f.dtype} GEMM TFLOP/s / {f.peak_tflops:g} peak "
                    f"vs ceiling x prod d/(d+half_dim), {f.launch_bound} launch-bound rows "
                    f"(< {compute_fit.LAUNCH_BOUND_S * 1e6:g} us) left out",
                )
            )
    report["gemm"] = tuple(gemm_fits)
    report["fallback_skipped"] = tuple(f"{path}: GEMM {x}" for x in skipped)
    return _with(cluster, values, fits)


def _attention(cluster: Cluster, path: str, report: dict[str, Any]) -> Cluster:
    base = calibration_for_cluster(cluster)
    found = {f.kernel: f for f in compute_fit.fit_attention(path, cluster)}
    values: dict[str, float] = {}
    fits = []
    fused = found["fused"].efficiency if "fused" in found else base.attention_efficiency
    if "fused" in found:
        f = found["fused"]
        values["attention_efficiency"] = f.efficiency
        fits.append(
            FitRecord(
                constant="attention_efficiency",
                value=f.efficiency,
                default=base.attention_efficiency,
                source=path,
                points=f.points,
                max_residual_pct=f.max_residual_pct,
                note="fallback curve: fused attention fwd+bwd / bf16 peak (geometric mean), "
                f"{f.launch_bound} launch-bound rows left out",
            )
        )
    if "fa2" in found:
        f = found["fa2"]
        speed = f.efficiency / fused
        values["fa2_attention_speed"] = speed
        fits.append(
            FitRecord(
                constant="fa2_attention_speed",
                value=speed,
                default=base.fa2_attention_speed,
                source=path,
                points=f.points,
                max_residual_pct=f.max_residual_pct,
                note=f"fallback curve: FA2 fwd+bwd efficiency {f.efficiency:.3f} / fused "
                f"{fused:.3f}"
                + ("" if "fused" in found else " (generation default)"),
            )
        )
    report["attention"] = tuple(found.values())
    return _with(cluster, values, fits)


def _merged_tables(cluster: Cluster, data: dict[str, Any]) -> KernelTables:
    """`data`'s kinds over the cluster's own tables (kinds `data` lacks are kept); the result
    is an assumption if any kind kept or given is."""
    if cluster.kernels is not None:
        old = cluster.kernels.model_dump()
        kept = [k for k in TABLES if k not in data and old[k]]
        data = {**{k: old[k] for k in kept}, **data}
        if kept and old["basis"] == "assumption":
            data["basis"] = "assumption"
        if kept and old["source"] not in data["source"]:  # both sources stay named
            data["source"] = f"{data['source']}; {old['source']}"
        for key in ("sustained_bf16_tflops", "sustained_fp8_tflops", "apply_sustained_cap"):
            data.setdefault(key, old[key])
    return KernelTables.model_validate(data)


def _kernels(cluster: Cluster, files: dict[str, Path], source: str, report: dict) -> Cluster:
    """The measured tables themselves go into the cluster (Cluster.kernels): the cost model
    looks every covered shape up instead of fitting a curve to it (issue 32). Kinds not given
    keep the cluster's own tables, if it had any."""
    tables = _merged_tables(cluster, read_kernel_files(files, source))
    report["kernels"] = KernelTablesCheck.of(
        source,
        table_residuals(tables),
        sustained_bf16_tflops=tables.sustained_bf16_tflops,
        sustained_fp8_tflops=tables.sustained_fp8_tflops,
        sustained_applied=tables.apply_sustained_cap,
    )
    return cluster.model_copy(update={"kernels": tables})


def _system_file(cluster: Cluster, path: str, report: dict) -> Cluster:
    """A peer simulator's system file (Calculon) as GEMM and memory-bound tables, marked as an
    assumption (planner/calibrate/system_file.py)."""
    data, rep = system_file.read_system_file(path, cluster.gpu)
    tables = _merged_tables(cluster, data)
    report["system_file"] = SystemFileImport(
        rep["file"], rep["format"], tuple(rep["imported"]), tuple(rep["not_imported"])
    )
    report["kernels"] = KernelTablesCheck.of(
        data["source"], table_residuals(tables), sustained_given=False
    )
    return cluster.model_copy(update={"kernels": tables})


def kernel_files(
    kernels: str | None, per_file: dict[str, str | None], gpu_id: str = ""
) -> tuple[dict[str, Path], str]:
    """Table kind -> CSV of `--kernels DIR` (each file optional; `builtin`: the tables shipped
    for `gpu_id`, models_zoo/kernels) and the per-file flags (`per_file`: kind -> path, e.g.
    --gemm, --grouped-gemm), which replace the folder's file of their kind; and the source the
    tables are named by."""
    files: dict[str, Path] = {}
    source = kernels
    if kernels == BUILTIN:
        folder = builtin_folder(gpu_id, "--kernels builtin")
        files, source = kernel_dir_files(folder, "--kernels builtin"), builtin_source(gpu_id)
    elif kernels is not None:
        files = kernel_dir_files(Path(kernels), "--kernels")
    for kind, path in per_file.items():
        if path is not None:
            files[kind] = Path(path)
    return files, source or ", ".join(str(p) for p in files.values())


def _steps(cluster: Cluster, path: str, report: dict[str, Any]) -> Cluster:
    result = steps.fit_steps(path, cluster)
    report["steps"] = StepsFit.of(result)
    scaled = steps.scaled_cluster(cluster, result["compute_scale"], result["network_scale"])
    note = (
        f"leave-one-out max |error| {result['max_abs_leave_one_out_pct']:.1f}% over "
        f"{len(result['runs'])} runs"
    )
    fits = [
        FitRecord(
            constant=f"steps.{name}",
            value=result[name],
            default=1.0,
            source=path,
            points=len(result["runs"]),
            max_residual_pct=result["max_abs_error_pct"],
            note=f"{note}; bounds {result['bounds'][name][0]:.3f}-{result['bounds'][name][1]:.3f}",
        )
        for name in result["fitted"]
    ]
    old = scaled.calibration or ClusterCalibration()
    return scaled.model_copy(
        update={"calibration": old.model_copy(update={"fits": old.fits + tuple(fits)})}
    )


def calibrate(
    cluster: str | Cluster,
    *,
    nccl_tests: list[str] | None = None,
    gemm: str | None = None,
    attention: str | None = None,
    steps_file: str | None = None,
    name: str | None = None,
    kernels: str | None = None,
    grouped_gemm: str | None = None,
    memory_bound: str | None = None,
    system_file: str | None = None,
    aiconfigurator_nccl: list[str] | None = None,
) -> tuple[Cluster, CalibrationReport]:
    """The calibrated cluster and a report of every fit (its json_dict() is what `planner
    calibrate --json` prints).

    Order: network tiers innermost first (--nccl-tests files and --aiconfigurator-nccl tables,
    aiconfigurator's nccl-tests runs, fitted together), then the GEMM and attention fallback
    curves (fitted on --gemm / --attention), then a peer simulator's system file (--system-file: its GEMM and
    memory tables), then the kernel tables (--kernels and every per-file flag, --gemm and
    --attention included: stored and looked up, not fitted; a measured kind replaces the
    system file's), then the step factors on top of everything the microbenchmarks set."""
    base = models_zoo.load_cluster(cluster)
    per_file = {
        "gemm": gemm,
        "attention": attention,
        "grouped_gemm": grouped_gemm,
        "memory_bound": memory_bound,
    }
    tables = kernels or any(per_file.values())
    logs = [nccl.parse_log(p) for p in nccl_tests or ()]
    logs += [log for p in aiconfigurator_nccl or () for log in aic_nccl.read_nccl_perf(p)]
    if not (logs or gemm or attention or steps_file or tables or system_file):
        raise InvalidInput(
            "calibrate: give at least one of --nccl-tests, --aiconfigurator-nccl, --gemm, "
            "--attention, --kernels, --grouped-gemm, --memory-bound, --system-file, --steps"
        )
    report: dict[str, Any] = {}
    out = base
    if logs:
        out = _nccl(out, logs, report)
    if gemm:
        out = _gemm(out, gemm, report)
    if attention:
        out = _attention(out, attention, report)
    if system_file:
        out = _system_file(out, system_file, report)
    if tables:
        files, source = kernel_files(kernels, per_file, base.gpu.id)
        out = _kernels(out, files, source, report)
    if steps_file:
        out = _steps(out, steps_file, report)
    out = out.model_copy(update={"name": name or f"{base.name}-calibrated"})
    out = Cluster.model_validate(out.model_dump())  # re-check every bound (efficiency <= 1 ...)
    fits = out.calibration.fits if out.calibration else ()
    return out, CalibrationReport(cluster=out.name, fits=tuple(fits), **report)


def cluster_yaml(cluster: Cluster) -> str:
    """The cluster file text: plain YAML that load_cluster reads back to an equal Cluster."""
    data = cluster.model_dump(mode="json", exclude={"kernels"})
    header = (
        "# Written by `planner calibrate`: calibration.fits lists each fitted constant with the\n"
        "# measurement it came from and its largest residual (docs/calibration.md).\n"
    )
    text = header + yaml.safe_dump(data, sort_keys=False, width=100)
    if cluster.kernels is not None:  # one flow-style line per measured row
        tables = {"kernels": cluster.kernels.model_dump(mode="json")}
        text += yaml.safe_dump(tables, sort_keys=False, width=100, default_flow_style=None)
    return text


def write_cluster_file(cluster: Cluster, path: str) -> None:
    try:
        Path(path).write_text(cluster_yaml(cluster))
    except OSError as err:
        raise InvalidInput(f"--out: cannot write {path}: {err.strerror}") from None
