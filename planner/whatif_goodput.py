"""`planner whatif --vary mtbf|storage-gb-per-s|spares`: what reliability investments are worth.

Each value changes one goodput input (cost_models.goodput.Reliability) and re-plans by goodput
(`--objective goodput`), so the plan may change with it (a faster store makes a larger
checkpoint shard affordable). Each point is priced on goodput tokens: $ per million tokens
kept = the all-in GPU-hour price / (goodput tokens/s/GPU x 3,600) x 1e6, where goodput per GPU
already counts hot spares among the GPUs paid for. Nothing here prints (cli.py renders).
"""

from __future__ import annotations

import math
from typing import Any

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.goodput import Goodput, Reliability
from cost_models.params import total_params
from cost_models.specs import ModelSpec

from . import api
from .convenience import plan_inputs
from .whatif import WhatIfPoint, WhatIfResult, _costs

PARAMETERS = {
    "mtbf": "multiple of every component's mean time between failures (1: the defaults or "
    "--reliability; 2: half the interruptions)",
    "storage-gb-per-s": "aggregate checkpoint storage bandwidth, GB/s",
    "spares": "hot spare nodes held beside the job",
}


def vary_reliability(rel: Reliability, parameter: str, value: float) -> Reliability:
    """`rel` with one input set to `value` (InvalidInput naming the value if it breaks a bound)."""
    field = {"mtbf": "mtbf_scale", "storage-gb-per-s": "storage_gb_per_s",
             "spares": "spare_nodes"}.get(parameter)
    if field is None:
        raise InvalidInput(f"--vary {parameter}: not a reliability parameter ({', '.join(PARAMETERS)})")
    if field == "spare_nodes":
        if value != int(value) or value < 0:
            raise InvalidInput(f"--values: spares must be whole numbers >= 0 (got {value:g})")
        value = int(value)
    elif not value > 0 or not math.isfinite(value):
        raise InvalidInput(f"--values: {parameter} must be a finite number > 0 (got {value:g})")
    return Reliability.model_validate({**rel.model_dump(), field: value})


def whatif_reliability(
    model: str | ModelSpec,
    cluster: str,
    parameter: str,
    values: list[float],
    *,
    reliability: Reliability | None = None,
    num_gpus: int | None = None,
    gpu_hour_price: float | None = None,
    network_cost_share: float = 0.0,
    token_budget: float | None = None,
    **plan_args: Any,
) -> WhatIfResult:
    """Re-plan by goodput at every value; the baseline is `reliability` (or the defaults)."""
    if not values:
        raise InvalidInput("--values: give at least one value")
    if not 0 <= network_cost_share < 1:
        raise InvalidInput(f"--network-cost-share: must be in [0, 1) (got {network_cost_share})")
    base_rel = reliability or Reliability()
    rels = [vary_reliability(base_rel, parameter, float(v)) for v in values]  # bad input first
    spec = models_zoo.load_model(model)
    sized = models_zoo.load_cluster(cluster, num_gpus)
    inputs = plan_inputs(spec, sized, objective="goodput", **plan_args)

    stopped: list[bool] = []  # per search, baseline first: cut by the time limit (STOPPED)

    def point(rel: Reliability, value: float, base: Goodput | None) -> WhatIfPoint:
        r = api.plan(spec, sized, inputs.workload, inputs.space, inputs.options, rel)
        stopped.append(r.solver.status == "STOPPED")
        e, g = r.ranked[0], r.goodput[0]
        kept = e.model_copy(update={"tokens_per_s_per_gpu": g.goodput_tokens_per_s_per_gpu})
        paid = sized.num_gpus + g.spare_gpus
        costs = _costs(kept, paid, gpu_hour_price, network_cost_share, token_budget)
        ref = g if base is None else base
        change = g.goodput_tokens_per_s_per_gpu / ref.goodput_tokens_per_s_per_gpu - 1
        return WhatIfPoint(value, e, change, *costs, goodput=g)

    baseline = point(base_rel, math.nan, None)
    assert baseline.goodput is not None
    points = tuple(point(r, v, baseline.goodput) for r, v in zip(rels, values, strict=True))
    return WhatIfResult(
        parameter=parameter,
        cluster=sized.name,
        num_gpus=sized.num_gpus,
        baseline=baseline,
        points=points,
        hidden_from={},
        stopped=tuple(stopped),  # the conclusions name a cut search (issue 28 fuzz, seed 409)
        model=spec.name,
        params={
            "params_total": total_params(spec),
            "params_active": total_params(spec, active_only=True),
        },
        hbm_gib=sized.gpu.hbm_gib,
        tier_names=tuple(t.name for t in sized.tiers),
    )
