"""estimate(): compose compute, communication, pipeline and memory into one Estimate.

Per micro-batch and pipeline stage: layer compute (forward, backward, recompute) plus the in-layer
collectives that sit on the critical path (TP, CP beyond what attention hides, EP all-to-alls).
The pipeline schedule turns stage times into a step; DP gradient / parameter traffic overlaps
with the backward (forward) of the last (first) micro-batch and only the excess is exposed; the
optimizer step is memory-bound. Derivations: docs/cost_model.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import comm, topology, uplink
from .calibration import (
    calibration_for_cluster,
)
from .compute import (
    attention_gemms,
    layer_time,
    lm_head_time,
    mlp_gemms,
    moe_gemms,
    tokens_per_gpu,
)
from .errors import InvalidInput
from .memory import (
    layer_activation_bytes,
    memory_validated,
    stage_params,
    state_bytes,
)
from .pipeline import dualpipe_bubble_s, num_microbatches, schedule_time_s, stage_layers
from .rules import layout_violations
from .specs import Cluster, Estimate, Layout, ModelSpec, StageMemory, Workload
from .stage import (
    BF16_BYTES,
    LayerCost,
    layer_cost,
    recomputed_layers,
    stage_dp_s,
    stage_dp_tier_s,
    stage_memory,
    stage_optimizer_s,
)

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


def _tier_busy_s(
    cluster: Cluster,
    crit_terms: dict[str, float],
    m: int,
    pp_total_s: float,
    pp_span: list[int],
    dp_tiers: list[float],
) -> dict[str, dict[str, float]]:
    """Seconds per step each tier is busy, by flow, for the slowest stage's GPUs: every flow that
    crosses the tier in the step (TP, CP, EP per micro-batch; PP sends on the outermost tier the
    pipeline crosses; DP gradient and parameter traffic of the stage with the most)."""
    out: dict[str, dict[str, float]] = {}
    pp_tier = topology.outermost_tier(cluster, pp_span)
    for j, tier in enumerate(cluster.tiers):
        flows = {f: m * crit_terms.get(f"busy:{f}:{j}", 0.0) for f in ("tp", "cp", "ep")}
        flows["pp"] = pp_total_s if tier is pp_tier else 0.0
        flows["dp"] = dp_tiers[j]
        name = tier.name if tier.name not in out else f"{tier.name}#{j}"
        out[name] = flows
    return out


def estimate(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    *,
    layers_per_stage: tuple[int, ...] | None = None,
    spans: Mapping[str, Sequence[int]] | None = None,
    uplink_steps: Mapping[int, int] | None = None,
    pipeline_uplink_steps: Mapping[int, int] | None = None,
) -> Estimate:
    """Score one layout. Raises InvalidInput (naming the rule) if the layout is illegal.

    `spans` (group kind -> members inside one domain of each tier, as cost_models.rankmap.spans
    gives them) replaces the spans of the layout's rank order: a placement on a real allocation
    prices its explicit rank -> host map through it. Kinds it leaves out keep the layout's.
    `uplink_steps` (tier -> step q of cost_models.uplink) prices the gradient window of the DP
    kinds at the effective oversubscription of each tier named (the share of its switches'
    ports that send upward); tiers not named keep their taper. `pipeline_uplink_steps` does the
    same for the pipeline window: the PP sends and the TP, CP and EP exchanges of the steady
    state."""
    problems = layout_violations(model, cluster, workload, layout)
    if problems:
        raise InvalidInput("; ".join(problems))
    gpu = cluster.gpu
    cal = calibration_for_cluster(cluster)
    m = num_microbatches(workload.global_batch_seqs, layout)
    span = topology.spans(cluster, layout, moe=model.moe is not None)
    if spans is not None:
        span = {**span, **{k: tuple(v) for k, v in spans.items()}}
    kinds = [False] * bool(model.num_dense_layers) + [True] * bool(model.num_moe_layers)
    pipe_cluster = uplink.shared_cluster(cluster, pipeline_uplink_steps)

    def layer_costs(lo: Layout) -> dict[bool, LayerCost]:
        return {
            k: layer_cost(
                model,
                pipe_cluster,
                workload,
                lo,
                layer_time(model, gpu, cal, workload, lo, is_moe=k),
                span,
                is_moe=k,
            )
            for k in kinds
        }

    costs = layer_costs(layout)
    # Full recompute with the block method: the rank's other layers run without recompute.
    plain = layout.model_copy(
        update={"recompute": "none", "recompute_method": None, "recompute_num_layers": None}
    )
    plain_costs = costs
    if layout.recompute == "full" and layout.recompute_method == "block":
        plain_costs = layer_costs(plain)
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
            (
                "compute",
                "recompute",
                "tp_comm",
                "cp_comm",
                "ep_comm",
                "cp_total",
                "tp_total",
                "ep_total",
            ),
            0.0,
        )
        redo = recomputed_layers(layout, (n_dense, n_moe))
        for k, n, x in ((False, n_dense, redo[0]), (True, n_moe, redo[1])):
            if not n or k not in costs:
                continue
            # forward + backward do not depend on the recompute (same float for every layer)
            terms["compute"] += n * costs[k].compute_s
            for w, c in ((x, costs[k]), (n - x, plain_costs[k])):
                if not w:
                    continue
                terms["recompute"] += w * c.recompute_s
                terms["tp_comm"] += w * c.tp_s
                terms["cp_comm"] += w * c.cp_exposed_s
                terms["cp_total"] += w * c.cp_total_s
                terms["tp_total"] += w * c.tp_total_s
                terms["ep_comm"] += w * c.ep_s
                terms["ep_total"] += w * c.ep_total_s
                for flow, per_tier in (c.tier_busy_s or {}).items():
                    for j, x in enumerate(per_tier):
                        key = f"busy:{flow}:{j}"
                        terms[key] = terms.get(key, 0.0) + w * x
        if r == layout.pp - 1:
            terms["compute"] += head.forward_s + head.backward_s
        per_stage.append(terms)
    totals = ("cp_total", "tp_total", "ep_total")
    stage_s = [
        sum(v for k, v in t.items() if k not in totals and not k.startswith("busy:"))
        for t in per_stage
    ]
    _steady_s, bubble_s, crit = schedule_time_s(stage_s, m, layout.vp)
    crit_terms = per_stage[crit]
    if layout.pp_schedule == "dualpipe":
        # Rank r runs stage r for half the micro-batches and stage pp-1-r for the other half
        # (DualPipe's two directions), so its steady state is the mean of the pair; the slowest
        # pair sets the step.
        p = layout.pp
        pair = max(range(p // 2), key=lambda r: (stage_s[r] + stage_s[p - 1 - r], -r))
        keys = set(per_stage[pair]) | set(per_stage[p - 1 - pair])
        crit_terms = {
            k: (per_stage[pair].get(k, 0.0) + per_stage[p - 1 - pair].get(k, 0.0)) / 2
            for k in keys
        }
        bubble_s = dualpipe_bubble_s(
            p,
            (stage_s[pair] + stage_s[p - 1 - pair]) / 2,
            crit_terms["compute"],
            crit_terms["recompute"],
        )

    breakdown = {k: 0.0 for k in TERMS}
    for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm"):
        breakdown[k] = m * crit_terms[k]
    breakdown["bubble"] = bubble_s

    # PP: activations cross each stage boundary forward and their gradients backward; the steady
    # state overlaps the sends, fill and drain do not (Megatron overlap_p2p_comm).
    t = tokens_per_gpu(workload, layout)
    pp_payload = t * model.hidden_size * BF16_BYTES / layout.tp
    p2p_s = comm.p2p_time_s(pp_payload, topology.outermost_tier(pipe_cluster, span["pp"]))
    breakdown["pp_comm"] = 2 * (layout.pp - 1) * p2p_s
    comm_total = {
        "tp": m * crit_terms["tp_total"],
        "cp": m * crit_terms["cp_total"],
        "ep": m * crit_terms["ep_total"],
        "pp": 2 * m * layout.vp * p2p_s if layout.pp > 1 else 0.0,
    }

    # DP and optimizer, stage by stage; the slowest stage sets the tail of the step.
    stage_mem: list[StageMemory] = []
    dp_exposed = dp_total = opt_s = 0.0
    dp_tiers = [0.0] * len(cluster.tiers)
    dp_cluster = uplink.shared_cluster(cluster, uplink_steps)
    hbm_bytes_per_s = gpu.hbm_bandwidth_gb_per_s * 1e9 * cal.hbm_efficiency
    acts_per_mb = {
        (k, rc): layer_activation_bytes(model, workload, layout, is_moe=k, recompute=rc)
        for k in kinds
        for rc in {layout.recompute, "none"}
    }
    sps = [stage_params(model, layout, nd, nm, r) for r, (nd, nm) in enumerate(counts)]
    dualpipe = layout.pp_schedule == "dualpipe"
    for r, (n_dense, n_moe) in enumerate(counts):
        sp = sps[r]
        # DualPipe: rank r also holds stage pp - 1 - r (memory.state_bytes, stage.stage_memory)
        mirror = len(counts) - 1 - r if dualpipe else None
        exposed, total = stage_dp_s(
            dp_cluster,
            cal,
            layout,
            sp,
            per_stage[r]["compute"],
            m,
            span,
            workload.dp_bucket_elements,
            workload.cross_site_sync_every,
            stage=r,
            dp_sync=workload.dp_sync,
        )
        if total > dp_total:
            dp_tiers = stage_dp_tier_s(
                dp_cluster,
                layout,
                sp,
                m,
                span,
                workload.dp_bucket_elements,
                workload.cross_site_sync_every,
                stage=r,
                dp_sync=workload.dp_sync,
            )
        dp_exposed, dp_total = max(dp_exposed, exposed), max(dp_total, total)
        mirror_sp = None if mirror is None else sps[mirror]
        weights, grads, optim = state_bytes(sp, layout, m, workload, mirror_sp)
        opt_s = max(opt_s, stage_optimizer_s(layout, sp, hbm_bytes_per_s, workload))
        stage_mem.append(
            stage_memory(
                model,
                workload,
                layout,
                r,
                (n_dense, n_moe),
                acts_per_mb,
                m,
                weights,
                grads,
                optim,
                mirror=None if mirror is None else counts[mirror],
            )
        )
    breakdown["dp_comm"] = dp_exposed
    breakdown["optimizer"] = opt_s
    comm_total["dp"] = dp_total

    tier_busy = _tier_busy_s(cluster, crit_terms, m, comm_total["pp"], span["pp"], dp_tiers)
    step_s = sum(breakdown.values())
    # Links as capacities: a tier cannot be busy longer than the step. Flows overlapped with
    # compute are hidden only as far as their tier has time left; beyond that the step waits for
    # the link, charged to the flow that loads the saturated tier most.
    _tier, flows = max(tier_busy.items(), key=lambda kv: sum(kv[1].values()))
    excess = sum(flows.values()) - step_s
    if excess > 0:
        flow = max(flows, key=lambda f: flows[f])
        breakdown[f"{flow}_comm"] += excess
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
        memory_validated=memory_validated(model, workload, layout),
        breakdown_s=breakdown,
        comm_total_s=comm_total,
        tier_busy_s={k: sum(v.values()) for k, v in tier_busy.items()},
        stage_memory=tuple(stage_mem),
        placement=topology.placement(cluster, layout, span),
        layers_per_stage=None if layers_per_stage is None else tuple(layers_per_stage),
    )
