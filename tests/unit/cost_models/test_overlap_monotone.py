"""TP comm overlap (collective matmul) and step-time monotonicity the search relies on."""

import itertools

import pytest
from factories import cluster, dense_model, layout, moe_model, workload

from cost_models import estimate
from cost_models.stage import overlapped_tp_s

LAYOUTS_64 = [
    layout(tp=8, pp=2, dp=4, sequence_parallel=True),
    layout(tp=4, pp=4, dp=4, vp=2, sequence_parallel=True),
    layout(tp=2, pp=1, dp=32, micro_batch=2),
    layout(tp=1, pp=1, dp=64, zero_stage=3),
]


def test_overlapped_collective_by_hand():
    # 8 ms collective in 8 chunks: the first 1 ms is exposed; 7 ms hide behind a 5 ms GEMM -> 2 ms.
    assert overlapped_tp_s(8e-3, 8, 5e-3) == pytest.approx(1e-3 + 2e-3)
    # A GEMM longer than the remaining chunks hides all of them.
    assert overlapped_tp_s(8e-3, 8, 50e-3) == pytest.approx(1e-3)
    # No partner GEMM: nothing hides.
    assert overlapped_tp_s(8e-3, 8, 0.0) == pytest.approx(8e-3)


@pytest.mark.parametrize("lo", LAYOUTS_64[:3])
def test_tp_overlap_never_slower_and_only_touches_tp(lo):
    # The collective-matmul decomposition (torchtitan's async TP); Transformer Engine's
    # userbuffers add a backward all-gather and SM margins (test_tp_overlap.py).
    w = workload(tp_overlap="collective_matmul")
    off = estimate(dense_model(), cluster(64), w, lo)
    on = estimate(dense_model(), cluster(64), w, lo.model_copy(update={"tp_comm_overlap": True}))
    assert 0 < on.breakdown_s["tp_comm"] < off.breakdown_s["tp_comm"]
    assert on.comm_total_s["tp"] == off.comm_total_s["tp"]  # same bytes on the link
    assert on.breakdown_s["compute"] == off.breakdown_s["compute"]


def test_tp_overlap_is_a_no_op_without_tp():
    lo = layout(dp=64)
    off = estimate(dense_model(), cluster(64), workload(), lo)
    on = estimate(
        dense_model(), cluster(64), workload(), lo.model_copy(update={"tp_comm_overlap": True})
    )
    assert on.step_time_s == off.step_time_s


@pytest.mark.parametrize(
    "base,model", list(itertools.product(LAYOUTS_64[:3], [dense_model(), moe_model()]))
)
def test_more_recompute_is_never_faster(base, model):
    if model.moe is not None:
        base = base.model_copy(update={"ep": 2})
    for overlap in (False, True):
        times = [
            estimate(
                model,
                cluster(64),
                workload(),
                base.model_copy(update={"recompute": r, "tp_comm_overlap": overlap}),
            ).step_time_s
            for r in ("none", "selective", "full")
        ]
        assert times == sorted(times)


@pytest.mark.parametrize("base", LAYOUTS_64)
def test_higher_zero_stage_is_never_faster_from_stage_1(base):
    # 0 -> 1 is genuinely faster: same gradient bytes (all-reduce = reduce-scatter + all-gather)
    # but each rank runs the optimizer on 1/dp of the parameters (Rajbhandari et al. 2020).
    # Above 1 the stages only add communication, but for one term: a rank whose gradients are
    # sharded between steps zeroes only its shard (stage.grad_zero_bytes; Megatron-FSDP's
    # sharded buffer against the distributed optimizer's whole one), so the order holds with
    # that memset off, and with it on only the step tail ("optimizer") moves, the most where
    # the whole buffer is zeroed.
    # The same goes for Megatron's NaN check of each gradient bucket (stage.
    # grad_bucket_pass_bytes), which Megatron-FSDP (ZeRO-3) skips where it overlaps the
    # reduction: priced off here, and test_grad_bucket_passes.py prices it.
    def priced(z: int, **over):
        lo = base.model_copy(update={"zero_stage": z})
        return estimate(dense_model(), cluster(64), workload(grad_nan_check=False, **over), lo)

    times = {z: priced(z, grad_zeroing=False).step_time_s for z in range(4)}
    assert times[1] <= times[0]
    assert [times[1], times[2], times[3]] == sorted([times[1], times[2], times[3]])
    added = {}
    for z in range(4):
        on, off = priced(z).breakdown_s, priced(z, grad_zeroing=False).breakdown_s
        assert {k: v for k, v in on.items() if k != "optimizer"} == {
            k: v for k, v in off.items() if k != "optimizer"
        }
        added[z] = on["optimizer"] - off["optimizer"]
        assert added[z] > 0
    assert added[3] < added[1] == pytest.approx(added[0], rel=1e-12)
