"""A cheap, valid lower bound on step time for a layout, whatever its order, ZeRO stage or placement.

`cost_models.estimate` composes a step as (sum of its breakdown terms, each >= 0):
    m * t_crit + (sum_r t_r - t_crit) / vp + pp_comm + dp_comm + optimizer,
where t_r is stage r's time per micro-batch (compute + recompute + exposed TP/CP/EP traffic) and
t_crit the slowest stage (cost_models/pipeline.py, schedule_time_s). Dropping the communication
terms gives per-stage times c_r <= t_r, and f(t) = m * max(t) + (sum(t) - max(t)) / vp is
non-decreasing in every t_r when m >= 1 >= 1/vp, so f(c) <= f(t) <= step time. c_r needs only
the per-layer compute, which does not depend on the order, ZeRO stage or the network, so one
bound serves every placement of a shape. tests/planner/test_sat_bounds.py checks bound <= estimate.

`placement_step_s` is the tighter bound for one placement: the same schedule with the full t_r
(the cost model's own per-layer cost on that placement's spans) plus the pipeline p2p term; it
leaves out only dp_comm and optimizer (both >= 0). With `with_dp=True` it adds those two terms as
the estimate computes them (`dp_optimizer_s`, per ZeRO stage, a handful of stages instead of the
estimate's loop over all of them), which makes it the step time itself up to float summation
order. Either way it is shaved by SAFETY (1e-9 relative) so that summation order cannot lift it
above the estimate.

`peak_memory_gib` is the estimate's own peak memory (same cost_models functions, same order), for
deciding whether a shape fits without its communication terms; tests/planner/test_sat_bounds.py
checks it equals estimate(...).peak_memory_gib exactly.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from cost_models import comm, topology
from cost_models.calibration import calibration_for_cluster
from cost_models.compute import LayerTime, layer_time, lm_head_time, tokens_per_gpu
from cost_models.memory import StageParams, layer_activation_bytes, stage_params, state_bytes
from cost_models.pipeline import num_microbatches, stage_layers
from cost_models.specs import Cluster, Layout, ModelSpec, Workload
from cost_models.stage import (
    BF16_BYTES,
    layer_cost,
    recomputed_layers,
    stage_dp_s,
    stage_memory,
    stage_optimizer_s,
)

SAFETY = 1 - 1e-9
_NOT_IN_LAYER_COST = ("order", "zero_stage", "pp", "dp", "vp")
_NOT_IN_STAGE_PARAMS = ("order", "zero_stage", "recompute", "micro_batch")


class LayerCosts(NamedTuple):
    """(dense, MoE) per-layer seconds, the same without block recompute (None: no block
    recompute), LM head seconds; per micro-batch (StepLowerBound.placement_layer_costs_s)."""

    full: tuple[float, float]
    plain: tuple[float, float] | None
    head_s: float


class StepLowerBound:
    """Lower bounds on step time, with the per-layer compute cached by what it depends on."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self.cal = calibration_for_cluster(cluster)
        self._layers: dict[tuple, tuple[LayerTime | None, LayerTime | None, LayerTime]] = {}
        self._counts: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._params: dict[tuple, StageParams] = {}
        self._dp: dict[tuple, float] = {}
        self._acts: dict[tuple, dict[tuple[bool, str], float]] = {}
        self._layer_costs: dict[tuple, tuple[float, float]] = {}
        gpu = cluster.gpu
        self.hbm_bytes_per_s = gpu.hbm_bandwidth_gb_per_s * 1e9 * self.cal.hbm_efficiency
        self._candidates: dict[tuple[int, int], list[tuple[int, tuple[int, int]]]] = {}

    def _layer_times(self, lo: Layout) -> tuple[LayerTime | None, LayerTime | None, LayerTime]:
        # compute.layer_time reads tokens per GPU (micro_batch, cp), tp, ep, etp and sequence
        # parallelism; nothing else of the layout.
        key = (lo.tp, lo.cp, lo.micro_batch, lo.ep, lo.etp, lo.sequence_parallel)
        found = self._layers.get(key)
        if found is None:
            m, gpu, cal, w = self.model, self.cluster.gpu, self.cal, self.workload
            dense = layer_time(m, gpu, cal, w, lo, is_moe=False) if m.num_dense_layers else None
            moe = layer_time(m, gpu, cal, w, lo, is_moe=True) if m.num_moe_layers else None
            found = self._layers[key] = (dense, moe, lm_head_time(m, gpu, cal, w, lo))
        return found

    def _stage_counts(self, lo: Layout) -> list[tuple[int, int]]:
        key = (lo.pp, lo.vp)
        found = self._counts.get(key)
        if found is None:
            first_moe = self.model.num_dense_layers
            found = self._counts[key] = [
                (sum(1 for i in s if i < first_moe), sum(1 for i in s if i >= first_moe))
                for s in stage_layers(self.model, lo)
            ]
        return found

    def compute_s(
        self, lo: Layout, recompute: str | None = None, modules: tuple[str, ...] | None = None
    ) -> tuple[float, float, float]:
        """(dense layer, MoE layer, LM head) compute seconds per micro-batch, recompute included
        (`recompute` and selective `modules` instead of the layout's own, if given); 0 for a
        layer kind the model lacks. A layout's own block recompute is priced as none (some of
        its layers recompute, stage.recomputed_layers): a per-layer lower bound."""
        dense, moe, head = self._layer_times(lo)
        rc = lo.recompute if recompute is None else recompute
        if recompute is None and rc == "full" and lo.recompute_method == "block":
            rc = "none"
        mods = lo.selective_modules if modules is None else modules

        def cost(t: LayerTime | None) -> float:
            if t is None:
                return 0.0
            return t.forward_s + t.backward_s + t.recompute_s(rc, mods)

        return cost(dense), cost(moe), head.forward_s + head.backward_s

    def step_s(self, lo: Layout, recompute: str | dict[str, Any] | None = None) -> float:
        """A value <= estimate(...).step_time_s for `lo` (with `recompute` instead of its own,
        if given: a mode, or a Layout update from candidates.recompute_choices) under any order,
        ZeRO stage and network."""
        modules = None
        if isinstance(recompute, dict):
            if recompute["recompute_method"] is not None:
                lo, recompute = lo.model_copy(update=recompute), None
            else:
                modules, recompute = recompute["recompute_modules"], recompute["recompute"]
        if recompute is None and lo.recompute == "full" and lo.recompute_method == "block":
            # Block recompute on the even split: recomputed layers at full cost, the rest plain.
            full_d, full_m, _ = self.compute_s(lo, "full")
            plain_d, plain_m, _ = self.compute_s(lo, "none")
            return self._schedule_s(lo, full_d, full_m, plain=(plain_d, plain_m))
        per_dense, per_moe, _ = self.compute_s(lo, recompute, modules)
        return self._schedule_s(lo, per_dense, per_moe)

    def placement_step_s(
        self, lo: Layout, span: dict[str, list[int]] | None = None, *, with_dp: bool = False
    ) -> float:
        """A value <= estimate(...).step_time_s for `lo` (this order) under any ZeRO stage, or,
        with_dp, under its own ZeRO stage. `span` is topology.spans(cluster, lo), passed in when
        the caller has it cached."""
        if span is None:
            span = topology.spans(self.cluster, lo, moe=self.model.moe is not None)
        return self.placement_bounds_s(lo, [span], with_dp=with_dp)[0]

    def placement_bounds_s(
        self,
        lo: Layout,
        spans: list[dict[str, list[int]]],
        *,
        with_dp: bool = False,
        counts: list[tuple[int, int]] | None = None,
        any_split: bool = False,
        min_max_layers: int = 0,
    ) -> list[float]:
        """placement_step_s of `lo` on each of `spans` (one per order). The cost model reads the
        order only through the spans, so `lo` may carry any order (planner/search/table.py passes
        the shape with the canonical order). `counts`: (dense, MoE) layers per rank of the split
        scored (default: the even split; with_dp only for the even split). `any_split`: a bound
        for every split (SearchSpace.stage_split "search", planner/search/partition.py), and with
        `min_max_layers` N* (some rank of every split considered runs >= N* layers,
        partition.fewest_max_layers) the slowest rank runs at least the cheapest N* layers."""
        assert not (with_dp and (counts is not None or any_split)), "DP terms: even split only"
        cl = self.cluster
        # stage.layer_cost reads neither pp, dp, vp, the ZeRO stage nor the order, and of
        # the spans only TP, CP and EP, so orders and shapes that differ only there share it.
        layer_key = tuple(v for k, v in lo.__dict__.items() if k not in _NOT_IN_LAYER_COST)
        block = lo.recompute == "full" and lo.recompute_method == "block"
        plain_lo = plain_key = None
        if block:
            plain_lo = lo.model_copy(
                update={"recompute": "none", "recompute_method": None, "recompute_num_layers": None}
            )
            plain_key = tuple(
                v for k, v in plain_lo.__dict__.items() if k not in _NOT_IN_LAYER_COST
            )
        schedule: dict[tuple[float, float], float] = {}  # (dense, MoE layer s) -> schedule s
        p2p: dict[tuple[int, ...], float] = {}  # PP span -> pipeline p2p seconds
        payload = 0.0
        if lo.pp > 1:
            t = tokens_per_gpu(self.workload, lo)
            payload = t * self.model.hidden_size * BF16_BYTES / lo.tp
        out = []
        for span in spans:
            key = (layer_key, tuple(span["tp"]), tuple(span["cp"]), tuple(span["ep"]))
            costs = self._layer_costs.get(key)
            if costs is None:
                costs = self._layer_costs[key] = self._layer_costs_s(lo, span)
            plain = None
            if block:
                # Block recompute: the layers it leaves alone cost what they cost without it.
                pkey = (plain_key, *key[1:])
                plain = self._layer_costs.get(pkey)
                if plain is None:
                    plain = self._layer_costs[pkey] = self._layer_costs_s(plain_lo, span)
            core_s = schedule.get((costs, plain))
            if core_s is None:
                core_s = schedule[(costs, plain)] = self._schedule_s(
                    lo, *costs, counts, any_split, min_max_layers, plain=plain
                )
            pp_s = 0.0
            if lo.pp > 1:
                pp_span = tuple(span["pp"])
                pp_s = p2p.get(pp_span)
                if pp_s is None:
                    tier = topology.outermost_tier(cl, pp_span)
                    pp_s = p2p[pp_span] = 2 * (lo.pp - 1) * comm.p2p_time_s(payload, tier)
            if with_dp:
                out.append((core_s + pp_s + self.dp_optimizer_s(lo, span)) * SAFETY)
            else:
                out.append((core_s + pp_s) * SAFETY)
        return out

    def placement_layer_costs_s(self, lo: Layout, span) -> LayerCosts:
        """Per-layer seconds per micro-batch of `lo` on `span` as estimate() sums them per stage
        (stage.layer_cost's total: compute, recompute, exposed TP/CP/EP), the layers block
        recompute leaves alone (None without it) and the LM head (planner/search/partition.py
        tabulates the stage time of every split with them)."""
        layer_key = tuple(v for k, v in lo.__dict__.items() if k not in _NOT_IN_LAYER_COST)
        key = (layer_key, tuple(span["tp"]), tuple(span["cp"]), tuple(span["ep"]))
        full = self._layer_costs.get(key)
        if full is None:
            full = self._layer_costs[key] = self._layer_costs_s(lo, span)
        plain = None
        if lo.recompute == "full" and lo.recompute_method == "block":
            plain_lo = lo.model_copy(
                update={"recompute": "none", "recompute_method": None, "recompute_num_layers": None}
            )
            pkey = (
                tuple(v for k, v in plain_lo.__dict__.items() if k not in _NOT_IN_LAYER_COST),
                *key[1:],
            )
            plain = self._layer_costs.get(pkey)
            if plain is None:
                plain = self._layer_costs[pkey] = self._layer_costs_s(plain_lo, span)
        head = self._layer_times(lo)[2]
        return LayerCosts(full, plain, head.forward_s + head.backward_s)

    def dp_optimizer_s(self, lo: Layout, span: dict[str, list[int]]) -> float:
        """estimate(...)'s dp_comm + optimizer terms for `lo` on `span` (this ZeRO stage), from
        the same per-stage functions (stage.stage_dp_s, stage_optimizer_s). Both terms
        are maxima over stages; the stages of _peak_candidates hold every distinct value (a
        middle stage's parameters and compute depend only on its layer counts), so this is the
        estimate's own value, and any subset of stages would still give a lower bound."""
        key = (
            *(v for k, v in lo.__dict__.items() if k not in ("order", "recompute")),
            tuple(span["dp_cp"]),
            tuple(span.get("edp", ())),
            tuple(span.get("dp_shard", ())),
            tuple(span.get("dp_replicate", ())),
        )
        found = self._dp.get(key)
        if found is not None:
            return found
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        dense, moe, head = self._layer_times(lo)
        last = lo.pp - 1
        dp_s = opt_s = 0.0
        params_key = self._params_key(lo)
        for r, (nd, nm) in self._peak_candidates(lo):
            # The stage's forward + backward per micro-batch, summed as estimate() sums it.
            compute_s = 0.0
            if nd and dense is not None:
                compute_s += nd * (dense.forward_s + dense.backward_s)
            if nm and moe is not None:
                compute_s += nm * (moe.forward_s + moe.backward_s)
            if r == last:
                compute_s += head.forward_s + head.backward_s
            sp = self._stage_params(lo, (nd, nm), r, params_key)
            w = self.workload
            exposed, _ = stage_dp_s(
                self.cluster,
                self.cal,
                lo,
                sp,
                compute_s,
                m,
                span,
                w.dp_bucket_elements,
                w.cross_site_sync_every,
                stage=r,
                dp_sync=w.dp_sync,
            )
            dp_s = max(dp_s, exposed)
            opt_s = max(opt_s, stage_optimizer_s(lo, sp, self.hbm_bytes_per_s, w))
        found = self._dp[key] = dp_s + opt_s
        return found

    def _layer_costs_s(self, lo: Layout, span: dict[str, list[int]]) -> tuple[float, float]:
        """(dense, MoE) layer seconds per micro-batch on `span`: stage.layer_cost's total."""
        m_, cl, w = self.model, self.cluster, self.workload
        dense, moe, _ = self._layer_times(lo)
        cd = 0.0 if dense is None else layer_cost(m_, cl, w, lo, dense, span, is_moe=False).total_s
        cm = 0.0 if moe is None else layer_cost(m_, cl, w, lo, moe, span, is_moe=True).total_s
        return cd, cm

    def _schedule_s(
        self,
        lo: Layout,
        cd: float,
        cm: float,
        counts: list[tuple[int, int]] | None = None,
        any_split: bool = False,
        min_max_layers: int = 0,
        plain: tuple[float, float] | None = None,
    ) -> float:
        """m * t_max + (sum t - t_max) / vp with per-layer seconds cd (dense) and cm (MoE) on the
        split `counts` (default even). any_split: sum(t) is the same for every split and
        t_max >= sum(t) / pp, and the schedule is non-decreasing in t_max (m >= 1 >= 1/vp), so
        t_max = sum(t) / pp bounds every split (planner/search/partition.py free_step_s); so do the
        cheapest N* layers when some rank runs >= N* layers (head time >= 0)."""
        head = self._layer_times(lo)[2]
        counts = self._stage_counts(lo) if counts is None else counts
        if plain is not None and any_split:
            cd, cm = plain  # no layer costs less than without recompute: a bound for any split
        if plain is not None and not any_split:
            # Block recompute (stage.recomputed_layers): recomputed layers at cd / cm, the rest
            # at the plain costs, as estimate() sums them.
            stage = []
            for nd, nm in counts:
                xd, xm = recomputed_layers(lo, (nd, nm))
                stage.append(xd * cd + (nd - xd) * plain[0] + xm * cm + (nm - xm) * plain[1])
        else:
            stage = [nd * cd + nm * cm for nd, nm in counts]
        stage[-1] += head.forward_s + head.backward_s
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

    def _stage_params(
        self, lo: Layout, counts: tuple[int, int], r: int, key: tuple | None = None
    ) -> StageParams:
        """memory.stage_params, cached; `key` is _params_key(lo) when the caller has it."""
        full = (self._params_key(lo) if key is None else key, counts, r)
        found = self._params.get(full)
        if found is None:
            found = self._params[full] = stage_params(self.model, lo, counts[0], counts[1], r)
        return found

    @staticmethod
    def _params_key(lo: Layout) -> tuple:
        # memory.stage_params reads the degrees and the stage position, not the recompute mode,
        # ZeRO stage, order or micro-batch, so the shapes of one base share it.
        return tuple(v for k, v in lo.__dict__.items() if k not in _NOT_IN_STAGE_PARAMS)

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
        model, w = self.model, self.workload
        m = num_microbatches(w.global_batch_seqs, lo)
        kinds = [False] * bool(model.num_dense_layers) + [True] * bool(model.num_moe_layers)
        # Activation bytes do not depend on the ZeRO stage or the order.
        acts_key = tuple(v for k, v in lo.__dict__.items() if k not in ("order", "zero_stage"))
        acts_per_mb = self._acts.get(acts_key)
        if acts_per_mb is None:
            acts_per_mb = self._acts[acts_key] = {
                (k, rc): layer_activation_bytes(model, w, lo, is_moe=k, recompute=rc)
                for k in kinds
                for rc in {lo.recompute, "none"}
            }
        peak = 0.0
        params_key = self._params_key(lo)
        all_counts = self._stage_counts(lo)
        dualpipe = lo.pp_schedule == "dualpipe"
        for r, counts in self._peak_candidates(lo):
            sp = self._stage_params(lo, counts, r, params_key)
            mirror = msp = None
            if dualpipe:  # rank r also holds stage pp - 1 - r (as estimate())
                mr = len(all_counts) - 1 - r
                mirror = all_counts[mr]
                msp = self._stage_params(lo, mirror, mr, params_key)
            weights, grads, optim = state_bytes(sp, lo, m, w, msp)
            stage = stage_memory(
                model, w, lo, r, counts, acts_per_mb, m, weights, grads, optim, mirror=mirror
            )
            peak = max(peak, stage.total_gib)
            if peak > stop_above:
                break
        return peak

    def _peak_candidates(self, lo: Layout) -> list[tuple[int, tuple[int, int]]]:
        """(rank, layer counts) of the stages that can hold the peak: last, first, and the first
        middle stage of each distinct layer count (see peak_memory_gib)."""
        dualpipe = lo.pp_schedule == "dualpipe"
        key = (lo.pp, lo.vp, dualpipe)
        found = self._candidates.get(key)
        if found is None:
            counts = self._stage_counts(lo)
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
