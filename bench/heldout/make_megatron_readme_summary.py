"""Megatron-LM's own published scaling tables in the published_runs.yaml schema: a fifth held-out
source, Megatron-LM (A100, 2021) and Megatron-Core (H100, 2024) GPT weak-scaling runs.

Held-out evaluation data only: no row is used to fit a constant (docs/accuracy.md "Held-out:
Megatron-LM's README tables"). The tables exist only as images in Megatron-LM's history
(images/cases_april2021.png at 50a4b5fa02, 2021-04-08: SC21 Table 1; images/model_table.png at
f2e5db402c, 2024-07-15: Megatron-Core r0.8.0 on H100); megatron_readme_tables.yaml transcribes them
cell by cell, and this script checks every row against itself (aggregate PFLOP/s = per-GPU TFLOP/s
x GPUs, the percentage of peak = TFLOP/s over the A100's 312 / H100's 989 bf16 / fp16 peak, the
2021 table's parameter count from the model's shape, the 2024 table's TP x PP x DP = GPUs). Rows
that are shared records (../shared/data/published_runs.yaml: the same GPU, GPU count, TP, PP and
global batch) are listed in the header and not transcribed. Usage, from a clone of NVIDIA/Megatron-LM:

    python bench/heldout/make_megatron_readme_summary.py GIT_DIR > bench/heldout/megatron_readme_summary.yaml

What a record takes:
- 2021 (A100 80GB, Selene): the launch script of the same table, examples/sc21/run_table_1.sh and
  CONFIG.sh at de7dc40f88 (2021-08-10, "scripts for sc21"; parsed, never run): TP, PP, micro-batch,
  global batch, layers, hidden size, heads, `--num-layers-per-virtual-pipeline-stage` (-> vp) and
  `--checkpoint-activations` (full recompute); --seq-length 2048, --fp16. The model: ffn 4h, MHA,
  GELU, learned positions (Megatron-LM's GPT of 2021), the GPT-2 BPE vocabulary (50,257) padded as
  Megatron pads it (to a multiple of 128 x TP: 51,200 at TP 8). Megatron-LM of that date ran
  attention with the score matrix in HBM (megatron/model/transformer.py at de7dc40f88:
  torch.baddbmm, FusedScaleMaskSoftmax; FlashAttention came 2022-12): `settings: {attention_kernel:
  unfused}`, and --attention-dropout / --hidden-dropout default 0.1 (megatron/arguments.py there):
  `model.hidden_dropout: true`. Not priced, kept in the notes: `--DDP-impl local` (the 39B .. 1T
  rows: one all-reduce of the contiguous gradient buffer after the backward pass, no overlap) and
  fp16 loss scaling.
- 2024 (H100, Megatron-Core r0.8.0): the table's TP, PP, DP and batch; sequence 4,096 and
  vocabulary 131,072 (the README's text); bf16 (the MFU column is TFLOP/s over 989); the README's
  `--tp-comm-overlap` (settings: tp_comm_overlap) and `--overlap-grad-reduce --overlap-param-gather`
  (Megatron's defaults in the cost model); the distributed optimizer (zero_stage 1, as the shared
  mcore2024 records state). Not stated, so not set: micro-batch (validate fills Megatron's 1) and
  the virtual pipeline size (docs/accuracy.md "The 2024 Megatron-Core scaling records ran
  interleaved": these runs used one; the records price the non-interleaved default).
- Measured tokens/s/GPU: the table's TFLOP/s over the FLOPs per token of the source's own formula
  (2021: Narayanan et al.'s 96 l h^2 (1 + s/6h + V/16lh), which counts the recompute forward; 2024:
  megatron/training/training.py num_floating_point_operations at f2e5db402c, 12 l h^2 (2 + s/h +
  ffn/h + V/2lh) for MHA), as the shared records derive theirs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import EVALUATION_ONLY, git, write_summary

HERE = Path(__file__).resolve().parent
TABLES = HERE / "megatron_readme_tables.yaml"
SHARED = HERE.parents[2] / "shared" / "data" / "published_runs.yaml"
SC21_COMMIT = "de7dc40f88"
SC21_SCRIPT = "examples/sc21/run_table_1.sh"
SC21_CONFIG = "examples/sc21/CONFIG.sh"
GPT2_VOCAB = 50257
PEAK_TFLOPS = {"a100-sxm-80gb": 312.0, "h100-sxm-80gb": 989.0}


def sc21_configs(script: str) -> dict[str, dict[str, str]]:
    """run_table_1.sh: model size -> its `VAR=value` assignments (and MEGATRON_EXTRA_PARAMS)."""
    out: dict[str, dict[str, str]] = {}
    blocks = re.split(r'(?:el)?if \[ \$\{MODEL_SIZE\} == "([^"]+)" \]; then', script)
    for size, body in zip(blocks[1::2], blocks[2::2]):
        body = body.split("\nelse")[0].split("\nelif")[0]
        out[size] = {k: v.strip('"') for k, v in re.findall(r'^\s*([A-Z_]+)=("[^"]*"|\S+)', body, flags=re.MULTILINE)}
    return out


def padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron's _vocab_size_with_padding: up to a multiple of make-vocab-size-divisible-by x TP."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"{TABLES.name}: {what}")


def shared_keys() -> dict[tuple, str]:
    if not SHARED.exists():
        raise SystemExit(f"{SHARED}: the shared records are needed to leave out the rows they hold")
    return {
        (r["gpu"], r["num_gpus"], r["layout"]["tp"], r["layout"]["pp"], r["layout"]["global_batch_seqs"]): r["id"]
        for r in yaml.safe_load(SHARED.read_text())
    }


def sc21_records(table: dict, git_dir: str, shared: dict, skipped: list[str]) -> list[dict]:
    script = git(git_dir, "show", f"{SC21_COMMIT}:{SC21_SCRIPT}")
    config = git(git_dir, "show", f"{SC21_COMMIT}:{SC21_CONFIG}")
    seq = int(re.search(r"--seq-length (\d+)", config).group(1))
    check("--fp16" in config, f"{SC21_CONFIG} @{SC21_COMMIT} no longer says --fp16")
    confs = sc21_configs(script)
    gpu = "a100-sxm-80gb"
    out = []
    for cells in table["rows"]:
        row = dict(zip(table["columns"], cells))
        size = row["model_size"]
        c = confs.get(size)
        check(c is not None, f"{size}: no block in {SC21_SCRIPT}")
        tp, pp, mbs, gbs = int(c["TP"]), int(c["PP"]), int(c["MBS"]), int(c["GBS"])
        layers, hidden, heads = int(c["NLS"]), int(c["HS"]), int(c["NAH"])
        gpus = int(c["NNODES"]) * 8
        extra = c.get("MEGATRON_EXTRA_PARAMS", "")
        check((layers, hidden, tp * pp, gpus, gbs) == (row["num_layers"], row["hidden_size"],
              row["model_parallel_size"], row["num_gpus"], row["batch_size"]),
              f"{size}: the table and {SC21_SCRIPT} disagree")  # fmt: skip
        vocab = padded_vocab(GPT2_VOCAB, tp)
        params = 12 * layers * hidden**2 + 13 * layers * hidden + (vocab + seq) * hidden
        # the table rounds to 0.1 B: within that, plus 1 % for the vocabulary padding the paper may count apart
        check(abs(params / 1e9 - row["params_billion"]) <= 0.051 + 0.01 * row["params_billion"],
              f"{size}: {params / 1e9:.1f}B parameters from the shape, table {row['params_billion']}")  # fmt: skip
        _check_rates(row, gpu, size)
        key = (gpu, gpus, tp, pp, gbs)
        if key in shared:
            skipped.append(f"{table['image']} {size}: the shared record {shared[key]}")
            continue
        vp_match = re.search(r"--num-layers-per-virtual-pipeline-stage (\d+)", extra)
        vp = layers // pp // int(vp_match.group(1)) if vp_match else 1
        flops = 96 * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
        tokens = round(row["tflops_per_gpu"] * 1e12 / flops, 1)
        recompute = "full" if "--checkpoint-activations" in extra else None
        ddp = c["DDP"]
        out.append({
            "id": f"megatron2021-readme-a100-gpt-{size.lower()}",
            "framework": "megatron",
            "source": f"Megatron-LM README {table['image']} (rows of commit {table['commit']}, {table['date']}): "
                      f"{table['title']}; layout from {SC21_SCRIPT} @{SC21_COMMIT}",
            "confidence": "high",
            "model": {
                "name": f"GPT {size} (Megatron-LM SC21 weak-scaling config)",
                "num_layers": layers, "hidden_size": hidden, "ffn_hidden_size": 4 * hidden,
                "num_attention_heads": heads, "num_kv_heads": heads, "vocab_size": vocab,
                "gated_mlp": False, "activation": "gelu", "normalization": "layernorm",
                "position_embedding": "learned", "hidden_dropout": True, "seq_len": seq,
            },
            "gpu": gpu,
            "num_gpus": gpus,
            "gpus_per_node": 8,
            "interconnect": "NVIDIA Selene (DGX A100 SuperPOD): NVLink / NVSwitch in a node, InfiniBand HDR between",
            "layout": {
                "tp": tp, "pp": pp, "dp": gpus // (tp * pp), "cp": 1, "ep": 1, "vp": vp,
                "sequence_parallel": False, "zero_stage": 0, "micro_batch": mbs,
                "global_batch_seqs": gbs, "recompute": recompute, "precision": "fp16",
            },
            "settings": {"attention_kernel": "unfused"},
            "measured_tokens_per_s_per_gpu": tokens,
            "tokens_derivation": f"derived: {row['tflops_per_gpu']} TFLOP/s/GPU / 96*l*h^2*(1+s/6h+V/16lh) with "
                                 f"l={layers}, h={hidden}, s={seq}, V={vocab} = {flops:.4e} FLOP/token -> "
                                 f"{tokens} tokens/s/GPU (the 96 counts the recompute forward)",
            "notes": f"{SC21_SCRIPT} @{SC21_COMMIT}: TP {tp}, PP {pp}, MBS {mbs}, GBS {gbs}, {extra.strip()}, "
                     f"--DDP-impl {ddp} ({'all-reduce of the contiguous gradient buffer after the backward pass, not overlapped; not priced' if ddp == 'local' else 'torch DDP, bucketed all-reduce overlapped with the backward pass'}); "
                     f"fp16 with loss scaling 8192 ({SC21_CONFIG}); unfused attention (torch.baddbmm + "
                     "FusedScaleMaskSoftmax, megatron/model/transformer.py) and dropout 0.1 (megatron/arguments.py "
                     f"defaults) at {SC21_COMMIT}; vocabulary GPT-2 BPE {GPT2_VOCAB} padded to {vocab} (128 x TP); "
                     f"table: {row['params_billion']}B parameters, {row['pct_of_peak']} % of peak, "
                     f"{row['aggregate_pflops']} PFLOP/s aggregate",
        })  # fmt: skip
    return out


def mcore_records(table: dict, shared: dict, skipped: list[str]) -> list[dict]:
    gpu = "h100-sxm-80gb"
    seq, vocab = 4096, 131072
    out = []
    for cells in table["rows"]:
        row = dict(zip(table["columns"], cells))
        size = row["model_size"]
        tp, pp, dp = row["tp"], row["pp"], row["dp"]
        check(tp * pp * dp == row["num_gpus"], f"{size}: TP x PP x DP != GPUs")
        _check_rates(row, gpu, size)
        key = (gpu, row["num_gpus"], tp, pp, row["batch_size"])
        if key in shared:
            skipped.append(f"{table['image']} {size}: the shared record {shared[key]}")
            continue
        layers, hidden = row["num_layers"], row["hidden_size"]
        ffn = 4 * hidden
        flops = 12 * layers * hidden**2 * (2 + seq / hidden + ffn / hidden + vocab / (2 * layers * hidden))
        tokens = round(row["tflops_per_gpu"] * 1e12 / flops, 1)
        out.append({
            "id": f"mcore2024-readme-h100-gpt-{size.lower()}",
            "framework": "megatron",
            "source": f"Megatron-LM README {table['image']} (rows of commit {table['commit']}, {table['date']}): "
                      f"{table['title']}",
            "confidence": "medium",
            "model": {
                "name": f"GPT {size} (Megatron-Core benchmark config)",
                "num_layers": layers, "hidden_size": hidden, "ffn_hidden_size": ffn,
                "num_attention_heads": row["attention_heads"], "num_kv_heads": row["attention_heads"],
                "vocab_size": vocab, "gated_mlp": False, "seq_len": seq,
            },
            "gpu": gpu,
            "num_gpus": row["num_gpus"],
            "gpus_per_node": 8,
            "interconnect": "H100 cluster (not stated)",
            "layout": {
                "tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1, "vp": None, "sequence_parallel": None,
                "zero_stage": 1, "micro_batch": None, "global_batch_seqs": row["batch_size"],
                "recompute": None, "precision": "bf16",
            },
            "settings": {"tp_comm_overlap": True},
            "measured_tokens_per_s_per_gpu": tokens,
            "tokens_derivation": f"derived: {row['tflops_per_gpu']} TFLOP/s/GPU / Megatron-Core "
                                 f"num_floating_point_operations per token 12*l*h^2*(2+s/h+ffn/h+V/(2*l*h)) with "
                                 f"l={layers}, h={hidden}, s={seq}, ffn={ffn}, V={vocab}, MHA = {flops:.4e} "
                                 f"FLOP/token -> {tokens} tokens/s/GPU",
            "notes": "README text at f2e5db402c: vocabulary 131,072, sequence 4,096, --overlap-grad-reduce "
                     "--overlap-param-gather, --tp-comm-overlap, pipeline communication overlap (which "
                     "Megatron-LM allows only under the interleaved schedule: virtual pipeline size not "
                     "given, priced without; docs/accuracy.md); micro-batch not stated; "
                     f"table: MFU {row['mfu_pct']} %, {row['aggregate_pflops']} PFLOP/s aggregate",
        })  # fmt: skip
    return out


def _check_rates(row: dict, gpu: str, size: str) -> None:
    aggregate = row["tflops_per_gpu"] * row["num_gpus"] / 1000
    # both columns are rounded: TFLOP/s to an integer (2021) or 0.1 (2024), PFLOP/s to 0.1
    half_step = 0.5 if isinstance(row["tflops_per_gpu"], int) else 0.05
    check(abs(aggregate - row["aggregate_pflops"]) <= 0.051 + half_step * row["num_gpus"] / 1000,
          f"{size}: {row['tflops_per_gpu']} x {row['num_gpus']} = {aggregate:.1f} PFLOP/s, table {row['aggregate_pflops']}")  # fmt: skip
    pct = row.get("pct_of_peak", row.get("mfu_pct"))
    check(abs(100 * row["tflops_per_gpu"] / PEAK_TFLOPS[gpu] - pct) <= 0.51,
          f"{size}: {row['tflops_per_gpu']} / {PEAK_TFLOPS[gpu]} is not the table's {pct} %")  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__.split("\n\n")[2] + "\n")
        return 2
    git_dir = argv[1]
    tables = yaml.safe_load(TABLES.read_text())
    shared = shared_keys()
    skipped: list[str] = []
    records = sc21_records(tables[0], git_dir, shared, skipped) + mcore_records(tables[1], shared, skipped)
    header = [
        "Megatron-LM's README scaling tables (SC21 Table 1 on A100, 2021; Megatron-Core r0.8.0 on H100, 2024),",
        "the rows that are not shared records, in the published_runs.yaml schema.",
        EVALUATION_ONLY,
        (f"Source: github.com/NVIDIA/Megatron-LM, {tables[0]['image']} @{tables[0]['commit']} and "
         f"{tables[1]['image']} @{tables[1]['commit']} (bench/heldout/megatron_readme_tables.yaml)."),
        "Generated by bench/heldout/make_megatron_readme_summary.py (its docstring says what is and is not taken).",
    ]
    write_summary(header, records, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
