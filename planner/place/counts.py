"""Heuristic count matrices (units of each stage per leaf) for the placement model's hint and
as baselines of its quality: the scheduler's order packed stage by stage, a best-fit packing,
and, with split blocks, whole blocks in the scheduler's order plus the split blocks matched to
stages (planner/place/model.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .units import Shape, level_counts


def greedy_counts(shape: Shape) -> list[list[int]]:
    """The scheduler's order packed into leaves: stage 0 first, leaves in first-appearance
    order (the hint, and the hint-quality baseline)."""
    needs = [shape.units_per_stage] * shape.layout.pp
    return _pack_in_order(list(shape.capacity), needs, len(shape.capacity))


def _pack_in_order(left: list[int], needs: list[int], width: int) -> list[list[int]]:
    """counts[stage][leaf]: each stage's `needs` units in turn into the first leaves of `left`
    (free units per leaf, consumed) that have room, in the scheduler's leaf order."""
    counts = [[0] * width for _ in needs]
    leaf = 0
    for s, need in enumerate(needs):
        while need:
            while left[leaf] == 0:
                leaf += 1
            take = min(need, left[leaf])
            counts[s][leaf] += take
            left[leaf] -= take
            need -= take
    return counts


def host_order_counts(shape: Shape) -> list[list[int]]:
    """Whole blocks stage by stage along the scheduler's leaf order, each stage leaving room
    for its share of the split blocks; then the split blocks matched to stages that hold whole
    blocks in every domain the block spans at the highest level split blocks span (no lone
    part there; augmenting paths), the rest where room is left. A third hint, for allocations
    with split blocks."""
    pp, d = shape.layout.pp, shape.units_per_stage
    first = len(shape.leaf_hosts) - shape.split_blocks
    share = [shape.split_blocks // pp + (s < shape.split_blocks % pp) for s in range(pp)]
    counts = _pack_in_order(
        list(shape.capacity[:first]), [d - share[s] for s in range(pp)], len(shape.leaf_hosts)
    )
    ys = [level_counts(shape, counts, lv) for lv in range(len(shape.levels))]
    # The highest level that split blocks span (the slowest uplinks): no lone part there.
    top = [max((lv for lv in range(len(shape.levels)) if shape.crossing[lv]), default=0)]
    fits = [
        [
            s
            for s in range(pp)
            if all(ys[lv][s][dm] > 0 for lv in top for dm in shape.split_touch[lv][i])
        ]
        for i in range(shape.split_blocks)
    ]
    owner: list[int | None] = [None] * shape.split_blocks
    held: list[list[int]] = [[] for _ in range(pp)]

    def augment(i: int, seen: set[int]) -> bool:
        for s in fits[i]:
            if s in seen:
                continue
            seen.add(s)
            if len(held[s]) < share[s]:
                held[s].append(i)
                owner[i] = s
                return True
            for j in held[s]:
                if augment(j, seen):
                    held[s].remove(j)
                    held[s].append(i)
                    owner[i] = s
                    return True
        return False

    for i in range(shape.split_blocks):
        augment(i, set())
    for i in range(shape.split_blocks):
        if owner[i] is None:
            s = next(s for s in range(pp) if len(held[s]) < share[s])
            held[s].append(i)
            owner[i] = s
        counts[owner[i]][first + i] = 1
    return counts


def best_fit_counts(shape: Shape) -> list[list[int]]:
    """Stage by stage, the top-level domain (pod) that holds the whole stage most tightly (else
    the emptiest), and inside it the leaf that holds the rest most tightly (else the emptiest):
    large DP pieces, a second hint."""
    left = list(shape.capacity)
    counts = [[0] * len(left) for _ in range(shape.layout.pp)]
    inside = {j for dom in shape.levels[-1] for j in dom}
    tops = shape.levels[-1] + [[j] for j in range(len(left)) if j not in inside]
    for s in range(shape.layout.pp):
        need = shape.units_per_stage
        while need:
            free = [sum(left[j] for j in dom) for dom in tops]
            top = best_fit(range(len(tops)), free, need)
            while need and any(left[j] for j in tops[top]):
                j = best_fit(tops[top], left, need)
                take = min(need, left[j])
                counts[s][j] += take
                left[j] -= take
                need -= take
    return counts


def best_fit(places: Iterable[int], room: Sequence[int], need: int) -> int:
    """Of `places` (indices into `room`), the one that holds `need` most tightly, else the one
    with the most room; ties go to the lowest index. The packing rule of every best-fit hint
    (best_fit_counts, decompose.pack_into_leaves, relax's rounding)."""
    places = list(places)
    fits = [j for j in places if room[j] >= need]
    if fits:
        return min(fits, key=lambda j: (room[j], j))
    return max(places, key=lambda j: (room[j], -j))
