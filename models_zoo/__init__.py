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
from cost_models.specs import Cluster, GpuSpec, ModelSpec

from .hf import is_hf_config, model_from_hf_config
from .inputs import read_data_file, validated

__all__ = [
    "list_presets",
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


def _resolve(kind: str, name: str) -> Path:
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
        if "graph" in data and "tiers" not in data:
            # A custom fabric: reduce the graph to tiers before any cost runs.
            from .fabric_graph import graph_from_data, tiers_from_graph

            graph = graph_from_data(data.pop("graph"), where)
            data["tiers"] = tiers_from_graph(graph, where)
    if num_gpus is not None:
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus <= 0:
            raise InvalidInput(f"--gpus: must be a positive whole number (got {num_gpus!r})")
        data["num_gpus"] = num_gpus
    return validated(Cluster, data, where)
