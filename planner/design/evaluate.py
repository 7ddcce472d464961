"""One design point: the best plan of one workload on one design's cluster. Points are plain
JSON data (the cluster and the model inline, the search options), so any backend can ship them
and a disk cache can key them by their content (planner/design/backends.py); `evaluate_point`
is the module-level function the backends map. Nothing here prints.
"""

from __future__ import annotations

import json
from typing import Any

from cost_models.errors import NoFeasiblePlan
from cost_models.specs import Cluster, Estimate, ModelSpec

from ..convenience import plan_for

SEARCH = {"top_k": 1, "simplicity_tolerance": 0.0, "time_limit_s": 60.0}
"""Each point needs only the fastest plan: no simpler plan within 1 % recommended instead (plan's
default), so a design's throughput is the search's proved optimum and never falls when a
bandwidth rises (the pruning in search.py relies on it); the search's own time limit."""


def make_point(cluster: Cluster, model: ModelSpec, workload: dict[str, Any]) -> dict[str, Any]:
    """A point: JSON data only (picklable, hashable as canonical JSON)."""
    return {
        "cluster": cluster.model_dump(mode="json"),
        "model": model.model_dump(mode="json"),
        "workload": {k: v for k, v in workload.items() if k != "model"},
        "search": dict(SEARCH),
    }


def point_key(point: dict[str, Any]) -> str:
    """The point's content as canonical JSON (the cache hashes it with a salt of the code:
    planner/design/cache.py)."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def evaluate_point(point: dict[str, Any]) -> dict[str, Any]:
    """{"estimate": the best plan's Estimate as JSON, "solver": its certificate} or, when no
    layout fits, {"error": the reason, "reasons": [...]}; bad input raises (InvalidInput)."""
    cluster = Cluster.model_validate(point["cluster"])
    model = ModelSpec.model_validate(point["model"])
    w = point["workload"]
    try:
        result = plan_for(
            model,
            cluster,
            global_batch=w["global_batch"],
            seq_len=w["seq_len"],
            precision=w["precision"],
            moe_dispatcher=w["moe_dispatcher"],
            **point["search"],
        )
    except NoFeasiblePlan as err:
        return {"error": str(err), "reasons": list(err.reasons)}
    return {
        "estimate": result.best.model_dump(mode="json"),
        "solver": result.solver.model_dump(mode="json"),
    }


def estimate_of(result: dict[str, Any]) -> Estimate | None:
    """The Estimate a point's result carries (None for an infeasible point)."""
    return None if "estimate" not in result else Estimate.model_validate(result["estimate"])
