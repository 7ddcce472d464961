"""From the ranked families to the recommendation: the simplest plan within a tolerance of the
fastest, and the variants the cost model cannot tell apart from each ranked plan.

Rules (docs/search.md#recommendation):
* Among plans whose time (per sequence with a batch range) is within
  SolverOptions.simplicity_tolerance of the fastest, recommend the least complex
  (candidates.complexity: fewer model-parallel axes leaving the NVLink domain, then no CP at a
  short sequence, no recompute, lower ZeRO stage, no interleaving, fewer model-parallel axes);
  the fastest stays in the list beside it, so the user sees what the complexity would buy.
* Equivalents of a plan: the same plan under another ZeRO stage the space allows, or another
  allowed rank order, whose estimate is identical (step time and peak memory): e.g. ZeRO-2 with
  more than one micro-batch keeps whole gradients, exactly ZeRO-1's cost (memory.state_bytes).
  The search keeps the simplest of them (candidates.simplicity_rank); the report lists the rest.
"""

from __future__ import annotations

from cost_models.errors import InvalidInput
from cost_models.memory import nothing_to_shard
from cost_models.pricer import Pricer
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..types import SearchSpace, SolverOptions
from .candidates import OrderCache, complexity, framework_violations, plan_key, zero_stages
from .exhaustive import plan_batch, rank_key, within


def recommend(
    ranked: list[Estimate],
    options: SolverOptions,
    batch_max: int | None,
    cluster: Cluster,
    workload: Workload,
) -> tuple[list[Estimate], int]:
    """(plans with the recommended one first, index of the fastest plan in that list).

    `ranked` is in rank order (fastest first). At most top_k plans are returned, and never
    fewer than 2 when the recommendation is not the fastest (the fastest is shown beside it).
    """
    fastest = ranked[0]
    limit = within(rank_key(fastest, batch_max)[0], options.simplicity_tolerance)
    near = [e for e in ranked if rank_key(e, batch_max)[0] <= limit]
    first = cluster.tiers[0].name
    chosen = min(
        near,
        key=lambda e: (complexity(e, workload.seq_len, first), rank_key(e, batch_max)),
    )
    out = [chosen, *(e for e in ranked if e is not chosen)]
    keep = options.top_k if chosen is fastest else max(2, options.top_k)
    return out[:keep], out.index(fastest)


def simpler_twins(
    ranked: list[Estimate],
    options: SolverOptions,
    batch_max: int | None,
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    usable_gib: float,
) -> list[Estimate]:
    """`ranked` with, after each plan within the simplicity tolerance of the fastest, its lower
    ZeRO stages from 1 up that also fit and are also within it (not ZeRO-0: a twin holding the
    whole optimizer state on every rank trades memory headroom, not complexity, for the time
    it gives up: Qwen3-235B on 256 B200 would take 15 GiB more a GPU for 0.3 %). The search
    ranks families (a family's ZeRO variants collapse to the fastest, candidates.family_key),
    so a ZeRO-3 that is faster only by the gradient memset it shards (stage.grad_zero_bytes:
    Megatron-FSDP's sharded buffer against the distributed optimizer's whole one) would hide
    its simpler ZeRO-1 or ZeRO-2 from the rule "lower ZeRO stage" of `recommend`; with the twin
    beside it the recommendation takes the simpler plan and the faster stays listed, as for
    any two plans."""
    if not ranked:
        return ranked
    limit = within(rank_key(ranked[0], batch_max)[0], options.simplicity_tolerance)
    listed = {plan_key(e.layout) for e in ranked}
    out: list[Estimate] = []
    for e in ranked:
        out.append(e)
        lo = e.layout
        if rank_key(e, batch_max)[0] > limit or nothing_to_shard(lo, model.moe is not None):
            continue
        work = workload.model_copy(update={"global_batch_seqs": plan_batch(e)})
        pricer = Pricer(model, cluster, work)
        for zero in zero_stages(work, space, lo):
            twin_layout = lo.with_update({"zero_stage": zero})
            if zero >= lo.zero_stage or zero == 0 or plan_key(twin_layout) in listed:
                continue  # ZeRO-0 would buy its simplicity with the whole optimizer state
            if framework_violations(model, space, twin_layout):
                continue
            try:
                twin = pricer.estimate(twin_layout, layers_per_stage=e.layers_per_stage)
            except InvalidInput:
                continue
            if twin.peak_memory_gib > usable_gib or rank_key(twin, batch_max)[0] > limit:
                continue
            twin = twin.model_copy(update={"usable_memory_gib": usable_gib, "fits_in_memory": True})
            out.append(twin)
            listed.add(plan_key(twin_layout))
    return out


def equivalents(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    e: Estimate,
    orders: OrderCache,
) -> tuple[Layout, ...]:
    """Other allowed ZeRO stages and rank orders of `e`'s layout priced exactly like it."""
    lo = e.layout
    work = workload.model_copy(update={"global_batch_seqs": plan_batch(e)})
    pricer = Pricer(model, cluster, work)  # the twins share every per-layer piece
    out: list[Layout] = []
    for zero in zero_stages(work, space, lo):  # the stages the ZeRO rules allow
        if zero == lo.zero_stage or nothing_to_shard(lo, model.moe is not None):
            continue  # a stage with nothing to shard is no alternative (sharding_variants)
        twin_layout = lo.with_update({"zero_stage": zero})
        if framework_violations(model, space, twin_layout):
            continue  # a twin the space's framework cannot run (cost_models.framework)
        try:
            twin = pricer.estimate(twin_layout, layers_per_stage=e.layers_per_stage)
        except InvalidInput:
            continue
        if (twin.step_time_s, twin.peak_memory_gib) == (e.step_time_s, e.peak_memory_gib):
            out.append(twin_layout)
    out += [lo.with_update({"order": o}) for o in orders.equivalent(lo)]
    return tuple(out)
