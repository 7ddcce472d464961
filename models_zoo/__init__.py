"""Model, GPU and cluster presets (JSON data with their public sources) and the loaders for them.

A model comes from a preset name, a YAML/JSON file in the model schema (CONTRACT.md), or a Hugging
Face ``config.json``; a cluster from a preset name or a YAML/JSON file. Every loader raises
``InvalidInput`` naming the file, the field and the rule.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from cost_models.errors import InvalidInput
from cost_models.params import total_params
from cost_models.specs import Cluster, GpuSpec, ModelSpec

from .hf import is_hf_config, model_from_hf_config
from .inputs import read_data_file, validated
from .kernel_tables import resolve_kernels

__all__ = [
    "list_presets",
    "preset_summaries",
    "load_cluster",
    "load_gpu",
    "load_model",
    "read_data_file",
    "resolve_model_name",
]

_ROOT = Path(__file__).parent
_KINDS = ("models", "gpus", "clusters")
_ALIASES: dict[str, dict[str, str]] = json.loads((_ROOT / "aliases.json").read_text())


def list_presets(kind: str) -> list[str]:
    """Preset ids of one kind (`models`, `gpus`, `clusters`), sorted."""
    if kind not in _KINDS:
        raise InvalidInput(f"preset kind {kind!r} is not one of {', '.join(_KINDS)}")
    return sorted(p.stem for p in (_ROOT / kind).glob("*.json"))


def preset_summaries(kind: str) -> list[dict[str, Any]]:
    """One row of key specs per preset of a kind (`planner presets`, issue 28): clusters their
    GPU, size, node, NVLink domain and fabric; models their parameter counts and shape; GPUs
    their peaks and memory."""
    rows = []
    for name in list_presets(kind):
        if kind == "clusters":
            rows.append(_cluster_row(name, load_cluster(name)))
        elif kind == "models":
            rows.append(_model_row(name, load_model(name)))
        else:
            g = load_gpu(name)
            rows.append({
                "name": name, "gpu": g.name, "peak_bf16_tflops": g.peak_bf16_tflops,
                "peak_fp8_tflops": g.peak_fp8_tflops, "hbm_gib": g.hbm_gib,
                "nvlink_gb_per_s": g.nvlink_gb_per_s,
            })  # fmt: skip
    return rows


def _cluster_row(name: str, c: Cluster) -> dict[str, Any]:
    return {
        "name": name,
        "gpu": c.gpu.id,
        "num_gpus": c.num_gpus,
        "max_gpus": c.max_gpus or c.num_gpus,
        "gpus_per_node": c.gpus_per_node,
        "nvlink_domain": c.tiers[0].domain_size,
        "fabric": [
            {"tier": t.name, "domain_size": t.domain_size, "gb_per_s": t.bandwidth_gb_per_s,
             "kind": t.kind}
            for t in c.tiers
        ],
    }  # fmt: skip


def _model_row(name: str, m: ModelSpec) -> dict[str, Any]:
    return {
        "name": name,
        "model": m.name,
        "params_total": total_params(m),
        "params_active": total_params(m, active_only=True),
        "num_layers": m.num_layers,
        "hidden_size": m.hidden_size,
        "num_experts": m.moe.num_experts if m.moe else None,
        "seq_len": m.seq_len,
    }


_FILE_SUFFIXES = (".json", ".yaml", ".yml")


def _resolve(kind: str, name: str) -> Path:
    if "/" in name or "\\" in name or name.lower().endswith(_FILE_SUFFIXES):
        # Meant as a file (a path or a file name), not a preset: say so, not 50 preset names.
        raise InvalidInput(f"file not found: {name}")
    key = _ALIASES.get(kind, {}).get(name.lower(), name.lower())
    path = _ROOT / kind / f"{key}.json"
    if path.is_file():
        return path
    known = list_presets(kind) + sorted(_ALIASES.get(kind, {}))
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
    singular = kind.rstrip("s")
    raise InvalidInput(f"unknown {singular} preset {name!r} (not a file either){hint}")


def resolve_model_name(name: str) -> str:
    """The preset id an alias or preset name refers to (raises InvalidInput if unknown)."""
    return _resolve("models", name).stem


def load_model(name_or_path: str | ModelSpec) -> ModelSpec:
    """A model from a preset name, a model YAML/JSON file, or a Hugging Face config.json."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    path = Path(name_or_path)
    if path.is_file():
        data = read_data_file(path)
        if isinstance(data, dict) and is_hf_config(data):
            return model_from_hf_config(data, where=str(path))
        return validated(ModelSpec, data, str(path))
    preset = _resolve("models", name_or_path)
    return validated(ModelSpec, json.loads(preset.read_text()), f"preset {preset.stem}")


def load_gpu(name_or_spec: str | GpuSpec) -> GpuSpec:
    """A GPU from its id (CONTRACT.md lists them) or an inline spec."""
    if isinstance(name_or_spec, GpuSpec):
        return name_or_spec
    path = _resolve("gpus", name_or_spec)
    return validated(GpuSpec, json.loads(path.read_text()), f"gpu preset {path.stem}")


def load_cluster(name_or_path: str | Cluster, num_gpus: int | None = None) -> Cluster:
    """A cluster from a preset or file; `num_gpus` sizes it (default: the file's own size)."""
    if isinstance(name_or_path, Cluster):
        data: dict[str, Any] = name_or_path.model_dump()
        where = f"cluster {name_or_path.name}"
    else:
        path = Path(name_or_path)
        if path.is_file():
            data, where = read_data_file(path), str(path)
        else:
            preset = _resolve("clusters", name_or_path)
            data, where = json.loads(preset.read_text()), f"cluster preset {preset.stem}"
        if not isinstance(data, dict):
            raise InvalidInput(f"{where}: expected a mapping of fields, got {type(data).__name__}")
        data = dict(data)
        if isinstance(data.get("gpu"), str):
            data["gpu"] = load_gpu(data["gpu"]).model_dump()
        data = resolve_kernels(data, path.parent if path.is_file() else None, where)
        if "graph" in data and "tiers" not in data:
            # A custom fabric: reduce the graph to tiers before any cost runs.
            from .fabric_graph import graph_from_data, tiers_from_graph

            graph = graph_from_data(data.pop("graph"), where)
            data["tiers"] = tiers_from_graph(graph, where)
    if num_gpus is not None:
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus <= 0:
            raise InvalidInput(f"--gpus: must be a positive whole number (got {num_gpus!r})")
        limit = _check_size(data, num_gpus, where)
        data["num_gpus"] = num_gpus
        if limit > num_gpus:
            data["max_gpus"] = limit  # a resized cluster keeps its bound
    return validated(Cluster, data, where)


def _size_limit(data: dict[str, Any]) -> int:
    """The most GPUs a cluster description stands for: its max_gpus, else its num_gpus."""
    limit = data.get("max_gpus") or data.get("num_gpus")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else 0


def _check_size(data: dict[str, Any], num_gpus: int, where: str) -> int:
    """--gpus above the description's size is refused (issue 28): a preset of 576 GPUs says
    nothing about the fabric of 4,096; a file that means more states num_gpus or max_gpus."""
    limit = _size_limit(data)
    if limit and num_gpus > limit:
        raise InvalidInput(
            f"--gpus {num_gpus:,}: {where} stands for at most {limit:,} GPUs; ask for at most "
            f"{limit:,}, or give a cluster file whose num_gpus (or max_gpus, the largest size "
            f"its fabric stands for) covers {num_gpus:,}"
        )
    return limit
