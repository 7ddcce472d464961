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
    grouped_gemm_efficiency: float
    """Expert grouped GEMMs relative to a dense GEMM of the same shape (ragged tiles, metadata)."""
    moe_layer_overhead_s: float
    """Fixed cost per MoE layer per pass: routing, sort/permute bookkeeping, host sync of counts."""


MOE_LOAD_IMBALANCE = 1.15
"""Busiest EP rank's routed tokens / mean with auxiliary-loss balancing (sets expert time and the
all-to-all, since every rank waits for the busiest)."""


# Fitted by bench/fit_calibration.py on ../shared/data/published_runs.yaml, each constant bounded
# to the range its microbenchmarks allow (docs/cost_model.md#calibration), then rounded.
CALIBRATION: dict[Generation, GenerationCalibration] = {
    "ampere": GenerationCalibration(
        gemm_efficiency_bf16=0.71,
        gemm_efficiency_fp8=0.71,  # no fp8 units: fp8 runs at the bf16 peak
        gemm_half_dim=350.0,
        attention_efficiency=0.68,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
    ),
    "hopper": GenerationCalibration(
        gemm_efficiency_bf16=0.64,
        gemm_efficiency_fp8=0.47,
        gemm_half_dim=350.0,
        attention_efficiency=0.35,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
    ),
    "blackwell": GenerationCalibration(
        gemm_efficiency_bf16=0.63,
        gemm_efficiency_fp8=0.55,
        gemm_half_dim=350.0,
        attention_efficiency=0.57,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
    ),
}


def calibration_for(generation: Generation) -> GenerationCalibration:
    return CALIBRATION[generation]
