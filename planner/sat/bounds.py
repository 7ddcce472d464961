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
leaves out only dp_comm and optimizer (both >= 0), which need the per-stage parameter loop that
makes a full estimate expensive. It is shaved by SAFETY so float summation order cannot lift it
above the estimate.

`peak_memory_gib` is the estimate's own peak memory (same cost_models functions, same order), for
deciding whether a shape fits without its communication terms; tests/planner/test_sat_bounds.py
checks it equals estimate(...).peak_memory_gib exactly.
"""

from __future__ import annotations

from cost_models import comm, topology
from cost_models.calibration import calibration_for
from cost_models.compute import LayerTime, layer_time, lm_head_time, tokens_per_gpu
from cost_models.estimate import BF16_BYTES, _layer_cost, _stage_memory
from cost_models.memory import layer_activation_bytes, stage_params, state_bytes
from cost_models.pipeline import stage_layers
from cost_models.specs import Cluster, Layout, ModelSpec, Workload

SAFETY = 1 - 1e-9


class StepLowerBound:
    """Lower bounds on step time, with the per-layer compute cached by what it depends on."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self.cal = calibration_for(cluster.gpu.generation)
        self._layers: dict[tuple, tuple[LayerTime | None, LayerTime | None, LayerTime]] = {}
        self._counts: dict[tuple[int, int], list[tuple[int, int]]] = {}

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

    def step_s(self, lo: Layout, counts: list[tuple[int, int]] | None = None) -> float:
        """A value <= estimate(...).step_time_s for `lo` under any order, ZeRO stage and network.
        `counts`: (dense, MoE) layers per rank of the split scored (default: the even split)."""
        dense, moe, head = self._layer_times(lo)

        def cost(t: LayerTime | None) -> float:
            return 0.0 if t is None else t.forward_s + t.backward_s + t.recompute_s(lo.recompute)

        per_dense, per_moe = cost(dense), cost(moe)
        counts = self._stage_counts(lo) if counts is None else counts
        stage = [nd * per_dense + nm * per_moe for nd, nm in counts]
        stage[-1] += head.forward_s + head.backward_s
        m = self.workload.global_batch_seqs // (lo.micro_batch * lo.dp)
        t_max = max(stage)
        return m * t_max + (sum(stage) - t_max) / lo.vp

    def placement_step_s(
        self,
        lo: Layout,
        span: dict[str, list[int]] | None = None,
        counts: list[tuple[int, int]] | None = None,
        any_split: bool = False,
    ) -> float:
        """A value <= estimate(...).step_time_s for `lo` (this order) under any ZeRO stage.
        `span` is topology.spans(cluster, lo), passed in when the caller has it cached."""
        m_, cl, w = self.model, self.cluster, self.workload
        span = topology.spans(cl, lo) if span is None else span
        dense, moe, head = self._layer_times(lo)
        per_dense = 0.0 if dense is None else _layer_cost(m_, cl, w, lo, dense, span, is_moe=False)
        per_moe = 0.0 if moe is None else _layer_cost(m_, cl, w, lo, moe, span, is_moe=True)
        cd = 0.0 if dense is None else per_dense.total_s
        cm = 0.0 if moe is None else per_moe.total_s
        counts = self._stage_counts(lo) if counts is None else counts
        stage = [nd * cd + nm * cm for nd, nm in counts]
        stage[-1] += head.forward_s + head.backward_s
        m = w.global_batch_seqs // (lo.micro_batch * lo.dp)
        # any_split: a bound for every split; sum(stage) does not depend on it and
        # max(stage) >= sum(stage) / pp (planner/sat/partition.py free_step_s has the proof).
        t_max = sum(stage) / lo.pp if any_split else max(stage)
        pp_s = 0.0
        if lo.pp > 1:
            payload = tokens_per_gpu(w, lo) * m_.hidden_size * BF16_BYTES / lo.tp
            pp_s = (
                2 * (lo.pp - 1) * comm.p2p_time_s(payload, topology.outermost_tier(cl, span["pp"]))
            )
        return (m * t_max + (sum(stage) - t_max) / lo.vp + pp_s) * SAFETY

    def peak_memory_gib(self, lo: Layout) -> float:
        """estimate(...).peak_memory_gib for `lo` (any order), without the time terms."""
        model, w = self.model, self.workload
        m = w.global_batch_seqs // (lo.micro_batch * lo.dp)
        kinds = [False] * bool(model.num_dense_layers) + [True] * bool(model.num_moe_layers)
        acts_per_mb = {
            (k, rc): layer_activation_bytes(model, w, lo, is_moe=k, recompute=rc)
            for k in kinds
            for rc in {lo.recompute, "none"}
        }
        peak = 0.0
        for r, counts in enumerate(self._stage_counts(lo)):
            sp = stage_params(model, lo, counts[0], counts[1], r)
            weights, grads, optim = state_bytes(sp, lo, m)
            stage = _stage_memory(model, w, lo, r, counts, acts_per_mb, m, weights, grads, optim)
            peak = max(peak, stage.total_gib)
        return peak
