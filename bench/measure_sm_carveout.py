"""GEMM time when cuBLASLt is told to target fewer SMs (Transformer Engine's set_sm_margin).

Transformer Engine's userbuffers overlap with `set_sm_margin` launches every GEMM it overlaps on
sm_count - num_sm SMs: CommOverlapCore::initialize sets `_math_sms`, passed to cuBLASLt as
CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET (transformer_engine/common/gemm/cublaslt_gemm.cu). Whether
the GEMM then runs num_sm / sm_count slower, or the heuristic picks a kernel that loses less, is
what docs/cost_model.md "TP overlap per GEMM" left unmeasured. PyTorch sets the same cuBLASLt
attribute from `torch._C._set_sm_carveout_experimental(n)` (ATen CUDABlas.cpp: SM_COUNT_TARGET =
multiProcessorCount - carveout) in its cuBLASLt GEMMs (bf16 with the cuBLASLt back-end selected,
fp8 `torch._scaled_mm`), so this script times the Linear shapes TE overlaps with a margin, at
carveouts 0..32 SMs (same timer as `planner measure`: planner/calibrate/kernel_sweep.make_timer,
>= 10 ms per window behind a launch hold). The GPU's clock drifts under its 700 W cap within a
few windows, so each (shape, repeat) times its carveouts in a random order and the full-SM
cuBLASLt case twice (first and last), and the shapes run shuffled per repeat.

Needs python3 + torch only (runs on the GPU machine without the planner's dependencies):

    python3 bench/measure_sm_carveout.py --out OUT/carveout.csv [--repeats 3]

Writes one row per (shape, dtype, layout, carveout, repeat): m,n,k,dtype,layout,carveout_sms,
repeat,time_ms,tflops (carveout_sms -1: cuBLAS default back-end, no target; 0: cuBLASLt with the
full SM count).
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "planner" / "calibrate"))
import kernel_sweep

# Forward (m, n, k) of the Linears TE overlaps with set_sm_margin in the shared / held-out runs'
# layouts: tokens per TP rank x output x input (sequence parallel: the full micro-batch's
# tokens). GPT-3 175B TP8 seq 2048 (MegaScale / mcore2024), Llama 3 70B TP4 seq 8192, Llama 3.1
# 405B TP8 CP2 seq 8192 (4,096 tokens per rank), a 7B-class TP2 seq 4096.
FORWARD: dict[str, tuple[int, int, int]] = {
    "gpt175b_tp8_qkv": (2048, 4608, 12288),
    "gpt175b_tp8_proj": (2048, 12288, 1536),
    "gpt175b_tp8_fc1": (2048, 6144, 12288),
    "gpt175b_tp8_fc2": (2048, 12288, 6144),
    "llama70b_tp4_qkv": (8192, 2560, 8192),
    "llama70b_tp4_proj": (8192, 8192, 2048),
    "llama70b_tp4_fc1": (8192, 14336, 8192),
    "llama70b_tp4_fc2": (8192, 8192, 7168),
    "llama405b_tp8cp2_qkv": (4096, 2304, 16384),
    "llama405b_tp8cp2_proj": (4096, 16384, 2048),
    "llama405b_tp8cp2_fc1": (4096, 13312, 16384),
    "llama405b_tp8cp2_fc2": (4096, 16384, 6656),
    "gpt7b_tp2_qkv": (4096, 6144, 4096),
    "gpt7b_tp2_fc1": (4096, 8192, 4096),
}
CARVEOUTS = (-1, 0, 1, 2, 4, 8, 16, 24, 32)


def passes(m: int, n: int, k: int) -> list[tuple[str, int, int, int]]:
    """cost_models.compute._gemm_passes: forward TN, data gradient NN, weight gradient NT."""
    return [("TN", m, n, k), ("NN", m, k, n), ("NT", n, k, m)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-time-s", type=float, default=0.01)
    args = ap.parse_args()
    import torch

    dev = "cuda"
    timed = kernel_sweep.make_timer(dev, args.min_time_s, warmup=3)
    jobs = []
    for name, (m, n, k) in FORWARD.items():
        for layout, pm, pn, pk in passes(m, n, k):
            jobs.append((name, pm, pn, pk, "bf16", layout))
        jobs.append((name, m, n, k, "fp8", "TN"))
    rows = []
    for rep in range(args.repeats):
        random.Random(rep).shuffle(jobs)
        for name, m, n, k, dtype, layout in jobs:
            fn = kernel_sweep._gemm_call(torch, dev, m, n, k, dtype, layout)
            order = list(CARVEOUTS[2:])
            random.Random(f"{rep}{name}{layout}{dtype}").shuffle(order)
            for c in [0, -1, *order, 0]:
                if dtype == "bf16":
                    torch.backends.cuda.preferred_blas_library("cublas" if c < 0 else "cublaslt")
                torch._C._set_sm_carveout_experimental(None if c <= 0 else c)
                s = timed(fn)
                rows.append([name, m, n, k, dtype, layout, c, rep, f"{s * 1e3:.5f}",
                             f"{2 * m * n * k / s / 1e12:.2f}"])  # fmt: skip
            torch._C._set_sm_carveout_experimental(None)
            del fn
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "m", "n", "k", "dtype", "layout", "carveout_sms", "repeat",
                    "time_ms", "tflops"])  # fmt: skip
        w.writerows(rows)
    print(f"{len(rows)} rows -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
