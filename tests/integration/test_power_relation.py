"""bench/power_relation.py over the committed loan files (bench/results/h200-2026-11-27b): the
figures it prints are the CSVs' own, checked here by hand from the rows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import power_relation as pr


def test_layer_time_over_capped_time_by_hand():
    rel = pr.layer_relation(pr.FOLDER)
    # llama3-70b tp8, windows 1-3: share 0.5 at 9.487 / 9.490 / 9.489 ms, share 1.0 at
    # 10.734 / 10.729 / 10.756 ms: medians 9.489 and 10.734
    b, t, clock, watts = rel["llama3-70b tp8"][0]
    assert b == pytest.approx(0.491)
    assert t == pytest.approx(9.489 / 10.734)
    assert clock == 1980 and watts == pytest.approx(503.09)
    assert rel["llama3-70b tp8"][-1][1] == 1.0
    # time rises with the busy share on both layers (the clock falls once the cap is reached)
    for pts in rel.values():
        times = [p[1] for p in pts]
        assert times == sorted(times) and times[0] < 0.9


def test_table_method_and_gemm_mix_by_hand():
    tm = pr.table_method(pr.FOLDER)
    # llama3-8b tp1: the tables' way 22.309 / 21.748 / 21.767 ms -> 21.767; capped windows 1-3
    # 22.608 / 22.631 / 22.658 -> 22.631
    assert tm["llama3-8b tp1"] == pytest.approx((21.767, 22.631))
    mix = {(d, round(s, 2)): tf for d, s, tf, _, _ in pr.gemm_relation(pr.FOLDER)}
    assert mix[("bf16", 1.0)] == pytest.approx(661.0, abs=1)
    assert mix[("fp8", 0.37)] > mix[("fp8", 1.0)] * 1.15


def test_interp_by_hand():
    xs, ys = [0.5, 1.0], [0.8, 1.0]
    assert pr.interp(0.75, xs, ys) == pytest.approx(0.9)
    assert pr.interp(0.1, xs, ys) == 0.8 and pr.interp(2.0, xs, ys) == 1.0
