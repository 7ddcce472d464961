"""Brute-force placement oracle for small allocations (tests only).

`counted_optimum` lists every count matrix (units of each stage per leaf) that fits the leaves,
builds each one's map and prices it exactly (planner/place/pricing.py, not the model's tables).
`host_permutation_optimum` goes further down: every assignment of the stages' units to hosts
(all permutations), so the counting argument itself (nodes under one switch are
interchangeable; equal counts are the best PP matching) is checked too.
"""

from __future__ import annotations

import itertools

import numpy as np

from cost_models.specs import Cluster, ModelSpec, Workload

from .allocation import Allocation
from .model import UnitModel, build_map
from .pricing import price


def _compositions(total: int, caps: list[int]):
    if not caps:
        if total == 0:
            yield ()
        return
    for first in range(min(total, caps[0]) + 1):
        for rest in _compositions(total - first, caps[1:]):
            yield (first, *rest)


def counted_optimum(
    model: ModelSpec, cluster: Cluster, workload: Workload, alloc: Allocation, um: UnitModel
) -> tuple[int, list[list[int]]]:
    """(best step in us, its counts) over every count matrix, priced exactly."""
    best: tuple[int, list[list[int]]] | None = None
    pp, d = um.layout.pp, um.units_per_stage

    def rec(s: int, left: list[int], rows: list[tuple[int, ...]]):
        nonlocal best
        if s == pp:
            counts = [list(r) for r in rows]
            e = price(model, cluster, workload, um.layout, alloc, build_map(um, counts))
            us = round(e.step_time_s * 1e6)
            if best is None or us < best[0]:
                best = (us, counts)
            return
        for row in _compositions(d, left):
            rec(s + 1, [a - b for a, b in zip(left, row, strict=True)], [*rows, row])

    rec(0, list(um.capacity), [])
    assert best is not None
    return best


def host_permutation_optimum(
    model: ModelSpec, cluster: Cluster, workload: Workload, alloc: Allocation, um: UnitModel
) -> int:
    """Best step in us over every assignment of units to hosts (one node per unit only)."""
    assert um.nodes_per_unit == 1
    units = um.layout.pp * um.units_per_stage
    gpn = um.unit_gpus
    best = None
    offsets = np.arange(um.layout.world_size) // gpn
    for hosts in itertools.permutations(range(len(alloc.hosts)), units):
        e = price(model, cluster, workload, um.layout, alloc, np.asarray(hosts)[offsets])
        us = round(e.step_time_s * 1e6)
        best = us if best is None else min(best, us)
    assert best is not None
    return best
