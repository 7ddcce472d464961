"""bench/unfused_vs_measured.py: PyTorch's standard attention (FA2 paper, A100) priced with the
unfused roofline's pieces, and Megatron-LM's kernels measured on an H100 (--pieces), one point of
each worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import unfused_vs_measured as uvm


def test_head_dim_64_at_2k_by_hand(capsys):
    """8 sequences x 32 heads x 2,048^2 scores: every BMM bound by its 2 bytes per score at
    0.85 x 2,039 GB/s (64 FLOPs per byte, below the A100 curve's 221.5 TFLOP/s / 1,733 GB/s),
    plus 14 streaming bytes; the benchmark counts 4 b s^2 h d / 2 x 3.5 FLOPs."""
    assert uvm.main([]) == 0
    out = capsys.readouterr().out
    elements = 8 * 32 * 2048**2
    hbm = 2039e9 * 0.85
    seconds = 6 * 2 * elements / hbm + 14 * elements / hbm
    priced = 4 * 8 * 2048**2 * 32 * 64 / 2 * 3.5 / seconds / 1e12
    row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["64", "2048"])
    assert float(row[2]) == 17  # the bar label
    assert float(row[3]) == pytest.approx(priced, abs=0.05)
    assert float(row[4]) == pytest.approx(priced / 17, abs=0.005)
    assert "median 1.87" in out


def test_pieces_on_the_h100_by_hand(capsys):
    """bench/results/h100-2026-11-28/unfused_pieces.csv, 8 x 2,048 tokens, 32 heads of 64: BMM1
    writes 2 bytes per score element, priced at 0.85 x 3,350 GB/s (traffic-bound on the H100),
    measured 0.872 ms; the achieved rate is those bytes over the measured time."""
    pieces = ROOT / "bench" / "results" / "h100-2026-11-28" / "unfused_pieces.csv"
    assert uvm.main(["--pieces", str(pieces)]) == 0
    out = capsys.readouterr().out
    elements = 8 * 32 * 2048**2
    priced_s = 2 * elements / (3350e9 * 0.85)
    row = next(
        line.split() for line in out.splitlines()
        if line.split()[:5] == ["8", "2048", "32", "64", "bmm1_fwd"]
    )  # fmt: skip
    measured_s = float(row[5]) * 1e-3
    assert measured_s == pytest.approx(0.872437e-3, abs=1e-6)
    assert float(row[6]) == pytest.approx(priced_s * 1e3, abs=1e-3)
    assert float(row[7]) == pytest.approx(measured_s / priced_s, abs=0.005)
    assert float(row[8]) == pytest.approx(2 * elements / 0.872437e-3 / 1e9, abs=1)
    assert "pytorch_e2e          1.78" in out


def test_the_pytorch_fallback_on_the_h100_by_hand(capsys):
    """unfused_torch_softmax.csv, one 8,192-key call of 8 matrices: the four kernels' sum against
    the 9 + 11 bytes per score element the model counts (compute.UNFUSED_TORCH_SOFTMAX_BYTES)."""
    import csv

    path = ROOT / "bench" / "results" / "h100-2026-11-28" / "unfused_torch_softmax.csv"
    with path.open(newline="") as f:
        measured_s = sum(
            float(r["seconds"])
            for r in csv.DictReader(f)
            if (r["seq"], r["heads"]) == ("8192", "8")
        )
    priced_s = 20 * 8 * 8192**2 / (3350e9 * 0.85)
    assert uvm.main(["--pieces", str(path)]) == 0
    row = next(
        line.split() for line in capsys.readouterr().out.splitlines()
        if line.split()[:5] == ["1", "8192", "8", "0", "torch_fallback"]
    )  # fmt: skip
    assert float(row[6]) == pytest.approx(priced_s * 1e3, abs=1e-3)
    assert float(row[7]) == pytest.approx(measured_s / priced_s, abs=0.005)
