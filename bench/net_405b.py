"""Issue 6 check: Llama-3.1-405B on 16,384 H100 of the Llama 3 RoCE cluster (seq 8192, 16M-token
batch = 2,048 sequences). Prints the best plan, where TP lands, and the search time; then sweeps
NIC bandwidth with `planner.whatif`. CP is pinned to 1 (8K sequences) and the search to one
micro-batch size and ZeRO-1 to keep the 16K-GPU search to seconds.

    python bench/net_405b.py [--sweep]
"""

from __future__ import annotations

import argparse
import time

from planner import whatif
from planner.convenience import plan_for
from planner.report.text import compact_layout

ARGS = {
    "num_gpus": 16384,
    "seq_len": 8192,
    "global_batch": 2048,
    "cp": 1,
    "micro_batches": (1,),
    "zero_stages": (1,),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweep", action="store_true", help="also sweep NIC 100..1600 Gb/s")
    args = parser.parse_args()
    start = time.perf_counter()
    result = plan_for("llama3.1-405b", "llama3-roce-24k", **ARGS)
    best = result.best
    print(
        f"plan: {compact_layout(best)}  MFU {100 * best.mfu:.1f}%  "
        f"{best.tokens_per_s_per_gpu:.0f} tok/s/GPU  ({time.perf_counter() - start:.1f} s)"
    )
    print(
        f"TP placement: {best.placement['tp']}  (inside NVLink: "
        f"{best.placement['tp']['nvlink'] == best.layout.tp})"
    )
    if args.sweep:
        start = time.perf_counter()
        r = whatif.whatif(
            "llama3.1-405b", "llama3-roce-24k", "nic-gbps", [100, 200, 400, 800, 1600], **ARGS
        )
        for p in r.points:
            print(f"{p.value:>6g} Gb/s: {compact_layout(p.best)}  MFU {100 * p.best.mfu:.1f}%")
        print(f"hidden from: {r.hidden_from}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
