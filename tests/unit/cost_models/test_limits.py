"""Limiting cases and monotonicity of the composed estimate."""

import itertools

import pytest
from factories import cluster, dense_model, layout, moe_model, workload

from cost_models import estimate
from cost_models.specs import Layout

LAYOUTS_64 = [
    layout(tp=8, pp=2, dp=4, sequence_parallel=True),
    layout(tp=4, pp=4, dp=4, vp=2, sequence_parallel=True),
    layout(tp=2, pp=1, dp=32, micro_batch=2),
    layout(tp=1, pp=1, dp=64, zero_stage=3),
    layout(tp=8, pp=1, dp=4, cp=2, sequence_parallel=True),
]


def test_tp1_has_no_tp_traffic():
    e = estimate(dense_model(), cluster(64), workload(), layout(dp=64))
    assert e.breakdown_s["tp_comm"] == 0 and e.comm_total_s["tp"] == 0


def test_pp1_has_no_bubble_or_p2p():
    e = estimate(dense_model(), cluster(64), workload(), layout(tp=8, dp=8, sequence_parallel=True))
    assert e.breakdown_s["bubble"] == 0 and e.breakdown_s["pp_comm"] == 0
    assert e.comm_total_s["pp"] == 0


def test_one_node_has_no_inter_node_traffic():
    lo = layout(tp=2, pp=2, dp=2, sequence_parallel=True)
    slow = estimate(dense_model(), cluster(8, ib_gb_per_s=1), workload(global_batch=8), lo)
    fast = estimate(dense_model(), cluster(8, ib_gb_per_s=200), workload(global_batch=8), lo)
    assert slow.step_time_s == fast.step_time_s
    assert all(f["ib"] == 1 for f in slow.placement.values())


def test_no_ep_traffic_without_experts_and_ep_traffic_with():
    dense = estimate(dense_model(), cluster(64), workload(), layout(dp=64))
    assert dense.comm_total_s["ep"] == 0
    moe = estimate(moe_model(), cluster(64), workload(), layout(dp=64, ep=16))
    assert moe.comm_total_s["ep"] > 0


@pytest.mark.parametrize("lo", LAYOUTS_64)
def test_more_bandwidth_is_never_slower(lo):
    model, w = dense_model(), workload()
    times = [
        estimate(model, cluster(64, ib_gb_per_s=bw), w, lo).step_time_s
        for bw in (12.5, 25, 50, 100, 200)
    ]
    assert times == sorted(times, reverse=True)
    times = [
        estimate(model, cluster(64, nvlink_gb_per_s=bw), w, lo).step_time_s
        for bw in (150, 300, 450, 900)
    ]
    assert times == sorted(times, reverse=True)


def test_oversubscription_is_never_faster():
    lo = layout(tp=1, pp=1, dp=64, zero_stage=3)
    times = [
        estimate(dense_model(), cluster(64, oversubscription=r), workload(), lo).step_time_s
        for r in (1, 2, 4)
    ]
    assert times == sorted(times)


@pytest.mark.parametrize("base", LAYOUTS_64)
def test_higher_zero_stage_never_needs_more_memory(base):
    mems = [
        estimate(
            dense_model(), cluster(64), workload(), base.model_copy(update={"zero_stage": z})
        ).peak_memory_gib
        for z in range(4)
    ]
    assert mems == sorted(mems, reverse=True)


@pytest.mark.parametrize(
    "base,model", list(itertools.product(LAYOUTS_64[:3], [dense_model(), moe_model()]))
)
def test_more_recompute_never_needs_more_memory(base, model):
    if model.moe is not None:
        base = base.model_copy(update={"ep": 2})
    mems = [
        estimate(
            model, cluster(64), workload(), base.model_copy(update={"recompute": r})
        ).peak_memory_gib
        for r in ("none", "selective", "full")
    ]
    assert mems == sorted(mems, reverse=True)


def test_breakdown_sums_to_step_time():
    for lo in LAYOUTS_64:
        e = estimate(dense_model(), cluster(64), workload(), lo)
        assert sum(e.breakdown_s.values()) == pytest.approx(e.step_time_s, rel=1e-12)
        assert e.tokens_per_s_per_gpu == pytest.approx(64 * 4096 / e.step_time_s / 64)


def test_estimate_is_deterministic():
    lo = Layout(tp=4, pp=4, dp=4, vp=2, sequence_parallel=True)
    a = estimate(dense_model(), cluster(64), workload(), lo)
    b = estimate(dense_model(), cluster(64), workload(), lo)
    assert a == b
