"""Physical calibration constants, one set per GPU generation. Never per record, model or source.

Each value is an achieved fraction of a datasheet peak, of the kind a microbenchmark measures
(cuBLAS GEMM sweeps, FlashAttention benchmarks, STREAM-style copies). Where each figure comes from
is in docs/cost_model.md#calibration. Link efficiencies (NCCL bus bandwidth / line rate) live with
the link tiers in the cluster presets, because they belong to the link type, not the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from .errors import InvalidInput
from .specs import (
    AttentionSpeed,
    CalibrationValues,
    Cluster,
    GemmSpeed,
    Generation,
    GpuSpec,
    HbmStreaming,
)
from .units import GB


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
    expert_gemm_overhead_s: float = 32e-6
    """Host launch cost per local expert GEMM after the dispatcher's host sync (quantize + GEMM
    launches of TE GroupedLinear, ~4 kernels at ~8 us each)."""
    sm_count: int = 132
    """Streaming multiprocessors of the generation's flagship part (A100 108, H100 132, B200 148)."""
    fa2_attention_speed: float = 1.0
    """FlashAttention-2 speed relative to the generation's fused attention kernel (1.0 where FA2
    is that kernel, i.e. Ampere)."""
    gemm_half_dim_fp8: float | None = None
    """fp8 GEMM roll-off dimension where a calibration measured one; None: gemm_half_dim."""
    mamf_bf16_fraction: float | None = None
    """Measured Maximum Achievable Matmul FLOPS / datasheet peak of the generation's flagship
    part (the part sm_count names), bf16: the sustained-clock reference a part of the same
    generation is compared with (generation_for_gpu). Equal to that part's preset mamf_* / peak
    (tests/unit/cost_models/test_mamf_ceiling.py checks it); None: not measured."""
    mamf_fp8_fraction: float | None = None
    """The same in fp8 (e4m3)."""
    flagship_peak_bf16_tflops: float | None = None
    """The flagship's datasheet bf16 peak: a part's measured GEMM speed relative to the
    flagship (GpuSpec.gemm_speed_vs_flagship) turns into an efficiency on the part's own peak
    through it (generation_for_gpu). Equal to the flagship preset's (test_gemm_speed.py)."""
    flagship_peak_fp8_tflops: float | None = None
    """The same in fp8."""
    attention_backward_efficiency: float | None = None
    """Attention backward: achieved / bf16 peak where a part's backward runs at another speed
    than its forward (GpuSpec.attention_speed_vs_flagship: generation_for_gpu); None:
    attention_efficiency (the constant covers both passes)."""
    attention_mla_efficiency: float | None = None
    """Attention forward of an MLA model (q/k head dim 192, v 128) where the part's measured
    speed for it differs (AttentionSpeed.forward_mla); None: attention_efficiency."""

    @property
    def comm_sm_fraction(self) -> float:
        """Share of the SMs a concurrently running NCCL kernel takes from an overlapped kernel."""
        return COMM_KERNEL_SMS / self.sm_count

    @property
    def tp_ring_sm_fraction(self) -> float:
        """Share of the SMs a TP-overlap all-gather chunk takes (UB_RING_EXCHANGE_SMS)."""
        return UB_RING_EXCHANGE_SMS / self.sm_count


UB_RING_EXCHANGE_SMS = 1
"""SMs a Transformer Engine userbuffers ring-exchange all-gather takes from its partner GEMM: the
chunks move as peer-to-peer copies (copy engines), one SM for the flags (TE RingExchangeOverlapCfg
num_sm default 1; NeMo nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py: qkv_fprop,
fc1_fprop, proj_dgrad, fc2_dgrad `ring_exchange` in every H100 config). The reduce-scatter side
(proj_fprop, fc2_fprop `pipeline`, qkv_wgrad `bulk`) reduces on SMs: num_sm 24 in the same files,
COMM_KERNEL_SMS. PyTorch async TP (torchtitan) also moves its chunks by copy engine (symmetric
memory); its reduce-scatter's reduction is assumed to take SMs like TE's."""

COMM_KERNEL_SMS = 24
"""Thread blocks (one per channel, each pinned to an SM) an NCCL collective kernel occupies while
it runs: 24 for an all-gather on H100 in NVIDIA's forum measurement (docs/cost_model.md#overlap).
A kernel overlapped with it runs on the remaining SMs, so overlap hides communication but slows
the compute it hides behind."""


def overlap_slowdown_s(hidden_comm_s: float, cal: GenerationCalibration) -> float:
    """Extra compute seconds while `hidden_comm_s` of communication runs beside it.

    For that long the compute has (1 - f) of the SMs, f = cal.comm_sm_fraction, so the work it
    would have done in hidden_comm_s takes hidden_comm_s / (1 - f): an excess of f / (1 - f).
    """
    f = cal.comm_sm_fraction
    return max(0.0, hidden_comm_s) * f / (1.0 - f)


MOE_LOAD_IMBALANCE = 1.15
"""Busiest EP rank's routed tokens / mean with auxiliary-loss balancing (sets expert time and the
all-to-all, since every rank waits for the busiest)."""


# Fitted by bench/fit_calibration.py on ../shared/data/published_runs.yaml, each constant bounded
# to the range its microbenchmarks allow (docs/cost_model.md#calibration), then rounded. Checked
# 2026-11-27 with its leave-one-source-out guard (`python bench/fit_calibration.py`, Huber
# objective): no refit both beat these values out of fold and kept the held-out rows, so none was
# taken (docs/cost_model.md "Guarded refit").
CALIBRATION: dict[Generation, GenerationCalibration] = {
    "ampere": GenerationCalibration(
        gemm_efficiency_bf16=0.71,
        gemm_efficiency_fp8=0.71,  # no fp8 units: fp8 runs at the bf16 peak
        gemm_half_dim=325.0,
        attention_efficiency=0.68,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
        sm_count=108,
        mamf_bf16_fraction=271.2 / 312,  # A100 SXM (models_zoo/gpus/a100-sxm-80gb.json)
    ),
    "hopper": GenerationCalibration(
        gemm_efficiency_bf16=0.68,
        gemm_efficiency_fp8=0.65,
        gemm_half_dim=325.0,
        attention_efficiency=0.35,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
        sm_count=132,
        fa2_attention_speed=0.6,
        mamf_bf16_fraction=794.5 / 989.4,  # H100 SXM (models_zoo/gpus/h100-sxm-80gb.json)
        mamf_fp8_fraction=1402.6 / 1978.9,
        flagship_peak_bf16_tflops=989.4,
        flagship_peak_fp8_tflops=1978.9,
    ),
    "blackwell": GenerationCalibration(
        gemm_efficiency_bf16=0.77,
        gemm_efficiency_fp8=0.59,
        gemm_half_dim=325.0,
        attention_efficiency=0.57,
        hbm_efficiency=0.85,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
        sm_count=148,
        fa2_attention_speed=0.6,
        mamf_bf16_fraction=1745.0 / 2250,  # B200 (models_zoo/gpus/b200.json)
        mamf_fp8_fraction=3432.5 / 4500,
        flagship_peak_bf16_tflops=2250.0,
        flagship_peak_fp8_tflops=4500.0,
    ),
    # AMD Instinct: no published runs in the project's data, so every efficiency below is an
    # assumption (CALIBRATION_BASIS), set from public microbenchmark reports and to be replaced
    # by `planner calibrate` on the user's own sweeps. sm_count holds compute units (CUs).
    "cdna3": GenerationCalibration(
        gemm_efficiency_bf16=0.55,  # hipBLASLt bf16 GEMMs reported at ~half the 1,307 TFLOP/s peak
        gemm_efficiency_fp8=0.45,
        gemm_half_dim=325.0,
        attention_efficiency=0.35,  # CK / Triton flash attention fwd+bwd
        hbm_efficiency=0.8,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
        sm_count=304,
    ),
    "cdna4": GenerationCalibration(
        gemm_efficiency_bf16=0.6,
        gemm_efficiency_fp8=0.5,
        gemm_half_dim=325.0,
        attention_efficiency=0.4,
        hbm_efficiency=0.8,
        kernel_overhead_s=5e-6,
        grouped_gemm_efficiency=0.73,
        moe_layer_overhead_s=200e-6,
        sm_count=256,
    ),
}

FITTED_CONSTANTS = ("gemm_efficiency_bf16", "gemm_efficiency_fp8", "attention_efficiency")
"""The constants bench/fit_calibration.py fits on published runs; the others are set from
microbenchmarks and the literature (docs/cost_model.md#calibration)."""
CALIBRATION_BASIS: dict[Generation, tuple[str, ...]] = {
    "ampere": ("a100-sxm-40gb", "a100-sxm-80gb"),
    "hopper": ("h100-sxm-80gb", "h100-sxm-96gb-hbm2e-500w", "h200-sxm-141gb", "h800-sxm-80gb"),
    "blackwell": ("b200", "gb200", "gb300"),
    "cdna3": (),
    "cdna4": (),
}
"""GPU ids whose published runs (../shared/data/published_runs.yaml) FITTED_CONSTANTS were
fitted on, per generation; an empty tuple means the generation's values are assumptions."""


def hbm_bytes_per_s(gpu: GpuSpec, cal: GenerationCalibration) -> float:
    """Achieved HBM bytes/s of streaming kernels (elementwise, optimizer, CP merges): the
    datasheet GB/s times `cal`'s hbm_efficiency (the generation's, the part's measured
    hbm_streaming_efficiency through generation_for_gpu, or a calibrated cluster's override).
    The one place it is written."""
    return gpu.hbm_bandwidth_gb_per_s * GB * cal.hbm_efficiency


def calibration_for(generation: Generation) -> GenerationCalibration:
    return CALIBRATION[generation]


def mamf_ceilings(gpu: GpuSpec) -> tuple[float | None, float | None]:
    """(bf16, fp8) measured Maximum Achievable Matmul FLOPS of the part as fractions of its
    datasheet peaks (GpuSpec.mamf_*; None where not measured)."""
    bf16 = None if gpu.mamf_bf16_tflops is None else gpu.mamf_bf16_tflops / gpu.peak_bf16_tflops
    fp8 = None
    if gpu.mamf_fp8_tflops is not None and gpu.peak_fp8_tflops is not None:
        fp8 = gpu.mamf_fp8_tflops / gpu.peak_fp8_tflops
    return bf16, fp8


def generation_for_gpu(gpu: GpuSpec) -> GenerationCalibration:
    """The generation's constants for one part: its large-GEMM ceilings scaled to the part.

    The generation constants are one value for every part of a generation, but a datasheet peak
    is the tensor-core rate at the part's boost clock, and the clock a part sustains under its
    power cap is the part's own: GB200's 2,500 TFLOP/s assumes ~11 % more clock than B200's
    2,250 on the same 148 SMs, and Blackwell Ultra (B300, GB300) runs the same datasheet peaks
    at a higher power cap. Tensor-core throughput follows the sustained clock at any
    utilisation, so every GEMM of the part runs at the flagship's speed times the part's
    measured ratio, not only the largest ones. The ratio, by preference:

    1. gemm_speed_vs_flagship (measured relative speed: the median, over a training shape
       set, of the flagship's GEMM time over this part's, same collector and software):
       efficiency = flagship efficiency (at most its MAMF / peak) x speed x flagship peak /
       part peak (_at_speed);
    2. else the part's MAMF fraction over the flagship's (mamf_*_fraction), and never above the
       part's own MAMF / peak (mamf_ceilings, _held): MAMF is one best shape of a brute-force
       search, run on each part with its own software, so a ratio of two is noisier than a
       median over shared shapes (docs/calibration.md "Relative GEMM speed between parts");
    3. else the generation values.

    The HBM fraction of streaming kernels (hbm_efficiency) is the part's measured
    hbm_streaming_efficiency where it has one (_streaming), else the generation's."""
    cal = CALIBRATION[gpu.generation]
    speed = gpu.gemm_speed_vs_flagship
    if speed is None:
        part = _for_part(cal, *mamf_ceilings(gpu))
    else:
        part = _at_speed(
            cal, speed, gpu.id, gpu.peak_bf16_tflops, gpu.peak_fp8_tflops, mamf_ceilings(gpu)[1]
        )
        attention = gpu.attention_speed_vs_flagship
        if attention is not None:
            part = _attention_at_speed(part, attention, speed.bf16, gpu.id, gpu.peak_bf16_tflops)
    return _streaming(part, gpu.hbm_streaming_efficiency)


@lru_cache(maxsize=64)
def _streaming(cal: GenerationCalibration, measured: HbmStreaming | None) -> GenerationCalibration:
    """`cal` with the part's measured streaming-kernel HBM fraction (GpuSpec
    hbm_streaming_efficiency) in place of the generation's hbm_efficiency, where it has one."""
    if measured is None or measured.value == cal.hbm_efficiency:
        return cal
    return replace(cal, hbm_efficiency=measured.value)


@lru_cache(maxsize=64)
def _attention_at_speed(
    cal: GenerationCalibration,
    speed: AttentionSpeed,
    gemm_bf16_speed: float,
    gpu_id: str,
    peak_bf16_tflops: float,
) -> GenerationCalibration:
    """The flagship's attention_efficiency carried to the part by its measured speeds, as
    _scaled carries GEMMs: the forward (and MLA forward) at the measured attention-forward
    speed, the backward at the part's measured bf16 GEMM speed (ATTENTION_BACKWARD_RULE)."""
    if cal.flagship_peak_bf16_tflops is None:
        raise InvalidInput(
            f"gpu {gpu_id}: attention_speed_vs_flagship is given but its generation has no "
            "flagship part to be relative to (cost_models.calibration); leave it null"
        )
    ratio = cal.flagship_peak_bf16_tflops / peak_bf16_tflops
    mla = speed.forward if speed.forward_mla is None else speed.forward_mla
    out = {}
    for name, value in (("forward", speed.forward), ("forward_mla", mla)):
        out[name] = _attention_scaled(cal.attention_efficiency, value, ratio, gpu_id, name)
    backward = cal.attention_efficiency * gemm_bf16_speed * ratio
    return replace(
        cal,
        attention_efficiency=out["forward"],
        attention_mla_efficiency=out["forward_mla"],
        attention_backward_efficiency=backward,
    )


def _attention_scaled(
    efficiency: float, speed: float, peak_ratio: float, gpu_id: str, field: str
) -> float:
    out = efficiency * speed * peak_ratio
    if out > 1.0:
        raise InvalidInput(
            f"gpu {gpu_id}: attention_speed_vs_flagship.{field} {speed:g} puts its attention at "
            f"{out:.2f} of its datasheet bf16 peak (must be at most 1)"
        )
    return out


ATTENTION_BACKWARD_RULE = (
    "the attention backward is priced at the part's measured bf16 GEMM speed "
    "(gemm_speed_vs_flagship.bf16), not its measured forward speed: only the forward is "
    "measured (aiconfigurator times inference prefill); on Blackwell the forward is bound by "
    "the SFU exponential and the backward by shared-memory traffic (FlashAttention-4, arXiv "
    "2603.05451), and Blackwell Ultra doubled the SFU only (NVIDIA, 'Inside NVIDIA Blackwell "
    "Ultra', 2025); the backward does 5 matmuls per recomputed exponential to the forward's 2, "
    "and aiconfigurator's own forward speed-up falls to the GEMM speed-up as the matmul work per "
    "exponential grows (B300 / B200 at head dim 64 / 128 / MLA 192-128 / 256: 1.28 / 1.17 / "
    "1.11 / 1.06, bf16 GEMMs 1.07; bench/aic_attention_speeds.py)"
)
"""Why the backward takes the GEMM speed (docs/calibration.md "Relative attention speed")."""


def attention_speed_report(cluster: Cluster, mla: bool) -> dict | None:
    """Estimate.attention_speed: the attention passes' speeds vs the flagship as priced, where
    the cluster's GPU carries attention_speed_vs_flagship and no calibration of its own
    overrides attention_efficiency; None otherwise."""
    gpu, speed = cluster.gpu, cluster.gpu.attention_speed_vs_flagship
    cal = cluster.calibration
    if speed is None or (cal is not None and cal.values.attention_efficiency is not None):
        return None
    fwd, fwd_mla, bwd = attention_speeds(gpu)
    field = "forward_mla" if mla and speed.forward_mla is not None else "forward"
    return {
        "gpu": gpu.id,
        "forward": fwd_mla if mla else fwd,
        "backward": bwd,
        "forward_from": f"attention_speed_vs_flagship.{field}",
        "forward_basis": "measured",
        "forward_why": speed.source,
        "backward_from": "gemm_speed_vs_flagship.bf16",
        "backward_basis": "assumption",
        "backward_why": ATTENTION_BACKWARD_RULE,
    }


def attention_speeds(gpu: GpuSpec) -> tuple[float, float, float]:
    """(forward, MLA forward, backward) attention speed of the part over its generation's
    flagship as priced: achieved TFLOP/s over the flagship's (the datasheet peak ratio where the
    part has no attention_speed_vs_flagship, or no flagship peak)."""
    cal, base = generation_for_gpu(gpu), CALIBRATION[gpu.generation]
    flagship = base.flagship_peak_bf16_tflops or gpu.peak_bf16_tflops
    scale = gpu.peak_bf16_tflops / (flagship * base.attention_efficiency)
    fwd = cal.attention_efficiency
    mla = fwd if cal.attention_mla_efficiency is None else cal.attention_mla_efficiency
    bwd = fwd if cal.attention_backward_efficiency is None else cal.attention_backward_efficiency
    return fwd * scale, mla * scale, bwd * scale


@lru_cache(maxsize=64)
def _at_speed(
    cal: GenerationCalibration,
    speed: GemmSpeed,
    gpu_id: str,
    peak_bf16_tflops: float,
    peak_fp8_tflops: float | None,
    mamf_fp8: float | None,
) -> GenerationCalibration:
    if cal.flagship_peak_bf16_tflops is None:
        raise InvalidInput(
            f"gpu {gpu_id}: gemm_speed_vs_flagship is given but its generation has no flagship "
            "part to be relative to (cost_models.calibration); leave it null"
        )
    bf16 = _scaled(cal.gemm_efficiency_bf16, cal.mamf_bf16_fraction, speed.bf16,
                   cal.flagship_peak_bf16_tflops / peak_bf16_tflops, gpu_id, "bf16")  # fmt: skip
    if speed.fp8 is None or peak_fp8_tflops is None or cal.flagship_peak_fp8_tflops is None:
        fp8 = _held(cal.gemm_efficiency_fp8, mamf_fp8, cal.mamf_fp8_fraction)
    else:
        fp8 = _scaled(cal.gemm_efficiency_fp8, cal.mamf_fp8_fraction, speed.fp8,
                      cal.flagship_peak_fp8_tflops / peak_fp8_tflops, gpu_id, "fp8")  # fmt: skip
    if (bf16, fp8) == (cal.gemm_efficiency_bf16, cal.gemm_efficiency_fp8):
        return cal  # the flagship itself (speed 1)
    return replace(cal, gemm_efficiency_bf16=bf16, gemm_efficiency_fp8=fp8)


def _scaled(
    efficiency: float,
    flagship_mamf: float | None,
    speed: float,
    peak_ratio: float,
    gpu_id: str,
    dtype: str,
) -> float:
    """The flagship's efficiency (held to its MAMF / peak) carried to the part by its measured
    speed: achieved TFLOP/s = flagship's x speed, over the part's own peak."""
    if flagship_mamf is not None:
        efficiency = min(efficiency, flagship_mamf)
    out = efficiency * speed * peak_ratio
    if out > 1.0:
        raise InvalidInput(
            f"gpu {gpu_id}: gemm_speed_vs_flagship.{dtype} {speed:g} puts its GEMMs at "
            f"{out:.2f} of its datasheet peak (must be at most 1)"
        )
    return out


def _held(efficiency: float, part: float | None, flagship: float | None) -> float:
    if part is None:
        return efficiency
    if flagship is not None:
        efficiency *= part / flagship
    return min(efficiency, part)


@lru_cache(maxsize=64)
def _for_part(
    cal: GenerationCalibration, bf16: float | None, fp8: float | None
) -> GenerationCalibration:
    held_bf16 = _held(cal.gemm_efficiency_bf16, bf16, cal.mamf_bf16_fraction)
    held_fp8 = _held(cal.gemm_efficiency_fp8, fp8, cal.mamf_fp8_fraction)
    if (held_bf16, held_fp8) == (cal.gemm_efficiency_bf16, cal.gemm_efficiency_fp8):
        return cal
    return replace(cal, gemm_efficiency_bf16=held_bf16, gemm_efficiency_fp8=held_fp8)


def calibration_for_cluster(cluster: Cluster) -> GenerationCalibration:
    """The constants a cluster's costs use: its GPU's (generation_for_gpu), with the cluster
    file's measured overrides (`calibration.values`, written by `planner calibrate` from the
    user's own measurements, which win over the MAMF ceilings) where it has them."""
    base = generation_for_gpu(cluster.gpu)
    if cluster.calibration is None:
        return base
    return _with_overrides(base, cluster.calibration.values)


@lru_cache(maxsize=64)
def _with_overrides(
    base: GenerationCalibration, values: CalibrationValues
) -> GenerationCalibration:
    changes = {k: v for k, v in values.model_dump().items() if v is not None}
    if "attention_efficiency" in changes:
        # the user's own measurement covers both passes and every head dim
        changes |= {"attention_backward_efficiency": None, "attention_mla_efficiency": None}
    return replace(base, **changes)
