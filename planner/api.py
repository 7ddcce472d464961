"""The library's core entry points, typed inputs only: plan(model, cluster, workload, space, options),
estimate(model, cluster, layout, workload) and plan_on_allocation(...). Nothing here prints.
The conveniences that take preset names and keyword constraints (the CLI's and the README's) sit
on top of these in convenience.py."""

from __future__ import annotations

import math
from typing import Any

from cost_models import estimate as _cost
from cost_models import framework as _framework
from cost_models.compute import refuse_flash1, selective_redoes_nothing
from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.goodput import Reliability
from cost_models.specs import Axis, Cluster, Estimate, Layout, ModelSpec, Workload
from models_zoo.inputs import validated

from . import goodput_plan
from .place.allocation import Allocation
from .place.joint import PlacedPlan, export_name, place_layout
from .search import exhaustive, recommend
from .search import solve as sat_solve
from .search.candidates import (
    ALL_ORDERS,
    CANONICAL_ORDER,
    OrderCache,
    allowed_orders,
    framework_space,
    offload_space,
    search_rule_violations,
)
from .types import PlanResult, SearchSpace, SolverOptions

DEFAULT_SEQ_LEN = 4096
DEFAULT_BATCH_TOKENS = 2**22  # ~4M tokens per step, the usual pre-training batch at scale


def _check_zero_inputs_space(space: SearchSpace, workload: Workload) -> None:
    """An input the space's framework runs only from a ZeRO stage up (FrameworkProfile.
    zero_inputs: Megatron's bf16 moments need its distributed optimizer, ZeRO >= 1) with no
    such stage allowed is bad input (exit 2), not an infeasible search. The search itself
    checks the rule at every stage (candidates.zero_rule_split) and counts the stages it takes
    out in the rejections."""
    if space.framework is None:
        return
    prof = _framework.profile(space.framework)
    top = Layout(zero_stage=max(space.zero_stages))
    problems = _framework.zero_input_violations(prof, workload, top)
    if problems:
        raise InvalidInput(f"{problems[0]}; the allowed ZeRO stages are {list(space.zero_stages)}")


def _recompute_space(space: SearchSpace, workload: Workload) -> SearchSpace:
    """Where the framework's selective recompute reruns nothing (Megatron-DeepSpeed under flash
    attention: cost_models.compute.selective_redoes_nothing), selective is the plan with recompute
    none in time, memory and launch (a flag the launcher ignores): beside none it is searched
    no more, so it never stands as a runner-up of its own."""
    if "none" not in space.recompute or not selective_redoes_nothing(workload):
        return space
    kept = tuple(r for r in space.recompute if r != "selective")
    return space.model_copy(update={"recompute": kept})


def _graph_space(space: SearchSpace, workload: Workload) -> SearchSpace:
    """torchtitan captures forward + backward in one CUDA graph only without pipelining and
    without a CPU-synchronising expert dispatcher (torchtitan 0.3.0 trainer.py
    _validate_cuda_graphs: "CUDA graphs do not support pipeline parallelism yet"; EP needs a
    HybridEP capacity or MinimalAsyncEP, not the all-to-all the profile prices), so a workload
    priced with full_iteration_cuda_graph is searched at pp 1 and ep 1 there."""
    if space.framework != "torchtitan" or not workload.full_iteration_cuda_graph:
        return space
    if space.pp not in (None, 1) or space.ep not in (None, 1):
        raise InvalidInput(
            "full_iteration_cuda_graph: torchtitan captures the step in a CUDA graph only with "
            f"pp 1 and ep 1 (trainer.py _validate_cuda_graphs), and pp / ep are pinned at "
            f"{space.pp} / {space.ep}"
        )
    return space.model_copy(update={"pp": 1, "max_ep": 1})


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
    AMD CDNA4 (MI355X: MXFP8/MXFP6/MXFP4 in the CDNA4 ISA); nvfp4 needs NVIDIA Blackwell's NVFP4
    tensor cores (GpuSpec.peak_fp4_tflops; CDNA4's MXFP4 is another format)."""
    gpu = cluster.gpu
    if workload.precision == "fp8" and gpu.peak_fp8_tflops is None:
        raise InvalidInput(
            f"precision: fp8 needs FP8 tensor cores, which {gpu.name} ({gpu.generation}) lacks "
            "(peak_fp8_tflops is null); use bf16"
        )
    if workload.precision == "nvfp4" and (
        gpu.generation != "blackwell" or gpu.peak_fp4_tflops is None
    ):
        raise InvalidInput(
            f"precision: nvfp4 needs NVFP4 tensor cores (NVIDIA Blackwell: B200, GB200, B300, "
            f"GB300); {gpu.name} is {gpu.generation}"
        )
    if workload.precision == "mxfp8" and gpu.generation not in MX_GENERATIONS:
        raise InvalidInput(
            f"precision: mxfp8 needs MX block-scaled tensor cores ({', '.join(MX_GENERATIONS)}); "
            f"{gpu.name} is {gpu.generation}"
        )


def check_attention_kernel(cluster: Cluster, workload: Workload) -> None:
    """Refuse an attention kernel the GPU cannot run: FlashAttention-1-era kernels (flash1:
    flash-attn 1.x and its Triton derivative) build for Ampere and Hopper and are measured
    there only (cost_models.compute.FLASH_FWD_BWD_TFLOPS)."""
    if workload.attention_kernel == "flash1":
        refuse_flash1(cluster.gpu.generation, cluster.gpu.name)


def check_memory_options(model: ModelSpec, workload: Workload) -> None:
    """Refuse a memory option the model cannot use: Megatron-Core stores the activation input
    in fp8 for SwiGLU only (TransformerConfig.__post_init__: "Storing activation input in FP8 is
    supported only for SwiGLU"); MoE routing options on a dense model."""
    if workload.activation_func_fp8_input_store and not model.gated_mlp:
        raise InvalidInput(
            f"activation_func_fp8_input_store: needs a gated (SwiGLU) MLP; {model.name} has "
            "gated_mlp false"
        )
    routing = ("moe_capacity_factor", "moe_pad_to_capacity", "moe_force_balance")
    stated = [n for n in routing if getattr(workload, n) not in (None, False)]
    if stated and model.moe is None:
        # A dense model routes nothing: an option that would be silently ignored is refused.
        raise InvalidInput(f"{stated[0]}: needs a mixture-of-experts model; {model.name} is dense")


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


AUTO_FRAMEWORK = "auto"
"""The conveniences' default framework (planner/convenience.py): what default_framework picks."""


def default_framework(cluster: Cluster) -> str | None:
    """The framework a plan is for when none is named: the default (megatron), or none where
    the accelerator runs none of the modelled frameworks (GpuSpec.frameworks: a TPU)."""
    runs = cluster.gpu.frameworks
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


def check_framework_inputs(
    framework: str | None, workload: Workload, cpu_offload_layers: int = 0
) -> None:
    """InvalidInput when `framework`'s launcher has no setting for an input (bf16 main
    gradients, fp8 primary weights, CPU activation offloading: FrameworkProfile.no_inputs), so a
    plan or estimate is never priced for a run its export must refuse."""
    if framework is None:
        return
    problems = _framework.input_violations(
        _framework.profile(framework), workload, cpu_offload_layers
    )
    if problems:
        raise InvalidInput("; ".join(problems))


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


def _check_fp8_params_space(space: SearchSpace, workload: Workload) -> None:
    """fp8 primary weights live in the distributed optimizer's or FSDP's param buffer
    (Megatron-LM arguments.py asserts it; rules._fp8_params_rules): with ZeRO-0 the only stage
    allowed, no layout can run them, which is bad input (exit 2), not an infeasible search. The
    search itself checks the rule at every ZeRO stage it may pick (candidates.zero_stages)."""
    if workload.fp8_params and tuple(space.zero_stages) == (0,):
        raise InvalidInput(
            "fp8_params needs a ZeRO stage >= 1 (the distributed optimizer or FSDP), and the "
            "allowed ZeRO stages are [0]"
        )


def plan(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
    reliability: Reliability | None = None,
) -> PlanResult:
    """Best layouts for `model` on `cluster` (all its GPUs), ranked by step time.

    `space` says what may be chosen (pinned degrees, ZeRO stages, recompute, the framework whose
    rules and physics apply: SearchSpace.framework; None: no framework's rules) and, with
    `global_batch_range`, lets each plan take its own global batch (plans then rank by time per
    sequence and `Estimate.global_batch_seqs` gives each plan's batch; `workload`'s own batch is
    replaced by the range's MAX). `options` says how the search runs (engine, top_k, time limit).
    With `reliability` (cost_models.goodput inputs) each ranked plan gains its goodput figures
    (PlanResult.goodput); `options.objective == "goodput"` ranks by goodput tokens/s/GPU
    (reliability's defaults when None), proved by planner/search/goodput_rank.py's bound.
    Raises InvalidInput for bad input and NoFeasiblePlan when nothing fits.
    """
    check_framework_runs(cluster, space.framework)
    check_framework_inputs(space.framework, workload, space.cpu_offload_layers)
    space = offload_space(model, cluster, framework_space(model, space))
    _check_pins(cluster, space)
    batch_range = space.global_batch_range
    if batch_range is not None:  # the search takes each plan's batch from the range
        workload = workload.model_copy(update={"global_batch_seqs": batch_range[1]})
    check_precision(cluster, workload)
    check_attention_kernel(cluster, workload)
    check_memory_options(model, workload)
    if space.framework is not None:
        workload = _framework.profile(space.framework).workload(workload, model)
    _check_zero_inputs_space(space, workload)
    space = _recompute_space(_graph_space(space, workload), workload)
    _check_fp8_params_space(space, workload)
    engine = exhaustive if options.engine == "exhaustive" else sat_solve
    usable = exhaustive.usable_memory_gib(cluster, space)
    if options.objective == "goodput":
        rel = reliability or Reliability()
        found = goodput_plan.search_by_goodput(engine, model, cluster, workload, space, options, rel)
        ranked = [judge_fit(e, usable) for e in found.ranked]
        stats, rejections, figures = found.stats, found.rejections, tuple(found.figures)
        fastest = max(range(len(ranked)), key=lambda i: (ranked[i].tokens_per_s_per_gpu, -i))
    else:
        ranked, stats, rejections = engine.search(model, cluster, workload, space, options)
        ranked = [judge_fit(e, usable) for e in ranked]
        # The simplest plan within the simplicity tolerance of the fastest leads, a lower ZeRO
        # stage of a ranked plan among them; then what else each ranked plan is priced
        # exactly like (planner/search/recommend.py).
        ranked = recommend.simpler_twins(
            ranked, options, space.batch_max, model, cluster, workload, space, usable
        )
        ranked, fastest = recommend.recommend(
            ranked, options, space.batch_max, cluster, workload
        )
        figures = ()
        if reliability is not None:
            figures = tuple(
                goodput_plan.score(model, cluster, workload, e, reliability) for e in ranked
            )
    orders = OrderCache(
        cluster, space.search_order, allowed_orders(model, space), moe=model.moe is not None
    )
    same = tuple(
        recommend.equivalents(model, cluster, workload, space, e, orders) for e in ranked
    )
    if batch_range is not None:  # the result's workload is the best plan's
        workload = workload.model_copy(update={"global_batch_seqs": ranked[0].global_batch_seqs})
    return PlanResult(
        model=model,
        cluster=cluster,
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
        goodput=figures,
    )


def estimate(
    model: ModelSpec,
    cluster: Cluster,
    layout: Layout,
    workload: Workload,
    *,
    framework: str | None = _framework.DEFAULT_FRAMEWORK,
    memory_headroom: float = DEFAULT_MEMORY_HEADROOM,
) -> Estimate:
    """Score one layout on all of `cluster`'s GPUs. Raises InvalidInput if it is illegal.

    Fit is judged against HBM x (1 - memory_headroom) (`usable_memory_gib`, `fits_in_memory`),
    as plan() judges it. `framework` sets the physics the workload and layout do not set
    themselves (None: the cost model's field defaults); the layout is scored even where that
    framework could not run it (`framework_violations` says why)."""
    if not isinstance(memory_headroom, (int, float)) or not 0 <= memory_headroom < 1:
        raise InvalidInput(f"memory_headroom: must be in [0, 1) (got {memory_headroom!r})")
    check_precision(cluster, workload)
    check_attention_kernel(cluster, workload)
    check_memory_options(model, workload)
    check_framework_runs(cluster, framework)
    prof = None if framework is None else _framework.profile(framework)
    if prof is not None:  # its defaults first: the rules judge the layout the launcher builds
        layout = prof.layout(layout, model)
    problems = search_rule_violations(model, layout)
    if problems:  # every rule plan applies (issue 28)
        raise InvalidInput("; ".join(problems))
    check_framework_inputs(framework, workload, layout.cpu_offload_layers)
    if prof is not None:
        workload = prof.workload(workload, model)
    usable = cluster.gpu.hbm_gib * (1 - memory_headroom)
    return judge_fit(_cost(model, cluster, workload, layout), usable)


def plan_on_allocation(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
    allocation: Allocation,
    *,
    place_top: int = 3,
    place_time_limit_s: float | None = None,
    place_decompose: bool = False,
    place_export: str | None = None,
) -> PlacedPlan:
    """Best plan on the allocation a job really gets (CONTRACT.md "Placement on an allocation").

    The search shortlists `place_top` layouts for `cluster` (its GPU count: at most the
    allocation's) under ideal placement; each is placed on `allocation` (scheduler's order, best
    rank order, CP-SAT: planner/place/joint.py) and the plans are re-ranked by the placed step
    time. `place_time_limit_s` (default: the search's time limit shared among the shortlist)
    bounds each placement solve; `place_decompose` adds the pods-first warm start
    (planner/place/decompose.py). `place_export` writes each layout's exact CP-SAT placement
    model to that file (a debug aid: CpModel.export_to_file; the i-th of several layouts to
    NAME-i.SUFFIX). Only rank orders the framework launches for a plan are compared
    (planner/place/pricing.launchable_orders); a plan whose placement fails anyway is dropped
    with its reason (NoFeasiblePlan when none is left). Returns a PlacedPlan.
    """
    if options.top_k < place_top:
        options = options.model_copy(update={"top_k": place_top})
    result = plan(model, cluster, workload, space, options)
    shortlist = [(e, result.plan_workload(i)) for i, e in enumerate(result.ranked[:place_top])]
    extra = _whole_node_plan(model, cluster, workload, space, options, shortlist)
    if extra is not None:
        shortlist.append((extra.best, extra.plan_workload(0)))
    placements = _place_shortlist(
        result, shortlist, allocation, _placement_orders(model, space), options,
        time_limit_s=place_time_limit_s, decompose=place_decompose, export=place_export,
    )  # fmt: skip
    placed_result = _ranked_by_placement(result, shortlist, placements, place_top)
    return PlacedPlan(
        result=placed_result, ideal=result, placements=placements, allocation=allocation
    )


def _place_shortlist(
    result: PlanResult,
    shortlist: list[tuple[Estimate, Workload]],
    allocation: Allocation,
    orders: tuple[tuple[Axis, ...], ...],
    options: SolverOptions,
    *,
    time_limit_s: float | None,
    decompose: bool,
    export: str | None,
) -> list:
    """Each shortlisted plan placed (joint.place_layout); a plan whose placement fails is not
    offered as placeable, and NoFeasiblePlan names why when none is left."""
    placements, unplaced = [], []
    for i, (e, work) in enumerate(shortlist):
        try:
            placements.append(
                place_layout(
                    result.model,
                    result.cluster,
                    work,
                    e,
                    allocation,
                    # the search's time limit bounds the placement solves together (each its share)
                    time_limit_s=time_limit_s or options.time_limit_s / len(shortlist),
                    deterministic=options.deterministic,
                    seed=options.seed,
                    decompose=decompose,
                    export_path=export_name(export, i, len(shortlist)),
                    orders=orders,
                )
            )
        except InvalidInput as exc:  # the plan is not offered as placeable; the reason kept
            lo = e.layout
            unplaced.append(f"TP{lo.tp} PP{lo.pp} DP{lo.dp} CP{lo.cp} EP{lo.ep}: {exc}")
    if not placements:
        raise NoFeasiblePlan("no shortlisted plan can be placed: " + "; ".join(unplaced))
    return placements


def _placement_orders(model: ModelSpec, space: SearchSpace) -> tuple[tuple[Axis, ...], ...]:
    """The rank orders the placement may use: those the search may offer (the framework's
    launcher orders within SearchSpace.rank_orders; only the canonical one without order
    search); the placement keeps, per plan, those the launcher builds for it
    (planner/place/pricing.launchable_orders)."""
    if not space.search_order:
        return (CANONICAL_ORDER,)
    return allowed_orders(model, space) or ALL_ORDERS


def _ranked_by_placement(
    result: PlanResult, shortlist: list, placements: list, place_top: int
) -> PlanResult:
    """The plans re-ranked by the placed step time (`placements` sorted in place), so #1 is the
    fastest; a plan keeps the other ZeRO stages priced like it (the placement moves no bytes
    between them) but not the other rank orders (the placed map fixes its own order)."""
    placements.sort(key=lambda p: p.placed.step_time_s)
    ranked = tuple(judge_fit(p.placed, result.usable_memory_gib) for p in placements)
    shortlisted = [id(e) for e, _ in shortlist]
    same = []
    for p in placements:
        i = shortlisted.index(id(p.ideal))
        searched = i < min(place_top, len(result.equivalents))  # not the one-node-block extra
        alike = result.equivalents[i] if searched else ()
        same.append(tuple(lo for lo in alike if lo.order == p.ideal.layout.order))
    return result.model_copy(
        update={"ranked": ranked, "fastest_index": 0, "equivalents": tuple(same)}
    )


def _whole_node_plan(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
    shortlist: list[tuple[Estimate, Workload]],
) -> PlanResult | None:
    """CP-SAT places TP x CP blocks of whole nodes; where the shortlist has none and the user
    pinned neither degree, the best such layout joins it (a fragmented allocation can make it
    the winner once placed). None: not needed, or no such layout fits."""
    per_node = cluster.gpus_per_node
    if space.tp is not None or space.cp is not None:
        return None
    if any(e.layout.tp * e.layout.cp <= per_node for e, _ in shortlist):
        return None
    whole = space.model_copy(update={"max_cp": 1, "max_tp": min(space.max_tp or per_node, per_node)})
    try:
        return plan(model, cluster, workload, whole, options.model_copy(update={"top_k": 1}))
    except NoFeasiblePlan:
        return None


def framework_violations(
    model: ModelSpec,
    layout: Layout,
    framework: str = _framework.DEFAULT_FRAMEWORK,
    workload: Workload | None = None,
) -> list[str]:
    """Why `framework` cannot run `layout` (empty: it can); with `workload`, also its inputs
    that need a higher ZeRO stage there (FrameworkProfile.zero_inputs)."""
    prof = _framework.profile(framework)
    out = _framework.profile_violations(prof, model, layout)
    if workload is not None:
        out += _framework.zero_input_violations(prof, workload, layout)
    return out
