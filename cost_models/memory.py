"""Memory per GPU per pipeline stage: weights, gradients, optimizer, activations, buffers.

States (mixed-precision Adam, Rajbhandari et al. 2020 "ZeRO" sec. 3): bf16 weights 2 B, fp32 main
gradients 4 B (Megatron accumulates in fp32 under bf16), fp32 master + Adam m + v 12 B per
parameter. ZeRO-1 shards the 12 B, ZeRO-2 also the gradients, ZeRO-3 / FSDP shards everything and
keeps fp32 sharded parameters (4 + 4 + 8 = 16 B / shard group) plus unsharded bf16 copies of the
layers being computed. Non-expert states shard over DP x CP; expert states over the expert-DP
group dp*cp*tp / (ep*etp) (Megatron-Core MoE parallel folding).

Activations per layer per micro-batch follow Korthikanti et al. 2022 (arXiv 2205.05198) sec. 4,
written per stored tensor so that GQA, MLA, gated MLPs and MoE are covered, with flash attention
(no s x s scores are stored). Derivations: docs/cost_model.md#memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import params as P
from .compute import tokens_per_gpu
from .specs import Layout, ModelSpec, Workload

GIB = 2.0**30
BF16_BYTES = 2
CUDA_CONTEXT_GIB = 0.75
"""CUDA context, cuBLAS/cuDNN workspaces and NCCL channel buffers (torch reports ~0.5-1 GiB)."""
ALLOCATOR_OVERHEAD = 0.10
"""PyTorch caching-allocator fragmentation: reserved / allocated on dynamic memory."""
DP_BUCKET_BYTES = 2 * 40e6 * 4
"""Megatron DDP: two in-flight 40M-element fp32 gradient buckets."""


@dataclass(frozen=True, slots=True)
class StageParams:
    """Parameters one GPU of a pipeline stage holds (after TP / EP split, before ZeRO)."""

    dense: float
    expert: float
    largest_layer: float  # for ZeRO-3 gather buffers
    num_layers: int


def stage_params(
    model: ModelSpec, layout: Layout, num_dense: int, num_moe: int, stage: int
) -> StageParams:
    """Parameters of a stage with num_dense dense and num_moe MoE layers (plus embedding/head)."""
    attn = P.attention_params(model) / layout.tp
    dense = expert = largest = 0.0
    if num_dense:
        layer = attn + P.dense_mlp_params(model) / layout.tp
        dense += num_dense * layer
        largest = layer
    if num_moe:
        moe = model.moe
        assert moe is not None
        routed = moe.num_experts * P.expert_params(model) / (layout.ep * layout.etp)
        shared = moe.num_shared_experts * P.expert_params(model) / layout.tp
        non_expert = attn + shared + model.hidden_size * moe.num_experts
        dense += num_moe * non_expert
        expert += num_moe * routed
        largest = max(largest, non_expert + routed)
    if stage == 0:
        dense += P.embedding_params(model) / layout.tp
    if stage == layout.pp - 1:
        head = P.lm_head_params(model)
        if model.tied_embeddings and layout.pp > 1:
            head += (model.vocab_size or 0) * model.hidden_size  # its own copy, grads tied
        dense += head / layout.tp
    return StageParams(dense, expert, largest, num_dense + num_moe)


def state_bytes(
    sp: StageParams, layout: Layout, num_microbatches: int = 1
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU under the layout's ZeRO stage.

    ZeRO-2 frees gradients after their reduce-scatter only when a step has one micro-batch:
    with accumulation, Megatron, FSDP's no_sync and PyTorch pipelining keep an unsharded buffer
    and reduce once per step (DeepSpeed's per-micro-batch reduce-scatter is not modelled).
    """
    dense_shard = layout.shard_dp * layout.cp  # HSDP: only the shard group (Layout.dp_shard)
    expert_shard = max(1, layout.dp * layout.cp * layout.tp // (layout.ep * layout.etp))
    sharded = sp.dense / dense_shard + sp.expert / expert_shard
    full = sp.dense + sp.expert
    z = layout.zero_stage
    if z == 3:
        # fp32 sharded params double as master weights; gather buffers hold <= 2 layers in bf16.
        gather = min(2, sp.num_layers) * sp.largest_layer * BF16_BYTES
        return 4 * sharded + gather, 4 * sharded, 8 * sharded
    weights = BF16_BYTES * full
    grads = 4 * (sharded if z == 2 and num_microbatches == 1 else full)
    optimizer = 12 * (sharded if z >= 1 else full)
    return weights, grads, optimizer


def layer_activation_bytes(
    model: ModelSpec, workload: Workload, layout: Layout, *, is_moe: bool, recompute: str
) -> float:
    """Bytes one layer keeps for backward per micro-batch on one GPU (Korthikanti 2022, sec. 4)."""
    t = tokens_per_gpu(workload, layout)
    tp = layout.tp
    h = model.hidden_size
    h_local = h / tp if layout.sequence_parallel else h
    if recompute == "full":
        return t * h_local * BF16_BYTES  # only the layer input is checkpointed
    nh = model.num_attention_heads
    mla = model.mla
    if mla is None:
        d = model.attn_head_dim
        qkv = (nh / tp + 2 * max(model.kv_heads, tp) / tp) * d
        attn_out = nh * d / tp
    else:
        qkv = nh / tp * (2 * (mla.qk_nope_head_dim + mla.qk_rope_head_dim) + mla.v_head_dim)
        qkv += mla.kv_lora_rank + mla.qk_rope_head_dim + (mla.q_lora_rank or 0)
        attn_out = nh * mla.v_head_dim / tp
    mats = P.mlp_matrices(model)
    if is_moe:
        moe = model.moe
        assert moe is not None
        fe = moe.expert_ffn_hidden_size
        rows = moe.top_k * layout.etp / tp
        up = (
            rows * (h + (mats - 1) * fe / layout.etp)
            + moe.num_shared_experts * (mats - 1) * fe / tp
        )
        act = rows * fe / layout.etp + moe.num_shared_experts * fe / tp
        up += 2 * moe.num_experts  # router logits and probabilities in fp32
    else:
        assert model.ffn_hidden_size is not None
        up = (mats - 1) * model.ffn_hidden_size / tp
        act = model.ffn_hidden_size / tp
    op_level = (
        recompute == "selective"
        and workload.selective_recompute == "every_other_matmul"
        and not is_moe
    )
    residuals = 2 * h_local  # inputs of the two norms
    norm_outs = 2 * h_local  # inputs of the QKV and MLP-up GEMMs
    elements = residuals + qkv + up
    if recompute == "none" or op_level:
        elements += norm_outs + attn_out + act
    if op_level:  # never more than keeping everything (more recompute never needs more memory)
        elements = min(elements, _every_other_matmul_elements(model, layout, h_local))
    # selective: norms, attention core and activation functions are recomputed in backward
    return t * elements * BF16_BYTES


def _every_other_matmul_elements(model: ModelSpec, layout: Layout, h_local: float) -> float:
    """Per-token elements torchtitan's op-level selective checkpointing keeps for a dense layer.

    Saved (compute.recomputed_matmuls has the policy): the block input, the outputs of wq, wv,
    w1 and w2, the SDPA output (its fp32 log-sum-exp is negligible) and, under TP, the outputs of
    the two reduce-scatters.
    """
    assert model.ffn_hidden_size is not None
    tp = layout.tp
    q = model.num_attention_heads * model.attn_head_dim / tp
    v = max(model.kv_heads, tp) / tp * model.attn_head_dim
    w1 = model.ffn_hidden_size / tp
    w2 = model.hidden_size  # partial sums before the reduce-scatter when tp > 1
    scattered = 2 * model.hidden_size / tp if tp > 1 else 0.0
    return h_local + q + v + q + w1 + w2 + scattered


LOGIT_BYTES = {"fused": BF16_BYTES + 4, "eager_fp32": 3 * 4}
"""Peak bytes per logit on the last stage while the loss runs.

fused: Megatron's vocab-parallel cross-entropy keeps the bf16 logits and one fp32 copy that it
turns into the softmax in place and reuses as the gradient (megatron/core/tensor_parallel/
cross_entropy.py). eager_fp32: `F.cross_entropy(logits.float(), ...)` in eager PyTorch saves
the fp32 log-softmax output for backward; its backward holds that output, the fp32 gradient
coming from nll_loss and the fp32 gradient it produces at the same time (3 x 4 B; the bf16
logits are freed before backward, torchtitan `del pred`)."""


LOSS_PARALLEL_BYTES_PER_LOGIT = 4 * 4
"""Peak bytes per logit of eager cross-entropy under TP (torchtitan enables PyTorch's
`loss_parallel()` whenever tp > 1). Its backward (torch/distributed/tensor/parallel/loss.py,
`_nll_loss_and_log_softmax_backward`) evaluates `(zeros_like(x) + exp(x)) * grad_output` on the
vocab-sharded fp32 log-softmax output x, so x, the zero/one-hot tensor, their sum and the product
are four fp32 logit-sized tensors alive at once (the forward peaks lower, at bf16 logits + three
fp32 tensors = 14 B)."""


def logits_bytes(model: ModelSpec, workload: Workload, layout: Layout) -> float:
    """Peak loss-related bytes for one micro-batch's logits on the last stage (LOGIT_BYTES)."""
    per_logit = LOGIT_BYTES[workload.cross_entropy]
    if workload.cross_entropy == "eager_fp32" and layout.tp > 1:
        per_logit = LOSS_PARALLEL_BYTES_PER_LOGIT
    return tokens_per_gpu(workload, layout) * (model.vocab_size or 0) / layout.tp * per_logit


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


def buffer_bytes(model: ModelSpec, workload: Workload, layout: Layout) -> float:
    """Communication buffers: gradient buckets, TP all-gather and EP dispatch staging."""
    t = tokens_per_gpu(workload, layout)
    total = DP_BUCKET_BYTES if layout.dp * layout.cp > 1 else 0.0
    if layout.tp > 1 and layout.sequence_parallel:
        total += 2 * t * model.hidden_size * BF16_BYTES  # gathered input of the current GEMM
    if model.moe is not None and layout.ep > 1:
        rows = t * model.moe.top_k / layout.tp
        total += 2 * rows * model.hidden_size * BF16_BYTES  # dispatch and combine staging
    return total
