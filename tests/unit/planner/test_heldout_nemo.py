"""bench/heldout/nemo_performance_summary.yaml (held-out evaluation data from NeMo Framework's
published tables, never fitted): the transcription checks itself, the records load and score,
and the converter's reading of NeMo's performance scripts holds on hand-made inputs."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from factories import load_script

from planner.validate import RunRecord, validate_file

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "heldout"
SUMMARY = HELDOUT / "nemo_performance_summary.yaml"
TABLES = HELDOUT / "nemo_performance_tables.yaml"


@pytest.fixture(scope="module")
def conv():
    return load_script(HELDOUT / "make_nemo_summary.py")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(SUMMARY.read_text())


def test_every_record_passes_the_schema_and_scores(records: list[dict]) -> None:
    for r in records:
        RunRecord.model_validate(r)
    rows = validate_file(SUMMARY)
    assert len(rows) == len(records) == 18
    assert all(row.error is None for row in rows), [
        (row.id, row.error) for row in rows if row.error
    ]


def test_transcribed_flops_per_token_agree_per_model() -> None:
    """NeMo's model TFLOP/s over tokens/s is its FLOPs per token: one figure per model and sequence
    length in every table (a slip in either cell or in the model name shows here). Llama 3 405B is
    grouped by name as the pages print it: 25.07's "LLAMA3.1-405B" counts 1 % fewer."""
    seen: dict[tuple, list[float]] = defaultdict(list)
    for table in yaml.safe_load(TABLES.read_text()):
        header = table["header"]
        for cells in table["rows"]:
            row = dict(zip(header, cells))
            tokens = float(row["Tokens / sec / GPU"].split("(")[0])
            tflops = float(row["Model TFLOP / sec / GPU"].split("(")[0])
            seen[(row["Model"], row["Sequence Length"])].append(tflops * 1e12 / tokens)
    assert len(seen) >= 8
    for key, per_token in seen.items():
        mid = statistics.median(per_token)
        assert all(abs(v / mid - 1) < 0.005 for v in per_token), (key, per_token)
    assert seen[("LLAMA3-70B", "8192")][0] == pytest.approx(4.81e11, rel=0.01)


def test_page_fields_regenerate_without_the_nemo_clone(conv, records: list[dict]) -> None:
    """The page's part of every record (model, layout, measured figure) comes from the tables file
    alone; the clone adds recipe settings only."""
    skipped: list[str] = []
    again = []
    for table in yaml.safe_load(TABLES.read_text()):
        again += conv.records_of(table, conv.Recipes(None), skipped)
    assert [r["id"] for r in again] == [r["id"] for r in records]
    for a, b in zip(again, records):
        assert (
            a["model"] == b["model"]
            and a["measured_tokens_per_s_per_gpu"] == b["measured_tokens_per_s_per_gpu"]
        )
        keep = (
            "tp",
            "pp",
            "dp",
            "cp",
            "ep",
            "vp",
            "micro_batch",
            "global_batch_seqs",
            "zero_stage",
            "precision",
        )
        assert {k: a["layout"][k] for k in keep} == {k: b["layout"][k] for k in keep}
    assert any("Mixtral-8x22B -- GBS 1 not divisible" in s for s in skipped)
    assert any("LLAMA4-Scout-LLM --" in s and "Llama 4" in s for s in skipped)
    assert sum("parenthesised variant) -- the page gives no legend" in s for s in skipped) == 4


def test_record_rules_by_hand(conv) -> None:
    table = {
        "container": "25.04", "url": "u", "system": "DGX-H100", "parenthesised": None,
        "precision_statement": "we use per-tensor FP8 quantization using the scaling factors calculated in the current step",
        "header": ["Model", "#-GPUs", "GBS", "MBS", "Sequence Length", "FSDP", "TP", "PP", "CP", "VP", "EP", "GA",
                   "Tokens / sec / GPU", "Model TFLOP / sec / GPU"],
        "rows": [["LLAMA3-70B", "64", "128", "1", "8192", "0", "4", "8", "1", "5", "1", "7", "1600 (1500)", "770"],
                 ["Nemotron-H 56B", "64", "192", "1", "8192", "0", "2", "1", "1", "1", "1", "3", "1", "1"]],
    }  # fmt: skip
    skipped: list[str] = []
    (rec,) = conv.records_of(table, conv.Recipes(None), skipped)
    assert (rec["layout"]["dp"], rec["layout"]["vp"], rec["layout"]["sequence_parallel"]) == (
        2,
        5,
        True,
    )
    assert rec["settings"] == {"fp8_recipe": "tensorwise"}
    assert rec["measured_tokens_per_s_per_gpu"] == 1600.0
    assert "INCONSISTENT: table GA 7 but GBS/(MBS*DP) = 128/(1*2) = 64" in rec["notes"]
    assert rec["confidence"] == "low"
    assert any("Nemotron-H 56B -- hybrid Mamba" in s for s in skipped)
    assert conv.precision_of("at FP8 precision (using NeMo 2.0)")[:2] == ("fp8", None)
    with pytest.raises(ValueError):
        conv.precision_of("at BF16 precision")


class _FakeRecipes:
    """conv.Recipes over in-memory files: (tag, path) -> text."""

    def __new__(cls, conv, files: dict[tuple[str, str], str]):
        rec = conv.Recipes("unused")
        rec._show = lambda tag, path: files.get((tag, path))  # type: ignore[method-assign]
        return rec


CSV = (
    "task,model,size,system,dtype,num_gpus,seq_len,tp_size,pp_size,cp_size,ep_size,vp_size,mbs,gbs,etp_size,"
    "cuda_graphs,use_mcore_fsdp,recompute_layers,activation_offload_layers,recompute_modules\n"
    "pre_train,llama3,70b,gb200,fp8,64.0,8192.0,2.0,4.0,1.0,1.0,5.0,1.0,128.0,,1,0,0,0,\n"
    "pre_train,llama3,70b,gb200,fp8,64.0,8192.0,1.0,1.0,1.0,1.0,1.0,1.0,128.0,,1,1,0,0,\n"
    "pre_train,llama3,8b,gb200,fp8,8.0,8192.0,1.0,1.0,1.0,1.0,1.0,2.0,128.0,,0,0,4,2,core_attn/mlp\n"
)
SCRIPT = """
ub_cfg = {
    "h100": {"bf16": userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192, "fp8": userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192},
    "gb200": {"bf16": userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192, "fp8": userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192},
}
"""
RECIPE = "callbacks = [run.Config(\n    MegatronCommOverlapCallback,\n    tp_comm_overlap=True,\n)]"
UB = """
userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192 = TransformerLayerTPOverlapCfg(
    qkv_dgrad=BulkOverlapCfg(num_sm=4, cga_size=2, set_sm_margin=False),
    qkv_wgrad=BulkOverlapCfg(num_sm=24, cga_size=2, set_sm_margin=False),
    fc1_dgrad=BulkOverlapCfg(num_sm=2, cga_size=2, set_sm_margin=False),
    fc1_wgrad=BulkOverlapCfg(num_sm=4, cga_size=2, set_sm_margin=False),
    qkv_fprop=RingExchangeOverlapCfg(aggregate=False),
    proj_dgrad=RingExchangeOverlapCfg(aggregate=False),
    fc1_fprop=RingExchangeOverlapCfg(aggregate=False),
    fc2_dgrad=RingExchangeOverlapCfg(aggregate=True),
    proj_fprop=RingExchangeOverlapCfg(num_sm=1, set_sm_margin=True),
    fc2_fprop=PipelineOverlapCfg(num_sm=16, cga_size=2, num_splits=4, set_sm_margin=True),
)
"""


def _files(csv: str = CSV) -> dict[tuple[str, str], str]:
    return {
        ("v2.3.0", "scripts/performance/recommended_model_configs/model_configs_gb200.csv"): csv,
        ("v2.3.0", "scripts/performance/llm/pretrain_llama3_70b.py"): SCRIPT,
        ("v2.3.0", "nemo/collections/llm/recipes/llama3_70b.py"): RECIPE,
        ("v2.3.0", "nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py"): UB,
    }


def _shape(**kw) -> dict:
    return {
        "num_gpus": 64,
        "tp": 2,
        "pp": 4,
        "cp": 1,
        "ep": 1,
        "vp": 5,
        "mbs": 1,
        "gbs": 128,
        "fsdp": False,
    } | kw


def test_recipe_settings_from_the_csv_row_of_the_layout_and_the_scripts_ub_table(conv) -> None:
    rec = _FakeRecipes(conv, _files())
    settings, layout, note = conv.recipe_settings(
        rec, "25.04", "llama3", "70b", "DGX-GB200", "fp8", _shape()
    )
    assert settings["cuda_graphs"] is True
    assert settings["tp_comm_overlap"] is True
    assert settings["tp_overlap"] == "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192"
    # the hand-made definition differs from the cost model's in fc2_dgrad (aggregate) and fc2_fprop
    assert settings["_ub_differs"] is True
    assert (
        "fc2_dgrad aggregate=True at v2.3.0 (not priced)" in note
        and "fc2_fprop UbOverlap(method='pipeline'" in note
    )
    assert layout == {}
    # a layout the CSV does not hold: no knobs from it, the TP overlap all the same
    settings, _, note = conv.recipe_settings(
        rec, "25.04", "llama3", "70b", "DGX-GB200", "fp8", _shape(mbs=2, gbs=256)
    )
    assert "cuda_graphs" not in settings and settings["tp_comm_overlap"] is True
    assert "has this layout (llama3 70b fp8): its knobs not taken" in note
    # Megatron-FSDP: CUDA graphs dropped (set_primary_perf_configs), no TP overlap
    fsdp = _shape(tp=1, pp=1, vp=1, fsdp=True)
    settings, layout, note = conv.recipe_settings(
        rec, "25.04", "llama3", "70b", "DGX-GB200", "fp8", fsdp
    )
    assert settings == {} and "cuda_graphs 1, dropped under FSDP" in note
    # the page says FSDP, the CSV row of that layout says DDP: none of its knobs
    settings, _, note = conv.recipe_settings(
        rec, "25.04", "llama3", "70b", "DGX-GB200", "fp8", _shape(fsdp=True)
    )
    assert "disagrees with the page's FSDP column" in note and "cuda_graphs" not in settings


def test_recompute_and_offload_knobs(conv) -> None:
    """recompute_modules is selective recompute; recompute_layers is full recompute of that many
    layers (method block), which a record cannot state (NeMo's set_primary_perf_configs keeps the
    two apart)."""
    csv = CSV + "pre_train,llama3,8b,gb200,fp8,8.0,8192.0,1.0,1.0,1.0,1.0,1.0,4.0,128.0,,0,0,6,0,\n"
    files = _files(csv) | {("v2.3.0", "scripts/performance/llm/pretrain_llama3_8b.py"): "",
                           ("v2.3.0", "nemo/collections/llm/recipes/llama3_8b.py"): ""}  # fmt: skip
    rec = _FakeRecipes(conv, files)
    shape = {"num_gpus": 8, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "vp": 1, "mbs": 2, "gbs": 128,
             "fsdp": False}  # fmt: skip
    settings, layout, _ = conv.recipe_settings(
        rec, "25.04", "llama3", "8b", "DGX-GB200", "fp8", shape
    )
    assert settings == {"cpu_offload_layers": 2, "recompute_modules": ["core_attn", "mlp"]}
    assert layout == {"recompute": "selective"}
    # full recompute of 6 layers (block): the records' layout cannot say so, so nothing is taken
    settings, layout, note = conv.recipe_settings(
        rec, "25.04", "llama3", "8b", "DGX-GB200", "fp8", shape | {"mbs": 4}
    )
    assert (settings, layout) == ({}, {}) and "recomputes 6 layers in full" in note


def test_ub_config_without_a_table(conv) -> None:
    """pretrain_nemotron4_340b.py names its config under `if gpu_type == "b200"`: one name at
    v2.2.0 (taken for both dtypes, as the code does), an fp8 / bf16 conditional later."""
    old = 'if gpu_type == "b200":\n    tp_comm_overlap_cfg = userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096\n'
    new = ('if gpu_type in ["b200", "gb200"]:\n    tp_comm_overlap_cfg = (\n'
           '        userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096\n        if fp8\n'
           '        else userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096\n    )\n')  # fmt: skip
    for text, dtype, gpu, want in (
        (old, "fp8", "b200", "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096"),
        (new, "fp8", "gb200", "userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096"),
        (new, "bf16", "b200", "userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096"),
        (new, "fp8", "h100", None),
    ):
        rec = _FakeRecipes(
            conv, {("t", "scripts/performance/llm/pretrain_nemotron4_340b.py"): text}
        )
        assert rec.ub_config("t", "scripts/performance", "nemotron4", "340b", gpu, dtype) == want


def test_committed_records_carry_what_the_scripts_set(records: list[dict]) -> None:
    by_id = {r["id"]: r for r in records}
    gpt3 = by_id["nemo-25.04-gb200-gpt3-175b-128gpu-fp8"]
    assert gpt3["settings"] == {"fp8_recipe": "tensorwise", "cuda_graphs": True, "tp_comm_overlap": True,
                                "tp_overlap": "userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
                                "main_grads": "bf16", "fp8_params": True}  # fmt: skip
    assert "grad_reduce_in_fp32=False (scripts/performance/utils.py @v2.3.0 (fp8 branch))" in gpt3["notes"]
    assert gpt3["model"]["hidden_dropout"] is False  # NeMo GPTConfig175B
    assert by_id["nemo-25.07-gb200-llama3-70b-64gpu-fp8"]["layout"]["zero_stage"] == 3
    b200 = by_id["nemo-25.02-b200-llama3-405b-128gpu-fp8"]
    assert b200["settings"]["fp8_recipe"] == "delayed"  # 25.02 scripts: bf16_with_fp8_mixed
    assert b200["confidence"] == "low"  # its ub config at v2.2.0 aggregates the ring exchange
    # Mixtral: the script holds no MoE code, so its recipe's performance mode says what ran
    # (make_nemo_summary.MOE_RECIPE_MODELS, moe_recipe_settings): token drop at capacity 1.0
    for r in records:
        if r["model"].get("moe"):
            assert "mixtral" in r["id"] and r["confidence"] == "medium"
            assert r["settings"]["moe_pad_to_capacity"] and r["settings"]["moe_capacity_factor"] == 1.0
            assert r["settings"]["moe_dispatcher"] == "alltoall" and r["settings"]["main_grads"] == "bf16"
            assert "mixtral_8x7b.py performance mode" in r["notes"]


def test_moe_recipe_settings_read_token_drop_and_the_dispatcher(conv) -> None:
    """moe_recipe_settings: a MegatronTokenDropCallback built without arguments in the code a
    recipe's performance mode runs is token drop at the callback's defaults; the dispatcher is
    MixtralConfig's default where the recipe's model() builds a Mixtral config. Without the
    callback nothing is stated about capacity."""
    files = {
        ("t", "nemo/lightning/pytorch/callbacks/moe_token_drop.py"): (
            "class MegatronTokenDropCallback:\n    def __init__(self, moe_expert_capacity_factor: float = 1.0,\n"
            "                 moe_pad_expert_input_to_capacity: bool = True):\n        pass\n"
        ),
        ("t", "nemo/collections/llm/gpt/model/mixtral.py"): (
            "class MixtralConfig(GPTConfig):\n    moe_token_dispatcher_type: str = 'alltoall'\n"
        ),
    }
    rec = _FakeRecipes(conv, files)
    perf = "def pretrain_performance_optimizations(recipe):\n    recipe.trainer.callbacks.extend([run.Config(MegatronTokenDropCallback)])\n"
    model = "def model():\n    return run.Config(MixtralModel, config=run.Config(MixtralConfig8x7B))\n"
    settings, notes = conv.moe_recipe_settings(rec, "t", perf, model)
    assert settings == {"moe_pad_to_capacity": True, "moe_capacity_factor": 1.0, "moe_dispatcher": "alltoall"}
    assert any("capacity factor 1.0" in n for n in notes)
    settings, _ = conv.moe_recipe_settings(rec, "t", "def f(recipe):\n    return recipe\n", model)
    assert settings == {"moe_dispatcher": "alltoall"}
    assert conv.literal_defaults("def f(a, b: int = 2, c='x'):\n    pass\n", "f") == {"b": 2, "c": "x"}


def test_gradient_dtype_read_from_the_scripts(conv) -> None:
    """NeMo's performance scripts set MegatronMixedPrecision.grad_reduce_in_fp32 = False in the fp8
    branch (v2.2.0's per-model scripts, v2.3.0's set_primary_perf_configs) or for every dtype
    (v2.4.0's set_precision_configs); a bf16 row of the first two keeps the plugin's fp32 default
    (not stated), and any other condition leaves it unread."""
    script = "def main():\n    set_primary_perf_configs(recipe)\n"
    helper_fp8 = (
        "def set_primary_perf_configs(recipe, compute_dtype='fp8'):\n"
        "    if compute_dtype is not None and compute_dtype.lower() == 'fp8':\n"
        "        recipe.trainer.plugins = bf16_with_fp8_mixed()\n"
        "        recipe.trainer.plugins.grad_reduce_in_fp32 = False\n"
    )
    helper_all = (
        "def set_primary_perf_configs(recipe):\n    set_precision_configs(recipe)\n"
        "def set_precision_configs(recipe, compute_dtype='bf16'):\n"
        "    if compute_dtype is None:\n        return recipe\n"
        "    recipe.trainer.plugins.grad_reduce_in_fp32 = False\n"
    )
    helper_odd = helper_fp8.replace("compute_dtype.lower() == 'fp8'", "use_fsdp")
    path = ("t", "scripts/performance/llm/pretrain_llama3_8b.py")
    for helper, file, dtype, want in (
        (helper_fp8, "utils.py", "fp8", False), (helper_fp8, "utils.py", "bf16", None),
        (helper_all, "helpers.py", "bf16", False), (helper_odd, "utils.py", "fp8", None),
    ):  # fmt: skip
        rec = _FakeRecipes(conv, {path: script, ("t", f"scripts/performance/{file}"): helper})
        value, where = rec.grad_reduce_in_fp32("t", "scripts/performance", "llama3", "8b", dtype)
        assert value is want, (file, dtype)
        if want is False:
            assert where.startswith(f"scripts/performance/{file} @t")
    # v2.2.0: the per-model script itself, under `if args.compute_dtype.lower() == "fp8"`
    own = ("def main(args):\n    if args.compute_dtype.lower() == 'fp8':\n"
           "        recipe.trainer.plugins.grad_reduce_in_fp32 = False\n")  # fmt: skip
    rec = _FakeRecipes(conv, {("t", "scripts/llm/performance/pretrain_llama3_8b.py"): own})
    assert rec.grad_reduce_in_fp32("t", "scripts/llm/performance", "llama3", "8b", "fp8")[0] is False
    assert rec.grad_reduce_in_fp32("t", "scripts/llm/performance", "llama3", "8b", "bf16")[0] is None


def test_gradient_dtype_from_the_recipes_performance_mode(conv) -> None:
    """A script that builds its recipe with pretrain_recipe(performance_mode=True) runs the
    recipe's pretrain_performance_optimizations first (recipes/nemotron4_15b.py at d2b21556f2 sets
    grad_reduce_in_fp32 = False there): a bf16 row takes it unless the script or helper plugs in
    another precision plugin for the row's dtype after it; the script's own value wins."""
    script = (
        "from nemo.collections.llm.recipes.nemotron4_15b import pretrain_recipe\n"
        "def main():\n    recipe = pretrain_recipe(performance_mode=True)\n"
        "    set_primary_perf_configs(recipe)\n"
    )
    recipe = (
        "def pretrain_recipe(performance_mode: bool = False):\n"
        "    recipe = make()\n"
        "    if performance_mode:\n        recipe = pretrain_performance_optimizations(recipe)\n"
        "    return recipe\n"
        "def pretrain_performance_optimizations(recipe):\n"
        "    recipe.trainer.plugins.grad_reduce_in_fp32 = False\n    return recipe\n"
        "def finetune_recipe(recipe):\n    recipe.trainer.plugins.grad_reduce_in_fp32 = True\n"
    )
    helper_fp8 = (  # the fp8 branch replaces the plugin and sets its own value (NeMo 25.04)
        "def set_primary_perf_configs(recipe, compute_dtype='bf16', fp8_recipe=None):\n"
        "    if compute_dtype is not None and compute_dtype.lower() == 'fp8':\n"
        "        if fp8_recipe.lower() == 'ds':\n"
        "            recipe.trainer.plugins = bf16_with_fp8_mixed()\n"
        "        recipe.trainer.plugins.grad_reduce_in_fp32 = False\n"
    )
    helper_any = "def set_primary_perf_configs(recipe):\n    recipe.trainer.plugins = bf16_mixed()\n"
    files = {
        ("t", "scripts/performance/llm/pretrain_nemotron4_15b.py"): script,
        ("t", "nemo/collections/llm/recipes/nemotron4_15b.py"): recipe,
        ("t", "scripts/performance/utils.py"): helper_fp8,
    }
    rec = _FakeRecipes(conv, files)
    value, where = rec.grad_reduce_in_fp32("t", "scripts/performance", "nemotron4", "15b", "bf16")
    assert value is False
    assert where.startswith("nemo/collections/llm/recipes/nemotron4_15b.py @t")
    assert "pretrain_performance_optimizations, performance_mode=True" in where
    # fp8: the helper's fp8 branch sets its own value
    value, where = rec.grad_reduce_in_fp32("t", "scripts/performance", "nemotron4", "15b", "fp8")
    assert value is False and where.startswith("scripts/performance/utils.py @t (fp8 branch)")
    # a plugin replaced for every dtype after the recipe: the recipe's value may not stand
    rec = _FakeRecipes(conv, {**files, ("t", "scripts/performance/utils.py"): helper_any})
    value, where = rec.grad_reduce_in_fp32("t", "scripts/performance", "nemotron4", "15b", "bf16")
    assert value is None and "then the precision plugin is replaced" in where
    # without performance_mode=True the recipe's optimizations do not run
    plain = dict(files)
    plain[("t", "scripts/performance/llm/pretrain_nemotron4_15b.py")] = script.replace(
        "performance_mode=True", ""
    )
    value, _ = _FakeRecipes(conv, plain).grad_reduce_in_fp32(
        "t", "scripts/performance", "nemotron4", "15b", "bf16"
    )
    assert value is None


def test_fp8_parameter_gather_from_the_factory_and_the_fsdp_switch(conv) -> None:
    """An fp8 row gathers fp8 weights where the MegatronMixedPrecision factory of its scaling sets
    fp8_param_gather (fp8_params at v2.2.0); v2.3.0's set_primary_perf_configs turns it off under
    Megatron-FSDP. The committed 25.04 FSDP row is off, its DDP rows on."""
    factories = ("def bf16_with_fp8_current_scaling_mixed():\n    cfg = bf16_mixed()\n"
                 "    cfg.fp8_param_gather = True\n    return cfg\n"
                 "def bf16_with_fp8_mixed():\n    cfg = bf16_mixed()\n    cfg.fp8_params = True\n    return cfg\n")  # fmt: skip
    helper = ("def set_primary_perf_configs(recipe, use_mcore_fsdp=False, compute_dtype='fp8'):\n"
              "    if compute_dtype is not None and compute_dtype.lower() == 'fp8':\n"
              "        if use_mcore_fsdp:\n            recipe.trainer.plugins.fp8_param_gather = False\n")  # fmt: skip
    rec = _FakeRecipes(conv, {("t", "nemo/collections/llm/recipes/precision/mixed_precision.py"): factories,
                              ("t", "scripts/performance/utils.py"): helper})  # fmt: skip
    args = (rec, "t", "scripts/performance", "llama3", "70b")
    assert conv.fp8_param_gather_of(*args, "tensorwise", False) == (True, "bf16_with_fp8_current_scaling_mixed @t")
    assert conv.fp8_param_gather_of(*args, None, False)[0] is True  # delayed: bf16_with_fp8_mixed's fp8_params
    off, where = conv.fp8_param_gather_of(*args, "tensorwise", True)
    assert off is False and "Megatron-FSDP" in where
    assert conv.fp8_param_gather_of(*args, "mxfp8", False) == (None, "")  # the factory is not in the file


def test_committed_fp8_rows_state_their_parameter_gathers(records: list[dict]) -> None:
    by_id = {r["id"]: r for r in records}
    assert "fp8_params" not in by_id["nemo-25.04-gb200-llama3-70b-64gpu-fp8"]["settings"]  # FSDP at v2.3.0
    assert by_id["nemo-25.07-gb200-llama3-70b-64gpu-fp8"]["settings"]["fp8_params"] is True  # v2.4.0 keeps it
    assert by_id["nemo-25.02-h100-gpt3-175b-512gpu-fp8"]["settings"]["fp8_params"] is True
