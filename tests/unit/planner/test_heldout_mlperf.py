"""bench/heldout/mlperf_training_summary.yaml (MLPerf Training GPT-3 175B, Llama 3.1 405B and
Llama 3.1 8B results run with NVIDIA NeMo, held-out evaluation data, never fitted): every record
loads, prices and reproduces its tokens/s from its own derivation, and the converter's rules (the
MLLOG reading, the bash and Hydra resolution of a config, the layout it implies) hold on
hand-written inputs."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
import yaml
from factories import load_script

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
    return load_script(HELDOUT / "make_mlperf_summary.py")  # registered: its dataclasses look it up


def test_every_record_passes_the_schema_and_prices(records: list[dict]) -> None:
    assert len(records) == 66
    assert sum("-llama3.1-8b-" in r["id"] for r in records) == 29
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
    assert "# 66 records; rows not transcribed (37):" in header
    text = "\n".join(header)
    eight_b = [ln for ln in header if ln.endswith("llama31_8b") or "/llama31_8b -- " in ln]
    assert len(eight_b) == 10  # of the 39 llama31_8b results directories, 29 are records
    # AMD MI350X / MI355X: refused by accelerator; B300 is a record (three of the four B300
    # directories; Dell's matches four configs that differ and none names its system)
    assert sum("-b300-llama3.1-8b-" in ln for ln in text.splitlines()) == 0
    assert "1xXE9780x8B300-SXM-270GB/llama31_8b -- 4 configs match with different settings" in text
    assert text.count("'AMD Instinct MI35") == 3
    # AMD's and GigaComputing's own implementations; Oracle ships configs and launch scripts only
    assert sum("llama31_8b -- implementation not NeMo" in ln for ln in header) == 5
    assert "llama31_8b/ itself: config_*.sh, run.sub, run_and_time.sh, run_llama31-8b.sh" in text
    # Lambda's only config sources a config the submission lacks
    assert "sources config_GB200_18x4x1xtp1pp1cp2_8b.sh, not in the submission" in text
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
        # 6 significant digits each: the median of an even count of rounded per-file medians
        # (the mean of the middle two) may differ from the rounded median by one unit in the 6th
        ulp = 10 ** (math.floor(math.log10(step)) - 5)
        assert statistics.median(per_file) == pytest.approx(step, abs=ulp), r["id"]
        gbs, seq, step2, gpus = re.search(
            r"(\d+) seqs x (\d+) tokens / ([\d.]+) s / (\d+) GPUs", d
        ).groups()
        assert float(step2) == step
        assert int(gbs) == r["layout"]["global_batch_seqs"] and int(seq) == r["model"]["seq_len"]
        assert int(gpus) == r["num_gpus"]
        tokens = int(gbs) * int(seq) / step / int(gpus)
        # the figure is rounded to 0.1, the step printed to 6 digits (half a unit: 8B rows at
        # 20,000-47,000 tokens/s move by up to 0.1 with it)
        slack = 0.05 + tokens * ulp / 2 / step
        assert tokens == pytest.approx(r["measured_tokens_per_s_per_gpu"], abs=slack), r["id"]


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
        elif r["model"]["num_layers"] == 32:  # Llama 3.1 8B: no pipeline, at most TP 2
            assert r["model"]["seq_len"] == 8192 and r["model"]["vocab_size"] == 128256
            assert (lay["pp"], lay["vp"]) == (1, 1) and lay["tp"] <= 2
            assert lay["account_for_embedding_in_pipeline_split"] is False
            assert 128256 % (128 * lay["tp"]) == 0  # NeMo pads to 128 x TP: no padding here
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
                               "cuda_graphs": True, "full_iteration_cuda_graph": True,
                               "dp_bucket_elements": 134_217_728}  # fmt: skip
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
    module = load_script(HELDOUT.parent / "heldout_accuracy.py")
    got = {module.container_of(r) for r in records}
    assert got == {"23.04", "23.09", "24.04", "24.09", "25.01", "25.04", "25.08", "25.09"}


LOW_SHARE = {
    "mlperf-v5.1-nvidia-theia-gb300-llama3.1-8b-512gpu": "8B strong-scaled: TP 2 x CP 4 split "
    "each sequence over 8 GPUs, 1024 tokens per GPU in an 85 ms step (block wall clock agrees)",
    "mlperf-v5.1-nvidia-tyche-gb200-llama3.1-8b-512gpu": "the same layout on GB200, 89 ms steps",
    "mlperf-v5.1-nvidia-theia-gb300-llama3.1-8b-8gpu": "NVFP4 on GB300 (FP4 dense peak 3 x its "
    "FP8): only the linear layers' GEMMs run in FP4; 1.17 x the GB200 row of the same layout",
    **{
        f"mlperf-v5.1-{system}-b300-llama3.1-8b-8gpu": "NVFP4 on B300 (FP4 dense peak 3 x its "
        "FP8, as GB300): only the linear layers' GEMMs run in FP4"
        for system in ("lenovo-sr680av4-8xb300-sxm", "nebius-b300")
    },
}
"""Records measured below 20 % of the precision's dense peak, and why (12-20 % for them)."""


def test_measured_figures_are_plausible_shares_of_peak(records: list[dict]) -> None:
    """Model FLOPs (6 x parameters + 12 x layers x sequence x hidden for attention, per token) at
    the measured tokens/s are 20-55 % of the GPU's dense peak at the run's precision (12-20 % for
    the LOW_SHARE rows)."""
    for r in records:
        checked = RunRecord.model_validate(r).model_dump()
        model = record_inputs(checked)[0]
        m = r["model"]
        per_token = 6 * total_params(model) + 12 * m["num_layers"] * m["seq_len"] * m["hidden_size"]
        gpu = json.loads((ROOT / "models_zoo" / "gpus" / f"{r['gpu']}.json").read_text())
        key = {"fp8": "peak_fp8_tflops", "nvfp4": "peak_fp4_tflops"}[r["layout"]["precision"]]
        share = per_token * r["measured_tokens_per_s_per_gpu"] / (gpu[key] * 1e12)
        low = 0.12 if r["id"] in LOW_SHARE else 0.20
        assert low < share < 0.55, (r["id"], share)
        assert (share < 0.20) == (r["id"] in LOW_SHARE), (r["id"], share)


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


def test_the_ddp_bucket_a_nemo2_implementation_hands_megatron(conv) -> None:
    """NeMo 2's pretrain.py passes the conf's optim.bucket_size to megatron-core's DDP config:
    the config's BUCKET_SIZE, else the conf default, becomes dp_bucket_elements; NeMo 1 (no such
    call) and overlap_grad_reduce off state nothing / refuse."""
    ddp = ("ddp=DistributedDataParallelConfig(\n    check_for_nan_in_grad=False,\n"
           "    overlap_grad_reduce=overlap_grad_reduce,\n    bucket_size=bucket_size,\n)")  # fmt: skip
    custom = CUSTOM + ("  optim:\n    bucket_size: ${oc.decode:${oc.env:BUCKET_SIZE,134217728}}\n"
                       "    overlap_grad_reduce: ${oc.decode:${oc.env:OVERLAP_GRAD_REDUCE,True}}\n")  # fmt: skip
    cfg = _config(conv, FILES, custom=custom)
    assert conv.ddp_bucket_elements(cfg) is None  # no pretrain.py: NeMo 1, Apex buckets
    cfg.pretrain = ddp
    assert conv.ddp_bucket_elements(cfg) == 134_217_728  # the conf default
    files = dict(FILES, **{"config_fp8.sh": FP8 + "export BUCKET_SIZE=768000000\n"})
    cfg = _config(conv, files, custom=custom)
    cfg.pretrain = ddp
    assert conv.ddp_bucket_elements(cfg) == 768_000_000
    assert conv.layout_and_settings(cfg)[1]["dp_bucket_elements"] == 768_000_000
    cfg.pretrain = ddp.replace("bucket_size=bucket_size,\n", "")
    assert conv.ddp_bucket_elements(cfg) is None  # the DDP config does not take it
    off = dict(
        files, **{"config_fp8.sh": files["config_fp8.sh"] + "export OVERLAP_GRAD_REDUCE=False\n"}
    )
    cfg = _config(conv, off, custom=custom)
    cfg.pretrain = ddp
    with pytest.raises(ValueError, match="OVERLAP_GRAD_REDUCE False"):
        conv.ddp_bucket_elements(cfg)


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


# ------------------------------------------------------------------------------ Llama 3.1 8B


def test_an_8b_record_read_by_hand(records: list[dict]) -> None:
    """v5.1 NVIDIA tyche_ngpu72_ngc25.09_nemo (GB200 NVL72, 18 trays x 4), read by hand from the
    files. README-tyche_ngpu72_ngc25.09_nemo.md names config_GB200_18x4x1xtp1pp1cp2_8b.sh:
    MINIBS 1, TENSOR_MODEL_PARALLEL 1, PIPELINE_MODEL_PARALLEL 1, INTERLEAVED_PIPELINE null,
    CONTEXT_PARALLEL 2, MICRO_BATCH_SIZE 1, SEQ_PARALLEL False, TP_COMM_OVERLAP False, DGXNNODES 18
    x DGXNGPU 4: DP 72 / 2 = 36, GBS 36, GA 1; it sources config_common.sh (FP8 True, FP8_RECIPE
    tensorwise, FP8_PARAM_GATHER True, USE_DIST_OPTIMIZER True), config_common_cg.sh
    (FULL_CUDA_GRAPH 1, MCORE_CUDA_GRAPH 1) and config_common_8b.sh (MODEL_SIZE 8b,
    OVERWRITTEN_NUM_LAYERS 32, LOG_EVERY_N_STEPS 32, BUCKET_SIZE 768000000, which pretrain.py hands
    megatron-core's DistributedDataParallelConfig). result_0.txt holds 149 train_step_time lines
    at steps 31, 63, 95, ... (samples_count 1152, 2304, ...: 32 x 36 a line), the first 0.159997 s;
    without the first 5, 144 lines, the middle two 0.168586 and 0.168603 s: median 0.168594 s."""
    r = {x["id"]: x for x in records}["mlperf-v5.1-nvidia-tyche-gb200-llama3.1-8b-72gpu"]
    assert (r["gpu"], r["num_gpus"], r["gpus_per_node"]) == ("gb200", 72, 72)
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["vp"]) == (1, 1, 2, 36, 1)
    assert (lay["micro_batch"], lay["global_batch_seqs"], lay["zero_stage"]) == (1, 36, 1)
    assert (lay["precision"], lay["sequence_parallel"], lay["recompute"]) == ("fp8", False, "none")
    assert r["settings"] == {"fp8_recipe": "tensorwise", "fp8_params": True,
                             "tp_comm_overlap": False, "main_grads": "bf16",
                             "cuda_graphs": True, "full_iteration_cuda_graph": True,
                             "dp_bucket_elements": 768_000_000}  # fmt: skip
    assert r["model"]["num_layers"] == 32 and r["model"]["seq_len"] == 8192
    d = r["tokens_derivation"]
    per_file = [float(x) for x in re.search(r"medians \[([^\]]+)\]", d).group(1).split(", ")]
    assert len(per_file) == 10 and per_file[0] == 0.168594  # result_0.txt, as read above
    assert "a line every 32 (LOG_EVERY_N_STEPS 32)" in d
    step = statistics.median(per_file)  # the mean of the 5th and 6th of the 10
    assert step == pytest.approx(0.170846, abs=1e-6)
    assert 36 * 8192 / step / 72 == pytest.approx(r["measured_tokens_per_s_per_gpu"], abs=0.1)
    assert "named by README-tyche_ngpu72_ngc25.09_nemo.md" in r["notes"]


def test_timing_lines_every_n_steps(conv) -> None:
    """llama31_8b's lines come every LOG_EVERY_N_STEPS = 32 steps; with GBS 32 the step metadata
    alone would read as sequences: samples_count (32 x 32 a line) says steps. Blocks of 342 steps
    (10,944 sequences) in 51.3 s: 0.15 s a step."""
    lines = [_line("global_batch_size", 32), _line("max_sequence_length", 8)]
    for i in range(8):
        lines.append(_line("tracked_stats", {"train_step_time": 0.15}, step=32 * i + 31,
                           samples_count=1024 * (i + 1)))  # fmt: skip
    for t0 in (0, 60000, 120000):
        lines.append(_line("block_start", None, t=t0, samples_count=10944))
        lines.append(_line("block_stop", None, t=t0 + 51300, samples_count=10944))
    facts = conv.log_facts(conv.mllog("\n".join(lines)))
    assert conv.step_unit(facts) == "32 steps"
    assert conv.sample_block_step_s(facts) == pytest.approx(0.15)
    assert facts.blocks == []  # no epoch_count: not the GPT-3 blocks
    facts.samples = [float("nan")] * len(facts.samples)  # no samples_count: step in sequences
    assert conv.step_unit(facts) == "sequences"


_CUSTOM8 = """\
trainer:
  devices: ${oc.decode:${oc.env:DGXNGPU,8}}
model:
  micro_batch_size: ${oc.decode:${oc.env:MICRO_BATCH_SIZE}}
  tensor_model_parallel_size: ${oc.decode:${oc.env:TENSOR_MODEL_PARALLEL}}
  pipeline_model_parallel_size: ${oc.decode:${oc.env:PIPELINE_MODEL_PARALLEL}}
  context_parallel_size: ${oc.decode:${oc.env:CONTEXT_PARALLEL,4}}
  base_config: ${oc.env:MODEL_SIZE,405b}
  overwritten_attributes:
    num_layers: ${oc.decode:${oc.env:OVERWRITTEN_NUM_LAYERS,126}}
  encoder_seq_length: 8192
  fp8: ${oc.decode:${oc.env:FP8,False}}
  fp8_recipe: ${oc.decode:${oc.env:FP8_RECIPE,tensorwise}}
  use_distributed_optimizer: True
"""
_PRETRAIN8 = """\
    if config.model.base_config == "8b":
        r = [6]
    elif config.model.base_config == "405b":
        r = [6, 7]
    if base_config == "8b":
        base_llama_config = Llama31Config8B(
            seq_length=seq_length,
        )
    elif base_config == "405b":
        base_llama_config = Llama31Config405B(seq_length=seq_length)
    MegatronMixedPrecision(grad_reduce_in_fp32=False)
"""
_CFG8 = ('export MODEL_SIZE="8b"\nexport OVERWRITTEN_NUM_LAYERS=32\nexport DGXNNODES=1\n'
         "export DGXNGPU=8\nexport MINIBS=2\nexport TENSOR_MODEL_PARALLEL=1\n"
         "export PIPELINE_MODEL_PARALLEL=1\nexport CONTEXT_PARALLEL=1\nexport MICRO_BATCH_SIZE=2\n")  # fmt: skip


def test_flat_benchmark_folders_aliases_and_the_config_named_after_the_system(conv) -> None:
    """Lenovo / Nebius v5.1 keep the NeMo code in benchmarks/llama31_8b/ itself (Nebius: a config
    folder per system under configs/); HPE in benchmarks/llama3_8b/. Two configs of one node
    match the log and differ (FP8 on / off): the one named after the system is taken."""
    root = "S/benchmarks/llama3_8b/"
    files = {
        f"{root}pretrain.py": _PRETRAIN8,
        f"{root}conf/custom.yaml": _CUSTOM8,
        f"{root}config_DGXB200_1x8x2.sh": _CFG8 + "export FP8=True\n",
        f"{root}configs/sysA/config_DGXB200_1x8x2_fp8off.sh": _CFG8,
        "S/results/sysA/llama31_8b/result_0.txt": "",
    }
    m = _Files(files)
    assert conv.bench_root(m, "S", "llama31_8b") == root
    impls = conv.implementations(m, "S", "llama31_8b")
    assert conv.is_nemo(impls[root[:-1]]) and "conf/custom.yaml" in impls[root[:-1]]
    assert impls[f"{root}configs/sysA"] == {"config_DGXB200_1x8x2_fp8off.sh"}
    cfg, how = conv.find_config(m, "S", "llama31_8b", "sysA", 1, 8, 16, 1)
    assert cfg.path.endswith("configs/sysA/config_DGXB200_1x8x2_fp8off.sh")
    assert how.startswith("its folder names the system; 2 configs match with different settings")
    assert cfg.ambiguous and conv.layout_and_settings(cfg)[0]["precision"] == "bf16"
    with pytest.raises(ValueError, match="2 configs match with different settings"):
        conv.find_config(m, "S", "llama31_8b", "sysB", 1, 8, 16, 1)
    model, notes = conv.model_of(cfg, "llama31_8b", 8192)
    assert model == dict(conv.LLAMA8, seq_len=8192) and "Llama31Config8B" in notes[0]
    cfg.pretrain = _PRETRAIN8.replace("Llama31Config8B(", "Llama3Config8B(")
    with pytest.raises(ValueError, match=r"does not build Llama31Config8B .*\(Llama3Config8B\)"):
        conv.model_of(cfg, "llama31_8b", 8192)
    # a benchmark folder with configs and launch scripts but no NeMo code (Oracle v5.1)
    oracle = _Files(
        {"O/benchmarks/llama31_8b/config_A.sh": "", "O/benchmarks/llama31_8b/run.sub": ""}
    )
    impls = conv.implementations(oracle, "O", "llama31_8b")
    assert not any(conv.is_nemo(f) for f in impls.values())
    assert [conv.impl_name(d, f, "llama31_8b") for d, f in impls.items()] == [
        "llama31_8b/ itself: config_*.sh, run.sub"]  # fmt: skip


def test_8b_containers_and_ids(conv) -> None:
    files = _Files({"c/pretrain.py": "from nemo.collections.llm import Llama31Config8B\n",
                    "c/Dockerfile": "ARG FROM_IMAGE_NAME=nvcr.io/nvidia/pytorch:25.01-py3\n"})  # fmt: skip
    stale = {"framework": "PyTorch NVIDIA Release 23.09"}
    version, where = conv.container_of(files, "hpf_n8", stale, "c")
    assert version == "25.01" and "predates NeMo's Llama31Config" in where
    assert conv.container_of(files, "hpf_n8", stale, "elsewhere")[0] == "23.09"  # no such import
    both = {"framework": "PyTorch NVIDIA Release 25.04; NeMo Framework NVIDIA Release 25.09"}
    assert conv.container_of(files, "AS-4126GS-NBR-LCC", both, "c")[0] == "25.09"
    assert conv.system_slug("HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09", "HPE") == (
        "cray-xd670-h200-sxm5-141gb"
    )
