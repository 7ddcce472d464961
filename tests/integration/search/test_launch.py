"""Launcher exports round-trip: Megatron flags parse, torchtitan fields exist, DeepSpeed batch math,
rank groups partition the ranks along topology's strides, the device mesh reproduces the groups."""

import argparse
import json
import shlex
import tomllib
from itertools import pairwise, permutations
from pathlib import Path

import factories as f
import numpy as np
import pytest
from conftest import SHARED

import planner
from cost_models import topology
from cost_models.accumulation import MAX_ACTIVE_STAGES
from cost_models.errors import InvalidInput
from cost_models.pipeline import chunk_layer_counts
from cost_models.specs import Axis, Layout
from planner import api
from planner.cli import main
from planner.export import launch, plan_exports
from planner.place import ranks

# Synthetic test models have no torchtitan recipe (the export refuses them): their parallel
# settings ride on a debug recipe of the same kind, named explicitly.
DEBUG_RECIPES = {
    "dense-test": ("llama3", "llama3_debugmodel"),
    "moe-test": ("deepseek_v3", "deepseek_v3_debugmodel"),
}


def titan(result, index=0):
    return plan_exports.to_torchtitan(result, index, DEBUG_RECIPES.get(result.model.name))


MEGATRON_FLAGS = {
    line.strip()
    for line in (SHARED / "data" / "megatron_lm_flags.txt").read_text().splitlines()
    if line.startswith("--")
}
TORCHTITAN_FIELDS = {
    line.split(":")[0].strip()
    for line in (SHARED / "data" / "torchtitan_config_fields.txt").read_text().splitlines()
    if line and not line.startswith("#")
}
# Megatron's store_true flags among the ones we emit; every other emitted flag takes one value.
MEGATRON_SWITCHES = {
    "--sequence-parallel",
    "--use-distributed-optimizer",
    "--use-megatron-fsdp",
    "--use-tp-pp-dp-mapping",
    "--bf16",
    "--fp16",
    "--group-query-attention",
    "--swiglu",
    "--untie-embeddings-and-output-weights",
    "--multi-latent-attention",
    "--tp-comm-overlap",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--qk-layernorm",
    "--openai-gelu",
    "--squared-relu",
    "--use-rope-scaling",
    "--moe-grouped-gemm",
    "--moe-router-pre-softmax",
    "--moe-router-enable-expert-bias",
    "--moe-shared-expert-gate",
    "--overlap-moe-expert-parallel-comm",
    "--delay-wgrad-compute",
    "--use-precision-aware-optimizer",
    "--moe-router-force-load-balancing",
    "--moe-router-padding-for-quantization",
    "--moe-pad-expert-input-to-capacity",
    "--no-check-for-nan-in-loss-and-grad",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--ddp-average-in-collective",
    "--cross-entropy-loss-fusion",
}
MEGATRON_LISTS = {"--recompute-modules", "--cuda-graph-modules"}
"""Flags that take one or more values (nargs='+' in megatron/training/arguments.py)."""
ORDERS = list(permutations(Axis))




def megatron_parser(emitted: list[str]) -> argparse.ArgumentParser:
    """Declares the switches and the valued flags; an unknown flag or a missing value fails."""
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    for flag in sorted(MEGATRON_SWITCHES & MEGATRON_FLAGS):
        parser.add_argument(flag, action="store_true")
    valued = {a for a in emitted if a.startswith("--")} - MEGATRON_SWITCHES
    valued |= {"--num-virtual-stages-per-pipeline-rank", "--pipeline-model-parallel-layout"}
    for flag in sorted(MEGATRON_FLAGS & valued):
        parser.add_argument(flag, nargs="+" if flag in MEGATRON_LISTS else None)
    return parser


CASES = {
    "dense-vp": (
        f.dense_model(),
        f.cluster(32),
        f.workload(global_batch=64),
        {"tp": 4, "pp": 2, "dp": 4, "vp": 4, "micro_batch": 2, "sequence_parallel": True},
    ),
    "dense-vp2": (
        f.dense_model(),
        f.cluster(32),
        f.workload(global_batch=64),
        {"tp": 4, "pp": 2, "dp": 4, "vp": 2, "micro_batch": 2, "sequence_parallel": True},
    ),
    "dense-zero3-full": (
        f.dense_model(),
        f.cluster(16),
        f.workload(global_batch=64),
        {"tp": 2, "dp": 8, "recompute": "full", "zero_stage": 3},
    ),
    "dense-uneven-vp": (
        f.dense_model(num_layers=30),
        f.cluster(32),
        f.workload(global_batch=64),
        {"tp": 4, "pp": 4, "dp": 2, "vp": 2},
    ),
    "dense-uneven": (
        f.dense_model(num_layers=30),
        f.cluster(32),
        f.workload(global_batch=64),
        {"tp": 4, "pp": 4, "dp": 2, "recompute": "selective"},
    ),
    "dense-fp8-cp": (
        f.dense_model(),
        f.cluster(16),
        f.workload(global_batch=32, precision="fp8"),
        {"tp": 4, "cp": 2, "dp": 2},
    ),
    "dense-mxfp8": (  # MXFP8 needs Blackwell tensor cores (api.check_precision)
        f.dense_model(),
        f.cluster(16).model_copy(
            update={"gpu": f.H100.model_copy(update={"generation": "blackwell"})}
        ),
        f.workload(global_batch=32, precision="mxfp8"),
        {"tp": 4, "dp": 4},
    ),
    "dense-nvfp4": (  # NVFP4 needs Blackwell NVFP4 tensor cores (api.check_precision)
        f.dense_model(),
        f.cluster(16).model_copy(
            update={
                "gpu": f.H100.model_copy(
                    update={"generation": "blackwell", "peak_fp4_tflops": 4 * 1978.9}
                )
            }
        ),
        f.workload(global_batch=32, precision="nvfp4"),
        {"tp": 4, "dp": 4},
    ),
    "dense-fp8-blockwise": (
        f.dense_model(),
        f.cluster(16),
        f.workload(global_batch=32, precision="fp8", fp8_recipe="blockwise"),
        {"tp": 4, "dp": 4},
    ),
    "moe-ep-cuda-graphs": (
        f.moe_model(),
        f.cluster(16),
        f.workload(global_batch=32, cuda_graphs=True, moe_force_balance=True),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    "moe-ep-fp8-router-padding": (
        f.moe_model(),
        f.cluster(16),
        f.workload(global_batch=32, precision="fp8", moe_router_padding=True),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    # token-drop MoE as Megatron-Bridge 25.09's apply_moe_token_drop sets it
    "moe-ep-fp8-token-drop": (
        f.moe_model(),
        f.cluster(16),
        f.workload(
            global_batch=32, precision="fp8", moe_capacity_factor=1.0, moe_pad_to_capacity=True
        ),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    "dense-full-iteration-graph": (
        f.dense_model(),
        f.cluster(16),
        f.workload(global_batch=32, full_iteration_cuda_graph=True),
        {"tp": 4, "dp": 4},
    ),
    "moe-ep": (
        f.moe_model(),
        f.cluster(16),
        f.workload(global_batch=32),
        {"tp": 2, "dp": 8, "ep": 4},
    ),
    "pp-dp-order": (
        f.dense_model(),
        f.cluster(16),
        f.workload(global_batch=32),
        {"tp": 4, "pp": 2, "dp": 2, "order": (Axis.TP, Axis.CP, Axis.PP, Axis.DP)},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_megatron_flags_exist_and_parse_back(case):
    model, cluster, workload, fields = CASES[case]
    result = f.result_for(model, cluster, workload, Layout(**fields))
    emitted = plan_exports.to_megatron_args(result)
    flags = [a for a in emitted if a.startswith("--")]
    assert set(flags) <= MEGATRON_FLAGS
    assert MEGATRON_SWITCHES <= MEGATRON_FLAGS
    ns = megatron_parser(emitted).parse_args(shlex.split(shlex.join(emitted)))
    lo, e = result.best.layout, result.best
    assert int(ns.tensor_model_parallel_size) == lo.tp
    assert int(ns.pipeline_model_parallel_size) == lo.pp
    assert int(ns.context_parallel_size) == lo.cp
    assert int(ns.micro_batch_size) == lo.micro_batch
    assert int(ns.global_batch_size) == workload.global_batch_seqs
    assert int(ns.num_layers) == model.num_layers
    assert ns.sequence_parallel == (lo.sequence_parallel and lo.tp > 1)
    mapped = lo.order == (Axis.TP, Axis.CP, Axis.PP, Axis.DP) and lo.pp > 1 and lo.dp > 1
    assert ns.use_tp_pp_dp_mapping == mapped
    assert int(ns.hidden_size) == model.hidden_size
    if lo.vp > 1 and not getattr(ns, "pipeline_model_parallel_layout", None):
        assert int(ns.num_virtual_stages_per_pipeline_rank) == lo.vp
    if model.moe is not None:
        assert int(ns.expert_model_parallel_size) == lo.ep
    if lo.recompute != "none":
        assert ns.recompute_granularity == lo.recompute
    counts = launch.stage_layer_counts(model, e)
    if getattr(ns, "pipeline_model_parallel_layout", None):
        # One entry per virtual stage, chunk c on pipeline rank c % pp, in model order.
        chunks = ns.pipeline_model_parallel_layout.split("|")
        assert len(chunks) == lo.pp * lo.vp
        assert chunks[0].startswith("E") and chunks[-1].endswith("L")
        per_rank = [sum(c.count("t") for c in chunks[r :: lo.pp]) for r in range(lo.pp)]
        assert per_rank == counts and sum(per_rank) == model.num_layers
        assert ns.num_virtual_stages_per_pipeline_rank is None  # implied by the layout
    elif len(set(counts)) > 1:
        first = int(ns.decoder_first_pipeline_num_layers)
        last = int(ns.decoder_last_pipeline_num_layers)
        # Megatron spreads the remaining layers evenly over the middle stages.
        middle, rest = divmod(model.num_layers - first - last, lo.pp - 2)
        assert rest == 0 and [first, *[middle] * (lo.pp - 2), last] == counts
    assert ns.bf16 == (workload.precision in ("bf16", "fp8", "mxfp8", "nvfp4"))
    if workload.precision == "fp8" and workload.fp8_recipe == "blockwise":
        assert (ns.fp8_format, ns.fp8_recipe) == ("e4m3", "blockwise")
    elif workload.precision == "fp8":
        assert ns.fp8_format == "hybrid"
        assert ns.fp8_recipe == ("tensorwise" if workload.fp8_dynamic_scaling else "delayed")
    if workload.precision == "nvfp4":
        assert (ns.fp4_format, ns.fp4_recipe) == ("e2m1", "nvfp4")
    assert ns.moe_router_force_load_balancing == bool(workload.moe_force_balance and model.moe)
    padded = workload.moe_router_padding and model.moe and workload.precision != "bf16"
    assert ns.moe_router_padding_for_quantization == bool(padded)
    factor = workload.moe_capacity_factor if model.moe else None
    stated = getattr(ns, "moe_expert_capacity_factor", None)
    assert (None if stated is None else float(stated)) == factor
    assert ns.moe_pad_expert_input_to_capacity == bool(workload.moe_pad_to_capacity and model.moe)
    if workload.full_iteration_cuda_graph:
        # megatron/training/arguments.py asserts the NaN check off under full_iteration
        assert ns.cuda_graph_impl == "full_iteration" and ns.no_check_for_nan_in_loss_and_grad
    elif workload.cuda_graphs:
        assert ns.cuda_graph_impl == "transformer_engine"
        assert [str(m) for m in ns.cuda_graph_modules] == (
            ["attn", "moe_router", "moe_preprocess"] if model.moe else ["attn", "mlp"]
        )
    if workload.precision == "mxfp8":
        assert (ns.fp8_format, ns.fp8_recipe) == ("e4m3", "mxfp8")
    # the overlapped DP reduction / gather and the fused loss the cost model prices
    # a DP x CP group, or a MoE's expert data-parallel group (TP x CP x DP / (EP x ETP) ranks)
    reduced = lo.dp * lo.cp > 1 or bool(model.moe and lo.tp * lo.cp * lo.dp > lo.ep * lo.etp)
    assert ns.overlap_grad_reduce == reduced
    assert ns.overlap_param_gather == (reduced and lo.zero_stage >= 1)
    # averaged in the collective, as priced (stage.grad_bucket_pass_bytes: no pre-scale)
    assert ns.ddp_average_in_collective == reduced
    assert ns.cross_entropy_loss_fusion


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"tp": 8, "zero_stage": 0}, []),
        ({"tp": 4, "dp": 2, "zero_stage": 0}, ["--overlap-grad-reduce"]),
        ({"tp": 4, "dp": 2, "zero_stage": 1}, ["--overlap-grad-reduce", "--overlap-param-gather"]),
        ({"tp": 4, "cp": 2, "zero_stage": 1}, ["--overlap-grad-reduce", "--overlap-param-gather"]),
    ],
)
def test_megatron_overlaps_the_dp_communication_it_prices(fields, expected) -> None:
    """Megatron-LM's --overlap-grad-reduce / --overlap-param-gather are off by default; the
    cost model prices the bucketed overlap (stage.grad_sync_exposed_s), so the export asks for
    it wherever there is a DP x CP group."""
    lo = Layout(**fields)
    result = f.result_for(f.dense_model(), f.cluster(8), f.workload(global_batch=16), lo)
    args = plan_exports.to_megatron_args(result)
    assert [a for a in args if a.startswith("--overlap-")] == expected
    eager = f.workload(global_batch=16).model_copy(update={"cross_entropy": "eager_fp32"})
    unfused = f.result_for(f.dense_model(), f.cluster(8), eager, lo)
    assert "--cross-entropy-loss-fusion" in args
    assert "--cross-entropy-loss-fusion" not in plan_exports.to_megatron_args(unfused)


def test_a_stated_bucket_size_is_exported_as_priced() -> None:
    """Workload.dp_bucket_elements sets the priced buckets (stage.dp_buckets, the edge buckets):
    Megatron gets --ddp-bucket-size (training.py resolve_ddp_bucket_size takes it over
    max(40M, 1M x dp_cp)), DeepSpeed ZeRO's reduce_bucket_size; with no DP group there is nothing
    to bucket; DeepSpeed without ZeRO all-reduces in a constant bucket and torchtitan has no bucket
    field, so both are refused."""
    w = f.workload(global_batch=16).model_copy(update={"dp_bucket_elements": 134_217_728})
    lo = Layout(tp=4, dp=2, zero_stage=1)
    result = f.result_for(f.dense_model(), f.cluster(8), w, lo)
    args = plan_exports.to_megatron_args(result)
    i = args.index("--ddp-bucket-size")
    assert args[i + 1] == "134217728"
    default = f.result_for(f.dense_model(), f.cluster(8), f.workload(global_batch=16), lo)
    assert "--ddp-bucket-size" not in plan_exports.to_megatron_args(default)
    alone = f.result_for(f.dense_model(), f.cluster(8), w, Layout(tp=8, zero_stage=1))
    assert "--ddp-bucket-size" not in plan_exports.to_megatron_args(alone)
    w16 = w.model_copy(update={"main_grads": "bf16"})  # DeepSpeed's (its profile's) gradients
    ds = f.result_for(f.dense_model(), f.cluster(8), w16, Layout(tp=1, dp=8, zero_stage=1))
    zero = plan_exports.to_deepspeed_config(ds)["zero_optimization"]
    assert zero == {
        "stage": 1,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": 134_217_728,
    }
    ddp = f.result_for(f.dense_model(), f.cluster(8), w16, Layout(tp=1, dp=8, zero_stage=0))
    with pytest.raises(InvalidInput, match="MEMORY_OPT_ALLREDUCE_SIZE"):
        plan_exports.to_deepspeed_config(ddp)
    fsdp = f.result_for(f.dense_model(), f.cluster(8), w, Layout(tp=1, dp=8, zero_stage=2))
    with pytest.raises(InvalidInput, match="no gradient bucket field"):
        titan(fsdp)


def test_megatron_refuses_full_iteration_graph_of_a_dropless_moe():
    # capture needs HybridEP's per-rank capacity and the paged stash, which no priced setting names
    lo = Layout(tp=2, dp=8, ep=4)
    w = f.workload(global_batch=32, full_iteration_cuda_graph=True)
    result = f.result_for(f.moe_model(), f.cluster(16), w, lo)
    with pytest.raises(InvalidInput, match="full_iteration with a dropless MoE"):
        plan_exports.to_megatron_args(result)


def test_megatron_refuses_orders_it_cannot_build():
    lo = Layout(tp=4, dp=4, order=(Axis.DP, Axis.TP, Axis.CP, Axis.PP))
    result = f.result_for(f.dense_model(), f.cluster(16), f.workload(global_batch=32), lo)
    with pytest.raises(InvalidInput, match="rank order dp-tp-cp-pp"):
        plan_exports.to_megatron_args(result)
    with pytest.raises(InvalidInput, match="torchtitan"):
        titan(result)


def test_megatron_uneven_interleaved_stages_use_the_layout_flag():
    # 30 layers in 8 chunks -> 3, 4, 4, 4, 4, 4, 4, 3: not expressible as first/last + vp.
    lo = Layout(tp=4, pp=4, dp=2, vp=2)
    result = f.result_for(f.dense_model(num_layers=30), f.cluster(32), f.workload(64), lo)
    args = plan_exports.to_megatron_args(result)
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert [c.count("t") for c in layout.split("|")] == [3, 4, 4, 4, 4, 4, 4, 3]
    assert "--decoder-first-pipeline-num-layers" not in args
    # torchtitan expresses it: 4 layers per stage, the first and last one fewer.
    par = titan(result)["config"]["parallelism"]
    assert par["pipeline_parallel_layers_per_stage"] == 4
    assert par["pipeline_parallel_first_stage_less_layers"] == 1
    assert par["pipeline_parallel_last_stage_less_layers"] == 1


def test_interleaving_needs_microbatches_divisible_by_pp():
    # 12 sequences / (dp 2 x micro 2) = 3 micro-batches, not a multiple of pp = 4: the cost model
    # (so the search and `planner estimate`) refuses the layout (cost_models.rules) ...
    lo = Layout(tp=2, pp=4, dp=2, vp=2, micro_batch=2)
    rule = r"num_microbatches \(3\) divisible by pp \(4\)"
    with pytest.raises(InvalidInput, match=rule):
        api.estimate(f.dense_model(), f.cluster(16), lo, f.workload(global_batch=12))
    # ... and the exporters refuse a hand-edited plan that breaks it.
    result = f.result_for(f.dense_model(), f.cluster(16), f.workload(global_batch=16), lo)
    assert result.best.num_microbatches == 4
    bad = result.best.model_copy(update={"num_microbatches": 3})
    edited = result.model_copy(update={"ranked": (bad,)})
    with pytest.raises(InvalidInput, match=rule):
        plan_exports.to_megatron_args(edited)


@pytest.mark.parametrize("case", list(CASES))
def test_torchtitan_names_only_known_fields_and_degrees_multiply(case):
    model, cluster, workload, fields = CASES[case]
    result = f.result_for(model, cluster, workload, Layout(**fields))
    lo = result.best.layout
    chunks = chunk_layer_counts(model.num_layers, lo.pp * lo.vp)
    uneven = lo.pp > 1 and len(set(chunks[1:-1])) > 1  # only first/last may hold fewer
    # more chunks than torch pipelining keeps gathered (ZeRO-1 runs as FSDP2 ZeRO-2 there)
    regathers = lo.pp > 1 and lo.vp > MAX_ACTIVE_STAGES and lo.zero_stage >= 1
    if lo.order != launch.TORCHTITAN_ORDER or workload.precision != "bf16" or uneven or regathers:
        with pytest.raises(InvalidInput, match="cannot export to torchtitan"):
            titan(result)
        return
    tt = titan(result)
    # Booleans are tyro flags: --section.field / --section.no_field.
    names = [a[2:].replace(".no_", ".") for a in tt["overrides"] if a.startswith("--")]
    assert names and set(names) <= TORCHTITAN_FIELDS
    toml = tomllib.loads(tt["toml"])
    toml_names = {f"{sec}.{k}" for sec, body in toml.items() for k in body}
    assert toml_names == set(names)
    par = toml["parallelism"]
    degrees = (
        par["data_parallel_replicate_degree"],
        par["data_parallel_shard_degree"],
        par["tensor_parallel_degree"],
        par["context_parallel_degree"],
        par["pipeline_parallel_degree"],
    )
    assert int(np.prod(degrees)) == cluster.num_gpus
    if lo.pp > 1:
        # torchtitan's stage count: ceil((layers + first_less + last_less) / layers_per_stage).
        extra = (
            par["pipeline_parallel_first_stage_less_layers"]
            + par["pipeline_parallel_last_stage_less_layers"]
        )
        per_stage = par["pipeline_parallel_layers_per_stage"]
        stages = -(-(model.num_layers + extra) // per_stage)
        assert stages == lo.pp * lo.vp
        stages_titan = [per_stage] * stages
        stages_titan[0] -= par["pipeline_parallel_first_stage_less_layers"]
        stages_titan[-1] -= par["pipeline_parallel_last_stage_less_layers"]
        assert stages_titan == chunks  # the split the cost model scored
        assert par["pipeline_parallel_schedule"] == ("Interleaved1F1B" if lo.vp > 1 else "1F1B")
    assert toml["training"]["num_tokens_per_train_step"] == (
        workload.global_batch_seqs * workload.seq_len
    )


@pytest.mark.parametrize("case", list(CASES))
def test_deepspeed_batch_identity(case):
    model, cluster, workload, fields = CASES[case]
    workload = workload.model_copy(update={"main_grads": "bf16"})  # DeepSpeed's gradients
    result = f.result_for(model, cluster, workload, Layout(**fields))
    lo = result.best.layout
    # DeepSpeed's PipelineEngine: no interleaving, ZeRO < 2 with PP, bf16 with PP on ZeRO-1 (not
    # its BF16_Optimizer); its topology builds tp-dp-pp only; ring CP and MoE expert groups are
    # not DeepSpeed's (cost_models.framework).
    unsupported = lo.vp > 1 or lo.cp > 1 or lo.ep > 1 or lo.order != launch.TORCHTITAN_ORDER
    unsupported |= lo.pp > 1 and (lo.zero_stage >= 2 or lo.zero_stage == 0)
    if workload.precision in ("fp8", "mxfp8", "nvfp4") or unsupported:
        with pytest.raises(InvalidInput, match="cannot export to deepspeed"):
            plan_exports.to_deepspeed_config(result)
        return
    ds = json.loads(json.dumps(plan_exports.to_deepspeed_config(result)))
    micro, acc = ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]
    assert ds["train_batch_size"] == micro * acc * lo.dp == workload.global_batch_seqs
    assert ds["zero_optimization"]["stage"] == lo.zero_stage
    # the priced 2 B gradients, as DeepSpeed's own fields (engine.py get_data_types)
    assert ds["data_types"] == {"grad_accum_dtype": "bf16"}
    assert ds["communication_data_type"] == "bf16"


def test_deepspeed_refuses_the_gradients_it_does_not_run():
    """A plan priced with fp32 gradients (Megatron-LM's default) is not DeepSpeed's bf16 run;
    nor is bf16 under pipelining without ZeRO, which DeepSpeed runs on its BF16_Optimizer."""
    model, lo = f.dense_model(), Layout(tp=4, pp=2, dp=2, zero_stage=1)
    fp32 = f.result_for(model, f.cluster(16), f.workload(global_batch=32), lo)
    with pytest.raises(InvalidInput, match=r"main_grads fp32: the plan priced fp32 gradients.*"
                       r"plan with --framework deepspeed"):
        plan_exports.to_deepspeed_config(fp32)
    w16 = f.workload(global_batch=32, main_grads="bf16")
    assert plan_exports.to_deepspeed_config(f.result_for(model, f.cluster(16), w16, lo))
    zero0 = f.result_for(model, f.cluster(16), w16, lo.with_update({"zero_stage": 0}))
    with pytest.raises(InvalidInput, match=r"precision bf16 with pp > 1 needs ZeRO >= 1.*"
                       r"BF16_Optimizer"):
        plan_exports.to_deepspeed_config(zero0)
    fp16 = f.workload(global_batch=32, precision="fp16", main_grads="bf16")
    ds = plan_exports.to_deepspeed_config(
        f.result_for(model, f.cluster(16), fp16, lo.with_update({"zero_stage": 0}))
    )  # fp16 under pipelining without ZeRO is FP16_Optimizer: the priced ZeRO-0
    assert ds["data_types"] == {"grad_accum_dtype": "fp16"} and ds["fp16"] == {"enabled": True}


def test_deepspeed_refuses_zero2_with_pipeline():
    lo = Layout(tp=4, pp=2, dp=2, zero_stage=2)
    w = f.workload(global_batch=32, main_grads="bf16")
    result = f.result_for(f.dense_model(), f.cluster(16), w, lo)
    with pytest.raises(InvalidInput, match=r"ZeRO-2 with pp \(2\)"):
        plan_exports.to_deepspeed_config(result)


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(a.value for a in o))
def test_rank_groups_partition_ranks_with_topology_strides(order):
    lo = Layout(tp=2, cp=2, dp=2, pp=4, order=order)
    groups = ranks.rank_groups(lo)
    strides = topology.axis_strides(lo)
    for axis in ("tp", "cp", "dp", "pp"):
        flat = sorted(r for g in groups[axis] for r in g)
        assert flat == list(range(lo.world_size)), axis
        degree = getattr(lo, axis)
        for g in groups[axis]:
            assert len(g) == degree
            assert all(b - a == strides[axis] for a, b in pairwise(g))


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(a.value for a in o))
def test_device_mesh_reproduces_rank_groups(order):
    lo = Layout(tp=2, cp=2, dp=2, pp=4, order=order)
    mesh = ranks.device_mesh(lo)
    grid = np.arange(lo.world_size).reshape(mesh["mesh_shape"])
    groups = ranks.rank_groups(lo)
    for dim, name in enumerate(mesh["mesh_dim_names"]):
        along = np.moveaxis(grid, dim, -1).reshape(-1, grid.shape[dim])
        assert sorted(sorted(map(int, row)) for row in along) == groups[name]


def test_device_mesh_of_hsdp_splits_dp_as_torchtitan_names_it():
    """HSDP: the mesh is torchtitan's (pp, dp_replicate, dp_shard, cp, tp); its dp_replicate
    dimension is the replica groups and (dp_shard, cp) flattened the shard groups (was one dp
    dimension, which no 2-D FSDP2 mesh can be sliced from)."""
    lo = Layout(tp=2, cp=2, dp=6, pp=2, dp_shard=3, zero_stage=3)
    mesh = ranks.device_mesh(lo)
    assert mesh["mesh_dim_names"] == ["pp", "dp_replicate", "dp_shard", "cp", "tp"]
    assert mesh["mesh_shape"] == [2, 2, 3, 2, 2]
    grid = np.arange(lo.world_size).reshape(mesh["mesh_shape"])
    groups = ranks.rank_groups(lo)
    replicas = np.moveaxis(grid, 1, -1).reshape(-1, 2)
    assert sorted(sorted(map(int, row)) for row in replicas) == groups["dp_replicate"]
    shards = np.moveaxis(grid, (2, 3), (-2, -1)).reshape(-1, 6)
    assert sorted(sorted(map(int, row)) for row in shards) == groups["dp_shard"]
    assert "dp_replicate" in mesh["call"]


def test_ep_groups_partition_and_follow_expert_order():
    lo = Layout(tp=2, dp=8, ep=4)
    groups = ranks.rank_groups(lo)["ep"]
    assert sorted(r for g in groups for r in g) == list(range(16))
    stride = topology.axis_strides(lo)["ep"]
    for g in groups:
        assert len(g) == 4 and all(b - a == stride for a, b in pairwise(g))


@pytest.mark.parametrize(
    "order, inside",
    [((Axis.TP, Axis.CP, Axis.DP, Axis.PP), True), ((Axis.DP, Axis.CP, Axis.TP, Axis.PP), False)],
)
def test_tp_groups_inside_one_nvlink_domain_when_the_plan_says_so(order, inside):
    cluster = f.cluster(32)
    lo = Layout(tp=4, dp=4, pp=2, order=order)
    result = f.result_for(f.dense_model(), cluster, f.workload(global_batch=32), lo)
    nvlink = cluster.tiers[0]
    plan_says_inside = result.best.placement["tp"][nvlink.name] == lo.tp
    assert plan_says_inside == inside
    domains = {frozenset(r // nvlink.domain_size for r in g) for g in plan_exports.to_rank_groups(result)["tp"]}
    assert all(len(d) == 1 for d in domains) == inside


def test_plan_result_methods_on_a_searched_plan():
    result = f.plan(f.moe_model(), f.cluster(16), f.workload(global_batch=32), tp=2, ep=4)
    lo = result.best.layout
    mesh = plan_exports.to_device_mesh(result)
    assert int(np.prod(mesh["mesh_shape"])) == 16
    assert mesh["mesh_dim_names"] == [a.value for a in reversed(lo.order)]
    assert "--expert-model-parallel-size" in plan_exports.to_megatron_args(result)


def test_cli_emit(capsys):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    assert main([*base, "--tp", "4", "--pp", "2", "--emit", "megatron"]) == 0
    args = shlex.split(capsys.readouterr().out)
    assert {a for a in args if a.startswith("--")} <= MEGATRON_FLAGS
    assert main([*base, "--tp", "4", "--emit", "ranks"]) == 0
    groups = json.loads(capsys.readouterr().out)
    assert sorted(r for g in groups["tp"] for r in g) == list(range(16))
    assert main([*base, "--tp", "4", "--emit", "mesh"]) == 0
    assert json.loads(capsys.readouterr().out)["mesh_dim_names"] == ["pp", "dp", "cp", "tp"]
    # --json keeps stdout pure JSON for every target.
    assert main([*base, "--tp", "4", "--pp", "2", "--emit", "megatron", "--json"]) == 0
    assert "--tensor-model-parallel-size" in json.loads(capsys.readouterr().out)
    titan_base = [*base[:2], "llama3.1-8b", *base[3:]]  # torchtitan's llama3_8b recipe
    assert main([*titan_base, "--tp", "4", "--emit", "torchtitan", "--json"]) == 0
    tt = json.loads(capsys.readouterr().out)
    assert tt["config"]["parallelism"]["tensor_parallel_degree"] == 4


def test_cli_emit_refusal_is_exit_2(capsys):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    assert main([*base, "--precision", "fp8", "--tp", "4", "--emit", "torchtitan"]) == 2
    err = capsys.readouterr().err
    assert "cannot export to torchtitan" in err and "Traceback" not in err


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(a.value for a in o))
def test_compact_rule_matches_the_rank_map(order):
    """The one-line rule printed for the ranks not shown must give the same coordinates."""
    cluster = f.cluster(32)
    lo = Layout(tp=2, cp=2, dp=4, pp=2, ep=2, order=order)
    rule = ranks.compact_rule(cluster, lo)
    for row in ranks.rank_map(cluster, lo):
        for part in rule.split("; "):
            name, expr = part.split(" = ", 1)
            if "stage-local" in expr:
                continue
            assert eval(expr, {"r": row["rank"]}) == row[name], (part, row)


def test_torchtitan_expert_parallel_rule():
    """torchtitan (etp = 1) borrows EP from cp*tp and dp_shard: ep % (cp*tp) == 0."""
    model, cluster, workload = f.moe_model(), f.cluster(16), f.workload(global_batch=32)
    ok = titan(f.result_for(model, cluster, workload, Layout(tp=2, dp=8, ep=4)))
    assert ok["config"]["parallelism"]["expert_parallel_degree"] == 4
    odd = f.result_for(model, cluster, workload, Layout(tp=4, dp=4, ep=2))
    with pytest.raises(InvalidInput, match=r"ep \(2\) must be a multiple of cp\*tp \(1\*4\)"):
        titan(odd)


@pytest.mark.parametrize(
    "model, gpus, pins",
    [("llama3-8b", 16, {"tp": 2}), ("mixtral-8x7b", 32, {"tp": 2, "pp": 2})],
)
def test_every_ranked_plan_exports_or_refuses_with_the_rule(model, gpus, pins):
    """Across searched plans: an export either names only real options or raises InvalidInput."""
    result = planner.plan_for(model, "dgx-h100", num_gpus=gpus, top_k=8, **pins)
    exported = 0
    for i, e in enumerate(result.ranked):
        try:
            flags = {a for a in plan_exports.to_megatron_args(result, i) if a.startswith("--")}
            assert flags <= MEGATRON_FLAGS
            exported += 1
        except InvalidInput as err:
            assert str(err).startswith("cannot export to megatron: ")
        try:
            tt = titan(result, i)
            names = {a[2:].replace(".no_", ".") for a in tt["overrides"] if a.startswith("--")}
            assert names <= TORCHTITAN_FIELDS
        except InvalidInput as err:
            assert str(err).startswith("cannot export to torchtitan: ")
        groups = plan_exports.to_rank_groups(result, i)
        for axis in ("tp", "cp", "dp", "pp", "ep"):
            assert sorted(r for g in groups[axis] for r in g) == list(range(gpus))
        assert e.layout.world_size == gpus
    assert exported > 0


def test_rank_map_rows_agree_with_rank_groups():
    lo = Layout(tp=2, cp=2, dp=2, pp=2, order=(Axis.CP, Axis.TP, Axis.PP, Axis.DP))
    result = f.result_for(f.dense_model(), f.cluster(16), f.workload(global_batch=32), lo)
    rows = plan_exports.to_rank_map(result)
    assert [r["rank"] for r in rows] == list(range(16))
    assert all((r["node"], r["gpu"]) == divmod(r["rank"], 8) for r in rows)
    for axis, groups in plan_exports.to_rank_groups(result).items():
        if axis not in rows[0]:
            continue  # dp_cp and the expert kinds vary several coordinates
        for g in groups:
            # Members of one group differ only in that axis's coordinate, which runs 0..n-1.
            assert sorted(rows[r][axis] for r in g) == list(range(len(g)))
            others = {
                tuple(v for k, v in rows[r].items() if k in ("dp", "pp", "cp", "tp") and k != axis)
                for r in g
            }
            assert len(others) == 1 or axis == "ep"
    assert len(plan_exports.to_rank_map(result, max_nodes=1)) == 8


def test_a_plan_with_its_own_stage_split_is_exported_as_that_split():
    """The search's own split (Estimate.layers_per_stage, planner/search/partition.py) is exported."""
    model = f.dense_model(num_layers=32)
    base = f.result_for(model, f.cluster(32), f.workload(64), Layout(tp=4, pp=4, dp=2))

    def with_split(split):
        e = base.best.model_copy(update={"layers_per_stage": split})
        return base.model_copy(update={"ranked": (e,)})

    # Only the ends differ: Megatron's first/last flags spread the rest evenly (9 and 9).
    args = plan_exports.to_megatron_args(with_split((6, 9, 9, 8)))
    first = args[args.index("--decoder-first-pipeline-num-layers") + 1]
    last = args[args.index("--decoder-last-pipeline-num-layers") + 1]
    assert (first, last) == ("6", "8")
    # Middle stages differ too: only the explicit layout expresses it.
    result = with_split((6, 9, 10, 7))
    args = plan_exports.to_megatron_args(result)
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert [c.count("t") for c in layout.split("|")] == [6, 9, 10, 7]
    with pytest.raises(InvalidInput, match="pipeline_parallel_layers_per_stage"):
        titan(result)


def test_mtp_plans_export_the_depth_and_their_split():
    """A model with MTP: --mtp-num-layers, and the even split that counts the MTP layer as one
    of the last stage's (even_chunk_counts) as first / last flags, or as the layout string with
    the `m` megatron-core 0.19's PipelineParallelLayerLayout counts (mtp_num_layers of them,
    after every decoder layer, before the loss)."""
    model = f.dense_model(num_layers=31, mtp_num_layers=1)
    one = f.result_for(model, f.cluster(32), f.workload(64), Layout(tp=4, pp=4, dp=2))
    args = plan_exports.to_megatron_args(one)
    assert args[args.index("--mtp-num-layers") + 1] == "1"
    first = args[args.index("--decoder-first-pipeline-num-layers") + 1]
    last = args[args.index("--decoder-last-pipeline-num-layers") + 1]
    assert (first, last) == ("8", "7")  # 32 slots: 8 a stage, the last 7 + MTP
    vp = f.result_for(model, f.cluster(32), f.workload(64), Layout(tp=4, pp=4, dp=2, vp=2))
    args = plan_exports.to_megatron_args(vp)
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    chunks = layout.split("|")
    assert [c.count("t") for c in chunks] == [4, 4, 4, 4, 4, 4, 4, 3]
    assert chunks[-1].endswith("tmL") and layout.count("m") == 1


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"recompute": "selective"}, ["--recompute-granularity", "selective"]),
        (
            {"recompute": "selective", "recompute_modules": ("core_attn", "layernorm", "mlp")},
            ["--recompute-granularity", "selective"]
            + ["--recompute-modules", "core_attn", "layernorm", "mlp"],
        ),
        (
            {"recompute": "full"},
            ["--recompute-granularity", "full", "--recompute-method", "uniform"]
            + ["--recompute-num-layers", "1"],
        ),
        (
            {"recompute": "full", "recompute_method": "block", "recompute_num_layers": 2},
            ["--recompute-granularity", "full", "--recompute-method", "block"]
            + ["--recompute-num-layers", "2"],
        ),
    ],
)
def test_megatron_recompute_flags(fields, expected) -> None:
    lo = Layout(tp=2, pp=2, dp=2, sequence_parallel=True, **fields)
    result = f.result_for(f.dense_model(), f.cluster(8), f.workload(global_batch=16), lo)
    args = plan_exports.to_megatron_args(result)
    start = args.index("--recompute-granularity")
    assert args[start : start + len(expected)] == expected
    assert {a for a in expected if a.startswith("--")} <= MEGATRON_FLAGS


def test_torchtitan_launches_the_cuda_graph_it_prices():
    """torchtitan 0.3.0 graphs forward + backward unless training.disable_cuda_graphs: the export
    turns the graph off unless the workload prices it (Workload.full_iteration_cuda_graph), and a
    priced graph is searched and exported at pp 1, ep 1 only (trainer.py _validate_cuda_graphs)."""
    model, cluster = f.dense_model(), f.cluster(8)
    eager_w = f.workload(global_batch=16)
    graph_w = f.workload(global_batch=16, full_iteration_cuda_graph=True)
    eager = f.result_for(model, cluster, eager_w, Layout(dp=8))
    graphed = f.result_for(model, cluster, graph_w, Layout(dp=8))
    assert graphed.best.step_time_s < eager.best.step_time_s  # no eager launches priced
    assert titan(eager)["config"]["training"]["disable_cuda_graphs"] is True
    assert "--training.disable_cuda_graphs" in titan(eager)["overrides"]
    assert titan(graphed)["config"]["training"]["disable_cuda_graphs"] is False
    assert "--training.no_disable_cuda_graphs" in titan(graphed)["overrides"]
    piped = f.result_for(model, cluster, graph_w, Layout(dp=4, pp=2))
    with pytest.raises(InvalidInput, match=r"full_iteration_cuda_graph with pp 2 / ep 1"):
        titan(piped)
    found = f.plan(model, f.cluster(16), graph_w, framework="torchtitan", top_k=8)
    assert {(e.layout.pp, e.layout.ep) for e in found.ranked} == {(1, 1)}
    with pytest.raises(InvalidInput, match=r"only with pp 1 and ep 1 .* pinned at 2 / None"):
        f.plan(model, f.cluster(16), graph_w, framework="torchtitan", pp=2)


# ------------------------------------------------------------- the attention kernel the plan priced

MEGATRON_DEEPSPEED_FLAGS = {
    line.strip()
    for line in (Path(__file__).parent / "megatron_deepspeed_flags.txt").read_text().splitlines()
    if line.startswith("--")
}


def _kernel_result(kernel: str, main_grads: str = "bf16"):
    # DeepSpeed's 16-bit gradients (the deepspeed profile's main_grads) and, under bf16 with
    # pp > 1, ZeRO-1 (without ZeRO it runs BF16_Optimizer: framework.DEEPSPEED_BF16_PIPELINE)
    w = f.workload(global_batch=32, attention_kernel=kernel, main_grads=main_grads)
    return f.result_for(f.dense_model(), f.cluster(16), w, Layout(tp=2, pp=2, dp=4, zero_stage=1))


@pytest.mark.parametrize(
    ("kernel", "flags"),
    [
        ("fused", []),
        ("fa2", ["--attention-backend", "flash", "--flash-attention-version", "2"]),
        ("unfused", ["--attention-backend", "unfused"]),
    ],
)
def test_megatron_launches_the_attention_kernel_the_plan_priced(kernel, flags):
    args = launch.megatron_model_args(f.dense_model(), f.workload(attention_kernel=kernel))
    backend = {"--attention-backend", "--flash-attention-version"}
    at = args.index("--attention-backend") if flags else len(args)
    assert args[at : at + len(flags)] == flags
    assert sum(a in backend for a in args) == len(flags) // 2
    ns = megatron_parser(args).parse_args(args)
    assert getattr(ns, "attention_backend", None) == (flags[1] if flags else None)


def test_megatron_refuses_flash_attn_1():
    with pytest.raises(InvalidInput, match="cannot export to megatron: attention_kernel flash1"):
        launch.megatron_model_args(f.dense_model(), f.workload(attention_kernel="flash1"))


@pytest.mark.parametrize(
    ("kernel", "flags"),
    [("fa2", ["--use-flash-attn-v2"]), ("flash1", ["--use-flash-attn-v1"]), ("unfused", [])],
)
def test_deepspeed_launches_the_attention_kernel_the_plan_priced(kernel, flags):
    """Megatron-DeepSpeed runs its unfused CoreAttention unless a --use-flash-attn flag is given;
    every flag the export writes is one its parser registers (megatron_deepspeed_flags.txt)."""
    args = plan_exports.to_deepspeed(_kernel_result(kernel))["launch_args"]
    assert [a for a in args if a.startswith("--use-flash-attn")] == flags
    assert {a for a in args if a.startswith("--")} <= MEGATRON_DEEPSPEED_FLAGS


def test_deepspeed_refuses_fused_attention_and_its_plans_run_fa2():
    with pytest.raises(InvalidInput, match="Megatron-DeepSpeed has no such backend"):
        plan_exports.to_deepspeed(_kernel_result("fused"))
    result = planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, framework="deepspeed")
    assert result.workload.attention_kernel == "fa2"
    args = plan_exports.to_deepspeed(result)["launch_args"]
    assert "--use-flash-attn-v2" in args
    assert {a for a in args if a.startswith("--")} <= MEGATRON_DEEPSPEED_FLAGS


@pytest.mark.parametrize("kernel", ["flash1", "unfused"])
def test_torchtitan_refuses_kernels_it_does_not_run(kernel):
    with pytest.raises(InvalidInput, match=f"torchtitan: attention_kernel {kernel}"):
        titan(_kernel_result(kernel, main_grads="fp32"))  # torchtitan's gradients


def test_megatron_builds_gpt_oss_from_its_flags():
    """gpt-oss's sinks, experts' clamped quick-GeGLU and untruncated YaRN as megatron-core
    0.19.2 options (Megatron-Bridge GPTOSSBridge.provider_bridge sets the same config fields);
    tests/frameworks/test_model_handoff.py builds the model from them."""
    result = planner.plan_for("gpt-oss-120b", "dgx-h100", num_gpus=64, global_batch=512,
                              seq_len=4096, top_k=1)  # fmt: skip
    args = plan_exports.to_megatron_args(result)
    assert {a for a in args if a.startswith("--")} <= MEGATRON_FLAGS
    joined = " ".join(args)
    for expected in ("--softmax-type learnable", "--quick-geglu",
                     "--activation-func-clamp-value 7", "--glu-linear-offset 1",
                     "--window-size 127,0", "--window-attn-skip-freq 2",
                     "--no-yarn-correction-range-round-to-int",
                     "--attention-backend fused"):  # fmt: skip
        assert expected in joined
    assert args.count("--position-embedding-type") == 1
    assert args[args.index("--position-embedding-type") + 1] == "yarn"
    assert "--swiglu" not in args and "--disable-bias-linear" not in args


def test_clamped_or_offset_glu_needs_quick_gelu_in_megatron_and_a_gated_mlp():
    silu = f.dense_model(activation_clamp=7.0, glu_linear_offset=1.0)
    with pytest.raises(InvalidInput, match="quick_geglu only"):
        launch.megatron_model_args(silu, f.workload())
    with pytest.raises(InvalidInput, match="clamped or offset GLU"):
        launch.megatron_deepspeed_model_args(silu, f.workload())
    quick = f.dense_model(activation="quick_gelu", gated_mlp=False)
    with pytest.raises(InvalidInput, match="non-gated quick_gelu MLP has no Megatron-LM flag"):
        launch.megatron_model_args(quick, f.workload())
    with pytest.raises(ValueError, match="need gated_mlp: true"):
        f.dense_model(gated_mlp=False, activation_clamp=7.0)


def test_megatron_exports_the_all_to_all_cp_the_plan_priced():
    """--cp-comm-type a2a (TransformerConfig.cp_comm_type) where the plan priced Transformer
    Engine's all-to-all CP; gpt-oss at 32K tokens plans CP with it, which the ring refuses."""
    kw = {"num_gpus": 128, "global_batch": 64, "seq_len": 32768, "top_k": 1, "cp": 4}
    a2a = {"cp_attention": "a2a"}
    result = planner.plan_for("gpt-oss-120b", "dgx-h100", workload_fields=a2a, **kw)
    args = plan_exports.to_megatron_args(result)
    assert {a for a in args if a.startswith("--")} <= MEGATRON_FLAGS
    assert args[args.index("--cp-comm-type") + 1] == "a2a"
    assert args[args.index("--context-parallel-size") + 1] == "4"
    # the p2p ring refuses windows and sinks: Megatron plans such a model on the all-to-all CP
    # unless told otherwise, as Megatron-Bridge's gpt-oss recipes set it
    default = planner.plan_for("gpt-oss-120b", "dgx-h100", **kw)
    assert default.workload.cp_attention == "a2a"
    assert plan_exports.to_megatron_args(default) == args
    ring = {"cp_attention": "fused_ring"}
    with pytest.raises(api.NoFeasiblePlan):
        planner.plan_for("gpt-oss-120b", "dgx-h100", workload_fields=ring, **kw)
    one = planner.plan_for("llama3.1-8b", "dgx-h100", num_gpus=8, top_k=1, cp=1,
                           workload_fields={"cp_attention": "a2a"})  # fmt: skip
    assert "--cp-comm-type" not in plan_exports.to_megatron_args(one)


def test_reports_name_the_all_to_all_cp_the_launch_must_set(capsys):
    """A plan on the all-to-all CP says so (the launcher's own default is the ring); a ring plan
    adds no line."""
    argv = ["estimate", "--model", "gpt-oss-120b", "--cluster", "dgx-h100", "--gpus", "128",
            "--global-batch", "64", "--seq-len", "32768", "--tp", "1", "--pp", "1", "--dp", "32",
            "--cp", "4", "--ep", "32", "--recompute", "selective"]  # fmt: skip
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Context parallelism: all-to-all of Q, K, V and the output over CP 4" in out
    assert "--cp-comm-type a2a" in out and "sliding windows and attention sinks" in out
    ring = ["estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
            "--global-batch", "16", "--seq-len", "32768", "--tp", "1", "--pp", "1", "--dp", "8",
            "--cp", "2"]  # fmt: skip
    assert main(ring) == 0
    assert "Context parallelism" not in capsys.readouterr().out
