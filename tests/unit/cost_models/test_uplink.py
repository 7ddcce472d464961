"""cost_models/uplink.py: the share of a switch's ports sending upward, rounded up to quarters,
and the effective taper it gives each window (issue 17)."""

from __future__ import annotations

import pytest

import models_zoo
from cost_models import uplink
from cost_models.estimate import estimate
from cost_models.specs import Layout
from planner import api


@pytest.mark.parametrize(
    ("sending", "ports", "step"),
    [(0, 24, 0), (1, 24, 1), (6, 24, 1), (7, 24, 2), (16, 24, 3), (18, 24, 3), (19, 24, 4),
     (24, 24, 4), (16, 16, 4), (8, 32, 1)],
)  # fmt: skip
def test_step_is_the_share_rounded_up_to_quarters(sending, ports, step):
    assert uplink.uplink_step(sending, ports) == step


def test_effective_taper_never_beats_the_line_rate():
    assert uplink.effective_oversubscription(3.0, 4) == 3.0
    assert uplink.effective_oversubscription(3.0, 3) == 2.25
    assert uplink.effective_oversubscription(3.0, 1) == 1.0  # 3/4 < 1: the port's own rate
    assert uplink.effective_oversubscription(7.0, 1) == 1.75


def test_full_steps_price_as_the_taper_and_fewer_senders_never_cost_more():
    spec = models_zoo.load_model("llama3-8b")
    cluster = models_zoo.load_cluster("llama3-roce-24k", 128)
    tapered = uplink.tapered_tiers(cluster)
    assert tapered == [3]  # the 7:1 aggregation tier
    wl = api.make_workload(spec, global_batch=16)
    lo = Layout(tp=8, pp=2, dp=8)
    spans = {"dp": [1, 2, 4, 8], "dp_cp": [1, 2, 4, 8], "pp": [1, 1, 1, 2]}
    plain = estimate(spec, cluster, wl, lo, spans=spans)
    full = estimate(
        spec, cluster, wl, lo, spans=spans, uplink_steps={3: 4}, pipeline_uplink_steps={3: 4}
    )
    assert full.step_time_s == plain.step_time_s
    times = [
        estimate(spec, cluster, wl, lo, spans=spans, uplink_steps={3: q}).step_time_s
        for q in range(uplink.UPLINK_STEPS + 1)
    ]
    assert times == sorted(times) and times[0] < times[-1]
    pipe = [
        estimate(spec, cluster, wl, lo, spans=spans, pipeline_uplink_steps={3: q}).step_time_s
        for q in range(uplink.UPLINK_STEPS + 1)
    ]
    assert pipe == sorted(pipe) and pipe[0] < pipe[-1]  # PP sends cross the aggregation tier
