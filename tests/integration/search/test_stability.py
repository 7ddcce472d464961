"""plan --stability (issue 18): re-rank at the ends of each calibration range."""

from __future__ import annotations

import json

import pytest

import planner
from planner import api
from planner.calibrate.stability import default_ranges, stability
from planner.cli import main

ARGS = [
    "plan",
    "--model",
    "llama3-8b",
    "--cluster",
    "dgx-h100",
    "--gpus",
    "64",
    "--global-batch",
    "128",
    "--top",
    "1",
    "--json",
]


def test_sweeping_inter_node_efficiency_reports_the_takeover(capsys):
    assert main([*ARGS, "--stability-range", "inter_node_efficiency=0.05:1.0"]) == 0
    s = json.loads(capsys.readouterr().out)["stability"]
    assert s["stable"] is False
    low = [
        c for c in s["checks"] if c["assumption"] == "inter_node_efficiency" and c["value"] == 0.05
    ]
    assert low and not low[0]["same"] and low[0]["gain_pct"] > 0
    assert "inter_node_efficiency=0.05" in s["line"] and "takes over" in s["line"]
    assert low[0]["best"] in s["line"] and low[0]["best"] != s["baseline"]


def test_narrow_ranges_are_stable():
    # (global batch 256: at 128 the recommended TP2 DP32 sits 0.9 % behind TP1 DP32 CP2, inside
    # the 1 % simplicity tolerance, so a 1 % range already flips it: correctly not stable)
    r = planner.plan_for("llama3-8b", "dgx-h100", num_gpus=64, global_batch=256, top_k=1)
    narrow = {
        k: (0.99 * (lo + hi) / 2, 1.01 * (lo + hi) / 2)
        for k, (lo, hi) in default_ranges(r.cluster).items()
    }
    narrow["inter_node_efficiency"] = (0.895, 0.9)  # around the preset's 0.9
    space, options = planner.search_inputs(top_k=1)
    s = stability(r, lambda c: api.plan(r.model, c, r.workload, space, options), narrow)
    assert s["stable"] and s["line"].startswith("stable:")
    assert all(c["same"] for c in s["checks"])


def test_bad_stability_range_exits_2(capsys):
    assert main([*ARGS, "--stability-range", "inter_node_efficiency=0.9"]) == 2
    assert "NAME=LO:HI" in capsys.readouterr().err


def test_calibrated_ranges_come_from_the_fit(tmp_path):
    from calibration_fixtures import GEMM_SHAPES, gemm_csv

    from planner.calibrate import calibrate

    csv = gemm_csv(tmp_path / "g.csv", 989.4, 0.6, 300.0, "bf16", GEMM_SHAPES)
    cluster, _ = calibrate("dgx-h100", gemm=str(csv))
    lo, hi = default_ranges(cluster)["gemm_efficiency"]
    assert lo == pytest.approx(0.6 * 0.97, rel=1e-3)  # exact fixture: the 3 % floor applies
    assert hi == pytest.approx(0.6 * 1.03, rel=1e-3)
    assert default_ranges(cluster)["attention_efficiency"] == (0.35, 0.70)  # not measured


def test_each_replan_searches_the_plans_own_framework(capsys, monkeypatch):
    """Issue 28: --stability re-planned with Megatron's rules whatever --framework said; every
    re-plan now searches the plan's own framework space (its orders, ZeRO stages, recompute)."""
    seen = []
    plan = api.plan

    def recording(model, cluster, workload, space, options, *rest, **keywords):
        seen.append(space.framework)
        return plan(model, cluster, workload, space, options, *rest, **keywords)

    monkeypatch.setattr(api, "plan", recording)
    narrow = "inter_node_efficiency=0.85:0.9"
    assert main([*ARGS, "--framework", "torchtitan", "--stability-range", narrow]) == 0
    assert json.loads(capsys.readouterr().out)["stability"]["checks"]
    assert len(seen) >= 3 and set(seen) == {"torchtitan"}, seen
