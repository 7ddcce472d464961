"""Megatron-Bridge's performance-recipe overrides (scripts/performance/configs/*/*_workload_base_configs.py)
at the commit that published each container's table, read with `ast` (never executed), and
matched to a table row by its whole layout. Used by make_mbridge_summary.py for the records'
`settings:`; evaluation data only.

Only the base-config overrides are read (cuda_graph_impl / cuda_graph_scope, the MoE flex
dispatcher backend, moe_a2a_overlap, recompute_modules, cpu_offloading_num_layers), the gradients'
dtype and fp8 / fp4 parameter gathers the recipe function of the row's model, GPU and compute dtype
leaves (mixed_precision_of / precision_settings_for, for every row whatever its layout), plus three things of the recipe run: the compute dtype (the "FP8" / "FP8-CS" rows ran `fp8_cs` configs, which
utils/precision.py turns into bf16_with_fp8_current_scaling_mixed: fp8_recipe tensorwise) and TP
communication overlap, read from the recipe function `<model>_pretrain_config_<gpu>(precision)`
(scripts/performance/configs/<family>/*_llm_pretrain.py) for TP > 1 rows: its top-level
`cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=...)` / `cfg.comm_overlap.tp_comm_overlap = ...`
statements in order (constants, `bool(... tensor_model_parallel_size > 1)`, `X if precision == "nvfp4"
else ...`), else the CommOverlapConfig of the library recipe it starts from
(src/megatron/bridge/recipes/**, `cfg = <model>_pretrain_config()`); anything else that touches the
setting (an `if`, an unknown expression) leaves it untranscribed and says why in the notes; and the
token dispatcher type the recipe function sets (dispatcher_type_for: a flex back-end counts only
where the type is "flex", which a later `cfg.model.moe_token_dispatcher_type = "alltoall"` undoes).
Fusions are not transcribed. Also read, of the
model's library recipe (src/megatron/bridge/recipes/*/*.py `<model>_pretrain_config`, which every
performance config of the model calls first, e.g. llama31_405b_pretrain_config_gb200 ->
llama31_405b_pretrain_config) the pipeline-split flags account_for_embedding_in_pipeline_split /
account_for_loss_in_pipeline_split it sets as plain statements of its body (a conditional
setting, as 25.11's _llama3_common has, is not read; at 26.06.01 and 26.08 no library recipe sets
them).

From 26.06.01 the recipes are flat Python functions (src/megatron/bridge/perf_recipes/<family>/
<gpu>/*.py, one `<model>_pretrain_<n>gpu_<gpu>_<precision>_config()` each): perf_recipe_configs
reads their `cfg.model.X = literal` / `cfg.train.X = literal` statements in order, the
CommOverlapConfig they build, and the helpers they call (`_enable_..._full_iteration_mxfp8(cfg)`,
one level of the same statements; statements under `if` are not read), into the same fields.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import expr_value
from heldout_file import git as _git

# The commit of each container's performance-summary update (git log -- docs/performance-summary.md):
# the recipes on main when the table was published. 25.09 used YAML configs (YAML_CONTAINERS: TP overlap, CUDA graphs, CPU offload); 26.06.01 and
# later moved to src/megatron/bridge/perf_recipes (Python functions, not read).
CONTAINER_COMMIT = {
    "25.11": "5776a6d90",
    "26.02": "c0b9a0003",
    "26.02.01": "cfeddcd94",
    "26.04": "74695a06d",
    "26.04.01": "21d102f5e",
    "26.06": "8f341b04f",
    "26.06.01": "381d0b825",
    "26.08": "4ab94dfad",
}
PERF_RECIPES = "src/megatron/bridge/perf_recipes"  # where the recipes live from 26.06.01 on
DEFAULTS: dict[str, Any] = {  # scripts/performance/utils/utils.py WorkloadBaseConfig
    "num_gpus": None, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
    "context_parallel_size": 1, "virtual_pipeline_model_parallel_size": None,
    "expert_model_parallel_size": 1, "global_batch_size": 1, "micro_batch_size": 1,
    "use_megatron_fsdp": None, "cuda_graph_impl": None, "cuda_graph_scope": None,
    "cpu_offloading_num_layers": None, "recompute_num_layers": None, "recompute_modules": None,
    "moe_flex_dispatcher_backend": None, "moe_a2a_overlap": False,
    "cutedsl_fused_grouped_mlp": False, "fp8_dot_product_attention": None, "pp_layout": None,
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


# perf_recipes statement targets -> WorkloadBaseConfig fields (the same names where they exist)
_PERF_FIELDS = {
    ("model", "tensor_model_parallel_size"), ("model", "pipeline_model_parallel_size"),
    ("model", "context_parallel_size"), ("model", "virtual_pipeline_model_parallel_size"),
    ("model", "expert_model_parallel_size"), ("model", "cuda_graph_impl"), ("model", "cuda_graph_scope"),
    ("model", "moe_flex_dispatcher_backend"), ("model", "moe_token_dispatcher_type"), ("model", "recompute_modules"),
    ("model", "recompute_num_layers"), ("model", "cpu_offloading_num_layers"),
    ("model", "use_transformer_engine_op_fuser"), ("train", "global_batch_size"),
    ("train", "micro_batch_size"), ("ddp", "use_megatron_fsdp"),
    ("mixed_precision", "fp8_dot_product_attention"),
}  # fmt: skip
_PERF_MODEL = {"qwen3_30b_a3b": "QWEN3_30B_A3B", "qwen3_235b_a22b": "QWEN3_235B_A22B",
               "deepseek_v3": "DEEPSEEK_V3", "gpt_oss_120b": "GPT_OSS_120B", "kimi_k2": "KIMI_K2",
               "llama31_405b": "LLAMA31_405B", "llama3_70b": "LLAMA3_70B", "llama3_8b": "LLAMA3_8B"}  # fmt: skip
_PERF_PRECISION = {"bf16": "BF16", "fp8cs": "FP8_CS", "fp8mx": "FP8_MX", "nvfp4": "NVFP4"}
_PERF_DTYPE = {"bf16": "bf16", "fp8cs": "fp8_cs", "fp8mx": "fp8_mx", "nvfp4": "nvfp4"}
"""A perf recipe's name -> the compute dtype its `_perf_precision` call takes."""
_PERF_NAME = re.compile(r"^([a-z0-9_]+?)_pretrain_(\d+)gpu_([a-z0-9]+?)_(bf16|fp8cs|fp8mx|nvfp4)(_[a-z0-9_]+)?_config$")


def _target(node: ast.expr) -> tuple[str, str] | None:
    """`cfg.<section>.<attr>` -> (section, attr)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
        if isinstance(node.value.value, ast.Name):
            return node.value.attr, node.attr
    return None


def _apply(body: list[ast.stmt], out: dict[str, Any], funcs: dict[str, ast.FunctionDef], depth: int) -> None:
    """The statements of a recipe function (or of a helper it calls) into `out`, in order."""
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            tgt, val = st.targets[0], st.value
            t = _target(tgt)
            if t in _PERF_FIELDS:
                try:
                    out[t[1]] = ast.literal_eval(val)
                except ValueError:
                    pass  # a computed value: not transcribed
            elif t == ("comm_overlap", "overlap_moe_expert_parallel_comm"):
                out["moe_a2a_overlap"] = val.value is True if isinstance(val, ast.Constant) else False
            elif (isinstance(tgt, ast.Attribute) and tgt.attr == "comm_overlap" and isinstance(val, ast.Call)):
                kws = {kw.arg: kw.value for kw in val.keywords}
                flag = kws.get("overlap_moe_expert_parallel_comm")
                out["moe_a2a_overlap"] = isinstance(flag, ast.Constant) and flag.value is True
            elif isinstance(tgt, ast.Name) and isinstance(val, ast.Call):
                _start(val, out, funcs, depth)
            elif t == ("model", "pipeline_model_parallel_layout"):
                out["pp_layout"] = val.value if isinstance(val, ast.Constant) else None
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and depth < 3:
            name = getattr(st.value.func, "id", None)
            if name == DSV3_LAYOUT_SETTER:  # (cfg.model[, layout]): the layout given, else the map
                given = st.value.args[1:2] or [kw.value for kw in st.value.keywords if kw.arg == "layout"]
                out["pp_layout"] = given[0].value if given and isinstance(given[0], ast.Constant) else None
            elif name in funcs:
                _apply(funcs[name].body, out, funcs, depth + 1)


def _start(call: ast.Call, out: dict[str, Any], funcs: dict[str, ast.FunctionDef], depth: int) -> None:
    """`cfg = other_recipe()` or `cfg = _with_global_batch_size(other_recipe(), n)`: the other
    recipe's fields first (a model's base recipe outside perf_recipes: the defaults)."""
    name = getattr(call.func, "id", None)
    if name == "_with_global_batch_size" and len(call.args) == 2:
        if isinstance(call.args[0], ast.Call):
            _start(call.args[0], out, funcs, depth)
        out["global_batch_size"] = ast.literal_eval(call.args[1])
    elif name in funcs and _PERF_NAME.match(name) and depth < 3:
        _apply(funcs[name].body, out, funcs, depth + 1)


def perf_recipe_configs(git_dir: str, commit: str) -> dict[str, dict[str, Any]]:
    """Config name (the workload_base_configs naming, then the function) -> fields, for every
    `*_pretrain_*_config` function of the perf_recipes tree at `commit`."""
    funcs: dict[str, ast.FunctionDef] = {}
    where: dict[str, str] = {}
    for path in _git(git_dir, "ls-tree", "-r", "--name-only", commit, PERF_RECIPES).split():
        if path.endswith(".py"):
            for node in ast.parse(_git(git_dir, "show", f"{commit}:{path}")).body:
                if isinstance(node, ast.FunctionDef):
                    funcs.setdefault(node.name, node)
                    where.setdefault(node.name, path)
    out: dict[str, dict[str, Any]] = {}
    factories = factories_at(git_dir, commit)
    for name in sorted(funcs):
        m = _PERF_NAME.match(name)
        if not m or m.group(1) not in _PERF_MODEL:
            continue
        fields = dict(DEFAULTS)
        _apply(funcs[name].body, fields, funcs, 0)
        fields["_mixed_precision"] = mixed_precision_of(funcs[name], funcs, _PERF_DTYPE[m.group(4)], factories)
        fields["num_gpus"] = int(m.group(2))
        if fields.pop("use_transformer_engine_op_fuser", None):
            fields["cutedsl_fused_grouped_mlp"] = True  # the op fuser's fused grouped MLP
        key = f"{_PERF_MODEL[m.group(1)]}_PRETRAIN_CONFIG_{m.group(3).upper()}_{_PERF_PRECISION[m.group(4)]}_{name}"
        out[key] = {**fields, "_file": where[name]}
    return out


# --- pipeline layouts: Megatron's layout strings and the DeepSeek-V3 library's default map
DSV3_LAYOUT_SETTER = "set_deepseek_v3_pipeline_model_parallel_layout"
LAYOUT_LETTERS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}


def layout_chunks(layout: str | list) -> list[list[str]]:
    """A pipeline layout as layer names per model chunk, in model order: a list of lists of names
    as given, or a string read as megatron-core 0.19 PipelineParallelLayerLayout.parse_str_to_list
    reads it (commas cosmetic; `(..)*n`, then `x*n`, unrolled; `|` between stages; E embedding,
    t decoder, m MTP, L loss). An unknown letter raises ValueError."""
    if not isinstance(layout, str):
        return [[str(name).strip().lower() for name in stage] for stage in layout]
    text = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    chunks = []
    for stage in text.split("|"):
        unknown = set(stage) - set(LAYOUT_LETTERS)
        if unknown:
            raise ValueError(f"layout {layout!r}: unknown layer letter(s) {sorted(unknown)}")
        chunks.append([LAYOUT_LETTERS[c] for c in stage])
    return chunks


def pipeline_split(layout: str | list, pp: int, vp: int, num_layers: int) -> tuple[tuple[int, ...], int] | str:
    """(decoder layers per model chunk, MTP layers) a record states for `layout`, or why it cannot:
    pp x vp stages, the model's decoder layers, the embedding first and the loss last, and every
    MTP layer in the last stage (where the cost model prices them, pipeline.with_mtp)."""
    chunks = layout_chunks(layout)
    if len(chunks) != pp * vp:
        return f"layout {layout!r} has {len(chunks)} stages, pp x vp is {pp * vp}"
    decoders = tuple(c.count("decoder") for c in chunks)
    if sum(decoders) != num_layers:
        return f"layout {layout!r} holds {sum(decoders)} decoder layers, the model {num_layers}"
    if chunks[0][:1] != ["embedding"] or chunks[-1][-1:] != ["loss"]:
        return f"layout {layout!r} does not start with the embedding and end with the loss"
    mtp = sum(c.count("mtp") for c in chunks)
    if chunks[-1].count("mtp") != mtp:
        return f"layout {layout!r} puts MTP layers outside the last stage (priced on the last only)"
    return decoders, mtp


def deepseek_layout_map(git_dir: str, commit: str, mtp_layers: int = 1) -> dict[tuple[int, int], Any]:
    """(pp, vp) -> layout of the DeepSeek-V3 library's default map at `commit` (the `layout_map`
    of set_deepseek_v3_pipeline_model_parallel_layout or _get_deepseek_v3_pipeline_layout in
    src/megatron/bridge/recipes/deepseek/**/deepseek_v3.py), its `last_layer` being
    `["mtp"] * mtp_layers + ["loss"]` as there (the recipes' mtp_num_layers: 1)."""
    env = {"last_layer": ["mtp"] * mtp_layers + ["loss"]}
    for path in _git(git_dir, "ls-tree", "-r", "--name-only", commit, f"{RECIPES_DIR}/deepseek").split():
        if not path.endswith("deepseek_v3.py"):
            continue
        for node in ast.walk(ast.parse(_git(git_dir, "show", f"{commit}:{path}"))):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and getattr(node.targets[0], "id", None) == "layout_map"
                    and isinstance(node.value, ast.Dict)):  # fmt: skip
                return {
                    tuple(ast.literal_eval(k)): expr_value(v, env)
                    for k, v in zip(node.value.keys, node.value.values, strict=True)
                }
    return {}


def load(git_dir: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Container -> config name -> fields, from each container's commit."""
    out: dict[str, Any] = {}
    tp_funcs: dict[str, Any] = {}
    applies: dict[str, bool] = {}
    mixed: dict[str, Any] = {}
    for container, commit in CONTAINER_COMMIT.items():
        names = _git(git_dir, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs").split()
        configs: dict[str, dict[str, Any]] = {}
        for path in names:
            if path.endswith("_workload_base_configs.py"):
                text = _git(git_dir, "show", f"{commit}:{path}")
                configs.update({k: {**v, "_file": path} for k, v in _configs_of(text).items()})
        if configs:
            tp_funcs[container] = tp_overlap_functions(git_dir, commit)
            applies[container] = base_config_applies_backend(git_dir, commit)
            funcs, factories = performance_functions(git_dir, commit)
            mixed[container] = {"recipes": tp_funcs[container][0], "funcs": funcs, "factories": factories}
        else:  # perf_recipes (26.06.01+): no held-out row of these containers has TP > 1; not read
            configs = perf_recipe_configs(git_dir, commit)
            mixed[container] = {"_perf": {k: v.pop("_mixed_precision") for k, v in configs.items()}}
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
    out["_yaml"] = {c: yaml_recipes(git_dir, commit) for c, commit in YAML_CONTAINERS.items()}  # nor this
    out["_dsv3_layouts"] = {c: deepseek_layout_map(git_dir, commit) for c, commit in CONTAINER_COMMIT.items()}
    out["_tp_overlap"] = tp_funcs  # not a container name: the recipe functions read for tp_comm_overlap
    out["_mixed_precision"] = mixed  # nor this: what the mixed-precision settings are read from (precision_settings_for)
    out["_applies_backend"] = applies  # nor this: whether set_workload_base_configs applies the flex back-end
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
    when none or several disagreeing ones match. The mixed-precision settings (precision_settings_for)
    are added either way: the recipe functions of the row's model and GPU set them for every layout."""
    settings, layout, note = _layout_settings_for(recipes, container, model, gpu_system, precision, row)
    mixed, mixed_note = precision_settings_for(recipes, container, model, gpu_system, precision, row["precision"])
    return {**settings, **mixed}, layout, f"{note}; {mixed_note}" if mixed_note else note


def _layout_settings_for(recipes, container, model, gpu_system, precision, row):
    if container in YAML_CONTAINERS:
        settings, note = yaml_settings(recipes, container, model, gpu_system, row)
        return settings, {}, note
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
    settings, said = dict(first[0]), first[2]
    if settings.get("moe_dispatcher") == "deepep":
        kind, kind_note = dispatcher_type_for(recipes, container, model, gpu_system)
        if kind == "alltoall":
            del settings["moe_dispatcher"]
            settings.pop("moe_flex_backend", None)
        if kind_note:
            said += f", {kind_note}"
    if PRECISION[precision] == "FP8_CS":  # the recipe ran bf16_with_fp8_current_scaling_mixed (utils/precision.py)
        settings["fp8_recipe"] = "tensorwise"
        said += ", compute dtype fp8_cs: fp8 current (per-tensor) scaling"
    overlap, overlap_note = tp_overlap_for(recipes.get("_tp_overlap", {}), container, model, gpu_system, precision, row["tp"])
    if overlap is not None:
        settings["tp_comm_overlap"] = overlap
    if overlap_note:
        said += f", {overlap_note}"
    if overlap:
        config, config_note = tp_overlap_cfg_for(recipes["_tp_overlap"], container, model, gpu_system, precision)
        if config is not None:
            settings["tp_overlap"] = config
        said += f", {config_note}"
    return settings, first[1], f"recipe {name} ({hits[name]['_file']} @{CONTAINER_COMMIT[container]}): {said}"


def _map(cfg: dict[str, Any]):
    settings: dict[str, Any] = {}
    layout: dict[str, Any] = {}
    said = []
    impl, scope = cfg["cuda_graph_impl"], cfg["cuda_graph_scope"]
    if impl:
        said.append(f"cuda_graph_impl={impl} scope={scope}")
        if impl == "full_iteration" or not scope or "attn" in (scope if isinstance(scope, list) else [scope]):
            settings["cuda_graphs"] = True
        if impl == "full_iteration":
            settings["full_iteration_cuda_graph"] = True
    if cfg["moe_flex_dispatcher_backend"] and cfg.get("moe_token_dispatcher_type") == "alltoall":
        said.append(f"flex back-end {cfg['moe_flex_dispatcher_backend']} named, but the recipe sets "
                    "moe_token_dispatcher_type = 'alltoall': the all-to-all dispatcher runs")
    elif cfg["moe_flex_dispatcher_backend"]:
        said.append(f"flex dispatcher {cfg['moe_flex_dispatcher_backend']}")
        settings["moe_dispatcher"] = "deepep"
        if cfg["moe_flex_dispatcher_backend"] == "hybridep":
            settings["moe_flex_backend"] = "hybridep"
    if cfg["moe_a2a_overlap"]:
        said.append("moe_a2a_overlap")
        settings["ep_overlap"] = True
    if cfg["cutedsl_fused_grouped_mlp"]:
        said.append("TE op-fuser fused grouped MLP (not an input)")
    if cfg["fp8_dot_product_attention"]:
        said.append("fp8 dot-product attention (not an input)")
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
    # The matched recipe's own pipeline layout (None: the model library's default for the
    # row's pp x vp); its presence says a recipe matched (make_mbridge_summary.pipeline_of).
    layout["_pp_layout"] = cfg.get("pp_layout")
    if cfg.get("pp_layout"):
        said.append(f"pp_layout {cfg['pp_layout']!r}")
    split = cfg.get("_split", {})
    on = [flag for flag in SPLIT_FLAGS if split.get(flag)]
    if on:
        said.append(f"{split['function']} sets {' and '.join(on)}")
        layout.update({flag: True for flag in on})
    return settings, layout, ", ".join(said) or "no overrides beyond the layout"


# --- TP communication overlap, from the recipe functions (scripts/performance/configs/<family>/*_llm_pretrain.py,
# `<model>_pretrain_config_<gpu>(precision, ...)`) and the library recipe they start from
# (src/megatron/bridge/recipes/**: `<model>_pretrain_config()`, its CommOverlapConfig(tp_comm_overlap=...)).
_LLM_PRETRAIN = re.compile(r"^scripts/performance/configs/[^/]+/[a-z0-9_]+_llm_pretrain\.py$")
_FUNC = re.compile(r"^([a-z0-9_]+?)_pretrain_config_([a-z0-9]+)$")
_FUNC_MODEL = {"llama3_8b": "LLAMA3_8B", "llama3_70b": "LLAMA3_70B", "llama31_405b": "LLAMA31_405B",
               "deepseek_v3": "DEEPSEEK_V3", "gpt_oss_120b": "GPT_OSS_120B", "qwen3_30b_a3b": "QWEN3_30B_A3B",
               "qwen3_235b_a22b": "QWEN3_235B_A22B", "kimi_k2": "KIMI_K2"}  # fmt: skip


class Unread(Exception):
    """A statement about tp_comm_overlap the reader does not evaluate: nothing is transcribed."""


def _mentions_tp_overlap(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "tp_comm_overlap")
        or (isinstance(n, ast.keyword) and n.arg == "tp_comm_overlap")
        for n in ast.walk(node)
    )


def _tp_expr(expr: ast.expr, state: bool | None, dtype: str, tp: int) -> bool:
    """Value of an expression assigned to tp_comm_overlap for this row (compute dtype, TP)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.Attribute) and expr.attr == "tp_comm_overlap":  # the current value
        if state is None:
            raise Unread("reads tp_comm_overlap before it is known")
        return state
    if (isinstance(expr, ast.Call) and getattr(expr.func, "id", None) == "bool" and len(expr.args) == 1
            and isinstance(cmp := expr.args[0], ast.Compare) and len(cmp.ops) == 1
            and isinstance(cmp.ops[0], ast.Gt) and getattr(cmp.left, "attr", None) == "tensor_model_parallel_size"
            and isinstance(cmp.comparators[0], ast.Constant)):  # fmt: skip
        return tp > cmp.comparators[0].value  # bool(cfg.model.tensor_model_parallel_size > 1)
    if isinstance(expr, ast.IfExp) and isinstance(test := expr.test, ast.Compare) and len(test.ops) == 1:
        if getattr(test.left, "id", None) == "precision" and isinstance(test.comparators[0], ast.Constant):
            same = dtype == test.comparators[0].value
            if isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
                taken = same if isinstance(test.ops[0], ast.Eq) else not same
                return _tp_expr(expr.body if taken else expr.orelse, state, dtype, tp)
    raise Unread(f"tp_comm_overlap = {ast.unparse(expr)}")


def _comm_overlap_kw(call: ast.Call) -> ast.expr | None:
    if getattr(call.func, "id", None) != "CommOverlapConfig":
        return None
    return next((kw.value for kw in call.keywords if kw.arg == "tp_comm_overlap"), ast.Constant(False))


def _library_default(fn: ast.FunctionDef, dtype: str, tp: int) -> bool:
    """The library recipe's CommOverlapConfig(tp_comm_overlap=...) (all of them in its body must agree)."""
    values = {
        _tp_expr(kw, None, dtype, tp)
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and (kw := _comm_overlap_kw(n)) is not None
    }
    if len(values) != 1:
        raise Unread(f"library recipe {fn.name} sets tp_comm_overlap {sorted(values) or 'nowhere'}")
    return values.pop()


def _tp_overlap_of(fn: ast.FunctionDef, library: dict[str, ast.FunctionDef], dtype: str, tp: int) -> bool:
    """Walk a recipe function's top-level statements in order; an `if` that touches the setting: Unread."""
    state: bool | None = None
    base: str | None = None  # the library recipe `cfg` starts from, read only if nothing replaces its CommOverlapConfig

    def current() -> bool | None:
        if base is None:
            return state
        if base not in library:
            raise Unread(f"library recipe {base} not found")
        return _library_default(library[base], dtype, tp)

    for st in fn.body:
        if not isinstance(st, ast.Assign) or len(st.targets) != 1:
            if _mentions_tp_overlap(st):
                raise Unread(f"line {st.lineno}: {type(st).__name__} sets tp_comm_overlap")
            continue
        tgt, val = st.targets[0], st.value
        if isinstance(tgt, ast.Name) and isinstance(val, ast.Call) and getattr(val.func, "id", "").endswith("_pretrain_config"):
            state, base = None, val.func.id
        elif isinstance(tgt, ast.Attribute) and tgt.attr == "comm_overlap" and isinstance(val, ast.Call):
            kw = _comm_overlap_kw(val)
            if kw is None:
                raise Unread(f"cfg.comm_overlap = {ast.unparse(val)}")
            state, base = _tp_expr(kw, None, dtype, tp), None
        elif isinstance(tgt, ast.Attribute) and tgt.attr == "tp_comm_overlap":
            state, base = _tp_expr(val, current(), dtype, tp), None
    if current() is None:
        raise Unread("no CommOverlapConfig reached")
    return current()


def tp_overlap_functions(git_dir: str, commit: str):
    """(recipe functions by (model prefix, GPU), library recipe functions by name, their files) at `commit`."""
    names = _git(git_dir, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs", "src/megatron/bridge/recipes").split()
    funcs: dict[tuple[str, str], tuple[ast.FunctionDef, str]] = {}
    library: dict[str, ast.FunctionDef] = {}
    for path in names:
        is_perf, is_lib = bool(_LLM_PRETRAIN.match(path)), path.startswith("src/megatron/bridge/recipes/")
        if not (path.endswith(".py") and (is_perf or is_lib)):
            continue
        text = _git(git_dir, "show", f"{commit}:{path}")
        if is_lib and "_pretrain_config(" not in text:
            continue
        for node in ast.parse(text).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            if is_lib and node.name.endswith("_pretrain_config"):
                library.setdefault(node.name, node)
            elif is_perf and (m := _FUNC.match(node.name)) and m.group(1) in _FUNC_MODEL:
                funcs.setdefault((_FUNC_MODEL[m.group(1)], m.group(2).upper()), (node, path))
    return funcs, library


def tp_overlap_for(tp_funcs, container, model, gpu_system, precision, tp):
    """(tp_comm_overlap or None, note) for a row whose recipe matched: the recipe function for
    its model and GPU, called with the row's compute dtype, at the container's commit."""
    if container not in tp_funcs or tp <= 1:
        return None, None
    funcs, library = tp_funcs[container]
    gpu = gpu_system.split("-")[1]
    hit = funcs.get((PREFIX[model], gpu))
    if hit is None:
        return None, f"tp_comm_overlap not read (no {PREFIX[model].lower()} recipe function for {gpu})"
    fn, path = hit
    try:
        value = _tp_overlap_of(fn, library, PRECISION[precision].lower(), tp)
    except Unread as err:
        return None, f"tp_comm_overlap not read ({fn.name}: {err})"
    return value, f"tp_comm_overlap={value} ({fn.name}, {path}, compute dtype {PRECISION[precision].lower()})"


# --- The mixed-precision settings that run: Megatron-Bridge's MixedPrecisionConfig, whose setup() copies every field it
# shares onto the model, optimizer and DDP configs (src/megatron/bridge/training/mixed_precision.py
# update_config_with_precision_overrides), so the mixed-precision value is the one that runs.
# - grad_reduce_in_fp32 False keeps Megatron-Core's gradient buffer in the parameters' bf16 and reduces it in bf16
#   (the cost model's `main_grads: bf16`, as the MLPerf converter reads NeMo's pretrain.py);
# - fp8_param_gather (fp8 / mxfp8) and fp4_param_gather (nvfp4) keep the primary weights quantized and gather them so
#   (the cost model's `fp8_params`).
MP_FIELDS = ("grad_reduce_in_fp32", "fp8_param_gather", "fp4_param_gather")
_MP_ALIASES = {"fp8_param": "fp8_param_gather", "fp4_param": "fp4_param_gather"}
"""MixedPrecisionConfig keeps fp8_param and fp8_param_gather in sync (its __setattr__), fp4 likewise."""


def _mp_field(node: ast.expr) -> str | None:
    name = getattr(node, "attr", None)
    name = _MP_ALIASES.get(name, name)
    return name if name in MP_FIELDS else None


def _const(node: ast.expr) -> bool | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, bool) else None


def precision_factories(source: str) -> dict[str, dict[str, bool]]:
    """Mixed-precision factory (mixed_precision.py: `bf16_mixed`, `bf16_with_fp8_current_scaling_mixed`, ...)
    -> the MP_FIELDS it leaves, from MixedPrecisionConfig's field defaults, its `MixedPrecisionConfig(...)`
    keywords, `cfg = other_factory()` and plain `cfg.<field> = True|False` statements in order."""
    tree = ast.parse(source)
    defaults: dict[str, bool] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "MixedPrecisionConfig":
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    f = _MP_ALIASES.get(st.target.id, st.target.id)
                    if f in MP_FIELDS and _const(st.value) is not None:
                        defaults.setdefault(f, _const(st.value))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out: dict[str, dict[str, bool]] = {}

    def config_call(call: ast.Call) -> dict[str, bool] | None:
        """`MixedPrecisionConfig(...)`: the defaults and its constant keywords; None for another call."""
        if getattr(call.func, "id", None) != "MixedPrecisionConfig":
            return None
        got = dict(defaults)
        for kw in call.keywords:
            if (f := _MP_ALIASES.get(kw.arg, kw.arg)) in MP_FIELDS and _const(kw.value) is not None:
                got[f] = _const(kw.value)
        return got

    def fields_of(name: str, depth: int = 0) -> dict[str, bool] | None:
        if name in out:
            return out[name]
        fn = funcs.get(name)
        if fn is None or depth > 5:
            return None
        got: dict[str, bool] | None = None
        for st in fn.body:
            call = st.value if isinstance(st, (ast.Assign, ast.Return)) and isinstance(st.value, ast.Call) else None
            if call is not None and (made := config_call(call)) is not None:
                got = made  # `cfg = MixedPrecisionConfig(...)` / `return MixedPrecisionConfig(...)`
            elif isinstance(st, ast.Assign) and call is not None and getattr(call.func, "id", None) in funcs:
                inner = fields_of(call.func.id, depth + 1)  # `cfg = bf16_mixed()`
                got = dict(inner) if inner is not None else got
            elif (isinstance(st, ast.Assign) and len(st.targets) == 1 and (f := _mp_field(st.targets[0]))
                  and got is not None and _const(st.value) is not None):  # fmt: skip
                got[f] = _const(st.value)
        if got is not None:
            out[name] = got
        return got

    for name in funcs:
        fields_of(name)
    return out


def _dtype_branch(st: ast.If, values: dict[str, str | None]) -> list[ast.stmt] | None:
    """The statements an `if compute_dtype == "x": ... elif ...: ... else: ...` chain runs for the
    arguments `values` (name -> value: a precision helper's compute_dtype / fp8_recipe, a recipe
    function's precision); None if a test is not `<argument> == / != "constant"` for a known one."""
    while True:
        t = st.test
        if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.NotEq))
                and isinstance(t.comparators[0], ast.Constant)
                and values.get(getattr(t.left, "id", None)) is not None):  # fmt: skip
            return None
        if (t.comparators[0].value == values[t.left.id]) == isinstance(t.ops[0], ast.Eq):
            return st.body
        if len(st.orelse) == 1 and isinstance(st.orelse[0], ast.If):
            st = st.orelse[0]
            continue
        return st.orelse


def helper_precision(fn: ast.FunctionDef, values: dict[str, str | None],
                     factories: dict[str, dict[str, bool]]) -> dict[str, bool]:  # fmt: skip
    """A precision helper (`get_precision_config(compute_dtype)` of scripts/performance/utils/precision.py,
    25.09's `get_precision_config(compute_dtype, fp8_recipe)` of utils/helpers.py, `_perf_precision(compute_dtype)`
    of perf_recipes/_common.py): the MP_FIELDS of the config it returns for the arguments `values` (name ->
    value): the factory its branches call, the branch's and the body's plain `<local>.<field> = True|False`."""
    fields: dict[str, bool] = {}

    def run(body: list[ast.stmt]) -> None:
        nonlocal fields
        for st in body:
            if isinstance(st, ast.If):
                branch = _dtype_branch(st, values)
                if branch is not None:
                    run(branch)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                tgt, val = st.targets[0], st.value
                if isinstance(tgt, ast.Name) and isinstance(val, ast.Call) and getattr(val.func, "id", None) in factories:
                    fields = dict(factories[val.func.id])
                elif (f := _mp_field(tgt)) and _const(val) is not None:
                    fields[f] = _const(val)
            elif (isinstance(st, ast.Return) and isinstance(st.value, ast.Call)
                  and getattr(st.value.func, "id", None) in factories):  # fmt: skip
                fields = dict(factories[st.value.func.id])

    run(fn.body)
    return fields


_PRECISION_HELPERS = ("get_precision_config", "_perf_precision")


def _helper_call(val: ast.expr, funcs: dict[str, ast.FunctionDef], dtype: str | None, factories) -> dict[str, bool] | None:
    """`get_precision_config(precision)` / `_perf_precision("fp8_mx")`: the fields it returns (the row's dtype
    for a non-literal argument), None for any other expression."""
    if not (isinstance(val, ast.Call) and (name := getattr(val.func, "id", None)) in _PRECISION_HELPERS and name in funcs):
        return None
    arg = val.args[0] if val.args else None
    literal = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    params = funcs[name].args.args
    return helper_precision(funcs[name], {params[0].arg: literal or dtype} if params else {}, factories)


def mixed_precision_of(fn: ast.FunctionDef, funcs: dict[str, ast.FunctionDef], dtype: str | None = None,
                       factories: dict[str, dict[str, bool]] | None = None):
    """(the MP_FIELDS of cfg.mixed_precision after a recipe function's statements, the functions that set each).

    In order: `cfg.mixed_precision = <helper call>` or `= <local bound to one>` takes the helper's fields for the
    row's compute dtype (`dtype`, the recipe function's `precision` argument; a literal argument wins), any other
    `cfg.mixed_precision = ...` forgets them; `<local>.<field> = True|False` on such a local and
    `cfg.mixed_precision.<field> = True|False` set one; a helper in `funcs` called as a statement, or `cfg =
    other_recipe()` / `cfg = _with_global_batch_size(other_recipe(), n)` of a perf recipe, is followed, three
    levels at most. A statement under `if` / `for` / `with` that would change a known value, or set an unknown
    one, makes that field unknown (None: not transcribed)."""
    factories = factories or {}
    state: dict[str, bool | None] = {}
    said: dict[str, list[str]] = {f: [] for f in MP_FIELDS}
    locals_: dict[str, dict[str, bool]] = {}
    sources: dict[str, str] = {}  # local -> the precision helper that built it

    def adopt(fields: dict[str, bool] | None, source: str) -> None:
        """A new MixedPrecisionConfig for cfg.mixed_precision: its fields, set by `source`."""
        nonlocal state
        state = dict(fields or {})
        for f in MP_FIELDS:
            said[f] = [source] if f in state else []

    def walk(body: list[ast.stmt], here: str, depth: int) -> None:
        nonlocal state
        for st in body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                tgt, val = st.targets[0], st.value
                if isinstance(tgt, ast.Name) and (got := _helper_call(val, funcs, dtype, factories)) is not None:
                    locals_[tgt.id] = dict(got)
                    sources[tgt.id] = val.func.id
                elif isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id in locals_:
                    if (f := _mp_field(tgt)) and _const(val) is not None:
                        locals_[tgt.value.id][f] = _const(val)
                elif isinstance(tgt, ast.Attribute) and tgt.attr == "mixed_precision":
                    got = _helper_call(val, funcs, dtype, factories)
                    source = getattr(getattr(val, "func", None), "id", None)
                    if got is None and isinstance(val, ast.Name):
                        got, source = locals_.get(val.id), sources.get(val.id)
                    adopt(got, source or here)
                elif (f := _mp_field(tgt)) and getattr(tgt.value, "attr", None) == "mixed_precision":
                    if _const(val) is None:
                        state[f] = None
                    else:
                        state[f] = _const(val)
                        said[f] = [here]  # the last plain setter is the one that holds
                elif isinstance(tgt, ast.Name) and isinstance(val, ast.Call):
                    if getattr(val.func, "id", None) == "_with_global_batch_size" and val.args and isinstance(val.args[0], ast.Call):
                        val = val.args[0]  # `cfg = _with_global_batch_size(other_recipe(), n)`, as _start reads it
                    name = getattr(val.func, "id", None)
                    passed = next((kw.value for kw in val.keywords if kw.arg == "precision_config"), None)
                    if name in funcs and depth < 3 and _PERF_NAME.match(name):
                        state = {}
                        walk(funcs[name].body, name, depth + 1)
                    elif isinstance(passed, ast.Name) and passed.id in locals_:
                        # `cfg = <model>_pretrain_config(..., precision_config=pc)`: the library recipe builds
                        # ConfigContainer(mixed_precision=precision_config) (recipes/*/*.py, 25.11)
                        adopt(locals_[passed.id], sources.get(passed.id, here))
            elif isinstance(st, ast.If) and (branch := _dtype_branch(st, {"precision": dtype})) is not None:
                walk(branch, here, depth)  # `if precision == "bf16": ... else: ...` of the row's dtype
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and depth < 3:
                name = getattr(st.value.func, "id", None)
                if name in funcs and name not in _PRECISION_HELPERS:
                    walk(funcs[name].body, name, depth + 1)
            elif not isinstance(st, ast.Assign):
                for n in ast.walk(st):
                    if (isinstance(n, ast.Assign) and len(n.targets) == 1 and (f := _mp_field(n.targets[0]))
                            and getattr(n.targets[0].value, "attr", None) == "mixed_precision"
                            and _const(n.value) != state.get(f)):  # fmt: skip
                        state[f] = None  # a conditional change: unknown

    walk(fn.body, fn.name, 0)
    return state, said


MIXED_PRECISION = "src/megatron/bridge/training/mixed_precision.py"


def factories_at(git_dir: str, commit: str) -> dict[str, dict[str, bool]]:
    """precision_factories of the library's mixed_precision.py at `commit` ({} where it is missing)."""
    try:
        return precision_factories(_git(git_dir, "show", f"{commit}:{MIXED_PRECISION}"))
    except subprocess.CalledProcessError:
        return {}


def performance_functions(git_dir: str, commit: str):
    """(every module-level function of the performance scripts by name, the library's
    mixed-precision factories) at `commit`: the helpers a recipe function calls
    (set_<family>_common_configs, scripts/performance/utils/precision.py get_precision_config).
    The recipe functions themselves are tp_overlap_functions'."""
    funcs: dict[str, ast.FunctionDef] = {}
    for path in _git(git_dir, "ls-tree", "-r", "--name-only", commit, "scripts/performance").split():
        if path.endswith(".py"):
            for node in ast.parse(_git(git_dir, "show", f"{commit}:{path}")).body:
                if isinstance(node, ast.FunctionDef):
                    funcs.setdefault(node.name, node)
    return funcs, factories_at(git_dir, commit)


def _settings_of(state: dict[str, bool | None], said: dict[str, list[str]], precision: str, where: str):
    """(settings, notes) from a recipe's mixed-precision fields for a row of `precision` (the page's:
    FP8 / FP8-CS / MXFP8 / NVFP4 / BF16)."""
    settings: dict[str, Any] = {}
    notes = []
    grad = state.get("grad_reduce_in_fp32")
    if grad is None:
        notes.append(f"grad_reduce_in_fp32 not read ({where}{': conditional' if 'grad_reduce_in_fp32' in state else ''})")
    else:
        settings["main_grads"] = "fp32" if grad else "bf16"
        by = " / ".join(dict.fromkeys(said["grad_reduce_in_fp32"])) or "the factory's default"
        notes.append(f"grad_reduce_in_fp32={grad} ({where}, set by {by}): main_grads {settings['main_grads']}")
    field = "fp4_param_gather" if PRECISION.get(precision) == "NVFP4" else "fp8_param_gather"
    if PRECISION.get(precision, "BF16") != "BF16":
        value = state.get(field)
        if value is None and field in state:
            notes.append(f"{field} not read ({where}: conditional)")
        elif field not in state:
            notes.append(f"{field} not set (no such MixedPrecisionConfig field, or a config the reader does not "
                         "follow): bf16 primary weights")
        elif value is not None:
            by = " / ".join(dict.fromkeys(said[field])) or "the factory's default"
            if value:
                settings["fp8_params"] = True
            notes.append(f"{field}={value} ({by}){': fp8_params' if value else ''}")
    return settings, notes


def precision_settings_for(recipes, container, model, gpu_system, precision, row_precision=None):
    """(settings, note) of a row: the mixed-precision fields (MP_FIELDS) the recipe function of its
    model, GPU and compute dtype (the page's `precision` cell; 25.09 has none: the record's
    `row_precision`) leaves at the container's commit (they do not depend on the layout:
    the family's common-config helper and the precision helper set them for every variant), as
    `main_grads` and `fp8_params`."""
    if model not in PREFIX:
        return {}, None
    if container in YAML_CONTAINERS:  # 25.09: the model's YAML ConfigContainer.mixed_precision section
        got = recipes.get("_yaml", {}).get(container) or {}
        key = _YAML_MODEL.get(PREFIX[model])
        if key not in got.get("grad_reduce", {}):
            return {}, None
        value, path = got["grad_reduce"][key]
        settings = {"main_grads": "fp32" if value else "bf16"}
        note = (f"grad_reduce_in_fp32={value} ({path} @{got['commit']} ConfigContainer.mixed_precision): "
                f"main_grads {settings['main_grads']}")  # fmt: skip
        # run_script.py: get_precision_config(compute_dtype, fp8_recipe) of utils/helpers.py; the page names no
        # fp8 recipe, so every recipe the row's perf-matrix keys allow must agree (fp8: ds and cs)
        if row_precision not in _YAML_PRECISION or row_precision == "bf16" or "precision_helper" not in got:
            return settings, note
        gathers = {
            helper_precision(got["precision_helper"], {"compute_dtype": k.split("_")[0], "fp8_recipe": k.split("_")[1]},
                             got["factories"]).get("fp8_param_gather")
            for k in _YAML_PRECISION[row_precision]
        }  # fmt: skip
        if len(gathers) == 1 and (gather := gathers.pop()) is not None:
            if gather:
                settings["fp8_params"] = True
            note += (f"; fp8_param_gather={gather} (get_precision_config of scripts/performance/utils/helpers.py, "
                     f"recipes {' / '.join(_YAML_PRECISION[row_precision])} alike){': fp8_params' if gather else ''}")
        else:
            note += "; fp8_param_gather not read (the fp8 recipes the row may have run differ)"
        return settings, note
    got = recipes.get("_mixed_precision", {}).get(container)
    if got is None or precision not in PRECISION:
        return {}, None
    dtype = PRECISION[precision].lower()
    gpu = gpu_system.split("-")[1]
    if "_perf" in got:  # 26.06.01+: the flat perf recipe functions (perf_recipe_configs)
        stem = f"{PREFIX[model]}_PRETRAIN_CONFIG_{gpu}_{PRECISION[precision]}_"
        hits = {k: v for k, v in got["_perf"].items() if k.startswith(stem)}
        if not hits:
            return {}, f"mixed precision not read (no {PREFIX[model].lower()} {dtype} perf recipe for {gpu})"
        results = [_settings_of(*v, precision, "")[0] for v in hits.values()]
        settings = {}
        differ = []
        for key in ("main_grads", "fp8_params"):
            values = {r.get(key) for r in results}
            if len(values) == 1:
                if (value := values.pop()) is not None:
                    settings[key] = value
            else:
                differ.append(key)
        where = f"the {len(hits)} {gpu} {dtype} perf recipes of the model"
        said = ", ".join(f"{k} {v}" for k, v in settings.items()) or "nothing"
        return settings, f"{where} ({', '.join(sorted(hits))}): {said}" + (
            f"; {' and '.join(differ)} differ between them: not transcribed" if differ else "")
    funcs_by_model, funcs, factories = got["recipes"], got["funcs"], got["factories"]
    hit = funcs_by_model.get((PREFIX[model], gpu))
    if hit is None:
        return {}, f"mixed precision not read (no {PREFIX[model].lower()} recipe function for {gpu})"
    fn, path = hit
    state, said = mixed_precision_of(fn, funcs, dtype, factories)
    settings, notes = _settings_of(state, said, precision, f"{fn.name}({dtype!r}), {path}")
    return settings, "; ".join(notes)


# --- Which userbuffers configuration the TP overlap runs (cost_models/tp_overlap.py CONFIGS): the recipe function's
# `cfg.comm_overlap.tp_comm_overlap_cfg = X` / CommOverlapConfig(tp_comm_overlap_cfg=X), X a userbuffers_* name or a
# local bound by `if precision == "bf16": name = A else: name = B`; else the library recipe's CommOverlapConfig. None
# (no config) is Transformer Engine's per-GEMM defaults (Megatron-Bridge training/initialize.py: ub_cfgs = {}).
TE_DEFAULT = "te_default"


def _mentions_cfg(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "tp_comm_overlap_cfg")
        or (isinstance(n, ast.keyword) and n.arg == "tp_comm_overlap_cfg")
        for n in ast.walk(node)
    )


def _cfg_name(expr: ast.expr | None, names: dict[str, str]) -> str:
    if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
        return TE_DEFAULT
    if isinstance(expr, ast.Name):
        if expr.id in names:
            return names[expr.id]
        if expr.id.startswith("userbuffers_"):
            return expr.id
    raise Unread(f"tp_comm_overlap_cfg = {ast.unparse(expr)}")


def _cfg_kw(call: ast.Call, names: dict[str, str]) -> str:
    return _cfg_name(next((kw.value for kw in call.keywords if kw.arg == "tp_comm_overlap_cfg"), None), names)


def _precision_branch(st: ast.If, dtype: str) -> list[ast.stmt]:
    """The branch of `if precision == "x": ... else: ...` taken for this compute dtype."""
    test = st.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and getattr(test.left, "id", None) == "precision"
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) and isinstance(test.comparators[0], ast.Constant)):  # fmt: skip
        raise Unread(f"line {st.lineno}: if {ast.unparse(test)}")
    same = dtype == test.comparators[0].value
    return st.body if same == isinstance(test.ops[0], ast.Eq) else st.orelse


def _bind(st: ast.stmt, names: dict[str, str]) -> bool:
    """`name = userbuffers_x` (or a name bound so): record it; whether the statement was one."""
    if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Name) and (st.value.id.startswith("userbuffers_") or st.value.id in names)):  # fmt: skip
        names[st.targets[0].id] = names.get(st.value.id, st.value.id)
        return True
    return False


def _tp_cfg_of(fn: ast.FunctionDef, library: dict[str, ast.FunctionDef], dtype: str) -> str:
    """Walk a recipe function's top-level statements in order (module docstring of this section)."""
    names: dict[str, str] = {}
    state: str | None = None
    base: str | None = None
    for st in fn.body:
        if isinstance(st, ast.If) and not _mentions_cfg(st):
            for inner in _precision_branch(st, dtype) if _mentions_binding(st) else ():
                if not _bind(inner, names) and _mentions_binding(inner):
                    raise Unread(f"line {inner.lineno}: {ast.unparse(inner)}")
            continue
        if _bind(st, names):
            continue
        tgt = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
        val = st.value if tgt is not None else None
        if isinstance(tgt, ast.Name) and isinstance(val, ast.Call) and getattr(val.func, "id", "").endswith("_pretrain_config"):
            state, base = None, val.func.id
        elif isinstance(tgt, ast.Attribute) and tgt.attr == "comm_overlap" and isinstance(val, ast.Call):
            if getattr(val.func, "id", None) != "CommOverlapConfig":
                raise Unread(f"cfg.comm_overlap = {ast.unparse(val)}")
            state, base = _cfg_kw(val, names), None
        elif isinstance(tgt, ast.Attribute) and tgt.attr == "tp_comm_overlap_cfg":
            state, base = _cfg_name(val, names), None
        elif _mentions_cfg(st):
            raise Unread(f"line {st.lineno}: {type(st).__name__} sets tp_comm_overlap_cfg")
    if state is not None:
        return state
    if base is None or base not in library:
        raise Unread("no CommOverlapConfig reached")
    found = {_cfg_kw(n, {}) for n in ast.walk(library[base])
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "CommOverlapConfig"}  # fmt: skip
    if len(found) != 1:
        raise Unread(f"library recipe {base} sets tp_comm_overlap_cfg {sorted(found) or 'nowhere'}")
    return found.pop()


def _mentions_binding(st: ast.stmt) -> bool:
    """Whether a statement names a userbuffers_* config (the only `if` this reader takes)."""
    return any(isinstance(n, ast.Name) and n.id.startswith("userbuffers_") for n in ast.walk(st))


def tp_overlap_cfg_for(tp_funcs, container, model, gpu_system, precision):
    """(tp_overlap setting or None, note) for a row whose recipe turns TP overlap on: the recipe function's
    userbuffers configuration for its compute dtype, when cost_models.tp_overlap transcribes it."""
    from cost_models.tp_overlap import CONFIGS

    funcs, library = tp_funcs[container]
    fn, path = funcs[(PREFIX[model], gpu_system.split("-")[1])]
    try:
        name = _tp_cfg_of(fn, library, PRECISION[precision].lower())
    except Unread as err:
        return None, f"tp_comm_overlap_cfg not read ({fn.name}: {err})"
    if name not in CONFIGS:
        return None, f"tp_comm_overlap_cfg {name} not transcribed (cost_models/tp_overlap.py)"
    return name, f"tp_comm_overlap_cfg {name}"


# --- Which token dispatcher runs. Megatron-Core takes the flex back-end (moe_flex_dispatcher_backend, whose default
# is "deepep": megatron/core/transformer/transformer_config.py) only under moe_token_dispatcher_type == "flex"
# (transformer/moe/moe_layer.py builds MoEFlexTokenDispatcher for "flex", MoEAlltoAllTokenDispatcher for "alltoall";
# models/gpt/fine_grained_callables.py: enable_deepep = dispatcher type "flex" and back-end "deepep"). A base
# config's back-end alone does not say which runs: the recipe function may set the type after it (Megatron-Bridge
# d28afef38 "fix: Perf configs after refactoring" set "alltoall" in qwen3_235b_a22b_pretrain_config_{b300,b200,h100}
# and qwen3_30b_a3b_pretrain_config_b200, 0ec1df783 turned the 30B B200 one to "flex"), and where
# scripts/performance/utils/overrides.py set_workload_base_configs calls apply_flex_dispatcher_backend (from 26.04;
# else it sets "alltoall"), the base config's back-end decides, set last. Not read: the GPU check inside
# apply_flex_dispatcher_backend (DeepEP skipped on GB200 / GB300; no held-out row names it there).
_DISPATCHER = "moe_token_dispatcher_type"


def base_config_applies_backend(git_dir: str, commit: str) -> bool:
    """Whether set_workload_base_configs (scripts/performance/utils/overrides.py) calls
    apply_flex_dispatcher_backend at `commit`."""
    try:
        text = _git(git_dir, "show", f"{commit}:scripts/performance/utils/overrides.py")
    except subprocess.CalledProcessError:
        return False
    fn = next((n for n in ast.parse(text).body
               if isinstance(n, ast.FunctionDef) and n.name == "set_workload_base_configs"), None)  # fmt: skip
    return fn is not None and any(
        isinstance(n, ast.Call) and getattr(n.func, "id", None) == "apply_flex_dispatcher_backend" for n in ast.walk(fn)
    )


def _dispatcher_type_of(fn: ast.FunctionDef, applies_backend: bool) -> str | None:
    """The token dispatcher type a recipe function's top-level statements leave set, in order; None where
    the last word is the back-end's (apply_flex_dispatcher_backend, or set_workload_base_configs when it
    applies the back-end) or nothing sets it; an `if` or a computed value that touches it: Unread."""
    state: str | None = None
    for st in fn.body:
        call = st.value if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
        name = getattr(call.func, "id", None) if call is not None else None
        if name == "apply_flex_dispatcher_backend" or (name == "set_workload_base_configs" and applies_backend):
            state = None
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and getattr(st.targets[0], "attr", None) == _DISPATCHER:
            if not (isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)):
                raise Unread(f"{_DISPATCHER} = {ast.unparse(st.value)}")
            state = st.value.value
        elif any(isinstance(n, ast.Attribute) and n.attr == _DISPATCHER for n in ast.walk(st)):
            raise Unread(f"line {st.lineno}: {type(st).__name__} sets {_DISPATCHER}")
    return state


def dispatcher_type_for(recipes, container, model, gpu_system):
    """(dispatcher type the recipe function sets last or None, note) for a row whose base config names a flex
    back-end, from the recipe function for its model and GPU at the container's commit."""
    tp_funcs = recipes.get("_tp_overlap", {})
    if container not in tp_funcs:
        return None, None
    funcs, _library = tp_funcs[container]
    gpu = gpu_system.split("-")[1]
    hit = funcs.get((PREFIX[model], gpu))
    if hit is None:
        return None, None
    fn, path = hit
    try:
        kind = _dispatcher_type_of(fn, recipes.get("_applies_backend", {}).get(container, False))
    except Unread as err:
        return None, f"{_DISPATCHER} not read ({fn.name}: {err})"
    if kind != "alltoall":
        return kind, None
    return kind, (f"{fn.name} ({path}) sets {_DISPATCHER} = 'alltoall' after the back-end: the all-to-all "
                  "dispatcher runs (Megatron-Core takes the flex back-end only under 'flex')")


# --- 25.09: the runs took their layouts from YAML perf matrices and their TP-overlap configuration from
# scripts/performance/run_script.py (Megatron-Bridge @fa0315ae2, the 25.09 summary's commit): the model's
# library recipe (`<model>_pretrain_config(...)`, with run_script's own comm_overlap_config where it passes
# one) sets tp_comm_overlap; CommOverlapConfig turns it off below TP 2 or without sequence parallelism
# (src/megatron/bridge/training/comm_overlap.py); then `recipe.comm_overlap.tp_comm_overlap_cfg =
# COMM_OVERLAP_CONFIG_MAP[model][gpu][compute_dtype]` (scripts/performance/utils/helpers.py; compute dtype
# "fp8" for every fp8 recipe, MXFP8 included: argument_parser --compute_dtype {bf16, fp8}). Sequence
# parallelism is on for TP > 1 (utils/helpers.py apply_perf_matrix_overrides). Of the perf matrix's own
# fields, `cuda_graphs` (set_cuda_graph_overrides: model.enable_cuda_graph, Megatron's per-layer graphs)
# and `cpu_offloading_num_layers` (set_recompute_overrides) are read too, where every entry of the row's
# precision that holds its layout agrees; `recompute_num_layers` and the FSDP switch are not.
YAML_CONTAINERS = {"25.09": "fa0315ae2"}
_YAML_FILE = re.compile(r"^scripts/performance/configs/[^/]+/([a-z0-9_]+)_llm_pretrain\.yaml$")
_YAML_PRECISION = {"bf16": ("bf16",), "fp8": ("fp8_ds", "fp8_cs"), "mxfp8": ("fp8_mx",)}
"""A row's precision -> the perf-matrix keys its run may have used (the 25.09 page names no recipe)."""
_YAML_MODEL = {v: k for k, v in _FUNC_MODEL.items()}


def _comm_overlap_map(source: str) -> dict[str, dict[str, dict[str, str]]]:
    """helpers.py COMM_OVERLAP_CONFIG_MAP: model -> GPU -> compute dtype -> userbuffers config name."""
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "COMM_OVERLAP_CONFIG_MAP"):  # fmt: skip
            def walk(d: ast.expr) -> Any:
                if isinstance(d, ast.Dict):
                    return {ast.literal_eval(k): walk(v) for k, v in zip(d.keys, d.values)}
                if isinstance(d, ast.Name):
                    return d.id
                raise Unread(f"COMM_OVERLAP_CONFIG_MAP holds {ast.unparse(d)}")
            return walk(node.value)
    raise Unread("no COMM_OVERLAP_CONFIG_MAP")


def yaml_recipes(git_dir: str, commit: str) -> dict[str, Any]:
    """The perf matrices by model, COMM_OVERLAP_CONFIG_MAP, run_script's recipe calls and the library
    recipes at `commit`."""
    import yaml

    matrices: dict[str, Any] = {}
    grad_reduce: dict[str, Any] = {}
    for path in _git(git_dir, "ls-tree", "-r", "--name-only", commit, "scripts/performance/configs").split():
        if m := _YAML_FILE.match(path):
            doc = yaml.safe_load(_git(git_dir, "show", f"{commit}:{path}")) or {}
            matrices[m.group(1)] = doc.get("perf_matrix") or {}
            # run_script.py merges the file's ConfigContainer section over the recipe (apply_overrides)
            mixed = ((doc.get("ConfigContainer") or {}).get("mixed_precision") or {})
            if isinstance(mixed.get("grad_reduce_in_fp32"), bool):
                grad_reduce[m.group(1)] = (mixed["grad_reduce_in_fp32"], path)
    run_script = ast.parse(_git(git_dir, "show", f"{commit}:scripts/performance/run_script.py"))
    helpers = _git(git_dir, "show", f"{commit}:scripts/performance/utils/helpers.py")
    calls = {n.func.id: n for n in ast.walk(run_script)
             if isinstance(n, ast.Call) and getattr(n.func, "id", "").endswith("_pretrain_config")}  # fmt: skip
    return {
        "commit": commit,
        "matrices": matrices,
        "grad_reduce": grad_reduce,
        "map": _comm_overlap_map(helpers),
        "calls": calls,
        "library": tp_overlap_functions(git_dir, commit)[1],
        # run_script.py builds the recipe's MixedPrecisionConfig with this helper (compute dtype, fp8 recipe)
        "precision_helper": next(n for n in ast.parse(helpers).body
                                 if isinstance(n, ast.FunctionDef) and n.name == "get_precision_config"),
        "factories": factories_at(git_dir, commit),
    }


def _as_base_config(entry: dict[str, Any]) -> dict[str, Any]:
    """A merged perf-matrix entry in WorkloadBaseConfig's field names, so that _matches judges its
    layout (apply_perf_matrix_overrides: tp / pp / cp default 1, vp / ep as given; an entry without
    mbs / gbs matches no row: the library recipe's value is not read)."""
    return {
        **DEFAULTS,
        "tensor_model_parallel_size": entry.get("tp", 1),
        "pipeline_model_parallel_size": entry.get("pp", 1),
        "context_parallel_size": entry.get("cp", 1),
        "virtual_pipeline_model_parallel_size": entry.get("vp"),
        "expert_model_parallel_size": entry.get("ep") or 1,
        "micro_batch_size": entry.get("mbs"),
        "global_batch_size": entry.get("gbs"),
        "use_megatron_fsdp": entry.get("use_megatron_fsdp"),
    }


def yaml_settings(recipes: dict[str, Any], container: str, model: str, gpu_system: str, row: dict[str, Any]):
    """(settings, note) for a 25.09 row: tp_comm_overlap and tp_overlap as run_script.py set them, and the
    perf matrix's CUDA graphs and CPU offload (_yaml_fields), where the model's perf matrix holds the row's
    layout for a recipe of the row's precision; ({}, why) otherwise."""
    got = recipes.get("_yaml", {}).get(container)
    key = _YAML_MODEL.get(PREFIX.get(model, ""))
    if got is None or key is None:
        return {}, "no recipe read for this container / model"
    gpu = gpu_system.split("-")[1].lower()
    block = (got["matrices"].get(key) or {}).get(gpu, {}).get(f"num_gpus_{row['num_gpus']}")
    where = f"scripts/performance/configs/*/{key}_llm_pretrain.yaml @{got['commit']}"
    if not block:
        return {}, f"no {gpu} num_gpus_{row['num_gpus']} entry in {where}"
    merged = {k: {**(block.get("common") or {}), **(block.get(k) or {})}
              for k in _YAML_PRECISION.get(row["precision"], ()) if k in block}  # fmt: skip
    keys = [k for k, entry in merged.items() if _matches(_as_base_config(entry), row)]
    if not keys:
        return {}, f"no {row['precision']} entry of {where} ({gpu}, {row['num_gpus']} GPUs) has this row's layout"
    said = f"perf matrix {where} {gpu} num_gpus_{row['num_gpus']} {'/'.join(keys)}"
    fields, field_note = _yaml_fields([merged[k] for k in keys])
    said += field_note
    if row["tp"] < 2:
        return fields, f"{said}; TP 1, no TP overlap (CommOverlapConfig: TP size < 2)"
    overlap, note = _yaml_overlap(got, key, gpu, row, said)
    return {**fields, **overlap}, note


def _yaml_fields(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """Settings from the perf-matrix fields every matching entry agrees on: cuda_graphs (Megatron's
    per-layer CUDA graphs, attention included) and CPU offload layers."""
    out: dict[str, Any] = {}
    said = []
    for field, setting in (("cuda_graphs", "cuda_graphs"), ("cpu_offloading_num_layers", "cpu_offload_layers")):
        values = {e.get(field) or None for e in entries}
        if len(values) > 1:
            said.append(f"{field} differs between the entries: not transcribed")
        elif (v := values.pop()) is not None:
            out[setting] = True if field == "cuda_graphs" else int(v)
            said.append(f"{field}={v}")
    return out, (": " + ", ".join(said)) if said else ""


def _yaml_overlap(got: dict[str, Any], key: str, gpu: str, row: dict[str, Any], said: str):
    """(tp_comm_overlap / tp_overlap settings, note) of a TP > 1 25.09 row (yaml_settings)."""
    fn_name = f"{key}_pretrain_config"
    call, lib = got["calls"].get(fn_name), got["library"].get(fn_name)
    if call is None or lib is None:
        return {}, f"{said}; tp_comm_overlap not read (run_script.py does not call {fn_name} or it is not found)"
    try:
        passed = next((kw.value for kw in call.keywords if kw.arg == "comm_overlap_config"), None)
        kw = _comm_overlap_kw(passed) if isinstance(passed, ast.Call) else None
        dtype = "bf16" if row["precision"] == "bf16" else "fp8"
        on = _tp_expr(kw, None, dtype, row["tp"]) if kw is not None else _library_default(lib, dtype, row["tp"])
    except Unread as err:
        return {}, f"{said}; tp_comm_overlap not read ({fn_name}: {err})"
    from_ = "run_script.py's comm_overlap_config" if kw is not None else f"library recipe {fn_name}"
    if not on:
        return {"tp_comm_overlap": False}, f"{said}; tp_comm_overlap=False ({from_})"
    cfg = got["map"].get(key, {}).get(gpu, {}).get(dtype)
    if cfg is not None:
        return {"tp_comm_overlap": True, "tp_overlap": cfg}, (
            f"{said}; tp_comm_overlap=True ({from_}), tp_comm_overlap_cfg {cfg} "
            f"(scripts/performance/utils/helpers.py COMM_OVERLAP_CONFIG_MAP[{key}][{gpu}][{dtype}])"
        )
    if kw is not None and not any(k.arg == "tp_comm_overlap_cfg" for k in passed.keywords):
        # run_script's own CommOverlapConfig(tp_comm_overlap=True) replaces the library's and names no
        # configuration: Transformer Engine's per-GEMM defaults (training/initialize.py: ub_cfgs = {})
        return {"tp_comm_overlap": True, "tp_overlap": TE_DEFAULT}, (
            f"{said}; tp_comm_overlap=True ({from_}, no tp_comm_overlap_cfg; no COMM_OVERLAP_CONFIG_MAP"
            f"[{key}][{gpu}]): Transformer Engine's default userbuffers configuration"
        )
    return {}, f"{said}; tp_comm_overlap=True ({from_}) but no COMM_OVERLAP_CONFIG_MAP[{key}][{gpu}][{dtype}]: not transcribed"
