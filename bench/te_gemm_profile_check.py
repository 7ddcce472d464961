"""Transformer Engine's own B300 GEMM profile against the cost model (issue 32 items 1 and 4).

TE's GEMM profiling guide (NVIDIA/TransformerEngine docs/examples/gemm_profiling/
gemm_profiling.rst, main snapshot d0067d0d, 2026-08; benchmarks/gemm/benchmark_gemm.py, CUDA
events, NVIDIA B300 SXM6 AC) times the 12 GEMMs of one transformer layer (hidden 4,096, FFN 16,384,
15,872 tokens: fprop, dgrad and wgrad of QKV, attention out, MLP up and down) in every recipe with
one tool, in two modes:

- pre-quantized (`--pre-quantize`): the operands quantized once before the timed loop, so the GEMM
  kernels alone (tex.generic_gemm);
- autocast: a `te.Linear` forward of each shape under `te.autocast`, so the GEMM plus the casts of
  its input and its weight (both copies: the weight requires grad) on every call.

This script transcribes the guide's per-layer tables (PROFILE, by hand; the per-pass sums) and
prints, for the B300 preset (and GB300 / B200 beside it):

1. the GEMM-alone time per layer and precision (pre-quantized) against the cost model's time for
   the same 12 GEMMs (cost_models.compute.gemm_pass_s on gemm_hardware's view: the Blackwell
   efficiency curve, the part's measured speed, BLOCK_SCALED_GEMM_TIME for MXFP8 and
   GpuSpec.fp4_gemm_speed for NVFP4), and the NVFP4 / per-tensor fp8 speed the B300 / GB300
   presets carry (fp4_gemm_speed.over_fp8 = 6.812 / 3.764);
2. the casts (autocast - pre-quantized per layer) against the cost model's cast bytes for the same
   operands (cost_models.compute.operand_quant_bytes: input M x K and weight N x K of each
   GEMM, both copies where the recipe writes them on Blackwell) at the part's HBM figure
   (datasheet x hbm_efficiency), and the bandwidth the measured casts imply.

The guide's bf16 rows give the run-to-run level: autocast 12.758 vs pre-quantized 13.102 ms per
layer for the same bf16 GEMMs (no cast), 2.6 %. Evaluation only: nothing here sets a constant but
fp4_gemm_speed, whose figure is the ratio of two of these rows.

Usage: python bench/te_gemm_profile_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import models_zoo
from cost_models.calibration import generation_for_gpu, hbm_bytes_per_s
from cost_models.compute import Gemm, gemm_hardware, gemm_pass_s, operand_quant_bytes, quant_recipe
from cost_models.specs import GpuSpec, Workload

TOKENS = 15_872
HIDDEN, FFN = 4_096, 16_384
FPROP = ((TOKENS, HIDDEN, 3 * HIDDEN), (TOKENS, HIDDEN, HIDDEN), (TOKENS, HIDDEN, FFN),
         (TOKENS, FFN, HIDDEN))  # fmt: skip
"""(M, K, N) of the four forward GEMMs (gemm_profiling.rst "Fprop Shapes")."""
DGRAD = tuple((m, n, k) for m, k, n in FPROP)
"""K and N swapped (the guide's manual-shape example)."""
WGRAD = tuple((k, m, n) for m, k, n in FPROP)
"""hidden (or FFN) x tokens x N (the guide: 4096x15872x12288, ...)."""

PROFILE = {
    "pre-quantized": {
        "bf16": (4.250, 4.434, 4.418),
        "fp8": (2.158, 2.329, 2.325),
        "mxfp8": (2.365, 2.397, 2.400),
        "nvfp4": (1.254, 1.305, 1.205),
    },
    "autocast": {
        "bf16": (4.196, 4.290, 4.272),
        "fp8": (2.879, 3.063, 3.205),
        "mxfp8": (2.847, 3.045, 3.092),
        "nvfp4": (1.932, 2.189, 2.331),
    },
}
"""ms per layer, (fprop, dgrad, wgrad) sums of the 4 GEMMs, B300 SXM6 AC (gemm_profiling.rst:
"Per-Layer GEMM Time" of both modes; fp8 = FP8 CurrentScaling, the per-tensor recipe)."""

WORKLOADS = {
    "bf16": {"precision": "bf16"},
    "fp8": {"precision": "fp8", "fp8_recipe": "tensorwise"},
    "mxfp8": {"precision": "mxfp8"},
    "nvfp4": {"precision": "nvfp4"},
}
PARTS = ("b300", "gb300", "b200")


def _workload(precision: str) -> Workload:
    return Workload(seq_len=TOKENS, global_batch_seqs=1, **WORKLOADS[precision])


def model_gemm_ms(gpu: GpuSpec, precision: str) -> tuple[float, float, float]:
    """The cost model's (fprop, dgrad, wgrad) ms for the profile's 12 GEMMs on `gpu`. Each pass is
    priced as the forward GEMM of its (M, K, N), as the guide times it."""
    w = _workload(precision)
    view, book = gemm_hardware(gpu, w, None)
    cal = generation_for_gpu(gpu)
    low = precision != "bf16"
    return tuple(
        1e3 * sum(gemm_pass_s(Gemm(m, n, k), 0, view, cal, low, book)[0] for m, k, n in shapes)
        for shapes in (FPROP, DGRAD, WGRAD)
    )  # type: ignore[return-value]


def cast_bytes(gpu: GpuSpec, precision: str) -> float:
    """Bytes the cost model charges to cast, on every call, the input (M x K) and the weight
    (N x K) of each of the 12 GEMMs (a te.Linear forward under autocast)."""
    recipe = quant_recipe(_workload(precision))
    return sum(
        operand_quant_bytes(m, k, False, recipe, gpu.generation, 1, True)
        + operand_quant_bytes(n, k, False, recipe, gpu.generation, 1, True)
        for m, k, n in FPROP + DGRAD + WGRAD
    )


def rows() -> list[str]:
    out = []
    measured = {p: sum(v) for p, v in PROFILE["pre-quantized"].items()}
    out.append("1. GEMMs alone (pre-quantized), ms per layer: measured on B300 SXM6 AC; model per preset")
    out.append(f"{'precision':10s} {'measured':>9s}" + "".join(f" {p:>8s} {'meas/model':>10s}" for p in PARTS))
    for precision, ms in measured.items():
        line = f"{precision:10s} {ms:9.3f}"
        for part in PARTS:
            mod = sum(model_gemm_ms(models_zoo.load_gpu(part), precision))
            line += f" {mod:8.3f} {ms / mod:10.3f}"
        out.append(line)
    over = measured["fp8"] / measured["nvfp4"]
    out.append(f"NVFP4 over per-tensor fp8 (measured): {measured['fp8']:.3f} / "
               f"{measured['nvfp4']:.3f} = {over:.3f}; per pass "
               + ", ".join(f"{name} {a / b:.2f}" for name, a, b in zip(
                   ("fprop", "dgrad", "wgrad"), PROFILE["pre-quantized"]["fp8"],
                   PROFILE["pre-quantized"]["nvfp4"])))  # fmt: skip
    for part in PARTS:
        gpu = models_zoo.load_gpu(part)
        speed = gpu.fp4_gemm_speed
        carried = f"{speed.over_fp8:g} (measured)" if speed else (
            f"{gpu.peak_fp4_tflops / gpu.peak_fp8_tflops:g} (datasheet ratio)")  # fmt: skip
        out.append(f"  {part}: fp4_gemm_speed.over_fp8 = {carried}")
    out.append("")
    out.append("2. Casts (autocast - pre-quantized), ms per layer, B300: measured; model at the "
               "B300's HBM figure")  # fmt: skip
    gpu = models_zoo.load_gpu("b300")
    rate = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))
    bf16_gap = sum(PROFILE["autocast"]["bf16"]) - sum(PROFILE["pre-quantized"]["bf16"])
    out.append(f"  bf16 (no cast; the run-to-run level): {bf16_gap:+.3f} ms")
    out.append(f"{'precision':10s} {'measured':>9s} {'model':>7s} {'GB':>6s} "
               f"{'implied GB/s':>12s} {'of datasheet':>12s}")  # fmt: skip
    for precision in ("fp8", "mxfp8", "nvfp4"):
        gap = sum(PROFILE["autocast"][precision]) - sum(PROFILE["pre-quantized"][precision])
        nbytes = cast_bytes(gpu, precision)
        implied = nbytes / (gap * 1e-3)
        out.append(
            f"{precision:10s} {gap:9.3f} {1e3 * nbytes / rate:7.3f} {nbytes / 1e9:6.2f} "
            f"{implied / 1e9:12,.0f} {implied / (gpu.hbm_bandwidth_gb_per_s * 1e9):12.3f}"
        )
    out.append(f"  (model rate: {rate / 1e9:,.0f} GB/s = {rate / (gpu.hbm_bandwidth_gb_per_s * 1e9):.3f}"
               " of the datasheet)")  # fmt: skip
    return out


def main() -> int:
    print("\n".join(rows()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
