"""Sliding-window layers read from Hugging Face config.json fields (issue 32, item 5): the window
and which layers use it are data (sliding_window, layer_types, sliding_window_pattern,
use_sliding_window / max_window_layers), as transformers' configuration classes build them,
and the Megatron export carries them."""

from __future__ import annotations

import pytest

from cost_models import InvalidInput
from cost_models.compute import windowed_layers
from cost_models.specs import Workload
from models_zoo.hf import model_from_hf_config
from planner.export.launch import megatron_model_args

BASE = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}


def read(**fields):
    return model_from_hf_config({**BASE, **fields}, "t/config.json")


def test_mistral_windows_every_layer():
    # mistralai/Mistral-7B-v0.1 config.json: "sliding_window": 4096
    m = read(model_type="mistral", num_hidden_layers=32, sliding_window=4096)
    assert (m.sliding_window, m.full_attention_every) == (4096, None)
    assert windowed_layers(m) == tuple(range(32))
    assert read(model_type="mistral", num_hidden_layers=32, sliding_window=None).sliding_window is None


def test_gpt_oss_layer_types_alternate():
    # openai/gpt-oss-120b config.json: "sliding_window": 128, "layer_types" sliding, full, ...
    types = ["sliding_attention", "full_attention"] * 18
    m = read(model_type="gpt_oss", num_hidden_layers=36, sliding_window=128, layer_types=types,
             num_local_experts=128, num_experts_per_tok=4, head_dim=64)
    assert (m.sliding_window, m.full_attention_every) == (128, 2)
    assert windowed_layers(m) == tuple(range(0, 36, 2))


def test_gemma2_alternates_without_layer_types():
    # google/gemma-2-9b config.json: "sliding_window": 4096, no layer_types (Gemma2Config:
    # sliding when (i + 1) % 2)
    m = read(model_type="gemma2", num_hidden_layers=42, sliding_window=4096, head_dim=256)
    assert (m.sliding_window, m.full_attention_every) == (4096, 2)


def test_gemma3_five_local_one_global():
    # google/gemma-3-27b-pt text_config: "sliding_window": 1024, "sliding_window_pattern": 6
    m = read(model_type="gemma3_text", num_hidden_layers=62, sliding_window=1024,
             sliding_window_pattern=6, head_dim=128)
    assert (m.sliding_window, m.full_attention_every) == (1024, 6)
    assert len(windowed_layers(m)) == 62 - 10


@pytest.mark.parametrize(
    ("use", "first", "expected"),
    [(False, 0, None), (True, 0, 4096), (True, 24, None)],
)
def test_qwen2_use_sliding_window_and_max_window_layers(use, first, expected):
    # Qwen2Config: layers i >= max_window_layers are windowed, only with use_sliding_window
    m = read(model_type="qwen2", num_hidden_layers=24, sliding_window=4096,
             use_sliding_window=use, max_window_layers=first)
    assert m.sliding_window == expected


def test_a_pattern_the_model_cannot_hold_is_refused_by_field():
    with pytest.raises(InvalidInput, match="layer_types .or max_window_layers."):
        read(model_type="qwen2", num_hidden_layers=24, sliding_window=4096,
             use_sliding_window=True, max_window_layers=12)


def test_megatron_export_carries_the_window_and_the_pattern():
    w = Workload(seq_len=8192, global_batch_seqs=8)
    mistral = read(model_type="mistral", num_hidden_layers=32, sliding_window=4096)
    args = megatron_model_args(mistral, w)
    assert args[args.index("--window-size") + 1] == "4095,0"
    assert "--window-attn-skip-freq" not in args
    types = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)]
    local_global = read(model_type="mistral", num_hidden_layers=32, sliding_window=4096,
                        layer_types=types)
    args = megatron_model_args(local_global, w)
    assert args[args.index("--window-attn-skip-freq") + 1] == "4"
