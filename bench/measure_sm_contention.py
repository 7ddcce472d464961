"""GEMM time while another kernel holds some SMs (a stand-in for an NCCL kernel beside it).

The cost model prices compute that runs beside a communication kernel occupying f of the SMs as
slowed by f / (1 - f) of the overlapped time (cost_models/calibration.py overlap_slowdown_s).
PyTorch's note on its SM carveout (ATen Context.h `_SMCarveout_EXPERIMENTAL`) says otherwise for
persistent matmuls: "if some SMs are busy (e.g., with a background NCCL kernel), the matmul's
blocks will be scheduled in two waves and ... the kernel will take twice as long". This script
measures which: a spinner kernel of n blocks, each holding one SM (200 KB of shared memory, so no
GEMM block fits beside it) for d microseconds, starts together with one GEMM on another stream;
the GEMM's time is taken with CUDA events, with and without the SM carveout n.

Needs python3, torch and cupy (the GPU machine's image has both):

    python3 bench/measure_sm_contention.py --out OUT/contention.csv

Rows: shape,m,n,k,dtype,layout,spin_sms,spin_us,carveout,repeat_median_ms,alone_ms.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "planner" / "calibrate"))
import kernel_sweep

SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
  extern __shared__ char buf[];
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    buf[threadIdx.x] = (char)t;
  } while (t - t0 < ns);
}
"""
SMEM = 200 * 1024
SHAPES = {  # forward (m, n, k, dtype): Llama 3 70B TP4 FC1, GPT-3 175B TP8 FC1, 405B TP8 proj
    "llama70b_tp4_fc1": (8192, 14336, 8192, "bf16"),
    "gpt175b_tp8_fc1": (2048, 6144, 12288, "bf16"),
    "llama405b_tp8_proj_fp8": (4096, 16384, 2048, "fp8"),
}
SPIN_SMS = (8, 16, 24, 32)
SPIN_FRACTIONS = (0.25, 0.5, 1.0, 2.0)  # spinner length / the GEMM's time alone


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    import cupy as cp
    import torch

    torch.backends.cuda.preferred_blas_library("cublaslt")  # bf16 through cuBLASLt, as TE
    kern = cp.RawKernel(SPIN, "spin")
    kern.max_dynamic_shared_size_bytes = SMEM
    a_stream, b_stream = torch.cuda.Stream(), torch.cuda.Stream()
    rows = []
    for name, (m, n, k, dtype) in SHAPES.items():
        fn = kernel_sweep._gemm_call(torch, "cuda", m, n, k, dtype, "TN")

        def once(spin_sms: int, spin_ns: int, fn=fn) -> float:
            start, end, go = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            with torch.cuda.stream(a_stream):
                torch.cuda._sleep(2_000_000)  # hold both streams, then release them together
                go.record(a_stream)
                torch.cuda._sleep(20_000)  # ~10 us: the spinner's blocks take their SMs first
            b_stream.wait_event(go)
            if spin_sms:
                with cp.cuda.ExternalStream(b_stream.cuda_stream):
                    kern((spin_sms,), (128,), (cp.uint64(spin_ns),), shared_mem=SMEM)
            with torch.cuda.stream(a_stream):
                start.record(a_stream)
                fn()
                end.record(a_stream)
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        for _ in range(5):
            once(0, 0)
        alone = statistics.median(once(0, 0) for _ in range(args.repeats))
        for sms in SPIN_SMS:
            torch._C._set_sm_carveout_experimental(sms)
            t = statistics.median(once(0, 0) for _ in range(args.repeats))
            torch._C._set_sm_carveout_experimental(None)
            rows.append([name, m, n, k, dtype, "TN", 0, 0.0, sms, f"{t:.5f}", f"{alone:.5f}"])
            for frac in SPIN_FRACTIONS:
                for carve in (0, sms):
                    torch._C._set_sm_carveout_experimental(carve or None)
                    ns = int(alone * 1e6 * frac)
                    t = statistics.median(once(sms, ns) for _ in range(args.repeats))
                    rows.append([name, m, n, k, dtype, "TN", sms, round(ns / 1e3, 1), carve,
                                 f"{t:.5f}", f"{alone:.5f}"])  # fmt: skip
                    torch._C._set_sm_carveout_experimental(None)
        print(name, f"alone {alone:.3f} ms", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "m", "n", "k", "dtype", "layout", "spin_sms", "spin_us", "carveout",
                    "time_ms", "alone_ms"])  # fmt: skip
        w.writerows(rows)
    print(f"{len(rows)} rows -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
