"""Hugging Face ``config.json`` -> ModelSpec, for the Llama, Qwen, Mixtral and DeepSeek-V3 styles.

Key names are those of the transformers configuration classes (LlamaConfig, Qwen2Config,
Qwen3MoeConfig, MixtralConfig, DeepseekV3Config, GptOssConfig).
"""

from __future__ import annotations

from typing import Any

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
    if not shared and data.get("shared_expert_intermediate_size"):
        shared = 1  # Qwen2-MoE: one shared expert of its own width (approximated by expert width)
    first_dense = data.get("first_k_dense_replace") or 0
    return {
        "num_experts": num_experts,
        "top_k": top_k,
        "expert_ffn_hidden_size": expert_ffn,
        "num_shared_experts": shared,
        "first_k_dense_layers": first_dense,
    }


def model_from_hf_config(data: dict[str, Any], where: str = "config.json") -> ModelSpec:
    """Translate one HF config dict; a missing required key is an InvalidInput naming it."""
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
        "name": data.get("_name_or_path") or data.get("model_type") or "hf-model",
        "num_layers": data["num_hidden_layers"],
        "hidden_size": data["hidden_size"],
        "ffn_hidden_size": dense_ffn,
        "num_attention_heads": data["num_attention_heads"],
        "num_kv_heads": data.get("num_key_value_heads"),
        "head_dim": data.get("head_dim"),
        "vocab_size": data["vocab_size"],
        "gated_mlp": data.get("hidden_act", "silu") in ("silu", "swiglu", "swish"),
        "mla": mla,
        "moe": moe,
        "tied_embeddings": bool(data.get("tie_word_embeddings", False)),
        "source": where,
    }
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
    "moe.num_experts": "n_routed_experts / num_local_experts / num_experts",
    "moe.top_k": "num_experts_per_tok",
    "moe.expert_ffn_hidden_size": "moe_intermediate_size",
    "moe.num_shared_experts": "n_shared_experts",
    "moe.first_k_dense_layers": "first_k_dense_replace",
    **{f"mla.{k}": k for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim")},
    **{f"mla.{k}": k for k in ("qk_rope_head_dim", "v_head_dim")},
}
