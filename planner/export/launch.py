"""Launcher hand-off: a plan as Megatron-LM arguments, torchtitan command lines, DeepSpeed JSON.

Targets (cost_models.framework profiles): megatron-core 0.19 (megatron/training/arguments.py of
the 0.19.2 wheel), torchtitan 0.3.0 (torchtitan/config/manager.py ConfigManager: --module /
--config plus tyro overrides) and torchtitan main (shared/data/torchtitan_config_fields.txt),
DeepSpeed 0.19 with Megatron-DeepSpeed. tests/frameworks/ feeds these exports to the real
frameworks. Before emitting, each exporter checks the target's own rules and raises InvalidInput
naming the rule when the plan cannot be expressed there.
"""

from __future__ import annotations

from typing import Any

from cost_models import framework
from cost_models.compute import quant_recipe
from cost_models.errors import InvalidInput
from cost_models.memory import (
    DEEPSPEED_MAX_LIVE_ELEMENTS,
    DEEPSPEED_PREFETCH_BUCKET_ELEMENTS,
    states_unit_size,
)
from cost_models.pipeline import layout_chunk_counts, split_slots, stage_layers
from cost_models.specs import Axis, Estimate, Layout, ModelSpec, Workload

# Megatron-Core builds its groups with order "tp-cp-ep-dp-pp", or "tp-cp-ep-pp-dp" under
# --use-tp-pp-dp-mapping (megatron/training/initialize.py); other orders cannot be launched.
MEGATRON_ORDERS = {
    (Axis.TP, Axis.CP, Axis.DP, Axis.PP): [],
    (Axis.TP, Axis.CP, Axis.PP, Axis.DP): ["--use-tp-pp-dp-mapping"],
}
# torchtitan's ParallelDims builds its world mesh as (pp, dp_replicate, dp_shard, cp, tp).
TORCHTITAN_ORDER = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
MEGATRON_VERSION = "megatron-core 0.19.2"
TORCHTITAN_RELEASE = "torchtitan 0.3.0"
TORCHTITAN_MAIN = "torchtitan main (b5bcd76, 2026-08-21)"
DEEPSPEED_VERSION = "DeepSpeed 0.19.8 (+ Megatron-DeepSpeed launcher arguments)"


# A layout rule broken by a plan searched for another framework: say how to get one that runs.
_SEARCH_FOR = " (this plan was not searched for {0}: plan with --framework {0})"


def _refuse(target: str, rule: str) -> InvalidInput:
    return InvalidInput(f"cannot export to {target}: {rule}")


def _num(value: float) -> str:
    """A number as the parsers take it: integral values as ints (Megatron's --rotary-base is an
    int argument), others in full precision."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _order_text(e: Estimate) -> str:
    return "-".join(a.value for a in e.layout.order)


def chunk_counts(model: ModelSpec, e: Estimate) -> list[int]:
    """Layers of each virtual stage in model order: the plan's own split when the Estimate
    carries one (`layers_per_stage`, from a search that balances stages), else the layout's own
    split (pipeline.layout_chunk_counts: Megatron's with the embedding / loss counted)."""
    custom = getattr(e, "layers_per_stage", None)
    if custom:
        return list(custom)
    return layout_chunk_counts(model, e.layout)


def stage_layer_counts(model: ModelSpec, e: Estimate) -> list[int]:
    """Transformer layers held by each pipeline rank (all its virtual chunks)."""
    custom = getattr(e, "layers_per_stage", None)
    return [len(s) for s in stage_layers(model, e.layout, tuple(custom) if custom else None)]


# ------------------------------------------------------------------------------------ Megatron


def megatron_model_args(model: ModelSpec, workload: Workload) -> list[str]:
    """The whole model as Megatron-LM arguments (megatron/training/arguments.py of megatron-core
    0.19.2): shape, attention variant, MLP, positions, norms, biases, dropout and MoE. A setting
    with no Megatron flag is refused by name (InvalidInput), never dropped; tests/frameworks
    builds the model from these arguments alone and compares it with the plan's."""
    args = ["--num-layers", str(model.num_layers), "--hidden-size", str(model.hidden_size)]
    args += ["--num-attention-heads", str(model.num_attention_heads)]
    if model.ffn_hidden_size is not None:
        args += ["--ffn-hidden-size", str(model.ffn_hidden_size)]
    args += _megatron_attention(model)
    args += _megatron_attention_backend(workload, model)
    args += _megatron_mlp(model)
    args += _megatron_positions(model, workload)
    # Megatron's defaults are LayerNorm, biases on every linear layer and dropout 0.1.
    norm = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[model.normalization]
    args += ["--normalization", norm, "--norm-epsilon", _num(model.norm_eps)]
    if not model.linear_bias:
        args.append("--disable-bias-linear")
    if model.qkv_bias and not model.linear_bias:
        args.append("--add-qkv-bias")
    if not model.hidden_dropout:
        args += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    if model.vocab_size is not None:
        args += ["--vocab-size", str(model.vocab_size)]
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.moe is not None:
        args += _megatron_moe(model, workload)
    if model.mtp_num_layers:
        if model.position_embedding_kind != "rope":
            # megatron-core 0.19 megatron/training/arguments.py validate_args: "Multi-Token
            # Prediction (MTP) is not supported with {position_embedding_type} ... rope and none"
            raise _refuse(
                "megatron",
                f"mtp_num_layers with {model.position_embedding_kind} position embeddings: "
                "Megatron-LM's validate_args takes MTP with rope (or none) only",
            )
        # Megatron puts the MTP layers on the last pipeline stage (the layout string names them:
        # megatron_layout); the loss weight keeps TransformerConfig's default 0.1.
        args += ["--mtp-num-layers", str(model.mtp_num_layers)]
    return args


def _megatron_attention(model: ModelSpec) -> list[str]:
    """GQA, MLA dimensions, q/k norm, sliding window, attention sinks (TransformerConfig /
    MLATransformerConfig)."""
    args: list[str] = []
    if model.attention_sinks:
        # gpt-oss's per-head sink logit: TransformerConfig.softmax_type "learnable", a
        # softmax_offset parameter per head in core attention (megatron-core 0.19
        # dot_product_attention.py; TE's DotProductAttention takes it as softmax_type), as
        # Megatron-Bridge's GPTOSSBridge sets it (sinks -> core_attention.softmax_offset).
        args += ["--softmax-type", "learnable"]
    if model.mla is not None:
        mla = model.mla
        args.append("--multi-latent-attention")
        if mla.q_lora_rank is not None:
            args += ["--q-lora-rank", str(mla.q_lora_rank)]
        args += ["--kv-lora-rank", str(mla.kv_lora_rank)]
        args += ["--qk-head-dim", str(mla.qk_nope_head_dim)]
        args += ["--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim)]
        args += ["--v-head-dim", str(mla.v_head_dim)]
        # MLA's RMSNorms on the compressed q and kv (DeepSeek-V3 q_a_layernorm, kv_a_layernorm)
        # are Megatron's qk_layernorm (MLASelfAttention q_layernorm / kv_layernorm).
        args.append("--qk-layernorm")
    else:
        args += ["--kv-channels", str(model.attn_head_dim)]
        if model.kv_heads != model.num_attention_heads:
            args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
        if model.qk_norm:
            args.append("--qk-layernorm")
    if model.sliding_window is not None:
        # HF's sliding_window counts the query itself: flash-attn window (W-1, 0) for causal
        # attention (transformers modeling_flash_attention_utils: sliding_window - 1).
        args += ["--window-size", f"{model.sliding_window - 1},0"]
        if model.full_attention_every is not None:
            args += ["--window-attn-skip-freq", str(model.full_attention_every)]
    return args


def _megatron_attention_backend(workload: Workload, model: ModelSpec) -> list[str]:
    """The attention kernel the plan priced (Workload.attention_kernel) as Megatron-Core 0.19.2
    selects it (--attention-backend, megatron/core/transformer/enums.py AttnBackend; language_
    module.py sets Transformer Engine's NVTE_FLASH_ATTN / NVTE_FUSED_ATTN / NVTE_UNFUSED_ATTN from
    it): fused is the default `auto` (no flag), pinned with `--attention-backend fused` for
    attention sinks; fa2 is TE's FlashAttention backend pinned to FlashAttention-2
    (--flash-attention-version 2, TransformerConfig.flash_attention_version); unfused is TE's
    UnfusedDotProductAttention. flash1 is refused: no Megatron-Core backend runs flash-attn 1.x
    (the version pin takes 2, 3 or 4)."""
    kernel = workload.attention_kernel
    if kernel == "fused" and model.attention_sinks:
        # A learnable softmax runs fused only from cuDNN 9.13.1 on; under `auto` an older one
        # falls back to UnfusedDotProductAttention (TE get_attention_backend, "Filter: Softmax
        # type"), whose b h s s scores the plan's memory does not hold (docs/cost_model.md
        # "Attention sinks"). `fused` sets NVTE_UNFUSED_ATTN=0: such a build stops at the first
        # step with TE's "no dot product attention backend" instead of running out of memory.
        return ["--attention-backend", "fused"]
    if kernel == "flash1":
        raise _refuse(
            "megatron",
            "attention_kernel flash1 (flash-attn 1.x): Megatron-Core 0.19.2 has no backend for "
            "it (--flash-attention-version takes 2, 3 or 4)",
        )
    if kernel == "fa2":
        return ["--attention-backend", "flash", "--flash-attention-version", "2"]
    if kernel == "unfused":
        return ["--attention-backend", "unfused"]
    return []


def _megatron_deepspeed_attention(workload: Workload) -> list[str]:
    """The attention kernel the plan priced as Megatron-DeepSpeed selects it (deepspeedai/
    Megatron-DeepSpeed 4efb479d megatron/arguments.py, megatron/model/transformer.py
    ParallelAttention): without a flag its CoreAttention (unfused: baddbmm, fused softmax,
    dropout, bmm); --use-flash-attn-v2 flash-attn 2's flash_attn_varlen_func; --use-flash-attn-v1
    flash-attn 1.x's flash_attn_unpadded_func. It has no Transformer Engine or cuDNN attention,
    so the fused class is refused."""
    kernel = workload.attention_kernel
    if kernel == "fused":
        raise _refuse(
            "deepspeed",
            "attention_kernel fused (Transformer Engine / cuDNN fused attention): Megatron-"
            "DeepSpeed has no such backend (its kernels: unfused CoreAttention, "
            "--use-flash-attn-v1, --use-flash-attn-v2, --use-flash-attn-triton)"
            + _SEARCH_FOR.format("deepspeed"),
        )
    return {"fa2": ["--use-flash-attn-v2"], "flash1": ["--use-flash-attn-v1"]}.get(kernel, [])


def _megatron_mlp(model: ModelSpec) -> list[str]:
    """Activation (megatron/training/arguments.py: --swiglu, --quick-geglu, --squared-relu,
    --openai-gelu; GeLU is the default) and gpt-oss's clamp and linear offset
    (TransformerConfig.activation_func_clamp_value / glu_linear_offset, flags generated from
    the config: megatron/core/transformer/mlp.py and moe/experts.py clamp the gate half to
    <= c and the linear half to [-c, c], then act(gate) * (up + offset))."""
    act = model.mlp_activation
    if model.gated_mlp:
        if act == "silu":
            args = ["--swiglu"]
        elif act == "quick_gelu":
            # argument_utils.core_transformer_config_from_args: gated_linear_unit, quick_gelu
            args = ["--quick-geglu"]
        else:
            raise _refuse("megatron", f"gated {act} MLP (e.g. Gemma's GeGLU) has no Megatron-LM flag")
        if (model.glu_linear_offset or model.activation_clamp is not None) and act != "quick_gelu":
            # TransformerConfig.__post_init__ (bias_activation_fusion, on by default): "When
            # bias_activation_fusion is True and glu_linear_offset is non-zero, activation
            # function must be quick_gelu"; activation_func_clamp_value: "Only used when
            # activation_func is quick_gelu".
            raise _refuse(
                "megatron",
                f"glu_linear_offset / activation_clamp with a gated {act} MLP: Megatron-LM "
                "applies them with quick_geglu only",
            )
        if model.activation_clamp is not None:
            args += ["--activation-func-clamp-value", _num(model.activation_clamp)]
        if model.glu_linear_offset:
            args += ["--glu-linear-offset", _num(model.glu_linear_offset)]
        return args
    flags = {"gelu": [], "gelu_tanh": ["--openai-gelu"], "squared_relu": ["--squared-relu"]}
    if act not in flags:
        raise _refuse("megatron", f"non-gated {act} MLP has no Megatron-LM flag")
    return flags[act]


def _megatron_positions(model: ModelSpec, workload: Workload) -> list[str]:
    """Position embedding, rotary base / share / scaling; the sequence and position lengths."""
    kind = model.position_embedding_kind
    positions = max(model.max_position_embeddings or workload.seq_len, workload.seq_len)
    args = ["--seq-length", str(workload.seq_len), "--max-position-embeddings", str(positions)]
    if kind == "alibi":
        raise _refuse("megatron", "ALiBi position biases (BLOOM, MPT) have no Megatron-LM option")
    if kind == "learned":
        return args + ["--position-embedding-type", "learned_absolute"]
    scaling = _megatron_rope_scaling(model)
    if scaling[:1] != ["--position-embedding-type"]:  # YaRN (non-MLA) names its own type
        args += ["--position-embedding-type", "rope"]
    args += ["--rotary-base", _num(model.rotary_base)]
    if model.rotary_percent != 1.0:
        args += ["--rotary-percent", _num(model.rotary_percent)]
    return args + scaling


# MLATransformerConfig's YaRN fields that have no flag (megatron/core/transformer/
# transformer_config.py: original_max_position_embeddings 4096, beta_fast 32, beta_slow 1).
MLA_YARN_DEFAULTS = {"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                     "truncate": True}
# RotaryEmbedding._apply_scaling's fixed Llama 3.1 constants (only the factor has a flag).
LLAMA3_SCALING = {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}


def _megatron_rope_scaling(model: ModelSpec) -> list[str]:
    rs = model.rope_scaling
    if model.mla is not None:  # MLA takes --rope-type (yarn is its default)
        if rs is None:
            return ["--rope-type", "rope"]
        _refuse_unless(rs, "yarn", MLA_YARN_DEFAULTS, "multi-latent attention")
        args = ["--rope-type", "yarn", "--rotary-scaling-factor", _num(rs.factor)]
        args += ["--mscale", _num(rs.mscale if rs.mscale is not None else 1.0)]
        return args + ["--mscale-all-dim", _num(rs.mscale_all_dim or 0.0)]
    if rs is None:
        return []
    if rs.type == "llama3":
        _refuse_unless(rs, "llama3", LLAMA3_SCALING, "--use-rope-scaling")
        return ["--use-rope-scaling", "--rope-scaling-factor", _num(rs.factor)]
    if rs.type != "yarn":
        raise _refuse("megatron", f"rope_scaling type {rs.type} has no Megatron-LM option")
    args = ["--position-embedding-type", "yarn", "--rotary-scaling-factor", _num(rs.factor)]
    for name, flag in (("original_max_position_embeddings", "--yarn-original-max-position-embeddings"),
                       ("beta_fast", "--yarn-beta-fast"), ("beta_slow", "--yarn-beta-slow"),
                       ("mscale", "--mscale"), ("mscale_all_dim", "--mscale-all-dim")):
        value = getattr(rs, name)
        if value is not None:
            args += [flag, _num(value)]
    if rs.truncate is False:
        # argument_utils._apply_yarn_config_from_args: yarn_correction_range_round_to_int
        # defaults to True (YarnRotaryEmbedding's); HF's truncate false (gpt-oss) is this.
        args.append("--no-yarn-correction-range-round-to-int")
    return args


def _refuse_unless(rs: Any, kind: str, fixed: dict[str, float], where: str) -> None:
    """Megatron fixes some scaling constants; a model with others cannot be expressed."""
    if rs.type != kind:
        raise _refuse("megatron", f"rope_scaling type {rs.type} with {where}: only {kind}")
    for name, value in fixed.items():
        got = getattr(rs, name)
        if got is not None and got != value:
            raise _refuse(
                "megatron", f"rope_scaling.{name} {_shown(got)}: {where} fixes it at {_shown(value)}"
            )


def _shown(value: float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}"


def _megatron_moe(model: ModelSpec, workload: Workload) -> list[str]:
    """MoE block, router and the token dispatcher the plan priced."""
    moe = model.moe
    assert moe is not None
    args = ["--num-experts", str(moe.num_experts), "--moe-router-topk", str(moe.top_k)]
    args += ["--moe-ffn-hidden-size", str(moe.expert_ffn_hidden_size)]
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.expert_ffn_hidden_size
        args += ["--moe-shared-expert-intermediate-size", str(shared)]
        if moe.shared_expert_gate:
            args.append("--moe-shared-expert-gate")
    if moe.first_k_dense_layers:
        k, n = moe.first_k_dense_layers, model.num_layers
        args += ["--moe-layer-freq", f"[0]*{k}+[1]*{n - k}"]
    args += ["--moe-router-score-function", moe.router_score_function]
    if moe.router_pre_softmax:
        args.append("--moe-router-pre-softmax")
    if moe.router_topk_scaling_factor is not None:
        args += ["--moe-router-topk-scaling-factor", _num(moe.router_topk_scaling_factor)]
    if moe.router_expert_bias:
        args.append("--moe-router-enable-expert-bias")
    if moe.router_num_groups is not None:
        args += ["--moe-router-num-groups", str(moe.router_num_groups)]
        args += ["--moe-router-group-topk", str(moe.router_group_topk)]
    # The cost model prices the experts' GEMMs grouped (one kernel per layer) and the token
    # exchange as all-to-all (or DeepEP); Megatron's defaults are per-expert GEMMs and allgather.
    args.append("--moe-grouped-gemm")
    if workload.moe_dispatcher == "deepep":
        backend = workload.moe_flex_backend
        args += ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", backend]
    else:
        args += ["--moe-token-dispatcher-type", "alltoall"]
    return args


def _megatron_cuda_graphs(model: ModelSpec, workload: Workload) -> list[str]:
    """The CUDA-graph flags of the priced graphs: one graph of the whole iteration, or per-layer
    Transformer Engine graphs."""
    if workload.full_iteration_cuda_graph:
        if model.moe is not None:
            # Capture needs static dispatch shapes: Megatron-Bridge's set_full_iter_cg_configs
            # (scripts/performance/configs/qwen/qwen3_llm_pretrain.py @8f341b04f) pairs it with
            # the HybridEP flex backend, --moe-expert-rank-capacity-factor and --moe-paged-stash,
            # which the priced dispatcher settings do not name.
            raise _refuse(
                "megatron",
                "--cuda-graph-impl full_iteration with a dropless MoE needs HybridEP with a "
                "per-rank capacity (--moe-expert-rank-capacity-factor, --moe-paged-stash): not "
                "exported",
            )
        # megatron/training/arguments.py: full_iteration asserts no NaN check of loss and grads
        return ["--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad"]
    if workload.cuda_graphs:
        # Per-layer TE graphs as the cost model prices them (compute.layer_overhead_s); the
        # dropless MoE scope of Megatron-Bridge's CUDA-graphs guide.
        graphed = ["attn", "moe_router", "moe_preprocess"] if model.moe else ["attn", "mlp"]
        return ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", *graphed]
    return []


def megatron_args(model: ModelSpec, workload: Workload, e: Estimate) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for the model and the parallel part of the plan
    (megatron-core 0.19.2: its parser, validate_args and initialize_model_parallel accept them;
    tests/frameworks)."""
    lo = e.layout
    if lo.order not in MEGATRON_ORDERS:
        raise _refuse(
            "megatron",
            f"rank order {_order_text(e)} is not one Megatron-Core builds "
            "(tp-cp-dp-pp, or tp-cp-pp-dp with --use-tp-pp-dp-mapping)",
        )
    if lo.dp_shard is not None:
        raise _refuse("megatron", f"dp_shard ({lo.dp_shard}): hybrid sharding is torchtitan's")
    mapping = MEGATRON_ORDERS[lo.order]
    if lo.pp == 1 or lo.dp == 1:
        mapping = []  # the two orders build the same groups
    if mapping and model.moe is not None:
        # parallel_state.initialize_model_parallel: with an order not ending in pp the expert
        # data-parallel size must equal the dense one (etp*ep == tp*cp), which Megatron asserts.
        raise _refuse(
            "megatron",
            "--use-tp-pp-dp-mapping with a MoE model: Megatron-Core requires the attention and "
            "MoE data-parallel sizes to match (parallel_state.initialize_model_parallel)",
        )
    args = megatron_model_args(model, workload)
    args += [
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
    args += mapping
    if lo.cp > 1 and workload.cp_attention == "a2a":
        # TransformerConfig.cp_comm_type (default p2p, the ring): Transformer Engine's
        # all-to-all CP, the one the plan priced (cost_models/cp.py a2a_s)
        args += ["--cp-comm-type", "a2a"]
    if lo.pp_schedule != "1f1b":
        # Megatron-LM has no DualPipe schedule (no such flag in its parser); DeepSeek's is a
        # separate library (github deepseek-ai/DualPipe).
        raise _refuse("megatron", f"pipeline schedule {lo.pp_schedule} has no Megatron-LM flag")
    if model.moe is not None:
        args += ["--expert-model-parallel-size", str(lo.ep)]
        args += ["--expert-tensor-parallel-size", str(lo.etp)]
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
    args += _megatron_tp_overlap(workload, lo)
    args += _megatron_moe_routing(model, workload)
    args += _megatron_cuda_graphs(model, workload)
    if lo.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
        if lo.recompute_modules is not None:  # None: Megatron's default, core_attn
            args += ["--recompute-modules", *lo.recompute_modules]
            delayed = quant_recipe(workload) == "delayed"
            if delayed and {"moe_act", "layernorm"} & set(lo.recompute_modules):
                # TransformerConfig.__post_init__ raises on this pair.
                raise _refuse(
                    "megatron",
                    "fp8 delayed scaling with moe_act or layernorm recompute (Megatron-Core: "
                    "'Delayed scaling does not support moe_act and layernorm recompute')",
                )
    elif lo.recompute == "full":
        # Full recompute as the memory model prices it (stage.recomputed_layers): uniform groups
        # of recompute_num_layers (default 1), or block: the first N layers of each chunk.
        args += ["--recompute-granularity", "full"]
        args += ["--recompute-method", lo.recompute_method or "uniform"]
        args += ["--recompute-num-layers", str(lo.recompute_num_layers or 1)]
    args += _megatron_memory_options(workload, lo)
    if lo.cpu_offload_layers:
        # megatron/training/arguments.py: cpu_offloading_num_layers > 0 turns on
        # cpu_offloading (activations on, weights off: ModelParallelConfig defaults).
        args += ["--cpu-offloading-num-layers", str(lo.cpu_offload_layers)]
    strategy = megatron_fsdp_strategy(e, workload.dp_accumulation)
    if strategy is not None:
        # Megatron-FSDP; validate_args requires the fsdp_dtensor checkpoint format with it.
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy]
        args += ["--ckpt-format", "fsdp_dtensor"]
        args += _megatron_fsdp_prefetch(workload, lo)
    elif lo.zero_stage >= 1:
        # The distributed optimizer shards optimizer state and reduce-scatters gradients.
        args.append("--use-distributed-optimizer")
    args += _megatron_dp_overlap(lo, workload, model.moe is not None)
    args += _megatron_loss(workload) + _nan_check(workload)
    args += _megatron_precision(workload)
    return args


def _megatron_fsdp_prefetch(workload: Workload, lo: Layout) -> list[str]:
    """The ZeRO-3 prefetch and the ZeRO-2 / 3 gradient queue the plan priced
    (memory.zero3_gathered_elements, grad_queue_bytes): Megatron-FSDP's default needs no flag;
    another size is --suggested-communication-unit-size, twice it (megatron_fsdp.py:
    suggested_AG_prefetch_size = the unit size // 2; the reduce-scatter queue takes the same
    capacity). Megatron-FSDP always prefetches and queues, so a plan priced with one unit
    ahead only and no queue (FSDP's) cannot be launched as priced."""
    prefetch = workload.zero3_prefetch_elements
    if lo.zero_stage not in (2, 3):
        return []
    if prefetch is None:
        raise _refuse(
            "megatron",
            "zero3_prefetch_elements null (one unit gathered ahead): Megatron-FSDP gathers "
            "whole units until its suggested_AG_prefetch_size; state the elements instead",
        )
    if not states_unit_size(workload):  # the size Megatron-FSDP derives when it is unset
        return []
    return ["--suggested-communication-unit-size", str(2 * prefetch)]


def _megatron_tp_overlap(workload: Workload, lo: Layout) -> list[str]:
    """--tp-comm-overlap for a plan priced with Transformer Engine's per-GEMM userbuffers
    defaults (Workload.tp_overlap te_default: Megatron-LM without --tp-comm-overlap-cfg); any
    other configuration needs a YAML of per-GEMM settings this export does not write."""
    if not (lo.tp_comm_overlap and lo.tp > 1):
        return []
    if workload.tp_overlap == "te1_default":
        raise _refuse(
            "megatron",
            "tp_overlap te1_default describes Transformer Engine 1.x; the export targets "
            "megatron-core 0.19.2, whose Transformer Engine 2.x defaults are te_default",
        )
    if workload.tp_overlap != "te_default":
        raise _refuse(
            "megatron",
            f"tp_overlap {workload.tp_overlap}: Megatron-LM --tp-comm-overlap runs Transformer "
            "Engine's per-GEMM defaults (te_default) unless given --tp-comm-overlap-cfg FILE, "
            "which this export does not write",
        )
    return ["--tp-comm-overlap"]


def _megatron_loss(workload: Workload) -> list[str]:
    """The loss as priced (cost_models.framework megatron 'cross_entropy'): Megatron-LM runs the
    unfused vocab-parallel cross-entropy, one kernel per pass over the fp32 logits, unless
    --cross-entropy-loss-fusion (store_true, default off in megatron/training/arguments.py;
    ModelParallelConfig.cross_entropy_loss_fusion False) selects the jit-fused passes of
    megatron/core/fusions/fused_cross_entropy.py ('native', the default impl)."""
    return ["--cross-entropy-loss-fusion"] if workload.cross_entropy == "fused" else []


def _nan_check(workload: Workload) -> list[str]:
    """Megatron-LM checks every gradient bucket for NaN / Inf before its collective unless told
    not to (--no-check-for-nan-in-loss-and-grad, store_false); a workload priced without the
    check (Workload.grad_nan_check, stage.grad_bucket_pass_bytes) turns it off. The
    full-iteration CUDA graph writes the flag itself (_megatron_cuda_graphs)."""
    if workload.grad_nan_check or workload.full_iteration_cuda_graph:
        return []
    return ["--no-check-for-nan-in-loss-and-grad"]


def _megatron_dp_overlap(lo: Layout, workload: Workload, has_experts: bool) -> list[str]:
    """The data-parallel overlap the cost model prices for Megatron (cost_models/stage.py
    stage_dp_parts, grad_sync_exposed_s: gradient buckets reduced during the last backward,
    parameters gathered during the forward). Megatron-LM leaves both off unless asked:
    --overlap-grad-reduce and --overlap-param-gather are store_true flags (megatron/training/
    arguments.py; DistributedDataParallelConfig overlap_grad_reduce / overlap_param_gather
    False), and without them finalize_model_grads reduces every bucket after the backward and
    the distributed optimizer gathers after its step, both on the critical path. The gather
    overlap needs the distributed optimizer or Megatron-FSDP and the reduce overlap
    (validate_args: 'Must use --overlap-param-gather with --overlap-grad-reduce'). A bucket size
    the workload states (Workload.dp_bucket_elements, which sets the priced collectives and the
    edge buckets, stage.dp_buckets / dp_edge_buckets_s) goes as --ddp-bucket-size (training.py
    resolve_ddp_bucket_size takes it over max(40M, 1M x dp_cp)). No data-parallel group (dp =
    cp = 1, and for a MoE model an expert data-parallel group of one too): nothing to reduce, no
    flag. The expert group is world / (PP x EP x ETP) = TP x CP x DP / (EP x ETP) ranks
    (megatron-core parallel_state's expert grid), more than one where EP x ETP < TP even at
    dp = cp = 1: the expert gradients are reduced over it, overlapped and averaged as priced
    (stage.stage_dp_parts, stage.grad_bucket_pass_bytes)."""
    expert_dp = lo.tp * lo.cp * lo.dp // (lo.ep * lo.etp) if has_experts else 1
    if lo.dp * lo.cp <= 1 and expert_dp <= 1:
        return []
    flags = ["--overlap-grad-reduce"]
    if lo.zero_stage >= 1:
        flags.append("--overlap-param-gather")
    if workload.dp_bucket_elements is not None:
        flags += ["--ddp-bucket-size", str(workload.dp_bucket_elements)]
    if workload.grad_average_in_collective:
        # NCCL averages: no bucket scaled in place before its collective, as priced
        # (stage.grad_bucket_pass_bytes); Megatron-LM's default pre-scales every bucket.
        flags.append("--ddp-average-in-collective")
    return flags


def megatron_fsdp_strategy(e: Estimate, dp_accumulation: str = "last_micro_batch") -> str | None:
    """The Megatron-FSDP data_parallel_sharding_strategy that runs the plan as priced, or None
    (DDP / the distributed optimizer). ZeRO-3: optim_grads_params (gathers per forward and
    backward, reduce-scatter per backward: accumulation.dp_rounds (m, 2m)). ZeRO-2:
    optim_grads reduce-scatters in every backward (megatron-core 0.19.2 megatron_fsdp.py
    grad_reduce_every_bprop) and gathers once; the Megatron profile ('last_micro_batch')
    prices ZeRO-2 with one reduction after the last micro-batch, which with m > 1 is the
    distributed optimizer's schedule and memory (full gradient buffer, sharded optimizer), so
    that is what runs it; with one micro-batch, or when the workload states Megatron-FSDP's
    'zero2_every_micro_batch', optim_grads."""
    zero, m = e.layout.zero_stage, e.num_microbatches
    if zero == 3:
        return "optim_grads_params"
    if zero == 2 and (m == 1 or dp_accumulation == "zero2_every_micro_batch"):
        return "optim_grads"
    return None


def megatron_env(e: Estimate, dp_accumulation: str = "last_micro_batch") -> dict[str, str]:
    """Environment the Megatron launch needs: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1
    with TP or CP before Blackwell, and Megatron-FSDP asserts it is not 1
    (megatron/training/arguments.py)."""
    lo = e.layout
    fsdp = megatron_fsdp_strategy(e, dp_accumulation) is not None
    if (lo.tp > 1 or lo.cp > 1) and not fsdp:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


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
    # The parser has no --virtual-pipeline-model-parallel-size: the depth is given as virtual
    # stages per pipeline rank (megatron/training/arguments.py validate_args sets
    # virtual_pipeline_model_parallel_size from it).
    vp_flag = ["--num-virtual-stages-per-pipeline-rank", str(lo.vp)] if lo.vp > 1 else []
    slots = split_slots(lo)
    if slots != (0, 0):
        # TransformerConfig (megatron-core 0.19.2) splits num_layers + the counted slots evenly
        # over pp * vp chunks, the first (last) chunk one decoder layer short: the split
        # pipeline.accounted_chunk_counts prices. The flags exclude a layout string and
        # --decoder-first/last-pipeline-num-layers (__post_init__ raises on either).
        embedding, loss = slots
        accounted = ["--account-for-embedding-in-pipeline-split"] * embedding
        return vp_flag + accounted + ["--account-for-loss-in-pipeline-split"] * loss
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
    order (chunk c on pipeline rank c % pp), `E` embedding, `t` one decoder layer, `m` one
    multi-token-prediction layer, `L` loss. The split is the cost model's own (cost_models.
    pipeline.layout_chunk_counts); the MTP layers sit in the last chunk before the loss, where
    the cost model prices them (pipeline.with_mtp) and where megatron-core 0.19's
    PipelineParallelLayerLayout.validate_layer_layout wants them (after every decoder layer, all
    in one virtual stage, `mtp_num_layers` of them)."""
    lo = e.layout
    chunks = chunk_counts(model, e)
    if min(chunks) == 0:
        raise _refuse(
            "megatron", f"a virtual stage would hold no layer ({lo.pp}*{lo.vp} > num_layers)"
        )
    parts = ["t" * n for n in chunks]
    parts[0], parts[-1] = "E" + parts[0], parts[-1] + "m" * model.mtp_num_layers + "L"
    return "|".join(parts)


def _megatron_precision(workload: Workload) -> list[str]:
    bf16_layers = []
    if workload.bf16_layers_start or workload.bf16_layers_end:
        # megatron/training/arguments.py: --first-last-layers-bf16 with both counts (each
        # defaults to 1 when the switch is on, so both are written).
        bf16_layers = [
            "--first-last-layers-bf16",
            "--num-layers-at-start-in-bf16",
            str(workload.bf16_layers_start),
            "--num-layers-at-end-in-bf16",
            str(workload.bf16_layers_end),
        ]
    return _megatron_dtype(workload) + bf16_layers


def _megatron_dtype(workload: Workload) -> list[str]:
    if workload.precision == "bf16":
        return ["--bf16"]
    if workload.precision == "fp16":
        return ["--fp16"]
    if workload.precision == "fp8":
        # Transformer Engine fp8 GEMMs with bf16 master weights and non-GEMM math; scales from
        # the current tensor (tensorwise), the amax history (delayed, Megatron's default) or
        # 1x128 / 128x128 tiles (blockwise: e4m3 only, TransformerConfig.__post_init__).
        recipe = quant_recipe(workload)
        fmt = "e4m3" if recipe == "blockwise" else "hybrid"
        return ["--bf16", "--fp8-format", fmt, "--fp8-recipe", str(recipe)]
    if workload.precision == "mxfp8":
        # Blackwell MX block scaling: e4m3 with the mxfp8 recipe (Transformer Engine).
        return ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"]
    if workload.precision == "nvfp4":
        # NVFP4 block scaling (TransformerConfig.fp4 'e2m1', fp4_recipe 'nvfp4'; TE >= 2.7).
        return ["--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]
    raise _refuse("megatron", f"precision {workload.precision} has no Megatron-LM flag here")


# ---------------------------------------------------------------------------------- torchtitan


TORCHTITAN_MODULES = {
    # planner preset name -> (--module, --config) of torchtitan 0.3.0's config registry
    # (torchtitan/models/<module>/config_registry.py). The model is the recipe's own
    # (Trainer.Config.model_spec is suppressed from the command line), so only a preset the
    # recipe builds exactly is listed: torchtitan's llama3 flavors are Llama 3.1 (rope scaling
    # "llama", factor 8), so Llama 3 8B / 70B (no scaling) have no recipe.
    # tests/frameworks/test_model_handoff.py builds each recipe's model and compares it.
    "Llama 3.1 8B": ("llama3", "llama3_8b"),
    "Llama 3.1 70B": ("llama3", "llama3_70b"),
    "Qwen3-30B-A3B": ("qwen3", "qwen3_30b_a3b"),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b"),
}


# Recipes that build a near relative of a preset, and the difference (read from the recipes'
# model configs; tests/frameworks/test_model_handoff.py): refused with this reason.
TORCHTITAN_NEAR = {
    "Llama 3 8B": "llama3_8b is Llama 3.1 8B: it applies rope scaling 'llama' (factor 8), "
    "Llama 3 8B has none",
    "Llama 3 70B": "llama3_70b is Llama 3.1 70B: it applies rope scaling 'llama' (factor 8), "
    "Llama 3 70B has none",
    "Llama 3.1 405B": "llama3_405b trains with Float8LinearConverter (float8 linears), not the "
    "bf16 the export writes",
    "DeepSeek-V3": "deepseek_v3_671b uses RMSNorm eps 1e-5; DeepSeek-V3's config.json has 1e-6",
}


def torchtitan_recipe(model: ModelSpec) -> tuple[str, str]:
    """(--module, --config) of the recipe that builds `model`, or a refusal naming what is
    missing: torchtitan takes the model from the recipe, not from command-line fields."""
    if model.name in TORCHTITAN_NEAR:
        raise _refuse(
            "torchtitan", f"no torchtitan 0.3.0 recipe builds {model.name!r}: "
            f"{TORCHTITAN_NEAR[model.name]} (the model is the recipe's, not a command-line field)"
        )
    if model.mtp_num_layers and model.name in TORCHTITAN_MODULES:
        raise _refuse(
            "torchtitan",
            f"the {TORCHTITAN_MODULES[model.name][1]} recipe trains no multi-token prediction "
            f"(mtp_num_layers {model.mtp_num_layers}); the model is the recipe's, not a "
            "command-line field",
        )
    if model.name not in TORCHTITAN_MODULES:
        known = ", ".join(sorted(TORCHTITAN_MODULES))
        raise _refuse(
            "torchtitan",
            f"no torchtitan 0.3.0 recipe builds {model.name!r}: the model comes from a "
            "config_registry function (--module/--config; model_spec is not a command-line "
            f"field), so a recipe with this model's dimensions is needed (recipes: {known})",
        )
    return TORCHTITAN_MODULES[model.name]
AC_SUBCOMMAND = {
    # Trainer.Config.activation_checkpoint is a union of config classes: tyro selects one by
    # subcommand (torchtitan/distributed/activation_checkpoint.py).
    "none": "activation_checkpoint:none",
    "selective": "activation_checkpoint:selective",
    "full": "activation_checkpoint:full",
}


def torchtitan_parallelism(model: ModelSpec, workload: Workload, e: Estimate) -> dict[str, Any]:
    """The `parallelism` section (fields both torchtitan 0.3.0 and main have)."""
    lo = e.layout
    # A ZeRO-1 plan (from a search for another framework) runs as FSDP2 without resharding after
    # forward: ZeRO-1's traffic, at least its memory saving (gradients are sharded too).
    checked = lo.model_copy(update={"zero_stage": 2}) if lo.zero_stage == 1 else lo
    problems = framework.profile_violations(
        framework.TORCHTITAN, model, checked, chunk_counts(model, e) if lo.pp > 1 else None
    )
    if problems:
        raise _refuse("torchtitan", problems[0] + _SEARCH_FOR.format("torchtitan"))
    if workload.precision != "bf16":
        # float8 is a model converter of the recipe (Float8LinearConverter in the --config
        # function, e.g. llama3_debugmodel_float8), not a command-line field.
        raise _refuse(
            "torchtitan",
            f"precision {workload.precision}: float8 is set by the recipe's model converters "
            "(a --config with Float8LinearConverter), not by an override; only bf16 is exported",
        )
    if lo.pp_schedule != "1f1b" or lo.ep_overlap or workload.moe_dispatcher != "alltoall":
        raise _refuse(
            "torchtitan",
            "DualPipe, MoE all-to-all overlap and DeepEP dispatch have no torchtitan field here",
        )
    _non_megatron_memory_refusal("torchtitan", workload, lo)
    if workload.dp_bucket_elements is not None and lo.dp * lo.cp > 1:
        # the priced buckets would not be the job's: FSDP2 reduces per wrapped block
        raise _refuse(
            "torchtitan",
            f"dp_bucket_elements {workload.dp_bucket_elements}: torchtitan has no gradient "
            "bucket field (FSDP2 reduce-scatters one transformer block at a time)",
        )
    if lo.tp_comm_overlap and lo.tp > 1 and workload.tp_overlap != "collective_matmul":
        raise _refuse(
            "torchtitan",
            f"tp_overlap {workload.tp_overlap}: torchtitan's async TP is PyTorch's micro-pipelined "
            "collective matmul (collective_matmul), not Transformer Engine userbuffers",
        )
    if lo.vp > 1 and e.num_microbatches % lo.pp:
        raise _refuse(
            "torchtitan",
            f"Interleaved1F1B needs num_pp_microbatches ({e.num_microbatches}) divisible by "
            f"pp ({lo.pp})",
        )
    divisor = lo.tp * 2 * lo.cp  # ParallelDims.seq_len_divisor
    if workload.seq_len % divisor:
        raise _refuse(
            "torchtitan", f"seq_len ({workload.seq_len}) must be divisible by tp*2*cp ({divisor})"
        )
    replicate, shard = framework.torchtitan_dp_degrees(lo)
    # ZeRO-0 is DDP (replicate); ZeRO-2 is FSDP2 without resharding after forward; ZeRO-3
    # reshards after forward (torchtitan/distributed/fsdp.py).
    reshard = {0: "default", 1: "never", 2: "never", 3: "always"}[lo.zero_stage]
    par: dict[str, Any] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": reshard,
        "tensor_parallel_degree": lo.tp,
        "enable_sequence_parallel": bool(lo.sequence_parallel and lo.tp > 1),
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
        # first_less / last_less of 1 is Megatron's account_for_embedding / loss split (the
        # embedding or the output counted as one layer: _generate_llm_fqn_per_model_part's
        # input_weight / output_weight), a stage holding only them included (weight == layers
        # per stage is allowed there).
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if lo.vp > 1 else "1F1B"
        par["pipeline_parallel_layers_per_stage"] = per_stage
        par["pipeline_parallel_first_stage_less_layers"] = per_stage - chunks[0]
        par["pipeline_parallel_last_stage_less_layers"] = per_stage - chunks[-1]
    return par


def torchtitan_no_cuda_graphs(workload: Workload, lo: Layout) -> bool:
    """training.disable_cuda_graphs as priced. torchtitan 0.3.0 wraps forward + backward in one
    CUDA graph unless told not to (trainer.py `wrap_with_cuda_graph(self.fwd_bwd_fn)` when
    `not training.disable_cuda_graphs`, default False), while the torchtitan profile prices
    every kernel launched eagerly (cost_models/host.py) unless the workload asks for the graph
    (Workload.full_iteration_cuda_graph): the export turns the graph off unless it is priced.
    It cannot run with pp > 1 ("CUDA graphs do not support pipeline parallelism yet",
    _validate_cuda_graphs) nor with the all-to-all EP dispatcher (it synchronizes with the
    CPU): such a priced graph is refused (the search keeps it to pp 1, ep 1)."""
    if not workload.full_iteration_cuda_graph:
        return True
    if lo.pp > 1 or lo.ep > 1:
        raise _refuse(
            "torchtitan",
            f"full_iteration_cuda_graph with pp {lo.pp} / ep {lo.ep}: torchtitan captures the "
            "step in a CUDA graph only with pp 1 and no CPU-synchronising EP dispatcher "
            "(trainer.py _validate_cuda_graphs)" + _SEARCH_FOR.format("torchtitan"),
        )
    return False


def torchtitan_config(model: ModelSpec, workload: Workload, e: Estimate) -> dict[str, Any]:
    """`{section: {field: value}}` for torchtitan main's job config (the fields file)."""
    lo = e.layout
    parallelism = torchtitan_parallelism(model, workload, e)
    if lo.pp > 1:
        parallelism["num_pp_microbatches"] = e.num_microbatches
    training: dict[str, Any] = {
        "num_tokens_per_microbatch_per_dp_rank": lo.micro_batch * workload.seq_len,
        "num_tokens_per_train_step": workload.global_batch_seqs * workload.seq_len,
        "max_context_length": workload.seq_len,
        "mixed_precision_param": "bfloat16",
        "disable_cuda_graphs": torchtitan_no_cuda_graphs(workload, lo),
    }
    config = {"training": training, "parallelism": parallelism, "compile": _compile(lo)}
    return config | _torchtitan_debug(model, workload)


def _torchtitan_debug(model: ModelSpec, workload: Workload) -> dict[str, Any]:
    """The debug section: routing forced even where the plan was priced so (Workload.
    moe_force_balance; torchtitan 0.3.0 and main DebugConfig.moe_force_load_balance, which
    torchtitan/models/common/decoder.py hands to every MoE router as _debug_force_load_balance:
    round-robin, the same count for every expert)."""
    if workload.moe_force_balance and model.moe is not None:
        return {"debug": {"moe_force_load_balance": True}}
    return {}


def _compile(lo: Any) -> dict[str, Any]:
    # The profile's physics (fused elementwise, compiled loss) are torch.compile's: turn it on.
    return {"enable": True, "enable_async_tensor_parallel": bool(lo.tp_comm_overlap)}


def torchtitan_release_args(
    model: ModelSpec, workload: Workload, e: Estimate, recipe: tuple[str, str] | None = None
) -> list[str]:
    """torchtitan 0.3.0 command line: --module/--config, then tyro overrides (booleans as flags
    --x / --no_x, the batch as local_batch_size / global_batch_size / seq_len, activation
    checkpointing as a subcommand last)."""
    lo = e.layout
    # recipe: a (--module, --config) the caller vouches for (tests run synthetic models' parallel
    # settings on a debug recipe); otherwise the one that builds this model, or a refusal. The
    # model is checked first: a model no recipe builds is refused whatever its layout.
    module, config = recipe or torchtitan_recipe(model)
    par = torchtitan_parallelism(model, workload, e)
    args = ["--module", module, "--config", config]
    # PP: one step runs local_batch_size / pipeline_parallel_microbatch_size micro-batches;
    # without PP, local_batch_size is the micro-batch and global / (local * dp) the accumulation.
    local = lo.micro_batch * e.num_microbatches if lo.pp > 1 else lo.micro_batch
    training = {
        "local_batch_size": local,
        "global_batch_size": workload.global_batch_seqs,
        "seq_len": workload.seq_len,
        "mixed_precision_param": "bfloat16",
        "disable_cuda_graphs": torchtitan_no_cuda_graphs(workload, lo),
    }
    if lo.pp > 1:
        par["pipeline_parallel_microbatch_size"] = lo.micro_batch
    args += _tyro("training", training) + _tyro("parallelism", par)
    args += _tyro("compile", _compile(lo))
    for section, fields in _torchtitan_debug(model, workload).items():
        args += _tyro(section, fields)
    args.append(AC_SUBCOMMAND[lo.recompute])
    return args


def _tyro(section: str, fields: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, value in fields.items():
        if isinstance(value, bool):
            out.append(f"--{section}.{name}" if value else f"--{section}.no_{name}")
        else:
            out += [f"--{section}.{name}", str(value)]
    return out


def torchtitan_overrides(config: dict[str, Any]) -> list[str]:
    """The config as torchtitan main command-line overrides (tyro: booleans are flags)."""
    out: list[str] = []
    for section, fields in config.items():
        out += _tyro(section, fields)
    return out


def torchtitan_toml(config: dict[str, Any], recompute: str) -> str:
    """The config as TOML (torchtitan main's fields; 0.3.0 reads no TOML job file)."""
    ac = AC_SUBCOMMAND[recompute]
    lines = [f"# {TORCHTITAN_MAIN}; activation checkpointing: {ac} (a command-line subcommand)"]
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


def torchtitan(
    model: ModelSpec, workload: Workload, e: Estimate, recipe: tuple[str, str] | None = None
) -> dict[str, Any]:
    """torchtitan hand-off: the 0.3.0 release command line, and main's config / overrides /
    TOML (main-only batch fields)."""
    # The model first: a model no recipe builds is refused whatever its layout.
    recipe = recipe or torchtitan_recipe(model)
    if workload.attention_kernel in ("flash1", "unfused"):
        # torchtitan 0.3.0's attention is torch SDPA, FlexAttention or varlen flash
        # (torchtitan/models/common/attention.py): no flash-attn 1.x, no materialized scores
        raise _refuse(
            "torchtitan",
            f"attention_kernel {workload.attention_kernel}: torchtitan 0.3.0 runs SDPA, "
            "FlexAttention or varlen flash attention only",
        )
    config = torchtitan_config(model, workload, e)
    release = torchtitan_release_args(model, workload, e, recipe)
    overrides = torchtitan_overrides(config) + [AC_SUBCOMMAND[e.layout.recompute]]
    return {
        "release": {"version": TORCHTITAN_RELEASE, "args": release},
        "main_version": TORCHTITAN_MAIN,
        # main's ConfigManager takes the same --module / --config (checked against b5bcd76).
        "main_args": release[:4] + overrides,
        "config": config,
        "overrides": overrides,
        "toml": torchtitan_toml(config, e.layout.recompute),
    }


def _megatron_memory_options(workload: Workload, lo: Layout) -> list[str]:
    """Megatron-LM flags of the workload's memory options (Workload.optimizer_moments,
    activation_func_fp8_input_store, attention_output_store), or a refusal where it has none."""
    if workload.attention_output_store != "separate":
        raise _refuse(
            "megatron",
            f"attention_output_store {workload.attention_output_store} (DeepSeek-V3's E5M6 "
            "cache) has no Megatron-LM option",
        )
    if workload.activation_func_fp8_input_store:
        # TransformerConfig.activation_func_fp8_input_store is excluded from the generated flags
        # (megatron/training/arguments.py _add_network_size_args `exclude`); no flag sets it.
        raise _refuse(
            "megatron",
            "activation_func_fp8_input_store is a TransformerConfig field without a Megatron-LM "
            "flag",
        )
    # megatron/training/arguments.py: --grad-reduce-in-bf16 keeps main_grads and their
    # reduction in bf16 (accumulate_allreduce_grads_in_fp32 False); the default is fp32.
    grads = ["--grad-reduce-in-bf16"] if workload.main_grads == "bf16" else []
    if workload.fp8_params:
        if lo.zero_stage == 0:
            # megatron/training/arguments.py: "--fp8-param-gather only supported with
            # distributed optimizer, torch fsdp2, megatron fsdp, or inference mode".
            raise _refuse(
                "megatron", "fp8 primary weights need the distributed optimizer (ZeRO >= 1)"
            )
        # megatron/training/arguments.py: --fp4-param-gather for NVFP4 weights
        fp4 = workload.precision == "nvfp4"
        grads.append("--fp4-param-gather" if fp4 else "--fp8-param-gather")
    if workload.optimizer_moments == "fp32":
        return grads
    refused = framework.zero_input_violations(framework.profile("megatron"), workload, lo)
    if refused:
        # megatron-core 0.19.2 optimizer/optimizer_config.py __post_init__: "--use-precision-
        # aware-optimizer only supported with distributed optimizer" (ZeRO-0 is plain DDP).
        raise _refuse("megatron", refused[0])
    # megatron/core/optimizer/optimizer_config.py exp_avg_dtype / exp_avg_sq_dtype, used by
    # Transformer Engine's FusedAdam under use_precision_aware_optimizer. ZeRO-1 and the ZeRO-2
    # that runs as the distributed optimizer: its FusedAdam keeps the fp32 master and the bf16
    # moments on the shard. Megatron-FSDP (ZeRO-2 optim_grads / ZeRO-3 optim_grads_params):
    # use_megatron_fsdp turns use_distributed_optimizer on (arguments.py validate_args) and
    # get_megatron_optimizer's Megatron-FSDP branch builds the same FusedAdam over FSDP's
    # sharded fp32 main weights with master_weights False and use_decoupled_grad True
    # (optimizer/__init__.py), so the bf16 moments live on the FSDP shard.
    return grads + [
        "--use-precision-aware-optimizer",
        "--exp-avg-dtype",
        "bf16",
        "--exp-avg-sq-dtype",
        "bf16",
    ]


def _non_megatron_memory_refusal(target: str, workload: Workload, lo: Layout) -> None:
    """torchtitan and DeepSpeed exports: none of the memory options has a field there."""
    if lo.cpu_offload_layers:
        raise _refuse(target, "CPU activation offloading (cpu_offload_layers) has no field here")
    named = {
        "bf16 optimizer moments (optimizer_moments)": workload.optimizer_moments != "fp32",
        "fp8 SwiGLU input store (activation_func_fp8_input_store)": (
            workload.activation_func_fp8_input_store
        ),
        "the E5M6 attention-output cache (attention_output_store)": (
            workload.attention_output_store != "separate"
        ),
        # DeepSpeed's gradient dtype has its own rule (deepspeed_config)
        "bf16 main gradients (main_grads)": target != "deepspeed" and workload.main_grads != "fp32",
        "fp8 primary weights (fp8_params)": workload.fp8_params,
    }
    given = [name for name, on in named.items() if on]
    if given:  # name what the plan has, not every option there is
        raise _refuse(target, f"{', '.join(given)}: no field here")


# ----------------------------------------------------------------------------------- DeepSpeed


def deepspeed_config(workload: Workload, e: Estimate, model: ModelSpec | None = None) -> dict:
    """DeepSpeed config JSON; train_batch_size = micro x accumulation x dp, where DeepSpeed
    takes dp from the mpu Megatron-DeepSpeed passes (deepspeed/runtime/config.py): the TP/PP
    degrees travel in `deepspeed_launch_args`."""
    lo = e.layout
    if lo.pp_schedule != "1f1b" or lo.ep_overlap:
        raise _refuse("deepspeed", "DualPipe and MoE all-to-all overlap have no config key here")
    _non_megatron_memory_refusal("deepspeed", workload, lo)
    # Checked on the priced value, not only a stated one (input_violations): a workload
    # priced under another profile carries fp32 here without having set it.
    if workload.main_grads != "bf16":
        raise _refuse(
            "deepspeed",
            f"main_grads {workload.main_grads}: the plan priced {workload.main_grads} gradients; "
            + dict(framework.DEEPSPEED.no_inputs)["main_grads"]
            + _SEARCH_FOR.format("deepspeed"),
        )
    if lo.pp > 1 and lo.zero_stage >= 2:
        # DeepSpeed's PipelineEngine asserts ZeRO stage < 2.
        raise _refuse("deepspeed", f"ZeRO-{lo.zero_stage} with pp ({lo.pp}) > 1: needs ZeRO <= 1")
    refused = framework.zero_input_violations(framework.DEEPSPEED, workload, lo)
    if refused:  # bf16 under pipelining at ZeRO-0: DeepSpeed's BF16_Optimizer, not priced
        raise _refuse("deepspeed", refused[0] + _SEARCH_FOR.format("deepspeed"))
    if model is not None:
        problems = framework.profile_violations(framework.DEEPSPEED, model, lo)
        if problems:
            raise _refuse("deepspeed", problems[0] + _SEARCH_FOR.format("deepspeed"))
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
    if lo.zero_stage >= 1:
        # What the profile prices, written rather than left to defaults that differ by stage
        # (deepspeed/runtime/zero/config.py: overlap_comm None -> True only at stage 3): ZeRO's
        # reduction overlapped with the backward on its own stream (zero/stage_1_and_2.py
        # reduce_ipg_grads: the compute stream without it, nothing hidden; stage.stage_dp_parts)
        # and its double ipg buffer (memory.buffer_bytes), contiguous gradients (the default).
        # Under pipelining the engine turns overlap_comm off with a warning (engine.py
        # _configure_zero_optimizer) and the profile prices the reduction after the pipeline,
        # so the config says false there rather than ask for what will not run.
        overlap = {"overlap_comm": lo.pp == 1, "contiguous_gradients": True}
        config["zero_optimization"].update(overlap)
    if lo.zero_stage == 3:
        # The reuse window the memory and DP models price (memory.zero3_reuse_window_elements:
        # the last layers kept gathered into the backward), written rather than left to the
        # default; 0 releases every module after its use (partitioned_param_coordinator.py).
        reuse = workload.zero3_max_reuse_distance or 0
        config["zero_optimization"]["stage3_max_reuse_distance"] = reuse
        # and the per-fetch prefetch and live limit the gathered peak is priced with
        # (memory.deepspeed_gathered_elements), DeepSpeed's defaults written out
        config["zero_optimization"].update(
            stage3_prefetch_bucket_size=DEEPSPEED_PREFETCH_BUCKET_ELEMENTS,
            stage3_max_live_parameters=DEEPSPEED_MAX_LIVE_ELEMENTS,
        )
    if workload.dp_bucket_elements is not None:
        if lo.zero_stage == 0:
            raise _refuse(
                "deepspeed",
                "dp_bucket_elements with ZeRO-0: the bucket this export writes is ZeRO's "
                "reduce_bucket_size; without ZeRO the engine all-reduces in buckets of the "
                "constant MEMORY_OPT_ALLREDUCE_SIZE (engine.py allreduce_gradients)",
            )
        # the priced buckets (stage.dp_buckets 'deepspeed'): DeepSpeedZeroConfig reduce_bucket_size
        config["zero_optimization"]["reduce_bucket_size"] = workload.dp_bucket_elements
    if workload.precision not in ("bf16", "fp16"):
        raise _refuse("deepspeed", f"precision {workload.precision}: config has bf16/fp16 only")
    config[workload.precision] = {"enabled": True}
    # The priced gradients (the profile's main_grads bf16: 2 B, reduced as such), written out
    # rather than left to DeepSpeed's defaults (engine.py get_data_types: grad_accum_dtype =
    # the model dtype; communication_data_type: the model dtype under bf16 / fp16).
    config["data_types"] = {"grad_accum_dtype": workload.precision}
    config["communication_data_type"] = workload.precision
    return config


def deepspeed_launch_args(model: ModelSpec, workload: Workload, e: Estimate) -> list[str]:
    """Megatron-DeepSpeed `pretrain_gpt.py` arguments that carry TP/PP, the batch and ZeRO
    next to `--deepspeed_config` (Megatron-DeepSpeed megatron/arguments.py _add_deepspeed_args;
    its groups: deepspeed/runtime/pipe/topology.py PipeModelDataParallelTopology)."""
    deepspeed_config(workload, e, model)  # the same rules
    lo = e.layout
    args = megatron_deepspeed_model_args(model, workload)
    args += ["--tensor-model-parallel-size", str(lo.tp)]
    args += ["--pipeline-model-parallel-size", str(lo.pp)]
    args += ["--micro-batch-size", str(lo.micro_batch)]
    args += ["--global-batch-size", str(workload.global_batch_seqs)]
    args += ["--deepspeed", "--deepspeed_config", "ds_config.json"]
    args += ["--zero-stage", str(lo.zero_stage)]
    if lo.pp == 1:
        args.append("--no-pipeline-parallel")
    if lo.sequence_parallel and lo.tp > 1:
        args.append("--sequence-parallel")
    if lo.recompute == "full":
        args += ["--checkpoint-activations", "--deepspeed-activation-checkpointing"]
    elif lo.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    args.append("--bf16" if workload.precision == "bf16" else "--fp16")
    return args


def megatron_deepspeed_model_args(model: ModelSpec, workload: Workload) -> list[str]:
    """The whole (dense) model in Megatron-DeepSpeed's own flag names (deepspeedai/Megatron-
    DeepSpeed megatron/arguments.py _add_network_size_args: GQA as --num-key-value-heads, rotary
    as --use-rotary-position-embeddings with --rotary-position-embeddings-theta, and
    --no-position-embedding, else it adds a learned position table too; --normalization
    layernorm|rmsnorm, --layernorm-epsilon). What it has no flag for is refused by name."""
    missing = [
        name
        for name, present in (
            ("qkv_bias", model.qkv_bias and not model.linear_bias),
            ("qk_norm", model.qk_norm),
            ("rope_scaling", model.rope_scaling is not None),
            ("sliding_window", model.sliding_window is not None),
            ("attention_sinks", model.attention_sinks),
            ("multi-token prediction", model.mtp_num_layers > 0),
            ("ALiBi", model.position_embedding_kind == "alibi"),
            ("gated non-SiLU MLP", model.gated_mlp and model.mlp_activation != "silu"),
            (
                "a clamped or offset GLU (activation_clamp, glu_linear_offset)",
                model.activation_clamp is not None or model.glu_linear_offset != 0,
            ),
        )
        if present
    ]
    if missing:
        raise _refuse("deepspeed", f"Megatron-DeepSpeed has no flag for {', '.join(missing)}")
    args = ["--num-layers", str(model.num_layers), "--hidden-size", str(model.hidden_size)]
    args += ["--num-attention-heads", str(model.num_attention_heads)]
    if model.ffn_hidden_size is not None:
        args += ["--ffn-hidden-size", str(model.ffn_hidden_size)]
    args += ["--kv-channels", str(model.attn_head_dim)]
    if model.kv_heads != model.num_attention_heads:
        args += ["--num-key-value-heads", str(model.kv_heads)]
    args += _megatron_deepspeed_attention(workload)
    args += _megatron_mlp(model)
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    positions = max(model.max_position_embeddings or workload.seq_len, workload.seq_len)
    args += ["--max-position-embeddings", str(positions), "--seq-length", str(workload.seq_len)]
    if model.position_embedding_kind == "rope":
        args += ["--use-rotary-position-embeddings", "--no-position-embedding"]
        args += ["--rotary-position-embeddings-theta", _num(model.rotary_base)]
        if model.rotary_percent != 1.0:
            args += ["--rotary-percent", _num(model.rotary_percent)]
    args += ["--normalization", model.normalization, "--layernorm-epsilon", _num(model.norm_eps)]
    if not model.linear_bias:
        args.append("--disable-bias-linear")
    if not model.hidden_dropout:
        args += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    if model.vocab_size is not None:
        args += ["--vocab-size", str(model.vocab_size)]
    return args


def deepspeed(model: ModelSpec, workload: Workload, e: Estimate) -> dict[str, Any]:
    return {
        "version": DEEPSPEED_VERSION,
        "config": deepspeed_config(workload, e, model),
        "launch_args": deepspeed_launch_args(model, workload, e),
    }


def _megatron_moe_routing(model: ModelSpec, workload: Workload) -> list[str]:
    """Megatron's MoE routing flags for the workload's routing inputs, as priced."""
    if model.moe is None:
        return []
    args: list[str] = []
    if workload.moe_force_balance:
        args.append("--moe-router-force-load-balancing")  # a benchmarking mode, as priced
    if workload.moe_router_padding and quant_recipe(workload):
        # the routing map is padded to the quantization alignment, so TEGroupedMLP makes no
        # padding copy (priced: cost_models/host.py pads_expert_rows)
        args.append("--moe-router-padding-for-quantization")
    if workload.moe_capacity_factor is not None:
        # token-drop MoE (priced: cost_models/compute.py moe_imbalance)
        args += ["--moe-expert-capacity-factor", repr(workload.moe_capacity_factor)]
    if workload.moe_pad_to_capacity:
        args.append("--moe-pad-expert-input-to-capacity")
    return args
