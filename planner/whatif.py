"""`planner whatif`: vary one network parameter, re-plan at each value, compare with the baseline.

Each value builds a modified Cluster (`vary_cluster`) and runs the same `plan()` on it, so the best
layout and placement may change from value to value. Nothing here prints (cli.py renders).
Cost: `gpu_hour_price` is the price of one GPU-hour without the network; `network_cost_share` is
the network's share of the all-in cluster cost, so one all-in GPU-hour costs
price / (1 - share). The share is held fixed across values. With `amortization_years` the
scale-out network's own bill of materials (planner.network_bom) enters instead, value by value:
its capital cost spread over the years plus the electricity it draws (W x PUE x $/kWh).
`slice-shape` and `fabric` take words, not numbers (CATEGORICAL). docs/networks.md#whatif.
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
from cost_models.specs import Cluster, Estimate, LinkTier, Technology

from . import api, network_bom
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
        if value < 1:
            raise InvalidInput(f"--values: oversubscription must be >= 1 (got {value})")
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
        _need(hit, cluster, "tier above the leaf (try dgx-h100-superpod)", parameter)
        for i in hit:
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


@dataclass(frozen=True)
class WhatIfResult:
    parameter: str
    cluster: str
    num_gpus: int
    baseline: WhatIfPoint
    points: tuple[WhatIfPoint, ...]
    hidden_from: dict[str, float | None]
    """comm term -> first swept value from which it stays <= 1% of the step (None: never)."""
    model: str = ""
    params: dict[str, int] = field(default_factory=dict)
    hbm_gib: float | None = None
    """The GPU's HBM; each plan's usable_memory_gib is HBM minus the memory headroom."""
    """params_total and params_active of the model (report.terminal.model_params)."""
    conclusions: tuple[str, ...] = ()
    """What the rows show, in words: where each exposed term stops being exposed (and whether the
    plan changed there), which plan each value picked, and when the parameter cannot matter."""


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


def conclusions(
    parameter: str,
    baseline: WhatIfPoint,
    points: list[WhatIfPoint],
    hidden: dict[str, float | None],
    cal: GenerationCalibration,
    varied_tiers: list[str],
    crossed_tiers: list[str | None],
    tier_names: list[str],
) -> list[str]:
    """Sentences that say only what the rows show (issue 20)."""
    from .report.terminal import compact_layout

    out: list[str] = []
    ordered = ordered_points(points)
    # Which plan each value picked: name every change against the previous row.
    prev_key, prev_layout = plan_key(baseline.best), compact_layout(baseline.best)
    changes = []
    for p in ordered:
        key = plan_key(p.best)
        if key != prev_key:
            now = compact_layout(p.best)
            what = f"{prev_layout} -> {now}" if now != prev_layout else f"{now}, new placement"
            changes.append(f"At {_fmt(p.value)} the plan changes: {what}.")
        prev_key, prev_layout = key, compact_layout(p.best)
    if changes:
        out += changes
    else:
        out.append(f"Every value keeps the baseline plan ({compact_layout(baseline.best)}).")
    for term, value in hidden.items():
        label = term.split("_")[0].upper()
        col = f"{label} wire" if term == "dp_comm" else label
        if value is None:
            last = ordered[-1]
            share = exposed_share(last.best, term, cal)
            out.append(
                f"{col} stays exposed (> 1% of the step) at every value: {share:.1%} at "
                f"{_fmt(last.value)}."
            )
            continue
        at = next(p for p in ordered if p.value == value)
        axis = TERM_AXIS[term]
        degree = getattr(at.best.layout, axis)
        if degree == 1:
            why = f"because the plan there has no {label} group ({label}1), not because it hides"
        else:
            before = ordered[ordered.index(at) - 1]
            same = plan_key(before.best) == plan_key(at.best)
            why = "same plan as the value before" if same else "with a different plan"
        out.append(f"{col} is <= 1% of the step from {_fmt(value)} on ({why}).")
    if "dp_comm" in hidden:
        out.append(
            "DP wire is the DP collective's exposed wire time; the DP column also holds the "
            "compute slowed beside the hidden part (SM contention), which no network removes."
        )
    if varied_tiers and parameter != "nvlink-domain":
        first = min(tier_names.index(t) for t in varied_tiers)
        reach = [tier_names.index(t) for t in crossed_tiers if t is not None]
        if not reach or max(reach) < first:
            out.append(
                f"Warning: no group of any plan here crosses the {', '.join(varied_tiers)} "
                f"tier, so {parameter} cannot change these step times (use more GPUs or a "
                "layout whose groups span it)."
            )
    if len({round(p.best.step_time_s, 9) for p in [baseline, *ordered]}) == 1:
        out.append("Every row has the same step time.")
    return out


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
    model: str,
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
    """Re-plan at every value of `parameter`; raises InvalidInput / NoFeasiblePlan like plan()."""
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
    base = api.plan(spec, base_cluster, **plan_args).best

    prices = network_bom.load_prices(network_prices)

    def point(e: Estimate, value: float | str, c: Cluster) -> WhatIfPoint:
        capex = network_bom.network_capex_usd_per_gpu(c, prices)
        power = network_bom.network_power_w_per_gpu(c, prices)
        energy = network_bom.network_energy_usd_per_gpu_hour(c, prices)
        # With --amortization-years the bill of materials enters the price of a GPU-hour:
        # its capital spread over the years, plus the electricity it draws meanwhile.
        capex_hourly = (
            None
            if amortization_years is None
            else capex / (amortization_years * network_bom.HOURS_PER_YEAR)
        )
        hourly = 0.0 if capex_hourly is None else capex_hourly + energy
        costs = _costs(
            e, base_cluster.num_gpus, gpu_hour_price, network_cost_share, token_budget, hourly
        )
        run_energy = None
        if costs[1] is not None and capex_hourly is not None:
            run_energy = costs[1] * 24 * base_cluster.num_gpus * energy
        change = e.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu - 1
        return WhatIfPoint(
            value,
            e,
            change,
            *costs,
            network_capex_usd_per_gpu=capex,
            network_power_w_per_gpu=power,
            network_energy_usd_per_gpu_hour=energy,
            network_capex_usd_per_gpu_hour=capex_hourly,
            train_network_energy_usd=run_energy,
        )

    points = [
        point(api.plan(spec, c, **plan_args).best, v, c)
        for c, v in zip(varied, values, strict=True)
    ]
    from .report.terminal import model_params

    cal = calibration_for_cluster(base_cluster)
    hidden = hidden_from(points, cal)
    baseline = point(base, math.nan, base_cluster)
    crossed = [
        tier
        for c, p in [(base_cluster, baseline), *zip(varied, points, strict=True)]
        for tier in ranks.group_tiers(c, p.best.layout).values()
    ]
    words = conclusions(
        parameter,
        baseline,
        points,
        hidden,
        cal,
        changed_tiers(base_cluster, varied),
        crossed,
        [t.name for t in base_cluster.tiers],
    )
    if parameter == "slice-shape":
        shape = slice_of(base_cluster)
        words.append(f"The baseline is the preset's torus as the job fills it: {shape}.")
    return WhatIfResult(
        parameter=parameter,
        cluster=base_cluster.name,
        num_gpus=base_cluster.num_gpus,
        baseline=baseline,
        points=tuple(points),
        hidden_from=hidden,
        model=spec.name,
        params=model_params(spec),
        hbm_gib=base_cluster.gpu.hbm_gib,
        conclusions=tuple(words),
    )


def _point_dict(p: WhatIfPoint, hbm_gib: float | None = None) -> dict[str, Any]:
    from .report import plan_dict

    plan = plan_dict(p.best)
    if hbm_gib is not None:
        plan["estimate"]["hbm_gib"] = hbm_gib
    return {
        "value": None if is_baseline(p) else p.value,
        "plan": plan,
        "tokens_per_s_per_gpu": p.best.tokens_per_s_per_gpu,
        "mfu": p.best.mfu,
        "step_time_s": p.best.step_time_s,
        "breakdown_s": p.best.breakdown_s,
        "change_vs_baseline": p.change,
        "cost_per_m_tokens": p.cost_per_m_tokens,
        "train_days": p.train_days,
        "train_cost": p.train_cost,
        "network_capex_usd_per_gpu": p.network_capex_usd_per_gpu,
        "network_power_w_per_gpu": p.network_power_w_per_gpu,
        "network_energy_usd_per_gpu_hour": p.network_energy_usd_per_gpu_hour,
        "network_capex_usd_per_gpu_hour": p.network_capex_usd_per_gpu_hour,
        "train_network_energy_usd": p.train_network_energy_usd,
    }


def result_dict(r: WhatIfResult) -> dict[str, Any]:
    """JSON-ready form of a WhatIfResult."""
    return {
        "parameter": r.parameter,
        "cluster": r.cluster,
        "num_gpus": r.num_gpus,
        "baseline": _point_dict(r.baseline, r.hbm_gib),
        "points": [_point_dict(p, r.hbm_gib) for p in r.points],
        "model": r.model,
        **r.params,
        "hidden_from": r.hidden_from,
        "conclusions": list(r.conclusions),
    }


def short_layout(e: Estimate) -> str:
    """The compact layout cell of every report (report.terminal.compact_layout)."""
    from .report.terminal import compact_layout

    return compact_layout(e)


def pyplot(path: str) -> Any:
    """matplotlib.pyplot (Agg), or InvalidInput if the extra is missing or the suffix is wrong."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from . import DISTRIBUTION

        raise InvalidInput(
            "--plot: matplotlib is not installed: pip install matplotlib, or the [plot] extra: "
            f"pip install '{DISTRIBUTION}[plot]' (from a checkout: pip install '.[plot]')"
        ) from None
    if not path.lower().endswith((".png", ".svg")):
        raise InvalidInput(f"--plot: file must end in .png or .svg (got {path!r})")
    return plt


def save_plot(r: WhatIfResult, path: str) -> None:
    """Tokens/s/GPU against the swept value, MFU on the right axis, the baseline as a dashed line,
    each point labelled with its plan where the plan changes, model and cluster in the title.

    MFU is tokens/s/GPU times a constant for one model and sequence length (6N + attention FLOPs
    per token over the GPU's peak), so it is the right axis of the same line, not a second line
    drawn on top of the first. Needs the optional `plot` extra (matplotlib).
    """
    from .report.terminal import compact_layout

    plt = pyplot(path)
    words = any(isinstance(p.value, str) for p in r.points)
    # Shapes and fabric names are categories: one evenly spaced position each, in given order.
    xs = list(range(len(r.points))) if words else [p.value for p in r.points]
    tokens = [p.best.tokens_per_s_per_gpu for p in r.points]
    base = r.baseline.best
    mfu_per_token = base.mfu / base.tokens_per_s_per_gpu
    fig, ax = plt.subplots(figsize=(8, 4.8))
    line = ax.plot(xs, tokens, marker="o", color="tab:blue", label="best plan: tokens/s/GPU")
    base_line = ax.axhline(
        base.tokens_per_s_per_gpu, color="tab:gray", linestyle="--", linewidth=1.2,
        label=f"baseline (unmodified cluster): {base.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, "
        f"MFU {base.mfu:.1%}",
    )  # fmt: skip
    previous = compact_layout(base)
    for x, y, p in zip(xs, tokens, r.points, strict=True):
        layout = compact_layout(p.best)
        if layout != previous:
            ax.annotate(layout, (x, y), textcoords="offset points", xytext=(4, -12), fontsize=7)
        previous = layout
    ax.set_xlabel(f"{r.parameter}: {PARAMETERS.get(r.parameter, '')}", fontsize=8)
    ax.set_ylabel("tokens/s/GPU")
    right = ax.secondary_yaxis(
        "right", functions=(lambda t: 100 * t * mfu_per_token, lambda m: m / 100 / mfu_per_token)
    )
    right.set_ylabel("MFU %")
    if not words and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [_fmt(p.value) for p in r.points])
    ax.legend(handles=[*line, base_line], loc="best", fontsize=8)
    ax.set_title(
        f"{r.model or 'model'} on {r.cluster} ({r.num_gpus} GPUs): whatif {r.parameter}",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
