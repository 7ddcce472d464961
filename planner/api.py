"""The library entry points: plan() and estimate(). Neither prints; both take names or objects."""

from __future__ import annotations

import math
from typing import Any

import models_zoo
from cost_models import estimate as _cost
from cost_models import framework as _framework
from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload
from models_zoo.inputs import validated

from .place.joint import PlacedPlan
from .search import exhaustive, recommend
from .search import solve as sat_solve
from .search.candidates import (
    OrderCache,
    allowed_orders,
    framework_space,
    search_rule_violations,
)
from .types import PlanResult, SearchSpace, SolverOptions

DEFAULT_SEQ_LEN = 4096
DEFAULT_BATCH_TOKENS = 2**22  # ~4M tokens per step, the usual pre-training batch at scale


def _moments_space(space: SearchSpace, workload: Workload) -> SearchSpace:
    """Megatron runs bf16 optimizer moments only with its distributed optimizer (ZeRO-1):
    megatron/core/optimizer/__init__.py get_megatron_optimizer raises "--use-precision-aware-
    optimizer only supported with distributed optimizer"."""
    if space.framework != "megatron" or workload.optimizer_moments == "fp32":
        return space
    if 1 not in space.zero_stages:
        raise InvalidInput(
            "optimizer_moments: bf16 moments need Megatron's distributed optimizer (ZeRO-1), "
            f"and the allowed ZeRO stages are {list(space.zero_stages)}"
        )
    return space.model_copy(update={"zero_stages": (1,)})


def make_workload(
    model: ModelSpec,
    *,
    seq_len: int | None = None,
    global_batch: int | None = None,
    precision: str | None = None,
    moe_dispatcher: str = "alltoall",
    **fields: Any,
) -> Workload:
    """Fill defaults: the model's own sequence length (else 4096) and a ~4M-token batch.
    `fields`: further Workload fields (optimizer_moments, activation_func_fp8_input_store,
    attention_output_store, ...), validated like the rest."""
    seq = seq_len if seq_len is not None else (model.seq_len or DEFAULT_SEQ_LEN)
    if global_batch is None and isinstance(seq, int) and seq > 0:
        global_batch = max(1, DEFAULT_BATCH_TOKENS // seq)
    base = {
        "seq_len": seq,
        "global_batch_seqs": global_batch,
        "precision": precision or "bf16",
        "moe_dispatcher": moe_dispatcher,
    }
    return validated(Workload, {**fields, **base}, "workload")


DEFAULT_MEMORY_HEADROOM: float = SearchSpace.model_fields["memory_headroom"].default
"""Fraction of HBM every command keeps free (plan, estimate, whatif): fit is judged against
HBM x (1 - headroom), the same usable memory for all of them."""


MX_GENERATIONS = ("blackwell", "cdna4")


def check_precision(cluster: Cluster, workload: Workload) -> None:
    """Refuse a precision the GPU cannot run: fp8 needs FP8 tensor cores (Hopper and later; the
    GPU spec's peak_fp8_tflops), mxfp8 needs tensor cores with block-scaled MX formats: NVIDIA
    Blackwell (architecture technical brief; Transformer Engine's MXFP8BlockScaling recipe) or
    AMD CDNA4 (MI355X: MXFP8/MXFP6/MXFP4 in the CDNA4 ISA)."""
    gpu = cluster.gpu
    if workload.precision == "fp8" and gpu.peak_fp8_tflops is None:
        raise InvalidInput(
            f"precision: fp8 needs FP8 tensor cores, which {gpu.name} ({gpu.generation}) lacks "
            "(peak_fp8_tflops is null); use bf16"
        )
    if workload.precision == "mxfp8" and gpu.generation not in MX_GENERATIONS:
        raise InvalidInput(
            f"precision: mxfp8 needs MX block-scaled tensor cores ({', '.join(MX_GENERATIONS)}); "
            f"{gpu.name} is {gpu.generation}"
        )


def check_memory_options(model: ModelSpec, workload: Workload) -> None:
    """Refuse a memory option the model cannot use: Megatron-Core stores the activation input
    in fp8 for SwiGLU only (TransformerConfig.__post_init__: "Storing activation input in FP8 is
    supported only for SwiGLU")."""
    if workload.activation_func_fp8_input_store and not model.gated_mlp:
        raise InvalidInput(
            f"activation_func_fp8_input_store: needs a gated (SwiGLU) MLP; {model.name} has "
            "gated_mlp false"
        )


def judge_fit(e: Estimate, usable_gib: float) -> Estimate:
    """The estimate with its fit judged against `usable_gib` (HBM minus the headroom) rather than
    the full HBM the cost model reports, so plan, estimate and whatif agree on what fits."""
    return e.model_copy(
        update={"usable_memory_gib": usable_gib, "fits_in_memory": e.peak_memory_gib <= usable_gib}
    )


def layout_with_defaults(layout: Layout | dict[str, Any]) -> Layout:
    """A Layout from a dict, with the defaults `plan` searches under: sequence parallelism on
    whenever tp > 1 (Megatron-LM's recommendation with TP; every candidate of the search has it)
    unless the dict says otherwise. A Layout object is taken as given."""
    if isinstance(layout, Layout):
        return layout
    fields = dict(layout)
    if "sequence_parallel" not in fields:
        tp = fields.get("tp", 1)
        fields["sequence_parallel"] = isinstance(tp, int) and tp > 1
    return validated(Layout, fields, "layout")


def _resolve(
    model: str | ModelSpec, cluster: str | Cluster, num_gpus: int | None
) -> tuple[ModelSpec, Cluster]:
    return models_zoo.load_model(model), models_zoo.load_cluster(cluster, num_gpus)


AUTO_FRAMEWORK = "auto"
"""plan / estimate / plan_on_allocation's default: the framework default_framework picks."""


def default_framework(cluster: str | Cluster) -> str | None:
    """The framework a plan is for when none is named: the default (megatron), or none where
    the accelerator runs none of the modelled frameworks (GpuSpec.frameworks: a TPU)."""
    runs = models_zoo.load_cluster(cluster).gpu.frameworks
    if runs is None or _framework.DEFAULT_FRAMEWORK in runs:
        return _framework.DEFAULT_FRAMEWORK
    return runs[0] if runs else None


def check_framework_runs(cluster: Cluster, framework: str | None) -> None:
    """InvalidInput when `framework` does not run on the cluster's accelerator (issue 28: no
    Megatron arguments for TPU chips)."""
    runs = cluster.gpu.frameworks
    if framework is None or runs is None or framework in runs:
        return
    can = ", ".join(runs) if runs else "none of the modelled frameworks"
    raise InvalidInput(
        f"framework {framework}: {cluster.gpu.name} runs {can} (gpu field frameworks); plan "
        "with --framework none and export the device mesh (--emit mesh)"
    )


def _gpus_within(cluster: str | Cluster, num_gpus: int | None, max_nodes: int) -> int:
    """The GPU count under a node cap: all GPUs of max_nodes nodes unless fewer are asked for."""
    if not isinstance(max_nodes, int) or max_nodes <= 0:
        raise InvalidInput(f"max_nodes must be a positive whole number (got {max_nodes!r})")
    per_node = models_zoo.load_cluster(cluster).gpus_per_node
    if num_gpus is None:
        return max_nodes * per_node
    if num_gpus > max_nodes * per_node:
        raise InvalidInput(
            f"num_gpus ({num_gpus}) needs more than max_nodes ({max_nodes}) nodes of {per_node} GPUs"
        )
    return num_gpus


def _check_pins(cluster: Cluster, space: SearchSpace) -> None:
    """A pinned degree that can never divide the GPU count is bad input (exit 2), not an
    infeasible search (exit 1): no layout of any kind has tp*pp*dp*cp = num_gpus with it.
    (EP is carved from tp*dp*cp, so it must divide the GPU count too.)"""
    n = cluster.num_gpus
    pins = {a: getattr(space, a) for a in ("tp", "pp", "dp", "cp", "ep")}
    for axis, degree in pins.items():
        if degree is not None and n % degree:
            raise InvalidInput(
                f"{axis} {degree}: a pinned degree must divide the number of GPUs ({n}); "
                f"{n} / {degree} = {n / degree:.3g}"
            )
    product = math.prod(d for a, d in pins.items() if a != "ep" and d is not None)
    if n % product:
        pinned = " x ".join(f"{a} {d}" for a, d in pins.items() if a != "ep" and d is not None)
        raise InvalidInput(f"pinned degrees ({pinned} = {product}) do not divide the {n} GPUs")


def plan(
    model: str | ModelSpec,
    cluster: str | Cluster,
    workload: Workload | None = None,
    *,
    num_gpus: int | None = None,
    global_batch: int | tuple[int, int] | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    max_nodes: int | None = None,
    moe_dispatcher: str | None = None,
    framework: str | None = AUTO_FRAMEWORK,
    workload_fields: dict[str, Any] | None = None,
    **constraints: Any,
) -> PlanResult:
    """Best layouts for `model` on `cluster`, ranked by step time (fixed global batch).

    `global_batch=(MIN, MAX)` (or the constraint global_batch_range=(MIN, MAX)) lets each plan
    take its own global batch in the range; plans then rank by time per sequence (tokens/s) and
    `PlanResult.global_batch(i)` gives each plan's batch.
    `constraints` are SearchSpace fields (tp=8 pins TP, max_pp=16, recompute=("selective",),
    zero_stages=(1,), memory_headroom=0.1, ...) and SolverOptions fields (top_k, time_limit_s,
    deterministic, seed, engine). `max_nodes` caps the GPU count at that many whole nodes.
    `workload_fields`: further Workload fields for the workload built here (e.g.
    optimizer_moments="bf16"); ignored when `workload` is given.
    `framework` ("auto", the default: megatron, or None on an accelerator that runs no modelled
    framework (GpuSpec.frameworks); torchtitan; deepspeed; None: no restriction) limits the
    search to what that framework runs and sets the workload's physics fields the workload does
    not set itself (cost_models.framework).
    Raises InvalidInput for bad input and NoFeasiblePlan when nothing fits.
    """
    if isinstance(global_batch, (tuple, list)):
        if "global_batch_range" in constraints:
            raise InvalidInput("global_batch: give a range or global_batch_range, not both")
        constraints["global_batch_range"] = tuple(global_batch)
        global_batch = None
    elif global_batch is not None and constraints.get("global_batch_range") is not None:
        raise InvalidInput("global_batch_range: give a fixed global_batch or a range, not both")
    if max_nodes is not None:
        num_gpus = _gpus_within(cluster, num_gpus, max_nodes)
    spec, sized = _resolve(model, cluster, num_gpus)
    if framework == AUTO_FRAMEWORK:
        framework = default_framework(sized)
    if framework is not None:
        _framework.profile(framework)  # unknown name: InvalidInput naming the choices
        check_framework_runs(sized, framework)
        if constraints.get("framework") not in (None, framework):
            raise InvalidInput("framework: give it once (framework= or the constraint)")
        constraints["framework"] = framework
    space_fields = {k: v for k, v in constraints.items() if k in SearchSpace.model_fields}
    option_fields = {k: v for k, v in constraints.items() if k in SolverOptions.model_fields}
    unknown = sorted(set(constraints) - set(space_fields) - set(option_fields))
    if unknown:
        known = sorted(set(SearchSpace.model_fields) | set(SolverOptions.model_fields))
        raise InvalidInput(f"unknown constraint(s) {', '.join(unknown)}; known: {', '.join(known)}")
    space = framework_space(spec, validated(SearchSpace, space_fields, "constraints"))
    _check_pins(sized, space)
    options = validated(SolverOptions, option_fields, "solver options")
    batch_range = space.global_batch_range
    if batch_range is not None:
        global_batch = batch_range[1]  # the search takes each plan's batch from the range
    if workload is None:
        workload = make_workload(
            spec,
            seq_len=seq_len,
            global_batch=global_batch,
            precision=precision,
            moe_dispatcher=moe_dispatcher or "alltoall",
            **(workload_fields or {}),
        )
    elif batch_range is not None:
        workload = workload.model_copy(update={"global_batch_seqs": batch_range[1]})
    check_precision(sized, workload)
    check_memory_options(spec, workload)
    if space.framework is not None:
        workload = _framework.profile(space.framework).workload(workload)
    space = _moments_space(space, workload)
    engine = exhaustive if options.engine == "exhaustive" else sat_solve
    ranked, stats, rejections = engine.search(spec, sized, workload, space, options)
    usable = exhaustive.usable_memory_gib(sized, space)
    ranked = [judge_fit(e, usable) for e in ranked]
    # The simplest plan within the simplicity tolerance of the fastest leads; then what else
    # each ranked plan is priced exactly like (planner/search/recommend.py).
    ranked, fastest = recommend.recommend(ranked, options, space.batch_max, sized, workload)
    orders = OrderCache(
        sized, space.search_order, allowed_orders(spec, space), moe=spec.moe is not None
    )
    same = tuple(
        recommend.equivalents(spec, sized, workload, space, e, orders) for e in ranked
    )
    if batch_range is not None:  # the result's workload is the best plan's
        best_batch = exhaustive.plan_batch(ranked[0])
        workload = workload.model_copy(update={"global_batch_seqs": best_batch})
    return PlanResult(
        model=spec,
        cluster=sized,
        workload=workload,
        ranked=tuple(ranked),
        solver=stats,
        rejections=rejections,
        usable_memory_gib=usable,
        global_batch_range=batch_range,
        equivalents=same,
        fastest_index=fastest,
        simplicity_tolerance=options.simplicity_tolerance,
        framework=space.framework,
    )


def estimate(
    model: str | ModelSpec,
    cluster: str | Cluster,
    layout: Layout | dict[str, Any],
    workload: Workload | None = None,
    *,
    num_gpus: int | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    framework: str | None = AUTO_FRAMEWORK,
    memory_headroom: float = DEFAULT_MEMORY_HEADROOM,
) -> Estimate:
    """Score one layout (a Layout or a dict of its fields). Raises InvalidInput if illegal.

    Same defaults as plan(): a dict without `sequence_parallel` gets it whenever tp > 1, and fit
    is judged against HBM x (1 - memory_headroom) (`usable_memory_gib`, `fits_in_memory`).
    `framework` sets the physics the workload and layout do not set themselves (None: the
    cost model's field defaults); the layout is scored even where that framework could not
    run it (`framework_violations` says why)."""
    if not isinstance(memory_headroom, (int, float)) or not 0 <= memory_headroom < 1:
        raise InvalidInput(f"memory_headroom: must be in [0, 1) (got {memory_headroom!r})")
    spec, sized = _resolve(model, cluster, num_gpus)
    if workload is None:
        workload = make_workload(
            spec, seq_len=seq_len, global_batch=global_batch, precision=precision
        )
    check_precision(sized, workload)
    check_memory_options(spec, workload)
    if framework == AUTO_FRAMEWORK:
        framework = default_framework(sized)
    check_framework_runs(sized, framework)
    layout = layout_with_defaults(layout)
    problems = search_rule_violations(spec, layout)
    if problems:  # every rule plan applies (issue 28)
        raise InvalidInput("; ".join(problems))
    if framework is not None:
        prof = _framework.profile(framework)
        workload, layout = prof.workload(workload), prof.layout(layout)
    usable = sized.gpu.hbm_gib * (1 - memory_headroom)
    return judge_fit(_cost(spec, sized, workload, layout), usable)


def plan_on_allocation(
    model: str | ModelSpec,
    cluster: str | Cluster,
    *,
    topology: Any,
    hosts_file: str | None = None,
    nodelist: str | None = None,
    exclude: str | None = None,
    num_gpus: int | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    place_top: int = 3,
    place_time_limit_s: float | None = None,
    place_decompose: bool = False,
    place_export: str | None = None,
    framework: str | None = AUTO_FRAMEWORK,
    **constraints: Any,
) -> PlacedPlan:
    """Best plan on the allocation a job really gets (CONTRACT.md "Placement on an allocation").

    The search shortlists `place_top` layouts under ideal placement (plan(top_k=...)); each is
    placed on the allocation (scheduler's order, best rank order, CP-SAT: planner/place/joint.py)
    and the plans are re-ranked by the placed step time. Returns a PlacedPlan.
    `place_decompose` adds the pods-first warm start (planner/place/decompose.py).
    `place_export` writes each layout's exact CP-SAT placement model to that file (a debug
    aid: CpModel.export_to_file; the i-th of several layouts to NAME-i.SUFFIX).
    """
    from .place.allocation import Allocation, load_allocation
    from .place.joint import export_name, place_layout

    base = models_zoo.load_cluster(cluster)
    if isinstance(topology, Allocation):  # already loaded (bench/place_scaling.py, tests)
        alloc = topology
    else:
        alloc = load_allocation(
            base, topology, hosts_file=hosts_file, nodelist=nodelist, exclude=exclude
        )
    have = len(alloc.hosts) * base.gpus_per_node
    if num_gpus is not None and num_gpus > have:
        raise InvalidInput(
            f"--gpus {num_gpus}: the allocation has {have} healthy GPUs ({len(alloc.hosts)} hosts)"
        )
    constraints["top_k"] = max(place_top, constraints.get("top_k", 1))
    result = plan(
        model,
        cluster,
        num_gpus=num_gpus or have,
        global_batch=global_batch,
        seq_len=seq_len,
        precision=precision,
        framework=framework,
        **constraints,
    )
    options = validated(
        SolverOptions,
        {k: v for k, v in constraints.items() if k in SolverOptions.model_fields},
        "solver options",
    )
    shortlist = [(e, result.plan_workload(i)) for i, e in enumerate(result.ranked[:place_top])]
    # CP-SAT places TP x CP blocks of whole nodes; where the shortlist has none and the user
    # pinned neither degree, the best such layout joins it (a fragmented allocation can make it
    # the winner once placed).
    per_node = result.cluster.gpus_per_node
    if (
        constraints.get("tp") is None
        and constraints.get("cp") is None
        and all(e.layout.tp * e.layout.cp > per_node for e, _ in shortlist)
    ):
        whole = dict(constraints, top_k=1, max_cp=1)
        whole["max_tp"] = min(constraints.get("max_tp") or per_node, per_node)
        try:
            extra = plan(
                model,
                cluster,
                num_gpus=num_gpus or have,
                global_batch=global_batch,
                seq_len=seq_len,
                precision=precision,
                framework=framework,
                **whole,
            )
            shortlist.append((extra.best, extra.plan_workload(0)))
        except NoFeasiblePlan:
            pass
    placements = [
        place_layout(
            result.model,
            result.cluster,
            work,
            e,
            alloc,
            # --time-limit bounds the placement solves together (each its share)
            time_limit_s=place_time_limit_s or options.time_limit_s / len(shortlist),
            deterministic=options.deterministic,
            seed=options.seed,
            decompose=place_decompose,
            export_path=export_name(place_export, i, len(shortlist)),
        )
        for i, (e, work) in enumerate(shortlist)
    ]
    placements.sort(key=lambda p: p.placed.step_time_s)
    ranked = tuple(judge_fit(p.placed, result.usable_memory_gib) for p in placements)
    placed_result = result.model_copy(update={"ranked": ranked})
    return PlacedPlan(result=placed_result, ideal=result, placements=placements, allocation=alloc)


def framework_violations(
    model: str | ModelSpec, layout: Layout, framework: str = _framework.DEFAULT_FRAMEWORK
) -> list[str]:
    """Why `framework` cannot run `layout` (empty: it can)."""
    prof = _framework.profile(framework)
    return _framework.layout_violations(prof, models_zoo.load_model(model), layout)
