"""The fifth held-out source: Megatron-LM's README scaling tables (bench/heldout/make_megatron_readme_summary.py).

Evaluation data only; these tests keep the committed file what the converter says it is: every
record passes the schema, every measured figure is the table's TFLOP/s over the source's own FLOPs
per token, the launch script's layout is read as Megatron-LM ran it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from factories import load_script

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "heldout"
SUMMARY = HELDOUT / "megatron_readme_summary.yaml"


@pytest.fixture(scope="module")
def conv():
    return load_script(HELDOUT / "make_megatron_readme_summary.py")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(SUMMARY.read_text())


def test_every_record_passes_the_schema_and_scores(records: list[dict]) -> None:
    from planner.validate import RunRecord, validate_record

    assert [r["id"] for r in records] == [
        "megatron2021-readme-a100-gpt-18b", "megatron2021-readme-a100-gpt-39b",
        "megatron2021-readme-a100-gpt-145b", "megatron2021-readme-a100-gpt-310b",
        "mcore2024-readme-h100-gpt-16b", "mcore2024-readme-h100-gpt-32b",
        "mcore2024-readme-h100-gpt-119b", "mcore2024-readme-h100-gpt-462b",
    ]  # fmt: skip
    for r in records:
        RunRecord.model_validate(r)
        assert validate_record(r).tokens_error_pct is not None, r["id"]


def test_measured_tokens_are_the_tables_tflops_over_the_sources_formula(records: list[dict]) -> None:
    """18B (SC21 Table 1): 135 TFLOP/s over 96 l h^2 (1 + s/6h + V/16lh), by hand; 32B (2024):
    459.6 TFLOP/s over Megatron-Core's 12 l h^2 (2 + s/h + ffn/h + V/2lh)."""
    by_id = {r["id"]: r for r in records}
    l, h, s, v = 40, 6144, 2048, 51200
    assert by_id["megatron2021-readme-a100-gpt-18b"]["measured_tokens_per_s_per_gpu"] == round(
        135e12 / (96 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))), 1
    )
    l, h, s, v = 48, 7168, 4096, 131072
    assert by_id["mcore2024-readme-h100-gpt-32b"]["measured_tokens_per_s_per_gpu"] == round(
        459.6e12 / (12 * l * h * h * (2 + s / h + 4 + v / (2 * l * h))), 1
    )


def test_sc21_layout_from_the_launch_script(conv, records: list[dict]) -> None:
    """run_table_1.sh's blocks by model size; vp from --num-layers-per-virtual-pipeline-stage
    (80 layers / PP 8 / 5 per virtual stage = 2); full recompute from --checkpoint-activations;
    Megatron's vocabulary padding (128 x TP); unfused attention and dropout of 2021's Megatron-LM."""
    script = '''
if [ ${MODEL_SIZE} == "18B" ]; then
    TP=8
    PP=1
    MBS=8
    MEGATRON_EXTRA_PARAMS="--checkpoint-activations "
elif [ ${MODEL_SIZE} == "145B" ]; then
    TP=8
    PP=8
    MEGATRON_EXTRA_PARAMS="--checkpoint-activations --num-layers-per-virtual-pipeline-stage 5 "
else
    echo "Invalid configuration"
fi
'''
    got = conv.sc21_configs(script)
    assert got["18B"] == {"TP": "8", "PP": "1", "MBS": "8", "MEGATRON_EXTRA_PARAMS": "--checkpoint-activations "}
    assert "--num-layers-per-virtual-pipeline-stage 5" in got["145B"]["MEGATRON_EXTRA_PARAMS"]
    assert conv.padded_vocab(50257, 8) == 51200 and conv.padded_vocab(50257, 1) == 50304
    by_id = {r["id"]: r for r in records}
    big = by_id["megatron2021-readme-a100-gpt-145b"]
    assert (big["layout"]["vp"], big["layout"]["micro_batch"], big["layout"]["recompute"]) == (2, 2, "full")
    for r in records:
        if r["id"].startswith("megatron2021"):
            assert r["settings"] == {"attention_kernel": "unfused"} and r["model"]["hidden_dropout"] is True
            assert r["layout"]["precision"] == "fp16" and r["model"]["vocab_size"] == 51200
        else:  # the 2024 table states neither micro-batch nor virtual pipeline size
            assert r["layout"]["vp"] is None and r["layout"]["micro_batch"] is None
            assert r["settings"] == {"tp_comm_overlap": True}


def test_a_transcription_error_is_refused(conv) -> None:
    """The converter's own checks: the aggregate column and the percentage of peak must follow
    from TFLOP/s x GPUs (within the tables' rounding)."""
    row = {"model_size": "18B", "tflops_per_gpu": 135, "num_gpus": 256, "aggregate_pflops": 34.6, "pct_of_peak": 43}
    conv._check_rates(row, "a100-sxm-80gb", "18B")
    with pytest.raises(SystemExit, match="PFLOP/s"):
        conv._check_rates({**row, "aggregate_pflops": 36.0}, "a100-sxm-80gb", "18B")
    with pytest.raises(SystemExit, match="%"):
        conv._check_rates({**row, "pct_of_peak": 47}, "a100-sxm-80gb", "18B")
