"""Does the best plan stay best across the calibration's ranges? (`plan --stability`, issue 18)

Each assumption is one constant the ranking leans on. Its range is the calibrated value +- its
fit residual (at least RELATIVE_FLOOR) where the cluster file measured it, else the documented
range of the default (docs/calibration.md#stability: the bounds of docs/cost_model.md#calibration
for the compute constants, nccl-tests bus bandwidth / line rate for the links). At each end of
each range the search runs again; the answer is "stable" or, per end where another plan wins,
which plan takes over under which assumption and by how much.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cost_models import estimate
from cost_models.calibration import calibration_for_cluster
from cost_models.errors import NoFeasiblePlan
from cost_models.specs import CalibrationValues, Cluster, ClusterCalibration

from ..types import PlanResult

RELATIVE_FLOOR = 0.03
GEMM_RANGE = {  # docs/cost_model.md#calibration bounds per generation
    "ampere": (0.70, 0.90),
    "hopper": (0.60, 0.80),
    "blackwell": (0.55, 0.80),
    "cdna3": (0.40, 0.70),
    "cdna4": (0.45, 0.75),
}
ATTENTION_RANGE = (0.35, 0.70)
INTER_NODE_RANGE = (0.60, 0.95)  # IB / RoCE nccl-tests busbw / line rate
NVLINK_RANGE = (0.70, 0.90)  # NVLink ring busbw / line rate without NVLS


def _override(cluster: Cluster, **values: float) -> Cluster:
    old = cluster.calibration or ClusterCalibration()
    merged = CalibrationValues.model_validate({**old.values.model_dump(), **values})
    return cluster.model_copy(update={"calibration": old.model_copy(update={"values": merged})})


def _set_gemm(cluster: Cluster, value: float) -> Cluster:
    cal = calibration_for_cluster(cluster)
    ratio = value / cal.gemm_efficiency_bf16
    return _override(
        cluster,
        gemm_efficiency_bf16=value,
        gemm_efficiency_fp8=min(1.0, cal.gemm_efficiency_fp8 * ratio),
    )


def _set_attention(cluster: Cluster, value: float) -> Cluster:
    return _override(cluster, attention_efficiency=value)


def _set_tiers(cluster: Cluster, value: float, outer: bool) -> Cluster:
    tiers = tuple(
        t.model_copy(update={"efficiency": min(1.0, value)}) if (j > 0) == outer else t
        for j, t in enumerate(cluster.tiers)
    )
    return cluster.model_copy(update={"tiers": tiers})


SETTERS: dict[str, Callable[[Cluster, float], Cluster]] = {
    "gemm_efficiency": _set_gemm,
    "attention_efficiency": _set_attention,
    "inter_node_efficiency": lambda c, v: _set_tiers(c, v, outer=True),
    "nvlink_efficiency": lambda c, v: _set_tiers(c, v, outer=False),
}


def _fitted_range(cluster: Cluster, constant: str, value: float) -> tuple[float, float] | None:
    fits = cluster.calibration.fits if cluster.calibration else ()
    rec = next((f for f in fits if f.constant == constant), None)
    if rec is None:
        return None
    rel = max(RELATIVE_FLOOR, rec.max_residual_pct / 100)
    return value * (1 - rel), min(1.0, value * (1 + rel))


def default_ranges(cluster: Cluster) -> dict[str, tuple[float, float]]:
    """Range per assumption: calibrated value +- residual where measured, else documented."""
    cal = calibration_for_cluster(cluster)
    ranges = {
        "gemm_efficiency": _fitted_range(cluster, "gemm_efficiency_bf16", cal.gemm_efficiency_bf16)
        or GEMM_RANGE[cluster.gpu.generation],
        "attention_efficiency": _fitted_range(
            cluster, "attention_efficiency", cal.attention_efficiency
        )
        or ATTENTION_RANGE,
    }
    inner = cluster.tiers[0]
    ranges["nvlink_efficiency"] = (
        _fitted_range(cluster, f"tiers.{inner.name}.efficiency", inner.efficiency) or NVLINK_RANGE
    )
    if len(cluster.tiers) > 1:
        outer = cluster.tiers[1]
        ranges["inter_node_efficiency"] = (
            _fitted_range(cluster, f"tiers.{outer.name}.efficiency", outer.efficiency)
            or INTER_NODE_RANGE
        )
    return ranges


@dataclass(frozen=True)
class Check:
    assumption: str
    value: float
    best: str
    same: bool
    gain_pct: float  # new best vs the baseline best, both priced under this assumption

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def short(layout: Any) -> str:
    parts = [f"TP{layout.tp}", f"PP{layout.pp}", f"DP{layout.dp}"]
    parts += [f"CP{layout.cp}"] * (layout.cp > 1) + [f"EP{layout.ep}"] * (layout.ep > 1)
    parts += [f"VP{layout.vp}"] * (layout.vp > 1)
    order = "/".join(a.value for a in layout.order)
    return (
        f"{' '.join(parts)} mb{layout.micro_batch} {layout.recompute} z{layout.zero_stage} "
        f"({order})"
    )


def stability(
    result: PlanResult,
    replan: Callable[[Cluster], PlanResult],
    ranges: dict[str, tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """Re-plan at both ends of every range; `replan(cluster)` runs the same search on a cluster.

    Returns {"stable", "baseline", "ranges", "checks", "line"} (the plan JSON's `stability`)."""
    base = result.best
    ranges = {**default_ranges(result.cluster), **(ranges or {})}
    checks: list[Check] = []
    for name, (lo, hi) in ranges.items():
        if name not in SETTERS:
            continue
        for value in (lo, hi):
            cluster = SETTERS[name](result.cluster, value)
            try:
                new = replan(cluster).best
            except NoFeasiblePlan:
                continue
            same = new.layout == base.layout
            gain = 0.0
            if not same:  # price the baseline's layout under the same assumption
                old = estimate(
                    result.model,
                    cluster,
                    result.workload,
                    base.layout,
                    layers_per_stage=base.layers_per_stage,
                )
                gain = 100 * (old.step_time_s / new.step_time_s - 1)
            checks.append(Check(name, value, short(new.layout), same, gain))
    takeovers = [c for c in checks if not c.same and c.gain_pct > 0.05]
    if not takeovers:
        line = f"stable: {short(base.layout)} stays best at both ends of " + ", ".join(
            f"{n} {lo:.3g}-{hi:.3g}" for n, (lo, hi) in ranges.items() if n in SETTERS
        )
    else:
        line = "not stable: " + "; ".join(
            f"at {c.assumption}={c.value:.3g} {c.best} takes over ({c.gain_pct:.1f}% faster)"
            for c in takeovers
        )
    return {
        "stable": not takeovers,
        "baseline": short(base.layout),
        "ranges": {n: list(r) for n, r in ranges.items() if n in SETTERS},
        "checks": [c.as_dict() for c in checks],
        "line": line,
    }
