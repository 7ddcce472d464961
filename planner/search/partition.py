"""The pipeline stage partition (layers per model chunk) as a CP-SAT decision.

The cost model splits layers evenly (cost_models/pipeline.py chunk_layer_counts), but stage 0
holds the most in-flight micro-batches (1F1B: p - r), the first and last stages carry the
embedding and the LM head + loss, and dense-first MoE layers make chunks unequal. A layout out
of memory with the even split may fit with fewer layers on stage 0, and a skewed split can
shorten the critical stage. The number of splits is the number of compositions of L layers into
C = pp * vp chunks, C(L - 1, C - 1) (126 layers into 16 chunks: ~10^18), so they cannot be
enumerated; CP-SAT decides them.

Model, for one layout shape (memory does not depend on the order):
  n_c >= 1 layers in chunk c, sum n_c = L; chunk c starts at S_c = n_0 + ... + n_{c-1}.
  Dense-first MoE: chunk c holds min(S_c + n_c, k) - min(S_c, k) of the k dense layers
  (AddMinEquality); rank r holds the chunks c = r (mod pp).
  Time per rank and micro-batch T_r = nd_r * t_dense + nm_r * t_moe (+ LM head on the last
  rank): the per-layer compute of planner/search/bounds.py (placement-independent).
  Optimizer seconds per rank O_r: affine in (nd_r, nm_r), derived by evaluating
  cost_models.memory.stage_params (the term estimate() adds as max_r O_r).
  Objective: m * T_max + (sum_r T_r - T_max) / vp + max_r O_r (AddMaxEquality), scaled by vp
  to stay integral, then a tie-break toward the even split: sum_c |n_c - even_c|, weighted
  below one time unit so it only orders equal times. One worker, fixed seed: deterministic.
  Memory: every rank within usable HBM. The stage memory is the cost model's own
  (stage_memory on stage_params / state_bytes, as bounds.peak_memory_gib); it is not affine in
  the counts (ZeRO-3 gathers min(2, n) layers of the largest kind present, full recompute
  rebuilds the largest kind present) but it is non-decreasing in each count, so it is encoded
  exactly as caps found by evaluating it: for each rank r and dense count d, the most MoE
  layers cap_r(d) with memory <= usable (planner/search/partition_caps.py), and
  nd_r = d => nm_r <= cap_r(d). One layer kind (dense, or all-MoE): p variables, the per-rank
  totals, replace the chunks (the tie-break is exact on them; _spread builds the chunks).

What the model leaves out: the exposed TP/CP/EP traffic per layer and the DP traffic, which
depend on the placement. The search scores every placement with estimate() on the split chosen
here, so reported numbers stay the cost model's own; the split is optimal for the
placement-independent part of the step. It is used, with SearchSpace.stage_split "search", where
the even split is out of memory (planner/search/table.py, planner/search/exhaustive.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from cost_models.memory import stage_params
from cost_models.pipeline import chunk_layer_counts, num_microbatches, stage_layers
from cost_models.specs import Cluster, Layout, ModelSpec, Workload
from cost_models.stage import stage_optimizer_s

from .bounds import SAFETY, StepLowerBound
from .partition_caps import MemoryCaps, _key
from .scale import MAX_EXACT

SEED = 0
DETERMINISTIC_LIMIT = 0.01  # CP-SAT deterministic time units per partition model
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
        bound: StepLowerBound | None = None,
    ) -> None:
        super().__init__(
            model, workload, usable_gib, bound or StepLowerBound(model, cluster, workload)
        )
        self.cluster = cluster
        self._cache: dict[tuple, Split | None] = {}
        self.num_solves = 0  # CP-SAT models solved
        self.num_unproved = 0  # models stopped by DETERMINISTIC_LIMIT before a proof
        self.unproved: set[tuple] = set()  # shapes (partition_caps._key) whose model stopped
        self.results: list[SatResult] = []  # what each CP-SAT model reported

    # ------------------------------------------------------------------ cost-model evaluations

    def optimizer_s(self, lo: Layout, rank: int, n_dense: int, n_moe: int) -> float:
        """The optimizer seconds estimate() charges for pipeline rank `rank` (its max over
        ranks is the step's optimizer term)."""
        sp = stage_params(self.model, lo, n_dense, n_moe, rank)
        return stage_optimizer_s(lo, sp, self.bound.hbm_bytes_per_s)

    def layer_s(self, lo: Layout) -> tuple[float, float, float]:
        """(dense layer, MoE layer, LM head) compute seconds per micro-batch (bounds.py's)."""
        return self.bound.compute_s(lo)

    def counts(self, lo: Layout, split: Split | None) -> list[tuple[int, int]]:
        """(dense, MoE) layers per pipeline rank under `split` (None: the even split)."""
        k = self.first_moe()
        return [
            (sum(1 for i in s if i < k), sum(1 for i in s if i >= k))
            for s in stage_layers(self.model, lo, split)
        ]

    def free_step_s(self, lo: Layout) -> float:
        """A lower bound on estimate()'s step time for `lo` under ANY split, order, ZeRO stage.

        Proof. estimate() charges m * t_max + (sum_r t_r - t_max) / vp plus terms >= 0, with
        t_r >= c_r, c_r the compute of rank r (bounds.py). The schedule
        f(t) = (m - 1/vp) * max(t) + sum(t) / vp is non-decreasing in every t_r (m >= 1 >= 1/vp),
        so the step is >= f(c). Whatever the split, sum_r c_r = S is the same (every layer and
        the LM head once) and max_r c_r >= S / pp, so f(c) >= (m - 1/vp) * S / pp + S / vp.
        Shaved by SAFETY against float summation order; tests/planner/test_sat_partition.py
        checks it against every composition of small instances.
        """
        t_dense, t_moe, t_head = self.layer_s(lo)
        k = self.first_moe()
        total = k * t_dense + (self.model.num_layers - k) * t_moe + t_head
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        return ((m - 1 / lo.vp) * total / lo.pp + total / lo.vp) * SAFETY

    # ------------------------------------------------------------------------------ the model

    def split(self, lo: Layout) -> Split | None:
        """The best split for `lo`'s shape that fits in memory, or None when none fits."""
        if lo.pp == 1:
            return (self.model.num_layers,) if lo.vp == 1 else None
        key = _key(lo)
        if key not in self._cache:
            self._cache[key] = self._solve(lo)
        return self._cache[key]

    def is_unproved(self, lo: Layout) -> bool:
        """Whether the CP-SAT model of `lo`'s shape stopped at its work limit before a proof."""
        return _key(lo) in self.unproved

    def _solve(self, lo: Layout) -> Split | None:
        caps = self._prepared(lo)
        if caps is None:
            return None
        self.num_solves += 1
        model = self.model
        p, v, L = lo.pp, lo.vp, model.num_layers
        C = p * v
        k = self.first_moe()  # layers [0, k) are dense
        n_moe_total = L - k
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        t_dense, t_moe, t_head = self.layer_s(lo)
        o0 = [self.optimizer_s(lo, r, 0, 0) for r in range(p)]
        o_dense = self.optimizer_s(lo, 0, 1, 0) - o0[0] if k else 0.0
        o_moe = self.optimizer_s(lo, 0, 0, 1) - o0[0] if n_moe_total else 0.0
        # Integer time unit: as fine as 2**53 allows for the objective's largest value over the
        # variables' domains (CP-SAT checks it), times the tie-break weight.
        t_cap_s = k * t_dense + n_moe_total * t_moe + t_head  # every layer on one rank
        o_cap_s = max(o0) + k * o_dense + n_moe_total * o_moe
        worst_s = v * m * t_cap_s + 2 * C * L * max(t_dense, t_moe) + t_head + v * o_cap_s
        weight = 2 * L + 1  # > any tie-break sum, so one time unit outweighs it
        unit_s = max(worst_s * weight / (MAX_EXACT / 4), 1e-12)

        def q(seconds: float) -> int:
            return round(seconds / unit_s)

        cm = cp_model.CpModel()
        even = chunk_layer_counts(L, C)
        one_kind = n_moe_total == 0 or k == 0
        if one_kind:
            # One layer kind: time, optimizer and memory read only the per-rank totals N_r, and
            # the tie-break's best chunk split of a rank has sum_c |n_c - even_c| = |N_r - E_r|
            # (_spread), so p variables replace the pp*vp chunks with the same optimum.
            top = L - (p - 1) * v
            tot = [cm.new_int_var(v, min(caps[r][0], top), f"N{r}") for r in range(p)]
            cm.add(sum(tot) == L)
            nd = list(tot) if k else [0] * p
            nm = [0] * p if k else list(tot)
            dev = []
            for r in range(p):
                a = cm.new_int_var(0, L, f"a{r}")
                cm.add_abs_equality(a, tot[r] - sum(even[c] for c in range(r, C, p)))
                dev.append(a)
        else:
            n, nd, nm, dev = self._chunk_model(cm, lo, caps, even)
        qd, qm, qh = q(t_dense), q(t_moe), q(t_head)
        t = [nd[r] * qd + nm[r] * qm + (qh if r == p - 1 else 0) for r in range(p)]
        o = [q(o0[r]) + nd[r] * q(o_dense) + nm[r] * q(o_moe) for r in range(p)]
        t_max = cm.new_int_var(0, q(t_cap_s) + L + 2, "t_max")  # + rounding of each term
        o_max = cm.new_int_var(0, q(o_cap_s) + L + 2, "o_max")
        cm.add_max_equality(t_max, t)
        cm.add_max_equality(o_max, o)
        step = v * m * t_max + sum(t) - t_max + v * o_max
        cm.minimize(step * weight + sum(dev))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = SEED
        # A deterministic work limit (not wall time, so the answer repeats): deep interleaved
        # pipelines (pp*vp ~ 100 chunks) can otherwise take seconds to prove optimality; past
        # it the best split found is used (the property test's oracle shares this solver).
        solver.parameters.max_deterministic_time = DETERMINISTIC_LIMIT
        status = solver.solve(cm)
        self.results.append(SatResult.of(solver, status, unit_s / (v * weight)))
        if status == cp_model.INFEASIBLE:
            return None
        if status != cp_model.OPTIMAL:
            self.num_unproved += 1
            self.unproved.add(_key(lo))
        if status != cp_model.FEASIBLE and status != cp_model.OPTIMAL:
            # No split found within the limit: treat as not fitting (counted, never silent).
            return None
        if one_kind:
            return _spread([int(solver.value(x)) for x in tot], even, p)
        return tuple(int(solver.value(x)) for x in n)

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
