"""Framework profiles (cost_models/framework.py): the search ranks only plans the framework runs,
and every ranked plan exports to it."""

import factories as f
import pytest

import planner
from cost_models import framework
from cost_models.errors import InvalidInput
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
