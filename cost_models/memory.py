"""Memory per GPU per pipeline stage: weights, gradients, optimizer, activations, buffers.

States (mixed-precision Adam, Rajbhandari et al. 2020 "ZeRO" sec. 3): bf16 weights 2 B, fp32 main
gradients 4 B (Megatron-LM accumulates in fp32 under bf16; 2 B under Workload.main_grads bf16),
fp32 master + Adam m + v 12 B per parameter (8 B with bf16 moments, Workload.optimizer_moments).
ZeRO-1 shards the 12 B, ZeRO-2 also the gradients, ZeRO-3 / FSDP shards everything and
keeps fp32 sharded parameters (4 + 4 + 8 = 16 B / shard group) plus unsharded bf16 copies of the
layers being computed. Non-expert states shard over DP x CP; expert states over the expert-DP
group dp*cp*tp / (ep*etp) (Megatron-Core MoE parallel folding).

Activations per layer per micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198) sec. 4,
written per stored tensor so that GQA, MLA, gated MLPs and MoE are covered, with flash attention
(no s x s scores are stored). Derivations: docs/cost_model.md#memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .accumulation import defers_to_last_backward, grads_sharded_between_micro_batches
from .compute import (
    quant_recipe,
    recomputed_norms,
    saves_quantized_inputs,
    selective_modules,
    tokens_per_gpu,
)
from .params import (
    attention_params,
    dense_mlp_params,
    embedding_params,
    expert_params,
    fetches_per_layer,
    layer_modules,
    lm_head_params,
    mlp_matrices,
    mtp_join_params,
)
from .specs import LOW_PRECISION, Generation, Layout, ModelSpec, Workload
from .units import GIB  # noqa: F401 (re-exported: byte counts here are read in GiB)

BF16_BYTES = 2
FP32_BYTES = 4
CUDA_CONTEXT_GIB = 0.75
"""CUDA context, cuBLAS/cuDNN workspaces and NCCL channel buffers (torch reports ~0.5-1 GiB)."""
ALLOCATOR_OVERHEAD = 0.10
"""PyTorch caching-allocator fragmentation: reserved / allocated on dynamic memory."""
DP_BUCKET_ELEMENTS = 2 * 40e6
"""Megatron DDP: two in-flight 40M-element gradient buckets (at grad_bytes each)."""
DEEPSPEED_PREFETCH_BUCKET_ELEMENTS = 50_000_000
"""DeepSpeed ZeRO-3's prefetch per fetch: whole parameters from the trace until at least this
many elements (deepspeed/runtime/zero/config.py prefetch_bucket_size, stage3_prefetch_bucket_size
default 5e7; partitioned_param_coordinator.py fetch_sub_module). The deepspeed export writes it."""

DEEPSPEED_MAX_LIVE_ELEMENTS = 1_000_000_000
"""DeepSpeed ZeRO-3 prefetches nothing once this many elements are gathered (zero/config.py
max_live_parameters, stage3_max_live_parameters default 1e9; fetch_sub_module:
max_params_to_prefetch = min(max_n_available_params - n_available_params, prefetch_bucket_sz)).
The deepspeed export writes it."""


DEEPSPEED_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO's reduce_bucket_size default, 5e8 elements (deepspeed/runtime/zero/config.py
DeepSpeedZeroConfig)."""


@dataclass(frozen=True, slots=True)
class StageParams:
    """Parameters one GPU of a pipeline stage holds (after TP / EP split, before ZeRO)."""

    dense: float
    expert: float
    largest_layer: float  # for ZeRO-3 gather buffers
    num_layers: int
    head: float = 0.0
    """LM-head parameters on this GPU (last stage; FSDP2 keeps them unsharded through the loss)."""
    embedding: float = 0.0
    """Input-embedding parameters on this GPU (first stage)."""
    dense_tensors: int = 0
    """Parameter tensors holding `dense` (stage_tensors); 0: not counted, no bound on buckets."""
    expert_tensors: int = 0
    """Parameter tensors holding `expert` (one per local expert and GEMM)."""
    shared_embedding: float = 0.0
    """Word-embedding parameters on this GPU whose gradient is all-reduced with the other end of
    the pipeline after the DP sync: the first and the last stage's copies where the LM head is
    tied to the embedding or MTP looks tokens up on the last stage, pp > 1 (Megatron
    finalize_model_grads._allreduce_word_embedding_grads; stage.embedding_sync_s)."""
    largest_module: float = 0.0
    """The largest single module's weight parameters (one Linear) of the stage's layers on this
    GPU (the largest of params.layer_modules): the unit DeepSpeed ZeRO-3 gathers. 0: not
    counted (the largest layer stands in)."""
    tied_head: float = 0.0
    """Word-embedding parameters on this GPU that the LM head reads again at the forward's end
    (tied weights on a stage holding both ends, pp = 1)."""
    deepspeed_fetches: float = 0.0
    """All-gathers one pass over the stage issues under DeepSpeed ZeRO-3's per-fetch prefetch
    (params.fetches_per_layer per layer, and one each for the embedding and the LM head).
    0: not counted."""


def stage_params(
    model: ModelSpec, layout: Layout, num_dense: int, num_moe: int, stage: int
) -> StageParams:
    """Parameters of a stage with num_dense dense and num_moe MoE layers (plus embedding/head)."""
    attn = attention_params(model) / layout.tp
    dense = expert = largest = 0.0
    if num_dense:
        layer = attn + dense_mlp_params(model) / layout.tp
        dense += num_dense * layer
        largest = layer
    if num_moe:
        moe = model.moe
        assert moe is not None
        routed = moe.num_experts * expert_params(model) / (layout.ep * layout.etp)
        shared = moe.num_shared_experts * expert_params(model) / layout.tp
        non_expert = attn + shared + model.hidden_size * moe.num_experts
        dense += num_moe * non_expert
        expert += num_moe * routed
        largest = max(largest, non_expert + routed)
    embed = head = 0.0
    shared_copy = (model.tied_embeddings or bool(model.mtp_num_layers)) and layout.pp > 1
    word = (model.vocab_size or 0) * model.hidden_size / layout.tp
    shared = 0.0
    if stage == 0:
        embed = embedding_params(model) / layout.tp
        dense += embed
        shared = word if shared_copy else 0.0
    if stage == layout.pp - 1:
        head = lm_head_params(model) + mtp_join_params(model)
        if shared_copy:
            # its own copy of the word embedding, grads tied with the first stage's (the LM
            # head's weight, or MTP's look-up: GPTModel builds the embedding where pre_process
            # or mtp_process)
            head += (model.vocab_size or 0) * model.hidden_size
            shared = word
        head /= layout.tp
        dense += head
    dense_tensors, expert_tensors = stage_tensors(model, layout, num_dense, num_moe, stage)
    module = fetches = 0.0
    for n, moe in ((num_dense, False), (num_moe, True)):
        if n:
            units = layer_modules(model, layout, moe=moe)
            module = max(module, *units)
            fetches += n * fetches_per_layer(tuple(units), DEEPSPEED_PREFETCH_BUCKET_ELEMENTS)
    fetches += (embed > 0) + (head > 0)
    tied = word if model.tied_embeddings and stage == 0 and layout.pp == 1 else 0.0
    return StageParams(
        dense,
        expert,
        largest,
        num_dense + num_moe,
        head,
        embed,
        dense_tensors,
        expert_tensors,
        shared,
        module,
        tied,
        fetches,
    )


def stage_tensors(
    model: ModelSpec, layout: Layout, num_dense: int, num_moe: int, stage: int
) -> tuple[int, int]:
    """(non-expert, expert) parameter tensors of a stage, as Megatron's Transformer Engine layer
    spec registers them (megatron/core/models/gpt/gpt_layer_specs.py): a gradient bucket closes
    only at a parameter's end (param_and_grad_buffer.py), so a stage has at most this many
    buckets whatever the bucket size (dp_buckets).

    Attention: linear_qkv with its fused input norm (weight, layer_norm_weight) and linear_proj;
    MLA: input_layernorm, q / kv down projections, q / kv up projections with their fused norms,
    linear_proj; q / k norms under qk_norm; the sink offsets (attention_sinks). Dense MLP:
    linear_fc1 with its fused norm, linear_fc2. MoE layer: pre_mlp_layernorm, the router, a
    shared expert's fc1 / fc2 (and its gate), and per local expert fc1 / fc2 (TE GroupedLinear:
    one weight per GEMM). A bias beside each norm weight under LayerNorm and beside each Linear
    under linear_bias (qkv_bias: the QKV one). First stage: the word (and learned position)
    embeddings; last stage: the final norm and, untied, the output layer."""
    norm = 2 if model.normalization == "layernorm" else 1
    if model.mla is not None:
        attn = 3 * norm + 5
    else:
        attn = norm + 2 + (2 if model.qk_norm else 0)
    attn += 1 if model.attention_sinks else 0
    attn += 2 if model.linear_bias else (1 if model.qkv_bias else 0)
    mlp = norm + 2 + (2 if model.linear_bias else 0)
    dense = num_dense * (attn + mlp)
    expert = 0
    if num_moe:
        moe = model.moe
        assert moe is not None
        shared = (2 + (2 if model.linear_bias else 0)) if moe.num_shared_experts else 0
        shared += 1 if moe.num_shared_experts and moe.shared_expert_gate else 0
        dense += num_moe * (attn + norm + 1 + shared)
        local = max(1, moe.num_experts // layout.ep)
        expert = num_moe * local * (2 + (2 if model.linear_bias else 0))
    if stage == 0:
        dense += 2 if model.position_embedding_kind == "learned" else 1
    if stage == layout.pp - 1:
        dense += norm + (0 if model.tied_embeddings and layout.pp == 1 else 1)
        # per MTP depth: enorm, hnorm, eh_proj, final_layernorm (MultiTokenPredictionLayer),
        # and the embedding copy where the first stage is another rank
        dense += model.mtp_num_layers * (3 * norm + 1)
        dense += 1 if model.mtp_num_layers and not model.tied_embeddings and layout.pp > 1 else 0
    return dense, expert


def moment_bytes(workload: Workload | None) -> int:
    """Bytes per parameter of Adam's two moments: 2 x 4 in fp32, 2 x 2 in bf16
    (Workload.optimizer_moments; Megatron-Core OptimizerConfig.exp_avg_dtype / exp_avg_sq_dtype
    under use_precision_aware_optimizer, megatron/core/optimizer/optimizer_config.py)."""
    bf16 = workload is not None and workload.optimizer_moments == "bf16"
    return 2 * (BF16_BYTES if bf16 else FP32_BYTES)


def grad_bytes(workload: Workload | None) -> int:
    """Bytes per parameter of the gradient buffer (Workload.main_grads): fp32 4 B, bf16 2 B.
    Under bf16 Megatron's distributed optimizer casts only its own shard to fp32 at the step
    (distrib_optimizer.py _copy_model_grads_to_main_grads `shard_model_grad.float()`), after
    the activations are freed, so the persistent buffer is what a peak holds."""
    bf16 = workload is not None and workload.main_grads == "bf16"
    return BF16_BYTES if bf16 else FP32_BYTES


FP8_BYTES = 1
MXFP8_SCALE_BYTES = 1 / 32
"""E8M0 scale bytes per element of an MXFP8 tensor, per direction (one per 32-element block)."""
FP4_BYTES = 0.5
NVFP4_SCALE_BYTES = 1 / 16
"""E4M3 scale bytes per element of an NVFP4 tensor, per direction: weights scale 16x16 blocks
(NVFP4BlockScaling 2D quantization) but store the scale per 1x16 row segment, the layout the
GEMM reads (TE docs, NVFP4 'Handling transposes': scales [A, B/16])."""


def weight_bytes(workload: Workload | None, generation: Generation = "hopper") -> float:
    """Resident bytes per parameter of the model weights (Workload.fp8_params), from
    Transformer Engine's quantized tensors (transformer_engine/pytorch/tensor/utils.py
    post_all_gather_processing, cast_master_weights_to_fp8):

    - bf16 weights: 2 B (also under fp8 compute without fp8_params; Transformer Engine's
      cached fp8 weight copies of that case are not counted).
    - fp8 delayed / tensorwise Float8Tensor: the 1 B row-wise data, plus a 1 B transpose
      created after each all-gather where the GPU has no non-TN fp8 GEMM
      (utils.py is_non_tn_fp8_gemm_supported: sm 10.x-11.x and >= 13, i.e. Blackwell): 2 B
      on Hopper / Ampere / CDNA, 1 B on Blackwell.
    - fp8 blockwise Float8BlockwiseQTensor: row-wise and column-wise 1 B each (the
      column-wise storage is always created after the all-gather); the fp32 scales of
      128x128 weight tiles (4 B per 16,384 elements) are left out.
    - mxfp8 MXFP8Tensor: row-wise and column-wise 1 B each plus one E8M0 scale per 32
      elements in each direction: 2.0625 B.
    - nvfp4 NVFP4Tensor (Megatron --fp4-param-gather): the 0.5 B row-wise data with an E4M3
      scale per 16 elements, and the column-wise copy post_all_gather_processing builds
      after each all-gather (_nvfp4_2d_multi_tensor_transpose): 1.125 B.
    """
    if workload is None or not workload.fp8_params:
        return BF16_BYTES
    if workload.precision == "mxfp8":
        return 2 * (FP8_BYTES + MXFP8_SCALE_BYTES)
    if workload.precision == "nvfp4":
        return 2 * (FP4_BYTES + NVFP4_SCALE_BYTES)
    if quant_recipe(workload) == "blockwise" or generation != "blackwell":
        return 2 * FP8_BYTES
    return FP8_BYTES


def param_gather_bytes(workload: Workload | None) -> float:
    """Bytes per element of the ZeRO / distributed-optimizer parameter all-gather: bf16 2 B;
    under Workload.fp8_params 1 B (Megatron param_and_grad_buffer.py: the param buffer of fp8
    parameters is torch.uint8 and their row-wise data is mapped into it), 0.5 B for nvfp4
    (fp4_utils.modify_nvfp4_rowwise_storage: only the packed row-wise bytes live in the
    buffer), except mxfp8, whose parameters are gathered in bf16 through the gradient buffer
    and re-quantized after it (param_and_grad_buffer.py shared_buffer: 'param_data = ...
    view(torch.bfloat16)')."""
    if workload is None or not workload.fp8_params or workload.precision == "mxfp8":
        return BF16_BYTES
    return FP4_BYTES if workload.precision == "nvfp4" else FP8_BYTES


def state_bytes(
    sp: StageParams,
    layout: Layout,
    num_microbatches: int = 1,
    workload: Workload | None = None,
    mirror: StageParams | None = None,
    weight_bytes: float = BF16_BYTES,
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU under the layout's ZeRO stage; gradients
    at grad_bytes (Workload.main_grads), resident and gathered weights at `weight_bytes` per
    parameter (memory.weight_bytes: 2 B bf16, less or more under Workload.fp8_params).

    ZeRO-2 keeps only its gradient shard when every backward reduces
    (accumulation.grads_sharded_between_micro_batches: one micro-batch, Megatron-FSDP,
    DeepSpeed, FSDP2 without PP); with one reduction per step the unsharded gradients are
    accumulated until it (FSDP1 no_sync; FSDP2 under pipelining, in the fp32 reduce dtype).
    ZeRO-3 under pipelining (accumulation.defers_to_last_backward: torchtitan 'always') holds
    the fp32 shard (4 B), the unsharded gradients in the fp32 reduce dtype from the first
    backward to the step's one reduce-scatter, and at the end of each backward every unit's
    unsharded weights (set_reshard_after_backward(False)); the next forward reshards them unit
    by unit as its activations grow, which stage.deferred_weights_credit takes off the peak.
    The optimizer holds the fp32 master (4 B) and the moments (moment_bytes: 8 B fp32, 4 B
    under bf16 moments). Megatron's precision-aware optimizer may keep only the 16-bit
    remainder of a bf16 parameter's fp32 master (OptimizerConfig.store_param_remainders,
    distrib_optimizer.py); that 2 B saving is not counted, so bf16 moments are an upper bound
    there, exact for DeepSeek-V3's fp32 master weights (report sec. 3.3.3).
    DualPipe: the rank also holds the mirror stage pp - 1 - r (`mirror`; None: a copy of `sp`).
    """
    moments = moment_bytes(workload)
    g = grad_bytes(workload)
    sharded = shard_elements(sp, layout)
    full = sp.dense + sp.expert
    mode = workload.dp_accumulation if workload is not None else "last_micro_batch"
    # ZeRO-3's resident shard: the fp32 master, and the 16-bit shard where the framework keeps
    # one beside it (Workload.zero3_16bit_shard)
    shard_bytes = FP32_BYTES
    if workload is None or workload.zero3_16bit_shard:
        shard_bytes += param_gather_bytes(workload)
    if layout.zero_stage == 3 and defers_to_last_backward(layout, mode):
        # every layer kept gathered through the accumulation (zero3_gathered_bytes)
        gathered = zero3_gathered_bytes(sp, layout, workload, weight_bytes)
        return shard_bytes * sharded + gathered, g * full, moments * sharded
    if workload is not None and workload.memory_phases == "fsdp2" and fsdp2_phased(layout):
        on_shard = sharded if layout.zero_stage == 3 else full  # ZeRO-0: a one-rank shard
        return fsdp2_state_bytes(sp, layout, num_microbatches, workload, on_shard)
    # With every shard group one GPU nothing is sharded: the framework keeps the unsharded
    # states of ZeRO-0 (bf16 weights, fp32 gradients, fp32 master + moments; issue 28: ZeRO-3
    # at DP 1 was charged 16 B/param against 18, a saving with nothing sharded).
    z = zero_in_effect(sp, layout)
    if z == 3:
        # the fp32 master (and 16-bit) shards and the gathered parameters
        gather = zero3_gathered_bytes(sp, layout, workload, weight_bytes)
        return shard_bytes * sharded + gather, g * sharded, moments * sharded
    weights = weight_bytes * full
    shard_grads = z == 2 and grads_sharded_between_micro_batches(layout, num_microbatches, mode)
    grads = g * (sharded if shard_grads else full)
    optimizer = (FP32_BYTES + moments) * (sharded if z >= 1 else full)
    if layout.pp_schedule == "dualpipe":
        # DualPipe keeps two copies of the parameters (github deepseek-ai/DualPipe README table,
        # "Parameter Per Device 2x"; DeepSeek-V3 report sec. 3.2.1): rank r holds stages r and
        # pp - 1 - r (examples/example_dualpipe.py), each with its gradients, which the two
        # holders of a stage add up; the optimizer steps the rank's own stage.
        other = sp if mirror is None else mirror
        full_other = other.dense + other.expert
        weights += weight_bytes * full_other
        sharded_other = shard_elements(other, layout)
        grads += g * (sharded_other if shard_grads else full_other)
    return weights, grads, optimizer


DEEPSPEED_SUB_GROUP_ELEMENTS = 1e9
"""Elements of a ZeRO-3 optimizer sub-group, stepped one after another (deepspeed/runtime/zero/
config.py DeepSpeedZeroConfig.sub_group_size default pp_int(1e9))."""

_FP8_COPY_RECIPES = ("tensorwise", "blockwise", "mxfp8")
"""Megatron fp8 recipes under which the precision-aware optimizer still casts the gradients
(megatron/core/optimizer/optimizer_config.py use_precision_aware_optimizer_no_fp8_or_ds_fp8:
fp32 main params and an fp8_recipe other than None / 'delayed')."""


StepCast = Literal["none", "megatron", "deepspeed_flat", "deepspeed_partition"]

STEP_CAST_HBM_BYTES: dict[str, float] = {
    "none": 0.0,
    "megatron": BF16_BYTES + FP32_BYTES,
    "deepspeed_flat": BF16_BYTES + FP32_BYTES + 2 * FP32_BYTES,
    "deepspeed_partition": 2 * BF16_BYTES + BF16_BYTES + FP32_BYTES,
}
"""HBM bytes per element of the optimizer's shard that the step's cast moves (step_cast):
Megatron's `.float()` reads 2 and writes 4; DeepSpeed's FP16_Optimizer casts each parameter
(2 + 4) and concatenates the casts (4 + 4); ZeRO's step flattens the partition (2 + 2) and
casts the flat copy (2 + 4). stage.stage_optimizer_s prices them at the HBM figure."""


def step_cast(
    sp: StageParams, layout: Layout, workload: Workload, num_microbatches: int
) -> StepCast:
    """How the optimizer step turns 16-bit gradients into the fp32 ones Adam reads
    (Workload.step_grad_copies), 'none' where it reads the gradients it has:

    - 'megatron': the distributed optimizer (ZeRO 1, and ZeRO-2 as it) gives each main-param
      shard `shard_model_grad.float()`; ZeRO-0's Float16OptimizerWithFloat16Params
      `model_param.main_grad.float()` (megatron-core 0.19 optimizer/distrib_optimizer.py and
      optimizer.py _copy_model_grads_to_main_grads); not under the precision-aware optimizer,
      which hands the bf16 shard over as decoupled_grad (bf16 moments, except with the fp8
      recipes of _FP8_COPY_RECIPES), nor under Megatron-FSDP (ZeRO-3, ZeRO-2 with sharded
      gradients), whose copy returns early.
    - 'deepspeed_flat': ZeRO-0, FP16_Optimizer.step (fp16/fused_optimizer.py) builds every
      parameter's `p.grad.to(fp32)` and concatenates them (_flatten_dense_tensors) before it
      frees the 16-bit gradients.
    - 'deepspeed_partition': ZeRO-1/2 (zero/stage_1_and_2.py step) free the gradients outside
      the rank's partition, flatten the partition's and cast the flat copy to fp32; ZeRO-3
      (zero/stage3.py _prepare_fp32_grad_for_sub_group) the same one sub-group
      (DEEPSPEED_SUB_GROUP_ELEMENTS) at a time.
    fp32 gradients are stepped in place ('.float()' returns the buffer itself)."""
    mode = workload.step_grad_copies
    if mode == "none" or grad_bytes(workload) == FP32_BYTES:
        return "none"
    if mode == "deepspeed":  # ZeRO's optimizer whenever configured, also with one DP rank
        return "deepspeed_flat" if layout.zero_stage == 0 else "deepspeed_partition"
    z = zero_in_effect(sp, layout)
    accumulation = workload.dp_accumulation
    fsdp = z == 3 or (
        z == 2 and grads_sharded_between_micro_batches(layout, num_microbatches, accumulation)
    )
    decoupled = workload.optimizer_moments == "bf16" and quant_recipe(workload) not in (
        _FP8_COPY_RECIPES
    )
    return "none" if fsdp or decoupled else "megatron"


def step_grad_bytes(
    sp: StageParams, layout: Layout, workload: Workload, num_microbatches: int, grads: float
) -> float:
    """Gradient bytes alive at the peak of the optimizer step, once the activations are freed
    (Workload.step_grad_copies, step_cast): the bytes state_bytes priced (`grads`) plus the
    fp32 copies of the cast. Megatron: 4 B per element of the rank's shard (every parameter at
    ZeRO-0). DeepSpeed ZeRO-0: the per-parameter casts and their concatenation, 8 B per
    parameter over the 16-bit gradients. ZeRO-1/2: the partition's gradients (2 B; the rest
    are freed first), its flat copy (2 B) and the fp32 cast (4 B). ZeRO-3: the flat copy and
    the cast of one sub-group over the persistent 16-bit partition."""
    kind = step_cast(sp, layout, workload, num_microbatches)
    if kind == "none":
        return grads
    shard = shard_elements(sp, layout) if zero_in_effect(sp, layout) > 0 else sp.dense + sp.expert
    if kind == "deepspeed_flat":
        return grads + 2 * FP32_BYTES * shard
    if kind == "deepspeed_partition":
        if layout.zero_stage == 3:
            return grads + (BF16_BYTES + FP32_BYTES) * min(shard, DEEPSPEED_SUB_GROUP_ELEMENTS)
        return (2 * BF16_BYTES + FP32_BYTES) * shard
    return grads + FP32_BYTES * shard


def zero3_gathered_bytes(
    sp: StageParams, layout: Layout, workload: Workload | None, weight_bytes: float = BF16_BYTES
) -> float:
    """Bytes of ZeRO-3-sharded parameters a rank of this stage holds gathered at the peak, part
    of state_bytes' weights: the running unit and those gathered ahead
    (zero3_gathered_elements), or under DeepSpeed's coordinator its per-module gathering with
    the reuse window kept into the backward (deepspeed_gathered_elements); every layer where
    the framework keeps them gathered through gradient accumulation (defers_to_last_backward).
    0 without ZeRO-3 in effect, and under FSDP2's phased peak (memory_phases 'fsdp2', whose
    unsharded units fsdp2_state_bytes composes by phase)."""
    if layout.zero_stage != 3:
        return 0.0
    mode = workload.dp_accumulation if workload is not None else "last_micro_batch"
    if defers_to_last_backward(layout, mode):
        return weight_bytes * (sp.dense + sp.expert)
    if workload is not None and workload.memory_phases == "fsdp2" and fsdp2_phased(layout):
        return 0.0
    if zero_in_effect(sp, layout) != 3:
        return 0.0
    if deepspeed_coordinator(workload):
        return deepspeed_gathered_elements(sp, layout, workload) * weight_bytes
    return zero3_gathered_elements(sp, workload) * weight_bytes


def zero3_gathered_elements(sp: StageParams, workload: Workload | None) -> float:
    """Elements a ZeRO-3 stage holds gathered around its running layer: that layer and the
    units gathered ahead of it (Workload.zero3_prefetch_elements: whole units until at least
    that many elements, at least one; Megatron-FSDP's all_gather_params), at most the stage's
    layers. The units are the stage's largest layer (a dense stage's layers are one size)."""
    layer = sp.largest_layer
    ahead = 1
    prefetch = None if workload is None else workload.zero3_prefetch_elements
    if prefetch is not None and layer > 0:
        ahead = max(1, math.ceil(prefetch / layer))
    return min(1 + ahead, sp.num_layers) * layer


def megatron_fsdp_queues(layout: Layout, workload: Workload | None, num_microbatches: int) -> bool:
    """Whether the layout runs under Megatron-FSDP, whose backward queues its unsharded gradient
    buckets for their reduce-scatter (grad_queue_bytes) in place of DDP's bucket buffers: the
    framework has Megatron-FSDP's communication-unit knob (Workload.zero3_prefetch_elements;
    None elsewhere) and the plan reduces in every backward, as optim_grads_params (ZeRO-3)
    and optim_grads (ZeRO-2) do (megatron_fsdp.py _process_post_backward_gradients,
    grad_reduce_every_bprop). A ZeRO-2 plan that reduces once per step is run on the
    distributed optimizer (planner/export/launch.py megatron_fsdp_strategy), with DDP's buckets
    (accumulation.grads_sharded_between_micro_batches tells them apart)."""
    if workload is None or workload.zero3_prefetch_elements is None:
        return False
    if layout.zero_stage == 3:
        return True
    return layout.zero_stage == 2 and grads_sharded_between_micro_batches(
        layout, num_microbatches, workload.dp_accumulation
    )


def queues_grad_buckets(
    sp: StageParams, layout: Layout, workload: Workload | None, num_microbatches: int
) -> bool:
    """Whether a stage's backward queues unsharded gradient buckets (grad_queue_bytes): a stage
    with layers whose states are sharded (zero_in_effect) under Megatron-FSDP
    (megatron_fsdp_queues)."""
    return (
        megatron_fsdp_queues(layout, workload, num_microbatches)
        and zero_in_effect(sp, layout) in (2, 3)
        and sp.largest_layer > 0
        and sp.num_layers > 0
    )


MEGATRON_BUCKET_ELEMENTS = 40_000_000
"""Megatron's default gradient bucket: max(40,000,000, 1,000,000 x the DP x CP size) parameters
(megatron/training/training.py resolve_ddp_bucket_size, for DDP and Megatron-FSDP alike)."""


def megatron_bucket_elements(dp_cp: int, stated: int | None) -> float:
    """Elements of one of Megatron's gradient buckets over a DP x CP group of `dp_cp` ranks:
    the stated size (Workload.dp_bucket_elements), else MEGATRON_BUCKET_ELEMENTS' rule. The DDP
    buckets' count (stage.dp_buckets) and Megatron-FSDP's ZeRO-2 queue (grad_queue_bytes) both
    read it."""
    if stated is not None:
        return stated
    return max(MEGATRON_BUCKET_ELEMENTS, 1_000_000 * dp_cp)


def states_unit_size(workload: Workload) -> bool:
    """Whether the workload states Megatron-FSDP's suggested_communication_unit_size (twice
    Workload.zero3_prefetch_elements): a prefetch other than the field's default, Megatron-FSDP's
    own with the size unset ("Megatron's are the field defaults"). Unset, megatron_fsdp.py
    derives the queue capacity (grad_queue_bytes) and the export writes no flag."""
    prefetch = workload.zero3_prefetch_elements
    return (
        prefetch is not None
        and prefetch != Workload.model_fields["zero3_prefetch_elements"].default
    )


def queue_peak_bytes(
    bucket: float, buckets: int, layer: float, chunk: float, grad: int, freed_per_layer: float
) -> float:
    """The most a backward holds above its start in queued unsharded gradient buckets of
    `bucket` elements, at most `buckets` of them alive at once, net of the activations of the
    layers (`layer` elements each, `freed_per_layer` bytes) finished by then. A bucket's
    buffer is allocated whole when its first gradient arrives (param_and_grad_buffer.py
    fetch_bucket), so the i-th comes after (i - 1) x bucket elements of gradients, with
    floor((i - 1) x bucket / layer) layers done; the buckets hold at most the `chunk`'s
    elements. Non-decreasing in `buckets`, `layer` and `chunk`, non-increasing in the freed
    bytes: with a bucket size that does not depend on the layers (ZeRO-2's), a stage's memory
    stays non-decreasing in its layer counts."""
    out = 0.0
    for i in range(1, buckets + 1):
        done = math.floor((i - 1) * bucket / layer)
        out = max(out, min(i * bucket, chunk) * grad - done * freed_per_layer)
    return out


def grad_queue_bytes(
    sp: StageParams,
    layout: Layout,
    workload: Workload | None,
    num_microbatches: int,
    freed_per_layer: float,
) -> float:
    """Bytes a ZeRO-2 / ZeRO-3 stage's backward holds above its start in unsharded gradient
    buckets waiting for their reduce-scatter, net of the activations the finished layers freed,
    where the framework queues them (queues_grad_buckets: Megatron-FSDP, whose
    suggested_communication_unit_size sets both this queue and the prefetch).

    Each bucket's backward fills an unsharded gradient buffer in the gradient dtype
    (megatron_fsdp.py _grad_acc -> get_main_grad, param_and_grad_buffer.py fetch_bucket, then
    reduce_scatter_tensor into the shard); wait_for_previous_grad_reduce frees queued buckets
    only while their elements exceed suggested_RS_queue_capacity C, and the backward's end
    frees the rest (_root_post_backward -> GradReducePipeline.reset). During a bucket's
    backward the queue (<= C after the pops), the bucket just reduced and its own are alive:
    K = floor(C / bucket) + 2 buckets at most (queue_peak_bytes).

    - ZeRO-3 (optim_grads_params): one bucket per FSDP unit, a layer (the stage's largest L);
      C = max(1e9, 2 x the mean unit) unset (megatron_fsdp.py), 2 x max(prefetch, layer) here;
      a stated suggested_communication_unit_size (a prefetch other than the default, which
      the export writes as 2 x it) is C itself; at most the stage's layers. The
      bucket count is taken as C / L + 2, not floor(C / L) + 2: Megatron's count jumps down
      as L grows past C / k, so a stage's memory would dip when a larger layer kind joins it
      (a MoE layer beside dense ones) and the partition caps, which read memory as
      non-decreasing in each layer count, would not be exact; the envelope is at most one
      bucket above and grows with L: max(L, K L - (K - 1) A / g) with K = min(n, C / L + 2).
    - ZeRO-2 (optim_grads): no FSDP units (mcore_fsdp_adapter.py), so buckets of Megatron's
      bucket size (megatron_bucket_elements; param_and_grad_buffer.py _get_parameter_groups
      closes one at that size); C = max(1e9, bucket) unset, 2 x prefetch when stated (the
      export writes it when it is not the default). Model chunks after the first (vp > 1) are
      built with disable_bucketing (megatron/training/training.py
      per_chunk_disable_bucketing): their whole gradient is one bucket, allocated at their
      first gradient, a chunk's elements (the stage's / vp).
    0 where no such queue applies."""
    if not queues_grad_buckets(sp, layout, workload, num_microbatches):
        return 0.0
    assert workload is not None  # queues_grad_buckets
    layer, grad = sp.largest_layer, grad_bytes(workload)
    prefetch = workload.zero3_prefetch_elements
    assert prefetch is not None  # queues_grad_buckets
    unset = not states_unit_size(workload)
    if zero_in_effect(sp, layout) == 3:
        capacity = 2 * max(prefetch, layer) if unset else 2 * prefetch
        k = min(sp.num_layers, capacity / layer + 2)
        return max(layer * grad, k * layer * grad - (k - 1) * freed_per_layer)
    chunk = (sp.dense + sp.expert) / layout.vp
    bucket = megatron_bucket_elements(layout.dp * layout.cp, workload.dp_bucket_elements)
    capacity = 2 * prefetch
    if unset:
        capacity = max(capacity, bucket)  # max(1e9, bucket) (megatron_fsdp.py)
    buckets = min(math.ceil(chunk / bucket), math.floor(capacity / bucket) + 2)
    out = queue_peak_bytes(bucket, buckets, layer, chunk, grad, freed_per_layer)
    if layout.vp > 1:  # the later chunks' one bucket, before any of their layers is done
        out = max(out, chunk * grad)
    return out


def deepspeed_coordinator(workload: Workload | None) -> bool:
    """Whether ZeRO-3 runs DeepSpeed's parameter coordinator, which gathers per module and keeps
    what recurs within its reuse distance: the framework has that rule
    (Workload.zero3_max_reuse_distance; None for FSDP1 / FSDP2 / Megatron-FSDP)."""
    return workload is not None and workload.zero3_max_reuse_distance is not None


def zero3_reuse_window_elements(
    sp: StageParams, layout: Layout, workload: Workload | None
) -> float:
    """Gathered elements of a ZeRO-3 stage that stay gathered from their forward to their
    backward (Workload.zero3_max_reuse_distance, DeepSpeed's stage3_max_reuse_distance R).

    DeepSpeed releases a module's parameters after its use unless they recur before the trace
    has run R more elements (zero/partitioned_param_coordinator.py __params_to_release: from
    the next step it adds each module's ds_numel and stops once the sum reaches R). Between a
    module's forward and its backward the trace runs the stage's later modules twice (their
    forward, then their backward), three times under full recompute of every layer (each
    recomputed forward precedes its backward), c passes: a module stays when what follows it
    in the forward is under T = R / c. The kept modules are the forward's suffix from the
    first such module m*, so the window is the smallest suffix reaching T (m*'s own elements
    included), or the stage:
    - the LM head (with the final norm, and the tied word embedding it reads again at pp = 1)
      is the forward's last module: where it alone reaches T, the window is the head, exactly;
    - else the suffix ends inside the last layers, under T + one module: priced as
      min(stage, T + the largest module), at most one module over, and non-decreasing in each
      layer count (partition_caps needs that).
    0 with no such rule or no ZeRO-3."""
    if not deepspeed_coordinator(workload) or layout.zero_stage != 3:
        return 0.0
    full = sp.dense + sp.expert  # a tied head's weight is the embedding's, counted once
    if _head_is_window(sp, layout, workload):
        return min(full, sp.head + sp.tied_head)
    return min(full, _reach(layout, workload) + _module(sp))


def _reach(layout: Layout, workload: Workload | None) -> float:
    """T = R / c of zero3_reuse_window_elements: the forward elements after a module under which
    it stays gathered into its backward."""
    assert workload is not None and workload.zero3_max_reuse_distance is not None
    every_layer_recomputed = layout.recompute == "full" and layout.recompute_method != "block"
    return workload.zero3_max_reuse_distance / (3 if every_layer_recomputed else 2)


def _head_is_window(sp: StageParams, layout: Layout, workload: Workload | None) -> bool:
    """Whether the LM head (and a tied embedding it reads) alone reaches T: then it is the
    whole reuse window, whatever the stage's layers."""
    head = sp.head + sp.tied_head
    return head > 0 and head >= _reach(layout, workload)


def _module(sp: StageParams) -> float:
    """The largest unit of the stage's layers DeepSpeed gathers at once (StageParams
    largest_module; the largest layer where it is not counted)."""
    return sp.largest_module or sp.largest_layer


def deepspeed_gathered_elements(
    sp: StageParams, layout: Layout, workload: Workload | None
) -> float:
    """Peak gathered elements of a DeepSpeed ZeRO-3 stage (partitioned_param_coordinator.py).

    Each fetch prefetches whole parameters from the trace until at least
    min(DEEPSPEED_PREFETCH_BUCKET_ELEMENTS, DEEPSPEED_MAX_LIVE_ELEMENTS - gathered), so one
    parameter at least and nothing once the live count reaches the limit; priced as
    P = max(bucket, largest module). The peak is the larger of:
    - the backward's start: the reuse window W (zero3_reuse_window_elements) and the prefetch
      beyond it;
    - a fetch of one unit (the largest layer module, the embedding, the head with a tied
      embedding) and the prefetch after it.
    Where the gathered count is fixed in the layer counts (the head alone is the window, the
    embedding, the head) the live limit is taken as it runs: count + (P if count < limit
    else 0), non-decreasing as P is. Where the count grows with them (the window inside the
    layers, the largest module) it takes the envelope max(count, min(count + P, limit + P)),
    so stage memory never drops as a layer is added (partition_caps). At most the stage's
    parameters."""
    assert workload is not None
    limit = DEEPSPEED_MAX_LIVE_ELEMENTS
    module = _module(sp)
    prefetch = max(DEEPSPEED_PREFETCH_BUCKET_ELEMENTS, module)

    def fixed(count: float) -> float:
        return count + (prefetch if 0 < count < limit else 0.0)

    def growing(count: float) -> float:
        return max(count, min(count + prefetch, limit + prefetch))

    window = zero3_reuse_window_elements(sp, layout, workload)
    head_window = _head_is_window(sp, layout, workload)
    at_backward = fixed(window) if head_window else growing(window)
    units = (fixed(sp.embedding), fixed(sp.head + sp.tied_head), growing(module))
    return min(sp.dense + sp.expert, max(at_backward, *units))


def zero3_backward_gather_share(
    sp: StageParams, layout: Layout, workload: Workload | None
) -> float:
    """The share of a ZeRO-3 stage's parameters its backward gathers again: all but the window
    zero3_reuse_window_elements keeps gathered (stage.stage_dp_parts)."""
    full = sp.dense + sp.expert
    if full <= 0:
        return 1.0
    return 1.0 - zero3_reuse_window_elements(sp, layout, workload) / full


def zero_in_effect(sp: StageParams, layout: Layout) -> int:
    """The ZeRO stage whose states a rank of this stage holds: the layout's, or 0 where every
    shard group is one GPU (nothing_to_shard), where the framework keeps ZeRO-0's unsharded
    states (state_bytes, step_cast, step_grad_bytes)."""
    return 0 if nothing_to_shard(layout, moe=sp.expert > 0) else layout.zero_stage


def fsdp2_phased(layout: Layout) -> bool:
    """Whether memory_phases 'fsdp2' composes this layout's peak from FSDP2's phases: ZeRO-3,
    and torchtitan 0.3.0's ZeRO-0 without pipelining, which is fully_shard over a one-rank
    shard mesh beside the replicate axis (models/llama3/parallelize.py runs
    apply_fsdp_to_decoder always) resharded after forward (distributed/fsdp.py
    get_fsdp_reshard_after_forward_policy: 'default' is `not pp_enabled`): torch 2.14
    _fsdp_param_group.py unshard / wait_for_unshard skip the all-gather at world size 1 but
    still allocate each unit's unsharded bf16 outputs and copy the cast parameters into them,
    and reshard frees them, so its phases are ZeRO-3's with every parameter on the shard (a
    one-GPU torchtitan run is the same layout). Not modelled, refused by cost_models.rules:
    ZeRO-0 under PP ('default' keeps every unit unsharded through the step) and ZeRO-2
    ('never')."""
    return layout.zero_stage == 3 or (layout.zero_stage == 0 and layout.pp == 1)


def fsdp2_state_bytes(
    sp: StageParams, layout: Layout, num_microbatches: int, workload: Workload, sharded: float
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes at the backward-start peak of an FSDP2 step
    (Workload.memory_phases 'fsdp2', ZeRO-3), from torch/distributed/fsdp/_fully_shard:

    - FSDPParam keeps the fp32 sharded parameter (the DTensor's local shard, 4 B) and, with
      MixedPrecisionPolicy(param_dtype=bf16), an unsharded bf16 copy only between a unit's
      all-gather and its reshard: no resident bf16 weights. A one-rank mesh is the same
      layout (the shard is the whole tensor), so ZeRO-0's 18 B of nothing_to_shard does not
      apply. Adam's moments are per shard.
    - Unsharded through the loss: the unit that holds the LM head (torchtitan shards
      [norm, lm_head] with reshard_after_forward False by default; a root unit is never
      resharded after forward, _fsdp_state.py _lazy_init), with the input embedding when it
      is in that unit (tied weights: torchtitan groups embedding, norm and head;
      Workload.fsdp_root_holds_embedding). The transformer blocks are resharded after
      forward, so no layer is gathered at the loss; stages without the loss gather two
      layers in backward (the current one and the prefetched one).
    - Gradients: the sharded fp32 gradients (4 B) exist at the first micro-batch's backward
      start only when the last step left them allocated (Workload.grads_set_to_none False);
      later micro-batches accumulate into them. fsdp2_end_of_backward_bytes adds the phase at
      the end of backward where all of them are alive.
    """
    moments = moment_bytes(workload)
    loss_unit = sp.head
    if workload.fsdp_root_holds_embedding or (sp.head and sp.embedding and sp.head < sp.embedding):
        # tied weights (lm_head_params is then only the norm) or an embedding in the root unit
        loss_unit += sp.embedding
    gather = 0.0 if sp.head else min(2, sp.num_layers) * sp.largest_layer * BF16_BYTES
    weights = FP32_BYTES * sharded + BF16_BYTES * loss_unit + gather
    fresh = workload.grads_set_to_none and num_microbatches == 1
    grads = 0.0 if fresh else FP32_BYTES * sharded
    return weights, grads, moments * sharded


FSDP2_REDUCE_BYTES = FP32_BYTES
"""Bytes per unsharded element of the last unit at its reduce-scatter, beyond its sharded
gradient: the fp32 reduce-scatter input that foreach_reduce_scatter_copy_in (chunk_cat) fills
from the bf16 gradients (_fsdp_collectives.py foreach_reduce, torch 2.14). post_backward
reshards the unit (frees its bf16 parameters) before the reduce, foreach_reduce clears the bf16
gradients before it allocates the output, and at most reduce_scatter_max_input_buffers (default
1) earlier inputs stay alive (_fsdp_param_group.py): the input and the output (the new sharded
gradient, 4 B per element at a one-rank mesh) is the phase's top."""


def fsdp2_end_of_backward_bytes(
    sp: StageParams, layout: Layout, workload: Workload
) -> float:
    """Bytes at the end of an FSDP2 backward (memory_phases 'fsdp2', ZeRO-3): parameters,
    moments and every sharded fp32 gradient, plus the last unit to reduce (the input embedding
    on the first stage, the head unit on the last, a layer elsewhere; the root's embedding and
    head together under fsdp_root_holds_embedding) with its FSDP2_REDUCE_BYTES. The activations are gone by
    then; the stage's peak is the larger of this and the backward start (stage memory)."""
    sharded = shard_elements(sp, layout)
    if layout.zero_stage == 0:  # fsdp2_phased: a one-rank shard holds every parameter
        sharded = sp.dense + sp.expert
    last_unit = sp.embedding or sp.head or sp.largest_layer
    if workload.fsdp_root_holds_embedding and sp.embedding:
        last_unit = sp.embedding + sp.head
    states = (2 * FP32_BYTES + moment_bytes(workload)) * sharded
    return states + FSDP2_REDUCE_BYTES * last_unit


def shard_groups(layout: Layout) -> tuple[int, int]:
    """(dense, expert) ZeRO shard group sizes: non-expert states over the DP shard group x CP
    (HSDP: only Layout.dp_shard), expert states over the expert-DP group dp*cp*tp / (ep*etp).
    HSDP at ep 1 (rules: etp = tp) shards the experts with the rest of their block over the
    shard mesh and replicates them across the replicas (torchtitan 0.3.0 distributed/fsdp.py
    apply_fsdp_to_decoder: at ep_degree 1 a MoE block is one fully_shard on dp_mesh,
    (dp_replicate, fsdp)); with EP on the experts' own (dp_replicate, efsdp) mesh, efsdp =
    dp_shard*cp*tp / ep (parallel_dims.py build_mesh). Either way their group is
    dp_shard*cp*tp / (ep*etp), not all of dp."""
    dense = layout.shard_dp * layout.cp
    expert = max(1, layout.shard_dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    return dense, expert


def shard_elements(sp: StageParams, layout: Layout) -> float:
    """Elements of one rank's ZeRO shard of a stage's parameters: the dense ones over the DP
    shard group x CP, the expert ones over the expert-DP group (shard_groups; Megatron's
    distributed optimizer shards expert states over the expert data-parallel group,
    distrib_optimizer.py, as FSDP2 with EP shards experts over the mesh beside EP). Whatever a
    rank keeps per shard element (optimizer states, sharded gradients, the step's casts) and
    the step's passes over its shard (stage.stage_optimizer_s) count these."""
    dense_shard, expert_shard = shard_groups(layout)
    return sp.dense / dense_shard + sp.expert / expert_shard


def nothing_to_shard(layout: Layout, moe: bool) -> bool:
    """Every ZeRO shard group is one GPU (the expert group counts only for an MoE model): any
    ZeRO stage is ZeRO-0."""
    dense, expert = shard_groups(layout)
    return dense == 1 and (expert == 1 or not moe)


@dataclass(frozen=True, slots=True)
class ActivationTensor:
    """One tensor a layer keeps from its forward for its backward, per token of the micro-batch
    on one GPU: its width in elements, bytes per element (its dtype) and the backward that reads
    it. Summed by layer_activation_bytes; the table per framework and recompute mode is in
    docs/cost_model.md#activation-tensors."""

    name: str
    elements: float
    bytes_per_element: float
    needed_by: str

    @property
    def bytes_per_token(self) -> float:
        return self.elements * self.bytes_per_element


MASK_BYTES = 1  # torch.bool / uint8 dropout mask


def gemm_input_bytes(workload: Workload) -> float:
    """Bytes per element of a saved GEMM input: bf16, or under fp8 with Megatron-Core's
    accounting (selective_recompute "attention") the fp8 copy Transformer Engine casts for the
    GEMM and saves for wgrad in place of the bf16 one (te/pytorch/module/linear.py and
    layernorm_linear.py save the quantized `inputmat` / `ln_out`). torchtitan's torchao
    Float8Linear saves the high-precision input and re-casts it in backward
    (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args: `save_for_backward(input_hp,
    weight_hp_t)`), so it stays bf16. TE keeps only the column-wise copy the wgrad reads
    (linear.py: `inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)`): fp8 1 B,
    mxfp8 1 B + an E8M0 scale per 32, nvfp4 0.5 B + an E4M3 scale per 16."""
    if not saves_quantized_inputs(workload) or workload.precision not in LOW_PRECISION:
        return BF16_BYTES
    if workload.precision == "mxfp8":
        return FP8_BYTES + MXFP8_SCALE_BYTES
    if workload.precision == "nvfp4":
        return FP4_BYTES + NVFP4_SCALE_BYTES
    return float(FP8_BYTES)


E5M6_BYTES = 12 / 8
"""DeepSeek-V3's E5M6 cache of the attention output: 1 sign + 5 exponent + 6 mantissa bits."""


def swiglu_input_bytes(model: ModelSpec, workload: Workload) -> float:
    """Bytes per element of a kept activation-function input (the fc1 output): bf16, or fp8
    under Workload.activation_func_fp8_input_store, which Megatron-Core allows for SwiGLU only
    (TransformerConfig.__post_init__; fused_bias_swiglu.py saves `input.to(torch.float8_e4m3fn)`
    and casts it back in backward)."""
    fp8 = workload.activation_func_fp8_input_store and model.gated_mlp
    return 1.0 if fp8 else BF16_BYTES


def unfused_score_tensors(
    model: ModelSpec, workload: Workload, layout: Layout
) -> list[ActivationTensor]:
    """What unfused attention (Workload.attention_kernel "unfused") keeps of its score matrix
    per token: a row of seq scores for each of this TP rank's heads. The softmax output (2 bytes,
    read by the softmax backward and, without dropout, by BMM2's backward); with dropout
    (ModelSpec.hidden_dropout: Megatron's attention dropout 0.1 goes with it) also the dropout
    mask (1) and the dropped probabilities BMM2 saves (2): Korthikanti et al. 2022 sec. 4.1,
    the 5as/h term of 34 + 5as/h bytes per sbh, which selective recompute of the core attention
    (core_attn) drops."""
    row = model.num_attention_heads / layout.tp * workload.seq_len
    out = [ActivationTensor("softmax_out", row, BF16_BYTES, "softmax backward, BMM2 backward")]
    if model.hidden_dropout:
        out += [
            ActivationTensor("attention_dropout_mask", row, MASK_BYTES, "dropout backward"),
            ActivationTensor("attention_dropout_out", row, BF16_BYTES, "BMM2 backward"),
        ]
    return out


def _attention_tensors(
    model: ModelSpec, workload: Workload, layout: Layout, h_local: float, modules: tuple[str, ...]
) -> list[ActivationTensor]:
    """Attention block: norm, QKV (or MLA latents and up-projections), flash attention, output
    projection, residual dropout."""
    tp = layout.tp
    nh = model.num_attention_heads
    g = gemm_input_bytes(workload)
    out = [
        ActivationTensor("input_norm_in", h_local, BF16_BYTES, "input norm backward"),
    ]
    # output-discarding checkpoint, recomputed from its input where the norm is a module of its
    # own (compute.recomputed_norms: not fused into TE's linear_qkv)
    if "layernorm" not in modules or not recomputed_norms(model, workload, False)[0]:
        out.append(ActivationTensor("input_norm_out", h_local, g, "QKV / down-projection wgrad"))
    mla = model.mla
    if mla is None:
        d = model.attn_head_dim
        qkv = (nh / tp + 2 * max(model.kv_heads, tp) / tp) * d
        out.append(ActivationTensor("q_k_v", qkv, BF16_BYTES, "flash-attention backward"))
        if workload.fused_qkv and not workload.fused_elementwise:
            # Eager fused wqkv (torchtitan llama3 fuse_qkv): q, k, v are views of one output;
            # the rotary embedding returns new Q and K tensors (type_as after the complex
            # multiply, which saves only the frequencies), and SDPA saves those and V, a view
            # that keeps the whole fused output alive (torch SavedVariable holds the storage).
            rotary = (nh + max(model.kv_heads, tp)) / tp * d
            out.append(ActivationTensor("rotary_q_k", rotary, BF16_BYTES, "SDPA backward"))
        d_v = d
    else:
        q_lora = mla.q_lora_rank or 0
        # Latents on every TP rank (down-projections are replicated, Megatron-Core MLA).
        out += [
            ActivationTensor(
                "mla_latents",
                q_lora + mla.kv_lora_rank + mla.qk_rope_head_dim,
                BF16_BYTES,
                "q/kv latent norm backward, rotary key",
            ),
            ActivationTensor(
                "mla_latents_normed", q_lora + mla.kv_lora_rank, g, "q/kv up-projection wgrad"
            ),
        ]
        if "mla_up_proj" not in modules:  # output-discarding checkpoint of the up-projections
            qkv = nh / tp * (2 * (mla.qk_nope_head_dim + mla.qk_rope_head_dim) + mla.v_head_dim)
            out.append(ActivationTensor("q_k_v", qkv, BF16_BYTES, "flash-attention backward"))
        d_v = mla.v_head_dim
    attn_out = nh * d_v / tp
    if workload.attention_output_store == "e5m6":
        # DeepSeek-V3 report sec. 3.3.3 (1): the output projection's input, which the attention
        # backward also reads, is cached once in a customized E5M6 format (1 + 5 + 6 bits).
        out.append(
            ActivationTensor(
                "attn_out_e5m6", attn_out, E5M6_BYTES, "attention backward (O), projection wgrad"
            )
        )
    else:
        out.append(
            ActivationTensor(
                "attn_out", attn_out, BF16_BYTES, "flash-attention backward (O), projection wgrad"
            )
        )
        if g != BF16_BYTES:
            out.append(ActivationTensor("attn_out_fp8", attn_out, g, "projection wgrad (fp8 copy)"))
    if "core_attn" not in modules:  # core_attn keeps only Q, K, V and reruns the kernel
        if workload.attention_kernel == "unfused":
            out += unfused_score_tensors(model, workload, layout)
        else:  # FlashAttention keeps the row log-sum-exp [b, heads, s] in fp32 (Dao 2023 Alg. 1)
            lse = ActivationTensor("softmax_lse", nh / tp, FP32_BYTES, "flash-attention backward")
            out.append(lse)
    if model.hidden_dropout:
        out.append(ActivationTensor("attn_dropout_mask", h_local, MASK_BYTES, "dropout backward"))
    return out


def _mlp_tensors(
    model: ModelSpec,
    workload: Workload,
    layout: Layout,
    h_local: float,
    modules: tuple[str, ...],
    *,
    is_moe: bool,
) -> list[ActivationTensor]:
    """MLP block: norm, dense MLP or router + routed experts + shared experts, dropout."""
    tp = layout.tp
    g = gemm_input_bytes(workload)
    a = swiglu_input_bytes(model, workload)
    mats = mlp_matrices(model)
    out = [ActivationTensor("mlp_norm_in", h_local, BF16_BYTES, "pre-MLP norm backward")]
    if "layernorm" not in modules or not recomputed_norms(model, workload, is_moe)[1]:
        out.append(ActivationTensor("mlp_norm_out", h_local, g, "fc1 / router wgrad"))
    if not is_moe:
        assert model.ffn_hidden_size is not None
        if "mlp" not in modules:  # checkpointed MLP keeps only its input (mlp_norm_out)
            ffn = model.ffn_hidden_size / tp
            out += [
                ActivationTensor("fc1_out", (mats - 1) * ffn, a, "activation backward"),
                ActivationTensor("act_out", ffn, g, "fc2 wgrad"),
            ]
            out += _eager_gate_tensors(model, workload, ffn)
            out += _clamp_tensors(model, ffn)
    elif "moe" not in modules:  # checkpointed MoE layer keeps only its input
        moe = model.moe
        assert moe is not None
        fe = moe.expert_ffn_hidden_size
        # Token rows this GPU's experts hold after dispatch (top_k copies, split over TP unless
        # the experts use ETP); the router sees the sequence-parallel shard of the tokens.
        rows = moe.top_k * layout.etp / tp
        router_tokens = 1 / tp if layout.sequence_parallel else 1.0
        out += [
            ActivationTensor(
                "router_logits_probs",
                2 * moe.num_experts * router_tokens,
                FP32_BYTES,
                "router softmax / top-k backward",
            ),
            ActivationTensor("permuted_tokens", rows * model.hidden_size, g, "expert fc1 wgrad"),
            ActivationTensor(
                "expert_fc1_out",
                rows * (mats - 1) * fe / layout.etp,
                a,
                "expert activation backward",
            ),
        ]
        if "moe_act" not in modules:  # output-discarding checkpoint of the expert activation
            out.append(ActivationTensor("expert_act_out", rows * fe / layout.etp, g, "fc2 wgrad"))
            out += _clamp_tensors(model, rows * fe / layout.etp)  # inside that checkpoint
        out += _eager_gate_tensors(model, workload, rows * fe / layout.etp)
        if not workload.fused_elementwise:
            # eager score multiply: both operands require grad, so autograd keeps the expert
            # output (the step of bench/device_train_steps.py multiplies in bf16; torchtitan
            # 0.3 multiplies an fp32 copy, 2 B more, not counted)
            out.append(
                ActivationTensor(
                    "expert_out", rows * model.hidden_size, BF16_BYTES, "score multiply backward"
                )
            )
        if moe.num_shared_experts and "shared_experts" not in modules:
            fs = moe.num_shared_experts * fe / tp
            out += [
                ActivationTensor(
                    "shared_fc1_out", (mats - 1) * fs, a, "shared activation backward"
                ),
                ActivationTensor("shared_act_out", fs, g, "shared fc2 wgrad"),
            ]
            out += _clamp_tensors(model, fs)
    if model.hidden_dropout:
        out.append(ActivationTensor("mlp_dropout_mask", h_local, MASK_BYTES, "dropout backward"))
    return out


def _clamp_tensors(model: ModelSpec, width: float) -> list[ActivationTensor]:
    """ModelSpec.activation_clamp: each clamp saves its input for its backward (torch's
    clamp_backward masks by it), a view of the fc1 output, which so stays alive beside the
    clamped copy the activation saves (Megatron's cat of the clamped halves, the fused
    quick_geglu's saved input; the eager chain's clamped halves): one more bf16 tensor of the
    fc1 output's size per gated activation (compute.CLAMP_ELEMS). A checkpointed activation
    (moe_act, mlp) keeps only its input, as without the clamp."""
    if model.activation_clamp is None or not model.gated_mlp:
        return []
    return [ActivationTensor("fc1_out_unclamped", 2 * width, BF16_BYTES, "the clamps' backward")]


def _eager_gate_tensors(
    model: ModelSpec, workload: Workload, width: float
) -> list[ActivationTensor]:
    """Eager SwiGLU `w2(silu(w1(x)) * w3(x))` (fused_elementwise False): silu saves its input
    (fc1_out) and the gate multiply saves both of its inputs, so silu's output is kept besides
    fc1_out and act_out (derivatives.yaml: mul saves `other` for self's gradient and `self` for
    other's); a fused SwiGLU kernel (Transformer Engine, torch.compile) recomputes it."""
    if workload.fused_elementwise or not model.gated_mlp:
        return []
    return [ActivationTensor("silu_out", width, BF16_BYTES, "gate multiply backward")]


def layer_activation_tensors(
    model: ModelSpec, workload: Workload, layout: Layout, *, is_moe: bool, recompute: str
) -> tuple[ActivationTensor, ...]:
    """The tensors one layer keeps per token for backward under `recompute` on one GPU.

    Megatron-Core (workload.selective_recompute "attention"): none keeps every tensor of
    Korthikanti et al. 2022 Table 2 that flash attention leaves (no s x s scores: its softmax
    statistics instead); selective drops what layout.selective_modules recompute
    (TransformerConfig.recompute_modules, default core_attn); full keeps the layer input.
    Megatron-DeepSpeed ("unfused_attention"): the same tensors, selective dropping the core
    attention's only where it runs unfused (compute.selective_modules).
    torchtitan (workload.selective_recompute "every_other_matmul"): its op-level selective
    policy on dense layers (_every_other_matmul_tensors); full AC keeps the block input.
    """
    h = model.hidden_size
    h_local = h / layout.tp if layout.sequence_parallel else h
    if recompute == "full":
        return (ActivationTensor("layer_input", h_local, BF16_BYTES, "checkpoint: rebuild"),)
    op_level = recompute == "selective" and workload.selective_recompute == "every_other_matmul"
    modules = selective_modules(workload, layout) if recompute == "selective" else ()
    kept = _attention_tensors(model, workload, layout, h_local, modules) + _mlp_tensors(
        model, workload, layout, h_local, modules, is_moe=is_moe
    )
    if op_level:
        saved = (
            _every_other_matmul_moe_tensors(model, layout, h_local)
            if is_moe
            else _every_other_matmul_tensors(model, layout, h_local)
        )
        # never more than keeping everything (more recompute never needs more memory)
        if sum(x.bytes_per_token for x in saved) < sum(x.bytes_per_token for x in kept):
            return saved
    return tuple(kept)


def layer_activation_bytes(
    model: ModelSpec, workload: Workload, layout: Layout, *, is_moe: bool, recompute: str
) -> float:
    """Bytes one layer keeps for backward per micro-batch on one GPU: the sum of
    layer_activation_tensors over the micro-batch's tokens (Korthikanti 2022, sec. 4)."""
    t = tokens_per_gpu(workload, layout)
    tensors = layer_activation_tensors(model, workload, layout, is_moe=is_moe, recompute=recompute)
    return t * sum(x.bytes_per_token for x in tensors)


def _every_other_matmul_tensors(
    model: ModelSpec, layout: Layout, h_local: float
) -> tuple[ActivationTensor, ...]:
    """What torchtitan's op-level selective checkpointing keeps for a dense layer.

    Saved (compute.recomputed_matmuls has the policy; torchtitan parallelize_llama.py
    `_custom_policy` and `_save_list`): the block input, the outputs of wq, wv, w1 and w2, the
    SDPA output with its fp32 log-sum-exp, and, under TP, the outputs of the two
    reduce-scatters. Everything else is recomputed.
    """
    assert model.ffn_hidden_size is not None
    mlp = _saved_mlp_outputs(model, model.ffn_hidden_size / layout.tp, "")
    return _saved_attention_outputs(model, layout, h_local) + mlp + _saved_scatters(model, layout)


def _saved_attention_outputs(
    model: ModelSpec, layout: Layout, h_local: float
) -> tuple[ActivationTensor, ...]:
    """The block input and the attention's saved outputs under torchtitan's op-level policy."""
    tp = layout.tp
    q = model.num_attention_heads * model.attn_head_dim / tp
    v = max(model.kv_heads, tp) / tp * model.attn_head_dim
    return (
        ActivationTensor("layer_input", h_local, BF16_BYTES, "checkpoint: rebuild"),
        ActivationTensor("wq_out", q, BF16_BYTES, "recomputed rotary / SDPA backward"),
        ActivationTensor("wv_out", v, BF16_BYTES, "SDPA backward"),
        ActivationTensor("sdpa_out", q, BF16_BYTES, "SDPA backward, wo wgrad"),
        ActivationTensor("sdpa_lse", model.num_attention_heads / tp, FP32_BYTES, "SDPA backward"),
    )


def _saved_mlp_outputs(model: ModelSpec, ffn: float, prefix: str) -> tuple[ActivationTensor, ...]:
    """A (shared-expert) MLP's saved w1 and w2 outputs, w2's partial sums before the
    reduce-scatter when tp > 1."""
    return (
        ActivationTensor(f"{prefix}w1_out", ffn, BF16_BYTES, "activation backward"),
        ActivationTensor(f"{prefix}w2_out", model.hidden_size, BF16_BYTES, "recomputed residual"),
    )


def _saved_scatters(model: ModelSpec, layout: Layout) -> tuple[ActivationTensor, ...]:
    """Under TP the outputs of the block's two reduce-scatters (saved communication)."""
    if layout.tp == 1:
        return ()
    width = 2 * model.hidden_size / layout.tp
    return (ActivationTensor("reduce_scatter_out", width, BF16_BYTES, "residual adds"),)


def _every_other_matmul_moe_tensors(
    model: ModelSpec, layout: Layout, h_local: float
) -> tuple[ActivationTensor, ...]:
    """What torchtitan's op-level selective checkpointing keeps for a MoE layer (torchtitan
    0.3.0 distributed/activation_checkpoint.py SelectiveAC, compute.recomputed_moe_matmuls):
    the attention's as in a dense layer; the router's top-k (aten.topk is saved: fp32 scores and
    int64 expert ids of each token, the router's tokens being the sequence-parallel shard);
    with EP the outputs of the dispatch and combine all-to-alls (all_to_all_single is saved:
    the token rows this GPU's experts hold, bf16); the shared experts' w1 and w2 outputs. The
    routed experts' grouped GEMMs, their activation and the permutations are recomputed."""
    moe = model.moe
    assert moe is not None
    router_tokens = 1 / layout.tp if layout.sequence_parallel else 1.0
    rows = moe.top_k * layout.etp / layout.tp
    out = _saved_attention_outputs(model, layout, h_local) + (
        ActivationTensor(
            "router_topk", moe.top_k * router_tokens, FP32_BYTES + 8, "expert score backward"
        ),
    )
    if layout.ep > 1:
        width = rows * model.hidden_size
        out += (
            ActivationTensor("dispatched_tokens", width, BF16_BYTES, "expert recompute"),
            ActivationTensor("combined_tokens", width, BF16_BYTES, "score multiply backward"),
        )
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.expert_ffn_hidden_size / layout.tp
        out += _saved_mlp_outputs(model, shared, "shared_")
    return out + _saved_scatters(model, layout)


LOGIT_BYTES = {"fused": BF16_BYTES + 4, "eager_fp32": 3 * 4, "flash_attn": 2 * BF16_BYTES}
"""Peak bytes per logit on the last stage while the loss runs.

fused: Megatron's vocab-parallel cross-entropy keeps the bf16 logits and one fp32 copy that it
turns into the softmax in place and reuses as the gradient (megatron/core/tensor_parallel/
cross_entropy.py). eager_fp32: `F.cross_entropy(logits.float(), ...)` in eager PyTorch saves
the fp32 log-softmax output for backward; its backward holds that output, the fp32 gradient
coming from nll_loss and the fp32 gradient it produces at the same time (3 x 4 B; the bf16
logits are freed before backward, torchtitan `del pred`). flash_attn: flash-attn's
CrossEntropyLoss (flash_attn/losses/cross_entropy.py, v1.0.9 and v2) runs its kernel on the
bf16 logits, saving them with an fp32 log-sum-exp and loss per token (csrc/xentropy
xentropy_kernel.cu host_softmax_xentropy), and its backward writes the gradient into
`at::empty_like(logits)` (inplace_backward False, the default): two bf16 logit-sized tensors
(the per-token fp32 pair is left out)."""


LOSS_PARALLEL_BYTES_PER_LOGIT = 4 * 4
"""Peak bytes per logit of eager cross-entropy under TP (torchtitan enables PyTorch's
`loss_parallel()` whenever tp > 1). Its backward (torch/distributed/tensor/parallel/loss.py,
`_nll_loss_and_log_softmax_backward`) evaluates `(zeros_like(x) + exp(x)) * grad_output` on the
vocab-sharded fp32 log-softmax output x, so x, the zero/one-hot tensor, their sum and the product
are four fp32 logit-sized tensors alive at once (the forward peaks lower, at bf16 logits + three
fp32 tensors = 14 B)."""


MTP_SAVED_BYTES = 2 + 2 + 4 + 2
"""Bytes per element of [tokens / sequence-parallel shard, hidden] one multi-token-prediction
depth saves for backward beyond its transformer layer (megatron/core/transformer/
multi_token_prediction.py _concat_embeddings, _postprocess): the bf16 inputs of enorm and hnorm,
eh_proj's [., 2h] input (a column-parallel Linear under sequence parallelism saves the shard it
all-gathers) and the final_layernorm's input."""


def logits_bytes(model: ModelSpec, workload: Workload, layout: Layout) -> float:
    """Peak loss-related bytes for one micro-batch's logits on the last stage (LOGIT_BYTES).

    Under multi-token prediction each depth's loss runs in the forward before the main one
    (GPTModel._postprocess calls process_mtp_loss before the output layer's logits), so the
    1 + mtp_num_layers losses' saved logits are alive together, with each depth's MTP_SAVED_BYTES
    (its transformer layer's activations are counted as a layer's, pipeline.with_mtp)."""
    per_logit = LOGIT_BYTES[workload.cross_entropy]
    if workload.cross_entropy == "eager_fp32" and layout.tp > 1:
        per_logit = LOSS_PARALLEL_BYTES_PER_LOGIT
    if workload.logits_alive_in_backward and workload.cross_entropy == "eager_fp32":
        # the step still references the bf16 logits while the loss backward runs
        per_logit += BF16_BYTES
    t = tokens_per_gpu(workload, layout)
    depth = model.mtp_num_layers
    logits = (1 + depth) * t * (model.vocab_size or 0) / layout.tp * per_logit
    if not depth:
        return logits
    rows = t / (layout.tp if layout.sequence_parallel else 1)
    return logits + depth * rows * model.hidden_size * MTP_SAVED_BYTES


def kept_outputs_bytes(
    model: ModelSpec, workload: Workload, layout: Layout, num_microbatches: int
) -> float:
    """bf16 logits of every micro-batch that the last stage keeps until the step ends.

    PyTorch's pipeline stages append each forward output to `output_chunks` so that
    `schedule.step()` can return the merged output (torch/distributed/pipelining/stage.py,
    `forward_one_chunk`); the last stage's outputs are the logits, so its loss backward of the
    last micro-batch runs with all `m` of them alive (pytorch#138504, pytorch#159251; optional
    from `step(return_outputs=False)`, pytorch#165822, Oct 2025). The loss itself is charged by
    logits_bytes. Megatron frees each output after its send/loss, so it keeps none.
    """
    if not workload.pp_keeps_outputs or layout.pp == 1:
        return 0.0
    tokens = tokens_per_gpu(workload, layout)
    return num_microbatches * tokens * (model.vocab_size or 0) / layout.tp * BF16_BYTES


def buffer_bytes(
    model: ModelSpec, workload: Workload, layout: Layout, num_microbatches: int
) -> float:
    """Communication buffers: gradient buckets, TP all-gather and EP dispatch staging.

    DeepSpeed's (Workload.dp_sync 'deepspeed') gradient bucket is ZeRO's ipg buffer, allocated
    whatever the DP degree: with contiguous_gradients ZeRO-1/2 allocate a reduce_bucket_size
    buffer in the 16-bit dtype when a backward's first gradient arrives, and a second one under
    overlap_comm, which the deepspeed export sets without pipelining (zero/stage_1_and_2.py
    setup_buckets: "double buffers to avoid data access conflict when overlap_comm is
    enabled"; under a PipelineModule the engine turns overlap_comm off, engine.py
    _configure_zero_optimizer), and release them at the epilogue; ZeRO-3 allocates its one
    buffer at initialisation and keeps it
    (zero/stage3.py `# IPG`). Without ZeRO the engine all-reduces after the backward
    (engine.py allreduce_gradients), when the activations are freed, so nothing is added at
    the peak. Megatron-FSDP (megatron_fsdp_queues) has no DDP bucket buffers: its unsharded
    gradient buckets are the backward's queue, charged by grad_queue_bytes."""
    t = tokens_per_gpu(workload, layout)
    if workload.dp_sync == "deepspeed":
        bucket = workload.dp_bucket_elements or DEEPSPEED_BUCKET_ELEMENTS
        # ZeRO-0: none at the peak; ZeRO-3 and pipelined ZeRO-1/2: one; else overlap_comm's two
        zero = layout.zero_stage
        buffers = 0 if zero == 0 else 1 if zero == 3 or layout.pp > 1 else 2
        total = buffers * bucket * grad_bytes(workload)
    elif megatron_fsdp_queues(layout, workload, num_microbatches):
        total = 0.0  # Megatron-FSDP's gradient buckets are its queue (grad_queue_bytes)
    else:
        total = DP_BUCKET_ELEMENTS * grad_bytes(workload) if layout.dp * layout.cp > 1 else 0.0
    if layout.tp > 1 and layout.sequence_parallel:
        total += 2 * t * model.hidden_size * BF16_BYTES  # gathered input of the current GEMM
    if model.moe is not None and layout.ep > 1:
        rows = t * model.moe.top_k / layout.tp
        # dispatch and combine staging; DeepEP dispatches in fp8 when training in fp8 and
        # combines in bf16 (DeepSeek-V3 report sec. 3.3.2; as stage.ep_exchange_s prices it)
        fp8 = (
            workload.moe_dispatcher == "deepep"
            and workload.ep_dispatch_fp8
            and workload.precision in LOW_PRECISION
        )
        total += rows * model.hidden_size * ((1 if fp8 else BF16_BYTES) + BF16_BYTES)
    return total


def recompute_label(layout: Layout, workload: Workload) -> str:
    """The recompute setting in words: mode, Megatron modules or full-recompute method."""
    lo = layout
    if lo.recompute == "selective" and workload.selective_recompute != "every_other_matmul":
        return "selective:" + ("+".join(selective_modules(workload, lo)) or "nothing")
    if lo.recompute == "full" and lo.recompute_method is not None:
        return f"full:{lo.recompute_method}{lo.recompute_num_layers or 1}"
    return lo.recompute


def memory_config(
    model: ModelSpec, workload: Workload, layout: Layout
) -> tuple[str, str, bool, bool]:
    """(accounting, recompute, interleaved, MoE): what decides which tensors the memory model
    counts. The accounting is the workload's framework semantics (selective_recompute
    "attention": Megatron-Core; "every_other_matmul": torchtitan)."""
    op_level = workload.selective_recompute == "every_other_matmul"
    accounting = "torchtitan" if op_level else "megatron"
    return accounting, recompute_label(layout, workload), layout.vp > 1, model.moe is not None


MEASURED_MEMORY_CONFIGS: frozenset[tuple[str, str, bool, bool]] = frozenset(
    {
        # torchtitan-202412-h100-llama31-8b-8gpu-fsdp(-compile), -8b-128gpu-fsdp,
        # torchtitan-trainy-h200-llama31-8b-64gpu
        ("torchtitan", "selective", False, False),
        # torchtitan-202412-h100-llama31-8b-8gpu-cp{1,4,8}-*, -70b-256gpu-2d(-asynctp),
        # -405b-512gpu-cp{1,2}-*
        ("torchtitan", "full", False, False),
        # torchtitan-202412-h100-llama31-405b-512gpu-interleaved-1f1b
        ("torchtitan", "full", True, False),
    }
)
"""Configurations (memory_config) that a run with a measured peak memory in
../shared/data/published_runs.yaml covers, each within 10 % (docs/accuracy.md);
tests/unit/cost_models/test_activation_tensors.py re-derives this set from the data file."""


def memory_validated(model: ModelSpec, workload: Workload, layout: Layout) -> bool:
    """Whether a measured run covers this configuration's memory accounting."""
    return memory_config(model, workload, layout) in MEASURED_MEMORY_CONFIGS
