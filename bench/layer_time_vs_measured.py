"""A whole decoder layer measured on a GPU against the Pricer's own time for that layer.

Reads ``layers.csv`` written by ``bench/device_layer_overhead.py`` (one row per layer shape: model,
TP, micro-batch, sequence, measured forward + backward ms; eager and CUDA-graphed) and prices each
eager row's layer with ``Pricer(model, cluster, workload).layer_times(layout)`` (forward_s +
backward_s of the dense, or MoE, layer: every GEMM pass, attention, the memory-bound ops and the
per-layer overheads the model adds), on one or more clusters: the preset (the efficiency curve)
and a cluster calibrated from kernel tables, e.g.

    planner calibrate --cluster dgx-h100 \
        --kernels ../shared/data/kernels/h100-sxm-80gb --out h100.yaml
    python bench/layer_time_vs_measured.py bench/results/h100-2026-11-26/layers/layers.csv \
        dgx-h100 h100.yaml

Prints per row measured / predicted - 1 (positive: the layer ran slower than priced, the model is
optimistic) and, per cluster and layer kind, the median and range over the rows. The layout is the
row's own (TP, micro-batch; DP fills 64 GPUs, EP 1, ZeRO-1): DP and the GPU count do not enter a
layer's compute time; the experts launch as one grouped kernel (Workload.expert_gemm_launch
"grouped"), as the measured MoE layer runs them (torch._grouped_mm). The measured layers run no TP
collectives (one GPU holds one TP rank's
shapes), and neither do the Pricer's layer compute times (collectives are priced separately).
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import models_zoo
from cost_models.pricer import Pricer
from cost_models.specs import Layout, Workload

GPUS = 64


def predicted_ms(model_id: str, cluster, tp: int, batch: int, seq: int) -> float:
    """Forward + backward ms of one layer as the Pricer prices it (MoE layer for MoE models)."""
    model = models_zoo.load_model(model_id)
    # the measured MoE layer runs its experts as torch._grouped_mm (bench/device_layer_overhead.py)
    workload = Workload(seq_len=seq, global_batch_seqs=GPUS * batch, expert_gemm_launch="grouped")
    layout = Layout(tp=tp, dp=GPUS // tp, micro_batch=batch, ep=1, zero_stage=1)
    layers = Pricer(model, cluster, workload).layer_times(layout).layers
    layer = layers.moe if model.num_moe_layers and layers.moe is not None else layers.dense
    return (layer.forward_s + layer.backward_s) * 1e3


def compare(rows: list[dict], clusters: dict) -> dict[tuple[str, str], list[float]]:
    """(cluster name, 'dense' | 'moe') -> measured / predicted - 1 per eager row; prints rows."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        tp, b, s = int(r["tp"]), int(r["batch"]), int(r["seq"])
        meas = float(r["fwd_bwd_ms"])
        kind = "moe" if r.get("experts", "0") not in ("", "0") else "dense"
        for name, cluster in clusters.items():
            pred = predicted_ms(r["model"], cluster, tp, b, s)
            gap = meas / pred - 1.0
            out.setdefault((name, kind), []).append(gap)
            print(
                f"{r['model']:14} tp{tp} {b}x{s:<5} {name:18} measured {meas:8.2f} ms  "
                f"priced {pred:8.2f} ms  measured/priced-1 {gap:+6.1%}"
            )
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    with Path(argv[0]).open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("fwd_bwd_ms") and r["mode"] == "eager"]
    clusters = {name: models_zoo.load_cluster(name, GPUS) for name in argv[1:]}
    gaps = compare(rows, clusters)
    for (name, kind), g in sorted(gaps.items()):
        print(
            f"{name} {kind}: {len(g)} layers, median {statistics.median(g):+.1%}, "
            f"range {min(g):+.1%} .. {max(g):+.1%}, priced slower than measured in "
            f"{sum(x < 0 for x in g)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
