"""The sliding-window attention saving without a table's window rows: whole tiles plus a fixed cost
per query tile (cost_models/kernels.py window_tile_ratio, WINDOW_QUERY_TILE_OVERHEAD).

A flash-style kernel computes whole (query tile x key tile) blocks: a block the window's mask cuts
is computed in full and masked (FlexAttention's block mask, 128 x 128 by default). Each query tile
also pays work that does not shrink with the window (loading Q, the softmax's final rescale and
writing O in the forward; loading Q, dO and the row statistics and writing dQ in the backward),
counted here in key-tile iterations. For each window row of the shipped H100 table
(models_zoo/kernels/h100-sxm-80gb/attention_window.csv, FlexAttention, from
../shared/data/kernels) this prints that overhead solved from the measured windowed / full time,
forward and backward apart, their medians (the constants), and the ratios the model then gives
beside the measured ratio and the plain FLOP ratio (attended keys), which the cost model used before.

Usage: python bench/window_tile_overhead.py [attention_window.csv]
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_models.kernels import (
    WINDOW_QUERY_TILE_OVERHEAD,
    attended_keys,
    window_tile_counts,
    window_tile_ratio,
)

DEFAULT = ROOT / "models_zoo" / "kernels" / "h100-sxm-80gb" / "attention_window.csv"


def overhead(ratio: float, windowed: int, full: int, q_tiles: int) -> float:
    """x with (windowed + q_tiles x) / (full + q_tiles x) = ratio."""
    return (ratio * full - windowed) / (q_tiles * (1 - ratio))


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    rows = list(csv.DictReader(path.open()))
    full = {
        (r["batch"], r["seq"], r["kernel"]): (float(r["forward_ms"]), float(r["time_ms"]))
        for r in rows
        if not r["window"]
    }
    print(f"{path}")
    print(f"{'seq':>6} {'window':>6}  {'x fwd':>6} {'x bwd':>6}   measured fwd / bwd   "
          f"tiles+x fwd / bwd   FLOP ratio")  # fmt: skip
    xs: dict[str, list[float]] = {"forward": [], "backward": []}
    out = []
    for r in rows:
        if not r["window"]:
            continue
        seq, window = int(r["seq"]), int(r["window"])
        f_full, t_full = full[(r["batch"], r["seq"], r["kernel"])]
        fwd = float(r["forward_ms"]) / f_full
        bwd = (float(r["time_ms"]) - float(r["forward_ms"])) / (t_full - f_full)
        w, c, n = window_tile_counts(seq, window)
        x_f, x_b = overhead(fwd, w, c, n), overhead(bwd, w, c, n)
        xs["forward"].append(x_f)
        xs["backward"].append(x_b)
        out.append((seq, window, x_f, x_b, fwd, bwd))
    for seq, window, x_f, x_b, fwd, bwd in out:
        m_f, m_b = (window_tile_ratio(seq, window, p) for p in ("forward", "backward"))
        flop = attended_keys(seq, window) / attended_keys(seq)
        print(f"{seq:6d} {window:6d}  {x_f:6.2f} {x_b:6.2f}   {fwd:8.3f} / {bwd:6.3f}    "
              f"{m_f:8.3f} / {m_b:6.3f}   {flop:9.3f}")  # fmt: skip
    for p in ("forward", "backward"):
        print(f"{p}: median overhead {statistics.median(xs[p]):.2f} key tiles per query tile "
              f"(shipped WINDOW_QUERY_TILE_OVERHEAD[{p!r}] = {WINDOW_QUERY_TILE_OVERHEAD[p]:g})")
    errs = {
        name: [abs(model / meas - 1) for model, meas in pairs]
        for name, pairs in (
            ("tiles + overhead", [(window_tile_ratio(s, w, "forward"), f) for s, w, _, _, f, _ in out]
             + [(window_tile_ratio(s, w, "backward"), b) for s, w, _, _, _, b in out]),
            ("FLOP ratio", [(attended_keys(s, w) / attended_keys(s), f) for s, w, _, _, f, _ in out]
             + [(attended_keys(s, w) / attended_keys(s), b) for s, w, _, _, _, b in out]),
        )
    }  # fmt: skip
    for name, e in errs.items():
        print(f"{name:18} |ratio error| median {100 * statistics.median(e):5.1f} %, "
              f"max {100 * max(e):5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
