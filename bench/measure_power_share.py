"""GEMM throughput under the power cap against the step's GEMM time share (issue 32: when does a
training step run its GEMMs at the sustained rate instead of the burst rate the tables hold?).

Why: `kernels.apply_sustained_cap` holds every GEMM look-up to the rate of GEMMs back to back under
the power cap (sustained.csv / sustained_fp8.csv: an H100 holds 1,178-1,231 fp8 TFLOP/s there
against 1,456 in bursts). The single-GPU steps (37-40 % GEMM time share) drew 610-670 W and did not
throttle, so the cap is off by default; applied to the shipped H100 tables it moves the held-out
Megatron H100 rows from +4.5 to +3.0 % signed and the shared H100 records from +6.0 to +4.7 %
(docs/calibration.md#sustained-clocks). This script measures at which GEMM share a step reaches
the cap: bench/results/h200-2026-11-27b (docs/calibration.md#power-cap-busy-share).

What it runs: for each dtype (fp8 through torch._scaled_mm, bf16 through torch.matmul) and each
target GEMM time share, back-to-back iterations of the Llama 3 70B TP8 forward GEMM mix (the mix
of measure_sustained_fp8.py) followed by a device-to-device copy sized so that, at burst speed, the
copy takes (1 - share) / share of the mix's time (a memory-bound phase that draws less power, as
a step's norms, casts and optimizer do), or, with `--filler idle`, a `torch.cuda._sleep` of that
length (the GPU waiting, as it does on an exposed collective at scale). Each share runs `--seconds` seconds in 2-second windows;
per window CUDA events time the GEMM mix and the copy separately, so the GEMM TFLOP/s is the
mix's FLOPs over its own time, and nvidia-smi reads the SM clock, power, temperature and throttle
reasons. The burst rate of each dtype is measured first, after a 5-second idle, over 0.3 s.

Usage (a GPU machine with torch): python3 bench/measure_power_share.py --out DIR [--seconds 20]
[--filler copy|idle] [--dtypes fp8,bf16]
Writes DIR/power_share.csv (DIR/power_share_idle.csv for the idle filler): dtype,target_share,window,t_s,gemm_share,gemm_tflops,burst_tflops,
ratio,sm_clock_mhz,power_w,temp_c,throttle_reasons. stdlib + torch only.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import time

MIX = [(8192, 1280, 8192), (8192, 8192, 1024), (8192, 7168, 8192), (8192, 8192, 3584)]
"""Llama 3 70B TP8 forward GEMMs at 8,192 tokens (m, n, k): QKV, out, FC1 (gate + up), FC2."""
SHARES = (0.4, 0.55, 0.7, 0.85, 1.0)
"""Target GEMM time shares: the single-GPU steps' 0.37-0.40 up to GEMMs alone."""


def copy_elements(gemm_s: float, share: float, copy_s_per_element: float) -> int:
    """bf16 elements of the copy that takes (1 - share) / share of `gemm_s` at burst speed (0 at
    share 1)."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    if share == 1:
        return 0
    return max(1, round(gemm_s * (1 - share) / share / copy_s_per_element))


def smi() -> list[str]:
    query = "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    cmd = ["nvidia-smi", query, "--format=csv,noheader,nounits"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    return [x.strip() for x in out.split(",")][:4]


def _gemm_calls(torch, dtype: str):
    dev = torch.device("cuda")
    calls = []
    for m, n, k in MIX:
        if dtype == "fp8":
            a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # TN
            one = torch.ones((), device=dev)
            calls.append(
                lambda a=a, b=b, one=one: torch._scaled_mm(
                    a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )
            )
        else:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
            calls.append(lambda a=a, b=b: torch.matmul(a, b))
    return calls


def _timed(torch, fn, seconds: float) -> float:
    """Seconds per call of `fn`, back to back for about `seconds` (CUDA events)."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps, stop = 0, time.time() + seconds
    start.record()
    while time.time() < stop:
        fn()
        reps += 1
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


SLEEP_CYCLES = 1_000_000
"""`torch.cuda._sleep` cycles per call when its rate is timed (about 0.5-1 ms at Hopper clocks)."""


def run(out_dir: str, seconds: float, filler: str = "copy", dtypes=("fp8", "bf16")) -> str:
    import torch

    dev = torch.device("cuda")
    flops = sum(2 * m * n * k for m, n, k in MIX)
    src = torch.empty(2**28, device=dev, dtype=torch.bfloat16)  # 512 MiB: streams from HBM
    dst = torch.empty_like(src)
    if filler == "copy":
        unit_s = _timed(torch, lambda: dst.copy_(src), 0.3) / src.numel()
        limit = 2**62

        def fill(n):  # whole passes over the 512 MiB buffer, then the rest (a 2026-11-27
            # loan's run stopped at one pass, so its shares below ~0.85 did not run)
            for _ in range(n // src.numel()):
                dst.copy_(src)
            if n % src.numel():
                dst[: n % src.numel()].copy_(src[: n % src.numel()])
    else:  # a spinning kernel on one SM: the GPU otherwise idle, as while waiting on the network
        unit_s = _timed(torch, lambda: torch.cuda._sleep(SLEEP_CYCLES), 0.3) / SLEEP_CYCLES
        limit = 2**62

        def fill(n):
            torch.cuda._sleep(n)

    name = "power_share.csv" if filler == "copy" else f"power_share_{filler}.csv"
    path = os.path.join(out_dir, name)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dtype", "target_share", "window", "t_s", "gemm_share", "gemm_tflops",
                    "burst_tflops", "ratio", "sm_clock_mhz", "power_w", "temp_c",
                    "throttle_reasons"])  # fmt: skip
        for dtype in dtypes:
            calls = _gemm_calls(torch, dtype)

            def mix(calls=calls):
                for c in calls:
                    c()

            time.sleep(5)  # idle: the burst rate from a cool GPU
            mix_s = _timed(torch, mix, 0.3)
            burst = flops / mix_s / 1e12
            for share in SHARES:
                n = min(copy_elements(mix_s, share, unit_s), limit)
                t0, window = time.time(), 0
                while time.time() - t0 < seconds:
                    marks = []
                    stop = time.time() + 2.0
                    while time.time() < stop:
                        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                        ev[0].record()
                        mix()
                        ev[1].record()
                        if n:
                            fill(n)
                        ev[2].record()
                        marks.append(ev)
                        if len(marks) % 16 == 0:
                            torch.cuda.synchronize()
                    torch.cuda.synchronize()
                    gemm_s = sum(e[0].elapsed_time(e[1]) for e in marks) / 1e3
                    other_s = sum(e[1].elapsed_time(e[2]) for e in marks) / 1e3
                    tf = flops * len(marks) / gemm_s / 1e12
                    w.writerow([dtype, share, window, f"{time.time() - t0:.1f}",
                                f"{gemm_s / (gemm_s + other_s):.3f}", f"{tf:.1f}",
                                f"{burst:.1f}", f"{tf / burst:.3f}", *smi()])  # fmt: skip
                    f.flush()
                    window += 1
                print(dtype, share, "done", flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--filler", choices=("copy", "idle"), default="copy")
    p.add_argument("--dtypes", default="fp8,bf16")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    print("wrote", run(args.out, args.seconds, args.filler, dtypes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
