"""How far a whole layer's measured step is from the sum of its kernels in a kernel table.

Reads ``layers.csv`` written by ``bench/device_layer_overhead.py`` on a GPU and a kernel-table
folder of the same GPU (``../shared/data/kernels/h100-sxm-80gb`` for an H100), prices each dense
layer's kernels through ``cost_models.kernels.KernelBook`` (the look-up the Pricer uses) and
prints, per row: measured forward + backward, the table's sum, and the gap (measured / sum - 1),
eager and under CUDA graphs. The kernels counted (per TP rank, micro-batch and sequence of the row):

- GEMMs, three passes each (TN forward, NN data gradient, NT weight gradient): QKV, attention
  output, FC1 (gate + up), FC2;
- attention: one fused (cuDNN) causal call, forward + backward;
- memory-bound: two RMSNorms and one SwiGLU (forward; backward counted as twice the forward's
  bytes, the gradient reads the input and the output gradient and writes one), two residual adds.

Usage: python bench/layer_overhead_vs_tables.py LAYERS_CSV KERNEL_DIR
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

from cost_models.kernels import KernelBook
from cost_models.specs import KernelTables
from models_zoo.kernel_tables import read_kernel_dir

BYTES = 2  # bf16


def table_sum_ms(book: KernelBook, r: dict) -> tuple[float, str]:
    h, nh, kv, hd, ffn, tp, b, s = (
        int(r[k]) for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn", "tp", "batch", "seq")
    )
    m = b * s
    nh_r, kv_r = nh // tp, max(kv // tp, 1)
    statuses = []
    total = 0.0
    linears = [((nh_r + 2 * kv_r) * hd, h), (h, nh_r * hd), (2 * ffn // tp, h), (h, ffn // tp)]
    for n, k in linears:  # Y[m,n] = X[m,k] W^T; dX[m,k] = dY[m,n] W; dW[n,k] = dY^T X
        for mm, nn, kk, layout in ((m, n, k, "TN"), (m, k, n, "NN"), (n, k, m, "NT")):
            t, st = book.gemm_s(mm, nn, kk, "bf16", layout)
            statuses.append(st)
            total += t if t is not None else float("nan")
    per_flop, st = book.attention_s_per_flop(
        b, s, nh_r, kv_r, hd, hd, causal=True, window=0, kernel="fused"
    )
    statuses.append(st)
    flops = 2.0 * b * s * s * nh_r * 2 * hd / 2  # attention_fwd_flops, causal
    total += per_flop[0] * flops if per_flop else float("nan")
    act = m * h * BYTES
    for op, nbytes in (
        ("rmsnorm", 2 * act),
        ("rmsnorm", 2 * act),
        ("add", 3 * act),
        ("add", 3 * act),
        ("swiglu", 3 * m * (ffn // tp) * BYTES),
    ):
        t, st = book.memory_bound_s(op, nbytes)
        statuses.append(st)
        t = t if t is not None else float("nan")
        total += t * (3 if op != "add" else 1)  # forward + backward at twice the bytes
    worst = max(statuses, key=["measured", "interpolated", "extrapolated"].index)
    return total * 1e3, worst


def main() -> None:
    layers, kdir = Path(sys.argv[1]), Path(sys.argv[2])
    book = KernelBook(KernelTables(**read_kernel_dir(kdir, str(kdir))))
    rows = [r for r in csv.DictReader(layers.open()) if r.get("fwd_bwd_ms") and r["experts"] == "0"]
    print(
        f"{'model':12} {'tp':>2} {'b x seq':>8} {'mode':10} {'measured ms':>11} {'tables ms':>9} {'gap':>7} {'host ms':>8}  look-up"
    )
    gaps: dict[str, list[float]] = {}
    for r in sorted(rows, key=lambda r: (r["model"], int(r["tp"]), int(r["seq"]), r["mode"])):
        s, st = table_sum_ms(book, r)
        meas = float(r["fwd_bwd_ms"])
        gap = meas / s - 1
        if st != "extrapolated":  # a gap against an extrapolated kernel says nothing
            gaps.setdefault(r["mode"], []).append(gap)
        print(
            f"{r['model']:12} {r['tp']:>2} {r['batch'] + ' x ' + r['seq']:>8} {r['mode']:10} {meas:11.3f} {s:9.3f} {gap:+7.1%} {float(r['fwd_bwd_host_ms']):8.3f}  {st}"
        )
    for mode, g in gaps.items():
        print(
            f"{mode}: median gap {statistics.median(g):+.1%} over {len(g)} layers (min {min(g):+.1%}, max {max(g):+.1%})"
        )


if __name__ == "__main__":
    main()
