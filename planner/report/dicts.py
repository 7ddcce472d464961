"""PlanResult / Estimate -> the JSON-ready dicts of CONTRACT.md (`plan --json`, `estimate --json`)."""

from __future__ import annotations

from typing import Any

from cost_models.specs import Cluster, Estimate, ModelSpec

from ..place.allocation import Allocation
from ..place.joint import Placement, node_hosts, rank_hosts
from ..types import PlanResult
from . import findings
from .goodput_view import goodput_dict
from .text import model_params

LAYOUT_KEYS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vp",
    "micro_batch",
    "recompute",
    "zero_stage",
    "dp_shard",
    "sequence_parallel",
    "cpu_offload_layers",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "tp_comm_overlap",
)


def plan_dict(e: Estimate) -> dict[str, Any]:
    """One PLAN object of CONTRACT.md: `layout` (with placement) and `estimate`."""
    layout = {k: getattr(e.layout, k) for k in LAYOUT_KEYS}
    layout["num_microbatches"] = e.num_microbatches
    layout["global_batch_seqs"] = e.global_batch_seqs
    layout["order"] = [a.value for a in e.layout.order]
    layout["placement"] = e.placement
    # The plan's own stage split (--stage-split search); None: the cost model's even split.
    layout["layers_per_stage"] = None if e.layers_per_stage is None else list(e.layers_per_stage)
    layout["pp_schedule"] = e.layout.pp_schedule
    layout["ep_overlap"] = e.layout.ep_overlap
    return {"layout": layout, "estimate": estimate_dict(e)}


def estimate_dict(
    e: Estimate, model: ModelSpec | None = None, hbm_gib: float | None = None
) -> dict[str, Any]:
    """The `estimate ... --json` object of CONTRACT.md (plus breakdowns).

    `hbm_gib` is the GPU's HBM; `usable_memory_gib` what fit is judged against (HBM minus the
    memory headroom, the same for plan and estimate). With `model`, its parameter counts.
    """
    out: dict[str, Any] = {
        "step_time_s": e.step_time_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "peak_memory_gib": e.peak_memory_gib,
        "hbm_gib": e.usable_memory_gib if hbm_gib is None else hbm_gib,
        "usable_memory_gib": e.usable_memory_gib,
        "fits_in_memory": e.fits_in_memory,
        "memory_validated": e.memory_validated,
        "num_microbatches": e.num_microbatches,
        "layout": {k: getattr(e.layout, k) for k in LAYOUT_KEYS},
        "breakdown_s": e.breakdown_s,
        "comm_total_s": e.comm_total_s,
        "tier_busy_s": e.tier_busy_s,
        "tier_utilisation": {
            k: v / e.step_time_s if e.step_time_s > 0 else 0.0 for k, v in e.tier_busy_s.items()
        },
        "stage_memory_gib": [{**s.model_dump(), "total_gib": s.total_gib} for s in e.stage_memory],
    }
    if e.kernels is not None:  # the cluster's kernel tables (issue 32)
        out["kernels"] = e.kernels
    if e.attention is not None:  # sliding-window attention as priced (issue 32)
        out["attention"] = e.attention
    if e.offload is not None:  # CPU activation offloading as priced (Estimate.offload)
        out["offload"] = e.offload
    if e.attention_speed is not None:  # measured attention speed vs the flagship (issue 32)
        out["attention_speed"] = e.attention_speed
    if e.dp_exposure is not None:  # breakdown dp_comm by cause (stage.stage_dp_parts)
        out["dp_exposure"] = e.dp_exposure
    if e.step_tail is not None:  # breakdown optimizer with its gradient memset apart
        out["step_tail"] = e.step_tail
    if e.moe_routing is not None:  # the busiest EP rank's routed rows as priced
        out["moe_routing"] = e.moe_routing
    if model is not None:
        out["model"] = {"name": model.name, **model_params(model)}
    return out


def result_dict(result: PlanResult) -> dict[str, Any]:
    """The `plan ... --json` object of CONTRACT.md."""
    ranked = [plan_dict(e) for e in result.ranked]
    hbm = result.cluster.gpu.hbm_gib
    for plan in ranked:
        plan["estimate"]["hbm_gib"] = hbm
    for plan, r in zip(ranked[1:], findings.runner_ups(result), strict=True):
        plan["loses_on"] = {"term": r.binding_term, "delta_s": r.binding_delta_s}
        if r.fastest:
            plan["loses_on"] = None
            plan["fastest"] = {"faster_share": -r.slower_share, "gains_on": r.binding_term}
    for plan, same in zip(ranked, result.equivalents, strict=False):
        plan["equivalent_layouts"] = [
            {"zero_stage": lo.zero_stage, "order": [a.value for a in lo.order]} for lo in same
        ]
    for plan, g in zip(ranked, result.goodput, strict=False):
        plan["goodput"] = goodput_dict(g)
    return {
        "best": ranked[0],
        "warnings": findings.warnings(result),
        "ranked": ranked,
        "solver": result.solver.model_dump(),
        "rejections": result.rejections,
        "framework": {"name": result.framework, "version": result.framework_version},
        "inputs": {
            "model": result.model.name,
            **model_params(result.model),
            "cluster": result.cluster.name,
            "num_gpus": result.cluster.num_gpus,
            "workload": result.workload.model_dump(),
            "hbm_gib": hbm,
            "usable_memory_gib": result.usable_memory_gib,
            "memory_headroom": 1 - result.usable_memory_gib / hbm,
        },
    }



def allocation_dict(cluster: Cluster, alloc: Allocation, p: Placement) -> dict[str, Any]:
    """The `allocation` object of `plan --json` (docs/contract.md "Placement on an allocation")."""
    return {
        "hostfile": node_hosts(cluster, alloc, p.host_of_rank),
        "ranks": rank_hosts(cluster, alloc, p),
        "step_time_s": {
            "scheduler_order": p.scheduler.step_time_s,
            "best_rank_order": p.best_order.step_time_s,
            "placed": p.placed.step_time_s,
        },
        "solver": p.solver,
    }
