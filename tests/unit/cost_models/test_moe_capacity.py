"""Token-drop MoE (issue 32 item 4, router imbalance): Megatron's expert capacity factor and its
padding to capacity (megatron/core/transformer/moe/moe_utils.py get_capacity,
apply_router_token_dropping; token_dispatcher.py drop_and_pad). Expected values by hand."""

from __future__ import annotations

import json
import math

import pytest
from factories import layout, moe_model, workload
from pydantic import ValidationError

from cost_models.calibration import MOE_LOAD_IMBALANCE, calibration_for
from cost_models.compute import (
    MOE_ROUTING_BASES,
    layer_time,
    megatron_expert_copies,
    moe_gemms,
    moe_imbalance,
    moe_routing,
)
from cost_models.host import capacity_rows_aligned, pads_expert_rows, syncs_every_moe_layer
from models_zoo import load_cluster
from planner.cli import main


def test_capacity_caps_the_busiest_expert():
    assert MOE_LOAD_IMBALANCE == 1.15
    assert moe_imbalance(workload(), 8) == 1.15  # dropless
    # factor 1.0: no expert takes more than the mean, the surplus is dropped
    assert moe_imbalance(workload(moe_capacity_factor=1.0), 8) == 1.0
    # factor 2.0 above the imbalance: nothing dropped, the busiest rank's 1.15
    assert moe_imbalance(workload(moe_capacity_factor=2.0), 8) == 1.15
    # forced-even routing and a factor below one: the capacity still caps it
    assert moe_imbalance(workload(moe_force_balance=True, moe_capacity_factor=0.5), 8) == 0.5
    # padded to capacity: every expert takes exactly factor x mean, whatever the routing
    assert moe_imbalance(workload(moe_capacity_factor=1.25, moe_pad_to_capacity=True), 8) == 1.25
    assert moe_imbalance(workload(moe_capacity_factor=0.75, moe_pad_to_capacity=True), 8) == 0.75


def test_one_expert_parallel_rank_carries_exactly_the_mean():
    # EP 1: the one rank holds every expert, so its rows are all routed rows, the mean; no
    # busier rank to wait on, whatever the router does
    assert moe_imbalance(workload(), 1) == 1.0
    assert moe_imbalance(workload(moe_capacity_factor=2.0), 1) == 1.0
    # padding to capacity still adds its rows at EP 1 (every expert takes f x the mean)
    assert moe_imbalance(workload(moe_capacity_factor=1.25, moe_pad_to_capacity=True), 1) == 1.25
    assert moe_imbalance(workload(), 2) == 1.15


def test_expert_time_at_ep1_is_the_balanced_time():
    # A dropless MoE layer at EP 1 prices as the same layer with forced-even routing; at EP 2
    # the dropless layer is slower than the forced-even one (the busiest rank's 1.15).
    model, gpu = moe_model(), load_cluster("dgx-h100", 8).gpu
    cal = calibration_for(gpu.generation)

    def forward_s(ep: int, **w) -> float:
        return layer_time(model, gpu, cal, workload(**w), layout(ep=ep), is_moe=True).forward_s

    assert forward_s(1) == pytest.approx(forward_s(1, moe_force_balance=True), rel=1e-12)
    assert forward_s(2) > forward_s(2, moe_force_balance=True) * 1.01


def test_expert_gemms_take_the_capped_rows():
    model, lo = moe_model(), layout(ep=4)
    dropless = moe_gemms(model, 4096.0, lo, moe_imbalance(workload(), lo.ep))
    capped = moe_gemms(model, 4096.0, lo, moe_imbalance(workload(moe_capacity_factor=1.0), lo.ep))
    # the grouped expert GEMMs (index 1, 2) carry the imbalance; the router (0) and
    # the shared experts do not
    assert [g.imbalance for g in dropless][:3] == [1.0, 1.15, 1.15]
    assert [g.imbalance for g in capped][:3] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"moe_pad_to_capacity": True}, "moe_pad_to_capacity needs moe_capacity_factor"),
        (
            {"moe_capacity_factor": 1.0, "moe_pad_to_capacity": True, "moe_dispatcher": "deepep"},
            "moe_pad_to_capacity does not work with moe_dispatcher deepep",
        ),
        ({"moe_capacity_factor": 0.0}, "moe_capacity_factor"),
        ({"moe_capacity_factor": -1.0}, "moe_capacity_factor"),
        ({"moe_capacity_factor": math.inf}, "moe_capacity_factor"),
        ({"moe_capacity_factor": math.nan}, "moe_capacity_factor"),
    ],
)
def test_refused_inputs(over, message):
    with pytest.raises(ValidationError, match=message):
        workload(**over)


def test_hybridep_pads_to_capacity():
    # megatron-core refuses padding only for the DeepEP back-end (transformer_config.py);
    # _HybridEPManager pads (drop_and_pad = moe_pad_expert_input_to_capacity)
    w = workload(moe_capacity_factor=1.0, moe_pad_to_capacity=True, moe_dispatcher="deepep",
                 moe_flex_backend="hybridep")  # fmt: skip
    assert w.moe_pad_to_capacity and w.moe_flex_backend == "hybridep"


def test_padding_to_capacity_aligns_the_rows():
    # moe_model: 16 experts, top_k 2. TP 1, CP 1, micro-batch 1, seq 4096: each router keeps
    # ceil(4096 x 2 / 16 x f) rows per expert; f 1.0 -> 512 (a multiple of 16 and 32)
    model, lo = moe_model(), layout(ep=4)
    pad = {"moe_capacity_factor": 1.0, "moe_pad_to_capacity": True}
    assert capacity_rows_aligned(model, lo, workload(precision="fp8", **pad), "tensorwise")
    assert capacity_rows_aligned(model, lo, workload(precision="mxfp8", **pad), "mxfp8")
    # f 1.01 -> ceil(517.12) = 518: not a multiple of 16, TE pads (copies) again
    odd = workload(precision="fp8", moe_capacity_factor=1.01, moe_pad_to_capacity=True)
    assert not capacity_rows_aligned(model, lo, odd, "tensorwise")
    # seq 1040: ceil(1040 x 2 / 16) = 130 rows, aligned to neither
    short = workload(seq_len=1040, precision="fp8", **pad)
    assert not capacity_rows_aligned(model, lo, short, "tensorwise")
    # seq 1152 at TP 2 (576 router tokens): 72 rows, not 16-aligned; at TP 1: 144 = 9 x 16,
    # aligned for fp8 but not for MXFP8 (32)
    tokens = workload(seq_len=1152, precision="mxfp8", **pad)
    assert not capacity_rows_aligned(model, layout(ep=4, tp=2), tokens, "tensorwise")
    assert capacity_rows_aligned(model, lo, tokens, "tensorwise")
    assert not capacity_rows_aligned(model, lo, tokens, "mxfp8")
    # dropping without padding leaves data-dependent counts: the padding copy stays
    drop = workload(precision="fp8", fp8_recipe="tensorwise", moe_capacity_factor=1.0)
    assert not capacity_rows_aligned(model, lo, drop, "tensorwise")
    assert pads_expert_rows(model, lo, drop, "tensorwise")
    # Megatron's copies: sort + restore only once the padded rows are aligned (4 -> 2)
    fp8 = workload(precision="fp8", fp8_recipe="tensorwise")
    assert megatron_expert_copies(model, lo, fp8) == 4
    assert megatron_expert_copies(model, lo, drop) == 4
    aligned = workload(precision="fp8", fp8_recipe="tensorwise", **pad)
    assert not pads_expert_rows(model, lo, aligned, "tensorwise")
    assert megatron_expert_copies(model, lo, aligned) == 2


def test_padding_to_capacity_needs_no_host_sync():
    lo = layout(ep=4)
    assert syncs_every_moe_layer(workload(), lo)
    # token dropping alone syncs on the kept counts (token_dispatcher.py before_permutation_1)
    assert syncs_every_moe_layer(workload(moe_capacity_factor=1.0), lo)
    pad = workload(moe_capacity_factor=1.0, moe_pad_to_capacity=True)
    assert not syncs_every_moe_layer(pad, lo)


def test_all_to_all_bytes_take_the_capped_rows():
    from cost_models import topology
    from cost_models.stage import ep_exchange_s
    from factories import cluster

    model, lo = moe_model(), layout(ep=4, dp=16)
    c = cluster(64)
    # without latency the exchange is bytes over bandwidth: the ratio is the rows' ratio
    zero = tuple(t.model_copy(update={"latency_us": 0.0}) for t in c.tiers)
    c = c.model_copy(update={"tiers": zero})
    span = list(topology.spans(c, lo)["ep"])
    d_free, c_free, _ = ep_exchange_s(model, c, workload(), lo, span)
    capped = workload(moe_capacity_factor=1.0, moe_pad_to_capacity=True)
    d_cap, c_cap, _ = ep_exchange_s(model, c, capped, lo, span)
    assert d_cap / d_free == pytest.approx(1.0 / 1.15, rel=1e-9)
    assert c_cap / c_free == pytest.approx(1.0 / 1.15, rel=1e-9)


def test_moe_routing_says_why():
    # each rule of moe_routing, with the basis the estimate reports
    assert moe_routing(workload(), 8) == (1.15, "load_balancing")
    assert moe_routing(workload(), 1) == (1.0, "one_ep_rank")
    assert moe_routing(workload(moe_force_balance=True), 8) == (1.0, "force_balance")
    assert moe_routing(workload(moe_capacity_factor=1.0), 8) == (1.0, "capacity")
    assert moe_routing(workload(moe_capacity_factor=2.0), 8) == (1.15, "load_balancing")
    padded = workload(moe_capacity_factor=1.25, moe_pad_to_capacity=True)
    assert moe_routing(padded, 1) == (1.25, "padded")
    bases = {"load_balancing", "one_ep_rank", "force_balance", "capacity", "padded"}
    assert set(MOE_ROUTING_BASES) == bases


def test_cli_explain_and_json_carry_the_moe_routing(capsys):
    """`estimate --json` carries moe_routing for a MoE model (and not for a dense one);
    `--explain` prints its factor and reading."""
    argv = ["estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16"]
    argv += ["--global-batch", "256", "--seq-len", "4096", "--tp", "2", "--pp", "2", "--dp", "4"]
    for ep, factor in ((8, 1.15), (1, 1.0)):
        assert main([*argv, "--ep", str(ep), "--json"]) == 0
        r = json.loads(capsys.readouterr().out)["moe_routing"]
        assert r["busiest_rank_over_mean"] == factor and r["why"] == MOE_ROUTING_BASES[r["basis"]]
        assert main([*argv, "--ep", str(ep), "--explain"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert f"busiest EP rank's {factor:.2f}x the mean routed rows ({r['why']})" in text
    dense = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    dense += ["--global-batch", "64", "--tp", "1", "--pp", "1", "--dp", "8", "--json"]
    assert main(dense) == 0
    assert "moe_routing" not in json.loads(capsys.readouterr().out)
