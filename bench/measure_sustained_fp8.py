"""Sustained fp8 GEMM throughput under the power cap (issue 32).

The fp8 counterpart of ../shared/data/kernels/measure_sustained.py, whose bf16 windows set
KernelTables.sustained_bf16_tflops; this one's file sets sustained_fp8_tflops.

Runs back-to-back fp8 GEMMs (torch._scaled_mm, e4m3, per-tensor scales, bf16 output: the kernel
of the fp8 table rows) for SECONDS per workload and logs the achieved TFLOP/s per 2-second window
with the SM clock, power and throttle reasons read by nvidia-smi at the same time. Workloads: the
8192^3 square, and the Llama 3 70B TP8 forward mix at 8,192 tokens (as the bf16 script).

Usage: python3 bench/measure_sustained_fp8.py --out DIR [--seconds 90]
Writes DIR/sustained_fp8.csv: workload,dtype,t_s,tflops,sm_clock_mhz,power_w,temp_c,throttle_reasons
(stdlib + torch only).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import time

import torch

WORKLOADS = {
    "square-8192": [(8192, 8192, 8192)],
    "llama70b-tp8-mix": [
        (8192, 1280, 8192),
        (8192, 8192, 1024),
        (8192, 7168, 8192),
        (8192, 8192, 3584),
    ],
}


def smi() -> list[str]:
    query = "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    cmd = ["nvidia-smi", query, "--format=csv,noheader,nounits"]
    q = subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    return [x.strip() for x in q.split(",")][:4]


def operands(m: int, n: int, k: int, dev: torch.device):
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major: TN
    one = torch.ones((), device=dev)
    return a, b, one


def run(out_dir: str, seconds: float) -> None:
    dev = torch.device("cuda")
    path = os.path.join(out_dir, "sustained_fp8.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["workload", "dtype", "t_s", "tflops"]
            + ["sm_clock_mhz", "power_w", "temp_c", "throttle_reasons"]
        )
        for name, shapes in WORKLOADS.items():
            ops = [operands(*s, dev) for s in shapes]
            flops = sum(2 * m * n * k for m, n, k in shapes)
            t0 = time.time()
            while time.time() - t0 < seconds:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                reps, w_end = 0, time.time() + 2.0
                s.record()
                while time.time() < w_end:
                    for a, b, one in ops:
                        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                    reps += 1
                    if reps % 20 == 0:
                        torch.cuda.synchronize()
                e.record()
                torch.cuda.synchronize()
                tf = flops * reps / (s.elapsed_time(e) / 1e3) / 1e12
                w.writerow([name, "fp8", f"{time.time() - t0:.1f}", f"{tf:.1f}", *smi()])
                f.flush()
            print(name, "done", flush=True)
            time.sleep(5)
    print("wrote", path)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="sustained fp8 GEMM throughput under the power cap")
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=90.0)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    run(args.out, args.seconds)
