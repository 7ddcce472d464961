"""The placement model's objective and feasibility recomputed from counts alone, without the
solver (cpsat-primer's validation.py): every CP-SAT answer, hint and oracle entry is checked or
priced here, and tests compare the solver's objective with it."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from cost_models import uplink

from .counted import UnitModel
from .units import level_counts, level_cuts


def q_index(um: UnitModel, qs: Sequence[int]) -> int:
    """Index of the steps qs in um.q_grid (mixed radix, the first tier slowest)."""
    out = 0
    for q, top in zip(qs, um.uplink_max, strict=True):
        out = out * (top + 1) + int(q)
    return out


def dp_cost(um: UnitModel, key: tuple[int, ...], qs: Sequence[int]) -> int:
    return um.class_cost[um.dp_class[key]][q_index(um, qs)]


def objective_us(um: UnitModel, counts: list[list[int]], *, full_uplinks: bool = False) -> int:
    """The model's objective for given counts (the oracle and the hint use it); with
    `full_uplinks` every uplink step at its top (solve(full_uplinks=True)'s objective)."""
    ks, balanced, lone = summary(um, counts)
    hs = shard_pieces(um, counts)
    pp_level = next((lv for lv, b in enumerate(balanced) if b), len(um.levels))
    if um.layout.pp == 1:
        pp_level = len(um.levels)
    qs = uplink_qs(um, counts)
    pp_q = q_index(um, pipe_qs(um, counts)) if um.pipe else 0
    if full_uplinks:
        qs, pp_q = um.q_grid[-1], len(um.pp_table[0]) - 1
    return dp_cost(um, dp_choice(um, ks, lone, qs, hs), qs) + um.pp_table[pp_level][pp_q]


def chunk_prefix(um: UnitModel, counts: list[list[int]]) -> list[list[int]]:
    """P[s][k]: units of stage s on the first k leaves of build_map's chunk order."""
    return [
        list(itertools.accumulate((row[j] for j in um.chunk_order), initial=0)) for row in counts
    ]


def shard_pieces(um: UnitModel, counts: list[list[int]]) -> tuple[int, ...]:
    """HSDP: per level, the fewest members a dp_shard x cp group keeps at any stage's cut there
    (tables.shard_cuts at the stage's prefix count; a level without cuts keeps groups whole);
    () without HSDP."""
    if not um.shard_cuts:
        return ()
    prefix = chunk_prefix(um, counts)
    whole = um.shard_cuts[0]
    cuts = [level_cuts(um, lv) for lv in range(len(um.levels))]
    return tuple(
        min((um.shard_cuts[p[k]] for p in prefix for k in at), default=whole) for at in cuts
    )


def pipe_qs(um: UnitModel, counts: list[list[int]]) -> tuple[int, ...]:
    """The pipeline window's step of each uplink tier: in domain d, chunk c of every stage lies
    in d for c in the intersection of the stages' chunk ranges there (build_map), so the PP
    groups inside d are its length I_d, and U x (units in d - pp x I_d) GPUs send upward, plus
    the split blocks spanning d (their TP / CP / EP groups leave it)."""
    pp, u = um.layout.pp, um.unit_gpus
    prefix = chunk_prefix(um, counts)
    out = []
    for t, lv in enumerate(um.uplink_levels):
        ports, split, top = um.uplink_ports[t], um.uplink_split[t], um.uplink_max[t]
        q = 0
        for i, (a, b) in enumerate(um.domain_span[lv]):
            inside = max(0, min(p[b] for p in prefix) - max(p[a] for p in prefix))
            units = sum(p[b] - p[a] for p in prefix)
            leaving = u * (units - pp * inside) + split[i]
            q = max(q, uplink.uplink_step(um.uplink_scale * leaving, ports[i], top))
        out.append(q)
    return tuple(out)


def uplink_qs(um: UnitModel, counts: list[list[int]]) -> tuple[int, ...]:
    """The step of each uplink tier for given counts: per domain of its level, the GPUs whose
    gradient group leaves it (a stage not wholly inside: all its units there; with HSDP those
    whose dp_shard x cp or dp_replicate group leaves, hsdp_kept), plus the parts of split
    blocks spanning it, over the job's GPUs under it, rounded up
    (cost_models.uplink.uplink_step); the busiest domain."""
    out = []
    prefix = chunk_prefix(um, counts)
    for t, lv in enumerate(um.uplink_levels):
        ports, split, top = um.uplink_ports[t], um.uplink_split[t], um.uplink_max[t]
        q = 0
        for i, p in enumerate(ports):
            a, b = um.domain_span[lv][i]
            runs = [(row[a], row[b]) for row in prefix]
            leaving = sum(um.unit_gpus * (hi - lo) - kept_gpus(um, lo, hi) for lo, hi in runs)
            q = max(q, uplink.uplink_step(um.uplink_scale * (leaving + split[i]), p, top))
        out.append(q)
    return tuple(out)


def kept_gpus(um: UnitModel, lo: int, hi: int) -> int:
    """GPUs of a stage's run of units [lo, hi) in one domain (build_map: a domain holds one run
    of each stage's chunks) whose gradient groups all stay inside it: the whole run where it is
    the whole stage, else none; with HSDP hsdp_kept dp indices x tp x cp."""
    lo_ = um.layout
    if lo_.dp_shard is None:
        return um.unit_gpus * (hi - lo) if hi - lo == um.units_per_stage else 0
    a = um.unit_gpus // (lo_.tp * lo_.cp)
    return lo_.tp * lo_.cp * hsdp_kept(a * lo, a * hi, lo_.shard_dp, lo_.replicate_dp)


def hsdp_kept(lo: int, hi: int, s: int, r: int) -> int:
    """HSDP: the dp indices of a run [lo, hi) of a stage's R x S whose dp_shard group (the S
    consecutive indices [m S, (m + 1) S) holding it) and dp_replicate group (j, j + S, ...,
    j + (R - 1) S, j = its index mod S) both lie inside the run: FSDP2's reduce-scatter /
    all-gather and the replicas' all-reduce (cost_models.stage._hsdp_tier_s) then stay in the
    domain. R = 1: the shard group is the stage. R >= 2: replica group j is inside iff
    lo <= j and j + (R - 1) S < hi, i.e. j in J = [lo, min(S, hi - (R - 1) S)) (so lo < S and
    hi > (R - 1) S); for such j, shard block 0 is inside iff lo = 0, blocks 1..R-2 always, block
    R - 1 iff hi = R S. So |J| x (R - 2 + [lo = 0] + [hi = R S])."""
    if r == 1:
        return hi - lo if (lo, hi) == (0, s) else 0
    j = max(0, min(s, hi - (r - 1) * s) - lo)
    return j * (r - 2 + (lo == 0) + (hi == r * s))


def summary(
    um: UnitModel, counts: list[list[int]]
) -> tuple[list[int | None], list[bool], list[int]]:
    """Smallest used piece per level (None: none), balance per level, lone flag per crossing
    level."""
    ks, balanced, lone = [], [], []
    first = len(um.leaf_hosts) - um.split_blocks
    for lv in range(len(um.levels)):
        y = level_counts(um, counts, lv)
        ks.append(min((v for row in y for v in row if v > 0), default=None))
        balanced.append(all(row == y[0] for row in y) and not um.crossing[lv])
        if um.crossing[lv]:
            # some stage's split block has a part in a domain holding none of its whole blocks
            lone.append(
                int(
                    any(
                        counts[s][first + i] and y[s][d] == 0
                        for s in range(len(counts))
                        for i, doms in enumerate(um.split_touch[lv])
                        for d in doms
                    )
                )
            )
    return ks, balanced, lone


def dp_choice(
    um: UnitModel,
    ks: list[int | None],
    lone: list[int],
    qs: Sequence[int] = (),
    hs: Sequence[int] = (),
) -> tuple[int, ...]:
    """The table's key at the smallest pieces, lone flags and (HSDP) shard pieces; a level with
    no whole block in any of its domains (only split blocks) leaves its k free, as in the
    CP-SAT model."""
    # A pod holding only a split block of a stage can make its piece there smaller than at the
    # leaves; the leaf piece is then no larger either (the nesting CP-SAT's table imposes).
    ks = list(ks)
    for lv in range(len(ks) - 2, -1, -1):
        if ks[lv] is not None and ks[lv + 1] is not None:
            ks[lv] = min(ks[lv], ks[lv + 1])
    if None not in ks:
        return (*ks, *lone, *hs)
    want = [*ks, *lone, *hs]
    return min(
        (c for c in um.dp_class if all(k is None or a == k for a, k in zip(c, want, strict=True))),
        key=lambda c: (dp_cost(um, c, qs), c),
    )


def infeasibility(um: UnitModel, counts: list[list[int]]) -> str | None:
    """Why counts are not a placement of the layout (None: they are): every stage has its D
    units, no leaf holds more units than its capacity, counts are non-negative integers."""
    pp, d = um.layout.pp, um.units_per_stage
    if len(counts) != pp or any(len(row) != len(um.capacity) for row in counts):
        return f"counts are not {pp} stages x {len(um.capacity)} leaves"
    for s, row in enumerate(counts):
        if any(not isinstance(v, int) or v < 0 for v in row):
            return f"stage {s}: a count is not a non-negative integer"
        if sum(row) != d:
            return f"stage {s} has {sum(row)} units, needs {d}"
    for j, cap in enumerate(um.capacity):
        used = sum(row[j] for row in counts)
        if used > cap:
            return f"leaf {j} holds {used} units, has room for {cap}"
    return None
