"""Hugging Face ``config.json`` -> ModelSpec for the architectures in ARCHITECTURES.

Key names are those of the transformers configuration classes (LlamaConfig, MistralConfig,
MixtralConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig, Gemma2Config, Gemma3TextConfig,
DeepseekV2Config, DeepseekV3Config, GptOssConfig, Phi3Config). An architecture not in the table
is refused by name rather than guessed at (issue 20: a Gemma-2 read as a non-gated, untied model
lost 1.2B of its 9.24B parameters).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple


class Architecture(NamedTuple):
    family: str
    tied_by_default: bool
    """`tie_word_embeddings` when the config omits it: the config class's own default."""


# model_type -> how transformers builds it. Every one of these MLPs is gated (gate_proj * act(up)
# then down_proj: LlamaMLP, MistralMLP, Qwen2MLP, Qwen3MLP, GemmaMLP / Gemma2MLP / Gemma3MLP with
# gelu_pytorch_tanh, DeepseekV3MLP, Phi3MLP's fused gate_up_proj, GptOssExperts' clamped SwiGLU,
# MixtralBlockSparseTop2MLP w1/w3/w2), whatever the activation's name (hidden_act or Gemma's
# hidden_activation), so gating follows the architecture, not the activation string.
# Tied defaults: PretrainedConfig defaults to True, but LlamaConfig, MistralConfig,
# MixtralConfig, Qwen2/3(-MoE)Config, DeepseekV2/V3Config, GptOssConfig and Phi3Config pass
# tie_word_embeddings=False; GemmaConfig, Gemma2Config and Gemma3TextConfig pass True.
ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture("Llama", False),
    "mistral": Architecture("Mistral", False),
    "mixtral": Architecture("Mixtral", False),
    "qwen2": Architecture("Qwen2 / Qwen2.5", False),
    "qwen2_moe": Architecture("Qwen2-MoE", False),
    "qwen3": Architecture("Qwen3", False),
    "qwen3_moe": Architecture("Qwen3-MoE", False),
    "gemma": Architecture("Gemma", True),
    "gemma2": Architecture("Gemma 2", True),
    "gemma3_text": Architecture("Gemma 3", True),
    "deepseek_v2": Architecture("DeepSeek-V2", False),
    "deepseek_v3": Architecture("DeepSeek-V3", False),
    "gpt_oss": Architecture("gpt-oss", False),
    "phi3": Architecture("Phi-3", False),
    "phimoe": Architecture("Phi-3.5-MoE", False),
}
MULTIMODAL_WRAPPERS = {"gemma3": "gemma3_text"}
"""model_types whose language model sits in `text_config` (Gemma3ForConditionalGeneration);
the planner plans that language model (the vision tower is not counted)."""

from pydantic import ValidationError

from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import ModelSpec

_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


def is_hf_config(data: dict[str, Any]) -> bool:
    """HF configs carry `model_type` or `num_hidden_layers`; our schema has neither."""
    return "model_type" in data or "num_hidden_layers" in data


def _moe(data: dict[str, Any]) -> dict[str, Any] | None:
    num_experts = (
        data.get("n_routed_experts") or data.get("num_local_experts") or data.get("num_experts")
    )
    if not num_experts:
        return None
    top_k = data.get("num_experts_per_tok") or data.get("experts_per_token")
    expert_ffn = data.get("moe_intermediate_size") or data.get("intermediate_size")
    shared = data.get("n_shared_experts") or 0
    shared_width = data.get("shared_expert_intermediate_size")
    if not shared and shared_width and expert_ffn:
        # Qwen2-MoE: one shared expert of its own width, counted as that many expert widths
        # (same parameters and FLOPs: 5632 = 4 x 1408 for Qwen1.5-MoE-A2.7B).
        shared = max(1, round(shared_width / expert_ffn))
    first_dense = data.get("first_k_dense_replace") or 0
    return {
        "num_experts": num_experts,
        "top_k": top_k,
        "expert_ffn_hidden_size": expert_ffn,
        "num_shared_experts": shared,
        "first_k_dense_layers": first_dense,
        **_router(data),
    }


def _router(data: dict[str, Any]) -> dict[str, Any]:
    """Router settings: DeepseekV3TopkRouter (sigmoid scores, e_score_correction_bias when
    topk_method is noaux_tc, group-limited top-k, routed_scaling_factor); norm_topk_prob false
    (Qwen2-MoE, DeepSeek-V2: softmax over all experts, weights not renormalised); Qwen2-MoE's
    shared_expert_gate. Defaults are the config classes' own."""
    model_type = data.get("model_type")
    out: dict[str, Any] = {}
    if data.get("scoring_func", "softmax") == "sigmoid":
        out["router_score_function"] = "sigmoid"
    norm_default = model_type not in ("qwen2_moe", "deepseek_v2")
    if out.get("router_score_function") != "sigmoid" and not data.get(
        "norm_topk_prob", norm_default
    ):
        out["router_pre_softmax"] = True
    scale = data.get("routed_scaling_factor")
    if scale and scale != 1.0:
        out["router_topk_scaling_factor"] = scale
    if data.get("topk_method") == "noaux_tc":
        out["router_expert_bias"] = True
    if (data.get("n_group") or 1) > 1:
        out["router_num_groups"] = data["n_group"]
        out["router_group_topk"] = data.get("topk_group")
    if model_type == "qwen2_moe":
        out["shared_expert_gate"] = True  # Qwen2MoeSparseMoeBlock.shared_expert_gate
    return out


# Transformers' attention modules that put biases on q/k/v only (Qwen2Attention: bias=True).
QKV_BIAS_TYPES = {"qwen2", "qwen2_moe"}
# Per-head q/k RMSNorm (Qwen3Attention q_norm/k_norm, Gemma3Attention).
QK_NORM_TYPES = {"qwen3", "qwen3_moe", "gemma3_text"}


def _attention_fields(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Biases, q/k norm, sinks and sliding window (transformers' *Attention modules)."""
    model_type = data.get("model_type")
    out: dict[str, Any] = {
        "qkv_bias": model_type in QKV_BIAS_TYPES,
        "qk_norm": model_type in QK_NORM_TYPES,
    }
    if model_type == "gpt_oss":
        # GptOssAttention: biased q/k/v/o and sinks; GptOssExperts: biased experts.
        out.update(linear_bias=True, attention_sinks=True)
    elif data.get("attention_bias") or data.get("mlp_bias"):
        raise InvalidInput(
            f"{where}: attention_bias / mlp_bias (biases on some linear layers only) is not "
            "modelled: the planner's models have biases everywhere (linear_bias) or on q/k/v only"
        )
    out.update(_sliding_window(data, where))
    return out


QWEN_SWA_TYPES = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
"""Configs whose sliding window is on only with use_sliding_window, on the layers from
max_window_layers up (transformers Qwen2Config: layer_types = "sliding_attention" if
sliding_window is not None and i >= max_window_layers)."""


def _layer_types(data: dict[str, Any]) -> list[Any] | None:
    """Each layer's attention as transformers' config builds it: `layer_types` when the file
    lists it, else the model type's default rule (Gemma2Config: sliding when (i + 1) % 2;
    Gemma3TextConfig: sliding when (i + 1) % sliding_window_pattern, default 6; Qwen2Config:
    sliding from max_window_layers up, default 28); None: every layer alike."""
    types = data.get("layer_types")
    if types:
        return list(types)
    model_type, n = data.get("model_type"), data.get("num_hidden_layers") or 0
    if model_type == "gemma2":
        every = 2
    elif model_type == "gemma3_text":
        every = data.get("sliding_window_pattern") or 6
    elif model_type in QWEN_SWA_TYPES:
        first = data.get("max_window_layers", 28)
        return ["sliding_attention" if i >= first else "full_attention" for i in range(n)]
    else:
        return None
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]


def _sliding_window(data: dict[str, Any], where: str) -> dict[str, Any]:
    """sliding_window and which layers use it (_layer_types): every layer (Mistral v0.1,
    Phi-3), none, or N-1 windowed layers then one full, repeated (gpt-oss and Gemma 2: N = 2;
    Gemma 3: N = 6), as ModelSpec.full_attention_every."""
    window = data.get("sliding_window")
    if not window or (data.get("model_type") in QWEN_SWA_TYPES
                      and not data.get("use_sliding_window")):
        return {}
    types = _layer_types(data)
    if not types or all(t == "sliding_attention" for t in types):
        return {"sliding_window": window}
    if "sliding_attention" not in types:
        return {}
    every = types.index("full_attention") + 1
    expected = ["full_attention" if (i + 1) % every == 0 else "sliding_attention"
                for i in range(len(types))]
    if types != expected:
        raise InvalidInput(
            f"{where}: layer_types (or max_window_layers): only every layer windowed, or N-1 "
            "sliding-window layers then one full layer, repeated, is modelled (got "
            f"{types.count('sliding_attention')} sliding and {types.count('full_attention')} "
            "full layers in another order)"
        )
    return {"sliding_window": window, "full_attention_every": every}


def _rope_fields(data: dict[str, Any], where: str) -> dict[str, Any]:
    """rope_theta, partial rotary and rope_scaling (transformers modeling_rope_utils)."""
    out: dict[str, Any] = {}
    theta = data.get("rope_theta")
    if theta is None and isinstance(data.get("rope_parameters"), dict):
        theta = data["rope_parameters"].get("rope_theta")
    if theta is not None:
        out["rotary_base"] = theta
    if data.get("partial_rotary_factor"):
        out["rotary_percent"] = data["partial_rotary_factor"]
    scaling = data.get("rope_scaling")
    if isinstance(scaling, dict):
        kind = scaling.get("rope_type") or scaling.get("type")
        if kind not in (None, "default"):
            keys = ("factor", "original_max_position_embeddings", "low_freq_factor",
                    "high_freq_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                    "truncate")
            out["rope_scaling"] = {"type": kind} | {
                k: scaling[k] for k in keys if scaling.get(k) is not None
            }
            if kind == "yarn" and "original_max_position_embeddings" not in out["rope_scaling"]:
                original = data.get("original_max_position_embeddings")
                if original:
                    out["rope_scaling"]["original_max_position_embeddings"] = original
    return out


def _model_name(data: dict[str, Any], where: str) -> str:
    """`_name_or_path` when the file has one, else the file's name (its folder's for a file
    called config.json, as a downloaded checkpoint is laid out), never the bare model_type."""
    if data.get("_name_or_path"):
        return str(data["_name_or_path"])
    path = Path(where)
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem or "hf-model"


def _model_type(data: dict[str, Any], where: str) -> str | None:
    """The config's model_type: a string or absent (issue 19: a list or mapping is bad input)."""
    value = data.get("model_type")
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{where}: model_type: must be a string (got {type(value).__name__})")
    return value


def _architecture(data: dict[str, Any], where: str) -> tuple[Architecture, dict[str, Any]]:
    """The table entry for the config's model_type and the dict that holds the language model."""
    model_type = _model_type(data, where)
    if model_type in MULTIMODAL_WRAPPERS and isinstance(data.get("text_config"), dict):
        text = {"_name_or_path": data.get("_name_or_path"), **data["text_config"]}
        model_type = _model_type(text, f"{where}: text_config") or MULTIMODAL_WRAPPERS[model_type]
        data = text
    supported = ", ".join(sorted(ARCHITECTURES))
    if model_type is None:
        raise InvalidInput(
            f"{where}: Hugging Face config has no model_type, so its architecture is unknown "
            f"(supported model_type: {supported})"
        )
    if model_type not in ARCHITECTURES:
        archs = data.get("architectures")
        arch = ", ".join(str(a) for a in archs) if isinstance(archs, list) and archs else "?"
        raise InvalidInput(
            f"{where}: unsupported Hugging Face architecture model_type {model_type!r} ({arch}); "
            f"supported: {supported}"
        )
    return ARCHITECTURES[model_type], data


def model_from_hf_config(data: dict[str, Any], where: str = "config.json") -> ModelSpec:
    """Translate one HF config dict; a missing required key is an InvalidInput naming it."""
    name = _model_name(data, where)
    arch, data = _architecture(data, where)
    if data.get("model_type") == "qwen3_moe" and (
        data.get("mlp_only_layers") or (data.get("decoder_sparse_step") or 1) > 1
    ):
        raise InvalidInput(
            f"{where}: Qwen3-MoE with dense layers between MoE layers (mlp_only_layers / "
            "decoder_sparse_step > 1) is not supported: only leading dense layers are modelled"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise InvalidInput(
            f"{where}: Hugging Face config lacks required key(s) {', '.join(missing)}"
        )
    moe = _moe(data)
    mla = None
    if data.get("kv_lora_rank"):
        mla = {
            "q_lora_rank": data.get("q_lora_rank"),
            "kv_lora_rank": data["kv_lora_rank"],
            "qk_nope_head_dim": data.get("qk_nope_head_dim", 128),
            "qk_rope_head_dim": data.get("qk_rope_head_dim", 64),
            "v_head_dim": data.get("v_head_dim", 128),
        }
    # Mixtral-style configs reuse intermediate_size for the experts and have no dense layers.
    dense_ffn = data.get("intermediate_size")
    if (
        moe is not None
        and not moe["first_k_dense_layers"]
        and not data.get("moe_intermediate_size")
    ):
        dense_ffn = None
    fields = {
        "name": name,
        "num_layers": data["num_hidden_layers"],
        "hidden_size": data["hidden_size"],
        "ffn_hidden_size": dense_ffn,
        "num_attention_heads": data["num_attention_heads"],
        "num_kv_heads": data.get("num_key_value_heads"),
        "head_dim": data.get("head_dim"),
        "vocab_size": data["vocab_size"],
        "gated_mlp": True,  # every architecture in ARCHITECTURES (see there)
        "mla": mla,
        "moe": moe,
        "tied_embeddings": bool(data.get("tie_word_embeddings", arch.tied_by_default)),
        "norm_eps": data.get("rms_norm_eps") or data.get("layer_norm_eps") or 1e-6,
        # DeepseekV3Config / Glm4MoeConfig: the MTP modules trained beside the model (their
        # weights ship in the checkpoint as layers num_hidden_layers ..)
        "mtp_num_layers": data.get("num_nextn_predict_layers") or 0,
        **_attention_fields(data, where),
        **_rope_fields(data, where),
        "source": f"{where} (Hugging Face config, {arch.family})",
    }
    act = data.get("hidden_activation") or data.get("hidden_act") or "silu"
    if act in ("gelu_pytorch_tanh", "gelu_new"):
        fields["activation"] = "gelu_tanh"
    elif act == "gelu":
        fields["activation"] = "gelu"
    if data.get("model_type") == "gpt_oss":
        # GptOssExperts (transformers models/gpt_oss/modeling_gpt_oss.py) ignores hidden_act:
        # gate clamped to <= swiglu_limit, up to [-limit, limit], gate * sigmoid(1.702 gate)
        # * (up + 1), i.e. Megatron's quick_geglu with glu_linear_offset 1 and
        # activation_func_clamp_value limit (Megatron-Bridge GPTOSSBridge.provider_bridge).
        limit = data.get("swiglu_limit", 7.0)
        fields.update(activation="quick_gelu", glu_linear_offset=1.0, activation_clamp=limit)
    if mla is not None:
        fields["head_dim"] = None  # MLA head dims live in the mla block
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as err:
        raise InvalidInput(
            describe_validation_error(err, f"{where} (Hugging Face config)", HF_KEYS)
        ) from None


# ModelSpec field -> the config.json key it was read from (for messages).
HF_KEYS = {
    "name": "_name_or_path",
    "num_layers": "num_hidden_layers",
    "ffn_hidden_size": "intermediate_size",
    "num_kv_heads": "num_key_value_heads",
    "tied_embeddings": "tie_word_embeddings",
    "activation_clamp": "swiglu_limit",
    "moe.num_experts": "n_routed_experts / num_local_experts / num_experts",
    "moe.top_k": "num_experts_per_tok",
    "moe.expert_ffn_hidden_size": "moe_intermediate_size",
    "moe.num_shared_experts": "n_shared_experts",
    "moe.first_k_dense_layers": "first_k_dense_replace",
    "moe.router_topk_scaling_factor": "routed_scaling_factor",
    "moe.router_num_groups": "n_group",
    "moe.router_group_topk": "topk_group",
    "norm_eps": "rms_norm_eps",
    "rotary_base": "rope_theta",
    "rotary_percent": "partial_rotary_factor",
    "sliding_window": "sliding_window",
    "mtp_num_layers": "num_nextn_predict_layers",
    **{f"rope_scaling.{k}": f"rope_scaling.{k}" for k in ("type", "factor")},
    **{f"mla.{k}": k for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim")},
    **{f"mla.{k}": k for k in ("qk_rope_head_dim", "v_head_dim")},
}
