"""bench/heldout/mlperf_training_summary.yaml (MLPerf Training GPT-3 175B and Llama 3.1 405B
results run with NVIDIA NeMo, held-out evaluation data, never fitted): every record loads, prices
and reproduces its tokens/s from its own derivation, and the converter's rules (the MLLOG reading,
the bash and Hydra resolution of a config, the layout it implies) hold on hand-written inputs."""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

import pytest
import yaml

from cost_models.estimate import estimate
from cost_models.params import total_params
from planner.validate import RunRecord, record_inputs, scale_out_gb_per_s, validate_file

ROOT = Path(__file__).resolve().parents[3]
HELDOUT = ROOT / "bench" / "heldout"
SUMMARY = HELDOUT / "mlperf_training_summary.yaml"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return yaml.safe_load(SUMMARY.read_text())


@pytest.fixture(scope="module")
def conv():
    spec = importlib.util.spec_from_file_location(
        "make_mlperf_summary_t", HELDOUT / "make_mlperf_summary.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_record_passes_the_schema_and_prices(records: list[dict]) -> None:
    assert len(records) == 37
    assert len({r["id"] for r in records}) == len(records)
    for r in records:
        checked = RunRecord.model_validate(r).model_dump()
        e = estimate(*record_inputs(checked))
        assert e.tokens_per_s_per_gpu > 0, r["id"]
        assert r["framework"] == "megatron" and r["confidence"] in ("high", "medium")
    rows = validate_file(SUMMARY)
    assert all(row.error is None for row in rows), [(row.id, row.error) for row in rows]


def test_header_counts_and_refusals() -> None:
    header = [ln for ln in SUMMARY.read_text().splitlines() if ln.startswith("#")]
    assert "# 37 records; rows not transcribed (27):" in header
    text = "\n".join(header)
    # the four GPT-3 directories whose logs carry no per-step timing, one of them a resubmission
    assert text.count("no per-step train_step_timing in the logs") == 3
    assert text.count("duplicate: its result files carry the MLLOG lines") == 5
    assert "v4.1 NVIDIA/results/eos-dfw_n1452_ngc24.04_nemo/gpt3 -- duplicate" in text


def test_each_record_reproduces_its_tokens_from_its_derivation(records: list[dict]) -> None:
    """tokens/s/GPU = GBS x sequence / median step / GPUs with the numbers the derivation states,
    the median step being the median of the per-file medians it lists."""
    for r in records:
        d = r["tokens_derivation"]
        step = float(re.search(r"median step ([\d.]+) s", d).group(1))
        per_file = [float(x) for x in re.search(r"medians \[([^\]]+)\]", d).group(1).split(", ")]
        assert statistics.median(per_file) == pytest.approx(step, rel=1e-6), r["id"]
        gbs, seq, step2, gpus = re.search(
            r"(\d+) seqs x (\d+) tokens / ([\d.]+) s / (\d+) GPUs", d
        ).groups()
        assert float(step2) == step
        assert int(gbs) == r["layout"]["global_batch_seqs"] and int(seq) == r["model"]["seq_len"]
        assert int(gpus) == r["num_gpus"]
        tokens = int(gbs) * int(seq) / step / int(gpus)
        assert tokens == pytest.approx(r["measured_tokens_per_s_per_gpu"], abs=0.06), r["id"]


def test_layouts_are_whole_and_as_the_configs_set_them(records: list[dict]) -> None:
    for r in records:
        lay = r["layout"]
        assert lay["tp"] * lay["pp"] * lay["cp"] * lay["dp"] == r["num_gpus"], r["id"]
        assert lay["global_batch_seqs"] % (lay["micro_batch"] * lay["dp"]) == 0
        assert lay["zero_stage"] == 1 and lay["recompute"] == "none" and lay["ep"] == 1
        assert lay["precision"] in ("fp8", "nvfp4")
        settings = r.get("settings", {})
        assert (lay["precision"] == "fp8") == ("fp8_recipe" in settings)
        if r["model"]["num_layers"] == 126:  # Llama 3.1 405B: 126 layers + embedding + loss
            assert lay["account_for_embedding_in_pipeline_split"] is True
            assert (126 + 2) % (lay["pp"] * lay["vp"]) == 0
        else:
            assert r["model"]["seq_len"] == 2048 and lay["cp"] == 1
    ids = {r["id"]: r for r in records}
    v31 = ids["mlperf-v3.1-nvidia-eos-dfw-h100-gpt3-175b-10752gpu"]
    assert (v31["layout"]["dp"], v31["layout"]["vp"], v31["layout"]["micro_batch"]) == (336, 12, 1)
    assert v31["settings"] == {
        "fp8_recipe": "delayed",
        "main_grads": "bf16",
        "tp_comm_overlap": True,
    }
    fp4 = ids["mlperf-v5.1-nvidia-hsg-gb200-llama3.1-405b-2560gpu"]
    assert fp4["layout"]["precision"] == "nvfp4" and fp4["gpus_per_node"] == 72
    assert fp4["settings"] == {"main_grads": "bf16", "tp_comm_overlap": False,
                               "cuda_graphs": True, "full_iteration_cuda_graph": True}  # fmt: skip
    # the gradients' dtype is the implementation's: stated (bf16) everywhere but Oracle's v4.1
    # submission, which ships no conf
    unstated = sorted(r["id"] for r in records if "main_grads" not in r.get("settings", {}))
    assert unstated == [i for i in sorted(ids) if "-oracle-" in i]
    assert {r["settings"]["main_grads"] for r in records if r["id"] not in unstated} == {"bf16"}


class _Files:
    """A stand-in for the converter's mirror: path -> text."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def show(self, path: str) -> str | None:
        return self.files.get(path)


def test_gradient_dtype_from_the_implementation(conv) -> None:
    nemo2 = "MegatronMixedPrecision(grad_reduce_in_fp32=False)\nDistributedDataParallelConfig(\n    grad_reduce_in_fp32=False,\n)"
    assert conv.grads_of(_Files({"i/pretrain.py": nemo2}), "i", True)[0] == "bf16"
    mixed = nemo2.replace("False)\nD", "True)\nD")
    assert conv.grads_of(_Files({"i/pretrain.py": mixed}), "i", True) is None  # disagree: unknown
    optim = "name: distributed_fused_adam\ncontiguous_grad_buffer: True\ngrad_sync_dtype: bf16\n"
    files = _Files({"i/conf/optim/distributed_fused_adam.yaml": optim})
    assert conv.grads_of(files, "i", True)[0] == "bf16"
    assert conv.grads_of(files, "i", False) is None  # fused_adam: not this file's setting
    v30 = "model:\n  optim:\n    name: distributed_fused_adam\n    grad_sync_dtype: bf16\n  other: 1\n"
    assert conv.grads_of(_Files({"i/conf/megatron_gpt_config.yaml": v30}), "i", True)[0] == "bf16"
    plain = v30.replace("distributed_fused_adam", "fused_adam")
    assert conv.grads_of(_Files({"i/conf/megatron_gpt_config.yaml": plain}), "i", True) is None


def test_sources_name_a_container_heldout_accuracy_reads(records: list[dict]) -> None:
    spec = importlib.util.spec_from_file_location(
        "heldout_accuracy_m", HELDOUT.parent / "heldout_accuracy.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    got = {module.container_of(r) for r in records}
    assert got == {"23.04", "23.09", "24.04", "24.09", "25.01", "25.04", "25.09"}


def test_measured_figures_are_plausible_shares_of_peak(records: list[dict]) -> None:
    """Model FLOPs (6 x parameters + 12 x layers x sequence x hidden for attention, per token) at
    the measured tokens/s are 20-55 % of the GPU's dense peak at the run's precision."""
    for r in records:
        checked = RunRecord.model_validate(r).model_dump()
        model = record_inputs(checked)[0]
        m = r["model"]
        per_token = 6 * total_params(model) + 12 * m["num_layers"] * m["seq_len"] * m["hidden_size"]
        gpu = json.loads((ROOT / "models_zoo" / "gpus" / f"{r['gpu']}.json").read_text())
        key = {"fp8": "peak_fp8_tflops", "nvfp4": "peak_fp4_tflops"}[r["layout"]["precision"]]
        share = per_token * r["measured_tokens_per_s_per_gpu"] / (gpu[key] * 1e12)
        assert 0.20 < share < 0.55, (r["id"], share)


def test_interconnect_text_reads_back_as_the_nic_rate_per_gpu(conv) -> None:
    h100 = {
        "accelerators_per_node": "8",
        "accelerator_interconnect": "NVLINK Gen4 900 GB/s + NVSWITCH Gen3",
        "host_networking": "Storage+Management: 1x NVIDIA BlueField 2 DPU 100Gb/s, Compute: 8x "
        "NVIDIA ConnectX-7 IB NDR 400Gb/s",
    }
    text = conv.interconnect_of(h100, "h100-sxm-80gb")
    assert text == "NVLink Gen4 900 GB/s + NVSwitch Gen3; 8x 400Gb/s ConnectX-7 IB NDR per node"
    assert scale_out_gb_per_s(text, 8) == 50.0
    gb200 = {
        "accelerators_per_node": "4",
        "accelerator_interconnect": "NVLINK Gen5 1800 GB/s + NVSWITCH Gen5",
        "host_networking": "4x ConnectX-7 IB NDR 400Gb/s",
    }
    text = conv.interconnect_of(gb200, "gb200")
    assert "per GPU" in text and scale_out_gb_per_s(text, 72) == 50.0
    roce = {"accelerators_per_node": "8", "host_networking": "ROCE2; PCIe-NIC: 500 GB/s"}
    assert conv.interconnect_of(roce, "h100-sxm-80gb") == "RoCE v2, NIC count and rate not stated"
    assert scale_out_gb_per_s("RoCE v2, NIC count and rate not stated", 8) is None


# ------------------------------------------------------------------------------ the logs


def _line(key, value, step=None, file="/workspace/llm/custom_callbacks.py", t=0, **meta) -> str:
    md = {"file": file, "lineno": 1, **meta}
    if step is not None:
        md["step"] = step
    event = {"time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value,
             "metadata": md}  # fmt: skip
    return ":::MLLOG " + json.dumps(event)


def test_log_facts_and_the_step_time_rule(conv) -> None:
    """GBS 4 x seq 8 = 32 tokens a step, the step metadata in tokens; 8 per-step timings, of
    which the first 5 are dropped: median of 2.0, 2.2, 2.1 = 2.1 s; a per-block average from
    mlperf_common's logging.py is not a step."""
    times = [9.0, 5.0, 3.0, 2.5, 2.4, 2.0, 2.2, 2.1]
    steps = [_line("tracked_stats", {"train_step_timing": s}, step=32 * (i + 1))
             for i, s in enumerate(times)]  # fmt: skip
    block = _line("tracked_stats", {"train_step_time": 99.0, "throughput": 1.0}, step=0,
                  file="/usr/lib/mlperf_common/callbacks/logging.py")  # fmt: skip
    lines = [
        "noise before",
        _line("submission_platform", "2xNVIDIA DGX H100"),
        _line("global_batch_size", 4),
        _line("gradient_accumulation_steps", 2.0),
        _line("max_sequence_length", 8),
        _line("block_start", None, t=1000, first_epoch_num=0, epoch_count=96),
        *steps,
        _line("block_stop", None, t=7600, first_epoch_num=0, epoch_count=96),
        "0: " + block,
    ]
    facts = conv.log_facts(conv.mllog("\n".join(lines)))
    assert (facts.platform, facts.gbs, facts.ga, facts.seq) == ("2xNVIDIA DGX H100", 4, 2, 8)
    assert facts.steps == times and facts.key == "train_step_timing"
    assert conv.step_unit(facts) == "tokens"
    assert conv.file_median(facts.steps) == pytest.approx(2.1)
    assert conv.platform_count(facts.platform) == 2
    # 2 nodes x 8 GPUs: 4 x 8 tokens / 2.1 s / 16 GPUs
    assert conv.tokens_per_s_per_gpu(4, 8, 2.1, 16) == pytest.approx(32 / 2.1 / 16)
    assert facts.blocks == [(6600, 96)]
    assert conv.block_step_s(facts) is None  # one block only: the first is left out
    facts.blocks.append((6000, 96))  # 96 tokens = 3 steps in 6 s
    assert conv.block_step_s(facts) == pytest.approx(2.0)
    facts.marks[3] += 1
    assert conv.step_unit(facts) is None
    with pytest.raises(ValueError, match="warm-up"):
        conv.file_median(times[:5])


def test_mllog_fingerprint_ignores_sysjson_and_other_lines(conv) -> None:
    a = _line("global_batch_size", 4) + "\n" + _line("max_sequence_length", 8)
    b = ':::SYSJSON {"submitter": "NVIDIA"}\n0: ' + a.replace("\n", "\nnoise\n")
    assert conv.mllog_fingerprint([a]) == conv.mllog_fingerprint([b])
    assert conv.mllog_fingerprint([a]) != conv.mllog_fingerprint([a + "\n" + _line("seed", 1)])


# ------------------------------------------------------------------------------ the configs


CONFIG = """\
## DL params
export MINIBS="${MINIBS:=6}"
export TENSOR_MODEL_PARALLEL="${TP:=4}"   #  training.model.tensor_model_parallel_size
export PIPELINE_MODEL_PARALLEL=6
export DGXNNODES="${DGXNNODES:=16}"
export DGXSYSTEM=$(basename $(readlink -f ${BASH_SOURCE[0]}) | sed 's/^config_//')
export WALLTIME_MINUTES=180
export WALLTIME=$(( (${NEXP:-1} * WALLTIME_MINUTES) ))
if [[ "${MLPERF_VERSION:-}" == "v31" ]]; then
    source $(dirname ${BASH_SOURCE[0]})/config_common_v31.sh
else
    source $(dirname ${BASH_SOURCE[0]})/config_common.sh
fi
source $(dirname ${BASH_SOURCE[0]})/config_fp8.sh
export MICRO_BATCH_SIZE=1
export TP_COMM_OVERLAP=True
export LAYER_CUDA_GRAPH=1
unset UB_SKIPMC
if [[ $(($MINIBS % PIPELINE_MODEL_PARALLEL)) != 0 ]]; then
    echo "MINIBS should be divisble by PP"
    exit 1
fi
if [[ "$(hostname)" == "x" ]]; then export BUCKET_CAP_MB=1; fi
export INTERLEAVED_PIPELINE=8
"""
COMMON = """\
export USE_DIST_OPTIMIZER=True
export MICRO_BATCH_SIZE=2
: "${LOAD_MINIMAL_NUM_SAMPLES:=0}"
if [[ "${LOAD_MINIMAL_NUM_SAMPLES}" -eq 1 ]]; then
  export MAX_STEPS=500
fi
export UB_SKIPMC=1
export FP8_PARAMS=True
export NVTE_FWD_LAYERNORM_SM_MARGIN=8
"""
FP8 = "export FP8=True\nexport FP8_HYBRID=True\nexport FP8_AMAX_HISTORY=1024\n"
CUSTOM = """\
trainer:
  devices: ${oc.decode:${oc.env:DGXNGPU,8}}
model:
  micro_batch_size: ${oc.decode:${oc.env:MICRO_BATCH_SIZE}}
  tensor_model_parallel_size: ${oc.decode:${oc.env:TENSOR_MODEL_PARALLEL}}
  pipeline_model_parallel_size: ${oc.decode:${oc.env:PIPELINE_MODEL_PARALLEL}}
  virtual_pipeline_model_parallel_size: ${oc.decode:${oc.env:INTERLEAVED_PIPELINE,12}}
  encoder_seq_length: 2048
  num_layers: ${oc.decode:${oc.env:NUM_LAYERS,96}}
  hidden_size: ${oc.decode:${oc.env:HIDDEN_SIZE,12288}}
  ffn_hidden_size: ${oc.decode:${oc.env:FFN_HIDDEN_SIZE,${multiply:4, ${.hidden_size}}}}
  num_attention_heads: ${oc.decode:${oc.env:NUM_ATTENTION_HEADS,96}}
  hidden_dropout: 0.0
  normalization: 'layernorm1p'
  fp8_params: ${oc.decode:${oc.env:FP8_PARAMS,False}}
  enable_cuda_graph: ${oc.decode:${oc.env:LAYER_CUDA_GRAPH,False}}
  activations_checkpoint_granularity: ${oc.decode:${oc.env:ACT_CKPT_GRANULARITY,null}}
  sequence_parallel: ${oc.decode:${oc.env:SEQ_PARALLEL,True}}
  fp8: ${oc.decode:${oc.env:FP8,False}}
  fp8_hybrid: ${oc.decode:${oc.env:FP8_HYBRID,False}}
  fp8_amax_history_len: ${oc.decode:${oc.env:FP8_AMAX_HISTORY,1}}
  ub_tp_comm_overlap: ${oc.decode:${oc.env:TP_COMM_OVERLAP,False}}
"""
FILES = {"config_X.sh": CONFIG, "config_common.sh": COMMON, "config_fp8.sh": FP8}


def _config(conv, files: dict[str, str], custom: str = CUSTOM, launcher: str = ""):
    shell = conv.Shell(files.get)
    shell.source("config_X.sh")
    knobs = conv.Knobs()
    knobs.add_yaml(custom, "conf/custom.yaml")
    knobs.add_launcher(launcher, "run_and_time.sh")
    return conv.Config("S/benchmarks/gpt3/implementations/x/config_X.sh", "x",
                       conv.Resolved(shell, knobs))  # fmt: skip


def test_the_shell_sources_in_order_and_keeps_what_it_cannot_know(conv) -> None:
    cfg = _config(conv, FILES)
    sh = cfg.resolved.shell
    assert sh.sourced == ["config_X.sh", "config_common.sh", "config_fp8.sh"]
    assert sh.missing == [] and sh.exits == []  # 6 % 6 == 0: no exit
    env = sh.env
    assert (env["MINIBS"], env["TP"], env["TENSOR_MODEL_PARALLEL"]) == ("6", "4", "4")
    assert env["WALLTIME"] == "180" and env["LOAD_MINIMAL_NUM_SAMPLES"] == "0"
    assert "MAX_STEPS" not in env and "UB_SKIPMC" not in env  # false test; unset after the set
    assert env["MICRO_BATCH_SIZE"] == "1"  # the config's line after sourcing config_common wins
    assert {"DGXSYSTEM", "BUCKET_CAP_MB"} <= sh.unknown  # a command's output; an unknown test
    with pytest.raises(conv.Unresolved):
        cfg.resolved.var("BUCKET_CAP_MB")
    odd = dict(FILES, **{"config_X.sh": CONFIG.replace("MINIBS:=6", "MINIBS:=7")})
    assert _config(conv, odd).resolved.shell.exits == ["exit 1"]


def test_hydra_knobs_take_the_variable_then_launcher_then_conf_default(conv) -> None:
    r = _config(conv, FILES, launcher=': "${SEQ_PARALLEL:=False}"\n').resolved
    assert r.knob("virtual_pipeline_model_parallel_size") == "8"  # set by the config
    assert r.knob("sequence_parallel") == "False"  # run_and_time.sh's default
    assert r.knob("devices") == "8" and r.knob("fp8_amax_history_len") == "1024"
    assert r.knob("activations_checkpoint_granularity") == "null"  # the conf's default
    assert r.knob("ffn_hidden_size") is None  # an expression default: the caller's 4 x hidden
    assert r.knob("normalization") == "layernorm1p" and r.knob("context_parallel_size") is None
    scope = ("  cuda_graph_scope: ${oc.decode:${oc.env:CUDA_GRAPH_SCOPE,${if:${eq:'1',"
             "${oc.env:FULL_CUDA_GRAPH,0}},'full_iteration','full'}}}\n")  # fmt: skip
    files = dict(FILES, **{"config_fp8.sh": FP8 + "export FULL_CUDA_GRAPH=1\n"})
    assert _config(conv, files, custom=CUSTOM + scope).resolved.cuda_graph_scope() == (
        "full_iteration"
    )
    assert _config(conv, FILES, custom=CUSTOM + scope).resolved.cuda_graph_scope() == "full"


def test_the_layout_a_config_implies(conv) -> None:
    """16 nodes x 8 GPUs do not split into TP 4 x PP 6 = 24; 12 nodes do: DP 96 / 24 = 4,
    GBS = MINIBS 6 x DP 4 = 24, GA = MINIBS 6 / MBS 1 = 6."""
    cfg = _config(conv, FILES)
    shape = conv.shape_of(cfg.resolved)
    assert (shape.gpus, shape.tp * shape.pp) == (128, 24)
    assert conv.mismatch(shape, 16, 8, shape.gbs, 6) is not None  # 128 GPUs do not split by 24
    files = dict(FILES, **{"config_X.sh": CONFIG.replace("DGXNNODES:=16", "DGXNNODES:=12")})
    cfg = _config(conv, files)
    shape = conv.shape_of(cfg.resolved)
    assert (shape.dp, shape.gbs, shape.ga) == (4, 24, 6)
    assert conv.mismatch(shape, 12, 8, 24, 6) is None
    assert "GBS 6 x DP 4 = 24" in conv.mismatch(shape, 12, 8, 48, 6)
    layout, settings, _ = conv.layout_and_settings(cfg)
    assert layout == {"tp": 4, "pp": 6, "dp": 4, "cp": 1, "ep": 1, "vp": 8,
                      "sequence_parallel": True, "zero_stage": 1, "micro_batch": 1,
                      "global_batch_seqs": 24, "recompute": "none", "precision": "fp8"}  # fmt: skip
    assert settings == {"fp8_recipe": "delayed", "fp8_params": True, "tp_comm_overlap": True,
                        "cuda_graphs": True}  # fmt: skip
    model, _ = conv.model_of(cfg, "gpt3", 2048)
    assert (model["num_layers"], model["ffn_hidden_size"], model["hidden_dropout"]) == (
        96, 49152, False)  # fmt: skip
    fp4 = dict(files, **{"config_fp8.sh": "export FP4=True\nexport FP4_RECIPE=nvfp4\n"})
    custom = CUSTOM + "  fp4: ${oc.decode:${oc.env:FP4,False}}\n"
    custom += "  fp4_recipe: ${oc.decode:${oc.env:FP4_RECIPE,nvfp4}}\n"
    layout, settings, _ = conv.layout_and_settings(_config(conv, fp4, custom=custom))
    assert layout["precision"] == "nvfp4" and "fp8_recipe" not in settings
    assert "fp8_params" not in settings  # FP8_PARAMS counts under FP8 only
    with pytest.raises(ValueError, match="encoder_seq_length"):
        conv.model_of(cfg, "gpt3", 4096)


def test_ids_and_containers(conv) -> None:
    assert conv.system_slug("eos-dfw_n1344_ngc23.09_nemo", "NVIDIA") == "eos-dfw"
    assert conv.system_slug("coreweave_hgxh100_n192_ngc23.04_pytorch", "NVIDIA_CoreWeave") == (
        "hgxh100"
    )
    assert conv.system_slug("1536xBM.GPU.H100.8", "Oracle") == "bm.gpu.h100.8"
    assert conv.system_slug("hpg.dgxb200x8.n32", "University-of-Florida") == "hpg.dgxb200x8"
    assert conv.container_of(None, "tyche_ngpu512_ngc25.04_nemo", {}, "") == (
        "25.04", "directory tyche_ngpu512_ngc25.04_nemo")  # fmt: skip
    version, where = conv.container_of(
        None, "nebius_h200_n64", {"framework_name": "ngc25.01_nemo"}, ""
    )
    assert version == "25.01" and "framework_name" in where
    assert conv.gpu_of({"accelerator_model_name": "NVIDIA Blackwell Ultra GPU (GB300)"}) == "gb300"
    assert conv.gpu_of({"accelerator_model_name": "NVIDIA H200-SXM5-141GB"}) == "h200-sxm-141gb"
    with pytest.raises(ValueError, match="not an H100"):
        conv.gpu_of({"accelerator_model_name": "Intel Gaudi2"})
