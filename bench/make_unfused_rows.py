"""Write models_zoo/kernels/h100-sxm-80gb/attention_unfused.csv: unfused attention (the score
matrix in HBM) as attention-table rows of kernel `unfused`, measured on an H100
(bench/results/h100-2026-11-28/unfused_pieces.csv, bench/measure_unfused_attention.py).

    python bench/make_unfused_rows.py [--check]

One row per shape the measurement timed Megatron-LM's path at (Megatron's causal fused-softmax
kernel takes fewer than 2^31 score elements): `forward_ms` the forward's three kernels, each
timed alone back to back (bmm1_fwd: baddbmm on Megatron's transposed [s, b*h, d] views,
softmax_fwd: Megatron's scaled_upper_triang_masked_softmax, bmm2_fwd), `time_ms` that plus the
backward's five (the four BMMs, the softmax backward): the GPU time of the kernels Megatron-LM
runs, no dropout. Not the whole call through autograd (`megatron_e2e`): that took a near-constant
0.66-0.88 ms more per call at every shape (1.07-1.70x the kernels' sum), the host's time for
the autograd graph with the GPU idle in an isolated call, which in training overlaps the GPU
work of the layers queued before it (the cost model prices host time on its own:
cost_models/host.py). Attention dropout is not in the rows: the cost model adds its streaming
passes where the model has dropout (cost_models.compute.attention_times). In the format of
../shared/data/kernels/README.md's attention.csv (causal, bf16, heads = kv_heads).

Level: not rescaled to the copied table's machine. The BMMs and the softmax are bound by HBM
traffic, and the loan GPU's copy rows (bench/results/h100-2026-11-28/kern/memory_bound.csv,
median over its rows of 128 MiB and more) run 1.8 % below the shipped memory_bound.csv copy rows
(`python bench/make_unfused_rows.py` prints both).

`--check` compares the shipped file with what the script would write (exit 1 if they differ).
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU = "h100-sxm-80gb"
RUNS = ROOT / "bench" / "results" / "h100-2026-11-28"
PIECES = RUNS / "unfused_pieces.csv"
OUT = ROOT / "models_zoo" / "kernels" / GPU / "attention_unfused.csv"
FIELDS = ("batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "dtype",
          "kernel", "time_ms", "forward_ms")  # fmt: skip
FORWARD = ("bmm1_fwd", "softmax_fwd", "bmm2_fwd")
BACKWARD = ("bmm_dp_bwd", "bmm_dv_bwd", "softmax_bwd", "bmm_dq_bwd", "bmm_dk_bwd")


def rows() -> list[list]:
    shapes: dict[tuple[int, int, int, int], dict[str, float]] = {}
    with PIECES.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["piece"] == "copy":
                continue
            key = (int(r["batch"]), int(r["seq"]), int(r["heads"]), int(r["head_dim"]))
            shapes.setdefault(key, {})[r["piece"]] = float(r["seconds"]) * 1e3
    out = []
    for (batch, seq, heads, dim), ms in sorted(shapes.items(), key=lambda kv: (kv[0][3], kv[0][1])):
        if "megatron_e2e" not in ms:  # at >= 2^31 elements only PyTorch's path was timed
            continue
        forward = sum(ms[p] for p in FORWARD)
        total = forward + sum(ms[p] for p in BACKWARD)
        out.append([batch, seq, heads, heads, dim, dim, "true", "bf16", "unfused",
                    f"{total:.5f}", f"{forward:.5f}"])  # fmt: skip
    return out


def text() -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    w.writerows(rows())
    return buf.getvalue()


def _copy_gb_per_s(path: Path) -> float:
    with path.open(newline="") as f:
        rates = [float(r["gb_per_s"]) for r in csv.DictReader(f) if r["op"] == "copy"
                 and int(r["bytes"]) >= 2**27]  # fmt: skip
    return statistics.median(rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = ap.parse_args(argv)
    new = text()
    if args.check:
        same = OUT.is_file() and OUT.read_text() == new
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    OUT.write_text(new)
    loan = _copy_gb_per_s(RUNS / "kern" / "memory_bound.csv")
    shipped = _copy_gb_per_s(OUT.parent / "memory_bound.csv")
    print(f"wrote {len(new.splitlines()) - 1} rows to {OUT.relative_to(ROOT)}; copy rows: loan "
          f"GPU {loan:.0f} GB/s, shipped table {shipped:.0f} GB/s ({loan / shipped - 1:+.1%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
