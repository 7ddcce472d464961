"""Pods first, then leaves per pod: a warm start for the placement model on large allocations
(issue 17 point 2).

The full model (planner/place/model.py) counts units of every stage under every leaf: at
131,072 GPUs that is 16 stages x 741 leaves, and CP-SAT spends its time limit near its hint.
The pod-level problem is small. It is the same model on a coarse allocation whose lower switch
levels are merged into the pods (every tier below the pods' takes the pods as its domains), so
CP-SAT solves it in a fraction of a second: which stage puts how many units in which pod,
priced with the pod uplinks exactly and the leaf terms at their pod-level value. Inside each
pod the stage's units are then packed into leaves best-fit (the leaf that holds the rest most
tightly, else the fullest): large DP pieces per leaf, few leaves split.

The counts this gives are one more hint for the full model: the full model is still solved
whole, so its status, bound and gap stay CP-SAT's own (a restriction to the pod counts would
lose the bound: a solution inside it proves nothing about the rest), and the placement is never
worse than the hint, nor than the baselines joint.py keeps beside it.
"""

from __future__ import annotations

import numpy as np

from cost_models.specs import Cluster, ModelSpec, Workload

from . import model as sat
from .allocation import Allocation
from .counts import best_fit

MIN_LEAVES = 32  # below this the full model needs no warm start (1,024 GPUs: 6 leaves)


def coarse_allocation(alloc: Allocation, um: sat.UnitModel) -> tuple[Allocation, np.ndarray] | None:
    """The allocation with every tier below the top model level's taking its domains, on the
    hosts the full model's units can use (each leaf's whole blocks and the split blocks), so a
    pod holds as many units as its leaves do; and the full allocation's index of each of its
    hosts. None when the model has a single level: nothing to merge."""
    if len(um.levels) < 2:
        return None
    top = len(um.levels) - 1
    top_tier = min(t for t, lv in enumerate(um.level_of_tier) if lv == top)
    b = um.nodes_per_unit
    first = len(um.leaf_hosts) - um.split_blocks
    keep = sorted(
        {h for j in range(first) for h in um.leaf_hosts[j][: um.capacity[j] * b]}
        | {h for hs in um.leaf_hosts[first:] for h in hs}
    )
    index = np.asarray(keep, dtype=np.int64)
    domains = [d[index] for d in alloc.domains]
    for t, lv in enumerate(um.level_of_tier):
        if lv is not None and lv < top:
            domains[t] = alloc.domains[top_tier][index]
    coarse = Allocation(
        hosts=[alloc.hosts[i] for i in keep],
        excluded=alloc.excluded,
        domains=domains,
        names=alloc.names,
        level_tiers=alloc.level_tiers,
        topology=alloc.topology,
    )
    return coarse, index


def pod_first_counts(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    alloc: Allocation,
    um: sat.UnitModel,
    *,
    time_limit_s: float,
    seed: int = 0,
) -> list[list[int]] | None:
    """Counts for the full model from the pod-level optimum packed into leaves (None where the
    allocation is small or has no pod level, or the pod-level model does not place)."""
    if len(um.leaf_hosts) - um.split_blocks < MIN_LEAVES:
        return None
    found = coarse_allocation(alloc, um)
    if found is None:
        return None
    coarse, index = found
    try:
        cm = sat.unit_model(model, cluster, workload, um.layout, coarse)
    except sat.Unplaceable:
        return None
    sol = sat.solve(cm, time_limit_s=time_limit_s, seed=seed)
    pods = _pod_of_host(um, len(alloc.hosts))[index]  # per host of the coarse allocation
    return pack_into_leaves(um, pods, cm, sol.counts)


def warm_start(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    alloc: Allocation,
    um: sat.UnitModel,
    *,
    time_limit_s: float,
    seed: int = 0,
) -> list[list[int]] | None:
    """Pods first (pod_first_counts, a quarter of the time), then leaves per pod: the full
    model restricted to the packed counts' units per pod (the rest of the time), whose leaf
    counts CP-SAT improves inside every pod at once. Returns counts for the full model's hint."""
    packed = pod_first_counts(
        model, cluster, workload, alloc, um, time_limit_s=time_limit_s / 4, seed=seed
    )
    if packed is None:
        return None
    top = sat.level_counts(um, packed, len(um.levels) - 1)
    sol = sat.solve(um, time_limit_s=time_limit_s * 3 / 4, seed=seed, hints=[packed], fixed_top=top)
    return sol.counts


def _pod_of_host(um: sat.UnitModel, hosts: int) -> np.ndarray:
    """Top-level domain index (um.levels[-1]) of every host of a real leaf (-1: none)."""
    out = np.full(hosts, -1, dtype=np.int64)
    first = len(um.leaf_hosts) - um.split_blocks
    for p, dom in enumerate(um.levels[-1]):
        for leaf in dom:
            if leaf < first:
                out[um.leaf_hosts[leaf]] = p
    return out


def pack_into_leaves(
    um: sat.UnitModel, pod_of_host: np.ndarray, cm: sat.UnitModel, coarse: list[list[int]]
) -> list[list[int]]:
    """Per stage, the units the coarse counts put in each pod, best-fit into that pod's leaves
    (a coarse block spanning pods counts for the pod of its first host); what the pods' leaves
    cannot hold (their whole-block capacity is below the pod's) goes best-fit anywhere, split
    blocks last."""
    pp, d = um.layout.pp, um.units_per_stage
    pods = len(um.levels[-1])
    want = [[0] * pods for _ in range(pp)]
    for s in range(pp):
        for i, n in enumerate(coarse[s]):
            if n:
                want[s][int(pod_of_host[cm.leaf_hosts[i][0]])] += n
    left = list(um.capacity)
    counts = [[0] * len(left) for _ in range(pp)]
    first = len(um.leaf_hosts) - um.split_blocks
    # The split stages' smallest pieces first (the smallest piece sets the DP span), then
    # larger ones: a piece that finds its pod full goes elsewhere whole.
    order = list(range(pp))
    pieces = sorted(
        ((want[s][p], s, p) for s in range(pp) for p in range(pods) if want[s][p]),
        key=lambda x: (x[0] == d, x[0], x[1], x[2]),
    )
    for n, s, p in pieces:
        if True:
            need = min(n, d - sum(counts[s]))
            leaves = um.levels[-1][p]  # its leaves and the split blocks inside it
            while need and any(left[j] for j in leaves):
                j = best_fit(leaves, left, need)
                take = min(need, left[j])
                counts[s][j] += take
                left[j] -= take
                need -= take
    for s in order:  # the rest: whole leaves anywhere, then the split blocks
        need = d - sum(counts[s])
        pool = [j for j in range(first) if left[j]] or []
        while need and pool:
            j = best_fit(pool, left, need)
            take = min(need, left[j])
            counts[s][j] += take
            left[j] -= take
            need -= take
            pool = [j for j in pool if left[j]]
        for j in range(first, len(left)):
            if need and left[j]:
                counts[s][j] += 1
                left[j] -= 1
                need -= 1
    return counts
