"""NeMo Framework's published pre-training tables (containers 24.09 .. 25.07) in the
published_runs.yaml schema: a second held-out source beside Megatron-Bridge's (make_mbridge_summary.py).

Held-out evaluation data only: no row is used to fit a constant (docs/accuracy.md "Held-out: NeMo
Framework performance summary"). Usage, from a clone of NVIDIA/NeMo (for the recipe settings):

    python bench/heldout/make_nemo_summary.py [NEMO_GIT_DIR] > bench/heldout/nemo_performance_summary.yaml

The tables themselves live only on docs.nvidia.com (NeMo Framework user guide, "Performance
Summary" and its archive pages; NVIDIA/NeMo dropped docs/source/performance/performance_summary.md
after 24.07), so they are transcribed cell by cell into nemo_performance_tables.yaml, each table
with the page it came from; this script checks every row against itself (GA against GBS / (MBS x
DP), FLOPs per token against the other rows of the model) and turns it into records. What a record
takes from the page: the layout cells, the precision the page states above the table (NeMo 25.04 /
25.07: per-tensor FP8 with current scaling -> fp8 tensorwise; earlier pages say FP8 only), and a
parenthesised cell as a second record (the page's alternative configuration). What it takes from
the recipes, when NEMO_GIT_DIR is given and the container has them (NeMo v2.3.0 = 25.04, v2.4.0 =
25.07: scripts/performance): the recommended-config row of the same layout
(recommended_model_configs/model_configs_<gpu>.csv: CUDA graphs, Megatron-FSDP, full recompute
layers, CPU offload layers, selective recompute modules), and for TP > 1 the TP overlap the model's
recipe switches on (nemo/collections/llm/recipes/<model>.py MegatronCommOverlapCallback
tp_comm_overlap=True) with the userbuffers configuration its performance script picks for the GPU
and compute dtype (scripts/performance/llm/pretrain_<model>.py `ub_cfg`). Mixtral's scripts hold no
MoE code, so its rows take the same reading plus what the recipe's performance mode sets for the
MoE layers (MOE_RECIPE_MODELS, moe_recipe_settings: token drop at MegatronTokenDropCallback's
defaults, MixtralConfig's dispatcher); other MoE scripts set the dispatcher, token drop and
pipeline layout per GPU in code, not read here (confidence low). Rows of models the cost model cannot describe are listed in the output's
header with the reason.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_file import EVALUATION_ONLY, git_show, write_summary
from make_mbridge_summary import split_cell

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TABLES = HERE / "nemo_performance_tables.yaml"
TAGS = {
    "25.07": ("v2.4.0", "scripts/performance"),
    "25.04": ("v2.3.0", "scripts/performance"),
    "25.02": ("v2.2.0", "scripts/llm/performance"),
}
"""NeMo release of each container, and where its performance scripts live (CHANGELOG: v2.2.0
2025-03-12; v2.3.0 2025-05-08 ships "Interface for using MXFP8 and FP8 current scaling recipes",
25.04's; v2.4.0 2025-07-25, "perf scripts 25.07 refactor")."""
GPU = {
    "DGX-GB200": ("gb200", 72, "gb200"),
    "DGX-B200": ("b200", 8, "b200"),
    "DGX-H100": ("h100-sxm-80gb", 8, "h100"),
}
"""Page system -> (GPU preset, GPUs per NVLink domain, the scripts' --gpu name)."""

NEMOTRON = {"gated_mlp": False, "activation": "squared_relu", "normalization": "layernorm",
            "rotary_percent": 0.5, "vocab_size": 256000}  # fmt: skip
"""nemo/collections/llm/gpt/model/nemotron.py NemotronConfig (squared ReLU, LayerNorm, RoPE on
half the head dims, no biases, untied) with the perf scripts' NullTokenizer vocab_size=256000."""

MODELS: dict[str, tuple[str, str, dict]] = {}
"""Page model name -> (scripts' model, size, ModelSpec dict without seq_len)."""


def preset(name: str) -> dict:
    """A planner model preset (each JSON cites its source) without its source line."""
    spec = json.loads((ROOT / "models_zoo" / "models" / f"{name}.json").read_text())
    spec.pop("source", None)
    # The preset's multi-token prediction (DeepSeek-V3: 1) is not these rows' to assume: no row
    # states it (the DeepSeek-V3 scripts' rows, which ran it, are left unread).
    spec.pop("mtp_num_layers", None)
    if spec.get("moe"):
        # DeepSeek's node-limited routing is its own system's setting, not NeMo's.
        spec["moe"] = {k: v for k, v in spec["moe"].items() if k != "max_nodes_per_token"}
    return spec


def _models() -> dict[str, tuple[str, str, dict]]:
    if MODELS:
        return MODELS
    MODELS.update({
        "LLAMA3-8B": ("llama3", "8b", preset("llama3-8b")),
        "LLAMA3-70B": ("llama3", "70b", preset("llama3-70b")),
        "LLAMA3-405B": ("llama31", "405b", preset("llama3.1-405b")),
        "LLAMA3.1-405B": ("llama31", "405b", preset("llama3.1-405b")),
        "GPT3-175B": ("gpt3", "175b", preset("gpt3-175b")),
        "Nemotron-15B": ("nemotron4", "15b", {
            "name": "Nemotron-4 15B", "num_layers": 32, "hidden_size": 6144, "ffn_hidden_size": 24576,
            "num_attention_heads": 48, "num_kv_heads": 8, **NEMOTRON}),
        "Nemotron-340B": ("nemotron4", "340b", {
            "name": "Nemotron-4 340B", "num_layers": 96, "hidden_size": 18432, "ffn_hidden_size": 73728,
            "num_attention_heads": 96, "num_kv_heads": 8, **NEMOTRON}),
        "Mixtral-8x7B": ("mixtral", "8x7b", preset("mixtral-8x7b")),
        "Mixtral-8x22B": ("mixtral", "8x22b", preset("mixtral-8x22b")),
    })  # fmt: skip
    return MODELS


UNDESCRIBABLE = {
    "Nemotron-H": "hybrid Mamba-2 / attention: the cost model has no Mamba layer",
    "LLAMA4": "Llama 4: chunked local attention with NoPE global layers and interleaved MoE "
    "layers are not described by the cost model's ModelSpec",
}


def _undescribable(name: str) -> str | None:
    for key, why in UNDESCRIBABLE.items():
        if name.upper().startswith(key.upper()):
            return why
    return None


# ------------------------------------------------------------------------------ the recipes


class Recipes:
    """What NeMo's performance scripts at a container's tag set for a row (module docstring)."""

    def __init__(self, git_dir: str | None):
        self.git_dir = git_dir
        self._cache: dict[tuple, object] = {}

    def _show(self, tag: str, path: str) -> str | None:
        key = ("show", tag, path)
        if key not in self._cache:
            self._cache[key] = git_show(self.git_dir, tag, path) if self.git_dir else None
        return self._cache[key]  # type: ignore[return-value]

    def csv_row(self, tag: str, folder: str, gpu: str, model: str, size: str, dtype: str,
                shape: dict) -> dict | None:  # fmt: skip
        text = self._show(tag, f"{folder}/recommended_model_configs/model_configs_{gpu}.csv")
        if text is None:
            return None
        for row in csv.DictReader(io.StringIO(text)):
            if (row["task"], row["model"], row["size"], row["dtype"]) != (
                "pre_train",
                model,
                size,
                dtype,
            ):
                continue
            got = {k: int(float(row[c])) if row.get(c) not in (None, "") else None
                   for k, c in (("num_gpus", "num_gpus"), ("tp", "tp_size"), ("pp", "pp_size"), ("cp", "cp_size"),
                                ("ep", "ep_size"), ("vp", "vp_size"), ("mbs", "mbs"), ("gbs", "gbs"))}  # fmt: skip
            if all(got[k] == shape[k] for k in got):
                return row
        return None

    def ub_config(
        self, tag: str, folder: str, model: str, size: str, gpu: str, dtype: str
    ) -> str | None:
        """The `ub_cfg[gpu][dtype]` name of <folder>/[llm/]pretrain_<model>_<size>.py."""
        text = self.script_text(tag, folder, model, size)
        if not text:
            return None
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "ub_cfg" for t in node.targets
            ):
                table = node.value
                if not isinstance(table, ast.Dict):
                    return None
                for k, v in zip(table.keys, table.values):
                    if isinstance(k, ast.Constant) and k.value == gpu and isinstance(v, ast.Dict):
                        for k2, v2 in zip(v.keys, v.values):
                            if (
                                isinstance(k2, ast.Constant)
                                and k2.value == dtype
                                and isinstance(v2, ast.Name)
                            ):
                                return v2.id
                return None
        # Scripts without the table (pretrain_nemotron4_340b.py) assign a config under
        # `if gpu_type == "b200"` (one name for both dtypes at v2.2.0, `fp8 ... if ... else bf16`
        # later); GB200 runs the B200 configs, as in the ub_cfg tables.
        family = "b200" if gpu in ("b200", "gb200") else gpu
        names = sorted(set(re.findall(r"tp_comm_overlap_cfg = \(?\s*(userbuffers_\w+)", text)
                           + re.findall(r"else (userbuffers_\w+)", text)))  # fmt: skip
        names = [n for n in names if f"_{family}_" in n]
        if len(names) == 1:
            return names[0]
        return next((n for n in names if n.startswith(f"userbuffers_{dtype}_")), None)

    def script_text(self, tag: str, folder: str, model: str, size: str) -> str:
        sub = "llm/" if folder == "scripts/performance" else ""
        return self._show(tag, f"{folder}/{sub}pretrain_{model}_{size}.py") or ""

    def ub_differences(self, tag: str, name: str) -> list[str]:
        """How the userbuffers configuration `name` at `tag` (nemo/collections/llm/recipes/
        tp_overlap_configs/userbuffers.py) differs from the cost model's transcription of the
        same name (cost_models.tp_overlap.CONFIGS, from Megatron-Bridge): one line per GEMM."""
        from cost_models.tp_overlap import CONFIGS, UbOverlap

        text = self._show(tag, "nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py")
        if text is None or name not in CONFIGS:
            return [f"{name} not found at {tag} or in the cost model"]
        methods = {"RingExchangeOverlapCfg": "ring_exchange", "PipelineOverlapCfg": "pipeline",
                   "BulkOverlapCfg": "bulk"}  # fmt: skip
        for node in ast.parse(text).body:
            if not (isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name):
                continue
            out = []
            for kw in node.value.keywords:  # type: ignore[attr-defined]
                call = kw.value
                args = {
                    k.arg: k.value.value for k in call.keywords if isinstance(k.value, ast.Constant)
                }
                method = methods[call.func.id]
                got = UbOverlap(method, args.get("num_sm", 1), bool(args.get("set_sm_margin", False)),
                                args.get("num_splits", 0) if method == "pipeline" else 0)  # fmt: skip
                if got != CONFIGS[name][kw.arg]:
                    out.append(f"{kw.arg} {got} at {tag}")
                if args.get("aggregate"):
                    out.append(f"{kw.arg} aggregate=True at {tag} (not priced)")
            return out
        return [f"{name} not defined at {tag}"]

    def ub_difference_note(self, tag: str, name: str, at: str) -> str | None:
        """The note a record carries where `name`'s definition at `tag` differs from the cost
        model's (ub_differences; `at` names the commit in it), None where they agree."""
        diffs = self.ub_differences(tag, name)
        if not diffs:
            return None
        return ("priced with the cost model's definition of that name, which differs from NeMo's "
                f"at {at}: " + ", ".join(diffs))  # fmt: skip

    def recipe_text(self, tag: str, model: str, size: str) -> str:
        return self._show(tag, f"nemo/collections/llm/recipes/{model}_{size}.py") or ""

    def helper_sources(self, tag: str, folder: str) -> list[tuple[str, str]]:
        """(path, text) of the helper module the performance scripts call for their shared settings:
        the one defining set_primary_perf_configs, <folder>/utils.py at v2.3.0, helpers.py at v2.4.0."""
        return [(f"{folder}/{helper}", text) for helper in ("utils.py", "helpers.py")
                if (text := self._show(tag, f"{folder}/{helper}")) and "def set_primary_perf_configs" in text]  # fmt: skip

    def performance_mode_source(self, tag: str, script: str) -> tuple[str, str, set[str]] | None:
        """(path, text, function names) of the recipe module's performance settings a script
        reaches: where it builds its recipe with `pretrain_recipe(performance_mode=True)` (imported
        from nemo.collections.llm.recipes.<module>), performance_mode_functions of that module;
        None where the script does not."""
        imported = re.search(r"from nemo\.collections\.llm\.recipes\.(\w+) import [^\n]*\bpretrain_recipe\b", script)
        if imported is None or not re.search(r"pretrain_recipe\([^)]*performance_mode\s*=\s*True", script):
            return None
        return self.performance_mode_functions(tag, f"nemo/collections/llm/recipes/{imported.group(1)}.py")

    def performance_mode_functions(self, tag: str, path: str) -> tuple[str, str, set[str]] | None:
        """(path, text, function names) of a recipe module at `tag`: the functions its
        pretrain_recipe calls under `if performance_mode:` (pretrain_performance_optimizations,
        which sets e.g. `recipe.trainer.plugins.grad_reduce_in_fp32 = False` in
        recipes/nemotron4_15b.py and llama3_70b.py at d2b21556f2); None without them."""
        text = self._show(tag, path)
        if not text:
            return None
        called: set[str] = set()
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, ast.FunctionDef) and fn.name == "pretrain_recipe":
                for node in ast.walk(fn):
                    if isinstance(node, ast.If) and ast.unparse(node.test) == "performance_mode":
                        called |= {c.func.id for st in node.body for c in ast.walk(st)
                                   if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}  # fmt: skip
        return (path, text, called) if called else None

    def performance_grad_reduce(self, source: tuple[str, str, set[str]] | None, tag: str) -> tuple[bool | None, str]:
        """(the grad_reduce_in_fp32 a recipe's performance mode sets, where): one plain value in
        the top-level statements of performance_mode_functions' functions, else None."""
        if source is None:
            return None, ""
        path, text, called = source
        values = {st.value.value for name, st, conds in _assignments(text, "grad_reduce_in_fp32")
                  if name in called and not conds and "plugins" in ast.unparse(st.targets[0])
                  and isinstance(st.value, ast.Constant) and isinstance(st.value.value, bool)}  # fmt: skip
        if len(values) != 1:
            return None, ""
        return values.pop(), f"{path} @{tag} ({', '.join(sorted(called))}, performance_mode=True)"

    def grad_reduce_in_fp32(self, tag: str, folder: str, model: str, size: str, dtype: str) -> tuple[bool | None, str]:
        """(MegatronMixedPrecision.grad_reduce_in_fp32 the performance script leaves for a row of
        this compute dtype, where): `recipe.trainer.plugins.grad_reduce_in_fp32 = <bool>` in the
        model's pretrain script, or in the helper it calls (set_primary_perf_configs, in
        <folder>/utils.py at v2.3.0, helpers.py at v2.4.0), either at the top level of a function
        (every dtype) or under `if ...compute_dtype.lower() == "fp8"` (fp8 rows only). Any other
        enclosing condition, or two values, leaves it unread (None). Before them runs the recipe's
        own performance mode where the script asks for it (performance_mode_source: its
        functions' top-level statements, every dtype): its value stands unless the script or the
        helper sets the value, or replaces the plugin (`recipe.trainer.plugins = ...`, whose
        factory default is True) for this dtype, after it. The plugin's default is True
        (MegatronMixedPrecision, bf16_mixed), so a row no statement reaches is not stated."""
        script = self.script_text(tag, folder, model, size)
        if not script:
            return None, ""
        sub = "llm/" if folder == "scripts/performance" else ""
        sources = [(f"{folder}/{sub}pretrain_{model}_{size}.py", script)]
        if "set_primary_perf_configs(" in script:
            sources += self.helper_sources(tag, folder)
        found: set[bool] = set()
        where = []
        for path, text in sources:
            for _, st, conds in _assignments(text, "grad_reduce_in_fp32"):
                if "plugins" not in ast.unparse(st.targets[0]):
                    continue
                if not (isinstance(st.value, ast.Constant) and isinstance(st.value.value, bool)):
                    return None, f"{path}: grad_reduce_in_fp32 = {ast.unparse(st.value)}"
                fp8_only = [c for c in conds if re.fullmatch(r"(args\.)?compute_dtype\.lower\(\) == 'fp8'", c)]
                other = [c for c in conds if c not in fp8_only and "compute_dtype is not None" not in c]
                if other:
                    return None, f"{path}: grad_reduce_in_fp32 under `if {other[0]}`"
                if fp8_only and dtype != "fp8":
                    continue
                found.add(st.value.value)
                where.append(f"{path} @{tag}" + (" (fp8 branch)" if fp8_only else ""))
        if len(found) > 1:
            return None, f"grad_reduce_in_fp32 set to both values ({', '.join(where)})"
        if found:
            return found.pop(), ", ".join(dict.fromkeys(where))
        # the script or helper plugging in a new precision plugin (default True) after the recipe,
        # for this dtype or under a condition not read: the recipe's value may not stand
        replaced = []
        for path, text in sources:
            for _, st, conds in _assignments(text, "plugins"):
                if not ast.unparse(st.targets[0]).endswith("trainer.plugins"):
                    continue
                fp8_only = [c for c in conds if re.fullmatch(r"(args\.)?compute_dtype\.lower\(\) == 'fp8'", c)]
                if fp8_only and dtype != "fp8":  # the tests are a conjunction: fp8 rows only
                    continue
                replaced.append(f"{path} @{tag}")
        value, where = self.performance_grad_reduce(self.performance_mode_source(tag, script), tag)
        if value is not None and replaced:
            return None, (f"{where} sets it, then the precision plugin is replaced "
                          f"({', '.join(dict.fromkeys(replaced))})")  # fmt: skip
        return value, where


FP8_FACTORY = {"tensorwise": "bf16_with_fp8_current_scaling_mixed", "delayed": "bf16_with_fp8_mixed",
               "mxfp8": "bf16_with_mxfp8_mixed"}
"""The fp8 scaling a row ran -> the MegatronMixedPrecision factory NeMo's performance scripts plug in for
it (v2.2.0 per-model scripts: bf16_with_fp8_mixed; v2.3.0 / v2.4.0 set_primary_perf_configs /
set_precision_configs by --fp8_recipe: ds, cs, mxfp8)."""


def fp8_param_gather_of(recipes: Recipes, tag: str, folder: str, model: str, size: str, fp8_recipe: str | None,
                        fsdp: bool | None) -> tuple[bool | None, str]:  # fmt: skip
    """(fp8 primary weights gathered in fp8, where) for an fp8 row: the factory's plain
    `cfg.fp8_param_gather = <bool>` (`cfg.fp8_params` at v2.2.0) in nemo/collections/llm/recipes/
    precision/mixed_precision.py at the tag, then, for a Megatron-FSDP row, the helper's
    `recipe.trainer.plugins.fp8_param_gather = False` under `if use_mcore_fsdp` (v2.3.0: "Currently
    FSDP does not support FP8 param gather"). None where the factory is unknown or sets neither."""
    factory = FP8_FACTORY.get(fp8_recipe or "delayed")
    text = recipes._show(tag, "nemo/collections/llm/recipes/precision/mixed_precision.py")
    if factory is None or text is None:
        return None, ""
    fn = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == factory), None)
    values = {
        st.value.value
        for st in (fn.body if fn else [])
        if isinstance(st, ast.Assign) and len(st.targets) == 1
        and getattr(st.targets[0], "attr", None) in ("fp8_param_gather", "fp8_params")
        and isinstance(st.value, ast.Constant) and isinstance(st.value.value, bool)
    }  # fmt: skip
    if len(values) != 1:
        return None, ""
    value = values.pop()
    where = f"{factory} @{tag}"
    if value and fsdp:
        for path, helper_text in recipes.helper_sources(tag, folder):
            for name, st, conds in _assignments(helper_text, "fp8_param_gather"):
                if (isinstance(st.value, ast.Constant) and st.value.value is False
                        and any("use_mcore_fsdp" in c for c in conds)):  # fmt: skip
                    return False, f"{where}, turned off under Megatron-FSDP ({path} {name})"
    return value, where


def literal_defaults(text: str | None, name: str) -> dict[str, object]:
    """Literal defaults of a class's annotated fields or a function's keyword arguments (ast)."""
    out: dict[str, object] = {}
    for node in ast.walk(ast.parse(text or "")):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.value, ast.Constant):
                    out[ast.unparse(st.target)] = st.value.value
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = node.args.args[len(node.args.args) - len(node.args.defaults):]
            for a, d in zip(args, node.args.defaults, strict=True):
                if isinstance(d, ast.Constant):
                    out[a.arg] = d.value
    return out


MOE_RECIPE_MODELS = frozenset({("mixtral", "8x7b"), ("mixtral", "8x22b")})
"""MoE models whose NeMo performance script holds no MoE code of its own (pretrain_mixtral_8x7b.py
/ _8x22b.py at v2.2.0 .. v2.4.0: the recipe in performance mode, set_primary_perf_configs, the
tokenizer), so the recipe module says what ran: recipe_settings as for a dense model, plus
moe_recipe_settings. Not DeepSeek-V3 (its script sets uneven pipeline stages and, by GPU, the
dispatcher)."""


def moe_recipe_settings(recipes: Recipes, ref: str, performance_source: str, model_source: str) -> tuple[dict, list[str]]:  # fmt: skip
    """(settings, notes) of an MoE recipe's token drop and dispatcher, read at NeMo `ref`:
    `run.Config(MegatronTokenDropCallback)` built without arguments in `performance_source` (the
    code a recipe's performance mode runs) is token drop at the callback's __init__ defaults
    (nemo/lightning/pytorch/callbacks/moe_token_drop.py: capacity factor, pad to capacity); the
    dispatcher is the `moe_token_dispatcher_type` default of MixtralConfig (nemo/collections/llm/
    gpt/model/mixtral.py) where `model_source` builds a `MixtralConfig*`."""
    compact = re.sub(r"\s+", "", performance_source)
    settings: dict = {}
    notes: list[str] = []
    if "run.Config(MegatronTokenDropCallback)" in compact:
        drop = literal_defaults(recipes._show(ref, "nemo/lightning/pytorch/callbacks/moe_token_drop.py"),
                                "__init__")  # fmt: skip
        factor, pad = drop.get("moe_expert_capacity_factor"), drop.get("moe_pad_expert_input_to_capacity")
        if isinstance(factor, float | int) and factor > 0 and pad is True:
            settings["moe_pad_to_capacity"] = True
            settings["moe_capacity_factor"] = float(factor)
        notes.append(f"MegatronTokenDropCallback() (capacity factor {factor}, pad to capacity {pad}: "
                     "moe_token_drop.py defaults)")  # fmt: skip
    config = re.search(r"run\.Config\((MixtralConfig\w*)", re.sub(r"\s+", "", model_source))
    if config is not None:
        base = literal_defaults(recipes._show(ref, "nemo/collections/llm/gpt/model/mixtral.py"), "MixtralConfig")
        if isinstance(base.get("moe_token_dispatcher_type"), str):
            settings["moe_dispatcher"] = base["moe_token_dispatcher_type"]
        notes.append(f"{config.group(1)}: dispatcher {base.get('moe_token_dispatcher_type')} (MixtralConfig)")
    return settings, notes


def _assignments(text: str, attr: str):
    """(function name, statement, the `if` tests around it) of every `<...>.<attr> = ...` statement of
    a module, in its functions and at its top level (_statements)."""
    for fn in ast.walk(ast.parse(text)):
        if isinstance(fn, (ast.FunctionDef, ast.Module)):
            for st, conds in _statements(fn.body, []):
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and getattr(st.targets[0], "attr", None) == attr:
                    yield getattr(fn, "name", "<module>"), st, conds


def _statements(body: list[ast.stmt], conds: list[str]):
    """(statement, the `if` tests around it within the function) for a function's statements; the
    tests of nested `if`s combined with ` and ` (compute_dtype tests are split back apart)."""
    for st in body:
        yield st, conds
        if isinstance(st, ast.If):
            tests = [ast.unparse(t) for t in (st.test.values if isinstance(st.test, ast.BoolOp)
                                              and isinstance(st.test.op, ast.And) else [st.test])]  # fmt: skip
            yield from _statements(st.body, conds + tests)
            yield from _statements(st.orelse, conds + [f"not ({ast.unparse(st.test)})"])
        elif isinstance(st, (ast.For, ast.With, ast.While, ast.Try)):
            yield from _statements(getattr(st, "body", []), conds + [type(st).__name__])


def recipe_settings(recipes: Recipes, container: str, model: str, size: str, system: str, dtype: str,
                    shape: dict, ref: tuple[str, str] | None = None) -> tuple[dict, dict, str]:  # fmt: skip
    """(settings, layout fields, note) from the container's performance scripts for one row
    (`ref`: the NeMo commit and scripts folder a launcher pins, instead of the container's tag).

    The recommended-config knobs (CUDA graphs, FSDP, recompute, offload) are taken only from a CSV
    row whose whole layout is the page's (the rule make_mbridge_summary.py applies to Megatron-
    Bridge's recipes): a page layout the CSV does not hold was launched with other arguments, which
    may have set those knobs too. The TP overlap does not depend on the layout: the recipe's
    callback switches it on for every TP > 1 and the script picks its configuration by GPU and
    compute dtype, so it is read for every such row (not under Megatron-FSDP, which the scripts
    run without it)."""
    if ref is None and container not in TAGS:
        return {}, {}, f"none read (no NeMo release mapped to container {container})"
    tag, folder = ref or TAGS[container]
    if recipes.git_dir is None:
        return {}, {}, "none read (no NeMo clone given)"
    gpu = GPU[system][2]
    settings: dict = {}
    layout: dict = {}
    taken = []
    row = recipes.csv_row(tag, folder, gpu, model, size, dtype, shape)
    fsdp = shape["fsdp"]
    if row is None:
        taken.append(f"no pre_train row of {folder}/recommended_model_configs/model_configs_{gpu}.csv @{tag} "
                     f"has this layout ({model} {size} {dtype}): its knobs not taken")  # fmt: skip
    elif (row.get("use_mcore_fsdp") not in (None, "", "0")) != fsdp:
        taken.append(f"the model_configs_{gpu}.csv @{tag} row of this layout disagrees with the page's FSDP "
                     "column: its knobs not taken")  # fmt: skip
    else:
        taken.append(
            f"{folder}/recommended_model_configs/model_configs_{gpu}.csv @{tag} row of this layout"
        )
        if row.get("cuda_graphs") not in (None, "", "0"):
            if fsdp:  # set_primary_perf_configs: "cuda graphs are not supported with FSDP"
                taken.append("cuda_graphs 1, dropped under FSDP")
            else:
                settings["cuda_graphs"] = True
                taken.append("cuda_graphs 1")
        if fsdp:
            taken.append("use_mcore_fsdp 1 (optim_grads_params)")
        # set_primary_perf_configs: recompute_layers > 0 is full recompute, method block, of that
        # many layers; recompute_modules is selective recompute (it asserts the two apart).
        recompute = int(row.get("recompute_layers") or 0)
        if row.get("recompute_modules"):
            layout["recompute"] = "selective"
            settings["recompute_modules"] = row["recompute_modules"].split("/")
            taken.append(f"recompute_modules {row['recompute_modules']}")
        elif recompute:  # the records' layout has no recompute_num_layers: the row is not stated
            return (
                {},
                {},
                (
                    f"none taken: the model_configs_{gpu}.csv @{tag} row of this layout recomputes "
                    f"{recompute} layers in full (method block), which the records' schema cannot state"
                ),
            )
        offload = int(row.get("activation_offload_layers") or 0)
        if offload:
            settings["cpu_offload_layers"] = offload
            taken.append(f"activation_offload_layers {offload}")
    compact = re.sub(r"\s+", "", recipes.recipe_text(tag, model, size))
    if (
        shape["tp"] > 1
        and "MegatronCommOverlapCallback,tp_comm_overlap=True" in compact
        and not fsdp
    ):
        name = recipes.ub_config(tag, folder, model, size, gpu, dtype)
        source = f"pretrain_{model}_{size}.py"
        if name is None:  # the recipe's own configuration, else Transformer Engine's defaults
            found = re.findall(r"tp_comm_overlap_cfg=(userbuffers_\w+)", compact)
            name, source = (
                (found[0], f"recipes/{model}_{size}.py")
                if found
                else ("te_default", "none set: TE defaults")
            )
        settings["tp_comm_overlap"] = True
        settings["tp_overlap"] = name
        taken.append(
            f"tp_comm_overlap (recipes/{model}_{size}.py @{tag}), config {name} ({source})"
        )
        if name != "te_default" and (differs := recipes.ub_difference_note(tag, name, tag)):
            settings["_ub_differs"] = True
            taken.append(differs)
    elif shape["tp"] > 1:
        settings["tp_comm_overlap"] = False
        taken.append(
            f"no TP overlap (recipes/{model}_{size}.py @{tag} "
            + ("under FSDP)" if fsdp else "does not set it)")
        )
    value, where = recipes.grad_reduce_in_fp32(tag, folder, model, size, dtype)
    if value is False:  # bf16 gradient buffers, reduced in bf16: the cost model's main_grads bf16
        settings["main_grads"] = "bf16"
        taken.append(f"grad_reduce_in_fp32=False ({where}): main_grads bf16")
    elif value is None and where:
        taken.append(f"grad_reduce_in_fp32 not read ({where})")
    script = recipes.script_text(tag, folder, model, size)
    if (
        dtype == "fp8"
        and "plugins = bf16_with_fp8_mixed()" in script
        and "current_scaling" not in script
    ):
        settings["fp8_recipe"] = "delayed"
        taken.append(
            f"fp8 delayed scaling (pretrain_{model}_{size}.py @{tag}: bf16_with_fp8_mixed)"
        )
    return settings, layout, "; ".join(taken)


# ------------------------------------------------------------------------------ the records


def precision_of(statement: str) -> tuple[str, str | None, str]:
    s = statement.lower()
    if "fp8" not in s:
        raise ValueError(f"precision statement names no FP8: {statement!r}")
    if "current" in s and "per-tensor" in s:
        return (
            "fp8",
            "tensorwise",
            "page: per-tensor FP8 with scaling factors from the current step",
        )
    return "fp8", None, "page: FP8 without the scaling recipe"


def _int(cell: str | None) -> int | None:
    if cell is None or cell.strip().lower() in ("", "n/a", "-"):
        return None
    return int(cell.replace(",", ""))


def records_of(table: dict, recipes: Recipes, skipped: list[str]) -> list[dict]:
    out = []
    header = table["header"]
    for cells_list in table["rows"]:
        row = dict(zip(header, cells_list))
        where = f"{table['container']} {table['system']} {row['Model']}"
        mains, alts, has_alt = {}, {}, False
        for key, cell in row.items():
            main, alt = split_cell(str(cell))
            mains[key], alts[key] = main, (alt if alt is not None else main)
            has_alt |= alt is not None and key.startswith("Tokens")
        if has_alt and not table.get("parenthesised"):
            skipped.append(f"{where} (parenthesised variant) -- the page gives no legend for it")
            has_alt = False
        for i, cells in enumerate([mains, alts][: 2 if has_alt else 1]):
            try:
                rec = record(cells, table, recipes, alt=bool(i))
            except ValueError as err:
                skipped.append(f"{where}{' (variant)' if i else ''} -- {err}")
                continue
            if isinstance(rec, str):
                skipped.append(f"{where} -- {rec}")
                break
            out.append(rec)
    return out


def record(cells: dict, table: dict, recipes: Recipes, alt: bool) -> dict | str:
    name = cells["Model"].strip()
    if why := _undescribable(name):
        return why
    if name not in _models():
        return "model not described"
    script_model, size, spec = _models()[name]
    model = dict(spec)
    container, system = table["container"], table["system"]
    gpu, per_node, _ = GPU[system]
    n = _int(cells["#-GPUs"])
    tp, pp, cp = _int(cells["TP"]), _int(cells["PP"]), _int(cells.get("CP")) or 1
    if n % (tp * pp * cp):
        raise ValueError(f"#GPUs {n} not divisible by TP*PP*CP = {tp * pp * cp}")
    dp = n // (tp * pp * cp)
    mbs, gbs, seq = _int(cells["MBS"]), _int(cells["GBS"]), _int(cells["Sequence Length"])
    ep, vp = _int(cells.get("EP")), _int(cells.get("VP"))
    precision, fp8_recipe, prec_note = precision_of(table["precision_statement"])
    tokens = float(cells[next(k for k in cells if k.startswith("Tokens"))].replace(",", ""))
    tflops = cells.get("Model TFLOP / sec / GPU", "")
    notes = [prec_note]
    confidence = "high" if fp8_recipe else "medium"
    if gbs % (mbs * dp):
        raise ValueError(f"GBS {gbs} not divisible by MBS*DP = {mbs}*{dp}")
    ga = gbs // (mbs * dp)
    if "GA" in cells and _int(cells["GA"]) != ga:
        notes.append(
            f"INCONSISTENT: table GA {cells['GA']} but GBS/(MBS*DP) = {gbs}/({mbs}*{dp}) = {ga}"
        )
        confidence = "low"
    fsdp = cells.get("FSDP")
    zero = 1
    if fsdp is not None:
        zero = 3 if _int(fsdp) else 1
        notes.append(f"FSDP column {fsdp}")
    notes.append(
        "zero_stage "
        + ("3: Megatron-FSDP" if zero == 3 else "1: DDP + the recipes' distributed optimizer")
    )
    settings: dict = {}
    if fp8_recipe:
        settings["fp8_recipe"] = fp8_recipe
    shape = {"num_gpus": n, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "vp": vp, "mbs": mbs, "gbs": gbs,
             "fsdp": zero == 3}  # fmt: skip
    moe = model.get("moe") is not None
    read = not moe or (script_model, size) in MOE_RECIPE_MODELS
    if not read:
        # The other MoE scripts switch the dispatcher, token drop and uneven PP layouts per GPU in
        # code (e.g. pretrain_deepseek_v3.py: DeepEP on H100, all-to-all with token drop
        # elsewhere); none of it is read, so the row keeps the page's settings only.
        got, layout, note = (
            {},
            {},
            "none read (MoE: dispatcher, token drop and PP layout are set in script code)",
        )
        confidence = "low"
    else:
        got, layout, note = recipe_settings(
            recipes, container, script_model, size, system, "fp8", shape
        )
    if moe and read and container in TAGS and recipes.git_dir is not None:
        tag, _folder = TAGS[container]
        module = f"nemo/collections/llm/recipes/{script_model}_{size}.py"
        source = recipes.performance_mode_functions(tag, module)
        called = source[2] if source is not None else set()
        funcs = {n.name: ast.unparse(n) for n in ast.parse(recipes.recipe_text(tag, script_model, size)).body
                 if isinstance(n, ast.FunctionDef)}  # fmt: skip
        perf = "\n".join(text for name, text in funcs.items() if name in called)
        moe_got, moe_notes = moe_recipe_settings(recipes, tag, perf, funcs.get("model", ""))
        got.update(moe_got)
        note += "; " + "; ".join([f"{module} performance mode", *moe_notes])
        if moe_got:
            confidence = "medium"
    if fp8_recipe and got.get("fp8_recipe", fp8_recipe) != fp8_recipe:
        got.pop("fp8_recipe")  # the page states its scaling: it wins over the script's default
    if container in TAGS and recipes.git_dir is not None and read:
        tag, folder = TAGS[container]
        gather, where = fp8_param_gather_of(recipes, tag, folder, script_model, size,
                                            fp8_recipe or got.get("fp8_recipe"), shape["fsdp"])  # fmt: skip
        if gather:
            got["fp8_params"] = True
        if gather is not None:
            note += f"; fp8_param_gather={gather} ({where}){': fp8_params' if gather else ''}"
    if got.pop("_ub_differs", False):
        confidence = "low"
    settings.update(got)
    if settings.get("fp8_recipe") and not fp8_recipe and confidence == "high":
        confidence = "medium"
    notes.append(f"recipe settings: {note}")
    model["seq_len"] = seq
    if name.startswith("GPT3"):
        notes.append("GPT3-175B: NeMo GPTConfig175B (no dropout, learned positions, tied embeddings), "
                     "tokenizer megatron-gpt2-345m (vocab 50257)")  # fmt: skip
        model["hidden_dropout"] = False
    slug = re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")
    rid = f"nemo-{container}-{gpu.split('-')[0]}-{slug}-{n}gpu-{precision}" + (
        "-alt" if alt else ""
    )
    return {
        "id": rid,
        "framework": "megatron",
        "source": f"NeMo Framework performance summary ({table['url']}), NeMo {container} container, "
        f"{system} pre-training table" + (", parenthesised variant" if alt else ""),
        "confidence": confidence,
        "model": model,
        "gpu": gpu,
        "num_gpus": n,
        "gpus_per_node": per_node,
        "interconnect": f"{system} (system name only)",
        "layout": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "ep": ep,
            "vp": vp,
            "sequence_parallel": (tp > 1) if container in TAGS else None,
            "zero_stage": zero,
            "micro_batch": mbs,
            "global_batch_seqs": gbs,
            "recompute": layout.get("recompute"),
            "precision": precision,
        },
        **({"settings": settings} if settings else {}),
        "measured_tokens_per_s_per_gpu": tokens,
        "tokens_derivation": f"published tokens/s/GPU = {tokens:g} (table); model TFLOP/s/GPU {tflops}",
        "notes": "; ".join([*notes, f"DP = #GPUs/(TP*PP*CP) = {dp}; GA = {ga}"]),
    }


def main(argv: list[str]) -> int:
    recipes = Recipes(argv[1] if len(argv) > 1 else None)
    tables = yaml.safe_load(TABLES.read_text())
    skipped: list[str] = []
    runs = []
    for table in tables:
        runs += records_of(table, recipes, skipped)
    ids = [r["id"] for r in runs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        print(f"duplicate ids: {dupes}", file=sys.stderr)
        return 1
    header = [
        "NeMo Framework performance summary, every pre-training row, in the published_runs.yaml schema.",
        EVALUATION_ONLY,
        (
            "Source: docs.nvidia.com NeMo Framework user guide performance pages, transcribed in "
            "bench/heldout/nemo_performance_tables.yaml; recipe settings from NVIDIA/NeMo v2.2.0 / "
            "v2.3.0 / v2.4.0."
        ),
        "Generated by bench/heldout/make_nemo_summary.py (its docstring says what is and is not taken).",
    ]
    write_summary(header, runs, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
