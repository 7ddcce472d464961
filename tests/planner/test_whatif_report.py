"""`planner whatif` as a reader sees it (issue 20): conclusions that match the rows, which plan
changed, a warning when the varied parameter cannot matter, 80/120-column tables, the plot."""

from __future__ import annotations

import io
import math

import factories as f
import pytest
from rich.console import Console
from test_report import assert_readable, check_snapshot
from test_whatif import SMALL, fat_tree

from cost_models.calibration import calibration_for
from cost_models.specs import Layout
from planner import cli, whatif
from planner.report import plot
from planner.report.whatif_view import conclusions, render_whatif


def fixed_sweep() -> whatif.WhatIfResult:
    """A sweep from fixed layouts (no search): TP8 at the baseline and the first value, TP1 from
    the second value on, so TP communication vanishes there because the plan changed."""
    model, work = f.dense_model(), f.workload(global_batch=64)
    tp8 = Layout(tp=8, dp=4, sequence_parallel=True)
    tp1 = Layout(tp=1, dp=32, zero_stage=1)
    estimates = {
        (value, lo.tp): f.frozen_estimate(
            f"whatif_{value}_tp{lo.tp}", model, f.cluster(32, ib_gb_per_s=value), lo, work
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


def test_hidden_from_is_judged_on_the_numbers_the_rows_print():
    values = [25, 100, 400, 1600]
    r = whatif.whatif("llama3-8b", fat_tree(1), "nic-gbps", values, tp=8, pp=1, **SMALL)
    cal = calibration_for("hopper")
    for term, value in r.hidden_from.items():
        shown = {p.value: round(100 * whatif.exposed_share(p.best, term, cal), 1) for p in r.points}
        if value is not None:  # the printed share (one decimal, %) is <= 1 from there on
            assert all(s <= 1.0 for v, s in shown.items() if v >= value), (term, shown)


def test_two_sites_at_256_gpus_warn_that_the_wan_cannot_matter(capsys):
    argv = ["whatif", "--model", "llama3-8b", "--cluster", "two-dc-h100", "--gpus", "256"]
    argv += ["--vary", "wan-gbps", "--values", "100,400", "--global-batch", "256"]
    assert cli.main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no group of any plan here crosses the wan tier, so wan-gbps cannot change" in out


def test_plot_has_two_axes_legend_title_and_baseline(tmp_path, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    r = whatif.whatif("llama3-8b", fat_tree(1), "nic-gbps", [100, 400], tp=8, pp=1, **SMALL)
    out = tmp_path / "nic.png"
    plot.save_plot(r, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = figures
    ax = fig.axes[0]
    assert "Llama 3 8B" in ax.get_title() and "(64 GPUs)" in ax.get_title()
    assert ax.get_ylabel() == "tokens/s/GPU" and ax.get_legend() is not None
    assert any(c.get_ylabel() == "MFU %" for c in ax.child_axes)  # the second y-axis
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("baseline") for label in labels)


def test_plot_of_slice_shapes_labels_each_shape(tmp_path, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    r = whatif.whatif(
        "qwen3-30b-a3b", "tpu-v5p-4096", "slice-shape", ["8x8x8", "4x4x32"], num_gpus=512,
        global_batch=512, tp=1, pp=1, ep=128,
    )  # fmt: skip
    out = tmp_path / "shape.png"
    plot.save_plot(r, str(out))
    (fig,) = figures
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["8x8x8", "4x4x32"]
