"""Transcribe Megatron-Bridge's published performance tables into the published_runs.yaml schema.

Held-out evaluation data only: these rows are never used to fit a constant (docs/accuracy.md
"Held-out: Megatron-Bridge performance summary"). Usage, from a clone of NVIDIA-NeMo/Megatron-Bridge:

    python bench/heldout/make_mbridge_summary.py GIT_DIR [COMMIT] > bench/heldout/mbridge_performance_summary.yaml

It reads docs/performance-summary.md and docs/performance-summary-archive.md at COMMIT (default
067f987df, the commit the shared mbridge-* records cite) with `git show`, parses every pre-training
table (SFT / LoRA tables are skipped: the cost model prices pre-training steps), and writes one
record per row and per parenthesised variant. Only what the page states goes into a record:
the layout cells, the precision column (FP8-CS -> fp8 tensorwise, FP8-MX / MXFP8 -> mxfp8, NVFP4
-> nvfp4, the H100 parenthesised variant -> fp8 blockwise per the page's footnote), and the
footnote "we force-balance the token distribution among experts" (moe_force_balance) where it
applies. Recipe settings come from mbridge_recipes.py: the performance-recipe overrides
(scripts/performance/configs/*_workload_base_configs.py, from 26.06.01 the flat recipe functions of
src/megatron/bridge/perf_recipes) on main at the commit that published the container's table, taken only when one recipe's whole layout (GPUs, TP, PP, CP, VP, EP, GBS, MBS,
FSDP) is the row's: CUDA graphs (TE per-layer with the attention in scope, or full-iteration:
cuda_graphs, and full_iteration_cuda_graph for the latter),
the flex dispatcher (DeepEP / HybridEP -> moe_dispatcher deepep, unless the recipe function sets
moe_token_dispatcher_type "alltoall" after it: mbridge_recipes.dispatcher_type_for), moe_a2a_overlap (ep_overlap),
recompute_modules, CPU offload layers; for a matched fp8_cs recipe fp8_recipe tensorwise (current
scaling), and for TP > 1 tp_comm_overlap as the recipe function sets it for the row's compute dtype
(mbridge_recipes.tp_overlap_for); the pipeline layout the recipe ran (its pp_layout, else for
DeepSeek-V3 the library's default map for the row's PP x VP) as layout.layers_per_stage, with the
MTP layer it holds as the model's mtp_num_layers (pipeline_of). Each record's notes name the recipe, file and commit, or
why none was taken. 25.09 ran from YAML perf matrices: its TP overlap (run_script.py's library recipe and
COMM_OVERLAP_CONFIG_MAP), CUDA graphs and CPU offload are read (mbridge_recipes.yaml_settings), for rows
whose layout a perf-matrix entry of their precision holds.
Rows whose model the cost model cannot describe (Nemotron 3 hybrid Mamba, DeepSeek-V4) and rows
whose cells do not parse are listed in the file's header comment with the reason.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mbridge_recipes
from heldout_file import EVALUATION_ONLY, git, write_summary

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")
DEFAULT_COMMIT = "067f987df"
GPU = {
    "DGX-GB300": ("gb300", 72),
    "DGX-GB200": ("gb200", 72),
    "DGX-B300": ("b300", 8),
    "DGX-B200": ("b200", 8),
    "DGX-H100": ("h100-sxm-80gb", 8),
}
MODEL_PRESET = {
    "LLAMA3_8B": "llama3-8b",
    "LLAMA3_70B": "llama3-70b",
    "LLAMA3.1_405B": "llama3.1-405b",
    "DeepSeekV3": "deepseek-v3",
    "GPT OSS 120B": "gpt-oss-120b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b",
    "Qwen3_235B_a22B": "qwen3-235b-a22b",
}
KIMI_K2 = {
    "name": "Kimi-K2 (1T total / 32B active)",
    "num_layers": 61,
    "hidden_size": 7168,
    "ffn_hidden_size": 18432,
    "num_attention_heads": 64,
    "num_kv_heads": 64,
    "vocab_size": 163840,
    "mla": True,
    "moe": {
        "num_experts": 384,
        "top_k": 8,
        "expert_ffn_hidden_size": 2048,
        "num_shared_experts": 1,
        "first_k_dense_layers": 1,
        "router_score_function": "sigmoid",
    },
    "rotary_base": 50000.0,
    "norm_eps": 1e-06,
}
UNDESCRIBABLE = {
    "Nemotron_3_Nano": "hybrid Mamba-2 / attention / MoE: the cost model has no Mamba layer",
    "Nemotron_3_5_Lightning": "hybrid Mamba-2 / attention / MoE: the cost model has no Mamba layer",
    "Nemotron_3_Super": "hybrid Mamba-2 / attention / MoE: the cost model has no Mamba layer",
    "Nemotron_3_Ultra": "hybrid Mamba-2 / attention / MoE: the cost model has no Mamba layer",
    "DeepSeekV4 Flash": "DeepSeek-V4 attention is not described by the cost model's ModelSpec",
}
ALT = re.compile(r"^\s*(\S+)\s*\((\S+)\)\s*$")


def model_dict(name: str) -> dict | None:
    """The model's shape: the planner's preset (each JSON cites its HF config) or Kimi-K2's HF config."""
    if name == "Kimi_K2":
        return dict(KIMI_K2)
    preset = MODEL_PRESET.get(name)
    if preset is None:
        return None
    spec = json.loads((ROOT / "models_zoo" / "models" / f"{preset}.json").read_text())
    spec.pop("source", None)
    # The preset's multi-token prediction (DeepSeek-V3: 1) is each row's to state (mtp_note).
    spec.pop("mtp_num_layers", None)
    if spec.get("moe"):
        # DeepSeek's node-limited routing is its own system's setting, not Megatron-Bridge's.
        spec["moe"] = {k: v for k, v in spec["moe"].items() if k != "max_nodes_per_token"}
    return spec


def mtp_note(tag: str | None) -> str:
    """Why a DeepSeek-V3 row that ran its multi-token-prediction layer does not state it."""
    ran = f"{tag}: the" if tag else "The"
    return (
        f"{ran} recipe's multi-token prediction layer (deepseek_v3 recipes: mtp_num_layers 1) is "
        "not stated (mtp_num_layers 0): no recipe with this row's layout was read, so neither is "
        "the pipeline layout it sits in (the recipe's pp_layout, or "
        "set_deepseek_v3_pipeline_model_parallel_layout's map: e.g. PP 16 4 decoder layers a "
        "stage, 1 + MTP + loss last); on the planner's even split it would sit beside more "
        "decoder layers than it ran with"
    )


def pipeline_of(recipes, container, name, tag, recipe_layout, pp, vp, model):
    """(decoder layers per stage, MTP layers, note) of the pipeline layout the row's recipe ran:
    its own `pp_layout` (workload base configs; perf recipes' `cfg.model.pipeline_model_parallel_layout`
    or `set_deepseek_v3_pipeline_model_parallel_layout(cfg.model, layout)`), else for DeepSeek-V3
    the library's default map for the row's PP x VP (mbridge_recipes.deepseek_layout_map, its MTP
    layer in the last stage); (None, 0, note or "") where no recipe matched or the layout cannot be
    stated. The pop takes the marker out of the layout updates either way."""
    missing = object()
    given = recipe_layout.pop("_pp_layout", missing)
    if given is missing or tag == "w/o MTP":
        return None, 0, ""
    where = "the recipe's pp_layout"
    layout = given
    if layout is None and name == "DeepSeekV3":
        layout = recipes.get("_dsv3_layouts", {}).get(container, {}).get((pp, vp or 1))
        commit = mbridge_recipes.CONTAINER_COMMIT[container]
        where = f"the DeepSeek-V3 library's default layout for PP {pp} x VP {vp or 1} @{commit}"
    if layout is None:
        return None, 0, ""
    found = mbridge_recipes.pipeline_split(layout, pp, vp or 1, model["num_layers"])
    if isinstance(found, str):
        return None, 0, f"pipeline layout not stated: {found}"
    split, mtp = found
    letters = {name: letter for letter, name in mbridge_recipes.LAYOUT_LETTERS.items()}
    shown = layout if isinstance(layout, str) else "|".join(
        "".join(letters[n] for n in stage) for stage in mbridge_recipes.layout_chunks(layout)
    )
    said = f"pipeline layout {shown!r} ({where}): layers_per_stage {list(split)}"
    return split, mtp, said + (f", {mtp} MTP layer(s) in the last stage (mtp_num_layers {mtp})" if mtp else "")


def split_cell(cell: str) -> tuple[str, str | None]:
    """'a (b)' -> (a, b): the page's parenthesised variant of a cell; otherwise (cell, None)."""
    m = ALT.match(cell)
    return (m.group(1), m.group(2)) if m else (cell.strip(), None)


def tables(text: str):
    """Yield (container, section, heading, header, row cells) for every table row of the page."""
    container = section = heading = None
    header: list[str] | None = None
    for line in text.splitlines():
        if m := re.match(r"^## (\S+) NeMo Container", line):
            container, section, heading = m.group(1), None, None
        elif line.startswith("### "):
            section = line[4:].strip()
        elif line.startswith("#### "):
            heading, header = line[5:].strip(), None
        elif line.startswith("|") and container:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                yield container, section, heading, header, cells


def main(argv: list[str]) -> int:
    git_dir = argv[1]
    commit = argv[2] if len(argv) > 2 else DEFAULT_COMMIT
    full = git(git_dir, "rev-parse", commit).strip()
    records, skipped = [], []
    recipes = mbridge_recipes.load(git_dir)
    for doc in DOCS:
        text = git(git_dir, "show", f"{full}:{doc}")
        for container, section, heading, header, cells in tables(text):
            where = f"{doc} {container} {heading}: | {' | '.join(cells)} |"
            if section != "Pre-Training Performance":
                skipped.append(f"{where} -- {section}: not a pre-training step")
                continue
            if len(cells) != len(header):
                skipped.append(f"{where} -- {len(cells)} cells under {len(header)} columns")
                continue
            row = dict(zip(header, cells))
            if heading.startswith("System: "):
                row["System"] = heading[len("System: "):]
            else:
                row["Model"] = heading[len("Model: "):]
            row["_footnotes"] = footnotes_of(text)
            for rec in records_of(row, container, doc, full, where, skipped, recipes):
                records.append(rec)
    seen: dict[str, int] = {}
    for rec in records:
        n = seen.get(rec["id"], 0)
        seen[rec["id"]] = n + 1
        if n:
            rec["id"] += f"-{n + 1}"
    header = [
        "Megatron-Bridge performance summary, every pre-training row, in the published_runs.yaml schema.",
        EVALUATION_ONLY,
        f"Source: github.com/NVIDIA-NeMo/Megatron-Bridge @ {full}, {' + '.join(DOCS)}.",
        "Generated by bench/heldout/make_mbridge_summary.py (its docstring says what is and is not transcribed).",
    ]
    write_summary(header, records, skipped, width=110)
    return 0


def footnotes_of(text: str) -> dict[str, str]:
    """The page's footnote definitions, `[^name]: text`."""
    return dict(re.findall(r"^\[\^([^\]]+)\]: (.*)$", text, flags=re.MULTILINE))


def _measured_footnotes(cells: dict) -> list[str]:
    """Footnotes the page attaches to a row's measured figures (tokens/s, model TFLOP/s): the
    page's own qualification of the measurement, copied to the notes (confidence low)."""
    names = []
    for key, cell in cells.items():
        if key.startswith("Tokens") or key.startswith("Model TFLOP"):
            names += [n for n in re.findall(r"\[\^([^\]]+)\]", cell) if n not in names]
    return [f"page footnote on the measured figures: {cells['_footnotes'].get(n, n)}" for n in names]


def _num(cell: str | None) -> int | None:
    if cell is None or cell.lower() in ("n/a", ""):
        return None
    return int(cell)


def records_of(row, container, doc, commit, where, skipped, recipes):
    """One record for the row's main values and one for its parenthesised variant (if any)."""
    variants = [{}, {}]
    has_alt = False
    for key, cell in row.items():
        if key in ("Model", "System", "_footnotes"):
            variants[0][key] = variants[1][key] = cell
            continue
        main, alt = split_cell(cell)
        variants[0][key] = main
        variants[1][key] = alt if alt is not None else main
        has_alt |= alt is not None and key.startswith("Tokens")
    out = []
    for i, cells in enumerate(variants[: 2 if has_alt else 1]):
        try:
            rec = record(cells, container, doc, commit, recipes, alt=bool(i))
        except ValueError as err:
            skipped.append(f"{where}{' (variant)' if i else ''} -- {err}")
            continue
        if rec is not None:
            out.append(rec)
        else:
            name = cells["Model"].split("(")[0].strip()
            skipped.append(f"{where} -- {UNDESCRIBABLE.get(name, 'model not described')}")
    return out


def _precision(cells, gpu, alt):
    """(precision, fp8_recipe, note) from the Precision column, or the 25.09 footnote without it."""
    stated = cells.get("Precision")
    if stated is None:  # 25.09: no column; the footnote names the parenthesised granularity only
        if not alt:
            return "fp8", None, "precision column absent (25.09); fp8 inferred from the footnote, recipe unstated"
        if gpu == "h100-sxm-80gb":
            return "fp8", "blockwise", "variant: 128x128 weights / 1x128 activations (footnote)"
        return "mxfp8", None, "variant: 32x32 quantization granularity on Blackwell (footnote): MXFP8"
    table = {
        "BF16": ("bf16", None, None),
        "FP8-CS": ("fp8", "tensorwise", "FP8-CS = current (per-tensor) scaling"),
        "FP8-MX": ("mxfp8", None, None),
        "MXFP8": ("mxfp8", None, None),
        "NVFP4": ("nvfp4", None, None),
        "FP8": ("fp8", None, "precision column says FP8 without the scaling recipe"),
    }
    if stated not in table:
        raise ValueError(f"precision {stated!r} not recognised")
    return table[stated]


def record(cells, container, doc, commit, recipes, alt):
    """One record from one row's cells (main or parenthesised variant); None: model not described."""
    name, _, tag = cells["Model"].partition("(")
    name, tag = name.strip(), tag.strip(" )")
    model = model_dict(name)
    if model is None:
        return None
    gpu, per_node = GPU[cells["System"]]
    n = int(cells["#-GPUs"])
    tp, pp, cp = int(cells["TP"]), int(cells["PP"]), int(cells["CP"])
    if n % (tp * pp * cp):
        raise ValueError(f"#GPUs {n} not divisible by TP*PP*CP = {tp * pp * cp}")
    dp = n // (tp * pp * cp)
    mbs, gbs, seq = int(cells["MBS"]), int(cells["GBS"]), int(cells["Sequence Length"])
    ep, vp = _num(cells.get("EP")), _num(cells.get("VP"))
    precision, recipe, prec_note = _precision(cells, gpu, alt)
    tokens = float(cells[next(k for k in cells if k.startswith("Tokens"))].split("[")[0])
    tflops = cells.get("Model TFLOP / sec / GPU", "").split("[")[0]
    notes, confidence = [], "high"
    if prec_note:
        notes.append(prec_note)
        if "unstated" in prec_note or "without" in prec_note:
            confidence = "medium"
    if footnoted := _measured_footnotes(cells):
        notes += footnoted
        confidence = "low"
    fsdp = cells.get("FSDP")
    zero = None
    if fsdp is not None:
        zero = 3 if int(fsdp) > 0 else 1
        notes.append(
            f"FSDP column {fsdp}: "
            + ("Megatron-FSDP (zero_stage 3)" if zero == 3 else "DDP + distributed optimizer, the recipes' default (zero_stage 1)")
        )
    if gbs % (mbs * dp):
        raise ValueError(f"GBS {gbs} not divisible by MBS*DP = {mbs}*{dp}")
    ga = gbs // (mbs * dp)
    if "GA" in cells and _num(cells["GA"]) != ga:
        notes.append(f"INCONSISTENT: table GA {cells['GA']} but GBS/(MBS*DP) = {gbs}/({mbs}*{dp}) = {ga}")
        confidence = "low"
    settings = {}
    if recipe:
        settings["fp8_recipe"] = recipe
    moe = model.get("moe") is not None
    if moe and (container != "25.09" or tag == "dropless"):
        settings["moe_force_balance"] = True  # page footnote: force-balanced, token-dropless
    if tag == "tokendrop":
        # scripts/performance/run_script.py @fa0315ae2 (the 25.09 summary's commit) applies
        # src/megatron/bridge/training/utils/moe_token_drop.py apply_moe_token_drop with its
        # defaults to Qwen3 and to DeepSeek-V3 on B200 / GB200: capacity factor 1.0, padded to
        # capacity, all-to-all dispatcher.
        settings["moe_capacity_factor"] = 1.0
        settings["moe_pad_to_capacity"] = True
        notes.append(
            "token-drop MoE: capacity factor 1.0 padded to capacity (Megatron-Bridge @fa0315ae2 "
            "scripts/performance/run_script.py apply_moe_token_drop defaults)"
        )
        confidence = "low"
    mtp_at = None  # where the note on an unstated MTP layer goes (pipeline_of decides below)
    if name == "DeepSeekV3" and tag != "w/o MTP":
        mtp_at = len(notes)
        confidence = "low" if tag == "w/ MTP" else confidence
    elif tag == "w/o MTP":
        notes.append("w/o MTP: no multi-token prediction layer (mtp_num_layers 0)")
    if name == "Kimi_K2":
        notes.append("Muon optimizer (page note), priced as the cost model's Adam; dims from HF moonshotai/Kimi-K2-Base config.json")
        confidence = "low"
    model["seq_len"] = seq
    fsdp_on = None if fsdp is None else int(fsdp) > 0
    shape = {"num_gpus": n, "tp": tp, "pp": pp, "cp": cp, "vp": vp, "ep": ep, "gbs": gbs, "mbs": mbs, "fsdp": fsdp_on,
             "precision": precision}
    stated = cells.get("Precision")
    recipe_settings, recipe_layout, recipe_note = mbridge_recipes.settings_for(
        recipes, container, name, cells["System"], stated, shape
    )
    settings.update(recipe_settings)
    notes.append(f"recipe settings: {recipe_note}")
    split, mtp, layout_note = pipeline_of(recipes, container, name, tag, recipe_layout, pp, vp, model)
    if layout_note:
        notes.append(layout_note)
    if mtp:
        model["mtp_num_layers"] = mtp
    elif mtp_at is not None:
        notes.insert(mtp_at, mtp_note(tag if "MTP" in tag else None))
    slug = re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")
    return {
        "id": f"mbridge-{container}-{gpu.split('-')[0]}-{slug}-{precision}" + (f"-{recipe}" if recipe else "") + (f"-{tag.replace('/', '').replace(' ', '')}" if tag else ""),
        "framework": "megatron",
        "source": f"Megatron-Bridge performance summary ({doc} @{commit[:9]}), NeMo {container} container, "
        f"{cells['System']} pre-training table" + (", parenthesised variant" if alt else ""),
        "confidence": confidence,
        "model": model,
        "gpu": gpu,
        "num_gpus": n,
        "gpus_per_node": per_node,
        "interconnect": f"{cells['System']} (system name only)",
        "layout": {
            "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vp": vp,
            "sequence_parallel": None, "zero_stage": zero, "micro_batch": mbs,
            "global_batch_seqs": gbs, "recompute": recipe_layout.get("recompute"), "precision": precision,
            **{k: recipe_layout[k] for k in mbridge_recipes.SPLIT_FLAGS if k in recipe_layout},
            **({"layers_per_stage": list(split)} if split else {}),
        },
        **({"settings": settings} if settings else {}),
        "measured_tokens_per_s_per_gpu": tokens,
        "tokens_derivation": f"published tokens/s/GPU = {tokens:g} (table); model TFLOP/s/GPU {tflops}",
        "notes": "; ".join(notes + [f"DP = #GPUs/(TP*PP*CP) = {dp}; GA = {ga}"]),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv))
