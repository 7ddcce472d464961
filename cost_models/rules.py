"""Which layouts are legal for a model, cluster and workload. Each rule returns its reason string.

Written once and used twice: `estimate` refuses an illegal layout with these messages, and the
planner records them as rejection reasons. Rules follow Megatron-Core's own checks
(parallel_state.initialize_model_parallel, TransformerConfig) and torchtitan's ParallelDims.
"""

from __future__ import annotations

from collections.abc import Sequence

from .compute import local_kv_heads
from .memory import fsdp2_phased
from .pipeline import num_microbatches, split_slots
from .rankmap import expert_pp_mismatch
from .specs import Cluster, Layout, ModelSpec, Workload


def layout_violations(
    model: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout
) -> list[str]:
    """Every rule the layout breaks, as messages naming the values (empty when legal)."""
    return [
        *shape_violations(model, cluster, workload, layout),
        *zero_violations(workload, layout, model),
    ]


def zero_violations(
    workload: Workload, layout: Layout, model: ModelSpec | None = None
) -> list[str]:
    """The rules that read the layout's ZeRO stage (or its HSDP shard): the search checks these
    for every (ZeRO stage, shard) it may pick, the others once per shape (shape_violations).
    With the `model`, also HSDP's expert split (_hsdp_rules; the search's HSDP shapes keep it
    by construction: framework.expert_tp)."""
    out = [*_fp8_params_rules(workload, layout), *_memory_phases_rules(workload, layout)]
    if model is not None:
        out += _hsdp_rules(model, layout)
    return out


def _hsdp_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """HSDP (Layout.dp_shard) of a MoE model at ep 1 is priced with the experts TP-split like
    the dense weights, on the same shard mesh (memory.shard_groups, stage.dp_tier_times_s), as
    torchtitan, the one launcher with HSDP here, runs them at ep 1; experts whole on each TP
    rank (etp < tp) would shard over a group no HSDP mesh has. With EP the experts have their
    own mesh (rankmap.HSDP_EXPERT_KINDS), whatever etp is."""
    if lo.dp_shard is not None and model.moe is not None and lo.ep == 1 and lo.etp != lo.tp:
        why = (
            f"dp_shard ({lo.dp_shard}) with a mixture-of-experts model needs etp = tp (got etp "
            f"{lo.etp}, tp {lo.tp}): HSDP is priced with the experts TP-split on the dense "
            "weights' shard mesh, as torchtitan runs them at ep 1"
        )
        return [why]
    return []


def _memory_phases_rules(workload: Workload, lo: Layout) -> list[str]:
    """memory_phases 'fsdp2' composes a stage's peak from FSDP2's phases (memory.
    fsdp2_state_bytes, stage.peak_grads) where memory.fsdp2_phased says torchtitan 0.3.0 runs
    them: ZeRO-3, and ZeRO-0 without PP (fully_shard over a one-rank shard mesh, resharded
    after forward). Its other stages run phases not modelled, so they are refused rather than
    priced with the states additive: ZeRO-2 is fully_shard with reshard_after_forward 'never'
    (torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy: every unit stays
    unsharded from its forward to its backward); ZeRO-0 under PP takes 'default', which is
    reshard False with pp_enabled (every unit unsharded through the step, with pipelining's
    deferred reduction); FSDP2 has no ZeRO-1."""
    if workload.memory_phases == "fsdp2" and not fsdp2_phased(lo):
        return [
            f"memory_phases fsdp2 is priced for ZeRO-3 and for ZeRO-0 without PP only (got "
            f"ZeRO-{lo.zero_stage}, pp {lo.pp}): torchtitan's ZeRO-2 keeps every unit "
            "unsharded from forward to backward (reshard_after_forward 'never') and its ZeRO-0 "
            "under PP through the step ('default' with PP); their phases are not modelled "
            "(state memory_phases additive)"
        ]
    return []


def shape_violations(
    model: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout
) -> list[str]:
    """Every rule but zero_violations: none of these reads zero_stage or dp_shard."""
    return [
        *_degree_rules(model, cluster, layout),
        *_batch_rules(workload, layout),
        *_recompute_rules(model, layout),
        *_offload_rules(model, cluster, layout),
        *_schedule_rules(workload, layout),
        *_moe_rules(model, layout),
        *_attention_rules(model, workload, layout),
        *_bf16_layer_rules(model, workload, layout),
        *_mtp_rules(model, layout),
    ]


def split_violations(model: ModelSpec, lo: Layout, split: Sequence[int]) -> list[str]:
    """A split of the caller's own (Pricer.estimate's layers_per_stage, a record's layout
    `layers_per_stage`): decoder layers per model chunk, pp * vp of them in model order (chunk c
    on pipeline rank c % pp), none negative, num_layers in all (megatron-core 0.19
    PipelineParallelLayerLayout.validate_layer_layout: "Number of decoder layers ... must match
    num_layers"). A chunk may hold none (a layout's `E|...|L` stage holding the loss alone)."""
    chunks = lo.pp * lo.vp
    out = []
    if len(split) != chunks:
        out.append(f"layers_per_stage has {len(split)} entries; pp * vp is {chunks}")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in split):
        out.append(f"layers_per_stage {list(split)}: each entry must be a whole number >= 0")
    elif sum(split) != model.num_layers:
        out.append(f"layers_per_stage sums to {sum(split)}; the model has {model.num_layers} layers")
    return out


def _mtp_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """megatron-core 0.19 TransformerConfig.__post_init__ (overlap_moe_expert_parallel_comm):
    "MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm"."""
    if lo.ep_overlap and model.mtp_num_layers > 1:
        return [f"ep_overlap takes at most one MTP layer (mtp_num_layers {model.mtp_num_layers})"]
    return []


def _bf16_layer_rules(model: ModelSpec, workload: Workload, lo: Layout) -> list[str]:
    """megatron-core transformer_config.py (__post_init__): num_layers_at_start_in_bf16 and
    num_layers_at_end_in_bf16 must lie between 0 and num_layers // pipeline_model_parallel_size
    (it checks this under fp8; fp4 takes the same layers out of its autocast)."""
    most = model.num_layers // lo.pp
    return [
        f"{name} ({n}) must not exceed num_layers // pp ({most})"
        for name, n in (
            ("bf16_layers_start", workload.bf16_layers_start),
            ("bf16_layers_end", workload.bf16_layers_end),
        )
        if n > most
    ]


def _fp8_params_rules(workload: Workload, lo: Layout) -> list[str]:
    """fp8 primary weights live in the distributed optimizer's (or FSDP's) param buffer:
    Megatron-LM arguments.py asserts '--fp8-param-gather only supported with distributed
    optimizer, torch fsdp2, megatron fsdp, or inference mode'."""
    if workload.fp8_params and lo.zero_stage == 0:
        return ["fp8_params needs a ZeRO stage >= 1 (the distributed optimizer or FSDP)"]
    return []


def _degree_rules(model: ModelSpec, cluster: Cluster, lo: Layout) -> list[str]:
    """The degrees against the GPU count and the model's dimensions."""
    out: list[str] = []
    if lo.world_size != cluster.num_gpus:
        out.append(
            f"tp*pp*dp*cp ({lo.tp}*{lo.pp}*{lo.dp}*{lo.cp} = {lo.world_size}) must equal the "
            f"GPU count ({cluster.num_gpus})"
        )
    if model.num_attention_heads % lo.tp:
        out.append(f"tp ({lo.tp}) must divide num_attention_heads ({model.num_attention_heads})")
    kv = model.kv_heads
    if kv % lo.tp and lo.tp % kv:
        out.append(f"tp ({lo.tp}) must divide num_kv_heads ({kv}) or be a multiple of it")
    if model.ffn_hidden_size is not None and model.ffn_hidden_size % lo.tp:
        out.append(f"tp ({lo.tp}) must divide ffn_hidden_size ({model.ffn_hidden_size})")
    if split_slots(lo) != (0, 0):
        out += _split_slot_rules(model, lo)
    elif lo.pp * lo.vp > model.num_layers:
        out.append(f"pp*vp ({lo.pp}*{lo.vp}) must not exceed num_layers ({model.num_layers})")
    if lo.vp > 1 and lo.pp == 1:
        out.append(f"vp ({lo.vp}) > 1 needs pp > 1 (interleaving splits pipeline stages)")
    return out


def _split_slot_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """Megatron-Core 0.19.2 TransformerConfig.__post_init__ with
    account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split: num_layers
    plus the counted slots must divide by pipeline_model_parallel_size, and the layers per rank
    by virtual_pipeline_model_parallel_size (so every chunk gets the same slots and one holding
    the embedding or the loss alone builds no decoder layer: pipeline.accounted_chunk_counts)."""
    slots = sum(split_slots(lo))
    total = model.num_layers + slots
    named = " + ".join(
        ["num_layers"]
        + ["embedding"] * lo.account_for_embedding_in_pipeline_split
        + ["loss"] * lo.account_for_loss_in_pipeline_split
    )
    # Led by the field (the CLI names its flag: planner/cli.py _flag_named).
    field = (
        "account_for_embedding_in_pipeline_split"
        if lo.account_for_embedding_in_pipeline_split
        else "account_for_loss_in_pipeline_split"
    )
    if total % lo.pp:
        return [
            f"{field} needs {named} ({model.num_layers} + {slots} = {total}) divisible by "
            f"pp ({lo.pp})"
        ]
    if lo.vp > 1 and (total // lo.pp) % lo.vp:
        return [
            f"{field} needs {named} per pipeline rank ({total}/{lo.pp} = {total // lo.pp}) "
            f"divisible by vp ({lo.vp})"
        ]
    return []


def _batch_rules(workload: Workload, lo: Layout) -> list[str]:
    """The global batch against micro-batches and DP; the sequence against CP and TP."""
    out: list[str] = []
    if workload.global_batch_seqs % (lo.micro_batch * lo.dp):
        out.append(
            f"global batch ({workload.global_batch_seqs}) must be a multiple of "
            f"micro_batch*dp ({lo.micro_batch}*{lo.dp})"
        )
    elif lo.vp > 1 and num_microbatches(workload.global_batch_seqs, lo) % lo.pp:
        # Megatron-LM's interleaved schedule (schedules.py, forward_backward_pipelining_with_
        # interleaving; later versions relax it to num_microbatches >= pp) and PyTorch's
        # ScheduleInterleaved1F1B (torchtitan) run micro-batches in rounds of pp. The stricter
        # form runs on both, and every interleaved run in the published records meets it.
        m = num_microbatches(workload.global_batch_seqs, lo)
        out.append(
            f"interleaving (vp {lo.vp}) needs num_microbatches ({m}) divisible by pp ({lo.pp})"
        )
    if lo.cp > 1 and workload.seq_len % (2 * lo.cp):
        out.append(f"seq_len ({workload.seq_len}) must be divisible by 2*cp ({2 * lo.cp})")
    if lo.sequence_parallel and (workload.seq_len // lo.cp) % lo.tp:
        out.append(f"seq_len/cp ({workload.seq_len // lo.cp}) must be divisible by tp ({lo.tp})")
    return out


def _recompute_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """Selective recompute modules the model has."""
    out: list[str] = []
    modules = lo.recompute_modules if lo.recompute == "selective" else None
    if modules and "mla_up_proj" in modules and model.mla is None:
        # TransformerConfig.__post_init__: "mla_up_proj in recompute_modules is only supported
        # with multi_latent_attention."
        out.append("recompute module mla_up_proj needs multi-latent attention")
    if modules and "moe_act" in modules and model.moe is None:
        out.append("recompute module moe_act needs a mixture-of-experts model")
    return out


def _offload_rules(model: ModelSpec, cluster: Cluster, lo: Layout) -> list[str]:
    return offload_rules(model, cluster, lo.cpu_offload_layers)


def offload_rules(model: ModelSpec, cluster: Cluster, k: int) -> list[str]:
    """CPU activation offloading of `k` layers: fewer layers than the model has, and a priced
    host link (the layout rule, and `plan`'s check of its --cpu-offload-layers)."""
    out: list[str] = []
    if k and k >= model.num_layers:
        # TransformerConfig.__post_init__: "CPU offloading can be done only for layers less
        # than num_layers"; TE get_cpu_offload_context refuses num_layers > model_layers - 1.
        out.append(f"cpu_offload_layers ({k}) must be below num_layers ({model.num_layers})")
    if k and cluster.gpu.host_link_gb_per_s is None:
        out.append(
            f"cpu_offload_layers needs the GPU's host link bandwidth (gpu {cluster.gpu.id} "
            "has no host_link_gb_per_s)"
        )
    return out


def _schedule_rules(workload: Workload, lo: Layout) -> list[str]:
    """DualPipe and Megatron's MoE all-to-all overlap."""
    out: list[str] = []
    m = workload.global_batch_seqs // (lo.micro_batch * lo.dp)
    if lo.pp_schedule == "dualpipe":
        # deepseek-ai/DualPipe dualpipe.py DualPipe.step: `assert num_ranks % 2 == 0` and
        # `num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2`; one stage per
        # rank and direction (no virtual stages).
        if lo.pp < 2 or lo.pp % 2:
            out.append(f"dualpipe needs an even pp >= 2 (got {lo.pp})")
        if lo.vp > 1:
            out.append(
                f"dualpipe runs one stage per rank and direction: vp must be 1 (got {lo.vp})"
            )
        if m % 2 or m < 2 * lo.pp:
            out.append(f"dualpipe needs an even num_microbatches >= 2*pp ({m}, pp {lo.pp})")
    if lo.ep_overlap:
        # Megatron-LM TransformerConfig.__post_init__ (overlap_moe_expert_parallel_comm): expert
        # parallelism, virtual pipeline stages when pp > 1. (Its "no full recompute" assert is
        # the Megatron export's refusal: legality here does not read the recompute mode.)
        if lo.ep == 1:
            out.append("ep_overlap needs expert parallelism (ep > 1)")
        if lo.pp > 1 and lo.vp == 1:
            out.append("ep_overlap with pp > 1 needs virtual pipeline stages (vp > 1)")
        if lo.pp_schedule == "dualpipe":
            out.append("ep_overlap is Megatron's 1F1B overlap; dualpipe overlaps on its own")
    return out


def _moe_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """Expert parallelism against the model's experts and the dense grid."""
    out: list[str] = []
    moe = model.moe
    if moe is None:
        if lo.ep > 1:
            out.append(f"ep ({lo.ep}) > 1 needs a mixture-of-experts model")
        if lo.etp > 1:
            out.append(f"etp ({lo.etp}) > 1 needs a mixture-of-experts model")
    else:
        if moe.num_experts % lo.ep:
            out.append(f"ep ({lo.ep}) must divide num_experts ({moe.num_experts})")
        # MoE parallel folding (Megatron-Core): expert layers re-split the tp*dp*cp ranks of a
        # stage into etp x ep x expert-dp.
        if (lo.tp * lo.dp * lo.cp) % (lo.etp * lo.ep):
            out.append(f"etp*ep ({lo.etp}*{lo.ep}) must divide tp*dp*cp ({lo.tp * lo.dp * lo.cp})")
        if lo.tp % lo.etp:
            out.append(f"etp ({lo.etp}) must divide tp ({lo.tp})")
        mismatch = expert_pp_mismatch(lo)
        if mismatch is not None:
            out.append(mismatch)
        if moe.expert_ffn_hidden_size % lo.etp:
            out.append(
                f"etp ({lo.etp}) must divide expert_ffn_hidden_size ({moe.expert_ffn_hidden_size})"
            )
    return out


def _attention_rules(model: ModelSpec, workload: Workload, lo: Layout) -> list[str]:
    """Context parallelism against the model's attention variant and the attention kernel."""
    if lo.cp > 1 and workload.attention_kernel == "unfused":
        # Megatron-Core's DotProductAttention asserts context_parallel_size == 1 ("Context
        # parallelism is only supported by TEDotProductAttention!"), and Transformer Engine's
        # get_attention_backend disables UnfusedDotProductAttention under context parallelism
        # (transformer_engine/pytorch/attention/dot_product_attention/utils.py).
        return [
            (
                f"cp ({lo.cp}) > 1 with attention_kernel unfused: materialized-score attention "
                "(Megatron-Core DotProductAttention, Transformer Engine "
                "UnfusedDotProductAttention) has no context parallelism"
            )
        ]
    if lo.cp > 1 and workload.cp_attention == "a2a":
        return _a2a_rules(model, lo)
    if lo.cp == 1 or workload.cp_attention != "fused_ring":
        return []
    out = []
    if model.sliding_window is not None:
        # Transformer Engine attn_forward_func_with_cp (transformer_engine/pytorch/attention/
        # dot_product_attention/context_parallel.py) asserts that a sliding window runs only
        # with cp_comm_type "a2a" (or "all_gather" without the fused kernel): its p2p K/V ring,
        # the CP the Megatron profile prices (Workload.cp_attention), refuses windows.
        out.append(
            f"cp ({lo.cp}) > 1 with sliding-window attention (window {model.sliding_window}): "
            "Transformer Engine's p2p context parallelism (the fused ring priced here) refuses "
            "windows; --cp-comm-type a2a prices its all-to-all CP, which takes them"
        )
    if model.attention_sinks:
        # Transformer Engine get_attention_backend (transformer_engine/pytorch/attention/
        # dot_product_attention/utils.py, "Filter: Softmax type", v2.8 to 2.18): a learnable
        # softmax (Megatron softmax_type "learnable", gpt-oss's sinks) under context
        # parallelism runs only in FusedAttention, which it disables for cp_comm_type other
        # than "a2a"; UnfusedDotProductAttention takes no CP: no backend is left on the ring.
        out.append(
            f"cp ({lo.cp}) > 1 with attention sinks: Transformer Engine runs a learnable softmax "
            "under context parallelism only with cp_comm_type a2a (its p2p ring, priced here, "
            "has no backend for it); --cp-comm-type a2a prices TE's all-to-all CP, which takes "
            "them"
        )
    return out


def _a2a_rules(model: ModelSpec, lo: Layout) -> list[str]:
    """Transformer Engine's all-to-all CP (AttnFuncWithCPAndQKVOA2A, transformer_engine/pytorch/
    attention/dot_product_attention/context_parallel.py) scatters heads over the CP group:
    "cp_comm_type='a2a' requires num_heads % cp_size == 0 for Q, K, V" on each TP rank's heads
    (K and V: the rank's query groups, at least one where TP exceeds them)."""
    q_heads = model.num_attention_heads // lo.tp
    kv_heads = q_heads if model.mla is not None else int(local_kv_heads(model, lo.tp))
    if q_heads % lo.cp or kv_heads % lo.cp:
        return [
            (
                f"cp ({lo.cp}) with all-to-all context parallelism needs the query heads "
                f"({q_heads}) and the key / value heads ({kv_heads}) of a TP rank divisible "
                "by cp: Transformer Engine scatters heads over the CP group"
            )
        ]
    return []
