"""Issue 28: inputs checked for sense, recommendations an expert accepts, a CLI that talks.

Each test here fails on main 6b0db04 (where the issue was seen)."""

from __future__ import annotations

import json

import pytest

import models_zoo
from cost_models import memory, params
from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.specs import Estimate, Layout
from planner import api
from planner.search import candidates, recommend
from planner.types import SolverOptions
from tests.factories import cluster, dense_model, layout, workload


def _cluster_data(**tier_ib: object) -> dict:
    data = json.loads((models_zoo._ROOT / "clusters" / "dgx-h100.json").read_text())
    data["tiers"][1].update(tier_ib)
    return data


def _write(tmp_path, data: dict, name: str = "c.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


# ---------------------------------------------------------------------- inputs checked for sense


def test_scale_out_bandwidth_above_the_fastest_nic_is_refused_as_gbit(tmp_path):
    path = _write(tmp_path, _cluster_data(bandwidth_gb_per_s=400))
    with pytest.raises(InvalidInput) as err:
        models_zoo.load_cluster(path)
    text = str(err.value)
    assert "tiers.1 (ib): bandwidth_gb_per_s 400 GB/s" in text and "3.2 Tb/s" in text
    assert "did you mean 400 Gb/s = 50 GB/s?" in text and "200 GB/s = 1.6 Tb/s" in text
    # The fastest that exists (1.6 Tb/s per GPU) is accepted; so is a fast NVLink-kind tier.
    assert models_zoo.load_cluster(_write(tmp_path, _cluster_data(bandwidth_gb_per_s=200)))
    nvl = _cluster_data(bandwidth_gb_per_s=900, kind="nvlink")
    assert models_zoo.load_cluster(_write(tmp_path, nvl)).tiers[1].bandwidth_gb_per_s == 900


def test_an_nvlink_domain_is_whole_nodes(tmp_path):
    data = _cluster_data()
    data["tiers"][0]["domain_size"] = 12
    data["tiers"][1]["domain_size"] = None
    with pytest.raises(InvalidInput, match=r"tiers.0 \(nvlink\): domain_size 12 is not whole "
                       r"nodes: with gpus_per_node 8 a domain is a multiple of 8"):  # fmt: skip
        models_zoo.load_cluster(_write(tmp_path, data))
    data["tiers"][0]["domain_size"] = 4  # a part of a node (NVLink bridge pairs, quads) is fine
    assert models_zoo.load_cluster(_write(tmp_path, data)).tiers[0].domain_size == 4


def test_gpus_above_a_presets_size_are_refused_unless_it_states_more():
    with pytest.raises(InvalidInput, match="--gpus 4,096: cluster preset gb200-nvl72 has 576"):
        models_zoo.load_cluster("gb200-nvl72", 4096)
    assert models_zoo.load_cluster("gb200-nvl72", 288).max_gpus == 576  # the bound travels
    # dgx-h100 states the fat tree's size (max_gpus, with its source).
    big = models_zoo.load_cluster("dgx-h100", 16384)
    assert big.num_gpus == 16384 and "max_gpus:" in big.source
    with pytest.raises(InvalidInput, match="has 524,288 GPUs"):
        models_zoo.load_cluster("dgx-h100", 1_048_576)


@pytest.mark.parametrize("name", ["/path/that/does/not/exist/config.json", "my-cluster.yaml"])
def test_a_missing_file_is_file_not_found(name):
    with pytest.raises(InvalidInput) as err:
        models_zoo.load_model(name)
    assert str(err.value) == f"file not found: {name}"
    with pytest.raises(InvalidInput, match="^file not found: "):
        models_zoo.load_cluster(name)


# ------------------------------------------------------------------------------ recommendations


def test_zero3_with_nothing_to_shard_is_charged_as_zero0():
    m, c, w = dense_model(), cluster(8), workload(global_batch=8)
    z0 = estimate(m, c, w, layout(tp=4, pp=2, dp=1, zero_stage=0))
    z3 = estimate(m, c, w, layout(tp=4, pp=2, dp=1, zero_stage=3))
    assert z3.peak_memory_gib == z0.peak_memory_gib and z3.step_time_s == z0.step_time_s
    # With a shard group of 2 ZeRO-3 does shard.
    z3dp2 = estimate(m, c, w, layout(tp=4, pp=1, dp=2, zero_stage=3))
    z0dp2 = estimate(m, c, w, layout(tp=4, pp=1, dp=2, zero_stage=0))
    assert z3dp2.peak_memory_gib < z0dp2.peak_memory_gib
    assert memory.nothing_to_shard(layout(tp=4, dp=1), moe=False)
    assert not memory.nothing_to_shard(layout(tp=1, dp=1, cp=2), moe=False)


def test_no_plan_shards_over_a_group_of_one():
    spec = models_zoo.load_model("llama3-70b")
    result = api.plan(spec, "gb200-nvl72", num_gpus=8, global_batch=64, top_k=10)
    for e, twins in zip(result.ranked, result.equivalents, strict=True):
        if memory.nothing_to_shard(e.layout, moe=False):
            assert e.layout.zero_stage == min(api.framework_space(
                spec, api.SearchSpace()).zero_stages)  # fmt: skip
            assert all(t.zero_stage == e.layout.zero_stage for t in twins)


def _fake(lo: Layout, step_s: float, placement: dict) -> Estimate:
    return Estimate(
        layout=lo, num_microbatches=8, step_time_s=step_s, tokens_per_s_per_gpu=1.0, mfu=0.4,
        peak_memory_gib=1.0, usable_memory_gib=72.0, fits_in_memory=True, breakdown_s={},
        comm_total_s={}, stage_memory=(), placement=placement,
    )  # fmt: skip


def _order(*plans: Estimate, seq_len: int = 8192) -> Estimate:
    c = cluster(1024)
    w = workload(seq_len=seq_len, global_batch=512)
    out, _ = recommend.recommend(list(plans), SolverOptions(top_k=5), None, c, w)
    return out[0]


def test_simplicity_order_is_explicit():
    nv, ib = "nvlink", "ib"
    # 1. fewer model-parallel axes leaving the NVLink domain; DP is not counted.
    cp8 = _fake(layout(tp=4, pp=32, dp=1, cp=8, vp=2), 9.99,
                {"tp": {nv: 4, ib: 1}, "cp": {nv: 2, ib: 4}, "pp": {nv: 1, ib: 32}})
    dp2 = _fake(layout(tp=4, pp=32, dp=2, cp=4, vp=2), 9.95,
                {"tp": {nv: 4, ib: 1}, "cp": {nv: 2, ib: 2}, "pp": {nv: 1, ib: 32},
                 "dp": {nv: 1, ib: 2}})  # fmt: skip
    assert _order(cp8, dp2) is dp2  # equally simple: the faster (the 405B case)
    tp16 = _fake(layout(tp=16, dp=64), 9.9, {"tp": {nv: 8, ib: 2}})
    pp2 = _fake(layout(tp=8, pp=2, dp=64), 9.95, {"tp": {nv: 8, ib: 1}, "pp": {nv: 1, ib: 2}})
    tp8 = _fake(layout(tp=8, dp=128, recompute="full", zero_stage=3), 9.98, {"tp": {nv: 8}})
    assert _order(tp16, pp2, tp8) is tp8  # no cross-node model axis beats recompute + ZeRO-3
    # 2. no CP at a short sequence; at a long one CP is no complexity.
    cp2 = _fake(layout(tp=8, dp=64, cp=2), 9.9, {"tp": {nv: 8}, "cp": {nv: 1, ib: 1}})
    full = _fake(layout(tp=8, dp=128, recompute="full"), 9.98, {"tp": {nv: 8}})
    assert _order(cp2, full) is full
    assert _order(cp2, full, seq_len=131072) is cp2
    # 3. no recompute before a lower ZeRO stage; 4. lower ZeRO before no interleaving.
    sel = _fake(layout(tp=8, dp=128, recompute="selective"), 9.9, {"tp": {nv: 8}})
    z3 = _fake(layout(tp=8, dp=128, zero_stage=3), 9.98, {"tp": {nv: 8}})
    assert _order(sel, z3) is z3
    in_node = {"tp": {nv: 4}, "pp": {nv: 2}}
    vp = _fake(layout(tp=4, pp=2, dp=128, vp=2, zero_stage=1), 9.98, in_node)
    z3pp = _fake(layout(tp=4, pp=2, dp=128, zero_stage=3), 9.9, in_node)
    assert _order(vp, z3pp) is vp


def test_llama31_405b_on_1024_h100_recommends_dp2_cp4_over_dp1_cp8():
    result = api.plan("llama3.1-405b", "dgx-h100", num_gpus=1024, seq_len=8192, top_k=5)
    lo = result.best.layout
    assert not (lo.dp == 1 and lo.cp == 8), lo
    first = result.cluster.tiers[0].name
    key = candidates.complexity(result.best, 8192, first)
    for e in result.ranked[1:]:
        if e.step_time_s < result.best.step_time_s:
            assert candidates.complexity(e, 8192, first) > key


def test_active_parameters_exclude_the_input_embedding(tmp_path):
    cfg = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
           "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
           "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
           "v_head_dim": 128, "moe_intermediate_size": 1408, "intermediate_size": 10944,
           "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
           "first_k_dense_replace": 1, "vocab_size": 102400}  # fmt: skip
    path = tmp_path / "DeepSeek-V2-Lite" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    lite = models_zoo.load_model(str(path))
    assert params.total_params(lite, active_only=True) / 1e9 == pytest.approx(2.4, rel=0.03)
    dense = models_zoo.load_model("llama3-8b")
    assert params.total_params(dense, active_only=True) == params.total_params(dense)
