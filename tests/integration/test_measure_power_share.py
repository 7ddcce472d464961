"""bench/measure_power_share.py (a GPU script, stdlib + torch): the copy it pairs with the GEMM mix
is sized to the target GEMM time share, by hand; the module imports without torch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import measure_power_share as mps


def test_copy_is_sized_to_the_share_by_hand():
    # a 1.25 ms mix; a copy at 1 ns per element: share 0.4 -> 1.875 ms of copy -> 1,875,000
    assert mps.copy_elements(1.25e-3, 0.4, 1e-9) == 1_875_000
    assert mps.copy_elements(1.25e-3, 0.85, 1e-9) == round(1.25e-3 * 0.15 / 0.85 / 1e-9)
    assert mps.copy_elements(1.25e-3, 1.0, 1e-9) == 0  # GEMMs alone
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            mps.copy_elements(1e-3, bad, 1e-9)
    assert mps.SHARES[-1] == 1.0 and min(mps.SHARES) >= 0.37  # from the single-GPU steps' share up


def test_the_mix_is_the_sustained_scripts():
    """The same four GEMMs as bench/measure_sustained_fp8.py's llama70b-tp8-mix (which imports
    torch at its top, so its text is read here)."""
    text = (ROOT / "bench" / "measure_sustained_fp8.py").read_text()
    block = text.split('"llama70b-tp8-mix": [')[1].split("]")[0]
    parts = [t.strip(" ()\n,") for t in block.split("),")]
    shapes = [tuple(int(x) for x in t.split(",")) for t in parts if t]
    assert mps.MIX == shapes
