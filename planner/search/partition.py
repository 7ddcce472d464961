"""The pipeline stage partition (layers per model chunk) as a CP-SAT decision.

The cost model splits layers evenly (cost_models/pipeline.py even_chunk_counts), but stage 0
holds the most in-flight micro-batches (1F1B: p - r), the first and last stages carry the
embedding and the LM head + loss, and dense-first MoE layers make chunks unequal. A layout out
of memory with the even split may fit with fewer layers on stage 0, and a skewed split can
shorten the critical stage. The number of splits is the number of compositions of L layers into
C = pp * vp chunks, C(L - 1, C - 1) (126 layers into 16 chunks: ~10^18), so they cannot be
enumerated; CP-SAT decides them.

Model, for one layout on one placement (memory does not depend on the order, time does):
  n_c >= 1 layers in chunk c, sum n_c = L; chunk c starts at S_c = n_0 + ... + n_{c-1}.
  Dense-first MoE: chunk c holds min(S_c + n_c, k) - min(S_c, k) of the k dense layers
  (AddMinEquality); rank r holds the chunks c = r (mod pp).
  Per placement (the spans of the layout with its order), each rank's three per-stage terms of
  estimate() are the cost model's own, evaluated for every (dense, MoE) count the rank may hold
  (rank_terms_s) and read through element constraints: T_r, the stage seconds per micro-batch
  (compute, recompute and the exposed TP/CP/EP traffic of each layer, the LM head on the last
  rank, the embedding on the first; linear in the counts unless block recompute), D_r the
  exposed DP seconds and O_r the optimizer seconds (both maxima over ranks in the step).
  Objective: m * T_max + (sum_r T_r - T_max) / vp + max_r D_r + max_r O_r (AddMaxEquality),
  scaled by vp to stay integral, then a tie-break toward the even split: sum_c |n_c - even_c|,
  weighted below one time unit so it only orders equal times. One worker, fixed seed:
  deterministic. This is estimate()'s step on that split up to the pipeline p2p term (the same
  for every split) and the rounding to integer units.
  Memory: every rank within usable HBM. The stage memory is the cost model's own
  (stage_memory on stage_params / state_bytes, as bounds.peak_memory_gib); it is not affine in
  the counts (ZeRO-3 gathers min(2, n) layers of the largest kind present, full recompute
  rebuilds the largest kind present) but it is non-decreasing in each count, so it is encoded
  exactly as caps found by evaluating it: for each rank r and dense count d, the most MoE
  layers cap_r(d) with memory <= usable (planner/search/partition_caps.py), and
  nd_r = d => nm_r <= cap_r(d). One layer kind (dense, or all-MoE): p variables, the per-rank
  totals, replace the chunks (the tie-break is exact on them; _spread builds the chunks).

Why per placement: the split that balances compute alone can lose to another by far once the
per-layer traffic is counted (tp 8 cp 2, hidden 1024: 2-4-5-1 balanced compute against the LM head,
2-4-4-2 was 25% faster; the exhaustive oracle found it,
tests/integration/search/test_sat_partition_property.py). The memory caps do not depend on the placement and are shared
by the placements of a shape. It is used, with SearchSpace.stage_split "search", where the even
split is out of memory (planner/search/table.py, planner/search/exhaustive.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from cost_models.bounds import SAFETY
from cost_models.pipeline import (
    even_chunk_counts,
    num_microbatches,
    split_slots,
    with_mtp,
)
from cost_models.pricer import Pricer
from cost_models.specs import Cluster, Layout, ModelSpec, Workload

from .partition_caps import MemoryCaps, _key
from .scale import MAX_EXACT

SEED = 0
DETERMINISTIC_LIMIT = 0.01  # CP-SAT deterministic time units per partition model
# With element constraints (a DP term, block recompute) CP-SAT needs more work to prove: at 0.01,
# 29 of 123 llama3.1-70b models (pp 8, 64 H100s, headroom 0.5) stopped unproved; at 0.2 none.
TABLE_LIMIT = 0.2
Split = tuple[int, ...]


@dataclass(frozen=True)
class SatResult:
    """One CP-SAT model's own report: status, objective and bound (seconds), gap, wall time."""

    status: str
    objective_s: float | None
    bound_s: float | None
    gap: float | None
    wall_time_s: float

    @classmethod
    def of(cls, solver: cp_model.CpSolver, status: int, seconds_per_unit: float) -> SatResult:
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        objective = solver.objective_value * seconds_per_unit if found else None
        bound = solver.best_objective_bound * seconds_per_unit if found else None
        gap = None
        if objective is not None and bound is not None:
            gap = max(0.0, (objective - bound) / objective) if objective > 0 else 0.0
        return cls(solver.status_name(status), objective, bound, gap, solver.wall_time)


class PartitionSolver(MemoryCaps):
    """CP-SAT partition per layout shape, cached by what it depends on."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: Cluster,
        workload: Workload,
        usable_gib: float,
        bound: Pricer | None = None,
    ) -> None:
        super().__init__(model, workload, usable_gib, bound or Pricer(model, cluster, workload))
        self.cluster = cluster
        self._cache: dict[tuple, Split | None] = {}
        self.num_solves = 0  # CP-SAT models solved
        self.num_table_cells = 0  # per-rank (dense, MoE) counts priced for their tables
        self.sat_deterministic_time = 0.0  # CP-SAT's own work count over every model solved
        self.num_unproved = 0  # models stopped by DETERMINISTIC_LIMIT before a proof
        self.unproved: set[tuple] = set()  # shapes (partition_caps._key) whose model stopped
        self.results: list[SatResult] = []  # what each CP-SAT model reported

    # ------------------------------------------------------------------ cost-model evaluations

    def layer_s(self, lo: Layout) -> tuple[float, float, float]:
        """(dense layer, MoE layer, LM head + embedding) compute seconds per micro-batch
        (bounds.py's)."""
        return self.bound.compute_s(lo)

    def counts(self, lo: Layout, split: Split | None) -> list[tuple[int, int]]:
        """(dense, MoE) layers per pipeline rank under `split` (None: the even split)."""
        return self.bound.stage_counts(lo, split)

    def free_step_s(self, lo: Layout) -> float:
        """A lower bound on estimate()'s step time for `lo` under ANY split, order, ZeRO stage.

        Proof. estimate() charges m * t_max + (sum_r t_r - t_max) / vp plus terms >= 0, with
        t_r >= c_r, c_r the compute of rank r (bounds.py). The schedule
        f(t) = (m - 1/vp) * max(t) + sum(t) / vp is non-decreasing in every t_r (m >= 1 >= 1/vp),
        so the step is >= f(c). Whatever the split, sum_r c_r = S is the same (every layer, the
        last rank's MTP layers, the LM head and the embedding once) and max_r c_r >= S / pp, so
        f(c) >= (m - 1/vp) * S / pp + S / vp.
        Shaved by SAFETY against float summation order;
        tests/integration/search/test_sat_partition.py
        checks it against every composition of small instances.
        """
        t_dense, t_moe, t_head = self.layer_s(lo)
        k = self.first_moe()
        total = k * t_dense + (self.model.num_layers - k) * t_moe + t_head
        mtp_dense, mtp_moe = with_mtp(self.model, lo, lo.pp - 1, (0, 0))  # the last rank's MTP
        total += mtp_dense * t_dense + mtp_moe * t_moe
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        return ((m - 1 / lo.vp) * total / lo.pp + total / lo.vp) * SAFETY

    # ------------------------------------------------------------------------------ the model

    def split(self, lo: Layout, span: Mapping[str, Sequence[int]] | None = None) -> Split | None:
        """The best split for `lo` on the placement `span` (topology.spans of the layout with its
        order; default: `lo`'s own order) that fits in memory, or None when none fits."""
        if lo.pp == 1:
            return (self.model.num_layers,) if lo.vp == 1 else None
        if split_slots(lo) != (0, 0):
            return None  # Megatron sets this layout's split (the account_for_* flags)
        span = self._span(lo, span)
        key = (_key(lo), _span_key(span))
        if key not in self._cache:
            self._cache[key] = self._solve(lo, span)
        return self._cache[key]

    def _span(self, lo: Layout, span: Mapping[str, Sequence[int]] | None) -> Mapping:
        return self.bound.spans(lo) if span is None else span

    def is_unproved(self, lo: Layout, span: Mapping[str, Sequence[int]] | None = None) -> bool:
        """Whether the CP-SAT model of `lo` on `span` stopped at its work limit before a proof."""
        return (_key(lo), _span_key(self._span(lo, span))) in self.unproved

    def rank_terms_s(
        self, lo: Layout, span: Mapping[str, Sequence[int]], rank: int, n_dense: int, n_moe: int
    ) -> tuple[float, float, float]:
        """(stage seconds per micro-batch, exposed DP seconds, optimizer seconds) of pipeline
        rank `rank` holding these layers on `span`: the Pricer's (Pricer.rank_terms_s)."""
        return self.bound.rank_terms_s(lo, span, rank, n_dense, n_moe)

    def _solve(self, lo: Layout, span: Mapping[str, Sequence[int]]) -> Split | None:
        caps = self._prepared(lo)
        if caps is None:
            return None
        self.num_solves += 1
        tables_s = self._rank_tables_s(lo, span, caps)
        unit_s, weight = self._unit_s(lo, tables_s)
        cm = cp_model.CpModel()
        split = self._split_vars(cm, lo, caps)
        step, tabulated = self._step_expr(cm, lo, span, split, tables_s, unit_s)
        cm.minimize(step * weight + sum(split.dev))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = SEED
        # A deterministic work limit (not wall time, so the answer repeats): deep interleaved
        # pipelines (pp*vp ~ 100 chunks) can otherwise take seconds to prove optimality; past
        # it the best split found is used (table.py keeps its bound open, counted).
        solver.parameters.max_deterministic_time = TABLE_LIMIT if tabulated else DETERMINISTIC_LIMIT
        status = solver.solve(cm)
        self.sat_deterministic_time += solver.deterministic_time
        self.results.append(SatResult.of(solver, status, unit_s / (lo.vp * weight)))
        if status == cp_model.INFEASIBLE:
            return None
        if status != cp_model.OPTIMAL:
            self.num_unproved += 1
            self.unproved.add((_key(lo), _span_key(span)))
        if status != cp_model.FEASIBLE and status != cp_model.OPTIMAL:
            # No split found within the limit: treat as not fitting (counted, never silent).
            return None
        if split.totals is not None:
            totals = [int(solver.value(x)) for x in split.totals]
            return _spread(totals, even_chunk_counts(self.model, lo.pp * lo.vp), lo.pp)
        return tuple(int(solver.value(x)) for x in split.chunks)

    def _rank_tables_s(
        self, lo: Layout, span: Mapping[str, Sequence[int]], caps: list[list[int]]
    ) -> list[tuple[list[float], list[float], list[float]]]:
        """Per rank, (stage, DP, optimizer) seconds of every (dense, MoE) count it may hold,
        indexed nd * (MoE layers + 1) + nm (0 where the count is not allowed).

        Why per placement and tabulated: the split changes every per-stage term estimate() sums,
        not only compute. The exposed TP/CP/EP traffic is per layer on the placement's spans (at
        tp 8 cp 2 it is large beside a layer's compute, so the split balancing compute alone was
        25% slower than the best one: 2-4-5-1 instead of 2-4-4-2, found by the exhaustive
        oracle), block recompute is not linear in the counts, and the exposed DP traffic is a
        max(0, .) of the stage's parameters against its compute. Each rank's (stage, DP,
        optimizer) seconds are therefore evaluated with the cost model's own functions for every
        (dense, MoE) count it may hold (rank_terms_s) and read through element constraints: the
        model optimizes estimate()'s step exactly, up to the placement-independent p2p term and
        the rounding to integer units."""
        p, v, L = lo.pp, lo.vp, self.model.num_layers
        k = self.first_moe()  # layers [0, k) are dense
        width = L - k + 1
        one_kind = k == 0 or L - k == 0

        def allowed(r: int, nd: int, nm: int) -> bool:
            if nd + nm < 1 or nd + nm > L - (p * v - v):
                return False
            if one_kind:
                return nd + nm <= caps[r][0]
            cap = caps[r][nd]
            return cap >= 0 and nm <= cap

        tables_s = []
        for r in range(p):
            ts, ds, os_ = [], [], []
            for nd in range(k + 1):
                for nm in range(width):
                    t, d, o = (0.0, 0.0, 0.0)
                    if allowed(r, nd, nm):
                        self.num_table_cells += 1
                        t, d, o = self.rank_terms_s(lo, span, r, nd, nm)
                    ts.append(t), ds.append(d), os_.append(o)
            tables_s.append((ts, ds, os_))
        return tables_s

    def _unit_s(self, lo: Layout, tables_s: list) -> tuple[float, int]:
        """(seconds per integer unit, the tie-break weight): the worst step fits in MAX_EXACT / 4
        units times the weight, which is above any tie-break sum so one time unit outweighs it."""
        p, v, L = lo.pp, lo.vp, self.model.num_layers
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        t_cap_s, d_cap_s, o_cap_s = (max(max(x[i]) for x in tables_s) for i in range(3))
        worst_s = v * m * t_cap_s + p * t_cap_s + v * (d_cap_s + o_cap_s)
        weight = 2 * L + 1  # > any tie-break sum, so one time unit outweighs it
        return max(worst_s * weight / (MAX_EXACT / 4), 1e-12), weight

    def _split_vars(self, cm: cp_model.CpModel, lo: Layout, caps: list[list[int]]) -> _SplitVars:
        """The split's variables: layers per chunk (or per rank with one layer kind), (dense,
        MoE) layers per rank within the memory caps, and the tie-break terms."""
        p, v, L = lo.pp, lo.vp, self.model.num_layers
        k = self.first_moe()
        even = even_chunk_counts(self.model, p * v)
        if k and L - k:
            n, nd, nm, dev = self._chunk_model(cm, lo, caps, even)
            return _SplitVars(n, None, nd, nm, dev)
        # One layer kind: time, DP, optimizer and memory read only the per-rank totals N_r, and
        # the tie-break's best chunk split of a rank has sum_c |n_c - even_c| = |N_r - E_r|
        # (_spread), so p variables replace the pp*vp chunks with the same optimum.
        top = L - (p - 1) * v
        tot = [cm.new_int_var(v, min(caps[r][0], top), f"N{r}") for r in range(p)]
        cm.add(sum(tot) == L)
        dev = []
        for r in range(p):
            a = cm.new_int_var(0, L, f"a{r}")
            cm.add_abs_equality(a, tot[r] - sum(even[c] for c in range(r, p * v, p)))
            dev.append(a)
        nd = list(tot) if k else [0] * p
        nm = [0] * p if k else list(tot)
        return _SplitVars([], tot, nd, nm, dev)

    def _step_expr(
        self,
        cm: cp_model.CpModel,
        lo: Layout,
        span: Mapping[str, Sequence[int]],
        split: _SplitVars,
        tables_s: list,
        unit_s: float,
    ) -> tuple[cp_model.LinearExprT, bool]:
        """(estimate()'s step in units, scaled by vp: v m T_max + sum T - T_max + v (D_max +
        O_max); whether a term is read through element constraints)."""
        p, v, L = lo.pp, lo.vp, self.model.num_layers
        k = self.first_moe()
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        nd, nm, width = split.nd, split.nm, L - k + 1

        def q(seconds: float) -> int:
            return round(seconds / unit_s)

        t_top, d_top, o_top = (q(max(max(x[i]) for x in tables_s)) + 1 for i in range(3))
        costs = self.bound.layer_totals(lo, span)
        # Without block recompute the stage time is linear in the counts: kept linear, so splits
        # of equal time (the same layers moved between ranks) stay equal after the rounding to
        # units and the tie-break, not rounding noise, orders them.
        linear = costs.plain is None
        qd, qm, qh, qe = (q(x) for x in (*costs.full, costs.head_s, costs.embed_s))
        mtp_d, mtp_m = with_mtp(self.model, lo, p - 1, (0, 0))
        # The optimizer seconds are affine in the counts (parameters are), so they stay linear
        # too; a DP term that is 0 for every count (no DP group) is left out. Element
        # constraints are kept for what is not linear: they make the model much harder for
        # CP-SAT within its work limit (llama3.1-70b, pp 8: 38 of 123 models unproved with
        # every term tabulated).
        o0 = [self.rank_terms_s(lo, span, r, 0, 0)[2] for r in range(p)]  # embedding / head
        o_dense = self.rank_terms_s(lo, span, 0, 1, 0)[2] - o0[0] if k else 0.0
        o_moe = self.rank_terms_s(lo, span, 0, 0, 1)[2] - o0[0] if L - k else 0.0
        t: list = []
        d: list = []
        o: list = []
        tables = [] if linear else [(0, t_top, t)]
        if any(any(x[1]) for x in tables_s):
            tables.append((1, d_top, d))
        for r in range(p):
            if linear:
                # head and the last rank's MTP layers (pipeline.with_mtp), embedding
                ends = (qh + mtp_d * qd + mtp_m * qm if r == p - 1 else 0) + (qe if r == 0 else 0)
                t.append(nd[r] * qd + nm[r] * qm + ends)
            o.append(q(o0[r]) + nd[r] * q(o_dense) + nm[r] * q(o_moe))
            if not tables:
                continue
            idx = cm.new_int_var(0, (k + 1) * width - 1, f"i{r}")
            cm.add(idx == nd[r] * width + nm[r])
            for tab, top, out in tables:
                x = cm.new_int_var(0, top, f"x{tab}_{r}")
                cm.add_element(idx, [q(s) for s in tables_s[r][tab]], x)
                out.append(x)
        if not d:
            d = [0]
        t_max = cm.new_int_var(0, t_top + L + 2, "t_max")  # + rounding of each linear term
        d_max = cm.new_int_var(0, d_top, "d_max")
        o_max = cm.new_int_var(0, o_top + L + 2, "o_max")  # + rounding of each linear term
        cm.add_max_equality(t_max, t)
        cm.add_max_equality(d_max, d)
        cm.add_max_equality(o_max, o)
        return v * m * t_max + sum(t) - t_max + v * (d_max + o_max), bool(tables)

    def _chunk_model(
        self, cm: cp_model.CpModel, lo: Layout, caps: list[list[int]], even: list[int]
    ) -> tuple[list, list, list, list]:
        """Dense-first MoE: layers per chunk n_c, (dense, MoE) per rank with the memory caps,
        and the tie-break terms |n_c - even_c|."""
        p, L, k = lo.pp, self.model.num_layers, self.first_moe()
        C, n_moe_total = p * lo.vp, L - k
        n = [cm.new_int_var(1, L - C + 1, f"n{c}") for c in range(C)]
        cm.add(sum(n) == L)
        # Dense layers per chunk (prefix positions).
        dense_c = []
        start: cp_model.LinearExprT = 0
        for c in range(C):
            s = cm.new_int_var(0, L, f"s{c}")
            cm.add(s == start)
            lo_min = cm.new_int_var(0, k, f"ms{c}")
            hi_min = cm.new_int_var(0, k, f"me{c}")
            cm.add_min_equality(lo_min, [s, k])
            cm.add_min_equality(hi_min, [s + n[c], k])
            dense_c.append(hi_min - lo_min)
            start = s + n[c]
        nd, nm = [], []
        for r in range(p):
            total = sum(n[c] for c in range(r, C, p))
            d = cm.new_int_var(0, k, f"nd{r}")
            cm.add(d == sum(dense_c[c] for c in range(r, C, p)))
            nd.append(d)
            nm.append(total - d)
            # Memory: nd_r = dd => nm_r <= cap_r(dd), exact for a non-decreasing memory.
            for dd, cap in enumerate(caps[r]):
                if cap >= n_moe_total:
                    continue
                is_d = cm.new_bool_var(f"d{r}_{dd}")
                cm.add(d == dd).only_enforce_if(is_d)
                cm.add(d != dd).only_enforce_if(~is_d)
                if cap < 0:
                    cm.add_bool_or([~is_d])
                else:
                    cm.add(total - d <= cap).only_enforce_if(is_d)
        dev = []
        for c in range(C):
            a = cm.new_int_var(0, L, f"a{c}")
            cm.add_abs_equality(a, n[c] - even[c])
            dev.append(a)
        return n, nd, nm, dev


@dataclass(frozen=True)
class _SplitVars:
    """The CP-SAT variables of a split: layers per chunk (empty with one layer kind), or per
    rank (`totals`, one layer kind only); (dense, MoE) layers per rank; tie-break terms."""

    chunks: list
    totals: list | None
    nd: list
    nm: list
    dev: list


def _span_key(span: Mapping[str, Sequence[int]]) -> tuple:
    return tuple(sorted((a, tuple(g)) for a, g in span.items()))


def _spread(totals: list[int], even: list[int], p: int) -> Split:
    """Layers per chunk: each rank's total spread over its chunks (c = r mod p) starting from the
    even split, one layer at a time round-robin, never below 1 per chunk. Every chunk moves in
    one direction only, so sum_c |n_c - even_c| = |N_r - E_r|, the least possible."""
    n = list(even)
    for r, total in enumerate(totals):
        chunks = list(range(r, len(n), p))
        delta, i = total - sum(n[c] for c in chunks), 0
        while delta:
            c = chunks[i % len(chunks)]
            if delta > 0:
                n[c] += 1
                delta -= 1
            elif n[c] > 1:
                n[c] -= 1
                delta += 1
            i += 1
    return tuple(n)


__all__ = ["PartitionSolver", "SatResult", "Split"]
