"""The sixth held-out source: DGX Cloud Benchmarking's expected-performance tables
(bench/heldout/make_dgxc_summary.py).

Evaluation data only; these tests keep the committed file what the converter says it is (every
record passes the schema and scores, every measured figure is sequence x GBS / step / GPUs from
the table's own step time) and the readers honest on small inputs: the two README table styles,
the layout match, the throughput / MFU checks, the shell overrides a launch script applies and
the NeMo Launcher configuration read from a git history."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from factories import load_script

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "heldout"
SUMMARY = HELDOUT / "dgxc_performance_summary.yaml"


@pytest.fixture(scope="module")
def conv():
    return load_script(HELDOUT / "make_dgxc_summary.py")


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(SUMMARY.read_text())


def test_every_record_passes_the_schema_and_scores(records: list[dict]) -> None:
    from planner.validate import RunRecord, validate_record

    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == 226
    for r in records:
        assert r["id"].startswith("dgxc-")
        RunRecord.model_validate(r)
        assert validate_record(r).tokens_error_pct is not None, r["id"]


def test_measured_tokens_are_sequence_times_batch_over_step(records: list[dict]) -> None:
    """tokens_derivation names the table's step; the figure is seq x GBS / step / GPUs."""
    for r in records:
        step = float(re.match(r"step ([0-9.]+) s", r["tokens_derivation"]).group(1))
        lay = r["layout"]
        want = r["model"]["seq_len"] * lay["global_batch_seqs"] / step / r["num_gpus"]
        assert r["measured_tokens_per_s_per_gpu"] == round(want, 1), r["id"]
        assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == r["num_gpus"], r["id"]


def test_llama_70b_row_by_hand(records: list[dict]) -> None:
    """llama3.1/README_70b.md @8f5cbb3799 (release 25.02): 'Llama 3.1 70b BF16 (TP=4, PP=4, CP=2,
    VP=5, MBS=1, GA=64)', column '64x H100 GPUs (GBS=128)', step 14.61 s -> 8192 x 128 / 14.61 /
    64; its llama3.1_70b.yaml sets ub_tp_comm_overlap and grad_sync_dtype bf16."""
    r = {x["id"]: x for x in records}["dgxc-25.02-2412-h100-llama-3.1-70b-64gpu-gbs128-bf16"]
    assert r["measured_tokens_per_s_per_gpu"] == round(8192 * 128 / 14.61 / 64, 1)
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["vp"]) == (4, 4, 2, 2, 5)
    assert r["settings"] == {"tp_comm_overlap": True, "main_grads": "bf16"}


README = """\
# Overview

**GB200**:
* weak scaling

| GPUs | SeqLen | Layers | TP | PP | CP | EP | DP | VP | MBS | GBS | GA |
|------|:------:|:------:|:--:|:--:|:--:|:--:|:--:|:--:|:---:|:---:|:--:|
| 128  | 4096   | 32     | 4  | 1  | 1  | NA | 32 | NA | 1   | 256 | 8  |
| 256  | 4096   | 32     | 4  | 1  | 1  | NA | 64 | NA | 1   | 512 | 8  |
| 512  | 4096   | 32     | 4  | 1  | 1  | NA | 128| NA | 1   | 1024| 8  |
| 8    | 4096   | 4      | 4  | 1  | 1  | NA | 2  | NA | 1   | 16  | 8  |

# GB200 Performance

| Llama3.1 8b BF16 | 8x GB200 GPUs | 128x GB200 GPUs | 256x GB200 GPUs | 512x GB200 GPUs |
|---|:---:|:---:|:---:|:---:|
Training step time (seconds per step)| 1.0 | 2.0 | 2.0 | 2.0
Throughput in tokens per second | 65536 | 524288 | 1048576 | 999
Model flops utilization | 10% | 40.0% | 40.0% | 40.0%
"""


def _readme(conv, text: str, path: str = "llama3.1/README.md"):
    return conv.Readme(None, path, "blob", "c" * 40, "2025-06-09", "25.05", text)


def test_tables_take_the_gpu_of_the_heading_or_bold_line_above(conv) -> None:
    got = conv.tables(README)
    assert [t.gpu for t in got] == ["GB200", "GB200"]
    rows = conv.layout_rows(got[0])
    assert rows[0] == {"gpu": "GB200", "gpus": 128, "seq": 4096, "layers": 32, "fsdp": None, "tp": 4,
                       "pp": 1, "cp": 1, "ep": None, "etp": None, "dp": 32, "vp": None, "mbs": 1,
                       "gbs": 256, "ga": 8, "size": None, "precisions": None}  # fmt: skip
    title, given, cols = conv.perf_table(got[1])
    assert (title, given) == ("Llama3.1 8b BF16", {})
    assert [(c.gpus, c.gpu, c.gbs) for c in cols] == [(8, "GB200", None), (128, "GB200", None),
                                                      (256, "GB200", None), (512, "GB200", None)]  # fmt: skip


def test_rows_check_throughput_and_let_the_mfu_row_arbitrate(conv) -> None:
    """128 / 256 GPUs: 4096 x GBS / 2.0 s is the throughput cell. 512 GPUs: the cell (999)
    disagrees, the MFU cell sides with the step and GBS (40 % = 128 GPUs' 40 % at the same rate
    per GPU): kept, the cell named in its notes. 8 GPUs: MFU 10 % against 40 % at a rate per GPU
    of 4096 x 16 / 1.0 / 8 = 8192 vs 4096 x 256 / 2.0 / 128 = 4096 disagrees too: only here the
    throughput cell (65536 = 4096 x 16 / 1.0) checks, and the record is a proxy (4 of 32 layers)."""
    skipped: list[str] = []
    rows = conv.rows_of(_readme(conv, README), skipped)
    by_gpus = {r.gpus: r for r in rows}
    assert sorted(by_gpus) == [8, 128, 256, 512] and skipped == []
    assert by_gpus[128].check == "throughput" and by_gpus[512].check == "mfu"
    assert "throughput cell 999" in by_gpus[512].notes[-1]
    assert conv._per_gpu_rate(by_gpus[512]) == 4096 * 1024 / 2.0 / 512
    broken = README.replace("| 40.0% | 40.0% | 40.0%", "| 40.0% | 40.0% | 20.0%")
    skipped = []
    rows = conv.rows_of(_readme(conv, broken), skipped)
    assert 512 not in {r.gpus for r in rows}
    assert skipped == [("25.05 llama3.1/README.md 'Llama3.1 8b BF16' 512x GB200 -- published throughput "
                       "999 tokens/s but sequence x GBS / step = 4096 x 1024 / 2 = 2097152")]  # fmt: skip


def _no_recipes(conv, monkeypatch) -> None:
    monkeypatch.setattr(conv, "perf_script_settings", lambda *a, **k: None)
    monkeypatch.setattr(conv, "launcher_settings", lambda *a, **k: ({}, {}, {}, "none read"))


def test_record_skips_proxies_and_keeps_a_dp_or_ga_typo_the_other_cells_refute(conv, monkeypatch) -> None:
    _no_recipes(conv, monkeypatch)
    rows = {r.gpus: r for r in conv.rows_of(_readme(conv, README), [])}
    assert conv.record(rows[8], None).startswith("proxy config: 4 of the model's 32 layers")
    rec = conv.record(rows[128], None)
    assert rec["layout"]["dp"] == 32 and rec["gpus_per_node"] == 72 and rec["gpu"] == "gb200"
    assert rec["measured_tokens_per_s_per_gpu"] == round(4096 * 256 / 2.0 / 128, 1)
    typo = README.replace("| 128  | 4096   | 32     | 4  | 1  | 1  | NA | 32 |",
                          "| 128  | 4096   | 32     | 4  | 1  | 1  | NA | 3  |")  # fmt: skip
    rows = {r.gpus: r for r in conv.rows_of(_readme(conv, typo), [])}
    rec = conv.record(rows[128], None)
    assert "the table's DP cell 3 contradicts GPUs / (TP x PP x CP) = 32" in rec["notes"]
    both = typo.replace("| 1   | 256 | 8  |", "| 1   | 256 | 9  |")
    rows = {r.gpus: r for r in conv.rows_of(_readme(conv, both), [])}
    assert conv.record(rows[128], None).startswith("the table's DP 3 and GA 9")


def test_title_layout_and_an_implied_sequence(conv, monkeypatch) -> None:
    """The 2024-11 per-size READMEs: the layout in the title, GBS in the column; the sequence the
    throughput implies (8192 x 128 / 14.61 = 71,756)."""
    _no_recipes(conv, monkeypatch)
    text = """\
| Llama 3.1 70b BF16 (TP=4, PP=4, CP=2, VP=5, MBS=1, GA=64) | Throughput on 64x H100 GPUs (GBS=128) |
|---|:---:|
| Training step time (seconds per step) | 14.61 |
| Throughput in tokens per second       | 71756 |
"""
    (row,) = conv.rows_of(_readme(conv, text, "llama3.1/README_70b.md"), [])
    assert row.layout["seq"] == 8192 and row.layout["from"] == "the table title and column"
    rec = conv.record(row, None)
    assert (rec["layout"]["dp"], rec["layout"]["cp"], rec["layout"]["vp"]) == (2, 2, 5)
    assert "sequence 8192 implied by the table's throughput x step / GBS" in rec["notes"]


def test_shell_assignments_follow_the_size_and_dtype_branches(conv) -> None:
    script = """\
export NVTE_FUSED_ATTN=0
if [[ $MODEL_SIZE = 15b ]]; then
  # 15b
  export NVTE_FUSED_ATTN=1
  CONFIG_OVERRIDES+=" model.ub_tp_comm_overlap=False"
else
  CONFIG_OVERRIDES+=" model.ub_tp_comm_overlap=True"
fi
if [[ "${DTYPE}" = fp8 ]]; then
  CONFIG_OVERRIDES+=" model.fp8_amax_history_len=16"
fi
if [[ $SLURM_JOB_NUM_NODES = 32 ]]; then
  CONFIG_OVERRIDES+=" model.hidden_dropout=0.1"
fi
[[ -n ${TP-} ]] && CONFIG_OVERRIDES+=" model.tensor_model_parallel_size=$TP"
CONFIG_OVERRIDES+=" model.fp8=${FP8_ENABLED^} +model.fp8_params=$FP8_ENABLED"
"""
    got = conv.shell_assignments(script, conv.shell_context("340b", "fp8", "H100", 256))
    assert got == [
        ("NVTE_FUSED_ATTN", "0", True),
        ("ub_tp_comm_overlap", "True", True),
        ("fp8_amax_history_len", "16", True),
        ("hidden_dropout", "0.1", False),
        ("tensor_model_parallel_size", "$TP", False),
        ("fp8", "${FP8_ENABLED^}", True),
        ("fp8_params", "$FP8_ENABLED", True),
    ]
    small = conv.shell_assignments(script, conv.shell_context("15b", "bf16", "H100", 16))
    assert ("NVTE_FUSED_ATTN", "1", True) in small and ("ub_tp_comm_overlap", "False", True) in small
    assert not any(k == "fp8_amax_history_len" for k, _, _ in small)
    assert conv._shell_value("${FP8_ENABLED^}", "fp8") is True
    assert conv._shell_value("$FP8_ENABLED", "bf16") is False
    assert conv._shell_value("$GBS", "bf16") is None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def test_launcher_settings_and_container_from_a_history(conv, tmp_path: Path) -> None:
    """A two-file NeMo Launcher workload: the YAML's model section, overridden by configure.sh
    (fp8 for the fp8 row, NVTE_FUSED_ATTN=0 -> fa2); the container from launch.sh's FW_VERSION
    where the README names none."""
    repo = tmp_path / "dgxc"
    (repo / "nemotron").mkdir(parents=True)
    cfg = {"model": {"ub_tp_comm_overlap": False, "fp8": False, "fp8_amax_history_len": 1024,
                     "fp8_amax_compute_algo": "max", "activations_checkpoint_granularity": "selective",
                     "hidden_dropout": 0.0, "optim": {"name": "distributed_fused_adam",
                                                      "grad_sync_dtype": "bf16"}}}  # fmt: skip
    (repo / "nemotron" / "nemotron4-340b-synth.yaml").write_text(yaml.safe_dump(cfg))
    (repo / "nemotron" / "configure.sh").write_text(
        "export NVTE_FUSED_ATTN=0\n"
        'export CONFIG_OVERRIDES+=" model.fp8=${FP8_ENABLED^} \\\n'
        '  model.ub_tp_comm_overlap=True \\\n  +model.fp8_params=${FP8_ENABLED^}"\n'
    )
    (repo / "nemotron" / "launch.sh").write_text("export FW_VERSION=24.09\n")
    (repo / "nemotron" / "README_340b.md").write_text("Training step time (seconds per step)\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v24.11.1")
    (readme,) = conv.readmes(str(repo / ".git"))
    assert (readme.release, readme.path) == ("24.11.1", "nemotron/README_340b.md")
    assert conv._container(readme) == ("24.09", "nemotron/launch.sh FW_VERSION")
    ctx = conv.shell_context("340b", "fp8", "H100", 256)
    settings, fields, layout, note = conv.launcher_settings(readme, "nemotron", "340b", "fp8", 8, {}, ctx)
    assert settings == {"tp_comm_overlap": True, "fp8_recipe": "delayed", "fp8_params": True,
                        "main_grads": "bf16", "attention_kernel": "fa2"}  # fmt: skip
    assert fields == {"hidden_dropout": False} and layout == {"recompute": "selective"}
    assert note.startswith("recipe settings from nemotron/nemotron4-340b-synth.yaml, nemotron/configure.sh")
    bf16 = conv.shell_context("340b", "bf16", "H100", 256)
    settings, *_ = conv.launcher_settings(readme, "nemotron", "340b", "bf16", 8, {}, bf16)
    assert "fp8_recipe" not in settings and "fp8_params" not in settings
    settings, *_ = conv.launcher_settings(readme, "nemotron", "340b", "bf16", 1, {}, bf16)
    assert "tp_comm_overlap" not in settings  # TP 1: no TP communication to overlap


def test_shell_branches_on_gpu_type_and_count_and_unknown_elif(conv) -> None:
    """The 2025 launch scripts set the layout per GPU type and size; an `elif` after a branch this
    reader cannot evaluate is itself unknown, and so is the `else` after it."""
    script = """\
if [ $GPU_TYPE = gb200 ]; then
  TP=4
  VP=1
elif [ $GPU_TYPE = h100 ]; then
  TP=8
  if [[ $JOB_TOTAL_GPUS -eq 512 ]]; then
    PP=8
  else
    PP=16
  fi
  VP=12
fi
if [[ $SLURM_JOB_NUM_NODES = 32 ]]; then
  CP=2
elif [[ $MODEL_SIZE = 405b ]]; then
  CP=4
else
  CP=1
fi
"""
    h100 = conv.shell_assignments(script, conv.shell_context("405b", "bf16", "H100", 1024))
    assert h100 == [("TP", "8", True), ("PP", "16", True), ("VP", "12", True),
                    ("CP", "2", False), ("CP", "4", False), ("CP", "1", False)]  # fmt: skip
    gb200 = conv.shell_assignments(script, conv.shell_context("405b", "bf16", "GB200", 128))
    assert [(k, v) for k, v, sure in gb200 if sure] == [("TP", "4"), ("VP", "1")]


def _lay(**kw) -> dict:
    base = {"tp": 8, "pp": 8, "cp": 1, "vp": None, "ep": None, "mbs": 1, "gbs": 64, "dp": None,
            "ga": None}  # fmt: skip
    return {**base, **kw}


def test_launch_layout_fills_the_table_and_yields_to_its_own_cells(conv) -> None:
    """VP 'NA' in the README, VP=12 in the launch script: the script's (what ran). CP=2 in the
    script where the table's GA 16 holds only at CP 1 (32 / (1 x 2)): the table's stands."""
    lay, changed, kept = conv._with_launch_layout(_lay(), {"VP": 12, "TP": 8}, 256)
    assert (lay["vp"], changed, kept) == (12, ["VP NA -> 12"], [])
    lay, changed, kept = conv._with_launch_layout(_lay(gbs=32, ga=16), {"CP": 2}, 128)
    assert (lay["cp"], changed, kept) == (1, [], ["CP 1 -> 2"])
    lay, changed, kept = conv._with_launch_layout(_lay(gbs=32), {"CP": 2}, 128)
    assert (lay["cp"], changed, kept) == (2, ["CP 1 -> 2"], [])
    assert conv._with_launch_layout(_lay(), {"VP": None, "EP": 1, "CP": 1}, 256) == (_lay(), [], [])


def _rec(rid: str, software: str, tokens: float) -> dict:
    return {"id": rid, "gpu": "h100-sxm-80gb", "model": {"name": "m"}, "num_gpus": 8,
            "layout": {"tp": 1}, "measured_tokens_per_s_per_gpu": tokens, "notes": "n",
            "source": f"DGX Cloud Benchmarking (x), {software}"}  # fmt: skip


def test_merge_same_figure_revision_and_other_software(conv) -> None:
    runs: list[dict] = []
    seen: dict[int, list[str]] = {}
    conv._merge(runs, seen, _rec("dgxc-24.11.1-a", "NeMo 24.09 container", 100.0), "24.11.1")
    conv._merge(runs, seen, _rec("dgxc-25.02-b", "rows of commit 8f5cbb3", 100.0), "25.02")
    assert len(runs) == 1 and seen[id(runs[0])] == ["25.02"]
    conv._merge(runs, seen, _rec("dgxc-25.01-c", "NeMo 24.09 container", 90.0), "25.01")
    assert [r["id"] for r in runs] == ["dgxc-25.01-c"]
    assert runs[0]["notes"].endswith("revises release 24.11.1's 100 tokens/s/GPU")
    conv._merge(runs, seen, _rec("dgxc-25.03-d", "NeMo 24.12 container", 80.0), "25.03")
    assert [r["id"] for r in runs] == ["dgxc-25.01-c", "dgxc-25.03-d"]


def test_a_record_states_expert_tensor_parallelism(records: list[dict]) -> None:
    """Grok-1 on GB200 runs ETP 4 (grok1/launch.sh ET=4): the record's layout says so and
    validate builds the layout with it; the expert weights a GPU holds are a quarter of ETP 1's,
    which the predicted peak shows (over the GB200's 184 GiB without it)."""
    from planner.validate import RunRecord, record_inputs, validate_record

    rec = {r["id"]: r for r in records}["dgxc-25.05-250400-gb200-grok-1-314b-128gpu-gbs256-bf16"]
    assert rec["layout"]["etp"] == 4
    checked = RunRecord.model_validate(rec).model_dump()
    assert record_inputs(checked)[3].etp == 4
    without = {**rec, "layout": {**rec["layout"], "etp": None}}
    assert record_inputs(RunRecord.model_validate(without).model_dump())[3].etp == 1
    four, one = validate_record(rec), validate_record(without)
    assert four.predicted_peak_gib < 184 < one.predicted_peak_gib


OWN_SCRIPT = '''
from nemo.collections.llm.recipes.llama3_70b import pretrain_recipe as pretrain_recipe_70b
from nemo.collections.llm.recipes.llama3_8b import pretrain_recipe as pretrain_recipe_8b

def override_recipe_configs(args, num_nodes):
    match args.model_size:
        case "8b":
            recipe = pretrain_recipe_8b(performance_mode=True)
        case "70b":
            recipe = pretrain_recipe_70b(performance_mode=True)
            ub_cfg = {
                "h100": {"bf16": userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192,
                         "fp8": userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192},
            }
    if args.compute_dtype.lower() == "fp8":
        recipe.trainer.plugins = bf16_with_fp8_mixed()
        recipe.trainer.plugins.grad_reduce_in_fp32 = False
    if args.model_size != "8b":
        recipe.trainer.callbacks[0].tp_comm_overlap_cfg = ub_cfg[gpu_type][args.compute_dtype]
    return recipe
'''


RECIPE_70B = (
    "trainer = run.Config(callbacks=[run.Config(\n MegatronCommOverlapCallback,\n tp_comm_overlap=True)])\n"
    "def pretrain_recipe(performance_mode: bool = False):\n"
    "    if performance_mode:\n        recipe = pretrain_performance_optimizations(recipe)\n"
    "    return recipe\n"
    "def pretrain_performance_optimizations(recipe):\n"
    "    recipe.trainer.plugins.grad_reduce_in_fp32 = False\n    return recipe\n"
)
"""NeMo's recipes/llama3_70b.py at a pinned commit, cut down: its callback turns TP overlap on, and
its performance mode reduces gradients in bf16 (as at d2b21556f2)."""


def _recipes(conv):
    """make_nemo_summary.Recipes over the 70B recipe module alone, no userbuffers differences."""
    rec = conv.Recipes("unused")
    files = {"nemo/collections/llm/recipes/llama3_70b.py": RECIPE_70B}
    rec._show = lambda ref, path: files.get(path)  # type: ignore[method-assign]
    rec.ub_differences = lambda ref, name: []  # type: ignore[method-assign]
    return rec


def _llama31_release(conv, repo: Path, files: dict[str, str]):
    """A one-commit dgxc history ("v25.04") of llama3.1/ holding `files` and a README with a
    step-time table heading; its one Readme."""
    (repo / "llama3.1").mkdir(parents=True)
    for name, text in {**files, "README.md": "Training step time (seconds per step)\n"}.items():
        (repo / "llama3.1" / name).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "v25.04")
    (readme,) = conv.readmes(str(repo / ".git"))
    return readme


def test_own_script_settings_read_the_case_of_the_row_size(conv, tmp_path: Path) -> None:
    """dgxc 25.04's llama3.1/pretrain_llama31.py: the `match args.model_size` case names the NeMo
    recipe (whose callback turns TP overlap on) and the userbuffers config by GPU and dtype; the
    fp8 branch is delayed scaling with bf16 gradients. The 8B case sets no overlap."""
    readme = _llama31_release(conv, tmp_path / "dgxc", {"pretrain_llama31.py": OWN_SCRIPT})
    shape = {"tp": 4, "fsdp": False}
    settings, layout, note = conv.own_script_settings(
        readme, "llama3.1/pretrain_llama31.py", "70b", "fp8", "H100", shape, _recipes(conv), "f" * 40
    )
    assert settings == {"tp_comm_overlap": True, "tp_overlap": "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
                        "fp8_recipe": "delayed", "main_grads": "bf16"}  # fmt: skip
    assert layout == {} and "(the workload's own script)" in note
    settings, *_ = conv.own_script_settings(
        readme, "llama3.1/pretrain_llama31.py", "8b", "bf16", "H100", {"tp": 2, "fsdp": False},
        _recipes(conv), "f" * 40,
    )
    assert settings == {}  # the 8B recipe module is not there: nothing read
    # a bf16 row: the recipe's performance mode (performance_mode=True) reduces in bf16
    settings, _, note = conv.own_script_settings(
        readme, "llama3.1/pretrain_llama31.py", "70b", "bf16", "H100", shape, _recipes(conv), "f" * 40
    )
    assert settings["main_grads"] == "bf16"
    assert "pretrain_performance_optimizations, performance_mode=True" in note
    assert "its CUDA graphs (llama31_utils.py auto configs) not read" in note  # no utils here


def test_own_script_cuda_graphs_from_the_launch_and_the_utils(conv, tmp_path: Path) -> None:
    """dgxc 25.04's llama31_utils.py turns an absent --cuda_graphs into False; a launch that
    passes none leaves the row without graphs, one that passes true states them."""
    utils = (
        "def llama31_auto_configs(args):\n    enable_cuda_graphs = args.cuda_graphs\n"
        "    enable_cuda_graphs = False if enable_cuda_graphs is None else bool(int(enable_cuda_graphs))\n"
    )

    def own(name: str, launch: str):
        script = "from llama31_utils import x\n" + OWN_SCRIPT
        files = {"pretrain_llama31.py": script, "llama31_utils.py": utils, "launch.sh": launch}
        readme = _llama31_release(conv, tmp_path / name, files)
        return conv.own_script_settings(readme, "llama3.1/pretrain_llama31.py", "70b", "fp8", "H100",
                                        {"tp": 4, "fsdp": False}, _recipes(conv), "f" * 40)  # fmt: skip

    settings, _, note = own("none", "python3 -m scripts.performance.llm.pretrain_llama31 -g h100\n")
    assert "cuda_graphs" not in settings and "no CUDA graphs (the launch.sh passes no --cuda_graphs" in note
    settings, _, note = own("on", "python3 -m scripts.performance.llm.pretrain_llama31 --cuda_graphs true\n")
    assert settings["cuda_graphs"] is True and "launch.sh --cuda_graphs true" in note



GROK_SCRIPT = '''
def model():
    return run.Config(GPTModel, config=run.Config(MixtralConfig8x7B, num_layers=64, hidden_size=6144))

def pretrain_performance_optimizations(recipe):
    mcomm_overlap_callback = run.Config(
        MegatronCommOverlapCallback,
        tp_comm_overlap=True,
    )
    recipe.trainer.callbacks.extend([run.Config(MegatronTokenDropCallback), mcomm_overlap_callback])
    recipe.trainer.plugins.grad_reduce_in_fp32 = False
    return recipe

def pretrain_recipe(performance_mode: bool = False):
    recipe = run.Partial(pretrain)
    if performance_mode:
        recipe = pretrain_performance_optimizations(recipe)
    return recipe

def override_recipe_configs(args, tp_size):
    recipe = pretrain_recipe(performance_mode=True)
    if args.compute_dtype.lower() == "fp8":
        recipe.trainer.plugins = bf16_with_fp8_mixed()
        recipe.trainer.plugins.grad_reduce_in_fp32 = False
    tp_comm_overlap_cfg = userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192
    tp_comm_overlap_cfg = fdl.cast(run.Config, tp_comm_overlap_cfg)
    recipe.trainer.callbacks[0].tp_comm_overlap_cfg = tp_comm_overlap_cfg
    return recipe
'''
"""NeMo's scripts/performance/llm/pretrain_grok1_314b.py at 7a8f1cc7bc, cut down to what
moe_script_settings reads: its own recipe in performance mode."""

MOE_FILES = {
    "scripts/performance/llm/pretrain_grok1_314b.py": GROK_SCRIPT,
    "nemo/lightning/pytorch/callbacks/moe_token_drop.py": (
        "class MegatronTokenDropCallback(Callback):\n"
        "    def __init__(self, moe_expert_capacity_factor: float = 1.0,\n"
        "                 moe_pad_expert_input_to_capacity: bool = True):\n        pass\n"
    ),
    "nemo/collections/llm/gpt/model/mixtral.py": (
        "class MixtralConfig(GPTConfig):\n    moe_token_dispatcher_type: str = 'alltoall'\n"
        "    moe_router_topk: int = 2\n"
    ),
    "nemo/collections/llm/recipes/precision/mixed_precision.py": (
        "def bf16_with_fp8_mixed():\n    cfg = bf16_mixed()\n    cfg.fp8 = 'hybrid'\n"
        "    cfg.fp8_param_gather = True\n    return cfg\n"
    ),
}


def test_moe_script_settings_read_grok1_s_own_recipe(conv) -> None:
    """The Grok-1 script's performance mode: TP overlap with the configuration the override
    assigns (before it is wrapped), bf16 gradients, token drop at the callback's defaults, the
    Mixtral config's dispatcher; the fp8 branch: delayed scaling, fp8 parameters. Without
    performance mode nothing is read."""
    rec = conv.Recipes("unused")
    rec._show = lambda ref, path: MOE_FILES.get(path)  # type: ignore[method-assign]
    rec.ub_differences = lambda ref, name: []  # type: ignore[method-assign]
    shape = {"tp": 4, "fsdp": False}
    settings, layout, note = conv.moe_script_settings(rec, "f" * 40, "grok1_314b", "bf16", shape)
    assert settings == {
        "tp_comm_overlap": True, "tp_overlap": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
        "main_grads": "bf16", "moe_pad_to_capacity": True, "moe_capacity_factor": 1.0,
        "moe_dispatcher": "alltoall",
    }  # fmt: skip
    assert layout == {} and "MegatronTokenDropCallback()" in note
    fp8, _, note = conv.moe_script_settings(rec, "f" * 40, "grok1_314b", "fp8", shape)
    assert fp8 == {**settings, "fp8_recipe": "delayed", "fp8_params": True}
    assert "fp8_param_gather=True" in note
    plain = dict(MOE_FILES)
    plain["scripts/performance/llm/pretrain_grok1_314b.py"] = GROK_SCRIPT.replace(
        "pretrain_recipe(performance_mode=True)", "pretrain_recipe()"
    )
    rec._show = lambda ref, path: plain.get(path)  # type: ignore[method-assign]
    settings, _, note = conv.moe_script_settings(rec, "f" * 40, "grok1_314b", "bf16", shape)
    assert settings == {} and note.startswith("none read")


def test_launch_cuda_graphs_flag_literal_or_the_script_s_variable(conv) -> None:
    """--cuda_graphs literal in the GPU's branch (Nemotron's GB200 line), or $CUDA_GRAPH resolved
    to the branch's `CUDA_GRAPH=${CUDA_GRAPH:-..}` default (Grok-1's launch.sh); no flag: None."""
    grok = """\
if [ $GPU_TYPE = "gb200" ]; then
  CUDA_GRAPH=${CUDA_GRAPH:-true}
elif [ $GPU_TYPE = "h100" ]; then
  CUDA_GRAPH=${CUDA_GRAPH:-false}
fi
CONFIG_OVERRIDES=" -tp $TP \\
  --cuda_graphs $CUDA_GRAPH \\
"
"""
    gb200 = conv.shell_context("314b", "bf16", "GB200", 256)
    assert conv.launch_cuda_graphs(grok, gb200)[0] is True
    assert conv.launch_cuda_graphs(grok, conv.shell_context("314b", "bf16", "H100", 512))[0] is False
    nemotron = 'if [ $GPU_TYPE = gb200 ]; then\n  CONFIG_OVERRIDES+=" -fsdp 0 --cuda_graphs true "\nfi\n'
    assert conv.launch_cuda_graphs(nemotron, gb200) == (True, "launch.sh --cuda_graphs true")
    assert conv.launch_cuda_graphs(nemotron, conv.shell_context("340b", "bf16", "H100", 256)) == (None, "")
    # set_primary_perf_configs drops CUDA graphs under Megatron-FSDP
    kept, _ = conv.with_launch_graphs({"cuda_graphs": True}, nemotron, gb200, {"fsdp": True})
    assert kept == {}


def test_grok1_gb200_rows_state_their_script_s_settings(records: list[dict]) -> None:
    """The committed file: the 25.05 Grok-1 GB200 rows carry what pretrain_grok1_314b.py at the
    setup.sh's NeMo commit and the launch.sh set (token drop, TP overlap, bf16 gradients, CUDA
    graphs); DeepSeek-V3's state their script's MTP layer and token drop (deepseek_script_settings)."""
    grok = [r for r in records if r["id"].startswith("dgxc-25.05-250400-gb200-grok-1-314b")]
    assert len(grok) == 6
    for r in grok:
        s = r["settings"]
        assert s["moe_pad_to_capacity"] and s["moe_capacity_factor"] == 1.0 and s["cuda_graphs"]
        assert s["tp_comm_overlap"] and s["main_grads"] == "bf16" and r["confidence"] == "medium"
    dsv3 = [r for r in records if "deepseek-v3" in r["id"]]
    assert len(dsv3) == 5 and all(r["model"]["mtp_num_layers"] == 1 for r in dsv3)
    assert all(r["settings"]["moe_capacity_factor"] == 1.0 for r in dsv3)


DSV3_SCRIPT = """\
USE_TOKEN_DROP = True


def override_recipe_configs(args, num_nodes, mbs, gbs, tp_size, pp_size):
    recipe = pretrain_recipe()
    recipe.model.config.recompute_granularity = "selective"
    num_layers_in_middle_pipeline_stages = 64 // pp_size
    recipe.trainer.strategy.num_layers_in_first_pipeline_stage = num_layers_in_middle_pipeline_stages - 1
    recipe.trainer.strategy.num_layers_in_last_pipeline_stage = num_layers_in_middle_pipeline_stages - 2
    callbacks = []
    if USE_TOKEN_DROP:
        callbacks.append(run.Config(MegatronTokenDropCallback))
    comm_overlap_callback = run.Config(MegatronCommOverlapCallback, tp_comm_overlap=False)
    return recipe
"""
DSV3_FILES = {
    "scripts/performance/llm/pretrain_deepseek_v3.py": DSV3_SCRIPT,
    "nemo/collections/llm/recipes/deepseek_v3.py": (
        "def model(use_mtp=False):\n"
        "    if use_mtp:\n"
        "        conf = run.Config(DeepSeekV3Config, mtp_num_layers=1, mtp_loss_scaling_factor=0.1)\n"
        "def pretrain_recipe(name=None, use_mtp: bool = True):\n"
        "    return model(use_mtp)\n"
    ),
    "nemo/lightning/pytorch/callbacks/moe_token_drop.py": (
        "class MegatronTokenDropCallback:\n"
        "    def __init__(self, moe_expert_capacity_factor: float = 1.0,"
        " moe_pad_expert_input_to_capacity: bool = True):\n"
        "        pass\n"
    ),
    "nemo/collections/llm/gpt/model/deepseek.py": (
        "class DeepSeekConfig:\n    moe_token_dispatcher_type: str = 'alltoall'\n"
    ),
}
DSV3_LAUNCH = """\
if [[ $GPU_TYPE = "h100"  ]]; then
  TP=2
  RM='mla_up_proj'
elif [[ $GPU_TYPE = "gb200" ]]; then
  RM='core_attn'
fi
python3 -m scripts.performance.llm.pretrain_deepseek_v3 -tp $TP --recompute_modules $RM
"""


def test_deepseek_script_settings_by_hand(conv) -> None:
    """pretrain_deepseek_v3.py: selective recompute with the launch's per-GPU modules, the first /
    last stages at 64 // pp - 1 / - 2 with the rest even, token drop at the callback's defaults,
    no TP overlap, the recipe's default MTP layer, DeepSeekConfig's dispatcher."""
    rec = conv.Recipes("unused")
    rec._show = lambda ref, path: DSV3_FILES.get(path)  # type: ignore[method-assign]
    h100 = conv.shell_context("671b", "bf16", "H100", 1024)
    shape = {"tp": 2, "pp": 16, "vp": 1, "fsdp": False, "num_layers": 61}
    settings, layout, _ = conv.deepseek_script_settings(rec, "f" * 40, DSV3_LAUNCH, h100, shape)
    assert settings == {
        "recompute_modules": ["mla_up_proj"], "moe_pad_to_capacity": True, "moe_capacity_factor": 1.0,
        "tp_comm_overlap": False, "moe_dispatcher": "alltoall",
    }  # fmt: skip
    assert layout == {"recompute": "selective", "layers_per_stage": [3] + [4] * 14 + [2], "_mtp_num_layers": 1}
    gb200 = conv.shell_context("671b", "bf16", "GB200", 256)
    settings, layout, _ = conv.deepseek_script_settings(rec, "f" * 40, DSV3_LAUNCH, gb200, {**shape, "pp": 4})
    assert settings["recompute_modules"] == ["core_attn"] and layout["layers_per_stage"] == [15, 16, 16, 14]
    # 61 - 7 - 6 = 48 over 6 middle stages; at pp 2 there are none: not stated
    assert conv.uneven_stages(conv.ast.parse(DSV3_SCRIPT).body[1], 8, 61)[0] == [7] + [8] * 6 + [6]
    assert conv.uneven_stages(conv.ast.parse(DSV3_SCRIPT).body[1], 2, 61)[0] is None
    no_mtp = dict(DSV3_FILES)
    no_mtp["nemo/collections/llm/recipes/deepseek_v3.py"] = DSV3_FILES[
        "nemo/collections/llm/recipes/deepseek_v3.py"
    ].replace("use_mtp: bool = True", "use_mtp: bool = False")
    rec._show = lambda ref, path: no_mtp.get(path)  # type: ignore[method-assign]
    _, layout, _ = conv.deepseek_script_settings(rec, "f" * 40, DSV3_LAUNCH, h100, shape)
    assert "_mtp_num_layers" not in layout
