"""`planner whatif` as a reader sees it (issue 20): conclusions that match the rows, which plan
changed, a warning when the varied parameter cannot matter, 80/120-column tables, the plot."""

from __future__ import annotations

import io
import math

import factories as f
import pytest
from rich.console import Console
from snapshot import assert_readable, check_snapshot


from cost_models.specs import Layout
from planner import whatif
from planner.report.whatif_view import conclusions, render_whatif


def fixed_sweep() -> whatif.WhatIfResult:
    """A sweep from fixed layouts (no search): TP8 at the baseline and the first value, TP1 from
    the second value on, so TP communication vanishes there because the plan changed."""
    model, work = f.dense_model(), f.workload(global_batch=64)
    tp8 = Layout(tp=8, dp=4, sequence_parallel=True)
    tp1 = Layout(tp=1, dp=32, zero_stage=1)
    estimates = {
        # nic-gbps values are Gb/s; the tier takes GB/s (issue 28 refuses 400 GB/s per GPU)
        (value, lo.tp): f.frozen_estimate(
            f"whatif_{value}_tp{lo.tp}", model, f.cluster(32, ib_gb_per_s=value / 8), lo, work
        )
        for value, lo in [(25, tp8), (50, tp8), (100, tp1), (400, tp1)]
    }
    base = estimates[(50, 8)]

    def point(e, value):
        return whatif.WhatIfPoint(value, e, e.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu - 1)

    points = [point(estimates[(v, t)], v) for v, t in [(25, 8), (100, 1), (400, 1)]]
    baseline = point(base, math.nan)
    cal = f.frozen_calibration("whatif_calibration", f.cluster(32))
    hidden = whatif.hidden_from(points, cal)
    return whatif.WhatIfResult(
        "nic-gbps", "test", 32, baseline, tuple(points), hidden, model="dense-test",
        calibration=cal, varied_tiers=("ib",), crossed_tiers=("nvlink", "ib"),
        tier_names=("nvlink", "ib"),
    )  # fmt: skip


def test_conclusions_name_plan_changes_and_why_a_term_vanished():
    r = fixed_sweep()
    text = "\n".join(conclusions(r))
    assert "At 100 the plan changes: TP8 PP1 DP4 mb1 Z1 -> TP1 PP1 DP32 mb1 Z1." in text
    assert r.hidden_from["tp_comm"] == 100
    assert "TP is <= 1% of the step from 100 on (because the plan there has no TP group" in text


@pytest.mark.parametrize("width", [80, 120])
def test_whatif_snapshot(width):
    buf = io.StringIO()
    Console(width=width, color_system=None, file=buf).print(
        render_whatif(fixed_sweep(), f.cluster(32))
    )
    text = buf.getvalue()
    check_snapshot(f"whatif_{width}.txt", text)
    assert_readable(text, width)
    for sentence in conclusions(fixed_sweep()):  # every conclusion printed whole (wrapped)
        assert " ".join(sentence.split()) in " ".join(text.split())


def test_a_long_layout_wraps_instead_of_cutting_cells():
    """Issue 28: at 80 columns with costs, cells were cut ("baseli…", MFU "42.…")."""
    import dataclasses

    from cost_models.specs import Axis

    r = fixed_sweep()
    long = Layout(tp=4, pp=4, dp=32, cp=2, vp=5, sequence_parallel=True,
                  order=(Axis.TP, Axis.CP, Axis.PP, Axis.DP))  # fmt: skip
    widen = lambda p: dataclasses.replace(p, best=p.best.model_copy(update={"layout": long}))  # noqa: E731
    r = dataclasses.replace(r, baseline=widen(r.baseline), points=tuple(map(widen, r.points)))
    buf = io.StringIO()
    Console(width=80, color_system=None, file=buf).print(render_whatif(r, f.cluster(32)))
    text = buf.getvalue()
    assert_readable(text, 80)
    assert "baseline" in text and "o:tcpd" in text


def test_a_search_cut_by_the_time_limit_is_named():
    """Issue 28 (found by the fuzzer): a whatif whose searches the time limit cut showed rows
    that moved run to run without a word; now the conclusions name the rows that are STOPPED."""
    import dataclasses

    r = fixed_sweep()
    assert not any("time limit" in c for c in conclusions(r))
    cut = dataclasses.replace(r, stopped=(True, False, False, True))
    line = [c for c in conclusions(cut) if "time limit" in c]
    assert line and line[0].startswith("Warning: the search at baseline, 400 was not proved")
