"""The public per-stage API of the cost model: one layer's cost, one stage's DP and optimizer time,
one stage's memory. `estimate()` composes a step from these, and the planner's bounds and stage
partition call the same functions, so a bound and the estimate it bounds share every formula.
Derivations: docs/cost_model.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import comm
from .calibration import (
    MOE_LOAD_IMBALANCE,
    GenerationCalibration,
    calibration_for_cluster,
    overlap_slowdown_s,
)
from .compute import LayerTime, attention_gemms, gemm_time_s, mlp_gemms, tokens_per_gpu
from .cp import cp_layer_s
from .memory import (
    ALLOCATOR_OVERHEAD,
    CUDA_CONTEXT_GIB,
    GIB,
    StageParams,
    buffer_bytes,
    kept_outputs_bytes,
    logits_bytes,
)
from .pipeline import inflight_chunks
from .specs import Cluster, Layout, ModelSpec, StageMemory, Workload

BF16_BYTES = 2
GRAD_REDUCE_BYTES = 4  # fp32 gradient reduction (Megatron under bf16; torchtitan reduce_dtype)
OPTIMIZER_BYTES_PER_PARAM = 30  # Adam: read grad 4 + master/m/v 12, write master/m/v 12 + bf16 2


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

    @property
    def total_s(self) -> float:
        return self.compute_s + self.recompute_s + self.tp_s + self.cp_exposed_s + self.ep_s


def layer_cost(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    span: Mapping[str, Sequence[int]],
    *,
    is_moe: bool,
) -> LayerCost:
    tiers = cluster.tiers
    t = tokens_per_gpu(workload, layout)
    h = model.hidden_size
    recompute_s = lt.recompute_s(layout.recompute, layout.selective_modules)
    # TP: one all-reduce (or RS + AG under sequence parallelism: same bytes) per block per pass.
    blocks = 1 if (is_moe and layout.etp == 1) else 2
    passes = 3 if layout.recompute == "full" else 2
    tp_s = (
        blocks
        * passes
        * comm.collective_time_s("all_reduce", t * h * BF16_BYTES, span["tp"], tiers)
    )
    tp_total_s = tp_s
    if layout.tp_comm_overlap and tp_s > 0:
        per_collective_s = tp_s / (2 * blocks * passes)  # all-reduce = reduce-scatter + gather
        cal = calibration_for_cluster(cluster)
        tp_s = sum(
            overlapped_tp_s(per_collective_s, layout.tp, g * mult, cal.comm_sm_fraction)
            for g in tp_partner_gemm_s(model, cluster, workload, layout, lt, blocks)
            for mult in (1, 2) + ((1,) if passes == 3 else ())  # fwd, bwd (dgrad+wgrad), recompute
        )
    # CP: K/V exchange beside the attention steps (cost_models/cp.py, per implementation).
    cp_exposed, cp_total = cp_layer_s(
        model, cluster, calibration_for_cluster(cluster), workload, layout, lt, span["cp"]
    )
    # EP: dispatch + combine all-to-all per pass (Megatron-Core alltoall token dispatcher).
    ep_s = 0.0
    if is_moe and layout.ep > 1:
        moe = model.moe
        assert moe is not None
        payload = t / layout.tp * moe.top_k * h * BF16_BYTES * MOE_LOAD_IMBALANCE
        # A recomputed MoE module (Megatron recompute_modules "moe") dispatches again.
        ep_passes = passes + (layout.recompute == "selective" and "moe" in layout.selective_modules)
        ep_s = 2 * ep_passes * comm.all_to_all_time_s(payload, span["ep"], tiers)
    return LayerCost(
        lt.forward_s + lt.backward_s, recompute_s, tp_s, cp_exposed, cp_total, ep_s, tp_total_s
    )


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


def tp_partner_gemm_s(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    blocks: int,
) -> list[float]:
    """Forward seconds of the GEMM paired with each TP collective of a layer, in layer order.

    Attention block: all-gather -> QKV (and MLA down/up) projections, output projection ->
    reduce-scatter; MLP block: all-gather -> up(+gate) projection, down projection ->
    reduce-scatter. MoE layers with etp > 1 split their GEMM time evenly between the two.
    """
    cal = calibration_for_cluster(cluster)
    fp8 = workload.precision in ("fp8", "mxfp8")
    t = tokens_per_gpu(workload, layout)
    attn = attention_gemms(model, t, layout.tp)
    ag_s = gemm_time_s(attn[:-1], cluster.gpu, cal, fp8)
    rs_s = gemm_time_s(attn[-1:], cluster.gpu, cal, fp8)
    partners = [ag_s, rs_s]
    if blocks == 2:
        if model.ffn_hidden_size is not None and model.moe is None:
            up, down = mlp_gemms(model, t, model.ffn_hidden_size, layout.tp)
            partners += [gemm_time_s([g], cluster.gpu, cal, fp8) for g in (up, down)]
        else:
            partners += [max(0.0, lt.gemm_s - ag_s - rs_s) / 2] * 2
    return partners


def dp_time_s(
    cluster: Cluster, layout: Layout, dense: float, expert: float, span: Mapping[str, Sequence[int]]
) -> tuple[float, float]:
    """(gradient reduction, parameter gather) seconds per step for one stage's parameters.

    Dense parameters reduce over the DP x CP group, expert parameters over the expert-DP group;
    a group with nothing to move (a dense model has no expert-DP group) runs no collective and
    pays no latency."""
    tiers = cluster.tiers
    if layout.dp_shard is not None and layout.zero_stage >= 1:
        # HSDP (torchtitan, FSDP2 over a 2-D mesh; Layout forbids EP with it): reduce-scatter
        # inside the shard group, all-reduce of the shard across the replicas, all-gather
        # inside the shard group (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py).
        shard_n = layout.shard_dp * layout.cp
        grads = comm.collective_time_s(
            "reduce_scatter", dense * GRAD_REDUCE_BYTES, span["dp_shard"], tiers
        ) + comm.collective_time_s(
            "all_reduce", dense * GRAD_REDUCE_BYTES / shard_n, span["dp_replicate"], tiers
        )
        gather = comm.collective_time_s("all_gather", dense * BF16_BYTES, span["dp_shard"], tiers)
        return grads, gather
    reduce = "all_reduce" if layout.zero_stage == 0 else "reduce_scatter"
    parts = [(dense, span["dp_cp"])]
    if expert > 0 and "edp" in span:
        parts.append((expert, span["edp"]))
    grads = gather = 0.0
    for params, group in parts:
        if params <= 0:
            continue
        grads += comm.collective_time_s(reduce, params * GRAD_REDUCE_BYTES, group, tiers)
        if layout.zero_stage >= 1:
            gather += comm.collective_time_s("all_gather", params * BF16_BYTES, group, tiers)
    return grads, gather


def stage_dp_s(
    cluster: Cluster,
    cal: GenerationCalibration,
    layout: Layout,
    sp: StageParams,
    compute_s: float,
    m: int,
    span: Mapping[str, Sequence[int]],
) -> tuple[float, float]:
    """(exposed, link-busy) DP seconds per step of one stage; compute_s is its forward + backward
    per micro-batch. Also used by the planner's step-time lower bound (planner/search/bounds.py)."""
    grads_s, gather_s = dp_time_s(cluster, layout, sp.dense, sp.expert, span)
    fwd_mb = compute_s / 3  # forward is a third of forward + backward
    if layout.zero_stage == 3:
        # FSDP: gather before each forward and backward, reduce-scatter after each backward.
        exposed = m * (max(0.0, gather_s - fwd_mb) + max(0.0, gather_s + grads_s - 2 * fwd_mb))
        total = m * (2 * gather_s + grads_s)
    else:
        exposed = max(0.0, grads_s - 2 * fwd_mb) + max(0.0, gather_s - fwd_mb)
        total = grads_s + gather_s
    exposed += overlap_slowdown_s(total - exposed, cal)  # compute slowed beside the NCCL
    return exposed, total


def stage_optimizer_s(layout: Layout, sp: StageParams, hbm_bytes_per_s: float) -> float:
    """Optimizer-step seconds of one stage (memory-bound Adam over its shard of parameters)."""
    shard = 1 if layout.zero_stage == 0 else layout.shard_dp * layout.cp
    return (sp.dense + sp.expert) / shard * OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s


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
    acts_per_mb: dict[tuple[bool, str], float],
    m: int,
    weights: float,
    grads: float,
    optim: float,
) -> StageMemory:
    kinds = [(False, counts[0]), (True, counts[1])]
    redo = recomputed_layers(layout, counts)
    per_mb = sum(
        x * acts_per_mb[(k, layout.recompute)] + (n - x) * acts_per_mb[(k, "none")]
        for (k, n), x in zip(kinds, redo, strict=True)
        if n
    )
    acts = per_mb * inflight_chunks(layout, r, m)
    if layout.recompute == "full" and sum(counts):
        # Backward of a checkpoint rebuilds its layers' full activations for one micro-batch:
        # one layer, or a uniform group of recompute_num_layers (Megatron's uniform method
        # checkpoints groups and keeps only each group's input).
        group = 1
        if layout.recompute_method == "uniform" and layout.recompute_num_layers:
            group = min(layout.recompute_num_layers, sum(counts))
            # one input per group instead of per layer
            per_layer_in = max(acts_per_mb[(k, "full")] for k, n in kinds if n)
            acts -= (1 - 1 / group) * sum(counts) * per_layer_in * inflight_chunks(layout, r, m)
        acts += group * max(acts_per_mb[(k, "none")] for k, n in kinds if n)
    if r == layout.pp - 1:
        acts += logits_bytes(model, workload, layout)
        acts += kept_outputs_bytes(model, workload, layout, m)
    buffers = buffer_bytes(model, workload, layout)
    dynamic = acts + buffers
    return StageMemory(
        stage=r,
        weights_gib=weights / GIB,
        gradients_gib=grads / GIB,
        optimizer_gib=optim / GIB,
        activations_gib=acts / GIB,
        buffers_gib=buffers / GIB,
        reserve_gib=CUDA_CONTEXT_GIB + ALLOCATOR_OVERHEAD * dynamic / GIB,
    )
