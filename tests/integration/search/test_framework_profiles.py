"""Framework profiles (cost_models/framework.py): the search ranks only plans the framework runs,
and every ranked plan exports to it."""

import factories as f
import pytest

import models_zoo
import planner
from cost_models import framework
from cost_models.errors import InvalidInput
from cost_models.params import total_params
from cost_models.specs import Axis, Layout
from planner import api
from planner.export import plan_exports
from planner.search.candidates import OrderCache, allowed_orders
from planner.types import SearchSpace

# Synthetic test models have no torchtitan recipe (the export refuses them): their parallel
# settings ride on a debug recipe of the same kind, named explicitly.
DEBUG_RECIPES = {
    "dense-test": ("llama3", "llama3_debugmodel"),
    "moe-test": ("deepseek_v3", "deepseek_v3_debugmodel"),
    "Mixtral 8x7B": ("deepseek_v3", "deepseek_v3_debugmodel"),  # torchtitan has no Mixtral
}


def titan(result, index=0):
    return plan_exports.to_torchtitan(result, index, DEBUG_RECIPES.get(result.model.name))


EXPORT = {
    "megatron": lambda r, i: plan_exports.to_megatron_args(r, i),
    "torchtitan": lambda r, i: titan(r, i),
    "deepspeed": lambda r, i: plan_exports.to_deepspeed(r, i),
}


@pytest.mark.parametrize("name", framework.FRAMEWORKS)
@pytest.mark.parametrize(
    "model, gpus, pins",
    [("llama3-8b", 16, {}), ("mixtral-8x7b", 32, {"tp": 2}), ("llama3-70b", 64, {"tp": 8})],
)
def test_every_ranked_plan_runs_on_its_framework(name, model, gpus, pins):
    if name == "deepspeed" and model.startswith("mixtral"):
        with pytest.raises(InvalidInput, match="mixture-of-experts models are not modelled"):
            planner.plan_for(model, "dgx-h100", num_gpus=gpus, framework=name, **pins)
        return
    if name == "torchtitan":  # its llama3 recipes are Llama 3.1 (same shapes, rope scaling)
        model = model.replace("llama3-", "llama3.1-")
    result = planner.plan_for(model, "dgx-h100", num_gpus=gpus, top_k=8, framework=name, **pins)
    prof = framework.profile(name)
    assert result.framework == name and result.framework_version == prof.version
    for i, e in enumerate(result.ranked):
        assert framework.profile_violations(prof, result.model, e.layout) == []
        EXPORT[name](result, i)  # raises InvalidInput if the framework could not take it


def test_profile_physics_apply_unless_the_workload_sets_them():
    work = f.workload(global_batch=32)
    tt_work = framework.TORCHTITAN.workload(work)
    assert tt_work.attention_kernel == "fa2" and tt_work.pp_keeps_outputs
    pinned = type(work).model_validate({**work.model_dump(), "attention_kernel": "fused"})
    assert framework.TORCHTITAN.workload(pinned).attention_kernel == "fused"
    assert framework.MEGATRON.workload(work) == work  # Megatron's are the field defaults


def test_allowed_orders_deduplicate_to_an_order_the_framework_builds():
    """With pp = 1 the orders tp-cp-pp-dp and tp-cp-dp-pp build the same groups: the one kept
    is in the framework's list; a MoE model keeps only Megatron's pp-last order."""
    cluster = f.cluster(32)
    space = SearchSpace(framework="megatron")
    dense, moe = f.dense_model(), f.moe_model()
    lo = Layout(tp=2, pp=2, dp=8)
    orders = OrderCache(cluster, True, allowed_orders(dense, space), moe=False).orders(lo)
    assert set(orders) == {
        (Axis.TP, Axis.CP, Axis.DP, Axis.PP),
        (Axis.TP, Axis.CP, Axis.PP, Axis.DP),
    }
    moe_orders = OrderCache(cluster, True, allowed_orders(moe, space)).orders(lo)
    assert moe_orders == ((Axis.TP, Axis.CP, Axis.DP, Axis.PP),)
    everything = OrderCache(cluster, True, None, moe=False).orders(lo)
    assert len(everything) > 2


def test_a_pin_the_framework_cannot_run_is_bad_input():
    with pytest.raises(InvalidInput, match="cp \\(2\\): deepspeed runs cp <= 1"):
        planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, framework="deepspeed", cp=2)
    with pytest.raises(InvalidInput, match="torchtitan runs ZeRO"):
        planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, framework="torchtitan", zero_stages=(1,))
    with pytest.raises(InvalidInput, match="framework: unknown 'jax'"):
        planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, framework="jax")


def test_hsdp_is_searched_for_torchtitan_and_agrees_with_the_exhaustive_oracle():
    """dp_replicate x dp_shard (Layout.dp_shard) is a searched sharding variant for torchtitan;
    branch and bound ranks the same plans as scoring every layout."""
    # Every variant its own plan (HSDP variants are in the family of their degrees).
    kw = {"num_gpus": 16, "framework": "torchtitan", "top_k": 6, "top_variants": True}
    sat = planner.plan_for("llama3.1-8b", "dgx-h100", **kw)
    oracle = planner.plan_for("llama3.1-8b", "dgx-h100", engine="exhaustive", **kw)
    assert [e.layout for e in sat.ranked] == [e.layout for e in oracle.ranked]
    assert any(e.layout.dp_shard is not None for e in sat.ranked)
    hsdp = next(i for i, e in enumerate(sat.ranked) if e.layout.dp_shard is not None)
    lo = sat.ranked[hsdp].layout
    par = titan(sat, hsdp)["config"]["parallelism"]
    assert par["data_parallel_shard_degree"] == lo.dp_shard
    assert par["data_parallel_replicate_degree"] * lo.dp_shard == lo.dp
    with pytest.raises(InvalidInput, match="hybrid sharding is torchtitan's"):
        plan_exports.to_megatron_args(sat, hsdp)
    # Megatron's space has no HSDP.
    mega = planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, framework="megatron", top_k=6)
    assert all(e.layout.dp_shard is None for e in mega.ranked)


def test_hsdp_shards_state_over_the_shard_group_only():
    model, cluster, work = f.dense_model(), f.cluster(32), f.workload(global_batch=64)
    full = api.estimate(model, cluster, Layout(tp=2, dp=16, zero_stage=3), work)
    hybrid = api.estimate(model, cluster, Layout(tp=2, dp=16, zero_stage=3, dp_shard=4), work)
    s_full, s_hyb = full.stage_memory[0], hybrid.stage_memory[0]
    assert s_hyb.optimizer_gib == pytest.approx(4 * s_full.optimizer_gib)
    assert hybrid.placement == full.placement
    with pytest.raises(ValueError, match="dp_shard \\(3\\) must divide dp \\(16\\)"):
        Layout(tp=2, dp=16, zero_stage=3, dp_shard=3)


def test_hsdp_shards_and_moves_a_moe_models_experts_with_the_shard_group():
    """At ep 1 torchtitan shards a MoE block whole on the (replicate, shard) mesh: the experts'
    states are 1 / dp_shard of the stage, not 1 / dp (memory.shard_groups), and their gradients
    and gathers travel in the HSDP collectives (stage.dp_tier_times_s): HSDP moves about what
    full sharding moves. Before both, Qwen3-235B's HSDP 4x16 on 64 B200 was priced at 134 GiB
    (its states alone need 219) and 0.25 s of DP traffic against full sharding's 7.0 s."""
    model = models_zoo.load_model("qwen3-235b-a22b")
    cluster = models_zoo.load_cluster("dgx-b200", 64)
    work = api.make_workload(model, seq_len=4096, global_batch=512)
    kw = {"dp": 64, "micro_batch": 8, "recompute": "full", "zero_stage": 3}
    full = api.estimate(model, cluster, Layout(**kw), work, framework="torchtitan")
    hybrid = api.estimate(model, cluster, Layout(**kw, dp_shard=16), work, framework="torchtitan")
    # fp32 shard, fp32 sharded gradient and two fp32 moments per parameter, over 16 GPUs
    states_gib = total_params(model) * 16 / 16 / 2**30
    assert hybrid.peak_memory_gib > states_gib > full.peak_memory_gib
    assert 0.5 < hybrid.comm_total_s["dp"] / full.comm_total_s["dp"] < 2


def test_torchtitan_splits_the_experts_over_tp_when_ep_is_off():
    """torchtitan 0.3.0 (moe_sharding.py) TP-splits the routed experts whenever EP is off, so its
    plans and estimates take etp = tp at ep 1 (their MoE layers then run TP collectives of their
    own); with EP, etp is 1. Megatron keeps the etp its export writes (1). A torchtitan layout
    stating etp 1 at ep 1 and tp 2 is one it cannot run; HSDP with a MoE model is priced for
    etp = tp only."""
    model, cluster, work = f.moe_model(), f.cluster(16), f.workload(global_batch=64)
    z3 = {"tp": 2, "dp": 8, "zero_stage": 3}
    titan_e = api.estimate(model, cluster, Layout(**z3), work, framework="torchtitan")
    mega_e = api.estimate(model, cluster, Layout(tp=2, dp=8), work, framework="megatron")
    assert (titan_e.layout.etp, mega_e.layout.etp) == (2, 1)
    assert titan_e.breakdown_s["tp_comm"] > mega_e.breakdown_s["tp_comm"]
    stated = Layout(**z3, etp=1)
    assert api.estimate(model, cluster, stated, work, framework="torchtitan").layout.etp == 1
    problems = framework.profile_violations(framework.TORCHTITAN, model, stated)
    assert any("etp (1) != tp (2) at ep 1" in p for p in problems)
    assert framework.profile_violations(framework.TORCHTITAN, model, Layout(**z3, etp=2)) == []
    result = planner.plan_for(
        model, cluster, num_gpus=16, global_batch=64, framework="torchtitan", top_k=20
    )
    for e in result.ranked:
        assert e.layout.etp == (e.layout.tp if e.layout.ep == 1 else 1)
    assert any(e.layout.ep == 1 and e.layout.tp > 1 for e in result.ranked)
    with pytest.raises(InvalidInput, match="needs etp = tp"):
        api.estimate(model, cluster, Layout(**z3, dp_shard=4, etp=1), work)


def test_hsdp_with_ep_is_searched_for_torchtitan_with_the_experts_own_mesh():
    """torchtitan runs HSDP with EP: the routed experts are a fully_shard of their own on
    (dp_replicate, efsdp), efsdp = dp_shard*cp*tp / ep (parallel_dims.py build_mesh). The
    search tries the shard sizes whose efsdp is whole (and only those), branch and bound ranks
    as scoring every layout does, and the export writes the two degrees. Before, Layout refused
    dp_shard with ep > 1 and the search never tried it."""
    model = f.moe_model()
    kw = {"num_gpus": 32, "global_batch": 64, "framework": "torchtitan", "top_k": 40}
    kw |= {"top_variants": True, "ep": 4}
    sat = planner.plan_for(model, "dgx-h100", **kw)
    oracle = planner.plan_for(model, "dgx-h100", engine="exhaustive", **kw)
    assert [e.layout for e in sat.ranked] == [e.layout for e in oracle.ranked]
    hsdp = [i for i, e in enumerate(sat.ranked) if e.layout.dp_shard is not None]
    assert hsdp
    for i in hsdp:
        lo = sat.ranked[i].layout
        assert lo.ep == 4 and (lo.dp_shard * lo.cp * lo.tp) % lo.ep == 0
    lo = sat.ranked[hsdp[0]].layout
    par = titan(sat, hsdp[0])["config"]["parallelism"]
    assert (par["data_parallel_shard_degree"], par["expert_parallel_degree"]) == (lo.dp_shard, 4)
    with pytest.raises(ValueError, match="must be a multiple of ep\\*etp"):
        Layout(dp=32, ep=4, zero_stage=3, dp_shard=2)
