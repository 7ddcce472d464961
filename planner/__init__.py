"""planner: find the parallel layout and placement with the most training throughput.

Library use: ``planner.plan(model, cluster, workload, space, options)`` (typed inputs) returns a
PlanResult (never prints); ``planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64,
global_batch=128)`` builds those inputs from names and keywords. ``planner.estimate`` /
``planner.estimate_for`` score one given layout.
"""

__version__ = "0.1.0"
DISTRIBUTION = "planner-placement"
"""The name pip knows this project by (pyproject.toml); "planner" on the index is another one."""

from cost_models.errors import InvalidInput, NoFeasiblePlan, PlannerError
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from .api import estimate, make_workload, plan, plan_on_allocation
from .convenience import estimate_for, plan_for, plan_on_allocation_for, search_inputs
from .types import PlanResult, SearchSpace, SolverOptions, SolveStats

__all__ = [
    "DISTRIBUTION",
    "Cluster",
    "Estimate",
    "InvalidInput",
    "Layout",
    "ModelSpec",
    "NoFeasiblePlan",
    "PlanResult",
    "PlannerError",
    "SearchSpace",
    "SolveStats",
    "SolverOptions",
    "Workload",
    "__version__",
    "estimate",
    "estimate_for",
    "make_workload",
    "plan",
    "plan_for",
    "plan_on_allocation",
    "plan_on_allocation_for",
    "search_inputs",
]
