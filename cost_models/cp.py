"""Context-parallel attention cost per layer and micro-batch: exposed and link-busy seconds.

Two implementations, chosen by `Workload.cp_attention`:

* `fused_ring` (Megatron-Core / Transformer Engine): ring exchange of the local K/V chunk (KV
  heads only), cp-1 steps forward and 2(cp-1) backward (K/V + dK/dV), hidden behind the share of
  attention that does not need the local chunk.
* `torch_ring` (PyTorch `torch.distributed.tensor.experimental.context_parallel`, used by
  torchtitan, Dec 2024 defaults: `rotate_method=ALL_GATHER`, `convert_to_f32=True`,
  `enable_load_balance=True`; torch/distributed/tensor/experimental/_attention.py). Costs that
  the fused ring does not have, each from that source:
  - K/V are exchanged after `repeat_kv` (torchtitan's Llama calls SDPA on K/V expanded to the
    query heads), so the bytes scale with n_h/t, not n_kv/t.
  - `_AllGatherRotater` all-gathers every K/V chunk once, issued at step 0 and waited at step 1:
    only the local causal step (1/cp of the attention) hides it. Backward gathers again.
  - `_SDPAMerger` merges each step's partial output in fp32 with an LSE correction, eager ops:
    cast to fp32, `out - block_out`, sigmoid scale, subtract (MERGE_BYTES_PER_ELEMENT); K/V are
    concatenated into a send buffer before each exchange (KV_SEND_BYTES_PER_ELEMENT).
  - backward accumulates dQ, dK, dV in fp32 per step (DQ_/DKV_BYTES_PER_ELEMENT) and rotates
    dK/dV in fp32 around the ring, waiting for the previous hop after each step's kernel: a hop
    hides behind one backward step, and the last hop back to the owner is exposed.
  Causal load balance (head-tail chunks) is on by default, so FLOPs per rank stay the average.
* `a2a` (Transformer Engine's AttnFuncWithCPAndQKVOA2A, Megatron `--cp-comm-type a2a`;
  DeepSpeed-Ulysses, arXiv 2309.14509): all-to-alls turn each rank's s / cp tokens of all its
  heads into the whole sequence of heads / cp before the kernel, and back after it (a2a_s).
"""

from __future__ import annotations

from .calibration import GenerationCalibration, hbm_bytes_per_s, overlap_slowdown_s
from .commtable import CollectiveBook, collective_time_s, model_time_s, p2p_s
from .compute import LayerTime, local_kv_heads, selective_modules, tokens_per_gpu
from .specs import Cluster, Layout, ModelSpec, Workload

BF16_BYTES = 2
FP32_BYTES = 4
MERGE_BYTES_PER_ELEMENT = 42.0
"""HBM bytes per output element per forward step i >= 1 in `_SDPAMerger` (eager, fp32):
to(fp32) 2 read + 4 write; out - block_out 8 + 4; sigmoid(lse diff) * diff 4 + 4 (lse is per row,
negligible); out - scaled 8 + 4; `_partial_update` re-concatenates the fp32 output (8) on the
half of the steps that update only the tail chunk: + 4 on average."""
KV_SEND_BYTES_PER_ELEMENT = 4.0
"""`torch.cat([key.flatten(), value.flatten()])` before every exchange: bf16 read + write."""
DQ_BYTES_PER_ELEMENT = 14.0
"""Backward per step, per dQ element: read the bf16 step gradient (2), read and write the fp32
accumulator (4 + 4), `_partial_update` concatenation on half the steps (+4)."""
DKV_BYTES_PER_ELEMENT = 22.0
"""Backward per step, per dK/dV element: accumulate as dQ (10 + 4), then `torch.cat` into the fp32
send buffer of the dK/dV ring (4 + 4)."""


def _head_dims(model: ModelSpec) -> tuple[float, float]:
    mla = model.mla
    if mla is None:
        return model.attn_head_dim, model.attn_head_dim
    return mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim


def _fused_ring_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    layout: Layout,
    t: float,
    lt: LayerTime,
    cp_span: list[int],
    comm: CollectiveBook | None = None,
    forwards: int = 1,
) -> tuple[float, float]:
    mla = model.mla
    kv_width = (
        2 * local_kv_heads(model, layout.tp) * model.attn_head_dim
        if mla is None
        else model.num_attention_heads
        / layout.tp
        * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
    )
    step_s = p2p_s(t * kv_width * BF16_BYTES, cluster, cp_span, comm, "cp")
    hidden_fraction = (layout.cp - 1) / layout.cp  # all but the local chunk overlap
    fwd, bwd = (layout.cp - 1) * step_s, 2 * (layout.cp - 1) * step_s
    # a recomputed attention core reruns its ring forward (TE's AttnFuncWithCPAndKVP2P runs
    # inside the checkpointed core attention), hidden behind its own rerun as the first was
    fwd *= forwards
    exposed = forwards * max(0.0, fwd / forwards - lt.attention_s * hidden_fraction)
    exposed += max(0.0, bwd - lt.attention_bwd_s * hidden_fraction)
    # the attention the exchange hides behind runs on the SMs the NCCL kernel leaves free
    return exposed + overlap_slowdown_s(fwd + bwd - exposed, cal), fwd + bwd


def torch_ring_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    cp_span: list[int],
    comm: CollectiveBook | None = None,
) -> tuple[float, float]:
    """(exposed, link-busy) seconds of PyTorch's all-gather ring attention for one layer."""
    c = layout.cp
    t = tokens_per_gpu(workload, layout)
    d_qk, d_v = _head_dims(model)
    heads = model.num_attention_heads / layout.tp  # K/V expanded to the query heads
    kv_chunk_bytes = t * heads * (d_qk + d_v) * BF16_BYTES
    gather_s = collective_time_s(
        "all_gather", c * kv_chunk_bytes, cp_span, cluster.tiers, comm, "cp"
    )
    hbm_s = hbm_bytes_per_s(cluster.gpu, cal)
    step0_s = lt.attention_s / c  # the local causal step, all the gather can hide behind
    bwd_step_s = lt.attention_bwd_s / c  # its backward
    hop_s = p2p_s(t * heads * (d_qk + d_v) * FP32_BYTES, cluster, cp_span, comm, "cp")
    fwd_comm_s = max(0.0, gather_s - step0_s)
    bwd_comm_s = max(0.0, gather_s - bwd_step_s) + (c - 2) * max(0.0, hop_s - bwd_step_s)
    bwd_comm_s += hop_s  # the last hop back to the owner has no later step to hide behind
    fwd_bytes = MERGE_BYTES_PER_ELEMENT * d_v + KV_SEND_BYTES_PER_ELEMENT * (d_qk + d_v)
    bwd_bytes = (
        DQ_BYTES_PER_ELEMENT * d_qk
        + DKV_BYTES_PER_ELEMENT * (d_qk + d_v)
        + KV_SEND_BYTES_PER_ELEMENT * (d_qk + d_v)
    )
    fwd_mem_s = (c - 1) * t * heads * fwd_bytes / hbm_s
    bwd_mem_s = (c - 1) * t * heads * bwd_bytes / hbm_s
    forwards = attention_forwards(workload, layout)
    total = forwards * gather_s + gather_s + (c - 1) * hop_s
    comm_exposed = forwards * fwd_comm_s + bwd_comm_s
    exposed = comm_exposed + forwards * fwd_mem_s + bwd_mem_s
    return exposed + overlap_slowdown_s(total - comm_exposed, cal), total


def attention_forwards(workload: Workload, layout: Layout) -> int:
    """Forward passes of the attention core per layer and micro-batch: 2 where recompute reruns
    it (full, or selective with the attention core among what it redoes: compute.
    selective_modules), else 1; a CP exchange made in the forward is made again."""
    recomputes = layout.recompute == "full" or (
        layout.recompute == "selective" and "core_attn" in selective_modules(workload, layout)
    )
    return 2 if recomputes else 1


def a2a_s(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    cp_span: list[int],
    comm: CollectiveBook | None = None,
) -> tuple[float, float]:
    """(exposed, link-busy) seconds of Transformer Engine's all-to-all CP for one layer and
    micro-batch (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py
    AttnFuncWithCPAndQKVOA2A, flash_attn_a2a_communicate): forward, one all-to-all each of Q, K
    and V before the kernel and of the output after it; backward, of dO before the kernel's
    backward and of dQ, dK, dV after it. Each moves the rank's own tensor (its s / cp tokens of
    its TP rank's heads), bf16. The kernel needs all of Q, K and V and the next layer needs the
    output, so nothing hides them (TE overlaps an exchange only with the other tensors' layout
    copies): priced exposed, on the CP group's tiers (comm.all_to_all_time_s, with the
    cluster's all_to_all curve where it has one). Recomputed attention repeats the forward
    ones. The kernel runs the whole sequence on heads / cp: the same FLOPs per rank as the ring,
    priced at the full sequence's rate (compute.attention_times)."""
    t = tokens_per_gpu(workload, layout)
    d_qk, d_v = _head_dims(model)
    heads = model.num_attention_heads / layout.tp
    kv = heads if model.mla is not None else local_kv_heads(model, layout.tp)

    def one(width: float) -> float:
        size = t * width * BF16_BYTES
        seconds = model_time_s("all_to_all", size, cp_span, cluster.tiers)
        if comm is not None:
            seconds *= comm.factor("all_to_all", cp_span, size, "cp")
        return seconds

    q, k, v, o = one(heads * d_qk), one(kv * d_qk), one(kv * d_v), one(heads * d_v)
    forwards = attention_forwards(workload, layout)
    total = forwards * (q + k + v + o) + (o + q + k + v)
    return total, total


def cp_layer_s(
    model: ModelSpec,
    cluster: Cluster,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    lt: LayerTime,
    cp_span: list[int],
    comm: CollectiveBook | None = None,
) -> tuple[float, float]:
    """(exposed, link-busy) CP seconds of one layer and micro-batch (0 without CP); `comm`
    the cluster's collective curves (cost_models.commtable)."""
    if layout.cp <= 1:
        return 0.0, 0.0
    if workload.cp_attention == "torch_ring":
        return torch_ring_s(model, cluster, cal, workload, layout, lt, cp_span, comm)
    if workload.cp_attention == "a2a":
        return a2a_s(model, cluster, workload, layout, cp_span, comm)
    t = tokens_per_gpu(workload, layout)
    forwards = attention_forwards(workload, layout)
    return _fused_ring_s(model, cluster, cal, layout, t, lt, cp_span, comm, forwards)
