"""`planner whatif`: vary one network parameter, re-plan at each value, compare with the baseline.

Each value builds a modified Cluster (`vary_cluster`) and runs the same `plan()` on it, so the best
layout and placement may change from value to value. Nothing here prints (cli.py renders).
Cost: `gpu_hour_price` is the price of one GPU-hour without the network; `network_cost_share` is
the network's share of the all-in cluster cost, so one all-in GPU-hour costs
price / (1 - share). The share is held fixed across values (a faster NIC's own price is not
modelled). docs/networks.md#whatif.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

import models_zoo
from cost_models.calibration import (
    GenerationCalibration,
    calibration_for_cluster,
    overlap_slowdown_s,
)
from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import Cluster, Estimate, LinkTier

from . import api

PARAMETERS = {
    "nic-gbps": "scale-out bandwidth per GPU, Gb/s (every switch/rail/plane/dragonfly tier)",
    "nvlink-domain": "GPUs per NVLink domain (8, 72, 576)",
    "oversubscription": "taper of the tiers above the leaf (1 = 1:1, 4 = 4:1)",
    "wan-latency-ms": "one-way latency of the WAN tier, ms",
    "wan-gbps": "WAN bandwidth per GPU, Gb/s",
    "planes": "rails / planes of the rail-optimized or multi-plane tiers",
}
SCALE_OUT_KINDS = ("switch", "rail", "plane", "dragonfly")
EXPOSED_FRACTION = 0.01
"""A comm term counts as exposed while it is more than 1% of the step time."""
COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm")


def _set(tier: LinkTier, **update: Any) -> LinkTier:
    return LinkTier.model_validate({**tier.model_dump(), **update})


def _need(tiers: list[int], cluster: Cluster, what: str, parameter: str) -> None:
    if not tiers:
        raise InvalidInput(f"--vary {parameter}: cluster {cluster.name} has no {what}")


def vary_cluster(cluster: Cluster, parameter: str, value: float) -> Cluster:
    """The cluster with one network parameter set to `value` (InvalidInput if it does not apply
    or the value breaks a LinkTier / Cluster bound, e.g. a bandwidth above its limit)."""
    try:
        return _vary_cluster(cluster, parameter, value)
    except ValidationError as err:
        where = f"--values: {parameter} {value:g} on cluster {cluster.name}"
        raise InvalidInput(describe_validation_error(err, where)) from None


def _vary_cluster(cluster: Cluster, parameter: str, value: float) -> Cluster:
    if parameter not in PARAMETERS:
        raise InvalidInput(
            f"--vary: unknown parameter {parameter!r}; known: {', '.join(PARAMETERS)}"
        )
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
        hit = scale_out[1:]  # the leaf itself is non-blocking; the taper sits above it
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
    value: float
    best: Estimate
    change: float = field(metadata={"doc": "tokens/s/GPU relative to the baseline, minus 1"})
    cost_per_m_tokens: float | None = None
    train_days: float | None = None
    train_cost: float | None = None


@dataclass(frozen=True)
class WhatIfResult:
    parameter: str
    cluster: str
    num_gpus: int
    baseline: WhatIfPoint
    points: tuple[WhatIfPoint, ...]
    hidden_from: dict[str, float | None]
    """comm term -> first swept value from which it stays <= 1% of the step (None: never)."""


def _costs(
    e: Estimate, num_gpus: int, price: float | None, share: float, budget: float | None
) -> tuple[float | None, float | None, float | None]:
    if price is None:
        return None, None, None
    all_in = price / (1 - share)
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


def hidden_from(points: list[WhatIfPoint], cal: GenerationCalibration) -> dict[str, float | None]:
    """For each comm term exposed at the first value: the value from which it stays hidden."""
    ordered = sorted(points, key=lambda p: p.value)
    out: dict[str, float | None] = {}
    for term in COMM_TERMS:
        exposed = [
            exposed_wire_s(p.best, term, cal) > EXPOSED_FRACTION * p.best.step_time_s
            for p in ordered
        ]
        if not exposed or not exposed[0]:
            continue
        last = max(i for i, x in enumerate(exposed) if x)
        out[term] = ordered[last + 1].value if last + 1 < len(ordered) else None
    return out


def whatif(
    model: str,
    cluster: str | Cluster,
    parameter: str,
    values: list[float],
    *,
    num_gpus: int | None = None,
    gpu_hour_price: float | None = None,
    network_cost_share: float = 0.0,
    token_budget: float | None = None,
    **plan_args: Any,
) -> WhatIfResult:
    """Re-plan at every value of `parameter`; raises InvalidInput / NoFeasiblePlan like plan()."""
    if not values:
        raise InvalidInput("--values: give at least one value")
    if not 0 <= network_cost_share < 1:
        raise InvalidInput(f"--network-cost-share: must be in [0, 1) (got {network_cost_share})")
    base_cluster = models_zoo.load_cluster(cluster, num_gpus)
    spec = models_zoo.load_model(model)
    varied = [vary_cluster(base_cluster, parameter, v) for v in values]  # bad input fails first
    base = api.plan(spec, base_cluster, **plan_args).best

    def point(e: Estimate, value: float) -> WhatIfPoint:
        costs = _costs(e, base_cluster.num_gpus, gpu_hour_price, network_cost_share, token_budget)
        change = e.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu - 1
        return WhatIfPoint(value, e, change, *costs)

    points = [
        point(api.plan(spec, c, **plan_args).best, v) for c, v in zip(varied, values, strict=True)
    ]
    return WhatIfResult(
        parameter=parameter,
        cluster=base_cluster.name,
        num_gpus=base_cluster.num_gpus,
        baseline=point(base, math.nan),
        points=tuple(points),
        hidden_from=hidden_from(points, calibration_for_cluster(base_cluster)),
    )


def _point_dict(p: WhatIfPoint) -> dict[str, Any]:
    from .report import plan_dict

    return {
        "value": None if math.isnan(p.value) else p.value,
        "plan": plan_dict(p.best),
        "tokens_per_s_per_gpu": p.best.tokens_per_s_per_gpu,
        "mfu": p.best.mfu,
        "step_time_s": p.best.step_time_s,
        "breakdown_s": p.best.breakdown_s,
        "change_vs_baseline": p.change,
        "cost_per_m_tokens": p.cost_per_m_tokens,
        "train_days": p.train_days,
        "train_cost": p.train_cost,
    }


def result_dict(r: WhatIfResult) -> dict[str, Any]:
    """JSON-ready form of a WhatIfResult."""
    return {
        "parameter": r.parameter,
        "cluster": r.cluster,
        "num_gpus": r.num_gpus,
        "baseline": _point_dict(r.baseline),
        "points": [_point_dict(p) for p in r.points],
        "hidden_from": r.hidden_from,
    }


def short_layout(e: Estimate) -> str:
    lay = e.layout
    parts = [f"TP{lay.tp}", f"PP{lay.pp}", f"DP{lay.dp}"]
    parts += [f"CP{lay.cp}"] * (lay.cp > 1) + [f"EP{lay.ep}"] * (lay.ep > 1)
    parts += [f"VP{lay.vp}"] * (lay.vp > 1)
    order = "/".join(a.value for a in lay.order)
    return f"{' '.join(parts)} mb{lay.micro_batch} {lay.recompute} z{lay.zero_stage} ({order})"


def pyplot(path: str) -> Any:
    """matplotlib.pyplot (Agg), or InvalidInput if the extra is missing or the suffix is wrong."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidInput(
            "--plot: matplotlib is not installed (pip install 'planner[plot]')"
        ) from None
    if not path.lower().endswith((".png", ".svg")):
        raise InvalidInput(f"--plot: file must end in .png or .svg (got {path!r})")
    return plt


def save_plot(r: WhatIfResult, path: str) -> None:
    """Tokens/s/GPU and MFU against the swept value; needs the optional `plot` extra."""
    plt = pyplot(path)
    xs = [p.value for p in r.points]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [p.best.tokens_per_s_per_gpu for p in r.points], marker="o")
    ax.set_xlabel(r.parameter)
    ax.set_ylabel("tokens/s/GPU")
    ax2 = ax.twinx()
    ax2.plot(xs, [100 * p.best.mfu for p in r.points], marker="s", color="tab:orange")
    ax2.set_ylabel("MFU %")
    ax.set_title(f"{r.cluster} ({r.num_gpus} GPUs)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
