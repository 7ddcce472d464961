"""Exports of a PlanResult: a ranked plan (`index`) for a launcher (launch.py: Megatron-LM
arguments, torchtitan overrides + TOML, DeepSpeed JSON) or as rank lists (planner/place/ranks.py:
device mesh, every group's ranks, the rank map), and the text `plan --emit TARGET` prints.
Functions of the result, which stays a value (planner/types.py)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from ..place import ranks
from ..types import PlanResult
from . import launch


def to_megatron_args(result: PlanResult, index: int = 0) -> list[str]:
    """pretrain_gpt.py arguments (megatron-core 0.19)."""
    return launch.megatron_args(result.model, result.plan_workload(index), result.ranked[index])


def to_torchtitan(result: PlanResult, index: int = 0) -> dict:
    """{"config": {section: {field: value}}, "overrides": [...], "toml": str, ...}."""
    return launch.torchtitan(result.model, result.plan_workload(index), result.ranked[index])


def to_deepspeed_config(result: PlanResult, index: int = 0) -> dict:
    """The DeepSpeed JSON (ds_config.json) alone."""
    return launch.deepspeed_config(result.plan_workload(index), result.ranked[index], result.model)


def to_deepspeed(result: PlanResult, index: int = 0) -> dict:
    """{"version", "config": DeepSpeed JSON, "launch_args": Megatron-DeepSpeed arguments}."""
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


def emit_text(target: str, result: PlanResult, as_json: bool) -> str:
    """What `plan --emit TARGET` prints for the best plan; with as_json every target is JSON
    (--json prints only JSON). Raises InvalidInput when the launcher cannot express the plan."""
    payload: Any = EXPORTS[target](result, 0)
    if target == "megatron" and not as_json:
        env = launch.megatron_env(result.ranked[0])
        line = " ".join(f"{k}={v}" for k, v in env.items())
        return (
            f"# {launch.MEGATRON_VERSION}: pretrain_gpt.py arguments"
            + (f"; environment: {line}" if line else "")
            + f"\n{shlex.join(payload)}\n"
        )
    if target == "torchtitan" and not as_json:
        release = payload["release"]
        return (
            f"# {release['version']}: torchtitan.train arguments\n{shlex.join(release['args'])}\n"
            f"# {payload['main_version']}: torchtitan.train arguments\n"
            f"{shlex.join(payload['main_args'])}\n"
        )
    if target == "deepspeed" and not as_json:
        return (
            f"# {payload['version']}\n# ds_config.json\n{json.dumps(payload['config'], indent=2)}"
            f"\n# pretrain_gpt.py arguments\n{shlex.join(payload['launch_args'])}\n"
        )
    return json.dumps(payload, indent=2) + "\n"
