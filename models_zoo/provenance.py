"""Which constants of a GPU or cluster preset are datasheet values, which were measured (fitted on
published runs, or by `planner calibrate` on the user's own measurements) and which are
assumptions: the `planner presets --constants` listing (issue 18)."""

from __future__ import annotations

from typing import Any

from cost_models.calibration import (
    ATTENTION_BACKWARD_RULE,
    CALIBRATION,
    CALIBRATION_BASIS,
    FITTED_CONSTANTS,
    attention_speeds,
    calibration_for_cluster,
    generation_for_gpu,
)
from cost_models.compute import fp4_speed_over_fp8
from cost_models.specs import Cluster, GpuSpec

from .kernel_tables import builtin_index, builtin_source

DATASHEET_FIELDS = (
    "peak_bf16_tflops",
    "peak_fp8_tflops",
    "peak_fp4_tflops",
    "hbm_gib",
    "hbm_bandwidth_gb_per_s",
    "nvlink_gb_per_s",
    "nvlink_domain_size",
)


def gpu_constants(gpu: GpuSpec) -> list[dict[str, Any]]:
    """One row per constant: name, value, basis (datasheet | measured | assumption), why."""
    rows = [
        {"constant": f, "value": getattr(gpu, f), "basis": "datasheet", "why": gpu.source}
        for f in DATASHEET_FIELDS
    ]
    for f in ("mamf_bf16_tflops", "mamf_fp8_tflops"):
        value = getattr(gpu, f)
        if value is not None:
            why = gpu.mamf_source
            rows.append({"constant": f, "value": value, "basis": "measured", "why": why})
    speed = gpu.gemm_speed_vs_flagship
    for dtype in ("bf16", "fp8") if speed is not None else ():
        if getattr(speed, dtype) is not None:
            name, why = f"gemm_speed_vs_flagship.{dtype}", speed.source
            rows.append(
                {"constant": name, "value": getattr(speed, dtype), "basis": "measured", "why": why}
            )
    rows += _attention_speed_rows(gpu)
    rows += _fp4_speed_rows(gpu)
    fitted_on = CALIBRATION_BASIS.get(gpu.generation, ())
    cal = generation_for_gpu(gpu)
    for f in FITTED_CONSTANTS:
        if gpu.id in fitted_on:
            basis, why = "measured", f"fitted on published {', '.join(fitted_on)} runs"
        elif fitted_on:
            basis = "assumption"
            why = f"{gpu.generation} value fitted on {', '.join(fitted_on)} runs, none on {gpu.id}"
        else:
            basis, why = "assumption", f"no published {gpu.generation} runs; from public reports"
        if getattr(cal, f) != getattr(CALIBRATION[gpu.generation], f):
            why = f"{why}: {_part_scaling(gpu, f)}"
        rows.append({"constant": f, "value": getattr(cal, f), "basis": basis, "why": why})
    for f in ("gemm_half_dim", "hbm_efficiency", "kernel_overhead_s"):
        rows.append(
            {
                "constant": f,
                "value": getattr(cal, f),
                "basis": "assumption",
                "why": "set from microbenchmarks and the literature (docs/cost_model.md)",
            }
        )
        if f == "hbm_efficiency" and gpu.hbm_streaming_efficiency is not None:
            rows[-1] = _streaming_row(gpu, getattr(cal, f))
    rows.append(shipped_tables_row(gpu.id))
    rows.append(
        {
            "constant": "host_cpu",
            "value": gpu.host_cpu,
            "basis": "datasheet" if gpu.host_cpu_source else "assumption",
            "why": gpu.host_cpu_source or "not stated: an x86 host (cost_models/host.py)",
        }
    )
    rows.append(
        {
            "constant": "host_link_gb_per_s",
            "value": gpu.host_link_gb_per_s,
            "basis": "datasheet"
            if gpu.host_link_source and not gpu.host_link_assumed
            else "assumption",
            "why": gpu.host_link_source
            or "not stated: CPU activation offloading is refused on this GPU",
        }
    )
    return rows


def _streaming_row(gpu: GpuSpec, value: float) -> dict[str, Any]:
    """The hbm_efficiency row of a part with a measured hbm_streaming_efficiency (it replaces the
    generation's assumed value: cost_models.calibration.generation_for_gpu)."""
    measured = gpu.hbm_streaming_efficiency
    assert measured is not None
    return {
        "constant": "hbm_efficiency",
        "value": value,
        "basis": "measured",
        "why": f"this part's hbm_streaming_efficiency (replaces the {gpu.generation} value "
        f"{CALIBRATION[gpu.generation].hbm_efficiency:g}): {measured.source}",
    }


def _fp4_speed_rows(gpu: GpuSpec) -> list[dict[str, Any]]:
    """The NVFP4 GEMM rate over fp8 an NVFP4 part's GEMMs are priced at
    (cost_models.compute.gemm_hardware): measured where the part has fp4_gemm_speed (on this
    part, or carried from another: its source says how), else the datasheet peak ratio, an
    assumption."""
    if gpu.peak_fp4_tflops is None or gpu.peak_fp8_tflops is None:
        return []
    ratio, measured = fp4_speed_over_fp8(gpu)
    if measured:
        basis, why = "measured", gpu.fp4_gemm_speed.source  # type: ignore[union-attr]
    else:
        basis = "assumption"
        why = ("no NVFP4 GEMM measured on this part: NVFP4 GEMMs run at the fp8 efficiency on "
               "the datasheet peak_fp4_tflops, i.e. at the peak ratio")  # fmt: skip
    return [{"constant": "fp4_gemm_speed.over_fp8", "value": round(ratio, 6), "basis": basis,
             "why": why}]  # fmt: skip


def _attention_speed_rows(gpu: GpuSpec) -> list[dict[str, Any]]:
    """attention_speed_vs_flagship's measured forward speeds and the backward's assumed one."""
    speed = gpu.attention_speed_vs_flagship
    if speed is None:
        return []
    rows = [
        {"constant": f"attention_speed_vs_flagship.{f}", "value": getattr(speed, f),
         "basis": "measured", "why": speed.source}
        for f in ("forward", "forward_mla") if getattr(speed, f) is not None
    ]  # fmt: skip
    rows.append(
        {
            "constant": "attention_backward_speed_vs_flagship",
            "value": round(attention_speeds(gpu)[2], 6),
            "basis": "assumption",
            "why": ATTENTION_BACKWARD_RULE,
        }
    )
    return rows


def _part_scaling(gpu: GpuSpec, constant: str) -> str:
    """How the generation's value became this part's (cost_models.calibration.generation_for_gpu)."""
    dtype = "fp8" if constant.endswith("fp8") else "bf16"
    base = getattr(CALIBRATION[gpu.generation], constant)
    if constant == "attention_efficiency":
        cal, speed = generation_for_gpu(gpu), gpu.attention_speed_vs_flagship
        return (
            f"{base} (the flagship's) x this part's measured attention_speed_vs_flagship.forward "
            f"{speed.forward:g} x the flagship's peak_bf16_tflops / this part's: the forward "
            f"(MLA forward {cal.attention_mla_efficiency:.3f}; backward "
            f"{cal.attention_backward_efficiency:.3f} at gemm_speed_vs_flagship.bf16, an "
            "assumption)"
        )
    speed = gpu.gemm_speed_vs_flagship
    if speed is not None and getattr(speed, dtype) is not None:
        return (
            f"{base} (the flagship's, at most its MAMF / peak) x this part's measured "
            f"gemm_speed_vs_flagship.{dtype} {getattr(speed, dtype):g} x the flagship's "
            f"peak_{dtype}_tflops / this part's (relative speed, measured)"
        )
    mamf = f"mamf_{dtype}_tflops"
    return (
        f"{base} x this part's {mamf} / peak over the generation flagship's (measured), "
        f"at most {mamf} / peak"
    )


def shipped_tables_row(gpu_id: str) -> dict[str, Any]:
    """Whether kernel tables measured on this GPU ship with the package (models_zoo/kernels):
    measured (by whom, when, where), or none found, so efficiency curves price its kernels."""
    entry = builtin_index().get(gpu_id)
    if entry is not None and entry.get("folder"):
        return {
            "constant": "kernel_tables",
            "value": entry["folder"],
            "basis": "measured",
            "why": f"{builtin_source(gpu_id)}; "
            + (f"{entry['note']}; " if entry.get("note") else "")
            + "its attention rows price the Hopper presets' attention (kernels: {builtin: ID, "
            "tables: [attention]}, docs/calibration.md \"Decision, 2026-11-28\"); every table "
            "where a cluster says kernels: builtin",
        }
    note = entry["note"] if entry else "not in models_zoo/kernels/index.json"
    return {
        "constant": "kernel_tables",
        "value": None,
        "basis": "assumption",
        "why": f"none shipped: {note}; efficiency curves price every kernel",
    }


def _cluster_tables_row(cluster: Cluster) -> dict[str, Any]:
    """The kernel tables this cluster prices with (Cluster.kernels), if any."""
    k = cluster.kernels
    if k is None:
        return {
            "constant": "kernels",
            "value": None,
            "basis": "assumption",
            "why": "no kernel tables: efficiency curves price every kernel",
        }
    counts = ", ".join(
        f"{len(getattr(k, kind))} {kind}"
        for kind in ("gemm", "attention", "grouped_gemm", "memory_bound", "collectives")
        if getattr(k, kind)
    )
    verb = "measured" if k.basis == "measured" else "assumed (imported settings)"
    return {
        "constant": "kernels",
        "value": "tables",
        "basis": k.basis,
        "why": f"{counts} rows {verb}: {k.source}; shapes outside them on the curves"
        + ("; collectives outside the curves on the network model" if k.collectives else ""),
    }


def cluster_constants(cluster: Cluster) -> list[dict[str, Any]]:
    """Link tiers (bandwidth from datasheets; efficiency and latency assumed unless a calibration
    fitted them) and the calibration overrides of a calibrated cluster file."""
    fitted = {f.constant: f for f in (cluster.calibration.fits if cluster.calibration else ())}
    rows = []
    for t in cluster.tiers:
        rows.append(
            {
                "constant": f"tiers.{t.name}.bandwidth_gb_per_s",
                "value": t.bandwidth_gb_per_s,
                "basis": "datasheet",
                "why": cluster.source,
            }
        )
        for f in ("efficiency", "latency_us"):
            key = f"tiers.{t.name}.{f}"
            rec = fitted.get(key)
            rows.append(
                {
                    "constant": key,
                    "value": getattr(t, f),
                    "basis": "measured" if rec else "assumption",
                    "why": f"fitted on {rec.source}" if rec else "preset value (see source)",
                }
            )
    cal = calibration_for_cluster(cluster)
    for row in gpu_constants(cluster.gpu):
        rec = fitted.get(row["constant"])
        if rec is not None:
            row = {
                **row,
                "value": getattr(cal, row["constant"]),
                "basis": "measured",
                "why": f"fitted on {rec.source}",
            }
        rows.append(row)
    rows.append(_cluster_tables_row(cluster))
    listed = {r["constant"] for r in rows}
    for key, rec in fitted.items():
        if key not in listed:
            rows.append(
                {
                    "constant": key,
                    "value": getattr(cal, key, rec.value),
                    "basis": "measured",
                    "why": f"fitted on {rec.source}",
                }
            )
    return rows
