"""Whole decoder layers back to back under the power cap: does a layer's forward + backward slow
down once the GPU has run it for tens of seconds, as back-to-back square GEMMs do (issue 32,
docs/calibration.md#sustained-clocks)?

Why: the kernel tables time each shape in a short burst; `kernels.apply_sustained_cap` would hold
GEMMs to the rate measured back to back at the 700 W cap, and is off because the single-GPU
training steps (37-40 % GEMM time) held their clocks. A multi-GPU step spends most of its GPU time
in its layers, whose GEMM and attention share is higher than those small steps'; this measures
the layers themselves, the per-TP-rank shapes of Llama 3 8B / 70B at 8,192 tokens, bf16, eager.

What it runs: per layer, a 5-second idle, the burst time over 0.3 s, then `--seconds` seconds of
back-to-back forward + backward in 2-second windows; per window the CUDA-event time per layer and
nvidia-smi's SM clock, power, temperature and throttle reasons. The layer is
`device_layer_overhead.Layer` (the same GEMMs and cuDNN attention as the kernel tables).

Usage (a GPU machine with torch): python3 bench/measure_layer_power.py --out DIR [--seconds 20]
Writes DIR/layer_power.csv: layer,tp,tokens,window,t_s,layer_ms,burst_ms,ratio,sm_clock_mhz,
power_w,temp_c,throttle_reasons. stdlib + torch only.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from device_layer_overhead import DENSE, Layer
from measure_power_share import _timed, smi

CASES = (("llama3-70b", 8), ("llama3-70b", 4), ("llama3-8b", 1))
"""(model, TP): the per-rank layers of the shared runs' common H100 layouts, at 8,192 tokens."""
TOKENS = 8192


def layer_step(torch, name: str, tp: int, dev):
    """Forward + backward of one bf16 layer of DENSE[name] at TP `tp` over TOKENS tokens (the
    layer and its input held by the closure)."""
    h, nh, kv, hd, ffn, experts, topk, _ = DENSE[name]
    torch.manual_seed(0)
    layer = Layer(h, nh, kv, hd, ffn, experts, topk, tp, dev, torch.bfloat16)
    x = torch.randn(TOKENS, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(TOKENS, h, device=dev, dtype=torch.bfloat16)

    def step():
        layer(x, TOKENS).backward(dy)

    return step


def run(out_dir: str, seconds: float) -> str:
    import torch

    dev = torch.device("cuda")
    path = os.path.join(out_dir, "layer_power.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layer", "tp", "tokens", "window", "t_s", "layer_ms", "burst_ms", "ratio",
                    "sm_clock_mhz", "power_w", "temp_c", "throttle_reasons"])  # fmt: skip
        for name, tp in CASES:
            step = layer_step(torch, name, tp, dev)
            step()
            torch.cuda.synchronize()
            time.sleep(5)  # idle: the burst time from a cool GPU
            burst_s = _timed(torch, step, 0.3)
            t0, window = time.time(), 0
            while time.time() - t0 < seconds:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                reps, stop, queued = 0, time.time() + 2.0, []
                s.record()
                while time.time() < stop:
                    step()
                    reps += 1
                    queued.append(torch.cuda.Event())
                    queued[-1].record()
                    if len(queued) > 3:  # the host stays 3 layers ahead: the GPU never waits
                        queued.pop(0).synchronize()
                e.record()
                torch.cuda.synchronize()
                layer_s = s.elapsed_time(e) / 1e3 / reps
                w.writerow([name, tp, TOKENS, window, f"{time.time() - t0:.1f}",
                            f"{layer_s * 1e3:.3f}", f"{burst_s * 1e3:.3f}",
                            f"{layer_s / burst_s:.3f}", *smi()])  # fmt: skip
                f.flush()
                window += 1
            print(name, tp, "done", flush=True)
            del step
            torch.cuda.empty_cache()
    return path


SHARE_CASES = (("llama3-70b", 8), ("llama3-8b", 1))
BUSY_SHARES = (0.5, 0.65, 0.8, 0.9, 1.0)
"""Target shares of wall time the GPU spends in the layer; the rest a one-SM sleep kernel (the GPU
waiting, as on an exposed collective or a pipeline bubble)."""


def run_shares(out_dir: str, seconds: float) -> str:
    """Per layer: its time as the kernel tables time a shape (after 20 large GEMMs, back to back
    over at least 12 ms, ../shared/data/kernels/README.md), its time from a cool GPU (one call
    after a 3-second idle), then `seconds` at each busy share of BUSY_SHARES in 2-second windows.
    Then attention alone and a device-to-device copy alone back to back (their power and clock)."""
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    cyc = 1_000_000
    sleep_s = _timed(torch, lambda: torch.cuda._sleep(cyc), 0.3) / cyc
    big = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    path = os.path.join(out_dir, "layer_power_shares.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["work", "tp", "tokens", "method", "target_share", "window", "busy_share",
                    "ms", "sm_clock_mhz", "power_w", "temp_c", "throttle_reasons"])  # fmt: skip

        def row(*cells):
            w.writerow([*cells, *smi()])
            f.flush()

        for name, tp in SHARE_CASES:
            step = layer_step(torch, name, tp, dev)
            step()
            step()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for rep in range(3):  # the tables' method
                for _ in range(20):
                    big @ big
                step()
                step()
                s.record()
                for _ in range(3):  # each layer takes over 4 ms: 3 calls fill the 12 ms
                    step()
                e.record()
                e.synchronize()
                row(name, tp, TOKENS, "table", "", rep, "", f"{s.elapsed_time(e) / 3:.3f}")
            for rep in range(3):  # one call from a cool GPU
                time.sleep(3)
                s.record()
                step()
                e.record()
                e.synchronize()
                row(name, tp, TOKENS, "cool", "", rep, "", f"{s.elapsed_time(e):.3f}")
            layer_s = s.elapsed_time(e) / 1e3
            for share in BUSY_SHARES:
                cycles = round(layer_s * (1 - share) / share / sleep_s) if share < 1 else 0
                t0, window = time.time(), 0
                while time.time() - t0 < seconds:
                    marks, stop = [], time.time() + 2.0
                    while time.time() < stop:
                        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                        ev[0].record()
                        step()
                        ev[1].record()
                        if cycles:
                            torch.cuda._sleep(cycles)
                        ev[2].record()
                        marks.append(ev)
                        if len(marks) > 3:
                            marks[-4][2].synchronize()
                    torch.cuda.synchronize()
                    busy = sum(m[0].elapsed_time(m[1]) for m in marks)
                    idle = sum(m[1].elapsed_time(m[2]) for m in marks)
                    row(name, tp, TOKENS, "share", share, window,
                        f"{busy / (busy + idle):.3f}", f"{busy / len(marks):.3f}")  # fmt: skip
                    window += 1
            print(name, tp, "shares done", flush=True)
            del step
            torch.cuda.empty_cache()
        # attention alone (Llama 3 70B at TP 8: 8 query heads, 1 KV head) and a copy alone
        q = torch.randn(1, 8, TOKENS, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1, 1, TOKENS, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1, 1, TOKENS, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
        do = torch.randn(1, 8, TOKENS, 128, device=dev, dtype=torch.bfloat16)
        src = torch.empty(2**28, device=dev, dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        works = {
            "attention": lambda: F.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True
            ).backward(do),
            "copy": lambda: dst.copy_(src),
        }
        for work, fn in works.items():
            time.sleep(3)
            t0, window = time.time(), 0
            while time.time() - t0 < seconds:
                row(
                    work,
                    8,
                    TOKENS,
                    "alone",
                    1.0,
                    window,
                    1.0,
                    f"{_timed(torch, fn, 2.0) * 1e3:.3f}",
                )
                window += 1
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--shares", action="store_true", help="run_shares instead of run")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    print("wrote", (run_shares if args.shares else run)(args.out, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
