"""Collective curves (nccl-tests size -> bus bandwidth) as the network model's data, by hand."""

from __future__ import annotations

import math

import pytest

import models_zoo
from cost_models import commtable
from cost_models.commtable import CollectiveBook, busbw_factor, group_span, model_time_s, pair_span
from cost_models.pricer import Pricer
from cost_models.specs import KernelTables, Layout, Workload

MIB = 2**20


def _curve_dgx():
    """dgx-h100 without its shipped kernel tables (the preset prices kernels on them): these
    tests compare collective tables alone against the model, compute on the curve."""
    return models_zoo.load_cluster("dgx-h100", 64).model_copy(update={"kernels": None})


def _dgx(rows: list[tuple], **kw: object):
    c = _curve_dgx()
    tables = KernelTables(source="test curves", collectives=tuple(rows), **kw)
    return c.model_copy(update={"kernels": tables})


def _busbw(op: str, ranks: int, nodes: int, size: float, scale: float = 1.0) -> float:
    """The model's own bus bandwidth for this run, times `scale`."""
    c = models_zoo.load_cluster("dgx-h100", 64)
    t = model_time_s(op, size, group_span(ranks, nodes, c), c.tiers)
    return size / t / 1e9 * busbw_factor(op, ranks) * scale


def test_spans_of_runs_and_hops_on_dgx_h100() -> None:
    c = models_zoo.load_cluster("dgx-h100", 64)
    assert group_span(8, 1, c) == (8, 8)
    assert group_span(16, 2, c) == (8, 16)
    assert group_span(4, 4, c) == (1, 4)  # mpirun -npernode 1: one GPU per node
    assert pair_span((8, 16)) == (1, 2) and pair_span((8, 8)) == (2, 2)
    assert busbw_factor("all_reduce", 8) == 2 * 7 / 8
    assert busbw_factor("all_gather", 4) == 3 / 4 and busbw_factor("sendrecv", 2) == 1.0


def test_measured_interpolated_and_extrapolated_sizes() -> None:
    # all-reduce over one node at 1 MiB (100 GB/s busbw) and 4 MiB (400 GB/s busbw)
    c = _dgx(
        [("all_reduce", 8, 1, MIB, 100.0, "auto"), ("all_reduce", 8, 1, 4 * MIB, 400.0, "auto")]
    )
    book, span = CollectiveBook(c), (8, 8)
    algbw = 100e9 / (2 * 7 / 8)
    f = book.factor("all_reduce", span, MIB)
    assert f * model_time_s("all_reduce", MIB, span, c.tiers) == pytest.approx(MIB / algbw)
    # 2 MiB, halfway in log size: busbw sqrt(100 x 400) = 200 GB/s
    f2 = book.factor("all_reduce", span, 2 * MIB)
    t2 = 2 * MIB / (200e9 / (2 * 7 / 8))
    assert f2 * model_time_s("all_reduce", 2 * MIB, span, c.tiers) == pytest.approx(t2)
    assert book.factor("all_reduce", span, 64 * MIB) == 1.0  # outside: the model holds
    trace = book.traced()
    for size in (MIB, 2 * MIB, 64 * MIB):
        trace.factor("all_reduce", span, size, "tp")
    assert trace.seen == [("tp", "measured"), ("tp", "interpolated"), ("tp", "extrapolated")]
    assert book.seen is None  # the traced copy records, the book does not


def test_between_group_sizes_the_ratio_to_the_model_is_log_interpolated() -> None:
    size = 64 * MIB
    rows = [
        ("all_reduce", 16, 2, size, _busbw("all_reduce", 16, 2, size, 0.5), "auto"),
        ("all_reduce", 64, 8, size, _busbw("all_reduce", 64, 8, size, 0.8), "auto"),
    ]
    book = CollectiveBook(_dgx(rows))
    assert book.factor("all_reduce", (8, 16), size) == pytest.approx(2.0)
    assert book.factor("all_reduce", (8, 64), size) == pytest.approx(1.25)
    # 4 nodes: halfway between 2 and 8 in log: the geometric mean of the two ratios
    trace = book.traced()
    assert trace.factor("all_reduce", (8, 32), size, "dp") == pytest.approx(math.sqrt(2.5))
    assert trace.seen == [("dp", "interpolated")]
    # other kinds of group say nothing: one GPU per node, or beyond the largest measured
    assert book.factor("all_reduce", (1, 4), size) == 1.0
    assert book.factor("all_reduce", (8, 128), size) == 1.0


def test_forced_algorithm_rows_stand_in_only_when_nothing_else_is_measured() -> None:
    size = 64 * MIB
    ring = ("all_reduce", 8, 1, size, _busbw("all_reduce", 8, 1, size, 0.5), "ring")
    auto = ("all_reduce", 8, 1, size, _busbw("all_reduce", 8, 1, size, 0.25), "auto")
    assert CollectiveBook(_dgx([ring])).factor("all_reduce", (8, 8), size) == pytest.approx(2.0)
    both = CollectiveBook(_dgx([ring, auto]))
    assert both.factor("all_reduce", (8, 8), size) == pytest.approx(4.0)


def _estimate(cluster, **lo: int):
    model = models_zoo.load_model("llama3-8b")
    work = Workload(seq_len=8192, global_batch_seqs=64)
    layout = Layout(micro_batch=1, **lo)
    return Pricer(model, cluster, work).estimate(layout)


def test_the_pricer_takes_tp_from_the_curve_and_keeps_the_model_elsewhere() -> None:
    # TP 8 all-reduce of 8192 tokens x 4096 x 2 B = 64 MiB per call (the layers', and the end
    # stages' without sequence parallelism), and the loss's fp32 all-reduces of 8192 x 4 B
    # (stage.end_stage_tp_costs); measured at half the model's bus bandwidth, every TP
    # collective takes twice the model's time (the head's backward one stays hidden behind its
    # wgrad GEMM).
    size, loss = 8192 * 4096 * 2, 8192 * 4
    rows = [(kind, 8, 1, n, _busbw(kind, 8, 1, n, 0.5), "auto") for kind, n in (
        ("all_reduce", size), ("all_reduce", loss)
    )]  # fmt: skip
    base = _curve_dgx()
    plain = _estimate(base, tp=8, pp=2, dp=4)
    tabled = _estimate(_dgx(rows), tp=8, pp=2, dp=4)
    assert tabled.breakdown_s["tp_comm"] == pytest.approx(2 * plain.breakdown_s["tp_comm"])
    for term in ("compute", "pp_comm", "dp_comm"):
        assert tabled.breakdown_s[term] == pytest.approx(plain.breakdown_s[term], rel=1e-12)
    assert plain.kernels is None
    assert tabled.kernels is not None and tabled.kernels["table"] == "test curves"
    terms = tabled.kernels["terms"]
    # without sequence parallelism: the layers' all-reduce, the end stages' all-reduce of the
    # same activations (embedding, head backward) and the loss's all-reduce
    assert terms["tp_comm"] == {"measured": 3, "interpolated": 0, "extrapolated": 0}
    assert terms["dp_comm"]["extrapolated"] > 0 and terms["pp_comm"]["extrapolated"] == 1
    assert "gemm" not in terms  # no kernel rows: compute stays on the curves, unreported


def test_a_curve_equal_to_the_model_prices_every_term_as_the_model() -> None:
    # PP hops (2 ranks, one per node) and DP all-reduce over 4 nodes, one GPU each, at the
    # model's own bus bandwidth over 1 KiB - 8 GiB: the step is the model's (up to the log
    # interpolation between the measured powers of two: DP buckets fall between them).
    sizes = [2.0**e for e in range(10, 34)]
    rows = [("sendrecv", 2, 2, s, _busbw("sendrecv", 2, 2, s), "auto") for s in sizes]
    rows += [
        ("reduce_scatter", 4, 4, s, _busbw("reduce_scatter", 4, 4, s), "auto") for s in sizes
    ]
    rows += [("all_gather", 4, 4, s, _busbw("all_gather", 4, 4, s), "auto") for s in sizes]
    base = _curve_dgx()
    plain = _estimate(base, tp=8, pp=2, dp=4)
    tabled = _estimate(_dgx(rows), tp=8, pp=2, dp=4)
    assert tabled.step_time_s == pytest.approx(plain.step_time_s, rel=1e-4)
    terms = tabled.kernels["terms"]  # type: ignore[index]
    assert terms["pp_comm"]["extrapolated"] == 0 and terms["dp_comm"]["extrapolated"] == 0


def test_bounds_use_the_same_pp_price() -> None:
    size = 8192 * 4096 * 2 / 8
    rows = [("sendrecv", 2, 2, size, _busbw("sendrecv", 2, 2, size, 0.1), "auto")]
    model = models_zoo.load_model("llama3-8b")
    work = Workload(seq_len=8192, global_batch_seqs=64)
    lo = Layout(micro_batch=1, tp=8, pp=2, dp=4)
    p = Pricer(model, _dgx(rows), work)
    est = p.estimate(lo)
    bound = p.placement_bounds_s(lo, [p.spans(lo)], with_dp=True)[0]
    assert bound <= est.step_time_s * (1 + 1e-9)
    assert est.breakdown_s["pp_comm"] == pytest.approx(
        10 * _estimate(models_zoo.load_cluster("dgx-h100", 64), tp=8, pp=2, dp=4).breakdown_s[
            "pp_comm"
        ]
    )


def test_deepep_is_priced_on_the_model() -> None:
    book = CollectiveBook(_dgx([("all_to_all", 16, 2, MIB, 10.0, "auto")])).traced()
    book.untabled("ep")
    assert book.seen == [("ep", "extrapolated")]
    assert commtable.OPS == ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")
