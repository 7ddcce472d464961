"""bench/unfused_vs_measured.py: PyTorch's standard attention (FA2 paper, A100) priced with the
unfused roofline's pieces, one point worked out by hand."""

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
    assert uvm.main() == 0
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
