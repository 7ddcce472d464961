"""Conveniences on top of the typed core (api.py): preset names or objects, the workload's fields
and the search constraints as keywords, the defaults the CLI and the README use. Each builds the
typed inputs once (`plan_inputs`, `search_inputs`) and calls the core; nothing here prints.

    planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64, global_batch=128, tp=8, top_k=3)

is `planner.plan(model, cluster, workload, space, options)` with those inputs built from names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import models_zoo
from cost_models import framework as _framework
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload
from models_zoo.inputs import validated

from . import api
from .place.allocation import Allocation, load_allocation
from .place.joint import PlacedPlan
from .place.traffic import load_other_traffic
from .types import PlanResult, SearchSpace, SolverOptions


@dataclass(frozen=True)
class PlanInputs:
    """The typed inputs of api.plan, built from names and keywords."""

    model: ModelSpec
    cluster: Cluster
    workload: Workload
    space: SearchSpace
    options: SolverOptions


def search_inputs(
    framework: str | None = _framework.DEFAULT_FRAMEWORK, **constraints: Any
) -> tuple[SearchSpace, SolverOptions]:
    """SearchSpace and SolverOptions from keywords: SearchSpace fields (tp=8 pins TP, max_pp=16,
    recompute=("selective",), zero_stages=(1,), memory_headroom=0.1, ...) and SolverOptions
    fields (top_k, time_limit_s, deterministic, seed, engine). `framework` (megatron, the
    default; torchtitan; deepspeed; None: no restriction) is SearchSpace.framework.
    An unknown keyword is InvalidInput naming the known ones."""
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
    space = validated(SearchSpace, space_fields, "constraints")
    return space, validated(SolverOptions, option_fields, "solver options")


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


def plan_inputs(
    model: str | ModelSpec,
    cluster: str | Cluster,
    *,
    num_gpus: int | None = None,
    global_batch: int | tuple[int, int] | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    max_nodes: int | None = None,
    moe_dispatcher: str | None = None,
    framework: str | None = api.AUTO_FRAMEWORK,
    workload_fields: dict[str, Any] | None = None,
    **constraints: Any,
) -> PlanInputs:
    """The inputs `plan_for` plans with (its keywords are documented there)."""
    if isinstance(global_batch, (tuple, list)):
        if "global_batch_range" in constraints:
            raise InvalidInput("global_batch: give a range or global_batch_range, not both")
        constraints["global_batch_range"] = tuple(global_batch)
        global_batch = None
    elif global_batch is not None and constraints.get("global_batch_range") is not None:
        raise InvalidInput("global_batch_range: give a fixed global_batch or a range, not both")
    if max_nodes is not None:
        num_gpus = _gpus_within(cluster, num_gpus, max_nodes)
    spec = models_zoo.load_model(model)
    sized = models_zoo.load_cluster(cluster, num_gpus)
    if framework == api.AUTO_FRAMEWORK:  # megatron, or none on a TPU (api.default_framework)
        framework = api.default_framework(sized)
    space, options = search_inputs(framework, **constraints)
    if space.global_batch_range is not None:
        global_batch = space.global_batch_range[1]  # the search takes each plan's batch
    workload = api.make_workload(
        spec,
        seq_len=seq_len,
        global_batch=global_batch,
        precision=precision,
        moe_dispatcher=moe_dispatcher or "alltoall",
        **(workload_fields or {}),
    )
    return PlanInputs(spec, sized, workload, space, options)


def plan_for(model: str | ModelSpec, cluster: str | Cluster, **keywords: Any) -> PlanResult:
    """Best layouts for `model` on `cluster` (preset names or objects), ranked by step time.

    Keywords: num_gpus (default: the whole cluster), global_batch (sequences; default ~4M
    tokens; `(MIN, MAX)` lets each plan take its own batch in the range and rank by tokens/s),
    seq_len, precision, moe_dispatcher, workload_fields (further Workload fields, e.g.
    optimizer_moments="bf16"), max_nodes (caps the GPU count at that many whole nodes),
    framework ("auto", the default: megatron, or None on an accelerator that runs no modelled
    framework, a TPU; torchtitan; deepspeed; None: no restriction), the
    SearchSpace / SolverOptions fields (`search_inputs`; objective="goodput" ranks by goodput),
    and reliability (cost_models.goodput.Reliability: adds each plan's goodput figures).
    Raises InvalidInput for bad input and NoFeasiblePlan when nothing fits.
    """
    reliability = keywords.pop("reliability", None)
    i = plan_inputs(model, cluster, **keywords)
    return api.plan(i.model, i.cluster, i.workload, i.space, i.options, reliability)


def estimate_for(
    model: str | ModelSpec,
    cluster: str | Cluster,
    layout: Layout | dict[str, Any],
    *,
    num_gpus: int | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    precision: str | None = None,
    framework: str | None = api.AUTO_FRAMEWORK,
    memory_headroom: float = api.DEFAULT_MEMORY_HEADROOM,
) -> Estimate:
    """Score one layout (a Layout, or a dict of its fields: sequence parallelism on whenever
    tp > 1 unless it says otherwise, as plan searches) with plan_for's defaults (api.estimate)."""
    spec = models_zoo.load_model(model)
    sized = models_zoo.load_cluster(cluster, num_gpus)
    workload = api.make_workload(
        spec, seq_len=seq_len, global_batch=global_batch, precision=precision
    )
    if framework == api.AUTO_FRAMEWORK:
        framework = api.default_framework(sized)
    return api.estimate(
        spec,
        sized,
        api.layout_with_defaults(layout),
        workload,
        framework=framework,
        memory_headroom=memory_headroom,
    )


def plan_on_allocation_for(
    model: str | ModelSpec,
    cluster: str | Cluster,
    *,
    topology: str | Allocation,
    hosts_file: str | None = None,
    nodelist: str | None = None,
    exclude: str | None = None,
    topology_name: str | None = None,
    num_gpus: int | None = None,
    place_top: int = 3,
    place_time_limit_s: float | None = None,
    place_decompose: bool = False,
    place_export: str | None = None,
    other_traffic: str | None = None,
    **keywords: Any,
) -> PlacedPlan:
    """api.plan_on_allocation from names: `topology` a Slurm topology.conf or topology.yaml
    (`topology_name` picks one of its topologies) or the levels YAML (or an Allocation already
    loaded), the hosts from `hosts_file` or `nodelist` less `exclude`;
    num_gpus defaults to every healthy GPU of the allocation; other keywords as plan_for
    (top_k defaults to place_top). `other_traffic`: a file naming switch uplinks other jobs
    load (planner/place/traffic.py)."""
    base = models_zoo.load_cluster(cluster)
    if isinstance(topology, Allocation):  # already loaded (bench/place_scaling.py, tests)
        alloc = topology
    else:
        alloc = load_allocation(
            base,
            topology,
            hosts_file=hosts_file,
            nodelist=nodelist,
            exclude=exclude,
            topology_name=topology_name,
        )
    if other_traffic is not None:
        alloc = load_other_traffic(other_traffic, base, alloc)
    have = len(alloc.hosts) * base.gpus_per_node
    if num_gpus is not None and num_gpus > have:
        raise InvalidInput(
            f"--gpus {num_gpus}: the allocation has {have} healthy GPUs ({len(alloc.hosts)} hosts)"
        )
    keywords["top_k"] = max(place_top, keywords.get("top_k", 1))
    i = plan_inputs(model, cluster, num_gpus=num_gpus or have, **keywords)
    return api.plan_on_allocation(
        i.model,
        i.cluster,
        i.workload,
        i.space,
        i.options,
        alloc,
        place_top=place_top,
        place_time_limit_s=place_time_limit_s,
        place_decompose=place_decompose,
        place_export=place_export,
    )
