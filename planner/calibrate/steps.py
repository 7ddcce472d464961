"""Fit a few global factors on the user's own measured training steps (`--steps YAML`).

Two factors only, each a physical scale with bounds: `compute_scale` multiplies the GEMM and
attention efficiencies (bounded so no efficiency passes 1, and from below at 0.5), and
`network_scale` multiplies the efficiency of every scale-out tier (tiers after the first; the
same bounds). With fewer than 3 runs only compute_scale is fitted. The fit minimises the squared
log error of step time; leave-one-out error says how well it predicts a run it has not seen.
A factor that ends on its bound is refused with the reason: the runs need more than the physics
allows, so a term is missing from the model (or a run is mis-described), and a factor pinned to
its bound would hide that.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

import models_zoo
from cost_models import estimate
from cost_models.calibration import calibration_for_cluster
from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import (
    CalibrationValues,
    Cluster,
    ClusterCalibration,
    KernelTables,
    Layout,
    ModelSpec,
)

from ..api import make_workload

SCALE_FLOOR = 0.5
GRID = 11


class StepRun(BaseModel):
    """One measured run of the user's (schema of the --steps YAML list items)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model: str | dict[str, Any] = Field(description="preset name, model file, or inline mapping")
    num_gpus: PositiveInt
    seq_len: PositiveInt | None = None
    global_batch: PositiveInt
    precision: Literal["bf16", "fp8"] = "bf16"
    layout: Layout
    measured_step_time_s: PositiveFloat | None = None
    measured_tokens_per_s_per_gpu: PositiveFloat | None = None
    peak_memory_gib: PositiveFloat | None = None


def read_steps(path: str) -> list[StepRun]:
    data = models_zoo.read_data_file(Path(path))
    if not isinstance(data, list) or not data:
        raise InvalidInput(f"{path}: expected a non-empty YAML list of measured runs")
    runs = []
    for i, item in enumerate(data):
        where = f"{path}: run {i + 1}"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}: expected a mapping, got {type(item).__name__}")
        try:
            run = StepRun.model_validate(item)
        except ValidationError as err:
            raise InvalidInput(describe_validation_error(err, where)) from None
        if (run.measured_step_time_s is None) == (run.measured_tokens_per_s_per_gpu is None):
            raise InvalidInput(
                f"{where} ({run.name}): give exactly one of measured_step_time_s, "
                "measured_tokens_per_s_per_gpu"
            )
        runs.append(run)
    return runs


def _model(run: StepRun, where: str) -> ModelSpec:
    if isinstance(run.model, dict):
        try:
            return ModelSpec.model_validate(run.model)
        except ValidationError as err:
            raise InvalidInput(describe_validation_error(err, f"{where}: model")) from None
    return models_zoo.load_model(run.model)


def _scaled_tables(tables: KernelTables | None, compute_scale: float) -> KernelTables | None:
    """Measured GEMM / grouped GEMM / attention rows run compute_scale times as fast: the same
    factor as the curve's efficiencies, so a cluster priced from tables (every Hopper preset) has
    a compute factor to fit too. Memory-bound and collective rows are left as measured, as the
    curve's HBM and link efficiencies are."""
    if tables is None or not tables.has_compute:
        return tables
    return tables.model_copy(
        update={
            "source": f"{tables.source}; GEMM / attention times / {compute_scale:.4g} "
            "(planner calibrate --steps compute_scale)",
            "gemm": tuple((*r[:5], r[5] / compute_scale) for r in tables.gemm),
            "grouped_gemm": tuple((*r[:5], r[5] / compute_scale) for r in tables.grouped_gemm),
            "attention": tuple(
                (*r[:9], r[9] / compute_scale, r[10] / compute_scale) for r in tables.attention
            ),
        }
    )


def _tables_top_scale(cluster: Cluster) -> float:
    """The largest compute_scale that keeps every measured GEMM row at or below its dtype's
    datasheet peak (inf without rows)."""
    tables, gpu = cluster.kernels, cluster.gpu
    peak_tflops = {"bf16": gpu.peak_bf16_tflops, "fp8": gpu.peak_fp8_tflops}
    ratios = [
        2 * m * n * k / (t_ms * 1e-3) / 1e12 / peak_tflops[dtype]
        for m, n, k, dtype, _layout, t_ms in (tables.gemm if tables else ())
        if peak_tflops.get(dtype)
    ]
    return 1.0 / max(ratios) if ratios else math.inf


def scaled_cluster(cluster: Cluster, compute_scale: float, network_scale: float) -> Cluster:
    """`cluster` with its compute efficiencies (and measured GEMM / attention rows, if it has
    kernel tables) x compute_scale, scale-out tiers x network_scale."""
    cal = calibration_for_cluster(cluster)
    old = cluster.calibration or ClusterCalibration()
    values = old.values.model_copy(
        update={
            "gemm_efficiency_bf16": cal.gemm_efficiency_bf16 * compute_scale,
            "gemm_efficiency_fp8": cal.gemm_efficiency_fp8 * compute_scale,
            "attention_efficiency": cal.attention_efficiency * compute_scale,
        }
    )
    tiers = (cluster.tiers[0],) + tuple(
        t.model_copy(update={"efficiency": t.efficiency * network_scale}) for t in cluster.tiers[1:]
    )
    return cluster.model_copy(
        update={
            "tiers": tiers,
            "calibration": old.model_copy(update={"values": values}),
            "kernels": _scaled_tables(cluster.kernels, compute_scale),
        }
    )


def bounds(cluster: Cluster) -> dict[str, tuple[float, float]]:
    cal = calibration_for_cluster(cluster)
    top_compute = min(
        1.0 / max(cal.gemm_efficiency_bf16, cal.gemm_efficiency_fp8, cal.attention_efficiency),
        _tables_top_scale(cluster),
    )
    outer = [t.efficiency for t in cluster.tiers[1:]] or [1.0]
    return {
        "compute_scale": (SCALE_FLOOR, top_compute),
        "network_scale": (SCALE_FLOOR, 1.0 / max(outer)),
    }


def _measured_step_s(run: StepRun, model: ModelSpec) -> float:
    if run.measured_step_time_s is not None:
        return run.measured_step_time_s
    seq = run.seq_len or model.seq_len or 4096
    assert run.measured_tokens_per_s_per_gpu is not None
    return run.global_batch * seq / (run.measured_tokens_per_s_per_gpu * run.num_gpus)


class _Problem:
    def __init__(self, path: str, cluster: Cluster, runs: list[StepRun]):
        self.cluster = cluster
        self.items = []
        self._predicted: dict[tuple[int, float, float], float] = {}
        for i, run in enumerate(runs):
            where = f"{path}: run {i + 1} ({run.name})"
            model = _model(run, where)
            sized = models_zoo.load_cluster(cluster, run.num_gpus)
            workload = make_workload(
                model, seq_len=run.seq_len, global_batch=run.global_batch, precision=run.precision
            )
            if run.layout.world_size != run.num_gpus:
                raise InvalidInput(
                    f"{where}: layout uses {run.layout.world_size} GPUs, num_gpus is {run.num_gpus}"
                )
            try:
                estimate(model, sized, workload, run.layout)
            except InvalidInput as err:
                raise InvalidInput(f"{where}: {err}") from None
            self.items.append((run, model, sized, workload, _measured_step_s(run, model)))

    def predict(self, i: int, cs: float, ns: float) -> float:
        """Run i's step time with the factors; memoised, since every fit (the full one and
        each leave-one-out) starts from the same grid over the same box."""
        key = (i, cs, ns)
        if key not in self._predicted:
            run, model, sized, workload, _ = self.items[i]
            scaled = scaled_cluster(sized, cs, ns)
            self._predicted[key] = estimate(model, scaled, workload, run.layout).step_time_s
        return self._predicted[key]

    def loss(self, idx: list[int], cs: float, ns: float) -> float:
        return sum(math.log(self.predict(i, cs, ns) / self.items[i][4]) ** 2 for i in idx)


def _minimise(
    problem: _Problem, idx: list[int], box: dict[str, tuple[float, float]], two: bool
) -> tuple[float, float]:
    """Grid then two rounds of a finer grid around the best point (log-spaced, inside the box)."""
    (c_lo, c_hi), (n_lo, n_hi) = box["compute_scale"], box["network_scale"]
    best = (1.0, 1.0)
    for _ in range(5):
        cs_grid = [c_lo * (c_hi / c_lo) ** (k / (GRID - 1)) for k in range(GRID)]
        ns_grid = [n_lo * (n_hi / n_lo) ** (k / (GRID - 1)) for k in range(GRID)] if two else [1.0]
        best = min(((c, n) for c in cs_grid for n in ns_grid), key=lambda p: problem.loss(idx, *p))
        step_c = (c_hi / c_lo) ** (2 / (GRID - 1))
        c_lo, c_hi = (
            max(box["compute_scale"][0], best[0] / step_c),
            min(box["compute_scale"][1], best[0] * step_c),
        )
        if two:
            step_n = (n_hi / n_lo) ** (2 / (GRID - 1))
            n_lo, n_hi = (
                max(box["network_scale"][0], best[1] / step_n),
                min(box["network_scale"][1], best[1] * step_n),
            )
    return best


def fit_steps(path: str, cluster: Cluster) -> dict[str, Any]:
    """Fitted factors, per-run and leave-one-out errors; raises InvalidInput if a factor is
    pinned to its bound (the refusal names the factor, the bound and what it means)."""
    runs = read_steps(path)
    if len(runs) < 2:
        raise InvalidInput(f"{path}: one run; fitting a factor needs 2 or more (leave-one-out)")
    problem = _Problem(path, cluster, runs)
    box = bounds(cluster)
    two = len(runs) >= 3 and len(cluster.tiers) > 1
    idx = list(range(len(runs)))
    cs, ns = _minimise(problem, idx, box, two)
    for name, value in (("compute_scale", cs), ("network_scale", ns)):
        if name == "network_scale" and not two:
            continue
        lo, hi = box[name]
        if value <= lo * 1.01 or value >= hi * 0.99:
            side = "upper" if value >= hi * 0.99 else "lower"
            what = (
                "an efficiency would pass 1 of the datasheet peak"
                if side == "upper"
                else f"below {SCALE_FLOOR} of the calibrated rate"
            )
            raise InvalidInput(
                f"{path}: refusing to fit: {name} hits its {side} bound {value:.3f} ({what}); "
                "the runs need more than that physics allows, so a term is missing from the "
                "model or a run is mis-described (layout, precision, GPU count)"
            )
    loo = []
    for i in idx:
        rest = [j for j in idx if j != i]
        c_i, n_i = _minimise(problem, rest, box, two and len(rest) >= 3)
        loo.append(100 * (problem.predict(i, c_i, n_i) / problem.items[i][4] - 1))
    per_run = [
        {
            "name": run.name,
            "measured_step_time_s": meas,
            "predicted_step_time_s": problem.predict(i, cs, ns),
            "error_pct": 100 * (problem.predict(i, cs, ns) / meas - 1),
            "leave_one_out_error_pct": loo[i],
            "peak_memory_gib": run.peak_memory_gib,
            "predicted_peak_memory_gib": estimate(
                model, scaled_cluster(sized, cs, ns), workload, run.layout
            ).peak_memory_gib,
        }
        for i, (run, model, sized, workload, meas) in enumerate(problem.items)
    ]
    return {
        "compute_scale": cs,
        "network_scale": ns if two else 1.0,
        "fitted": ["compute_scale"] + (["network_scale"] if two else []),
        "bounds": box,
        "runs": per_run,
        "max_abs_error_pct": max(abs(r["error_pct"]) for r in per_run),
        "max_abs_leave_one_out_pct": max(abs(v) for v in loo),
    }


__all__ = ["CalibrationValues", "StepRun", "bounds", "fit_steps", "read_steps", "scaled_cluster"]
