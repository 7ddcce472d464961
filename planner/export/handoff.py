"""The hand-off directory of `plan ... --out-dir DIR` (CONTRACT.md "Hand-off files"): the best plan
as files a launcher uses as they are. Each framework file holds arguments only (one `--flag value`
per line, no comments, so `$(cat megatron_args.txt)` passes exactly them); what a framework cannot
express is not written and its reason is returned. Functions of a PlanResult; writing is the
CLI's (planner/cli.py)."""

from __future__ import annotations

import json
from typing import Any

from cost_models.errors import InvalidInput
from cost_models.specs import Cluster

from ..place.allocation import Allocation
from ..place.joint import Placement, node_hosts, rank_hosts
from ..types import PlanResult
from . import launch, plan_exports

ARG_FILES = ("megatron_args.txt", "torchtitan_args.txt", "megatron_deepspeed_args.txt")


def arg_lines(args: list[str]) -> str:
    """One flag and its values per line (a tyro subcommand such as activation_checkpoint:full
    on its own line); no quoting, as `$(cat FILE)` splits on whitespace only."""
    lines: list[list[str]] = []
    for arg in args:
        subcommand = ":" in arg and arg.split(":")[0].isidentifier()  # tyro's
        if arg.startswith("--") or subcommand or not lines:
            lines.append([arg])
        else:
            lines[-1].append(arg)
    for line in lines:
        for word in line:
            if any(c.isspace() for c in word) or not word:
                raise InvalidInput(f"cannot write argument {word!r} to a one-line-per-flag file")
    return "".join(" ".join(line) + "\n" for line in lines)


def env_script(env: dict[str, str]) -> str:
    lines = [
        f"# Environment of the plan ({launch.MEGATRON_VERSION}): source it before the launch.",
        "# validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP (before Blackwell)",
        "# and Megatron-FSDP asserts it is not 1 (megatron/training/arguments.py).",
    ]
    lines += [f"export {k}={v}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def framework_files(result: PlanResult) -> tuple[dict[str, str], list[str]]:
    """File name -> text of every framework export of the best plan, and `name: reason` for
    each one the framework cannot express."""
    files: dict[str, str] = {}
    skipped: list[str] = []

    def add(names: tuple[str, ...], make: Any) -> None:
        try:
            texts = make()
        except InvalidInput as exc:
            skipped.extend(f"{name}: {exc}" for name in names)
            return
        files.update(dict(zip(names, texts, strict=True)))

    best = result.ranked[0]
    add(
        ("megatron_args.txt", "megatron_env.sh"),
        lambda: (
            arg_lines(plan_exports.to_megatron_args(result)),
            env_script(launch.megatron_env(best)),
        ),
    )
    add(
        ("torchtitan_args.txt",),
        lambda: (arg_lines(plan_exports.to_torchtitan(result)["release"]["args"]),),
    )

    def deepspeed() -> tuple[str, str]:
        out = plan_exports.to_deepspeed(result)
        return json.dumps(out["config"], indent=2) + "\n", arg_lines(out["launch_args"])

    add(("ds_config.json", "megatron_deepspeed_args.txt"), deepspeed)
    return files, skipped


def launch_script(result: PlanResult, files: dict[str, str], allocation: bool) -> str:
    """A commented launch.sh: the torchrun line of each framework whose files were written
    (one torchrun per node), or srun over SLURM_HOSTFILE with an allocation."""
    lo = result.ranked[0].layout
    per_node = result.cluster.gpus_per_node
    nodes = max(1, -(-lo.world_size // per_node))
    head = [
        "#!/usr/bin/env bash",
        f"# Launch of the best plan: {result.model.name}, {lo.world_size} GPUs "
        f"({nodes} node(s) x {min(per_node, lo.world_size)}), TP{lo.tp} PP{lo.pp} "
        f"DP{lo.dp} CP{lo.cp} EP{lo.ep}.",
        "# Run it on every node with NODE_RANK (0..nodes-1) and MASTER_ADDR (node 0's host) set;",
        "# FRAMEWORK picks the launcher (default: the framework the plan was searched for, else",
        "# the first whose files were written).",
        "# DATA_ARGS: your tokenizer and data (e.g. --tokenizer-type HuggingFaceTokenizer",
        "# --tokenizer-model PATH --data-path PATH); they are not part of the plan.",
        "set -euo pipefail",
        "set -f  # no globbing: arguments such as --moe-layer-freq [0]*3+[1]*58 pass as written",
        'cd "$(dirname "$0")"',
        ": \"${NODE_RANK:=0}\" \"${MASTER_ADDR:=localhost}\" \"${MASTER_PORT:=29500}\"",
        ': "${DATA_ARGS:=}"',
    ]
    if allocation:
        head.append("# SLURM_HOSTFILE lists one host per rank: srun places rank r on line r+1.")
    rdzv = (
        f"torchrun --nnodes {nodes} --nproc-per-node {min(per_node, lo.world_size)} "
        '--node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"'
    )
    cases = []
    if "megatron_args.txt" in files:
        run = (
            f"SLURM_HOSTFILE=SLURM_HOSTFILE srun --distribution=arbitrary --ntasks {lo.world_size} "
            "--gpus-per-task=1 python pretrain_gpt.py"
            if allocation
            else f"{rdzv} pretrain_gpt.py"
        )
        cases.append(
            (
                "megatron",
                "# Megatron-LM (run from a Megatron-LM checkout): pretrain_gpt.py",
                f"source megatron_env.sh\n    {run} $(cat megatron_args.txt) $DATA_ARGS",
            )
        )
    if "torchtitan_args.txt" in files:
        cases.append(
            (
                "torchtitan",
                f"# {launch.TORCHTITAN_RELEASE}: torchtitan.train",
                f"{rdzv} -m torchtitan.train $(cat torchtitan_args.txt)",
            )
        )
    if "ds_config.json" in files:
        cases.append(
            (
                "deepspeed",
                "# Megatron-DeepSpeed (run from its checkout); reads ds_config.json here",
                f"{rdzv} pretrain_gpt.py $(cat megatron_deepspeed_args.txt) $DATA_ARGS",
            )
        )
    return _script(head, _planned_first(cases, result.framework))


def _planned_first(
    cases: list[tuple[str, str, str]], planned: str | None
) -> list[tuple[str, str, str]]:
    """The framework the plan was searched for first (FRAMEWORK's default), and on each other
    framework's case the note that its rules and physics were not the ones priced."""
    if planned is None:
        return cases
    out = []
    for name, comment, command in cases:
        if name != planned:
            comment += (
                f"\n    # (this plan was searched for {planned}: its step time and memory are"
                f" {planned}'s; plan with --framework {name} for this framework's)"
            )
        out.append((name, comment, command))
    return sorted(out, key=lambda c: c[0] != planned)


def _script(head: list[str], cases: list[tuple[str, str, str]]) -> str:
    lines = list(head)
    if not cases:
        lines.append('echo "no framework can run this plan (see the planner\'s output)" >&2')
        lines.append("exit 2")
        return "\n".join(lines) + "\n"
    lines.append(f': "${{FRAMEWORK:={cases[0][0]}}}"')
    lines.append('case "$FRAMEWORK" in')
    for name, comment, command in cases:
        lines += [f"  {name})", f"    {comment}", f"    {command}", "    ;;"]
    names = "|".join(c[0] for c in cases)
    lines += [f'  *) echo "FRAMEWORK must be one of {names}" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"


def handoff_files(
    result: PlanResult, plan_json: dict[str, Any], allocation: bool = False
) -> tuple[dict[str, str], list[str]]:
    """Every file of the hand-off except the allocation's (hostfile, node_ranks,
    SLURM_HOSTFILE, rank_hosts.json), and the exports not written with their reasons. `plan_json`: the `plan --json` object; plan.json
    adds the PlanResult itself (`plan_result`) so `planner emit --from` re-emits exactly."""
    saved = dict(plan_json, plan_result=result.model_dump(mode="json"))
    files = {
        "plan.json": json.dumps(saved, indent=1) + "\n",
        "ranks.json": json.dumps(plan_exports.to_rank_groups(result), indent=1) + "\n",
    }
    exports, skipped = framework_files(result)
    files.update(exports)
    files["launch.sh"] = launch_script(result, exports, allocation)
    return files, skipped


def load_saved_plan(data: Any, where: str) -> PlanResult:
    """The PlanResult saved in a hand-off's plan.json."""
    if not isinstance(data, dict) or not isinstance(data.get("plan_result"), dict):
        raise InvalidInput(
            f"{where}: plan_result: missing (a plan.json written by `plan ... --out-dir`)"
        )
    from pydantic import ValidationError

    try:
        return PlanResult.model_validate(data["plan_result"])
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"{where}: plan_result.{loc}: {first['msg']}") from None


def allocation_files(cluster: Cluster, alloc: Allocation, p: Placement) -> dict[str, str]:
    """The allocation's part of the hand-off, named as CONTRACT.md "Hand-off files" names them:
    `hostfile` (each used host once in node-rank order, the JSON's `hostfile`), `node_ranks`
    (`HOST NODE_RANK` for torchrun), `SLURM_HOSTFILE` (one host per rank, for `srun
    --distribution=arbitrary`), and `rank_hosts.json` (rank -> host and local GPU)."""
    nodes = node_hosts(cluster, alloc, p.host_of_rank)
    return {
        "hostfile": "".join(f"{h}\n" for h in nodes),
        "node_ranks": "".join(f"{h} {i}\n" for i, h in enumerate(nodes)),
        "SLURM_HOSTFILE": "".join(f"{h}\n" for h in nodes for _ in range(cluster.gpus_per_node)),
        "rank_hosts.json": json.dumps(rank_hosts(cluster, alloc, p), indent=1) + "\n",
    }
