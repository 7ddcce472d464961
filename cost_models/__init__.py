"""Pure cost model: (ModelSpec, Cluster, Workload, Layout) -> Estimate. No I/O, solver or rich."""

from .errors import InvalidInput, NoFeasiblePlan, PlannerError
from .specs import (
    Axis,
    Cluster,
    Estimate,
    GpuSpec,
    Layout,
    LinkTier,
    MLASpec,
    ModelSpec,
    MoESpec,
    StageMemory,
    Workload,
)

__all__ = [
    "Axis",
    "Cluster",
    "Estimate",
    "GpuSpec",
    "InvalidInput",
    "Layout",
    "LinkTier",
    "MLASpec",
    "MoESpec",
    "ModelSpec",
    "NoFeasiblePlan",
    "PlannerError",
    "StageMemory",
    "Workload",
]

from .compute import model_flops_per_token
from .estimate import estimate
from .pricer import Pricer
from .rules import layout_violations

__all__ += ["Pricer", "estimate", "layout_violations", "model_flops_per_token"]
