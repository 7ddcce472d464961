"""Launcher hand-off: a plan as Megatron-LM arguments, torchtitan overrides/TOML, DeepSpeed JSON.

Option names are the launchers' own (Megatron-LM: shared/data/megatron_lm_flags.txt; torchtitan:
shared/data/torchtitan_config_fields.txt). Before emitting, each exporter checks the target's
own rules and raises InvalidInput naming the rule when the plan cannot be expressed there.
"""

from __future__ import annotations

from typing import Any

from cost_models.errors import InvalidInput
from cost_models.pipeline import chunk_layer_counts, stage_layers
from cost_models.specs import Axis, Estimate, ModelSpec, Workload

# Megatron-Core builds its groups with order "tp-cp-ep-dp-pp", or "tp-cp-ep-pp-dp" under
# --use-tp-pp-dp-mapping (megatron/training/initialize.py); other orders cannot be launched.
MEGATRON_ORDERS = {
    (Axis.TP, Axis.CP, Axis.DP, Axis.PP): [],
    (Axis.TP, Axis.CP, Axis.PP, Axis.DP): ["--use-tp-pp-dp-mapping"],
}
# torchtitan's ParallelDims builds its world mesh as (pp, dp_replicate, dp_shard, cp, tp).
TORCHTITAN_ORDER = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)


def _refuse(target: str, rule: str) -> InvalidInput:
    return InvalidInput(f"cannot export to {target}: {rule}")


def _order_text(e: Estimate) -> str:
    return "-".join(a.value for a in e.layout.order)


def chunk_counts(model: ModelSpec, e: Estimate) -> list[int]:
    """Layers of each virtual stage in model order: the plan's own split when the Estimate
    carries one (`layers_per_stage`, from a search that balances stages), else the cost model's
    default split."""
    custom = getattr(e, "layers_per_stage", None)
    if custom:
        return list(custom)
    return chunk_layer_counts(model.num_layers, e.layout.pp * e.layout.vp)


def stage_layer_counts(model: ModelSpec, e: Estimate) -> list[int]:
    """Transformer layers held by each pipeline rank (all its virtual chunks)."""
    custom = getattr(e, "layers_per_stage", None)
    return [len(s) for s in stage_layers(model, e.layout, tuple(custom) if custom else None)]


# ------------------------------------------------------------------------------------ Megatron


def megatron_args(model: ModelSpec, workload: Workload, e: Estimate) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for the parallel part of the plan."""
    lo = e.layout
    if lo.order not in MEGATRON_ORDERS:
        raise _refuse(
            "megatron",
            f"rank order {_order_text(e)} is not one Megatron-Core builds "
            "(tp-cp-dp-pp, or tp-cp-pp-dp with --use-tp-pp-dp-mapping)",
        )
    args = [
        "--num-layers",
        str(model.num_layers),
        "--seq-length",
        str(workload.seq_len),
        "--tensor-model-parallel-size",
        str(lo.tp),
        "--pipeline-model-parallel-size",
        str(lo.pp),
        "--context-parallel-size",
        str(lo.cp),
        "--micro-batch-size",
        str(lo.micro_batch),
        "--global-batch-size",
        str(workload.global_batch_seqs),
    ]
    args += MEGATRON_ORDERS[lo.order]
    if lo.pp_schedule != "1f1b":
        # Megatron-LM has no DualPipe schedule (no such flag in its parser); DeepSeek's is a
        # separate library (github deepseek-ai/DualPipe).
        raise _refuse("megatron", f"pipeline schedule {lo.pp_schedule} has no Megatron-LM flag")
    if model.moe is not None:
        args += ["--expert-model-parallel-size", str(lo.ep)]
        args += ["--expert-tensor-parallel-size", str(lo.etp)]
        if workload.moe_dispatcher == "deepep":
            args += ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend"]
            args.append("deepep")
        if lo.ep_overlap and lo.recompute == "full":
            raise _refuse(
                "megatron", "--overlap-moe-expert-parallel-comm asserts no full recomputation"
            )
        if lo.ep_overlap:
            # megatron/core/model_parallel_config.py: overlap_moe_expert_parallel_comm ("Overlap
            # EP A2A communications with independent computations of different micro-batches in
            # 1f1b phase") and delay_wgrad_compute (batch-level overlap of the weight gradients).
            args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    args += _megatron_pipeline(model, e)
    if lo.sequence_parallel and lo.tp > 1:
        args.append("--sequence-parallel")
    if lo.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif lo.recompute == "full":
        # Full recompute of every layer: the memory model's assumption (one input per layer kept).
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform"]
        args += ["--recompute-num-layers", "1"]
    if lo.zero_stage in (1, 2):
        # The distributed optimizer shards optimizer state and reduce-scatters gradients.
        args.append("--use-distributed-optimizer")
    elif lo.zero_stage == 3:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params"]
    args += _megatron_precision(workload)
    return args


def _megatron_pipeline(model: ModelSpec, e: Estimate) -> list[str]:
    lo = e.layout
    if lo.pp == 1:
        return []
    if lo.vp > 1 and e.num_microbatches % lo.pp:
        raise _refuse(
            "megatron",
            f"interleaved schedule needs num_microbatches ({e.num_microbatches}) divisible by "
            f"pp ({lo.pp})",
        )
    counts = stage_layer_counts(model, e)
    vp_flag = ["--virtual-pipeline-model-parallel-size", str(lo.vp)] if lo.vp > 1 else []
    if len(set(chunk_counts(model, e))) == 1:
        return vp_flag
    middle = counts[1:-1]
    if lo.vp == 1 and len(set(middle)) <= 1:
        # Megatron spreads the layers left after the first and last stage evenly over the rest.
        return [
            "--decoder-first-pipeline-num-layers",
            str(counts[0]),
            "--decoder-last-pipeline-num-layers",
            str(counts[-1]),
        ]
    return ["--pipeline-model-parallel-layout", megatron_layout(model, e)]


def megatron_layout(model: ModelSpec, e: Estimate) -> str:
    """`--pipeline-model-parallel-layout`: one `|`-separated entry per virtual stage in model
    order (chunk c on pipeline rank c % pp), `E` embedding, `t` one decoder layer, `L` loss.
    The split is the cost model's own (cost_models.pipeline.chunk_layer_counts)."""
    lo = e.layout
    chunks = chunk_counts(model, e)
    if min(chunks) == 0:
        raise _refuse(
            "megatron", f"a virtual stage would hold no layer ({lo.pp}*{lo.vp} > num_layers)"
        )
    parts = ["t" * n for n in chunks]
    parts[0], parts[-1] = "E" + parts[0], parts[-1] + "L"
    return "|".join(parts)


def _megatron_precision(workload: Workload) -> list[str]:
    if workload.precision == "bf16":
        return ["--bf16"]
    if workload.precision == "fp16":
        return ["--fp16"]
    if workload.precision == "fp8":
        # Transformer Engine fp8 GEMMs with bf16 master weights and non-GEMM math.
        return ["--bf16", "--fp8-format", "hybrid"]
    if workload.precision == "mxfp8":
        # Blackwell MX block scaling: e4m3 with the mxfp8 recipe (Transformer Engine).
        return ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"]
    raise _refuse("megatron", f"precision {workload.precision} has no Megatron-LM flag here")


# ---------------------------------------------------------------------------------- torchtitan


def torchtitan_config(model: ModelSpec, workload: Workload, e: Estimate) -> dict[str, Any]:
    """`{section: {field: value}}` for torchtitan's job config (fields from the fields file)."""
    lo = e.layout
    if lo.order != TORCHTITAN_ORDER:
        raise _refuse(
            "torchtitan",
            f"rank order {_order_text(e)}: torchtitan's mesh is (pp, dp, cp, tp), i.e. tp-cp-dp-pp"
            " (plan with --no-order-search to keep that order)",
        )
    if lo.etp != 1:
        raise _refuse("torchtitan", f"etp ({lo.etp}) != 1 has no field in the fields file")
    if lo.pp_schedule != "1f1b" or lo.ep_overlap or workload.moe_dispatcher != "alltoall":
        raise _refuse(
            "torchtitan",
            "DualPipe, MoE all-to-all overlap and DeepEP dispatch have no field in the fields file",
        )
    if workload.precision not in ("bf16",):
        raise _refuse(
            "torchtitan", f"precision {workload.precision}: only bf16 is in the fields file"
        )
    # ZeRO-0 is DDP (replicate); ZeRO-1/2 are FSDP without resharding after forward (at least
    # ZeRO-1's memory saving, ZeRO-2's traffic); ZeRO-3 reshards after forward.
    if lo.zero_stage == 0:
        replicate, shard, reshard = lo.dp, 1, "default"
    else:
        replicate, shard = 1, lo.dp
        reshard = "always" if lo.zero_stage == 3 else "never"
    _torchtitan_rules(workload, lo, shard)
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": reshard,
        "tensor_parallel_degree": lo.tp,
        "enable_sequence_parallel": lo.sequence_parallel,
        "context_parallel_degree": lo.cp,
        "pipeline_parallel_degree": lo.pp,
        "expert_parallel_degree": lo.ep,
    }
    if lo.pp > 1:
        chunks = chunk_counts(model, e)
        per_stage = max(chunks)
        # torchtitan builds ceil((num_layers + first_less + last_less) / layers_per_stage) stages
        # (distributed/pipeline_parallel.py): equal stages, except that the first and last may
        # hold fewer layers (room for the embedding and the LM head), as the cost model splits.
        first_less, last_less = per_stage - chunks[0], per_stage - chunks[-1]
        if len(chunks) > 1 and set(chunks[1:-1]) - {per_stage}:
            raise _refuse(
                "torchtitan",
                f"layers per virtual stage {chunks} differ in the middle stages; "
                "pipeline_parallel_layers_per_stage is one number (only the first and last "
                "stage may hold fewer)",
            )
        if lo.vp > 1 and e.num_microbatches % lo.pp:
            raise _refuse(
                "torchtitan",
                f"Interleaved1F1B needs num_pp_microbatches ({e.num_microbatches}) divisible by "
                f"pp ({lo.pp})",
            )
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if lo.vp > 1 else "1F1B"
        parallelism["pipeline_parallel_layers_per_stage"] = per_stage
        parallelism["pipeline_parallel_first_stage_less_layers"] = first_less
        parallelism["pipeline_parallel_last_stage_less_layers"] = last_less
        parallelism["num_pp_microbatches"] = e.num_microbatches
    tokens_micro = lo.micro_batch * workload.seq_len
    training = {
        "num_tokens_per_microbatch_per_dp_rank": tokens_micro,
        "num_tokens_per_train_step": workload.global_batch_seqs * workload.seq_len,
        "max_context_length": workload.seq_len,
        "mixed_precision_param": "bfloat16",
    }
    return {"training": training, "parallelism": parallelism}


def _torchtitan_rules(workload: Workload, lo: Any, dp_shard: int) -> None:
    """ParallelDims._validate and seq_len_divisor (torchtitan/distributed/parallel_dims.py)."""
    # With etp = 1 (the default; the fields file has no etp field) EP borrows all of cp and tp
    # and part of dp_shard.
    if lo.ep > 1 and (lo.ep % (lo.cp * lo.tp) or (dp_shard * lo.cp * lo.tp) % lo.ep):
        raise _refuse(
            "torchtitan",
            f"ep ({lo.ep}) must be a multiple of cp*tp ({lo.cp}*{lo.tp}) and divide "
            f"dp_shard*cp*tp ({dp_shard}*{lo.cp}*{lo.tp})",
        )
    divisor = lo.tp * 2 * lo.cp
    if workload.seq_len % divisor:
        raise _refuse(
            "torchtitan", f"seq_len ({workload.seq_len}) must be divisible by tp*2*cp ({divisor})"
        )


def torchtitan_overrides(config: dict[str, Any]) -> list[str]:
    """The config as `--<section>.<field> VALUE` command-line overrides."""
    out: list[str] = []
    for section, fields in config.items():
        for name, value in fields.items():
            out += [f"--{section}.{name}", _toml_value(value).strip('"')]
    return out


def torchtitan_toml(config: dict[str, Any], recompute: str) -> str:
    """The config as a TOML file (activation checkpointing is a config class, noted as comment)."""
    ac = {"none": "none", "selective": "SelectiveAC", "full": "FullAC"}[recompute]
    lines = [f"# activation checkpointing: {ac} (chosen by config class in torchtitan)"]
    for section, fields in config.items():
        lines.append(f"\n[{section}]")
        lines += [f"{name} = {_toml_value(value)}" for name, value in fields.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def torchtitan(model: ModelSpec, workload: Workload, e: Estimate) -> dict[str, Any]:
    config = torchtitan_config(model, workload, e)
    return {
        "config": config,
        "overrides": torchtitan_overrides(config),
        "toml": torchtitan_toml(config, e.layout.recompute),
    }


# ----------------------------------------------------------------------------------- DeepSpeed


def deepspeed_config(workload: Workload, e: Estimate) -> dict[str, Any]:
    """DeepSpeed config JSON; train_batch_size = micro x accumulation x dp (DeepSpeed's check)."""
    lo = e.layout
    if lo.pp_schedule != "1f1b" or lo.ep_overlap:
        raise _refuse("deepspeed", "DualPipe and MoE all-to-all overlap have no config key here")
    if lo.pp > 1 and lo.zero_stage >= 2:
        # DeepSpeed's PipelineEngine asserts ZeRO stage < 2.
        raise _refuse("deepspeed", f"ZeRO-{lo.zero_stage} with pp ({lo.pp}) > 1: needs ZeRO <= 1")
    accumulation = e.num_microbatches
    if lo.micro_batch * accumulation * lo.dp != workload.global_batch_seqs:
        raise _refuse(
            "deepspeed",
            f"train_batch_size ({workload.global_batch_seqs}) != micro ({lo.micro_batch}) x "
            f"accumulation ({accumulation}) x dp ({lo.dp})",
        )
    config: dict[str, Any] = {
        "train_batch_size": workload.global_batch_seqs,
        "train_micro_batch_size_per_gpu": lo.micro_batch,
        "gradient_accumulation_steps": accumulation,
        "zero_optimization": {"stage": lo.zero_stage},
    }
    if workload.precision == "fp16":
        config["fp16"] = {"enabled": True}
    elif workload.precision == "bf16":
        config["bf16"] = {"enabled": True}
    else:
        raise _refuse("deepspeed", f"precision {workload.precision}: config has bf16/fp16 only")
    return config
