"""Exports of a PlanResult: a ranked plan (`index`) for a launcher (launch.py: Megatron-LM
arguments, torchtitan overrides + TOML, DeepSpeed JSON) or as rank lists (planner/place/ranks.py:
device mesh, every group's ranks, the rank map), and the text `plan --emit TARGET` prints.
Functions of the result, which stays a value (planner/types.py)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any

from cost_models.errors import InvalidInput

from ..place import ranks
from ..types import PlanResult
from . import launch


def runs_on(result: PlanResult, framework: str) -> None:
    """InvalidInput when the plan's accelerator runs no `framework` (GpuSpec.frameworks; issue
    28: no Megatron arguments for TPU chips): every framework export checks it first."""
    runs = result.cluster.gpu.frameworks
    if runs is not None and framework not in runs:
        can = ", ".join(runs) if runs else "none of the modelled frameworks"
        raise InvalidInput(
            f"--emit {framework}: {result.cluster.gpu.name} runs {can} (gpu field frameworks); "
            "export the device mesh (--emit mesh)"
        )


def to_megatron_args(result: PlanResult, index: int = 0) -> list[str]:
    """pretrain_gpt.py arguments (megatron-core 0.19)."""
    runs_on(result, "megatron")
    return launch.megatron_args(result.model, result.plan_workload(index), result.ranked[index])


def to_torchtitan(
    result: PlanResult, index: int = 0, recipe: tuple[str, str] | None = None
) -> dict:
    """{"config": {section: {field: value}}, "overrides": [...], "toml": str, ...}."""
    runs_on(result, "torchtitan")
    return launch.torchtitan(
        result.model, result.plan_workload(index), result.ranked[index], recipe
    )


def to_deepspeed_config(result: PlanResult, index: int = 0) -> dict:
    """The DeepSpeed JSON (ds_config.json) alone."""
    runs_on(result, "deepspeed")
    return launch.deepspeed_config(result.plan_workload(index), result.ranked[index], result.model)


def to_deepspeed(result: PlanResult, index: int = 0) -> dict:
    """{"version", "config": DeepSpeed JSON, "launch_args": Megatron-DeepSpeed arguments}."""
    runs_on(result, "deepspeed")
    return launch.deepspeed(result.model, result.plan_workload(index), result.ranked[index])


def to_device_mesh(result: PlanResult, index: int = 0) -> dict:
    """{"mesh_shape": [...], "mesh_dim_names": [...]} for init_device_mesh."""
    return ranks.device_mesh(result.ranked[index].layout)


def to_rank_groups(result: PlanResult, index: int = 0) -> dict[str, list[list[int]]]:
    """Every group's ranks, per axis."""
    return ranks.rank_groups(result.ranked[index].layout, moe=result.model.moe is not None)


def to_rank_map(result: PlanResult, index: int = 0, max_nodes: int | None = None) -> list[dict]:
    """Rows {rank, node, gpu, dp, pp, cp, tp, ep}, for the first `max_nodes` nodes or all."""
    return ranks.rank_map(result.cluster, result.ranked[index].layout, max_nodes)


EXPORTS: dict[str, Callable[[PlanResult, int], Any]] = {
    "megatron": to_megatron_args,
    "torchtitan": to_torchtitan,
    "deepspeed": to_deepspeed,
    "mesh": to_device_mesh,
    "ranks": to_rank_groups,
}
"""`plan --emit TARGET` -> the export it prints."""


def to_megatron(result: PlanResult, index: int = 0) -> dict:
    """{"version", "env": the environment the launch needs, "args": pretrain_gpt.py arguments}."""
    return {
        "version": launch.MEGATRON_VERSION,
        "env": launch.megatron_env(result.ranked[index]),
        "args": to_megatron_args(result, index),
    }


# --framework-version: the releases each export is written for (the first is the default, the
# tested release: tests/frameworks).
FRAMEWORK_VERSIONS = {
    "megatron": ("0.19.2",),
    "torchtitan": ("0.3.0", "main"),
    "deepspeed": ("0.19.8",),
}


def check_version(target: str, version: str | None) -> str:
    known = FRAMEWORK_VERSIONS.get(target)
    if known is None:
        if version is not None:
            raise InvalidInput(f"--framework-version: --emit {target} is not a framework export")
        return ""
    if version is None:
        return known[0]
    if version not in known:
        raise InvalidInput(
            f"--framework-version: {target} exports are written for {', '.join(known)} "
            f"(got {version!r})"
        )
    return version


def emit_text(
    target: str, result: PlanResult, as_json: bool, version: str | None = None
) -> tuple[str, str]:
    """(stdout, stderr) of `plan --emit TARGET` for the best plan, one framework version
    (`version`, default the tested release). With as_json every target is JSON (--json prints
    only JSON); DeepSpeed's config is JSON on stdout, its header and launcher arguments on
    stderr. Raises InvalidInput when the launcher cannot express the plan."""
    version = check_version(target, version)
    if target == "megatron":
        payload = to_megatron(result)
        line = " ".join(f"{k}={v}" for k, v in payload["env"].items())
        header = f"# {launch.MEGATRON_VERSION}: pretrain_gpt.py arguments" + (
            f"; environment: {line}" if line else ""
        )
        if as_json:
            return json.dumps(payload["args"], indent=2) + "\n", ""
        return f"{header}\n{shlex.join(payload['args'])}\n", ""
    if target == "torchtitan":
        tt = to_torchtitan(result)
        if as_json:
            return json.dumps(tt, indent=2) + "\n", ""
        name, args = (
            (tt["release"]["version"], tt["release"]["args"])
            if version != "main"
            else (tt["main_version"], tt["main_args"])
        )
        return f"# {name}: torchtitan.train arguments\n{shlex.join(args)}\n", ""
    if target == "deepspeed":
        ds = to_deepspeed(result)
        if as_json:
            return json.dumps(ds, indent=2) + "\n", ""
        err = (
            f"# {ds['version']}: stdout is ds_config.json; Megatron-DeepSpeed pretrain_gpt.py "
            f"arguments:\n{shlex.join(ds['launch_args'])}\n"
        )
        return json.dumps(ds["config"], indent=2) + "\n", err
    if target == "ranks":
        return _compact_json(EXPORTS[target](result, 0)) + "\n", ""
    return json.dumps(EXPORTS[target](result, 0), indent=2) + "\n", ""


_NUMBER_LIST = re.compile(r"\[\s*((?:-?\d+,\s*)*-?\d+)\s*\]")


def _compact_json(payload: Any) -> str:
    """Indented JSON with every list of numbers on one line (issue 28: `--emit ranks` was one
    integer per line, 10,350 lines at 1,024 GPUs); the same JSON value."""
    text = json.dumps(payload, indent=2)
    return _NUMBER_LIST.sub(lambda m: f"[{', '.join(m.group(1).replace(',', ' ').split())}]", text)
