"""FLOPs and time of one transformer layer (and the embedding / LM head) on one GPU.

Every GEMM is listed with its per-GPU shape after the TP / CP / EP split, and timed at
``peak * efficiency(shape)``: small matrices run below peak (tile under-use), which is what makes a
1B model reach a lower MFU than a 100B one on the same GPU. Attention scores run as a fused
(flash) kernel at its own efficiency; norms, activations, residual adds and rotary embeddings are
memory-bound and timed against HBM bandwidth. Formulas and sources: docs/cost_model.md#compute.

Conventions: "forward" is one micro-batch through one layer. Backward GEMMs cost 2x forward
(dgrad + wgrad, Narayanan et al. 2021 sec. 5.1); flash-attention backward costs 2.5x forward
(it recomputes the scores: Dao 2023, FlashAttention-2, sec. 3.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .calibration import MOE_LOAD_IMBALANCE, GenerationCalibration, hbm_bytes_per_s
from .errors import InvalidInput
from .host import (
    host_time,
    layer_launches,
    layer_modules,
    pads_expert_rows,
    sorts_by_local_expert,
)
from .kernels import (
    EXTRAPOLATED,
    MEASURED,
    KernelBook,
    attended_keys,
    tile_rate_ratio,
    window_tile_ratio,
)
from .params import mlp_matrices
from .specs import LOW_PRECISION, GpuSpec, Layout, ModelSpec, Workload
from .units import TFLOPS

BF16_BYTES = 2
BACKWARD_ATTENTION_FACTOR = 2.5
"""Flash-attention backward / forward time where no pass is priced on its own (module docstring:
Dao 2023, FlashAttention-2, sec. 3.1)."""

QUANT_DATA_BYTES = {"delayed": 1, "tensorwise": 1, "blockwise": 1, "mxfp8": 1, "nvfp4": 0.5}
"""Bytes per element of one quantized copy of a GEMM operand: fp8 1 B, NVFP4 (E2M1) 0.5 B."""
QUANT_SCALE_BYTES = {"delayed": 0, "tensorwise": 0, "blockwise": 4 / 128, "mxfp8": 1 / 32,
                     "nvfp4": 1 / 16}  # fmt: skip
"""Scale bytes per element of one copy: per-tensor recipes one scalar; blockwise (TE
Float8BlockScaling, DeepSeek-V3 1x128 tiles) an fp32 per 128 elements; MXFP8 (OCP MX, TE
MXFP8BlockScaling) an E8M0 per 32; NVFP4 (TE NVFP4BlockScaling; NVIDIA, arXiv 2509.25149) an
E4M3 per 16 (its fp32 per-tensor scale is a scalar)."""
AMAX_PASS_BYTES = {"tensorwise": 2, "nvfp4": 2}
"""A separate pass reading the bf16 tensor for its amax before the cast: current scaling (TE
Float8CurrentScalingQuantizer: nvte_compute_amax, then the cast) and NVFP4's global scale (TE
quantizer.cpp NVFP4Quantizer::quantize_impl: nvte_hadamard_transform_amax computes the amax of
the input and of its Hadamard-transformed transpose in one read). Delayed scaling takes the
scale of the amax history and the block recipes compute their scales inside the cast kernel."""
RHT_UNFUSED_EXTRA_BYTES = 6
"""NVFP4's column-wise copy (the wgrad operands) is cast after a 16x16 random Hadamard transform
(NVFP4BlockScaling fp4_quant_fwd_inp / fp4_quant_bwd_grad random_hadamard_transform). TE fuses
the row-wise cast and the transform + column-wise cast into one kernel reading the input once
(nvte_quantize_with_hadamard_transform, the transform on the tensor cores) when the operand has
rows % 64 == 0 and columns % 128 == 0 (NVFP4Quantizer::is_eligible_for_rht_cast_fusion); other
shapes take quantize_with_rht_unfused_helper: the row-wise cast reads the input, the transform
reads it again and writes its bf16 result, the column-wise cast reads that: +2 +2 +2 B."""
RHT_FUSED_ROWS, RHT_FUSED_COLS = 64, 128


def quant_bytes(recipe: str, copies: int) -> float:
    """HBM bytes per element to quantize one GEMM operand (docs/cost_model.md, FP8 and FP4
    recipes): read the bf16 tensor (2 B), the amax pass where the recipe has one
    (AMAX_PASS_BYTES), and write `copies` quantized copies with their scales: a row-wise copy
    for this pass's GEMM and a column-wise one for the GEMM of the other pass (quant_copies)."""
    per_copy = QUANT_DATA_BYTES[recipe] + QUANT_SCALE_BYTES[recipe]
    return BF16_BYTES + AMAX_PASS_BYTES.get(recipe, 0) + copies * per_copy


QUANT_BYTES_PER_ELEMENT = {r: quant_bytes(r, 2) for r in QUANT_DATA_BYTES}
"""quant_bytes with both copies: delayed 4, tensorwise 6, blockwise 4.06, mxfp8 4.06, nvfp4
5.125."""

PER_TENSOR = ("delayed", "tensorwise")

NORM_FUSED_SAVES_BYTES = {"delayed": 2.0, "tensorwise": 2.0}
"""Bytes per element the norm kernel saves the cast of its output (the input of a Transformer
Engine LayerNormLinear: QKV, dense FC1; TE pytorch/csrc/extensions/normalization.cpp): delayed
scaling's norm writes fp8 itself (Impl::FULLY_FUSED: the cast's bf16 read is gone); current
scaling's norm emits the amax with its output (Impl::FUSED_NORM_AMAX_FP8: the amax pass is gone);
MXFP8 (cuDNN path only under NVTE_NORM_FWD_USE_CUDNN) and NVFP4 with its Hadamard amax
(Impl::UNFUSED) cast after the norm as any operand. The norm's own output write is left as the
elementwise term prices it."""


def quant_copies(recipe: str, generation: str) -> int:
    """Quantized copies a Transformer Engine cast writes per operand: 2 (row-wise and
    column-wise), except the per-tensor fp8 recipes on Blackwell, whose fp8 tensor cores run
    the non-TN layouts, so the row-wise data serves both passes and no transpose is written (TE
    quantizer.cpp Float8Quantizer / Float8CurrentScalingQuantizer::create_tensor: with_transpose
    = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported(), true from sm 10.0)."""
    return 1 if recipe in PER_TENSOR and generation == "blackwell" else 2


@dataclass(frozen=True, slots=True)
class Gemm:
    """`count` GEMMs of shape [m, k] x [k, n] per GPU, forward."""

    m: float
    n: float
    k: float
    count: float = 1.0
    fp8_capable: bool = True  # routers and heads stay in bf16 under fp8 recipes
    grouped: bool = False  # expert grouped GEMM: slower tiles, and the busiest rank sets the time
    imbalance: float = 1.0  # grouped: busiest EP rank's rows / mean (moe_imbalance)
    # Under sequence parallelism, the operand quantized on this rank's sequence shard and then
    # all-gathered (quantize_s): "input" of a column-parallel Linear (QKV, FC1), "grad" (the
    # output gradient) of a row-parallel one (projection, FC2); "" neither.
    sp_operand: str = ""
    norm_fed: bool = False  # input is a norm's output (TE LayerNormLinear: QKV, dense FC1)

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count


@dataclass(frozen=True, slots=True)
class LayerTime:
    """Seconds for one micro-batch through one layer on one GPU, by kind of work (forward)."""

    gemm_s: float
    attention_s: float
    elementwise_s: float
    overhead_s: float
    model_flops: float  # forward FLOPs counted for MFU (GEMMs + causal attention)
    selective_s: float | None = None  # torchtitan op-level selective recompute seconds
    module_s: tuple[tuple[str, float], ...] = ()  # forward seconds per Megatron recompute module
    gemm_backward_s: float | None = None  # measured (kernel tables); None: 2x forward
    attention_backward_s: float | None = None  # measured (kernel tables); None: 2.5x forward
    lookups: tuple[tuple[str, str], ...] = ()  # (term, kernels.STATUSES) per table look-up
    quantize_s: float = 0.0  # forward GEMM inputs quantized (QUANT_BYTES_PER_ELEMENT)
    quantize_backward_s: float = 0.0  # output gradients quantized for dgrad / wgrad
    elementwise_backward_s: float | None = None  # its own backward traffic; None: 2x forward
    unpad_s: float = 0.0  # varlen attention's gather / scatter copies (unpad_copies_s), forward
    unpad_backward_s: float = 0.0  # their inverse copies in backward
    dispatch_s: float = 0.0  # MoE copies beyond permute / unpermute (dispatch_copies_s)
    dispatch_backward_s: float = 0.0  # their autograd inverses in backward
    overhead_backward_s: float | None = None  # backward host overhead; None: overhead_s

    @property
    def forward_s(self) -> float:
        return (
            self.gemm_s
            + self.attention_s
            + self.elementwise_s
            + self.overhead_s
            + self.quantize_s
            + self.unpad_s
            + self.dispatch_s
        )

    @property
    def attention_bwd_s(self) -> float:
        """The backward's attention seconds: as priced per pass (tables, per-part speeds), else
        FlashAttention's 2.5x the forward. Every term that hides under it (cp.py) reads this."""
        if self.attention_backward_s is not None:
            return self.attention_backward_s
        return BACKWARD_ATTENTION_FACTOR * self.attention_s

    @property
    def backward_s(self) -> float:
        gemm = 2 * self.gemm_s if self.gemm_backward_s is None else self.gemm_backward_s
        attn = self.attention_bwd_s
        quant = self.quantize_backward_s + self.unpad_backward_s + self.dispatch_backward_s
        elem = self.elementwise_backward_s
        elem = 2 * self.elementwise_s if elem is None else elem
        overhead = self.overhead_s if self.overhead_backward_s is None else self.overhead_backward_s
        return gemm + attn + elem + overhead + quant

    def recompute_s(self, recompute: str, modules: tuple[str, ...] = ("core_attn",)) -> float:
        """Extra forward work in backward: full reruns the layer; selective reruns the Megatron
        `modules` (module_s; Specs.Layout.selective_modules) or torchtitan's op-level policy."""
        if recompute == "full":
            return self.forward_s
        if recompute == "selective":
            if self.selective_s is not None:
                return self.selective_s
            return sum(seconds for name, seconds in self.module_s if name in modules)
        return 0.0


def gemm_efficiency(g: Gemm, cal: GenerationCalibration, fp8: bool) -> float:
    """Achieved fraction of peak: a large-GEMM ceiling times d/(d+d_half) for each dimension."""
    ceiling = cal.gemm_efficiency_fp8 if fp8 else cal.gemm_efficiency_bf16
    if g.grouped:
        ceiling *= cal.grouped_gemm_efficiency
    half = cal.gemm_half_dim
    if fp8 and cal.gemm_half_dim_fp8 is not None:  # a per-cluster fp8 sweep measured its own
        half = cal.gemm_half_dim_fp8
    shape = 1.0
    for d in (g.m, g.n, g.k):
        shape *= d / (d + half)
    return ceiling * shape


def gemm_time_s(
    gemms: list[Gemm],
    gpu: GpuSpec,
    cal: GenerationCalibration,
    fp8: bool,
    book: KernelBook | None = None,
) -> float:
    """Forward seconds of `gemms`: from the kernel tables where `book` is given, else the
    efficiency curve."""
    if book is not None:
        return gemm_passes_s(gemms, gpu, cal, fp8, book)[0]
    total = 0.0
    for g in gemms:
        if g.flops <= 0:  # an empty GEMM (unknown vocabulary) costs nothing
            continue
        use_fp8 = fp8 and g.fp8_capable and gpu.peak_fp8_tflops is not None
        peak = gemm_peak_tflops(g, gpu, use_fp8) * TFLOPS
        total += g.imbalance * g.flops / (peak * gemm_efficiency(g, cal, use_fp8))
    return total


def _gemm_passes(g: Gemm) -> tuple[tuple[str, float, float, float], ...]:
    """A Linear's three GEMMs as cuBLAS runs them (layout, m, n, k): forward Y = X W^T (TN),
    data gradient dX = dY W (NN), weight gradient dW = dY^T X (NT)."""
    return (("TN", g.m, g.n, g.k), ("NN", g.m, g.k, g.n), ("NT", g.n, g.k, g.m))


def gemm_pass_s(
    g: Gemm,
    pass_index: int,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    fp8: bool,
    book: KernelBook | None,
) -> tuple[float, str]:
    """(seconds, look-up status) of one pass of a dense GEMM (0 forward TN, 1 data gradient NN,
    2 weight gradient NT; _gemm_passes), as gemm_passes_s prices it: from the kernel tables,
    a shape outside them (or no tables) at the efficiency curve's speed (`extrapolated`)."""
    if g.flops <= 0:
        return 0.0, MEASURED
    use_fp8 = fp8 and g.fp8_capable and gpu.peak_fp8_tflops is not None
    peak = gemm_peak_tflops(g, gpu, use_fp8) * TFLOPS
    curve_s = g.flops / (peak * gemm_efficiency(g, cal, use_fp8))
    if book is None:
        return curve_s, EXTRAPOLATED
    layout, m, n, k = _gemm_passes(g)[pass_index]
    found, status = book.gemm_s(m, n, k, "fp8" if use_fp8 else "bf16", layout)
    return (curve_s if found is None else found * g.count), status


def gemm_passes_s(
    gemms: list[Gemm], gpu: GpuSpec, cal: GenerationCalibration, fp8: bool, book: KernelBook
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(forward, backward seconds, look-up statuses) of `gemms`, each pass from the kernel
    tables; a shape outside them runs at the efficiency curve's speed (the same for every pass,
    which is the curve's 2x-forward backward)."""
    fwd = bwd = 0.0
    looks: list[tuple[str, str]] = []
    for g in gemms:
        if g.flops <= 0:
            continue
        use_fp8 = fp8 and g.fp8_capable and gpu.peak_fp8_tflops is not None
        peak = gemm_peak_tflops(g, gpu, use_fp8) * TFLOPS
        curve_s = g.flops / (peak * gemm_efficiency(g, cal, use_fp8))
        dtype = "fp8" if use_fp8 else "bf16"
        for i, (layout, m, n, k) in enumerate(_gemm_passes(g)):
            if g.grouped:  # the busiest EP rank's rows set the time
                found, status = book.grouped_gemm_s(g.count, m, n, k, dtype)
                term, seconds = "grouped_gemm", curve_s if found is None else found
                seconds *= g.imbalance
            else:
                found, status = book.gemm_s(m, n, k, dtype, layout)
                term, seconds = "gemm", curve_s if found is None else found * g.count
            looks.append((term, status))
            if i == 0:
                fwd += seconds
            else:
                bwd += seconds
    return fwd, bwd, tuple(looks)


FLASH_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
FLASH_FWD_BWD_TFLOPS: dict[tuple[str, str, int], tuple[float, ...]] = {
    ("ampere", "fa2", 64): (88, 119, 140, 156, 165, 171),
    ("ampere", "fa2", 128): (99, 133, 155, 173, 182, 189),
    ("ampere", "flash1", 64): (58, 70, 77, 87, 92, 97),
    ("ampere", "flash1", 128): (55, 62, 69, 76, 80, 83),
    ("hopper", "fa2", 64): (141, 192, 232, 257, 273, 284),
    ("hopper", "fa2", 128): (163, 221, 265, 294, 308, 328),
    ("hopper", "flash1", 64): (104, 123, 136, 138, 149, 156),
    ("hopper", "flash1", 128): (98, 109, 108, 126, 135, 137),
}
"""Causal attention forward + backward TFLOP/s of FlashAttention (flash-attn 1.x) and
FlashAttention-2 at FLASH_SEQ_LENS tokens, head dimension 64 and 128, on one A100 80GB SXM4
(Ampere) and one H100 80GB SXM5 (Hopper): the bar labels of Dao 2023 (FlashAttention-2, arXiv
2307.08691) Fig. 4 and of its H100 figure, shipped as github.com/Dao-AILab/flash-attention
assets/flash2_a100_fwd_bwd_benchmark.png and flash2_h100_fwd_bwd_benchmark.png (commit 4f285b35,
"FlashAttention-2 release"), panels (c) and (d). Setting (benchmarks/benchmark_flash_attention.py
at 60499abc): batch x sequence = 16,384 tokens, hidden 2,048 (32 heads of 64 or 16 of 128),
fp16, FLOPs 4 * batch * seq^2 * heads * head_dim / 2 forward, x 3.5 forward + backward. Only the
flash1 rows are priced (flash1_efficiency); the same figures' flash-attn 2 bars are kept as the
measurement the fa2 class is compared with (docs/cost_model.md#attention-kernels)."""
FLASH1_GENERATIONS = tuple(sorted({g for g, k, _ in FLASH_FWD_BWD_TFLOPS if k == "flash1"}))
"""Generations flash1 is measured (and flash-attn 1.x builds) on: ampere, hopper."""


FLASH_MEASURED_PEAK_TFLOPS = {"ampere": 312.0, "hopper": 989.4}
"""Dense bf16 / fp16 peak of the parts FLASH_FWD_BWD_TFLOPS was measured on (A100 SXM4, H100
SXM5 datasheets; the FA2 paper's "theoretical maximum")."""


def flash1_efficiency(generation: str, seq_len: int, head_dim: float) -> float:
    """Forward + backward achieved / bf16 peak of FlashAttention-1-era attention on this
    generation at this sequence length and head dimension: flash-attn 1.x's measured causal
    TFLOP/s (FLASH_FWD_BWD_TFLOPS) over the measured part's peak, linear in log2(seq) between the
    measured lengths and in the head dimension between 64 and 128, held at the nearest measured
    value outside them (at 16K: 0.14 / 0.16 of the H100's peak, 0.27 / 0.31 of the
    A100's, d128 / d64). A measured kernel, not the fitted curve: the fitted fused and FA2
    efficiencies carry whatever a generation's whole steps put in them (the Hopper FA2 class
    prices 0.21 of peak where FA2 measures 0.27-0.33 at 2-16K), so no ratio to them is taken.
    Other parts of the generation run at the same fraction of their own peak.

    The class covers the flash-attn 1.x CUDA kernel and the Triton FlashAttention derived from
    it (flash-attn 1.x flash_attn/flash_attn_triton.py, vendored by llm-foundry as
    llmfoundry/models/layers/flash_attn_triton.py for `attn_impl: triton`), whose docstring says
    its forward + backward is "slightly slower than CUDA forward + backward" (tested on A100;
    llm-foundry's H100 rows imply about 1.35x the H100 figure for it: docs/accuracy.md "Held-out:
    llm-foundry"). flash-attn 1.x has no kernels for later generations;
    a workload naming it elsewhere is refused (InvalidInput)."""
    refuse_flash1(generation, "this GPU")
    xs = [math.log2(s) for s in FLASH_SEQ_LENS]
    w_dim = min(max((head_dim - 64) / 64, 0.0), 1.0)
    tflops = sum(  # np.interp holds the end values outside the measured lengths
        w * np.interp(math.log2(seq_len), xs, FLASH_FWD_BWD_TFLOPS[(generation, "flash1", dim)])
        for dim, w in ((64, 1 - w_dim), (128, w_dim))
    )
    return float(tflops) / FLASH_MEASURED_PEAK_TFLOPS[generation]


def refuse_flash1(generation: str, gpu_name: str) -> None:
    """One line (InvalidInput) where flash1 cannot run: flash-attn 1.x builds for, and is
    measured on, FLASH1_GENERATIONS only (planner.api.check_attention_kernel names the GPU)."""
    if generation not in FLASH1_GENERATIONS:
        raise InvalidInput(
            f"attention_kernel: flash1 (FlashAttention-1 era kernels) runs on "
            f"{' and '.join(FLASH1_GENERATIONS)} GPUs; {gpu_name} is {generation}"
        )


UNFUSED_SOFTMAX_BYTES = (3.0, 4.0)
"""(forward, backward) HBM bytes per element of the [batch, heads, seq, seq] score matrix moved by
the causal fused softmax of unfused attention: Megatron-LM's scaled_upper_triang_masked_softmax
(megatron/fused_kernels/scaled_upper_triang_masked_softmax.h, the kernel Megatron has run for a
causal mask since 2020; Transformer Engine's UnfusedDotProductAttention runs TE's copy of it)
loads `local_seq = row + 1` elements of each row (the lower triangle: half the matrix, 1 byte
per element on average in fp16 / bf16) and writes the whole row (2 bytes, zeros past the
diagonal); its backward loads the gradient and the output over the lower triangle (2 x 1) and
writes the whole row (2)."""

UNFUSED_TORCH_SOFTMAX_BYTES = (9.0, 11.0)
"""(forward, backward) HBM bytes per score element of Megatron-Core's PyTorch softmax fallback
(FusedScaleMaskSoftmax.forward_torch_softmax, megatron/core/fusions/fused_softmax.py at
core_v0.19.0), which runs where its fused kernel does not (megatron_fused_softmax): as the
training CLI configures it (bf16 scores: attention_softmax_in_fp32 is off without
--attention-softmax-in-fp32; no scale without --apply-query-key-layer-scaling), the cached bool
causal mask applied in place (attention_mask_func: masked_fill_, read 2 + the mask 1, write 2)
and torch's softmax over whole rows (read 2, write 2); backward, softmax's (read the gradient and
the output, write 2) and masked_fill's (read 2 + the mask 1, write 2). Measured on an H100
(bench/results/h100-2026-11-28/unfused_torch_softmax.csv): these kernels reach 0.9-1.7 TB/s, not
the copy rate, which the tables' `unfused_torch` rows carry."""

MEGATRON_FUSED_SOFTMAX_KEYS = (16, 4096)
"""Megatron-Core runs its fused causal softmax kernel for key lengths above 16 and up to 4,096
(FusedScaleMaskSoftmax.is_kernel_available, core_v0.19.0; Megatron-LM's own copy of 2021 took up
to 2,048), else the PyTorch fallback (UNFUSED_TORCH_SOFTMAX_BYTES)."""


def megatron_fused_softmax(batch_heads: int, seq: int) -> bool:
    """Whether Megatron-Core's FusedScaleMaskSoftmax runs its fused causal kernel on a call of
    `batch_heads` [seq, seq] score matrices (is_kernel_available): key length in
    MEGATRON_FUSED_SOFTMAX_KEYS and divisible by 4, and the matrices a multiple of the kernel's
    rows per block (get_batch_per_block: 128 threads of warps of min(32, 2^ceil(log2 seq))
    lanes, two rows per warp up to 128 keys)."""
    lo, hi = MEGATRON_FUSED_SOFTMAX_KEYS
    if not (lo < seq <= hi and seq % 4 == 0):
        return False
    pow2 = 1 << (seq - 1).bit_length()
    per_block = (128 // min(pow2, 32)) * (2 if pow2 <= 128 else 1)
    return batch_heads % per_block == 0


UNFUSED_DROPOUT_BYTES = (5.0, 5.0)
"""(forward, backward) HBM bytes per score element of attention dropout on the probabilities
(torch.nn.Dropout -> ATen native_dropout: reads 2, writes the output 2 and a bool mask 1;
native_dropout_backward: reads the gradient 2 and the mask 1, writes 2). Only with
ModelSpec.hidden_dropout: Megatron's --attention-dropout defaults to 0.1 as --hidden-dropout does,
and the exports set both to 0 together (planner/export/launch.py); at p = 0 ATen's dropout
returns its input untouched (aten/src/ATen/native/Dropout.cpp)."""

UNFUSED_BMMS = (("qk", "v"), ("v", "v", "qk", "qk"))
"""The batched GEMMs of unfused attention per pass, by the head dimension each contracts or
produces (2 x score elements x that dim FLOPs each, every one reading or writing the score matrix
once): forward BMM1 S = Q K^T (d_qk) and BMM2 O = P V (d_v); backward dP = dO V^T and
dV = P^T dO (d_v), dQ = dS K and dK = dS^T Q (d_qk)."""


def unfused_attention_times(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's unfused attention core on one GPU (micro-batch,
    this TP rank's heads): BMM1 -> scale + causal-mask softmax (+ dropout) -> BMM2 with the score
    matrix in HBM (Megatron-LM's ParallelAttention of 2020-2022 and Megatron-Core's
    DotProductAttention: torch.baddbmm, FusedScaleMaskSoftmax, torch.nn.Dropout, torch.bmm;
    Transformer Engine's UnfusedDotProductAttention, "BMM1 -> softmax + dropout -> BMM2").

    Each batched GEMM is priced on the roofline (Williams et al. 2009): the full (unmasked)
    seq x seq product at the part's large-GEMM ceiling, or the 2 bytes per element of the score
    matrix it writes or reads over the achieved HBM bandwidth, whichever is longer: at head dim
    64-128 a BMM does 2 x 64-128 FLOPs per score byte, about the A100's ridge point and below
    the H100's. The softmax and dropout passes are streaming traffic (UNFUSED_SOFTMAX_BYTES, or
    UNFUSED_TORCH_SOFTMAX_BYTES where Megatron-Core falls back to PyTorch's softmax:
    megatron_fused_softmax; UNFUSED_DROPOUT_BYTES). Not priced: GQA's repeat_interleave of K and
    V to every query head (TE backends.py), 2 x d / seq of the score traffic."""
    batch, seq, heads, _kv, d_qk, d_v = attention_call(model, workload, layout)
    elements = batch * heads * seq * seq
    bytes_per_s = hbm_bytes_per_s(gpu, cal)
    dims = {"qk": d_qk, "v": d_v}
    dropout = unfused_dropout_s(model, elements, bytes_per_s)
    softmax = (
        UNFUSED_SOFTMAX_BYTES
        if megatron_fused_softmax(batch * heads, seq)
        else UNFUSED_TORCH_SOFTMAX_BYTES
    )
    passes = []
    for bmms, softmax_bytes, dropout_s in zip(UNFUSED_BMMS, softmax, dropout, strict=True):
        bmm_s = sum(score_bmm_s(elements, dims[d], gpu, cal) for d in bmms)
        passes.append(bmm_s + softmax_bytes * elements / bytes_per_s + dropout_s)
    return passes[0], passes[1]


def unfused_dropout_s(model: ModelSpec, elements: float, bytes_per_s: float) -> tuple[float, float]:
    """(forward, backward) seconds of unfused attention's dropout on the probabilities of
    `elements` score elements: its streaming bytes (UNFUSED_DROPOUT_BYTES) per element at
    `bytes_per_s`, 0 without ModelSpec.hidden_dropout (measured on the H100: 0.94-1.13x this,
    bench/results/h100-2026-11-28)."""
    if not model.hidden_dropout:
        return 0.0, 0.0
    fwd_bytes, bwd_bytes = UNFUSED_DROPOUT_BYTES
    return fwd_bytes * elements / bytes_per_s, bwd_bytes * elements / bytes_per_s


def score_bmm_s(elements: float, dim: int, gpu: GpuSpec, cal: GenerationCalibration) -> float:
    """Seconds of one batched GEMM of unfused attention over `elements` score elements,
    contracting or producing a head dimension `dim`: 2 x elements x dim FLOPs at the part's
    large-GEMM ceiling, or the score matrix's 2 bytes per element it writes or reads at the
    achieved HBM bandwidth, whichever is longer (the roofline, Williams et al. 2009)."""
    flops_per_s = gpu.peak_bf16_tflops * TFLOPS * cal.gemm_efficiency_bf16
    return max(2 * elements * dim / flops_per_s, BF16_BYTES * elements / hbm_bytes_per_s(gpu, cal))


def attention_efficiency(
    cal: GenerationCalibration,
    workload: Workload,
    generation: str | None = None,
    head_dim: float = 128,
) -> float:
    """Achieved / bf16 peak of the attention kernel the workload runs (fwd + bwd): the
    generation's fused kernel at attention_efficiency, FlashAttention-2 at fa2_attention_speed
    of it, FlashAttention-1-era kernels (flash1) at their measured flash1_efficiency (needs the
    `generation`)."""
    if workload.attention_kernel == "flash1":
        if generation is None:
            raise InvalidInput("attention_kernel: flash1 is priced per GPU generation")
        return flash1_efficiency(generation, workload.seq_len, head_dim)
    speed = cal.fa2_attention_speed if workload.attention_kernel == "fa2" else 1.0
    return cal.attention_efficiency * speed


def attention_pass_efficiencies(
    cal: GenerationCalibration,
    workload: Workload,
    mla: bool,
    generation: str | None = None,
    head_dim: float = 128,
) -> tuple[float, float]:
    """(forward, backward) achieved / bf16 peak of the workload's attention kernel: one value
    for both passes unless the part's measured attention speed sets them apart (calibration
    attention_mla_efficiency for an MLA model's forward, attention_backward_efficiency)."""
    both = attention_efficiency(cal, workload, generation, head_dim)
    if workload.attention_kernel == "flash1":  # measured as one forward + backward figure
        return both, both
    scale = both / cal.attention_efficiency
    fwd = both
    if mla and cal.attention_mla_efficiency is not None:
        fwd = cal.attention_mla_efficiency * scale
    bwd = cal.attention_backward_efficiency
    return fwd, (both if bwd is None else bwd * scale)


def quant_recipe(workload: Workload) -> str | None:
    """The quantization recipe of the workload's GEMMs (QUANT_BYTES_PER_ELEMENT keys), None in
    bf16 / fp16: mxfp8 and nvfp4 are their own; fp8 takes Workload.fp8_recipe, else tensorwise
    under fp8_dynamic_scaling, else delayed (Megatron's default)."""
    if workload.precision in ("mxfp8", "nvfp4"):
        return workload.precision
    if workload.precision != "fp8":
        return None
    return workload.fp8_recipe or ("tensorwise" if workload.fp8_dynamic_scaling else "delayed")


BLOCK_SCALED_GEMM_TIME = {"blackwell": 7.161 / 6.812}
"""Time of Transformer Engine's MXFP8 GEMM over its per-tensor FP8 GEMM on the same shapes, per
generation, both with their inputs already quantized (TE docs/examples/gemm_profiling/
gemm_profiling.rst, "Autocast vs Pre-quantized", B300, benchmarks/gemm/benchmark_gemm.py
--pre-quantize: the 12 GEMMs of a hidden 4,096 / FFN 16,384 layer at 15,872 tokens, 6.812 ms
per layer FP8 CurrentScaling vs 7.161 ms MXFP8; per pass fprop x1.096, dgrad x1.029, wgrad
x1.032; the same page's figure of another run gives 1.94x / 1.74x over BF16, x1.115). The block-
scaled cuBLASLt kernel loads an E8M0 scale per 32 elements of both operands, and TE swizzles
unswizzled scales into cuBLAS's layout before each GEMM (pytorch/csrc/extensions/gemm.cpp
swizzle_scales_for_gemm: one kernel per operand; before TE 2.12 for every operand, after it for
sequence-parallel gathered ones, the others' quantizers writing swizzled scales). TE's FP8
block scaling runs the same GEMM on Blackwell (gemm.cpp: "Emulate the FP8 block scaling recipe
with MXFP8 on Blackwell", convert_block_scaling_to_mxfp8_tensor). Generations without a
measurement (CDNA4) price the block-scaled GEMM at the fp8 speed."""

BLOCK_SCALED = ("mxfp8", "blockwise")


def gemm_hardware(
    gpu: GpuSpec, workload: Workload, book: KernelBook | None
) -> tuple[GpuSpec, KernelBook | None]:
    """(GPU, kernel tables) the GEMMs of `workload` are priced with: under nvfp4 the fp8
    efficiency curve is applied to the part's NVFP4 rate, peak_fp8_tflops x its
    GpuSpec.fp4_gemm_speed where it has one (Transformer Engine's B300 GEMM profile, measured on
    the B300 and carried to B200 / GB200 / GB300 by aiconfigurator's part-to-part quotient), else
    the datasheet peak_fp4_tflops (an assumption), and no fp8 table row stands for an fp4 GEMM; a
    block-scaled fp8 recipe (MXFP8, FP8 block scaling) on a generation with a measured
    BLOCK_SCALED_GEMM_TIME runs its fp8 GEMMs that much slower than per-tensor fp8, and no
    (per-tensor) fp8 table row stands for it either."""
    if workload.precision == "nvfp4":
        if gpu.peak_fp4_tflops is None:
            raise InvalidInput(
                f"precision: nvfp4 needs NVFP4 tensor cores (Blackwell: B200, GB200, B300, "
                f"GB300); {gpu.name} has none (peak_fp4_tflops is null)"
            )
        ratio, measured = fp4_speed_over_fp8(gpu)
        peak = gpu.peak_fp8_tflops * ratio if measured else gpu.peak_fp4_tflops
        return _peak_view(gpu, peak), None
    slower = BLOCK_SCALED_GEMM_TIME.get(gpu.generation)
    if slower is None or quant_recipe(workload) not in BLOCK_SCALED or gpu.peak_fp8_tflops is None:
        return gpu, book
    view = _peak_view(gpu, gpu.peak_fp8_tflops / slower)
    _DENSE_ONLY[view] = gpu
    return view, None


def fp4_speed_over_fp8(gpu: GpuSpec) -> tuple[float, bool]:
    """(NVFP4 GEMM speed over the part's per-tensor fp8 GEMM, whether it was measured) for a part
    with NVFP4 and fp8 peaks: its GpuSpec.fp4_gemm_speed (measured on it, or carried to it from
    the part it was measured on: Fp4GemmSpeed.carried_from), else the datasheet peak ratio (an
    assumption). gemm_hardware prices with it; `presets --constants` and `estimate --explain` say
    which it is."""
    assert gpu.peak_fp4_tflops is not None and gpu.peak_fp8_tflops is not None
    if gpu.fp4_gemm_speed is not None:
        return gpu.fp4_gemm_speed.over_fp8, True
    return gpu.peak_fp4_tflops / gpu.peak_fp8_tflops, False


_PEAK_VIEWS: dict[tuple[GpuSpec, float], GpuSpec] = {}
_DENSE_ONLY: dict[GpuSpec, GpuSpec] = {}
"""Block-scaled views (gemm_hardware) -> their GPU: the slower peak is TE's dense GEMM's
(BLOCK_SCALED_GEMM_TIME measured te.Linear's generic_gemm); the grouped expert GEMMs (TE
GroupedLinear, general_grouped_gemm: one cuBLAS GEMM per expert on several streams, one
multi-tensor scale swizzle) were not measured and keep the GPU's fp8 peak."""


def _peak_view(gpu: GpuSpec, peak_fp8_tflops: float) -> GpuSpec:
    """`gpu` with the low-precision GEMM peak the fp8 efficiency curve is applied to."""
    found = _PEAK_VIEWS.get((gpu, peak_fp8_tflops))
    if found is None:
        found = gpu.model_copy(update={"peak_fp8_tflops": peak_fp8_tflops})
        _PEAK_VIEWS[(gpu, peak_fp8_tflops)] = found
    return found


def gemm_peak_tflops(g: Gemm, gpu: GpuSpec, use_fp8: bool) -> float:
    """Peak TFLOP/s `g` runs at on `gpu` (a gemm_hardware view): bf16, or the low-precision
    peak, a block-scaled view's slower one for dense GEMMs only (_DENSE_ONLY)."""
    if not use_fp8:
        return gpu.peak_bf16_tflops
    base = _DENSE_ONLY.get(gpu, gpu) if g.grouped else gpu
    assert base.peak_fp8_tflops is not None
    return base.peak_fp8_tflops


def selective_modules(workload: Workload, layout: Layout) -> tuple[str, ...]:
    """The Megatron-class modules `selective` recompute redoes under the workload's framework
    semantics (Workload.selective_recompute); the one place that reads it for modules:
    - "attention" (Megatron-Core): the layout's (Layout.selective_modules, default core_attn);
    - "unfused_attention" (Megatron-DeepSpeed 4efb479d megatron/model/transformer.py
      ParallelAttention): --recompute-granularity selective sets checkpoint_core_attention only
      on its unfused CoreAttention path; under flash attention (--use-flash-attn-v1/-v2, the
      fa2 / flash1 kernels) the layer calls core_attention_flash and checkpoints nothing;
    - "every_other_matmul" (torchtitan): no Megatron module (its op-level policy instead,
      LayerTime.selective_s)."""
    if workload.selective_recompute == "attention":
        return layout.selective_modules
    if workload.selective_recompute == "unfused_attention":
        return () if selective_redoes_nothing(workload) else ("core_attn",)
    return ()


def recomputed_norms(model: ModelSpec, workload: Workload, is_moe: bool) -> tuple[bool, bool]:
    """(input norm, pre-MLP norm): which of a layer's norms Megatron's `layernorm` recompute
    module reruns. megatron/core/transformer/transformer_layer.py (core_v0.19.0) recomputes a
    norm only where it is a module of its own (`not isinstance(..., IdentityOp)`), and the
    Transformer Engine spec (gpt_layer_specs.py get_gpt_layer_with_transformer_engine_submodules:
    the Workload.fused_elementwise layers) fuses the input norm into linear_qkv
    (TELayerNormColumnParallelLinear; MLA keeps its own TENorm) and a dense layer's pre-MLP norm
    into linear_fc1 (pre_mlp_layernorm = layer_norm if num_experts else IdentityOp). Unfused
    layers (the local spec) have both norms as modules."""
    if not workload.fused_elementwise:
        return True, True
    return model.mla is not None, is_moe


def selective_redoes_nothing(workload: Workload) -> bool:
    """Whether selective recompute reruns nothing, whatever the layout (selective_modules):
    Megatron-DeepSpeed's under flash attention. The search leaves it out beside recompute none
    (the same time, memory and launch: a flag the launcher ignores)."""
    return (
        workload.selective_recompute == "unfused_attention"
        and workload.attention_kernel != "unfused"
    )


def saves_quantized_inputs(workload: Workload) -> bool:
    """Whether backward finds the quantized copies of the forward GEMM inputs saved: Transformer
    Engine saves them (te/pytorch/module/linear.py `inputmat`); torchao's Float8Linear saves the
    bf16 input and quantizes it again in backward (torchao/float8/float8_linear.py,
    `save_for_backward(input_hp, weight_hp_t)`). The Megatron-class selective-recompute policies
    (attention, unfused_attention) mark Transformer Engine frameworks (cost_models.framework
    profiles; Megatron-DeepSpeed's fp8 is Transformer Engine's too), as memory.py reads it."""
    return workload.selective_recompute != "every_other_matmul"


def quantize_s(
    gemms: list[Gemm],
    workload: Workload,
    hbm_s: float,
    layout: Layout | None = None,
    generation: str = "hopper",
) -> tuple[float, float]:
    """(forward, backward) seconds quantizing the fp8 / fp4 GEMMs' operands for one micro-batch:
    each forward input [m, k] and each output gradient [m, n] once (and the input again in
    backward where its quantized copies are not saved: saves_quantized_inputs), at the recipe's
    bytes per element (operand_quant_bytes), as memory-bound HBM traffic. Weights are quantized
    once per step, not per micro-batch (Transformer Engine's is_first_microbatch caching), and
    are left out."""
    recipe = quant_recipe(workload)
    if recipe is None:
        return 0.0, 0.0
    te = saves_quantized_inputs(workload)
    sp_tp = layout.tp if layout is not None and layout.sequence_parallel and te else 1
    inputs = grads = 0.0
    for g in gemms:
        if not g.fp8_capable:
            continue
        args = (recipe, generation, sp_tp, te)
        saved = NORM_FUSED_SAVES_BYTES.get(recipe, 0.0) if te and g.norm_fed else 0.0
        rows = g.m / sp_tp if g.sp_operand == "input" else g.m
        inputs += g.count * (
            operand_quant_bytes(g.m, g.k, g.sp_operand == "input", *args) - saved * rows * g.k
        )
        grads += g.count * operand_quant_bytes(g.m, g.n, g.sp_operand == "grad", *args)
    return inputs / hbm_s, (grads + (0.0 if te else inputs)) / hbm_s


def operand_quant_bytes(
    rows: float, cols: float, gathered: bool, recipe: str, generation: str, sp_tp: int, te: bool
) -> float:
    """HBM bytes to quantize one [rows, cols] GEMM operand (quant_bytes, Transformer Engine's
    casts where `te`; torchao's Float8Linear keeps the two-copy figure). Under sequence
    parallelism (`sp_tp` = TP > 1) a `gathered` operand is cast on this rank's 1 / TP sequence
    shard and all-gathered quantized (TE linear.py / layernorm_linear.py: the input quantizer
    runs before gather_along_first_dim): the block recipes gather both copies; the per-tensor
    ones gather the row-wise copy only (Float8Quantizer.supports_only_rowwise_all_gather) and,
    where the GPU needs a transpose (quant_copies), write it from the gathered tensor (read 1 B
    + write 1 B per element of the whole). NVFP4 adds RHT_UNFUSED_EXTRA_BYTES on a cast whose
    rows / columns miss the fused kernel's alignment."""
    copies = quant_copies(recipe, generation) if te else 2
    local = rows / sp_tp if gathered else rows
    extra = 0.0
    if gathered and sp_tp > 1 and recipe in PER_TENSOR:
        extra = 2 * rows * cols if copies == 2 else 0.0
        copies = 1
    per = quant_bytes(recipe, copies)
    if recipe == "nvfp4" and (local % RHT_FUSED_ROWS or cols % RHT_FUSED_COLS):
        per += RHT_UNFUSED_EXTRA_BYTES
    if recipe == "nvfp4" and gathered and sp_tp > 1:
        # the column-wise copy is stored transposed, so the all-gather leaves its rank blocks
        # interleaved; TE reorders the gathered copy and its scales (distributed.py
        # _all_gather_nvfp4 -> _post_process_nvfp4_gather): read + write of the whole copy
        extra += 2 * rows * cols * (QUANT_DATA_BYTES[recipe] + QUANT_SCALE_BYTES[recipe])
    return local * cols * per + extra


AMAX_REDUCTION_BYTES = 8
"""Payload of one amax all-reduce (TE quantizer.cpp quantize_impl: allreduce_coalesced, MAX, of
the row-wise and column-wise fp32 amaxes of one tensor)."""


def amax_reductions(
    model: ModelSpec, layout: Layout, workload: Workload, is_moe: bool
) -> tuple[int, int]:
    """(forward, backward) amax all-reduces over the TP group per layer and micro-batch. A
    recipe that scales by the current amax (AMAX_PASS_BYTES: current per-tensor scaling, NVFP4's
    global scale) must give every TP rank the same scale for a tensor it quantizes on its
    sequence shard and all-gathers (sequence parallelism): TE sets the TP group as the
    quantizer's amax_reduction_group for a column-parallel Linear's input and a row-parallel
    Linear's output gradient (linear.py, layernorm_linear.py: set_quantizer_amax_reduction_group)
    and the cast waits for the all-reduce. MXFP8, blockwise and delayed scaling reduce nothing
    per tensor."""
    recipe = quant_recipe(workload)
    if recipe not in AMAX_PASS_BYTES or layout.tp <= 1 or not layout.sequence_parallel:
        return 0, 0
    if not saves_quantized_inputs(workload):
        return 0, 0  # Transformer Engine's casts only (torchao: see operand_quant_bytes)
    gemms = attention_gemms(model, 1.0, layout.tp)
    if not is_moe:
        gemms += mlp_gemms(model, 1.0, 1.0, layout.tp)
    elif model.moe is not None and model.moe.num_shared_experts:
        gemms += mlp_gemms(model, 1.0, 1.0, layout.tp, norm_fed=False)
    forward = sum(1 for g in gemms if g.sp_operand == "input")
    return forward, sum(1 for g in gemms if g.sp_operand == "grad")


def tokens_per_gpu(workload: Workload, layout: Layout) -> float:
    """Tokens of one micro-batch held by one CP rank (TP ranks share them)."""
    return layout.micro_batch * workload.seq_len / layout.cp


def local_kv_heads(model: ModelSpec, tp: int) -> float:
    """KV heads of one TP rank: replicated when tp exceeds them (Megatron GQA with tp >
    num_query_groups)."""
    return max(model.kv_heads, tp) / tp


def attention_gemms(model: ModelSpec, t: float, tp: int) -> list[Gemm]:
    """Q/K/V/output projections (GQA or MLA) for t tokens on one TP rank."""
    h, nh = model.hidden_size, model.num_attention_heads
    mla = model.mla
    if mla is None:
        d = model.attn_head_dim
        qkv_width = (nh / tp + 2 * local_kv_heads(model, tp)) * d
        return [
            Gemm(t, qkv_width, h, sp_operand="input", norm_fed=True),
            Gemm(t, h, nh * d / tp, sp_operand="grad"),
        ]
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    gemms = []
    if mla.q_lora_rank is None:
        gemms.append(Gemm(t, nh * qk / tp, h))
    else:  # down-projections are replicated across TP ranks in Megatron-Core's MLA
        gemms += [Gemm(t, mla.q_lora_rank, h), Gemm(t, nh * qk / tp, mla.q_lora_rank)]
    gemms += [
        Gemm(t, mla.kv_lora_rank + mla.qk_rope_head_dim, h),
        Gemm(t, nh * (mla.qk_nope_head_dim + mla.v_head_dim) / tp, mla.kv_lora_rank),
        Gemm(t, h, nh * mla.v_head_dim / tp, sp_operand="grad"),
    ]
    return gemms


def head_dims(model: ModelSpec) -> tuple[int, int]:
    """(query / key, value) head dims: MLA's q/k heads carry the rotary part too (DeepSeek-V3:
    128 + 64 = 192) and its value heads 128; GQA / MQA heads are one size."""
    mla = model.mla
    if mla is None:
        return model.attn_head_dim, model.attn_head_dim
    return mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim


def windowed_layers(model: ModelSpec) -> tuple[int, ...]:
    """0-based indices of the layers with sliding-window attention (ModelSpec.sliding_window):
    all of them, or, with full_attention_every N, every layer but each Nth (layer i is full when
    (i + 1) % N == 0: HF layer_types of gpt-oss, Gemma 2 / 3; Megatron-Core
    window_attn_skip_freq, whose 1-based layer_number % N == 0 is full)."""
    if model.sliding_window is None:
        return ()
    n = model.full_attention_every
    return tuple(i for i in range(model.num_layers) if n is None or (i + 1) % n)


def effective_window(model: ModelSpec, workload: Workload) -> int:
    """The window a windowed layer attends over at this sequence length: 0 (none) when the
    model has no window or the window spans the whole sequence (then it is causal attention)."""
    w = model.sliding_window
    return w if w is not None and w < workload.seq_len else 0


def windowed_share(model: ModelSpec, workload: Workload, is_moe: bool) -> float:
    """Share of the dense (layers [0, k)) or MoE (layers [k, L)) layers whose attention is
    windowed at this sequence length (windowed_layers, effective_window)."""
    if not effective_window(model, workload):
        return 0.0
    k = model.num_dense_layers
    lo, hi = (k, model.num_layers) if is_moe else (0, k)
    if hi <= lo:
        return 0.0
    return sum(1 for i in windowed_layers(model) if lo <= i < hi) / (hi - lo)


def attention_core_flops(
    model: ModelSpec, workload: Workload, layout: Layout, window: int = 0
) -> float:
    """Causal scores + weighted sum per GPU, forward:
    2 * b * (s/cp) * keys * heads/tp * (d_qk + d_v), keys = kernels.attended_keys (s/2 causal;
    W - W^2/(2s) under a W-token sliding window).

    2 FLOPs per MAC over the attended query-key pairs; CP load balancing gives every rank the
    average share (Megatron / TE head-tail chunking).
    """
    d_qk, d_v = head_dims(model)
    t = tokens_per_gpu(workload, layout)
    keys = attended_keys(workload.seq_len, window)
    return 2.0 * t * keys * model.num_attention_heads / layout.tp * (d_qk + d_v)


def mlp_gemms(
    model: ModelSpec, t: float, ffn: float, tp: int, norm_fed: bool = True
) -> list[Gemm]:
    """Dense MLP (or shared experts of total width ffn: `norm_fed` False, their FC1 reads the
    MoE layer's normed input through a plain Linear) for t tokens on one TP rank."""
    h = model.hidden_size
    up_width = (mlp_matrices(model) - 1) * ffn / tp
    return [
        Gemm(t, up_width, h, sp_operand="input", norm_fed=norm_fed),
        Gemm(t, h, ffn / tp, sp_operand="grad"),
    ]


MOE_ROUTING_BASES = {
    "load_balancing": "a trained router under load balancing, by auxiliary loss or expert bias: "
    "MOE_LOAD_IMBALANCE, an assumption",
    "one_ep_rank": "EP 1: one rank holds every expert and runs all routed rows",
    "force_balance": "forced-even routing (Megatron --moe-router-force-load-balancing)",
    "capacity": "capacity factor: each expert keeps at most f x the mean, the rest dropped",
    "padded": "padded to capacity: every expert takes exactly f x the mean",
}
"""Why the busiest EP rank's routed rows over the mean are what moe_routing says (Estimate
.moe_routing basis -> its reading)."""


def moe_routing(workload: Workload, ep: int) -> tuple[float, str]:
    """(busiest EP rank's routed tokens / mean, its basis: a MOE_ROUTING_BASES key).

    MOE_LOAD_IMBALANCE with auxiliary-loss balancing over `ep` > 1 expert-parallel ranks; 1.0
    under Workload.moe_force_balance (Megatron --moe-router-force-load-balancing: random router
    logits spread tokens evenly, a benchmarking mode), and 1.0 at ep == 1 whatever the routing:
    one rank holds every expert (each TP rank its shard of each), so its grouped GEMMs take all
    routed rows, exactly the mean, and no rank waits on a busier one (an identity, not a fit).

    Token-drop MoE (Workload.moe_capacity_factor f): each router keeps at most
    ceil(tokens x top_k / num_experts x f) rows per expert and drops the rest before the
    dispatch (megatron/core/transformer/moe/moe_utils.py get_capacity,
    apply_router_token_dropping), so the busiest expert takes min(imbalance, f) x the mean and
    the dropped rows cost nothing downstream (no all-to-all, no expert GEMM). With
    Workload.moe_pad_to_capacity the capacity mask itself becomes the routing map
    (apply_router_token_dropping: final_map = capacity_mask), so every expert on every rank
    takes exactly f x the mean, however the router spreads the tokens. The ceil is left out
    (a fraction of a row per expert)."""
    if workload.moe_force_balance:
        balanced, basis = 1.0, "force_balance"
    elif ep == 1:
        balanced, basis = 1.0, "one_ep_rank"
    else:
        balanced, basis = MOE_LOAD_IMBALANCE, "load_balancing"
    factor = workload.moe_capacity_factor
    if factor is None:
        return balanced, basis
    if workload.moe_pad_to_capacity:
        return factor, "padded"
    return (factor, "capacity") if factor < balanced else (balanced, basis)


def moe_imbalance(workload: Workload, ep: int) -> float:
    """Busiest EP rank's routed tokens / mean (moe_routing, which says why)."""
    return moe_routing(workload, ep)[0]


def moe_gemms(
    model: ModelSpec, t: float, layout: Layout, imbalance: float = MOE_LOAD_IMBALANCE
) -> list[Gemm]:
    """Router, local routed experts (grouped GEMM; the busiest rank's `imbalance`) and shared
    experts on one GPU."""
    moe = model.moe
    assert moe is not None
    h, fe = model.hidden_size, moe.expert_ffn_hidden_size
    # Token rows this GPU's experts see: t * top_k, split over TP ranks unless experts use ETP.
    rows = t * moe.top_k * layout.etp / layout.tp
    local_experts = moe.num_experts / layout.ep
    rows_per_expert = rows / local_experts
    up_width = (mlp_matrices(model) - 1) * fe / layout.etp
    gemms = [
        Gemm(t / layout.tp, moe.num_experts, h, fp8_capable=False),
        Gemm(rows_per_expert, up_width, h, local_experts, grouped=True, imbalance=imbalance),
        Gemm(rows_per_expert, h, fe / layout.etp, local_experts, grouped=True, imbalance=imbalance),
    ]
    if moe.num_shared_experts:
        gemms += mlp_gemms(model, t, moe.num_shared_experts * fe, layout.tp, norm_fed=False)
    return gemms


# bf16-element equivalents (bytes / 2) moved per element by each memory-bound op, fused kernel vs
# eager PyTorch op by op (torchtitan's Llama: RMSNorm as x.float() -> pow -> mean -> mul ->
# type_as -> * weight = 36 B; rotary through complex fp32: cast, complex multiply, cast back =
# 20 B; SwiGLU as silu then mul = 10 B). Fused: read once, write once.
NORM_ELEMS = {True: 2, False: 18}
ROTARY_ELEMS = {True: 2, False: 10}
GATED_ACT_ELEMS = {True: 3, False: 5}

EAGER_BACKWARD = {"norm": 2.5, "norm_chain": 2.0, "add": 1.0, "gated_act": 1.8, "rotary": 1.0}
"""Backward traffic over forward traffic of each eager op (Workload.fused_elementwise False), as
PyTorch's autograd runs it (tools/autograd/derivatives.yaml) and the H100 step profiles show it
(bench/results/h100-2026-11-26/single-gpu-steps/steps/profile_*.json, torch 2.11):
- norm, one fused kernel (aten::_fused_rms_norm / native_layer_norm): its backward is two kernels,
  layer_norm_grad_input (reads dy and x, writes dx) and GammaBetaBackward (reads dy and x again
  for the weight gradient): 5 element moves against the forward's 2 (profile, 1B step: 0.93 ms
  forward, 1.32 + 1.38 ms backward over 33 norms: 2.9x);
- the eager norm chain (cast, pow, mean, rsqrt, mul, cast, mul): no profile here; 2x as before;
- residual add: its gradient passes through (`self: grad, other: grad`); the one kernel is the
  accumulation where the residual stream's two users meet: one add against the forward's one;
- eager SwiGLU silu(g) * u: mul's backward is two muls (`grad * other`, `grad * self`) and
  silu's one silu_backward (reads grad and g, writes): 9 element moves against 5 (profile: 3.4 ms
  forward, 6.2 ms backward, 1.8x);
- eager complex rotary (x.float(), complex multiply by the frequencies, type_as): its backward
  is the same three ops on the gradient (cast, multiply by conj(freqs), cast back): 1x (profile:
  the 32 forward and 32 backward complex multiplies take the same time).
The fused path (Transformer Engine, torch.compile) keeps 2x its forward: its backward kernels
were not profiled here."""


CLAMP_ELEMS = {True: (8, 10), False: (4, 10)}
"""(forward, backward) bf16 elements moved per element of a gated activation's output width,
per row, by the clamps of ModelSpec.activation_clamp (gpt-oss's `swiglu_limit`), keyed by
Workload.fused_elementwise. Both launchers run them as eager kernels over the fc1 output's two
halves (gate clamped above, up clamped both ways): forward each clamp reads and writes its half
(4 per output element); Megatron's fused path then cats the halves back for its fused
quick_geglu (megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl: chunk,
two clamps, torch.cat; read 2 + write 2 more), the eager paths feed the clamped halves on
(Megatron's glu() in moe/experts.py and mlp.py, torchtitan models/gpt_oss/moe.py swiglu).
Backward: each clamp's gradient reads the incoming gradient and its saved input and writes
the input's gradient (6), and the two halves' gradients are joined back into the fc1 output's
(chunk / slice backward: read 2 + write 2). Priced at the HBM constant (no table row)."""

FUSED_ACTIVATION_ROW = "add"
"""The kernel-table row a fused gated activation is priced at: Transformer Engine's SwiGLU /
GeGLU (transformer_engine/common/activation, the `swiglu` kernel Megatron's TE MLP calls;
Megatron's bias_swiglu_impl, megatron/core/fusions/fused_bias_swiglu.py) and torch.compile's
fused silu(x) * y read the gate and up halves once and write the product once, in one kernel:
the access of an elementwise add (two reads, one write, 6 B per output element in bf16), where
the tables' `swiglu` row is eager silu(x) * y (two kernels, 10 B: 1.72-1.82 TB/s on the H100
at the 6 B convention against 2.91-3.05 TB/s for `add`)."""


def rotary_heads(model: ModelSpec, tp: int) -> tuple[float, int]:
    """(heads, dims per head) rotary embeddings rotate per token on one TP rank: every query
    and KV head's head_dim (GQA / MQA), or under MLA each query head's qk_rope_head_dim plus the
    one rotary key shared by all heads (DeepSeek-V2 sec. 2.1.3, decoupled RoPE; Megatron-Core
    MLASelfAttention rotates q_pos_emb [.., heads, 64] and k_pos_emb [.., 1, 64])."""
    mla = model.mla
    if mla is None:
        return model.num_attention_heads / tp + local_kv_heads(model, tp), model.attn_head_dim
    return model.num_attention_heads / tp + 1, mla.qk_rope_head_dim


def qk_norm_heads(model: ModelSpec, tp: int) -> tuple[float, float, int]:
    """(query heads, key heads, dims per head) the per-head q / k norms normalize on one TP rank
    (ModelSpec.qk_norm, Qwen3: Megatron-Core SelfAttention's q_layernorm / k_layernorm, TENorm
    over each head's head_dim after the QKV projection, megatron/core/transformer/attention.py;
    torchtitan's qwen3 q_norm / k_norm); (0, 0, 0) without them. Heads split by TP, keys
    replicated where TP exceeds them, as the attention's own heads; MLA's latent norms are the
    q / kv up projections' fused LayerNormLinear, not these."""
    if not model.qk_norm or model.mla is not None:
        return 0.0, 0.0, 0
    return model.num_attention_heads / tp, local_kv_heads(model, tp), model.attn_head_dim


def activation_op(model: ModelSpec) -> str:
    """The MLP activation as a measured op: gated silu = swiglu, gated GELU = geglu, ungated
    GELU = gelu (tanh), squared ReLU (Nemotron) = squared_relu. quick_gelu, x * sigmoid(1.702 x),
    is SiLU's arithmetic with a scaled argument (Megatron fused_bias_geglu.quick_gelu): the
    swiglu row when gated (Megatron's quick_geglu reads the two halves and writes their product,
    as bias_swiglu does), the gelu row otherwise. activation_clamp's clamps are their own eager
    passes ahead of it (CLAMP_ELEMS, clamp_widths)."""
    act = model.mlp_activation
    if model.gated_mlp:
        if act in ("silu", "quick_gelu"):
            return "swiglu"
        return "geglu" if act.startswith("gelu") else f"{act}_glu"
    return "gelu" if act.startswith("gelu") or act == "quick_gelu" else act


@dataclass(frozen=True, slots=True)
class MemoryOp:
    """One kind of memory-bound op in a layer's forward: `elements` (bf16 elements read + written
    per token, all calls, as the model counts them), `calls` per layer and, where a kernel table
    may price it, its table `op` and the elements per token of one call in the table's
    convention (each tensor read and written once: memory_bound.csv `bytes`)."""

    elements: float
    op: str | None = None
    calls: int = 1
    table_elements: float = 0.0
    backward: float = 2.0  # backward traffic / forward traffic (EAGER_BACKWARD)
    clamp_of: str = ""  # the activation ("mlp", "moe_act", "shared_experts") these clamps feed


def norm_fused(model: ModelSpec, workload: Workload) -> bool:
    """Whether the layer's norms run as one fused kernel each: under fused elementwise ops, or
    eager where PyTorch's own norm is one kernel: F.layer_norm (aten::native_layer_norm, a single
    CUDA kernel in every PyTorch release) and F.rms_norm / nn.RMSNorm where the build dispatches
    it to aten::_fused_rms_norm (Workload.fused_norm: torch 2.11 in the H100 step profiles,
    torchtitan 0.3's RMSNorm(nn.RMSNorm); torchtitan's older RMSNorm class was the eager chain)."""
    return workload.fused_elementwise or workload.fused_norm or model.normalization == "layernorm"


def _memory_ops(
    model: ModelSpec, layout: Layout, is_moe: bool, fused: bool = True, fused_norm: bool = False
) -> list[MemoryOp]:
    """The memory-bound ops of one layer a kernel table may price, in this order: the norms, the
    residual adds, the activation (dense: the MLP's; MoE: the routed experts', then the shared
    experts' if any), the rotary embedding, then under qk_norm the per-head query and key norms
    (qk_norm_heads: the norm's row at each call's size, as the layer norms). Their `elements` are the terms of
    _elementwise_elements, which also counts the MoE permute copies (no table row: HBM
    constant).

    Table ops, by what the kernel that runs reads and writes (`fused`: Workload.fused_elementwise,
    the framework profile's fusion fact): a fused norm is the table's norm row (one kernel, as
    Transformer Engine's RMSNorm / LayerNorm and F.rms_norm / F.layer_norm; eager torchtitan
    chains of cast / pow / mean / mul are not a measured op: HBM constant); the residual adds
    the `add` row. The activation: FUSED_ACTIVATION_ROW when fused, else its `activation_op`
    row (the shared tables' SwiGLU is the eager silu(x) * y, two kernels). Fused rotary
    (Transformer Engine fused_rope: one kernel reads q / k and writes them rotated) is the `copy`
    row; eager rotary (complex fp32 chain) has no row: HBM constant. `fused_norm` (norm_fused):
    the norm is its fused kernel even on the eager path. On the eager path each op carries its
    backward share (EAGER_BACKWARD)."""
    tp = layout.tp
    h_local = model.hidden_size / tp if layout.sequence_parallel else model.hidden_size
    fused_norm = fused or fused_norm
    norm = model.normalization if fused_norm else None
    back = {k: 2.0 for k in EAGER_BACKWARD} if fused else EAGER_BACKWARD
    norm_back = back["norm"] if fused_norm else back["norm_chain"]
    ops = [
        MemoryOp(
            2 * NORM_ELEMS[fused_norm] * h_local, norm, 2, NORM_ELEMS[True] * h_local, norm_back
        ),
        MemoryOp(6 * h_local, "add", 2, 3 * h_local, back["add"]),  # two residual adds
    ]
    act_rw = GATED_ACT_ELEMS[fused] if model.gated_mlp else 2
    act_table = GATED_ACT_ELEMS[True] if model.gated_mlp else 2  # the row's convention
    act = activation_op(model)
    if fused and model.gated_mlp:
        act = FUSED_ACTIVATION_ROW
    if is_moe:
        moe = model.moe
        assert moe is not None
        rows, fe = moe.top_k * layout.etp / tp, moe.expert_ffn_hidden_size
        routed = rows * act_table * fe / layout.etp
        act_back = back["gated_act"] if model.gated_mlp else 2.0
        ops.append(MemoryOp(rows * act_rw * fe / layout.etp, act, 1, routed, act_back))
        if moe.num_shared_experts:
            fs = moe.num_shared_experts * fe
            ops.append(MemoryOp(act_rw * fs / tp, act, 1, act_table * fs / tp, act_back))
    else:
        assert model.ffn_hidden_size is not None
        ffn = model.ffn_hidden_size
        act_back = back["gated_act"] if model.gated_mlp else 2.0
        ops.append(MemoryOp(act_rw * ffn / tp, act, 1, act_table * ffn / tp, act_back))
    rot_heads, rot_dim = rotary_heads(model, tp)
    rot = rot_heads * rot_dim
    rotary = MemoryOp(ROTARY_ELEMS[fused] * rot, "copy" if fused else None, 1, 2 * rot)
    ops.append(replace(rotary, backward=back["rotary"]))
    q_heads, k_heads, head_dim = qk_norm_heads(model, tp)
    for heads in (q_heads, k_heads) if head_dim else ():  # last: the ops above keep their index
        width = heads * head_dim  # per token; the kernel normalizes each head's head_dim
        ops.append(
            MemoryOp(NORM_ELEMS[fused_norm] * width, norm, 1, NORM_ELEMS[True] * width, norm_back)
        )
    fwd, bwd = CLAMP_ELEMS[fused]
    for module, width in clamp_widths(model, layout, is_moe):  # after them all
        ops.append(MemoryOp(fwd * width, None, 1, 0.0, bwd / fwd, clamp_of=module))
    return ops


def clamp_widths(model: ModelSpec, layout: Layout, is_moe: bool) -> list[tuple[str, float]]:
    """(recompute module, activation output elements per token) of each gated activation whose
    fc1 output ModelSpec.activation_clamp clamps (CLAMP_ELEMS): the dense MLP's, or the routed
    experts' rows (top_k x ETP / TP per token, width expert_ffn / ETP) and the shared experts'.
    Empty without a clamp."""
    if model.activation_clamp is None or not model.gated_mlp:
        return []
    tp = layout.tp
    if not is_moe:
        assert model.ffn_hidden_size is not None
        return [("mlp", model.ffn_hidden_size / tp)]
    moe = model.moe
    assert moe is not None
    fe = moe.expert_ffn_hidden_size
    out = [("moe_act", moe.top_k * layout.etp / tp * fe / layout.etp)]
    if moe.num_shared_experts:
        out.append(("shared_experts", moe.num_shared_experts * fe / tp))
    return out


def _elementwise_elements(
    model: ModelSpec,
    layout: Layout,
    t: float,
    is_moe: bool,
    fused: bool = True,
    fused_norm: bool = False,
    permute: bool = True,
) -> float:
    """Elements read + written per forward by memory-bound ops (norms, residuals, rotary, act;
    MoE: the permute / unpermute copies unless `permute` is False, Workload.moe_dispatch
    "index", which moe_dispatch_s prices instead)."""
    tp = layout.tp
    h_local = model.hidden_size / tp if layout.sequence_parallel else model.hidden_size
    norm = NORM_ELEMS[fused or fused_norm]
    per_token = 2 * norm * h_local + 6 * h_local  # two norms, two residual adds
    rot_heads, rot_dim = rotary_heads(model, tp)
    per_token += ROTARY_ELEMS[fused] * rot_heads * rot_dim  # q and k
    q_heads, k_heads, head_dim = qk_norm_heads(model, tp)
    per_token += norm * (q_heads + k_heads) * head_dim  # per-head q / k norms (qk_norm)
    # SwiGLU reads gate+up, writes one; GELU reads and writes
    act_rw = GATED_ACT_ELEMS[fused] if model.gated_mlp else 2
    if is_moe:
        moe = model.moe
        assert moe is not None
        rows = moe.top_k * layout.etp / tp
        copies = 4 * model.hidden_size if permute else 0.0
        per_token += rows * (copies + act_rw * moe.expert_ffn_hidden_size / layout.etp)
        per_token += moe.num_shared_experts * act_rw * moe.expert_ffn_hidden_size / tp
    else:
        assert model.ffn_hidden_size is not None
        per_token += act_rw * model.ffn_hidden_size / tp
    fwd, _bwd = CLAMP_ELEMS[fused]
    per_token += sum(fwd * width for _module, width in clamp_widths(model, layout, is_moe))
    return per_token * t


def table_memory_s(
    ops: list[MemoryOp], t: float, book: KernelBook | None
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(seconds, elements, look-ups) of those of `ops` over `t` tokens that the cluster's kernel
    tables price: each at its measured time for the call's size (KernelBook.memory_bound_s: a
    size outside the measured ones holds the nearest row's bandwidth, `extrapolated`);
    `elements` are theirs, which the caller no longer prices at the HBM constant."""
    seconds = elements = 0.0
    looks: list[tuple[str, str]] = []
    for o in ops:
        if book is None or o.op is None:
            continue
        found, status = book.memory_bound_s(o.op, o.table_elements * t * BF16_BYTES)
        looks.append(("memory_bound", status))
        if found is not None:
            seconds += o.calls * found
            elements += o.elements * t
    return seconds, elements, tuple(looks)


def memory_ops_s(ops: list[MemoryOp], t: float, hbm_s: float, book: KernelBook | None) -> float:
    """Seconds of `ops` over `t` tokens: from the kernel tables where they price an op
    (table_memory_s), the rest as bytes over the generation's HBM bandwidth."""
    total = 0.0
    for o in ops:
        seconds, elements, _looks = table_memory_s([o], t, book)
        total += seconds if elements else o.elements * t * BF16_BYTES / hbm_s
    return total


def eager_backward_s(
    ops: list[MemoryOp], t: float, hbm_s: float, book: KernelBook | None, forward_s: float
) -> float:
    """Backward seconds of a layer's eager memory-bound ops: each op's forward seconds times its
    backward share (MemoryOp.backward, EAGER_BACKWARD); the rest of the layer's `forward_s`
    (the MoE permute copies, which no op here lists) at 2x, as before."""
    per_op = [memory_ops_s([o], t, hbm_s, book) for o in ops]
    rest_s = max(0.0, forward_s - sum(per_op))
    return sum(o.backward * s for o, s in zip(ops, per_op, strict=True)) + 2 * rest_s


def unpad_copies_s(
    model: ModelSpec, layout: Layout, t: float, hbm_s: float, book: KernelBook | None
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(forward, backward, look-ups) of the copies a varlen attention kernel adds around itself
    (Workload.attention_unpad), for one micro-batch of `t` tokens on one TP rank.

    flash-attn's bert_padding helpers, as llm-foundry's MPT flash_attn_fn calls them
    (llmfoundry/models/layers/attention.py at the commit of the H100 benchmark table, 5e85bd62d;
    flash_attn/bert_padding.py): unpad_input gathers q, k and v into packed copies
    (IndexFirstAxis: torch.gather, read + write each), pad_input scatters the output back into a
    zeroed padded tensor (IndexPutFirstAxis: zeros, then index_put: write + read + write). Their
    backward scatters the q / k / v gradients into zeroed tensors (zeros + scatter_: 3 element
    moves each) and gathers the output gradient (read + write). Per token, in elements of the
    rank's q, k, v and output widths: forward 2(q + k + v) + 3o, backward 3(q + k + v) + 2o.
    The gathers and scatters are priced as the kernel table's `copy` row (a streaming copy; an
    indexed one is not faster), the zero fills as HBM writes."""
    d_qk, d_v = head_dims(model)
    heads, kv = model.num_attention_heads / layout.tp, local_kv_heads(model, layout.tp)
    q, k, v, o = heads * d_qk, kv * d_qk, kv * d_v, heads * d_v
    moved = [2 * x for x in (q, k, v, o)]  # each a read + a write of one tensor

    def copies(widths: list[float]) -> list[MemoryOp]:
        return [MemoryOp(w, "copy", 1, w) for w in widths]

    forward = [*copies(moved), MemoryOp(o)]  # + the zeroed output pad_input fills
    backward = [*copies(moved), MemoryOp(q + k + v)]  # + the zeroed q / k / v gradients
    _s, _e, looks = table_memory_s(forward + backward, t, book)
    return memory_ops_s(forward, t, hbm_s, book), memory_ops_s(backward, t, hbm_s, book), looks


SCORE_MUL_ELEMS = {True: 2, False: 10}
"""bf16-element moves per routed output element of torchtitan's combine score multiply,
`(routed_output.to(float32) * scores).to(routed_output.dtype)` (token_dispatcher.py
LocalTokenDispatcher.combine): under torch.compile (Workload.fused_elementwise) one kernel reads
the bf16 row and writes it back (2); eager, three kernels: the fp32 cast (read 2 B, write 4 B: 3),
the fp32 multiply (read 4, write 4: 4) and the cast back (read 4, write 2: 3), 10."""


def moe_dispatch_ops(
    model: ModelSpec, layout: Layout, fused: bool
) -> tuple[list[MemoryOp], list[MemoryOp]]:
    """(forward, backward) memory-bound ops of torchtitan's local token dispatch around the
    experts of one MoE layer (Workload.moe_dispatch "index"), per token on one rank; N routed
    rows of the full hidden size h per token (top_k x ETP / TP, as _elementwise_elements).

    torchtitan 0.3.0 models/common/token_dispatcher.py LocalTokenDispatcher and
    ops/scatter_add.py, with PyTorch's autograd formulas (tools/autograd/derivatives.yaml):
    - dispatch: `x_TD[token_indices // top_k]`, an index gather (reads the token rows, writes N
      rows: 2 N h); backward: index_put_ with accumulate (sorted, deterministic:
      indexing_backward_kernel) reads each gradient row and reads + writes its token's
      accumulator: 3 N h;
    - combine: the score multiply (SCORE_MUL_ELEMS); backward two products, grad x scores for
      the rows and grad x rows (summed over h) for the scores: twice the forward's traffic;
    - deterministic_scatter_add: a zeroed [T, h] output (h) and scatter_add under
      torch.use_deterministic_algorithms, which PyTorch runs as index_put_ with accumulate (the
      same sorted kernel as above: 3 N h, not index_add_'s atomics); backward torch.gather of
      the output gradient (2 N h).
    The gathers and sorted scatters are priced as the kernel table's `copy` row (streaming
    reads and writes of whole rows), the score multiply and zero fill at the HBM constant. The
    index sorts, router softmax and top-k are the fixed per-layer cost moe_layer_overhead_s
    (GenerationCalibration), as before."""
    moe = model.moe
    assert moe is not None
    nh = moe.top_k * layout.etp / layout.tp * model.hidden_size

    def copy(elements: float) -> MemoryOp:
        return MemoryOp(elements, "copy", 1, elements)

    mul = SCORE_MUL_ELEMS[fused] * nh
    forward = [copy(2 * nh), MemoryOp(mul), MemoryOp(model.hidden_size / layout.tp), copy(3 * nh)]
    backward = [copy(2 * nh), MemoryOp(2 * mul), copy(3 * nh)]
    return forward, backward


def moe_dispatch_s(
    model: ModelSpec, layout: Layout, t: float, fused: bool, hbm_s: float, book: KernelBook | None
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(forward, backward, look-ups) of moe_dispatch_ops over `t` tokens."""
    forward, backward = moe_dispatch_ops(model, layout, fused)
    _s, _e, looks = table_memory_s(forward + backward, t, book)
    return memory_ops_s(forward, t, hbm_s, book), memory_ops_s(backward, t, hbm_s, book), looks


def megatron_expert_copies(model: ModelSpec, layout: Layout, workload: Workload) -> int:
    """Copies of the routed rows [routed rows, hidden] per pass that Megatron's MoE path makes
    beyond the permute / unpermute pair _elementwise_elements counts: the all-to-all
    dispatcher's sort by local expert and its restore (host.sorts_by_local_expert, 2) and
    TEGroupedMLP's quantization padding and unpadding (host.pads_expert_rows, 2). Each is one
    streaming read and write of the rows (TE moe_sort_chunks_by_index / the unfused index
    gather, fused_multi_row_padding / _unpadding), and its autograd backward is the inverse
    copy of the same rows (sort_chunks_by_idxs' backward sorts by the inverse index, Fp8Padding's
    backward unpads the gradient), so backward moves what forward moves."""
    copies = 2 if sorts_by_local_expert(model, layout, workload) else 0
    pads = pads_expert_rows(model, layout, workload, quant_recipe(workload))
    return copies + (2 if pads else 0)


def dispatch_copies_s(
    model: ModelSpec,
    layout: Layout,
    workload: Workload,
    t: float,
    hbm_s: float,
    book: KernelBook | None,
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(forward, backward, look-ups) of one MoE layer's routed-row copies that the layer's
    elementwise term does not count: torchtitan's local dispatch (Workload.moe_dispatch
    "index", moe_dispatch_s), else Megatron's megatron_expert_copies, each the kernel table's
    `copy` row over the rows' hidden-size elements (bf16 hidden states; the fp32 probabilities
    the sort and padding move beside them, 4 B a row, are left out)."""
    if workload.moe_dispatch == "index":
        return moe_dispatch_s(model, layout, t, workload.fused_elementwise, hbm_s, book)
    copies = megatron_expert_copies(model, layout, workload)
    if not copies:
        return 0.0, 0.0, ()
    moe = model.moe
    assert moe is not None
    one = 2 * moe.top_k * layout.etp / layout.tp * model.hidden_size  # read + write per token
    ops = [MemoryOp(copies * one, "copy", copies, one)]
    _s, _e, looks = table_memory_s(ops, t, book)
    seconds = memory_ops_s(ops, t, hbm_s, book)
    return seconds, seconds, looks


def layer_overhead_s(
    model: ModelSpec, layout: Layout, cal: GenerationCalibration, workload: Workload, is_moe: bool
) -> float:
    """Host-side cost of one layer per pass: the launch cost per layer (kernel_overhead_s), and
    in a MoE layer its fixed routing bookkeeping plus per-expert GEMMs.

    The dropless all-to-all dispatcher synchronises the host on the per-expert token counts in
    every MoE layer and pass, so the kernels launched after it are launch-bound: Transformer
    Engine's GroupedLinear quantizes and launches a GEMM per local expert (fc1 and fc2; forward 2,
    backward 4 GEMMs: 3 per pass on average).

    Workload.cuda_graphs: per-layer CUDA graphs (Megatron --cuda-graph-impl transformer_engine,
    --cuda-graph-modules attn mlp for a dense layer, attn moe_router moe_preprocess for a dropless
    MoE layer: Megatron-Bridge's CUDA-graphs guide) replay the attention block, the dense MLP and
    the router and dispatch preprocessing without launching their kernels one by one, so the
    per-layer launch cost and the MoE routing bookkeeping go; the expert GEMMs after the
    dispatcher's host sync have data-dependent shapes, stay outside the graph and keep theirs.

    Workload.expert_gemm_launch "grouped" (torchtitan: torch._grouped_mm, one kernel per
    projection for all local experts, token offsets on the device): 3 launches per pass in all,
    not 3 per local expert.

    Workload.full_iteration_cuda_graph (Megatron --cuda-graph-impl full_iteration): the whole
    forward-backward replays from one graph, the experts' GEMMs included, with the dispatch's
    token counts kept on the device (no host sync to wait on): no host-side cost per layer is
    left; host_floor_s still holds each pass to its kernels' replay time.
    """
    if workload.full_iteration_cuda_graph:
        return 0.0
    graphed = workload.cuda_graphs
    out = 0.0 if graphed else cal.kernel_overhead_s
    if is_moe:
        moe = model.moe
        assert moe is not None
        # Workload.expert_gemm_launch: one launch per local expert, or one grouped kernel
        per_expert = workload.expert_gemm_launch == "per_expert"
        launches = moe.num_experts / layout.ep if per_expert else 1
        out += 0.0 if graphed else cal.moe_layer_overhead_s
        out += 3 * launches * cal.expert_gemm_overhead_s
    return out


def host_floor_s(
    model: ModelSpec,
    layout: Layout,
    workload: Workload,
    is_moe: bool,
    gpu_s: tuple[float, float, float],
    overhead_s: float,
    host_cpu: str = "x86",
) -> tuple[float, float]:
    """(forward, backward) host overhead of one layer per micro-batch, with the host-bound
    floor (cost_models/host.py): a pass takes at least its kernels' host issue time, so its
    overhead is at least the issue time beyond its GPU time; after the MoE dispatcher's
    device-to-host sync the queue is empty, so the forward's overhead is at least the issue
    time of the kernels launched after the sync beyond their GPU time (the MoE block's).
    `gpu_s`: forward, backward and MoE-block forward GPU seconds without overhead;
    `overhead_s`: layer_overhead_s, the calibrated host cost, which the floor never lowers;
    `host_cpu`: GpuSpec.host_cpu. Workload.host_issue "te_modules": Transformer Engine module
    calls at their measured CPU time (host.layer_modules)."""
    recipe = quant_recipe(workload)
    launches = layer_launches(model, layout, workload, recipe, is_moe)
    te = workload.host_issue == "te_modules"
    modules = layer_modules(model, layout, recipe, is_moe) if te else None
    host = host_time(launches, workload, host_cpu, modules)
    forward_gpu_s, backward_gpu_s, after_sync_gpu_s = gpu_s
    forward = max(overhead_s, host.forward_s - forward_gpu_s)
    if host.after_sync_s:
        forward = max(forward, host.after_sync_s - after_sync_gpu_s)
    return forward, max(overhead_s, host.backward_s - backward_gpu_s)


def _with_host_floor(
    model: ModelSpec, layout: Layout, workload: Workload, is_moe: bool, lt: LayerTime, cpu: str
) -> LayerTime:
    """`lt` with its overheads raised to the host-bound floor (host_floor_s) on host CPU `cpu`."""
    bare = replace(lt, overhead_s=0.0, overhead_backward_s=0.0)
    moe_s = dict(lt.module_s).get("moe", 0.0)
    gpu_s = (bare.forward_s, bare.backward_s, moe_s)
    fwd, bwd = host_floor_s(model, layout, workload, is_moe, gpu_s, lt.overhead_s, cpu)
    return replace(lt, overhead_s=fwd, overhead_backward_s=bwd)


def layer_time(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    *,
    is_moe: bool,
    book: KernelBook | None = None,
) -> LayerTime:
    """Forward time of one micro-batch through one (dense or MoE) layer on one GPU; with `book`
    (the cluster's kernel tables) its GEMMs and attention, both passes, are looked up."""
    t = tokens_per_gpu(workload, layout)
    fp8 = workload.precision in LOW_PRECISION
    ggpu, gbook = gemm_hardware(gpu, workload, book)
    gemms = attention_gemms(model, t, layout.tp)
    if is_moe:
        gemms += moe_gemms(model, t, layout, moe_imbalance(workload, layout.ep))
    else:
        assert model.ffn_hidden_size is not None
        gemms += mlp_gemms(model, t, model.ffn_hidden_size, layout.tp)
    hbm_s = hbm_bytes_per_s(gpu, cal)
    fused, fnorm = workload.fused_elementwise, norm_fused(model, workload)
    mem_ops = _memory_ops(model, layout, is_moe, fused, fnorm)
    table_s, table_elements, mem_looks = table_memory_s(mem_ops, t, book)
    index = is_moe and workload.moe_dispatch == "index"
    elem_bytes = _elementwise_elements(model, layout, t, is_moe, fused, fnorm, not index)
    elem_bytes *= BF16_BYTES
    if table_elements:  # the ops the kernel tables priced leave the HBM constant
        elem_bytes -= table_elements * BF16_BYTES
    elementwise_s = elem_bytes / hbm_s + table_s
    elem_bwd_s = None  # the fused path: 2x forward (LayerTime), unless an op has its own share
    if not fused or any(o.clamp_of for o in mem_ops):  # fused ops carry 2.0, the clamps theirs
        elem_bwd_s = eager_backward_s(mem_ops, t, hbm_s, book, elementwise_s)
    quant_s, quant_bwd_s = quantize_s(gemms, workload, hbm_s, layout, gpu.generation)
    unpad_s = unpad_bwd_s = 0.0
    if workload.attention_unpad:
        unpad_s, unpad_bwd_s, unpad_looks = unpad_copies_s(model, layout, t, hbm_s, book)
        mem_looks += unpad_looks
    disp_s = disp_bwd_s = 0.0
    if is_moe:
        disp_s, disp_bwd_s, disp_looks = dispatch_copies_s(model, layout, workload, t, hbm_s, book)
        mem_looks += disp_looks
    attn = layer_attention(model, gpu, cal, workload, layout, book, is_moe)
    attn_s, attn_bwd_s, attn_looks, attn_flops = attn
    module_s = _recompute_module_s(model, ggpu, cal, workload, layout, is_moe, attn_s, gbook)
    selective_s = None
    if workload.selective_recompute == "every_other_matmul" and not is_moe:
        matmuls = recomputed_matmuls(model, t, layout.tp)
        selective_s = gemm_time_s(matmuls, ggpu, cal, fp8, gbook) + elementwise_s
    elif workload.selective_recompute == "every_other_matmul":
        # the routed experts' grouped GEMMs rerun whole, and the token permutations around the
        # saved all-to-alls with them (recomputed_moe_matmuls)
        matmuls = recomputed_moe_matmuls(model, t, layout, moe_imbalance(workload, layout.ep))
        selective_s = gemm_time_s(matmuls, ggpu, cal, fp8, gbook) + elementwise_s + disp_s
    elif workload.selective_recompute == "unfused_attention":
        # the framework's own module set, not the layout's (Megatron-DeepSpeed has no modules)
        redone = selective_modules(workload, layout)
        selective_s = sum(seconds for name, seconds in module_s if name in redone)
    gemm_bwd_s, gemm_looks = None, ()
    if gbook is None:
        gemm_s = gemm_time_s(gemms, ggpu, cal, fp8)
    else:
        gemm_s, gemm_bwd_s, gemm_looks = gemm_passes_s(gemms, ggpu, cal, fp8, gbook)
    lt = LayerTime(
        gemm_s=gemm_s,
        attention_s=attn_s,
        elementwise_s=elementwise_s,
        selective_s=selective_s,
        module_s=module_s,
        overhead_s=layer_overhead_s(model, layout, cal, workload, is_moe),
        model_flops=sum(g.flops for g in gemms) + attn_flops,
        gemm_backward_s=gemm_bwd_s,
        attention_backward_s=attn_bwd_s,
        elementwise_backward_s=elem_bwd_s,
        lookups=gemm_looks + attn_looks + mem_looks,
        quantize_s=quant_s,
        quantize_backward_s=quant_bwd_s,
        unpad_s=unpad_s,
        unpad_backward_s=unpad_bwd_s,
        dispatch_s=disp_s,
        dispatch_backward_s=disp_bwd_s,
    )
    return _with_host_floor(model, layout, workload, is_moe, lt, gpu.host_cpu)


def layer_attention(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    book: KernelBook | None,
    is_moe: bool,
) -> tuple[float, float | None, tuple[tuple[str, str], ...], float]:
    """(forward, backward or None for the model's 2.5x, look-ups, forward FLOPs) of the
    attention core of one layer of this kind (dense / MoE), averaged over its layers' mix of
    full and sliding-window attention (windowed_share): the model's layer pattern is priced
    exactly over the whole model, and a pipeline stage gets the model's mean share of windowed
    layers (with full_attention_every N a stage's own share differs from it by at most one
    layer in its count). Windowed layers take the full layer's time times the window's measured
    saving (windowed_attention_times)."""
    fwd, bwd, looks = attention_times(model, gpu, cal, workload, layout, book)
    flops = attention_core_flops(model, workload, layout)
    share = windowed_share(model, workload, is_moe)
    if not share:
        return fwd, bwd, looks, flops
    window = effective_window(model, workload)
    if workload.attention_kernel in ("flash1", "unfused"):
        # flash-attn 1.x kernels have no local window (it arrived in flash-attn 2.3, "Local
        # (i.e., sliding window) attention", its README), and unfused attention computes the
        # whole score matrix: the window is a mask over the full causal kernel, which takes
        # its time; the model's FLOPs stay the window's
        w_flops = attention_core_flops(model, workload, layout, window)
        return fwd, bwd, looks, (1 - share) * flops + share * w_flops
    w_fwd, w_bwd, w_looks = windowed_attention_times(
        model, workload, layout, book, window, fwd, ATTENTION_BACKWARD * fwd if bwd is None else bwd
    )
    w_flops = attention_core_flops(model, workload, layout, window)
    # The windowed layers' backward has its own saving (measured, or the tile model's), so the
    # mix states its backward rather than leaving it at 2.5x the mixed forward.
    mix_bwd = (1 - share) * (ATTENTION_BACKWARD * fwd if bwd is None else bwd) + share * w_bwd
    return (
        (1 - share) * fwd + share * w_fwd,
        mix_bwd,
        looks + w_looks,
        (1 - share) * flops + share * w_flops,
    )


ATTENTION_BACKWARD = 2.5
"""Flash-attention backward / forward time without a measured backward (LayerTime.backward_s)."""


def windowed_attention_times(
    model: ModelSpec,
    workload: Workload,
    layout: Layout,
    book: KernelBook | None,
    window: int,
    full_fwd_s: float,
    full_bwd_s: float,
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """(forward, backward, look-ups) of one sliding-window layer's attention core: the full
    (causal) layer's seconds times the saving of a `window`-token window at this sequence
    length. The saving is the kernel table's measured ratio of windowed to full time where its
    window rows span (seq, window) (kernels.KernelBook.window_ratio: FlexAttention on the shared
    H100 table, 0.25 of full at 4K tokens and a 128 window, where the FLOP ratio is 0.06: the
    kernel computes whole tiles and keeps its per-query-tile work), else the tile model of that
    structure (kernels.window_tile_ratio: whole 128-token tiles plus a fixed cost per query tile;
    within 15 % of every measured window row, where the FLOP ratio is 27 % off at the median and
    up to 81 %); the look-up says `extrapolated` then."""
    (fwd, bwd), status, _kernel = window_saving(model, workload, layout, book, window)
    looks = () if status is None else (("attention_window", status),)
    return full_fwd_s * fwd, full_bwd_s * bwd, looks


def window_saving(
    model: ModelSpec, workload: Workload, layout: Layout, book: KernelBook | None, window: int
) -> tuple[tuple[float, float], str | None, str | None]:
    """((forward, backward) windowed / full time, look-up status, kernel) of one windowed
    layer's attention core: the table's window rows of `kernel` where they span (seq, window),
    else kernels.window_tile_ratio (kernel None; status `extrapolated`, or None without a
    table). What windowed_attention_times prices and attention_report says."""
    found, status, kernel = None, None, None
    if book is not None:
        found, status, kernel = book.window_ratio(
            *attention_call(model, workload, layout), window=window, kernel=workload.attention_kernel
        )
    if found is not None:
        return (found[0], found[1]), status, kernel
    seq = workload.seq_len
    tiles = (window_tile_ratio(seq, window, "forward"), window_tile_ratio(seq, window, "backward"))
    return tiles, status, None


def attention_call(
    model: ModelSpec, workload: Workload, layout: Layout
) -> tuple[int, int, float, float, int, int]:
    """(batch, seq, heads, KV heads, d_qk, d_v) of one TP rank's attention call: the
    micro-batch over the full sequence (a CP ring's rank does 1/cp of that call's work), this
    rank's query heads and KV heads (MLA runs as multi-head attention after its
    up-projections); under the all-to-all CP (Workload.cp_attention "a2a") the rank's own call,
    the full sequence on heads / cp (cost_models/cp.py a2a_s)."""
    d_qk, d_v = head_dims(model)
    heads = model.num_attention_heads / layout.tp
    kv = heads if model.mla is not None else local_kv_heads(model, layout.tp)
    if layout.cp > 1 and workload.cp_attention == "a2a":
        heads, kv = heads / layout.cp, kv / layout.cp
    return layout.micro_batch, workload.seq_len, heads, kv, d_qk, d_v


CP_STEP_TERM = "attention_cp_step"
"""The look-ups of a CP ring's per-step attention calls (cp_step_rate; estimate --explain)."""


def cp_step_rate(
    call: tuple[int, int, float, float, int, int],
    cp: int,
    kernel: str,
    book: KernelBook,
    full: tuple[float, float] | None,
) -> tuple[tuple[float, float] | None, tuple[tuple[str, str], ...]]:
    """(forward + backward, forward) seconds per FLOP of a load-balanced CP ring's attention on
    one rank, and its look-ups, from the tables' rows at the calls the ring runs.

    Transformer Engine's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention/
    dot_product_attention/context_parallel.py, cp_p2p_fwd_prepare_qkv) splits the sequence into
    2 cp chunks, rank r holding chunks r and 2 cp - 1 - r, and runs cp steps per layer: step 0
    the "diagonal" tile, one causal call of the rank's s / cp queries over its own s / cp keys;
    the cp - 1 others non-causal ("no_mask") calls, s / cp queries over the half chunk of s /
    2 cp keys (lower triangle) or the half chunk of queries over s / cp keys (upper triangle).
    PyTorch's ring (torchtitan, `enable_load_balance`) runs the same tiles. Every step does the
    same FLOPs, s^2 / (2 cp^2) per head, so the diagonal is 1 / cp of the rank's work.

    The diagonal is looked up as the causal call at s / cp; the others as the non-causal call of
    s / cp queries and keys (the tables key one sequence length), carried to the (s / cp,
    s / 2 cp) "lower triangle" call by the tile model (kernels.tile_rate_ratio): every
    step has a rank on that call (rank cp - 1 runs it on all cp - 1 steps), and its extra query
    tiles make it the slower half. Where the tables do not hold a step's call (the shipped
    Hopper tables measure causal calls of 2K-32K tokens only) that step takes `full`, the
    full-sequence causal call's rate, carried to the step's call by the same tile model (the
    look-up then reads `extrapolated` under CP_STEP_TERM): a call of fewer tokens runs slower per
    FLOP, each query tile's fixed work spread over fewer keys (bench/ring_step_tiles.py: on the
    tables' own causal rows, 4x shorter calls predicted from the longer one's rate within 1 % at
    the median, where the full call's rate was 9 % fast forward and 24 % backward). The steps
    refine a layer the tables hold: where `full` is None (the layer's own call outside the
    tables' box: the shipped Hopper tables end at 32K tokens) the layer stays on the curve, as
    without CP, and the step look-ups are made (kernel_shapes records them for `planner measure
    kernels --cp N`) but not reported (docs/cost_model.md "Attention under CP from the
    tables")."""
    batch, seq, heads, kv, d_qk, d_v = call
    step = seq / cp
    diag, diag_status = book.attention_s_per_flop(
        batch, step, heads, kv, d_qk, d_v, causal=True, window=0, kernel=kernel
    )
    off, off_status = book.attention_s_per_flop(
        batch, step, heads, kv, d_qk, d_v, causal=False, window=0, kernel=kernel
    )
    if full is None:
        return None, ()
    looks = ((CP_STEP_TERM, diag_status), (CP_STEP_TERM, off_status))
    diag = diag or _tile_carried(full, (step, step, True), (seq, seq, True))
    off = _tile_carried(off, (step, step / 2, False), (step, step, False)) if off else None
    off = off or _tile_carried(full, (step, step / 2, False), (seq, seq, True))
    share = 1.0 / cp
    rate = tuple(share * a + (1.0 - share) * b for a, b in zip(diag, off, strict=True))
    return (rate[0], rate[1]), looks


def _tile_carried(
    rate: tuple[float, float],
    to: tuple[float, float, bool],
    from_: tuple[float, float, bool],
) -> tuple[float, float]:
    """(forward + backward, forward) seconds per FLOP of the (queries, keys, causal) call `to`,
    from the measured `rate` of the call `from_`, each direction by kernels.tile_rate_ratio."""
    total, fwd = rate
    f = fwd * tile_rate_ratio(to, from_, "forward")
    return f + (total - fwd) * tile_rate_ratio(to, from_, "backward"), f


def attention_times(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    book: KernelBook | None,
) -> tuple[float, float | None, tuple[tuple[str, str], ...]]:
    """(forward, backward or None for the model's 2.5x, look-ups) of the full (causal)
    attention core of one layer and micro-batch on one GPU. From the tables: their seconds per
    FLOP at the call's shape (micro-batch, full sequence, this TP rank's query and KV heads)
    times this rank's FLOPs (a CP rank does 1/cp of the call's work); under CP at the ring's own
    per-step calls where the tables hold them (cp_step_rate). Sliding-window layers scale this
    (layer_attention)."""
    if workload.attention_kernel == "unfused":
        return _unfused_attention_looked_up(model, gpu, cal, workload, layout, book)
    flops = attention_core_flops(model, workload, layout)
    fwd_eff, bwd_eff = attention_pass_efficiencies(
        cal, workload, model.mla is not None, gpu.generation, head_dims(model)[0]
    )
    curve_s = flops / (gpu.peak_bf16_tflops * TFLOPS * fwd_eff)
    # a backward of its own only where the part's passes run at different measured speeds
    curve_bwd_s = None if bwd_eff == fwd_eff else ATTENTION_BACKWARD * curve_s * fwd_eff / bwd_eff
    if book is None:
        return curve_s, curve_bwd_s, ()
    call = attention_call(model, workload, layout)
    kernel = workload.attention_kernel
    found, status = book.attention_s_per_flop(*call, causal=True, window=0, kernel=kernel)
    looks: tuple[tuple[str, str], ...] = (("attention", status),)
    if layout.cp > 1 and workload.cp_attention != "a2a":  # a2a runs the whole sequence
        found, step_looks = cp_step_rate(call, layout.cp, kernel, book, found)
        looks += step_looks
    if found is None:
        return curve_s, curve_bwd_s, looks
    total, fwd = found
    return fwd * flops, (total - fwd) * flops, looks


def _unfused_attention_looked_up(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    book: KernelBook | None,
) -> tuple[float, float, tuple[tuple[str, str], ...]]:
    """Unfused attention from the tables' rows where they hold the shape (the shipped Hopper
    folders' attention_unfused.csv: Megatron-LM's kernels measured, no dropout): kernel
    `unfused` where Megatron-Core runs its fused softmax kernel, `unfused_torch` where it falls
    back to PyTorch's (megatron_fused_softmax); plus the dropout passes; the roofline
    (unfused_attention_times) without tables or outside them. The look-up takes the call as
    multi-head: Megatron-Core's DotProductAttention repeats K and V to every query head
    (repeat_interleave) before its BMMs, so a GQA layer runs the MHA kernels (the repeat's own
    copy of K and V, 2 d / s of the score traffic, is not priced)."""
    if book is None:
        return (*unfused_attention_times(model, gpu, cal, workload, layout), ())
    batch, seq, heads, _kv, d_qk, d_v = attention_call(model, workload, layout)
    kernel = "unfused" if megatron_fused_softmax(batch * heads, seq) else "unfused_torch"
    found, status = book.attention_s_per_flop(
        batch, seq, heads, heads, d_qk, d_v, causal=True, window=0, kernel=kernel
    )
    looks = (("attention", status),)
    if found is None:
        return (*unfused_attention_times(model, gpu, cal, workload, layout), looks)
    total, fwd = found
    flops = attention_core_flops(model, workload, layout)
    drop_fwd, drop_bwd = unfused_dropout_s(
        model, batch * heads * seq * seq, hbm_bytes_per_s(gpu, cal)
    )
    return fwd * flops + drop_fwd, (total - fwd) * flops + drop_bwd, looks


def _recompute_module_s(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    is_moe: bool,
    attn_s: float,
    book: KernelBook | None = None,
) -> tuple[tuple[str, float], ...]:
    """Forward seconds of each Megatron `--recompute-modules` choice in one layer: what its
    checkpoint reruns in backward (TransformerConfig.recompute_modules docstring).

    core_attn: the attention kernel; layernorm: the two norms; mlp: the dense MLP's GEMMs and
    activation; moe_act: the experts' activation; shared_experts: their GEMMs and activation;
    moe: router, experts and shared experts (its all-to-alls: stage.layer_cost); mla_up_proj:
    the MLA up-projection GEMMs and rotary. Collectives inside a rerun module (the MLP's
    sequence-parallel all-gather) are not repeated here.
    """
    fp8 = workload.precision in LOW_PRECISION
    t = tokens_per_gpu(workload, layout)
    hbm = hbm_bytes_per_s(gpu, cal)
    fused = workload.fused_elementwise
    tp = layout.tp
    # _memory_ops order: norms, adds, then dense: act; MoE: routed act, shared act
    ops = _memory_ops(model, layout, is_moe, fused, norm_fused(model, workload))

    def elem_s(*picked: MemoryOp) -> float:
        return memory_ops_s(list(picked), t, hbm, book)

    def clamp_s(module: str) -> float:  # activation_clamp's clamps ahead of that activation
        return elem_s(*(o for o in ops if o.clamp_of == module))

    norms, rerun = ops[0], sum(recomputed_norms(model, workload, is_moe))  # ops[0]: both norms
    part = replace(norms, elements=norms.elements * rerun / 2, calls=rerun)
    out = {"core_attn": attn_s, "layernorm": elem_s(part) if rerun else 0.0}
    if model.mla is not None:
        mla = model.mla
        ups = [
            g
            for g in attention_gemms(model, t, tp)
            if g.k in (mla.q_lora_rank, mla.kv_lora_rank) and g.n != model.hidden_size
        ]
        rope = ROTARY_ELEMS[fused] * model.num_attention_heads / tp * 2 * mla.qk_rope_head_dim
        out["mla_up_proj"] = gemm_time_s(ups, gpu, cal, fp8, book) + elem_s(MemoryOp(rope))
    if not is_moe:
        assert model.ffn_hidden_size is not None
        ffn = model.ffn_hidden_size
        mlp = gemm_time_s(mlp_gemms(model, t, ffn, tp), gpu, cal, fp8, book)
        out["mlp"] = mlp + elem_s(ops[2]) + clamp_s("mlp")
    else:
        moe = model.moe
        assert moe is not None
        out["moe_act"] = elem_s(ops[2]) + clamp_s("moe_act")
        shared_act = 0.0
        if moe.num_shared_experts:
            fs = moe.num_shared_experts * moe.expert_ffn_hidden_size
            shared_act = elem_s(ops[3]) + clamp_s("shared_experts")
            shared = gemm_time_s(mlp_gemms(model, t, fs, tp), gpu, cal, fp8, book)
            out["shared_experts"] = shared + shared_act
        # includes the shared experts' GEMMs
        routed = moe_gemms(model, t, layout, moe_imbalance(workload, layout.ep))
        routed = gemm_time_s(routed, gpu, cal, fp8, book)
        out["moe"] = routed + out["moe_act"] + shared_act
    return tuple(out.items())


def recomputed_matmuls(model: ModelSpec, t: float, tp: int) -> list[Gemm]:
    """Matmuls torchtitan's op-level selective checkpointing recomputes in a dense layer.

    Its policy (torchtitan parallelize_llama.py `_custom_policy`) saves the output of every other
    matmul in execution order, counted per block: wq saved, wk recomputed, wv saved, (SDPA saved),
    wo recomputed, w1 saved, w3 recomputed, w2 saved; an ungated MLP recomputes its w2.
    """
    assert model.ffn_hidden_size is not None
    return _recomputed_attention_matmuls(model, t, tp) + _recomputed_mlp(
        model, t, model.ffn_hidden_size / tp
    )


def _recomputed_attention_matmuls(model: ModelSpec, t: float, tp: int) -> list[Gemm]:
    """wk and wo: the second and fourth matmuls of a block (recomputed_matmuls)."""
    h, d = model.hidden_size, model.attn_head_dim
    return [
        Gemm(t, local_kv_heads(model, tp) * d, h),
        Gemm(t, h, model.num_attention_heads * d / tp),
    ]


def _recomputed_mlp(model: ModelSpec, t: float, ffn: float) -> list[Gemm]:
    """The MLP's recomputed matmul, counting on from the attention's four: w3 of a gated MLP
    (w1 fifth, saved; w2 seventh, saved), w2 of an ungated one (sixth)."""
    h = model.hidden_size
    return [Gemm(t, ffn, h) if model.gated_mlp else Gemm(t, h, ffn)]


def recomputed_moe_matmuls(
    model: ModelSpec, t: float, layout: Layout, imbalance: float
) -> list[Gemm]:
    """Matmuls torchtitan's op-level selective checkpointing recomputes in a MoE layer
    (torchtitan 0.3.0 distributed/activation_checkpoint.py SelectiveAC): the attention's wk and
    wo as in a dense layer; the router gate (force_recompute_mm_shapes_by_fqns defaults to
    ["moe.router.gate"], and it does not advance the count); every routed expert's grouped GEMM,
    w1, w3 and w2 (models/common/moe.py GroupedExperts calls torch._grouped_mm, which is in no
    save list: neither torchtitan's _get_default_save_ops nor torch's compute_intensive_ops);
    the shared experts' w3 (gated) or w2, the linears counting on as a dense MLP's."""
    moe = model.moe
    assert moe is not None
    router_and_experts = moe_gemms(model, t, layout, imbalance)[:3]
    gemms = _recomputed_attention_matmuls(model, t, layout.tp) + router_and_experts
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.expert_ffn_hidden_size / layout.tp
        gemms += _recomputed_mlp(model, t, shared)
    return gemms


MTP_JOIN_BYTES = (4 + 4 + 8 + 4, 6 + 6 + 8 + 6)
"""HBM bytes per element of [tokens / sequence-parallel shard, hidden] that one multi-token-
prediction depth's join to the trunk moves, (forward, backward) (megatron/core/transformer/
multi_token_prediction.py MultiTokenPredictionLayer._concat_embeddings and _postprocess): enorm on
the shifted tokens' embedding, hnorm on the trunk's hidden state and final_layernorm after the
depth's layer (read 2 + write 2 B each; backward reads the gradient and the input and writes the
input's gradient, 6 B), and the torch.cat of the two normed halves into eh_proj's [., 2h] input
(read 2 + 2, write 4 B; its backward splits the gradient back, the same bytes)."""


def lm_head_time(
    model: ModelSpec,
    gpu: GpuSpec,
    cal: GenerationCalibration,
    workload: Workload,
    layout: Layout,
    book: KernelBook | None = None,
) -> LayerTime:
    """Output projection and the fp32 cross-entropy over the vocabulary shard (last stage).

    Under multi-token prediction (ModelSpec.mtp_num_layers = D) the last stage also runs, per
    depth, what joins that depth's transformer layer (priced as a layer, pipeline.with_mtp) to
    the trunk and to its loss (megatron/core/transformer/multi_token_prediction.py): the look-up
    of the shifted tokens in its own copy of the embedding (embedding_time, the dense weight
    gradient included), the norms and concatenation (MTP_JOIN_BYTES), eh_proj, a column-parallel
    Linear(2h -> h) run under the fp8 context (_proj_and_transformer_layer), and the shared
    output layer and cross-entropy once more (process_mtp_loss). The TP collectives of the head,
    the loss, the embedding copy and eh_proj are priced by stage.end_stage_tp_costs."""
    t = tokens_per_gpu(workload, layout)
    vocab = model.vocab_size or 0
    depth = model.mtp_num_layers
    h = model.hidden_size
    gemms = [Gemm(t, vocab / layout.tp, h, count=1 + depth, fp8_capable=False)]
    # Cross-entropy in fp32 over the logits: read bf16 logits, softmax, write fp32 grad (~3 passes).
    ce_bytes = (1 + depth) * t * vocab / layout.tp * (BF16_BYTES + 4 + 4)
    gemm_bwd_s, looks = None, ()
    if book is None:
        gemm_s = gemm_time_s(gemms, gpu, cal, fp8=False)
    else:
        gemm_s, gemm_bwd_s, looks = gemm_passes_s(gemms, gpu, cal, False, book)
    hbm_s = hbm_bytes_per_s(gpu, cal)
    elementwise_s = ce_bytes / hbm_s
    elementwise_bwd_s = 2 * elementwise_s
    if depth:
        proj = [Gemm(t, h / layout.tp, 2 * h, count=depth)]
        fp8 = workload.precision in LOW_PRECISION
        if book is None:
            proj_s = gemm_time_s(proj, gpu, cal, fp8)
        else:
            proj_s, proj_bwd_s, proj_looks = gemm_passes_s(proj, gpu, cal, fp8, book)
            gemm_bwd_s = (gemm_bwd_s or 0.0) + proj_bwd_s
            looks = (*looks, *proj_looks)
        gemm_s += proj_s
        gemms += proj
        rows = t / (layout.tp if layout.sequence_parallel else 1)
        embed = embedding_time(model, gpu, cal, workload, layout)
        join_fwd, join_bwd = (depth * rows * h * b / hbm_s for b in MTP_JOIN_BYTES)
        elementwise_s += depth * embed.elementwise_s + join_fwd
        elementwise_bwd_s += depth * (embed.backward_s - embed.overhead_s) + join_bwd
    return LayerTime(
        gemm_s=gemm_s,
        attention_s=0.0,
        elementwise_s=elementwise_s,
        overhead_s=(1 + depth) * cal.kernel_overhead_s,
        model_flops=sum(g.flops for g in gemms),
        gemm_backward_s=gemm_bwd_s,
        lookups=looks,
        elementwise_backward_s=elementwise_bwd_s,
    )


EMBED_GRAD_BYTES = {"megatron": 2 + 10, "deepspeed": 2 + 10, "fsdp": 2 + 6}
"""HBM bytes per element of the [vocab / tp, hidden] embedding gradient, per micro-batch, by how
the framework accumulates gradients (Workload.dp_sync). Every framework here takes the dense
backward of a non-sparse embedding (torch embedding_dense_backward: the weight gradient is
zero-filled, 2 B, then the token rows are added into it). Megatron (megatron/core/distributed/
distributed_data_parallel.py _make_backward_post_hook: `param.main_grad.add_(param.grad.data)`,
the embedding has no gradient-accumulation fusion) then adds that bf16 gradient into the fp32
main_grad every micro-batch: read 4 + 2, write 4 = 10 B; DeepSpeed's bf16 optimizer accumulates
into fp32 gradients the same way. FSDP2 (torchtitan, nn.Embedding(sparse=False)) keeps the
unsharded bf16 gradient: autograd accumulates micro-batches into .grad (read 2 + 2, write 2), or
the last one is cast to the fp32 reduce dtype before its reduce-scatter (read 2, write 4): 6 B."""


def embedding_time(
    model: ModelSpec, gpu: GpuSpec, cal: GenerationCalibration, workload: Workload, layout: Layout
) -> LayerTime:
    """The input embedding on the first pipeline stage, one micro-batch (memory-bound).

    Forward (megatron/core/tensor_parallel/layers.py VocabParallelEmbedding.forward,
    models/common/embeddings/language_model_embedding.py): gather the t token rows from the
    vocabulary shard (read 2 + write 2 B per element of [t, h]); with TP > 1 zero the rows of
    tokens outside the shard (`output_parallel[input_mask, :] = 0.0`, 2 B); [b, s, h] ->
    [s, b, h] `.transpose(0, 1).contiguous()` (4 B); a learned position table adds a second
    gather and the add (4 + 6 B). Backward: the same passes over [t, h] again (the transpose's
    and mask's gradients, reading the token rows' gradient into the weight gradient), plus the
    dense [vocab / tp, h] weight gradient at EMBED_GRAD_BYTES. Its TP reduction (all-reduce, or
    reduce-scatter under sequence parallelism, and its backward) is stage.end_stage_tp_costs';
    the tied-embedding gradient all-reduce between the first and last stages is priced with
    the DP sync (stage.embedding_sync_tier_s)."""
    t = tokens_per_gpu(workload, layout)
    h, vocab = model.hidden_size, model.vocab_size or 0
    if not vocab:  # an unknown vocabulary prices no embedding, as the LM head (lm_head_time)
        return LayerTime(0.0, 0.0, 0.0, 0.0, 0.0)
    per_token = 4 + 4 + (2 if layout.tp > 1 else 0)
    if model.position_embedding_kind == "learned":
        per_token += 4 + 6
    hbm_s = hbm_bytes_per_s(gpu, cal)
    forward_s = t * h * per_token / hbm_s
    grad_s = vocab / layout.tp * h * EMBED_GRAD_BYTES[workload.dp_sync] / hbm_s
    return LayerTime(
        gemm_s=0.0,
        attention_s=0.0,
        elementwise_s=forward_s,
        overhead_s=cal.kernel_overhead_s,
        model_flops=0.0,
        elementwise_backward_s=forward_s + grad_s,
    )


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward FLOPs per token (PaLM App. B convention, causal attention), all layers + LM head;
    sliding-window layers count the pairs their window attends (kernels.attended_keys). Multi-
    token-prediction depths count as Megatron's num_floating_point_operations counts them
    (megatron/training/training.py): one more layer of the last layer's kind, eh_proj and one
    more LM head each (the norms' 3h are left out, as every norm is here)."""
    one = Layout()
    attn = sum(g.flops for g in attention_gemms(model, 1, 1))
    d_qk, d_v = head_dims(model)
    scores = seq_len * model.num_attention_heads * (d_qk + d_v)
    window = model.sliding_window if model.sliding_window and model.sliding_window < seq_len else 0
    # forward FLOPs of a windowed layer's scores over a full (causal) one's
    ratio = attended_keys(seq_len, window) / attended_keys(seq_len) if window else 1.0
    windowed = set(windowed_layers(model)) if window else set()
    k = model.num_dense_layers
    total = (model.vocab_size or 0) * model.hidden_size * 2.0
    if model.num_dense_layers:
        assert model.ffn_hidden_size is not None
        dense_mlp = sum(g.flops for g in mlp_gemms(model, 1, model.ffn_hidden_size, 1))
        n_win = sum(1 for i in windowed if i < k)
        total += model.num_dense_layers * (attn + scores + dense_mlp)
        total -= n_win * scores * (1.0 - ratio)
    if model.num_moe_layers:
        moe_mlp = sum(g.flops for g in moe_gemms(model, 1, one))
        n_win = sum(1 for i in windowed if i >= k)
        total += model.num_moe_layers * (attn + scores + moe_mlp)
        total -= n_win * scores * (1.0 - ratio)
    depth = model.mtp_num_layers
    if depth:
        h = model.hidden_size
        if model.num_moe_layers:
            mlp = sum(g.flops for g in moe_gemms(model, 1, one))
        else:
            assert model.ffn_hidden_size is not None
            mlp = sum(g.flops for g in mlp_gemms(model, 1, model.ffn_hidden_size, 1))
        last = attn + scores + mlp
        if window and model.num_layers - 1 in windowed:
            last -= scores * (1.0 - ratio)
        total += depth * (last + 2.0 * 2 * h * h + (model.vocab_size or 0) * h * 2.0)
    return total


def attention_report(
    model: ModelSpec, workload: Workload, layout: Layout, book: KernelBook | None
) -> dict | None:
    """How sliding-window attention was priced (Estimate.attention; None without a window):
    the window, the windowed and full layers (0-based, windowed_layers), and the windowed
    layers' time over full attention's with where it came from: `kernel_table` (the table's
    window rows of `kernel`, the look-up `status`) or `tile_model` (no window rows span this
    sequence and window: kernels.window_tile_ratio's whole tiles plus the per-query-tile cost);
    `flop_ratio`, the attended keys' share, is reported beside them (what the MFU counts)."""
    if model.sliding_window is None:
        return None
    windowed = windowed_layers(model)
    out: dict = {
        "sliding_window": model.sliding_window,
        "full_attention_every": model.full_attention_every,
        "windowed_layers": list(windowed),
        "full_layers": [i for i in range(model.num_layers) if i not in set(windowed)],
    }
    window = effective_window(model, workload)
    if not window:
        out["priced_as"] = f"full causal attention: the window spans seq_len {workload.seq_len}"
        return out
    flop_ratio = attention_core_flops(model, workload, layout, window) / attention_core_flops(
        model, workload, layout
    )
    (fwd, bwd), status, kernel = window_saving(model, workload, layout, book, window)
    out["flop_ratio"] = flop_ratio
    if kernel is None:
        out.update(priced_as="tile_model", forward_ratio=fwd, backward_ratio=bwd)
        if status is not None:
            out["status"] = status
        return out
    out.update(
        priced_as="kernel_table",
        kernel=kernel,
        status=status,
        forward_ratio=fwd,
        backward_ratio=bwd,
    )
    return out
