"""Host issue time of one layer: the kernels a framework launches per layer and pass, counted
from the model's structure, at the host seconds each launch costs, and the device-to-host sync
after which the host cannot run ahead of the GPU (issue 32, "kernel-launch / CPU overhead").

The host enqueues kernels and the GPU runs them in order. Where the host stays ahead, a pass
takes its GPU time; where it cannot, the GPU waits for each launch, so a pass takes at least the
host's issue time (Megatron-LM megatron/core/transformer/moe/README.md, "CPU Overhead
Bottleneck": gaps between GPU kernels where the CPU cannot launch kernels fast enough). A sync
drains the queue: Megatron's dropless all-to-all dispatcher waits on the per-expert token counts
(megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher.
_maybe_dtoh_and_synchronize: d2h_event.synchronize() at cuda_sync_point before_ep_alltoall, or
before_finish without EP / TP) in every MoE layer's forward, so the kernels issued after it (the
dispatch, the experts, the combine) start with no queue in front of them: that segment takes at
least its host issue time, whatever slack the host had before. compute.layer_time prices the
floor (host_floor_s).

Launch costs (bench/results/h100-2026-11-26/layers/launch.csv, one H100 host, torch 2.11): one
tiny kernel launched eagerly from Python costs 6.26 us of host time (the framework profile's
Workload.host_s_per_kernel), replayed from a CUDA graph 1.17 us (GRAPH_REPLAY_S_PER_KERNEL).
"""

from __future__ import annotations

from dataclasses import dataclass

from .specs import Layout, ModelSpec, Workload

GRAPH_REPLAY_S_PER_KERNEL = 1.17e-6
"""Host seconds per kernel replayed from a CUDA graph (launch.csv, cuda_graph row: 1.175 us)."""

QUANTIZE_KERNELS = {
    "delayed": 1,
    "tensorwise": 3,
    "blockwise": 1,
    "mxfp8": 1,
    "nvfp4": 1,
}
"""Kernels Transformer Engine launches to quantize one GEMM operand (transformer_engine/pytorch/
tensor quantizers): delayed scaling casts with the scale of the amax history (1); current
(tensorwise) scaling computes the amax, the scale from it, then casts (3:
Float8CurrentScalingQuantizer, nvte_compute_amax / nvte_compute_scale_from_amax / nvte_quantize);
blockwise, MXFP8 and NVFP4 compute per-block scales inside the cast kernel (1)."""

ROUTER_KERNELS = (8, 8)
"""Forward, backward kernels of a top-k router (megatron/core/transformer/moe/router.py
TopKRouter: gating GEMM, fused score / top-k, the load-balancing loss and its bookkeeping)."""

DISPATCH_PRE_KERNELS = 11
"""Forward kernels of the all-to-all dispatcher before its host sync (token_dispatcher.py
preprocess: routing_map.sum, the input / output split sums, the all-gather of the counts over
the TP x EP group, the per-local-expert sums, and the device-to-host copies of the splits)."""

DISPATCH_POST_KERNELS = (7, 6)
"""Forward, backward kernels of the dispatch and combine around the experts, after the sync:
permute (fused, 2), all-to-all, sort by local expert, unsort, all-to-all, unpermute; backward
the same chain reversed without the copies."""


@dataclass(frozen=True, slots=True)
class Launches:
    """Kernels one micro-batch's pass through one layer launches."""

    forward: float
    backward: float
    graphed_forward: float  # of them, inside the modules Workload.cuda_graphs captures
    graphed_backward: float
    after_sync: float  # forward kernels issued after the dispatcher's device-to-host sync


def _quantize(workload: Workload, recipe: str | None) -> int:
    return 0 if recipe is None else QUANTIZE_KERNELS[recipe]


def _linears(n: float, q: int) -> tuple[float, float]:
    """(forward, backward) kernels of n linear layers: a GEMM and its input's quantization
    forward; the data- and weight-gradient GEMMs and the output gradient's quantization
    backward."""
    return n * (1 + q), n * (2 + q)


UNPAD_KERNELS = (5, 7)
"""Forward, backward copy kernels of varlen attention's unpad / pad (Workload.attention_unpad,
compute.unpad_copies_s): forward a gather each for q, k, v, then zeros + index_put for the
output; backward zeros + scatter_ each for q, k, v and a gather of the output gradient."""


def _attention_block(
    model: ModelSpec, layout: Layout, workload: Workload, q: int
) -> tuple[float, float]:
    """Norm, QKV, (q / k norms), rotary, fused attention, output projection, residual add; the
    sequence-parallel all-gather and reduce-scatter with TP; varlen attention's copies."""
    lin_f, lin_b = _linears(2, q)
    qk = 2 if model.qk_norm else 0
    tp_comm = 2 if layout.tp > 1 else 0
    unpad_f, unpad_b = UNPAD_KERNELS if workload.attention_unpad else (0, 0)
    forward = 1 + qk + 2 + 1 + 1 + lin_f + tp_comm + unpad_f
    backward = 2 + 2 * qk + 2 + 1 + lin_b + tp_comm + unpad_b
    return forward, backward


def _dense_mlp(model: ModelSpec, layout: Layout, q: int) -> tuple[float, float]:
    """Norm, fc1 (gate and up fused), activation, fc2, residual add (+ TP collectives)."""
    lin_f, lin_b = _linears(2, q)
    tp_comm = 2 if layout.tp > 1 else 0
    return 1 + lin_f + 1 + 1 + tp_comm, 2 + lin_b + 1 + tp_comm


def _experts(model: ModelSpec, layout: Layout, workload: Workload, q: int) -> tuple[float, float]:
    """Routed experts: fc1, activation (and the routing probabilities' scale), fc2. Transformer
    Engine's GroupedLinear quantizes and runs one GEMM per local expert (Workload.
    expert_gemm_launch "per_expert"); torch._grouped_mm one kernel per projection ("grouped").
    Shared experts are a dense MLP of their own."""
    moe = model.moe
    assert moe is not None
    per_expert = workload.expert_gemm_launch == "per_expert"
    gemms = moe.num_experts / layout.ep if per_expert else 1
    lin_f, lin_b = _linears(2 * gemms, q)
    forward, backward = lin_f + 2, lin_b + 2
    if moe.num_shared_experts:
        lin_f, lin_b = _linears(2, q)
        forward, backward = forward + lin_f + 1, backward + lin_b + 1
    return forward, backward


def syncs_every_moe_layer(workload: Workload, layout: Layout) -> bool:
    """Whether the dispatcher waits on the device for the token counts in each MoE forward
    (Workload.moe_host_sync: "every_layer" Megatron; "expert_parallel" torchtitan, whose
    AllToAllTokenDispatcher copies the output splits to the host blocking, models/common/
    token_dispatcher.py, while its local dispatcher keeps them on the device)."""
    if workload.moe_host_sync == "every_layer":
        return True
    return workload.moe_host_sync == "expert_parallel" and layout.ep > 1


def layer_launches(
    model: ModelSpec, layout: Layout, workload: Workload, recipe: str | None, is_moe: bool
) -> Launches:
    """Kernels per micro-batch of one dense or MoE layer, by pass (recipe: the GEMMs'
    quantization recipe, compute.quant_recipe; None in bf16). Under Workload.cuda_graphs the
    attention block and the dense MLP, or the MoE router and the dispatcher's preprocessing,
    replay from graphs (Megatron --cuda-graph-modules attn mlp | attn moe_router
    moe_preprocess); the experts and everything after the sync stay eager."""
    q = _quantize(workload, recipe)
    attn_f, attn_b = _attention_block(model, layout, workload, q)
    if not is_moe:
        mlp_f, mlp_b = _dense_mlp(model, layout, q)
        return Launches(attn_f + mlp_f, attn_b + mlp_b, attn_f + mlp_f, attn_b + mlp_b, 0.0)
    exp_f, exp_b = _experts(model, layout, workload, q)
    router_f, router_b = ROUTER_KERNELS
    post_f, post_b = DISPATCH_POST_KERNELS
    # pre-MLP norm and residual add, router, preprocessing; then the post-sync segment
    pre_f = 1 + router_f + DISPATCH_PRE_KERNELS
    after = post_f + exp_f + 1
    return Launches(
        forward=attn_f + pre_f + after,
        backward=attn_b + 2 + router_b + post_b + exp_b,
        graphed_forward=attn_f + router_f + DISPATCH_PRE_KERNELS,
        graphed_backward=attn_b + router_b,
        after_sync=after if syncs_every_moe_layer(workload, layout) else 0.0,
    )


@dataclass(frozen=True, slots=True)
class HostTime:
    """Host seconds to issue one micro-batch's pass through one layer."""

    forward_s: float
    backward_s: float
    after_sync_s: float  # of forward_s, issued after the dispatcher's sync (0: no sync)


def host_time(launches: Launches, workload: Workload) -> HostTime:
    """Launches at Workload.host_s_per_kernel each, graphed ones at the replay cost."""
    eager_s = workload.host_s_per_kernel
    graph_s = GRAPH_REPLAY_S_PER_KERNEL if workload.cuda_graphs else eager_s

    def issue_s(total: float, graphed: float) -> float:
        return graphed * graph_s + (total - graphed) * eager_s

    return HostTime(
        forward_s=issue_s(launches.forward, launches.graphed_forward),
        backward_s=issue_s(launches.backward, launches.graphed_backward),
        after_sync_s=launches.after_sync * eager_s,
    )
