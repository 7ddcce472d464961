"""What each launcher's recompute settings do (cost_models.framework, compute.selective_modules).

Megatron-DeepSpeed (4efb479d megatron/model/transformer.py ParallelAttention) checkpoints the
core attention under --recompute-granularity selective only on its unfused CoreAttention path:
under the flash attention its export selects, selective reruns nothing and keeps everything.
Megatron-Core's recompute modules, method and layer count exist in neither torchtitan nor
Megatron-DeepSpeed's export."""

from __future__ import annotations

import factories as f
import pytest

import planner
from cost_models import framework
from cost_models.compute import selective_modules, selective_redoes_nothing
from cost_models.specs import Layout
from planner import api

DS = framework.DEEPSPEED


def _ds_estimate(recompute: str, kernel: str | None = None, **knobs):
    model, cluster = f.dense_model(), f.cluster(16)
    over = {} if kernel is None else {"attention_kernel": kernel}
    work = f.workload(global_batch=64, **over)
    lo = Layout(tp=2, pp=2, dp=4, recompute=recompute, **knobs)
    return api.estimate(model, cluster, lo, work, framework="deepspeed")


def test_megatron_deepspeed_selective_under_flash_attention_is_recompute_none():
    none, sel = _ds_estimate("none"), _ds_estimate("selective")
    assert DS.workload(f.workload()).attention_kernel == "fa2"
    assert sel.step_time_s == none.step_time_s and sel.breakdown_s["recompute"] == 0.0
    assert sel.peak_memory_gib == none.peak_memory_gib
    assert selective_redoes_nothing(DS.workload(f.workload()))


def test_megatron_deepspeed_selective_on_its_unfused_attention_reruns_the_core_attention():
    none, sel = _ds_estimate("none", "unfused"), _ds_estimate("selective", "unfused")
    assert sel.breakdown_s["recompute"] > 0 and sel.peak_memory_gib < none.peak_memory_gib
    work = DS.workload(f.workload(attention_kernel="unfused"))
    assert selective_modules(work, Layout(recompute="selective")) == ("core_attn",)
    # Megatron-Core's selective: the layout's modules, whatever the kernel
    mega = framework.MEGATRON.workload(f.workload())
    lo = Layout(recompute="selective", recompute_modules=("layernorm",))
    assert selective_modules(mega, lo) == ("layernorm",) and not selective_redoes_nothing(mega)


@pytest.mark.parametrize("name", ["deepspeed", "torchtitan"])
def test_megatron_recompute_knobs_are_not_a_setting_of_the_other_launchers(name):
    prof, model = framework.profile(name), f.dense_model()
    for knobs in (
        {"recompute": "selective", "recompute_modules": ("layernorm",)},
        {"recompute": "full", "recompute_method": "block", "recompute_num_layers": 2},
        {"recompute": "full", "recompute_method": "uniform", "recompute_num_layers": 2},
    ):
        problems = framework.profile_violations(prof, model, Layout(zero_stage=2, **knobs))
        assert len(problems) == 1 and f"{name} has no such setting" in problems[0]
    # uniform groups of one layer are plain full recompute, which every launcher runs
    plain = Layout(
        zero_stage=2, recompute="full", recompute_method="uniform", recompute_num_layers=1
    )
    assert framework.profile_violations(prof, model, plain) == []
    megatron = Layout(recompute="selective", recompute_modules=("layernorm",))
    assert framework.profile_violations(framework.MEGATRON, model, megatron) == []


def test_deepspeed_plans_never_rank_a_selective_twin_of_recompute_none():
    result = planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64, top_k=8, framework="deepspeed")
    assert result.ranked and all(e.layout.recompute != "selective" for e in result.ranked)
    # asked for selective alone, the plan is still made (and priced as what runs: none)
    only = planner.plan_for(
        "llama3-8b", "dgx-h100", num_gpus=16, framework="deepspeed", recompute=("selective",)
    )
    best = only.ranked[0]
    assert best.layout.recompute == "selective" and best.breakdown_s["recompute"] == 0.0
