"""NVFP4 GEMM speed over the same part's fp8 GEMMs, from aiconfigurator's measured tables
(issue 32 item 4: NVFP4 on Blackwell; looked at, not shipped).

The model used to price an NVFP4 GEMM with the part's fp8 efficiency on the datasheet fp4 peak
(2x fp8 on B200 / GB200, 3x on B300 / GB300), an assumption no measurement here supported. NVIDIA's
aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) times TensorRT-LLM's `Linear`
forward in bf16, fp8 and nvfp4 with one collector on each Blackwell part (bench/aic_gemm_check.py
reads its method; bench/aic_gpu_speeds.py the part-to-part ratios). Its absolute level is not
imported (docs/calibration.md), but on ONE part, same collector and software, the fp8 time over the
nvfp4 time at the same (m, n, k) is the part's NVFP4 speed over its fp8 speed.

Both rows include the input's quantization: the fp8 one is taken out with the collection's own
quantize tables (computescale + scale_matrix, as aic_gpu_speeds does: "fp8-gemm"); there is no
NVFP4 quantize table, so the NVFP4 input cast is estimated as the model prices a memory-bound op:
m x k elements x 2.5625 B (bf16 read 2 + e2m1 write 0.5 + one e4m3 scale per 16: 0.0625;
TensorRT-LLM's activation cast uses a static global scale, so no amax pass) at the part's HBM
bandwidth x hbm_efficiency (cost_models.calibration.hbm_bytes_per_s). The raw ratio (no estimate)
is printed beside it.

Prints per Blackwell part and trtllm collection: median, P10, P90 of the per-shape time ratio
nvfp4 / fp8-gemm over bench/aic_gpu_speeds.py's training shape set (raw and cast-adjusted), the
speed 1 / median, and the same over shape subsets for the reference collection. That absolute
level is not shipped (docs/calibration.md "NVFP4 GEMM speed over fp8 on the same part").

Then, per collection, the rate the presets carry (docs/calibration.md "NVFP4 GEMM speed carried
from the B300"): Transformer Engine measured the training stack's NVFP4 GEMMs on one part only,
the B300 (bench/te_gemm_profile_check.py: fp8 / NVFP4 = 6.812 / 3.764 ms over the 12 GEMMs of one
layer). On that profile's 12 shapes (snapped to the nearest shape the collection holds: 15,872
tokens -> 16,384), each part's cast-adjusted fp8 / nvfp4 time (the sums over the 12) over the
B300's is how much more or less NVFP4 gains on that part than on the B300, with the same collector
and software on both: the part's over_fp8 = TE's B300 ratio x that quotient. This is how the
presets carry part-to-part GEMM speeds already (gemm_speed_vs_flagship: aiconfigurator's
relative speed, not its absolute level).

Usage: python bench/aic_fp4_speed.py AIC_SYSTEMS_DATA [--reference trtllm/1.3.0rc20]
Needs pyarrow (pip install pyarrow).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import te_gemm_profile_check as te
from aic_gpu_speeds import (
    SHAPE_SET,
    SUBSETS,
    AicError,
    collection,
    fmt,
    in_box,
    quantiles,
    read_rows,
)

import models_zoo
from cost_models.calibration import generation_for_gpu, hbm_bytes_per_s

BLACKWELL = {"b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300"}
NVFP4_CAST_BYTES = 2 + 0.5 + 1 / 16
"""Bytes per element of TensorRT-LLM's NVFP4 activation cast: bf16 read, e2m1 write, e4m3 scale
per 16 elements."""


def nvfp4_rows(data: Path, system: str, backend: str, version: str) -> dict:
    path = data / system / "gemm" / backend / version / "gemm_perf.parquet"
    rows = read_rows(path, ("gemm_dtype", "m", "n", "k", "latency"),
                     lambda r: r["gemm_dtype"] == "nvfp4" and in_box(r["m"], r["n"], r["k"]))  # fmt: skip
    return {(r["m"], r["n"], r["k"]): r["latency"] for r in rows}


def time_ratios(fp4: dict, fp8: dict, cast_ms, select=lambda s: True) -> list[float]:
    """Per shape: (nvfp4 ms less the estimated cast) / fp8 GEMM-alone ms."""
    return [(ms - cast_ms(s)) / fp8[s] for s, ms in fp4.items() if s in fp8 and select(s)]


def cast_estimate(system: str):
    """(m, n, k) -> ms of the estimated NVFP4 input cast on `system` (NVFP4_CAST_BYTES per element
    of the m x k input at the part's HBM bandwidth x hbm_efficiency)."""
    gpu = models_zoo.load_gpu(BLACKWELL[system])
    bytes_per_s = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))
    return lambda s: s[0] * s[2] * NVFP4_CAST_BYTES / bytes_per_s * 1e3


MEASURED_ON = "b300_sxm"
"""The part Transformer Engine's GEMM profile was taken on (NVIDIA B300 SXM6 AC)."""
TE_OVER_FP8 = sum(te.PROFILE["pre-quantized"]["fp8"]) / sum(te.PROFILE["pre-quantized"]["nvfp4"])
"""TE's per-tensor fp8 / NVFP4 GEMM time over the profile's 12 GEMMs on the B300 (1.81)."""


def te_shapes() -> list[tuple[int, int, int]]:
    """The TE profile's 12 GEMMs as aiconfigurator's (m, n, k) of y = x W^T: TE's (M, K, N) is
    m = M, k = K, n = N (bench/te_gemm_profile_check.py FPROP / DGRAD / WGRAD)."""
    return [(m, n, k) for m, k, n in te.FPROP + te.DGRAD + te.WGRAD]


def snap(shape: tuple, held: set) -> tuple:
    """The held shape nearest `shape` in log space (sum of |log ratio| over m, n, k)."""
    return min(held, key=lambda h: sum(abs(math.log(a / b)) for a, b in zip(shape, h)))


def te_shape_speed(data: Path, system: str, backend: str, version: str) -> float | None:
    """fp8 GEMM-alone time / cast-adjusted nvfp4 time summed over the TE profile's 12 shapes
    (snapped) on one part; None where the collection lacks either table."""
    fp8 = ((collection(data, system, backend, version) or {}).get("fp8-gemm")) or {}
    fp4 = nvfp4_rows(data, system, backend, version) if fp8 else {}
    held = set(fp8) & set(fp4)
    if not held:
        return None
    cast_ms = cast_estimate(system)
    shapes = [snap(s, held) for s in te_shapes()]
    return sum(fp8[s] for s in shapes) / sum(fp4[s] - cast_ms(s) for s in shapes)


def carried(data: Path, backend: str, version: str) -> dict[str, tuple[float, float]]:
    """{system: (its fp8 / nvfp4 speed on the TE shapes, TE's B300 ratio carried to it)} for the
    parts the collection holds, where it holds the B300."""
    speeds = {s: te_shape_speed(data, s, backend, version) for s in BLACKWELL}
    ref = speeds.get(MEASURED_ON)
    if not ref:
        return {}
    return {s: (v, TE_OVER_FP8 * v / ref) for s, v in speeds.items() if v}


def part(data: Path, system: str, backend: str, version: str, subsets: bool) -> None:
    cast_ms = cast_estimate(system)
    c = collection(data, system, backend, version)
    fp8 = (c or {}).get("fp8-gemm")
    if not fp8:
        return
    fp4 = nvfp4_rows(data, system, backend, version)
    raw = quantiles(time_ratios(fp4, fp8, lambda s: 0.0))
    adj = quantiles(time_ratios(fp4, fp8, cast_ms))
    print(f"  {system:9s} {backend} {version}: nvfp4 / fp8 time raw {fmt(raw)}")
    print(f"  {'':9s} cast-adjusted {fmt(adj)}")
    if subsets:
        for name, keep in SUBSETS.items():
            r = time_ratios(fp4, fp8, cast_ms, keep)
            if r:
                print(f"    {name:24s} {fmt(quantiles(r))}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument("--reference", default="trtllm/1.3.0rc20")
    args = p.parse_args(argv)
    ref = tuple(args.reference.split("/", 1))
    try:
        print(f"shape set: {SHAPE_SET}; time ratio = nvfp4 / fp8 GEMM alone, same part")
        versions = set()
        for system in BLACKWELL:
            base = args.data / system / "gemm" / "trtllm"
            for folder in sorted(base.glob("*/gemm_perf.parquet")):
                version = folder.parent.name
                versions.add(version)
                part(args.data, system, "trtllm", version, ("trtllm", version) == ref)
        print(
            f"\nTE's B300 NVFP4 rate carried to each part (fp8 / NVFP4 = {TE_OVER_FP8:.3f} on "
            f"{MEASURED_ON}; the profile's 12 shapes, snapped): over_fp8 = {TE_OVER_FP8:.3f} x "
            "part speed / B300 speed"
        )
        for version in sorted(versions):
            for system, (speed, rate) in carried(args.data, "trtllm", version).items():
                print(f"  trtllm {version:10s} {system:9s} fp8 / nvfp4 {speed:.3f} -> "
                      f"over_fp8 {rate:.3f}")  # fmt: skip
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
