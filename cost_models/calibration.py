"""Physical calibration constants, one set per GPU generation. Never per record, model or source.

Each value is an achieved fraction of a datasheet peak, of the kind a microbenchmark measures
(cuBLAS GEMM sweeps, FlashAttention benchmarks, STREAM-style copies). Where each figure comes from
is in docs/cost_model.md#calibration. Link efficiencies (NCCL bus bandwidth / line rate) live with
the link tiers in the cluster presets, because they belong to the link type, not the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from .specs import Generation


@dataclass(frozen=True, slots=True)
class GenerationCalibration:
    """Achieved fractions of peak for one GPU generation."""

    gemm_efficiency_bf16: float
    """Large, well-shaped bf16 GEMM: achieved / dense peak (cuBLAS sweeps)."""
    gemm_efficiency_fp8: float
    """Large fp8 GEMM with per-tensor or block scaling: achieved / dense fp8 peak."""
    gemm_half_dim: float
    """GEMM dimension at which tile under-use halves efficiency: eff ~ d / (d + half_dim)."""
    attention_efficiency: float
    """Fused (flash) causal attention, forward and backward together: achieved / bf16 peak."""
    hbm_efficiency: float
    """Achieved / datasheet HBM bandwidth for streaming elementwise kernels."""
    kernel_overhead_s: float
    """Fixed launch and synchronisation cost per transformer layer per pass (fwd or bwd)."""


CALIBRATION: dict[Generation, GenerationCalibration] = {
    "ampere": GenerationCalibration(
        gemm_efficiency_bf16=0.84,
        gemm_efficiency_fp8=0.84,  # no fp8 units: fp8 falls back to bf16 peak
        gemm_half_dim=96.0,
        attention_efficiency=0.50,
        hbm_efficiency=0.85,
        kernel_overhead_s=40e-6,
    ),
    "hopper": GenerationCalibration(
        gemm_efficiency_bf16=0.76,
        gemm_efficiency_fp8=0.62,
        gemm_half_dim=160.0,
        attention_efficiency=0.50,
        hbm_efficiency=0.85,
        kernel_overhead_s=40e-6,
    ),
    "blackwell": GenerationCalibration(
        gemm_efficiency_bf16=0.72,
        gemm_efficiency_fp8=0.60,
        gemm_half_dim=224.0,
        attention_efficiency=0.50,
        hbm_efficiency=0.85,
        kernel_overhead_s=40e-6,
    ),
}


def calibration_for(generation: Generation) -> GenerationCalibration:
    return CALIBRATION[generation]
