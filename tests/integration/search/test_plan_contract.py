"""The main job end to end: plan, estimate, presets and validate through the CLI and the library."""

import json

import pytest

import planner
from cost_models.rules import layout_violations
from models_zoo import list_presets, load_cluster, load_gpu, load_model
from planner.cli import main

CONTRACT_MODELS = [
    "llama3.1-8b",
    "llama3.1-70b",
    "mpt-7b",
    "mpt-30b",
    "mpt-70b",
    "megatron-gpt-1.7b",
    "megatron-gpt-1t",
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3.1-405b",
    "gpt3-175b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "gpt-oss-120b",
    "nemotron4-340b",
    "bloom-176b",
]
CONTRACT_CLUSTERS = [
    "dgx-a100",
    "dgx-h100",
    "dgx-h200",
    "h800",
    "dgx-b200",
    "gb200-nvl72",
    "gb300-nvl72",
]
CONTRACT_GPUS = [
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "h100-sxm-80gb",
    "h100-sxm-96gb-hbm2e-500w",
    "h200-sxm-141gb",
    "h800-sxm-80gb",
    "b200",
    "gb200",
    "gb300",
]


def cli_json(argv, capsys):
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


def test_readme_plan_json(capsys):
    out = cli_json(
        [
            "plan",
            "--model",
            "llama3-70b",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "64",
            "--global-batch",
            "128",
            "--json",
        ],
        capsys,
    )
    best = out["best"]["layout"]
    assert best["tp"] * best["pp"] * best["dp"] * best["cp"] == 64
    for key in (
        "tp",
        "pp",
        "dp",
        "cp",
        "ep",
        "vp",
        "micro_batch",
        "num_microbatches",
        "recompute",
        "zero_stage",
        "sequence_parallel",
        "placement",
    ):
        assert key in best
    for key in (
        "step_time_s",
        "tokens_per_s_per_gpu",
        "mfu",
        "peak_memory_gib",
        "fits_in_memory",
        "breakdown_s",
    ):
        assert key in out["best"]["estimate"]
    assert set(out["solver"]) >= {"status", "wall_time_s", "objective", "best_bound", "gap"}
    assert out["ranked"][0] == out["best"]
    steps = [p["estimate"]["step_time_s"] for p in out["ranked"]]
    assert steps == sorted(steps)
    assert out["best"]["estimate"]["peak_memory_gib"] <= 80 * 0.9


def test_plan_human_report(capsys):
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--cluster",
                "dgx-h100",
                "--gpus",
                "16",
                "--global-batch",
                "64",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "Step time breakdown" in text and "Ranked plans" in text and "PROVED" in text


def test_plan_honours_pins():
    result = planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64, global_batch=128, tp=8, top_k=3)
    assert all(e.layout.tp == 8 for e in result.ranked)


def test_plan_is_deterministic():
    a = planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, global_batch=64)
    b = planner.plan_for("llama3-8b", "dgx-h100", num_gpus=16, global_batch=64)
    assert a.ranked == b.ranked


def test_plan_returns_legal_fitting_layouts():
    result = planner.plan_for("mixtral-8x7b", "dgx-h100", num_gpus=32, global_batch=256, top_k=5)
    for e in result.ranked:
        assert layout_violations(result.model, result.cluster, result.workload, e.layout) == []
        assert e.peak_memory_gib <= result.usable_memory_gib


def test_unknown_library_constraint():
    with pytest.raises(planner.InvalidInput, match="unknown constraint.*max_tpp"):
        planner.plan_for("llama3-8b", "dgx-h100", num_gpus=8, max_tpp=2)


def test_estimate_json(capsys):
    out = cli_json(
        [
            "estimate",
            "--model",
            "llama3-70b",
            "--cluster",
            "dgx-h100",
            "--gpus",
            "64",
            "--global-batch",
            "128",
            "--tp",
            "4",
            "--pp",
            "4",
            "--dp",
            "2",
            "--cp",
            "2",
            "--vp",
            "5",
            "--sequence-parallel",
            "--json",
        ],
        capsys,
    )
    assert out["tokens_per_s_per_gpu"] > 0 and out["fits_in_memory"] is True
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["step_time_s"])


def test_presets_models_json_lists_contract_models(capsys):
    rows = cli_json(["presets", "models", "--json"], capsys)  # one object per preset (issue 28)
    assert set(CONTRACT_MODELS) <= {r["name"] for r in rows}


@pytest.mark.parametrize("gpu", CONTRACT_GPUS)
def test_contract_gpus_load(gpu):
    assert load_gpu(gpu).id == gpu


@pytest.mark.parametrize("name", CONTRACT_CLUSTERS)
def test_contract_clusters_load_and_plan_small(name):
    cluster = load_cluster(name)
    assert cluster.name and cluster.tiers[0].domain_size == cluster.gpu.nvlink_domain_size
    sized = load_cluster(name, num_gpus=cluster.gpu.nvlink_domain_size)
    result = planner.plan_for("llama3-8b", sized, global_batch=32, top_k=1)
    assert result.best.fits_in_memory


def test_every_model_preset_loads():
    for name in list_presets("models"):
        assert load_model(name).num_layers > 0
