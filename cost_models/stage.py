"""The per-layer and per-stage formulas of the cost model: one layer's cost, one stage's DP and
optimizer time, one stage's memory. cost_models.pricer.Pricer composes a step from these and is
their one caller in the step (the planner's bounds and stage partition ask the Pricer), so a
bound and the estimate it bounds share every formula. Derivations: docs/cost_model.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .accumulation import (
    defers_to_last_backward,
    dp_rounds,
    grads_sharded_between_micro_batches,
)
from .calibration import GenerationCalibration, overlap_slowdown_s
from .comm import flex_wire_fractions, moe_tier_copies, tier_loads_busy_s, tier_loads_time_s
from .commtable import CollectiveBook, collective_tier_s, collective_time_s
from .compute import (
    AMAX_REDUCTION_BYTES,
    Gemm,
    LayerTime,
    amax_reductions,
    attention_gemms,
    gemm_hardware,
    gemm_time_s,
    mlp_gemms,
    moe_imbalance,
    quant_recipe,
    selective_modules,
    tokens_per_gpu,
)
from .cp import cp_layer_s
from .kernels import KernelBook
from .memory import (
    ALLOCATOR_OVERHEAD,
    CUDA_CONTEXT_GIB,
    DEEPSPEED_BUCKET_ELEMENTS,
    STEP_CAST_HBM_BYTES,
    StageParams,
    buffer_bytes,
    fsdp2_end_of_backward_bytes,
    fsdp2_phased,
    grad_bytes,
    grad_queue_bytes,
    kept_outputs_bytes,
    logits_bytes,
    megatron_bucket_elements,
    megatron_fsdp_queues,
    moment_bytes,
    queues_grad_buckets,
    shard_elements,
    shard_groups,
    step_cast,
    step_grad_bytes,
    weight_bytes,
    zero_in_effect,
)
from .pipeline import inflight_chunks
from .rankmap import Group, hsdp_experts
from .specs import LOW_PRECISION, Cluster, Layout, LinkTier, ModelSpec, StageMemory, Workload
from .terms import ByKind, Flow
from .tp_overlap import COLLECTIVE_MATMUL, CONFIGS, overlap_s, pieces
from .units import GIB

BF16_BYTES = 2
FP32_BYTES = 4
GRAD_REDUCE_BYTES = 4  # fp32 gradient reduction (Megatron under bf16; torchtitan reduce_dtype)


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer, one micro-batch, one GPU: seconds by term (forward + backward + recompute)."""

    compute_s: float
    recompute_s: float
    tp_s: float
    cp_exposed_s: float
    cp_total_s: float
    ep_s: float
    tp_total_s: float = 0.0  # link-busy TP seconds, overlapped or not
    ep_total_s: float = 0.0  # link-busy EP seconds, overlapped or not
    tier_busy_s: dict[Flow, tuple[float, ...]] | None = None
    """Per layer flow (TP, CP, EP), the seconds it keeps each tier (cluster.tiers order) busy."""

    @property
    def total_s(self) -> float:
        return self.compute_s + self.recompute_s + self.tp_s + self.cp_exposed_s + self.ep_s


def layer_cost(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    span: Mapping[str, Sequence[int]],
    *,
    is_moe: bool,
    book: KernelBook | None = None,
    comm: CollectiveBook | None = None,
    tp_memo: dict[tuple, tuple[float, float, tuple[float, ...]]] | None = None,
) -> LayerCost:
    """One layer's cost on the groups of `span` (cost_models.rankmap spans): its compute and
    recompute (`lt`), the TP collectives (_tp_layer_s), the CP K/V exchange (cost_models/cp.py)
    and the EP all-to-alls (_ep_layer_s). `cal` is calibration_for_cluster(cluster); `book` the
    cluster's kernel tables (the TP-overlap partner GEMMs are looked up in them); `comm` its
    collective curves (cost_models.commtable). `tp_memo`: the caller's cache of the TP terms
    without TP overlap, for this (model, cluster, workload, comm) only (cost_models.pricer)."""
    n_tiers = len(cluster.tiers)
    recompute_s = lt.recompute_s(layout.recompute, layout.selective_modules)
    if tp_memo is None or layout.tp_comm_overlap:
        tp_s, tp_total_s, tp_busy = _tp_layer_s(
            model, cluster, cal, workload, layout, lt, span, is_moe, book, comm
        )
    else:
        # Without overlap the TP terms read only the payload (tokens per GPU), the blocks,
        # passes and rerun collectives, and the TP group's span (_tp_layer_s): the search prices many layouts alike
        # in all four (other EP degrees, pipeline and DP sizes).
        blocks = 1 if (is_moe and layout.etp == 1) else 2
        key = (tokens_per_gpu(workload, layout), blocks, layout.recompute == "full", is_moe)
        key += (rerun_tp_collectives(workload, layout), *span[Group.TP])
        found = tp_memo.get(key)
        if found is None:
            found = tp_memo[key] = _tp_layer_s(
                model, cluster, cal, workload, layout, lt, span, is_moe, book, comm
            )
        tp_s, tp_total_s, tp_busy = found
    # CP: K/V exchange beside the attention steps (cost_models/cp.py, per implementation).
    cp_exposed, cp_total = cp_layer_s(
        model, cluster, cal, workload, layout, lt, span[Group.CP], comm
    )
    cp_busy = (0.0,) * n_tiers
    if cp_total > 0:
        # The K/V ring's hops are paced by its slowest link: charged to the outermost tier crossed.
        outer = _outermost_index(span[Group.CP])
        cp_busy = tuple(cp_total if j == outer else 0.0 for j in range(n_tiers))
    ep_s, ep_total_s, ep_busy = _ep_layer_s(
        model, cluster, cal, workload, layout, lt, span, is_moe, recompute_s, comm
    )
    return LayerCost(
        lt.forward_s + lt.backward_s,
        recompute_s,
        tp_s,
        cp_exposed,
        cp_total,
        ep_s,
        tp_total_s,
        ep_total_s,
        {Flow.TP: tp_busy, Flow.CP: cp_busy, Flow.EP: ep_busy},
    )


def _tp_layer_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    span: Mapping[str, Sequence[int]],
    is_moe: bool,
    book: KernelBook | None = None,
    comm: CollectiveBook | None = None,
) -> tuple[float, float, tuple[float, ...]]:
    """(exposed, link-busy, busy per tier) TP seconds of one layer and micro-batch. Under TP
    overlap each collective hides behind its partner GEMM (overlapped_tp_s): the all-gathers
    before QKV and FC1 (forward) and the reduce-scatters after the projection and FC2, with the
    roles swapped in backward; an all-gather chunk takes one SM, a reduce-scatter chunk
    COMM_KERNEL_SMS (calibration.UB_RING_EXCHANGE_SMS)."""
    tiers = cluster.tiers
    payload = tokens_per_gpu(workload, layout) * model.hidden_size * BF16_BYTES
    # TP: one all-reduce (or RS + AG under sequence parallelism: same bytes) per block per pass.
    blocks = 1 if (is_moe and layout.etp == 1) else 2
    passes = 3 if layout.recompute == "full" else 2
    rerun = rerun_tp_collectives(workload, layout)
    tp_span = span[Group.TP]
    all_reduce_s = collective_time_s("all_reduce", payload, tp_span, tiers, comm, "tp")
    tp_s = blocks * (passes + rerun) * all_reduce_s
    busy = (0.0,) * len(tiers)
    if tp_s <= 0:
        return tp_s, tp_s, busy
    per = collective_tier_s("all_reduce", payload, tp_span, tiers, 1, comm)
    busy = tuple(blocks * (passes + rerun) * x for x in per)
    # The casts' amax all-reduces (compute.amax_reductions): tiny, latency-bound, and the cast
    # waits for them, so no TP overlap hides them.
    fwd, bwd = amax_reductions(model, layout, workload, is_moe)
    n_amax = fwd * (passes - 1) + bwd
    amax_s = 0.0
    if n_amax:
        per_amax = collective_tier_s("all_reduce", AMAX_REDUCTION_BYTES, tp_span, tiers, 1, comm)
        amax_s = n_amax * sum(per_amax)
        busy = tuple(b + n_amax * x for b, x in zip(busy, per_amax, strict=True))
    tp_s += amax_s
    if not layout.tp_comm_overlap:
        return tp_s, tp_s, busy
    tp_s -= amax_s
    per_collective_s = all_reduce_s / 2  # all-reduce = reduce-scatter + gather
    if workload.tp_overlap != COLLECTIVE_MATMUL:
        exposed, extra = userbuffers_layer_s(
            model, cluster, cal, workload, layout, lt, blocks, passes, per_collective_s, book
        )
        # The bulk all-gathers of backward (qkv_dgrad, fc1_dgrad) are traffic of their own.
        busy = tuple(b + extra * x / 2 for b, x in zip(busy, per, strict=True))
        return exposed + amax_s, tp_s + amax_s + extra * per_collective_s, busy
    ring, reduce = cal.tp_ring_sm_fraction, cal.comm_sm_fraction
    exposed = 0.0
    partners = tp_partner_gemm_s(model, cluster, cal, workload, layout, lt, blocks, book)
    for i, g in enumerate(partners):
        gathers = i % 2 == 0  # QKV / FC1 take an all-gather in forward, proj / FC2 scatter
        for mult, forward in ((1, True), (2, False)) + (((1, True),) if passes == 3 else ()):
            f = ring if gathers == forward else reduce  # fwd, bwd (dgrad+wgrad), recompute
            exposed += overlapped_tp_s(per_collective_s, layout.tp, g * mult, f)
        if rerun and gathers:  # the op-level policy's rerun all-gather before QKV / FC1
            exposed += overlapped_tp_s(per_collective_s, layout.tp, g, ring)
    return exposed + amax_s, tp_s + amax_s, busy


def rerun_tp_collectives(workload: Workload, layout: Layout) -> float:
    """Forward TP collectives per block that torchtitan's op-level selective checkpointing
    reruns in backward, in all-reduce units: its save list keeps the outputs of
    reduce_scatter_tensor and all_to_all_single only (torchtitan 0.3.0 distributed/
    activation_checkpoint.py _get_default_save_ops), so under sequence parallelism the
    all-gathers before QKV and FC1 rerun (half an RS + AG all-reduce's bytes) and without it the
    whole all-reduces do. 0 for other policies: Megatron's recompute modules hold no TP
    collective, and full recompute is counted as its own pass."""
    if layout.recompute != "selective" or workload.selective_recompute != "every_other_matmul":
        return 0.0
    return 0.5 if layout.sequence_parallel else 1.0


NO_END_TP = LayerCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
"""A stage end without TP collectives (TP 1, no vocabulary)."""

LOSS_ALL_REDUCES = 3
"""The vocabulary-parallel cross-entropy's all-reduces of one fp32 value per token over the TP
group, forward: the logits' max, the target logits and the sum of exponentials (megatron/core/
tensor_parallel/cross_entropy.py VocabParallelCrossEntropy; torch loss_parallel's _log_softmax
and _nll_loss_forward likewise). Megatron's fused path (--cross-entropy-loss-fusion,
megatron/core/fusions/fused_cross_entropy.py) sends the last two as one all-reduce of twice the
size: the same bytes, one latency (a few microseconds) less than priced."""


def end_stage_tp_costs(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    head: LayerTime,
    tp_span: Sequence[int],
    comm: CollectiveBook | None = None,
) -> tuple[LayerCost, LayerCost]:
    """(first stage's, last stage's) TP collectives outside the transformer layers, one
    micro-batch, on the TP group `tp_span`, as LayerCosts holding only TP terms; none of them
    is recomputed, and no TP-overlap configuration covers them. Each moves the [t, h] bf16
    activations (t = tokens_per_gpu).

    - The input embedding (VocabParallelEmbedding, megatron/core/tensor_parallel/layers.py;
      torchtitan's RowwiseParallel(output_layouts=Shard(1))): a reduce-scatter into the
      sequence-parallel region in forward and its all-gather in backward; an all-reduce
      without sequence parallelism; with a learned position table Megatron all-reduces, then
      scatters (language_model_embedding.py reduce_scatter_embeddings), and gathers in backward.
      Exposed: the first layer waits for it, and nothing runs beside its backward.
    - The LM head (ColumnParallelLinear; torchtitan's ColwiseParallel(input_layouts=Shard(1)))
      with sequence parallelism all-gathers its input in forward (exposed) and reduce-scatters
      the input gradient in backward; without it all-reduces the input gradient in backward.
      Workload.head_tp_backward 'overlapped' (Megatron's
      LinearWithGradAccumulationAndAsyncCommunication.backward): the input is gathered again
      for the weight gradient, async beside the dgrad GEMM, and the reduce-scatter (all-reduce)
      is async beside the wgrad GEMM: each exposed beyond its GEMM (the head's forward GEMM
      time, the same FLOPs). 'exposed' (DTensor redistribution): the gathered input is saved,
      and the reduce-scatter (all-reduce) waits.
    - The vocabulary-parallel loss: LOSS_ALL_REDUCES latency-bound fp32 all-reduces forward.
    Under multi-token prediction the last stage runs the head and the loss 1 + D times and
    an embedding look-up D times (compute.lm_head_time), and per depth the eh_proj
    (multi_token_prediction.py MultiTokenPredictionLayer._concat_embeddings): a column-parallel
    Linear(2h -> h) with gather_output=False whose output is all-gathered over the hidden dim
    (gather_from_tensor_model_parallel_region; its backward is a split) and, under sequence
    parallelism, scattered back (no traffic; its backward all-gathers the gradient, exposed).
    Its input side is the head's pattern on [t, 2h]: the all-gather forward (sequence
    parallelism), the reduce-scatter (all-reduce without it) of the input gradient and the
    second gather in backward, hidden as the head's are behind the eh_proj's own GEMM time.
    Megatron's TE path turns userbuffers off for this buffer name ('mtp_eh_proj' is not one of
    qkv / proj / fc1 / fc2: extensions/transformer_engine.py TELinear), so no TP-overlap
    configuration covers it. Each pass's GEMM time is its FLOP share of head.gemm_s."""
    vocab = model.vocab_size or 0
    if layout.tp <= 1 or not vocab or tp_span[-1] <= 1:
        return NO_END_TP, NO_END_TP
    tiers, t = cluster.tiers, tokens_per_gpu(workload, layout)
    payload = t * model.hidden_size * BF16_BYTES

    def per_tier(kind: str, size: float = payload) -> tuple[float, ...]:
        return tuple(collective_tier_s(kind, size, tp_span, tiers, 1, comm, "tp"))

    loss = per_tier("all_reduce", t * FP32_BYTES)
    sp = layout.sequence_parallel
    overlapped = workload.head_tp_backward == "overlapped"
    embed, forward, backward = _column_linear_tp(per_tier, payload, sp, overlapped)
    if sp and model.position_embedding_kind == "learned":  # all-reduce, then the scatter
        embed = [per_tier("all_reduce"), forward[0]]  # and in backward the same all-gather
    forward += [loss] * LOSS_ALL_REDUCES
    depth = model.mtp_num_layers
    runs = 1 + depth
    # One pass's GEMM time: its FLOP share of head.gemm_s (the head runs 1 + D times, eh_proj D).
    h = model.hidden_size
    head_flops, proj_flops = vocab / layout.tp * h, 2 * h * h / layout.tp
    share = head.gemm_s / (runs * head_flops + depth * proj_flops) if overlapped else 0.0
    head_exposed = runs * (
        sum(sum(x) for x in forward) + sum(max(0.0, sum(x) - share * head_flops) for x in backward)
    )
    embed_s = sum(sum(x) for x in embed)
    proj_fwd, proj_waits, proj_bwd = [], [], []  # priced (and looked up) only under MTP
    if depth:
        _, proj_fwd, proj_bwd = _column_linear_tp(per_tier, 2 * payload, sp, overlapped)
        proj_fwd.append(per_tier("all_gather"))  # the output gathered over the hidden dim
        proj_waits = [per_tier("all_gather")] if sp else []  # the scatter's backward
    proj_exposed = depth * (
        sum(sum(x) for x in proj_fwd + proj_waits)
        + sum(max(0.0, sum(x) - share * proj_flops) for x in proj_bwd)
    )
    head_exposed += proj_exposed

    def busy(groups: list[tuple[list[tuple[float, ...]], int]]) -> tuple[float, ...]:
        return tuple(sum(n * sum(x[j] for x in xs) for xs, n in groups) for j in range(len(tiers)))

    first_busy = busy([(embed, 1)])
    last_busy = busy(
        [(forward + backward, runs), (embed, depth), (proj_fwd + proj_waits + proj_bwd, depth)]
    )
    first = LayerCost(0.0, 0.0, embed_s, 0.0, 0.0, 0.0, embed_s, 0.0, {Flow.TP: first_busy})
    last = LayerCost(
        0.0,
        0.0,
        head_exposed + depth * embed_s,
        0.0,
        0.0,
        0.0,
        sum(last_busy),
        0.0,
        {Flow.TP: last_busy},
    )
    return first, last


def _column_linear_tp(
    per_tier: Callable[[str, float], tuple[float, ...]], size: float, sp: bool, overlapped: bool
) -> tuple[list[tuple[float, ...]], list[tuple[float, ...]], list[tuple[float, ...]]]:
    """(embedding's, forward, backward) TP collectives, per tier, of a vocabulary-parallel
    embedding and a column-parallel Linear whose [t, .] input is `size` bytes: with sequence
    parallelism the embedding reduce-scatters (forward) and gathers (backward), the Linear
    all-gathers its input forward and reduce-scatters the input gradient backward, gathering
    the input again first when `overlapped` (kept local for the weight gradient); without it
    the embedding and the input gradient all-reduce."""
    if sp:
        rs, ag = per_tier("reduce_scatter", size), per_tier("all_gather", size)
        return [rs, ag], [ag], ([ag, rs] if overlapped else [rs])
    ar = per_tier("all_reduce", size)
    return [ar], [], [ar]


def _ep_layer_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    span: Mapping[str, Sequence[int]],
    is_moe: bool,
    recompute_s: float,
    comm: CollectiveBook | None = None,
) -> tuple[float, float, tuple[float, ...]]:
    """(exposed, link-busy, busy per tier) EP seconds of one layer and micro-batch: dispatch +
    combine all-to-all per pass (forward, backward, and the recompute forward)."""
    if not (is_moe and layout.ep > 1):
        return 0.0, 0.0, (0.0,) * len(cluster.tiers)
    passes = 3 if layout.recompute == "full" else 2
    # A recomputed MoE module (Megatron recompute_modules "moe") dispatches again.
    redone = selective_modules(workload, layout) if layout.recompute == "selective" else ()
    ep_passes = passes + ("moe" in redone)
    dispatch_s, combine_s, ep_busy = ep_exchange_s(
        model, cluster, workload, layout, span[Group.EP], comm
    )
    pass_s = dispatch_s + combine_s
    ep_total_s = ep_passes * pass_s
    busy = tuple(ep_passes * x for x in ep_busy)
    if layout.pp_schedule != "dualpipe" and not layout.ep_overlap:
        return ep_total_s, ep_total_s, busy
    hidden_s = paired_hidden_ep_s(pass_s, ep_passes - 1, lt, recompute_s)
    return ep_total_s - hidden_s + overlap_slowdown_s(hidden_s, cal), ep_total_s, busy


def paired_hidden_ep_s(
    pass_s: float, backward_passes: int, lt: LayerTime, recompute_s: float
) -> float:
    """EP all-to-all seconds of one layer hidden when a forward chunk runs beside a backward chunk.

    DualPipe (DeepSeek-V3 sec. 3.2.1, Figure 4) pairs the forward chunk of one micro-batch with
    the backward chunk of another; Megatron's --overlap-moe-expert-parallel-comm does the same in
    the 1F1B steady state (megatron/core/pipeline_parallel/combined_1f1b.py, one stream computes
    while the other communicates). So the forward pass's dispatch + combine (pass_s) hide only
    behind the other micro-batch's backward (+ its recompute), and the backward's
    (backward_passes x pass_s: the backward and a recomputed MoE forward, both inside the
    backward chunk) only behind the other micro-batch's forward: neither side lends the other
    its spare compute. The excess stays exposed; the hidden part slows the compute beside it
    (calibration.overlap_slowdown_s, charged by the caller).
    """
    forward_hidden_s = min(pass_s, lt.backward_s + recompute_s)
    backward_hidden_s = min(backward_passes * pass_s, lt.forward_s)
    return forward_hidden_s + backward_hidden_s


def _outermost_index(span: list[int]) -> int:
    """Index of the outermost tier a group crosses (topology.outermost_tier's tier)."""
    for j, n in enumerate(span):
        if n >= span[-1]:
            return j
    return len(span) - 1


FP8_SCALE_BYTES_PER_ELEMENT = 4 / 128
"""fp8 dispatch carries one fp32 scale per 1x128 activation tile (DeepSeek-V3 sec. 3.3.2)."""


def flex_scale_out_slowdown(
    workload: Workload, ep_span: Sequence[int], tiers: Sequence[LinkTier]
) -> list[tuple[float, float]]:
    """Per tier, the (dispatch, combine) factor on the bytes a 'deepep' (flex) exchange puts on
    it: 1 inside the NVLink domain (tier 0); on a scale-out tier, the tier's efficiency over the
    fraction of line rate the back-end's kernels were measured to reach across the EP group's
    nodes (comm.FLEX_WIRE_FRACTION, Workload.moe_flex_backend), never below 1: the kernels
    cannot beat what the tier sustains for NCCL."""
    nodes = max(1, ep_span[-1] // ep_span[0])
    dispatch, combine = flex_wire_fractions(workload.moe_flex_backend, nodes)
    out = [(1.0, 1.0)]
    for tier in tiers[1:]:
        out.append((max(1.0, tier.efficiency / dispatch), max(1.0, tier.efficiency / combine)))
    return out


def ep_exchange_s(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    ep_span: list[int],
    comm: CollectiveBook | None = None,
) -> tuple[float, float, list[float]]:
    """(dispatch, combine) seconds of one MoE layer's token exchange for one micro-batch and
    pass, and the seconds both keep each tier busy.

    Copies per tier: comm.moe_tier_copies (per-expert rows for 'alltoall', per-node de-duplication
    with NVLink forwarding and node-limited routing for 'deepep'). Bytes per copy: hidden x 2
    (bf16); the 'deepep' dispatch under fp8 training sends fp8 with 1x128 scales where
    Workload.ep_dispatch_fp8 (DeepSeek's recipe; Megatron's flex dispatcher sends bf16), the combine
    stays bf16 (DeepSeek-V3 sec. 3.3.2; DeepEP README: "FP8 dispatching, and BF16 combining").
    In backward the roles swap (the gradient before the down projection is dispatched in fp8,
    the combine gradient in bf16), so one fp8 and one bf16 exchange per pass either way. The
    busiest rank sets the pace (compute.moe_imbalance).

    With collective curves (`comm`), the per-expert exchange is NCCL's all-to-all of
    tokens x top_k copies per GPU (nccl-tests alltoall_perf's S) and takes its factor; DeepEP's
    kernels are not an NCCL collective and stay on the model (cost_models.commtable); on the
    scale-out tiers they move at their own measured rate (flex_scale_out_slowdown).
    """
    moe = model.moe
    assert moe is not None
    tokens = tokens_per_gpu(workload, layout) / layout.tp * moe_imbalance(workload, layout.ep)
    deepep = workload.moe_dispatcher == "deepep"
    copies = moe_tier_copies(
        list(ep_span),
        moe.top_k,
        moe.num_experts,
        dedup=deepep,
        max_nodes=moe.max_nodes_per_token if deepep else None,
        tiers=cluster.tiers,
    )
    h = model.hidden_size
    fp8 = deepep and workload.ep_dispatch_fp8 and workload.precision in LOW_PRECISION
    dispatch_bytes = h * (1 + FP8_SCALE_BYTES_PER_ELEMENT) if fp8 else h * BF16_BYTES
    combine_bytes = h * BF16_BYTES

    def table_factor(bytes_per_copy: float) -> float:
        if comm is None or ep_span[-1] <= 1:
            return 1.0
        if deepep:
            comm.untabled("ep")
            return 1.0
        return comm.factor("all_to_all", ep_span, tokens * moe.top_k * bytes_per_copy, "ep")

    f_dispatch, f_combine = table_factor(dispatch_bytes), table_factor(combine_bytes)
    slow = flex_scale_out_slowdown(workload, ep_span, cluster.tiers) if deepep else None
    if slow is None:
        slow = [(1.0, 1.0)] * len(copies)
    loads = [tokens * c * (dispatch_bytes * a + combine_bytes * b) for c, (a, b) in zip(copies, slow)]
    busy = tier_loads_busy_s(loads, list(ep_span), cluster.tiers)
    if f_dispatch != 1.0 or f_combine != 1.0:
        share = (dispatch_bytes * f_dispatch + combine_bytes * f_combine) / (
            dispatch_bytes + combine_bytes
        )
        busy = [x * share for x in busy]

    def exchange_s(bytes_per_copy: float, role: int) -> float:
        loads = [tokens * c * bytes_per_copy * f[role] for c, f in zip(copies, slow)]
        return tier_loads_time_s(loads, list(ep_span), cluster.tiers)

    return f_dispatch * exchange_s(dispatch_bytes, 0), f_combine * exchange_s(combine_bytes, 1), busy


def overlapped_tp_s(
    collective_s: float, tp: int, gemm_s: float, comm_sm_fraction: float = 0.0
) -> float:
    """Exposed time of one TP collective split into tp chunks pipelined with its partner GEMM.

    Collective-matmul decomposition (Wang et al. 2023, ASPLOS, "Overlap communication with
    dependent computation via decomposition"; Megatron/TE userbuffers; PyTorch async TP): the
    first of the tp chunks cannot overlap, the rest hide behind the one GEMM that produces or
    consumes the data -- not behind the layer's other GEMMs -- so a small partner GEMM (the
    attention output projection, or any GEMM under fp8) leaves communication exposed. While the
    hidden chunks run, the GEMM has only 1 - comm_sm_fraction of the SMs (calibration.py
    overlap_slowdown_s), which adds f / (1 - f) of the hidden time.
    """
    first = collective_s / tp
    hidden = min(collective_s - first, gemm_s)
    f = comm_sm_fraction
    return first + max(0.0, collective_s - first - gemm_s) + hidden * f / (1.0 - f)


def userbuffers_blocks(
    model: ModelSpec, workload: Workload, layout: Layout, blocks: int
) -> list[tuple[str, str, list[Gemm], list[Gemm]]]:
    """(column name, row name, column GEMMs, row GEMMs) of the layer's blocks that Transformer
    Engine's userbuffers overlap: attention (qkv / proj) and a dense MLP (fc1 / fc2). A MoE
    layer's expert MLP (etp > 1) runs grouped GEMMs that take no userbuffers communicator."""
    t = tokens_per_gpu(workload, layout)
    attn = attention_gemms(model, t, layout.tp)
    out = [("qkv", "proj", attn[:-1], attn[-1:])]
    if blocks == 2 and model.ffn_hidden_size is not None and model.moe is None:
        up, down = mlp_gemms(model, t, model.ffn_hidden_size, layout.tp)
        out.append(("fc1", "fc2", [up], [down]))
    return out


def userbuffers_layer_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    blocks: int,
    passes: int,
    collective_s: float,
    book: KernelBook | None = None,
) -> tuple[float, int]:
    """(exposed seconds, extra collectives) of one layer's TP communication under Transformer
    Engine userbuffers (cost_models/tp_overlap.py, Workload.tp_overlap), each collective
    (`collective_s`, one all-gather or reduce-scatter) priced with its own GEMM and method:
    forward (again under full recompute) the all-gather into the column GEMM (qkv / fc1_fprop)
    and the reduce-scatter out of the row GEMM (proj / fc2_fprop); backward the all-gather of
    the output gradient into the row data-gradient GEMM (proj / fc2_dgrad), the bulk
    all-gather of the input beside the column data-gradient GEMM (qkv / fc1_dgrad: TE saves the
    input's sequence shard) and the bulk reduce-scatter of the data gradient beside the column
    weight-gradient GEMM (qkv / fc1_wgrad). The exposed figure holds the GEMMs' extra seconds
    (split into pieces, fewer SMs). A MoE expert MLP with etp > 1 keeps the generic
    decomposition (overlapped_tp_s)."""
    cfg = CONFIGS[workload.tp_overlap]
    fp8 = workload.precision in LOW_PRECISION
    gpu, book = gemm_hardware(cluster.gpu, workload, book)
    tp, exposed, n = layout.tp, 0.0, 0
    fwd_passes = passes - 1

    def price(name: str, gemms: list[Gemm], pass_index: int) -> float:
        o = overlap_s(cfg[name], collective_s, tp, gemms, pass_index, gpu, cal, fp8, book)
        return o.exposed_s + o.gemm_extra_s

    for col, row, cols, rows in userbuffers_blocks(model, workload, layout, blocks):
        exposed += fwd_passes * (price(f"{col}_fprop", cols, 0) + price(f"{row}_fprop", rows, 0))
        exposed += price(f"{row}_dgrad", rows, 1) + price(f"{col}_dgrad", cols, 1)
        exposed += price(f"{col}_wgrad", cols, 2)
        n += 1
    if n < blocks:  # the MoE block: generic decomposition, as tp_partner_gemm_s splits it
        partner = tp_partner_gemm_s(model, cluster, cal, workload, layout, lt, blocks, book)
        ring, reduce = cal.tp_ring_sm_fraction, cal.comm_sm_fraction
        for g, f_fwd, f_bwd in ((partner[2], ring, reduce), (partner[3], reduce, ring)):
            exposed += fwd_passes * overlapped_tp_s(collective_s, tp, g, f_fwd)
            exposed += overlapped_tp_s(collective_s, tp, 2 * g, f_bwd)
    return exposed, n


def userbuffers_lookups(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    blocks: int,
    book: KernelBook | None,
) -> list[str]:
    """How each split GEMM piece of one layer's userbuffers overlaps was priced
    (kernels.STATUSES; `extrapolated`: outside the tables, the GEMM kept whole), for
    `estimate --explain` (Pricer._kernel_report); [] without userbuffers overlap."""
    if not layout.tp_comm_overlap or layout.tp <= 1 or workload.tp_overlap == COLLECTIVE_MATMUL:
        return []
    cfg = CONFIGS[workload.tp_overlap]
    fp8 = workload.precision in LOW_PRECISION
    gpu, book = gemm_hardware(cluster.gpu, workload, book)
    out = []
    for col, row, cols, rows in userbuffers_blocks(model, workload, layout, blocks):
        for name, gemms, pass_index in (
            (f"{col}_fprop", cols, 0), (f"{row}_fprop", rows, 0), (f"{row}_dgrad", rows, 1),
        ):  # fmt: skip
            if pieces(cfg[name], gemms[0], layout.tp, pass_index)[0] > 1:
                o = overlap_s(cfg[name], 0.0, layout.tp, gemms, pass_index, gpu, cal, fp8, book)
                out.append(o.status)
    return out


def tp_partner_gemm_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    blocks: int,
    book: KernelBook | None = None,
) -> list[float]:
    """Forward seconds of the GEMM paired with each TP collective of a layer, in layer order
    (from the kernel tables where `book` is given, as the layer's own GEMMs).

    Attention block: all-gather -> QKV (and MLA down/up) projections, output projection ->
    reduce-scatter; MLP block: all-gather -> up(+gate) projection, down projection ->
    reduce-scatter. MoE layers with etp > 1 split their GEMM time evenly between the two.
    """
    fp8 = workload.precision in LOW_PRECISION
    gpu, book = gemm_hardware(cluster.gpu, workload, book)
    t = tokens_per_gpu(workload, layout)
    attn = attention_gemms(model, t, layout.tp)
    ag_s = gemm_time_s(attn[:-1], gpu, cal, fp8, book)
    rs_s = gemm_time_s(attn[-1:], gpu, cal, fp8, book)
    partners = [ag_s, rs_s]
    if blocks == 2:
        if model.ffn_hidden_size is not None and model.moe is None:
            up, down = mlp_gemms(model, t, model.ffn_hidden_size, layout.tp)
            partners += [gemm_time_s([g], gpu, cal, fp8, book) for g in (up, down)]
        else:
            partners += [max(0.0, lt.gemm_s - ag_s - rs_s) / 2] * 2
    return partners


def dp_buckets(
    params: float,
    dp: int,
    zero_stage: int,
    num_layers: int,
    bucket: int | None,
    *,
    dp_sync: str = "megatron",
    stage: int = 0,
    vp: int = 1,
    tensors: int = 0,
) -> int:
    """Collectives one stage's gradient reduction (and ZeRO parameter gather) is issued as; each
    pays its own latency (comm.phase_s). `bucket` (Workload.dp_bucket_elements) replaces the
    framework's default bucket size. A bucket closes only at a parameter's end (Megatron
    param_and_grad_buffer.py: `param_end_index - bucket_data_start_index >= bucket_size`;
    DeepSpeed's and PyTorch DDP's buckets likewise take whole parameters), so with `tensors`
    (memory.stage_tensors; 0: not counted) a stage issues at most that many: a bucket smaller
    than every parameter (NVIDIA's MLPerf Llama 3.1 405B conf: bucket_size 200) is one
    collective per parameter, not params / 200.

    - ZeRO-3 (FSDP, Megatron FSDP): one unit per layer.
    - 'deepspeed' ZeRO-3 reduces as its ZeRO-1 / 2 do (zero/stage3.py
      reduce_independent_p_g_buckets_and_remove_grads: an ipg bucket of reduce_bucket_size,
      5e8, flushed when the next gradient would overflow it); its parameters are gathered per
      fetch (dp_gather_buckets).
    - dp_sync 'fsdp' with ZeRO 2: one reduce-scatter per FSDP unit, a transformer block
      (torchtitan/distributed/fsdp.py apply_fsdp; llm-foundry MPT fsdp_wrap_fn).
    - 'deepspeed': buckets of reduce_bucket_size = 5e8 elements.
    - 'megatron': buckets of max(40M, 1M x dp) parameters on the first pipeline stage;
      DistributedDataParallel.__init__ turns bucketing off on pipeline ranks > 0 ("data-parallel
      communication on these stages is not on the critical path") and for model chunks after
      the first (disable_bucketing), so those reduce each model chunk as one collective.
    """
    if params <= 0:
        return 1
    deepspeed_zero3 = zero_stage == 3 and dp_sync == "deepspeed"
    if not deepspeed_zero3 and (zero_stage == 3 or (dp_sync == "fsdp" and zero_stage == 2)):
        return max(1, num_layers)
    if dp_sync == "deepspeed" and bucket is None:
        size = DEEPSPEED_BUCKET_ELEMENTS
    else:
        size = megatron_bucket_elements(dp, bucket)
    if dp_sync != "megatron":
        n = max(1, math.ceil(params / size))
        return min(n, tensors) if tensors > 0 else n
    if stage > 0:
        return vp
    first = max(1, math.ceil(params / vp / size))
    if tensors > 0:
        first = min(first, max(1, math.ceil(tensors / vp)))
    return first + vp - 1


def dp_gather_buckets(
    params: float, zero_stage: int, dp_sync: str, fetches: float, reduce_buckets: int
) -> int:
    """Parameter all-gathers one stage's pass is issued as: the gradient buckets'
    (`reduce_buckets`, dp_buckets), but under DeepSpeed's ZeRO-3, which gathers per fetch
    (zero/partitioned_param_coordinator.py fetch_sub_module: one coalesced all-gather of the
    prefetched parameters, whole ones until at least stage3_prefetch_bucket_size, 5e7
    elements): `fetches` (StageParams.deepspeed_fetches) where counted."""
    if zero_stage != 3 or dp_sync != "deepspeed" or params <= 0 or fetches <= 0:
        return reduce_buckets
    return max(1, round(fetches))

def grad_sync_exposed_s(
    grads_s: float, bwd_mb_s: float, pp: int, vp: int, stage: int, dp_sync: str
) -> float:
    """Seconds the step waits for one stage's gradient reduction (ZeRO 0-2), which takes
    grads_s on the DP stream once it may start; bwd_mb_s is the stage's backward of one
    micro-batch.

    Gradients are final after the last micro-batch's backward, so the reduction overlaps at most
    that backward: exposed max(0, grads - bwd) (the bucketed overlap of Megatron DDP, PyTorch DDP
    / FSDP, and the default for any framework). With dp_sync 'megatron' and pp > 1 the
    pipeline gives more room (megatron/core/pipeline_parallel/schedules.py):

    - no interleaving (vp = 1): the first stage reduces in buckets during its last backward;
      stage r > 0 launches its one collective after its cooldown, "Other pipeline stages do
      grad reduction during pipeline bubble" (forward_backward_pipelining_without_interleaving),
      and the step still waits r backward micro-batches for the stages before it: window
      max(1, r) x bwd.
    - interleaving (vp > 1): each model chunk's reduction is launched after its last backward
      (backward_step_helper_postprocess, grad_sync_func, align_grad_reduce: at the same time on
      every pipeline rank). In the cooldown the chunks end in groups of pp micro-batches, chunk
      vp-1 first, so chunk j >= 1 starts j x pp x bwd / vp before the first stage's end; chunk 0
      is launched when the rank's backward ends, r x bwd / vp before it. The chunks run one
      after another on the DP stream, grads / vp each; the exposed time is where the stream ends
      past the end of the first stage's backward.
    """
    if dp_sync != "megatron" or pp == 1:
        return max(0.0, grads_s - bwd_mb_s)
    if vp == 1:
        return max(0.0, grads_s - max(1, stage) * bwd_mb_s)
    unit = bwd_mb_s / vp
    starts = [-j * pp * unit for j in range(vp - 1, 0, -1)] + [-stage * unit]
    end = starts[0]
    for start in starts:
        end = max(end, start) + grads_s / vp
    return max(0.0, end)


def dp_tier_times_s(
    cluster: Cluster,
    layout: Layout,
    sp: StageParams,
    span: Mapping[str, Sequence[int]],
    bucket_elements: int | None = None,
    sync_every: int = 1,
    *,
    stage: int = 0,
    dp_sync: str = "megatron",
    comm: CollectiveBook | None = None,
    grad_bytes: int = GRAD_REDUCE_BYTES,
    gather_bytes: float = BF16_BYTES,
) -> tuple[list[float], list[float]]:
    """(gradient reduction, parameter gather) seconds per step by tier for one stage's
    parameters, in buckets, the gradients at `grad_bytes` per element (memory.grad_bytes), the
    parameters gathered at `gather_bytes` (memory.param_gather_bytes). DualPipe: a stage's
    micro-batches are split between its two copies, so both copies' gradients are reduced --
    the DP traffic of two stages per rank. A group with nothing to move (a dense model has no
    expert-DP group) runs no collective and pays no latency.
    `sync_every` (Workload.cross_site_sync_every, DiLoCo): the phases on `wan` tiers run once
    every that many steps, so per step they cost 1 / sync_every of a synchronisation."""
    tiers = cluster.tiers
    copies = 2 if layout.pp_schedule == "dualpipe" else 1
    if layout.pp_schedule != "1f1b":
        stage = 0  # Megatron's per-stage bucketing rule is its 1F1B schedules'; DualPipe: default
    grads, gather = [0.0] * len(tiers), [0.0] * len(tiers)

    def buckets(params: float, group_size: int, tensors: int) -> int:
        return dp_buckets(
            params,
            group_size,
            layout.zero_stage,
            sp.num_layers,
            bucket_elements,
            dp_sync=dp_sync,
            stage=stage,
            vp=layout.vp,
            tensors=tensors,
        )

    merged = experts_in_dense_units(layout, dp_sync)
    if layout.dp_shard is not None and layout.zero_stage >= 1:
        # HSDP at ep 1 runs the experts TP-split like the dense weights (rules: etp = tp), one
        # fully_shard per block on the same mesh: the experts' gradients and gathers travel in
        # the dense ones' collectives (memory.shard_groups). With EP the routed experts'
        # parameters take the (dp_replicate, efsdp) mesh (torchtitan distributed/fsdp.py
        # apply_fsdp_to_decoder: shard_placement_fn's mesh_info, edp_mesh), so they run a
        # two-level reduction of their own on those groups.
        dense_shard, expert_shard = shard_groups(layout)
        own = not merged and sp.expert > 0
        params = copies * (sp.dense + (0.0 if own else sp.expert))
        tensors = copies * (sp.dense_tensors + (0 if own else sp.expert_tensors))
        meshes = [(params, tensors, Group.DP_SHARD, Group.DP_REPLICATE, dense_shard)]
        if own:
            meshes.append((
                copies * sp.expert, copies * sp.expert_tensors,
                Group.EDP_SHARD, Group.EDP_REPLICATE, expert_shard,
            ))  # fmt: skip
        unquantized = copies * (sp.embedding + sp.head)
        for params, tensors, shard, replicas, shard_n in meshes:
            n = buckets(params, span[shard][-1], tensors)
            g, a = _hsdp_tier_s(
                tiers, params, span[shard], span[replicas], shard_n, n, comm, grad_bytes,
                gather_bytes, unquantized,
            )  # fmt: skip
            grads = [x + y for x, y in zip(grads, g, strict=True)]
            gather = [x + y for x, y in zip(gather, a, strict=True)]
            unquantized = 0.0  # the embedding and head are dense parameters
        parts: list[tuple[float, Group, int]] = []
    elif merged:  # one FSDP unit per block, its experts in it, on the DP x CP group
        params = copies * (sp.dense + sp.expert)
        parts = [(params, Group.DP_CP, copies * (sp.dense_tensors + sp.expert_tensors))]
    else:
        parts = [(copies * sp.dense, Group.DP_CP, copies * sp.dense_tensors)]
        if sp.expert > 0 and Group.EDP in span:
            parts.append((copies * sp.expert, Group.EDP, copies * sp.expert_tensors))
    kind = "all_reduce" if layout.zero_stage == 0 else "reduce_scatter"
    for params, group, tensors in parts:
        if params <= 0:
            continue
        n = buckets(params, span[group][-1], tensors)
        g = collective_tier_s(kind, params * grad_bytes, span[group], tiers, n, comm, "dp")
        grads = [x + y for x, y in zip(grads, g, strict=True)]
        if layout.zero_stage >= 1:
            unquantized = copies * (sp.embedding + sp.head) if group == Group.DP_CP else 0.0
            payload = gather_payload_bytes(params, unquantized, gather_bytes)
            fetches = copies * sp.deepspeed_fetches if group == Group.DP_CP else 0.0
            n = dp_gather_buckets(params, layout.zero_stage, dp_sync, fetches, n)
            a = collective_tier_s("all_gather", payload, span[group], tiers, n, comm, "dp")
            gather = [x + y for x, y in zip(gather, a, strict=True)]
    if sync_every > 1:
        wan = [t.kind == "wan" for t in tiers]
        grads = [x / sync_every if w else x for x, w in zip(grads, wan, strict=True)]
        gather = [x / sync_every if w else x for x, w in zip(gather, wan, strict=True)]
    return grads, gather


def experts_in_dense_units(layout: Layout, dp_sync: str) -> bool:
    """Whether a MoE stage's routed experts reduce and gather in the dense weights' collectives
    (one FSDP unit per block) rather than in buckets of their own on the expert-DP group: at
    EP 1 with the experts TP-split like the dense weights (etp = tp, so the expert-DP groups
    are the DP x CP groups) under per-block FSDP (dp_sync 'fsdp': torchtitan 0.3.0
    distributed/fsdp.py apply_fsdp_to_decoder wraps a MoE block whole on dp_mesh at
    ep_degree 1; with EP its shard_placement_fn puts the experts on edp_mesh, other groups),
    and under HSDP at EP 1 (Layout.dp_shard: the same unit on the 2-D mesh; rules: etp = tp;
    with EP the experts' own mesh, rankmap.hsdp_experts). Megatron's DDP keeps expert
    parameters in buffers of their own (distributed_data_parallel.py expert_parallel_buffers),
    so its experts never share the dense buckets."""
    if layout.dp_shard is not None:
        return not hsdp_experts(layout)
    return layout.ep == 1 and layout.etp == layout.tp and dp_sync == "fsdp"


def gather_payload_bytes(params: float, unquantized: float, gather_bytes: float) -> float:
    """Bytes one parameter all-gather moves for `params` parameters at gather_bytes each
    (memory.param_gather_bytes), of which `unquantized` (the input embedding and LM head) stay
    bf16 under fp8 / fp4 parameters: only Transformer Engine's modules create quantized weights
    (Megatron --fp8-param-gather: te_checkpoint / fp8_model_init around the TE layers), while
    the embedding (VocabParallelEmbedding) and the output layer (tensor_parallel
    ColumnParallelLinear) are plain bf16 parameters, kept in the bf16 buffer beside the uint8
    one (param_and_grad_buffer.py groups parameters by dtype)."""
    if gather_bytes >= BF16_BYTES:
        return params * gather_bytes
    unquantized = min(unquantized, params)
    return (params - unquantized) * gather_bytes + unquantized * BF16_BYTES


def dp_edge_buckets_s(
    cluster: Cluster,
    layout: Layout,
    sp: StageParams,
    span: Mapping[str, Sequence[int]],
    bucket_elements: int | None = None,
    *,
    dp_sync: str = "megatron",
    comm: CollectiveBook | None = None,
    grad_bytes: int = GRAD_REDUCE_BYTES,
    gather_bytes: float = BF16_BYTES,
) -> tuple[float, float]:
    """(last gradient bucket's reduction, first parameter bucket's gather) seconds on the DP x CP
    group of a stage that reduces once per step in buckets: the two collectives no compute can
    hide (stage_dp_parts).

    Gradients are bucketed in backward order (Megatron param_and_grad_buffer.py iterates
    `params[::-1]`, closing a bucket once it holds bucket_size elements; PyTorch DDP and FSDP
    alike), so the last bucket holds the first layers and, on the first pipeline stage, the
    input embedding, whose gradient is complete only when the backward ends: its reduction
    starts after all compute. A bucket is never split below one parameter, so on the first stage
    it is at least the embedding. The parameter gather runs in the opposite order
    (distributed_data_parallel.py: "all-gathers happen in reverse order of buckets"): the first
    one (launched at zero_grad, waited for in the first forward pre-hook, param_and_grad_buffer.py
    finish_param_sync) is that same bucket, gathered before the forward can begin; in bf16 under
    fp8 parameters (gather_payload_bytes). Elsewhere the edge bucket is an even share of the
    stage's buckets (dp_buckets; the gather's, dp_gather_buckets). Under HSDP
    (Layout.dp_shard) the edge bucket runs FSDP2's two levels (_hsdp_tier_s) on the dense
    weights' mesh, the experts in it at ep 1 (dp_tier_times_s). Left out: the expert-DP
    group's buckets (the experts' own mesh with EP), which end before the embedding's."""
    copies = 2 if layout.pp_schedule == "dualpipe" else 1
    hsdp = layout.dp_shard is not None and layout.zero_stage >= 1
    with_experts = experts_in_dense_units(layout, dp_sync)
    params = copies * (sp.dense + (sp.expert if with_experts else 0.0))
    tensors = copies * (sp.dense_tensors + (sp.expert_tensors if with_experts else 0))
    group = span.get(Group.DP_SHARD if hsdp else Group.DP_CP)
    replicas = span.get(Group.DP_REPLICATE) if hsdp else None
    if params <= 0 or not group or (group[-1] <= 1 and not (replicas and replicas[-1] > 1)):
        return 0.0, 0.0
    n = dp_buckets(
        params,
        group[-1],
        layout.zero_stage,
        sp.num_layers,
        bucket_elements,
        dp_sync=dp_sync,
        stage=0,
        vp=layout.vp,
        tensors=tensors,
    )
    share = params / n
    edge = min(params, max(share, sp.embedding))
    tiers = cluster.tiers
    if hsdp:
        shard_n = shard_groups(layout)[0]
        # the gather's edge bucket is sized by the gather buckets below, not this one
        grads, _ = _hsdp_tier_s(
            tiers, edge, group, replicas or (1,) * len(tiers), shard_n, 1, comm, grad_bytes
        )
        reduce_s = sum(grads)
    else:
        kind = "all_reduce" if layout.zero_stage == 0 else "reduce_scatter"
        reduce_s = sum(collective_tier_s(kind, edge * grad_bytes, group, tiers, 1, comm, "dp"))
    if layout.zero_stage == 0:
        return reduce_s, 0.0
    fetches = copies * sp.deepspeed_fetches
    gathers = dp_gather_buckets(params, layout.zero_stage, dp_sync, fetches, n)
    edge = min(params, max(params / gathers, sp.embedding))
    embedding = min(edge, sp.embedding)
    payload = gather_payload_bytes(edge, embedding, gather_bytes)
    gather_s = sum(collective_tier_s("all_gather", payload, group, tiers, 1, comm, "dp"))
    return reduce_s, gather_s


def _hsdp_tier_s(
    tiers: Sequence[LinkTier],
    params: float,
    shard_span: Sequence[int],
    replica_span: Sequence[int],
    shard_n: int,
    n: int,
    comm: CollectiveBook | None = None,
    grad_bytes: int = GRAD_REDUCE_BYTES,
    gather_bytes: float = BF16_BYTES,
    unquantized: float = 0.0,
) -> tuple[list[float], list[float]]:
    """(gradient reduction, parameter gather) seconds by tier of `params` parameters on one
    HSDP mesh (torchtitan, FSDP2 over a 2-D mesh: the dense weights', with a MoE stage's experts
    among them at ep 1, or the experts' own with EP) in `n` buckets: reduce-scatter inside the
    shard group of `shard_n` GPUs, all-reduce of the shard across the replicas, all-gather
    inside the shard group (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py)."""
    total = params * grad_bytes
    rs = collective_tier_s("reduce_scatter", total, shard_span, tiers, n, comm, "dp")
    ar = collective_tier_s("all_reduce", total / shard_n, replica_span, tiers, n, comm, "dp")
    grads = [x + y for x, y in zip(rs, ar, strict=True)]
    payload = gather_payload_bytes(params, unquantized, gather_bytes)
    return grads, collective_tier_s("all_gather", payload, shard_span, tiers, n, comm, "dp")


@dataclass(frozen=True)
class DpExposure:
    """One stage's exposed DP seconds per step by cause (stage_dp_parts), for the report
    (Estimate.dp_exposure); exposed_s is their sum, the stage's exposed DP time."""

    window_s: float
    """Traffic past its overlap window (the backward / forward a collective runs beside, or
    Megatron's pipeline bubble)."""
    last_bucket_s: float
    """The step's last gradient bucket beyond that (dp_edge_buckets_s)."""
    first_bucket_s: float
    """The first parameter bucket beyond that (dp_edge_buckets_s)."""
    contention_s: float
    """Compute slowed beside the hidden rest (calibration.overlap_slowdown_s)."""
    total_s: float
    """Link-busy DP seconds per step."""
    embedding_sync_s: float = 0.0
    """The shared word embedding's gradient all-reduce with the other end of the pipeline,
    after the DP sync and before the optimizer, nothing beside it (embedding_sync_s)."""
    tier_s: tuple[float, ...] = ()
    """total_s by link tier, the cluster's tiers in order."""

    @property
    def exposed_s(self) -> float:
        return (
            self.window_s
            + self.last_bucket_s
            + self.first_bucket_s
            + self.contention_s
            + self.embedding_sync_s
        )


EMBEDDING_SYNC_FRAMEWORKS = ("megatron", "deepspeed")
"""DP frameworks (Workload.dp_sync) that all-reduce a shared word embedding's gradient between
the first and last pipeline stages every step: Megatron-Core finalize_model_grads
(_allreduce_word_embedding_grads: `torch.distributed.all_reduce(grad, group=embd_group)` on the
main_grad, after finish_grad_sync, where the LM head is tied or MTP looks tokens up on the last
stage: _get_shared_word_embedding_weight) and DeepSpeed's PipelineEngine (_exec_reduce_tied_grads
-> PipelineModule.allreduce_tied_weight_gradients over each tied group). torchtitan's pipeline
splits hold no shared copy (its Llama heads are untied), so 'fsdp' has none."""


def embedding_sync_tier_s(
    cluster: Cluster,
    layout: Layout,
    sp: StageParams,
    span: Mapping[str, Sequence[int]],
    *,
    dp_sync: str = "megatron",
    comm: CollectiveBook | None = None,
    grad_bytes: int = GRAD_REDUCE_BYTES,
) -> list[float]:
    """Seconds per tier of a stage's shared-embedding gradient all-reduce (StageParams.
    shared_embedding: the first and last stages' word-embedding copies, pp > 1) between the
    first and last pipeline stages, once per step: the whole [vocab / tp, h] main gradient at
    `grad_bytes` per element (Megatron all-reduces the full main_grad; a ZeRO-3 shard holds
    1 / dp of it). The two ranks are the PP group's first and last members, so they share the
    innermost tier that holds the whole PP group (span[PP]: a group spread over that tier's
    domains keeps its first and last members in different ones). DualPipe puts the first and
    last stages on the same ranks: nothing to reduce."""
    tiers = cluster.tiers
    if (
        sp.shared_embedding <= 0
        or dp_sync not in EMBEDDING_SYNC_FRAMEWORKS
        or layout.pp <= 1
        or layout.pp_schedule == "dualpipe"
    ):
        return [0.0] * len(tiers)
    payload = sp.shared_embedding * grad_bytes
    if layout.zero_stage == 3:
        payload /= max(1, span[Group.DP_CP][-1])
    pair = [1 if members < layout.pp else 2 for members in span[Group.PP]]
    return collective_tier_s("all_reduce", payload, pair, tiers, 1, comm, "dp")


def stage_dp_parts(
    cluster: Cluster,
    cal: GenerationCalibration,
    layout: Layout,
    sp: StageParams,
    compute_s: float,
    m: int,
    span: Mapping[str, Sequence[int]],
    bucket_elements: int | None = None,
    sync_every: int = 1,
    *,
    stage: int = 0,
    dp_sync: str = "megatron",
    comm: CollectiveBook | None = None,
    dp_accumulation: str = "last_micro_batch",
    grad_bytes: int = GRAD_REDUCE_BYTES,
    gather_bytes: float = BF16_BYTES,
    backward_gather_share: float = 1.0,
) -> DpExposure:
    """The exposed DP seconds per step of pipeline stage `stage` by cause (DpExposure: the
    traffic past its overlap window, the two edge buckets, the compute slowed beside the
    hidden rest; exposed_s their sum) with the link-busy total and its split by tier (tier_s);
    compute_s is the stage's forward + backward per micro-batch, dp_accumulation how often per
    step (dp_rounds, gather_passes). Also what the search's bounds and stage split read."""
    grads_t, gather_t = dp_tier_times_s(
        cluster, layout, sp, span, bucket_elements, sync_every, stage=stage, dp_sync=dp_sync,
        comm=comm, grad_bytes=grad_bytes, gather_bytes=gather_bytes,
    )
    sync_t = embedding_sync_tier_s(
        cluster, layout, sp, span, dp_sync=dp_sync, comm=comm, grad_bytes=grad_bytes
    )
    grads_s, gather_s = sum(grads_t), sum(gather_t)
    fwd_mb = compute_s / 3  # forward is a third of forward + backward
    reduces, gathers = dp_rounds(layout, m, dp_accumulation)
    gather_rounds = gather_passes(layout, reduces, gathers, backward_gather_share)
    total = reduces * grads_s + gather_rounds * gather_s
    beside_backward = True  # the step's last reduction runs beside the last backward
    # DeepSpeed's ZeRO-1/2 gather the updated parameters inside the optimizer step, before it
    # returns (stage_1_and_2.py step -> all_gather_dp_groups -> all_gather_into_tensor, on the
    # default stream, timed as OPTIMIZER_ALLGATHER_TIMER): no forward has started to hide it.
    in_step = dp_sync == "deepspeed" and layout.zero_stage in (1, 2)
    first_gather = gather_s if in_step else max(0.0, gather_s - fwd_mb)
    if dp_sync == "deepspeed" and (layout.zero_stage == 0 or layout.pp > 1):
        # DeepSpeed without ZeRO all-reduces once the backward has returned (engine.py backward
        # -> allreduce_gradients -> buffered_allreduce_fallback, at the accumulation boundary)
        # on the compute stream: nothing hides it. Under pipelining every reduction waits for
        # the schedule's ReduceGrads after the last backward (pipe/engine.py: the engine's
        # enable_backward_allreduce off, _exec_reduce_grads), and ZeRO-1's overlap_comm is
        # turned off ("Pipeline parallelism does not support overlapped communication",
        # engine.py _configure_zero_optimizer): exposed too. ZeRO 1-3 without pipelining reduce
        # from the backward hooks on their own stream under overlap_comm (the export sets it).
        exposed = reduces * grads_s + gathers * first_gather
        beside_backward = False
    elif layout.zero_stage == 3 and gathers == 2 * reduces:
        # FSDP: gather before each forward and backward (gather_passes), reduce-scatter after.
        last_reduce = max(0.0, backward_gather_share * gather_s + grads_s - 2 * fwd_mb)
        exposed = reduces * (first_gather + last_reduce)
    elif reduces > 1:
        # Each micro-batch's reduction overlaps its own backward, as ZeRO-3's does; a gather per
        # micro-batch its forward, a single one (DeepSpeed ZeRO-2) one forward.
        last_reduce = max(0.0, grads_s - 2 * fwd_mb)
        exposed = reduces * last_reduce + gathers * first_gather
    else:
        # One reduction per step; each gather (FSDP2 under pipelining: m + 1 with ZeRO-3)
        # overlaps one forward or backward. The pipeline windows are Megatron's 1F1B
        # schedules'; DualPipe keeps the default. Megatron's stages > 0 and interleaved chunks
        # reduce in the pipeline bubble, not beside a backward.
        pp = layout.pp if layout.pp_schedule == "1f1b" else 1
        last_reduce = grad_sync_exposed_s(grads_s, 2 * fwd_mb, pp, layout.vp, stage, dp_sync)
        exposed = last_reduce + gathers * first_gather
        beside_backward = dp_sync != "megatron" or pp == 1 or (layout.vp == 1 and stage == 0)
    # The edge buckets no compute hides (dp_edge_buckets_s): the step's last reduction (earlier
    # micro-batches' last buckets run beside the next forward), and the first gather on the
    # stage that starts the step's forward (later stages wait out the pipeline fill anyway).
    edge_reduce = edge_gather = 0.0
    if reduces >= 1 and sync_every == 1 and (beside_backward or stage == 0):
        last_s, first_s = dp_edge_buckets_s(
            cluster,
            layout,
            sp,
            span,
            bucket_elements,
            dp_sync=dp_sync,
            comm=comm,
            grad_bytes=grad_bytes,
            gather_bytes=gather_bytes,
        )
        if beside_backward:
            edge_reduce = max(0.0, last_s - last_reduce)
        if stage == 0 and gathers >= 1:
            edge_gather = max(0.0, first_s - first_gather)
    hidden = total - (exposed + edge_reduce + edge_gather)
    contention = overlap_slowdown_s(hidden, cal)  # compute slowed beside the NCCL
    sync_s = sum(sync_t)
    zipped = zip(grads_t, gather_t, sync_t, strict=True)
    tier_s = tuple(reduces * g + gather_rounds * a + e for g, a, e in zipped)
    return DpExposure(
        exposed, edge_reduce, edge_gather, contention, total + sync_s, sync_s, tier_s
    )


def gather_passes(layout: Layout, reduces: int, gathers: int, backward_share: float) -> float:
    """Whole-stage parameter gathers per step: dp_rounds' count, where a ZeRO-3 that gathers
    before each forward and backward re-gathers only `backward_share` of the stage for each
    backward (memory.zero3_backward_gather_share: DeepSpeed keeps its reuse window)."""
    if layout.zero_stage == 3 and gathers == 2 * reduces:
        return reduces * (1.0 + backward_share)
    return gathers


def optimizer_bytes_per_param(
    workload: Workload | None = None, cast_bytes: float = 0.0
) -> float:
    """HBM bytes Adam moves per parameter: read the fp32 gradient, read and write the fp32
    master and the two moments, write the bf16 weight. 30 B with fp32 moments, 22 B with bf16
    (Workload.optimizer_moments, memory.moment_bytes). `cast_bytes`: what the step first moves
    casting 16-bit gradients to the fp32 ones Adam and the norm read (memory.step_cast,
    STEP_CAST_HBM_BYTES: 6 B for Megatron's `shard_model_grad.float()`). Under fp8 primary
    weights (Workload.fp8_params) the new weight is written quantized: fp8_weight_write_bytes
    replaces the 2 B bf16 write."""
    write = fp8_weight_write_bytes(workload) if workload and workload.fp8_params else BF16_BYTES
    return cast_bytes + GRAD_REDUCE_BYTES + 2 * (4 + moment_bytes(workload)) + write


def fp8_weight_write_bytes(workload: Workload) -> float:
    """HBM bytes per shard parameter of casting the fp32 master into fp8 primary weights
    (Megatron fp8_utils.quantize_param_shard -> Transformer Engine tensor/utils.py
    cast_master_weights_to_fp8): delayed scaling writes the 1 B row-wise data with the
    previous scale; current (tensorwise), blockwise and MXFP8 scaling first read the master
    once more for the amaxes (all-reduced over the DP group, a few bytes per tensor, not
    priced), then write it: 1 B, or for MXFP8 row-wise and column-wise data with their E8M0
    scales (memory.weight_bytes). The transpose Hopper builds after the all-gather
    (post_all_gather_processing) is not priced."""
    if workload.precision == "mxfp8":
        return FP32_BYTES + weight_bytes(workload)
    if workload.precision == "nvfp4":
        # Megatron fp4_utils.quantize_nvfp4_param_shard -> TE quantize_master_weights: the
        # amax read, then the row-wise data with its scales (the column-wise copy is built
        # after the all-gather, not priced, as the Hopper transpose above)
        return FP32_BYTES + weight_bytes(workload) / 2
    delayed = quant_recipe(workload) == "delayed"
    return 1 if delayed else FP32_BYTES + 1


CLIP_BYTES_PER_PARAM = {"none": 0, "norm": GRAD_REDUCE_BYTES, "clip": 3 * GRAD_REDUCE_BYTES}
"""HBM bytes per parameter of the gradient-norm passes (Workload.grad_clip): the global L2 norm
reads each fp32 gradient once (4 B: Megatron get_grad_norm_fp32 multi_tensor_l2norm, torch
get_total_norm _foreach_norm, DeepSpeed scaled_global_norm); clipping then scales it in place
(read + write, 8 B: multi_tensor_scale / _foreach_mul_ / mul_). Measured on one H100 (torch
clip_grad_norm_ foreach over 2.8e9 fp32 gradients): 12.4 ms, 12 B per parameter at 2.7 TB/s
(bench/results/h100-2026-11-26/single-gpu-steps/steps/profile_s8b8-seq4096-mb1.json)."""


ADAM_OP = "adam"
"""The kernel-table op of the Adam step (memory_bound.csv): one multi-tensor kernel over fp32
parameters, gradients and both moments (torch.optim.AdamW(fused=True): aten::_fused_adamw_,
FusedAdamMathFunctor; Megatron's distributed optimizer runs Transformer Engine's / Apex's
FusedAdam, the same multi_tensor_apply class of kernel). Bytes: 28 per parameter (read param,
gradient, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq). Where a table has the op its
streaming rate (KernelBook.streaming_bytes_per_s) prices Adam's bytes: the kernel does not reach
the copy rows' bandwidth, and its shortfall grows with HBM speed (profiled, per step, on the
project's GPUs: 2,570 GB/s on an H100, 0.86 of its `copy` rows; 3,350 on an H200, 0.79 of its
`copy` rows; docs/cost_model.md "The step tail's own kernels")."""


CLIP_OP = "grad_clip"
"""The kernel-table op of the gradient-norm and clipping passes (memory_bound.csv): the global L2
norm over the fp32 gradients, then their in-place scaling, multi-tensor kernels both (torch
clip_grad_norm_ foreach: _foreach_norm, LpNormFunctor, and _foreach_mul_; Megatron's
multi_tensor_l2norm and multi_tensor_scale). Bytes: 12 per element (CLIP_BYTES_PER_PARAM "clip");
its rate prices the 4 B of "norm" too. Profiled per step: 2,700 GB/s on an H100, 3,620 on an
H200 (docs/cost_model.md "The step tail's own kernels")."""


def stage_optimizer_s(
    layout: Layout,
    sp: StageParams,
    hbm_bytes_per_s: float,
    workload: Workload | None = None,
    adam_bytes_per_s: float | None = None,
    clip_bytes_per_s: float | None = None,
    num_microbatches: int = 1,
) -> float:
    """Optimizer-step seconds of one stage: memory-bound Adam over its shard of parameters,
    after the gradient-norm and clipping passes over the same shard (CLIP_BYTES_PER_PARAM).
    `adam_bytes_per_s` and `clip_bytes_per_s` (the ADAM_OP and CLIP_OP rows' rates of the
    cluster's kernel tables, None without them) price the Adam kernel's own bytes and the
    clip passes'; the 16-bit gradients' cast (memory.step_cast: `num_microbatches` decides
    Megatron-FSDP's ZeRO-2), and whatever has no rate, stay at the HBM figure. The step's
    in-place zeroing of the gradients (grad_zero_bytes: at the start of the next step, on the
    same stream, before any forward) and Megatron's passes over the gradient buckets before
    their collectives (grad_bucket_pass_bytes: the NaN check's norm, the pre-scale) are part of
    the tail too, at the HBM figure."""
    cast = 0.0
    if workload is not None:
        cast = STEP_CAST_HBM_BYTES[step_cast(sp, layout, workload, num_microbatches)]
    per_param = optimizer_bytes_per_param(workload, cast)
    clip = CLIP_BYTES_PER_PARAM[workload.grad_clip] if workload is not None else 0
    shard_params = sp.dense + sp.expert if layout.zero_stage == 0 else shard_elements(sp, layout)
    passes = grad_bucket_pass_bytes(layout, sp, workload, num_microbatches)
    zeroing_s = (grad_zero_bytes(layout, sp, workload) + passes) / hbm_bytes_per_s
    if adam_bytes_per_s is None and clip_bytes_per_s is None:
        return shard_params * (per_param + clip) / hbm_bytes_per_s + zeroing_s
    adam = per_param - cast
    return zeroing_s + shard_params * (
        adam / (adam_bytes_per_s or hbm_bytes_per_s)
        + clip / (clip_bytes_per_s or hbm_bytes_per_s)
        + cast / hbm_bytes_per_s
    )


def grad_zero_bytes(layout: Layout, sp: StageParams, workload: Workload | None) -> float:
    """HBM bytes one rank of a stage writes each step zeroing its gradients in place
    (Workload.grad_zeroing; not under grads_set_to_none). Megatron zeroes the DDP grad buffer
    at the start of every iteration (megatron/training/training.py train_step ->
    distributed_data_parallel.py zero_grad_buffer -> param_and_grad_buffer.py reset:
    `self.grad_data.zero_()`), which holds a gradient for every parameter of the rank's model
    chunks, also under the distributed optimizer (it reduce-scatters out of that buffer);
    Megatron-FSDP zeroes its sharded buffer (megatron_fsdp param_and_grad_buffer.py zero_grad:
    `main_grad_buffer.data.zero_()`); torch's optimizer.zero_grad(set_to_none=False) zeroes
    the gradients as a rank keeps them, FSDP2's shards. So the elements are the ZeRO shard
    under ZeRO-3 and under a ZeRO-2 that reduces every backward
    (accumulation.grads_sharded_between_micro_batches), else every parameter of the stage, at
    grad_bytes each (Workload.main_grads). A memset is a write-only
    stream, priced at the HBM figure as the step's other passes without a table row. DualPipe's
    second copy of the gradients is not counted."""
    if workload is None or not workload.grad_zeroing or workload.grads_set_to_none:
        return 0.0
    # A ZeRO-2 rank counts as sharded only where it is at any micro-batch count (read at two):
    # Megatron's ZeRO-2 at one micro-batch runs Megatron-FSDP, which zeroes only its shard, but
    # priced so the step would drop from two micro-batches to one by more than a micro-batch and
    # stop being affine in them, which the batch-range search's bounds and bisection rely on
    # (tests/integration/search/test_sat_batch_range.py); it is charged the whole buffer there,
    # at most this memset too much, never a ZeRO-2 faster than the ZeRO-1 it runs as at m > 1.
    sharded = layout.zero_stage == 3 or (
        layout.zero_stage == 2
        and grads_sharded_between_micro_batches(layout, 2, workload.dp_accumulation)
    )
    elements = shard_elements(sp, layout) if sharded else sp.dense + sp.expert
    return elements * grad_bytes(workload)


def grad_bucket_pass_bytes(
    layout: Layout, sp: StageParams, workload: Workload | None, num_microbatches: int
) -> float:
    """HBM bytes one rank of a stage moves per step in Megatron's passes over its gradient
    buckets right before their data-parallel collectives, on the compute stream (dp_sync
    'megatron' only; megatron-core 0.19 distributed/param_and_grad_buffer.py start_grad_sync):

    - the NaN / Inf check (Workload.grad_nan_check): check_grads reads every bucket once,
      `grad_data.norm(p=2)`, grad_bytes per element; never under a full-iteration CUDA graph
      (Megatron-LM asserts --no-check-for-nan-in-loss-and-grad with it);
    - the pre-scale, `bucket.grad_data *= gradient_scaling_factor` where the factor is not 1
      (distributed_data_parallel.py): without Workload.grad_average_in_collective every bucket
      by 1 / (DP x CP) when that group has more than one rank; with it only the expert buckets,
      by EDP / (DP x CP) = TP / (EP x ETP), where the expert data-parallel group differs.
      Megatron-FSDP averages in the collective then (megatron_fsdp param_and_grad_buffer.py
      _get_reduce_op: ReduceOp.AVG) and otherwise scales bf16 buckets (`grad_data.mul_`), fp32
      ones inside NCCL (_make_nccl_premul_sum with gradient_reduce_div_fusion): a read and a
      write of grad_bytes each.

    Both cover the whole unsharded buffer (dense and expert: every parameter of the stage),
    once per reduction (accumulation.dp_rounds: once per step for DDP and the distributed
    optimizer, every micro-batch for Megatron-FSDP). Megatron-FSDP checks only where it does
    not overlap the reduction (megatron_fsdp.py start_grad_sync -> reduce_scatter_gradients
    -> _check_nan_in_grad, without overlap_grad_reduce), and the plans overlap it
    (planner/export/launch.py _megatron_dp_overlap). The rerun state machine's host sync on
    each bucket's norm (rerun_state_machine.py validate_result) is not priced."""
    if workload is None or workload.dp_sync != "megatron":
        return 0.0
    gb = grad_bytes(workload)
    every = sp.dense + sp.expert
    # ZeRO-2 counts as Megatron-FSDP only where it is at any micro-batch count (read at two),
    # as grad_zero_bytes reads it, so the step stays affine in the micro-batches: at one
    # micro-batch, where optim_grads runs, the check is charged though it does not run.
    # A ZeRO stage with nothing to shard runs as ZeRO-0 (memory.zero_in_effect).
    fsdp = zero_in_effect(sp, layout) > 0
    if fsdp and megatron_fsdp_queues(layout, workload, max(2, num_microbatches)):
        if workload.grad_average_in_collective or gb != BF16_BYTES or layout.dp * layout.cp == 1:
            return 0.0
        reduces, _gathers = dp_rounds(layout, num_microbatches, workload.dp_accumulation)
        return reduces * every * 2 * gb
    # DDP and the distributed optimizer reduce once per step (no_sync until the last
    # micro-batch, finalize_model_grads), as does a ZeRO stage with nothing to shard.
    checked = 0.0
    if workload.grad_nan_check and not workload.full_iteration_cuda_graph:
        checked = every * gb
    scaled = 0.0
    if not workload.grad_average_in_collective:
        scaled = every if layout.dp * layout.cp > 1 else 0.0  # 1 / (DP x CP), not 1
    elif layout.tp != layout.ep * layout.etp:  # EDP / (DP x CP) = TP / (EP x ETP), not 1
        scaled = sp.expert
    return checked + scaled * 2 * gb


FSDP2_GATHER_BYTES = (FP32_BYTES + BF16_BYTES, 2 * BF16_BYTES)
"""(per shard element, per unsharded element) HBM bytes of one FSDP2 all-gather's copies: the
copy-in casts the fp32 shard into the bf16 all-gather input (read 4 + write 2 B), the copy-out
splits the bf16 all-gather output into the unsharded parameters (read 2 + write 2 B)."""
FSDP2_REDUCE_BYTES = (BF16_BYTES + FP32_BYTES, 2 * FP32_BYTES, 3 * FP32_BYTES)
"""(per unsharded element, per unsharded element on one rank, per shard element) HBM bytes of
one FSDP2 reduce-scatter's passes: the copy-in chunk_cat of the bf16 gradients into the fp32
reduce buffer (read 2 + write 4 B); with a one-rank shard group no collective runs and FSDP2
copies the buffer into the output instead (read 4 + write 4 B); the output is accumulated into
the sharded fp32 gradient after the first reduction of a step (read 4 + 4, write 4 B)."""


FSDP2_DEFERRED_BYTES = (
    BF16_BYTES + FP32_BYTES,
    FP32_BYTES + BF16_BYTES + FP32_BYTES,
    2 * FP32_BYTES,
)
"""(first backward, each later backward, the one reduction) HBM bytes per unsharded element of
FSDP2's gradients under pipelining (accumulation.defers_to_last_backward), torch 2.14
_fsdp_param.py / _fsdp_collectives.py: to_accumulated_grad_if_needed casts the first bf16
gradient into the fp32 reduce-dtype accumulator (read 2 + write 4 B),
accumulate_unsharded_grad_if_needed adds each later one (read 4 + 2, write 4 B), and the
reduce-scatter's chunk_cat copies the fp32 accumulators into its fp32 input (read 4 + write
4 B) instead of casting bf16 gradients."""


def has_fsdp_copies(layout: Layout, workload: Workload) -> bool:
    """Whether the step makes FSDP2's parameter and gradient copies (fsdp_copies_s):
    Workload.fsdp_copies 'fsdp2' under ZeRO 2 / 3."""
    return workload.fsdp_copies == "fsdp2" and layout.zero_stage >= 2


CHUNK_CAT_OP = "chunk_cat"
"""The kernel-table op of FSDP2's reduce-scatter copy-in (memory_bound.csv): torch._chunk_cat of
the bf16 gradients into the fp32 reduce-scatter input (chunk_cat_cuda_kernel<float, BFloat16>),
6 bytes per element (read 2, write 4). Where a table has the op its streaming rate prices the
copy-in's bytes: the kernel runs far below HBM bandwidth and barely faster on faster HBM
(profiled, per step: 1,850 GB/s on an H100, 2,000 on an H200, where their `copy` rows stream
2,980 and 4,230; docs/cost_model.md "The step tail's own kernels")."""


def fsdp_copies_s(
    layout: Layout,
    sp: StageParams,
    m: int,
    hbm_bytes_per_s: float,
    workload: Workload,
    chunk_cat_bytes_per_s: float | None = None,
) -> float:
    """Seconds per step of one stage's FSDP2 parameter and gradient copies (Workload.fsdp_copies
    'fsdp2', ZeRO 2 / 3): torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py (torch 2.14)
    foreach_all_gather (copy-in), foreach_all_gather_copy_out (split_with_sizes_copy, on the
    compute stream in FSDPParamGroup.wait_for_unshard), foreach_reduce
    (foreach_reduce_scatter_copy_in's chunk_cat, issued on the compute stream before the
    reduce-scatter stream waits on it; the world-size-1 copy; the accumulation into
    sharded_param.grad). Counted as stage_dp_parts counts the collectives (dp_rounds with
    Workload.dp_accumulation): ZeRO-3 gathers before each forward and backward and reduces
    after each backward (m micro-batches); ZeRO-2 gathers and reduces every micro-batch without
    PP (torchtitan's train_step, 'every_micro_batch'); under pipelining (ZeRO 2 / 3) one
    reduction per step of the unsharded fp32 accumulators (FSDP2_DEFERRED_BYTES) and ZeRO-3's
    m + 1 gathers (accumulation.dp_rounds). `chunk_cat_bytes_per_s` (the CHUNK_CAT_OP row's
    rate of the cluster's kernel tables, None without one) prices the reduce-scatter copy-in's
    bytes; the rest stays at the HBM figure. Copy-in and accumulation run on
    side streams but are priced in series too: they touch 1 / shard of the elements, and on
    one H100 a step's profiled kernel time was within 1-3 % of the step (s1b-seq4096-mb2 198.1
    vs 196.2 ms, s8b8-seq4096-mb1 182.4 vs 186.6 ms): no overlap to speak of."""
    if not has_fsdp_copies(layout, workload):
        return 0.0
    full = sp.dense + sp.expert
    sharded = shard_elements(sp, layout)  # FSDP2 with EP shards experts beside EP
    dense_shard, expert_shard = shard_groups(layout)
    # a one-rank shard group runs no collective: FSDP2 copies the reduce buffer instead
    one_rank = (sp.dense if dense_shard == 1 else 0.0) + (sp.expert if expert_shard == 1 else 0.0)
    reduces, gathers = dp_rounds(layout, m, workload.dp_accumulation)
    in_b, out_b = FSDP2_GATHER_BYTES
    cat_b, one_rank_b, acc_b = FSDP2_REDUCE_BYTES
    per_gather = sharded * in_b + full * out_b
    accumulated = (reduces - 1) * sharded * acc_b
    if defers_to_last_backward(layout, workload.dp_accumulation):
        cast_b, add_b, cat_b = FSDP2_DEFERRED_BYTES
        accumulated = full * (cast_b + (m - 1) * add_b)
    per_reduce = full * cat_b + one_rank * one_rank_b
    moved = gathers * per_gather + reduces * per_reduce + accumulated
    if chunk_cat_bytes_per_s is None:
        return moved / hbm_bytes_per_s
    cat = reduces * full * cat_b
    return (moved - cat) / hbm_bytes_per_s + cat / chunk_cat_bytes_per_s


def is_block_recompute(lo: Layout) -> bool:
    """Full recompute of only the first recompute_num_layers layers per model chunk."""
    return lo.recompute == "full" and lo.recompute_method == "block"


def without_block_recompute(lo: Layout) -> Layout:
    """`lo` with no recompute: the layers block recompute leaves alone run as this."""
    return lo.with_update(
        {"recompute": "none", "recompute_method": None, "recompute_num_layers": None}
    )


def recomputed_layers(layout: Layout, counts: tuple[int, int]) -> tuple[float, float]:
    """(dense, MoE) layers of a pipeline rank that run the layout's recompute.

    Every layer, except under full recompute with recompute_method "block": Megatron-Core's
    TransformerBlock._checkpointed_forward recomputes only the first recompute_num_layers layers
    of each model chunk (vp chunks per rank) and keeps every activation of the rest. The rank's
    recomputed layers are split between the kinds in proportion to their counts.
    """
    n_dense, n_moe = counts
    n = n_dense + n_moe
    if layout.recompute != "full" or layout.recompute_method != "block" or not n:
        return float(n_dense), float(n_moe)
    assert layout.recompute_num_layers is not None
    share = min(layout.recompute_num_layers * layout.vp, n) / n
    return n_dense * share, n_moe * share


def stage_memory(
    model: ModelSpec,
    workload: Workload,
    layout: Layout,
    r: int,
    counts: tuple[int, int],
    layer_acts: LayerActivations,
    m: int,
    weights: float,
    grads: float,
    optim: float,
    mirror: tuple[int, int] | None = None,
    sp: StageParams | None = None,
) -> StageMemory:
    """Memory of pipeline rank `r` holding `counts` (dense, MoE) layers. Under DualPipe the rank
    also holds the mirror stage pp - 1 - r (`mirror`: its layer counts; None: as `counts`) for
    the reverse direction (github deepseek-ai/DualPipe examples/example_dualpipe.py:
    `full_modules[rank], full_modules[pp_size - 1 - rank]`); `weights`, `grads` and `optim` come
    from state_bytes with that mirror. DualPipe.step (dualpipe.py) keeps PP micro-batches of the
    chunk in which the rank is in the first half of its direction (stage min(r, pp-1-r)) and
    one of the other (the steady F0 B1 F1 B0 peak; README table: PP + 1), and ranks 0 and pp - 1
    both run the loss of one direction. `sp` (the stage's parameters) lets FSDP2's end of
    backward count (peak_grads)."""
    acts = stage_activation_bytes(model, workload, layout, r, counts, layer_acts, m, mirror)
    parts = (acts, buffer_bytes(model, workload, layout, m), weights, grads, optim)
    if sp is None:
        return memory_of_stage(r, *parts)
    parts, phase = stage_peak(workload, layout, sp, counts, lambda: layer_acts, parts, m)
    return memory_of_stage(r, *parts, phase)


PeakPhase = Literal["backward", "end_of_backward", "optimizer_step"]


def stage_peak(
    workload: Workload,
    layout: Layout,
    sp: StageParams,
    counts: tuple[int, int],
    layer_acts_of: Callable[[], LayerActivations],
    parts: tuple[float, float, float, float, float],
    num_microbatches: int,
) -> tuple[tuple[float, float, float, float, float], PeakPhase]:
    """(activations, buffers, weights, gradients, optimizer) bytes of a stage at its peak, and
    the phase that holds it (StageMemory.peak_phase), from the same at its backward start
    (memory.state_bytes' weights, gradients and optimizer): less FSDP2-under-pipelining
    ZeRO-3's weights credit (deferred_weights_credit), with FSDP2's end-of-backward phase and
    the optimizer step's gradient copies charged to the gradients (peak_grads). The one place
    both memory compositions take them from: the estimate's (Pricer._stage_bytes_of) and the
    CP-SAT stage partition caps' (stage_memory). Megatron-FSDP's queued gradient buckets
    (memory.grad_queue_bytes) are charged there too. `layer_acts_of` is called only where the
    credit or the queue can apply (ZeRO-3 with pp > 1; memory.queues_grad_buckets), so the
    search's memory checks build no activations otherwise."""
    acts, buffers, weights, grads, optim = parts
    if layout.zero_stage == 3 and layout.pp > 1:  # defers_to_last_backward needs both
        weights -= deferred_weights_credit(workload, layout, sp, counts, layer_acts_of())
    queue = 0.0
    if queues_grad_buckets(sp, layout, workload, num_microbatches):
        # the smallest layer of the stage's kinds frees the least: non-increasing as kinds
        # are added, so the stage's memory stays non-decreasing in each count
        layer_acts = layer_acts_of()
        freed = min(layer_acts.own.of(k) for k, n in ((False, counts[0]), (True, counts[1])) if n)
        queue = grad_queue_bytes(sp, layout, workload, num_microbatches, freed)
    parts = (acts, buffers, weights, grads, optim)
    grads, phase = peak_grads(workload, layout, sp, parts, num_microbatches, queue)
    return (acts, buffers, weights, grads, optim), phase


def deferred_weights_credit(
    workload: Workload,
    layout: Layout,
    sp: StageParams,
    counts: tuple[int, int],
    layer_acts: LayerActivations,
) -> float:
    """Bytes by which adding FSDP2-under-pipelining ZeRO-3's unsharded weights W (memory.
    state_bytes) to the in-flight activations overstates the stage's peak, without
    interleaving. A backward leaves every unit gathered (set_reshard_after_backward(False)) as
    it frees its micro-batch's activations A; the next forward reshards the units one by one
    (post_forward) as it builds A again: the two phases top at (k-1) A + W and k A, so the peak
    is k A + max(0, W - A) and the credit min(W, A). Interleaved chunks: none (upper bound)."""
    if layout.zero_stage != 3 or layout.vp != 1:
        return 0.0
    if not defers_to_last_backward(layout, workload.dp_accumulation):
        return 0.0
    per_mb = _per_microbatch_bytes(layout, counts, layer_acts)
    return min(BF16_BYTES * (sp.dense + sp.expert), per_mb)


def peak_grads(
    workload: Workload,
    layout: Layout,
    sp: StageParams,
    parts: tuple[float, float, float, float, float],
    num_microbatches: int,
    queue: float = 0.0,
) -> tuple[float, PeakPhase]:
    """The gradient bytes to report at a stage's peak and the phase that holds it, given
    (activations, buffers, weights, gradients, optimizer) at its backward start. Later phases
    may be the higher, and their excess is charged to the gradients so that the stage total
    is the largest phase:
    - under FSDP2's phases (memory_phases 'fsdp2', ZeRO-3) the end of backward
      (memory.fsdp2_end_of_backward_bytes: every gradient and the last unit's reduce buffers,
      no activations; not where every gradient is unsharded already, memory.state_bytes);
    - the optimizer step (memory.step_grad_bytes): weights, optimizer states and the
      gradients with their fp32 copies, after the activations and buffers are freed.
    `queue` (memory.grad_queue_bytes) is what the backward's queued unsharded gradient buckets
    add over its start, net of the activations freed by then: still the backward phase."""
    acts, buffers, weights, grads, optim = parts
    start = acts + buffers + weights + grads + optim + queue
    end = start
    fsdp2 = workload.memory_phases == "fsdp2" and fsdp2_phased(layout)
    if fsdp2 and not defers_to_last_backward(layout, workload.dp_accumulation):
        end = fsdp2_end_of_backward_bytes(sp, layout, workload)
    step = weights + step_grad_bytes(sp, layout, workload, num_microbatches, grads) + optim
    phase: PeakPhase = "backward"
    if step > max(start, end):
        phase = "optimizer_step"
    elif end > start:
        phase = "end_of_backward"
    return grads + queue + max(0.0, end - start, step - start), phase


def stage_activation_bytes(
    model: ModelSpec,
    workload: Workload,
    layout: Layout,
    r: int,
    counts: tuple[int, int],
    layer_acts: LayerActivations,
    m: int,
    mirror: tuple[int, int] | None = None,
) -> float:
    """Activation bytes of pipeline rank `r` at its peak (stage_memory's arguments; stage_memory
    adds buffers and states). Reads neither the ZeRO stage nor the order (Pricer caches it
    across both, pricer.NOT_IN_ACTIVATIONS)."""
    if layout.pp_schedule == "dualpipe":
        return _dualpipe_activation_bytes(
            model, workload, layout, r, counts, mirror or counts, layer_acts
        )
    kinds = [(False, counts[0]), (True, counts[1])]
    per_mb = _per_microbatch_bytes(layout, counts, layer_acts)
    acts = per_mb * inflight_chunks(layout, r, m)
    rebuild = 0.0
    if layout.recompute == "full" and sum(counts):
        # Backward of a checkpoint rebuilds its layers' full activations for one micro-batch:
        # one layer, or a uniform group of recompute_num_layers (Megatron's uniform method
        # checkpoints groups and keeps only each group's input).
        group = 1
        if layout.recompute_method == "uniform" and layout.recompute_num_layers:
            group = min(layout.recompute_num_layers, sum(counts))
            # one input per group instead of per layer
            per_layer_in = max(layer_acts.own.of(k) for k, n in kinds if n)  # own: full
            acts -= (1 - 1 / group) * sum(counts) * per_layer_in * inflight_chunks(layout, r, m)
        rebuild = group * max(layer_acts.none.of(k) for k, n in kinds if n)
    acts += rebuild
    if r == layout.pp - 1:
        loss = logits_bytes(model, workload, layout)
        loss += kept_outputs_bytes(model, workload, layout, m)
        if workload.memory_phases == "fsdp2":
            # The loss and its backward end (the logits and their gradient freed by the LM
            # head's backward) before the last layer's checkpoint is rebuilt: the two peaks
            # are sequential, not stacked (autograd runs the loss nodes first).
            return acts - rebuild + max(rebuild, loss)
        acts += loss
    return acts


@dataclass(frozen=True, slots=True)
class LayerActivations:
    """Activation bytes one micro-batch leaves per layer of each kind (memory.
    layer_activation_bytes): under the layout's own recompute mode, and without recompute (the
    layers block recompute leaves alone; a checkpoint's rebuild in backward)."""

    own: ByKind[float]
    none: ByKind[float]


def _per_microbatch_bytes(
    layout: Layout, counts: tuple[int, int], layer_acts: LayerActivations
) -> float:
    """Activation bytes one micro-batch leaves on a stage of `counts` layers (the layers CPU
    offloading moves to the host excepted, offloaded_layers)."""
    kinds = [(False, counts[0]), (True, counts[1])]
    redo = recomputed_layers(layout, counts)
    kept = sum(
        x * layer_acts.own.of(k) + (n - x) * layer_acts.none.of(k)
        for (k, n), x in zip(kinds, redo, strict=True)
        if n
    )
    if layout.cpu_offload_layers:
        off = offloaded_layers(layout, counts)
        kept -= sum(x * layer_acts.none.of(k) for (k, _n), x in zip(kinds, off, strict=True) if x)
    return kept


def offloaded_layers(layout: Layout, counts: tuple[int, int]) -> tuple[int, int]:
    """(dense, MoE) layers of a stage whose saved activations CPU offloading keeps on the host
    at the end of forward: the first cpu_offload_layers layers (Transformer Engine
    cpu_offload.py DefaultOffloadSynchronizer offloads layers 0 .. k-1 and frees each on the GPU
    before layer L-k+i runs, so the GPU's peak holds (L - k) layers' activations, its docstring;
    dense layers come first, ModelSpec.first_k_dense_layers). pp is 1 (Layout refuses more)."""
    k = layout.cpu_offload_layers
    dense = min(k, counts[0])
    return dense, min(k - dense, counts[1])


def offload_exposed_s(
    counts: tuple[int, int],
    k: int,
    times: ByKind[LayerTime],
    layer_bytes: ByKind[float],
    host_bytes_per_s: float,
) -> tuple[float, float]:
    """(exposed, link-busy) seconds per micro-batch of CPU activation offloading on a stage of
    `counts` layers offloading its first `k`: each offloaded layer's saved bytes (`layer_bytes`)
    go out over the host link in forward and come back in backward on one copy stream, behind
    the layers' compute, up to TE's synchronisation points (DefaultOffloadSynchronizer):
    layer i's copy-out starts when its forward ends and must end before layer L-k+i's forward
    starts (finish_offload_map); its reload starts before layer L-1-k+i's backward and must end
    before layer i's backward (start_reload_map, pop_tensor's wait). The compute stream waits
    where a copy is late: what is exposed is that wait, followed layer by layer."""
    kinds = [False] * counts[0] + [True] * counts[1]
    n = len(kinds)
    fwd = [times.of(m).forward_s for m in kinds]
    bwd = [times.of(m).backward_s for m in kinds]
    copy = [layer_bytes.of(m) / host_bytes_per_s for m in kinds[:k]]
    t = s = 0.0
    done = [0.0] * k
    for j in range(n):  # forward: copy-out of layer j after it, deadline layer n - k + j
        if j >= n - k:
            t = max(t, done[j - (n - k)])
        t += fwd[j]
        if j < k:
            s = done[j] = max(s, t) + copy[j]
    exposed = t - sum(fwd)
    t = s = 0.0
    ready = [0.0] * k
    for j in reversed(range(n)):  # backward: reload of layer i starts at layer n - 1 - k + i
        i = j - (n - 1 - k)
        if 0 <= i < k:
            s = ready[i] = max(s, t) + copy[i]
        if j < k:
            t = max(t, ready[j])
        t += bwd[j]
    return exposed + t - sum(bwd), 2 * sum(copy)


def _dualpipe_activation_bytes(
    model: ModelSpec,
    workload: Workload,
    layout: Layout,
    r: int,
    counts: tuple[int, int],
    mirror: tuple[int, int],
    layer_acts: LayerActivations,
) -> float:
    """stage_activation_bytes under DualPipe (stage_memory's docstring): PP micro-batches of the
    early chunk, one of the late chunk, the logits on ranks 0 and pp - 1."""
    p = layout.pp
    early, late = (counts, mirror) if r < p - 1 - r else (mirror, counts)
    held = ((early, p), (late, 1))
    acts = sum(_per_microbatch_bytes(layout, c, layer_acts) * n for c, n in held)
    present = [k for k, i in ((False, 0), (True, 1)) if counts[i] or mirror[i]]
    if layout.recompute == "full" and present:
        # as stage_memory: one checkpoint group rebuilt at a time (rules.py: vp 1 under DualPipe)
        group = 1
        if layout.recompute_method == "uniform" and layout.recompute_num_layers:
            group = min(layout.recompute_num_layers, max(sum(counts), sum(mirror)))
            per_layer_in = max(layer_acts.own.of(k) for k in present)  # own: full
            acts -= sum((1 - 1 / group) * sum(c) * per_layer_in * n for c, n in held)
        acts += group * max(layer_acts.none.of(k) for k in present)
    if r in (0, p - 1):
        acts += logits_bytes(model, workload, layout)
    return acts


def memory_of_stage(
    r: int,
    acts: float,
    buffers: float,
    weights: float,
    grads: float,
    optim: float,
    phase: PeakPhase = "backward",
    gathered: float = 0.0,
) -> StageMemory:
    """Rank r's StageMemory from its bytes (activations, memory.buffer_bytes, states), the
    reserve they imply, the phase that holds the peak (stage_peak) and the gathered ZeRO-3
    parameters among the weights (memory.zero3_gathered_bytes)."""
    return StageMemory(
        stage=r,
        weights_gib=weights / GIB,
        gathered_gib=gathered / GIB,
        gradients_gib=grads / GIB,
        optimizer_gib=optim / GIB,
        activations_gib=acts / GIB,
        buffers_gib=buffers / GIB,
        reserve_gib=_reserve_gib(acts, buffers),
        peak_phase=phase,
    )


def stage_total_gib(
    acts: float, buffers: float, weights: float, grads: float, optim: float
) -> float:
    """memory_of_stage(...).total_gib (StageMemory.total_gib: the same sum of the same floats,
    in the same order) without building the StageMemory: the planner checks the memory of tens
    of thousands of shapes per plan and reads only this."""
    return (
        weights / GIB
        + grads / GIB
        + optim / GIB
        + acts / GIB
        + buffers / GIB
        + _reserve_gib(acts, buffers)
    )


def _reserve_gib(acts: float, buffers: float) -> float:
    """CUDA context and the allocator's share of the dynamic bytes (activations, buffers)."""
    return CUDA_CONTEXT_GIB + ALLOCATOR_OVERHEAD * (acts + buffers) / GIB
