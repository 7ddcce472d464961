"""`planner whatif`: vary one network parameter, re-plan at each value, compare with the baseline.

Each value builds a modified Cluster (`vary_cluster`) and runs the same `plan()` on it, so the best
layout and placement may change from value to value. Nothing here prints or words the result:
report/whatif_view.py renders it (tables, JSON, conclusions), report/plot.py charts it.
Cost: `gpu_hour_price` is the price of one GPU-hour without the network; `network_cost_share` is
the network's share of the all-in cluster cost, so one all-in GPU-hour costs
price / (1 - share). The share is held fixed across values. With `amortization_years` the
scale-out network's own bill of materials (planner.network_bom) enters instead, value by value:
its capital cost spread over the years plus the electricity it draws (W x PUE x $/kWh).
`slice-shape` and `fabric` take words, not numbers (CATEGORICAL). docs/networks.md#whatif.
Every row compares the fastest plan at its value (as `planner design` does): `planner plan`'s
recommendation, the simplest plan within its simplicity tolerance of the fastest, can be slower
at a faster network than at a slower one (a simpler plan comes within the tolerance), which
would show a better network as a loss. The recommendation is kept beside each row
(WhatIfPoint.recommended) and named in the conclusions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import ValidationError

import models_zoo
from cost_models import rankmap
from cost_models.calibration import (
    GenerationCalibration,
    calibration_for_cluster,
    overlap_slowdown_s,
)
from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.goodput import Goodput
from cost_models.params import total_params
from cost_models.specs import Cluster, Estimate, LinkTier, ModelSpec, Technology

from . import api, network_bom
from .convenience import plan_inputs
from .place import ranks

PARAMETERS = {
    "nic-gbps": "scale-out bandwidth per GPU, Gb/s (every switch/rail/plane/dragonfly tier)",
    "nvlink-domain": "GPUs per NVLink domain (8, 72, 576)",
    "oversubscription": "taper of the tier named by --tier, else of the tiers above the leaf the "
    "preset already tapers (all above the leaf if none is)",
    "nvlink-gb-per-s": "NVLink (scale-up) bandwidth per GPU, one direction, GB/s",
    "ici-gb-per-s": "torus (ICI) bandwidth per link, one direction, GB/s (every torus tier)",
    "wan-latency-ms": "one-way latency of the WAN tier, ms",
    "wan-gbps": "WAN bandwidth per GPU, Gb/s",
    "planes": "rails / planes of the rail-optimized or multi-plane tiers",
    "slice-shape": "torus slice the job runs on, one size per torus dimension, e.g. 16x16x16 "
    "(the product must equal the job's chips)",
    "fabric": "rail-only: keep the rail switches, drop every tier above them (Wang et al., "
    "arXiv 2307.12169); the baseline is the preset's fat-tree",
    "technology": "scale-out technology: infiniband, roce (tuned), roce-untuned (ECMP), "
    "spectrum-x; its behaviour under load and its switches and NICs in the bill",
}
CATEGORICAL = ("slice-shape", "fabric", "technology")
"""Parameters whose --values are words or shapes, kept in the order given, not numbers."""
FABRICS = ("rail-only",)
SHAPE_EXAMPLE = "16x16x16"
SCALE_OUT_KINDS = ("switch", "rail", "plane", "dragonfly")
EXPOSED_FRACTION = 0.01
"""A comm term counts as exposed while it is more than 1% of the step time."""
COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")


def _set(tier: LinkTier, **update: Any) -> LinkTier:
    return LinkTier.model_validate({**tier.model_dump(), **update})


def _need(tiers: list[int], cluster: Cluster, what: str, parameter: str) -> None:
    if not tiers:
        raise InvalidInput(f"--vary {parameter}: cluster {cluster.name} has no {what}")


def vary_cluster(
    cluster: Cluster, parameter: str, value: float | str, tier: str | None = None
) -> Cluster:
    """The cluster with one network parameter set to `value` (InvalidInput if it does not apply
    or the value breaks a LinkTier / Cluster bound, e.g. a bandwidth above its limit).

    `tier` names the one tier `oversubscription` tapers (whatif --tier)."""
    try:
        return _vary_cluster(cluster, parameter, value, tier)
    except ValidationError as err:
        where = f"--values: {parameter} {_fmt(value)} on cluster {cluster.name}"
        raise InvalidInput(describe_validation_error(err, where)) from None


def _vary_cluster(
    cluster: Cluster, parameter: str, value: float | str, tier: str | None = None
) -> Cluster:
    if parameter not in PARAMETERS:
        raise InvalidInput(
            f"--vary: unknown parameter {parameter!r}; known: {', '.join(PARAMETERS)}"
        )
    if parameter == "technology":
        return _with_technology(cluster, str(value))
    if parameter in CATEGORICAL:
        data = cluster.model_dump()
        tiers = (
            _with_slice_shape(cluster, str(value))
            if parameter == "slice-shape"
            else _with_fabric(cluster, str(value))
        )
        data["tiers"] = [t.model_dump() for t in tiers]
        return models_zoo.load_cluster(Cluster.model_validate(data))
    if isinstance(value, str):
        raise InvalidInput(f"--values: {parameter} takes numbers (got {value!r})")
    if not value > 0:
        raise InvalidInput(f"--values: {parameter} values must be positive (got {value})")
    tiers = list(cluster.tiers)
    data: dict[str, Any] = cluster.model_dump()
    idx = range(len(tiers))
    if parameter == "nic-gbps":
        hit = [i for i in idx if tiers[i].kind in SCALE_OUT_KINDS and i > 0]
        _need(hit, cluster, "scale-out switch tier", parameter)
        for i in hit:
            tiers[i] = _set(tiers[i], bandwidth_gb_per_s=value / 8)
    elif parameter == "oversubscription":
        for i in _tapered_tiers(cluster, value, tier):
            tiers[i] = _set(tiers[i], oversubscription=value)
    elif parameter in ("wan-latency-ms", "wan-gbps"):
        hit = [i for i in idx if tiers[i].kind == "wan"]
        _need(hit, cluster, "WAN tier (try two-dc-h100)", parameter)
        for i in hit:
            update = (
                {"latency_us": value * 1000}
                if parameter == "wan-latency-ms"
                else {"bandwidth_gb_per_s": value / 8}
            )
            tiers[i] = _set(tiers[i], **update)
    elif parameter == "nvlink-gb-per-s":
        if tiers[0].kind == "torus":
            raise InvalidInput("--vary nvlink-gb-per-s: the innermost tier is a torus, not NVLink")
        tiers[0] = _set(tiers[0], bandwidth_gb_per_s=value)
        data["gpu"] = {**data["gpu"], "nvlink_gb_per_s": value}
    elif parameter == "ici-gb-per-s":
        hit = [i for i in idx if tiers[i].kind == "torus"]
        _need(hit, cluster, "torus tier (try tpu-v5p-4096)", parameter)
        for i in hit:
            tiers[i] = _set(tiers[i], bandwidth_gb_per_s=value)
    elif parameter == "planes":
        hit = [i for i in idx if tiers[i].kind in ("rail", "plane")]
        _need(hit, cluster, "rail or plane tier", parameter)
        if value != int(value) or cluster.gpus_per_node % int(value):
            raise InvalidInput(
                f"--values: planes must divide gpus_per_node ({cluster.gpus_per_node}), got {value}"
            )
        for i in hit:
            tiers[i] = _set(tiers[i], rails=int(value))
    else:  # nvlink-domain
        tiers, data = _with_nvlink_domain(cluster, tiers, data, int(value), value)
    data["tiers"] = [t.model_dump() for t in tiers]
    return models_zoo.load_cluster(Cluster.model_validate(data))


def _tapered_tiers(cluster: Cluster, value: float, tier: str | None) -> list[int]:
    """The tiers `--vary oversubscription` tapers: the one --tier names, else those above the
    leaf the preset already tapers, else all above the leaf."""
    if value < 1:
        raise InvalidInput(f"--values: oversubscription must be >= 1 (got {value})")
    tiers = cluster.tiers
    idx = range(len(tiers))
    scale_out = [i for i in idx if tiers[i].kind in SCALE_OUT_KINDS and i > 0]
    if tier is not None:
        hit = [i for i in idx if tiers[i].name == tier]
        if not hit:
            names = ", ".join(t.name for t in tiers)
            raise InvalidInput(f"--tier: cluster {cluster.name} has no tier {tier!r} ({names})")
    else:
        above = scale_out[1:]  # the leaf itself is non-blocking; the taper sits above it
        # Keep tiers the preset builds non-blocking (Llama 3's 3,072-GPU pods) as they are.
        tapered = [i for i in above if tiers[i].oversubscription > 1]
        hit = tapered or above
    _need(hit, cluster, "tier above the leaf (try dgx-h100-superpod)", "oversubscription")
    return hit


def parse_shape(text: str) -> tuple[int, ...]:
    """`16x16x16` -> (16, 16, 16); InvalidInput unless every size is a whole number >= 2."""
    parts = text.strip().lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 2 for d in dims):
        raise InvalidInput(
            f"--values: slice shape {text!r} must be whole numbers >= 2 joined by 'x', one per "
            f"torus dimension, e.g. {SHAPE_EXAMPLE}"
        )
    return dims


def _with_slice_shape(cluster: Cluster, text: str) -> list[LinkTier]:
    """The torus tiers resized to a slice of shape d1 x d2 x ... (innermost dimension first).

    Dimension k gets `dim_size` d_k (its ring; the wrap-around link closes it) and the domain
    d_1 ... d_k chips times the domain inside the first torus tier; the outermost tier keeps
    its open domain. The cost model reads the shape from these fields: rings that close over
    a whole dimension run at 2x (comm.fabric_bandwidth_bytes_per_s), an all-to-all along a
    dimension of f chips is bounded by its bisection, f x bytes / (8 B)
    (comm.torus_bisection_s), and a multi-dimensional collective splits its bytes over the
    dimensions it spans (comm.collective_tier_s)."""
    tiers = list(cluster.tiers)
    torus = [i for i, t in enumerate(tiers) if t.kind == "torus"]
    _need(torus, cluster, "torus tier (try tpu-v5p-4096)", "slice-shape")
    dims = parse_shape(text)
    names = ", ".join(tiers[i].name for i in torus)
    if len(dims) != len(torus):
        raise InvalidInput(
            f"--values: slice shape {text!r} has {len(dims)} sizes; cluster {cluster.name} has "
            f"{len(torus)} torus dimensions ({names})"
        )
    if torus != list(range(torus[0], torus[0] + len(torus))):
        raise InvalidInput(
            f"--vary slice-shape: the torus tiers of {cluster.name} are not adjacent"
        )
    inner = 1 if torus[0] == 0 else (tiers[torus[0] - 1].domain_size or 1)
    chips = inner * math.prod(dims)
    if chips != cluster.num_gpus:
        raise InvalidInput(
            f"--values: slice shape {text} holds {chips:,} chips but the job runs on "
            f"{cluster.num_gpus:,} (the product of the sizes must equal the job's chips; --gpus)"
        )
    size = inner
    for i, dim in zip(torus, dims, strict=True):
        size *= dim
        outermost = i == len(tiers) - 1 and tiers[i].domain_size is None
        tiers[i] = _set(tiers[i], dim_size=dim, domain_size=None if outermost else size)
    return tiers


def slice_of(cluster: Cluster) -> str:
    """The torus shape a job occupies: chips per torus dimension as rankmap.tier_domains fills
    them, innermost first, with the ring each dimension has (e.g. `16x16x2 (rings 16x16x16)`)."""
    domains = rankmap.tier_domains(cluster)
    dims, rings, inner = [], [], 1
    for tier, domain in zip(cluster.tiers, domains, strict=True):
        if tier.kind == "torus":
            dims.append(max(1, domain // inner))
            rings.append(tier.dim_size or dims[-1])
        inner = max(inner, domain)
    shape = "x".join(map(str, dims))
    return shape if dims == rings else f"{shape} (rings {'x'.join(map(str, rings))})"


def _with_technology(cluster: Cluster, value: str) -> Cluster:
    """The same tiers built from another technology: its behaviour under load on every
    scale-out tier (comm.TECHNOLOGY_LOAD_FACTOR) and, in the bill, its switches and NICs (the
    cluster's own models give way to the technology's defaults)."""
    known = get_args(Technology)
    if value not in known:
        raise InvalidInput(f"--values: technology must be one of {', '.join(known)} (got {value!r})")
    data = cluster.model_dump()
    data["network"] = {**data["network"], "technology": value, "switch": None, "nic": None}
    # SHARP is InfiniBand's in-network reduction (Quantum switches); Ethernet has none.
    ib = value == "infiniband"
    data["tiers"] = [
        {**t, "technology": None, "sharp": t["sharp"] and (ib or j == 0)}
        for j, t in enumerate(data["tiers"])
    ]
    return models_zoo.load_cluster(Cluster.model_validate(data))


def _with_fabric(cluster: Cluster, value: str) -> list[LinkTier]:
    """`rail-only` (Wang et al., "How to Build Low-cost Networks for Large Language Models
    (without Sacrificing Performance)", arXiv 2307.12169): GPUs of the same rank in every
    NVLink domain share a rail switch and there is no spine, so the first rail / plane tier
    spans the whole job and the tiers above it go. Traffic between rails hops over NVLink
    first (the `rail` kind's rule, NCCL PXN)."""
    if value not in FABRICS:
        raise InvalidInput(f"--values: fabric must be one of {', '.join(FABRICS)} (got {value!r})")
    tiers = list(cluster.tiers)
    rails = [i for i, t in enumerate(tiers) if t.kind in ("rail", "plane") and i > 0]
    _need(rails, cluster, "rail or plane tier to keep (try dgx-h100-superpod)", "fabric")
    first = rails[0]
    return [*tiers[:first], _set(tiers[first], domain_size=None)]


def _with_nvlink_domain(
    cluster: Cluster, tiers: list[LinkTier], data: dict[str, Any], size: int, value: float
) -> tuple[list[LinkTier], dict[str, Any]]:
    """Resize the NVLink domain; inner tiers it swallows go, outer domains round up to fit it."""
    if value != size or tiers[0].kind == "torus":
        raise InvalidInput(
            f"--values: nvlink-domain needs whole numbers and an NVLink innermost tier (got {value})"
        )
    out = [_set(tiers[0], domain_size=size)]
    for tier in tiers[1:]:
        if tier.domain_size is not None and tier.domain_size <= size:
            continue  # e.g. a 16-GPU ToR inside a 72-GPU NVLink domain
        if tier.domain_size is not None:
            tier = _set(tier, domain_size=math.ceil(tier.domain_size / size) * size)
        out.append(tier)
    data["gpu"] = {**data["gpu"], "nvlink_domain_size": size}
    data["gpus_per_node"] = min(data["gpus_per_node"], size)
    return out, data


@dataclass(frozen=True)
class WhatIfPoint:
    value: float | str
    """The swept value (a number; a word or shape for CATEGORICAL parameters; nan: baseline)."""
    best: Estimate
    """The fastest plan at this value: what every comparison reads (module docstring)."""
    change: float = field(metadata={"doc": "tokens/s/GPU relative to the baseline, minus 1"})
    cost_per_m_tokens: float | None = None
    train_days: float | None = None
    train_cost: float | None = None
    network_capex_usd_per_gpu: float | None = None
    """Scale-out network capital cost per GPU at this value (planner.network_bom)."""
    network_power_w_per_gpu: float | None = None
    """Watts the scale-out network draws per GPU (NICs, switch ports, transceivers)."""
    network_energy_usd_per_gpu_hour: float | None = None
    """That power x PUE x electricity price, per GPU-hour."""
    network_capex_usd_per_gpu_hour: float | None = None
    """Capital cost / amortisation hours (None without --amortization-years)."""
    train_network_energy_usd: float | None = None
    """The network's electricity over the whole run (needs --token-budget and a price)."""
    goodput: Goodput | None = None
    """The plan's goodput figures in a reliability sweep (planner/whatif_goodput.py), where
    `change` and the costs are on goodput tokens; None in a network sweep."""
    recommended: Estimate | None = None
    """The simpler plan `planner plan` recommends at this value instead of `best` (within its
    simplicity tolerance); None where it recommends the fastest."""


@dataclass(frozen=True)
class WhatIfResult:
    parameter: str
    cluster: str
    num_gpus: int
    baseline: WhatIfPoint
    points: tuple[WhatIfPoint, ...]
    hidden_from: dict[str, float | None]
    """comm term -> first swept value from which it stays <= 1% of the step (None: never)."""
    stopped: tuple[bool, ...] = ()
    """Per search, the baseline first, then each value: the time limit cut it (STOPPED), so that
    row is the best plan found, not a proved best."""
    model: str = ""
    params: dict[str, int] = field(default_factory=dict)
    """params_total and params_active of the model."""
    hbm_gib: float | None = None
    """The GPU's HBM; each plan's usable_memory_gib is HBM minus the memory headroom."""
    calibration: GenerationCalibration | None = None
    """The baseline cluster's calibration (exposed_share of the DP wire time reads it)."""
    varied_tiers: tuple[str, ...] = ()
    """Names of the tiers the sweep changes."""
    crossed_tiers: tuple[str | None, ...] = ()
    """The slowest tier each group of each row's plan crosses (None: within one GPU)."""
    tier_names: tuple[str, ...] = ()
    """The cluster's tiers, innermost first."""
    baseline_slice: str | None = None
    """slice-shape: the torus slice the baseline job fills (slice_of)."""
    point_tiers: tuple[dict[str, str | None], ...] = ()
    """Per point (in `points` order): the slowest tier each axis's groups cross there."""
    simplicity_tolerance: float = 0.0
    """The tolerance of `planner plan`'s recommendation (WhatIfPoint.recommended)."""


def _costs(
    e: Estimate,
    num_gpus: int,
    price: float | None,
    share: float,
    budget: float | None,
    network_usd_per_gpu_hour: float = 0.0,
) -> tuple[float | None, float | None, float | None]:
    if price is None:
        return None, None, None
    all_in = price / (1 - share) + network_usd_per_gpu_hour
    per_m = all_in / (e.tokens_per_s_per_gpu * 3600) * 1e6
    if budget is None:
        return per_m, None, None
    seconds = budget / (e.tokens_per_s_per_gpu * num_gpus)
    return per_m, seconds / 86400, seconds / 3600 * num_gpus * all_in


def exposed_wire_s(e: Estimate, term: str, cal: GenerationCalibration) -> float:
    """Exposed seconds of a comm term's wire time, without the SM-contention cost of its hidden part.

    The cost model books a DP collective as exposed = wire + k * (total - wire), k = f / (1 - f)
    (cost_models.calibration.overlap_slowdown_s: the hidden part slows the compute beside it), so
    `breakdown_s["dp_comm"]` never reaches zero however fast the network is. Solved for the wire
    time: wire = (exposed - k * total) / (1 - k). "Stops being exposed" asks about the wire.
    """
    if term != "dp_comm":
        return e.breakdown_s[term]
    k = overlap_slowdown_s(1.0, cal)
    return max(0.0, (e.breakdown_s[term] - k * e.comm_total_s["dp"]) / (1.0 - k))


def exposed_share(e: Estimate, term: str, cal: GenerationCalibration) -> float:
    """The share of the step a comm term's exposed wire time takes: the number the whatif
    table prints for the term (DP: its "DP wire" column) and judges "hidden" on."""
    return exposed_wire_s(e, term, cal) / e.step_time_s


def hidden_from(points: list[WhatIfPoint], cal: GenerationCalibration) -> dict[str, float | None]:
    """For each comm term exposed at the first value: the value from which it stays hidden."""
    ordered = ordered_points(points)
    out: dict[str, float | None] = {}
    for term in COMM_TERMS:
        exposed = [exposed_share(p.best, term, cal) > EXPOSED_FRACTION for p in ordered]
        if not exposed or not exposed[0]:
            continue
        last = max(i for i, x in enumerate(exposed) if x)
        out[term] = ordered[last + 1].value if last + 1 < len(ordered) else None
    return out


TERM_AXIS = {"tp_comm": "tp", "cp_comm": "cp", "ep_comm": "ep", "pp_comm": "pp", "dp_comm": "dp"}


def plan_key(e: Estimate) -> tuple[Any, ...]:
    """What makes two plans the same plan: the layout (degrees, schedule, memory choices, rank
    order) and its placement on the tiers."""
    return (e.layout.model_dump_json(), sorted((k, sorted(v.items())) for k, v in e.placement.items()))


def _fmt(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def is_baseline(p: WhatIfPoint) -> bool:
    return isinstance(p.value, float) and math.isnan(p.value)


def ordered_points(points: list[WhatIfPoint]) -> list[WhatIfPoint]:
    """Numeric sweeps in increasing order; words and shapes in the order given."""
    if any(isinstance(p.value, str) for p in points):
        return list(points)
    return sorted(points, key=lambda p: p.value)


def changed_tiers(cluster: Cluster, varied: list[Cluster]) -> list[str]:
    """Names of the tiers the sweep changes (compared field by field with the cluster)."""
    base = {t.name: t for t in cluster.tiers}
    names = []
    for c in varied:
        for t in c.tiers:
            if t.name in base and t != base[t.name] and t.name not in names:
                names.append(t.name)
    return names


def whatif(
    model: str | ModelSpec,
    cluster: str | Cluster,
    parameter: str,
    values: list[float] | list[str],
    *,
    num_gpus: int | None = None,
    gpu_hour_price: float | None = None,
    network_cost_share: float = 0.0,
    token_budget: float | None = None,
    tier: str | None = None,
    network_prices: str | None = None,
    amortization_years: float | None = None,
    **plan_args: Any,
) -> WhatIfResult:
    """Re-plan at every value of `parameter`; raises InvalidInput / NoFeasiblePlan like plan().
    `plan_args`: the keywords of planner.plan_for (global_batch, framework, pins, ...)."""
    if not values:
        raise InvalidInput("--values: give at least one value")
    if not 0 <= network_cost_share < 1:
        raise InvalidInput(f"--network-cost-share: must be in [0, 1) (got {network_cost_share})")
    if amortization_years is not None and not amortization_years > 0:
        raise InvalidInput(f"--amortization-years: must be > 0 (got {amortization_years})")
    if amortization_years is not None and network_cost_share:
        # The share marks the GPU-hour price up for the network; the amortised bill adds the
        # network itself: together they count it twice.
        raise InvalidInput(
            "--network-cost-share and --amortization-years both price the network: give one"
        )
    base_cluster = models_zoo.load_cluster(cluster, num_gpus)
    spec = models_zoo.load_model(model)
    if tier is not None and parameter != "oversubscription":
        raise InvalidInput(f"--tier applies to --vary oversubscription, not {parameter}")
    varied = [vary_cluster(base_cluster, parameter, v, tier) for v in values]  # bad input fails first
    inputs = plan_inputs(spec, base_cluster, **plan_args)

    stopped: list[bool] = []  # per search, baseline first: cut by the time limit (STOPPED)

    def best(c: Cluster) -> tuple[Estimate, Estimate | None]:
        """(the fastest plan, the simpler one `plan` recommends instead or None)."""
        found = api.plan(spec, c, inputs.workload, inputs.space, inputs.options)
        stopped.append(found.solver.status == "STOPPED")
        fastest = found.ranked[found.fastest_index]
        return fastest, (None if found.best is fastest else found.best)

    base, base_recommended = best(base_cluster)
    pricing = _Pricing(
        network_bom.load_prices(network_prices),
        base_cluster.num_gpus,
        base.tokens_per_s_per_gpu,
        gpu_hour_price,
        network_cost_share,
        token_budget,
        amortization_years,
    )
    points = [pricing.point(*best(c), v, c) for c, v in zip(varied, values, strict=True)]
    baseline = pricing.point(base, base_recommended, math.nan, base_cluster)
    cal = calibration_for_cluster(base_cluster)
    crossed = [
        tier
        for c, p in [(base_cluster, baseline), *zip(varied, points, strict=True)]
        for tier in ranks.group_tiers(c, p.best.layout).values()
    ]
    return WhatIfResult(
        parameter=parameter,
        cluster=base_cluster.name,
        num_gpus=base_cluster.num_gpus,
        baseline=baseline,
        points=tuple(points),
        stopped=tuple(stopped),
        hidden_from=hidden_from(points, cal),
        model=spec.name,
        params={
            "params_total": total_params(spec),
            "params_active": total_params(spec, active_only=True),
        },
        hbm_gib=base_cluster.gpu.hbm_gib,
        calibration=cal,
        varied_tiers=tuple(changed_tiers(base_cluster, varied)),
        crossed_tiers=tuple(crossed),
        tier_names=tuple(t.name for t in base_cluster.tiers),
        baseline_slice=slice_of(base_cluster) if parameter == "slice-shape" else None,
        point_tiers=tuple(
            ranks.group_tiers(c, p.best.layout) for c, p in zip(varied, points, strict=True)
        ),
        simplicity_tolerance=inputs.options.simplicity_tolerance,
    )


@dataclass(frozen=True)
class _Pricing:
    """What a point of the sweep costs: the network's bill of materials at that value and, with
    a GPU-hour price, $ per million tokens (and the run's days and $ with a token budget)."""

    prices: Any  # network_bom prices
    num_gpus: int
    base_tokens_per_s_per_gpu: float
    gpu_hour_price: float | None
    network_cost_share: float
    token_budget: float | None
    amortization_years: float | None

    def point(
        self, e: Estimate, recommended: Estimate | None, value: float | str, c: Cluster
    ) -> WhatIfPoint:
        capex = network_bom.network_capex_usd_per_gpu(c, self.prices)
        power = network_bom.network_power_w_per_gpu(c, self.prices)
        energy = network_bom.network_energy_usd_per_gpu_hour(c, self.prices)
        # With --amortization-years the bill of materials enters the price of a GPU-hour:
        # its capital spread over the years, plus the electricity it draws meanwhile.
        years = self.amortization_years
        capex_hourly = None if years is None else capex / (years * network_bom.HOURS_PER_YEAR)
        hourly = 0.0 if capex_hourly is None else capex_hourly + energy
        costs = _costs(
            e,
            self.num_gpus,
            self.gpu_hour_price,
            self.network_cost_share,
            self.token_budget,
            hourly,
        )
        run_energy = None
        if costs[1] is not None and capex_hourly is not None:
            run_energy = costs[1] * 24 * self.num_gpus * energy
        return WhatIfPoint(
            value,
            e,
            e.tokens_per_s_per_gpu / self.base_tokens_per_s_per_gpu - 1,
            *costs,
            network_capex_usd_per_gpu=capex,
            network_power_w_per_gpu=power,
            network_energy_usd_per_gpu_hour=energy,
            network_capex_usd_per_gpu_hour=capex_hourly,
            train_network_energy_usd=run_energy,
            recommended=recommended,
        )
