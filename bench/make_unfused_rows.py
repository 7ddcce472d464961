"""Write models_zoo/kernels/{h100-sxm-80gb,h200-sxm-141gb}/attention_unfused.csv: unfused
attention (the score matrix in HBM) as attention-table rows of kernel `unfused`, measured by
bench/measure_unfused_attention.py on loan GPUs: on an H100 the FA2 benchmark's shapes
(bench/results/h100-2026-11-28/unfused_pieces.csv) and the per-TP-rank grid (`--grid`,
unfused_grid.csv there, another H100 of the same loan day), on an H200 the grid
(bench/results/h200-2026-11-28/unfused_grid.csv).

    python bench/make_unfused_rows.py [--check]

One row per call the measurement timed Megatron-LM's path at (Megatron's causal fused-softmax
kernel takes fewer than 2^31 score elements), of kernel `unfused` where Megatron-Core runs that
kernel on the call (cost_models.compute.megatron_fused_softmax: keys up to 4,096): `forward_ms`
the forward's three kernels, each
timed alone back to back (bmm1_fwd: baddbmm on Megatron's transposed [s, b*h, d] views,
softmax_fwd: Megatron's scaled_upper_triang_masked_softmax, bmm2_fwd), `time_ms` that plus the
backward's five (the four BMMs, the softmax backward): the GPU time of the kernels Megatron-LM
runs, no dropout. Not the whole call through autograd (`megatron_e2e`): that took a near-constant
0.66-0.88 ms more per call at every shape (1.07-1.70x the kernels' sum), the host's time for
the autograd graph with the GPU idle in an isolated call, which in training overlaps the GPU
work of the layers queued before it (the cost model prices host time on its own:
cost_models/host.py). Longer calls, where Megatron-Core falls back to PyTorch's softmax, are
rows of kernel `unfused_torch` on the H100: its six BMMs (the grid) plus that fallback's four
kernels measured at the same sequence and batch x heads (`--torch-softmax`,
unfused_torch_softmax.csv there); the fused kernel timed past 4,096 keys gives no row (no
launcher runs it there). Attention dropout is not in the rows: the cost model adds its streaming
passes where the model has dropout (cost_models.compute.attention_times). In the format of
../shared/data/kernels/README.md's attention.csv (causal, bf16, heads = kv_heads).

Level: not rescaled to the copied tables' machines. The BMMs are bound by HBM traffic (the
softmax, at long rows, by its own occupancy: the same bytes per second on the H100 and the
H200), and each run's device-to-device copy (its meta file) runs near the shipped
memory_bound.csv copy rows of the same GPU (`python bench/make_unfused_rows.py` prints both).

`--check` compares the shipped file with what the script would write (exit 1 if they differ).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_models.compute import megatron_fused_softmax

RESULTS = ROOT / "bench" / "results"
MEASURED = {
    "h100-sxm-80gb": (
        RESULTS / "h100-2026-11-28" / "unfused_pieces.csv",
        RESULTS / "h100-2026-11-28" / "unfused_grid.csv",
    ),
    "h200-sxm-141gb": (RESULTS / "h200-2026-11-28" / "unfused_grid.csv",),
}
"""GPU preset -> the measured piece files its rows come from."""
TORCH_SOFTMAX = {"h100-sxm-80gb": RESULTS / "h100-2026-11-28" / "unfused_torch_softmax.csv"}
"""GPU preset -> Megatron-Core's PyTorch softmax fallback measured (`--torch-softmax`)."""
KERNELS = ROOT / "models_zoo" / "kernels"
FIELDS = ("batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "dtype",
          "kernel", "time_ms", "forward_ms")  # fmt: skip
FORWARD = ("bmm1_fwd", "softmax_fwd", "bmm2_fwd")
BACKWARD = ("bmm_dp_bwd", "bmm_dv_bwd", "softmax_bwd", "bmm_dq_bwd", "bmm_dk_bwd")
BMMS = ("bmm1_fwd", "bmm2_fwd"), ("bmm_dp_bwd", "bmm_dv_bwd", "bmm_dq_bwd", "bmm_dk_bwd")
TORCH = ("torch_mask_fwd", "torch_softmax_fwd"), ("torch_softmax_bwd", "torch_mask_bwd")


def out_path(gpu: str) -> Path:
    return KERNELS / gpu / "attention_unfused.csv"


def _read(path: Path) -> dict[tuple[int, int, int, int], dict[str, float]]:
    """(batch, seq, heads, head dim) -> piece -> ms."""
    shapes: dict[tuple[int, int, int, int], dict[str, float]] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["piece"] != "copy":
                key = (int(r["batch"]), int(r["seq"]), int(r["heads"]), int(r["head_dim"]))
                shapes.setdefault(key, {})[r["piece"]] = float(r["seconds"]) * 1e3
    return shapes


def rows(gpu: str) -> list[list]:
    """`unfused` rows where Megatron-Core runs its fused softmax kernel on the call; where it
    falls back to PyTorch's softmax, `unfused_torch` rows of the measured BMMs plus the measured
    fallback at the same (sequence, batch x heads), where both were timed. Calls of the fused
    kernel past its key-length limit (timed, but no launcher runs them) give no row."""
    shapes: dict[tuple[int, int, int, int], dict[str, float]] = {}
    for path in MEASURED[gpu]:
        for key, pieces in _read(path).items():
            shapes.setdefault(key, {}).update(pieces)
    fallback = _read(TORCH_SOFTMAX[gpu]) if gpu in TORCH_SOFTMAX else {}
    out = []
    for (batch, seq, heads, dim), ms in sorted(shapes.items(), key=lambda kv: (kv[0][3], kv[0][1])):
        if "bmm1_fwd" not in ms:  # at >= 2^31 elements only PyTorch's path was timed
            continue
        if megatron_fused_softmax(batch * heads, seq):
            kernel = "unfused"
            forward = sum(ms[p] for p in FORWARD)
            total = forward + sum(ms[p] for p in BACKWARD)
        else:
            torch_ms = fallback.get((1, seq, batch * heads, 0))
            if torch_ms is None:
                continue
            kernel = "unfused_torch"
            forward = sum(ms[p] for p in BMMS[0]) + sum(torch_ms[p] for p in TORCH[0])
            total = forward + sum(ms[p] for p in BMMS[1]) + sum(torch_ms[p] for p in TORCH[1])
        out.append([batch, seq, heads, heads, dim, dim, "true", "bf16", kernel,
                    f"{total:.5f}", f"{forward:.5f}"])  # fmt: skip
    return out


def text(gpu: str) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FIELDS)
    w.writerows(rows(gpu))
    return buf.getvalue()


def _shipped_copy_gb_per_s(gpu: str) -> float:
    with (KERNELS / gpu / "memory_bound.csv").open(newline="") as f:
        rates = [float(r["gb_per_s"]) for r in csv.DictReader(f) if r["op"] == "copy"]
    return statistics.median(rates)


def _run_copy_gb_per_s(pieces: Path) -> float:
    """The run's device-to-device copy (bytes read + written per second), from its meta file."""
    stem = "unfused_grid_meta" if pieces.stem == "unfused_grid" else "unfused_meta"
    return json.loads((pieces.parent / f"{stem}.json").read_text())["copy_gb_per_s_read_plus_write"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file")
    args = ap.parse_args(argv)
    stale = 0
    for gpu, files in MEASURED.items():
        new, out = text(gpu), out_path(gpu)
        if args.check:
            same = out.is_file() and out.read_text() == new
            print(f"{out.relative_to(ROOT)}: {'up to date' if same else 'differs'}")
            stale += not same
            continue
        out.write_text(new)
        shipped = _shipped_copy_gb_per_s(gpu)
        runs = ", ".join(f"{p.parent.name}/{p.name} {_run_copy_gb_per_s(p):.0f}" for p in files)
        print(f"wrote {len(new.splitlines()) - 1} rows to {out.relative_to(ROOT)}; copy GB/s: "
              f"{runs}; shipped memory_bound.csv median {shipped:.0f}")  # fmt: skip
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
