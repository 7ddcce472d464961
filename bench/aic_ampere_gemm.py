"""The A100 preset's GEMM curve against measured A100 GEMMs (issue 32: no GPU generation biased by
more than 5 % at the median; docs/accuracy.md "Held-out: llm-foundry").

The Ampere constants were fitted on the shared A100 records (2021-2023 software); the llm-foundry
A100 rows, once their Triton attention is priced (`attention_kernel: flash1`), are 15-21 %
pessimistic at every sequence length: a flat offset, what a slow GEMM figure would give. This
script prints what measurements say about that figure. aiconfigurator
(github.com/ai-dynamo/aiconfigurator) times one framework `Linear` forward per (m, n, k) with the
same collector on an A100 SXM4 80GB and an H100 SXM (aic-core/src/aiconfigurator_core/systems/data/
<system>/gemm/<backend>/<version>/gemm_perf.parquet; method: bench/aic_gemm_check.py), so:

1. the A100's bf16 rows at training shapes (m 4,096-32,768; n, k 2,048-32,768) over the A100
   preset's curve (time measured / time priced; < 1: the curve is slow), and the measured TFLOP/s;
2. the same collector's H100 rows over this project's measured H100 table (../shared/data/kernels,
   TN bf16, the shapes both hold): the collector's own offset, which the project has never
   explained (13-18 % faster on trtllm collections, docs/calibration.md);
3. A100 / H100 time in the collector at the same training shapes (its method cancels), and the
   chain: the project's H100 gemm.csv (its look-up, measured or interpolated; no power-cap floor)
   x that ratio, over the A100 curve: what the A100 curve would be if the H100 table's level held.

Usage: python bench/aic_ampere_gemm.py AIC_SYSTEMS_DATA [--collection sglang/0.5.10]
           [--measured ../shared/data/kernels]
AIC_SYSTEMS_DATA: an aiconfigurator checkout's aic-core/src/aiconfigurator_core/systems/data
(only a100_sxm/gemm and h100_sxm/gemm are read). Needs pyarrow.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aic_gemm_check import AicError, open_table, our_rows, ratio_summary

import models_zoo
from cost_models.calibration import generation_for_gpu
from cost_models.compute import Gemm, gemm_efficiency
from cost_models.kernels import KernelBook
from cost_models.specs import KernelTables
from models_zoo.kernel_tables import read_kernel_files

COLUMNS = ("gemm_dtype", "m", "n", "k", "latency")


def bf16_rows(data: Path, system: str, collection: str) -> tuple[dict, int]:
    """(m, n, k) -> seconds of a system's bf16 rows, and how many rows were skipped (a
    non-positive or non-finite latency, a non-integer dimension)."""
    path = data / system / "gemm" / collection / "gemm_perf.parquet"
    d = open_table(path, COLUMNS)
    out, skipped = {}, 0
    for t, m, n, k, ms in zip(*(d[c] for c in COLUMNS)):
        if t != "bfloat16":
            continue
        ok = all(isinstance(v, int) and v > 0 for v in (m, n, k))
        if not ok or not isinstance(ms, float | int) or not math.isfinite(ms) or ms <= 0:
            skipped += 1
            continue
        out[(m, n, k)] = ms * 1e-3
    return out, skipped


def training(shape: tuple[int, int, int]) -> bool:
    m, n, k = shape
    return 4096 <= m <= 32768 and 2048 <= n <= 32768 and 2048 <= k <= 32768


def curve_s(shapes: list[tuple[int, int, int]], gpu_id: str) -> dict[tuple, float]:
    """Seconds the GPU preset's efficiency curve prices a bf16 GEMM of each shape at (the cost
    model's own gemm_efficiency)."""
    gpu = models_zoo.load_gpu(gpu_id)
    cal = generation_for_gpu(gpu)
    peak = gpu.peak_bf16_tflops * 1e12
    return {s: 2.0 * math.prod(s) / (peak * gemm_efficiency(Gemm(*s), cal, False)) for s in shapes}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument("--collection", default="sglang/0.5.10", help="backend/version held for both")
    p.add_argument("--measured", type=Path, default=ROOT.parent / "shared" / "data" / "kernels")
    args = p.parse_args(argv)
    try:
        a100, skip_a = bf16_rows(args.data, "a100_sxm", args.collection)
        h100, skip_h = bf16_rows(args.data, "h100_sxm", args.collection)
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.collection}: a100_sxm {len(a100)} bf16 rows ({skip_a} skipped), "
          f"h100_sxm {len(h100)} ({skip_h} skipped)")
    shapes = sorted(s for s in a100 if training(s))
    curve = curve_s(shapes, "a100-sxm-80gb")
    tflops = [2.0 * math.prod(s) / a100[s] / 1e12 for s in shapes]
    priced = [2.0 * math.prod(s) / curve[s] / 1e12 for s in shapes]
    print(f"1. a100_sxm measured / A100 curve time, training shapes: "
          f"{ratio_summary([a100[s] / curve[s] for s in shapes])}")
    print(f"   measured TFLOP/s median {statistics.median(tflops):.1f}, "
          f"the curve's {statistics.median(priced):.1f}")
    table = args.measured / "h100-sxm-80gb" / "gemm.csv"
    ours = our_rows(table, "bf16")
    print(f"2. h100_sxm collector / {table} (TN bf16, shapes both hold): "
          f"{ratio_summary([h100[s] / t / 1e-3 for s, t in ours.items() if s in h100])}")
    both = [s for s in shapes if s in h100]
    print(f"3. a100_sxm / h100_sxm time, same training shapes: "
          f"{ratio_summary([a100[s] / h100[s] for s in both])}")
    book = KernelBook(KernelTables.model_validate(read_kernel_files({"gemm": table}, "shared")))
    chain = []
    for s in both:
        h100_s, _ = book.gemm_s(*s, "bf16", "TN")
        if h100_s is not None:
            chain.append(h100_s * a100[s] / h100[s] / curve[s])
    print(f"   chain (H100 table look-up x a100 / h100) / A100 curve time: {ratio_summary(chain)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
