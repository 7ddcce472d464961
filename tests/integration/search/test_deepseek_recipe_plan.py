"""The free search on DeepSeek-V3's case (issue 16 done-when): with the same rules and options as
the published layout (DualPipe, DeepEP, fp8, DeepSeek's memory recipe) it finds a plan at least
as fast as that layout's estimate; the selective chain without core_attn; the exports of the
memory options."""

from __future__ import annotations

from pathlib import Path

import pytest

import models_zoo
import planner
from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.specs import Layout, Workload
from planner.export.launch import deepspeed_config, megatron_args, torchtitan
from planner.search.candidates import extends_chain, recompute_chain_heads, recompute_choices
from planner.types import SearchSpace

RECIPE = {
    "optimizer_moments": "bf16",
    "activation_func_fp8_input_store": True,
    "attention_output_store": "e5m6",
}


def _published() -> tuple:
    model = models_zoo.load_model("deepseek-v3")
    cluster = models_zoo.load_cluster("h800")
    work = Workload(
        seq_len=4096,
        global_batch_seqs=15360,
        precision="fp8",
        moe_dispatcher="deepep",
        **RECIPE,
    )
    layout = Layout(
        tp=1,
        pp=16,
        dp=128,
        ep=64,
        zero_stage=1,
        recompute="selective",
        recompute_modules=("layernorm", "mla_up_proj", "moe_act"),
        pp_schedule="dualpipe",
    )
    return model, cluster, work, layout


def test_free_search_at_least_as_fast_as_published_layout() -> None:
    model, cluster, work, layout = _published()
    published = estimate(model, cluster, work, layout)
    assert published.peak_memory_gib <= 0.9 * cluster.gpu.hbm_gib
    result = planner.plan_for(
        model,
        cluster,
        num_gpus=2048,
        global_batch=15360,
        precision="fp8",
        moe_dispatcher="deepep",
        framework=None,
        workload_fields=RECIPE,
        pp_schedules=("1f1b", "dualpipe"),
        ep_overlap=(False, True),
        time_limit_s=120,
        top_k=5,
    )
    best = result.ranked[result.fastest_index]
    assert result.solver.status == "PROVED"
    assert best.fits_in_memory
    assert best.tokens_per_s_per_gpu >= published.tokens_per_s_per_gpu * (1 - 1e-9)


def test_light_selective_set_starts_its_own_chain() -> None:
    model, _, work, layout = _published()
    space = SearchSpace(recompute=("none", "selective", "full"))
    base = layout.model_copy(update={"recompute": "none", "recompute_modules": None})
    choices = recompute_choices(model, work, space, base)
    sel = [c["recompute_modules"] for c in choices if c["recompute"] == "selective"]
    light = ("layernorm", "moe_act", "mla_up_proj")
    assert sel == [
        None,
        light,
        ("core_attn", *light),
        ("core_attn", *light, "shared_experts", "mlp"),
    ]
    heads = recompute_chain_heads(choices)
    # none; selective core_attn; the light set (not a superset of core_attn); full block
    assert [
        choices[i]["recompute_modules"] for i in heads if choices[i]["recompute"] == "selective"
    ] == [
        None,
        light,
    ]
    i = next(k for k, c in enumerate(choices) if c["recompute_modules"] == light)
    assert extends_chain(choices[i], choices[i + 1]) and not extends_chain(
        choices[i - 1], choices[i]
    )


def test_megatron_export_of_bf16_moments_uses_real_flags() -> None:
    flags_file = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
    known = {
        line.split()[0]
        for line in (flags_file / "megatron_lm_flags.txt").read_text().splitlines()
        if line.startswith("--")
    }
    model = models_zoo.load_model("llama3-8b")
    cluster = models_zoo.load_cluster("dgx-h100", 8)
    work = Workload(seq_len=8192, global_batch_seqs=64, optimizer_moments="bf16")
    lo = Layout(dp=8, zero_stage=1)
    args = megatron_args(model, work, estimate(model, cluster, work, lo))
    i = args.index("--use-precision-aware-optimizer")
    assert args[i + 1 : i + 5] == ["--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    assert {a for a in args if a.startswith("--")} <= known
    # megatron/core/optimizer/optimizer_config.py: precision-aware optimizer needs the
    # distributed one, which Megatron-FSDP (ZeRO-2 / 3) turns on; DDP (ZeRO-0) is refused.
    z0 = lo.model_copy(update={"zero_stage": 0})
    with pytest.raises(InvalidInput, match="distributed optimizer"):
        megatron_args(model, work, estimate(model, cluster, work, z0))
    z3_lo = lo.model_copy(update={"zero_stage": 3})
    z3 = megatron_args(model, work, estimate(model, cluster, work, z3_lo))
    assert "--use-megatron-fsdp" in z3 and "--use-precision-aware-optimizer" in z3
    for field, value in (
        ("activation_func_fp8_input_store", True),
        ("attention_output_store", "e5m6"),
    ):
        w = Workload(seq_len=8192, global_batch_seqs=64, **{field: value})
        with pytest.raises(InvalidInput, match=field):
            megatron_args(model, w, estimate(model, cluster, w, lo))
    # A debug recipe carries the layout (no torchtitan recipe builds this model, and the export
    # refuses the model before its layout): the moments are refused on their own.
    with pytest.raises(InvalidInput, match="moments"):
        torchtitan(
            model,
            work,
            estimate(model, cluster, work, lo.model_copy(update={"zero_stage": 2})),
            ("deepseek_v3", "deepseek_v3_debugmodel"),
        )
    with pytest.raises(InvalidInput, match="moments"):
        deepspeed_config(work, estimate(model, cluster, work, lo), model)


def test_megatron_plan_with_bf16_moments_searches_every_distributed_optimizer_stage() -> None:
    """megatron-core 0.19.2 runs the precision-aware optimizer with the distributed optimizer
    (ZeRO-1) and with Megatron-FSDP (ZeRO-2 / 3, which turns it on); only DDP (ZeRO-0) is
    refused. Was (main 2e7f2f7): the search narrowed to ZeRO-1 and refused --zero 3."""
    result = planner.plan_for(
        "llama3-8b",
        "dgx-h100",
        num_gpus=8,
        global_batch=64,
        workload_fields={"optimizer_moments": "bf16"},
        top_k=3,
    )
    assert result.ranked and all(p.layout.zero_stage >= 1 for p in result.ranked)
    zero0 = [r for r in result.rejections if r.startswith("optimizer_moments bf16 needs ZeRO")]
    assert zero0 and "distributed optimizer" in zero0[0]
    fsdp = planner.plan_for(
        "llama3-8b",
        "dgx-h100",
        num_gpus=8,
        global_batch=64,
        workload_fields={"optimizer_moments": "bf16"},
        zero_stages=(3,),
    )
    assert {p.layout.zero_stage for p in fsdp.ranked} == {3}
    with pytest.raises(InvalidInput, match=r"needs ZeRO >= 1 under megatron.*stages are \[0\]"):
        planner.plan_for(
            "llama3-8b",
            "dgx-h100",
            num_gpus=8,
            global_batch=64,
            workload_fields={"optimizer_moments": "bf16"},
            zero_stages=(0,),
        )


def test_report_header_states_the_memory_options() -> None:
    from planner.report.text import memory_options_text

    work = _published()[2]
    assert memory_options_text(work) == (
        ", bf16 Adam moments, fp8 SwiGLU inputs, E5M6 attention output"
    )
    assert memory_options_text(Workload(seq_len=8, global_batch_seqs=8)) == ""


def test_fp8_swiglu_store_needs_a_gated_mlp() -> None:
    with pytest.raises(InvalidInput, match="SwiGLU"):
        planner.plan_for(
            "gpt3-175b",
            "dgx-a100",
            num_gpus=1024,
            global_batch=1536,
            workload_fields={"activation_func_fp8_input_store": True},
        )


@pytest.mark.parametrize("pp", [4, 8, 16])
def test_bound_memory_equals_estimate_with_uneven_dualpipe_stages(pp: int) -> None:
    """61 layers (3 dense) split unevenly: ranks pair stages of different sizes, and the
    search's peak (bounds.peak_memory_gib, only the distinct rank kinds) is estimate()'s."""
    from planner.search.bounds import StepLowerBound

    model, cluster, work, layout = _published()
    lo = layout.model_copy(update={"pp": pp, "dp": 2048 // pp})
    e = estimate(model, cluster, work, lo)
    assert StepLowerBound(model, cluster, work).peak_memory_gib(lo) == e.peak_memory_gib
