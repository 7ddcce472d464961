"""The placement model's cost tables, in integer microseconds, priced with cost_models.estimate
on the spans a map with given counts has (planner/place/pricing.py reads the same spans off the
map it builds).

- DP table: the smallest piece k_L of the DP, DP x CP and expert-DP groups at every model level
  (and, per level a split block spans, whether some stage's split block there is "lone": a part
  in a domain holding none of its whole blocks; with HSDP, the shard piece h_L at every level's
  cuts) sets those kinds' spans, HSDP's dp_shard and dp_replicate included; keys with the same
  spans share a class, and a class's cost is listed at every combination of the gradient
  window's uplink steps (q_grid).
- PP table: the lowest level whose domains hold whole PP groups (len(levels): none), at every
  combination of the pipeline window's uplink steps, as a delta to the reference step.
The DP and PP terms are separate terms of the step sum (estimate's breakdown), so the objective
is their sum.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from cost_models import uplink
from cost_models.pricer import Pricer
from cost_models.rankmap import HSDP_EXPERT_KINDS, HSDP_KINDS, hsdp_experts
from cost_models.specs import Cluster, ModelSpec, Workload

from .allocation import Allocation
from .counts import greedy_counts
from .pricing import PIPELINE_KINDS, group_keys, nest, placed_pieces, uplink_steps
from .units import Shape, Unplaceable, build_map, k_values

US = 1e6  # objective unit: microseconds


@dataclass
class Tables:
    """Costs of the counted model (the objective's lookup tables)."""

    # (k_0, k_1, ..., lone flag of each crossing level) -> step (pp at the top) in us at the
    # uplink steps q (cost_models.uplink): dp_table[key] = class_cost[dp_class[key]][q index]
    dp_class: dict[tuple[int, ...], int]
    class_cost: list[list[int]]  # class -> q grid index -> us
    q_grid: list[tuple[int, ...]]  # every combination of the uplink tiers' steps
    # lowest balanced level (len(levels): none) -> pipeline-window q grid index -> delta in us
    pp_table: list[list[int]]
    uplink_fixed: dict[int, int]  # tapered tiers whose step no count changes (nodes, one domain)
    pipe_fixed: dict[int, int]  # the same for the pipeline window
    # HSDP (Layout.dp_shard; [] without): a stage cut after p of its units (p = 0..D) leaves its
    # dp_shard x cp groups pieces of at most shard_cuts[p] members (rounded down to a divisor of
    # the group); the DP key then ends with one such piece per level (the fewest over the
    # level's cuts), shard_values its possible values.
    shard_cuts: list[int]
    shard_values: list[int]


class _Spans:
    """Spans of every kind for a table key (pieces per level, lone flags) and a PP level, on
    the spans of the base map (the scheduler's order packed into leaves)."""

    def __init__(self, model: ModelSpec, cluster: Cluster, alloc: Allocation, shape: Shape):
        lo = shape.layout
        self.shape, self.tiers = shape, len(cluster.tiers)
        self.base_map = build_map(shape, greedy_counts(shape))
        moe = model.moe is not None
        self.raw = placed_pieces(alloc, lo, self.base_map, moe=moe)
        self.base = {kind: nest(p) for kind, p in self.raw.items()}
        self.per_unit = {
            "dp": shape.unit_gpus // (lo.tp * lo.cp),
            "dp_cp": shape.unit_gpus // lo.tp,
            "edp": shape.unit_gpus // (lo.etp * lo.ep),
        }
        self.hsdp = lo.dp_shard is not None
        if moe and hsdp_experts(lo) and lo.ep % (lo.cp * lo.tp):
            # _hsdp_spans reads an EP group as whole dp indices x cp x tp (torchtitan's rule)
            raise Unplaceable(f"HSDP with ep {lo.ep} not a multiple of cp*tp ({lo.cp}*{lo.tp})")
        self.shard_cuts = shard_cuts(shape)
        self.shard_values = sorted(set(self.shard_cuts))
        keys = group_keys(lo, moe=moe)
        first = len(shape.leaf_hosts) - shape.split_blocks
        self.split_ranks = [
            np.flatnonzero(np.isin(self.base_map, shape.leaf_hosts[p]))
            for p in range(first, len(shape.leaf_hosts))
        ]
        self.parts = {
            (kind, t): self._split_piece(alloc, keys, kind, t)
            for kind in (*self.per_unit, *HSDP_KINDS, *HSDP_EXPERT_KINDS)
            if kind in self.base
            for t in range(self.tiers)
        }
        self.cross = [lv for lv in range(len(shape.levels)) if shape.crossing[lv]]
        self.memo: dict[tuple, dict[str, list[int]]] = {}

    def _split_piece(self, alloc: Allocation, keys: dict, kind: str, t: int) -> int | None:
        """Split blocks: at a tier whose domains a split block spans, a group's piece in a
        domain holding part of one is at least that part (its whole blocks there only add), so
        the kind's piece is taken as min(k x u, the smallest part of any split block) there: a
        lower bound on the map's piece, hence an upper bound on its step where the table falls
        as pieces grow (exact where no block is split). The parts depend on the blocks' fixed
        hosts only, not on the stage that takes them."""
        shape, base_map = self.shape, self.base_map
        lv = shape.level_of_tier[t]
        if lv is None or not shape.crossing[lv] or not self.split_ranks:
            return None
        dom = alloc.domains[t]
        out = None
        for ranks in self.split_ranks:
            key = keys[kind][ranks]
            pair = key * (int(dom.max()) + 1) + dom[base_map[ranks]]
            low = int(np.unique(pair, return_counts=True)[1].min())
            out = low if out is None else min(out, low)
        return out

    def _gradient_span(self, kind: str, ks: tuple[int, ...], lone: dict[int, int]) -> list[int]:
        shape, whole = self.shape, self.base[kind][-1]
        span = []
        for t in range(self.tiers):
            lv = shape.level_of_tier[t]
            if t == self.tiers - 1:
                span.append(whole)
            elif lv is not None:
                part = self.parts[kind, t] if lone.get(lv) else None
                piece = ks[lv] * self.per_unit[kind]
                span.append(min(whole, piece, whole if part is None else part))
            elif t == 0:
                span.append(self.raw[kind][0])
            else:
                span.append(whole)
        return nest(span)

    def _hsdp_spans(
        self, ks: tuple[int, ...], lone: dict[int, int], hs: tuple[int, ...]
    ) -> dict[str, list[int]]:
        """HSDP's groups on a map with smallest pieces ks, lone flags and shard pieces hs (the
        fewest members a dp_shard x cp group keeps at a level's cuts, shard_cuts). A domain's
        units of one stage are one run of its chunks (build_map), a * y dp indices for y units
        (a per unit): a shard group (S consecutive dp indices x cp) keeps min(y a, S, the
        pieces at the run's ends) x cp there, so the level's smallest piece is
        min(k a cp, h); a replica group (dp indices j + r S, one per replica) has
        floor(y a / S) or that + 1 members in a run of y a indices, at least 1, and the
        smallest count over j is max(1, floor(y a / S)), least at y = k. Split blocks across a
        level (one dp index over several domains) add their parts as in _gradient_span: a
        shard group can meet a part where its stage has whole blocks too, so its part always
        counts there; a replica group's only where the part is lone.
        With EP the experts' groups (rankmap.HSDP_EXPERT_KINDS): an efsdp group is the shard
        block's dp indices of one residue modulo g = ep / (cp tp) (EP groups are g consecutive
        dp indices x cp x tp, whole in a unit), one rank each, so where runs end on unit bounds
        it keeps the shard group's piece / (ep etp / tp) members (floored before nest: the
        same divisor); its replica groups are the dense replica groups' ranks."""
        lo, shape = self.shape.layout, self.shape
        a = shape.unit_gpus // (lo.tp * lo.cp)
        out = {}
        for kind in (*HSDP_KINDS, *HSDP_EXPERT_KINDS):
            if kind not in self.base:
                continue
            whole, span = self.base[kind][-1], []
            ratio = lo.shard_dp * lo.cp // whole if kind == "edp_shard" else 1
            for t in range(self.tiers):
                lv = shape.level_of_tier[t]
                if t == self.tiers - 1:
                    span.append(whole)
                elif lv is not None:
                    if kind in ("dp_shard", "edp_shard"):
                        piece = min(ks[lv] * a * lo.cp, hs[lv]) // ratio
                        part = self.parts[kind, t]
                    else:
                        piece = max(1, ks[lv] * a // lo.shard_dp)
                        part = self.parts[kind, t] if lone.get(lv) else None
                    span.append(min(whole, piece, whole if part is None else part))
                elif t == 0:
                    span.append(self.raw[kind][0])
                else:
                    span.append(whole)
            out[kind] = nest(span)
        return out

    def _pp_span(self, pp_level: int) -> list[int]:
        """Groups inside the domains of level L reach its lowest tier; groups balanced nowhere
        reach the first tier above every level (one domain holds them all)."""
        shape, pp = self.shape, self.shape.layout.pp
        mapped = [t for t in range(self.tiers) if shape.level_of_tier[t] is not None]
        level_tiers = [
            min(t for t in mapped if shape.level_of_tier[t] == lv)
            for lv in range(len(shape.levels))
            if lv in shape.level_of_tier
        ]
        above = max(mapped) + 1 if mapped else shape.lowest_tier
        top = level_tiers[pp_level] if pp_level < len(level_tiers) else above
        out = [1 if t < top else pp for t in range(self.tiers)]
        out[-1] = pp
        return out

    def spans_for(self, key: tuple[int, ...], pp_level: int) -> dict[str, list[int]]:
        n, c = len(self.shape.levels), len(self.cross)
        ks, lone = key[:n], dict(zip(self.cross, key[n : n + c], strict=True))
        out = dict(self.base)
        for kind in self.per_unit:
            if kind in self.base:
                out[kind] = self._gradient_span(kind, ks, lone)
        if self.hsdp:
            out.update(self._hsdp_spans(ks, lone, key[n + c :]))
        if self.shape.layout.pp > 1:
            out["pp"] = self._pp_span(pp_level)
        return out

    def key(self, ks: tuple[int, ...], pp_level: int) -> tuple:
        """Many piece combinations nest to the same spans (whole factors per tier): one key."""
        spans = self.spans_for(ks, pp_level)
        key = tuple(tuple(spans[k]) for k in sorted(spans))
        self.memo.setdefault(key, spans)
        return key


class _Steps:
    """Step time in us of a spans key at given uplink steps, priced once per distinct input."""

    def __init__(self, model, cluster, workload, shape: Shape, spans: _Spans, fixed, pipe_fixed):
        self.pricer, self.layout = Pricer(model, cluster, workload), shape.layout  # one per table
        self.cluster, self.shape, self.spans = cluster, shape, spans
        self.fixed, self.pipe_fixed = fixed, pipe_fixed
        self.q_top = tuple(shape.uplink_max)
        self.full: dict[tuple, dict] = {}
        self.memo: dict[tuple, int] = {}

    def _fill(self, spans, fixed, vary, q_of, norm) -> dict[int, int]:
        """The uplink steps of one window; `norm` gets, per uplink tier, what the price reads
        of its step (the effective oversubscription), or None where no group crosses it."""
        steps = dict(fixed)
        if vary:
            for j, q in zip(self.shape.uplink_tiers, q_of, strict=True):
                steps[j] = q
                # q matters only where a group crosses tier j (above 1 / o). Every kind the
                # Pricer prices is checked, not only the window's senders: HSDP's dp_shard and
                # dp_replicate groups (the Pricer's layout-derived spans) carry the gradient
                # window's traffic on tiers the dp, dp_cp and edp spans leave alone (the slow
                # property test's case 118993746, mla-small on torchtitan: entries priced at
                # q = 0 on the spine were served for q = 4, 1.1 ms below the placed map).
                crosses = any(s[j] > s[j - 1] for s in spans.values())
                o = self.cluster.tiers[j].oversubscription
                norm.append(uplink.effective_oversubscription(o, q) if crosses else None)
        return steps

    def us(self, key: tuple, qs: tuple[int, ...], pqs: tuple[int, ...] | None = None) -> int:
        spans = self.spans.memo[key]
        if key not in self.full:  # every kind the Pricer prices, HSDP's included
            self.full[key] = self.pricer.spans(self.layout, spans)
        if pqs is None:  # the DP table: the pipeline window at its reference (every q at top)
            pqs = self.q_top if self.shape.pipe else ()
        norm: list[float | None] = []
        steps = self._fill(self.full[key], self.fixed, True, qs, norm)
        pipe = self._fill(self.full[key], self.pipe_fixed, self.shape.pipe, pqs, norm)
        mkey = (key, tuple(norm))
        if mkey not in self.memo:
            e = self.pricer.estimate(
                self.layout, spans=spans, uplink_steps=steps, pipeline_uplink_steps=pipe
            )
            self.memo[mkey] = round(e.step_time_s * US)
        return self.memo[mkey]


def shard_cuts(shape: Shape) -> list[int]:
    """HSDP (Layout.dp_shard; [] without): for a stage cut after p of its D units, the pieces
    its dp_shard x cp groups keep on either side of the cut, p a dp indices in (a per unit):
    the group holding dp indices [m S, (m + 1) S) that the cut splits keeps r = p a mod S on one
    side and S - r on the other (r = 0: no group is cut, S), times cp, rounded down to a
    divisor of the group (nest's first step: only that is priced, so keys stay few)."""
    lo = shape.layout
    if lo.dp_shard is None:
        return []
    s, cp = lo.shard_dp, lo.cp
    a = shape.unit_gpus // (lo.tp * cp)
    out = []
    for p in range(shape.units_per_stage + 1):
        r = p * a % s
        out.append(nest([cp * (min(r, s - r) if r else s), s * cp])[0])
    return out


def _nested(values: list[list[int]]) -> list[tuple[int, ...]]:
    """Every choice of one value per level that never falls from one level to the next."""
    return [c for c in itertools.product(*values) if all(a <= b for a, b in itertools.pairwise(c))]


def _dp_classes(
    shape: Shape, spans: _Spans
) -> tuple[dict[tuple[int, ...], int], list[frozenset]]:
    """A key's class: the spans of it and of every key with fewer lone flags (a lone part never
    prices below none: the entry is the largest of them, at every q). Only keys whose pieces
    nest (k_L <= k_L+1; with HSDP the shard pieces h_L <= h_L+1 too: a level's cuts include the
    level above's) are listed."""
    n = len(shape.levels)
    flags = list(itertools.product((0, 1), repeat=len(spans.cross)))
    hss = _nested([spans.shard_values] * n) if spans.hsdp else [()]
    sig_of: dict[tuple[int, ...], frozenset] = {}
    class_index: dict[frozenset, int] = {}
    dp_class: dict[tuple[int, ...], int] = {}
    for ks in _nested([k_values(shape, lv) for lv in range(n)]):
        for hs in hss:
            for f in flags:  # fewer flags first
                sig = {spans.key((*ks, *f, *hs), n)}
                for i in range(len(f)):
                    if f[i]:
                        sig |= sig_of[(*ks, *f[:i], 0, *f[i + 1 :], *hs)]
                sig_of[(*ks, *f, *hs)] = frozenset(sig)
                cls = class_index.setdefault(frozenset(sig), len(class_index))
                dp_class[(*ks, *f, *hs)] = cls
    return dp_class, list(class_index)


def build_tables(
    model: ModelSpec, cluster: Cluster, workload: Workload, alloc: Allocation, shape: Shape
) -> Tables:
    """Price the DP and PP tables of the counted model."""
    lo, moe, n = shape.layout, model.moe is not None, len(shape.levels)
    spans = _Spans(model, cluster, alloc, shape)
    # Uplink steps: the tiers whose step the counts set take every q of the grid; the others
    # (switches that are nodes, or one domain) keep the base map's step.
    fixed = uplink_steps(cluster, alloc, lo, spans.base_map, moe=moe)
    fixed = {j: q for j, q in fixed.items() if j not in shape.uplink_tiers}
    pipe = uplink_steps(cluster, alloc, lo, spans.base_map, moe=moe, kinds=PIPELINE_KINDS)
    pipe = {j: q for j, q in pipe.items() if not (shape.pipe and j in shape.uplink_tiers)}
    steps = _Steps(model, cluster, workload, shape, spans, fixed, pipe)
    q_grid = list(itertools.product(*(range(top + 1) for top in shape.uplink_max)))
    dp_class, sigs = _dp_classes(shape, spans)
    class_cost = [[max(steps.us(key, qs) for key in sig) for qs in q_grid] for sig in sigs]
    top_ks = tuple(shape.units_per_stage for _ in range(n)) + (0,) * len(spans.cross)
    if spans.hsdp:  # shard groups whole at every level
        top_ks += (max(spans.shard_values),) * n
    zero = (0,) * len(shape.uplink_tiers)
    top_key = spans.key(top_ks, n)
    ref = steps.us(top_key, zero)
    pp_grid = q_grid if shape.pipe else [()]
    pp_table = [
        [steps.us(spans.key(top_ks, lv), zero, g) - ref for g in pp_grid] for lv in range(n)
    ] + [[steps.us(top_key, zero, g) - ref for g in pp_grid]]
    return Tables(
        dp_class=dp_class,
        class_cost=class_cost,
        q_grid=q_grid,
        pp_table=pp_table,
        uplink_fixed=fixed,
        pipe_fixed=pipe,
        shard_cuts=spans.shard_cuts,
        shard_values=spans.shard_values,
    )


def dp_monotone(shape: Shape, tables: Tables) -> bool:
    """The DP table never rises when one level's smallest piece grows (to its next value), at
    every uplink step."""
    values = [k_values(shape, lv) for lv in range(len(shape.levels))]
    n = len(values)
    for ks, c in tables.dp_class.items():
        for lv, k in enumerate(ks[:n]):
            i = values[lv].index(k)
            if i + 1 < len(values[lv]):
                up = (*ks[:lv], values[lv][i + 1], *ks[lv + 1 :])
                cu = tables.dp_class.get(up)
                if cu is not None and cu != c and any(
                    a > b
                    for a, b in zip(tables.class_cost[cu], tables.class_cost[c], strict=True)
                ):
                    return False
    return True


def q_monotone(shape: Shape, tables: Tables) -> bool:
    """Every class's cost, and every PP level's, never falls as one tier's uplink step grows
    (more senders)."""
    tops = shape.uplink_max
    # mixed radix, the first tier slowest: one step up on tier t moves the index by the
    # product of the later tiers' radices
    stride = [int(np.prod([top + 1 for top in tops[t + 1 :]])) for t in range(len(tops))]
    for costs in [*tables.class_cost, *(tables.pp_table if shape.pipe else [])]:
        for g, qs in enumerate(tables.q_grid):
            for t, q in enumerate(qs):
                if q < tops[t] and costs[g + stride[t]] < costs[g]:
                    return False
    return True
