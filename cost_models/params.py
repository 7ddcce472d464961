"""Parameter counts per block, per layer and per model.

Counts are of weight matrices and norm scales; biases are left out (under 0.1% for every preset).
Formulas follow the block definitions in the Llama 3 (arXiv 2407.21783), Mixtral (2401.04088) and
DeepSeek-V3 (2412.19437, sec. 2.1.1 for MLA) papers. Derivations: docs/cost_model.md#parameters.
"""

from __future__ import annotations

from functools import lru_cache

from .specs import Layout, ModelSpec


def mlp_matrices(model: ModelSpec) -> int:
    """Weight matrices per MLP: 3 for gated (SwiGLU: gate, up, down), 2 otherwise."""
    return 3 if model.gated_mlp else 2


def attention_params(model: ModelSpec) -> int:
    """Attention projections of one layer (Q, K, V, output), GQA- and MLA-aware, plus its norm."""
    h, nh = model.hidden_size, model.num_attention_heads
    mla = model.mla
    if mla is None:
        d = model.attn_head_dim
        return h * nh * d + 2 * h * model.kv_heads * d + nh * d * h + h
    qk_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is None:
        q = h * nh * qk_dim
    else:  # down-projection, its RMSNorm, up-projection
        q = h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * nh * qk_dim
    kv_down = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    kv_up = mla.kv_lora_rank * nh * (mla.qk_nope_head_dim + mla.v_head_dim)
    out = nh * mla.v_head_dim * h
    return q + kv_down + kv_up + out + h


def dense_mlp_params(model: ModelSpec) -> int:
    """Dense MLP of one layer, plus its norm."""
    assert (
        model.ffn_hidden_size is not None
    )  # the ModelSpec validator guarantees it for dense layers
    return mlp_matrices(model) * model.hidden_size * model.ffn_hidden_size + model.hidden_size


def expert_params(model: ModelSpec) -> int:
    """One routed (or shared) expert."""
    assert model.moe is not None
    return mlp_matrices(model) * model.hidden_size * model.moe.expert_ffn_hidden_size


def layer_modules(model: ModelSpec, layout: Layout, *, moe: bool) -> list[float]:
    """The weight parameters of each module of one dense (or MoE) layer on one GPU, in forward
    order, as Megatron-DeepSpeed builds them (megatron/model/transformer.py): ParallelAttention's
    fused query_key_value and its dense output projection, ParallelMLP's dense_h_to_4h (gate and
    up fused, twice the width, under --swiglu) and dense_4h_to_h, split over TP; a MoE layer's
    TopKGate.wg [h, experts] and each local expert's two Linears (deepspeed/moe/experts.py, one
    copy per local expert; split over expert TP), then a shared expert's. MLA's projections
    are counted as one input module (attention_params less the output projection and the
    norm). Norms are left out: under DeepSpeed ZeRO-3 parameters below
    stage3_param_persistence_threshold (1e5) stay whole on every rank (ds_persist) and are
    never gathered."""
    h = model.hidden_size
    mla = model.mla
    heads_out = model.num_attention_heads * (mla.v_head_dim if mla else model.attn_head_dim)
    out = heads_out * h
    attn_in = attention_params(model) - out - h
    units = [attn_in / layout.tp, out / layout.tp]
    up = mlp_matrices(model) - 1  # dense_h_to_4h's width over the ffn size
    if moe:
        assert model.moe is not None
        ffn = model.moe.expert_ffn_hidden_size
        units.append(h * model.moe.num_experts)
        for _ in range(model.moe.num_experts // layout.ep):
            units += [up * h * ffn / layout.etp, h * ffn / layout.etp]
        shared = model.moe.num_shared_experts * ffn / layout.tp
        if shared:
            units += [up * h * shared, h * shared]
    else:
        assert model.ffn_hidden_size is not None
        units += [up * h * model.ffn_hidden_size / layout.tp, h * model.ffn_hidden_size / layout.tp]
    return [float(u) for u in units]


@lru_cache(maxsize=256)
def fetches_per_layer(modules: tuple[float, ...], bucket: float) -> float:
    """All-gathers per layer of DeepSpeed ZeRO-3's per-fetch prefetch: whole parameters in
    trace order until at least `bucket` elements (zero/partitioned_param_coordinator.py
    fetch_sub_module, stage3_prefetch_bucket_size), one coalesced all-gather each; counted over
    16 repeats of the layer's modules, so a group may span two layers."""
    repeats, groups, held = 16, 0, 0.0
    for _ in range(repeats):
        for m in modules:
            held += m
            if held >= bucket:
                groups, held = groups + 1, 0.0
    return (groups + (held > 0)) / repeats


def moe_layer_params(model: ModelSpec, *, active_only: bool = False) -> int:
    """MoE block of one layer: router, routed experts (all, or top_k if active_only), shared."""
    moe = model.moe
    assert moe is not None
    routed = moe.top_k if active_only else moe.num_experts
    router = model.hidden_size * moe.num_experts
    experts = (routed + moe.num_shared_experts) * expert_params(model)
    return router + experts + model.hidden_size


def embedding_params(model: ModelSpec) -> int:
    """Input embedding table (zero when the vocabulary is unknown) and learned positions."""
    positions = model.max_position_embeddings or 0
    return ((model.vocab_size or 0) + positions) * model.hidden_size


def lm_head_params(model: ModelSpec) -> int:
    """Output projection plus the final norm; shared with the embedding when tied."""
    head = 0 if model.tied_embeddings else (model.vocab_size or 0) * model.hidden_size
    return head + model.hidden_size


def mtp_join_params(model: ModelSpec) -> int:
    """What each multi-token-prediction depth adds beyond its transformer layer (a layer like
    the decoder's, memory.stage_params counts it with the last stage's layers) and the shared
    embedding and output layer: eh_proj [2h, h] and the enorm, hnorm and final_layernorm scales
    (megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer). Not in
    total_params: the model cards count the network served (DeepSeek-V3's 671B leaves its MTP
    module's 14B out)."""
    h = model.hidden_size
    return model.mtp_num_layers * (2 * h * h + 3 * h)


def layer_params(model: ModelSpec, layer: int, *, active_only: bool = False) -> int:
    """All parameters of transformer layer `layer` (0-based)."""
    is_moe = model.moe is not None and layer >= model.moe.first_k_dense_layers
    mlp = moe_layer_params(model, active_only=active_only) if is_moe else dense_mlp_params(model)
    return attention_params(model) + mlp


def total_params(model: ModelSpec, *, active_only: bool = False) -> int:
    """Whole-model parameter count.

    active_only (MoE models; a dense model's active count is its total): the weights one
    token's forward multiplies, as the DeepSeek and gpt-oss model cards count them: the top_k
    routed and the shared experts, not the input embedding table (a lookup, no matmul; the
    output head counts). DeepSeek-V2-Lite 2.45B (card 2.4B), DeepSeek-V3 36.6B (card 37B),
    gpt-oss-120b 5.13B (card 5.1B). Mistral and Qwen count the input embedding in theirs
    (Mixtral 8x7B card 12.9B, here 12.7B)."""
    if active_only and model.moe is None:
        active_only = False
    lookup = embedding_params(model) if active_only else 0
    dense = model.num_dense_layers * layer_params(model, 0, active_only=active_only)
    moe = 0
    if model.num_moe_layers:
        moe = model.num_moe_layers * layer_params(
            model, model.num_layers - 1, active_only=active_only
        )
    return embedding_params(model) - lookup + dense + moe + lm_head_params(model)
