"""Per-rank memory caps for the stage partition (planner/search/partition.py): the most layers each
pipeline rank can hold within usable HBM, from estimate()'s own stage memory, exact because that
memory is non-decreasing in each layer count."""

from __future__ import annotations

from cost_models.memory import state_bytes
from cost_models.pipeline import num_microbatches, with_mtp
from cost_models.pricer import Pricer
from cost_models.specs import Layout, ModelSpec, Workload
from cost_models.stage import stage_memory


def _key(lo: Layout) -> tuple:
    # Everything the stage memory and per-layer compute read; not the order.
    return (
        lo.tp,
        lo.pp,
        lo.dp,
        lo.cp,
        lo.ep,
        lo.etp,
        lo.vp,
        lo.micro_batch,
        lo.recompute,
        lo.recompute_modules,
        lo.recompute_method,
        lo.recompute_num_layers,
        lo.zero_stage,
        lo.sequence_parallel,
    )


class MemoryCaps:
    """Memory caps per layout shape, cached; PartitionSolver builds its model on them."""

    def __init__(
        self, model: ModelSpec, workload: Workload, usable_gib: float, bound: Pricer
    ) -> None:
        self.model, self.workload, self.usable_gib, self.bound = model, workload, usable_gib, bound
        self._memo: dict[tuple, float] = {}  # stage memory of the shape being prepared
        self._prepared_caps: dict[tuple, list[list[int]] | None] = {}
        self.num_prepared = 0  # shapes whose memory caps were computed
        self.num_memory_evals = 0  # stage memories computed (not memoised): the caps' work

    def first_moe(self) -> int:
        m = self.model
        return m.num_dense_layers if m.moe is not None else m.num_layers

    def stage_memory_gib(self, lo: Layout, rank: int, n_dense: int, n_moe: int) -> float:
        """estimate()'s memory of pipeline rank `rank` holding these layers (same functions)."""
        model, w = self.model, self.workload
        m = num_microbatches(w.global_batch_seqs, lo)
        memo_key = (_key(lo), rank, n_dense, n_moe)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        self.num_memory_evals += 1
        acts = self.bound.activations_per_mb(lo)
        counts = with_mtp(model, lo, rank, (n_dense, n_moe))  # as Pricer.stage_counts
        sp = self.bound.stage_params(lo, counts, rank)  # cached across shapes
        weights, grads, optim = state_bytes(sp, lo, m, w)
        stage = stage_memory(model, w, lo, rank, counts, acts, m, weights, grads, optim, sp=sp)
        self._memo[memo_key] = stage.total_gib
        return stage.total_gib

    def _most(self, lo: Layout, rank: int, dense: int | None, limit: int) -> int:
        """The most layers of one kind rank `rank` can hold within usable HBM (-1: not even 0):
        MoE layers beside `dense` dense ones, or (dense None) dense layers alone.

        Exact because stage memory is non-decreasing in each count: the answer is the x with
        fits(x) and not fits(x + 1). From 2 layers on, the memory is affine in the count (the
        ZeRO-3 gather and the full-recompute rebuild stop growing at 2 and 1 layers; weights,
        states and activations are per layer), so the line through x = 2 and x = limit guesses
        it and two evaluations confirm it; a guess that float rounding puts off by one falls
        back to a binary search on the side the check points to (4 evaluations instead of ~8)."""

        def fits(x: int) -> bool:
            nd, nm = (x, 0) if dense is None else (dense, x)
            return self.stage_memory_gib(lo, rank, nd, nm) <= self.usable_gib

        if not fits(0):
            return -1
        lo_n, hi_n = 0, limit  # invariant: lo_n fits, the answer is in [lo_n, hi_n]
        if limit > 4:
            x1 = 2
            if not fits(x1):
                hi_n = x1 - 1
            elif fits(limit):
                return limit
            else:
                nd1, nm1 = (x1, 0) if dense is None else (dense, x1)
                ndl, nml = (limit, 0) if dense is None else (dense, limit)
                m1 = self.stage_memory_gib(lo, rank, nd1, nm1)
                slope = (self.stage_memory_gib(lo, rank, ndl, nml) - m1) / (limit - x1)
                g = min(max(x1 + int((self.usable_gib - m1) // slope), x1), limit - 1)
                lo_n, hi_n = x1, limit - 1
                if fits(g):
                    lo_n = g
                    if not fits(g + 1):
                        return g
                    lo_n = g + 1
                else:
                    hi_n = g - 1
        while lo_n < hi_n:
            mid = (lo_n + hi_n + 1) // 2
            lo_n, hi_n = (mid, hi_n) if fits(mid) else (lo_n, mid - 1)
        return lo_n

    def _caps(self, lo: Layout, rank: int, k: int, n_moe_total: int) -> list[int]:
        """Dense-only model: [most dense layers]. Otherwise cap[d] = most MoE layers beside d
        dense ones, d = 0..k (-1: d dense layers alone are too many)."""
        if n_moe_total == 0:
            return [self._most(lo, rank, None, k)]
        return [self._most(lo, rank, d, n_moe_total) for d in range(k + 1)]

    def fewest_max_layers(self, lo: Layout) -> int | None:
        """None when the memory caps show that no split of `lo`'s shape fits; else N*, a number
        of layers some rank holds in every split that fits (bounds.placement_bounds_s): the
        smallest X with sum_r min(most_r, X) >= L, most_r the most layers rank r can hold. One
        layer kind: most_r = cap_r, and N* and the None are exact. Dense-first MoE: most_r =
        max_d (d + cap_r(d)), a relaxation (None here is exact, a non-None may still find no
        split in CP-SAT). Costs the memory caps only, no CP-SAT model."""
        caps = self._prepared(lo)
        if caps is None:
            return None
        L = self.model.num_layers
        if len(caps[0]) == 1:  # one layer kind
            most = [min(cap[0], L) for cap in caps]
        else:
            most = [min(max(d + c for d, c in enumerate(cap) if c >= 0), L) for cap in caps]
        if sum(most) < L:
            return None
        return next(x for x in range(L + 1) if sum(min(c, x) for c in most) >= L)

    def _prepared(self, lo: Layout) -> list[list[int]] | None:
        key = _key(lo)
        if key not in self._prepared_caps:
            self._memo.clear()
            self._prepared_caps[key] = self._prepare(lo)
        return self._prepared_caps[key]

    def _prepare(self, lo: Layout) -> list[list[int]] | None:
        """Per-rank memory caps (_caps), or None when they rule every split out."""
        self.num_prepared += 1
        p, v, L = lo.pp, lo.vp, self.model.num_layers
        if p * v > L:
            return None
        k = self.first_moe()  # layers [0, k) are dense
        n_moe_total = L - k
        if n_moe_total == 0 or k == 0:
            return self._one_kind_caps(lo, None if n_moe_total == 0 else 0)
        # Every rank holds >= vp layers. Memory is non-decreasing in each count, so a rank that
        # cannot hold vp layers of the lighter kind rules the shape out before any solve.
        for r in range(p):
            if min(self.stage_memory_gib(lo, r, *c) for c in _fewest(k, n_moe_total, v)) > (
                self.usable_gib
            ):
                return None
        caps = [self._caps(lo, r, k, n_moe_total) for r in range(p)]
        if any(cap[0] < 0 for cap in caps):
            return None  # even an empty rank (embedding / head / buffers) is out of memory
        return caps

    def _one_kind_caps(self, lo: Layout, dense: int | None) -> list[list[int]] | None:
        """One layer kind (dense: None, all dense; 0: all MoE): [[cap_r]] per rank, or None when
        no split fits: some rank cannot hold vp layers, or sum_r cap_r < L (n_r <= cap_r summing
        to L exists iff sum_r min(cap_r, L) >= L).

        Middle ranks go last to second: a middle rank's memory at a given count is never below a
        later middle rank's (only the in-flight micro-batches differ and they do not rise with
        the rank; bounds.peak_memory_gib), so cap_r <= cap_{r+1}. The next rank down therefore
        starts from the cap above (one evaluation when they are equal, as they mostly are), and
        the ranks not yet done are bounded by it, which ends hopeless shapes early."""
        p, v, L = lo.pp, lo.vp, self.model.num_layers

        def fits(r: int, x: int) -> bool:
            nd, nm = (x, 0) if dense is None else (dense, x)
            return self.stage_memory_gib(lo, r, nd, nm) <= self.usable_gib

        caps = [0] * p
        for r in (0, p - 1):
            caps[r] = self._most(lo, r, dense, L)
            if caps[r] < v:
                return None
        done = caps[0] + caps[p - 1]  # sum of the caps known so far
        above = L  # cap of the rank above (no middle rank done yet: L)
        for r in range(p - 2, 0, -1):
            cap = above if fits(r, above) else self._most(lo, r, dense, above - 1)
            if cap < v:
                return None  # and so are the ranks below it
            caps[r] = above = cap
            done += cap
            if done + (r - 1) * cap < L:  # ranks 1..r-1 hold at most cap each
                return None
        if done < L:
            return None
        return [[c] for c in caps]


def _fewest(k: int, n_moe: int, v: int) -> list[tuple[int, int]]:
    """Every (dense, MoE) count of a rank holding exactly v layers (for a quick rule-out)."""
    return [(d, v - d) for d in range(min(k, v) + 1) if v - d <= n_moe]
