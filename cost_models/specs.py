"""The value types every other module reads: model, GPU, cluster, workload, layout, estimate.

All are frozen pydantic models with ``extra="forbid"``, so a misspelled key in a preset or a user
file is an error that names the field, never a silently ignored value. Units are in the names.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)


def _takes_float_not_bool(annotation: Any) -> bool:
    """Whether a field's type accepts a float (float, PositiveFloat, float | None, ...) and no
    bool."""
    found: list[Any] = []

    def walk(t: Any) -> None:
        found.append(t)
        for arg in get_args(t):
            walk(arg)

    walk(annotation)
    return float in found and bool not in found


_set_attr = object.__setattr__
_new_object = object.__new__


class Spec(BaseModel):
    """Frozen, strict base: values, hashable where their fields are, compared in tests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def with_update(self, update: Mapping[str, Any]) -> Self:
        """`self.model_copy(update=update)`, built directly: the same object (fields, field order,
        fields set; no validation either way), at a fraction of pydantic's generic copy (which
        copies four attributes through copy.copy). The planner's search makes tens of thousands
        of these per plan (issue 32: 0.5 of 3.5 profiled seconds). A Spec has no extra fields
        (extra="forbid") and no private attributes; a subclass that adds them gets model_copy."""
        if self.__pydantic_private__ is not None:
            return self.model_copy(update=update)
        fields = self.__dict__.copy()
        fields.update(update)
        new = _new_object(type(self))
        _set_attr(new, "__dict__", fields)
        _set_attr(new, "__pydantic_extra__", None)
        _set_attr(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | update.keys())
        _set_attr(new, "__pydantic_private__", None)
        return new


class InputSpec(Spec):
    """A spec read from user input: NaN and +-inf are refused in every float field, so neither the
    cost model nor the search ever does arithmetic on them (issue 19), and so is a boolean where a
    number belongs (pydantic's lax mode reads `norm_eps: true` as 1.0; its int fields already
    refuse it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields.get(info.field_name)
            if field is not None and _takes_float_not_bool(field.annotation):
                raise ValueError("Input should be a number, not a boolean")
        return value


# Largest values the product supports (README.md#reliability): beyond them the search's integer
# scaling and the cost model's sizes are not exercised; every message states the limit.
MAX_GPUS = 1_048_576  # 2**20 GPUs in one cluster / one parallel degree
MAX_LAYERS = 10_000
MAX_MTP_LAYERS = 16  # multi-token-prediction depths (DeepSeek-V3 trains 1)
MAX_WIDTH = 1_048_576  # hidden, FFN, expert FFN, head dims, MLA ranks
MAX_HEADS = 65_536  # attention / KV heads, experts
MAX_VOCAB = 16_777_216
MAX_TOKENS = 16_777_216  # sequence length, position table, global batch (sequences)
MAX_GB_PER_S = 1e6  # bandwidths (1 PB/s); the smallest is MIN_GB_PER_S
MIN_GB_PER_S = 1e-3
MAX_TFLOPS = 1e6
MAX_GIB = 1e6
MAX_LATENCY_US = 1e7  # 10 s per message
MIN_EFFICIENCY = 0.01
MAX_OVERSUBSCRIPTION = 1_000.0


class Axis(StrEnum):
    """Parallel axes: "axis" is a parallel dimension, "dim" only ever a tensor dimension."""

    TP = "tp"
    CP = "cp"
    DP = "dp"
    PP = "pp"


Precision = Literal["bf16", "fp16", "fp8", "mxfp8", "nvfp4"]
LOW_PRECISION = ("fp8", "mxfp8", "nvfp4")
"""Precisions whose GEMMs run on quantized inputs (Transformer Engine recipes): fp8 (Hopper and
later; recipe Workload.fp8_recipe), mxfp8 (MX block scaling, Blackwell / CDNA4), nvfp4 (NVFP4
block scaling, Blackwell). Non-GEMM math stays bf16."""
Fp8Recipe = Literal["delayed", "tensorwise", "blockwise"]
TpOverlapConfig = Literal[
    "collective_matmul",
    "te_default",
    "te1_default",
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
    "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
    "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
    "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
    "userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
    "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
    "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
    "userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
    "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
    "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
    "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096",
]
"""Workload.tp_overlap: the per-GEMM TP-overlap configuration (cost_models.tp_overlap.CONFIGS)."""
Recompute = Literal["none", "selective", "full"]
RecomputeModule = Literal[
    "core_attn", "layernorm", "mlp", "moe_act", "moe", "shared_experts", "mla_up_proj"
]
"""Megatron-Core `--recompute-modules` choices this cost model prices (TransformerConfig.
recompute_modules, megatron/core/transformer/transformer_config.py; the gdn_*, gdp_* and mhc
choices belong to model kinds the product does not describe)."""
RECOMPUTE_MODULES: tuple[str, ...] = (
    "core_attn",
    "layernorm",
    "mlp",
    "moe_act",
    "moe",
    "shared_experts",
    "mla_up_proj",
)
Generation = Literal["ampere", "hopper", "blackwell", "cdna3", "cdna4"]
"""NVIDIA A100 / H100-H200 / B200-B300; AMD MI300X-MI325X (CDNA 3), MI350X-MI355X (CDNA 4)."""
CollectiveAlgorithm = Literal["ring", "tree", "pat", "nvls", "sharp"]
Technology = Literal["infiniband", "roce", "roce-untuned", "spectrum-x"]
"""Scale-out fabric technology (docs/networks.md "Technologies"): InfiniBand with adaptive
routing; RoCE tuned as Meta runs it (SIGCOMM'24); RoCE on plain ECMP hashing; NVIDIA Spectrum-X
(Spectrum-4 switches with BlueField-3 / ConnectX-8 SuperNICs, adaptive routing)."""
TierKind = Literal["nvlink", "switch", "rail", "plane", "dragonfly", "torus", "wan"]
SCALE_OUT_KINDS = ("switch", "rail", "plane", "dragonfly")
"""Tier kinds that are a switched scale-out network (priced by planner.network_bom)."""
"""How a tier's links behave (docs/networks.md): `switch` a (possibly oversubscribed) switched
tier; `rail`/`plane` rail-optimized or multi-plane scale-out (cross-rail traffic forwarded over
NVLink); `dragonfly` global links between groups; `torus` one dimension of a torus; `wan` a
link between data centres."""


# ----------------------------------------------------------------------------------------- model


class MoESpec(InputSpec):
    """Mixture-of-experts block shape (Mixtral, DeepSeek-V3, Qwen3-MoE, gpt-oss)."""

    num_experts: PositiveInt = Field(le=MAX_HEADS, description="routed experts per MoE layer")
    top_k: PositiveInt = Field(le=MAX_HEADS, description="routed experts each token visits")
    expert_ffn_hidden_size: PositiveInt = Field(le=MAX_WIDTH)
    num_shared_experts: NonNegativeInt = Field(
        0, le=MAX_HEADS, description="always-on experts per MoE layer"
    )
    first_k_dense_layers: NonNegativeInt = Field(
        0, le=MAX_LAYERS, description="leading layers with a dense MLP"
    )
    max_nodes_per_token: PositiveInt | None = Field(
        None,
        le=MAX_GPUS,
        description="node-limited routing: each token's experts lie on at most this many nodes "
        "(DeepSeek-V3 report arXiv 2412.19437 sec. 2.1.2: M = 4); null: unrestricted",
    )

    # Router (HF config keys in models_zoo/hf.py HF_KEYS); none changes a shape or FLOP count
    # beyond the router matrix already counted, but each changes the model the launcher builds.
    router_score_function: Literal["softmax", "sigmoid"] = Field(
        "softmax", description="expert scores: softmax (Mixtral, Qwen) or sigmoid (DeepSeek-V3)"
    )
    router_pre_softmax: StrictBool = Field(
        False,
        description="softmax over all experts before top-k, weights not renormalised (HF "
        "norm_topk_prob false: Qwen2-MoE, DeepSeek-V2); false: top-k first, then normalised",
    )
    router_topk_scaling_factor: PositiveFloat | None = Field(
        None, le=1e6, description="routed weights scaled by this (DeepSeek-V3 routed_scaling_factor)"
    )
    router_expert_bias: StrictBool = Field(
        False, description="aux-loss-free balancing bias on the scores (DeepSeek-V3)"
    )
    router_num_groups: PositiveInt | None = Field(
        None, le=MAX_HEADS, description="group-limited routing: expert groups (n_group)"
    )
    router_group_topk: PositiveInt | None = Field(
        None, le=MAX_HEADS, description="groups each token may pick (topk_group)"
    )
    shared_expert_gate: StrictBool = Field(
        False, description="sigmoid gate on the shared expert's output (Qwen2-MoE)"
    )

    @model_validator(mode="after")
    def _top_k_within_experts(self) -> Self:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= num_experts ({self.num_experts})")
        return self


class RopeScaling(InputSpec):
    """Rotary frequency scaling of a long-context model (HF config.json `rope_scaling`): Llama 3.1's
    `llama3` rule (transformers modeling_rope_utils._compute_llama3_parameters) or YaRN (Peng et
    al. 2023, arXiv 2309.00071; DeepSeek-V3, gpt-oss). It changes no shape or FLOP count: the
    launcher must set it to build the model that was planned."""

    type: Literal["llama3", "yarn", "linear", "dynamic", "longrope"] = Field(
        description="HF rope_type; linear, dynamic and longrope (Phi-3) are kept so an export "
        "can refuse them by name"
    )
    factor: PositiveFloat = Field(1.0, le=1e6)
    original_max_position_embeddings: PositiveInt | None = Field(None, le=MAX_TOKENS)
    low_freq_factor: PositiveFloat | None = Field(None, le=1e6, description="llama3 only")
    high_freq_factor: PositiveFloat | None = Field(None, le=1e6, description="llama3 only")
    beta_fast: PositiveFloat | None = Field(None, le=1e6, description="yarn only")
    beta_slow: PositiveFloat | None = Field(None, le=1e6, description="yarn only")
    mscale: float | None = Field(None, ge=0, le=1e6, description="yarn only")
    mscale_all_dim: float | None = Field(None, ge=0, le=1e6, description="yarn only")
    truncate: StrictBool | None = Field(
        None,
        description="yarn only: round the correction range to whole dimensions (HF "
        "rope_scaling.truncate, transformers _compute_yarn_parameters; null: its default, "
        "true; gpt-oss: false; Megatron yarn_correction_range_round_to_int)",
    )


class MLASpec(InputSpec):
    """Multi-head latent attention dims; defaults are DeepSeek-V3's HF config.json values."""

    q_lora_rank: PositiveInt | None = Field(
        1536, le=MAX_WIDTH, description="null: direct Q projection"
    )
    kv_lora_rank: PositiveInt = Field(512, le=MAX_WIDTH)
    qk_nope_head_dim: PositiveInt = Field(128, le=MAX_WIDTH)
    qk_rope_head_dim: PositiveInt = Field(64, le=MAX_WIDTH)
    v_head_dim: PositiveInt = Field(128, le=MAX_WIDTH)


class ModelSpec(InputSpec):
    """The network being trained: shapes only (sequence length and batch belong to Workload)."""

    name: str = Field(max_length=200)
    num_layers: PositiveInt = Field(le=MAX_LAYERS)
    hidden_size: PositiveInt = Field(le=MAX_WIDTH)
    ffn_hidden_size: PositiveInt | None = Field(
        le=MAX_WIDTH, description="dense MLP width; null if all MoE"
    )
    num_attention_heads: PositiveInt = Field(le=MAX_HEADS)
    num_kv_heads: PositiveInt | None = Field(
        None, le=MAX_HEADS, description="null: same as attention heads"
    )
    head_dim: PositiveInt | None = Field(
        None, le=MAX_WIDTH, description="null: hidden_size / heads"
    )
    vocab_size: PositiveInt | None = Field(
        le=MAX_VOCAB, description="null: unknown, embeddings not counted"
    )
    gated_mlp: StrictBool = Field(True, description="SwiGLU-style MLP with three matrices")
    mla: MLASpec | None = Field(None, description="multi-head latent attention; true = V3 dims")
    moe: MoESpec | None = None
    tied_embeddings: StrictBool = Field(False, description="LM head shares the embedding matrix")
    max_position_embeddings: PositiveInt | None = Field(
        None,
        le=MAX_TOKENS,
        description="rows of a learned absolute position table (GPT-2/3); null: rotary/ALiBi",
    )
    seq_len: PositiveInt | None = Field(
        None, le=MAX_TOKENS, description="default training sequence length"
    )
    published_params_b: PositiveFloat | None = Field(
        None, le=1e7, description="total parameters stated by the source, in billions"
    )
    # What the launcher must set to build this model (issue 26). None of these changes the cost
    # model's FLOPs or memory, except the norm and bias parameters (under 0.1 %, cost_models/
    # params.py), and sliding-window attention: its layers' attention FLOPs and time
    # (cost_models/compute.py layer_attention; flash-attention memory is O(s) either way).
    normalization: Literal["rmsnorm", "layernorm"] = Field(
        "rmsnorm", description="RMSNorm (Llama, Qwen, DeepSeek) or LayerNorm (GPT-3, BLOOM, MPT)"
    )
    norm_eps: PositiveFloat = Field(1e-5, le=1.0, description="HF rms_norm_eps / layer_norm_eps")
    activation: Literal["silu", "gelu", "gelu_tanh", "squared_relu", "quick_gelu"] | None = Field(
        None,
        description="MLP activation (gated: act(gate) * (up + glu_linear_offset)); null: silu "
        "when gated (SwiGLU), gelu otherwise; quick_gelu: x * sigmoid(1.702 x) (gpt-oss's "
        "experts; Megatron --quick-geglu when gated)",
    )
    glu_linear_offset: float = Field(
        0.0,
        ge=-1e6,
        le=1e6,
        description="added to the linear half of a gated MLP before the product: act(gate) * "
        "(up + offset) (gpt-oss: 1, transformers GptOssExperts `(up + 1) * glu`; Megatron "
        "TransformerConfig.glu_linear_offset)",
    )
    activation_clamp: PositiveFloat | None = Field(
        None,
        le=1e6,
        description="a gated MLP's inputs clamped before the activation: the gate half to <= c, "
        "the linear half to [-c, c] (gpt-oss: HF swiglu_limit 7; Megatron "
        "activation_func_clamp_value); null: none",
    )
    linear_bias: StrictBool = Field(False, description="biases on every linear layer (GPT-2/3, BLOOM)")
    qkv_bias: StrictBool = Field(False, description="biases on the Q, K, V projections only (Qwen2)")
    qk_norm: StrictBool = Field(False, description="RMSNorm on each head's query and key (Qwen3)")
    position_embedding: Literal["rope", "learned", "alibi"] | None = Field(
        None, description="null: learned when max_position_embeddings is set, else rope"
    )
    rotary_base: PositiveFloat = Field(10000.0, le=1e12, description="HF rope_theta")
    rotary_percent: float = Field(
        1.0, gt=0, le=1, description="share of each head's dims rotated (Nemotron-4: 0.5)"
    )
    rope_scaling: RopeScaling | None = None
    sliding_window: PositiveInt | None = Field(
        None, le=MAX_TOKENS, description="tokens each query attends to in windowed layers"
    )
    full_attention_every: PositiveInt | None = Field(
        None,
        le=MAX_LAYERS,
        description="with sliding_window: every Nth layer attends to everything (N-1 windowed "
        "layers, then one full: gpt-oss and Gemma 2 N=2); null: every layer windowed",
    )
    attention_sinks: StrictBool = Field(
        False, description="a learned per-head sink logit in the softmax (gpt-oss)"
    )
    hidden_dropout: StrictBool = Field(
        False,
        description="dropout on the residual branches (Megatron --hidden-dropout > 0, its "
        "default 0.1; GPT-2/3 recipes): a 1-byte mask per element kept for backward after the "
        "attention projection and after the MLP (Korthikanti et al. 2022 Table 2)",
    )
    mtp_num_layers: NonNegativeInt = Field(
        0,
        le=MAX_MTP_LAYERS,
        description="multi-token-prediction depths trained beside the next-token loss, each an "
        "extra layer of the last layer's kind with its own projection and LM-head pass on the "
        "last pipeline stage (DeepSeek-V3: 1; HF num_nextn_predict_layers, Megatron "
        "--mtp-num-layers); 0: none",
    )
    source: str = Field("", description="config card or paper the numbers come from")

    @field_validator("mla", mode="before")
    @classmethod
    def _mla_bool(cls, value: object) -> object:
        # The published-runs schema writes `mla: true|false`; true means DeepSeek-V3's dims.
        if value is True:
            return MLASpec()
        if value is False:
            return None
        return value

    @model_validator(mode="after")
    def _shapes_agree(self) -> Self:
        kv = self.kv_heads
        if self.num_attention_heads % kv:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({kv})"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}) when head_dim is null"
            )
        if not self.gated_mlp and (self.glu_linear_offset or self.activation_clamp is not None):
            raise ValueError(
                "glu_linear_offset and activation_clamp act on the two halves of a gated MLP: "
                "they need gated_mlp: true"
            )
        dense_layers = self.num_layers if self.moe is None else self.moe.first_k_dense_layers
        if dense_layers and self.ffn_hidden_size is None:
            raise ValueError("ffn_hidden_size may be null only when every layer is MoE")
        if self.moe is not None and self.moe.first_k_dense_layers >= self.num_layers:
            raise ValueError(
                f"moe.first_k_dense_layers ({self.moe.first_k_dense_layers}) must be < "
                f"num_layers ({self.num_layers})"
            )
        return self

    @property
    def mlp_activation(self) -> str:
        return self.activation or ("silu" if self.gated_mlp else "gelu")

    @property
    def position_embedding_kind(self) -> str:
        if self.position_embedding is not None:
            return self.position_embedding
        return "learned" if self.max_position_embeddings is not None else "rope"

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_moe_layers(self) -> int:
        return 0 if self.moe is None else self.num_layers - self.moe.first_k_dense_layers

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers


# ------------------------------------------------------------------------------------ hardware


MIN_GEMM_SPEED, MAX_GEMM_SPEED = 0.25, 4.0
MIN_HBM_STREAMING = 0.1
"""Lowest accepted hbm_streaming_efficiency: a streaming kernel at training sizes below a tenth
of its HBM datasheet is a launch-bound or mis-measured figure, not a bandwidth."""


class GemmSpeed(InputSpec):
    """A part's measured GEMM speed relative to its generation's flagship (GpuSpec
    gemm_speed_vs_flagship): the flagship's time over this part's at the same GEMM shapes, same
    software, same collector (the median over a training shape set), so a method that times
    both parts alike cancels. The flagship is 1 by definition."""

    bf16: float = Field(ge=MIN_GEMM_SPEED, le=MAX_GEMM_SPEED, description="bf16 GEMMs")
    fp8: float | None = Field(
        None,
        ge=MIN_GEMM_SPEED,
        le=MAX_GEMM_SPEED,
        description="fp8 GEMMs (the GEMM alone, less any activation quantization); null: the "
        "part's MAMF ratio (or the generation value) prices fp8",
    )
    source: str = Field(
        min_length=1,
        description="where the ratios were measured: repository, commit, files, devices, "
        "shape set, statistic",
    )


class HbmStreaming(InputSpec):
    """A part's measured achieved / datasheet HBM bandwidth of streaming elementwise kernels at
    training's activation sizes (GpuSpec hbm_streaming_efficiency): where given it replaces the
    generation's hbm_efficiency for this part. Kernels that do not reach the HBM roof (each
    thread moving one vector, as PyTorch's and Transformer Engine's elementwise kernels do at
    training sizes) do not speed up with the datasheet bandwidth alone, so a part with much
    more HBM bandwidth than its generation's reference part reaches a smaller fraction of it."""

    value: float = Field(
        ge=MIN_HBM_STREAMING,
        le=1,
        description="achieved bytes/s over hbm_bandwidth_gb_per_s (the median over a stated "
        "size range)",
    )
    source: str = Field(
        min_length=1,
        description="where it was measured: repository, commit, files, kernel and the bytes it "
        "moves, devices, sizes, statistic",
    )


class Fp4GemmSpeed(InputSpec):
    """A part's measured NVFP4 GEMM speed over its per-tensor FP8 GEMM at the same shapes, same
    software, both with their inputs already quantized (GpuSpec fp4_gemm_speed): where given, an
    NVFP4 GEMM is priced as the part's fp8 GEMM at peak_fp8_tflops x over_fp8 instead of at the
    datasheet peak_fp4_tflops (cost_models.compute.gemm_hardware). The datasheet ratio is a
    tensor-core peak; Transformer Engine's block-scaled FP4 GEMMs reach a smaller share of it
    than its FP8 GEMMs reach of theirs, so the fp8 efficiency on the fp4 peak overprices them.
    carried_from names the part the training stack's ratio was measured on where this part's is
    that ratio carried over by a measured part-to-part quotient (same collector and software on
    both parts: bench/aic_fp4_speed.py), not measured on this part itself."""

    over_fp8: float = Field(
        gt=1.0,
        le=MAX_GEMM_SPEED,
        description="per-tensor FP8 GEMM time / NVFP4 GEMM time over the same shapes (the sum "
        "of a layer's GEMMs)",
    )
    source: str = Field(
        min_length=1,
        description="where it was measured: repository, commit, file, device, shapes, method",
    )
    carried_from: str | None = Field(
        None,
        min_length=1,
        description="the GPU id the ratio was measured on, where it was carried to this part "
        "by a measured part-to-part quotient; null: measured on this part",
    )


class AttentionSpeed(InputSpec):
    """A part's measured attention-forward speed relative to its generation's flagship (GpuSpec
    attention_speed_vs_flagship): the flagship's time over this part's for the same causal
    attention call, same software, same collector (the median over a long-prefill shape set), so
    a method that times both parts alike cancels. Blackwell Ultra doubled the SFU (exponential)
    throughput a Blackwell attention forward is bound by, so its attention speed-up is neither its
    GEMM speed-up nor its datasheet peak ratio. Only the forward is measured: the backward is
    priced at the part's gemm_speed_vs_flagship.bf16 (cost_models.calibration.attention_speeds
    says why). The flagship is 1 by definition."""

    forward: float = Field(
        ge=MIN_GEMM_SPEED,
        le=MAX_GEMM_SPEED,
        description="multi-head / GQA attention forward (head dim 128)",
    )
    forward_mla: float | None = Field(
        None,
        ge=MIN_GEMM_SPEED,
        le=MAX_GEMM_SPEED,
        description="MLA attention forward (q/k head dim 192, v 128: the model has `mla`); null: "
        "`forward`",
    )
    source: str = Field(
        min_length=1,
        description="where the speeds were measured: repository, commit, files, devices, shape "
        "set, statistic, and the backward's rule",
    )


class GpuSpec(InputSpec):
    """One accelerator: datasheet peaks (achieved efficiencies live in cost_models.calibration)."""

    id: str
    name: str
    generation: Generation = Field(description="selects the calibration constants")
    peak_bf16_tflops: PositiveFloat = Field(
        le=MAX_TFLOPS, description="dense (no sparsity) bf16 peak"
    )
    peak_fp8_tflops: PositiveFloat | None = Field(
        le=MAX_TFLOPS, description="dense fp8 peak; null: no fp8"
    )
    peak_fp4_tflops: PositiveFloat | None = Field(
        None, le=MAX_TFLOPS, description="dense NVFP4 peak; null: no NVFP4 tensor cores"
    )
    mamf_bf16_tflops: PositiveFloat | None = Field(
        None,
        le=MAX_TFLOPS,
        description="measured Maximum Achievable Matmul FLOPS in bf16 (the best dense matmul "
        "of a brute-force shape search, sustained clocks under the part's power cap included; "
        "mamf_source): the large-GEMM efficiency never exceeds it; null: not measured",
    )
    mamf_fp8_tflops: PositiveFloat | None = Field(
        None, le=MAX_TFLOPS, description="the same in fp8 (e4m3); null: not measured"
    )
    mamf_source: str = ""
    gemm_speed_vs_flagship: GemmSpeed | None = Field(
        None,
        description="measured GEMM speed relative to the generation's flagship at training "
        "shapes (GemmSpeed): where given it scales the generation's GEMM efficiencies instead "
        "of the MAMF ratio (cost_models.calibration.generation_for_gpu); null: the MAMF ratio",
    )
    attention_speed_vs_flagship: AttentionSpeed | None = Field(
        None,
        description="measured attention-forward speed relative to the generation's flagship "
        "(AttentionSpeed): where given it replaces the datasheet peak ratio for the attention "
        "forward, and the backward runs at gemm_speed_vs_flagship.bf16 (which it needs) "
        "(cost_models.calibration.generation_for_gpu); null: the peak ratio for both passes",
    )
    fp4_gemm_speed: Fp4GemmSpeed | None = Field(
        None,
        description="measured NVFP4 GEMM speed over this part's per-tensor FP8 GEMM, or one "
        "carried to it from the part it was measured on (Fp4GemmSpeed): where given, NVFP4 "
        "GEMMs run at the fp8 efficiency on peak_fp8_tflops x over_fp8; null: at the fp8 "
        "efficiency on peak_fp4_tflops (the datasheet ratio, an assumption)",
    )
    hbm_gib: PositiveFloat = Field(le=MAX_GIB)
    hbm_bandwidth_gb_per_s: PositiveFloat = Field(le=MAX_GB_PER_S)
    hbm_streaming_efficiency: HbmStreaming | None = Field(
        None,
        description="measured achieved / datasheet HBM bandwidth of streaming elementwise "
        "kernels on this part (HbmStreaming): where given it replaces the generation's "
        "hbm_efficiency (cost_models.calibration.generation_for_gpu); null: the generation value",
    )
    nvlink_gb_per_s: PositiveFloat = Field(le=MAX_GB_PER_S, description="per GPU, one direction")
    nvlink_domain_size: PositiveInt = Field(
        le=MAX_GPUS, description="GPUs in the NVLink domain of its system"
    )
    frameworks: tuple[str, ...] | None = Field(
        None,
        max_length=16,
        description="the modelled training frameworks (cost_models.framework) that run on this "
        "accelerator; null: all of them (PyTorch on CUDA / ROCm); () : none (a TPU: plans carry "
        "no framework claim and the framework exports refuse them)",
    )
    host_cpu: Literal["x86", "grace"] = Field(
        "x86",
        description="the CPU that runs the training framework's Python next to this GPU: x86 "
        "(DGX / HGX hosts) or grace (Grace Hopper / Grace Blackwell superchips); the same "
        "Python op takes 2.75x the host time on Grace (cost_models/host.py HOST_CPU_OVER_X86)",
    )
    host_cpu_source: str = ""
    host_link_gb_per_s: PositiveFloat | None = Field(
        None,
        le=MAX_GB_PER_S,
        description="GPU <-> host-memory bandwidth per GPU, one direction, 1e9 bytes/s, "
        "when every GPU of the host copies at once (the link CPU activation offloading "
        "moves its bytes over, stage.offload_exposed_s): PCIe to an x86 host, NVLink-C2C to a "
        "Grace; null: not known (offloading is refused on it)",
    )
    host_link_source: str = ""
    host_link_assumed: StrictBool = Field(
        False,
        description="host_link_gb_per_s is an assumption, not the GPU's own datasheet figure "
        "(presets --constants says 'assumption'; host_link_source says why)",
    )
    source: str = ""

    @model_validator(mode="after")
    def _fp8_speed_needs_fp8(self) -> GpuSpec:
        speed = self.gemm_speed_vs_flagship
        if speed is not None and speed.fp8 is not None and self.peak_fp8_tflops is None:
            raise ValueError(
                "gemm_speed_vs_flagship.fp8 is given but peak_fp8_tflops is null (no fp8 units)"
            )
        fp4 = self.fp4_gemm_speed
        if fp4 is not None:
            if self.peak_fp4_tflops is None or self.peak_fp8_tflops is None:
                raise ValueError(
                    "fp4_gemm_speed is given but peak_fp4_tflops or peak_fp8_tflops is null (no "
                    "NVFP4 or fp8 tensor cores to compare)"
                )
            ratio = self.peak_fp4_tflops / self.peak_fp8_tflops
            if fp4.over_fp8 > ratio:
                raise ValueError(
                    f"fp4_gemm_speed.over_fp8 is {fp4.over_fp8:g}, above the datasheet ratio "
                    f"peak_fp4_tflops / peak_fp8_tflops = {ratio:g}: a measured NVFP4 GEMM "
                    "cannot outrun its tensor-core peak by more than the fp8 GEMM does"
                )
        if self.attention_speed_vs_flagship is not None and speed is None:
            raise ValueError(
                "attention_speed_vs_flagship is given but gemm_speed_vs_flagship is null (the "
                "attention backward is priced at gemm_speed_vs_flagship.bf16)"
            )
        return self


class LinkTier(InputSpec):
    """One level of the interconnect, innermost first: the NVLink domain, then scale-out tiers."""

    name: str
    domain_size: PositiveInt | None = Field(
        le=MAX_GPUS,
        description="GPUs reachable inside one group of this tier; null: the whole cluster",
    )
    bandwidth_gb_per_s: float = Field(
        ge=MIN_GB_PER_S, le=MAX_GB_PER_S, description="per GPU, one direction, 1e9 bytes/s"
    )
    latency_us: NonNegativeFloat = Field(
        le=MAX_LATENCY_US, description="per-message latency (alpha)"
    )
    efficiency: float = Field(
        0.8, ge=MIN_EFFICIENCY, le=1, description="achievable bus bandwidth fraction"
    )
    oversubscription: float = Field(
        1.0,
        ge=1,
        le=MAX_OVERSUBSCRIPTION,
        description="bandwidth divisor for traffic through this tier (4 = 4:1 taper)",
    )
    kind: TierKind = Field(
        "switch", description="link type; selects the traffic-pattern rules in cost_models.comm"
    )
    rails: PositiveInt = Field(
        1,
        le=1024,
        description="separate rails/planes a node's NICs attach to (rail-optimized, multi-plane);"
        " traffic to a peer on another rail is forwarded over NVLink first",
    )
    dim_size: PositiveInt | None = Field(
        None,
        le=MAX_GPUS,
        description="torus tiers: ring length of this dimension (wrap-around link)",
    )
    nvls: StrictBool = Field(
        False,
        description="NVSwitch with in-switch reduction (NVLink SHARP, NCCL NVLS algorithm; "
        "third-generation NVSwitch and later)",
    )
    sharp: StrictBool = Field(
        False,
        description="switches with in-network reduction (InfiniBand SHARP / NCCL CollNet): "
        "all-reduce, and with NCCL >= 2.20 and SHARP 3.5.2 reduce-scatter and all-gather "
        "(NVIDIA SHARP Rev 3.5.2 LTS release notes)",
    )
    algorithms: tuple[CollectiveAlgorithm, ...] | None = Field(
        None,
        description="collective algorithms NCCL may use on this tier (NCCL_ALGO); null: every "
        "legal one, the cheapest per message size as NCCL's tuner picks",
    )
    technology: Technology | None = Field(
        None,
        description="scale-out technology whose behaviour under load this tier has "
        "(cost_models.comm.TECHNOLOGY_LOAD_FACTOR); null: as calibrated. Filled from the "
        "cluster's network.technology on its scale-out tiers",
    )


# ----------------------------------------------------------- per-cluster calibration (issue 18)
# Written by `planner calibrate` (planner/calibrate/); read by cost_models.calibration
# .calibration_for_cluster. Link-tier fits go into the tiers' own efficiency / latency_us.


class CalibrationValues(InputSpec):
    """Per-cluster overrides of the generation's constants (cost_models.calibration); null keeps
    the generation default. Fractions are of the datasheet peaks in the cluster's GpuSpec."""

    gemm_efficiency_bf16: float | None = Field(None, gt=0, le=1)
    gemm_efficiency_fp8: float | None = Field(None, gt=0, le=1)
    gemm_half_dim: NonNegativeFloat | None = None
    gemm_half_dim_fp8: NonNegativeFloat | None = Field(
        None, description="fp8 GEMM roll-off dimension; null: gemm_half_dim"
    )
    attention_efficiency: float | None = Field(None, gt=0, le=1)
    fa2_attention_speed: float | None = Field(None, gt=0, le=2)
    hbm_efficiency: float | None = Field(None, gt=0, le=1)
    kernel_overhead_s: NonNegativeFloat | None = None


class FitRecord(InputSpec):
    """Where one calibrated constant came from: the measurement, the fit and how well it fits."""

    constant: str = Field(description="e.g. gemm_efficiency_bf16, tiers.ib.efficiency")
    value: float
    default: float | None = Field(None, description="the preset / generation value it replaces")
    source: str = Field(description="measurement file(s) the value was fitted on")
    points: NonNegativeInt = 0
    max_residual_pct: NonNegativeFloat = Field(
        0.0, description="largest |fitted - measured| / measured over the points, in %"
    )
    note: str = ""


class ClusterCalibration(InputSpec):
    """The calibration block of a cluster file: constant overrides plus their provenance."""

    values: CalibrationValues = CalibrationValues()
    fits: tuple[FitRecord, ...] = ()
    date: str = ""


class NetworkSpec(InputSpec):
    """What the network is built from: the bill of materials (planner.network_bom) prices it and
    the technology sets its behaviour under load (cost_models.comm.technology_factor)."""

    technology: Technology | None = Field(
        None, description="scale-out technology; null: InfiniBand-like, as the tiers are calibrated"
    )
    switch: str | None = Field(
        None, description="scale-out switch model in the price list; null: by technology and speed"
    )
    nic: str | None = Field(None, description="NIC model in the price list; null: by technology")
    scale_up: str | None = Field(
        None,
        description="scale-up fabric component in the price list (NVLink switch tray, HGX "
        "baseboard NVSwitches, a switchless mesh); null: by the NVLink domain's size",
    )
    endpoint_link: Literal["optic", "aoc", "dac"] = Field(
        "optic", description="NIC-to-leaf cable: transceivers + fibre, active optical, or copper"
    )


# ------------------------------------------------------------------ kernel tables (issue 32)
# Measured per-shape kernel times (../shared/data/kernels/README.md formats), carried inline by a
# cluster file; models_zoo reads the CSV folder a cluster names by path; cost_models.kernels
# looks them up. Rows are compact tuples so a calibrated cluster file stays readable.

KernelDtype = Literal["bf16", "fp8"]
GemmLayout = Literal["TN", "NN", "NT"]
GemmRow = tuple[PositiveFloat, PositiveFloat, PositiveFloat, KernelDtype, GemmLayout, PositiveFloat]
"""(m, n, k, dtype, layout, time_ms): C[m,n] = A[m,k] B[k,n]; TN forward, NN data grad, NT
weight grad of a Linear."""
AttentionRow = tuple[
    PositiveInt,  # batch
    PositiveInt,  # seq
    PositiveInt,  # heads
    PositiveInt,  # kv_heads
    PositiveInt,  # head_dim (query / key)
    PositiveInt,  # v_head_dim
    bool,  # causal
    NonNegativeInt,  # window (0: full attention)
    # kernel (flex: FlexAttention, window rows' kernel; unfused / unfused_torch: the score
    # matrix in HBM, Megatron's fused softmax kernel / Megatron-Core's PyTorch fallback)
    Literal["fused", "fa2", "flex", "unfused", "unfused_torch"],
    PositiveFloat,  # time_ms: one forward + backward call
    NonNegativeFloat,  # forward_ms (0: not measured)
]
GroupedGemmRow = tuple[
    PositiveInt, PositiveFloat, PositiveFloat, PositiveFloat, KernelDtype, PositiveFloat
]
"""(experts, rows_per_expert, n, k, dtype, time_ms): one grouped GEMM over `experts` matrices."""
MemoryBoundRow = tuple[str, PositiveFloat, PositiveFloat]
"""(op, bytes, time_ms): bytes counts each tensor read and written once."""
CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv"]
CollectiveRow = tuple[CollectiveOp, PositiveInt, PositiveInt, PositiveFloat, PositiveFloat, str]
"""(collective, ranks, nodes, bytes, busbw_gb_per_s, algorithm): one message size of an
nccl-tests run over `ranks` GPUs on `nodes` whole or equal parts of nodes; bytes is nccl-tests'
`size` column (the whole buffer: S of its doc/PERFORMANCE.md), busbw its bus bandwidth (algbw x
2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter / all-to-all, 1 for sendrecv);
algorithm `auto` (NCCL's own choice) or the one NCCL_ALGO forced (ring, tree, ...)."""


class KernelTables(InputSpec):
    """Measured kernel times of one GPU (cost_models.kernels looks them up; docs/calibration.md)."""

    source: str = Field(description="where the rows were measured (folder, tool, date)")
    basis: Literal["measured", "assumption"] = Field(
        "measured",
        description="measured: timed on the GPU; assumption: someone's settings imported as "
        "rows (a peer simulator's system file, planner calibrate --system-file)",
    )
    gemm: tuple[GemmRow, ...] = ()
    attention: tuple[AttentionRow, ...] = ()
    grouped_gemm: tuple[GroupedGemmRow, ...] = ()
    memory_bound: tuple[MemoryBoundRow, ...] = ()
    collectives: tuple[CollectiveRow, ...] = Field(
        (),
        description="nccl-tests curves of this cluster's tiers: size -> bus bandwidth per "
        "collective and group (cost_models.commtable); measured on the cluster, not the GPU",
    )
    sustained_bf16_tflops: PositiveFloat | None = Field(
        None,
        le=MAX_TFLOPS,
        description="bf16 GEMM TFLOP/s the GPU holds for minutes under its power cap (a folder's "
        "sustained.csv, measure_sustained.py) running 8192^3 GEMMs back to back; the "
        "short-burst rows above it are capped to it only with apply_sustained_cap "
        "(cost_models.kernels); null: not measured",
    )
    sustained_fp8_tflops: PositiveFloat | None = Field(
        None,
        le=MAX_TFLOPS,
        description="the same for fp8 GEMMs (a folder's sustained_fp8.csv, "
        "bench/measure_sustained_fp8.py); null: not measured",
    )
    apply_sustained_cap: StrictBool = Field(
        False,
        description="price GEMMs no faster than the sustained rates above (a step that keeps "
        "the GPU at its power cap throughout); false, the default: training steps, which mix "
        "GEMMs with memory-bound phases, held burst clocks below the cap on the H100 "
        "(docs/calibration.md#sustained-clocks), so the rates are reported, not applied",
    )

    @property
    def has_compute(self) -> bool:
        """Whether any kernel (not collective) rows are given."""
        return bool(self.gemm or self.attention or self.grouped_gemm or self.memory_bound)

    @model_validator(mode="after")
    def _some_rows(self) -> Self:
        if not (self.has_compute or self.collectives):
            raise ValueError(
                "kernel tables hold no rows (give gemm, attention, grouped_gemm, memory_bound or "
                "collectives)"
            )
        for c in self.collectives:
            if c[1] % c[2] or c[1] < 2:
                raise ValueError(
                    f"collectives row {list(c)}: ranks must be >= 2 and a multiple of nodes"
                )
        for row in self.attention:
            if row[2] % row[3]:
                raise ValueError(f"attention row {list(row)}: heads must be a multiple of kv_heads")
        return self


MAX_SCALE_OUT_GB_PER_S = 200.0
"""Fastest scale-out bandwidth per GPU that exists: 1.6 Tb/s (two 800 Gb/s ConnectX-8 ports per
GPU on GB300 NVL72, NVIDIA GB300 NVL72 datasheet) = 200 GB/s. A scale-out tier above it is
almost always a Gb/s figure (NIC line rates are quoted in Gb/s) typed as GB/s."""


def _check_tier_sense(index: int, tier: LinkTier, gpus_per_node: int) -> None:
    """Plausibility of one tier (issue 28): a domain is whole nodes (or a part of one node),
    and a scale-out tier (after the first, not NVLink, not a torus) is at most
    MAX_SCALE_OUT_GB_PER_S per GPU. Messages name the tier, the numbers and the rule."""
    where = f"tiers.{index} ({tier.name})"
    size = tier.domain_size
    if size is not None and size % gpus_per_node and gpus_per_node % size:
        raise ValueError(
            f"{where}: domain_size {size} is not whole nodes: with gpus_per_node "
            f"{gpus_per_node} a domain is a multiple of {gpus_per_node} ({gpus_per_node}, "
            f"{2 * gpus_per_node}, ...) or a divisor of {gpus_per_node}"
        )
    scale_out = index > 0 and tier.kind not in ("nvlink", "torus")
    if scale_out and tier.bandwidth_gb_per_s > MAX_SCALE_OUT_GB_PER_S:
        bw = tier.bandwidth_gb_per_s
        raise ValueError(
            f"{where}: bandwidth_gb_per_s {bw:g} GB/s per GPU ({bw * 8 / 1000:g} Tb/s) is above "
            f"the fastest scale-out NIC bandwidth per GPU that exists ({MAX_SCALE_OUT_GB_PER_S:g}"
            f" GB/s = 1.6 Tb/s); did you mean {bw:g} Gb/s = {bw / 8:g} GB/s? (an NVLink or "
            "torus tier: set kind nvlink / torus)"
        )


class Cluster(InputSpec):
    """A sized cluster: the GPU, the node, and the link tiers from the NVLink domain outwards."""

    name: str
    gpu: GpuSpec
    gpus_per_node: PositiveInt = Field(le=MAX_GPUS)
    num_gpus: PositiveInt = Field(le=MAX_GPUS)
    tiers: tuple[LinkTier, ...] = Field(min_length=1, max_length=16)
    source: str = ""
    network: NetworkSpec = NetworkSpec()
    storage_gb_per_s: float | None = Field(
        None,
        ge=MIN_GB_PER_S,
        le=MAX_GB_PER_S * 10,
        description="aggregate checkpoint storage bandwidth, 1e9 bytes/s (cost_models.goodput); "
        "null: the goodput model's default (Llama 3's Tectonic, 2 TB/s sustained)",
    )
    calibration: ClusterCalibration | None = Field(
        None, description="measured overrides (planner calibrate); null: generation defaults"
    )
    kernels: KernelTables | None = Field(
        None,
        description="measured per-shape kernel times (issue 32); in a cluster file also "
        "builtin, {builtin: GPU_ID} (tables shipped in models_zoo/kernels) or {path: DIR}; null: "
        "the generation's efficiency curves price every kernel",
    )
    max_gpus: PositiveInt | None = Field(
        None,
        le=MAX_GPUS,
        description="largest size this fabric description stands for (--gpus above it is "
        "refused, models_zoo.load_cluster); null: num_gpus",
    )

    @model_validator(mode="before")
    @classmethod
    def _technology_on_tiers(cls, data: object) -> object:
        """network.technology is the scale-out tiers' technology unless a tier names its own."""
        if not isinstance(data, dict) or not isinstance(data.get("network"), dict):
            return data
        tech = data["network"].get("technology")
        tiers = data.get("tiers")
        if tech is None or not isinstance(tiers, (list, tuple)):
            return data
        out = [
            {**t, "technology": tech}
            if isinstance(t, dict) and t.get("kind", "switch") in SCALE_OUT_KINDS and j > 0
            and t.get("technology") is None
            else t
            for j, t in enumerate(tiers)
        ]
        return {**data, "tiers": out}

    @model_validator(mode="after")
    def _tiers_nest(self) -> Self:
        sizes = [t.domain_size for t in self.tiers]
        if any(s is None for s in sizes[:-1]):
            raise ValueError("only the outermost tier may have domain_size null")
        bounded = [s for s in sizes if s is not None]
        for inner, outer in itertools.pairwise(bounded):
            if outer <= inner or outer % inner:
                raise ValueError(
                    f"tier domain sizes must grow and divide each other (got {inner} then {outer})"
                )
        if self.num_gpus > self.gpus_per_node and self.num_gpus % self.gpus_per_node:
            raise ValueError(
                f"num_gpus ({self.num_gpus}) must be whole nodes: a multiple of gpus_per_node "
                f"({self.gpus_per_node})"
            )
        for i, tier in enumerate(self.tiers):
            _check_tier_sense(i, tier, self.gpus_per_node)
        if self.max_gpus is not None and self.max_gpus < self.num_gpus:
            raise ValueError(
                f"max_gpus ({self.max_gpus:,}) is below num_gpus ({self.num_gpus:,})"
            )
        return self

    @property
    def num_nodes(self) -> int:
        return max(1, self.num_gpus // self.gpus_per_node)


# ------------------------------------------------------------------------------- workload/layout


class Workload(InputSpec):
    """What is trained per step: sequence length, global batch in sequences, precision."""

    seq_len: PositiveInt = Field(le=MAX_TOKENS)
    global_batch_seqs: PositiveInt = Field(le=MAX_TOKENS)
    precision: Precision = "bf16"
    cross_entropy: Literal["fused", "eager_fp32", "flash_attn"] = Field(
        "fused",
        description="loss kernel: fused vocab-parallel (Megatron), eager PyTorch "
        "cross_entropy on logits upcast to fp32 (uncompiled torchtitan loss), or flash-attn's "
        "cross-entropy kernel on the bf16 logits (llm-foundry's fused_crossentropy); the "
        "logits' memory by kind: cost_models.memory.LOGIT_BYTES",
    )
    fused_elementwise: StrictBool = Field(
        True,
        description="norms, rotary and activation run as fused kernels (Transformer Engine, "
        "torch.compile); False for eager PyTorch op-by-op",
    )
    fused_norm: StrictBool = Field(
        False,
        description="with fused_elementwise False: the norm still runs as one fused kernel "
        "(PyTorch builds whose F.rms_norm / nn.RMSNorm dispatch to aten::_fused_rms_norm on "
        "CUDA, e.g. torch 2.11; F.layer_norm is always one kernel); False: the eager chain",
    )
    selective_recompute: Literal["attention", "unfused_attention", "every_other_matmul"] = Field(
        "attention",
        description="what selective recompute redoes: the Megatron-Core modules of the layout "
        "(Layout.selective_modules, default the attention core), the attention core only where "
        "it runs unfused (Megatron-DeepSpeed: its flash attention path checkpoints nothing), "
        "or every other matmul plus elementwise ops (torchtitan op-level policy)",
    )
    fp8_dynamic_scaling: StrictBool = Field(
        False,
        description="fp8 scales from the current tensor's amax (torchao tensorwise, TE current "
        "scaling): one extra read per cast; False for delayed scaling from amax history",
    )
    fp8_recipe: Fp8Recipe | None = Field(
        None,
        description="fp8 scaling recipe (Megatron-Core --fp8-recipe, TransformerConfig."
        "fp8_recipe): 'delayed' (amax history), 'tensorwise' (current per-tensor scaling), "
        "'blockwise' (1x128 / 128x128 tiles, DeepSeek-V3 style); null: tensorwise when "
        "fp8_dynamic_scaling, else delayed. mxfp8 and nvfp4 are precisions of their own",
    )
    bf16_layers_start: NonNegativeInt = Field(
        0,
        description="transformer layers at the start of the model that run in bf16 under an "
        "fp8 / mxfp8 / nvfp4 precision (Megatron-Core --first-last-layers-bf16 with "
        "--num-layers-at-start-in-bf16: fp8_utils.get_fp8_context / fp4_utils.get_fp4_context "
        "give those layers no quantized autocast; the switch is off by default, its count 1 "
        "when on). Megatron-Bridge's NVFP4 and FP8 performance recipes leave it off; its "
        "current-scaling and blockwise precision presets turn it on with 1 / 2 layers",
    )
    bf16_layers_end: NonNegativeInt = Field(
        0,
        description="layers at the end of the model in bf16 the same way "
        "(--num-layers-at-end-in-bf16; Megatron-Bridge's Nemotron 3 Super NVFP4 preset: 14)",
    )
    moe_force_balance: StrictBool = Field(
        False,
        description="MoE routing forced even (Megatron --moe-router-force-load-balancing: random "
        "router logits, a benchmarking mode NVIDIA's published MoE performance tables use): the "
        "busiest EP rank carries the mean load (compute.moe_imbalance 1.0 instead of 1.15)",
    )
    cuda_graphs: StrictBool = Field(
        False,
        description="per-layer CUDA graphs replay the attention block, dense MLP and MoE router "
        "/ dispatch preprocessing (Megatron --cuda-graph-impl transformer_engine "
        "--cuda-graph-modules attn mlp | attn moe_router moe_preprocess): no per-layer launch "
        "cost, no MoE routing bookkeeping; expert GEMMs still launch one by one "
        "(cost_models.compute.layer_overhead_s)",
    )
    full_iteration_cuda_graph: StrictBool = Field(
        False,
        description="one CUDA graph for the whole forward-backward path of an iteration "
        "(Megatron --cuda-graph-impl full_iteration, megatron/core/transformer/"
        "transformer_config.py cuda_graph_impl; Megatron-Bridge's 26.06 Blackwell Qwen3 MXFP8 "
        "recipes): every kernel, the experts' included, replays from the graph, so no layer "
        "pays a host launch or Transformer Engine module cost and no MoE dispatcher waits on "
        "the host for the token counts (capture needs static shapes: the dispatcher's "
        "per-rank capacity, moe_expert_rank_capacity_factor); cost_models/host.py",
    )
    expert_gemm_launch: Literal["per_expert", "grouped"] = Field(
        "per_expert",
        description="how the expert FFN's GEMMs launch: one GEMM per local expert (Transformer "
        "Engine GroupedLinear, Megatron --moe-grouped-gemm: general_grouped_gemm over num_gemms "
        "= local experts, each launched from the host after the dispatcher's sync) or one "
        "grouped kernel for all local experts (torch._grouped_mm: torchtitan "
        "models/common/moe.py GroupedExperts); cost_models.compute.layer_overhead_s",
    )
    host_s_per_kernel: NonNegativeFloat = Field(
        6.26e-6,
        description="host seconds to launch one kernel eagerly from the framework's Python "
        "(measured: bench/results/h100-2026-11-26/layers/launch.csv, 6.26 us per tiny kernel, "
        "torch 2.11 on one H100 host); a pass takes at least its kernels' issue time "
        "(cost_models/host.py, compute.host_floor_s)",
    )
    host_issue: Literal["kernels", "te_modules"] = Field(
        "te_modules",
        description="what the host time of a layer is made of: one launch cost per kernel "
        "(plain PyTorch), or Transformer Engine module calls at their measured CPU time plus "
        "the kernels launched outside them (Megatron-Core's TE layer spec, the default like "
        "every Megatron physics field); cost_models/host.py",
    )
    moe_host_sync: Literal["every_layer", "expert_parallel", "none"] = Field(
        "every_layer",
        description="where the MoE token dispatcher waits on the device for the per-expert "
        "token counts, draining the launch queue: every MoE layer's forward (Megatron "
        "MoEAlltoAllTokenDispatcher d2h_event.synchronize), only with EP > 1 (torchtitan "
        "AllToAllTokenDispatcher), or never; cost_models/host.py",
    )
    moe_dispatch: Literal["permute", "index"] = Field(
        "permute",
        description="how the routed rows are moved around the experts: a permute copy in and an "
        "unpermute copy out per routed row (Megatron's moe_utils permute / unpermute, 4 element "
        "moves per hidden element, priced with the layer's elementwise ops), or torchtitan's "
        "local dispatch: x[order // k] gather, fp32 score multiply, deterministic scatter_add "
        "and their autograd inverses (cost_models.compute.moe_dispatch_ops)",
    )
    moe_router_padding: StrictBool = Field(
        False,
        description="the router pads each expert's routed rows to the quantization alignment "
        "(Megatron --moe-router-padding-for-fp8, later --moe-router-padding-for-quantization: "
        "the routing map gains a few duplicate rows so every count is a multiple of 16 / 32), "
        "so the quantized grouped experts need no padding copy; False (Megatron's default, and "
        "Megatron-Bridge's Qwen3 / DeepSeek recipes): TEGroupedMLP copies the routed rows into a "
        "padded buffer and back (cost_models/host.py pads_expert_rows)",
    )
    moe_capacity_factor: PositiveFloat | None = Field(
        None,
        le=1e3,
        description="Megatron token-drop MoE (--moe-expert-capacity-factor): each expert takes "
        "at most ceil(routed tokens / num_experts x factor) rows from each rank's router "
        "(megatron/core/transformer/moe/moe_utils.py get_capacity, "
        "apply_router_token_dropping) and the rest are dropped, so the busiest expert's rows are "
        "min(imbalance, factor) x the mean (compute.moe_imbalance); None: dropless (Megatron's "
        "default)",
    )
    moe_pad_to_capacity: StrictBool = Field(
        False,
        description="pad every expert's input to its capacity (Megatron "
        "--moe-pad-expert-input-to-capacity; needs moe_capacity_factor): every expert on every "
        "rank receives exactly the capacity's rows, factor x the mean, whatever the routing "
        "(Megatron-Bridge 25.09 apply_moe_token_drop: factor 1.0 with padding)",
    )
    attention_kernel: Literal["fused", "fa2", "flash1", "unfused"] = Field(
        "fused",
        description="attention kernel class: the generation's fused kernel (Transformer Engine "
        "cuDNN / FlashAttention-3 on Hopper), FlashAttention-2 (PyTorch SDPA's default flash "
        "backend since cuDNN became opt-in in 2.5.1; the flash-attn 2 package), "
        "FlashAttention-1-era kernels (flash1: the flash-attn 1.x package and the Triton "
        "FlashAttention derived from it, llm-foundry's attn_impl 'triton' of 2023; Ampere and "
        "Hopper only, no local window; cost_models.compute.flash1_efficiency) or unfused "
        "attention with a materialized score matrix (BMM1 -> softmax + dropout -> BMM2: "
        "Megatron-LM before FlashAttention (2022-12), Megatron-Core's local DotProductAttention, "
        "Transformer Engine's UnfusedDotProductAttention, --attention-backend unfused; no "
        "context parallelism; cost_models.compute.unfused_attention_times)",
    )
    attention_unpad: StrictBool = Field(
        False,
        description="the attention kernel runs on unpadded (varlen) tokens: q, k, v are gathered "
        "into packed copies before it and its output scattered back into the padded layout, "
        "with the inverse copies in backward (flash-attn bert_padding unpad_input / pad_input "
        "around flash_attn_varlen_func: llm-foundry MPT flash_attn_fn); "
        "cost_models.compute.unpad_copies_s",
    )
    grad_clip: Literal["none", "norm", "clip"] = Field(
        "clip",
        description="gradient-norm passes each optimizer step over the stage's shard of fp32 "
        "gradients: 'clip' the global L2 norm (read) and the clip scale (read + write), 12 B "
        "per parameter; 'norm' the norm only, 4 B (DeepSpeed with gradient_clipping 0 still "
        "computes it); 'none'. Every framework profile sets 'clip' (the default, as Megatron's "
        "--clip-grad 1.0); "
        "cost_models.stage.CLIP_BYTES_PER_PARAM",
    )
    grad_zeroing: StrictBool = Field(
        True,
        description="each step writes zeros over the rank's gradient storage before the first "
        "backward (a memset at the HBM rate, grad_bytes per element): Megatron's contiguous "
        "grad buffer (DDP zero_grad_buffer -> param_and_grad_buffer.reset grad_data.zero_(); "
        "every parameter of the rank, not the optimizer's shard) or torch's "
        "optimizer.zero_grad(set_to_none=False) over the gradients a rank keeps (FSDP2's "
        "shards); not under grads_set_to_none, which frees them instead; False: the step sets "
        "gradients to None (DeepSpeed ZeRO 1 / 2, Composer). Default: Megatron's. "
        "cost_models.stage.grad_zero_bytes",
    )
    grad_nan_check: StrictBool = Field(
        True,
        description="before each gradient bucket's data-parallel collective the rank takes the "
        "bucket's norm to refuse NaN / Inf gradients (Megatron DDP check_for_nan_in_grad: "
        "megatron-core 0.19 param_and_grad_buffer.py start_grad_sync -> check_grads, "
        "grad_data.norm(p=2) on the compute stream): one read of every gradient of the rank's "
        "buffer per reduction, grad_bytes per element. Never under a full-iteration CUDA graph "
        "(Megatron-LM asserts --no-check-for-nan-in-loss-and-grad with it); Megatron-FSDP "
        "checks only a reduction it does not overlap. Read only by Megatron's data-parallel path (dp_sync 'megatron'); "
        "default: Megatron's. cost_models.stage.grad_bucket_pass_bytes",
    )
    grad_average_in_collective: StrictBool = Field(
        True,
        description="the data-parallel collectives average the gradients (NCCL AVG; Megatron "
        "--ddp-average-in-collective, DistributedDataParallelConfig average_in_collective, "
        "which NeMo's and Megatron-Bridge's recipes set and the megatron export writes). "
        "False: Megatron scales each bucket by 1 / (DP x CP) in place before its sum "
        "(param_and_grad_buffer.py start_grad_sync `bucket.grad_data *= "
        "gradient_scaling_factor`; Megatron-FSDP `grad_data.mul_` on bf16 buckets), a read and "
        "a write of every gradient per reduction; expert buckets are scaled by EDP / (DP x CP) "
        "either way where the two groups differ (distributed_data_parallel.py). Read only by "
        "Megatron's data-parallel path (dp_sync 'megatron'). "
        "cost_models.stage.grad_bucket_pass_bytes",
    )
    zero3_16bit_shard: StrictBool = Field(
        True,
        description="under ZeRO-3 the rank keeps its shard of the parameters in the 16-bit "
        "compute dtype (the all-gather's input, memory.param_gather_bytes per element) beside "
        "the fp32 master shard: Megatron-FSDP's model_weight_buffer next to its "
        "main_weight_buffer, DeepSpeed stage 3's lp_param_buffer next to "
        "fp32_partitioned_groups_flat. False: the fp32 shard is the parameter and the 16-bit "
        "copy exists only inside the all-gather (PyTorch FSDP1 / FSDP2 mixed precision: "
        "torchtitan, llm-foundry). cost_models.memory.state_bytes",
    )
    zero3_max_reuse_distance: PositiveInt | None = Field(
        None,
        description="under ZeRO-3, a gathered parameter whose next use comes within this many "
        "gathered elements stays gathered instead of being released: DeepSpeed's "
        "stage3_max_reuse_distance (1e9 by default; zero/partitioned_param_coordinator.py "
        "__params_to_release), so a stage's last layers keep their parameters from the "
        "forward to the backward, which gathers only the rest. null: every unit is released "
        "after its forward (Megatron-FSDP _post_forward, FSDP1 / FSDP2). "
        "cost_models.memory.zero3_reuse_window_elements",
    )
    head_tp_backward: Literal["overlapped", "exposed"] = Field(
        "overlapped",
        description="the LM head's TP collectives in backward (cost_models.stage."
        "end_stage_tp_costs): 'overlapped' -- Megatron's ColumnParallelLinear gathers its "
        "input again beside the dgrad GEMM and reduce-scatters (all-reduces) the input "
        "gradient beside the wgrad GEMM, async (tensor_parallel/layers.py "
        "LinearWithGradAccumulationAndAsyncCommunication); 'exposed' -- DTensor's "
        "ColwiseParallel redistributes the gradient before the backward goes on (torchtitan). "
        "Default: Megatron's",
    )
    zero3_prefetch_elements: PositiveInt | None = Field(
        500_000_000,
        description="under ZeRO-3, how far the framework gathers ahead of the running unit: "
        "whole units until at least this many elements, or one unit where that is larger "
        "(Megatron-FSDP's suggested_AG_prefetch_size, max(1e9, 2 x the mean unit) / 2 when "
        "suggested_communication_unit_size is unset: megatron_fsdp.py, "
        "param_and_grad_buffer.py all_gather_params). null: one unit ahead (FSDP2's implicit "
        "prefetch, FSDP1's BACKWARD_PRE, DeepSpeed's 5e7-element prefetch bucket). Default: "
        "Megatron's. The same Megatron knob sizes the backward's gradient reduce-scatter "
        "queue at ZeRO 2 and 3 (memory.grad_queue_bytes). "
        "cost_models.memory.zero3_gathered_elements",
    )
    fsdp_copies: Literal["none", "fsdp2"] = Field(
        "none",
        description="the data-parallel framework's parameter and gradient copies around its "
        "collectives under ZeRO 2 / 3: 'fsdp2' (torch fully_shard, torchtitan): the all-gather "
        "copy-in cast and copy-out, the reduce-scatter copy-in chunk_cat and the sharded "
        "gradient accumulation; 'none': not priced. cost_models.stage.fsdp_copies_s",
    )
    step_grad_copies: Literal["megatron", "deepspeed", "none"] = Field(
        "megatron",
        description="the fp32 copies the optimizer step makes of 16-bit gradients (main_grads "
        "bf16), alive after the activations are freed, so the step is a memory phase of its "
        "own: 'megatron' -- the distributed optimizer's fp32 copy of the rank's shard, ZeRO-0's "
        "of every parameter, none under the precision-aware optimizer or Megatron-FSDP; "
        "'deepspeed' -- FP16_Optimizer's per-parameter casts and their flat copy (ZeRO-0), the "
        "partition's flat 16-bit copy and its fp32 cast (ZeRO 1-3); 'none': not priced. "
        "cost_models.memory.step_grad_bytes",
    )
    dp_accumulation: DpAccumulation = Field(
        "last_micro_batch",
        description="when the data-parallel collectives of ZeRO 0-2 run under gradient "
        "accumulation (m micro-batches per step on a rank; ZeRO-3 gathers and reduces every "
        "micro-batch in every mode but FSDP2 under pipelining): 'last_micro_batch' -- "
        "gradients are reduced once, after the last micro-batch (Megatron DDP no_sync, "
        "DeepSpeed ZeRO-0/1 at the accumulation boundary); 'every_micro_batch' -- without "
        "pipeline parallelism every micro-batch's backward reduces its gradients and ZeRO-2 "
        "gathers the parameters again in its forward (torchtitan's train_step calls "
        "forward/backward per micro-batch with FSDP2's gradient sync on); with pp > 1 once "
        "per step (torch.distributed.pipelining defers sync to the last backward, ZeRO-3 "
        "gathering m + 1 times); 'zero2_every_micro_batch' -- ZeRO-2 reduces every "
        "micro-batch and gathers once, ZeRO 0/1 once (DeepSpeed partition_gradients, "
        "Megatron-FSDP optim_grads). "
        "cost_models.accumulation.dp_rounds",
    )
    cp_attention: Literal["fused_ring", "torch_ring", "a2a"] = Field(
        "fused_ring",
        description="context-parallel attention: Transformer Engine's fused K/V ring (Megatron "
        "--cp-comm-type p2p), Transformer Engine's all-to-all of Q, K, V and the output "
        "(Megatron --cp-comm-type a2a, DeepSpeed-Ulysses style: it takes sliding windows and "
        "attention sinks, which the ring refuses), or PyTorch's experimental context_parallel "
        "(all-gather K/V, eager fp32 merges; torchtitan)",
    )
    cross_site_sync_every: PositiveInt = Field(
        1,
        description="DiLoCo-style periodic synchronisation (Douillard et al. 2023, arXiv "
        "2311.08105): data-parallel replicas on different sites (across a `wan` tier) exchange "
        "their parameter deltas once every this many steps instead of gradients every step. "
        "This changes the optimisation (an outer optimizer on pseudo-gradients), not just the "
        "speed; 1 = synchronous training",
    )
    dp_bucket_elements: PositiveInt | None = Field(
        None,
        description="gradient bucket size in parameters (each bucket one collective with its "
        "own latency); null: the dp_sync framework's default; ZeRO-3 gathers per layer",
    )
    dp_sync: DpSync = Field(
        "megatron",
        description="how the framework issues the data-parallel gradient collectives "
        "(cost_models.stage.dp_buckets, grad_sync_exposed_s): 'megatron' -- DDP buckets of "
        "max(40M, 1M x dp) parameters on the first pipeline stage only, one collective per "
        "model chunk elsewhere, launched as each chunk's last backward ends; 'fsdp' -- one "
        "reduce-scatter per FSDP unit (transformer block) with ZeRO >= 2 (torchtitan, "
        "PyTorch FSDP); 'deepspeed' -- ZeRO reduce buckets of 5e8 elements on their own stream "
        "(overlap_comm, which the deepspeed export sets); without ZeRO the engine's all-reduce "
        "after the backward, exposed in full",
    )
    moe_dispatcher: MoEDispatcher = Field(
        "alltoall",
        description="MoE token exchange: 'alltoall' sends one copy per (token, routed expert) "
        "in bf16 (Megatron-Core MoEAlltoAllTokenDispatcher); 'deepep' sends one copy per "
        "destination node over the scale-out NIC and forwards it inside the node over NVLink "
        "(DeepEP normal kernels; Megatron --moe-token-dispatcher-type flex), dispatching in fp8 "
        "when training in fp8 where ep_dispatch_fp8 says so and combining in bf16 (DeepSeek-V3 "
        "report sec. 3.3.2)",
    )
    moe_flex_backend: MoEFlexBackend = Field(
        "deepep",
        description="which kernels run a 'deepep' (flex) exchange across nodes: 'deepep' "
        "(DeepEP's normal kernels; Megatron --moe-flex-dispatcher-backend deepep) or 'hybridep' "
        "(NVIDIA's HybridEP, DeepEP hybrid-ep branch; --moe-flex-dispatcher-backend hybridep). "
        "Same bytes; each back-end's measured scale-out rate (comm.FLEX_WIRE_FRACTION)",
    )
    ep_dispatch_fp8: StrictBool = Field(
        False,
        description="whether a 'deepep' dispatch of an fp8 run sends fp8 with 1x128 scales "
        "(DeepSeek-V3 report sec. 3.3.2, DeepEP's own recipe) rather than the bf16 hidden states "
        "(Megatron's flex dispatcher and torchtitan: the framework profiles set it)",
    )
    pp_keeps_outputs: StrictBool = Field(
        False,
        description="the last pipeline stage keeps every micro-batch's output (the logits) "
        "until the step ends: PyTorch torch.distributed.pipelining's output_chunks, returned "
        "by schedule.step() (torchtitan) until step(return_outputs=False), pytorch#165822",
    )
    optimizer_moments: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="dtype of Adam's first and second moments: fp32, or bf16 (DeepSeek-V3 "
        "report sec. 3.3.3 'Low-Precision Optimizer States'; Megatron-LM "
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16). "
        "Master weights and main gradients stay fp32 either way",
    )
    main_grads: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="dtype of the gradient buffer the backward accumulates into and the "
        "data-parallel reduction moves (memory.grad_bytes): fp32, Megatron-LM's default under "
        "bf16 (megatron/training/arguments.py: --main-grads-dtype fp32 turns on "
        "accumulate_allreduce_grads_in_fp32), or bf16: Megatron-Core's own default "
        "(DistributedDataParallelConfig.grad_reduce_in_fp32 False; param_and_grad_buffer.py "
        "group_params_for_buffers: grad dtype = param dtype), Megatron-LM --grad-reduce-in-bf16, "
        "NVIDIA's performance recipes (Megatron-Bridge perf_recipes _perf_precision / "
        "_benchmark_common: grad_reduce_in_fp32 False; NeMo-Framework-Launcher "
        "conf/training/nemotron/nemotron_340b.yaml optim.grad_sync_dtype bf16). The fp32 "
        "master weights and moments are unchanged",
    )
    fp8_params: StrictBool = Field(
        False,
        description="primary weights kept in fp8 (Megatron-LM --fp8-param-gather, Transformer "
        "Engine fp8_model_init; valid with fp8 / mxfp8 precision; under nvfp4 the NVFP4 "
        "weights of --fp4-param-gather, which Megatron-Bridge's NVFP4 recipe sets): the distributed "
        "optimizer's param buffer holds uint8 (param_and_grad_buffer.py), the optimizer casts "
        "its fp32 master shard into it (fp8_utils.quantize_param_shard -> TE "
        "cast_master_weights_to_fp8) and the ZeRO parameter all-gather sends 1 B per element; "
        "mxfp8 gathers bf16 through the gradient buffer and re-quantizes. Weight bytes per "
        "GPU: memory.weight_bytes",
    )
    activation_func_fp8_input_store: StrictBool = Field(
        False,
        description="SwiGLU inputs (dense MLP, shared and routed experts) kept for backward in "
        "fp8 and cast back before it (Megatron-Core TransformerConfig."
        "activation_func_fp8_input_store, megatron/core/fusions/fused_bias_swiglu.py; "
        "DeepSeek-V3 report sec. 3.3.3 (2))",
    )
    attention_output_store: Literal["separate", "e5m6"] = Field(
        "separate",
        description="how the attention output (the output projection's input) is kept for "
        "backward: 'separate': the attention kernel keeps its bf16 output and the projection "
        "its own GEMM input (an fp8 copy under Transformer Engine fp8); 'e5m6': one copy in "
        "DeepSeek's 12-bit E5M6 format serves both (DeepSeek-V3 report sec. 3.3.3 (1)); no "
        "launcher here has it",
    )
    memory_phases: Literal["additive", "fsdp2"] = Field(
        "additive",
        description="how a ZeRO-3 stage's peak is composed (cost_models.memory.state_bytes, "
        "stage.stage_activation_bytes): 'additive' adds states, the gathered layers "
        "(memory.zero3_gathered_elements, zero3_reuse_window_elements), kept "
        "activations, the loss and a checkpoint's rebuild; 'fsdp2' (torch fully_shard) follows "
        "the step's phases: fp32 sharded parameters (no resident bf16 copy, also on a one-rank "
        "group), the units FSDP2 leaves unsharded through the loss, the loss and a "
        "checkpoint's rebuild one after the other, and the end of backward (every gradient "
        "plus the last unit's reduce-scatter buffers)",
    )
    grads_set_to_none: StrictBool = Field(
        False,
        description="under memory_phases 'fsdp2': gradients are freed at each step's end "
        "(optimizer.zero_grad(set_to_none=True)), so the first micro-batch's backward starts "
        "without any; False: they stay allocated (torchtitan 0.3 default "
        "zero_grad(set_to_none=training.disable_cuda_graphs), False)",
    )
    logits_alive_in_backward: StrictBool = Field(
        False,
        description="eager loss: the bf16 logits stay referenced through backward (a step that "
        "deletes them only after loss.backward()); False: freed before it (torchtitan "
        "trainer.py `del pred`)",
    )
    fsdp_root_holds_embedding: StrictBool = Field(
        False,
        description="under memory_phases 'fsdp2': the input embedding is in the root unit, "
        "which FSDP2 never reshards after forward (_fsdp_state.py _lazy_init), so it stays "
        "unsharded with the LM head through the loss; False: torchtitan's own unit, resharded "
        "after forward (torchtitan/distributed/fsdp.py apply_fsdp_to_decoder)",
    )
    tp_overlap: TpOverlapConfig = Field(
        "te_default",
        description="how TP communication overlaps its GEMMs under Layout.tp_comm_overlap "
        "(cost_models/tp_overlap.py): 'te_default': Transformer Engine userbuffers with TE's "
        "per-GEMM defaults (initialize_ub: ring_exchange for the all-gathers, pipeline "
        "reduce-scatter in 4 splits on 16 SMs, bulk backward overlaps on 16 SMs, both with "
        "set_sm_margin since TE 2.0), what Megatron-LM runs without --tp-comm-overlap-cfg; "
        "'te1_default': the same under Transformer Engine 1.x (no SM margin); a "
        "userbuffers_* name: that "
        "Megatron-Bridge TransformerLayerTPOverlapCfg (src/megatron/bridge/training/"
        "comm_overlap.py); 'collective_matmul': the generic decomposition (PyTorch async TP), "
        "first chunk exposed, GEMM not split",
    )
    fused_qkv: StrictBool = Field(
        False,
        description="eager attention with one fused q/k/v projection (torchtitan llama3 "
        "fuse_qkv): SDPA saves V as a view of the fused output, which keeps all of it, and the "
        "rotary outputs of Q and K besides; False: separate wq / wk / wv",
    )


    @model_validator(mode="after")
    def _bf16_layers_need_a_quantized_precision(self) -> Workload:
        if not (self.bf16_layers_start or self.bf16_layers_end):
            return self
        if self.precision not in LOW_PRECISION:
            raise ValueError(
                f"bf16_layers_start / bf16_layers_end need precision fp8, mxfp8 or nvfp4 (got "
                f"{self.precision}): Megatron --first-last-layers-bf16 exempts layers from it"
            )
        if self.precision == "fp8" and self.fp8_recipe == "delayed":
            raise ValueError(
                "bf16_layers_start / bf16_layers_end do not work with fp8_recipe delayed "
                "(megatron-core transformer_config.py: 'Delayed scaling does not support first "
                "/ last layer in BF16')"
            )
        return self

    @model_validator(mode="after")
    def _pad_to_capacity_needs_a_factor(self) -> Workload:
        # megatron-core transformer_config.py __post_init__ (Megatron-LM d98e8a6 lines 1862-1866
        # and 1755-1761): padding needs a capacity factor, and the flex dispatcher's DeepEP
        # back-end cannot pad (HybridEP can: token_dispatcher.py _HybridEPManager drop_and_pad).
        if not self.moe_pad_to_capacity:
            return self
        if self.moe_capacity_factor is None:
            raise ValueError(
                "moe_pad_to_capacity needs moe_capacity_factor (megatron-core: "
                "'moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity')"
            )
        if self.moe_dispatcher == "deepep" and self.moe_flex_backend == "deepep":
            raise ValueError(
                "moe_pad_to_capacity does not work with moe_dispatcher deepep (megatron-core: "
                "'Flex token dispatcher with deepep backend does not support "
                "moe_pad_expert_input_to_capacity')"
            )
        return self

    @model_validator(mode="after")
    def _fp8_params_need_fp8(self) -> Workload:
        if self.fp8_params and self.precision not in LOW_PRECISION:
            raise ValueError(
                f"fp8_params needs precision fp8, mxfp8 or nvfp4 (got {self.precision}): "
                "Megatron --fp8-param-gather / --fp4-param-gather keeps weights in the "
                "training format"
            )
        return self


MoEDispatcher = Literal["alltoall", "deepep"]
MoEFlexBackend = Literal["deepep", "hybridep"]
DpSync = Literal["megatron", "fsdp", "deepspeed"]
DpAccumulation = Literal["last_micro_batch", "every_micro_batch", "zero2_every_micro_batch"]
PipelineSchedule = Literal["1f1b", "dualpipe"]


def expert_shard_mesh_whole(dp_shard: int, cp: int, tp: int, ep: int, etp: int) -> bool:
    """Whether an HSDP layout's experts get a whole shard mesh: torchtitan parallel_dims.py
    build_mesh makes the experts' FSDP mesh efsdp = dp_shard * cp * tp // ep beside EP,
    replicated over dp_replicate, so dp_shard*cp*tp must hold whole EP (x ETP) groups; without
    EP the experts shard with the dense weights. The one statement of the rule (Layout's
    validator, framework.shard_choices)."""
    return ep == 1 or (dp_shard * cp * tp) % (ep * etp) == 0


class Layout(InputSpec):
    """One parallel layout. EP is carved from TP x DP x CP (Megatron MoE folding), not a factor."""

    tp: PositiveInt = Field(1, le=MAX_GPUS)
    pp: PositiveInt = Field(1, le=MAX_GPUS)
    dp: PositiveInt = Field(1, le=MAX_GPUS)
    cp: PositiveInt = Field(1, le=MAX_GPUS)
    ep: PositiveInt = Field(
        1, le=MAX_GPUS, description="expert parallel degree; etp*ep divides tp*dp*cp"
    )
    etp: PositiveInt = Field(
        1, le=MAX_GPUS, description="expert tensor parallel degree, divides tp"
    )
    vp: PositiveInt = Field(
        1, le=MAX_LAYERS, description="virtual (interleaved) stages per pipeline rank"
    )
    micro_batch: PositiveInt = Field(1, le=MAX_TOKENS)
    recompute: Recompute = "none"
    zero_stage: Literal[0, 1, 2, 3] = 1
    sequence_parallel: StrictBool = False
    order: tuple[Axis, ...] = Field(
        (Axis.TP, Axis.CP, Axis.DP, Axis.PP),
        description="rank order, innermost (fastest-varying, nearest GPUs) first",
    )
    tp_comm_overlap: StrictBool = Field(
        False,
        description="TP collectives chunked and overlapped with their GEMMs (Megatron "
        "--tp-comm-overlap, torchtitan async TP)",
    )
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        None,
        description="selective recompute: the Megatron --recompute-modules recomputed in "
        "backward; None: Megatron's default (core_attn). Ignored by torchtitan's op-level policy",
    )
    recompute_method: Literal["uniform", "block"] | None = Field(
        None,
        description="full recompute: uniform (every layer, checkpointed in groups of "
        "recompute_num_layers) or block (only the first recompute_num_layers layers of each "
        "model chunk); None: uniform, groups of 1",
    )
    recompute_num_layers: PositiveInt | None = Field(
        None, description="full recompute: group size (uniform) or recomputed layers (block)"
    )
    dp_shard: PositiveInt | None = Field(
        None,
        description="hybrid sharding (HSDP): ZeRO shards over this inner part of dp (x cp) and "
        "replicates across the dp / dp_shard outer groups (torchtitan data_parallel_shard_degree"
        " x data_parallel_replicate_degree); None: shard over all of dp",
    )

    pp_schedule: PipelineSchedule = Field(
        "1f1b",
        description="pipeline schedule: '1f1b' (interleaved when vp > 1) or 'dualpipe' "
        "(DeepSeek-V3 sec. 3.2.1, github deepseek-ai/DualPipe: bidirectional, bubble "
        "(pp/2-1)(F&B+B-3W), two copies of the parameters, all-to-all hidden behind compute)",
    )
    ep_overlap: StrictBool = Field(
        False,
        description="MoE all-to-all of one micro-batch overlapped with the compute of another "
        "in the 1F1B steady state (Megatron-LM --overlap-moe-expert-parallel-comm "
        "--delay-wgrad-compute)",
    )
    cpu_offload_layers: NonNegativeInt = Field(
        0,
        le=MAX_LAYERS,
        strict=True,  # a count: `true` or "4" in a file is a mistake, not 1 or 4 layers
        description="CPU activation offloading: the saved activations of the first this many "
        "transformer layers are copied to pinned host memory during forward and back during "
        "backward (Megatron-LM --cpu-offloading-num-layers, TransformerConfig.cpu_offloading; "
        "Transformer Engine cpu_offload.py DefaultOffloadSynchronizer); Megatron refuses it "
        "with pipeline parallelism and with activation recompute; 0: off",
    )
    account_for_embedding_in_pipeline_split: StrictBool = Field(
        False,
        description="the input embedding counts as one decoder layer when the layers are split "
        "over pipeline stages, so the first chunk of the first rank holds one layer fewer "
        "(Megatron-Core TransformerConfig.account_for_embedding_in_pipeline_split, "
        "--account-for-embedding-in-pipeline-split); num_layers plus the counted slots must "
        "divide by pp * vp",
    )
    account_for_loss_in_pipeline_split: StrictBool = Field(
        False,
        description="the loss (output layer) counts as one decoder layer in the pipeline split: "
        "the last chunk of the last rank holds one layer fewer (Megatron-Core "
        "TransformerConfig.account_for_loss_in_pipeline_split, "
        "--account-for-loss-in-pipeline-split)",
    )

    @property
    def label(self) -> str:
        """The layout in one short line, e.g. 'TP8 PP4 DP2 VP5 mb1 sel Z1' (the ranked-plans
        cell of every report; legend in planner/report/terminal.LAYOUT_LEGEND)."""
        return layout_label(self)

    def __str__(self) -> str:
        return self.label

    @model_validator(mode="after")
    def _order_is_permutation(self) -> Self:
        if sorted(self.order) != sorted(Axis):
            raise ValueError(f"order must list each of tp, cp, dp, pp once (got {self.order})")
        if self.dp_shard is not None:
            if self.dp % self.dp_shard:
                raise ValueError(f"dp_shard ({self.dp_shard}) must divide dp ({self.dp})")
            if self.zero_stage == 0:
                raise ValueError("dp_shard needs a ZeRO stage >= 1 (ZeRO-0 shards nothing)")
            if not expert_shard_mesh_whole(self.dp_shard, self.cp, self.tp, self.ep, self.etp):
                raise ValueError(
                    f"dp_shard*cp*tp ({self.dp_shard}*{self.cp}*{self.tp}) must be a multiple of "
                    f"ep*etp ({self.ep}*{self.etp}): the experts' shard mesh (efsdp)"
                )
        return self

    @model_validator(mode="after")
    def _offload_needs_one_stage(self) -> Self:
        # megatron/core/transformer/transformer_config.py __post_init__: "Currently there is no
        # support for Pipeline parallelism with CPU offloading"; "CPU offloading does not work
        # when activation recomputation is enabled".
        if self.cpu_offload_layers:
            if self.pp > 1:
                raise ValueError("cpu_offload_layers needs pp 1 (Megatron: no pipeline "
                                 "parallelism with CPU offloading)")
            if self.recompute != "none":
                raise ValueError("cpu_offload_layers needs recompute none (Megatron: CPU "
                                 "offloading does not work with activation recomputation)")
        return self

    @model_validator(mode="after")
    def _recompute_knobs_match_mode(self) -> Self:
        # Megatron's TransformerConfig.__post_init__ refuses the same combinations.
        if self.recompute_modules is not None and self.recompute != "selective":
            raise ValueError("recompute_modules needs recompute: selective")
        if self.recompute != "full" and (
            self.recompute_method is not None or self.recompute_num_layers is not None
        ):
            raise ValueError("recompute_method / recompute_num_layers need recompute: full")
        if self.recompute_method == "block" and self.recompute_num_layers is None:
            raise ValueError("recompute_method block needs recompute_num_layers")
        return self

    @property
    def selective_modules(self) -> tuple[str, ...]:
        """The Megatron modules selective recompute redoes (Megatron's default: core_attn),
        read only where the recompute mode is selective."""
        return ("core_attn",) if self.recompute_modules is None else self.recompute_modules

    @property
    def shard_dp(self) -> int:
        """The dp ranks ZeRO shards over (all of dp unless HSDP)."""
        return self.dp if self.dp_shard is None else self.dp_shard

    @property
    def replicate_dp(self) -> int:
        """HSDP replicas (dp / shard_dp); 1 without HSDP."""
        return self.dp // self.shard_dp

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def degree(self, axis: Axis) -> int:
        return getattr(self, axis.value)


# -------------------------------------------------------------------------------------- results


RECOMPUTE_SHORT = {"none": "", "selective": "sel", "full": "full"}
MODULE_SHORT = {
    "core_attn": "attn",
    "layernorm": "ln",
    "mlp": "mlp",
    "moe_act": "act",
    "moe": "moe",
    "shared_experts": "shx",
    "mla_up_proj": "up",
}


def recompute_label(lo: Layout) -> str:
    """RECOMPUTE_SHORT, with Megatron modules (sel:attn+ln+mlp) or block recompute (full:b2)."""
    if lo.recompute == "selective" and lo.recompute_modules is not None:
        return "sel:" + "+".join(MODULE_SHORT.get(m, m) for m in lo.recompute_modules)
    if lo.recompute == "full" and lo.recompute_method == "block":
        return f"full:b{lo.recompute_num_layers}"
    if lo.recompute == "full" and (lo.recompute_num_layers or 1) > 1:
        return f"full:u{lo.recompute_num_layers}"
    return RECOMPUTE_SHORT[lo.recompute]


def layout_label(lo: Layout) -> str:
    """Layout.label: degrees (CP/EP/ETP/VP when > 1), HSDP, micro-batch, recompute, ZeRO, SP
    when not the default (on whenever TP > 1), rank order when not tp-cp-dp-pp."""
    parts = [f"TP{lo.tp}", f"PP{lo.pp}", f"DP{lo.dp}"]
    parts += [f"CP{lo.cp}"] * (lo.cp > 1) + [f"EP{lo.ep}"] * (lo.ep > 1)
    parts += [f"ETP{lo.etp}"] * (lo.etp > 1) + [f"VP{lo.vp}"] * (lo.vp > 1)
    if lo.dp_shard is not None:  # hybrid sharded DP: replicas x shard group
        parts.append(f"HSDP{lo.replicate_dp}x{lo.dp_shard}")
    parts.append(f"mb{lo.micro_batch}")
    rc = recompute_label(lo)
    parts += [rc] * bool(rc)
    parts.append(f"Z{lo.zero_stage}")
    if lo.sequence_parallel != (lo.tp > 1):
        parts.append("SP" if lo.sequence_parallel else "noSP")
    # Megatron's layout letters: E (embedding) and L (loss) counted as layers in the PP split.
    counted = "E" * lo.account_for_embedding_in_pipeline_split
    counted += "L" * lo.account_for_loss_in_pipeline_split
    if counted:
        parts.append(f"split:{counted}")
    if lo.order != Layout.model_fields["order"].default:  # plans can differ only in placement
        parts.append("o:" + "".join(a.value[0] for a in lo.order))
    return " ".join(parts)


class StageMemory(Spec):
    """Bytes per GPU on one pipeline stage, in GiB."""

    stage: NonNegativeInt
    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    buffers_gib: float
    reserve_gib: float
    gathered_gib: float = Field(
        0.0,
        description="of weights_gib, the ZeRO-3-sharded parameters held gathered at the peak "
        "(cost_models.memory.zero3_gathered_bytes: the running units and their prefetch, "
        "DeepSpeed's reuse window, or every layer where gradient accumulation keeps them "
        "gathered); 0 without ZeRO-3 and under memory_phases 'fsdp2'",
    )
    peak_phase: Literal["backward", "end_of_backward", "optimizer_step"] = Field(
        "backward",
        description="the phase of the step that holds the stage's peak (cost_models.stage."
        "stage_peak): 'backward' -- the backward's start, with the in-flight activations; "
        "'end_of_backward' -- FSDP2's end of backward (memory_phases 'fsdp2'); "
        "'optimizer_step' -- the step's fp32 gradient copies (Workload.step_grad_copies). Past "
        "the backward start, gradients_gib carries the phase's excess so that total_gib is "
        "the peak",
    )

    @property
    def total_gib(self) -> float:
        return (
            self.weights_gib
            + self.gradients_gib
            + self.optimizer_gib
            + self.activations_gib
            + self.buffers_gib
            + self.reserve_gib
        )


class Estimate(Spec):
    """A scored layout: step time with its breakdown, throughput, MFU, and memory per stage."""

    layout: Layout
    num_microbatches: PositiveInt
    step_time_s: float
    tokens_per_s_per_gpu: float
    mfu: float = Field(description="model FLOPs (6N + causal attention, no recompute) / peak")
    peak_memory_gib: float
    usable_memory_gib: float
    fits_in_memory: bool
    breakdown_s: dict[str, float] = Field(description="exposed seconds per step by term")
    comm_total_s: dict[str, float] = Field(description="link-busy seconds per step by axis")
    tier_busy_s: dict[str, float] = Field(
        default_factory=dict,
        description="seconds per step each link tier is busy with every flow crossing it "
        "(the slowest stage's GPUs); never more than step_time_s",
    )
    stage_memory: tuple[StageMemory, ...]
    placement: dict[str, dict[str, int]] = Field(description="axis -> tier name -> factor")
    memory_validated: bool = Field(
        False,
        description="a measured run covers this configuration's memory accounting (framework "
        "x recompute mode x interleaving x MoE; cost_models.memory.memory_validated)",
    )
    kernels: dict | None = Field(
        None,
        description="the cluster's kernel table and, per compute term, how many look-ups were "
        "measured / interpolated / extrapolated (cost_models.kernels); None: no table",
    )
    attention: dict | None = Field(
        None,
        description="sliding-window attention as priced: the window, which layers use it, and "
        "where the windowed layers' time came from (kernel table row or FLOP ratio; "
        "cost_models.compute.attention_report); None: every layer full attention",
    )
    attention_speed: dict | None = Field(
        None,
        description="the attention passes priced at the GPU's measured speed relative to its "
        "generation's flagship (GpuSpec.attention_speed_vs_flagship): forward, backward (x the "
        "flagship's), each pass's basis (measured / assumption) and why; None: the datasheet "
        "peak ratio (or the cluster's own calibrated attention_efficiency) prices both",
    )
    offload: dict | None = Field(
        None,
        description="CPU activation offloading as priced: layers, host_link_gb_per_s, "
        "host_link_busy_s (the copies' seconds per step on the host link) and exposed_s (the "
        "compute stream's waits for them per step, inside breakdown_s compute; "
        "stage.offload_exposed_s); None: no offloading",
    )
    dp_exposure: dict | None = Field(
        None,
        description="breakdown_s dp_comm by cause, of the pipeline stage that sets it "
        "(cost_models.stage.stage_dp_parts): stage, beyond_overlap_window_s (traffic past the "
        "backward / forward / pipeline bubble it runs beside), last_gradient_bucket_s and "
        "first_parameter_bucket_s (the edge buckets nothing hides beyond that: "
        "stage.dp_edge_buckets_s), compute_slowed_beside_nccl_s (calibration."
        "overlap_slowdown_s on the hidden rest) and link_busy_s; None: nothing exposed",
    )
    step_tail: dict | None = Field(
        None,
        description="breakdown_s optimizer, of the pipeline stage that sets it: stage, "
        "optimizer_s (the term), grad_zeroing_s and grad_zeroing_gb (the step's gradient memset, "
        "Workload.grad_zeroing: stage.grad_zero_bytes at the HBM figure) and optimizer_step_s "
        "(the rest: norm, clip and Adam over the rank's shard, stage.stage_optimizer_s); None: "
        "no tail",
    )
    moe_routing: dict | None = Field(
        None,
        description="a MoE model's routed rows as priced (cost_models.compute.moe_routing): "
        "busiest_rank_over_mean (the expert GEMMs and the EP all-to-all run at the busiest EP "
        "rank's rows), basis (a compute.MOE_ROUTING_BASES key) and why (its reading); None: "
        "a dense model",
    )
    layers_per_stage: tuple[int, ...] | None = Field(
        None,
        description="layers per model chunk (pp*vp, chunk c on rank c % pp) when the plan "
        "uses its own split; None: the cost model's even split (pipeline.chunk_layer_counts)",
    )

    @property
    def global_batch_seqs(self) -> int:
        """The global batch (sequences) this step ran: num_microbatches micro-batches of
        micro_batch sequences on each of dp replicas (the inverse of pipeline.num_microbatches). With a global batch range each plan has its own."""
        return self.num_microbatches * self.layout.micro_batch * self.layout.dp
