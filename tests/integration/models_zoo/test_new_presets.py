"""B300 / MI300X / MI355X presets and the constants listing (issue 18)."""

from __future__ import annotations

import json

import pytest

from cost_models import estimate
from cost_models.specs import Layout
from models_zoo import load_cluster, load_model
from models_zoo.provenance import cluster_constants, gpu_constants
from planner.api import make_workload
from planner.cli import main
from planner.validate import validate_record


@pytest.mark.parametrize(
    ("cluster", "gpu", "domain"),
    [("dgx-b300", "b300", 8), ("mi300x-roce", "mi300x", 8), ("mi355x-roce", "mi355x", 8)],
)
def test_new_systems_load_and_estimate(cluster, gpu, domain):
    c = load_cluster(cluster, 64)
    assert c.gpu.id == gpu and c.tiers[0].domain_size == domain
    model = load_model("llama3-8b")
    e = estimate(model, c, make_workload(model, global_batch=64), Layout(tp=2, dp=32))
    assert 0 < e.mfu < 1


def _record(gpu: str) -> dict:
    return {
        "id": f"x-{gpu}",
        "gpu": gpu,
        "num_gpus": 16,
        "model": {
            "name": "m",
            "num_layers": 4,
            "hidden_size": 1024,
            "ffn_hidden_size": 4096,
            "num_attention_heads": 8,
            "vocab_size": 32000,
            "seq_len": 2048,
        },
        "layout": {
            "tp": 1,
            "pp": 1,
            "dp": 16,
            "cp": None,
            "ep": None,
            "vp": None,
            "micro_batch": 1,
            "recompute": None,
            "zero_stage": 1,
            "sequence_parallel": None,
            "global_batch_seqs": 64,
            "precision": "bf16",
        },
        "measured_tokens_per_s_per_gpu": 1000.0,
    }


@pytest.mark.parametrize("gpu", ["b300", "mi300x", "mi355x"])
def test_validate_scores_records_on_new_gpus(gpu):
    row = validate_record(_record(gpu))
    assert row.error is None and row.estimate is not None


def test_constants_listing_separates_datasheet_measured_assumption(capsys):
    b200 = {r["constant"]: r["basis"] for r in gpu_constants(load_cluster("dgx-b200").gpu)}
    b300 = {r["constant"]: r["basis"] for r in gpu_constants(load_cluster("dgx-b300").gpu)}
    mi = {r["constant"]: r["basis"] for r in gpu_constants(load_cluster("mi300x-roce").gpu)}
    assert b200["peak_bf16_tflops"] == "datasheet"
    assert b200["gemm_efficiency_bf16"] == "measured"  # fitted on published B200 runs
    assert b300["gemm_efficiency_bf16"] == "assumption"  # generation value, no B300 runs
    assert mi["attention_efficiency"] == "assumption"
    rows = cluster_constants(load_cluster("mi300x-roce"))
    assert {r["basis"] for r in rows if r["constant"].endswith(".efficiency")} == {"assumption"}
    assert main(["presets", "clusters", "--constants", "mi355x-roce", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert any(r["constant"] == "tiers.roce.efficiency" for r in listed)
