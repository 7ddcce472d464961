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
speed 1 / median, and the same over shape subsets for the reference collection. Nothing is
shipped from it (docs/calibration.md "NVFP4 GEMM speed over fp8 on the same part").

Usage: python bench/aic_fp4_speed.py AIC_SYSTEMS_DATA [--reference trtllm/1.3.0rc20]
Needs pyarrow (pip install pyarrow).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

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


def part(data: Path, system: str, backend: str, version: str, subsets: bool) -> None:
    gpu = models_zoo.load_gpu(BLACKWELL[system])
    bytes_per_s = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))

    def cast_ms(s: tuple) -> float:
        return s[0] * s[2] * NVFP4_CAST_BYTES / bytes_per_s * 1e3

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
        for system in BLACKWELL:
            base = args.data / system / "gemm" / "trtllm"
            for folder in sorted(base.glob("*/gemm_perf.parquet")):
                version = folder.parent.name
                part(args.data, system, "trtllm", version, ("trtllm", version) == ref)
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
