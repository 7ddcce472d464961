"""A lower bound on the placement model's objective that counting proves (issue 27): every count
matrix the model accepts costs at least `lower_bound_us(um)`.

CP-SAT's own bound on the large models is the tables' cheapest entries (uplink steps 0, pieces
as large as a domain holds, no lone split-block part), which no map that uses the whole
allocation reaches. Here the summary every objective is looked up with (evaluate.objective_us:
the smallest piece k_L per level, the lone flags, the lowest balanced level and the uplink steps
of both windows) is confined by what the capacities force, and the bound is the cheapest table
entry inside those limits.

Proof. Let x be any counts the model accepts (evaluate.infeasibility is None): every stage has
D units and leaf j holds at most capacity[j]. Let slack = sum(capacity) - pp x D. A domain i of
level L (its leaves and the split blocks inside it, capacity c_i) then holds n_i units with
lo_i = max(0, c_i - slack) <= n_i <= hi_i = min(c_i, pp x D), since the other domains hold at
most sum(capacity) - c_i.

1. Pieces. A domain with lo_i >= 1 ("forced") is used; its n_i units are pieces of at least
   ceil(n_i / D) stages (a piece is at most D), so its smallest piece is at most
   floor(n_i / ceil(n_i / D)) <= kmax_i, the largest of those over lo_i..hi_i. The smallest
   used piece k_L of x is at most every forced domain's smallest piece, so k_L <= kmax_L = the
   least kmax_i over forced domains, and evaluate.dp_choice only lowers k_L (nesting
   k_L = min(k_L, k_L+1)). Balanced at level L (every stage the same count y_i in every domain,
   no split block across L) puts pp x y_i units in domain i, so y_i <= c_i // pp and the
   pieces of forced domains at L and every level above (unions of L's domains) are at most
   min(D, c_i // pp).
2. Lone parts. Split blocks exist only where the capacity is exactly the need (units.build_shape
   makes just enough), so slack = 0 and every split block is used. A split block that spans a
   domain with capacity 0 has a part where its stage holds no whole block: that level's lone
   flag is 1 for every x.
3. Uplink steps. In domain i the gradient window's senders are U x (n_i - D x f_i) + split GPUs,
   f_i <= min(pp, n_i // D) stages wholly inside (evaluate.uplink_qs); the pipeline window's
   are U x (n_i - pp x I_i) + split GPUs, I_i <= min(D, n_i // pp) PP groups inside
   (evaluate.pipe_qs). Over lo_i..hi_i the least of n - D x min(pp, n // D) is 0 if a multiple
   of D lies in the range, else lo_i mod D (the same with pp for the pipeline window). With
   HSDP a stage's partial run of m units there (0 < m < D, m a dp indices) keeps
   evaluate.hsdp_kept of them and sends at least min(m a, S) dp indices (tp x cp GPUs each):
   (R - 1)^2 S - (R - 2) m a >= S where m a > (R - 1) S, all of them below (checked
   exhaustively for R, S <= 5 in the tests); summed over the partial stages, whose units are
   at least that least rest, the gradient window sends at least tp cp min(a rest, S);
   cost_models.uplink.uplink_step grows with the senders, and a tier's step is its busiest
   domain's, so q_t >= q_lb_t = the largest of the domains' least steps.
4. Balance. Balanced at L needs no split block across L, and y_i <= min(D, c_i // pp) with
   sum y_i = D, and sum_i (c_i - pp x y_i) = slack, so it is possible only where
   sum_i min(D, c_i // pp) >= D and sum_i (c_i - pp x min(D, c_i // pp)) <= slack.
5. The objective is dp_cost(key, q) + pp_table[level][p]; both tables never fall as a step
   grows (tables.q_monotone, checked when the model is built), so it is at least the entry at
   q_lb and p_lb. x's key satisfies 1 and 2 for its lowest balanced level, which satisfies 4
   (or is "none"), so the objective is at least the least such entry: the bound.
Nothing here uses the DP table's monotony in the pieces (every key within the limits is
listed), so the bound holds where dp_monotone fails too. With HSDP the key also holds the shard
pieces h_L (tables.shard_cuts); they are left free, every value the table lists. It bounds the model's objective,
which is the re-priced step of the counts' map where no block is split and at least it where
some are (model.py); tests check it against CP-SAT's proven optima and brute force.
"""

from __future__ import annotations

from dataclasses import dataclass

from cost_models import uplink

from .counted import UnitModel
from .evaluate import q_index


@dataclass
class Limits:
    """What every count matrix's summary must satisfy (the proof's steps 1-4)."""

    slack: int
    kmax: list[int | None]  # per level (None: no forced domain, any piece)
    kmax_balanced: list[int | None]  # per level, when the PP groups are balanced at or below it
    lone_forced: list[int]  # per crossing level, in order
    q_lb: tuple[int, ...]  # the gradient window's least step per uplink tier
    pq_lb: tuple[int, ...]  # the pipeline window's
    balance_ok: list[bool]  # per level


def _caps(um: UnitModel, lv: int) -> list[int]:
    return [sum(um.capacity[j] for j in dom) for dom in um.levels[lv]]


def _range(um: UnitModel, cap: int, slack: int) -> tuple[int, int]:
    return max(0, cap - slack), min(cap, um.layout.pp * um.units_per_stage)


def _kmax(um: UnitModel, caps: list[int], slack: int, per_stage: bool) -> int | None:
    """The proof's step 1: the least, over forced domains, of the largest smallest piece."""
    d, pp, out = um.units_per_stage, um.layout.pp, None
    for cap in caps:
        lo, hi = _range(um, cap, slack)
        if lo < 1:
            continue
        if per_stage:  # balanced: pp equal pieces of y <= min(D, cap // pp)
            best = min(d, cap // pp)
        else:
            best = max(n // -(-n // d) for n in range(lo, hi + 1))
        out = best if out is None else min(out, best)
    return out


def _least_rest(lo: int, hi: int, block: int, most: int) -> int:
    """The least n - block x min(most, n // block) over lo..hi (the proof's step 3)."""
    if hi // block * block >= lo and hi // block <= most:
        return 0
    return min(n - block * min(most, n // block) for n in (lo, hi))


def _step_lb(um: UnitModel, slack: int, pipeline: bool) -> tuple[int, ...]:
    d, pp, u = um.units_per_stage, um.layout.pp, um.unit_gpus
    out = []
    for t, lv in enumerate(um.uplink_levels):
        q = 0
        for i, cap in enumerate(_caps(um, lv)):
            lo, hi = _range(um, cap, slack)
            rest = _least_rest(lo, hi, pp, d) if pipeline else _least_rest(lo, hi, d, pp)
            gpus = u * rest
            if um.shard_cuts and not pipeline:  # HSDP: a partial run sends >= min(run, S)
                lay = um.layout
                a = u // (lay.tp * lay.cp)
                gpus = lay.tp * lay.cp * min(a * rest, lay.shard_dp)
            sending = um.uplink_scale * (gpus + um.uplink_split[t][i])
            q = max(q, uplink.uplink_step(sending, um.uplink_ports[t][i], um.uplink_max[t]))
        out.append(q)
    return tuple(out)


def _balance_ok(um: UnitModel, lv: int, slack: int) -> bool:
    pp, d = um.layout.pp, um.units_per_stage
    if pp == 1 or um.crossing[lv]:
        return False
    shares = [min(d, cap // pp) for cap in _caps(um, lv)]
    waste = sum(cap - pp * y for cap, y in zip(_caps(um, lv), shares, strict=True))
    return sum(shares) >= d and waste <= slack


def limits(um: UnitModel) -> Limits:
    """The summary limits of the proof's steps 1-4."""
    pp, d = um.layout.pp, um.units_per_stage
    slack = sum(um.capacity) - pp * d
    levels = range(len(um.levels))
    lone = []
    for lv in levels:
        if um.crossing[lv]:
            empty = {i for i, c in enumerate(_caps(um, lv)) if c == 0}
            lone.append(int(any(empty & set(doms) for doms in um.split_touch[lv])))
    return Limits(
        slack=slack,
        kmax=[_kmax(um, _caps(um, lv), slack, False) for lv in levels],
        kmax_balanced=[_kmax(um, _caps(um, lv), slack, True) for lv in levels],
        lone_forced=lone,
        q_lb=_step_lb(um, slack, False),
        pq_lb=_step_lb(um, slack, True) if um.pipe else (),
        balance_ok=[_balance_ok(um, lv, slack) for lv in levels],
    )


def _within(key: tuple[int, ...], kmax: list[int | None], lone: list[int]) -> bool:
    """The key's pieces and lone flags within the limits; its HSDP shard pieces (after the
    flags) are left free: every value is listed, so the least entry still bounds."""
    n = len(kmax)
    return all(m is None or k <= m for k, m in zip(key[:n], kmax, strict=True)) and all(
        f >= g for f, g in zip(key[n : n + len(lone)], lone, strict=True)
    )


def lower_bound_us(um: UnitModel, lim: Limits | None = None) -> int:
    """The least table entry every count matrix's summary can reach (the proof's step 5)."""
    lim = lim or limits(um)
    n = len(um.levels)
    g = q_index(um, lim.q_lb)
    pg = q_index(um, lim.pq_lb) if um.pipe else 0
    pp_levels = [lv for lv in range(n) if lim.balance_ok[lv]] + [n]
    best = None
    for level in pp_levels:
        kmax = [
            lim.kmax[lv] if lv < level else _least(lim.kmax[lv], lim.kmax_balanced[lv])
            for lv in range(n)
        ]
        reach = [c for key, c in um.dp_class.items() if _within(key, kmax, lim.lone_forced)]
        dp = min((um.class_cost[c][g] for c in reach), default=None)
        if dp is None:
            continue
        total = dp + um.pp_table[level][pg]
        best = total if best is None else min(best, total)
    assert best is not None  # the "none" level with kmax from forced domains always has a key
    return best


def _least(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
