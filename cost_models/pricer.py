"""The Pricer: the one place where a training step is priced.

Built once per (model, cluster, workload), it owns the calibration, the HBM rate, and caches of
the per-layer and per-stage pieces, and composes them into a step (`estimate`). The planner's
lower bounds (cost_models/bounds.py, mixed in) and stage partition read the same pieces, so a
bound and the step it bounds share every formula and every float.

A step, per micro-batch and pipeline stage: layer compute (forward, backward, recompute) plus the
in-layer collectives on the critical path (TP, CP beyond what attention hides, EP all-to-alls);
the pipeline schedule turns stage times into a step; DP gradient / parameter traffic overlaps
with the backward (forward) of the last (first) micro-batch and only the excess is exposed; the
optimizer step is memory-bound; a link tier busier than the step stretches it. Derivations:
docs/cost_model.md.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .bounds import StepBounds
from .calibration import attention_speed_report, calibration_for_cluster, hbm_bytes_per_s
from .commtable import CollectiveBook, p2p_s
from .compute import (
    MOE_ROUTING_BASES,
    LayerTime,
    attention_report,
    embedding_time,
    layer_time,
    lm_head_time,
    model_flops_per_token,
    moe_routing,
    tokens_per_gpu,
)
from .errors import InvalidInput
from .kernels import COMPUTE_TABLES, EXTRAPOLATED, MEASURED, STATUSES, KernelBook
from .memory import (
    StageParams,
    buffer_bytes,
    grad_bytes,
    layer_activation_bytes,
    memory_validated,
    param_gather_bytes,
    stage_params,
    state_bytes,
    weight_bytes,
    zero3_backward_gather_share,
    zero3_gathered_bytes,
)
from .pipeline import (
    dualpipe_bubble_s,
    num_microbatches,
    schedule_time_s,
    split_slots,
    stage_layers,
    with_mtp,
)
from .rankmap import LAYER_GROUPS, Group
from .rules import layout_violations, split_violations
from .specs import Cluster, Estimate, Layout, ModelSpec, StageMemory, Workload
from .stage import (
    ADAM_OP,
    BF16_BYTES,
    CHUNK_CAT_OP,
    CLIP_OP,
    DpExposure,
    LayerActivations,
    LayerCost,
    PeakPhase,
    end_stage_tp_costs,
    grad_bucket_pass_bytes,
    grad_zero_bytes,
    has_fsdp_copies,
    is_block_recompute,
    layer_cost,
    memory_of_stage,
    offload_exposed_s,
    recomputed_layers,
    stage_activation_bytes,
    stage_peak,
    stage_total_gib,
    userbuffers_lookups,
    without_block_recompute,
)
from .stage import fsdp_copies_s as _fsdp_copies_s
from .stage import stage_dp_parts as _stage_dp_parts
from .stage import stage_optimizer_s as _stage_optimizer_s
from .terms import LAYER_FLOWS, LAYER_TERMS, ByKind, Flow, StageTerms, Term, layout_key
from .topology import outermost_tier, placement
from .topology import spans as group_spans
from .units import TFLOPS
from .uplink import shared_cluster

Span = Mapping[str, Sequence[int]]
Counts = tuple[int, int]  # (dense, MoE) layers of one pipeline rank

# Cache keys. Each names the Layout fields a cached piece does NOT read, next to the function
# that reads the rest; tests/unit/cost_models/test_pricer.py changes each left-out field and checks
# the piece does not move.
LAYER_TIME_READS = ("tp", "cp", "micro_batch", "ep", "etp", "sequence_parallel")
"""The Layout fields compute.layer_time and lm_head_time read (tokens per GPU and the splits)."""
DENSE_TIME_READS = ("tp", "cp", "micro_batch", "sequence_parallel")
"""The Layout fields a dense layer's compute.layer_time, lm_head_time and embedding_time read:
LAYER_TIME_READS but the expert splits (ep, etp), which only a MoE layer's time reads. A MoE
model's search tries many EP degrees per (TP, CP, micro-batch): its dense layers, head and
embedding are priced once for all of them."""
SPLIT_SLOTS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
"""The Layout fields that set the layer split (pipeline.layout_chunk_counts): the pieces below
take a stage's layer counts as an argument and read neither."""
NOT_IN_LAYER_COST = ("order", "zero_stage", "pp", "dp", "vp", *SPLIT_SLOTS)
"""stage.layer_cost (and compute.layer_time) read neither pp, dp, vp, the ZeRO stage nor the
order; of the spans only TP, CP and EP."""
NOT_IN_STAGE_PARAMS = ("order", "zero_stage", "recompute", "micro_batch", *SPLIT_SLOTS)
"""memory.stage_params reads the degrees and the stage position only."""
NOT_IN_ACTIVATIONS = ("order", "zero_stage", *SPLIT_SLOTS)
"""A stage's activation bytes (stage.stage_activation_bytes) read neither the ZeRO stage nor
the order."""
LAYER_ACTIVATION_READS = (
    "tp",
    "cp",
    "micro_batch",
    "sequence_parallel",
    "etp",
    "recompute",
    "recompute_modules",
)
"""The Layout fields memory.layer_activation_bytes reads (tokens per GPU, the TP / expert-TP
split, the recompute mode and selective modules): activations_per_mb is priced once per these,
not once per shape."""


_times_key = operator.attrgetter(*LAYER_TIME_READS)
_dense_key = operator.attrgetter(*DENSE_TIME_READS)
_layer_key = layout_key(NOT_IN_LAYER_COST)
_params_key = layout_key(NOT_IN_STAGE_PARAMS)
_acts_key = layout_key(NOT_IN_ACTIVATIONS)
_layer_acts_key = operator.attrgetter(*LAYER_ACTIVATION_READS)


@dataclass(frozen=True, slots=True)
class LayerTimes:
    """Per-layer compute of one layout: each layer kind's LayerTime, the LM head's (last
    pipeline stage) and the input embedding's (first stage)."""

    layers: ByKind[LayerTime]
    head: LayerTime
    head_s: float
    """The LM head's forward + backward seconds."""
    embed: LayerTime
    embed_s: float
    """The input embedding's forward + backward seconds (compute.embedding_time)."""


@dataclass(frozen=True, slots=True)
class StageTail:
    """The per-step terms the stages' DP traffic, optimizer and memory give (estimate's tail):
    maxima over stages, the DP link-busy seconds per tier of the stage that moves the most."""

    dp_total_s: float
    dp_tiers_s: list[float]
    dp_parts: DpExposure | None
    """The exposed DP of the stage that exposes the most, by cause (stage index in dp_stage);
    None where no stage exposes any."""
    dp_stage: int
    optimizer_s: float
    """The slowest stage's stage_optimizer_s (optimizer step + FSDP2 copies)."""
    copies_s: float
    """That stage's FSDP2 copies (stage_fsdp_copies_s), part of optimizer_s, reported under
    compute."""
    memory: tuple[StageMemory, ...]
    tail_stage: int = 0
    """The stage whose tail is optimizer_s."""
    zeroing_bytes: float = 0.0
    """That stage's gradient memset per step (stage.grad_zero_bytes), part of optimizer_s."""
    pass_bytes: float = 0.0
    """That stage's passes over its gradient buckets before their collectives per step
    (stage.grad_bucket_pass_bytes: Megatron's NaN check and pre-scale), part of optimizer_s."""

    @property
    def dp_exposed_s(self) -> float:
        """The step's exposed DP seconds: the maximum over stages, dp_parts' sum."""
        return 0.0 if self.dp_parts is None else self.dp_parts.exposed_s


class Pricer(StepBounds):
    """Prices layouts of one (model, cluster, workload); see the module docstring."""

    def __init__(self, model: ModelSpec, cluster: Cluster, workload: Workload) -> None:
        self.model, self.cluster, self.workload = model, cluster, workload
        self.cal = calibration_for_cluster(cluster)
        self.hbm_bytes_per_s = hbm_bytes_per_s(cluster.gpu, self.cal)
        # The cluster's measured kernel tables price GEMMs and attention where they cover the
        # shape (cost_models.kernels); without them every kernel runs on the efficiency curves.
        kern = cluster.kernels
        self.book = KernelBook(kern) if kern is not None and kern.has_compute else None
        # The per-step tail's own measured kernels (stage.ADAM_OP, CLIP_OP, CHUNK_CAT_OP), where
        # the tables hold them; else every byte of it at the HBM figure.
        rate = self.book.streaming_bytes_per_s if self.book else lambda _op: None
        self.adam_bytes_per_s, self.clip_bytes_per_s, self.chunk_cat_bytes_per_s = (
            rate(op) for op in (ADAM_OP, CLIP_OP, CHUNK_CAT_OP)
        )
        # Measured nccl-tests curves price every collective term they cover (commtable).
        self.comm = CollectiveBook(cluster) if kern is not None and kern.collectives else None
        self._times: dict[tuple, LayerTimes] = {}
        self._dense: dict[tuple, tuple[LayerTime | None, LayerTime, LayerTime]] = {}
        self._costs: dict[tuple, ByKind[LayerCost]] = {}
        self._ends: dict[tuple, tuple[LayerCost, LayerCost]] = {}
        self._tp: dict[tuple, tuple[float, float, tuple[float, ...]]] = {}  # stage.layer_cost's
        self._counts: dict[tuple[int, int, tuple[int, int]], list[Counts]] = {}
        self._params: dict[tuple, StageParams] = {}
        self._acts: dict[tuple, LayerActivations] = {}
        self._stage_bytes: dict[tuple, float] = {}  # stage_memory's activation bytes
        self._flops_per_token: float | None = None
        self._bf16: dict[tuple, tuple[float, float, float, float]] = {}
        super().__init__()

    # ------------------------------------------------------------------------- per layer

    def layer_times(self, lo: Layout) -> LayerTimes:
        """compute.layer_time of each layer kind the model has and compute.lm_head_time (they
        read the LAYER_TIME_READS fields only)."""
        key = _times_key(lo)
        found = self._times.get(key)
        if found is None:
            m, gpu, cal, w, book = self.model, self.cluster.gpu, self.cal, self.workload, self.book
            moe = None
            if m.num_moe_layers:
                moe = layer_time(m, gpu, cal, w, lo, is_moe=True, book=book)
            dense, head, embed = self._dense_times(lo)
            head_s = head.forward_s + head.backward_s
            found = self._times[key] = LayerTimes(
                ByKind(dense, moe), head, head_s, embed, embed.forward_s + embed.backward_s
            )
        return found

    def _dense_times(self, lo: Layout) -> tuple[LayerTime | None, LayerTime, LayerTime]:
        """(dense layer or None, LM head, embedding) LayerTimes of `lo` (DENSE_TIME_READS)."""
        key = _dense_key(lo)
        found = self._dense.get(key)
        if found is None:
            m, gpu, cal, w, book = self.model, self.cluster.gpu, self.cal, self.workload, self.book
            dense = None
            if m.num_dense_layers:
                dense = layer_time(m, gpu, cal, w, lo, is_moe=False, book=book)
            head = lm_head_time(m, gpu, cal, w, lo, book)
            found = self._dense[key] = (dense, head, embedding_time(m, gpu, cal, w, lo))
        return found

    def layer_costs(
        self, lo: Layout, span: Span, cluster: Cluster | None = None, layer_key: tuple = ()
    ) -> ByKind[LayerCost]:
        """stage.layer_cost of each layer kind on `span` (per micro-batch, one GPU); `cluster`
        replaces the Pricer's (the pipeline window's shared uplinks, cost_models/uplink.py).
        `layer_key` is layer_key(lo) when the caller has it."""
        cl = self.cluster if cluster is None else cluster
        tp, cp, ep = LAYER_GROUPS  # (bound once: an Enum attribute lookup is slow here)
        key = (
            layer_key or self.layer_key(lo),
            tuple(span[tp]),
            tuple(span[cp]),
            tuple(span[ep]),
            None if cl is self.cluster else cl.tiers,
        )
        found = self._costs.get(key)
        if found is None:
            times = self.layer_times(lo).layers
            m, cal, w = self.model, self.cal, self.workload

            def cost(t: LayerTime | None, is_moe: bool) -> LayerCost | None:
                if t is None:
                    return None
                return layer_cost(
                    m, cl, cal, w, lo, t, span, is_moe=is_moe, book=self.book, comm=self.comm,
                    tp_memo=self._tp if cl is self.cluster else None,
                )  # fmt: skip

            found = self._costs[key] = ByKind(cost(times.dense, False), cost(times.moe, True))
        return found

    def end_costs(
        self, lo: Layout, span: Span, cluster: Cluster | None = None
    ) -> tuple[LayerCost, LayerCost]:
        """stage.end_stage_tp_costs on the TP group of `span`: (the first stage's embedding,
        the last stage's LM head and loss) TP collectives per micro-batch; `cluster` as in
        layer_costs. They read what the head's LayerTime reads (DENSE_TIME_READS) and the span."""
        cl = self.cluster if cluster is None else cluster
        tp_span = tuple(span[Group.TP])
        key = (_dense_key(lo), tp_span, None if cl is self.cluster else cl.tiers)
        found = self._ends.get(key)
        if found is None:
            head = self.layer_times(lo).head
            found = self._ends[key] = end_stage_tp_costs(
                self.model, cl, self.workload, lo, head, tp_span, self.comm
            )
        return found

    @staticmethod
    def times_key(lo: Layout) -> tuple:
        """What of `lo` layer_times reads (the LAYER_TIME_READS fields)."""
        return _times_key(lo)

    @staticmethod
    def layer_key(lo: Layout) -> tuple:
        """What of `lo` the per-layer cost reads (the fields but NOT_IN_LAYER_COST)."""
        return _layer_key(lo)

    # ------------------------------------------------------------------------- per stage

    def stage_counts(self, lo: Layout, split: tuple[int, ...] | None = None) -> list[Counts]:
        """(dense, MoE) layers per pipeline rank under `split` (layers per chunk; None: the
        layout's own split, pipeline.layout_chunk_counts), the last rank's with the model's
        multi-token-prediction layers (pipeline.with_mtp)."""
        key = (lo.pp, lo.vp, split_slots(lo))
        found = self._counts.get(key) if split is None else None
        if found is None:
            k = self.model.num_dense_layers  # layers [0, k) are dense
            found = []
            for r, s in enumerate(stage_layers(self.model, lo, split)):
                decoder = (sum(1 for i in s if i < k), sum(1 for i in s if i >= k))
                found.append(with_mtp(self.model, lo, r, decoder))
            if split is None:
                self._counts[key] = found
        return found

    def stage_params(self, lo: Layout, counts: Counts, r: int) -> StageParams:
        """memory.stage_params of rank `r` holding `counts` layers."""
        key = (_params_key(lo), counts, r)
        found = self._params.get(key)
        if found is None:
            found = self._params[key] = stage_params(self.model, lo, counts[0], counts[1], r)
        return found

    def stage_compute_s(
        self, lo: Layout, counts: Counts, last: bool, first: bool = False
    ) -> float:
        """Forward + backward seconds per micro-batch of a stage holding `counts` layers (the LM
        head too on the last, the embedding on the first): what its DP traffic overlaps with."""
        times = self.layer_times(lo)
        compute_s = 0.0
        for t, n in ((times.layers.dense, counts[0]), (times.layers.moe, counts[1])):
            if n and t is not None:
                compute_s += n * (t.forward_s + t.backward_s)
        if first:  # in stage_terms' order (the same float)
            compute_s += times.embed_s
        if last:
            compute_s += times.head_s
        return compute_s

    def stage_dp_parts(
        self,
        lo: Layout,
        sp: StageParams,
        compute_s: float,
        span: Span,
        r: int,
        cluster: Cluster | None = None,
        comm: CollectiveBook | None = None,
    ) -> DpExposure:
        """The exposed DP seconds per step of rank `r` by cause, with the link-busy total
        (stage.stage_dp_parts with the workload's bucket size, cross-site sync interval and DP
        framework); `comm` replaces the Pricer's collective curves (a traced copy,
        _comm_report)."""
        w = self.workload
        return _stage_dp_parts(
            self.cluster if cluster is None else cluster,
            self.cal,
            lo,
            sp,
            compute_s,
            num_microbatches(w.global_batch_seqs, lo),
            span,
            w.dp_bucket_elements,
            w.cross_site_sync_every,
            stage=r,
            dp_sync=w.dp_sync,
            comm=self.comm if comm is None else comm,
            dp_accumulation=w.dp_accumulation,
            grad_bytes=grad_bytes(w),
            gather_bytes=param_gather_bytes(w),
            backward_gather_share=zero3_backward_gather_share(sp, lo, w),
        )

    def stage_optimizer_s(self, lo: Layout, sp: StageParams) -> float:
        """The per-step tail of one stage's parameters: the optimizer step
        (stage.stage_optimizer_s: gradient norm, clipping, memory-bound Adam) plus the FSDP2
        copies of the step (stage_fsdp_copies_s, which estimate() reports under compute).
        Both are proportional to the stage's parameters, so the stage partition keeps this
        affine in the layer counts (planner/search/partition.py)."""
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        opt_s = _stage_optimizer_s(
            lo, sp, self.hbm_bytes_per_s, self.workload, self.adam_bytes_per_s,
            self.clip_bytes_per_s, m,
        )  # fmt: skip
        return opt_s + self.stage_fsdp_copies_s(lo, sp)

    def stage_fsdp_copies_s(self, lo: Layout, sp: StageParams) -> float:
        """Seconds per step of one stage's FSDP2 parameter / gradient copies (stage.fsdp_copies_s;
        0 unless Workload.fsdp_copies and ZeRO 2 / 3)."""
        w = self.workload
        if not has_fsdp_copies(lo, w):
            return 0.0
        m = num_microbatches(w.global_batch_seqs, lo)
        return _fsdp_copies_s(lo, sp, m, self.hbm_bytes_per_s, w, self.chunk_cat_bytes_per_s)

    def activations_per_mb(self, lo: Layout) -> LayerActivations:
        """memory.layer_activation_bytes of each layer kind, under the layout's own recompute
        mode and without recompute (stage.LayerActivations)."""
        key = _layer_acts_key(lo)
        found = self._acts.get(key)
        if found is None:
            model, w = self.model, self.workload

            def per_kind(rc: str) -> ByKind[float]:
                return ByKind(
                    layer_activation_bytes(model, w, lo, is_moe=False, recompute=rc)
                    if model.num_dense_layers
                    else None,
                    layer_activation_bytes(model, w, lo, is_moe=True, recompute=rc)
                    if model.num_moe_layers
                    else None,
                )

            none = per_kind("none")
            own = none if lo.recompute == "none" else per_kind(lo.recompute)
            found = self._acts[key] = LayerActivations(own, none)
        return found

    def stage_memory(
        self,
        lo: Layout,
        r: int,
        all_counts: list[Counts],
        acts: LayerActivations | None = None,
    ) -> StageMemory:
        """Memory of rank `r` (stage.stage_memory); under DualPipe it also holds stage
        pp - 1 - r (memory.state_bytes, stage.stage_memory). `acts` is activations_per_mb(lo)
        when the caller has it."""
        parts, phase = self._stage_bytes_of(lo, r, all_counts, acts)
        sp = self.stage_params(lo, all_counts[r], r)
        per = weight_bytes(self.workload, self.cluster.gpu.generation)
        gathered = zero3_gathered_bytes(sp, lo, self.workload, per)
        return memory_of_stage(r, *parts, phase, gathered)

    def stage_total_gib(self, lo: Layout, r: int, all_counts: list[Counts]) -> float:
        """stage_memory(lo, r, all_counts).total_gib, the same float, without building the
        StageMemory (the search's memory checks: bounds.peak_memory_gib)."""
        return stage_total_gib(*self._stage_bytes_of(lo, r, all_counts)[0])

    def _stage_bytes_of(
        self, lo: Layout, r: int, all_counts: list[Counts], acts: LayerActivations | None = None
    ) -> tuple[tuple[float, float, float, float, float], PeakPhase]:
        """(activation, buffer, weight, gradient, optimizer) bytes of rank `r` and the phase
        that holds its peak (stage_memory; stage.stage_peak)."""
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        counts = all_counts[r]
        sp = self.stage_params(lo, counts, r)
        mirror = msp = None
        if lo.pp_schedule == "dualpipe":
            mr = len(all_counts) - 1 - r
            mirror = all_counts[mr]
            msp = self.stage_params(lo, mirror, mr)
        weights, grads, optim = state_bytes(
            sp, lo, m, self.workload, msp, weight_bytes(self.workload, self.cluster.gpu.generation)
        )
        # Activations read neither the ZeRO stage nor the order (NOT_IN_ACTIVATIONS): the search
        # checks several ZeRO stages of a shape, each at the same bytes. The buffers are a few
        # products, read the ZeRO stage (DeepSpeed's ipg bucket) and are not cached.
        key = (_acts_key(lo), r, counts, mirror)
        stage_acts = self._stage_bytes.get(key)
        if stage_acts is None:
            acts = self.activations_per_mb(lo) if acts is None else acts
            stage_acts = self._stage_bytes[key] = stage_activation_bytes(
                self.model, self.workload, lo, r, counts, acts, m, mirror
            )
        layer_acts = acts
        return stage_peak(
            self.workload,
            lo,
            sp,
            counts,
            lambda: self.activations_per_mb(lo) if layer_acts is None else layer_acts,
            (stage_acts, buffer_bytes(self.model, self.workload, lo, m), weights, grads, optim),
            m,
        )

    def rank_terms_s(
        self, lo: Layout, span: Span, rank: int, n_dense: int, n_moe: int
    ) -> tuple[float, float, float]:
        """(stage seconds per micro-batch, exposed DP seconds, tail seconds: stage_optimizer_s,
        the optimizer step and the FSDP2 copies) of pipeline rank `rank` holding these layers on
        `span`: the three per-stage terms estimate() takes (the first as the stage's time, the
        last two as maxima over stages); the CP-SAT stage
        partition tabulates them (planner/search/partition.py)."""
        counts = with_mtp(self.model, lo, rank, (n_dense, n_moe))
        last, first = rank == lo.pp - 1, rank == 0
        totals = self.layer_totals(lo, span)
        stage_s = totals.stage_s(lo, counts)
        if first:
            stage_s += totals.embed_s
        if last:
            stage_s += totals.head_s
        sp = self.stage_params(lo, counts, rank)
        compute_s = self.stage_compute_s(lo, counts, last, first)
        dp_s = self.stage_dp_parts(lo, sp, compute_s, span, rank).exposed_s
        return stage_s, dp_s, self.stage_optimizer_s(lo, sp)

    # ------------------------------------------------------------------------- the step

    def estimate(
        self,
        layout: Layout,
        *,
        layers_per_stage: tuple[int, ...] | None = None,
        spans: Span | None = None,
        uplink_steps: Mapping[int, int] | None = None,
        pipeline_uplink_steps: Mapping[int, int] | None = None,
    ) -> Estimate:
        """Score one layout (cost_models.estimate.estimate documents the arguments). Raises
        InvalidInput (naming the rule) if the layout is illegal."""
        problems = layout_violations(self.model, self.cluster, self.workload, layout)
        if layers_per_stage is not None:
            problems += split_violations(self.model, layout, layers_per_stage)
        if layers_per_stage is not None and split_slots(layout) != (0, 0):
            # TransformerConfig.__post_init__: pipeline_model_parallel_layout "cannot be set
            # with other pipeline layout arguments" (the account_for_* flags among them).
            problems.append(
                "layers_per_stage: a split of its own cannot be given with "
                "account_for_embedding/loss_in_pipeline_split (Megatron-Core sets the split)"
            )
        if problems:
            raise InvalidInput("; ".join(problems))
        m = num_microbatches(self.workload.global_batch_seqs, layout)
        span = self.spans(layout, spans)
        pipe_cluster = shared_cluster(self.cluster, pipeline_uplink_steps)
        counts = self.stage_counts(layout, layers_per_stage)
        per_stage = self.stage_terms(layout, counts, span, pipe_cluster, layers_per_stage)
        crit, bubble_s = self._critical_stage(layout, per_stage, m)
        p2p = p2p_s(self._pp_payload(layout), pipe_cluster, span[Group.PP], self.comm)
        tail = self._stage_tail(
            layout, counts, per_stage, span, shared_cluster(self.cluster, uplink_steps)
        )
        breakdown = {t: m * crit.exposed_s(t) for t in LAYER_TERMS}
        breakdown[Term.PP_COMM] = 2 * (layout.pp - 1) * p2p
        breakdown[Term.DP_COMM] = tail.dp_exposed_s
        breakdown[Term.BUBBLE] = bubble_s
        # The FSDP2 copies run on the compute stream: reported as compute, summed as the
        # stage's tail (stage_optimizer_s) so that the bounds and the partition see one term.
        breakdown[Term.COMPUTE] += tail.copies_s + m * crit.offload_s
        breakdown[Term.OPTIMIZER] = tail.optimizer_s - tail.copies_s
        comm_total = {f: m * crit.total_s(f) for f in LAYER_FLOWS}
        comm_total[Flow.PP] = 2 * m * layout.vp * p2p if layout.pp > 1 else 0.0
        comm_total[Flow.DP] = tail.dp_total_s
        tier_busy = self._tier_busy_s(crit, m, comm_total[Flow.PP], span[Group.PP], tail.dp_tiers_s)
        step_s = _with_link_capacity(breakdown, tier_busy)
        return self._result(
            layout, m, step_s, breakdown, comm_total, tier_busy, tail, span, layers_per_stage
        )

    def spans(self, lo: Layout, override: Span | None = None) -> dict[str, Sequence[int]]:
        """topology.spans of the layout's rank order, with the kinds `override` names replaced
        (a placement's explicit rank -> host map, cost_models.rankmap.spans)."""
        span = group_spans(self.cluster, lo, moe=self.model.moe is not None)
        if override is not None:
            span = {**span, **{k: tuple(v) for k, v in override.items()}}
        return span

    def stage_terms(
        self,
        lo: Layout,
        counts: list[Counts],
        span: Span,
        cluster: Cluster | None = None,
        split: tuple[int, ...] | None = None,
    ) -> list[StageTerms]:
        """Per-stage, per-micro-batch seconds by term: each layer's stage.layer_cost (the layers
        block recompute leaves alone at their cost without it, stage.recomputed_layers), the LM
        head's compute and TP collectives on the last stage, the embedding's on the first
        (end_costs), and the extra time of
        the layers Workload.bf16_layers_start / _end keep in bf16 (bf16_layer_counts under
        `split`, the layers per chunk counts came from)."""
        bf16 = self.bf16_layer_counts(lo, split)
        costs = self.layer_costs(lo, span, cluster)
        plain = costs
        if is_block_recompute(lo):
            plain = self.layer_costs(without_block_recompute(lo), span, cluster)
        times = self.layer_times(lo)
        first_tp, last_tp = self.end_costs(lo, span, cluster)
        out = []
        for r, (n_dense, n_moe) in enumerate(counts):
            terms = StageTerms()
            redo = recomputed_layers(lo, (n_dense, n_moe))
            for k, n, x in ((False, n_dense, redo[0]), (True, n_moe, redo[1])):
                cost = costs.moe if k else costs.dense
                if not n or cost is None:
                    continue
                # forward + backward do not depend on the recompute (same float for every layer)
                terms.compute_s += n * cost.compute_s
                for w, c in ((x, cost), (n - x, plain.moe if k else plain.dense)):
                    if w:
                        _add_layers(terms, w, c)
            if bf16[r] != (0, 0):
                extra_s, extra_recompute_s = self.bf16_extra_s(lo, bf16[r])
                terms.compute_s += extra_s
                terms.recompute_s += extra_recompute_s
            if r == 0:
                terms.compute_s += times.embed_s
                _add_layers(terms, 1, first_tp)
            if r == lo.pp - 1:
                terms.compute_s += times.head_s
                _add_layers(terms, 1, last_tp)
            if lo.cpu_offload_layers:
                terms.offload_s = self.offload_s(lo, (n_dense, n_moe))[0]
            out.append(terms)
        return out

    def bf16_layer_counts(
        self, lo: Layout, split: tuple[int, ...] | None = None
    ) -> list[Counts]:
        """(dense, MoE) layers per pipeline rank that Workload.bf16_layers_start / _end keep in
        bf16 (the first and last layers of the model, wherever `split` puts them; Megatron's
        get_fp8_context / get_fp4_context by layer number)."""
        w, m = self.workload, self.model
        first, last = w.bf16_layers_start, m.num_layers - w.bf16_layers_end
        if first == 0 and last == m.num_layers:
            return [(0, 0)] * lo.pp
        k = m.num_dense_layers
        out = []
        for layers in stage_layers(m, lo, split):
            kept = [i for i in layers if i < first or i >= last]
            out.append((sum(1 for i in kept if i < k), sum(1 for i in kept if i >= k)))
        return out

    def bf16_extra_s(self, lo: Layout, counts: Counts) -> tuple[float, float]:
        """(forward + backward, recompute) seconds per micro-batch that `counts` (dense, MoE)
        bf16-kept layers take beyond the same layers in the workload's quantized precision: the
        layer priced again under precision bf16 (bf16 GEMMs, no casts). Their TP amax
        all-reduces and memory stay as the quantized layers'. The CP-SAT partition's stage
        terms (rank_terms_s) and the search's lower bounds leave this out (bounds stay bounds)."""
        key = (_times_key(lo), lo.recompute, lo.selective_modules)
        found = self._bf16.get(key)
        if found is None:
            m, gpu, cal, book = self.model, self.cluster.gpu, self.cal, self.book
            w = self.workload.model_copy(
                update={"precision": "bf16", "fp8_params": False, "fp8_recipe": None,
                        "bf16_layers_start": 0, "bf16_layers_end": 0}
            )  # fmt: skip
            quantized = self.layer_times(lo).layers
            deltas: list[float] = []
            for is_moe, q in ((False, quantized.dense), (True, quantized.moe)):
                if q is None:
                    deltas += [0.0, 0.0]
                    continue
                b = layer_time(m, gpu, cal, w, lo, is_moe=is_moe, book=book)
                deltas.append(b.forward_s + b.backward_s - q.forward_s - q.backward_s)
                rc = (lo.recompute, lo.selective_modules)
                deltas.append(b.recompute_s(*rc) - q.recompute_s(*rc))
            found = self._bf16[key] = (deltas[0], deltas[1], deltas[2], deltas[3])
        d_s, d_rc, m_s, m_rc = found
        return counts[0] * d_s + counts[1] * m_s, counts[0] * d_rc + counts[1] * m_rc

    def offload_s(self, lo: Layout, counts: Counts) -> tuple[float, float]:
        """(exposed, host-link busy) seconds per micro-batch of the stage's CPU activation
        offloading (stage.offload_exposed_s) over the GPU's host link (GpuSpec.
        host_link_gb_per_s, datasheet, rules._offload_rules refuses a GPU without one)."""
        gb_per_s = self.cluster.gpu.host_link_gb_per_s
        assert gb_per_s is not None
        return offload_exposed_s(
            counts,
            lo.cpu_offload_layers,
            self.layer_times(lo).layers,
            self.activations_per_mb(lo).none,
            gb_per_s * 1e9,
        )

    def _critical_stage(
        self, lo: Layout, per_stage: list[StageTerms], m: int
    ) -> tuple[StageTerms, float]:
        """(the terms of the stage that sets the steady state, the fill/drain bubble seconds)."""
        stage_s = [t.time_s for t in per_stage]
        _steady_s, bubble_s, crit = schedule_time_s(stage_s, m, lo.vp)
        if lo.pp_schedule != "dualpipe":
            return per_stage[crit], bubble_s
        # Rank r runs stage r for half the micro-batches and stage pp-1-r for the other half
        # (DualPipe's two directions), so its steady state is the mean of the pair; the slowest
        # pair sets the step.
        p = lo.pp
        pair = max(range(p // 2), key=lambda r: (stage_s[r] + stage_s[p - 1 - r], -r))
        terms = per_stage[pair].mean(per_stage[p - 1 - pair])
        pair_s = (stage_s[pair] + stage_s[p - 1 - pair]) / 2
        return terms, dualpipe_bubble_s(p, pair_s, terms.compute_s, terms.recompute_s)

    def _pp_payload(self, lo: Layout) -> float:
        """Bytes one stage boundary sends per micro-batch and direction: activations forward,
        their gradients backward (bf16, split by TP)."""
        t = tokens_per_gpu(self.workload, lo)
        return t * self.model.hidden_size * BF16_BYTES / lo.tp

    def _stage_tail(
        self,
        lo: Layout,
        counts: list[Counts],
        per_stage: list[StageTerms],
        span: Span,
        dp_cluster: Cluster,
    ) -> StageTail:
        """DP and optimizer stage by stage (the slowest stage sets the tail of the step), and
        every stage's memory."""
        dp_exposed = dp_total = opt_s = copies_s = 0.0
        dp_tiers = [0.0] * len(self.cluster.tiers)
        dp_parts, dp_stage = None, 0
        tail_stage, zeroing, passes = 0, 0.0, 0.0
        m = num_microbatches(self.workload.global_batch_seqs, lo)
        memory = []
        acts = self.activations_per_mb(lo)
        for r, c in enumerate(counts):
            sp = self.stage_params(lo, c, r)
            parts = self.stage_dp_parts(lo, sp, per_stage[r].compute_s, span, r, dp_cluster)
            exposed, total = parts.exposed_s, parts.total_s
            if total > dp_total:
                dp_tiers = list(parts.tier_s)
            if exposed > dp_exposed:
                dp_exposed, dp_parts, dp_stage = exposed, parts, r
            dp_total = max(dp_total, total)
            tail_s = self.stage_optimizer_s(lo, sp)
            if tail_s > opt_s:
                opt_s, copies_s = tail_s, self.stage_fsdp_copies_s(lo, sp)
                tail_stage, zeroing = r, grad_zero_bytes(lo, sp, self.workload)
                passes = grad_bucket_pass_bytes(lo, sp, self.workload, m)
            memory.append(self.stage_memory(lo, r, counts, acts))
        return StageTail(
            dp_total, dp_tiers, dp_parts, dp_stage, opt_s, copies_s, tuple(memory), tail_stage,
            zeroing, passes,
        )  # fmt: skip

    def _tier_busy_s(
        self, crit: StageTerms, m: int, pp_total_s: float, pp_span: Sequence[int], dp: list[float]
    ) -> dict[str, dict[Flow, float]]:
        """Seconds per step each tier is busy, by flow, for the slowest stage's GPUs: every flow
        that crosses the tier in the step (TP, CP, EP per micro-batch; PP sends on the outermost
        tier the pipeline crosses; DP gradient and parameter traffic of the stage with the
        most)."""
        out: dict[str, dict[Flow, float]] = {}
        pp_tier = outermost_tier(self.cluster, pp_span)
        for j, tier in enumerate(self.cluster.tiers):
            flows = {f: m * crit.busy_s(f, j) for f in LAYER_FLOWS}
            flows[Flow.PP] = pp_total_s if tier is pp_tier else 0.0
            flows[Flow.DP] = dp[j]
            out[tier.name if tier.name not in out else f"{tier.name}#{j}"] = flows
        return out

    def _result(
        self,
        layout: Layout,
        m: int,
        step_s: float,
        breakdown: dict[Term, float],
        comm_total: dict[Flow, float],
        tier_busy: dict[str, dict[Flow, float]],
        tail: StageTail,
        span: Span,
        layers_per_stage: tuple[int, ...] | None,
    ) -> Estimate:
        """The Estimate, with the typed terms written as CONTRACT.md's keys."""
        w, gpu, n = self.workload, self.cluster.gpu, self.cluster.num_gpus
        tokens = w.global_batch_seqs * w.seq_len
        peak_tflops = gpu.peak_bf16_tflops
        if w.precision in ("fp8", "mxfp8") and gpu.peak_fp8_tflops is not None:
            peak_tflops = gpu.peak_fp8_tflops
        if w.precision == "nvfp4" and gpu.peak_fp4_tflops is not None:
            peak_tflops = gpu.peak_fp4_tflops
        if self._flops_per_token is None:
            self._flops_per_token = model_flops_per_token(self.model, w.seq_len)
        mfu = 3 * self._flops_per_token * tokens / (step_s * n * peak_tflops * TFLOPS)
        peak_gib = max(s.total_gib for s in tail.memory)
        return Estimate(
            layout=layout,
            num_microbatches=m,
            step_time_s=step_s,
            tokens_per_s_per_gpu=tokens / step_s / n,
            mfu=mfu,
            peak_memory_gib=peak_gib,
            usable_memory_gib=gpu.hbm_gib,
            fits_in_memory=peak_gib <= gpu.hbm_gib,
            memory_validated=memory_validated(self.model, w, layout),
            breakdown_s={t.value: breakdown[t] for t in Term},
            comm_total_s={f.value: v for f, v in comm_total.items()},
            tier_busy_s={k: sum(v.values()) for k, v in tier_busy.items()},
            stage_memory=tail.memory,
            placement=placement(self.cluster, layout, span),
            layers_per_stage=None if layers_per_stage is None else tuple(layers_per_stage),
            kernels=self._kernel_report(layout, span, layers_per_stage),
            attention=attention_report(self.model, w, layout, self.book),
            attention_speed=attention_speed_report(self.cluster, self.model.mla is not None),
            offload=self._offload_report(layout, m),
            dp_exposure=_dp_exposure_report(tail),
            step_tail=self._step_tail_report(tail),
            moe_routing=_moe_routing_report(self.model, w, layout),
        )

    def _step_tail_report(self, tail: StageTail) -> dict | None:
        """Estimate.step_tail: the per-step tail (breakdown optimizer) of the stage that sets
        it, with its gradient memset apart; None where the tail is nothing."""
        step_s = tail.optimizer_s - tail.copies_s
        if step_s <= 0:
            return None
        zeroing_s = tail.zeroing_bytes / self.hbm_bytes_per_s
        passes_s = tail.pass_bytes / self.hbm_bytes_per_s
        return {
            "stage": tail.tail_stage,
            "optimizer_s": step_s,
            "grad_zeroing_s": zeroing_s,
            "grad_zeroing_gb": tail.zeroing_bytes / 1e9,
            "grad_bucket_passes_s": passes_s,
            "grad_bucket_passes_gb": tail.pass_bytes / 1e9,
            "optimizer_step_s": step_s - zeroing_s - passes_s,
        }

    def _offload_report(self, lo: Layout, m: int) -> dict | None:
        """Estimate.offload: what CPU activation offloading cost per step (pp is 1 under
        offloading, so the one stage's figures are the step's)."""
        if not lo.cpu_offload_layers:
            return None
        exposed_s, busy_s = self.offload_s(lo, self.stage_counts(lo, None)[0])
        return {
            "layers": lo.cpu_offload_layers,
            "host_link_gb_per_s": self.cluster.gpu.host_link_gb_per_s,
            "host_link_busy_s": m * busy_s,
            "exposed_s": m * exposed_s,
        }

    def _kernel_report(
        self, lo: Layout, span: Span, split: tuple[int, ...] | None = None
    ) -> dict | None:
        """The kernel table's name and, per term, how many of its look-ups for this layout were
        measured / interpolated / extrapolated (priced on the curve or the network model):
        the compute terms' for its layers and LM head, the step tail's kernels (adam, grad_clip,
        chunk_cat: measured where the table has the op's streaming rate, else extrapolated to
        the HBM figure), the collective terms' (tp_comm, cp_comm, ep_comm, dp_comm, pp_comm)
        where the tables carry collective curves; None without a table."""
        if self.book is None and self.comm is None:
            return None
        terms: dict[str, dict[str, int]] = {}

        def count(term: str, status: str) -> None:
            terms.setdefault(term, dict.fromkeys(STATUSES, 0))[status] += 1

        if self.book is not None:
            times = self.layer_times(lo)
            for t in (times.layers.dense, times.layers.moe, times.head, times.embed):
                for term, status in () if t is None else t.lookups:
                    count(term, status)
            for t, blocks in ((times.layers.dense, 2), (times.layers.moe, 1 + (lo.etp > 1))):
                if t is not None:
                    m, cl, cal, w = self.model, self.cluster, self.cal, self.workload
                    for status in userbuffers_lookups(m, cl, cal, w, lo, blocks, self.book):
                        count("tp_overlap_split", status)
            # the step tail's kernels at the table's streaming rate (measured) or the HBM figure
            w = self.workload
            tail = [(ADAM_OP, self.adam_bytes_per_s)]
            if w.grad_clip != "none":
                tail.append((CLIP_OP, self.clip_bytes_per_s))
            if has_fsdp_copies(lo, w):
                tail.append((CHUNK_CAT_OP, self.chunk_cat_bytes_per_s))
            for op, rate in tail:
                count(op, EXTRAPOLATED if rate is None else MEASURED)
        if self.comm is not None:
            for term, status in self._comm_lookups(lo, span, split):
                count(f"{term}_comm", status)
        kern = self.cluster.kernels
        assert kern is not None
        empty = [k for k in COMPUTE_TABLES if not getattr(kern, k)]  # kernels.tables: [attention]
        return {"table": kern.source, "terms": terms, "without_rows": empty}

    def _comm_lookups(
        self, lo: Layout, span: Span, split: tuple[int, ...] | None
    ) -> list[tuple[str, str]]:
        """(term, status) of every collective-curve look-up this layout's step makes: its
        layers' TP / CP / EP terms, the end stages' TP (stage.end_stage_tp_costs), each stage's
        DP term, the PP sends (re-priced on a traced
        copy of the curves, commtable.CollectiveBook.traced)."""
        assert self.comm is not None
        trace = self.comm.traced()
        m, cl, cal, w = self.model, self.cluster, self.cal, self.workload
        times = self.layer_times(lo).layers
        for t, is_moe in ((times.dense, False), (times.moe, True)):
            if t is not None:
                layer_cost(m, cl, cal, w, lo, t, span, is_moe=is_moe, book=self.book, comm=trace)
        head = self.layer_times(lo).head
        end_stage_tp_costs(m, cl, w, lo, head, tuple(span[Group.TP]), trace)
        for r, c in enumerate(self.stage_counts(lo, split)):
            self.stage_dp_parts(lo, self.stage_params(lo, c, r), 0.0, span, r, comm=trace)
        if lo.pp > 1:
            p2p_s(self._pp_payload(lo), cl, span[Group.PP], trace, "pp")
        assert trace.seen is not None
        return trace.seen


def _add_layers(terms: StageTerms, w: float, c: LayerCost) -> None:
    """Add `w` layers of cost `c` (without their forward + backward) to a stage's terms."""
    terms.recompute_s += w * c.recompute_s
    terms.tp_s += w * c.tp_s
    terms.cp_s += w * c.cp_exposed_s
    terms.cp_total_s += w * c.cp_total_s
    terms.tp_total_s += w * c.tp_total_s
    terms.ep_s += w * c.ep_s
    terms.ep_total_s += w * c.ep_total_s
    for flow, per_tier in (c.tier_busy_s or {}).items():
        acc = terms.busy.setdefault(flow, [0.0] * len(per_tier))
        for j, x in enumerate(per_tier):
            acc[j] += w * x


def _with_link_capacity(
    breakdown: dict[Term, float], tier_busy: dict[str, dict[Flow, float]]
) -> float:
    """The step time, with links as capacities: a tier cannot be busy longer than the step.
    Flows overlapped with compute are hidden only as far as their tier has time left; beyond
    that the step waits for the link, charged to the flow that loads the saturated tier most
    (`breakdown` is updated)."""
    step_s = sum(breakdown[t] for t in Term)
    _tier, flows = max(tier_busy.items(), key=lambda kv: sum(kv[1].values()))
    excess = sum(flows.values()) - step_s
    if excess > 0:
        flow = max(flows, key=lambda f: flows[f])
        breakdown[flow.term] += excess
        step_s = sum(breakdown[t] for t in Term)
    return step_s


def _moe_routing_report(model: ModelSpec, workload: Workload, lo: Layout) -> dict | None:
    """Estimate.moe_routing: the busiest EP rank's routed rows over the mean the expert GEMMs and
    the all-to-all are priced at, and why (compute.moe_routing); None for a dense model."""
    if model.moe is None:
        return None
    factor, basis = moe_routing(workload, lo.ep)
    return {"busiest_rank_over_mean": factor, "basis": basis, "why": MOE_ROUTING_BASES[basis]}


def _dp_exposure_report(tail: StageTail) -> dict | None:
    """Estimate.dp_exposure: the exposed DP seconds per step (breakdown dp_comm) by cause, of
    the stage that sets them; None where nothing is exposed."""
    p = tail.dp_parts
    if p is None:
        return None
    return {
        "stage": tail.dp_stage,
        "beyond_overlap_window_s": p.window_s,
        "last_gradient_bucket_s": p.last_bucket_s,
        "first_parameter_bucket_s": p.first_bucket_s,
        "compute_slowed_beside_nccl_s": p.contention_s,
        "shared_embedding_all_reduce_s": p.embedding_sync_s,
        "link_busy_s": p.total_s,
    }
