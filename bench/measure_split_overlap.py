"""A GEMM split the way Transformer Engine's userbuffers ring-exchange runs it, on one GPU.

TE CommOverlapP2PBase::split_overlap_ag (transformer_engine/common/comm_gemm_overlap/
comm_gemm_overlap.cpp): tp GEMM pieces of M / tp rows, piece i on compute stream i % 3 after a
wait on the event of the copy that brought its chunk (peer-to-peer copies on send / recv streams,
copy engines), the main stream joining all at the end. Here the chunk copies are device-to-device
copies of the same size (copy engine, same GPU), so what is timed is the split itself: pieces,
stream switches, event waits and the copies' HBM traffic beside the GEMMs, against the whole GEMM
and against the pieces back to back on one stream.

    python3 bench/measure_split_overlap.py --out OUT/split_overlap.csv

(bench/results/h100-2026-11-27/split_overlap.csv was measured by this script before its loop body
became `shape_times`; the calls and their order per shape were the same but for a second timing
of whole / serial after the ring, which replaced the first.)
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

SHAPES = {  # (M tokens per TP rank, N, K, tp, dtype): forward Linears overlapped by ring-exchange
    "llama405b_tp8cp2_qkv": (4096, 2304, 16384, 8, "fp8"),
    "llama405b_tp8cp2_fc1": (4096, 13312, 16384, 8, "fp8"),
    "llama405b_tp8cp2_proj": (4096, 16384, 2048, 8, "fp8"),
    "llama405b_tp8cp2_fc2": (4096, 16384, 6656, 8, "fp8"),
    "llama70b_tp4_qkv": (8192, 2560, 8192, 4, "fp8"),
    "llama70b_tp4_fc1": (8192, 14336, 8192, 4, "fp8"),
    "llama70b_tp4_qkv_bf16": (8192, 2560, 8192, 4, "bf16"),
    "gpt175b_tp8_qkv_bf16": (2048, 4608, 12288, 8, "bf16"),
}


def shape_times(torch, m: int, n: int, k: int, tp: int, dtype: str, repeats: int) -> dict:
    """Median ms of the whole GEMM, its tp pieces back to back, and the ring split with and
    without the chunk copies (module docstring)."""
    dev, bf = "cuda", torch.bfloat16
    main_s = torch.cuda.current_stream()
    comp = [torch.cuda.Stream() for _ in range(3)]
    comm = torch.cuda.Stream()
    if dtype == "fp8":
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)

        def mm(x):
            return torch._scaled_mm(x, b, scale_a=one, scale_b=one, out_dtype=bf)
    else:
        a = torch.randn(m, k, device=dev, dtype=bf)
        b = torch.randn(n, k, device=dev, dtype=bf).t()

        def mm(x):
            return torch.matmul(x, b)

    chunks = list(a.chunk(tp))
    dsts = list(torch.empty_like(a).chunk(tp))

    def whole():
        mm(a)

    def serial():
        for c in chunks:
            mm(c)

    def split(copies: bool):
        ev = [torch.cuda.Event() for _ in range(tp)]
        start = torch.cuda.Event()
        start.record(main_s)
        comm.wait_event(start)
        for s in comp:
            s.wait_event(start)
        if copies:
            with torch.cuda.stream(comm):
                for i in range(1, tp):
                    dsts[i].copy_(chunks[i], non_blocking=True)
                    ev[i].record(comm)
        done = []
        for i in range(tp):
            s = comp[i % 3]
            if i and copies:
                s.wait_event(ev[i])
            with torch.cuda.stream(s):
                mm(dsts[i] if i and copies else chunks[i])
            e = torch.cuda.Event()
            e.record(s)
            done.append(e)
        for e in done:
            main_s.wait_event(e)

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(repeats):
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1_000_000)
            t0.record(main_s)
            fn()
            t1.record(main_s)
            torch.cuda.synchronize()
            ts.append(t0.elapsed_time(t1))
        return statistics.median(ts)

    calls = {"whole": whole, "serial": serial, "ring_no_copy": lambda: split(False),
             "ring": lambda: split(True)}  # fmt: skip
    timed(whole)  # settle clocks before the first timed kind
    return {name: timed(fn) for name, fn in calls.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    import torch

    rows = []
    for name, (m, n, k, tp, dtype) in SHAPES.items():
        res = shape_times(torch, m, n, k, tp, dtype, args.repeats)
        rows.append([name, m, n, k, tp, dtype] + [f"{res[x]:.5f}" for x in
                    ("whole", "serial", "ring_no_copy", "ring")])  # fmt: skip
        print(name, {x: round(v, 4) for x, v in res.items()}, file=sys.stderr)
    outp = Path(args.out)
    outp.parent.mkdir(parents=True, exist_ok=True)
    with outp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "m", "n", "k", "tp", "dtype", "whole_ms", "serial_ms",
                    "ring_no_copy_ms", "ring_ms"])  # fmt: skip
        w.writerows(rows)
    print(f"{len(rows)} rows -> {outp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
