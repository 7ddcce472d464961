"""Brute-force oracle: score every legal layout with the cost model and sort.

It stays in the product as the reference the CP-SAT search is tested against (same candidate
table, same objective, same tie-break), and as the engine for small spaces.
"""

from __future__ import annotations

import time
from collections import Counter

from cost_models.errors import NoFeasiblePlan
from cost_models.estimate import estimate
from cost_models.specs import Cluster, Estimate, ModelSpec, Workload

from .candidates import enumerate_layouts, simplicity_rank
from .sat.partition import PartitionSolver, score
from .types import SearchSpace, SolverOptions, SolveStats

TIME_QUANTUM_S = 1e-6  # step times closer than this are ties, broken by simplicity


def rank_key(e: Estimate) -> tuple:
    return (round(e.step_time_s / TIME_QUANTUM_S), simplicity_rank(e.layout))


def usable_memory_gib(cluster: Cluster, space: SearchSpace) -> float:
    return cluster.gpu.hbm_gib * (1 - space.memory_headroom)


def search(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
) -> tuple[list[Estimate], SolveStats, dict[str, int]]:
    """Ranked feasible estimates (best first, top_k), stats, and rejection counts."""
    start = time.perf_counter()
    layouts, rejected = enumerate_layouts(model, cluster, workload, space)
    usable = usable_memory_gib(cluster, space)
    # The stage partition follows the search's own rule (planner/sat/partition.py): the even
    # split where it fits, the CP-SAT split where that differs, the faster of them per layout.
    # Enumerating every composition is left to tests/planner/test_sat_partition.py.
    parts = PartitionSolver(model, cluster, workload, usable)
    feasible: list[Estimate] = []
    smallest: Estimate | None = None
    for layout in layouts:
        e = estimate(model, cluster, workload, layout)
        used = parts.splits(layout, e.peak_memory_gib <= usable) if layout.pp > 1 else []
        if e.peak_memory_gib <= usable and layout.pp == 1:
            used = [None]
        if used:
            feasible.append(e if used == [None] else score(model, cluster, workload, layout, used))
        else:
            rejected["peak memory above usable HBM"] += 1
            if smallest is None or e.peak_memory_gib < smallest.peak_memory_gib:
                smallest = e
    if not feasible:
        raise NoFeasiblePlan(why_none(cluster, space, usable, len(layouts), smallest, rejected))
    feasible.sort(key=rank_key)
    best = feasible[0].step_time_s
    stats = SolveStats(
        engine="exhaustive",
        status="OPTIMAL",
        objective=best,
        best_bound=best,
        gap=0.0,
        wall_time_s=time.perf_counter() - start,
        num_candidates=len(layouts) + _count(rejected),
        num_scored=len(layouts),
        num_feasible=len(feasible),
    )
    return feasible[: options.top_k], stats, dict(rejected)


def _count(rejected: Counter[str]) -> int:
    return sum(v for k, v in rejected.items() if k != "peak memory above usable HBM")


def why_none(
    cluster: Cluster,
    space: SearchSpace,
    usable: float,
    num_legal: int,
    smallest: Estimate | None,
    rejected: Counter[str],
) -> str:
    if smallest is None:
        top = "; ".join(f"{n} x {reason}" for reason, n in rejected.most_common(4))
        return (
            f"no legal layout for {cluster.num_gpus} GPUs: every candidate breaks a rule "
            f"({top or _empty_space_reason(cluster, space)})"
        )
    lo = smallest.layout
    return (
        f"no layout fits in memory: the smallest peak any of {num_legal} legal layouts needs is "
        f"{smallest.peak_memory_gib:.1f} GiB per GPU (tp={lo.tp} pp={lo.pp} dp={lo.dp} cp={lo.cp} "
        f"ep={lo.ep} recompute={lo.recompute} zero={lo.zero_stage} micro_batch={lo.micro_batch}) "
        f"but only {usable:.1f} GiB is usable ({cluster.gpu.hbm_gib:.0f} GiB HBM minus "
        f"{space.memory_headroom:.0%} headroom); use more GPUs, a shorter sequence, or a smaller "
        f"micro-batch"
    )


def _empty_space_reason(cluster: Cluster, space: SearchSpace) -> str:
    """Why no (tp, pp, cp, dp) with tp * pp * cp * dp == num_gpus survives the pins and caps."""
    n = cluster.num_gpus
    pins = {a: getattr(space, a) for a in ("tp", "pp", "cp", "dp") if getattr(space, a)}
    product = 1
    for v in pins.values():
        product *= v
    if pins and n % product:
        named = " x ".join(f"{a} {v}" for a, v in pins.items())
        return f"the pinned degrees ({named} = {product}) do not divide the {n} GPUs"
    return f"the pins and caps leave no tp x pp x cp x dp equal to the {n} GPUs"
