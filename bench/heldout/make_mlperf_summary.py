"""MLPerf Training results (MLCommons) of LLM pre-training run with NVIDIA's NeMo / Megatron
implementation, in the published_runs.yaml schema: GPT-3 175B (benchmark gpt3, rounds v3.0 .. v4.1),
Llama 3.1 405B (llama31_405b, v5.0 / v5.1) and Llama 3.1 8B (llama31_8b, v5.1) on H100, H200, B200,
GB200 and GB300.

Held-out evaluation data only: no row is used to fit a constant (docs/accuracy.md, bench/
heldout_accuracy.py). Usage, from bare clones of mlcommons/training_results_vX.Y:

    python bench/heldout/make_mlperf_summary.py [vX.Y=]GIT_DIR[@COMMIT] ... > bench/heldout/mlperf_training_summary.yaml

Each argument is one round's repository; its round is the `vX.Y` prefix or else read from the
path (`training_results_vX.Y`), its commit the `@COMMIT` suffix or else HEAD (resolved to the sha
the records cite). Everything is read with `git ls-tree` / `git show` at that commit: no network,
byte-for-byte reproducible. One record per results directory <Submitter>/results/<system>/<bench>/
whose submitter's benchmarks/<bench>/ holds NeMo's implementation (its Hydra conf/custom.yaml or
conf/megatron_gpt_config.yaml, megatron_gpt_pretraining_custom.py, pretrain.py) and whose system
description (<Submitter>/systems/<system>.json) names an NVIDIA H100 / H200 / B200 / B300 / GB200 / GB300
(AMD MI3xx: refused). The implementation is each benchmarks/<bench>/implementations/<name>/
(else each top folder); where the benchmark folder itself holds a config_*.sh (v5.1 llama31_8b:
Lenovo, Nebius, Oracle) that folder is one too, and each deeper folder (Nebius's configs/<system>/)
a folder of configs; a submission without benchmarks/<bench>/ is read from an alias of
BENCH_ALIASES (HPE v5.1: llama31_8b results, code in benchmarks/llama3_8b/).

What a record takes, and from where:
  GPUs       the log's `submission_platform` count (nodes, or 4-GPU compute trays on GB200 /
             GB300) x the system json's accelerators_per_node; the config's DGXNNODES x DGXNGPU
             must be the same (else it does not match), the json's number_of_nodes too (else
             confidence medium).
  throughput each result_N.txt's per-step `tracked_stats` lines (key train_step_timing,
             'train_step_timing in s' or train_step_time, written by the implementation's
             custom_callbacks.py: NeMo's per-optimizer-step timer, the `step` metadata advancing by
             one global batch in tokens, in sequences or in steps, checked; llama31_8b logs a line
             every LOG_EVERY_N_STEPS = 32 steps, Lightning's log_every_n_steps, each line the time of
             the step it is logged at: the `step` metadata advancing by N steps and samples_count by
             N global batches, checked, and N must be the config's log_every_n_steps; the notes
             quote the block_start / block_stop wall clock per step beside it, 0.1-2.0 % above);
             per file the median after dropping the first WARMUP_STEPS timing lines, then the
             median over the files;
             tokens/s/GPU = global_batch_size x max_sequence_length (log keys) / step s / GPUs; A
             directory without those lines is refused: its block_start / block_stop wall clock
             includes the host time between steps (on the v3.1 logs that carry both, per file
             0.1-0.2 % above the median train_step_timing at 64-96 nodes, 1.1-1.4 % at 512-1024,
             2.2-3.7 % at 1280-1344), a different quantity; its figure is quoted in the refusal.
  config     the config_*.sh that README-<system>.md names (NVIDIA's per-directory READMEs), else
             the one config of the submitter's benchmark whose resolved environment has the log's
             node count, GPUs per node, global batch (MINIBS x DP, DP = GPUs / (TP x PP x CP)) and
             gradient accumulation (MINIBS / MICRO_BATCH_SIZE); several configs that resolve to the
             same layout count as one; among matches that differ, the ones whose file name, else
             whose folder, names the results directory's system (Dell v5.1
             config_1xXE9680Lx8B200-SXM-180GB.sh, Supermicro config_AS-4126GS-NBR-LCC_..., Nebius
             configs/nebius_b200_n1/) are taken where they resolve alike (confidence medium); any
             other ambiguity or no match refuses the directory. The named config must pass the
             same checks.
  environment the config is executed as bash would source it (Shell: `export`, `: "${V:=d}"`,
             `source`, `if` on simple tests, `$((...))`; later assignments win, so the config's own
             lines override config_common.sh where they come after it), then each Hydra knob the
             implementation's conf/custom.yaml (v3.0: run_and_time.sh's `model.<key>=${VAR}`)
             reads from the environment takes the variable, else the launchers' (run.sub,
             run_and_time.sh) `: "${VAR:=default}"`, else custom.yaml's `${oc.env:VAR,default}`. A
             file the config sources but the submission lacks is named in the notes (confidence
             medium); a config without the Hydra conf (Oracle v4.1) reads the variables at
             NVIDIA's names, defaults of unset ones unknown (medium).
  layout     TP, PP, CP, DP, micro-batch, global batch; VP from INTERLEAVED_PIPELINE (0 or null:
             none, as run_and_time.sh maps it); sequence parallel (SEQ_PARALLEL); recompute from
             ACT_CKPT_GRANULARITY (null everywhere: none); the distributed optimizer
             (USE_DIST_OPTIMIZER) as zero_stage 1; the Llama split flags (ASYM_PP_EMBED / _LOSS).
  precision  FP4 + FP4_RECIPE nvfp4 -> nvfp4; FP8 -> fp8 with fp8_recipe from FP8_RECIPE where the
             conf reads it (delayed / tensorwise), else delayed: the v3.x / v4.x NeMo 1 stack has
             only Transformer Engine's DelayedScaling (FP8_AMAX_HISTORY, FP8_AMAX_ALGO); bf16
             otherwise. FP8_PARAMS / FP8_PARAM_GATHER (fp8 primary weights) -> fp8_params.
  settings   main_grads (the gradients' dtype: NeMo 2's pretrain.py grad_reduce_in_fp32, NeMo
             1's distributed_fused_adam grad_sync_dtype; bf16 in every submission that states
             it); tp_comm_overlap (TP_COMM_OVERLAP); cuda_graphs (per-layer: the conf's
             enable_cuda_graph or external_cuda_graph); full_iteration_cuda_graph (v5.0
             full_cuda_graph, v5.1 cuda_graph_scope full_iteration); dp_bucket_elements (the
             DDP bucket_size NeMo 2's pretrain.py hands megatron-core: ddp_bucket_elements).
             Userbuffers tuning, SM
             margins, NCCL variables, FP8 format, p2p overlap, rank mapping: notes only.
  model      GPT-3: the conf's shape (num_layers, hidden_size, ffn_hidden_size,
             num_attention_heads, encoder_seq_length, hidden_dropout 0.0, layernorm1p) with NeMo's
             GPT defaults the v3.0 submission ships in conf/megatron_gpt_config.yaml (biases, GeLU,
             learned positions, shared embeddings) and the reference's vocabulary of 50257
             (mlcommons/training large_language_model/megatron-lm README: the SentencePiece
             tokenizer is data, not in the repository). Llama 3.1 405B: NeMo's Llama31Config405B
             (the conf's base_config 405b, num_layers 126, encoder_seq_length 8192) with the
             benchmark's Mixtral 8x22B tokenizer (README 3.3.2), vocabulary 32,000 per the
             reference's Model details table (large_language_model_pretraining/nemo/README.md).
             Llama 3.1 8B: NeMo's Llama31Config8B, which the implementation's pretrain.py builds
             for the conf's base_config 8b (checked; num_layers 32, encoder_seq_length 8192), with
             the benchmark's Llama 3.1 8B tokenizer (the submission's data_scripts/download_8b.sh;
             the reference, mlcommons/training small_llm_pretraining/nemo/README.md, "We are using
             the Llama 3.1 8B tokenizer", meta-llama/Llama-3.1-8B), vocabulary 128,256 (LLAMA8).
  container  `NeMo XX.YY container` in `source` from the directory's ngcXX.YY, else the system
             json's framework_name, else its framework release (a "NeMo ... Release" phrase first),
             else the Dockerfile's base image; a framework release before 24.09 for a pretrain.py
             that imports NeMo's Llama31Config (added 2024-08-27; Cisco, Lenovo v5.1: "23.09") is
             stale, and the Dockerfile's base image is taken.
A results directory whose files carry the same MLLOG lines as an earlier directory's (a round's
resubmission of another's logs, a submitter's copies) is refused as a duplicate. Every refused
directory is listed in the header with the reason.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import EVALUATION_ONLY, git, write_summary

BENCHMARKS = ("gpt3", "llama31_405b", "llama31_8b")
BENCH_ALIASES = {"llama31_8b": ("llama3_8b",)}
"""Other folder names a submission's benchmarks/ may give a benchmark's code where it lacks the
benchmark's own (HPE v5.1: results/.../llama31_8b/, code in benchmarks/llama3_8b/)."""
WARMUP_STEPS = 5
"""Per-step timings dropped at the start of every result file (the first steps after the
synthetic-data warm-up and the first evaluation run slow: v3.1 1344 nodes 1.56 s, 1.04 s, then
0.93 s)."""
STEP_KEY = re.compile(r"^train_step_tim(?:e|ing)(?: in s)?$")
NEMO_FILES = ("conf/custom.yaml", "conf/megatron_gpt_config.yaml",
              "megatron_gpt_pretraining_custom.py", "pretrain.py")  # fmt: skip
GPUS = (
    ("GB300", "gb300"),
    ("GB200", "gb200"),
    ("B300", "b300"),
    ("B200", "b200"),
    ("H200", "h200-sxm-141gb"),
    ("H100", "h100-sxm-80gb"),
)
"""accelerator_model_name substring -> GPU preset (models_zoo/gpus); the first match wins."""
RACK_SCALE = {"gb200", "gb300"}
"""GPUs whose NVLink domain is the 72-GPU rack (gpus_per_node 72, as the Megatron-Bridge GB200
records state it), whatever the 4-GPU compute tray the system json calls a node."""
GPT3 = {
    "name": "GPT-3 175B (MLPerf gpt3)",
    "num_kv_heads": None,
    "vocab_size": 50257,
    "gated_mlp": False,
    "tied_embeddings": True,
    "seq_len": None,
    "max_position_embeddings": None,
    "hidden_dropout": None,
    "normalization": "layernorm",
    "linear_bias": True,
    "activation": "gelu",
    "published_params_b": 175,
}
"""GPT-3 fields the conf does not carry (num_kv_heads / seq_len / max_position_embeddings /
hidden_dropout are filled from it): NeMo's megatron_gpt_config.yaml defaults, which the v3.0
submission ships (bias: True, activation: gelu, position_embedding_type: learned_absolute,
share_embeddings_and_output_weights: True; layernorm1p is LayerNorm with a zero-centred gain),
and the reference's 50257 tokens."""
GPT3_SHAPE = {"num_layers": 96, "hidden_size": 12288, "num_attention_heads": 96}
"""The benchmark's transformer (mlcommons/training large_language_model/megatron-lm), for a
submission whose files do not carry the conf (Oracle v4.1)."""
LLAMA31_ROPE = {
    "rotary_base": 500000.0,
    "norm_eps": 1e-05,
    "rope_scaling": {
        "type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
"""What every NeMo 2 Llama 3.1 config shares (Llama3Config / Llama31Config: RoPE base 500000 with
Llama 3.1's scaling, RMSNorm eps 1e-5); LLAMA405 and LLAMA8 take it in their field order."""
LLAMA405 = {
    "name": "Llama 3.1 405B (MLPerf llama31_405b, Mixtral 8x22B tokenizer)",
    "num_layers": 126,
    "hidden_size": 16384,
    "ffn_hidden_size": 53248,
    "num_attention_heads": 128,
    "num_kv_heads": 8,
    "vocab_size": 32000,
    "seq_len": None,
    **LLAMA31_ROPE,
    "published_params_b": 405,
}
"""NeMo 2 Llama31Config405B (nemo/collections/llm/gpt/model/llama.py: 126 layers, 16384 wide, FFN
53248, 128 heads, 8 query groups, RoPE base 500000 with Llama 3.1 scaling, RMSNorm, SwiGLU, no
biases, untied) with the benchmark tokenizer's 32,000 tokens (models_zoo llama3.1-405b: 128256)."""
LLAMA8 = {
    "name": "Llama 3.1 8B (MLPerf llama31_8b, Llama 3.1 tokenizer)",
    "num_layers": 32,
    "hidden_size": 4096,
    "ffn_hidden_size": 14336,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "vocab_size": 128256,
    "seq_len": None,
    **LLAMA31_ROPE,
    "published_params_b": 8.03,
}
"""NeMo 2 Llama31Config8B, which the implementation's pretrain.py builds for base_config 8b
(nemo/collections/llm/gpt/model/llama.py at NeMo 8cfedd7 (2025-09-20): 32 layers, 4096 wide, FFN
14336, 32 heads; from Llama3Config 8 query groups, RMSNorm eps 1e-5, SwiGLU, no biases, untied;
RoPE base 500000 with Llama31Config's scaling: factor 8, low / high frequency factors 1 / 4,
original context 8192). Vocabulary: the benchmark's tokenizer is Llama 3.1 8B's (the
submission's data_scripts/download_8b.sh fetches llama-3-1-8b-tokenizer, mounted as
/workspace/llm/nemo_tokenizer; the reference, mlcommons/training small_llm_pretraining/nemo/
README.md: "We are using the Llama 3.1 8B tokenizer", meta-llama/Llama-3.1-8B); NeMo's
AutoTokenizer.vocab_size is len(tokenizer), 128,000 BPE tokens + 256 special = 128,256 (the
reference's Model details table rounds to "128,000"), a multiple of 128 x TP for TP 1 / 2, so
not padded; published_params_b and every shape number as models_zoo llama3.1-8b."""
NOTABLE = re.compile(
    r"^(NVTE_|NCCL_(?!.*PATH)|MC_TP_|UB_|TE_UB_|OVERLAP_|ALIGN_PARAM|DEFER_|WGRAD_|BUCKET_|SHARP$|"
    r"TP_PP_DP|FP8_DPA|FP8_HYBRID|FP8_AMAX|FP8_REDUCE|FP8_RECIPE|FP4_RECIPE|FC\d_|QKV_|PROJ_|"
    r"TP_CONFIG_FILE|MEGATRON_CORE_|CUDA_DEVICE_MAX|TORCH_NCCL|LAYER_CUDA|MCORE_CUDA|FULL_CUDA|"
    r"CUDA_GRAPH|BATCH_P2P|SEGMENT$|USE_TE_OPS|FUSED_QKV|CE_FUSION)"
)
"""Variables quoted in a record's notes (they tune kernels and communication, not the layout)."""


# ------------------------------------------------------------------------------ git


class Mirror:
    """One round's repository at one commit: its file list (path -> blob) and file texts."""

    def __init__(self, arg: str):
        version = None
        if m := re.match(r"^v?(\d+\.\d+)=(.*)$", arg):
            version, arg = m.group(1), m.group(2)
        git_dir, _, commit = arg.partition("@")
        if version is None:
            m = re.search(r"training_results_v(\d+\.\d+)", git_dir)
            if m is None:
                raise SystemExit(f"{arg}: no round in the path; pass it as vX.Y={arg}")
            version = m.group(1)
        self.git_dir, self.version = git_dir, version
        self.commit = git(git_dir, "rev-parse", f"{commit or 'HEAD'}^{{commit}}").strip()
        self.files: dict[str, str] = {}
        for line in git(git_dir, "ls-tree", "-r", self.commit).splitlines():
            meta, path = line.split("\t", 1)
            self.files[path] = meta.split()[2]
        self._text: dict[str, str] = {}

    @property
    def short(self) -> str:
        return self.commit[:7]

    def show(self, path: str) -> str | None:
        if path not in self.files:
            return None
        if path not in self._text:
            self._text[path] = git(self.git_dir, "show", f"{self.commit}:{path}")
        return self._text[path]


# ------------------------------------------------------------------------------ the logs


def mllog(text: str) -> list[dict]:
    """The `:::MLLOG {json}` events of a result file, in order (a line may carry a rank prefix
    such as `0: `; lines that do not parse are skipped)."""
    out = []
    for line in text.splitlines():
        i = line.find(":::MLLOG ")
        if i < 0:
            continue
        try:
            out.append(json.loads(line[i + 9 :]))
        except json.JSONDecodeError:
            continue
    return out


@dataclass
class LogFacts:
    platform: str | None = None
    gbs: int | None = None
    ga: int | None = None
    seq: int | None = None
    key: str | None = None
    steps: list[float] = field(default_factory=list)
    marks: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    """The timing lines' samples_count metadata (v5.1 llama31_8b: step + 1 global batches)."""
    blocks: list[tuple[int, int]] = field(default_factory=list)
    """(wall ms, epoch_count) of each block_start -> block_stop with an epoch_count."""
    sample_blocks: list[tuple[int, int]] = field(default_factory=list)
    """(wall ms, samples_count) of each block_start -> block_stop with a samples_count and no
    epoch_count (v5.x mlperf_common)."""


def log_facts(events: list[dict]) -> LogFacts:
    """What a result file says: platform, global batch, accumulation, sequence length, and the
    per-step timings the implementation's custom_callbacks.py logs (NeMo's per-step timer; the
    per-block averages mlperf_common's logging.py adds from v5.0 on are not steps)."""
    f = LogFacts()
    start = None
    for e in events:
        key, value, meta = e.get("key"), e.get("value"), e.get("metadata") or {}
        if key == "submission_platform":
            f.platform = value
        elif key == "global_batch_size":
            f.gbs = int(value)
        elif key == "gradient_accumulation_steps":
            f.ga = int(value)
        elif key == "max_sequence_length":
            f.seq = int(value)
        elif key == "block_start":
            start = e
        elif key == "block_stop" and start is not None and "epoch_count" in meta:
            f.blocks.append((e["time_ms"] - start["time_ms"], int(meta["epoch_count"])))
            start = None
        elif key == "block_stop" and start is not None and "samples_count" in meta:
            ms = e["time_ms"] - start["time_ms"]
            f.sample_blocks.append((ms, int(meta["samples_count"])))
            start = None
        elif key == "tracked_stats" and isinstance(value, dict):
            names = [k for k in value if STEP_KEY.match(k)]
            if names and str(meta.get("file", "")).endswith("custom_callbacks.py"):
                f.key = names[0]
                f.steps.append(float(value[names[0]]))
                f.marks.append(float(meta.get("step", "nan")))
                f.samples.append(float(meta.get("samples_count", "nan")))
    return f


def step_unit(facts: LogFacts) -> str | None:
    """What the `step` metadata of the timing lines counts, from its increments: 'tokens' (one
    global batch of tokens per line), 'sequences' or 'steps'; 'N steps' where the lines come every
    N > 1 optimizer steps (Lightning's log_every_n_steps; each line the time of the step it is
    logged at), which their samples_count metadata must confirm by advancing N global batches;
    None if the increments are not one constant step."""
    incs = {round(b - a, 6) for a, b in zip(facts.marks, facts.marks[1:])}
    if len(incs) != 1 or facts.gbs is None or facts.seq is None:
        return None
    inc = incs.pop()
    counted = {round(b - a, 6) for a, b in zip(facts.samples, facts.samples[1:])}
    if inc > 1 and inc == int(inc) and counted == {inc * facts.gbs}:
        return f"{int(inc)} steps"
    units = {facts.gbs * facts.seq: "tokens", facts.gbs: "sequences", 1: "steps"}
    return units.get(inc)


def file_median(steps: list[float]) -> float:
    """A result file's step time: the median of its timings after the first WARMUP_STEPS."""
    if len(steps) <= WARMUP_STEPS:
        raise ValueError(f"only {len(steps)} per-step timings (<= {WARMUP_STEPS} warm-up steps)")
    return statistics.median(steps[WARMUP_STEPS:])


def block_step_s(facts: LogFacts) -> float | None:
    """Wall-clock seconds per step from block_start / block_stop (epoch_count in tokens), the
    median over the blocks after the first; used only to quote in a refusal."""
    if facts.gbs is None or facts.seq is None or len(facts.blocks) < 2:
        return None
    per = [ms / 1000 / (count / (facts.gbs * facts.seq)) for ms, count in facts.blocks[1:]]
    return statistics.median(per)


def sample_block_step_s(facts: LogFacts) -> float | None:
    """Wall-clock seconds per step from block_start / block_stop with samples_count (global batches
    of sequences), the median over the blocks after the first; quoted in the notes of a record
    whose timing lines sample one step in N."""
    if facts.gbs is None or len(facts.sample_blocks) < 2:
        return None
    return statistics.median(ms / 1000 / (n / facts.gbs) for ms, n in facts.sample_blocks[1:])


def mllog_fingerprint(texts: list[str]) -> frozenset:
    """The MLLOG lines of a directory's result files, hashed per file (the same logs under
    another name, with or without the :::SYSJSON lines a later round adds, compare equal)."""
    return frozenset(
        hashlib.sha256(
            "\n".join(
                ln[ln.find(":::MLLOG ") :] for ln in t.splitlines() if ":::MLLOG " in ln
            ).encode()
        ).hexdigest()
        for t in texts
    )


def tokens_per_s_per_gpu(gbs: int, seq: int, step_s: float, gpus: int) -> float:
    return gbs * seq / step_s / gpus


def platform_count(platform: str) -> int:
    m = re.match(r"^\s*(\d+)\s*x", platform or "")
    if m is None:
        raise ValueError(f"submission_platform {platform!r} names no count")
    return int(m.group(1))


# ------------------------------------------------------------------------------ bash, small


class Unresolved(Exception):
    """A value bash would compute from something not in the files (a command's output, a
    variable set under a condition that cannot be decided)."""


_VAR = r"[A-Za-z_][A-Za-z0-9_]*"
_ARITH_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}  # fmt: skip


def _close(s: str, i: int, open_: str, close: str) -> int:
    """Index of the `close` matching the `open_` at s[i] (nesting counted)."""
    depth = 0
    for j in range(i, len(s)):
        if s.startswith(open_, j):
            depth += 1
        elif s.startswith(close, j):
            depth -= 1
            if depth == 0:
                return j
    raise Unresolved(f"unbalanced {open_!r} in {s!r}")


def split_top(s: str, seps: str = ";") -> list[str]:
    """Split at `seps` characters outside quotes and brackets; also used to cut a `#` comment."""
    out, cur, quote, depth = [], [], None, 0
    for c in s:
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c in seps and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(c)
    out.append("".join(cur))
    return out


def strip_comment(line: str) -> str:
    quote, depth = None, 0
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "#" and depth == 0 and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


class Shell:
    """The part of bash the MLPerf config_*.sh files use, enough to know what they export."""

    def __init__(self, read):
        self.read = read  # basename -> text | None
        self.env: dict[str, str] = {}
        self.unknown: set[str] = set()
        self.sourced: list[str] = []
        self.missing: list[str] = []
        self.exits: list[str] = []

    # -- expansion
    def value(self, name: str) -> str:
        if name in self.unknown:
            raise Unresolved(f"${name} is set by something not in the files")
        return self.env.get(name, "")

    def expand(self, s: str) -> str:
        out: list[str] = []
        i, quote = 0, None
        while i < len(s):
            c = s[i]
            if quote == "'":
                if c == "'":
                    quote = None
                else:
                    out.append(c)
                i += 1
            elif c == "'" and quote is None:
                quote = "'"
                i += 1
            elif c == '"':
                quote = None if quote == '"' else '"'
                i += 1
            elif c == "\\" and i + 1 < len(s):
                out.append(s[i + 1])
                i += 2
            elif s.startswith("$((", i):
                j = _close(s, i + 1, "(", ")")
                out.append(str(self.arith(s[i + 3 : j - 1])))
                i = j + 1
            elif s.startswith("$(", i):
                raise Unresolved(f"command substitution {s[i:]!r}")
            elif s.startswith("${", i):
                j = _close(s, i + 1, "{", "}")
                out.append(self.param(s[i + 2 : j]))
                i = j + 1
            elif c == "$" and (m := re.match(_VAR, s[i + 1 :])):
                out.append(self.value(m.group(0)))
                i += 1 + len(m.group(0))
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def param(self, body: str) -> str:
        m = re.fullmatch(rf"({_VAR})(?:(:?)([-=?+])(.*))?", body, re.DOTALL)
        if m is None:
            raise Unresolved(f"${{{body}}}")
        name, colon, op, word = m.groups()
        if op is None:
            return self.value(name)
        if name in self.unknown:
            raise Unresolved(f"${name} is set by something not in the files")
        is_set = name in self.env and (not colon or self.env[name] != "")
        if op == "-":
            return self.env[name] if is_set else self.expand(word)
        if op == "=":
            if not is_set:
                self.env[name] = self.expand(word)
            return self.env[name]
        if op == "+":
            return self.expand(word) if is_set else ""
        return self.env.get(name, "")  # `?`: bash would stop when unset; the configs set them

    def arith(self, expr: str) -> int:
        text = self.expand(expr)
        text = re.sub(_VAR, lambda m: self.value(m.group(0)) or "0", text)
        text = text.replace("/", "//")

        def ev(node):
            if isinstance(node, ast.Expression):
                return ev(node.body)
            if isinstance(node, ast.Constant) and isinstance(node.value, int):
                return node.value
            if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
                return _ARITH_OPS[type(node.op)](ev(node.left), ev(node.right))
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
                return -ev(node.operand)
            raise Unresolved(f"arithmetic {expr!r}")

        try:
            return ev(ast.parse(text.strip(), mode="eval"))
        except (SyntaxError, ZeroDivisionError) as err:
            raise Unresolved(f"arithmetic {expr!r}") from err

    # -- tests
    def test(self, cond: str) -> bool:
        """A `[ ... ]` / `[[ ... ]]` test; Unresolved when it cannot be decided."""
        body = cond.strip()
        m = re.fullmatch(r"\[\[(.*)\]\]|\[(.*)\]", body, re.DOTALL)
        if m is None:
            raise Unresolved(f"condition {cond!r}")
        words = [w for w in split_top((m.group(1) or m.group(2)).strip(), " \t") if w]
        vals = [self.expand(w) for w in words]
        if len(vals) == 2 and vals[0] in ("-n", "-z"):
            return (vals[1] != "") == (vals[0] == "-n")
        if len(vals) != 3:
            raise Unresolved(f"condition {cond!r}")
        a, op, b = vals
        if op in ("==", "=", "!="):
            return (a == b) == (op != "!=")
        ops = {"-eq": operator.eq, "-ne": operator.ne, "-gt": operator.gt,
               "-lt": operator.lt, "-ge": operator.ge, "-le": operator.le}  # fmt: skip
        if op not in ops or not re.fullmatch(r"-?\d+", a or "0") or not re.fullmatch(r"-?\d+", b):
            raise Unresolved(f"condition {cond!r}")
        return ops[op](int(a or 0), int(b))

    # -- statements
    def source(self, name: str) -> None:
        text = self.read(name)
        if text is None:
            self.missing.append(name)
            return
        self.sourced.append(name)
        self.run(text)

    def run(self, text: str) -> None:
        lines, buf = [], ""
        for raw in text.splitlines():
            if raw.rstrip().endswith("\\"):
                buf += raw.rstrip()[:-1] + " "
                continue
            lines.append(buf + raw)
            buf = ""
        stack: list[list] = []  # [parent active, branch taken, this branch active, decidable]
        for line in lines:
            for piece in split_top(strip_comment(line).strip()):
                self._piece(piece.strip(), stack)

    def _active(self, stack) -> bool:
        return all(f[2] for f in stack)

    def _piece(self, s: str, stack) -> None:
        if not s:
            return
        if m := re.match(r"^(if|elif)\s+(.*)$", s):
            if m.group(1) == "if":
                stack.append([self._active(stack), False, False, True])
            frame = stack[-1]
            try:
                ok = self.test(m.group(2))
            except Unresolved:
                frame[3], ok = False, False
            frame[2] = frame[0] and ok and not frame[1] and frame[3]
            frame[1] = frame[1] or frame[2]
            return
        if s == "then" or s.startswith("then "):
            self._piece(s[4:].strip(), stack)
            return
        if s == "else":
            frame = stack[-1]
            frame[2] = frame[0] and not frame[1] and frame[3]
            frame[1] = True
            return
        if s == "fi":
            stack.pop()
            return
        undecided = any(not f[3] for f in stack)
        if not self._active(stack) and not undecided:
            return
        self._command(s, certain=not undecided)

    def _command(self, s: str, certain: bool) -> None:
        if m := re.fullmatch(r"(\[\[?.*?\]\]?)\s*(&&|\|\|)\s*(.*?)(?:\s*\|\|\s*(.*))?", s):
            try:
                ok = self.test(m.group(1))
                if m.group(2) == "||":
                    ok = not ok
            except Unresolved:
                certain = False
                ok = True
            self._command(m.group(3), certain)
            if m.group(4):
                self._command(m.group(4), certain and not ok)
            return
        if not certain:  # under a test that cannot be decided: what it sets is unknown
            if m := re.fullmatch(r"(?:source|\.)\s+(.+)", s):
                name = m.group(1).strip().strip("\"'").rsplit("/", 1)[-1]
                self.missing.append(f"{name} (under a test that cannot be decided)")
                return
            if m := re.fullmatch(rf"(?:export\s+)?({_VAR})=.*", s):
                names = [m.group(1)]
            elif m := re.fullmatch(rf"unset\s+((?:{_VAR}\s*)+)", s):
                names = m.group(1).split()
            else:  # `: "${VAR:=default}"`
                names = re.findall(rf"\$\{{({_VAR}):?=", s)
            for name in names:
                self.env.pop(name, None)
                self.unknown.add(name)
            return
        if m := re.fullmatch(r"(?:source|\.)\s+(.+)", s):
            self.source(m.group(1).strip().strip("\"'").rsplit("/", 1)[-1])
        elif m := re.fullmatch(rf"(?:export\s+)?({_VAR})=(.*)", s):
            self.assign(m.group(1), m.group(2))
        elif m := re.fullmatch(rf"export\s+({_VAR})", s):
            pass
        elif m := re.fullmatch(r":\s+(.*)", s):
            try:
                self.expand(m.group(1))
            except Unresolved:
                pass
        elif m := re.fullmatch(rf"unset\s+((?:{_VAR}\s*)+)", s):
            for name in m.group(1).split():
                self.env.pop(name, None)
                self.unknown.discard(name)
        elif re.match(r"exit\b", s):
            self.exits.append(s)

    def assign(self, name: str, raw: str) -> None:
        try:
            self.env[name] = self.expand(raw.strip())
            self.unknown.discard(name)
        except Unresolved:
            self.env.pop(name, None)
            self.unknown.add(name)


# ------------------------------------------------------------------------------ the Hydra knobs


def oc_env(value: str) -> tuple[str, str | None] | None:
    """(variable, default text or None) of the first `${oc.env:VAR[,default]}` in a conf value."""
    i = value.find("${oc.env:")
    if i < 0:
        return None
    j = _close(value, i + 1, "{", "}")
    body = value[i + len("${oc.env:") : j]
    parts = split_top(body, ",")
    default = ",".join(parts[1:]).strip().strip("'\"") if len(parts) > 1 else None
    return parts[0].strip(), default


@dataclass
class Knobs:
    """How an implementation turns environment variables into its Hydra conf: leaf key ->
    [(variable, default)] from conf/custom.yaml (or run_and_time.sh's `model.<key>=${VAR}`),
    leaf key -> literal value, and the launchers' (run.sub, then run_and_time.sh)
    `: "${VAR:=default}"` defaults."""

    env_keys: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    literals: dict[str, str] = field(default_factory=dict)
    rt_defaults: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_yaml(self, text: str, name: str) -> None:
        try:
            tree = yaml.safe_load(text)
        except yaml.YAMLError:
            return
        self.sources.append(name)

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if isinstance(v, (dict, list)):
                        walk(v)
                    elif isinstance(k, str):
                        found = oc_env(v) if isinstance(v, str) else None
                        if found:
                            self.env_keys.setdefault(k, []).append(found)
                        elif v is not None and not (isinstance(v, str) and "${" in v):
                            self.literals.setdefault(k, str(v))
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(tree)

    def add_launcher(self, text: str, name: str) -> None:
        self.sources.append(name)
        for key, var in re.findall(rf"\+?model\.([\w.]+)=\$\{{?({_VAR})\}}?", text):
            self.env_keys.setdefault(key.rsplit(".", 1)[-1], []).append((var, None))
        for var, default in re.findall(rf':\s+"\$\{{({_VAR}):=([^}}$]*)\}}"', text):
            self.rt_defaults.setdefault(var, default.strip("'\""))


class Resolved:
    """A config's environment read through its implementation's knobs."""

    def __init__(self, shell: Shell, knobs: Knobs):
        self.shell, self.knobs = shell, knobs

    def var(self, name: str) -> str | None:
        if name in self.shell.unknown:
            raise Unresolved(f"${name} is set by something not in the files")
        if name in self.shell.env:
            return self.shell.env[name]
        return self.knobs.rt_defaults.get(name)

    def knob(self, key: str, *names: str, literal: bool = True) -> str | None:
        """The value Hydra gives conf key `key`: its variable as set, else the launchers'
        default, else the conf's default, else (`literal`) the conf's literal value; without the
        key in the conf, the first of `names` set."""
        for var, default in self.knobs.env_keys.get(key, []):
            got = self.var(var)
            if got is not None:
                return got
            if default is not None and "${" not in default:
                return default
        if literal and key in self.knobs.literals:
            return self.knobs.literals[key]
        for name in names:
            got = self.var(name)
            if got is not None:
                return got
        return None

    def cuda_graph_scope(self) -> str | None:
        """v5.1 custom.yaml: cuda_graph_scope = CUDA_GRAPH_SCOPE, else 'full_iteration' when
        FULL_CUDA_GRAPH is '1', else 'full'."""
        for var, default in self.knobs.env_keys.get("cuda_graph_scope", []):
            got = self.var(var)
            if got is not None:
                return got
            if default and "FULL_CUDA_GRAPH" in default and "full_iteration" in default:
                return "full_iteration" if self.var("FULL_CUDA_GRAPH") == "1" else "full"
        return None


def truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().strip("'\"").lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no", "null", "none", ""):
        return False
    raise ValueError(f"not a switch: {value!r}")


def as_int(value: str | None, what: str) -> int:
    if value is None or not re.fullmatch(r"\d+", value.strip()):
        raise ValueError(f"{what} is {value!r}, not a count")
    return int(value)


# ------------------------------------------------------------------------------ the configs


@dataclass
class Config:
    path: str
    context: str  # the implementation directory whose conf / scripts interpret it
    resolved: Resolved
    note: str = ""
    grads: tuple[str, str] | None = None
    """(main_grads dtype, where the implementation says it) or None where it does not."""
    pretrain: str | None = None
    """The implementation's pretrain.py (NeMo 2), which builds the model from base_config."""
    ambiguous: str = ""
    """Why the choice among matching configs is less than certain (confidence medium)."""


def grads_of(mirror: Mirror, ctx: str, dist: bool | None) -> tuple[str, str] | None:
    """The dtype gradients are kept and reduced in, where the implementation states it: NeMo 2's
    pretrain.py passes grad_reduce_in_fp32 to MegatronMixedPrecision and the DDP config (every
    occurrence False: bf16); NeMo 1 with the distributed optimizer (USE_DIST_OPTIMIZER, Apex
    DistributedFusedAdam) reads grad_sync_dtype from conf/optim/distributed_fused_adam.yaml (v3.1
    on) or the optim block of conf/megatron_gpt_config.yaml (v3.0)."""
    text = mirror.show(f"{ctx}/pretrain.py")
    if text is not None:
        found = set(re.findall(r"grad_reduce_in_fp32\s*=\s*(True|False)", text))
        if found == {"False"}:
            return "bf16", "pretrain.py passes grad_reduce_in_fp32=False"
        if found == {"True"}:
            return "fp32", "pretrain.py passes grad_reduce_in_fp32=True"
        return None
    if not dist:
        return None
    for conf in ("conf/optim/distributed_fused_adam.yaml", "conf/megatron_gpt_config.yaml"):
        text = mirror.show(f"{ctx}/{conf}")
        if text is None:
            continue
        if conf.endswith("megatron_gpt_config.yaml"):
            block = re.search(r"\n  optim:\n((?:    .*\n)+)", text)
            if block is None or "name: distributed_fused_adam" not in block.group(1):
                continue
            text = block.group(1)
        found = re.search(r"^\s*grad_sync_dtype:\s*(\w+)", text, re.MULTILINE)
        if found is not None and found.group(1) in ("bf16", "fp32"):
            return found.group(
                1
            ), f"{conf} grad_sync_dtype {found.group(1)} (distributed_fused_adam)"
    return None


def bench_root(mirror: Mirror, submitter: str, bench: str) -> str:
    """<submitter>/benchmarks/<folder>/ of a benchmark: its own name, else an alias of BENCH_ALIASES
    that the submission has (HPE v5.1 ships its llama31_8b code as benchmarks/llama3_8b/)."""
    for folder in (bench, *BENCH_ALIASES.get(bench, ())):
        root = f"{submitter}/benchmarks/{folder}/"
        if any(p.startswith(root) for p in mirror.files):
            return root
    return f"{submitter}/benchmarks/{bench}/"


def implementations(mirror: Mirror, submitter: str, bench: str) -> dict[str, set[str]]:
    """Directories under <submitter>/benchmarks/<bench>/ -> the file names (relative) they hold:
    each implementations/<name>/, else each top folder. Where the benchmark folder itself holds a
    config_*.sh (v5.1 llama31_8b: Lenovo, Nebius, Oracle) that folder is one more, holding
    everything under it outside implementations/ (its conf/custom.yaml counts), and each deeper
    folder is one too (Nebius's per-system configs/<system>/)."""
    root = bench_root(mirror, submitter, bench)
    out: dict[str, set[str]] = {}
    paths = [p for p in mirror.files if p.startswith(root)]
    flat = any(re.fullmatch(r"config_.+\.sh", p[len(root) :]) for p in paths)
    for path in paths:
        rest = path[len(root) :]
        top = rest.split("/", 1)[0]
        if flat and top != "implementations":
            out.setdefault(root[:-1], set()).add(rest)
            if rest.count("/") > 1:
                folder, name = path.rsplit("/", 1)
                out.setdefault(folder, set()).add(name)
        if "/" not in rest:
            continue
        if top == "implementations":
            parts = rest.split("/")
            if len(parts) < 3:
                continue
            d, rel = f"{root}implementations/{parts[1]}", "/".join(parts[2:])
        else:
            d, rel = f"{root}{top}", rest.split("/", 1)[1]
        out.setdefault(d, set()).add(rel)
    return out


def impl_name(d: str, files: set[str], bench: str) -> str:
    """An implementation folder as a refusal names it: its name; the benchmark folder itself
    (implementations() holds it where it has a config_*.sh) with the files it holds at its top."""
    if "/" not in d.split("/benchmarks/", 1)[1]:
        top = sorted(f for f in files if "/" not in f and not f.startswith("config_"))
        return f"{d.rsplit('/', 1)[-1]}/ itself: config_*.sh, {', '.join(top)}"
    return d.rsplit("/", 1)[-1]


def is_nemo(files: set[str]) -> bool:
    return any(f in files for f in NEMO_FILES)


def context_of(impls: dict[str, set[str]], d: str) -> tuple[str, str]:
    """The directory whose conf and scripts interpret configs of `d`: `d` itself if it holds them,
    else the submitter's one NeMo implementation that does (University-of-Florida v5.1:
    hpg.dgxb200x8/ holds two configs, its README points to b200_nemo/)."""
    if is_nemo(impls[d]):
        return d, ""
    others = sorted(o for o in impls if o != d and is_nemo(impls[o]))
    if len(others) == 1:
        return others[0], f"conf, scripts and sourced files from {others[0].rsplit('/', 1)[-1]}/"
    return d, ""


def load_config(mirror: Mirror, impls: dict[str, set[str]], path: str) -> Config:
    d, name = path.rsplit("/", 1)
    ctx, ctx_note = context_of(impls, d)

    def read(base: str) -> str | None:
        for where in (d, ctx):
            text = mirror.show(f"{where}/{base}")
            if text is not None:
                return text
        return None

    shell = Shell(read)
    shell.source(name)
    knobs = Knobs()
    for conf in ("conf/custom.yaml", "conf/megatron_gpt_config.yaml"):
        text = mirror.show(f"{ctx}/{conf}")
        if text is not None:
            knobs.add_yaml(text, conf)
    for script in ("run.sub", "run_and_time.sh"):  # run.sub launches run_and_time.sh: first
        text = mirror.show(f"{ctx}/{script}")
        if text is not None:
            knobs.add_launcher(text, script)
    resolved = Resolved(shell, knobs)
    dist = truthy(resolved.var("USE_DIST_OPTIMIZER"))
    if dist is None:
        dist = truthy(resolved.knob("use_distributed_optimizer"))
    return Config(path, ctx, resolved, ctx_note, grads_of(mirror, ctx, dist),
                  mirror.show(f"{ctx}/pretrain.py"))  # fmt: skip


def readme_config(mirror: Mirror, submitter: str, bench: str, system: str) -> str | None:
    """The config README-<system>.md names (NVIDIA's per-submission READMEs from v4.0 on)."""
    root = bench_root(mirror, submitter, bench)
    for path in sorted(mirror.files):
        if path.startswith(root) and path.endswith(f"/README-{system}.md"):
            found = re.findall(r"`(benchmarks/[^`]+/config_[^`/]+\.sh)`", mirror.show(path) or "")
            if found:
                return f"{submitter}/{found[0]}"
    return None


@dataclass
class Shape:
    nodes: int
    per_node: int
    tp: int
    pp: int
    cp: int
    mbs: int
    minibs: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.per_node

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def gbs(self) -> int:
        return self.minibs * self.dp

    @property
    def ga(self) -> int:
        return self.minibs // self.mbs


def shape_of(r: Resolved) -> Shape:
    return Shape(
        nodes=as_int(r.var("DGXNNODES"), "DGXNNODES"),
        per_node=as_int(r.knob("devices", "DGXNGPU", literal=False), "DGXNGPU"),
        tp=as_int(r.knob("tensor_model_parallel_size", "TENSOR_MODEL_PARALLEL"), "TP"),
        pp=as_int(r.knob("pipeline_model_parallel_size", "PIPELINE_MODEL_PARALLEL"), "PP"),
        cp=as_int(r.knob("context_parallel_size", "CONTEXT_PARALLEL") or "1", "CP"),
        mbs=as_int(r.knob("micro_batch_size", "MICRO_BATCH_SIZE"), "MICRO_BATCH_SIZE"),
        minibs=as_int(r.var("MINIBS"), "MINIBS"),
    )


def mismatch(s: Shape, nodes: int, per_node: int, gbs: int, ga: int) -> str | None:
    got = (s.nodes, s.per_node, s.gbs, s.ga)
    if got == (nodes, per_node, gbs, ga) and s.gpus % (s.tp * s.pp * s.cp) == 0:
        return None
    return (f"DGXNNODES {s.nodes} x DGXNGPU {s.per_node}, GBS {s.minibs} x DP {s.dp} = {s.gbs}, "
            f"GA {s.minibs}/{s.mbs} = {s.ga}; log {nodes} x {per_node}, GBS {gbs}, GA {ga}")  # fmt: skip


def find_config(mirror: Mirror, submitter: str, bench: str, system: str, nodes: int,
                per_node: int, gbs: int, ga: int) -> tuple[Config, str]:  # fmt: skip
    """The config a results directory ran (module docstring), and how it was found."""
    impls = implementations(mirror, submitter, bench)
    named = readme_config(mirror, submitter, bench, system)
    if named is not None:
        if named not in mirror.files:
            raise ValueError(f"README-{system}.md names {named}, not in the repository")
        cfg = load_config(mirror, impls, named)
        why = mismatch(shape_of(cfg.resolved), nodes, per_node, gbs, ga)
        if why:
            raise ValueError(f"the config README-{system}.md names does not match: {why}")
        return cfg, f"named by README-{system}.md"
    matches: list[Config] = []
    near: list[str] = []
    unsized: list[str] = []
    tried = 0
    for d, names in sorted(impls.items()):
        for rel in sorted(names):
            if "/" in rel or not re.fullmatch(r"config_.+\.sh", rel) or "common" in rel:
                continue
            try:
                cfg = load_config(mirror, impls, f"{d}/{rel}")
                if cfg.resolved.var("DGXNNODES") is None:
                    if cfg.resolved.shell.missing:
                        unsized.append(f"{rel} sources {', '.join(cfg.resolved.shell.missing)}, "
                                       "not in the submission: no DGXNNODES")  # fmt: skip
                    continue
                tried += 1
                shape = shape_of(cfg.resolved)
                why = mismatch(shape, nodes, per_node, gbs, ga)
                if why is None:
                    matches.append(cfg)
                elif shape.nodes == nodes:
                    near.append(f"{rel}: {why}")
            except (Unresolved, ValueError):
                continue
    if not matches:
        if tried == 0 and unsized:
            near = unsized
        raise ValueError(
            f"none of the {tried} configs of {bench_root(mirror, submitter, bench)[:-1]} has {nodes} x "
            f"{per_node} GPUs, GBS {gbs} and GA {ga}" + (f" ({'; '.join(near)})" if near else "")
        )

    def alike(cfgs: list[Config]) -> bool:
        return len({json.dumps(layout_and_settings(c)[:2], sort_keys=True) for c in cfgs}) == 1

    def rel_of(c: Config) -> str:
        return c.path[len(bench_root(mirror, submitter, bench)) :]

    paths = ", ".join(rel_of(c) for c in matches)
    if not alike(matches):
        # the submitter's config for this system: its file name, else its folder, names the
        # results directory's system (Dell config_1xXE9680Lx8B200-SXM-180GB.sh, Supermicro
        # implementations/AS-4126GS-NBR-LCC/config_AS-4126GS-NBR-LCC_..., Nebius configs/<system>/)
        for by, pick in (("file name", lambda c: system in c.path.rsplit("/", 1)[1]),
                         ("folder", lambda c: c.path.rsplit("/", 2)[-2] == system)):  # fmt: skip
            named = [c for c in matches if pick(c)]
            if named and alike(named):
                cfg = named[0]
                cfg.ambiguous = (f"config chosen by its {by} naming the system, of "
                                 f"{len(matches)} matching configs with different settings")  # fmt: skip
                return cfg, (f"its {by} names the system; {len(matches)} configs match with "
                             f"different settings ({paths}), of {tried} with DGXNNODES")  # fmt: skip
        raise ValueError(f"{len(matches)} configs match with different settings: {paths}")
    how = "the only config that matches" if len(matches) == 1 else (
        f"{len(matches)} matching configs resolve alike ({paths})")  # fmt: skip
    return matches[0], f"{how}, of {tried} with DGXNNODES"


# ------------------------------------------------------------------------------ a record


DDP_BUCKET = re.compile(
    r"DistributedDataParallelConfig\((?:[^()]|\([^()]*\))*?\bbucket_size\s*=", re.DOTALL
)
"""NeMo 2's pretrain.py handing the conf's bucket size to megatron-core's DDP config."""


def ddp_bucket_elements(cfg: Config) -> int | None:
    """Megatron DDP's gradient bucket in elements where the implementation sets it: NeMo 2's
    pretrain.py passes the conf's optim.bucket_size to DistributedDataParallelConfig(bucket_size=)
    (megatron-core keeps a stated size as it is; its max(40M, 1M x dp) default only replaces
    None, distributed_data_parallel.py). With overlap_grad_reduce off megatron-core drops the
    buckets (one collective after the backward), a layout the records do not hold: refused.
    NeMo 1 (v3.x / v4.x) buckets in Apex's distributed optimizer instead: nothing stated."""
    if cfg.pretrain is None or not DDP_BUCKET.search(cfg.pretrain):
        return None
    r = cfg.resolved
    raw = r.knob("bucket_size")
    if raw in (None, "", "null", "None"):
        return None
    if truthy(r.knob("overlap_grad_reduce", "OVERLAP_GRAD_REDUCE")) is False:
        raise ValueError("OVERLAP_GRAD_REDUCE False: megatron-core reduces in one bucket after "
                         "the backward, not a layout the records hold")  # fmt: skip
    return as_int(raw, "BUCKET_SIZE")


def layout_and_settings(cfg: Config) -> tuple[dict, dict, list[str]]:
    """(layout fields, settings, notes) a config sets (module docstring)."""
    r = cfg.resolved
    s = shape_of(r)
    notes: list[str] = []
    vp_raw = r.knob("virtual_pipeline_model_parallel_size", "INTERLEAVED_PIPELINE")
    vp = 1 if vp_raw in (None, "", "0", "null", "None") else as_int(vp_raw, "INTERLEAVED_PIPELINE")
    if vp_raw is None:
        notes.append("INTERLEAVED_PIPELINE unset and no conf default: vp 1")
    sp = truthy(r.knob("sequence_parallel", "SEQ_PARALLEL"))
    gran = r.knob("activations_checkpoint_granularity", "ACT_CKPT_GRANULARITY")
    if gran in (None, "", "null", "None"):
        recompute = "none"
    elif gran == "selective":
        recompute = "selective"
    else:
        raise ValueError(f"ACT_CKPT_GRANULARITY {gran}: full recompute of "
                         f"{r.knob('activations_checkpoint_num_layers', 'ACT_CKPT_NUM_LAYERS')} "
                         "layers is not a layout the records hold")  # fmt: skip
    dist = truthy(r.var("USE_DIST_OPTIMIZER"))
    if dist is None:
        dist = truthy(r.knob("use_distributed_optimizer"))
    fp4 = truthy(r.knob("fp4", "FP4"))
    fp8 = truthy(r.knob("fp8", "FP8"))
    settings: dict = {}
    if fp4:
        recipe = r.knob("fp4_recipe", "FP4_RECIPE")
        if recipe != "nvfp4":
            raise ValueError(f"FP4 with FP4_RECIPE {recipe}")
        precision = "nvfp4"
    elif fp8:
        recipe = r.knob("fp8_recipe", "FP8_RECIPE")
        if recipe is None:
            recipe = "delayed"  # TE DelayedScaling, the only FP8 recipe of the NeMo 1 stack
        if recipe == "mxfp8":
            precision = "mxfp8"
        elif recipe in ("delayed", "tensorwise", "blockwise"):
            precision = "fp8"
            settings["fp8_recipe"] = recipe
        else:
            raise ValueError(f"FP8_RECIPE {recipe}")
    else:
        precision = "bf16"
    fp8_params = truthy(r.knob("fp8_params", "FP8_PARAMS")) or truthy(
        r.knob("fp8_param_gather", "FP8_PARAM_GATHER")
    )
    if fp8_params and precision in ("fp8", "mxfp8"):
        settings["fp8_params"] = True
    overlap = truthy(r.knob("ub_tp_comm_overlap", "TP_COMM_OVERLAP"))
    if overlap is not None:
        settings["tp_comm_overlap"] = overlap
    per_layer = truthy(r.knob("enable_cuda_graph")) or truthy(r.knob("external_cuda_graph"))
    full = truthy(r.knob("full_cuda_graph")) or (
        truthy(r.knob("enable_cuda_graph")) and r.cuda_graph_scope() == "full_iteration"
    )
    if cfg.grads is not None:
        settings["main_grads"] = cfg.grads[0]
        notes.append(f"main_grads {cfg.grads[0]}: {cfg.grads[1]}")
    else:
        notes.append("gradient dtype not stated by the implementation: main_grads left at fp32")
    if per_layer:
        settings["cuda_graphs"] = True
    if full:
        settings["full_iteration_cuda_graph"] = True
    bucket = ddp_bucket_elements(cfg)
    if bucket is not None:
        settings["dp_bucket_elements"] = bucket
        notes.append(f"DDP bucket_size {bucket:,} elements (conf optim.bucket_size, BUCKET_SIZE)")
    layout = {
        "tp": s.tp,
        "pp": s.pp,
        "dp": s.dp,
        "cp": s.cp,
        "ep": 1,
        "vp": vp,
        "sequence_parallel": (sp and s.tp > 1) if sp is not None else None,
        "zero_stage": 1 if dist else 0 if dist is not None else None,
        "micro_batch": s.mbs,
        "global_batch_seqs": s.gbs,
        "recompute": recompute,
        "precision": precision,
    }
    for key, var in (("account_for_embedding_in_pipeline_split", "ASYM_PP_EMBED"),
                     ("account_for_loss_in_pipeline_split", "ASYM_PP_LOSS")):  # fmt: skip
        if r.knobs.env_keys.get(key):
            layout[key] = bool(truthy(r.knob(key, var)))
    return layout, settings, notes


def model_of(cfg: Config, bench: str, seq_log: int) -> tuple[dict, list[str]]:
    r = cfg.resolved
    notes = []
    seq = as_int(r.knob("encoder_seq_length") or str(seq_log), "encoder_seq_length")
    if seq != seq_log:
        raise ValueError(
            f"conf encoder_seq_length {seq} but the log's max_sequence_length {seq_log}"
        )
    if bench == "gpt3":
        model = dict(GPT3)
        fallback = []
        for key, var in (("num_layers", "NUM_LAYERS"), ("hidden_size", "HIDDEN_SIZE"),
                         ("num_attention_heads", "NUM_ATTENTION_HEADS")):  # fmt: skip
            got = r.knob(key, var)
            if got is None and not r.knobs.env_keys:
                got = str(GPT3_SHAPE[key])
                fallback.append(key)
            model[key] = as_int(got, key)
        ffn = r.knob("ffn_hidden_size", "FFN_HIDDEN_SIZE")
        model["ffn_hidden_size"] = int(ffn) if ffn else 4 * model["hidden_size"]
        model["num_kv_heads"] = model["num_attention_heads"]
        model["seq_len"] = model["max_position_embeddings"] = seq
        dropout = r.knob("hidden_dropout")
        model["hidden_dropout"] = bool(dropout and float(dropout) > 0)
        norm = r.knob("normalization")
        if fallback:
            notes.append(f"no conf in the submission: {', '.join(fallback)} the benchmark's "
                         "(the reference fixes the model), hidden_dropout and normalization "
                         "unstated (0 / LayerNorm, as every NVIDIA conf of the benchmark)")  # fmt: skip
        notes.append(f"GPT-3: num_layers {model['num_layers']}, hidden {model['hidden_size']}, "
                     f"FFN {model['ffn_hidden_size']}, heads {model['num_attention_heads']}, "
                     f"seq {seq}, hidden_dropout {dropout}, normalization {norm}; vocab 50257 "
                     "(the reference's SentencePiece c4_en_301_5Mexp2_spm, padded by Megatron); "
                     "models_zoo gpt3-175b keeps hidden_dropout 0.1")  # fmt: skip
        keys = ("name", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                "num_kv_heads", "vocab_size", "gated_mlp", "tied_embeddings", "seq_len",
                "max_position_embeddings", "hidden_dropout", "normalization", "linear_bias",
                "activation", "published_params_b")  # fmt: skip
        return {k: model[k] for k in keys}, notes
    size = r.knob("base_config", "MODEL_SIZE")
    layers = r.knob("num_layers", "OVERWRITTEN_NUM_LAYERS")
    if bench == "llama31_8b":
        if size != "8b" or as_int(layers, "num_layers") != 32:
            raise ValueError(f"base_config {size}, num_layers {layers}: not the 8B benchmark model")
        branches = re.findall(r'base_config == "8b":(.*?)\n\s*(?:elif|else)\b',
                              cfg.pretrain or "", re.DOTALL)  # fmt: skip
        built = next((m for b in branches
                      if (m := re.search(r"base_llama_config = (\w+)\(", b))), None)  # fmt: skip
        if built is None or built.group(1) != "Llama31Config8B":
            raise ValueError("the implementation's pretrain.py does not build Llama31Config8B for "
                             f"base_config 8b ({built.group(1) if built else 'no such branch'})")  # fmt: skip
        model = json.loads(json.dumps(LLAMA8))
        model["seq_len"] = seq
        notes.append(f"Llama 3.1 8B: NeMo Llama31Config8B, which pretrain.py builds for the conf's "
                     f"base_config 8b (num_layers 32, seq {seq}), with the Llama 3.1 8B "
                     "tokenizer's 128256 tokens (as models_zoo llama3.1-8b)")  # fmt: skip
        return model, notes
    if size != "405b" or as_int(layers, "num_layers") != 126:
        raise ValueError(f"base_config {size}, num_layers {layers}: not the 405B benchmark model")
    model = json.loads(json.dumps(LLAMA405))  # its own rope_scaling: no YAML anchors
    model["seq_len"] = seq
    notes.append("Llama 3.1 405B: NeMo Llama31Config405B (conf base_config 405b, num_layers 126, "
                 f"seq {seq}); Mixtral 8x22B tokenizer, vocab 32000 (models_zoo llama3.1-405b: "
                 "128256)")  # fmt: skip
    return model, notes


def gpu_of(system: dict) -> str:
    name = str(system.get("accelerator_model_name", ""))
    for needle, gpu in GPUS:
        if needle in name:
            return gpu
    raise ValueError(f"accelerator {name!r} is not an H100 / H200 / B200 / B300 / GB200 / GB300")


def interconnect_of(system: dict, gpu: str) -> str:
    """The system json's interconnect, abbreviated so that planner.validate.scale_out_gb_per_s
    reads the per-GPU scale-out bandwidth from it: "8x 400Gb/s ..." per 8-GPU node, or, for a
    72-GPU NVLink domain, "400Gb/s ... per GPU" (the NICs are per 4-GPU compute tray)."""
    nvlink = re.sub(r"\s+", " ", str(system.get("accelerator_interconnect", "")).strip())
    nvlink = nvlink.replace("NVLINK", "NVLink").replace("NVSWITCH", "NVSwitch")
    per_node = int(system.get("accelerators_per_node") or 0)
    net = str(system.get("host_networking", ""))
    nics = None
    for m in re.finditer(r"(\d+)\s*x\s*([^,;+]*?)\(?(\d+)\s*Gb", net):
        if int(m.group(1)) == per_node:
            desc = re.sub(r"\s+", " ", m.group(2).replace("NVIDIA ", "")).strip(" (")
            nics = (int(m.group(1)), desc, int(m.group(3)))
            break
    fabric = (
        "RoCE v2"
        if "ROCE" in net.upper()
        else "InfiniBand"
        if "INFINIBAND" in net.upper()
        else "scale-out"
    )
    if nics is None:
        scale = f"{fabric}, NIC count and rate not stated"
    elif gpu in RACK_SCALE:
        scale = f"{nics[2]}Gb/s {nics[1]} per GPU ({nics[0]} NICs per {per_node}-GPU compute tray)"
    else:
        scale = f"{nics[0]}x {nics[2]}Gb/s {nics[1]} per node"
    return f"{nvlink}; {scale}" if nvlink else scale


def container_of(mirror: Mirror, system_dir: str, system: dict, ctx: str) -> tuple[str, str]:
    """(XX.YY, where it was read) for the `NeMo XX.YY container` phrase (module docstring)."""
    if m := re.search(r"ngc(\d+\.\d+)", system_dir):
        return m.group(1), f"directory {system_dir}"
    if m := re.search(r"ngc(\d+\.\d+)", str(system.get("framework_name", ""))):
        return m.group(1), f"system json framework_name {system['framework_name']}"
    framework = str(system.get("framework", ""))
    stale = ""
    if m := (re.search(r"NeMo[^;]*? Release (\d+\.\d+)", framework)
             or re.search(r"Release (\d+\.\d+)", framework)):  # fmt: skip
        # v5.1 Cisco / Lenovo llama31_8b: "PyTorch NVIDIA Release 23.09" for a pretrain.py that
        # imports NeMo's Llama31Config8B (added 2024-08-27: no container before 24.09)
        old = tuple(map(int, m.group(1).split("."))) < (24, 9)
        if not (old and "Llama31Config" in (mirror.show(f"{ctx}/pretrain.py") or "")):
            return m.group(1), f"system json framework '{framework}'"
        stale = (f" (the system json's framework '{framework}' predates NeMo's Llama31Config, "
                 "which pretrain.py imports)")  # fmt: skip
    docker = mirror.show(f"{ctx}/Dockerfile") or ""
    if m := re.search(r"FROM_IMAGE_NAME=(\S+:(\d+\.\d+)\S*)", docker):
        nemo = re.search(r"NEMO_REVISION=(\S+)", docker)
        extra = f" + NeMo {nemo.group(1)}" if nemo else ""
        return m.group(2), f"Dockerfile base image {m.group(1)}{extra}{stale}"
    raise ValueError("no container version in the directory name, system json or Dockerfile")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def system_slug(system_dir: str, submitter: str = "") -> str:
    """The system part of an id: the directory name without its node count, container and
    framework tags, and without leading words the submitter's name already gives."""
    s = re.sub(r"_ngc\d+\.\d+", "", system_dir)
    s = re.sub(r"_(nemo|pytorch)$", "", s)
    s = re.sub(r"_\d{2}\.\d{2}$", "", s)  # HPE-Cray-XD670-H200-SXM5-141GB_n8_25.09
    s = re.sub(r"[_.]n(gpu)?\d+\b", "", s)
    s = re.sub(r"^\d+x", "", s)
    words, taken = slug(s).split("-"), set(slug(submitter).split("-"))
    while len(words) > 1 and words[0] in taken:
        words.pop(0)
    return "-".join(words)


def notable_env(cfg: Config) -> str:
    env = cfg.resolved.shell.env
    return ", ".join(f"{k}={env[k]}" for k in sorted(env) if NOTABLE.match(k) and env[k] != "")


@dataclass
class Directory:
    mirror: Mirror
    submitter: str
    system_dir: str
    bench: str
    files: list[str]

    @property
    def where(self) -> str:
        return f"v{self.mirror.version} {self.submitter}/results/{self.system_dir}/{self.bench}"


def record(d: Directory) -> dict:
    """One results directory as a record; ValueError with the reason when it cannot be one."""
    m = d.mirror
    system = json.loads(m.show(f"{d.submitter}/systems/{d.system_dir}.json") or "null") or {}
    if not system:
        raise ValueError(f"no {d.submitter}/systems/{d.system_dir}.json")
    gpu = gpu_of(system)
    per_node = int(system["accelerators_per_node"])
    facts = [log_facts(mllog(m.show(f) or "")) for f in d.files]
    counts = {platform_count(f.platform) for f in facts}
    batch = {(f.gbs, f.ga, f.seq) for f in facts}
    if len(counts) != 1 or len(batch) != 1:
        raise ValueError(
            f"result files disagree: platforms {sorted(counts)}, (GBS, GA, seq) {batch}"
        )
    nodes, (gbs, ga, seq) = counts.pop(), batch.pop()
    gpus = nodes * per_node
    notes: list[str] = []
    confidence_why: list[str] = []
    json_nodes = int(system.get("number_of_nodes") or 0)
    if json_nodes != nodes:
        confidence_why.append(f"system json number_of_nodes {json_nodes} != platform {nodes}")
    if not all(f.steps for f in facts):
        blocks = [b for b in (block_step_s(f) for f in facts) if b is not None]
        quote = (f"; block_start/block_stop wall clock {statistics.median(blocks):.4g} s/step "
                 f"= {tokens_per_s_per_gpu(gbs, seq, statistics.median(blocks), gpus):.1f} "
                 "tokens/s/GPU, not the same quantity") if blocks else ""  # fmt: skip
        raise ValueError(f"no per-step train_step_timing in the logs{quote}")
    units = {step_unit(f) for f in facts}
    if None in units or len(units) != 1:
        raise ValueError(f"the timing lines' step metadata does not advance by one step: {units}")
    unit = units.pop()
    medians = [file_median(f.steps) for f in facts]
    step_s = statistics.median(medians)
    tps = tokens_per_s_per_gpu(gbs, seq, step_s, gpus)

    cfg, how = find_config(m, d.submitter, d.bench, d.system_dir, nodes, per_node, gbs, ga)
    layout, settings, lay_notes = layout_and_settings(cfg)
    model, model_notes = model_of(cfg, d.bench, seq)
    shell = cfg.resolved.shell
    for name in shell.missing:
        root = bench_root(m, d.submitter, d.bench)
        elsewhere = sorted({p[len(root) :].rsplit("/", 1)[0] for p in m.files
                            if p.startswith(root) and p.endswith(f"/{name}")})  # fmt: skip
        confidence_why.append(f"sources {name}, not in the submission's implementation"
                              + (f" (a file of that name is in {', '.join(elsewhere)})"
                                 if elsewhere else ""))  # fmt: skip
    if cfg.ambiguous:
        confidence_why.append(cfg.ambiguous)
    if not cfg.resolved.knobs.env_keys:
        confidence_why.append("no Hydra conf in the submission: variables read at NVIDIA's "
                              "names, defaults of unset ones unknown")  # fmt: skip
    if shell.exits:
        raise ValueError(f"the config exits: {shell.exits}")
    platform_names = sorted({re.sub(r"^\s*\d+\s*x\s*", "", f.platform) for f in facts})
    for name in platform_names:
        if "PLACEHOLDER" in name:
            continue
        if not any(re.search(rf"(?<![A-Z]){n}", name) for n, g in GPUS if g == gpu):
            confidence_why.append(f"log platform '{name}' but system json "
                                  f"{system.get('accelerator_model_name')}")  # fmt: skip
    version, container_src = container_of(m, d.system_dir, system, cfg.context)
    per_domain = 72 if gpu in RACK_SCALE else per_node
    s = shape_of(cfg.resolved)
    rel = cfg.path.split(f"{d.submitter}/", 1)[1]
    notes.append(f"config {rel} ({how}){'; ' + cfg.note if cfg.note else ''}; sources "
                 f"{', '.join(shell.sourced)}")  # fmt: skip
    notes.append(f"MINIBS {s.minibs}, TP {s.tp}, PP {s.pp}, CP {s.cp}, MBS {s.mbs}, DGXNNODES "
                 f"{s.nodes} x DGXNGPU {s.per_node} -> DP {s.dp}, GBS {s.gbs}, GA {s.ga} (log: "
                 f"GBS {gbs}, GA {ga}, seq {seq}, platform {'; '.join(platform_names)})")  # fmt: skip
    r = cfg.resolved
    unit_text = unit
    if every := re.fullmatch(r"(\d+) steps", unit):
        logged = r.knob("log_every_n_steps", "LOG_EVERY_N_STEPS")
        if logged != every.group(1):
            raise ValueError(f"timing lines every {every.group(1)} steps but the config's "
                             f"log_every_n_steps is {logged}")  # fmt: skip
        unit_text = f"steps, a line every {every.group(1)} (LOG_EVERY_N_STEPS {logged})"
        blocks = [b for b in (sample_block_step_s(f) for f in facts) if b is not None]
        if blocks:
            wall = statistics.median(blocks)
            notes.append(f"timing lines sample one step in {every.group(1)} (Lightning "
                         f"log_every_n_steps {logged}, each the time of the step it is logged "
                         f"at); block_start/block_stop wall clock {wall:.4g} s/step (median over "
                         f"the files of the median over blocks after the first), "
                         f"{(wall / step_s - 1) * 100:+.1f} % vs the median step")  # fmt: skip
    if layout["precision"] == "fp8":
        hybrid = truthy(r.knob("fp8_hybrid", "FP8_HYBRID"))
        read = r.knob("fp8_recipe", "FP8_RECIPE")
        notes.append(f"FP8 {settings.get('fp8_recipe')} scaling ("
                     + (f"FP8_RECIPE {read}" if read else "no FP8_RECIPE in this stack: TE "
                        "DelayedScaling") + "), amax history "
                     f"{r.knob('fp8_amax_history_len', 'FP8_AMAX_HISTORY')} "
                     f"({r.knob('fp8_amax_compute_algo', 'FP8_AMAX_ALGO')}), format "
                     f"{'HYBRID (E4M3 fwd, E5M2 grads)' if hybrid else 'E4M3'}")  # fmt: skip
    if layout["precision"] == "nvfp4":
        notes.append("NVFP4 GEMMs (FP4=True, FP4_RECIPE nvfp4; FP8=False); dot-product attention "
                     f"FP8_DPA {r.knob('fp8_dot_product_attention', 'FP8_DPA')}")  # fmt: skip
    if gpu in RACK_SCALE:
        racks = re.search(r"\((\d+)x [^)]*NVL72\)", str(system.get("system_name", "")))
        used = f", {gpus // int(racks.group(1))} GPUs of each rack's 72" if racks else ""
        notes.append(f"{system.get('system_name')}: the json's node is a {per_node}-GPU compute "
                     f"tray, the NVLink domain the rack ({gpus} GPUs = {nodes} trays{used})")  # fmt: skip
    if truthy(r.knob("use_tp_pp_dp_mapping", "TP_PP_DP_MAPPING")):
        notes.append("TP_PP_DP_MAPPING: ranks ordered TP-PP-DP (not Megatron's TP-CP-DP-PP)")
    notes.extend(lay_notes)
    notes.extend(model_notes)
    if env := notable_env(cfg):
        notes.append(f"tuning env (not priced): {env}")
    notes.append(f"container from {container_src}")
    confidence = "medium" if confidence_why else "high"
    if confidence_why:
        notes.append("confidence medium: " + "; ".join(confidence_why))
    key = facts[0].key
    derivation = (f"median step {step_s:.6g} s = median of per-file medians "
                  f"[{', '.join(f'{x:.6g}' for x in medians)}] of '{key}' over {len(medians)} "
                  f"result files (first {WARMUP_STEPS} steps of each dropped; step metadata in "
                  f"{unit_text}); {gbs} seqs x {seq} tokens / {step_s:.6g} s / {gpus} GPUs")  # fmt: skip
    model_slug = {"gpt3": "gpt3-175b", "llama31_405b": "llama3.1-405b"}.get(d.bench, "llama3.1-8b")
    return {
        "id": f"mlperf-v{m.version}-{slug(d.submitter)}-{system_slug(d.system_dir, d.submitter)}-"
        f"{gpu.split('-')[0]}-{model_slug}-{gpus}gpu",
        "framework": "megatron",
        "source": f"MLPerf Training v{m.version} (mlcommons/training_results_v{m.version} "
        f"@{m.short}), {d.submitter} {d.system_dir}, {d.bench}, NeMo {version} container",
        "confidence": confidence,
        "model": model,
        "gpu": gpu,
        "num_gpus": gpus,
        "gpus_per_node": per_domain,
        "interconnect": interconnect_of(system, gpu),
        "layout": layout,
        **({"settings": settings} if settings else {}),
        "measured_tokens_per_s_per_gpu": round(tps, 1),
        "tokens_derivation": derivation,
        "notes": "; ".join(notes),
    }


def directories(mirror: Mirror) -> list[Directory]:
    found: dict[tuple[str, str, str], list[str]] = {}
    for path in mirror.files:
        m = re.fullmatch(r"([^/]+)/results/([^/]+)/([^/]+)/(result_[^/]*\.txt)", path)
        if m and m.group(3) in BENCHMARKS:
            found.setdefault((m.group(1), m.group(2), m.group(3)), []).append(path)
    return [Directory(mirror, s, sd, b, sorted(fs)) for (s, sd, b), fs in sorted(found.items())]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    mirrors = sorted(
        (Mirror(a) for a in argv[1:]), key=lambda m: tuple(map(int, m.version.split(".")))
    )
    runs, skipped = [], []
    seen: dict[frozenset, str] = {}  # the MLLOG lines of a directory's files -> where
    for mirror in mirrors:
        for d in directories(mirror):
            impls = implementations(mirror, d.submitter, d.bench)
            if not any(is_nemo(files) for files in impls.values()):
                kinds = ", ".join(sorted(impl_name(p, impls[p], d.bench) for p in impls)) or "none"
                skipped.append(f"{d.where} -- implementation not NeMo ({kinds})")
                continue
            logs = mllog_fingerprint([mirror.show(f) or "" for f in d.files])
            if logs in seen:
                skipped.append(f"{d.where} -- duplicate: its result files carry the MLLOG lines "
                               f"of {seen[logs]}")  # fmt: skip
                continue
            seen[logs] = d.where
            try:
                runs.append(record(d))
            except (ValueError, Unresolved, KeyError, subprocess.CalledProcessError) as err:
                skipped.append(f"{d.where} -- {err}")
    ids = [r["id"] for r in runs]
    if dupes := sorted({i for i in ids if ids.count(i) > 1}):
        print(f"duplicate ids: {dupes}", file=sys.stderr)
        return 1
    header = [
        (
            "MLPerf Training results, LLM pre-training with NVIDIA NeMo (GPT-3 175B, "
            "Llama 3.1 405B, Llama 3.1 8B), in the published_runs.yaml schema."
        ),
        EVALUATION_ONLY,
        "Source: "
        + "; ".join(
            f"github.com/mlcommons/training_results_v{m.version} @ {m.commit}" for m in mirrors
        ),
        "Generated by bench/heldout/make_mlperf_summary.py (its docstring says what is and is not taken).",
    ]
    write_summary(header, runs, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
