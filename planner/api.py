"""The library entry points: plan() and estimate(). Neither prints; both take names or objects."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

import models_zoo
from cost_models import estimate as _cost
from cost_models import framework as _framework
from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from .search import exhaustive, recommend
from .search import solve as sat_solve
from .search.candidates import OrderCache, allowed_orders, framework_space
from .types import PlanResult, SearchSpace, SolverOptions

DEFAULT_SEQ_LEN = 4096
DEFAULT_BATCH_TOKENS = 2**22  # ~4M tokens per step, the usual pre-training batch at scale


def _validated(cls: type, fields: dict[str, Any], where: str) -> Any:
    try:
        return cls.model_validate(fields)
    except ValidationError as err:
        raise InvalidInput(describe_validation_error(err, where)) from None


def make_workload(
    model: ModelSpec,
    *,
    seq_len: int | None = None,
    global_batch: int | None = None,
    precision: str | None = None,
) -> Workload:
    """Fill defaults: the model's own sequence length (else 4096) and a ~4M-token batch."""
    seq = seq_len if seq_len is not None else (model.seq_len or DEFAULT_SEQ_LEN)
    if global_batch is None and isinstance(seq, int) and seq > 0:
        global_batch = max(1, DEFAULT_BATCH_TOKENS // seq)
    fields = {"seq_len": seq, "global_batch_seqs": global_batch, "precision": precision or "bf16"}
    return _validated(Workload, fields, "workload")


def _resolve(
    model: str | ModelSpec, cluster: str | Cluster, num_gpus: int | None
) -> tuple[ModelSpec, Cluster]:
    return models_zoo.load_model(model), models_zoo.load_cluster(cluster, num_gpus)


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
    framework: str | None = _framework.DEFAULT_FRAMEWORK,
    **constraints: Any,
) -> PlanResult:
    """Best layouts for `model` on `cluster`, ranked by step time (fixed global batch).

    `global_batch=(MIN, MAX)` (or the constraint global_batch_range=(MIN, MAX)) lets each plan
    take its own global batch in the range; plans then rank by time per sequence (tokens/s) and
    `PlanResult.global_batch(i)` gives each plan's batch.
    `constraints` are SearchSpace fields (tp=8 pins TP, max_pp=16, recompute=("selective",),
    zero_stages=(1,), memory_headroom=0.1, ...) and SolverOptions fields (top_k, time_limit_s,
    deterministic, seed, engine). `max_nodes` caps the GPU count at that many whole nodes.
    `framework` (megatron, the default; torchtitan; deepspeed; None: no restriction) limits the
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
    if framework is not None:
        _framework.profile(framework)  # unknown name: InvalidInput naming the choices
        if constraints.get("framework") not in (None, framework):
            raise InvalidInput("framework: give it once (framework= or the constraint)")
        constraints["framework"] = framework
    space_fields = {k: v for k, v in constraints.items() if k in SearchSpace.model_fields}
    option_fields = {k: v for k, v in constraints.items() if k in SolverOptions.model_fields}
    unknown = sorted(set(constraints) - set(space_fields) - set(option_fields))
    if unknown:
        known = sorted(set(SearchSpace.model_fields) | set(SolverOptions.model_fields))
        raise InvalidInput(f"unknown constraint(s) {', '.join(unknown)}; known: {', '.join(known)}")
    space = framework_space(spec, _validated(SearchSpace, space_fields, "constraints"))
    options = _validated(SolverOptions, option_fields, "solver options")
    batch_range = space.global_batch_range
    if batch_range is not None:
        global_batch = batch_range[1]  # the search takes each plan's batch from the range
    if workload is None:
        workload = make_workload(
            spec, seq_len=seq_len, global_batch=global_batch, precision=precision
        )
    elif batch_range is not None:
        workload = workload.model_copy(update={"global_batch_seqs": batch_range[1]})
    if space.framework is not None:
        workload = _framework.profile(space.framework).workload(workload)
    engine = exhaustive if options.engine == "exhaustive" else sat_solve
    ranked, stats, rejections = engine.search(spec, sized, workload, space, options)
    # The simplest plan within the simplicity tolerance of the fastest leads; then what else
    # each ranked plan is priced exactly like (planner/search/recommend.py).
    ranked, fastest = recommend.recommend(ranked, options, space.batch_max)
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
        usable_memory_gib=exhaustive.usable_memory_gib(sized, space),
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
    framework: str | None = _framework.DEFAULT_FRAMEWORK,
) -> Estimate:
    """Score one layout (a Layout or a dict of its fields). Raises InvalidInput if illegal.
    `framework` sets the physics the workload and layout do not set themselves (None: the
    cost model's field defaults); the layout is scored even where that framework could not
    run it (`framework_violations` says why)."""
    spec, sized = _resolve(model, cluster, num_gpus)
    if workload is None:
        workload = make_workload(
            spec, seq_len=seq_len, global_batch=global_batch, precision=precision
        )
    if not isinstance(layout, Layout):
        layout = _validated(Layout, dict(layout), "layout")
    if framework is not None:
        prof = _framework.profile(framework)
        workload, layout = prof.workload(workload), prof.layout(layout)
    return _cost(spec, sized, workload, layout)


def framework_violations(
    model: str | ModelSpec, layout: Layout, framework: str = _framework.DEFAULT_FRAMEWORK
) -> list[str]:
    """Why `framework` cannot run `layout` (empty: it can)."""
    prof = _framework.profile(framework)
    return _framework.layout_violations(prof, models_zoo.load_model(model), layout)
