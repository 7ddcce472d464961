"""`planner validate` scores what it can and never crashes on a record it cannot score."""

import json

import pytest
import yaml
from conftest import SHARED

from planner.cli import main

RECORD = {
    "id": "toy-llama3-8b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 8,
    "gpus_per_node": 8,
    "interconnect": "NVLink (8 GPUs/host); backend RDMA 400 Gb/s per GPU",
    "model": {
        "name": "Llama 3 8B",
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 14336,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "head_dim": None,
        "vocab_size": 128256,
        "seq_len": 8192,
        "gated_mlp": True,
        "mla": False,
        "moe": None,
    },
    "layout": {
        "tp": 1,
        "pp": 1,
        "dp": 8,
        "cp": 1,
        "ep": 1,
        "vp": None,
        "sequence_parallel": False,
        "zero_stage": 3,
        "micro_batch": 1,
        "global_batch_seqs": 8,
        "recompute": "selective",
        "precision": "bf16",
    },
    "measured_tokens_per_s_per_gpu": 6000.0,
}


def run(tmp_path, records, capsys):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(records))
    code = main(["validate", "--data", str(path), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_scores_a_record(tmp_path, capsys):
    code, out = run(tmp_path, [RECORD], capsys)
    assert code == 0 and out[0]["error"] is None
    assert out[0]["id"] == "toy-llama3-8b" and out[0]["predicted_tokens_per_s_per_gpu"] > 0
    for key in ("predicted_step_time_s", "predicted_peak_memory_gib", "fits_in_memory", "mfu"):
        assert out[0][key] is not None


def test_unscorable_records_get_reasons(tmp_path, capsys):
    bad_gpu = {**RECORD, "id": "bad-gpu", "gpu": "tpu-v9"}
    bad_layout = {**RECORD, "id": "bad-layout", "layout": {**RECORD["layout"], "tp": 3}}
    no_model = {k: v for k, v in RECORD.items() if k != "model"} | {"id": "no-model"}
    no_measure = {k: v for k, v in RECORD.items() if k != "measured_tokens_per_s_per_gpu"}
    code, out = run(tmp_path, [bad_gpu, bad_layout, no_model, no_measure, "junk"], capsys)
    assert code == 0 and len(out) == 5
    assert "tpu-v9" in out[0]["error"] and out[0]["predicted_tokens_per_s_per_gpu"] is None
    assert "must divide num_attention_heads" in out[1]["error"]
    assert "model" in out[2]["error"]
    assert out[3]["error"] is None and out[3]["predicted_tokens_per_s_per_gpu"] > 0
    assert out[4]["error"] == "record is not a mapping"


def test_file_that_is_not_a_list(tmp_path, capsys):
    path = tmp_path / "runs.yaml"
    path.write_text("a: 1\n")
    assert main(["validate", "--data", str(path)]) == 2
    assert "expected a YAML list" in capsys.readouterr().err


@pytest.mark.skipif(not (SHARED / "data/published_runs.yaml").exists(), reason="no ../shared")
def test_shared_runs_never_crash(capsys):
    assert main(["validate", "--data", str(SHARED / "data/published_runs.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 90 and all("error" in row for row in out)


def test_percentile_interpolates():
    from planner.validate import percentile

    assert percentile([1.0, 3.0], 0.9) == pytest.approx(2.8)
    assert percentile([5.0], 0.9) == 5.0
    assert percentile(list(map(float, range(11))), 0.5) == 5.0
