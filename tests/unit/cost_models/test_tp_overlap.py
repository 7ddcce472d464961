"""Transformer Engine userbuffers TP overlap per GEMM (cost_models/tp_overlap.py, issue 32
item 4): the transcribed configurations, one overlap priced from a hand-built kernel table where
the piece time is known, the layer's collectives, the explain counts and the exports."""

from __future__ import annotations

import typing

import pytest
from factories import cluster, dense_model, tiny_record, workload

from cost_models import estimate, framework
from cost_models.calibration import calibration_for_cluster
from cost_models.compute import Gemm
from cost_models.errors import InvalidInput
from cost_models.kernels import EXTRAPOLATED, MEASURED, KernelBook
from cost_models.pricer import Pricer
from cost_models.specs import KernelTables, Layout, TpOverlapConfig
from cost_models.tp_overlap import (
    BULK,
    CONFIGS,
    PIPELINE,
    RING,
    TE1_DEFAULT,
    TE_DEFAULT,
    TP_OVERLAP_CHOICES,
    UbOverlap,
    overlap_s,
)
from planner.export.launch import megatron_args, torchtitan_parallelism
from planner.validate import validate_record

MS = 1e-3
GPU = cluster().gpu
CAL = calibration_for_cluster(cluster())
F1 = 1 / CAL.sm_count  # one SM's share


def _book(*rows: tuple[int, int, int, float]) -> KernelBook:
    return KernelBook(
        KernelTables(source="hand-built", gemm=[(m, n, k, "bf16", "TN", t) for m, n, k, t in rows])
    )


# Whole GEMM 4096 x 1024 x 1024: 1.0 ms; its tp=4 ring piece (1024 rows): 0.3 ms; its 4-way
# pipeline piece (256 columns): 0.26 ms. A far corner keeps every queried shape inside the box.
BOOK = _book(
    (4096, 1024, 1024, 1.0), (1024, 1024, 1024, 0.3), (4096, 256, 1024, 0.26),
    (512, 256, 512, 0.01), (8192, 2048, 2048, 10.0),
)  # fmt: skip
G = [Gemm(4096, 1024, 1024)]


def test_the_configurations_are_the_sources_and_the_workload_field_lists_them():
    assert typing.get_args(TpOverlapConfig) == TP_OVERLAP_CHOICES
    te = CONFIGS[TE_DEFAULT]  # TE base.py initialize_ub get_default_config
    assert {n for n, c in te.items() if c.method == RING} == {
        "qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad",
    }  # fmt: skip
    assert te["proj_fprop"] == UbOverlap(PIPELINE, 16, True, 4)
    assert te["fc1_wgrad"] == UbOverlap(BULK, 16, True)
    assert te["qkv_fprop"] == UbOverlap(RING, 1, False)
    fp8_405b = CONFIGS["userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"]
    assert fp8_405b["proj_fprop"] == UbOverlap(RING, 1, True)  # RingExchange(num_sm=1, margin)
    assert (fp8_405b["qkv_wgrad"].num_sm, fp8_405b["fc1_wgrad"].num_sm) == (24, 2)
    assert framework.MEGATRON.physics["tp_overlap"].value == TE_DEFAULT
    assert framework.TORCHTITAN.physics["tp_overlap"].value == "collective_matmul"


def test_ring_exchange_prices_tp_pieces_of_m_over_tp_from_the_table():
    c = 0.8 * MS
    o = overlap_s(UbOverlap(RING, 1, False), c, 4, G, 0, GPU, CAL, False, BOOK)
    # 4 x 0.3 ms = 1.2 ms of GEMM: 0.2 ms over the whole GEMM. The first chunk (0.2 ms) is
    # exposed, the other 0.6 ms hide, sharing one SM meanwhile.
    assert o.status == MEASURED
    assert o.gemm_extra_s == pytest.approx(0.2 * MS, rel=1e-9)
    assert o.exposed_s == pytest.approx(0.2 * MS + 0.6 * MS * F1 / (1 - F1), rel=1e-9)


def test_pipeline_splits_the_output_columns_and_its_sms_are_taken_while_hidden():
    c = 2.0 * MS
    o = overlap_s(UbOverlap(PIPELINE, 16, False, 4), c, 8, G, 0, GPU, CAL, False, BOOK)
    f = 16 / CAL.sm_count
    split = 4 * 0.26 * MS  # 4 pieces of 256 output columns
    assert o.gemm_extra_s == pytest.approx(split - 1.0 * MS, rel=1e-9)
    # last chunk (c / 4) exposed, then 1.5 ms behind a 1.04 ms GEMM: 0.46 ms exposed beyond it
    hidden = split
    assert o.exposed_s == pytest.approx(0.5 * MS + (1.5 * MS - split) + hidden * f / (1 - f))


def test_a_margin_runs_the_whole_split_gemm_on_the_remaining_sms():
    """set_sm_margin: cuBLASLt targets sm_count - 16 SMs for every piece, which runs the GEMM
    sm_count / (sm_count - 16) slower (measured: bench/results/h100-2026-11-27/carveout2.csv);
    the communication then takes no SMs from it."""
    c = 2.0 * MS
    o = overlap_s(UbOverlap(PIPELINE, 16, True, 4), c, 8, G, 0, GPU, CAL, False, BOOK)
    f = 16 / CAL.sm_count
    split = 4 * 0.26 * MS / (1 - f)
    assert o.gemm_extra_s == pytest.approx(split - 1.0 * MS, rel=1e-9)
    assert o.exposed_s == pytest.approx(0.5 * MS + (1.5 * MS - split), rel=1e-9)
    bulk = overlap_s(UbOverlap(BULK, 16, True), 0.5 * MS, 8, G, 0, GPU, CAL, False, BOOK)
    assert bulk.gemm_extra_s == pytest.approx(1.0 * MS / (1 - f) - 1.0 * MS, rel=1e-9)
    assert bulk.exposed_s == 0.0


def test_transformer_engine_1_defaults_have_no_margin():
    """TE v1.5-v1.13 initialize_ub: set_sm_margin 0 unless configured; TE 2.0 turned it on for
    the pipeline and bulk methods."""
    te1, te2 = CONFIGS[TE1_DEFAULT], CONFIGS[TE_DEFAULT]
    assert set(te1) == set(te2)
    for name, cfg in te2.items():
        assert te1[name] == UbOverlap(cfg.method, cfg.num_sm, False, cfg.num_splits)


def test_bulk_hides_the_whole_collective_behind_the_whole_gemm():
    o = overlap_s(UbOverlap(BULK, 2, False), 1.5 * MS, 8, G, 0, GPU, CAL, False, BOOK)
    f = 2 / CAL.sm_count
    assert o.gemm_extra_s == 0.0
    assert o.exposed_s == pytest.approx(0.5 * MS + 1.0 * MS * f / (1 - f), rel=1e-9)


def test_a_piece_below_the_table_leaves_the_gemm_whole_and_says_so():
    # tp 16: pieces of 256 rows, below the table's smallest M (512): not priced on the curve
    o = overlap_s(UbOverlap(RING, 1, False), 0.8 * MS, 16, G, 0, GPU, CAL, False, BOOK)
    assert o.status == EXTRAPOLATED
    assert o.gemm_extra_s == 0.0


def test_a_split_the_table_says_is_faster_costs_nothing():
    book = _book((4096, 1024, 1024, 1.0), (1024, 1024, 1024, 0.2), (8192, 2048, 2048, 10.0))
    o = overlap_s(UbOverlap(RING, 1, False), 0.8 * MS, 4, G, 0, GPU, CAL, False, book)
    assert o.status == MEASURED and o.gemm_extra_s == 0.0


def test_userbuffers_count_the_bulk_all_gather_of_backward_as_traffic():
    """Backward all-gathers the column Linears' input again for their weight gradients
    (qkv_dgrad / fc1_dgrad): 2 blocks x (2 forward + 3 backward) = 10 collectives a layer
    where the unoverlapped count is 2 blocks x 2 passes x (all-gather + reduce-scatter) = 8.
    The GEMMs' extra seconds are charged to tp_comm, not to compute."""
    lo = Layout(tp=8, pp=2, dp=4, sequence_parallel=True)
    w = workload(tp_overlap=TE_DEFAULT)
    off = estimate(dense_model(), cluster(64), w, lo)
    on = estimate(dense_model(), cluster(64), w, lo.model_copy(update={"tp_comm_overlap": True}))
    # the last stage (the slower: the LM head) also moves its head's and loss's TP traffic,
    # which no userbuffers configuration covers (stage.end_stage_tp_costs)
    p = Pricer(dense_model(), cluster(64), w)
    head_s = off.num_microbatches * p.end_costs(lo, p.spans(lo))[1].tp_total_s
    assert head_s > 0
    layers_on, layers_off = on.comm_total_s["tp"] - head_s, off.comm_total_s["tp"] - head_s
    assert layers_on == pytest.approx(layers_off * 10 / 8, rel=1e-9)
    assert on.breakdown_s["compute"] == off.breakdown_s["compute"]
    assert 0 < on.breakdown_s["tp_comm"] < off.breakdown_s["tp_comm"]


def test_explain_counts_the_split_pieces_lookups():
    lo = Layout(tp=8, dp=8, sequence_parallel=True, tp_comm_overlap=True)
    far = _book((8192, 1024, 1024, 1.0), (16384, 2048, 2048, 10.0))  # rows of 8K-16K tokens
    cl = cluster(64).model_copy(update={"kernels": far.tables})
    e = Pricer(dense_model(num_layers=4), cl, workload(tp_overlap=TE_DEFAULT)).estimate(lo)
    # qkv / fc1 fprop and proj / fc2 dgrad run as 8 ring pieces, proj / fc2 fprop as 4 pipeline
    # pieces: six split GEMMs a dense layer, none of them inside this table (4,096 tokens)
    counts = e.kernels["terms"]["tp_overlap_split"]
    assert counts == {"measured": 0, "interpolated": 0, "extrapolated": 6}


def test_bad_tp_overlap_setting_is_one_line():
    row = validate_record(tiny_record({"tp_overlap": "ring"}, layout={"tp": 2, "dp": 4}))
    assert row.estimate is None
    assert "tp_overlap" in row.error and "\n" not in row.error


def test_megatron_export_emits_te_defaults_and_refuses_other_configs():
    model = dense_model(num_layers=4)
    lo = Layout(tp=8, dp=8, sequence_parallel=True, tp_comm_overlap=True)
    for name, ok in ((TE_DEFAULT, True), ("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", False)):
        w = workload(4096, 64, tp_overlap=name)
        e = Pricer(model, cluster(64), w).estimate(lo)
        if ok:
            assert "--tp-comm-overlap" in megatron_args(model, w, e)
        else:
            with pytest.raises(InvalidInput, match=r"tp_overlap userbuffers_fp8_h100.*cfg FILE"):
                megatron_args(model, w, e)
    w = workload(4096, 64, tp_overlap=TE1_DEFAULT)  # megatron-core 0.19.2 runs TE 2.x
    e = Pricer(model, cluster(64), w).estimate(lo)
    with pytest.raises(InvalidInput, match=r"te1_default describes Transformer Engine 1\.x"):
        megatron_args(model, w, e)
    w = workload(4096, 64, tp_overlap=TE_DEFAULT)
    e = Pricer(model, cluster(64), w).estimate(lo)
    with pytest.raises(InvalidInput, match="torchtitan.*tp_overlap te_default"):
        torchtitan_parallelism(model, w, e)
