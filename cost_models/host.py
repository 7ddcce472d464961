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

Transformer Engine modules (Workload.host_issue "te_modules", the Megatron profile): a TE module
call costs far more host time than the kernels it launches (its Python: quantizer setup, FP8
state, autograd context, workspace and output allocation); its measured CPU time per call
(TE_MODULE_GRACE_S) replaces the launch cost of the kernels it issues. The host CPU is an input
(GpuSpec.host_cpu): Python on a Grace core runs the same op 2.75x slower than on the DGX H100's
Xeon (HOST_CPU_OVER_X86).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .specs import Layout, ModelSpec, Workload

GRAPH_REPLAY_S_PER_KERNEL = 1.17e-6
"""Host seconds per kernel replayed from a CUDA graph (launch.csv, cuda_graph row: 1.175 us)."""

QUANTIZE_KERNELS = {
    "delayed": 1,
    "tensorwise": 3,
    "blockwise": 1,
    "mxfp8": 1,
    "nvfp4": 2,
}
"""Kernels Transformer Engine launches to quantize one GEMM operand (transformer_engine/pytorch/
tensor quantizers): delayed scaling casts with the scale of the amax history (1); current
(tensorwise) scaling computes the amax, the scale from it, then casts (3:
Float8CurrentScalingQuantizer, nvte_compute_amax / nvte_compute_scale_from_amax / nvte_quantize);
blockwise and MXFP8 compute per-block scales inside the cast kernel (1); NVFP4 reads the amax of
the input and of its Hadamard transform first, then casts both copies in one kernel (2:
csrc/quantizer.cpp NVFP4Quantizer::quantize_impl, nvte_hadamard_transform_amax /
nvte_quantize_with_hadamard_transform)."""

GRAD_QUANTIZE_EXTRA_KERNELS = {"nvfp4": 1}
"""Further kernels quantizing an output gradient: NVFP4 rounds gradients stochastically
(NVFP4BlockScaling fp4_quant_bwd_grad stochastic_rounding), and each such cast first writes its
Philox seed and offset to the device (quantize_impl: philox_unpack ->
nvte_extract_seed_and_offset)."""

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


EXPERT_PAD_KERNELS = (3, 3)
"""Forward, backward kernels of Transformer Engine's quantization padding around the grouped
experts (pads_expert_rows): forward Fp8Padding of the routed rows and of their probabilities
(tex.fused_multi_row_padding, one kernel each) and Fp8Unpadding of the output
(fused_multi_row_unpadding); backward each one's inverse (transformer_engine/pytorch/module/
fp8_padding.py, fp8_unpadding.py)."""


def sorts_by_local_expert(model: ModelSpec, layout: Layout, workload: Workload) -> bool:
    """Whether Megatron's all-to-all dispatcher sorts the rows it received by local expert and
    restores their order before the combine (megatron/core/transformer/moe/token_dispatcher.py
    MoEAlltoAllTokenDispatcher.dispatch_postprocess "Permutation 2: Sort tokens by local
    expert", sort_chunks_by_idxs, and combine_preprocess "Unpermutation 2"; the token-drop path
    transposes the same rows with .contiguous()): with more than one local expert the
    all-to-all delivers rows grouped by source rank, the experts need them grouped by expert.
    Workload.moe_dispatch "permute" (Megatron's token permutation), moe_dispatcher "alltoall"
    (DeepEP / HybridEP deliver rows in expert order: _DeepepManager permutes the received rows
    once, straight into expert order, and HybridEP's dispatch writes them so). Never under
    Workload.full_iteration_cuda_graph: capture needs static shapes, which Megatron-Bridge's
    full-iteration MoE recipes get from HybridEP's per-rank capacity (perf_recipes
    _enable_hybridep_full_iteration_mxfp8 / _enable_deepseek_full_iteration_mxfp8:
    moe_expert_rank_capacity_factor, "HybridEP full-iteration"), so the rows arrive in expert
    order and padded."""
    moe = model.moe
    return (
        moe is not None
        and _permutes_rows(workload)
        and moe.num_experts / layout.ep > 1
    )


def _permutes_rows(workload: Workload) -> bool:
    """Megatron's token permutation around the all-to-all dispatcher outside a full-iteration
    graph (sorts_by_local_expert, pads_expert_rows)."""
    return (
        workload.moe_dispatch == "permute"
        and workload.moe_dispatcher == "alltoall"
        and not workload.full_iteration_cuda_graph
    )


def pads_expert_rows(
    model: ModelSpec, layout: Layout, workload: Workload, recipe: str | None
) -> bool:
    """Whether Megatron's TEGroupedMLP copies the routed rows into a padded buffer before the
    quantized expert GEMMs and the output back out of it (megatron/core/transformer/moe/
    experts.py TEGroupedMLP.forward: quantization_padding = TE Fp8Padding of the hidden states
    and probabilities, quantization_unpadding = Fp8Unpadding of the output, whenever
    config.fp8 or config.fp4; TE pads each expert's rows to 16 (per-tensor fp8) or 32 (MXFP8 /
    NVFP4) rows and returns the input untouched only when every count is already aligned,
    transformer_engine/pytorch/module/fp8_padding.py). Dropless routing (the model prices no
    capacity) leaves the counts unaligned unless something aligned them first:
    Workload.moe_router_padding (Megatron --moe-router-padding-for-fp8 / -quantization pads
    the routing map), or a fused dispatcher: HybridEP pads inside its dispatch
    (token_dispatcher.py _HybridEPManager.dispatch pad_multiple) and Megatron after core 0.19
    pads inside DeepEP's fused permutation (moe_utils.skip_routed_expert_padding). The model's
    'deepep' dispatcher stands for both flex back-ends, so only the all-to-all dispatcher pads
    here (DeepEP under core <= 0.19 without grouped tensors copies too: not priced), and not
    under a full-iteration graph (sorts_by_local_expert: HybridEP pads), nor when padding to
    capacity aligned the counts (capacity_rows_aligned)."""
    if recipe is None or not _permutes_rows(workload) or workload.moe_router_padding:
        return False
    return not capacity_rows_aligned(model, layout, workload, recipe)


def capacity_rows_aligned(
    model: ModelSpec, layout: Layout, workload: Workload, recipe: str
) -> bool:
    """Whether Workload.moe_pad_to_capacity already aligns every expert's rows for the
    quantized GEMMs, so TE's Fp8Padding returns them untouched: each router sends exactly the
    capacity ceil(t x top_k / num_experts x factor) rows to every expert (moe_utils.py
    get_capacity over the router's t = micro_batch x seq_len / (cp x tp) tokens under sequence
    parallelism), so an expert's count is a multiple of it, aligned when the capacity is a
    multiple of 32 under MXFP8 / NVFP4 and of 16 otherwise (megatron/core/fp8_utils.py
    get_fp8_align_size, fp4_utils.py get_fp4_align_size)."""
    factor = workload.moe_capacity_factor
    if not workload.moe_pad_to_capacity or factor is None or model.moe is None:
        return False
    tokens = layout.micro_batch * workload.seq_len / (layout.cp * layout.tp)
    capacity = math.ceil(tokens * model.moe.top_k / model.moe.num_experts * factor)
    return capacity % (32 if recipe in ("mxfp8", "nvfp4") else 16) == 0


HOST_CPU_OVER_X86 = {"x86": 1.0, "grace": 37.08 / 13.48}
"""Host time of the same Python op on each host CPU over an x86 DGX host's: torch.nn.Linear
forward (bf16, 8,192 x 2,048), CPU time per call 37.08 us on GB200 (Grace) against 13.48 us on
H100 DGX (Xeon Platinum 8480C) (TransformerEngine issue #2053, "High CPU overhead on Grace
systems"; GH200: 33.17 us, 2.46x). Scales the eager launch cost (measured on an x86 host) and
the TE module times (measured on GB200)."""

TE_MODULE_GRACE_S = {
    ("layernorm_linear", False): (83.48e-6, 397.73e-6),
    ("layernorm_linear", True): (135.42e-6, 518.67e-6),
    ("linear", False): (59.19e-6, 311.30e-6),
    ("linear", True): (114.51e-6, 440.93e-6),
}
"""(forward, forward + backward) host seconds of one Transformer Engine module call on GB200, by
(module, quantized): TransformerEngine PR #3523 ("Remove the view() calls from Linear/LNLinear/
LNMLP modules", 2026-09, GB200, CPU time only), the column before the change (TE main then):
Linear BF16 59.19 / 311.30 us, MXFP8 114.51 / 440.93 us; LayerNormLinear BF16 83.48 / 397.73 us,
MXFP8 135.42 / 518.67 us. Quantized recipes other than MXFP8 take its row: current scaling adds
an amax and a scale kernel per operand (QUANTIZE_KERNELS), delayed scaling its amax-history
bookkeeping, so the row is a lower bound for them. Older TE was slower (issue #2053, TE of
2025-08: Linear BF16 forward 99.66 us on GB200): not modelled."""


def te_module_s(module: str, quantized: bool, host_cpu: str) -> tuple[float, float]:
    """(forward, backward) host seconds of one TE module call on `host_cpu`."""
    forward, both = TE_MODULE_GRACE_S[(module, quantized)]
    scale = HOST_CPU_OVER_X86[host_cpu] / HOST_CPU_OVER_X86["grace"]
    return forward * scale, (both - forward) * scale


@dataclass(frozen=True, slots=True)
class Launches:
    """Kernels one micro-batch's pass through one layer launches."""

    forward: float
    backward: float
    graphed_forward: float  # of them, inside the modules Workload.cuda_graphs captures
    graphed_backward: float
    after_sync: float  # forward kernels issued after the dispatcher's device-to-host sync


def _quantize_kernels(recipe: str | None) -> tuple[int, int]:
    """Kernels quantizing a forward input and an output gradient under `recipe`."""
    if recipe is None:
        return 0, 0
    q = QUANTIZE_KERNELS[recipe]
    return q, q + GRAD_QUANTIZE_EXTRA_KERNELS.get(recipe, 0)


def _linears(n: float, q: tuple[int, int]) -> tuple[float, float]:
    """(forward, backward) kernels of n linear layers: a GEMM and its input's quantization
    forward; the data- and weight-gradient GEMMs and the output gradient's quantization
    backward (q: _quantize)."""
    return n * (1 + q[0]), n * (2 + q[1])


UNPAD_KERNELS = (5, 7)
"""Forward, backward copy kernels of varlen attention's unpad / pad (Workload.attention_unpad,
compute.unpad_copies_s): forward a gather each for q, k, v, then zeros + index_put for the
output; backward zeros + scatter_ each for q, k, v and a gather of the output gradient."""


def _attention_block(
    model: ModelSpec, layout: Layout, workload: Workload, q: tuple[int, int]
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


CLAMP_KERNELS = {True: (3, 9), False: (2, 9)}
"""(forward, backward) kernels of ModelSpec.activation_clamp's clamps ahead of one gated
activation (gpt-oss's swiglu_limit), keyed by Workload.fused_elementwise as compute.CLAMP_ELEMS
is. Forward: the gate half's clamp(max) and the up half's clamp(min, max), and on Megatron's
fused path the torch.cat that joins them for the fused quick-GeGLU (megatron-core 0.19
fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl; the eager glu() of moe/experts.py
and mlp.py feeds the halves on). Backward: PyTorch's clamp_backward (torch/csrc/autograd/
FunctionsManual.cpp) builds a 0-dim zero (at::scalar_tensor: a fill) and takes where() over the
mask: one comparison for the one-sided clamp (3 kernels), two and logical_and_ for the
two-sided one (5); the chunk's backward joins the halves' gradients (SplitBackward0: one cat);
the cat's own backward is views."""


def _clamps(model: ModelSpec, workload: Workload) -> tuple[int, int]:
    """(forward, backward) clamp kernels ahead of one gated activation (CLAMP_KERNELS)."""
    if model.activation_clamp is None or not model.gated_mlp:
        return 0, 0
    return CLAMP_KERNELS[workload.fused_elementwise]


def _dense_mlp(
    model: ModelSpec, layout: Layout, workload: Workload, q: tuple[int, int]
) -> tuple[float, float]:
    """Norm, fc1 (gate and up fused), the activation's clamps (CLAMP_KERNELS), activation, fc2,
    residual add (+ TP collectives)."""
    lin_f, lin_b = _linears(2, q)
    tp_comm = 2 if layout.tp > 1 else 0
    clamp_f, clamp_b = _clamps(model, workload)
    return 1 + lin_f + 1 + 1 + tp_comm + clamp_f, 2 + lin_b + 1 + tp_comm + clamp_b


def _experts(
    model: ModelSpec, layout: Layout, workload: Workload, q: tuple[int, int]
) -> tuple[float, float]:
    """Routed experts: fc1, the activation's clamps (CLAMP_KERNELS), activation (and the routing
    probabilities' scale), fc2. Transformer Engine's GroupedLinear quantizes and runs one GEMM
    per local expert (Workload.expert_gemm_launch "per_expert"); torch._grouped_mm one kernel
    per projection ("grouped"). Shared experts are a dense MLP of their own, clamped alike."""
    moe = model.moe
    assert moe is not None
    per_expert = workload.expert_gemm_launch == "per_expert"
    gemms = moe.num_experts / layout.ep if per_expert else 1
    lin_f, lin_b = _linears(2 * gemms, q)
    clamp_f, clamp_b = _clamps(model, workload)
    forward, backward = lin_f + 2 + clamp_f, lin_b + 2 + clamp_b
    if moe.num_shared_experts:
        lin_f, lin_b = _linears(2, q)
        forward, backward = forward + lin_f + 1 + clamp_f, backward + lin_b + 1 + clamp_b
    return forward, backward


def syncs_every_moe_layer(workload: Workload, layout: Layout) -> bool:
    """Whether the dispatcher waits on the device for the token counts in each MoE forward
    (Workload.moe_host_sync: "every_layer" Megatron; "expert_parallel" torchtitan, whose
    AllToAllTokenDispatcher copies the output splits to the host blocking, models/common/
    token_dispatcher.py, while its local dispatcher keeps them on the device). Never inside a
    full-iteration CUDA graph (Workload.full_iteration_cuda_graph): capture needs the dispatch's
    shapes static, so the counts stay on the device. Nor under Workload.moe_pad_to_capacity:
    every expert's count is the capacity, computed on the host (megatron/core/transformer/moe/
    token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess drop_and_pad: torch.full of
    capacity x tp x ep; _maybe_dtoh_and_synchronize does nothing when drop_and_pad)."""
    if workload.full_iteration_cuda_graph or workload.moe_pad_to_capacity:
        return False
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
    q = _quantize_kernels(recipe)
    attn_f, attn_b = _attention_block(model, layout, workload, q)
    if not is_moe:
        mlp_f, mlp_b = _dense_mlp(model, layout, workload, q)
        return Launches(attn_f + mlp_f, attn_b + mlp_b, attn_f + mlp_f, attn_b + mlp_b, 0.0)
    exp_f, exp_b = _experts(model, layout, workload, q)
    router_f, router_b = ROUTER_KERNELS
    post_f, post_b = DISPATCH_POST_KERNELS
    # pre-MLP norm and residual add, router, preprocessing; then the post-sync segment
    pre_f = 1 + router_f + DISPATCH_PRE_KERNELS
    pads = pads_expert_rows(model, layout, workload, recipe)
    pad_f, pad_b = EXPERT_PAD_KERNELS if pads else (0, 0)
    after = post_f + exp_f + pad_f + 1
    return Launches(
        forward=attn_f + pre_f + after,
        backward=attn_b + 2 + router_b + post_b + exp_b + pad_b,
        graphed_forward=attn_f + router_f + DISPATCH_PRE_KERNELS,
        graphed_backward=attn_b + router_b,
        after_sync=after if syncs_every_moe_layer(workload, layout) else 0.0,
    )


@dataclass(frozen=True, slots=True)
class Modules:
    """Transformer Engine module calls of one micro-batch's pass through one layer, and the
    kernels of its Launches they issue themselves (their host time is the module's measured CPU
    time, TE_MODULE_GRACE_S, instead of a launch cost each)."""

    layernorm_linear: int  # in the graphable blocks: QKV, and the dense MLP's fc1
    linear: int  # in the graphable blocks: the output projection, and the dense MLP's fc2
    expert_linear: int  # after the dispatch: GroupedLinear fc1, fc2, the shared expert's 2
    kernels: tuple[float, float]  # (forward, backward) kernels the graphable calls issue
    expert_kernels: tuple[float, float]  # those the expert calls issue
    quantized: bool  # the GEMMs run in a low-precision recipe (the module table's fp8 row)


def layer_modules(model: ModelSpec, layout: Layout, recipe: str | None, is_moe: bool) -> Modules:
    """TE module calls per layer as Megatron-Core builds it (megatron/core/models/gpt/
    gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec: linear_qkv and the dense
    linear_fc1 TELayerNormColumnParallelLinear, linear_proj and linear_fc2 TERowParallelLinear;
    the MoE experts TEGroupedMLP, whose fc1 and fc2 are TEColumnParallelGroupedLinear /
    TERowParallelGroupedLinear; shared experts TEColumnParallelLinear / TERowParallelLinear).
    A GroupedLinear call is priced as one Linear call (its first expert's GEMM and quantization
    inside it); each further local expert's GEMM and quantization keep their launch cost (TE issue
    #1499: the per-expert host work is torch.split and 2 x num_gemms torch.empty around the
    multi-stream GEMMs). Norms outside these modules (the MoE pre-MLP TENorm, q / k norms), the
    attention module, rotary, activations and the dispatcher stay priced per kernel."""
    lin_f, lin_b = _linears(1, _quantize_kernels(recipe))
    # the fused norm of a LayerNormLinear: 1 kernel forward, 2 backward
    ln_linear, linear = (2, 2) if not is_moe else (1, 1)
    kernels = (ln_linear * (1 + lin_f) + linear * lin_f, ln_linear * (2 + lin_b) + linear * lin_b)
    experts = 0
    if is_moe:
        moe = model.moe
        assert moe is not None
        experts = 2 + (2 if moe.num_shared_experts else 0)
    expert_kernels = (experts * lin_f, experts * lin_b)
    return Modules(ln_linear, linear, experts, kernels, expert_kernels, recipe is not None)


@dataclass(frozen=True, slots=True)
class HostTime:
    """Host seconds to issue one micro-batch's pass through one layer."""

    forward_s: float
    backward_s: float
    after_sync_s: float  # of forward_s, issued after the dispatcher's sync (0: no sync)


def host_time(
    launches: Launches,
    workload: Workload,
    host_cpu: str = "x86",
    modules: Modules | None = None,
) -> HostTime:
    """Launches at Workload.host_s_per_kernel each (measured on an x86 host, scaled to
    `host_cpu`), graphed ones at the replay cost; with `modules` (Workload.host_issue
    "te_modules") each TE module call at its measured CPU time instead of its kernels' launches.
    Under Workload.cuda_graphs the graphable blocks' modules replay with their kernels; the
    experts' GroupedLinear calls stay eager, after the dispatcher's sync. Under
    Workload.full_iteration_cuda_graph every kernel replays from the one graph (megatron/core/
    transformer/transformer_config.py cuda_graph_impl "full_iteration": "1 CUDA graph for the
    whole forward-backward path"): no module's Python runs and nothing waits on a sync."""
    if workload.full_iteration_cuda_graph:
        return HostTime(
            forward_s=launches.forward * GRAPH_REPLAY_S_PER_KERNEL,
            backward_s=launches.backward * GRAPH_REPLAY_S_PER_KERNEL,
            after_sync_s=0.0,
        )
    eager_s = workload.host_s_per_kernel * HOST_CPU_OVER_X86[host_cpu]
    graph_s = GRAPH_REPLAY_S_PER_KERNEL if workload.cuda_graphs else eager_s

    def issue_s(total: float, graphed: float) -> float:
        return graphed * graph_s + (total - graphed) * eager_s

    forward = issue_s(launches.forward, launches.graphed_forward)
    backward = issue_s(launches.backward, launches.graphed_backward)
    after = launches.after_sync * eager_s
    if modules is not None:
        quantized = modules.quantized
        ln_f, ln_b = te_module_s("layernorm_linear", quantized, host_cpu)
        lin_f, lin_b = te_module_s("linear", quantized, host_cpu)
        exp_f = modules.expert_linear * lin_f - modules.expert_kernels[0] * eager_s
        forward += exp_f
        backward += modules.expert_linear * lin_b - modules.expert_kernels[1] * eager_s
        after += exp_f if launches.after_sync else 0.0
        if not workload.cuda_graphs:
            n_ln, n_lin = modules.layernorm_linear, modules.linear
            forward += n_ln * ln_f + n_lin * lin_f - modules.kernels[0] * eager_s
            backward += n_ln * ln_b + n_lin * lin_b - modules.kernels[1] * eager_s
    return HostTime(forward_s=forward, backward_s=backward, after_sync_s=after)
