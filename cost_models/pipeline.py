"""Pipeline stage partition, in-flight micro-batches, and schedule time (1F1B and interleaved).

Formulas: Narayanan et al. 2021 (arXiv 2104.04473) sec. 2.2: 1F1B bubble (p-1)/m, interleaved
(p-1)/(v*m); Megatron-LM's schedules.py for the warm-up counts that set the in-flight micro-batches
(non-interleaved: p - r; interleaved: 2(p - r - 1) + (v - 1)p + 1 chunks). With uneven stages the
steady state runs at the slowest stage and fill/drain walks every stage once: step =
m * t_max + (sum_i t_i - t_max) / v. Derivations: docs/cost_model.md#pipeline.
"""

from __future__ import annotations

from .specs import Layout, ModelSpec


def num_microbatches(global_batch_seqs: int, layout: Layout) -> int:
    """Micro-batches each data-parallel rank runs per step: global batch / (micro_batch x dp).
    The one place this is written (cost_models.rules requires the division to be exact);
    its inverse is Estimate.global_batch_seqs."""
    return global_batch_seqs // (layout.micro_batch * layout.dp)


def chunk_layer_counts(num_layers: int, num_chunks: int) -> list[int]:
    """Layers per model chunk (pp * vp chunks); a remainder goes to the middle chunks.

    The first and last chunks carry the embedding and the LM head, so they take the fewer layers
    (the idea behind Megatron's --decoder-first/last-pipeline-num-layers).
    """
    base, extra = divmod(num_layers, num_chunks)
    counts = [base] * num_chunks
    order = sorted(range(num_chunks), key=lambda c: (abs(c - (num_chunks - 1) / 2), c))
    for c in order[:extra]:
        counts[c] += 1
    return counts


def even_chunk_counts(model: ModelSpec, num_chunks: int) -> list[int]:
    """The cost model's even split of `model`'s decoder layers (chunk_layer_counts), with its
    multi-token-prediction layers counted as layers of the last chunk, where with_mtp prices
    them: that chunk takes as many decoder layers fewer (Megatron-Bridge's DeepSeek-V3 layouts do
    the same, recipes/deepseek/h100/deepseek_v3.py _get_deepseek_v3_pipeline_layout: at pp 16
    `["decoder"] * 4` per stage and `["decoder", "mtp", "loss"]` last). Where the last chunk
    would so hold no decoder layer, the plain even split."""
    depth = model.mtp_num_layers
    if depth:
        counts = chunk_layer_counts(model.num_layers + depth, num_chunks)
        if counts[-1] > depth:
            counts[-1] -= depth
            return counts
    return chunk_layer_counts(model.num_layers, num_chunks)


def split_slots(layout: Layout) -> tuple[int, int]:
    """(embedding, loss) decoder-layer slots the layout's split counts: Megatron-Core's
    account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split (each 0 or 1)."""
    return (
        int(layout.account_for_embedding_in_pipeline_split),
        int(layout.account_for_loss_in_pipeline_split),
    )


def accounted_chunk_counts(num_layers: int, num_chunks: int, slots: tuple[int, int]) -> list[int]:
    """Decoder layers per model chunk when the embedding and / or the loss count as one layer
    each (Megatron-Core 0.19.2 transformer_block.get_num_layers_to_build): every chunk gets
    (num_layers + slots) / (pp * vp) layer slots, and the first chunk of the first rank builds
    one decoder layer fewer for the embedding, the last chunk of the last rank one fewer for the
    loss (a chunk may so hold the embedding or the loss alone). TransformerConfig requires the
    division to be exact (cost_models.rules._split_slot_rules); where it is not (a layout the
    rules refuse) the remainder is spread as chunk_layer_counts spreads it."""
    embedding, loss = slots
    total = num_layers + embedding + loss
    if total % num_chunks:
        return chunk_layer_counts(num_layers, num_chunks)
    counts = [total // num_chunks] * num_chunks
    counts[0] -= embedding
    counts[-1] -= loss
    return counts


def layout_chunk_counts(model: ModelSpec, layout: Layout) -> list[int]:
    """Decoder layers per model chunk (pp * vp chunks, model order) of the layout's own split:
    Megatron's accounted split when the layout counts the embedding or the loss
    (accounted_chunk_counts), else the cost model's (even_chunk_counts)."""
    slots = split_slots(layout)
    if slots == (0, 0):
        return even_chunk_counts(model, layout.pp * layout.vp)
    return accounted_chunk_counts(model.num_layers, layout.pp * layout.vp, slots)


def stage_layers(
    model: ModelSpec, layout: Layout, layers_per_stage: tuple[int, ...] | None = None
) -> list[list[int]]:
    """Layer indices held by each pipeline rank (all its virtual chunks), in model order."""
    p = layout.pp
    if layers_per_stage is not None:
        counts = list(layers_per_stage)
    else:
        counts = layout_chunk_counts(model, layout)
    stages: list[list[int]] = [[] for _ in range(p)]
    start = 0
    for chunk, n in enumerate(counts):
        stages[chunk % p].extend(range(start, start + n))
        start += n
    return stages


def with_mtp(
    model: ModelSpec, layout: Layout, rank: int, counts: tuple[int, int]
) -> tuple[int, int]:
    """(dense, MoE) transformer layers pipeline rank `rank` runs when it holds `counts` decoder
    layers: on the last rank, also the model's multi-token-prediction layers
    (ModelSpec.mtp_num_layers), each one transformer layer of the last decoder layer's kind.

    Megatron-Core puts every MTP layer on the last pipeline stage unless a
    pipeline_model_parallel_layout places them (docs/user-guide/features/
    multi_token_prediction.md, "Pipeline Parallel Layout for MTP"), builds each from the decoder's
    own layer spec (transformer/multi_token_prediction.py MultiTokenPredictionLayer:
    mtp_model_layer), and counts them so in its FLOPs (training/training.py
    num_floating_point_operations: num_moe_layers += last_layer_is_moe * mtp_num_layers). Their
    projection, norms, embedding look-up and LM-head pass are the LM head's (compute.lm_head_time,
    memory.stage_params)."""
    depth = model.mtp_num_layers
    if not depth or rank != layout.pp - 1:
        return counts
    if model.num_moe_layers:
        return counts[0], counts[1] + depth
    return counts[0] + depth, counts[1]


def inflight_chunks(layout: Layout, rank: int, num_microbatches: int) -> float:
    """Micro-batch activations held at once by pipeline rank `rank`, in units of its full stage.

    1F1B: rank r holds p - r micro-batches. DualPipe: p + 1 on every rank (github
    deepseek-ai/DualPipe README, "Pipeline Bubbles and Memory Usage Comparison"). Interleaved: the warm-up holds 2(p-r-1) + (v-1)p + 1
    chunks of 1/v of the stage each (Korthikanti et al. 2022 sec. 4.2.3 for rank 0; Megatron-Core
    get_pp_rank_microbatches, microbatch_group_size_per_vp_stage = p), one more under
    Layout.ep_overlap.
    """
    p, v, m = layout.pp, layout.vp, num_microbatches
    if layout.pp_schedule == "dualpipe":
        # DualPipe README table: activations of PP + 1 micro-batches per device, every rank.
        return float(min(p + 1, m))
    if v == 1:
        return float(min(p - rank, m))
    chunks = 2 * (p - rank - 1) + (v - 1) * p + 1
    if layout.ep_overlap:
        # megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches: under
        # overlap_moe_expert_parallel_comm the interleaved warm-up runs one more forward chunk
        # so that each 1F1B step's forward and backward are independent.
        chunks += 1
    return min(chunks, m * v) / v


def schedule_time_s(
    stage_times_s: list[float], num_microbatches: int, vp: int
) -> tuple[float, float, int]:
    """(steady-state time, fill/drain bubble time, index of the slowest stage) for one step."""
    slowest = max(range(len(stage_times_s)), key=lambda i: (stage_times_s[i], -i))
    t_max = stage_times_s[slowest]
    bubble = (sum(stage_times_s) - t_max) / vp
    return num_microbatches * t_max, bubble, slowest


def dualpipe_bubble_s(pp: int, stage_s: float, compute_s: float, recompute_s: float) -> float:
    """DualPipe's fill/drain time (PP/2 - 1)(F&B + B - 3W) (github deepseek-ai/DualPipe README;
    DeepSeek-V3 report arXiv 2412.19437 sec. 3.2.1, Table 2), per micro-batch of the slowest
    stage: F&B, an overlapped forward + backward chunk pair, is the stage's time per micro-batch
    (stage_s, its exposed communication included); B the full backward, two thirds of the
    compute plus the recompute; W the weight-gradient half of the backward, a third of it.
    So B - 3W = recompute_s - compute_s / 3. PP must be even (dualpipe.py asserts it).
    """
    return max(0, pp // 2 - 1) * (stage_s + recompute_s - compute_s / 3)
