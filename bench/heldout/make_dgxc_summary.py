"""NVIDIA DGX Cloud Benchmarking's expected-performance tables in the published_runs.yaml schema: a
sixth held-out source, vendor-tuned NeMo pre-training runs on H100 and GB200 (16 to 2,304 GPUs).

Held-out evaluation data only: no row is used to fit a constant (docs/accuracy.md "Held-out: DGX
Cloud Benchmarking"). github.com/NVIDIA/dgxc-benchmarking publishes, per workload folder, a README
with the layouts its recipes run and an "Expected Performance" section of measured training step
times (the releases v24.11.1 .. v25.05.05 and the 2025-07 revision of Grok-1's H100 figures; later
releases dropped the figures). This script reads every version of every README that holds such a
table (git history, oldest commit first; parsed, never run) and writes one record per measured
configuration. Usage, from a clone of NVIDIA/dgxc-benchmarking:

    python bench/heldout/make_dgxc_summary.py DGXC_GIT_DIR NEMO_GIT_DIR \
        > bench/heldout/dgxc_performance_summary.yaml

What a record takes, and from where:
- The measured figure: the table's "Training step time (seconds per step)"; tokens/s/GPU = sequence
  x global batch / step time / GPUs, the README's own formula. Every row is checked against the
  table's "Throughput in tokens per second" (within 1.5 %); where that cell alone disagrees, the
  table's MFU row decides (_mfu_arbitrated); a row whose figures still disagree is not
  transcribed, with the two numbers.
- The layout: the README's layout table for the column's GPU type and GPU count (TP, PP, CP, EP,
  ETP, DP, VP, MBS, GBS, sequence length, layers, FSDP), or, in the 2024-11 .. 2025-03 per-size
  READMEs, the table title's "(TP=.., PP=.., CP=.., VP=.., MBS=.., GA=.., SEQ=..)" with the
  column's GPUs and "(GBS=..)" and the table's own Layers / GBS / PP / VP rows; then the launch
  scripts' own values where the README says "NA" or otherwise, unless the table's DP / GA cells
  side with the README (_with_launch_layout). DP = GPUs / (TP x PP x CP), checked against the
  table's DP and GA (one may be a typo the other refutes). A layout with fewer layers than the
  model ("proxy configs", which the READMEs say fit a model onto fewer GPUs) is not transcribed.
  Where the title gives no sequence length, it is the one the table's own throughput implies
  (tokens/s x step / GBS, within 1 % of 2,048, 4,096 or 8,192), said in the notes. ETP > 1 of an
  MoE model is stated as `layout.etp`.
- The GPU type: the table's column header ("128x GB200 GPUs"); the layout table's, from the
  nearest heading or bold line above it that names one. H100 rows are DGX H100 (8 GPUs a node),
  GB200 rows NVL72 racks (72 GPUs a NVLink domain), as Megatron-Bridge's / NeMo's summaries.
- The container: the README's nvcr.io/nvidia/nemo:<tag> (or `nemo:<tag>`), else the workload's
  launch.sh FW_VERSION where it sets one; "dev" or two candidates: not a NeMo release (the record
  names the README's commit instead), kept in the notes.
- The model: by workload folder and size: Llama 3.1 405B / 70B / 8B and GPT-3 175B (NeMo
  Megatron) the planner presets, Nemotron-4 15B / 340B as bench/heldout/make_nemo_summary.py
  describes them, DeepSeek-V3 the preset, Grok-1 314B as NeMo's performance script builds it
  (scripts/performance/llm/pretrain_grok1_314b.py at the NeMo commit the 25.05 grok1/setup.sh pins,
  6f2c6fda: MixtralConfig8x7B with 64 layers, hidden 6,144, 48 heads, 8 query groups, expert FFN
  32,768, 8 experts top-2, the Llama 3 70B tokenizer's 128,256 tokens). Llama 4 and Nemotron-H are
  not described by the cost model (make_nemo_summary.UNDESCRIBABLE); fine-tuning tables and the
  JAX (MaxText, PAXML) workloads are not pre-training with a profiled framework: not read.
- The recipe settings (`settings:`, recompute, dropout): NeMo Launcher rows (2024-11 .. 2025-04)
  from the workload's hydra YAML and its configure.sh / launch.sh overrides (launcher_settings);
  2025-04+ rows from the NeMo performance script the launch script runs, read at the NeMo commit
  its setup.sh pins (perf_script_settings, make_nemo_summary.recipe_settings), with the launch's
  own --cuda_graphs flag (launch_cuda_graphs); Grok-1's script, which builds its recipe in its own
  code, by moe_script_settings (token drop, dispatcher, TP overlap, gradient dtype, fp8);
  DeepSeek-V3's by deepseek_script_settings (recompute modules, uneven first / last pipeline
  stages as layout.layers_per_stage, the recipe's MTP layer as the model's mtp_num_layers, token
  drop, TP overlap, dispatcher).
- Duplicates: a configuration a README published before with the same figure is one record (the
  notes list the later releases); another figure in the same container replaces it (a revision);
  another figure in other or unknown software is another record (_merge).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import EVALUATION_ONLY, expr_value, git, git_show, write_summary
from make_nemo_summary import (
    Recipes,
    _models,
    _undescribable,
    fp8_param_gather_of,
    literal_defaults,
    moe_recipe_settings,
    preset,
    recipe_settings,
)

SOURCE = "github.com/NVIDIA/dgxc-benchmarking"
GPUS = {"GB200": ("gb200", 72), "B200": ("b200", 8), "H100": ("h100-sxm-80gb", 8)}
"""Column GPU name -> (GPU preset, GPUs per NVLink domain)."""
GPU_RE = re.compile(r"\b(GB200|B200|H100)s?\b")
SEQ_LENGTHS = (2048, 4096, 8192)
THROUGHPUT_TOLERANCE = 0.015
"""Relative gap allowed between the table's throughput and sequence x GBS / step (rounding of a
step time given to 2-3 decimals)."""
GROK1 = {
    "name": "Grok-1 314B (NeMo performance script)",
    "num_layers": 64,
    "hidden_size": 6144,
    "ffn_hidden_size": None,
    "num_attention_heads": 48,
    "num_kv_heads": 8,
    "vocab_size": 128256,
    "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 32768},
    "rotary_base": 1000000.0,
    "norm_eps": 1e-05,
}
"""NeMo scripts/performance/llm/pretrain_grok1_314b.py at 6f2c6fda (dgxc grok1/setup.sh NEMO_COMMIT
of v25.05.04): run.Config(MixtralConfig8x7B, num_layers=64, hidden_size=6144,
num_attention_heads=48, num_query_groups=8, ffn_hidden_size=32768, num_moe_experts=8), Mixtral's
SwiGLU, RMSNorm, RoPE (base 1e6) and top-2 router; tokenizer hf_tokenizer("meta-llama/
Meta-Llama-3-70B")."""


def _model(workload: str, size: str) -> tuple[str, dict] | str:
    """(display name, ModelSpec dict without seq_len) of a workload folder and size, or why not."""
    size = size.lower()
    if workload in ("llama4", "nemotronh", "nemotron-h"):
        return _undescribable("LLAMA4" if workload == "llama4" else "Nemotron-H") or "undescribed"
    if workload == "llama3.1" and size in ("405b", "70b", "8b"):
        return f"Llama 3.1 {size.upper()}", preset(f"llama3.1-{size}")
    if workload == "nemotron" and size in ("15b", "340b"):
        return f"Nemotron-4 {size.upper()}", dict(_models()[f"Nemotron-{size.upper()}"][2])
    if workload == "nemo_megatron" and size == "175b":
        return "GPT-3 175B (NeMo Megatron)", preset("gpt3-175b")
    if workload == "grok1" and size == "314b":
        return "Grok-1 314B", dict(GROK1)
    if workload == "deepseek_v3" and size == "671b":
        return "DeepSeek-V3", preset("deepseek-v3")
    return f"no model for workload {workload!r} size {size!r}"


@dataclass
class Readme:
    git_dir: str
    path: str
    blob: str
    commit: str
    date: str
    release: str
    text: str

    @property
    def folder(self) -> str:
        """The workload folder the README documents (its launch scripts beside it)."""
        return self.path.rsplit("/", 1)[0]

    def file(self, path: str) -> str | None:
        """The text of `path` at the README's commit, None where it is not there or the README
        was read without its history (cached: every row of a README reads the same scripts)."""
        return None if self.git_dir is None else _show(self.git_dir, self.commit, path)


@functools.cache
def _show(git_dir: str, commit: str, path: str) -> str | None:
    return git_show(git_dir, commit, path)


RELEASE_RE = re.compile(r"\b[vV]?(\d\d\.\d\d(?:\.\d+)?)\b")


def readmes(git_dir: str) -> list[Readme]:
    """Every version of every workload README that holds a measured step-time table, with the
    first commit that has it (oldest first) and the release that commit belongs to (its message's
    version, or the last such message before it)."""
    out: list[Readme] = []
    seen: set[str] = set()
    release = "unreleased"
    for line in git(git_dir, "log", "--reverse", "--topo-order", "--format=%H %cs %s", "--all").splitlines():
        commit, date, subject = line.split(" ", 2)
        m = RELEASE_RE.search(subject)
        if m and ("release" in subject.lower() or subject.lower().startswith("v")):
            release = m.group(1)
        elif not release.endswith("+"):
            release += "+"  # a commit after a release, before the next one
        for entry in git(git_dir, "ls-tree", "-r", commit).splitlines():
            meta, path = entry.split("\t", 1)
            blob = meta.split()[2]
            name = path.rsplit("/", 1)[-1]
            if not re.fullmatch(r"README[^/]*\.md", name) or "/" not in path or blob in seen:
                continue
            seen.add(blob)
            text = git(git_dir, "cat-file", "-p", blob)
            if "training step time (seconds" in text.lower():
                out.append(Readme(git_dir, path, blob, commit, date, release, text))
    return out


@dataclass
class Table:
    gpu: str | None  # from the nearest heading / bold line above naming a GPU
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    parts = [c.strip() for c in line.strip().split("|")]
    if parts and parts[0] == "":
        parts = parts[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]
    return parts


def tables(text: str) -> list[Table]:
    """Markdown tables (a header line, a `---` separator, then every following non-blank line
    holding a `|`, with or without the leading one), each with the GPU named by the nearest
    heading or bold line above it."""
    lines = text.splitlines()
    out: list[Table] = []
    gpu: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(("#", "**")):
            m = GPU_RE.search(stripped)
            if m:
                gpu = m.group(1)
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if "|" in stripped and re.fullmatch(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?", nxt):
            table = Table(gpu, _cells(stripped))
            i += 2
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                table.rows.append(_cells(lines[i]))
                i += 1
            out.append(table)
            continue
        i += 1
    return out


def _num(cell: str | None) -> float | None:
    if cell is None:
        return None
    c = cell.strip().rstrip("%").replace(",", "")
    if c.upper() in ("", "NA", "N/A", "-"):
        return None
    return float(c)  # ValueError for a cell that is not one number (e.g. "8.7  5")


def _int(cell: str | None) -> int | None:
    v = _num(cell)
    return None if v is None else int(v)


LAYOUT_KEYS = {
    "gpus": "GPUs", "seq": "SeqLen", "layers": "Layers", "fsdp": "FSDP", "tp": "TP", "pp": "PP",
    "cp": "CP", "ep": "EP", "etp": "ETP", "dp": "DP", "vp": "VP", "mbs": "MBS", "gbs": "GBS",
    "ga": "GA",
}  # fmt: skip


def layout_rows(table: Table) -> list[dict]:
    """The rows of a layout table as {key: value} (LAYOUT_KEYS; `size`, `precisions` where the
    table has Size / Precision columns; `gpu` the table's GPU)."""
    head = [h.strip().lower() for h in table.header]
    out = []
    for cells in table.rows:
        row = dict(zip(head, cells))
        rec: dict = {"gpu": table.gpu}
        for key, name in LAYOUT_KEYS.items():
            rec[key] = _int(row.get(name.lower()))
        size = row.get("size") or row.get("model size")
        rec["size"] = size.strip().lower() if size else None
        prec = row.get("precision")
        rec["precisions"] = {p.strip().lower() for p in prec.split("/")} if prec else None
        out.append(rec)
    return out


TITLE_RE = re.compile(r"\(([^)]*=[^)]*)\)")
COLUMN_RE = re.compile(r"(\d+)\s*x?\s*(GB200|B200|H100)\s*GPUs?(?:\s*\(GBS\s*=\s*(\d+)\))?", re.IGNORECASE)


@dataclass
class Column:
    gpus: int
    gpu: str
    gbs: int | None
    values: dict[str, str]  # row label (lower case, first words) -> cell


def perf_table(table: Table) -> tuple[str, dict[str, int], list[Column]] | None:
    """(title, layout given in the title, columns) of a step-time table, or None for another
    table."""
    labels = [r[0].strip().lower() if r else "" for r in table.rows]
    if not any(lab.startswith("training step time") for lab in labels):
        return None
    title = table.header[0]
    given = {}
    m = TITLE_RE.search(title)
    if m:
        for part in m.group(1).split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                given[k.strip().lower()] = _int(v) if v.strip().lower() != "none" else None
    columns = []
    for j, head in enumerate(table.header[1:], start=1):
        cm = COLUMN_RE.search(head)
        if not cm:
            continue
        values = {}
        for row in table.rows:
            if len(row) > j and row[0].strip():
                values[row[0].strip().lower()] = row[j]
        gbs = int(cm.group(3)) if cm.group(3) else None
        columns.append(Column(int(cm.group(1)), cm.group(2).upper(), gbs, values))
    return title, given, columns


def _value(col: Column, prefix: str) -> str | None:
    return next((v for k, v in col.values.items() if k.startswith(prefix)), None)


def _size_of(title: str, path: str) -> str | None:
    m = re.search(r"\b(\d+(?:\.\d+)?[bB])\b", title)
    if m:
        return m.group(1).lower()
    m = re.search(r"README_(\d+b)\.md$", path)
    return m.group(1) if m else None


def _precision_of(title: str) -> str | None:
    t = title.upper()
    if "FP8" in t:
        return "fp8"
    if "BF16" in t:
        return "bf16"
    return None


def _container(readme: Readme) -> tuple[str | None, str]:
    """(NeMo container tag, where it was read): the README's nvcr.io/nvidia/nemo:<tag> or
    `nemo:<tag>`; else the workload's launch.sh at the same commit, where it sets one
    FW_VERSION (the image it runs, nvidia+nemo+$FW_VERSION.sqsh)."""
    m = re.search(r"nvcr\.io/nvidia/nemo:([0-9A-Za-z.]+)", readme.text) or re.search(
        r"\bnemo:(\d\d\.\d\d(?:\.\d+)?)", readme.text
    )
    if m:
        return m.group(1).rstrip("."), "README"
    folder = readme.folder
    launch = readme.file(f"{folder}/launch.sh")
    if launch is None:
        return None, "not stated"
    versions = sorted(set(re.findall(r"^\s*(?:export\s+)?FW_VERSION=([0-9][0-9.]*)", launch, re.MULTILINE)))
    if len(versions) == 1:
        return versions[0], f"{folder}/launch.sh FW_VERSION"
    return None, f"not stated ({folder}/launch.sh sets {' or '.join(versions) or 'none'})"


def _seq_from_throughput(throughput: float, step_s: float, gbs: int) -> int | None:
    implied = throughput * step_s / gbs
    for seq in SEQ_LENGTHS:
        if abs(implied / seq - 1) < 0.01:
            return seq
    return None


@dataclass
class Row:
    """One measured configuration of one README version."""

    readme: Readme
    workload: str
    title: str
    size: str
    precision: str
    gpu: str
    gpus: int
    layout: dict
    step_s: float
    throughput: float | None
    column: Column
    check: str  # "throughput" (its cell agrees), "mfu" (arbitrated), "mfu?" (to arbitrate), "none"
    notes: list[str]


WORKLOAD_SIZE = {"deepseek_v3": "671b", "nemo_megatron": "175b"}
"""The one model size of a workload folder whose tables' titles name none."""


def rows_of(readme: Readme, skipped: list[str]) -> list[Row]:
    workload = readme.path.split("/")[0]
    all_tables = tables(readme.text)
    layouts = [r for t in all_tables if {"GPUs", "TP"} <= set(t.header) for r in layout_rows(t)]
    perf = [(t, p) for t in all_tables if (p := perf_table(t)) is not None]
    file_gpus = {c.gpu for _, (_, _, cols) in perf for c in cols}
    for row in layouts:
        if row["gpu"] is None and len(file_gpus) == 1:
            row["gpu"] = next(iter(file_gpus))
    out = []
    for _table, (title, given, columns) in perf:
        size = _size_of(title, readme.path) or WORKLOAD_SIZE.get(workload)
        precision = _precision_of(title)
        where = f"{readme.release} {readme.path} '{title}'"
        if size is None or precision is None:
            skipped.append(f"{where} -- the title names no model size or precision")
            continue
        got: list[tuple[Column, Row | str]] = []
        for col in columns:
            try:
                got.append((col, _row(readme, workload, title, size, precision, given, col, layouts)))
            except ValueError as err:
                got.append((col, str(err)))
        checked = [r for _, r in got if isinstance(r, Row) and r.check == "throughput"]
        for col, row in got:
            if isinstance(row, Row) and row.check == "mfu?":
                row = _mfu_arbitrated(row, col, checked)
            if isinstance(row, str):
                skipped.append(f"{where} {col.gpus}x {col.gpu} -- {row}")
            else:
                out.append(row)
    return out


def _per_gpu_rate(row: Row) -> float:
    return row.layout["seq"] * row.layout["gbs"] / row.step_s / row.gpus


def _mfu_arbitrated(row: Row, col: Column, checked: list[Row]) -> Row | str:
    """A column whose throughput cell disagrees with sequence x GBS / step, kept when the same
    table's MFU row sides with its step and GBS: MFU is proportional to tokens per GPU and second
    (one model, one GPU type, one precision per table), so against a column of the table whose
    throughput cell checks, the two MFU cells must stand in the ratio of the two rates."""
    mfu = _num(_value(col, "model flops"))
    for ref in checked:
        ref_mfu = _num(_value(ref.column, "model flops"))
        if mfu is None or ref_mfu is None:
            continue
        want = _per_gpu_rate(row) / _per_gpu_rate(ref)
        if abs(mfu / ref_mfu / want - 1) < THROUGHPUT_TOLERANCE:
            row.check = "mfu"
            row.notes.append(
                f"the table's throughput cell {row.throughput:g} tokens/s disagrees with sequence x "
                f"GBS / step; its MFU cell {mfu:g} % does not (against {ref.gpus} GPUs' "
                f"{ref_mfu:g} %, whose throughput cell checks): the throughput cell is not used"
            )
            return row
    return row.notes[0]


def _distinct_layouts(rows: list[dict]) -> set[tuple]:
    """The layout rows that differ in more than the precisions they are stated for."""
    return {tuple(sorted((k, v) for k, v in r.items() if k != "precisions")) for r in rows}


def _row(readme, workload, title, size, precision, given, col, layouts) -> Row:
    step = _num(_value(col, "training step time"))
    if step is None:
        raise ValueError("no step time")
    throughput = _num(_value(col, "throughput"))
    per_col = {k: _int(_value(col, k)) for k in ("layers", "gbs", "pp", "vp")}
    per_col = {k: v for k, v in per_col.items() if v is not None}
    seq_note: str | None = None
    if given:
        layout = {
            "tp": given.get("tp"), "pp": given.get("pp"), "cp": given.get("cp", 1),
            "ep": given.get("ep"), "vp": given.get("vp"), "mbs": given.get("mbs"),
            "ga": given.get("ga"), "gbs": col.gbs, "gpus": col.gpus, "seq": given.get("seq"),
            "layers": None, "fsdp": None, "etp": None, "dp": None,
            "from": "the table title and column",
        }  # fmt: skip
        layout.update(per_col)
        if layout["gbs"] is None:
            raise ValueError("the column gives no global batch")
    else:
        cands = [
            r for r in layouts
            if r["gpu"] == col.gpu and r["gpus"] == col.gpus
            and (r["size"] is None or r["size"] == size)
            and (r["precisions"] is None or precision in r["precisions"])
            and (col.gbs is None or r["gbs"] == col.gbs)
        ]  # fmt: skip
        distinct = _distinct_layouts(cands)
        if not distinct:
            proxy = [r for r in layouts if r["gpu"] == col.gpu and r["gpus"] == col.gpus
                     and r["size"] and "proxy" in r["size"]]  # fmt: skip
            if proxy:
                raise ValueError(f"proxy config (the layout table's size {proxy[0]['size']!r})")
            raise ValueError("no layout row for this GPU type and count")
        if len(distinct) > 1 and throughput is not None:
            cands = [
                r for r in cands
                if r["seq"] and r["gbs"]
                and abs(r["seq"] * r["gbs"] / step / throughput - 1) < THROUGHPUT_TOLERANCE
            ]  # fmt: skip
            distinct = _distinct_layouts(cands)
        if len(distinct) != 1:
            raise ValueError(f"{len(distinct)} layout rows match this GPU type and count")
        layout = dict(cands[0], **{"from": "the layout table"})
        layout.update(per_col)
    if layout["seq"] is None:
        if throughput is None:
            raise ValueError("no sequence length and no throughput to imply it")
        layout["seq"] = _seq_from_throughput(throughput, step, layout["gbs"])
        if layout["seq"] is None:
            raise ValueError(
                f"the throughput {throughput:g} x step {step:g} / GBS {layout['gbs']} implies no "
                f"sequence length of {SEQ_LENGTHS}"
            )
        seq_note = f"sequence {layout['seq']} implied by the table's throughput x step / GBS"
    check, notes = "none", []
    if throughput is not None:
        mine = layout["seq"] * layout["gbs"] / step
        check = "throughput"
        if abs(mine / throughput - 1) > THROUGHPUT_TOLERANCE:
            check = "mfu?"  # rows_of asks the table's MFU row
            notes.append(
                f"published throughput {throughput:g} tokens/s but sequence x GBS / step = "
                f"{layout['seq']} x {layout['gbs']} / {step:g} = {mine:.0f}"
            )
    if seq_note:
        notes.append(seq_note)
    return Row(readme, workload, title, size, precision, col.gpu, col.gpus, layout, step,
               throughput, col, check, notes)  # fmt: skip


# ------------------------------------------------------------------ NeMo Launcher recipe settings

LAUNCHER_YAML = {
    "llama3.1": "llama3.1_{size}.yaml",
    "nemotron": "nemotron4-{size}-synth.yaml",
    "nemo_megatron": "gpt3_{size}_hydra.yaml",
    "grok1": "grok1_{size}.yaml",
}
"""The NeMo Launcher (hydra) configuration a workload folder's configure.sh / launch.sh hands
megatron_gpt_pretraining.py (--config-name), in the folder or its cfg/ (2024-11 .. 2025-04)."""
SHELL_FILES = ("configure.sh", "launch.sh")
READ_KEYS = frozenset({
    "fp8", "fp8_params", "fp8_amax_history_len", "fp8_amax_compute_algo", "ub_tp_comm_overlap",
    "activations_checkpoint_granularity", "hidden_dropout", "attention_dropout",
    "optim.grad_sync_dtype", "NVTE_FUSED_ATTN", "moe_token_dispatcher_type",
    "moe_pad_expert_input_to_capacity", "moe_expert_capacity_factor",
})  # fmt: skip
"""The configuration keys launcher_settings turns into record fields."""
ASSIGN_RE = re.compile(r"(?<![\w.])\+{0,2}model\.([\w.]+)=(\"[^\"]*\"|[^\s\"\\]+)")
ENV_RE = re.compile(r"^\s*(?:export\s+)?(NVTE_FUSED_ATTN)=(\S+)")
IF_RE = re.compile(r"^\s*(if|elif)\s+(.*?);?\s*then\s*$")


LAYOUT_VARS = ("TP", "PP", "CP", "VP", "EP", "MBS")
"""The launch scripts' layout variables (`TP=8`), read where a row's branch sets a literal."""
VAR_RE = re.compile(r"^\s*(?:export\s+)?(" + "|".join(LAYOUT_VARS) + r")=([0-9]+|null)\s*$")
RM_VAR_RE = re.compile(r"""^\s*(?:export\s+)?RM=['"]?([\w ,]+?)['"]?\s*$""")
"""DeepSeek-V3's launch.sh recompute modules (`RM='mla_up_proj'`, passed as --recompute_modules $RM)."""
GRAPH_FLAG_RE = re.compile(r"--cuda_graphs\s+(true|false|\"?\$\{?CUDA_GRAPH\}?\"?)(?=[\s\"\\]|$)")
"""The performance script's --cuda_graphs flag in a launch script (scripts/performance/
argument_parser.py; it wins over the recommended-config CSV's `cuda_graphs`: utils.py
get_user_configs), literal or the launch's own CUDA_GRAPH variable."""
GRAPH_VAR_RE = re.compile(r"^\s*(?:export\s+)?CUDA_GRAPH=(?:\$\{CUDA_GRAPH:-(\w+)\}|(true|false))\s*$")
"""`CUDA_GRAPH=${CUDA_GRAPH:-true}` (the value a run takes unless the user exports another: the
published figures are the script's defaults, as its layout variables') or a literal."""
COND_RE = re.compile(
    r"\[\[?\s*\"?\$\{?(MODEL_SIZE|DTYPE|GPU_TYPE|JOB_TOTAL_GPUS)\}?\"?\s*(==?|-eq)\s*\"?([\w.]+)\"?\s*\]\]?"
)


def _condition(text: str, ctx: dict[str, str]) -> bool | None:
    """A launch-script `if` condition on the model size, the dtype, the GPU type or the GPU count,
    evaluated for the row (`ctx`: those variables' values); None for any other condition
    (profiling, node counts, user variables)."""
    m = COND_RE.fullmatch(text.strip())
    if not m or m.group(1) not in ctx:
        return None
    return ctx[m.group(1)] == m.group(3).lower()


def shell_assignments(text: str, ctx: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(key, value, sure) of every `model.<key>=<value>` override, NVTE_FUSED_ATTN export and
    literal layout variable (LAYOUT_VARS) in a launch script, in order; `sure` is False under an
    `if` this reader cannot evaluate for the row (_condition) or after a `&&`, and branches that do
    not apply to the row are left out."""
    out = []
    stack: list[list] = []  # per open `if`: [this branch's truth, a branch was taken, one unknown]
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw)  # a comment, not ${#..} or a quoted '#'
        stripped = line.strip()
        m = IF_RE.match(line)
        if m and m.group(1) == "if":
            truth = _condition(m.group(2), ctx)
            stack.append([truth, truth is True, truth is None])
            continue
        if m and m.group(1) == "elif" and stack:
            frame = stack[-1]
            truth = _condition(m.group(2), ctx)
            if frame[1] or truth is False:
                frame[0] = False
            else:
                frame[0] = None if frame[2] or truth is None else True
            frame[1] = frame[1] or frame[0] is True
            frame[2] = frame[2] or truth is None
            continue
        if stripped == "else" and stack:
            frame = stack[-1]
            frame[0] = False if frame[1] else (None if frame[2] else True)
            continue
        if stripped == "fi" and stack:
            stack.pop()
            continue
        if any(f[0] is False for f in stack):
            continue
        sure = all(f[0] is True for f in stack) and " && " not in stripped
        for key, value in ASSIGN_RE.findall(line):
            out.append((key, value.strip('"'), sure))
        if e := ENV_RE.match(line):
            out.append((e.group(1), e.group(2), sure))
        if v := VAR_RE.match(line):
            out.append((v.group(1), v.group(2), sure))
        if g := GRAPH_VAR_RE.match(line):
            out.append(("CUDA_GRAPH", g.group(1) or g.group(2), sure))
        if r := RM_VAR_RE.match(line):
            out.append(("RM", r.group(1), sure))
        for flag in GRAPH_FLAG_RE.findall(line):
            out.append(("--cuda_graphs", flag.strip('"'), sure))
    return out


def launch_cuda_graphs(launch: str, ctx: dict[str, str]) -> tuple[bool | None, str]:
    """(the --cuda_graphs value the launch script passes for the row, or None where it passes
    none or this reader cannot tell, note). `$CUDA_GRAPH` resolves to the script's own
    CUDA_GRAPH assignment in the row's branch (shell_assignments: the last sure one)."""
    flags = [(v, sure) for k, v, sure in shell_assignments(launch, ctx) if k == "--cuda_graphs"]
    if not flags:
        return None, ""
    value, sure = flags[-1]
    if not sure:
        return None, "--cuda_graphs under a condition not evaluated: not read"
    if value.lower() in ("true", "false"):
        return value.lower() == "true", f"launch.sh --cuda_graphs {value}"
    graph = [(v, s) for k, v, s in shell_assignments(launch, ctx) if k == "CUDA_GRAPH"]
    if not graph or not graph[-1][1]:
        return None, "--cuda_graphs $CUDA_GRAPH, its value not read"
    return graph[-1][0] == "true", f"launch.sh --cuda_graphs $CUDA_GRAPH (CUDA_GRAPH={graph[-1][0]})"


def shell_context(size: str, precision: str, gpu: str, gpus: int) -> dict[str, str]:
    return {"MODEL_SIZE": size, "DTYPE": precision, "GPU_TYPE": gpu.lower(), "JOB_TOTAL_GPUS": str(gpus)}


def _shell_value(value: str, precision: str):
    v = value.strip()
    if re.fullmatch(r"\$\{?FP8_ENABLED\^?\}?", v):
        return precision == "fp8"
    if v.startswith("$"):
        return None  # another shell variable: not read
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    try:
        return int(v) if re.fullmatch(r"-?\d+", v) else float(v)
    except ValueError:
        return v


def launch_layout(readme: Readme, ctx: dict[str, str]) -> dict[str, int | None]:
    """The layout the workload's configure.sh / launch.sh at the README's commit sets for the
    row (literal TP, PP, CP, VP, EP, MBS in the branches _condition evaluates; the last wins; VP 0,
    1 or null: no interleaving). A variable also set under an unevaluated condition is left out."""
    got: dict[str, int | None] = {}
    unsure: set[str] = set()
    for sh in SHELL_FILES:
        text = readme.file(f"{readme.folder}/{sh}")
        if text is None:
            continue
        for key, value, sure in shell_assignments(text, ctx):
            if key not in LAYOUT_VARS:
                continue
            if not sure:
                unsure.add(key)
            elif value in ("null", "0", "1") and key == "VP":  # no interleaving
                got[key] = None
            elif value != "null":
                got[key] = int(value)
    return {k: v for k, v in got.items() if k not in unsure}


def launcher_settings(readme: Readme, workload: str, size: str, precision: str,
                      tp: int, model: dict, ctx: dict[str, str]) -> tuple[dict, dict, dict, str]:  # fmt: skip
    """(settings, model fields, layout fields, note) of a 2024-11 .. 2025-04 NeMo Launcher row:
    the workload's hydra YAML at the README's commit, with the `model.<key>=<value>` overrides
    and NVTE_FUSED_ATTN of its configure.sh and launch.sh (shell_assignments: later wins; an
    override under a condition not evaluated for the row leaves that key unread)."""
    name = LAUNCHER_YAML.get(workload, "").format(size=size)
    folder = readme.folder
    cfg = path = None
    for cand in (f"{folder}/{name}", f"{folder}/cfg/{name}"):
        if (text := readme.file(cand)) is not None:
            cfg, path = yaml.safe_load(text), cand
            break
    if not name or cfg is None:
        return {}, {}, {}, "none read (no NeMo Launcher configuration for this workload)"
    conf: dict = dict(cfg.get("model") or {})
    conf["optim.grad_sync_dtype"] = (conf.get("optim") or {}).get("grad_sync_dtype")
    unsure: set[str] = set()
    env: dict = {}
    read_from = [path]
    for sh in SHELL_FILES:
        text = readme.file(f"{folder}/{sh}")
        if text is None:
            continue
        read_from.append(f"{folder}/{sh}")
        for key, value, sure in shell_assignments(text, ctx):
            if key in LAYOUT_VARS:
                continue  # the layout: launch_layout
            target = env if key == "NVTE_FUSED_ATTN" else conf
            if not sure:
                unsure.add(key)
                continue
            target[key] = _shell_value(value, precision)
    settings: dict = {}
    fields: dict = {}
    layout: dict = {}
    taken = []

    def known(key: str) -> bool:
        return key not in unsure and conf.get(key) is not None

    fp8 = conf.get("fp8")
    if known("fp8") and bool(fp8) != (precision == "fp8"):
        return {}, {}, {}, f"none read: {path} with its overrides sets fp8={fp8} for a {precision} row"
    if tp > 1 and known("ub_tp_comm_overlap"):
        settings["tp_comm_overlap"] = bool(conf["ub_tp_comm_overlap"])
        taken.append(f"ub_tp_comm_overlap={conf['ub_tp_comm_overlap']}")
    if precision == "fp8":
        if known("fp8_amax_history_len"):
            settings["fp8_recipe"] = "delayed"
            taken.append(
                f"fp8 delayed scaling (amax history {conf['fp8_amax_history_len']}, "
                f"{conf.get('fp8_amax_compute_algo')})"
            )
        if known("fp8_params"):
            settings["fp8_params"] = bool(conf["fp8_params"])
            taken.append(f"fp8_params={conf['fp8_params']}")
    if known("optim.grad_sync_dtype") and conf["optim.grad_sync_dtype"] == "bf16":
        settings["main_grads"] = "bf16"
        taken.append("optim.grad_sync_dtype bf16 (distributed_fused_adam): main_grads bf16")
    granularity = conf.get("activations_checkpoint_granularity")
    if "activations_checkpoint_granularity" not in unsure:
        if granularity is None:
            layout["recompute"] = "none"
            taken.append("no activation checkpointing")
        elif granularity == "selective":
            layout["recompute"] = "selective"
            taken.append("selective activation checkpointing (core attention)")
        else:
            taken.append(f"activations_checkpoint_granularity {granularity} (not stated)")
    for key in ("hidden_dropout", "attention_dropout"):
        if known(key):
            taken.append(f"{key} {conf[key]}")
    if known("hidden_dropout"):
        fields["hidden_dropout"] = float(conf["hidden_dropout"]) > 0
    if "NVTE_FUSED_ATTN" in env and "NVTE_FUSED_ATTN" not in unsure:
        if str(env["NVTE_FUSED_ATTN"]) in ("0", "False", "false"):
            settings["attention_kernel"] = "fa2"
            taken.append("NVTE_FUSED_ATTN=0: Transformer Engine's flash-attn backend (fa2)")
        else:
            taken.append(f"NVTE_FUSED_ATTN={env['NVTE_FUSED_ATTN']} (cuDNN fused attention)")
    if model.get("moe"):
        if known("moe_token_dispatcher_type"):
            settings["moe_dispatcher"] = conf["moe_token_dispatcher_type"]
        if known("moe_pad_expert_input_to_capacity") and conf["moe_pad_expert_input_to_capacity"]:
            settings["moe_pad_to_capacity"] = True
            if known("moe_expert_capacity_factor"):
                settings["moe_capacity_factor"] = float(conf["moe_expert_capacity_factor"])
        taken.append(
            f"MoE: dispatcher {conf.get('moe_token_dispatcher_type')}, pad to capacity "
            f"{conf.get('moe_pad_expert_input_to_capacity')}, capacity factor "
            f"{conf.get('moe_expert_capacity_factor')}"
        )
    if unsure & READ_KEYS:
        taken.append("not read (set under a condition this reader does not evaluate): "
                     + ", ".join(sorted(unsure & READ_KEYS)))  # fmt: skip
    note = f"recipe settings from {', '.join(read_from)} @{readme.commit[:10]}: " + "; ".join(taken)
    return settings, fields, layout, note


# ------------------------------------------------------------ NeMo 2 performance-script settings

PERF_SCRIPTS = "scripts/performance"
SCRIPT_MODEL = {("llama3.1", "405b"): ("llama31", "405b"), ("nemotron", "15b"): ("nemotron4", "15b"),
                ("nemotron", "340b"): ("nemotron4", "340b")}  # fmt: skip
"""Workload folder and size -> the NeMo performance script (scripts/performance/llm/
pretrain_<model>_<size>.py) its 2025-05+ launch.sh runs, for the dense models."""


def perf_script_settings(readme: Readme, row_workload: str, size: str, precision: str, gpu: str,
                         shape: dict, recipes: Recipes) -> tuple[dict, dict, str] | None:  # fmt: skip
    """(settings, layout fields, note) of a 2025-05+ row, whose launch.sh runs NeMo's
    `scripts.performance.llm.pretrain_<model>_<size>` from the NeMo commit its setup.sh pins
    (NEMO_COMMIT): make_nemo_summary.recipe_settings read at that commit (TP overlap and its
    userbuffers configuration, grad_reduce_in_fp32, the fp8 plug-in, and the recommended-config
    CSV's knobs where its row has this layout), then the launch's own --cuda_graphs
    (with_launch_graphs). None where the launch.sh runs no such script. MoE models whose script
    builds its own recipe: moe_script_settings (MOE_SCRIPTS); the others are not read (their
    dispatcher, token drop and uneven PP are set in script code)."""
    folder = readme.folder
    launch, setup = readme.file(f"{folder}/launch.sh"), readme.file(f"{folder}/setup.sh")
    if launch is None or setup is None:
        return None
    script = re.search(r"scripts\.performance\.llm\.pretrain_(\w+?)_(\d+b\b|\$\{?MODEL_SIZE\}?)", launch)
    pin = re.search(r"NEMO_COMMIT=\"?([0-9a-f]{40})", setup)
    if re.search(r"scripts\.performance\.llm\.pretrain_deepseek_v3\b", launch) and pin:
        ctx = shell_context(size, precision, gpu, shape["num_gpus"])
        settings, layout, note = deepseek_script_settings(recipes, pin.group(1), launch, ctx, shape)
        settings, graph_note = with_launch_graphs(settings, launch, ctx, shape)
        note = "; ".join(x for x in (note, graph_note) if x)
        return settings, layout, f"NeMo {pin.group(1)[:10]} ({folder}/setup.sh NEMO_COMMIT): {note}"
    if script is None and (own := re.search(r"scripts\.performance\.llm\.(pretrain_\w+)", launch)):
        return own_script_settings(readme, f"{folder}/{own.group(1)}.py", size, precision, gpu,
                                   shape, recipes, pin.group(1) if pin else None)  # fmt: skip
    if script is None or pin is None:
        return None
    ctx = shell_context(size, precision, gpu, shape["num_gpus"])
    if (row_workload, size) in MOE_SCRIPTS and (script.group(1), script.group(2)) == MOE_SCRIPTS[(row_workload, size)]:
        name = "_".join(MOE_SCRIPTS[(row_workload, size)])
        settings, layout, note = moe_script_settings(recipes, pin.group(1), name, precision, shape)
        settings, graph_note = with_launch_graphs(settings, launch, ctx, shape)
        note = "; ".join(x for x in (note, graph_note) if x)
        return settings, layout, f"NeMo {pin.group(1)[:10]} ({folder}/setup.sh NEMO_COMMIT): {note}"
    if (row_workload, size) not in SCRIPT_MODEL:
        return {}, {}, (f"none read (the launch.sh runs pretrain_{script.group(1)}_{script.group(2)}.py; "
                        "MoE models' settings are set in script code)")  # fmt: skip
    model, msize = SCRIPT_MODEL[(row_workload, size)]
    named = script.group(2) if script.group(2)[0].isdigit() else msize  # ${MODEL_SIZE}: the row's
    if (model, msize) != (script.group(1), named):
        return None
    system = {"H100": "DGX-H100", "GB200": "DGX-GB200", "B200": "DGX-B200"}[gpu]
    ref = pin.group(1)
    settings, layout, note = recipe_settings(recipes, "", model, msize, system, precision, shape,
                                             ref=(ref, PERF_SCRIPTS))  # fmt: skip
    notes = [note]
    if precision == "fp8" and "fp8_recipe" not in settings:
        # set_primary_perf_configs plugs in the factory of --fp8_recipe, whose default is "ds"
        # (per-tensor delayed scaling); the launch.sh passes no -fr / --fp8_recipe.
        parser = recipes._show(ref, f"{PERF_SCRIPTS}/argument_parser.py") or ""
        default = re.search(r'"--fp8_recipe",.*?default="(\w+)"', parser, re.DOTALL)
        if default and default.group(1) == "ds" and not re.search(r"\s(-fr|--fp8_recipe)\b", launch):
            settings["fp8_recipe"] = "delayed"
            notes.append("fp8 delayed scaling (argument_parser.py --fp8_recipe default ds; the "
                         "launch.sh passes none)")  # fmt: skip
    if precision == "fp8" and settings.get("fp8_recipe"):
        gather, where = fp8_param_gather_of(recipes, ref, PERF_SCRIPTS, model, msize,
                                            settings["fp8_recipe"], shape["fsdp"])  # fmt: skip
        if gather:
            settings["fp8_params"] = True
        if gather is not None:
            notes.append(f"fp8_param_gather={gather} ({where})")
    settings, graph_note = with_launch_graphs(settings, launch, ctx, shape)
    if graph_note:
        notes.append(graph_note)
    return settings, layout, f"NeMo {ref[:10]} ({folder}/setup.sh NEMO_COMMIT): " + "; ".join(notes)


def with_launch_graphs(settings: dict, launch: str, ctx: dict[str, str], shape: dict) -> tuple[dict, str]:
    """The settings with the CUDA graphs the launch script's --cuda_graphs flag sets (utils.py
    get_user_configs: the flag, where given, replaces the recommended-config CSV's value;
    set_primary_perf_configs drops graphs under Megatron-FSDP), and a note; unchanged where the
    launch passes no flag this reader can resolve (launch_cuda_graphs)."""
    return graphs_applied(settings, *launch_cuda_graphs(launch, ctx), shape)


def graphs_applied(settings: dict, value: bool | None, where: str, shape: dict) -> tuple[dict, str]:
    """with_launch_graphs on an already resolved launch_cuda_graphs (value, where)."""
    if value is None:
        return settings, where
    out = dict(settings)
    if value and shape["fsdp"]:
        out.pop("cuda_graphs", None)
        return out, f"{where}, dropped under FSDP (set_primary_perf_configs)"
    if value:
        out["cuda_graphs"] = True
    else:
        out.pop("cuda_graphs", None)
    return out, f"cuda_graphs {str(value).lower()} ({where})"


MOE_SCRIPTS = {("grok1", "314b"): ("grok1", "314b")}
"""Workload folder and size -> the NeMo performance script whose own code builds an MoE model's
recipe (scripts/performance/llm/pretrain_grok1_314b.py: model(), trainer(),
pretrain_performance_optimizations(), override_recipe_configs()), read by moe_script_settings.
DeepSeek-V3's script (uneven pipeline stages, the recipe's MTP layer): deepseek_script_settings."""


def uneven_stages(fn: ast.FunctionDef, pp: int, num_layers: int) -> tuple[list[int] | None, str]:
    """(decoder layers per pipeline stage, note) that a script's `recipe.trainer.strategy.
    num_layers_in_first_pipeline_stage` / `..._last_...` assignments give at `pp_size` = pp, the
    middle stages sharing the rest evenly (megatron-core transformer_block.get_num_layers_to_build,
    which asserts the division); (None, why) where they are not both read."""
    env: dict[str, object] = {"pp_size": pp}
    ends: dict[str, object] = {}
    try:
        for st in fn.body:
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
                continue
            target = ast.unparse(st.targets[0])
            if isinstance(st.targets[0], ast.Name) and target.startswith("num_layers_in_"):
                env[target] = expr_value(st.value, env)
            elif target.startswith("recipe.trainer.strategy.num_layers_in_"):
                ends[target.rsplit(".", 1)[1]] = expr_value(st.value, env)
    except ValueError as err:
        return None, str(err)
    first, last = ends.get("num_layers_in_first_pipeline_stage"), ends.get("num_layers_in_last_pipeline_stage")
    if not isinstance(first, int) or not isinstance(last, int) or pp < 3:
        return None, "no first / last pipeline stage sizes read"
    rest, middle = num_layers - first - last, pp - 2
    if rest % middle or rest < middle:
        return None, f"{rest} layers do not split over {middle} middle stages"
    return [first] + [rest // middle] * middle + [last], (
        f"num_layers_in_first / last_pipeline_stage {first} / {last} at pp {pp}"
    )


def deepseek_script_settings(recipes: Recipes, ref: str, launch: str, ctx: dict[str, str],
                             shape: dict) -> tuple[dict, dict, str]:  # fmt: skip
    """(settings, layout fields, note) of a DeepSeek-V3 row, whose launch.sh runs NeMo's
    scripts/performance/llm/pretrain_deepseek_v3.py at the setup.sh's pin (ast, never run):
    - `override_recipe_configs`: `recipe_granularity = "selective"` with the launch's
      `--recompute_modules $RM` (the row's GPU branch of launch.sh), the first / last pipeline
      stages its `num_layers_in_first/last_pipeline_stage` set (uneven_stages), token drop where
      `USE_TOKEN_DROP` (module constant) adds `run.Config(MegatronTokenDropCallback)`
      (moe_recipe_settings: the callback's defaults), `MegatronCommOverlapCallback(tp_comm_overlap
      =False)`;
    - `pretrain_recipe()` of nemo/collections/llm/recipes/deepseek_v3.py: its `use_mtp` default,
      with which `model(use_mtp)` builds `DeepSeekV3Config(mtp_num_layers=N)`: the MTP layers
      (layout field `_mtp_num_layers`, the row's model), in the last stage without a layout;
    - the dispatcher: DeepSeekConfig's `moe_token_dispatcher_type` default
      (nemo/collections/llm/gpt/model/deepseek.py)."""
    path = f"{PERF_SCRIPTS}/llm/pretrain_deepseek_v3.py"
    text = recipes._show(ref, path)
    if text is None:
        return {}, {}, f"none read ({path} not found)"
    tree = ast.parse(text)
    override = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
                     and n.name == "override_recipe_configs"), None)  # fmt: skip
    if override is None:
        return {}, {}, f"none read ({path} has no override_recipe_configs)"
    body = re.sub(r"\s+", "", ast.unparse(override))
    settings: dict = {}
    layout: dict = {}
    notes = [path]
    if "recipe.model.config.recompute_granularity='selective'" in body:
        modules = [(v, sure) for k, v, sure in shell_assignments(launch, ctx) if k == "RM"]
        if modules and modules[-1][1] and "--recompute_modules $RM" in launch:
            names = modules[-1][0].replace(",", " ").split()
            layout["recompute"] = "selective"
            settings["recompute_modules"] = names
            notes.append(f"recompute selective, modules {names} (launch.sh RM, --recompute_modules)")
    split, split_note = uneven_stages(override, shape["pp"], shape["num_layers"])
    if split is not None and (shape["vp"] or 1) == 1:
        layout["layers_per_stage"] = split
    notes.append(split_note)
    constants = {ast.unparse(st.targets[0]): st.value.value for st in tree.body
                 if isinstance(st, ast.Assign) and len(st.targets) == 1
                 and isinstance(st.value, ast.Constant)}  # fmt: skip
    if constants.get("USE_TOKEN_DROP") is True:
        drop, drop_notes = moe_recipe_settings(recipes, ref, ast.unparse(override), "")
        settings.update(drop)
        notes += drop_notes
    if shape["tp"] > 1 and "MegatronCommOverlapCallback,tp_comm_overlap=False" in body:
        settings["tp_comm_overlap"] = False
        notes.append("tp_comm_overlap=False (MegatronCommOverlapCallback)")
    recipe = recipes._show(ref, "nemo/collections/llm/recipes/deepseek_v3.py") or ""
    calls = [c for c in ast.walk(override) if isinstance(c, ast.Call) and ast.unparse(c.func) == "pretrain_recipe"]
    use_mtp = literal_defaults(recipe, "pretrain_recipe").get("use_mtp")
    if calls and not calls[0].args and not calls[0].keywords and use_mtp is True:
        depth = re.search(r"run\.Config\(DeepSeekV3Config,mtp_num_layers=(\d+)", re.sub(r"\s+", "", recipe))
        if depth:
            layout["_mtp_num_layers"] = int(depth.group(1))
            notes.append(f"pretrain_recipe() (use_mtp default True): DeepSeekV3Config mtp_num_layers {depth.group(1)}")
    base = literal_defaults(recipes._show(ref, "nemo/collections/llm/gpt/model/deepseek.py"), "DeepSeekConfig")
    if isinstance(base.get("moe_token_dispatcher_type"), str):
        settings["moe_dispatcher"] = base["moe_token_dispatcher_type"]
        notes.append(f"dispatcher {base['moe_token_dispatcher_type']} (DeepSeekConfig)")
    return settings, layout, "; ".join(notes)


def _calls(fn: ast.FunctionDef | None, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == name] if fn else []


def moe_script_settings(recipes: Recipes, ref: str, name: str, precision: str,
                        shape: dict) -> tuple[dict, dict, str]:  # fmt: skip
    """(settings, layout fields, note) of an MoE row whose launch.sh runs a NeMo performance
    script that builds its recipe in its own code (MOE_SCRIPTS), read at the NeMo commit the
    setup.sh pins (ast and the compacted text, never run):
    - `override_recipe_configs` calls `pretrain_recipe(performance_mode=True)`, whose
      `if performance_mode:` runs `pretrain_performance_optimizations`: there the
      MegatronCommOverlapCallback with tp_comm_overlap=True (TP overlap, with the userbuffers
      configuration `override_recipe_configs` assigns to `tp_comm_overlap_cfg` outside any `if`),
      `recipe.trainer.plugins.grad_reduce_in_fp32 = False` (main_grads bf16) and a
      MegatronTokenDropCallback built without arguments (token drop at its __init__ defaults,
      nemo/lightning/pytorch/callbacks/moe_token_drop.py: capacity factor, pad to capacity);
    - the dispatcher: the model config class `model()` builds (a dataclass default of
      nemo/collections/llm/gpt/model/mixtral.py's MixtralConfig, the class Grok-1's config
      derives from);
    - fp8 rows: `if args.compute_dtype.lower() == "fp8":` plugging in bf16_with_fp8_mixed()
      (delayed scaling, its fp8 parameter gather) with grad_reduce_in_fp32 = False."""
    path = f"{PERF_SCRIPTS}/llm/pretrain_{name}.py"
    text = recipes._show(ref, path)
    if text is None:
        return {}, {}, f"none read ({path} not found)"
    tree = ast.parse(text)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    override, build = funcs.get("override_recipe_configs"), funcs.get("pretrain_recipe")
    perf_fn = funcs.get("pretrain_performance_optimizations")
    perf = any(k.arg == "performance_mode" and getattr(k.value, "value", None) is True
               for c in _calls(override, "pretrain_recipe") for k in c.keywords)  # fmt: skip
    perf = perf and bool(_calls(build, "pretrain_performance_optimizations"))
    if not perf or perf_fn is None:
        return {}, {}, f"none read ({path}: no pretrain_recipe(performance_mode=True) running pretrain_performance_optimizations)"
    compact = re.sub(r"\s+", "", ast.unparse(perf_fn))
    settings: dict = {}
    notes = [f"{path} (its own recipe, performance mode)"]
    # the configuration object, before the script wraps it (`tp_comm_overlap_cfg = fdl.cast(...)`)
    ub = next((st.value for st in override.body if isinstance(st, ast.Assign) and len(st.targets) == 1
               and ast.unparse(st.targets[0]) == "tp_comm_overlap_cfg" and isinstance(st.value, ast.Name)), None)  # fmt: skip
    if shape["tp"] > 1 and "MegatronCommOverlapCallback,tp_comm_overlap=True" in compact:
        settings["tp_comm_overlap"] = True
        if isinstance(ub, ast.Name) and ub.id.startswith("userbuffers_"):
            settings["tp_overlap"] = ub.id
            notes.append(f"tp_comm_overlap (pretrain_performance_optimizations), config {ub.id} "
                         "(override_recipe_configs, for every GPU)")  # fmt: skip
            if differs := recipes.ub_difference_note(ref, ub.id, ref[:10]):
                settings["_ub_differs"] = True
                notes.append(differs)
        else:
            notes.append("tp_comm_overlap (pretrain_performance_optimizations), its userbuffers "
                         "configuration not read: TE defaults")  # fmt: skip
    if "recipe.trainer.plugins.grad_reduce_in_fp32=False" in compact:
        settings["main_grads"] = "bf16"
        notes.append("grad_reduce_in_fp32=False (pretrain_performance_optimizations): main_grads bf16")
    model_fn = funcs.get("model")
    moe_got, moe_notes = moe_recipe_settings(recipes, ref, ast.unparse(perf_fn),
                                             ast.unparse(model_fn) if model_fn else "")  # fmt: skip
    settings.update(moe_got)
    notes += moe_notes
    fp8 = fp8_branch(override, precision, recipes, ref, shape["fsdp"])
    if fp8 is not None:
        fp8_settings, bf16_grads, fp8_notes = fp8
        if not bf16_grads:
            settings.pop("main_grads", None)  # the new plug-in's own default: fp32
        settings.update(fp8_settings)
        notes += fp8_notes
    return settings, {}, "; ".join(notes)


def fp8_branches(fn: ast.FunctionDef) -> list[ast.If]:
    """A performance script's `if args.compute_dtype.lower() == "fp8":` blocks in `fn`."""
    return [n for n in ast.walk(fn) if isinstance(n, ast.If)
            and ast.unparse(n.test) == "args.compute_dtype.lower() == 'fp8'"]  # fmt: skip


def fp8_branch(fn: ast.FunctionDef, precision: str, recipes: Recipes, ref: str | None,
               fsdp: bool) -> tuple[dict, bool, list[str]] | None:  # fmt: skip
    """What a script's `if args.compute_dtype.lower() == "fp8":` branch in `fn` sets for an fp8
    row that plugs in `bf16_with_fp8_mixed()`: (settings: delayed scaling and the factory's fp8
    parameter gather at `ref`, whether the branch sets grad_reduce_in_fp32 = False, notes); None
    for another row or branch."""
    body = " ".join(ast.unparse(st) for n in fp8_branches(fn) for st in n.body)
    if precision != "fp8" or "recipe.trainer.plugins = bf16_with_fp8_mixed()" not in body:
        return None
    settings: dict = {"fp8_recipe": "delayed"}
    notes = ["fp8 delayed scaling (bf16_with_fp8_mixed)"]
    bf16_grads = "recipe.trainer.plugins.grad_reduce_in_fp32 = False" in body
    if ref:
        gather, where = fp8_param_gather_of(recipes, ref, PERF_SCRIPTS, "", "", "delayed", fsdp)
        if gather:
            settings["fp8_params"] = True
        if gather is not None:
            notes.append(f"fp8_param_gather={gather} ({where})")
    return settings, bf16_grads, notes


def own_script_settings(readme: Readme, path: str, size: str, precision: str, gpu: str,
                        shape: dict, recipes: Recipes, ref: str | None) -> tuple[dict, dict, str]:  # fmt: skip
    """(settings, layout fields, note) of a 25.04 row whose launch.sh runs the workload's own
    NeMo performance script (llama3.1/pretrain_llama31.py, which setup.sh copies into NeMo's
    scripts/performance/llm/), read from the dgxc repository at the README's commit (ast, never
    run): in `override_recipe_configs`, the `match args.model_size` case of the row's size names
    the NeMo recipe (an import `pretrain_recipe as pretrain_recipe_<size>`) and `ub_cfg[gpu][dtype]`,
    the userbuffers configuration set on the recipe's MegatronCommOverlapCallback (which the
    recipe at the pinned NeMo commit builds with tp_comm_overlap=True) under `if args.model_size
    != "<size>"` guards; the fp8 branch `bf16_with_fp8_mixed()` with `grad_reduce_in_fp32 = False`
    is delayed scaling and bf16 gradients, its fp8 parameter gather the factory's at the pin."""
    text = readme.file(path)
    if text is None:
        return {}, {}, f"none read ({path} not found)"
    tree = ast.parse(text)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == "override_recipe_configs"), None)  # fmt: skip
    if fn is None:
        return {}, {}, f"none read ({path} has no override_recipe_configs)"
    modules = {a.asname: n.module for n in tree.body if isinstance(n, ast.ImportFrom)
               for a in n.names if a.asname}  # fmt: skip
    case = next((c for m in ast.walk(fn) if isinstance(m, ast.Match)
                 and ast.unparse(m.subject) == "args.model_size" for c in m.cases
                 if isinstance(c.pattern, ast.MatchValue)
                 and getattr(c.pattern.value, "value", None) == size), None)  # fmt: skip
    if case is None:
        return {}, {}, f"none read ({path}: no case for {size})"
    recipe_fn = next((ast.unparse(st.value.func) for st in case.body if isinstance(st, ast.Assign)
                      and isinstance(st.value, ast.Call)
                      and ast.unparse(st.targets[0]) == "recipe"), None)  # fmt: skip
    ub = None
    for st in case.body:
        if isinstance(st, ast.Assign) and ast.unparse(st.targets[0]) == "ub_cfg":
            table = ast.literal_eval(re.sub(r"\b(userbuffers_\w+)", r"'\1'", ast.unparse(st.value)))
            ub = table.get(gpu.lower(), {}).get(precision)
    settings: dict = {}
    notes = [f"{path} @{readme.commit[:10]} (the workload's own script)"]
    guarded_off = any(isinstance(n, ast.If) and re.fullmatch(r"args\.model_size != '(\w+)'", ast.unparse(n.test))
                      and ast.unparse(n.test).endswith(f"'{size}'") for n in ast.walk(fn))  # fmt: skip
    module = modules.get(recipe_fn or "")
    recipe_text = recipes._show(ref, module.replace(".", "/") + ".py") if (ref and module) else None
    overlap_on = bool(recipe_text) and "MegatronCommOverlapCallback,tp_comm_overlap=True" in re.sub(
        r"\s+", "", recipe_text
    )
    if shape["tp"] > 1 and ub and not guarded_off and overlap_on:
        settings["tp_comm_overlap"] = True
        settings["tp_overlap"] = ub
        notes.append(f"tp_comm_overlap ({module} @{ref[:10]}), config {ub} (ub_cfg)")
        if differs := recipes.ub_difference_note(ref, ub, ref[:10]):  # as recipe_settings
            settings["_ub_differs"] = True
            notes.append(differs)
    elif shape["tp"] > 1:
        notes.append("TP overlap not read (no ub_cfg for this size / GPU, or the recipe's callback "
                     "not found)")  # fmt: skip
    fp8 = fp8_branches(fn)
    fp8_got = fp8_branch(fn, precision, recipes, ref, shape["fsdp"])
    if fp8_got is not None:
        fp8_settings, bf16_grads, fp8_notes = fp8_got
        settings["fp8_recipe"] = fp8_settings.pop("fp8_recipe")
        notes.append(fp8_notes[0])
        if bf16_grads:
            settings["main_grads"] = "bf16"
            notes.append("grad_reduce_in_fp32=False: main_grads bf16")
        settings.update(fp8_settings)
        notes += fp8_notes[1:]
    if "main_grads" not in settings and ref and module:
        # the recipe built with performance_mode=True: its own grad_reduce_in_fp32, unless this
        # function plugs in another precision plugin for the row's dtype
        call = next((st.value for st in case.body if isinstance(st, ast.Assign)
                     and ast.unparse(st.targets[0]) == "recipe"), None)  # fmt: skip
        perf = call is not None and any(k.arg == "performance_mode" and getattr(k.value, "value", None) is True
                                        for k in call.keywords)  # fmt: skip
        replaced = [st for st in ast.walk(fn) if isinstance(st, ast.Assign)
                    and ast.unparse(st.targets[0]) == "recipe.trainer.plugins"
                    and not any(st in ast.walk(n) for n in fp8)]  # fmt: skip
        if precision == "fp8":
            replaced += [st for n in fp8 for st in ast.walk(n) if isinstance(st, ast.Assign)
                         and ast.unparse(st.targets[0]) == "recipe.trainer.plugins"]  # fmt: skip
        source = recipes.performance_mode_functions(ref, module.replace(".", "/") + ".py") if perf else None
        value, where = recipes.performance_grad_reduce(source, ref)
        if value is False and not replaced:
            settings["main_grads"] = "bf16"
            notes.append(f"grad_reduce_in_fp32=False ({where}): main_grads bf16")
    folder = path.rsplit("/", 1)[0]
    launch = readme.file(f"{folder}/launch.sh") or ""
    ctx = shell_context(size, precision, gpu, shape.get("num_gpus", 0))
    utils = readme.file(f"{folder}/llama31_utils.py") if "llama31_utils" in text else None
    graphs, where = launch_cuda_graphs(launch, ctx)
    if graphs is not None:
        settings, graph_note = graphs_applied(settings, graphs, where, shape)
        notes.append(graph_note)
    elif utils and re.search(r"enable_cuda_graphs = args\.cuda_graphs\s+enable_cuda_graphs = False if "
                             r"enable_cuda_graphs is None", utils):  # fmt: skip
        notes.append("no CUDA graphs (the launch.sh passes no --cuda_graphs; llama31_utils.py "
                     "llama31_auto_configs: None -> False)")  # fmt: skip
    else:
        notes.append("its CUDA graphs (llama31_utils.py auto configs) not read")
    return settings, {}, "; ".join(notes)


def _with_launch_layout(lay: dict, launched: dict, gpus: int) -> tuple[dict, list[str], list[str]]:
    """The README row's layout with the launch script's values where they differ (launch_layout:
    what ran), unless the table's own DP or GA cell agrees with the README's layout and not with
    the script's (then the table's stands). (layout, changes taken, changes refused)."""
    new = dict(lay)
    changes = []
    for var, key in (("TP", "tp"), ("PP", "pp"), ("CP", "cp"), ("VP", "vp"), ("EP", "ep"), ("MBS", "mbs")):
        if var not in launched:
            continue
        mine = lay.get(key) if key != "vp" or (lay.get(key) or 1) > 1 else None
        if launched[var] != mine and not (key in ("cp", "ep", "pp") and {launched[var], mine} <= {None, 1}):
            changes.append(f"{key.upper()} {mine if mine is not None else 'NA'} -> {launched[var]}")
            new[key] = launched[var]
    if not changes:
        return lay, [], []

    def cells_agree(layout: dict) -> bool:
        model_parallel = (layout["tp"] or 1) * (layout["pp"] or 1) * (layout["cp"] or 1)
        dp = gpus // model_parallel if gpus % model_parallel == 0 else None
        if dp is None or layout["mbs"] is None:
            return False
        ga = layout["gbs"] / (layout["mbs"] * dp)
        return (layout["dp"] in (None, dp)) and (layout["ga"] in (None, ga))

    if cells_agree(lay) and not cells_agree(new) and (lay["dp"] is not None or lay["ga"] is not None):
        return lay, [], changes
    return new, changes, []


def record(row: Row, recipes: Recipes) -> dict | str:
    """The published_runs.yaml record of a row, or why none."""
    got = _model(row.workload, row.size)
    if isinstance(got, str):
        return got
    name, spec = got
    lay = row.layout
    if lay["layers"] is not None and lay["layers"] < spec["num_layers"]:
        return (
            f"proxy config: {lay['layers']} of the model's {spec['num_layers']} layers "
            "(the README's configs for fewer GPUs)"
        )
    ctx = shell_context(row.size, row.precision, row.gpu, row.gpus)
    lay, changed, kept = _with_launch_layout(lay, launch_layout(row.readme, ctx), row.gpus)
    tp, pp, cp = lay["tp"], lay["pp"] or 1, lay["cp"] or 1
    if tp is None:
        return "the layout gives no TP"
    n = row.gpus
    if n % (tp * pp * cp):
        return f"GPUs {n} not divisible by TP x PP x CP = {tp * pp * cp}"
    dp = n // (tp * pp * cp)
    notes = list(row.notes)
    confidence = "medium"
    if changed:
        notes.append("the launch script sets " + ", ".join(changed) + " where the README's table "
                     "says otherwise: the script's (what ran)")  # fmt: skip
    if kept:
        confidence = "low"
        notes.append("the launch script sets " + ", ".join(kept) + ", which the table's own DP / GA "
                     "cells contradict: the table's layout kept")  # fmt: skip
    mbs, gbs = lay["mbs"], lay["gbs"]
    if mbs is None:
        return "the layout gives no micro-batch"
    if gbs % (mbs * dp):
        return f"GBS {gbs} not divisible by MBS x DP = {mbs} x {dp}"
    ga = gbs // (mbs * dp)
    # DP from the GPU count, the table's DP and its GA (GBS / (MBS x DP)): one cell may be a typo
    # when the other agrees; both disagreeing is a layout this record cannot state.
    dp_off = lay["dp"] is not None and lay["dp"] != dp
    ga_off = lay["ga"] is not None and lay["ga"] != ga
    if dp_off and ga_off:
        return (f"the table's DP {lay['dp']} and GA {lay['ga']} but GPUs / (TP x PP x CP) = {dp} "
                f"and GBS / (MBS x DP) = {ga}")  # fmt: skip
    if dp_off:
        notes.append(f"the table's DP cell {lay['dp']} contradicts GPUs / (TP x PP x CP) = {dp}, "
                     f"with which its GA {ga} agrees")  # fmt: skip
    if ga_off:
        notes.append(f"the table's GA cell {lay['ga']} contradicts GBS / (MBS x DP) = {ga}, "
                     f"with whose DP {dp} its DP cell agrees")  # fmt: skip
    gpu, per_domain = GPUS[row.gpu]
    model = dict(spec)
    model["seq_len"] = lay["seq"]
    container, container_from = _container(row.readme)
    released = container is not None and re.fullmatch(r"\d\d\.\d\d(\.\d+)?", container)
    if not released:
        notes.append(f"container {container or container_from} (not a NeMo release)")
    else:
        notes.append(f"container nemo:{container} ({container_from})")
    ep = lay["ep"]
    zero = 3 if lay["fsdp"] else 1
    tokens = lay["seq"] * gbs / row.step_s / n
    shape = {"num_gpus": n, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "vp": lay["vp"], "mbs": mbs,
             "gbs": gbs, "fsdp": zero == 3, "num_layers": model["num_layers"]}  # fmt: skip
    got = perf_script_settings(row.readme, row.workload, row.size, row.precision, row.gpu, shape,
                               recipes)  # fmt: skip
    if got is not None:
        settings, recipe_layout, recipe_note = got
        if mtp := recipe_layout.pop("_mtp_num_layers", 0):
            model["mtp_num_layers"] = mtp
        if settings.pop("_ub_differs", False):
            confidence = "low"  # as make_nemo_summary: the priced userbuffers config is not NeMo's
        notes.append(f"recipe settings from {recipe_note}")
    else:
        settings, fields, recipe_layout, recipe_note = launcher_settings(
            row.readme, row.workload, row.size, row.precision, tp, model, ctx
        )
        model.update(fields)
        notes.append(recipe_note)
    if model.get("moe") and not settings:
        confidence = "low"  # as make_nemo_summary: an MoE row's dispatcher and token drop unread
    notes.append(
        f"layout from {lay['from']}"
        f"; DP = GPUs / (TP x PP x CP) = {dp}; GA = {ga}; zero_stage {zero}"
        + (": FSDP column 1" if zero == 3 else ": the distributed optimizer")
    )
    slug = re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")
    tag = container.replace(".", "") if released else row.readme.commit[:7]
    rid = f"dgxc-{row.readme.release}-{tag}-{gpu.split('-')[0]}-{slug}-{n}gpu-gbs{gbs}-{row.precision}"
    return {
        "id": rid,
        "framework": "megatron",
        "source": f"DGX Cloud Benchmarking ({SOURCE} {row.readme.path} @{row.readme.commit[:10]}, "
        f"release {row.readme.release}, {row.readme.date}), "
        + (f"NeMo {container} container" if released else f"rows of commit {row.readme.commit[:9]}"),
        "confidence": confidence,
        "model": model,
        "gpu": gpu,
        "num_gpus": n,
        "gpus_per_node": per_domain,
        "interconnect": f"DGX Cloud {row.gpu} (system name only)",
        "layout": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "ep": ep,
            **({"etp": lay["etp"]} if model.get("moe") and (lay["etp"] or 1) > 1 else {}),
            "vp": lay["vp"],
            "sequence_parallel": None,
            "zero_stage": zero,
            "micro_batch": mbs,
            "global_batch_seqs": gbs,
            "recompute": recipe_layout.get("recompute"),
            "precision": row.precision,
            **{k: recipe_layout[k] for k in ("layers_per_stage",) if k in recipe_layout},
        },
        **({"settings": settings} if settings else {}),
        "measured_tokens_per_s_per_gpu": round(tokens, 1),
        "tokens_derivation": (
            f"step {row.step_s:g} s (table); {lay['seq']} x GBS {gbs} / step / {n} GPUs"
            + (f"; the table's throughput {row.throughput:g} tokens/s" if row.throughput else "")
        ),
        "notes": f"table '{row.title}'; " + "; ".join(notes),
    }


def _config(rec: dict) -> tuple:
    return (rec["gpu"], rec["model"]["name"], rec["num_gpus"], tuple(sorted(rec["layout"].items())))


def _software(rec: dict) -> str:
    return rec["source"].rsplit("), ", 1)[1]


def _merge(runs: list[dict], seen_in: dict[int, list[str]], rec: dict, release: str) -> None:
    """Add `rec` to `runs`: a configuration a README published before with the same figure is
    one measurement (the later release is listed in its notes), whatever container the later
    README names or fails to; another figure in the same container revises it (replaced, the
    old figure noted); another figure in other or unknown software is another record."""
    same = [r for r in runs if _config(r) == _config(rec)]
    for old in same:
        if old["measured_tokens_per_s_per_gpu"] == rec["measured_tokens_per_s_per_gpu"]:
            seen_in[id(old)].append(release)
            return
    for i, old in enumerate(runs):
        if old in same and _software(old) == _software(rec) and _software(rec).startswith("NeMo"):
            rec["notes"] += (f"; revises release {old['id'].split('-')[1]}'s "
                             f"{old['measured_tokens_per_s_per_gpu']:g} tokens/s/GPU")  # fmt: skip
            seen_in.pop(id(old))
            runs[i] = rec
            seen_in[id(rec)] = []
            return
    runs.append(rec)
    seen_in[id(rec)] = []


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: make_dgxc_summary.py DGXC_GIT_DIR NEMO_GIT_DIR (clones of NVIDIA/dgxc-benchmarking "
              "and NVIDIA/NeMo)", file=sys.stderr)  # fmt: skip
        return 2
    recipes = Recipes(argv[2])
    skipped: list[str] = []
    runs: list[dict] = []
    seen_in: dict[int, list[str]] = {}  # id(record) -> the later releases with its figure
    for readme in readmes(argv[1]):
        for row in rows_of(readme, skipped):
            rec = record(row, recipes)
            where = f"{readme.release} {readme.path} '{row.title}' {row.gpus}x {row.gpu}"
            if isinstance(rec, str):
                skipped.append(f"{where} -- {rec}")
                continue
            _merge(runs, seen_in, rec, readme.release)
    for rec in runs:
        also = sorted(set(seen_in[id(rec)]))
        if also:
            rec["notes"] += f"; the same figure in release(s) {', '.join(also)}"
    ids = [r["id"] for r in runs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        print(f"duplicate ids: {dupes}", file=sys.stderr)
        return 1
    header = [
        ("NVIDIA DGX Cloud Benchmarking expected-performance tables, every pre-training row, in the "
        "published_runs.yaml schema."),
        EVALUATION_ONLY,
        f"Source: {SOURCE} (every README version in its history holding a step-time table).",
        "Generated by bench/heldout/make_dgxc_summary.py (its docstring says what is and is not taken).",
    ]
    write_summary(header, runs, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
