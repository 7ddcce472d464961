"""estimate(): compose compute, communication, pipeline and memory into one Estimate.

Per micro-batch and pipeline stage: layer compute (forward, backward, recompute) plus the in-layer
collectives that sit on the critical path (TP, CP beyond what attention hides, EP all-to-alls).
The pipeline schedule turns stage times into a step; DP gradient / parameter traffic overlaps
with the backward (forward) of the last (first) micro-batch and only the excess is exposed; the
optimizer step is memory-bound. Derivations: docs/cost_model.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import comm, topology
from .calibration import (
    MOE_LOAD_IMBALANCE,
    GenerationCalibration,
    calibration_for,
    overlap_slowdown_s,
)
from .compute import (
    LayerTime,
    attention_gemms,
    gemm_time_s,
    layer_time,
    lm_head_time,
    mlp_gemms,
    moe_gemms,
    tokens_per_gpu,
)
from .cp import cp_layer_s
from .errors import InvalidInput
from .memory import (
    ALLOCATOR_OVERHEAD,
    CUDA_CONTEXT_GIB,
    GIB,
    StageParams,
    buffer_bytes,
    kept_outputs_bytes,
    layer_activation_bytes,
    logits_bytes,
    stage_params,
    state_bytes,
)
from .pipeline import inflight_chunks, schedule_time_s, stage_layers
from .rules import layout_violations
from .specs import Cluster, Estimate, Layout, ModelSpec, StageMemory, Workload

BF16_BYTES = 2
GRAD_REDUCE_BYTES = 4  # fp32 gradient reduction (Megatron under bf16; torchtitan reduce_dtype)
OPTIMIZER_BYTES_PER_PARAM = 30  # Adam: read grad 4 + master/m/v 12, write master/m/v 12 + bf16 2

TERMS = (
    "compute",
    "recompute",
    "tp_comm",
    "cp_comm",
    "ep_comm",
    "pp_comm",
    "dp_comm",
    "bubble",
    "optimizer",
)


@dataclass(frozen=True, slots=True)
class _LayerCost:
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


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward FLOPs per token (PaLM App. B convention, causal attention), all layers + LM head."""
    one = Layout()
    attn = sum(g.flops for g in attention_gemms(model, 1, 1))
    mla = model.mla
    d_qk = model.attn_head_dim if mla is None else mla.qk_nope_head_dim + mla.qk_rope_head_dim
    d_v = model.attn_head_dim if mla is None else mla.v_head_dim
    attn += seq_len * model.num_attention_heads * (d_qk + d_v)
    total = (model.vocab_size or 0) * model.hidden_size * 2.0
    if model.num_dense_layers:
        assert model.ffn_hidden_size is not None
        dense_mlp = sum(g.flops for g in mlp_gemms(model, 1, model.ffn_hidden_size, 1))
        total += model.num_dense_layers * (attn + dense_mlp)
    if model.num_moe_layers:
        total += model.num_moe_layers * (attn + sum(g.flops for g in moe_gemms(model, 1, one)))
    return total


def _layer_cost(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    span: dict[str, list[int]],
    *,
    is_moe: bool,
) -> _LayerCost:
    tiers = cluster.tiers
    t = tokens_per_gpu(workload, layout)
    h = model.hidden_size
    recompute_s = lt.recompute_s(layout.recompute)
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
        cal = calibration_for(cluster.gpu.generation)
        tp_s = sum(
            _overlapped_tp_s(per_collective_s, layout.tp, g * mult, cal.comm_sm_fraction)
            for g in _tp_partner_gemm_s(model, cluster, workload, layout, lt, blocks)
            for mult in (1, 2) + ((1,) if passes == 3 else ())  # fwd, bwd (dgrad+wgrad), recompute
        )
    # CP: K/V exchange beside the attention steps (cost_models/cp.py, per implementation).
    cp_exposed, cp_total = cp_layer_s(
        model, cluster, calibration_for(cluster.gpu.generation), workload, layout, lt, span["cp"]
    )
    # EP: dispatch + combine all-to-all per pass (Megatron-Core alltoall token dispatcher).
    ep_s = 0.0
    if is_moe and layout.ep > 1:
        moe = model.moe
        assert moe is not None
        payload = t / layout.tp * moe.top_k * h * BF16_BYTES * MOE_LOAD_IMBALANCE
        ep_s = 2 * passes * comm.all_to_all_time_s(payload, span["ep"], tiers)
    return _LayerCost(
        lt.forward_s + lt.backward_s, recompute_s, tp_s, cp_exposed, cp_total, ep_s, tp_total_s
    )


def _overlapped_tp_s(
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


def _tp_partner_gemm_s(
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
    cal = calibration_for(cluster.gpu.generation)
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


def _dp_time_s(
    cluster: Cluster, layout: Layout, dense: float, expert: float, span: dict[str, list[int]]
) -> tuple[float, float]:
    """(gradient reduction, parameter gather) seconds per step for one stage's parameters."""
    tiers = cluster.tiers
    grads = comm.collective_time_s(
        "all_reduce" if layout.zero_stage == 0 else "reduce_scatter",
        dense * GRAD_REDUCE_BYTES,
        span["dp_cp"],
        tiers,
    ) + comm.collective_time_s(
        "all_reduce" if layout.zero_stage == 0 else "reduce_scatter",
        expert * GRAD_REDUCE_BYTES,
        span["edp"],
        tiers,
    )
    gather = 0.0
    if layout.zero_stage >= 1:
        gather = comm.collective_time_s("all_gather", dense * BF16_BYTES, span["dp_cp"], tiers)
        gather += comm.collective_time_s("all_gather", expert * BF16_BYTES, span["edp"], tiers)
    return grads, gather


def _stage_dp_s(
    cluster: Cluster,
    cal: GenerationCalibration,
    layout: Layout,
    sp: StageParams,
    compute_s: float,
    m: int,
    span: dict[str, list[int]],
) -> tuple[float, float]:
    """(exposed, link-busy) DP seconds per step of one stage; compute_s is its forward + backward
    per micro-batch. Also used by the planner's step-time lower bound (planner/sat/bounds.py)."""
    grads_s, gather_s = _dp_time_s(cluster, layout, sp.dense, sp.expert, span)
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


def _stage_optimizer_s(layout: Layout, sp: StageParams, hbm_bytes_per_s: float) -> float:
    """Optimizer-step seconds of one stage (memory-bound Adam over its shard of parameters)."""
    shard = 1 if layout.zero_stage == 0 else layout.dp * layout.cp
    return (sp.dense + sp.expert) / shard * OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s


def estimate(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    *,
    layers_per_stage: tuple[int, ...] | None = None,
) -> Estimate:
    """Score one layout. Raises InvalidInput (naming the rule) if the layout is illegal."""
    problems = layout_violations(model, cluster, workload, layout)
    if problems:
        raise InvalidInput("; ".join(problems))
    gpu = cluster.gpu
    cal = calibration_for(gpu.generation)
    m = workload.global_batch_seqs // (layout.micro_batch * layout.dp)
    span = topology.spans(cluster, layout)
    kinds = [False] * bool(model.num_dense_layers) + [True] * bool(model.num_moe_layers)
    costs = {
        k: _layer_cost(
            model,
            cluster,
            workload,
            layout,
            layer_time(model, gpu, cal, workload, layout, is_moe=k),
            span,
            is_moe=k,
        )
        for k in kinds
    }
    head = lm_head_time(model, gpu, cal, workload, layout)
    first_moe = model.num_dense_layers if model.moe is not None else model.num_layers
    # (dense, moe) layer counts per pipeline rank; layers of one kind cost the same.
    counts = [
        (sum(1 for i in layers if i < first_moe), sum(1 for i in layers if i >= first_moe))
        for layers in stage_layers(model, layout, layers_per_stage)
    ]

    # Per-stage, per-micro-batch seconds by term.
    per_stage: list[dict[str, float]] = []
    for r, (n_dense, n_moe) in enumerate(counts):
        terms = dict.fromkeys(
            ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "cp_total", "tp_total"), 0.0
        )
        for n, c in ((n_dense, costs.get(False)), (n_moe, costs.get(True))):
            if not n or c is None:
                continue
            terms["compute"] += n * c.compute_s
            terms["recompute"] += n * c.recompute_s
            terms["tp_comm"] += n * c.tp_s
            terms["cp_comm"] += n * c.cp_exposed_s
            terms["cp_total"] += n * c.cp_total_s
            terms["tp_total"] += n * c.tp_total_s
            terms["ep_comm"] += n * c.ep_s
        if r == layout.pp - 1:
            terms["compute"] += head.forward_s + head.backward_s
        per_stage.append(terms)
    stage_s = [sum(v for k, v in t.items() if k not in ("cp_total", "tp_total")) for t in per_stage]
    _steady_s, bubble_s, crit = schedule_time_s(stage_s, m, layout.vp)

    breakdown = {k: 0.0 for k in TERMS}
    for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm"):
        breakdown[k] = m * per_stage[crit][k]
    breakdown["bubble"] = bubble_s

    # PP: activations cross each stage boundary forward and their gradients backward; the steady
    # state overlaps the sends, fill and drain do not (Megatron overlap_p2p_comm).
    t = tokens_per_gpu(workload, layout)
    pp_payload = t * model.hidden_size * BF16_BYTES / layout.tp
    p2p_s = comm.p2p_time_s(pp_payload, topology.outermost_tier(cluster, span["pp"]))
    breakdown["pp_comm"] = 2 * (layout.pp - 1) * p2p_s
    comm_total = {
        "tp": m * per_stage[crit]["tp_total"],
        "cp": m * per_stage[crit]["cp_total"],
        "ep": m * per_stage[crit]["ep_comm"],
        "pp": 2 * m * layout.vp * p2p_s if layout.pp > 1 else 0.0,
    }

    # DP and optimizer, stage by stage; the slowest stage sets the tail of the step.
    stage_mem: list[StageMemory] = []
    dp_exposed = dp_total = opt_s = 0.0
    hbm_bytes_per_s = gpu.hbm_bandwidth_gb_per_s * 1e9 * cal.hbm_efficiency
    acts_per_mb = {
        (k, rc): layer_activation_bytes(model, workload, layout, is_moe=k, recompute=rc)
        for k in kinds
        for rc in {layout.recompute, "none"}
    }
    for r, (n_dense, n_moe) in enumerate(counts):
        sp = stage_params(model, layout, n_dense, n_moe, r)
        exposed, total = _stage_dp_s(cluster, cal, layout, sp, per_stage[r]["compute"], m, span)
        dp_exposed, dp_total = max(dp_exposed, exposed), max(dp_total, total)
        weights, grads, optim = state_bytes(sp, layout, m)
        opt_s = max(opt_s, _stage_optimizer_s(layout, sp, hbm_bytes_per_s))
        stage_mem.append(
            _stage_memory(
                model, workload, layout, r, (n_dense, n_moe), acts_per_mb, m, weights, grads, optim
            )
        )
    breakdown["dp_comm"] = dp_exposed
    breakdown["optimizer"] = opt_s
    comm_total["dp"] = dp_total

    step_s = sum(breakdown.values())
    tokens = workload.global_batch_seqs * workload.seq_len
    peak_tflops = gpu.peak_bf16_tflops
    if workload.precision in ("fp8", "mxfp8") and gpu.peak_fp8_tflops is not None:
        peak_tflops = gpu.peak_fp8_tflops
    mfu = (
        3
        * model_flops_per_token(model, workload.seq_len)
        * tokens
        / (step_s * cluster.num_gpus * peak_tflops * 1e12)
    )
    peak_gib = max(s.total_gib for s in stage_mem)
    return Estimate(
        layout=layout,
        num_microbatches=m,
        step_time_s=step_s,
        tokens_per_s_per_gpu=tokens / step_s / cluster.num_gpus,
        mfu=mfu,
        peak_memory_gib=peak_gib,
        usable_memory_gib=gpu.hbm_gib,
        fits_in_memory=peak_gib <= gpu.hbm_gib,
        breakdown_s=breakdown,
        comm_total_s=comm_total,
        stage_memory=tuple(stage_mem),
        placement=topology.placement(cluster, layout),
        layers_per_stage=None if layers_per_stage is None else tuple(layers_per_stage),
    )


def _stage_memory(
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
    per_mb = sum(n * acts_per_mb[(k, layout.recompute)] for k, n in kinds if n)
    acts = per_mb * inflight_chunks(layout, r, m)
    if layout.recompute == "full" and sum(counts):
        # Backward of a checkpointed layer rebuilds its full activations for one micro-batch.
        acts += max(acts_per_mb[(k, "none")] for k, n in kinds if n)
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
