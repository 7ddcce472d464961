"""Megatron-Bridge's performance-recipe overrides (scripts/performance/configs/*/*_workload_base_configs.py)
at the commit that published each container's table, read with `ast` (never executed), and
matched to a table row by its whole layout. Used by make_mbridge_summary.py for the records'
`settings:`; evaluation data only.

Only the base-config overrides are read (cuda_graph_impl / cuda_graph_scope, the MoE flex
dispatcher backend, moe_a2a_overlap, recompute_modules, cpu_offloading_num_layers), and of the
model's library recipe (src/megatron/bridge/recipes/*/*.py `<model>_pretrain_config`, which every
performance config of the model calls first, e.g. llama31_405b_pretrain_config_gb200 ->
llama31_405b_pretrain_config) the pipeline-split flags account_for_embedding_in_pipeline_split /
account_for_loss_in_pipeline_split it sets as plain statements of its body (a conditional
setting, as 25.11's _llama3_common has, is not read); what each recipe function sets besides them
(TP-comm overlap, fusions) is not transcribed.
"""

from __future__ import annotations

import ast
import subprocess
from typing import Any

# The commit of each container's performance-summary update (git log -- docs/performance-summary.md):
# the recipes on main when the table was published. 25.09 used YAML configs (not read); 26.06.01 and
# later moved to src/megatron/bridge/perf_recipes (Python functions, not read).
CONTAINER_COMMIT = {
    "25.11": "5776a6d90",
    "26.02": "c0b9a0003",
    "26.02.01": "cfeddcd94",
    "26.04": "74695a06d",
    "26.04.01": "21d102f5e",
    "26.06": "8f341b04f",
}
DEFAULTS: dict[str, Any] = {  # scripts/performance/utils/utils.py WorkloadBaseConfig
    "num_gpus": None, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1, "virtual_pipeline_model_parallel_size": None,
    "expert_model_parallel_size": 1, "global_batch_size": 1, "micro_batch_size": 1,
    "use_megatron_fsdp": None, "cuda_graph_impl": None, "cuda_graph_scope": None,
    "cpu_offloading_num_layers": None, "recompute_num_layers": None, "recompute_modules": None,
    "moe_flex_dispatcher_backend": None, "moe_a2a_overlap": False,
}  # fmt: skip
PREFIX = {
    "LLAMA3_8B": "LLAMA3_8B",
    "LLAMA3_70B": "LLAMA3_70B",
    "LLAMA3.1_405B": "LLAMA31_405B",
    "DeepSeekV3": "DEEPSEEK_V3",
    "GPT OSS 120B": "GPT_OSS_120B",
    "Qwen3_30B_a3B": "QWEN3_30B_A3B",
    "Qwen3_235B_a22B": "QWEN3_235B_A22B",
    "Kimi_K2": "KIMI_K2",
}
PRECISION = {"BF16": "BF16", "FP8-CS": "FP8_CS", "FP8-MX": "FP8_MX", "MXFP8": "FP8_MX",
             "NVFP4": "NVFP4", "FP8": "FP8_CS"}  # fmt: skip
MODULES = {"core_attn", "layernorm", "mlp", "moe_act", "moe", "shared_experts", "mla_up_proj"}
SPLIT_FLAGS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
RECIPES_DIR = "src/megatron/bridge/recipes"


def _split_flags_of(source: str) -> dict[str, dict[str, bool]]:
    """Module-level function -> the SPLIT_FLAGS its body sets as plain statements
    (`cfg.model.<flag> = True|False`); assignments under an `if` are not read."""
    out: dict[str, dict[str, bool]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        flags = {}
        for st in node.body:
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
                continue
            target, value = st.targets[0], st.value
            if (
                isinstance(target, ast.Attribute)
                and target.attr in SPLIT_FLAGS
                and isinstance(target.value, ast.Attribute)
                and target.value.attr == "model"
                and isinstance(value, ast.Constant)
                and isinstance(value.value, bool)
            ):
                flags[target.attr] = value.value
        if flags:
            out[node.name] = flags
    return out


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def _configs_of(source: str) -> dict[str, dict[str, Any]]:
    """Module-level `NAME = WorkloadBaseConfig(...) | replace(BASE, ...) | OTHER` as dicts."""
    out: dict[str, dict[str, Any]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        name, value = getattr(node.targets[0], "id", None), node.value
        if name is None:
            continue
        if isinstance(value, ast.Name) and value.id in out:
            out[name] = dict(out[value.id])
            continue
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
            continue
        if value.func.id == "WorkloadBaseConfig":
            base = dict(DEFAULTS)
        elif value.func.id == "replace" and value.args and getattr(value.args[0], "id", None) in out:
            base = dict(out[value.args[0].id])
        else:
            continue
        try:
            base.update({kw.arg: ast.literal_eval(kw.value) for kw in value.keywords if kw.arg})
        except ValueError:
            continue  # a computed override: not transcribed
        out[name] = base
    return out


def load(git_dir: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Container -> config name -> fields, from each container's commit."""
    out = {}
    for container, commit in CONTAINER_COMMIT.items():
        names = subprocess.run(
            ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs"],
            check=True, capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        configs: dict[str, dict[str, Any]] = {}
        for path in names:
            if path.endswith("_workload_base_configs.py"):
                text = subprocess.run(
                    ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                    check=True, capture_output=True, text=True,
                ).stdout  # fmt: skip
                configs.update({k: {**v, "_file": path} for k, v in _configs_of(text).items()})
        flags: dict[str, dict[str, bool]] = {}
        for path in _git(git_dir, "ls-tree", "-r", "--name-only", commit, RECIPES_DIR).split():
            if path.endswith(".py"):
                flags.update(_split_flags_of(_git(git_dir, "show", f"{commit}:{path}")))
        for name, cfg in configs.items():
            # LLAMA31_405B_PRETRAIN_CONFIG_GB200_... -> llama31_405b_pretrain_config
            stem, found, _ = name.partition("_PRETRAIN_CONFIG")
            function = f"{stem.lower()}_pretrain_config"
            if found and function in flags:
                cfg["_split"] = {"function": function, **flags[function]}
        out[container] = configs
    return out


def _matches(cfg: dict[str, Any], row: dict[str, Any]) -> bool:
    vp = cfg["virtual_pipeline_model_parallel_size"]
    return (
        cfg["num_gpus"] in (None, row["num_gpus"])  # representation only; often unset
        and cfg["tensor_model_parallel_size"] == row["tp"]
        and cfg["pipeline_model_parallel_size"] == row["pp"]
        and cfg["context_parallel_size"] == row["cp"]
        and (vp or 1) == (row["vp"] or 1)
        and cfg["expert_model_parallel_size"] == (row["ep"] or 1)
        and cfg["global_batch_size"] == row["gbs"]
        and cfg["micro_batch_size"] == row["mbs"]
        and (row["fsdp"] is None or bool(cfg["use_megatron_fsdp"]) == row["fsdp"])
    )


def settings_for(recipes, container, model, gpu_system, precision, row):
    """(settings, layout updates, note) from the one recipe whose layout is the row's; ({}, {}, note)
    when none or several disagreeing ones match."""
    configs = recipes.get(container)
    if configs is None or model not in PREFIX or precision not in PRECISION:
        return {}, {}, "no recipe read for this container / model"
    gpu = gpu_system.split("-")[1]
    stem = f"{PREFIX[model]}_PRETRAIN_CONFIG_{gpu}_{PRECISION[precision]}"
    hits = {k: v for k, v in sorted(configs.items()) if k.startswith(stem) and _matches(v, row)}
    if not hits:
        return {}, {}, f"no {stem}* recipe at {CONTAINER_COMMIT[container]} has this row's layout"
    mapped = {k: _map(v) for k, v in hits.items()}
    first = next(iter(mapped.values()))
    if any(m[:2] != first[:2] for m in mapped.values()):
        return {}, {}, f"recipes {', '.join(hits)} match this layout with different settings"
    name = next(iter(hits))
    return first[0], first[1], f"recipe {name} ({hits[name]['_file']} @{CONTAINER_COMMIT[container]}): {first[2]}"


def _map(cfg: dict[str, Any]):
    settings: dict[str, Any] = {}
    layout: dict[str, Any] = {}
    said = []
    impl, scope = cfg["cuda_graph_impl"], cfg["cuda_graph_scope"]
    if impl:
        said.append(f"cuda_graph_impl={impl} scope={scope}")
        if impl == "full_iteration" or not scope or "attn" in (scope if isinstance(scope, list) else [scope]):
            settings["cuda_graphs"] = True
    if cfg["moe_flex_dispatcher_backend"]:
        said.append(f"flex dispatcher {cfg['moe_flex_dispatcher_backend']}")
        settings["moe_dispatcher"] = "deepep"
    if cfg["moe_a2a_overlap"]:
        said.append("moe_a2a_overlap")
        settings["ep_overlap"] = True
    mods = cfg["recompute_modules"]
    if mods:
        said.append(f"recompute_modules={mods}")
        if set(mods) <= MODULES:
            settings["recompute_modules"] = list(mods)
            layout["recompute"] = "selective"
    if cfg["recompute_num_layers"]:
        said.append(f"recompute_num_layers={cfg['recompute_num_layers']} (not transcribed)")
    if cfg["cpu_offloading_num_layers"]:
        said.append(f"cpu_offloading_num_layers={cfg['cpu_offloading_num_layers']}")
        settings["cpu_offload_layers"] = cfg["cpu_offloading_num_layers"]
    split = cfg.get("_split", {})
    on = [flag for flag in SPLIT_FLAGS if split.get(flag)]
    if on:
        said.append(f"{split['function']} sets {' and '.join(on)}")
        layout.update({flag: True for flag in on})
    return settings, layout, ", ".join(said) or "no overrides beyond the layout"
