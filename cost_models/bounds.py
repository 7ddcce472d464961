"""Lower bounds on a step, as Pricer methods (mixed into cost_models.pricer.Pricer): cheap
values never above `Pricer.estimate(...).step_time_s`, for the planner's branch and bound
(planner/search/table.py) and stage partition (planner/search/partition.py).

`Pricer.estimate` composes a step as (sum of its breakdown terms, each >= 0):
    m * t_crit + (sum_r t_r - t_crit) / vp + pp_comm + dp_comm + optimizer,
where t_r is stage r's time per micro-batch (compute + recompute + exposed TP/CP/EP traffic) and
t_crit the slowest stage (cost_models/pipeline.py, schedule_time_s). Dropping the communication
terms gives per-stage times c_r <= t_r, and f(t) = m * max(t) + (sum(t) - max(t)) / vp is
non-decreasing in every t_r when m >= 1 >= 1/vp, so f(c) <= f(t) <= step time. c_r needs only
the per-layer compute, which does not depend on the order, ZeRO stage or the network, so one
bound (`step_bound_s`) serves every placement of a shape.
tests/integration/search/test_sat_bounds.py and
tests/unit/cost_models/test_pricer.py check bound <= estimate on random layouts.

`placement_bound_s` is the tighter bound for one placement: the same schedule with the full t_r
(the cost model's own per-layer cost on that placement's spans) plus the pipeline p2p term; it
leaves out only dp_comm and optimizer (both >= 0). With `with_dp=True` it adds those two terms as
the estimate computes them (`dp_optimizer_s`, per ZeRO stage, a handful of stages instead of the
estimate's loop over all of them), which makes it the step time itself up to float summation
order. Either way it is shaved by SAFETY (1e-9 relative) so that summation order cannot lift it
above the estimate.

`peak_memory_gib` is the estimate's own peak memory (same functions, same order), for deciding
whether a shape fits without its communication terms; the tests check it equals
estimate(...).peak_memory_gib exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .commtable import p2p_s
from .compute import LayerTime
from .pipeline import num_microbatches, split_slots
from .rankmap import DP_GROUPS, LAYER_GROUPS, Group
from .specs import Layout
from .stage import is_block_recompute, recomputed_layers, without_block_recompute
from .terms import layout_key

SAFETY = 1 - 1e-9
NOT_IN_DP = ("order", "recompute")
"""stage.stage_dp_parts and stage_optimizer_s read neither the order (only the spans) nor the
recompute mode."""

_dp_key = layout_key(NOT_IN_DP)

Span = Mapping[str, Sequence[int]]
Counts = tuple[int, int]


@dataclass(frozen=True, slots=True)
class LayerTotals:
    """(dense, MoE) per-layer seconds per micro-batch as estimate() sums them per stage
    (stage.layer_cost's total: compute, recompute, exposed TP/CP/EP); the same without block
    recompute (None: no block recompute); the LM head's seconds (last stage) and the
    embedding's (first stage), each with its exposed TP collectives (Pricer.end_costs)."""

    full: tuple[float, float]
    plain: tuple[float, float] | None
    head_s: float
    embed_s: float = 0.0

    def stage_s(self, lo: Layout, counts: Counts) -> float:
        """Seconds per micro-batch of a stage holding `counts` layers, without the LM head or
        the embedding:
        under block recompute (stage.recomputed_layers) the recomputed layers at `full`, the
        rest at `plain`, as estimate() sums them."""
        (cd, cm), (nd, nm) = self.full, counts
        if self.plain is None:
            return nd * cd + nm * cm
        xd, xm = recomputed_layers(lo, counts)
        return xd * cd + (nd - xd) * self.plain[0] + xm * cm + (nm - xm) * self.plain[1]


class StepBounds:
    """The lower-bound half of cost_models.pricer.Pricer, whose per-layer and per-stage pieces
    (layer_times, layer_costs, stage_counts, stage_params, stage_compute_s, stage_dp_parts,
    stage_optimizer_s, stage_memory, spans) these methods read through `self`; the caches of
    the bounds live here. Not used on its own."""

    def __init__(self) -> None:
        self._totals: dict[tuple, tuple[float, float]] = {}
        self._dp: dict[tuple, float] = {}
        self._candidates: dict[tuple, list[tuple[int, Counts]]] = {}
        self._compute: dict[tuple, tuple[float, float, float]] = {}  # compute_s by layer times

    # ------------------------------------------------------------------ order-free bounds

    def compute_s(
        self,
        lo: Layout,
        recompute: str | None = None,
        modules: tuple[str, ...] | None = None,
    ) -> tuple[float, float, float]:
        """(dense layer, MoE layer, LM head + embedding) compute seconds per micro-batch,
        recompute included
        (`recompute` and selective `modules` instead of the layout's own, if given); 0 for a
        layer kind the model lacks. A layout's own block recompute is priced as none (some of
        its layers recompute, stage.recomputed_layers): a per-layer lower bound."""
        rc = lo.recompute if recompute is None else recompute
        if recompute is None and is_block_recompute(lo):
            rc = "none"
        mods = lo.selective_modules if modules is None else modules
        # The search asks this for every shape x recompute choice: many share the layer times.
        key = (self.times_key(lo), rc, mods)
        found = self._compute.get(key)
        if found is not None:
            return found
        times = self.layer_times(lo)

        def cost(t: LayerTime | None) -> float:
            if t is None:
                return 0.0
            return t.forward_s + t.backward_s + t.recompute_s(rc, mods)

        found = self._compute[key] = (
            cost(times.layers.dense),
            cost(times.layers.moe),
            times.head_s + times.embed_s,
        )
        return found

    def step_bound_s(self, lo: Layout, recompute: str | dict[str, Any] | None = None) -> float:
        """A value <= estimate(...).step_time_s for `lo` (with `recompute` instead of its own,
        if given: a mode, or a Layout update from planner candidates.recompute_choices) under
        any order, ZeRO stage and network (the module docstring's f(c) <= f(t))."""
        modules = None
        if isinstance(recompute, dict):
            if recompute["recompute_method"] is not None:
                lo, recompute = lo.with_update(recompute), None
            else:
                modules, recompute = recompute["recompute_modules"], recompute["recompute"]
        if recompute is None and is_block_recompute(lo):
            # Block recompute on the even split: recomputed layers at full cost, the rest plain.
            full_d, full_m, _ = self.compute_s(lo, "full")
            plain_d, plain_m, _ = self.compute_s(lo, "none")
            return self._schedule_s(lo, full_d, full_m, plain=(plain_d, plain_m))
        per_dense, per_moe, _ = self.compute_s(lo, recompute, modules)
        return self._schedule_s(lo, per_dense, per_moe)

    # -------------------------------------------------------------- bounds of a placement

    def placement_bound_s(
        self, lo: Layout, span: Span | None = None, *, with_dp: bool = False
    ) -> float:
        """A value <= estimate(...).step_time_s for `lo` (this order) under any ZeRO stage, or,
        with_dp, under its own ZeRO stage. `span` is topology.spans(cluster, lo), passed in when
        the caller has it cached."""
        if span is None:
            span = self.spans(lo)
        return self.placement_bounds_s(lo, [span], with_dp=with_dp)[0]

    def placement_bounds_s(
        self,
        lo: Layout,
        spans: list[Span],
        *,
        with_dp: bool = False,
        counts: list[Counts] | None = None,
        any_split: bool = False,
        min_max_layers: int = 0,
    ) -> list[float]:
        """placement_bound_s of `lo` on each of `spans` (one per order). The cost model reads the
        order only through the spans, so `lo` may carry any order (planner/search/table.py passes
        the shape with the canonical order). `counts`: (dense, MoE) layers per rank of the split
        scored (default: the even split; with_dp only for the even split). `any_split`: a bound
        for every split (SearchSpace.stage_split "search", planner/search/partition.py), and with
        `min_max_layers` N* (some rank of every split considered runs >= N* layers,
        partition.fewest_max_layers) the slowest rank runs at least the cheapest N* layers."""
        assert not (with_dp and (counts is not None or any_split)), "DP terms: even split only"
        keys = self._layer_keys(lo)
        schedule: dict[tuple, float] = {}  # (dense, MoE layer s, plain) -> schedule s
        p2p: dict[tuple[int, ...], float] = {}  # PP span -> pipeline p2p seconds
        payload = self._pp_payload(lo) if lo.pp > 1 else 0.0
        out = []
        for span in spans:
            full, plain = self._totals_s(lo, span, keys)
            first, last = self.end_costs(lo, span)
            ends = (first.tp_s, last.tp_s)
            core_s = schedule.get((full, plain, ends))
            if core_s is None:
                core_s = schedule[(full, plain, ends)] = self._schedule_s(
                    lo, *full, counts, any_split, min_max_layers, plain=plain, ends=ends
                )
            pp_s = 0.0
            if lo.pp > 1:
                pp_span = tuple(span[Group.PP])
                pp_s = p2p.get(pp_span)
                if pp_s is None:
                    # the estimate's own PP price (Pricer.estimate), curves included
                    one = p2p_s(payload, self.cluster, pp_span, self.comm)
                    pp_s = p2p[pp_span] = 2 * (lo.pp - 1) * one
            if with_dp:
                out.append((core_s + pp_s + self.dp_optimizer_s(lo, span)) * SAFETY)
            else:
                out.append((core_s + pp_s) * SAFETY)
        return out

    def layer_totals(self, lo: Layout, span: Span) -> LayerTotals:
        """Per-layer seconds per micro-batch of `lo` on `span` (LayerTotals; the CP-SAT stage
        partition tabulates the stage time of every split with them)."""
        full, plain = self._totals_s(lo, span, self._layer_keys(lo))
        times = self.layer_times(lo)
        first, last = self.end_costs(lo, span)
        return LayerTotals(full, plain, times.head_s + last.tp_s, times.embed_s + first.tp_s)

    def dp_optimizer_s(self, lo: Layout, span: Span) -> float:
        """estimate(...)'s dp_comm + optimizer terms for `lo` on `span` (this ZeRO stage), and
        the FSDP2 copies it reports under compute (Pricer.stage_optimizer_s holds both), from
        the same per-stage pieces (stage_dp_parts, stage_optimizer_s). Both terms are maxima over
        stages; the stages of _peak_candidates hold every distinct value (a middle stage's
        parameters and compute depend only on its layer counts), so this is the estimate's own
        value, and any subset of stages would still give a lower bound."""
        key = (
            _dp_key(lo),
            *(tuple(span.get(g, ())) for g in DP_GROUPS),
        )
        found = self._dp.get(key)
        if found is not None:
            return found
        last = lo.pp - 1
        dp_s = opt_s = 0.0
        for r, counts in self._peak_candidates(lo):
            # The stage's forward + backward per micro-batch, summed as estimate() sums it.
            compute_s = self.stage_compute_s(lo, counts, r == last, r == 0)
            sp = self.stage_params(lo, counts, r)
            exposed = self.stage_dp_parts(lo, sp, compute_s, span, r).exposed_s
            dp_s = max(dp_s, exposed)
            opt_s = max(opt_s, self.stage_optimizer_s(lo, sp))
        found = self._dp[key] = dp_s + opt_s
        return found

    # ------------------------------------------------------------------------- memory

    def peak_memory_gib(self, lo: Layout, stop_above: float = math.inf) -> float:
        """estimate(...).peak_memory_gib for `lo` (any order), without the time terms.

        Only the stages that can hold the peak are evaluated: the first and the last, and of the
        middle stages with the same (dense, MoE) layer counts only the first. A middle stage's
        memory depends on its position only through the in-flight micro-batches
        (pipeline.inflight_chunks, non-increasing in the rank): its parameters, states and
        buffers are those of every middle stage with the same layer counts, and its activations
        and allocator reserve grow with the in-flight count, so the total of a later such stage
        is never larger (float sums and products are monotone too). The max is therefore exact.

        With `stop_above`, it may return early a value > stop_above that is the peak of the
        stages seen so far: a lower bound on the peak, enough to decide that `lo` does not fit
        and is not the closest to fitting. The last stage (logits) is tried first.
        """
        peak = 0.0
        all_counts = self.stage_counts(lo)
        for r, _counts in self._peak_candidates(lo):
            peak = max(peak, self.stage_total_gib(lo, r, all_counts))
            if peak > stop_above:
                break
        return peak

    # ------------------------------------------------------------------------- helpers

    def _layer_keys(self, lo: Layout) -> tuple[tuple, Layout | None, tuple]:
        """(layer_key of lo, lo without block recompute or None, its layer_key or ())."""
        if not is_block_recompute(lo):
            return self.layer_key(lo), None, ()
        plain = without_block_recompute(lo)
        return self.layer_key(lo), plain, self.layer_key(plain)

    def _totals_s(
        self, lo: Layout, span: Span, keys: tuple[tuple, Layout | None, tuple]
    ) -> tuple[tuple[float, float], tuple[float, float] | None]:
        """((dense, MoE) layer seconds, the same without block recompute or None) on `span`."""
        layer_key, plain_lo, plain_key = keys
        tp, cp, ep = LAYER_GROUPS  # (bound once: an Enum attribute lookup is slow here)
        groups = (tuple(span[tp]), tuple(span[cp]), tuple(span[ep]))
        full = self._totals.get((layer_key, *groups))
        if full is None:
            costs = self.layer_costs(lo, span, None, layer_key)
            full = self._totals[(layer_key, *groups)] = _totals(costs)
        if plain_lo is None:
            return full, None
        # Block recompute: the layers it leaves alone cost what they cost without it.
        plain = self._totals.get((plain_key, *groups))
        if plain is None:
            costs = self.layer_costs(plain_lo, span, None, plain_key)
            plain = self._totals[(plain_key, *groups)] = _totals(costs)
        return full, plain

    def _schedule_s(
        self,
        lo: Layout,
        cd: float,
        cm: float,
        counts: list[Counts] | None = None,
        any_split: bool = False,
        min_max_layers: int = 0,
        plain: tuple[float, float] | None = None,
        ends: tuple[float, float] = (0.0, 0.0),
    ) -> float:
        """m * t_max + (sum t - t_max) / vp with per-layer seconds cd (dense) and cm (MoE) on the
        split `counts` (default even), the first and last stage's exposed TP beyond their
        layers `ends` added (Pricer.end_costs; none for the order-free bounds: a term >= 0).
        any_split: sum(t) is the same for every split and t_max >= sum(t) / pp, and the
        schedule is non-decreasing in t_max (m >= 1 >= 1/vp), so t_max = sum(t) / pp bounds
        every split (planner/search/partition.py free_step_s); so do the cheapest N* layers
        when some rank runs >= N* layers (head and embedding times >= 0).
        """
        times = self.layer_times(lo)
        counts = self.stage_counts(lo) if counts is None else counts
        if plain is not None and any_split:
            cd, cm = plain  # no layer costs less than without recompute: a bound for any split
            plain = None
        # LayerTotals.stage_s, inlined (this runs for every shape and placement popped)
        if plain is None:
            stage = [nd * cd + nm * cm for nd, nm in counts]
        else:
            pd, pm = plain
            stage = []
            for nd, nm in counts:
                xd, xm = recomputed_layers(lo, (nd, nm))
                stage.append(xd * cd + (nd - xd) * pd + xm * cm + (nm - xm) * pm)
        # in stage_terms' order: embedding, then the head, each with its exposed TP (`ends`,
        # Pricer.end_costs on the placement's span; 0 for the order-free bounds)
        stage[0] += times.embed_s + ends[0]
        stage[-1] += times.head_s + ends[1]
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        if any_split:
            # Some rank runs N* = min_max_layers layers, d of them dense with d in [N* - (MoE
            # layers), min(N*, dense layers)]: at least the cheapest such mix.
            n_star, k = min_max_layers, self.model.num_dense_layers
            d = min(n_star, k) if cd < cm else max(0, n_star - (self.model.num_layers - k))
            t_max = max(sum(stage) / lo.pp, d * cd + (n_star - d) * cm)
        else:
            t_max = max(stage)
        if lo.pp_schedule == "dualpipe":
            # estimate(): m * (slowest pair mean) + (pp/2 - 1)(t_pair + recompute - compute/3),
            # with t_pair >= its compute + recompute, so the bubble is >= (pp/2 - 1) 2/3 t_pair;
            # the slowest pair's mean is >= the stage mean, and with the even split it is the
            # pair mean of these stage times (non-decreasing in every t_r).
            p = lo.pp
            if any_split:
                t_pair = sum(stage) / p
            else:
                t_pair = max((stage[r] + stage[p - 1 - r]) / 2 for r in range(p // 2))
            return m * t_pair + max(0, p // 2 - 1) * 2 / 3 * t_pair
        return m * t_max + (sum(stage) - t_max) / lo.vp

    def _peak_candidates(self, lo: Layout) -> list[tuple[int, Counts]]:
        """(rank, layer counts) of the stages that can hold the peak: last, first, and the first
        middle stage of each distinct layer count (see peak_memory_gib)."""
        dualpipe = lo.pp_schedule == "dualpipe"
        key = (lo.pp, lo.vp, dualpipe, split_slots(lo))
        found = self._candidates.get(key)
        if found is None:
            counts = self.stage_counts(lo)
            last = len(counts) - 1
            found = [(last, counts[last])] + ([(0, counts[0])] if last > 0 else [])
            seen: set[tuple] = set()
            for r in range(1, last):
                # DualPipe: every rank holds the same in-flight count, and its memory depends on
                # its own and its mirror stage's layers, and on which of the two is the early
                # chunk (stage.stage_memory); ranks alike in all three have equal memory.
                mr = last - r
                alike = (counts[r], counts[mr], r < mr) if dualpipe else counts[r]
                if alike not in seen:
                    seen.add(alike)
                    found.append((r, counts[r]))
            self._candidates[key] = found
        return found


def _totals(costs: Any) -> tuple[float, float]:
    """(dense, MoE) stage.layer_cost totals of a ByKind of LayerCost (0 for a kind absent)."""
    return (
        0.0 if costs.dense is None else costs.dense.total_s,
        0.0 if costs.moe is None else costs.moe.total_s,
    )
