"""What `planner calibrate` found, as typed values: planner/report/calibration.py renders them and
`json_dict()` is what `planner calibrate --json` prints (docs/contract.md "Calibration": the
keys and their order are the contract's; nothing here renders or prints)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cost_models.specs import FitRecord

from .compute_fit import AttentionFit, GemmFit


@dataclass(frozen=True)
class NcclFileCheck:
    """One nccl-tests file: the tier it measured and how closely the calibrated cluster
    reproduces its bus bandwidth, with its curves (what every command uses) and on the fitted
    alpha-beta model alone."""

    file: str
    collective: str
    algorithm: str
    ranks: int
    nodes: int
    tier: str
    max_busbw_error_pct: float
    model_max_busbw_error_pct: float


@dataclass(frozen=True)
class TableCheck:
    """One stored kernel table looked up through the written cluster (cost_models.kernels
    .table_residuals): every row, then each row left out and interpolated from the rest."""

    rows: int
    max_residual_pct: float
    median_residual_pct: float
    loo_rows: int
    loo_max_pct: float
    loo_median_pct: float


@dataclass(frozen=True)
class KernelTablesCheck:
    """The kernel tables the cluster now holds (looked up, not fitted)."""

    source: str
    tables: dict[str, TableCheck]
    sustained_bf16_tflops: float | None = None
    sustained_fp8_tflops: float | None = None
    sustained_given: bool = True
    """False for a system file's tables (no sustained-clock figures: the keys are left out)."""
    sustained_applied: bool = False
    """KernelTables.apply_sustained_cap: whether GEMM look-ups are capped at those rates."""

    @classmethod
    def of(cls, source: str, residuals: dict[str, dict[str, float]], **kw: Any) -> KernelTablesCheck:
        return cls(source, {k: TableCheck(**v) for k, v in residuals.items()}, **kw)

    def json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "tables": {k: vars(v) for k, v in self.tables.items()},
        }
        if self.sustained_given:
            out["sustained_bf16_tflops"] = self.sustained_bf16_tflops
            out["sustained_fp8_tflops"] = self.sustained_fp8_tflops
            out["sustained_applied"] = self.sustained_applied
        return out


@dataclass(frozen=True)
class SystemFileImport:
    """A peer simulator's system file: what was imported as tables and what was not."""

    file: str
    format: str
    imported: tuple[str, ...]
    not_imported: tuple[str, ...]

    def json_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "format": self.format,
            "imported": list(self.imported),
            "not_imported": list(self.not_imported),
        }


@dataclass(frozen=True)
class StepsFit:
    """The step factors fitted on the user's measured runs (planner/calibrate/steps.py)."""

    compute_scale: float
    network_scale: float
    fitted: tuple[str, ...]
    bounds: dict[str, tuple[float, float]]
    runs: tuple[dict[str, Any], ...]
    """Per run: its name, measured and predicted step and error (steps.fit_steps)."""
    max_abs_error_pct: float
    max_abs_leave_one_out_pct: float

    @classmethod
    def of(cls, result: dict[str, Any]) -> StepsFit:
        return cls(
            compute_scale=result["compute_scale"],
            network_scale=result["network_scale"],
            fitted=tuple(result["fitted"]),
            bounds=dict(result["bounds"]),
            runs=tuple(result["runs"]),
            max_abs_error_pct=result["max_abs_error_pct"],
            max_abs_leave_one_out_pct=result["max_abs_leave_one_out_pct"],
        )

    def json_dict(self) -> dict[str, Any]:
        return {
            "compute_scale": self.compute_scale,
            "network_scale": self.network_scale,
            "fitted": list(self.fitted),
            "bounds": {k: list(v) for k, v in self.bounds.items()},
            "runs": list(self.runs),
            "max_abs_error_pct": self.max_abs_error_pct,
            "max_abs_leave_one_out_pct": self.max_abs_leave_one_out_pct,
        }


@dataclass(frozen=True)
class CalibrationReport:
    """Every fit of one `calibrate` run; a part is None when its input was not given."""

    cluster: str
    fits: tuple[FitRecord, ...]
    nccl: tuple[NcclFileCheck, ...] | None = None
    gemm: tuple[GemmFit, ...] | None = None
    fallback_skipped: tuple[str, ...] | None = None
    """Why a fallback curve was not fitted (one line each; given with --gemm)."""
    attention: tuple[AttentionFit, ...] | None = None
    system_file: SystemFileImport | None = None
    kernels: KernelTablesCheck | None = None
    steps: StepsFit | None = None
    out: str | None = None
    """The cluster file written (set by the CLI once it is written)."""

    def written_to(self, path: str) -> CalibrationReport:
        return replace(self, out=path)

    def json_dict(self) -> dict[str, Any]:
        """`planner calibrate --json`: the parts given, in the order they are fitted."""
        out: dict[str, Any] = {}
        if self.nccl is not None:
            out["nccl"] = [vars(x) for x in self.nccl]
        if self.gemm is not None:
            out["gemm"] = [vars(x) for x in self.gemm]
            out["fallback_skipped"] = list(self.fallback_skipped or ())
        if self.attention is not None:
            out["attention"] = [vars(x) for x in self.attention]
        if self.system_file is not None:
            out["system_file"] = self.system_file.json_dict()
        if self.kernels is not None:
            out["kernels"] = self.kernels.json_dict()
        if self.steps is not None:
            out["steps"] = self.steps.json_dict()
        out["cluster"] = self.cluster
        out["fits"] = [f.model_dump() for f in self.fits]
        if self.out is not None:
            out["out"] = self.out
        return out
