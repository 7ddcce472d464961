"""llm-foundry's published MPT throughput tables in the published_runs.yaml schema: a held-out source
on A100 40 / 80 GB and H100 (PyTorch FSDP through Composer), beside the two NVIDIA ones.

Held-out evaluation data only: no row is used to fit a constant (docs/accuracy.md "Held-out:
llm-foundry MPT benchmark tables"). The shared file holds ten of these rows (mosaic-mpt-*); they
are reported apart as "also shared". Usage, from a clone of mosaicml/llm-foundry:

    python bench/heldout/make_foundry_summary.py GIT_DIR [COMMIT] > bench/heldout/foundry_performance_summary.yaml

It reads scripts/train/benchmarking/README.md at COMMIT (default 8c8dd48f7, main of 2025-07; the
tables have not changed since 5e85bd62d, 2024-01) with `git show`, and each row's last commit with
`git blame` (b2a43a147, 2023-10, "Update_pretrain_benchmarks", or 5e85bd62d), and writes one
record per table row. What a record takes from the row: GPU, model size, sequence length, GPU
count, micro-batch, gradient accumulation, global batch, precision (amp_bf16 / bf16 -> bf16,
amp_fp8 -> fp8 through Transformer Engine, the recipe unstated), sharding strategy (FULL_SHARD ->
ZeRO-3, SHARD_GRAD_OP -> ZeRO-2), activation checkpointing (full recompute or none) and the
measured tokens/s/GPU. The model's shape comes from scripts/train/yamls/pretrain/mpt-<size>.yaml at
COMMIT (d_model, n_heads, n_layers, expansion_ratio 4 -> GELU MLP of 4 d_model, vocab 50368),
which submit_benchmarks.py loads; its learned position embeddings (MPT's default, no ALiBi) are
stated. The attention kernel is not a column: it is read from the sweep at the row's own commit
(attn_impl_of): scripts/train/benchmarking/submit_benchmarks.py sets the model's
attn_config.attn_impl to its `--attn_impl` argument, whose default is 'triton' at both commits,
and that commit's sweep.sh (which lists every benchmark in the tables) never passes the flag; so
every row ran llm-foundry's Triton FlashAttention (llmfoundry/models/layers/flash_attn_triton.py,
flash-attn 1.x's Triton kernel on triton-pre-mlir, setup.py), stated as `settings:
{attention_kernel: flash1}` (the llm-foundry profile's own default is flash-attn 2, today's
attn_impl 'flash'), and `attention_unpad: false` where that commit's triton_flash_attn_fn passes
the padded tensors to the kernel (unpads_of; the profile's unpad copies are attn_impl 'flash''s
flash_attn_varlen_func wrapper). Not stated by the tables and so not in the records: the FSDP mixed-precision
mode (a column, kept in the notes) and the torch / Composer versions (sweep.sh: the
mosaicml/pytorch 2.1.0 image).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import EVALUATION_ONLY, git, write_summary

README = "scripts/train/benchmarking/README.md"
DEFAULT_COMMIT = "8c8dd48f7"
GPU = {
    "h100_80gb": ("h100-sxm-80gb", "H100 80GB"),
    "a100_80gb": ("a100-sxm-80gb", "A100 80GB"),
    "a100_40gb": ("a100-sxm-40gb", "A100 40GB"),
}
PRECISION = {"amp_bf16": "bf16", "bf16": "bf16", "amp_fp8": "fp8"}
SHARDING = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2}


def blame_commits(git_dir: str, commit: str) -> dict[int, tuple[str, str]]:
    """Line number (1-based) -> (commit, summary) of README at `commit`."""
    out: dict[int, tuple[str, str]] = {}
    sha = summary = ""
    lineno = 0
    # --line-porcelain repeats the commit's headers (summary included) before every line
    for line in git(git_dir, "blame", "--line-porcelain", commit, "--", README).splitlines():
        if m := re.match(r"^([0-9a-f]{40}) \d+ (\d+)", line):
            sha, lineno = m.group(1)[:9], int(m.group(2))
        elif line.startswith("summary "):
            summary = line[8:]
        elif line.startswith("\t"):
            out[lineno] = (sha, summary)
    return out


ATTN_IMPL_KERNEL = {"triton": "flash1"}
"""llm-foundry attn_impl -> Workload.attention_kernel: 'triton' is flash_attn_triton.py, flash-attn
1.x's Triton FlashAttention (its docstring: forward + backward slightly slower than flash-attn 1.x
CUDA). Other values at these commits ('flash': flash-attn 1.0.9 or 2.x by the install extra;
'torch') would need the install to be read too: refused."""
BENCH = "scripts/train/benchmarking"


def attn_impl_of(git_dir: str, sha: str, cache: dict) -> str:
    """The attention kernel a row of commit `sha` ran: submit_benchmarks.py's `--attn_impl`
    default at `sha`, unless that commit's sweep.sh passes the flag (then refused: which rows it
    passes it for is not read)."""
    if sha not in cache:
        submit = git(git_dir, "show", f"{sha}:{BENCH}/submit_benchmarks.py")
        found = re.search(r"'--attn_impl',\s*type=str,\s*default='(\w+)'", submit)
        if found is None:
            raise ValueError(f"{BENCH}/submit_benchmarks.py at {sha}: no --attn_impl default")
        if "--attn_impl" in git(git_dir, "show", f"{sha}:{BENCH}/sweep.sh"):
            raise ValueError(f"{BENCH}/sweep.sh at {sha} sets --attn_impl")
        if found.group(1) not in ATTN_IMPL_KERNEL:
            raise ValueError(f"attn_impl {found.group(1)!r} at {sha}: kernel not read")
        cache[sha] = found.group(1)
    return cache[sha]


ATTENTION_PY = "llmfoundry/models/layers/attention.py"
ATTN_IMPL_FN = {"flash": "flash_attn_fn", "triton": "triton_flash_attn_fn"}
"""llm-foundry attn_impl -> its attention function in ATTENTION_PY (MultiheadAttention's
attn_fn by attn_impl at the benchmark commits)."""


def unpads_of(git_dir: str, sha: str, attn_impl: str, cache: dict) -> bool:
    """Whether the attention function of `attn_impl` at commit `sha` unpads its inputs around the
    kernel (flash-attn's bert_padding `unpad_input`, what Workload.attention_unpad prices: the
    llm-foundry profile's fact for attn_impl 'flash', whose flash_attn_fn calls
    flash_attn_varlen_func on unpadded q / k / v). The attn_impl's function (ATTN_IMPL_FN) in
    llmfoundry/models/layers/attention.py, read with ast: at the benchmark commits
    triton_flash_attn_fn passes the padded [batch, seq, heads, dim] tensors to the Triton
    kernel's flash_attn_func (a key padding mask becomes an additive bias), with no unpad."""
    key = (sha, attn_impl)
    if key not in cache:
        tree = ast.parse(git(git_dir, "show", f"{sha}:{ATTENTION_PY}"))
        name = ATTN_IMPL_FN.get(attn_impl, f"{attn_impl}_attn_fn")
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if fn is None:
            raise ValueError(f"{ATTENTION_PY} at {sha}: no {name}")
        cache[key] = "unpad_input" in ast.unparse(fn)
    return cache[key]


def model_of(git_dir: str, commit: str, size: str, cache: dict) -> dict:
    if size not in cache:
        text = git(git_dir, "show", f"{commit}:scripts/train/yamls/pretrain/mpt-{size}.yaml")
        model = yaml.safe_load(text)["model"]
        d, ratio = model["d_model"], model.get("expansion_ratio", 4)
        cache[size] = {
            "name": f"MPT-{size.upper()} (llm-foundry benchmark config)",
            "num_layers": model["n_layers"],
            "hidden_size": d,
            "ffn_hidden_size": int(d * ratio),
            "num_attention_heads": model["n_heads"],
            "num_kv_heads": model["n_heads"],
            "vocab_size": model["vocab_size"],
            "gated_mlp": False,
            "activation": "gelu",
            "normalization": "layernorm",
            "position_embedding": "learned",
        }
    return dict(cache[size])


def rows(text: str):
    """Yield (line number, table heading, header, cells) of every table row."""
    heading = None
    header: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            heading, header = line[3:].strip(), None
        elif line.startswith("|") and heading:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                yield lineno, heading, header, cells


def record(
    cells: dict, heading: str, blame: tuple[str, str], model: dict, commit: str, attn_impl: str,
    unpad: bool,
) -> dict:
    gpu, gpu_name = GPU[cells["GPU"]]
    n = int(cells["# GPUs"])
    mbs, ga, gbs = (
        int(cells["MicroBatchSize"]),
        int(cells["GradAccum"]),
        int(cells["GlobalBatchSize"]),
    )
    seq = int(cells["SeqLen (T)"])
    if gbs != mbs * ga * n:
        raise ValueError(
            f"GlobalBatchSize {gbs} != MicroBatchSize x GradAccum x GPUs = {mbs}x{ga}x{n} "
            "(Composer's uneven micro-batches: not a layout the schema holds)"
        )
    precision = PRECISION[cells["Precision"]]
    zero = SHARDING[cells["Sharding Strategy"]]
    recompute = "full" if cells["Activation Checkpointing"] == "True" else "none"
    if cells["Activation CPUOffload"] != "False":
        raise ValueError("activation CPU offload under FSDP is not priced")
    model["seq_len"] = seq
    tokens = float(cells["Throughput (T/s/GPU)"])
    sha, summary = blame
    size = cells["Model"]
    slug = heading.lower()
    gen = "large-scale" if "large scale" in slug else ""
    rid = f"foundry-{size}-{cells['GPU'].replace('_', '-')}-{cells['Precision'].replace('_', '-')}-{n}gpu-seq{seq}"
    rid += f"-mb{mbs}-ga{ga}" + (f"-{gen}" if gen else "")
    notes = [
        f"table '{heading}'; row last changed in {sha} ({summary})",
        (
            f"MP Mode {cells['MP Mode']}, sharding {cells['Sharding Strategy']} "
            f"(zero_stage {zero}), activation checkpointing {cells['Activation Checkpointing']}"
        ),
        f"published MFU {cells['MFU']} % of the table's peak; model TFLOP {cells.get('Model TFLOP', '-')}",
        (
            f"attention: attn_impl '{attn_impl}' (submit_benchmarks.py's --attn_impl default at "
            f"{sha}; sweep.sh does not set it); {ATTN_IMPL_FN.get(attn_impl, attn_impl)} "
            + ("unpads its inputs" if unpad else "passes the padded tensors, no unpad")
            + f" ({ATTENTION_PY} at {sha})"
        ),
    ]
    if precision == "fp8":
        notes.append("amp_fp8: Composer's Transformer Engine fp8 autocast, scaling recipe unstated")
    return {
        "id": rid,
        "framework": "llm-foundry",
        "source": f"llm-foundry MPT benchmark tables ({README} @{commit}), table '{heading}', "
        f"rows of commit {sha}",
        "confidence": "medium",
        "model": model,
        "gpu": gpu,
        "num_gpus": n,
        "gpus_per_node": 8,
        "interconnect": heading if "interconnect" in heading else f"{gpu_name} (system not stated)",
        "layout": {
            "tp": 1,
            "pp": 1,
            "dp": n,
            "cp": 1,
            "ep": 1,
            "vp": 1,
            "sequence_parallel": False,
            "zero_stage": zero,
            "micro_batch": mbs,
            "global_batch_seqs": gbs,
            "recompute": recompute,
            "precision": precision,
        },
        "settings": {"attention_kernel": ATTN_IMPL_KERNEL[attn_impl]}
        | ({} if unpad else {"attention_unpad": False}),
        "measured_tokens_per_s_per_gpu": tokens,
        "tokens_derivation": f"published Throughput (T/s/GPU) = {tokens:g} (table)",
        "notes": "; ".join(notes),
    }


def main(argv: list[str]) -> int:
    git_dir = argv[1]
    commit = argv[2] if len(argv) > 2 else DEFAULT_COMMIT
    text = git(git_dir, "show", f"{commit}:{README}")
    blame = blame_commits(git_dir, commit)
    cache: dict = {}
    kernels: dict = {}
    unpads: dict = {}
    runs, skipped = [], []
    for lineno, heading, header, cells_list in rows(text):
        cells = dict(zip(header, cells_list))
        if "Throughput (T/s/GPU)" not in cells:
            continue
        where = f"line {lineno} ({heading}: {cells_list[0]} seq {cells.get('SeqLen (T)')} x{cells.get('# GPUs')})"
        try:
            model = model_of(git_dir, commit, cells["Model"], cache)
            attn = attn_impl_of(git_dir, blame[lineno][0], kernels)
            unpad = unpads_of(git_dir, blame[lineno][0], attn, unpads)
            runs.append(record(cells, heading, blame[lineno], model, commit, attn, unpad))
        except (ValueError, KeyError, subprocess.CalledProcessError) as err:
            skipped.append(f"{where} -- {err}")
    ids = [r["id"] for r in runs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    for d in dupes:  # the same configuration measured twice: keep both, numbered
        for k, r in enumerate(r for r in runs if r["id"] == d):
            r["id"] = f"{d}-{k + 1}"
    header = [
        "llm-foundry MPT benchmark tables, every row, in the published_runs.yaml schema.",
        EVALUATION_ONLY,
        f"Source: github.com/mosaicml/llm-foundry @ {commit}, {README}.",
        "Generated by bench/heldout/make_foundry_summary.py (its docstring says what is and is not taken).",
    ]
    write_summary(header, runs, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
