"""The kernel shapes a model's pricing looks up: what `planner measure kernels` measures (issue 32).

The shapes are not listed a second time here. `lookups` runs the Pricer's own per-layer pricing
(Pricer.layer_times: compute.layer_time for each layer kind and compute.lm_head_time;
Pricer.layer_costs: stage.layer_cost, whose TP-overlap partner GEMMs look up too) with a
ShapeRecorder in place of the cluster's KernelBook: the recorder answers every look-up "not in the
table" (so pricing falls back to the curves and carries on) and keeps its arguments. The shapes
measured are therefore exactly the shapes priced, in the same floats, and a change to the layer
map (a new GEMM, another attention variant, a memory-bound op looked up) moves both at once.

`kernel_shapes` takes the union over the layouts and workload variants the search can price for
a model at the given TP degrees, micro-batches and CP degrees (tokens per GPU = micro_batch *
seq_len / cp), and turns the look-ups into rows to measure in the table formats of
../shared/data/kernels/README.md: a GEMM look-up is one row of its (m, n, k, layout); an fp8 GEMM
is measured as TN whatever the pass (Hopper runs fp8 GEMMs TN only; KernelBook.gemm_s reads the TN
rows for every fp8 pass); attention is one call of the looked-up (batch, seq, heads, kv heads, head
dims, causal, window, kernel). The memory-bound ops (which the Pricer prices from HBM bandwidth,
not yet from the table) are listed from the same per-layer widths: copy, residual add and the
model's norm over the hidden size, its MLP activation over the FFN shard, MoE permute / unpermute
over the routed rows.

Pure: no torch, no I/O. The rows are plain tuples, ready for JSON (planner.calibrate.measure).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .compute import FUSED_ACTIVATION_ROW, activation_op, qk_norm_heads, rotary_heads
from .framework import PROFILES, expert_tp
from .kernels import KernelBook
from .pricer import Pricer
from .rules import layout_violations
from .specs import Cluster, KernelTables, Layout, ModelSpec, Workload
from .stage import ADAM_OP, CHUNK_CAT_OP, CLIP_OP

BF16_BYTES = 2

GemmKey = tuple[float, float, float, str, str]  # m, n, k, dtype, layout
GroupedKey = tuple[float, float, float, float, str]  # experts, rows_per_expert, n, k, dtype
AttentionKey = tuple[float, float, float, float, float, float, bool, int, str]
# batch, seq, heads, kv_heads, head_dim, v_head_dim, causal, window, kernel
MemoryKey = tuple[str, float]  # op, bytes


RECORDED_AS = {
    "gemm": "gemm",
    "grouped": "grouped_gemm",
    "attention": "attention",
    "window": "attention",  # a windowed layer's ratio: its windowed call, measured as attention
    "memory": "memory_bound",
}
"""KernelBook's look-up kinds (the first element of its cache keys) -> the recorder's set."""


@dataclass
class ShapeRecorder(KernelBook):
    """A KernelBook without tables that keeps every look-up's shape: each answers "not in the
    table" (None, extrapolated) through KernelBook's own look-ups, whose cache keys are the
    shapes (KernelBook._cached). The recorded tuples are the keys without their kind."""

    tables: KernelTables | None = None
    gemm: set[GemmKey] = field(default_factory=set)
    grouped_gemm: set[GroupedKey] = field(default_factory=set)
    attention: set[AttentionKey] = field(default_factory=set)
    memory_bound: set[MemoryKey] = field(default_factory=set)

    @property
    def source(self) -> str:
        return "shape recorder"

    def _cached(self, key: tuple, grid, query: tuple) -> tuple[tuple | None, str]:
        getattr(self, RECORDED_AS[key[0]]).add(key[1:])
        return super()._cached(key, grid, query)


def lookups(
    model: ModelSpec,
    cluster: Cluster,
    workloads: Iterable[Workload],
    layouts: Iterable[Layout],
    recorder: ShapeRecorder | None = None,
) -> ShapeRecorder:
    """Every kernel look-up the Pricer's per-layer pricing makes for these workloads x layouts:
    the layer and LM-head compute (Pricer.layer_times) and the per-layer costs (Pricer.layer_costs:
    the TP-overlap partner GEMMs, stage.tp_partner_gemm_s, with and without the overlap)."""
    rec = ShapeRecorder() if recorder is None else recorder
    layouts = list(layouts)
    for w in workloads:
        pricer = Pricer(model, cluster, w)
        pricer.book = rec
        for lo in layouts:
            pricer.layer_times(lo)
            variants = [lo]
            if lo.tp > 1:
                over = {"tp_comm_overlap": True, "sequence_parallel": True}
                variants.append(lo.model_copy(update=over))
            for v in variants:
                pricer.layer_costs(v, pricer.spans(v))
    return rec


def tp_ok(model: ModelSpec, tp: int) -> bool:
    """Whether TP `tp` splits the model's heads and FFN (cost_models.rules._degree_rules; the
    CLI's message when no --tp value does; `legal` applies the rules themselves)."""
    kv = model.kv_heads
    ffn_ok = model.ffn_hidden_size is None or model.ffn_hidden_size % tp == 0
    return model.num_attention_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0) and ffn_ok


def expert_degrees(model: ModelSpec, eps: Sequence[int]) -> list[int]:
    """The EP degrees of `eps` that split the experts (1 for a dense model)."""
    if model.moe is None:
        return [1]
    return [e for e in eps if model.moe.num_experts % e == 0]


def expert_splits(model: ModelSpec, tp: int, ep: int) -> list[int]:
    """The expert TP degrees the search gives a (tp, ep) shape under some framework
    (framework.expert_tp): 1 (Megatron's folding, experts whole on each rank), and at EP 1 with
    TP also tp (torchtitan splits the routed experts over TP whenever EP is off), whose grouped
    GEMMs are another shape (all the TP group's rows, 1 / tp of the expert width)."""
    return sorted({expert_tp(p, model, tp, ep) for p in (None, *PROFILES.values())})


def legal(model: ModelSpec, cluster: Cluster, seq_len: int, lo: Layout) -> bool:
    """Whether cost_models.rules lets `lo` run the model on a cluster of its size under some
    framework: either CP implementation (TE's fused ring refuses sliding windows, PyTorch's
    ring takes them), a global batch of one micro-batch per DP rank."""
    sized = cluster.model_copy(update={"num_gpus": lo.world_size})
    batch = lo.micro_batch * lo.dp
    return any(
        not layout_violations(
            model, sized, Workload(seq_len=seq_len, global_batch_seqs=batch, cp_attention=c), lo
        )
        for c in ("fused_ring", "torch_ring")
    )


def measured_layouts(
    model: ModelSpec,
    cluster: Cluster,
    seq_len: int,
    tps: Sequence[int],
    micro_batches: Sequence[int],
    cps: Sequence[int],
    eps: Sequence[int] = (1,),
) -> list[Layout]:
    """One layout per (tp, cp, micro_batch, ep, etp) the rules allow (`legal`): what
    compute.layer_time reads (Pricer.LAYER_TIME_READS; dp = ep so that EP is carved from DP,
    etp as the search gives it under some framework: expert_splits)."""
    out = []
    for tp in tps:
        for cp in cps:
            for mb in micro_batches:
                for ep in expert_degrees(model, eps):
                    for etp in expert_splits(model, tp, ep):
                        lo = Layout(tp=tp, cp=cp, dp=ep, ep=ep, etp=etp, micro_batch=mb)
                        if legal(model, cluster, seq_len, lo):
                            out.append(lo)
    return out


def workload_variants(
    seq_len: int, dtypes: Sequence[str], kernels: Sequence[str] = ("fused", "fa2")
) -> list[Workload]:
    """The workload settings that change a look-up: precision (bf16 / fp8 GEMMs), the attention
    kernel class, and torchtitan's every-other-matmul selective recompute (its own matmuls)."""
    return [
        Workload(
            seq_len=seq_len,
            global_batch_seqs=1,
            precision=dtype,
            attention_kernel=kernel,
            selective_recompute=selective,
        )
        for dtype in dtypes
        for kernel in kernels
        for selective in ("attention", "every_other_matmul")
    ]


def _int(x: float) -> int:
    """A looked-up dimension as the integer a kernel is run with (shapes are whole elements;
    a fractional mean, e.g. rows per expert, is measured at its nearest whole size)."""
    return max(1, round(x))


def gemm_rows(rec: ShapeRecorder) -> list[tuple[int, int, int, str, str]]:
    """(m, n, k, dtype, layout) to measure: every GEMM look-up; fp8 as TN (module docstring)."""
    rows = {
        (_int(m), _int(n), _int(k), dtype, "TN" if dtype == "fp8" else layout)
        for m, n, k, dtype, layout in rec.gemm
    }
    return sorted(rows)


def grouped_rows(rec: ShapeRecorder) -> list[tuple[int, int, int, int, str]]:
    """(experts, rows_per_expert, n, k, dtype) to measure."""
    return sorted({(_int(e), _int(r), _int(n), _int(k), d) for e, r, n, k, d in rec.grouped_gemm})


def attention_rows(rec: ShapeRecorder) -> list[tuple]:
    """(batch, seq, heads, kv_heads, head_dim, v_head_dim, causal, window, kernel) to measure."""
    return sorted(
        {
            (_int(b), _int(s), _int(h), _int(kv), _int(dqk), _int(dv), bool(c), int(w), kern)
            for b, s, h, kv, dqk, dv, c, w, kern in rec.attention
        }
    )


MEMORY_BYTES_PER_ELEMENT = {
    "copy": 2 * BF16_BYTES,  # read + write
    "add": 3 * BF16_BYTES,  # two reads + write
    "rmsnorm": 2 * BF16_BYTES,
    "layernorm": 2 * BF16_BYTES,
    "swiglu": 3 * BF16_BYTES,  # gate and up read, product written: per output element
    "geglu": 3 * BF16_BYTES,
    "gelu": 2 * BF16_BYTES,
    "squared_relu": 2 * BF16_BYTES,
    "moe_permute": 2 * BF16_BYTES,  # gather: read a source row, write it (per routed element)
    "moe_unpermute": 3 * BF16_BYTES,  # scatter-add: read routed row, read + write destination
    ADAM_OP: 28,  # fp32 param, grad, exp_avg, exp_avg_sq read; param, exp_avg, exp_avg_sq written
    CHUNK_CAT_OP: BF16_BYTES + 4,  # bf16 gradient read, fp32 reduce-scatter input written
    CLIP_OP: 12,  # fp32 gradient read for the norm (4), read and written scaled (8)
}
"""Bytes per (tokens x width) element each op moves, each tensor read or written once (the
convention of ../shared/data/kernels/memory_bound.csv and moe_ops.csv)."""


def memory_rows(
    model: ModelSpec, tokens: Iterable[int], tps: Sequence[int]
) -> list[tuple[str, int, int, str, int, int]]:
    """(op, tokens, width, dtype, bytes, top_k) of the memory-bound ops of one layer: copy, add
    and the norm over [tokens, hidden] (and [tokens / tp, hidden], a sequence-parallel rank's
    share); the activation over [tokens, ffn / tp] (dense FFN, shared experts, or the expert FFN
    over the routed rows), for a gated one also as the `add` a fused kernel is priced at
    (compute.FUSED_ACTIVATION_ROW); fused rotary as a `copy` over [tokens, rotated heads x dims
    per TP rank]; under qk_norm the norm over each head's head_dim, [tokens x query (key) heads
    per TP rank, head_dim]; a `copy` over the routed rows [tokens * top_k / tp, hidden] (Megatron's
    sort by local expert and quantization padding, compute.dispatch_copies_s); MoE permute /
    unpermute over [tokens * top_k, hidden]
    (top_k sizes the unpermute's destination). Tokens are the per-GPU token counts."""
    h = model.hidden_size
    acts = (activation_op(model),)
    if model.gated_mlp:
        acts += (FUSED_ACTIVATION_ROW,)
    rows: set[tuple[str, int, int, str, int, int]] = set()

    def add(op: str, t: int, width: int, top_k: int = 1) -> None:
        rows.add((op, t, width, "bf16", t * width * MEMORY_BYTES_PER_ELEMENT[op], top_k))

    def add_act(t: int, width: int) -> None:
        for act in acts:
            add(act, t, width)

    for t in sorted(set(tokens)):
        for op in ("copy", "add", model.normalization):
            add(op, t, h)
        for tp in tps:
            if not tp_ok(model, tp):
                continue
            if tp > 1:  # sequence parallel: each rank's norms and adds over its t / tp tokens
                for op in ("add", model.normalization):
                    add(op, _int(t / tp), h)
            rot_heads, rot_dim = rotary_heads(model, tp)
            add("copy", t, _int(rot_heads * rot_dim))
            q_heads, k_heads, head_dim = qk_norm_heads(model, tp)
            for heads in (q_heads, k_heads) if head_dim else ():  # per-head norms: rows of head_dim
                add(model.normalization, _int(t * heads), head_dim)
            if model.ffn_hidden_size is not None:
                add_act(t, _int(model.ffn_hidden_size / tp))
            if model.moe is not None:
                k = model.moe.top_k
                add_act(_int(t * k / tp), model.moe.expert_ffn_hidden_size)
                # Megatron's sort / padding copies of the routed rows (dispatch_copies_s)
                add("copy", _int(t * k / tp), h)
                if model.moe.num_shared_experts:  # shared experts: one FFN over every token
                    shared = model.moe.num_shared_experts * model.moe.expert_ffn_hidden_size
                    add_act(t, _int(shared / tp))
        if model.moe is not None:
            k = model.moe.top_k
            add("moe_permute", t * k, h, k)
            add("moe_unpermute", t * k, h, k)
    return sorted(rows)


STEP_TAIL_ROWS = (
    (ADAM_OP, 16, 2**20, "fp32"),
    (ADAM_OP, 16, 2**22, "fp32"),
    (CLIP_OP, 16, 2**21, "fp32"),
    (CLIP_OP, 16, 2**23, "fp32"),
    (CHUNK_CAT_OP, 16, 2**22, "bf16"),
    (CHUNK_CAT_OP, 16, 2**24, "bf16"),
)
"""(op, tensors, elements per tensor, dtype) of the per-step tail's kernels the Pricer prices at
their streaming rate (stage.ADAM_OP, CLIP_OP, CHUNK_CAT_OP; KernelBook.streaming_bytes_per_s):
two sizes each, every one above HBM_STREAMING_BYTES (Adam 0.47 / 1.9 GB, clip 0.40 / 1.6 GB,
chunk_cat 0.40 / 1.6 GB), so that the rate is read where it is flat (the profiled rows: each op
within 4 % of its median over 9-101 GB per step) whatever the model; `tokens` counts the tensors
of one multi-tensor call, `width` their length."""


def step_tail_rows() -> list[tuple[str, int, int, str, int, int]]:
    """STEP_TAIL_ROWS as memory-bound rows (op, tokens, width, dtype, bytes, top_k)."""
    return [
        (op, n, width, dtype, n * width * MEMORY_BYTES_PER_ELEMENT[op], 1)
        for op, n, width, dtype in STEP_TAIL_ROWS
    ]


@dataclass(frozen=True)
class KernelShapes:
    """The rows `planner measure kernels` measures for one model (module docstring)."""

    gemm: list[tuple[int, int, int, str, str]]
    grouped_gemm: list[tuple[int, int, int, int, str]]
    attention: list[tuple]
    memory_bound: list[tuple[str, int, int, str, int, int]]
    tokens: list[int]
    """The per-GPU token counts (micro_batch * seq_len / cp) the GEMMs and ops were taken at."""


def kernel_shapes(
    model: ModelSpec,
    cluster: Cluster,
    *,
    seq_len: int,
    tps: Sequence[int] = (1, 2, 4, 8),
    dtypes: Sequence[str] = ("bf16", "fp8"),
    micro_batches: Sequence[int] = (1, 2, 4, 8),
    cps: Sequence[int] = (1, 2, 4, 8),
    eps: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    kernels: Sequence[str] = ("fused", "fa2"),
) -> KernelShapes:
    """The kernel rows the model's pricing looks up on `cluster` at these degrees (`lookups`),
    plus its memory-bound ops at the same token counts."""
    layouts = measured_layouts(model, cluster, seq_len, tps, micro_batches, cps, eps)
    rec = lookups(model, cluster, workload_variants(seq_len, dtypes, kernels), layouts)
    tokens = sorted({_int(lo.micro_batch * seq_len / lo.cp) for lo in layouts})
    return KernelShapes(
        gemm=gemm_rows(rec),
        grouped_gemm=grouped_rows(rec),
        attention=attention_rows(rec),
        memory_bound=memory_rows(model, tokens, [lo.tp for lo in layouts]) + step_tail_rows(),
        tokens=tokens,
    )
