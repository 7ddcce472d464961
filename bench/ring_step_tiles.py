"""A CP ring's attention steps where the kernel tables do not time them: whole tiles plus a fixed
cost per query tile (cost_models/kernels.py tile_rate_ratio, RING_QUERY_TILE_OVERHEAD).

A load-balanced CP ring runs, per layer, one causal call of s / cp tokens and cp - 1 non-causal
calls of s / cp queries over s / 2 cp keys (docs/cost_model.md "Attention under CP from the
tables"). The shipped Hopper tables time causal calls of 2K-32K tokens only, so at CP 4 and 4K
tokens neither call is in them. Before, such a step took the full-sequence causal call's seconds
per FLOP; a flash-style kernel's speed per FLOP falls with the call's length (the tables' causal
rows: 0.38 of bf16 peak at 2K, 0.48 at 4K, 0.56 at 16-32K on the H100), because each query tile
pays work that does not grow with the keys (loading Q, the softmax rescale, writing O; the
backward's dQ / dK / dV bookkeeping), and a causal grid computes its diagonal tiles whole.

This prints, for the two constants' kinds of call:

- causal: for every pair of the shipped tables' causal rows of one head shape and kernel (cuDNN
  fused, FlashAttention-2; H100 and H200), the shorter call's seconds per FLOP predicted from the
  longer one's by (a) the full call's rate (the rule before) and (b) the tile model, by the
  factor between them (2x, 4x, ... 16x: CP 2-16 at the table's lengths); then the per-query-tile
  overhead that fits all pairs best (median |log error|) for each direction, which the causal
  constants are;
- non-causal: the same fit on the one public measurement of non-causal calls against their
  length this project has (FlashAttention-3 paper, Shah et al. 2024, arXiv 2407.08608, Fig. 5 and
  6: H100 SXM5, head dim 128, 16K tokens per call, non-causal forward and backward TFLOP/s of
  FlashAttention-2 and cuDNN at 512-16K tokens, read off the figure's bar labels), relative to the
  16K call.

Usage: python bench/ring_step_tiles.py
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_models.kernels import RING_QUERY_TILE_OVERHEAD, attention_row_rate, attention_tile_work
from models_zoo.kernel_tables import attention_rows

TABLES = [
    ROOT / "models_zoo" / "kernels" / d / "attention.csv"
    for d in ("h100-sxm-80gb", "h200-sxm-141gb")
]
DIRECTIONS = ("forward", "backward")

FA3_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
FA3_NONCAUSAL_TFLOPS = {
    ("fa2", "forward"): (309, 350, 362, 368, 370, 370),
    ("cudnn", "forward"): (497, 574, 617, 609, 600, 595),
    ("fa2", "backward"): (214, 260, 291, 310, 318, 322),
    ("cudnn", "backward"): (305, 408, 465, 499, 518, 516),
}
"""FA3 paper Fig. 5 (forward, without causal mask, head dim 128) and Fig. 6 (backward, head dim 128),
H100 SXM5: the bar labels."""


def causal_rates() -> dict[tuple, dict[int, tuple[float, float]]]:
    """(table, kernel, head shape) -> seq -> (forward, backward) seconds per forward FLOP of the
    tables' causal rows, read and priced as the cost model reads them."""
    out: dict[tuple, dict[int, tuple[float, float]]] = {}
    for path in TABLES:
        for row in attention_rows(path):
            _b, s, h, kv, dqk, dv, causal, window, kernel, _ms, _fwd_ms = row
            if not causal or window:
                continue
            total, fwd = attention_row_rate(row)
            key = (path.parent.name, kernel, h, kv, dqk, dv)
            out.setdefault(key, {})[int(s)] = (fwd, total - fwd)
    return out


def tile(seq: float, causal: bool, x: float) -> float:
    return attention_tile_work(seq, seq, causal, x)


def causal_errors(rates, direction: str, x: float | None) -> dict[int, list[float]]:
    """factor -> log(predicted / measured) of every shorter call from every longer one; x None:
    the full call's rate (the rule before)."""
    i = DIRECTIONS.index(direction)
    out: dict[int, list[float]] = {}
    for by_seq in rates.values():
        for ref, ref_rate in by_seq.items():
            for s, rate in by_seq.items():
                if s >= ref:
                    continue
                scale = 1.0 if x is None else tile(s, True, x) / tile(ref, True, x)
                out.setdefault(ref // s, []).append(math.log(ref_rate[i] * scale / rate[i]))
    return out


def noncausal_errors(direction: str, x: float | None) -> list[float]:
    out = []
    for (_kern, d), tflops in FA3_NONCAUSAL_TFLOPS.items():
        if d != direction:
            continue
        ref_s, ref_t = FA3_SEQS[-1], tflops[-1]
        for s, t in zip(FA3_SEQS[:-1], tflops[:-1], strict=True):
            scale = 1.0 if x is None else tile(s, False, x) / tile(ref_s, False, x)
            out.append(math.log(scale * t / ref_t))  # seconds per FLOP = 1 / TFLOP/s
    return out


def best_x(errors_of) -> tuple[float, float]:
    scored = []
    for tenths in range(101):
        x = tenths / 10
        errs = errors_of(x)
        scored.append((statistics.median(abs(e) for e in errs), x))
    err, x = min(scored)
    return x, err


def pct(e: float) -> str:
    return f"{math.expm1(e) * 100:+.1f}"


def main() -> int:
    rates = causal_rates()
    print(f"causal rows: {sum(len(v) for v in rates.values())} in {len(rates)} head shapes "
          f"({', '.join(p.parent.name for p in TABLES)})")  # fmt: skip
    for direction in DIRECTIONS:
        x = RING_QUERY_TILE_OVERHEAD[(True, direction)]
        flat, tiles = causal_errors(rates, direction, None), causal_errors(rates, direction, x)
        print(
            f"\ncausal {direction}: predicted / measured - 1 (%), median [min, max] per length factor"
        )
        print(
            f"{'factor':>6} {'pairs':>5}   {'full call rate (before)':>26}   {'tile model x=' + format(x, 'g'):>26}"
        )
        for f in sorted(flat):
            a, b = flat[f], tiles[f]
            print(f"{f:6d} {len(a):5d}   {pct(statistics.median(a)):>8} [{pct(min(a))}, {pct(max(a))}]"
                  f"   {pct(statistics.median(b)):>8} [{pct(min(b))}, {pct(max(b))}]")  # fmt: skip
        every = [e for v in tiles.values() for e in v]
        before = [e for v in flat.values() for e in v]
        fit, err = best_x(
            lambda x, d=direction: [e for v in causal_errors(rates, d, x).values() for e in v]
        )
        print(f"median |error| all pairs: before {pct(statistics.median(abs(e) for e in before))} %, "
              f"tile model {pct(statistics.median(abs(e) for e in every))} %; best x {fit:g} "
              f"({pct(err)} %); shipped {x:g}")  # fmt: skip
    print(
        "\nnon-causal (FA3 paper Fig. 5 / 6, H100, head dim 128; FA2 and cuDNN), each length from 16K:"
    )
    for direction in DIRECTIONS:
        x = RING_QUERY_TILE_OVERHEAD[(False, direction)]
        before, tiles = noncausal_errors(direction, None), noncausal_errors(direction, x)
        fit, err = best_x(lambda x, d=direction: noncausal_errors(d, x))
        print(f"{direction}: median |error| before {pct(statistics.median(abs(e) for e in before))} %, "
              f"tile model x={x:g} {pct(statistics.median(abs(e) for e in tiles))} % "
              f"[{pct(min(tiles))}, {pct(max(tiles))}]; best x {fit:g} ({pct(err)} %)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
