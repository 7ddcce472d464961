"""Plans on a real allocation: shortlist layouts under ideal placement, place each, rank by the
placed step time (issue 17, CONTRACT.md "Placement on an allocation").

For every shortlisted layout three rank -> host maps are priced exactly (pricing.py): the
scheduler's order (hosts as given, the plan's own rank order), the best of the rank orders the
framework launches for the plan on that host order, and CP-SAT's placement (model.py; on 32
leaves or more first without the uplink steps, then exactly; `decompose` adds the pods-first
warm start of decompose.py). The
plan keeps the cheapest, so the placement is never worse than either baseline; which one won is
reported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cost_models import rankmap
from cost_models.errors import InvalidInput
from cost_models.specs import Axis, Cluster, Estimate, Layout, ModelSpec, Workload

from . import model as sat
from . import relax
from .bound import lower_bound_us
from .allocation import Allocation
from .decompose import warm_start
from .pricing import Baselines, baselines, crossings, host_order_map, launchable_orders, price


@dataclass
class Placement:
    """One layout placed on the allocation."""

    ideal: Estimate  # on an ideal, whole-cluster block
    scheduler: Estimate  # hosts in the given order, the plan's rank order
    best_order: Estimate  # hosts in the given order, the best rank order
    placed: Estimate  # the chosen map (the cheapest of the three maps)
    host_of_rank: np.ndarray
    source: str  # "cp-sat", "best_rank_order" or "scheduler_order"
    solver: dict[str, Any]
    crossings: dict[str, dict[str, object]]
    note: str = ""  # why CP-SAT did not run (UNSUPPORTED)
    scheduler_crossings: dict[str, dict[str, object]] | None = None
    workload: Workload | None = None  # the plan's workload the maps were priced with
    # Blocks split over leaves (units.build_shape): the model prices their groups' pieces from
    # below (tables._Spans._split_piece; with HSDP the shard group's part at every crossing
    # level), so its objective, and the status and bound proved about it, is an upper bound
    # of the re-priced map, not the placed step (0: the objective is the re-priced step).
    split_blocks: int = 0


# Shares of the time for the top-level relaxation on large allocations and for re-packing its
# pods (relax.py). 16,384 GPUs in bench/place_scaling.py (2.5 s): the relaxation proved optimal
# at CP-SAT seeds 0-4 with 1.5 s (0.75 deterministic seconds), only at seed 0 with 0.75 s.
TOP_SHARE = 0.6
FILL_SHARE = 0.2

UNSUPPORTED = {
    "status": "UNSUPPORTED",
    "objective": None,
    "best_bound": None,
    "gap": None,
    "wall_time_s": 0.0,
}


def place_layout(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    ideal: Estimate,
    alloc: Allocation,
    *,
    time_limit_s: float = 60.0,
    deterministic: bool = True,
    seed: int = 0,
    decompose: bool = False,
    export_path: str | Path | None = None,
    orders: Sequence[tuple[Axis, ...]] | None = None,
) -> Placement:
    """The cheapest of the scheduler's order, the best rank order and CP-SAT's placement
    (ties: CP-SAT first), over the rank orders the framework launches for this plan (`orders`,
    None: all 24; pricing.launchable_orders). `export_path` writes the exact placement model
    there (model.solve)."""
    layout = ideal.layout
    base = baselines(model, cluster, workload, layout, alloc, orders)
    options: list[tuple[float, int, str, Estimate, np.ndarray | None]] = [
        (base.scheduler.step_time_s, 2, "scheduler_order", base.scheduler, None),
        (base.best_order.step_time_s, 1, "best_rank_order", base.best_order, None),
    ]
    solver = dict(UNSUPPORTED)
    um, note = _counted(model, cluster, workload, layout, alloc, orders)
    if um is not None:
        sol = _solve(
            model,
            cluster,
            workload,
            alloc,
            um,
            _baseline_counts(cluster, alloc, um, base),
            time_limit_s=time_limit_s,
            deterministic=deterministic,
            seed=seed,
            decompose=decompose,
            export_path=export_path,
        )
        placed = price(model, cluster, workload, um.layout, alloc, sol.host_of_rank)
        options.append((placed.step_time_s, 0, "cp-sat", placed, sol.host_of_rank))
        solver = _solver_dict(sol)
    options.sort(key=lambda o: (o[0], o[1]))
    _, _, source, est, hosts = options[0]
    if hosts is None:
        hosts = host_order_map(cluster, est.layout)
    moe = model.moe is not None
    return Placement(
        ideal=ideal,
        scheduler=base.scheduler,
        best_order=base.best_order,
        placed=est,
        host_of_rank=hosts,
        source=source,
        solver=solver,
        crossings=crossings(cluster, alloc, est.layout, hosts, moe=moe),
        note=note,
        scheduler_crossings=crossings(cluster, alloc, layout, host_order_map(cluster, layout)),
        workload=workload,
        split_blocks=um.split_blocks if um is not None else 0,
    )


def _counted(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    alloc: Allocation,
    orders: Sequence[tuple[Axis, ...]] | None,
) -> tuple[sat.UnitModel | None, str]:
    """The placement model of the layout, or None and why CP-SAT cannot place it."""
    if sat.CANONICAL not in launchable_orders(model, layout, orders):
        return None, (
            f"rank order {'-'.join(a.value for a in sat.CANONICAL)}, which the placement "
            "numbers ranks in, is not one the framework launches for this plan"
        )
    try:
        return sat.unit_model(model, cluster, workload, layout, alloc), ""
    except sat.Unplaceable as exc:
        return None, str(exc)


def _solver_dict(sol: sat.Solution) -> dict[str, Any]:
    return {
        "status": sol.status,
        "objective": sol.objective_us / sat.US,
        "best_bound": sol.bound_us / sat.US,
        "gap": sol.gap,
        "wall_time_s": sol.wall_time_s,
    }


def _baseline_counts(
    cluster: Cluster, alloc: Allocation, um: sat.UnitModel, base: Baselines
) -> list[list[list[int]]]:
    """The baselines' maps, re-read as per-leaf counts of the canonical numbering, seed the
    hint where they have that form (one stage per node)."""
    seeds = []
    for e in (base.best_order, base.scheduler):
        stage_major = _renumber(e.layout, um.layout, host_order_map(cluster, e.layout))
        counts = sat.counts_of_map(um, len(alloc.hosts), stage_major)
        if counts is not None:
            seeds.append(counts)
    return seeds


def _solve(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    alloc: Allocation,
    um: sat.UnitModel,
    seeds: list[list[list[int]]],
    *,
    time_limit_s: float,
    deterministic: bool,
    seed: int,
    decompose: bool,
    export_path: str | Path | None,
) -> sat.Solution:
    """CP-SAT in phases: the optional pods-first warm start, on large allocations the top-level
    relaxation (relax.py: a lower bound, and its pods filled into leaves as a hint) and the
    model without the uplink steps, then the exact model, each phase's counts a hint for the
    next; a phase whose hint meets the proven bound ends the search (model.solve)."""
    start = time.perf_counter()
    rest = time_limit_s
    known = 0
    if decompose:
        # Pods first, then leaves per pod (decompose.py): one more hint, half the time.
        packed = warm_start(model, cluster, workload, alloc, um, time_limit_s=rest / 2, seed=seed)
        if packed is not None:
            seeds.append(packed)
            rest /= 2
    many = len(um.leaf_hosts) - um.split_blocks >= sat.LARGE_LEAVES
    if many and len(um.levels) > 1:
        known, spent = _top_phase(um, seeds, rest, seed)
        rest -= spent
    if um.uplink_tiers and many:
        # Large allocations: the model without the uplink steps (every uplink at its full
        # taper) searches far faster; its counts seed the exact model, which reports its own
        # status, bound and gap. The exact model gets a tenth of the time, or half where it is
        # large (at 131,072 GPUs, 16 x 1,087 counts, a quarter of 10 s ended UNKNOWN with no
        # bound). 16,384 GPUs (bench/place_scaling.py, TP8 PP8 DP128 CP2, 2.5 s, CP-SAT seeds
        # 0-4): 6.468-6.610 s placed with 9/10 + 1/10, 6.468-6.811 s with 3/4 + 1/4; seeds 0, 3, 4
        # 6.58-7.40 s with halves; at 97/100 the exact model found no solution of its own.
        large = um.layout.pp * len(um.leaf_hosts) > sat.LARGE_COUNTS
        share = 1 / 2 if large else 9 / 10
        first = sat.solve(
            um,
            time_limit_s=rest * share,
            deterministic=deterministic,
            seed=seed,
            hints=seeds,
            full_uplinks=True,
            known_bound_us=known,
        )
        seeds.append(first.counts)
        proved = first.objective_us <= max(known, lower_bound_us(um))
        if proved and export_path is None:  # optimal: the exact model has nothing to add
            first.status, first.bound_us, first.gap = "OPTIMAL", first.objective_us, 0.0
            first.wall_time_s = time.perf_counter() - start
            return first
        rest *= 1 - share
    before_s = time.perf_counter() - start
    sol = sat.solve(
        um,
        time_limit_s=rest,
        deterministic=deterministic,
        seed=seed,
        hints=seeds,
        export_path=export_path,
        known_bound_us=known,
    )
    sol.wall_time_s += before_s
    return sol


def _top_phase(
    um: sat.UnitModel, seeds: list, time_limit_s: float, seed: int
) -> tuple[int, float]:
    """The top level alone (relax.py), in at most TOP_SHARE of the time, then its pods filled
    into leaves and re-packed pod by pod (FILL_SHARE): returns its bound, which holds for every
    placement the model has, and the time it counts as spent (CP-SAT's deterministic clock,
    so the split does not depend on the machine's load); adds both fills to the hints. In
    bench/place_scaling.py the fill meets the bound at 16,384 and 131,072 GPUs: optimal."""
    top = relax.solve_top(um, time_limit_s=time_limit_s * TOP_SHARE, seed=seed)
    if top is None:
        return 0, 0.0
    spent = top.spent_s
    if top.pods is not None:
        filled = relax.fill_leaves(um, top)
        fill_s = time_limit_s * FILL_SHARE
        seeds += [filled, relax.improve_pods(um, top, filled, time_limit_s=fill_s)]
        spent += fill_s
    return top.bound_us, spent


def export_name(path: str | Path | None, index: int, count: int) -> Path | None:
    """Where the index-th of `count` placements writes its model: `path` itself for one,
    NAME-<index+1>.SUFFIX for several."""
    if path is None:
        return None
    path = Path(path)
    return path if count == 1 else path.with_name(f"{path.stem}-{index + 1}{path.suffix}")


def _renumber(layout: Layout, canonical: Layout, host_of_rank: np.ndarray) -> np.ndarray:
    """The same physical map with ranks numbered in `canonical`'s order (same coordinates)."""
    dims = rankmap.decoder_dims(layout)
    stride = rankmap.strides(dims)
    new_stride = rankmap.strides(rankmap.decoder_dims(canonical))
    r = np.arange(layout.world_size, dtype=np.int64)
    new = sum(((r // stride[a]) % size) * new_stride[a] for a, size in dims)
    out = np.empty_like(host_of_rank)
    out[new] = host_of_rank
    return out


def node_hosts(cluster: Cluster, alloc: Allocation, host_of_rank: np.ndarray) -> list[str]:
    """Hosts in node-rank order (torchrun's --node-rank); each node's ranks on one host."""
    per_node = host_of_rank.reshape(-1, cluster.gpus_per_node)
    if not (per_node == per_node[:, :1]).all():
        raise InvalidInput("placement: a node's ranks landed on two hosts")  # never by design
    return [alloc.hosts[int(h)] for h in per_node[:, 0]]


def rank_hosts(cluster: Cluster, alloc: Allocation, p: Placement) -> list[dict[str, Any]]:
    """Rank -> host and local GPU of a placed map (what `rank_hosts.json` and the JSON hold)."""
    gpn = cluster.gpus_per_node
    return [
        {"rank": r, "host": alloc.hosts[int(h)], "local_gpu": r % gpn}
        for r, h in enumerate(p.host_of_rank.tolist())
    ]


def layout_of(p: Placement) -> Layout:
    return p.placed.layout


@dataclass
class PlacedPlan:
    """plan_on_allocation's answer: `result.ranked` holds the placed estimates, best first."""

    result: Any  # planner.types.PlanResult
    ideal: Any  # the search's PlanResult on an ideal block
    placements: list[Placement]
    allocation: Allocation

    @property
    def best(self) -> Placement:
        return self.placements[0]
