"""Throughput of cost_models.estimate() on a fixed set of layouts (calls per second).

    python bench/estimate_speed.py [--seconds 3]

The search calls estimate() once per candidate layout, so its speed bounds how many layouts a
plan can score. Deterministic inputs: Llama 3.1 70B and DeepSeek-V3 on 1,024 H100s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost_models import estimate
from cost_models.specs import Layout, Workload
from models_zoo import load_cluster, load_model

CASES = [
    ("llama3.1-70b", Layout(tp=8, pp=4, dp=32, vp=5, sequence_parallel=True, micro_batch=1)),
    ("llama3.1-70b", Layout(tp=4, pp=8, dp=32, recompute="selective", sequence_parallel=True)),
    ("deepseek-v3", Layout(tp=2, pp=8, dp=64, ep=64, vp=4, sequence_parallel=True)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    cluster = load_cluster("dgx-h100", 1024)
    work = Workload(seq_len=8192, global_batch_seqs=1024)
    inputs = [(load_model(name), lo) for name, lo in CASES]
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for model, lo in inputs:
            estimate(model, cluster, work, lo)
            calls += 1
    elapsed = time.perf_counter() - start
    print(f"{calls / elapsed:,.0f} estimate() calls/s ({1e3 * elapsed / calls:.3f} ms per call)")


if __name__ == "__main__":
    main()
