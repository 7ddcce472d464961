"""Hugging Face config.json loading (files the tests write themselves)."""

import json

import pytest

from cost_models import InvalidInput, params
from models_zoo import load_model
from planner.cli import main

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}


def write(tmp_path, data):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_llama3_config(tmp_path):
    m = load_model(write(tmp_path, LLAMA3_8B))
    assert (m.num_layers, m.kv_heads, m.ffn_hidden_size, m.gated_mlp) == (32, 8, 14336, True)
    assert params.total_params(m) == 8_030_261_248


def test_deepseek_v3_config(tmp_path):
    m = load_model(write(tmp_path, DEEPSEEK_V3))
    assert m.mla is not None and m.mla.kv_lora_rank == 512
    assert m.moe is not None and (m.moe.num_experts, m.moe.top_k, m.moe.first_k_dense_layers) == (
        256,
        8,
        3,
    )
    assert params.total_params(m) / 1e9 == pytest.approx(671, rel=0.01)
    assert params.total_params(m, active_only=True) / 1e9 == pytest.approx(37, rel=0.03)


def test_deepseek_v3_mtp_modules_are_read(tmp_path):
    """num_nextn_predict_layers (DeepSeek-V3's config.json: 1) is the MTP depth trained; it adds
    no parameter to the served model's count (671B, the card's, without the 14B MTP module)."""
    m = load_model(write(tmp_path, {**DEEPSEEK_V3, "num_nextn_predict_layers": 1}))
    assert m.mtp_num_layers == 1
    assert load_model(write(tmp_path, DEEPSEEK_V3)).mtp_num_layers == 0
    assert params.total_params(m) / 1e9 == pytest.approx(671, rel=0.01)


def test_hf_config_negative_mtp_depth_names_the_key(tmp_path):
    with pytest.raises(InvalidInput, match="num_nextn_predict_layers"):
        load_model(write(tmp_path, {**DEEPSEEK_V3, "num_nextn_predict_layers": -1}))


def test_mixtral_style_config_has_no_dense_ffn(tmp_path):
    cfg = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
    }
    m = load_model(write(tmp_path, cfg))
    assert m.ffn_hidden_size is None and m.moe.expert_ffn_hidden_size == 14336
    assert params.total_params(m) / 1e9 == pytest.approx(46.7, rel=0.01)


def test_hf_config_missing_key(tmp_path):
    cfg = {k: v for k, v in LLAMA3_8B.items() if k != "hidden_size"}
    with pytest.raises(InvalidInput, match="lacks required key.*hidden_size"):
        load_model(write(tmp_path, cfg))


def test_hf_config_through_cli(tmp_path, capsys):
    path = write(tmp_path, DEEPSEEK_V3)
    code = main(
        [
            "estimate",
            "--model",
            path,
            "--cluster",
            "h800",
            "--gpus",
            "256",
            "--global-batch",
            "1024",
            "--tp",
            "1",
            "--pp",
            "16",
            "--dp",
            "16",
            "--ep",
            "16",
            "--recompute",
            "full",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["tokens_per_s_per_gpu"] > 0


def test_qwen3_moe_config(tmp_path):
    cfg = {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    }
    m = load_model(write(tmp_path, cfg))
    assert m.moe.num_experts == 128 and m.moe.expert_ffn_hidden_size == 768 and m.head_dim == 128
    assert params.total_params(m) / 1e9 == pytest.approx(30.5, rel=0.01)
