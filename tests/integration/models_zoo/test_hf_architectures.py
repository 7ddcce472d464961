"""Hugging Face configs of the common architectures read faithfully (issue 20): gating and tying
by architecture, names from `_name_or_path` or the file, unsupported architectures refused."""

from __future__ import annotations

import json

import pytest

from cost_models import InvalidInput, params
from models_zoo import load_model
from planner.cli import main

GEMMA2_9B = {  # google/gemma-2-9b config.json (no tie_word_embeddings key: Gemma2Config ties)
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 256000,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
}
GEMMA3_4B = {  # google/gemma-3-4b-it: the language model sits in text_config
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "num_hidden_layers": 34,
        "vocab_size": 262208,
        "hidden_activation": "gelu_pytorch_tanh",
    },
}
GPT_OSS_120B = {
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_hidden_layers": 36,
    "num_local_experts": 128,
    "experts_per_token": 4,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "tie_word_embeddings": False,
    "swiglu_limit": 7.0,
}
PHI3_MINI = {
    "_name_or_path": "microsoft/Phi-3-mini-4k-instruct",
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_hidden_layers": 32,
    "vocab_size": 32064,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}


def write(tmp_path, data, folder="model", name="config.json"):
    path = tmp_path / folder / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return str(path)


def test_gemma2_9b_is_gated_tied_and_has_9_24b_params(tmp_path):
    m = load_model(write(tmp_path, GEMMA2_9B, folder="gemma-2-9b"))
    assert m.gated_mlp and m.tied_embeddings
    assert m.name == "gemma-2-9b"  # the checkpoint folder, not model_type "gemma2"
    assert params.total_params(m) / 1e9 == pytest.approx(9.24, abs=0.01)


def test_gemma3_reads_its_text_config(tmp_path):
    m = load_model(write(tmp_path, GEMMA3_4B, folder="gemma-3-4b-it"))
    assert m.gated_mlp and m.tied_embeddings and m.num_layers == 34
    assert params.total_params(m) / 1e9 == pytest.approx(3.88, abs=0.01)  # without vision


def test_gpt_oss_and_phi3(tmp_path):
    oss = load_model(write(tmp_path, GPT_OSS_120B, name="gpt-oss-120b.json"))
    assert oss.name == "gpt-oss-120b" and oss.ffn_hidden_size is None
    assert params.total_params(oss) / 1e9 == pytest.approx(116.8, rel=0.01)  # model card
    # GptOssExperts' clamped SwiGLU, whatever hidden_act says: the shipped preset's model
    assert (oss.mlp_activation, oss.glu_linear_offset, oss.activation_clamp) == ("quick_gelu", 1.0, 7.0)
    preset = load_model("gpt-oss-120b")
    assert (preset.mlp_activation, preset.glu_linear_offset, preset.activation_clamp) == (
        "quick_gelu", 1.0, 7.0,
    )
    phi = load_model(write(tmp_path, PHI3_MINI))
    assert phi.name == "microsoft/Phi-3-mini-4k-instruct" and phi.gated_mlp
    assert params.total_params(phi) / 1e9 == pytest.approx(3.82, abs=0.01)


def test_explicit_tie_field_wins(tmp_path):
    m = load_model(write(tmp_path, {**GEMMA2_9B, "tie_word_embeddings": False}))
    assert not m.tied_embeddings


def test_unsupported_architecture_is_refused_by_name(tmp_path, capsys):
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 12,
            "num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
            "vocab_size": 50257}  # fmt: skip
    with pytest.raises(InvalidInput, match=r"unsupported .*model_type 'gpt2' \(GPT2LMHeadModel\)"):
        load_model(write(tmp_path, gpt2))
    argv = ["plan", "--model", write(tmp_path, gpt2), "--cluster", "dgx-h100", "--gpus", "8"]
    assert main(argv) == 2
    assert "unsupported Hugging Face architecture model_type 'gpt2'" in capsys.readouterr().err


def test_reports_and_json_carry_parameter_counts(tmp_path, capsys):
    path = write(tmp_path, GEMMA2_9B, folder="gemma-2-9b")
    base = ["--model", path, "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "8"]
    assert main(["plan", *base, "--json", "--top", "1"]) == 0
    inputs = json.loads(capsys.readouterr().out)["inputs"]
    assert inputs["model"] == "gemma-2-9b"
    assert inputs["params_total"] == inputs["params_active"] == 9_241_404_928
    assert main(["estimate", *base, "--tp", "8", "--pp", "1", "--dp", "1", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["params_total"] == 9_241_404_928
    assert main(["estimate", *base, "--tp", "8", "--pp", "1", "--dp", "1"]) == 0
    assert "gemma-2-9b (9.2B params)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("folder", "config", "total_b"),
    [
        (  # q_lora_rank null (V2-Lite): MLA without the query low-rank; model card 15.7B
            "DeepSeek-V2-Lite",
            {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
             "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
             "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
             "v_head_dim": 128, "moe_intermediate_size": 1408, "intermediate_size": 10944,
             "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
             "first_k_dense_replace": 1, "vocab_size": 102400},
            15.7,
        ),
        (
            "Mistral-7B-v0.1",
            {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
             "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
             "vocab_size": 32000},
            7.24,
        ),
        (  # tied explicitly in the config (the small Qwen2.5 models); model card 0.49B
            "Qwen2.5-0.5B",
            {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
             "num_attention_heads": 14, "num_key_value_heads": 2, "num_hidden_layers": 24,
             "vocab_size": 151936, "tie_word_embeddings": True},
            0.49,
        ),
    ],
)  # fmt: skip
def test_more_architectures_match_their_model_cards(tmp_path, folder, config, total_b):
    m = load_model(write(tmp_path, config, folder=folder))
    assert m.name == folder and m.gated_mlp
    assert params.total_params(m) / 1e9 == pytest.approx(total_b, rel=0.01)
