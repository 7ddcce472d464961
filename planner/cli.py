"""The `planner` command: parse, call the library, render. The only module that prints or exits.

Exit codes: 0 success, 1 no feasible plan (with the reasons), 2 bad input (one message naming the
field and the rule). With --json only JSON goes to stdout; messages go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

import models_zoo
from cost_models.errors import InvalidInput, NoFeasiblePlan, PlannerError, describe_validation_error
from cost_models.framework import DEFAULT_FRAMEWORK, FRAMEWORKS
from cost_models.framework import profile as framework_profile
from cost_models.goodput import Reliability
from cost_models.specs import RECOMPUTE_MODULES
from cost_models.tp_overlap import TP_OVERLAP_CHOICES
from models_zoo.inputs import read_data_file

from . import (
    DISTRIBUTION,
    __version__,
    api,
    convenience,
    goodput_plan,
    network_bom,
    report,
    whatif,
    whatif_goodput,
)
from .export.plan_exports import emit_text
from .goodput_plan import OBJECTIVES
from .place.allocation import Allocation, load_allocation, read_line, read_summary
from .reliability import load_reliability
from .report import plot
from .report.bill_view import render_bill
from .report.calibration import calibration_lines, constants_lines
from .report.design_view import design_dict, render_design, render_design_html, save_frontier_plot
from .report.findings import plan_warnings
from .report.goodput_view import goodput_dict, goodput_line
from .report.placed import PlacedView, placed_view
from .report.validation import render_validation, validation_markdown
from .report.whatif_view import render_whatif, whatif_dict
from .types import PlanResult, SearchSpace
from .validate import validate_file

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT = 0, 1, 2
EXIT_STDOUT_CLOSED = 141
"""128 + SIGPIPE (13): the status a shell reports for a filter whose reader went away
(`yes | head` -> PIPESTATUS 141), which is what `planner presets | head` ends with."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors share our one-line format."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # --gpu must not silently mean --gpus
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InvalidInput(f"{self.prog}: {message}")


def _positive(cast: type, noun: str) -> Any:
    """An argparse type: `cast(text)`, which must be > 0 (messages name the rule)."""

    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun} (got {text!r})") from None
        if not math.isfinite(value):  # float("inf") / float("nan") parse, but are no input
            raise argparse.ArgumentTypeError(f"must be a finite number (got {text!r})")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive (got {value})")
        return value

    return parse


_positive_int = _positive(int, "a whole number")
_positive_float = _positive(float, "a number")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="preset name, model YAML/JSON, or HF config.json")
    p.add_argument("--cluster", required=True, help="preset name or cluster YAML/JSON")
    p.add_argument("--gpus", type=_positive_int, help="number of GPUs of the cluster to use")
    p.add_argument("--seq-len", type=_positive_int, help="training sequence length")
    p.add_argument(
        "--precision",
        choices=("bf16", "fp8", "mxfp8", "nvfp4"),
        help="training precision (mxfp8, nvfp4: Blackwell only)",
    )
    p.add_argument("--json", action="store_true", help="print JSON only (docs/contract.md)")


def _add_framework(p: argparse.ArgumentParser, *, allow_none: bool = False) -> None:
    none = (
        "; none: no framework's rules (exploration, e.g. DeepSeek's DualPipe: the plan may not "
        "be launchable by any exporter)"
        if allow_none
        else ""
    )
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS + (("none",) if allow_none else ()),
        help="the framework the plan is for: its rank orders, sharding, schedules and physics "
        f"(cost_models/framework.py; default: the --emit target if it is a framework, else "
        f"{DEFAULT_FRAMEWORK}: {framework_profile(DEFAULT_FRAMEWORK).version}{none})",
    )


def _framework(args: argparse.Namespace) -> str | None:
    """--framework (None for `none`), else the --emit target when it is a framework, else the
    default."""
    if args.framework == "none":
        return None
    if args.framework:
        return args.framework
    emit = getattr(args, "emit", None)
    if emit in FRAMEWORKS:
        return emit
    # the default: megatron, or none on an accelerator that runs no modelled framework (a TPU)
    return api.AUTO_FRAMEWORK


def _add_global_batch(p: argparse.ArgumentParser) -> None:
    """`plan`: a fixed global batch, or a range each plan picks its own batch from."""
    batch = p.add_mutually_exclusive_group()
    batch.add_argument("--global-batch", type=_positive_int, help="global batch in sequences")
    batch.add_argument(
        "--global-batch-range",
        nargs=2,
        type=int,
        metavar=("MIN", "MAX"),
        help="let each plan take a global batch in [MIN, MAX] sequences; rank by tokens/s",
    )


def _plan_global_batch(args: argparse.Namespace) -> int | tuple[int, int] | None:
    if getattr(args, "global_batch_range", None) is not None:
        return tuple(args.global_batch_range)
    return args.global_batch


def _headroom(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1) (got {value})")
    return value


def _add_headroom(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--memory-headroom",
        type=_headroom,
        default=api.DEFAULT_MEMORY_HEADROOM,
        help="fraction of HBM kept free; fit is judged against the rest (default 0.10)",
    )


def _add_search(p: argparse.ArgumentParser) -> None:
    """Search constraints and solver options of `plan`; each maps to one SearchSpace/SolverOptions
    field (SEARCH_FLAGS, tested in tests/integration/search/test_sat_cli.py)."""
    _add_ranking(p)
    p.add_argument("--max-nodes", type=_positive_int, help="use at most this many nodes")
    for axis in ("tp", "pp", "dp", "cp", "ep"):
        p.add_argument(f"--{axis}", type=_positive_int, help=f"pin the {axis.upper()} degree")
    for axis in ("tp", "pp", "cp", "ep"):
        p.add_argument(f"--max-{axis}", type=_positive_int, help=f"largest {axis.upper()} tried")
    _add_headroom(p)
    _add_layout_choices(p)
    p.add_argument(
        "--moe-dispatcher",
        choices=("alltoall", "deepep"),
        help="MoE token exchange: per-expert all-to-all (default) or DeepEP",
    )
    _add_memory_options(p)
    _add_moe_routing(p)
    _add_solver(p)


def _add_ranking(p: argparse.ArgumentParser) -> None:
    """How many plans `plan` ranks, which one it recommends, and how long it searches."""
    p.add_argument("--top", type=_positive_int, default=5, help="ranked plans to show")
    p.add_argument(
        "--top-variants",
        action="store_true",
        default=None,
        help="rank every plan, showing the near variants of the best (other ZeRO stages and rank "
        "orders); default: one plan per family (degrees, vp, micro-batch, recompute)",
    )
    p.add_argument(
        "--simplicity-tolerance",
        type=float,
        help="recommend the simplest plan within this fraction of the fastest (default 0.01; "
        "0: the fastest)",
    )
    p.add_argument(
        "--time-limit",
        type=_positive_float,
        default=60.0,
        help="wall-clock limit of the whole search, s (the backstop: with --deterministic the "
        "search stops at its work limit first, see --work-limit)",
    )
    p.add_argument(
        "--work-limit",
        type=_positive_float,
        help="with --deterministic (the default): stop the search after this much work, in "
        "units of about a millisecond on the reference machine, at the same point on every "
        "machine (default: half the --time-limit's worth)",
    )


def _add_layout_choices(p: argparse.ArgumentParser) -> None:
    """The layout choices `plan` searches beyond the degrees (SearchSpace fields)."""
    p.add_argument(
        "--recompute",
        nargs="+",
        choices=("none", "selective", "full"),
        help="allowed activation recompute modes (default: all)",
    )
    p.add_argument("--zero", nargs="+", type=int, choices=(0, 1, 2, 3), help="allowed ZeRO stages")
    p.add_argument("--micro-batches", nargs="+", type=_positive_int, help="micro-batch sizes")
    p.add_argument("--max-vp", type=_positive_int, help="largest interleaving tried")
    p.add_argument("--no-order-search", action="store_true", help="keep the rank order tp,cp,dp,pp")
    p.add_argument(
        "--all-orders",
        action="store_true",
        help="search all 24 rank orders, not only the two Megatron-Core builds (exploration: "
        "most cannot be launched)",
    )
    p.add_argument(
        "--stage-split",
        choices=("even", "search"),
        help="layers per pipeline stage: even (default) or search (CP-SAT split where the even "
        "one is out of memory; slower, fixed global batch only)",
    )
    p.add_argument(
        "--pp-schedules",
        nargs="+",
        choices=("1f1b", "dualpipe"),
        help="pipeline schedules tried (default 1f1b; dualpipe: DeepSeek-V3's)",
    )
    p.add_argument(
        "--ep-overlap",
        action="store_const",
        const=(False, True),
        help="also try MoE all-to-all overlap (Megatron --overlap-moe-expert-parallel-comm)",
    )
    p.add_argument(
        "--cpu-offload-layers",
        type=_positive_int,
        default=None,
        help="every plan offloads the first N layers' activations to the host (Megatron "
        "--cpu-offloading-num-layers): the search keeps to pp 1 and recompute none",
    )
    for part in ("embedding", "loss"):
        p.add_argument(
            f"--account-for-{part}-in-pipeline-split",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"every pp > 1 plan counts the {part} as one decoder layer in its stage split "
            f"(Megatron --account-for-{part}-in-pipeline-split; --no-...: never). Unset, with "
            "the other unset too: counted only where pp*vp exceeds the layers by one (loss) "
            "or two (both)",
        )


def _add_solver(p: argparse.ArgumentParser) -> None:
    """Which engine runs the search, and how (SolverOptions fields)."""
    p.add_argument(
        "--engine",
        choices=("branch-and-bound", "exhaustive"),
        default="branch-and-bound",
        help="search engine: branch-and-bound (default: exact best-first search; its bounds and "
        "stage partition use CP-SAT) or the exhaustive oracle",
    )
    p.add_argument(
        "--deterministic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one solver worker, a fixed seed and the work limit, so that the same input gives "
        "the same plans (default on; off: the time limit alone stops a long search)",
    )
    p.add_argument("--seed", type=int, default=0, help="solver random seed")


# flag dest -> planner.plan keyword (a SearchSpace or SolverOptions field, or max_nodes)
SEARCH_FLAGS = {
    "top": "top_k",
    "top_variants": "top_variants",
    "simplicity_tolerance": "simplicity_tolerance",
    "time_limit": "time_limit_s",
    "work_limit": "work_limit",
    "max_nodes": "max_nodes",
    **{a: a for a in ("tp", "pp", "dp", "cp", "ep")},
    **{f"max_{a}": f"max_{a}" for a in ("tp", "pp", "cp", "ep")},
    "memory_headroom": "memory_headroom",
    "recompute": "recompute",
    "zero": "zero_stages",
    "micro_batches": "micro_batches",
    "max_vp": "max_vp",
    "no_order_search": "search_order",
    "all_orders": "rank_orders",
    "stage_split": "stage_split",
    "pp_schedules": "pp_schedules",
    "ep_overlap": "ep_overlap",
    "cpu_offload_layers": "cpu_offload_layers",
    **{f"account_for_{x}_in_pipeline_split": f"account_for_{x}_in_pipeline_split"
       for x in ("embedding", "loss")},
    "engine": "engine",
    "deterministic": "deterministic",
    "seed": "seed",
    "objective": "objective",
}


def search_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The plan() keywords the given search flags ask for (unset flags keep library defaults)."""
    out: dict[str, Any] = {}
    for dest, key in SEARCH_FLAGS.items():
        value = getattr(args, dest, None)  # whatif has no --objective (goodput sweeps set it)
        if value is None:
            continue
        if dest == "no_order_search":
            out[key] = not value
        elif dest == "all_orders":
            if value:
                out[key] = None  # SearchSpace.rank_orders None: every order
        elif isinstance(value, list):
            out[key] = tuple(value)
        else:
            out[key] = value
    return out


EMIT_TARGETS = ("megatron", "torchtitan", "deepspeed", "mesh", "ranks")


def _add_report_flags(p: argparse.ArgumentParser) -> None:
    """Output formats of `plan` (issue 5): the report as Markdown or HTML, launcher exports."""
    p.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    p.add_argument("--html", metavar="FILE", help="also write the report as one offline HTML file")
    p.add_argument(
        "--emit",
        choices=EMIT_TARGETS,
        help="print the best plan for a launcher: Megatron-LM args, torchtitan args, DeepSpeed "
        "JSON (its launcher arguments on stderr), device-mesh shape, or every group's ranks",
    )
    p.add_argument(
        "--framework-version",
        metavar="VERSION",
        help="the release the --emit export is written for (megatron 0.19.2; torchtitan 0.3.0 "
        "or main; deepspeed 0.19.8); default: the tested release, named in the header",
    )


def _add_goodput(p: argparse.ArgumentParser, *, objective: bool) -> None:
    """Goodput flags (docs/goodput.md): figures, their inputs, and (plan) the ranking objective."""
    p.add_argument(
        "--goodput",
        action="store_true",
        help="add each plan's goodput: interruptions/day, checkpoint interval and write time, "
        "restart time, ETTR, goodput tokens/s/GPU (failures, checkpoints, stragglers)",
    )
    p.add_argument(
        "--reliability",
        metavar="FILE",
        help="YAML/JSON overriding the goodput model's failure rates, checkpoint, restart, "
        "spare and straggler inputs (implies --goodput)",
    )
    if objective:
        p.add_argument(
            "--objective",
            choices=OBJECTIVES,
            default="step_time",
            help="rank by step time (default) or by goodput tokens/s/GPU (implies --goodput)",
        )


def _reliability(args: argparse.Namespace) -> Reliability | None:
    """The goodput inputs when goodput was asked for (None: no goodput figures)."""
    wanted = args.goodput or args.reliability or getattr(args, "objective", "") == "goodput"
    return load_reliability(args.reliability) if wanted else None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="planner",
        description="Find the parallel layout and placement with "
        "the most training throughput for a model on a cluster.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument(
        "--version", action="version", version=f"planner {__version__} ({DISTRIBUTION})"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_plan(sub)
    _add_estimate(sub)
    _add_validate(sub)
    _add_whatif(sub)
    _add_bill(sub)
    _add_design(sub)
    _add_calibration(sub)
    _add_presets(sub)
    _add_emit(sub)
    return parser


def _add_plan_inputs(p: argparse.ArgumentParser) -> None:
    """The workload, layout and search flags of `plan`, one definition shared with `whatif`
    (whatif's baseline is `plan`'s best for the same flags)."""
    _add_common(p)
    _add_framework(p, allow_none=True)
    _add_global_batch(p)
    _add_search(p)


def _plan_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """convenience.plan_for's keywords for the flags _add_plan_inputs defines."""
    return {
        "num_gpus": args.gpus,
        "global_batch": _plan_global_batch(args),
        "seq_len": args.seq_len,
        "precision": args.precision,
        "moe_dispatcher": args.moe_dispatcher,
        "framework": _framework(args),
        "workload_fields": _workload_fields(args),
        **search_kwargs(args),
    }


def _add_plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="search for the best layout and placement")
    _add_plan_inputs(p)

    _add_report_flags(p)
    _add_goodput(p, objective=True)
    _add_allocation(p)
    p.add_argument(
        "--stability",
        action="store_true",
        help="re-plan at both ends of each calibration range: is the best plan still best?",
    )
    p.add_argument(
        "--stability-range",
        action="append",
        metavar="NAME=LO:HI",
        help="override one range (gemm_efficiency, attention_efficiency, nvlink_efficiency,"
        " inter_node_efficiency); repeatable",
    )


def _add_dp_shard(e: argparse.ArgumentParser) -> None:
    e.add_argument(
        "--dp-shard",
        type=_positive_int,
        default=None,
        metavar="N",
        help="hybrid sharding (HSDP, torchtitan, ZeRO >= 2): shard over N of the dp ranks (x cp; "
        "with EP the experts over N*cp*tp/ep), replicate over dp / N "
        "(data_parallel_shard_degree N, data_parallel_replicate_degree dp / N); default: "
        "shard over all of dp",
    )


def _add_estimate(sub: Any) -> None:
    e = sub.add_parser("estimate", help="score one given layout")
    _add_common(e)
    _add_framework(e)
    e.add_argument("--global-batch", type=_positive_int, required=True)
    for axis in ("tp", "pp", "dp"):
        e.add_argument(f"--{axis}", type=_positive_int, required=True)
    for axis in ("cp", "ep", "vp"):
        e.add_argument(f"--{axis}", type=_positive_int, default=1)
    e.add_argument("--micro-batch", type=_positive_int, default=1)
    e.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    e.add_argument(
        "--recompute-modules",
        nargs="+",
        choices=RECOMPUTE_MODULES,
        help="selective: Megatron modules recomputed (default: core_attn)",
    )
    e.add_argument(
        "--recompute-method",
        choices=("uniform", "block"),
        help="full: uniform groups, or only the first N layers of each chunk (block)",
    )
    e.add_argument(
        "--recompute-num-layers", type=_positive_int, help="full: group size / recomputed layers"
    )
    e.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1)
    _add_dp_shard(e)
    e.add_argument(
        "--sequence-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Megatron sequence parallelism (default: on whenever TP > 1, as plan searches)",
    )
    e.add_argument(
        "--tp-comm-overlap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="TP collectives overlapped with their GEMMs (Megatron --tp-comm-overlap, torchtitan "
        "async TP; needs --tp > 1; default: the framework's)",
    )
    e.add_argument(
        "--tp-overlap",
        choices=TP_OVERLAP_CHOICES,
        default=None,
        metavar="CONFIG",
        help="how --tp-comm-overlap runs: te_default (Transformer Engine 2.x userbuffers "
        "defaults, what Megatron-LM runs without --tp-comm-overlap-cfg), te1_default (the same "
        "on TE 1.x, no SM margin), a Megatron-Bridge userbuffers_* config, or "
        "collective_matmul (PyTorch async TP); default: the framework's",
    )
    _add_headroom(e)
    e.add_argument(
        "--pp-schedule",
        choices=("1f1b", "dualpipe"),
        default="1f1b",
        help="pipeline schedule (dualpipe: DeepSeek-V3's bidirectional schedule)",
    )
    e.add_argument(
        "--ep-overlap",
        action="store_true",
        help="overlap MoE all-to-all with another micro-batch's compute "
        "(Megatron --overlap-moe-expert-parallel-comm)",
    )
    e.add_argument(
        "--moe-dispatcher",
        choices=("alltoall", "deepep"),
        default="alltoall",
        help="MoE token exchange: per-expert all-to-all, or DeepEP (per-node, NVLink forwarding)",
    )
    e.add_argument(
        "--cpu-offload-layers",
        type=_positive_int,
        default=None,
        help="CPU activation offloading of the first N layers over the GPU's host link "
        "(Megatron --cpu-offloading-num-layers; needs --pp 1 and --recompute none)",
    )
    for part in ("embedding", "loss"):
        e.add_argument(
            f"--account-for-{part}-in-pipeline-split",
            action="store_true",
            help=f"the {part} counts as one decoder layer in the pipeline split (Megatron "
            f"--account-for-{part}-in-pipeline-split): (num_layers + counted) / (pp * vp) "
            "layers per chunk, one fewer in the chunk that holds it",
        )
    e.add_argument(
        "--explain",
        action="store_true",
        help="say which kernel / collective table priced each term, and whether each look-up "
        "was measured, interpolated or extrapolated (--json always carries it as `kernels`)",
    )
    _add_memory_options(e)
    _add_moe_routing(e)
    _add_goodput(e, objective=False)


def _add_validate(sub: Any) -> None:
    v = sub.add_parser("validate", help="compare predictions with measured runs")
    v.add_argument("--data", required=True, help="YAML list of runs (published_runs.yaml schema)")
    v.add_argument("--json", action="store_true")
    v.add_argument("--markdown", action="store_true", help="print the docs/accuracy.md page")
    v.add_argument(
        "--cluster-file",
        help="price the records whose GPU matches this (calibrated) cluster file on it",
    )


def _add_presets(sub: Any) -> None:
    s = sub.add_parser("presets", help="list built-in presets")
    s.add_argument("kind", nargs="?", choices=("models", "gpus", "clusters"))
    s.add_argument("--json", action="store_true")
    s.add_argument(
        "--constants",
        metavar="ID",
        help="with gpus or clusters: which constants of preset (or cluster file) ID are datasheet"
        " values, measured, or assumptions",
    )


def _emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def _add_allocation(p: argparse.ArgumentParser) -> None:
    """Placement on the allocation a job really gets (docs/contract.md, docs/cli.md)."""
    p.add_argument(
        "--topology",
        help="Slurm topology.conf (tree or block format), Slurm topology.yaml (tree, block, flat)"
        " or the product's levels YAML",
    )
    p.add_argument(
        "--topology-name",
        help="which topology of a topology.yaml (the partition's Topology=; default: the first"
        " with cluster_default: true, else the first)",
    )
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument("--hosts", help="hostfile of the allocation (one host per line, slots=N)")
    hosts.add_argument("--nodelist", help="Slurm hostlist of the allocation, e.g. gpu[001-064]")
    p.add_argument("--exclude", help="Slurm hostlist of drained hosts to leave out")
    p.add_argument(
        "--place-top",
        type=_positive_int,
        default=3,
        help="layouts shortlisted under ideal placement and placed on the allocation",
    )
    p.add_argument(
        "--out-dir",
        help="write the hand-off (any plan): plan.json, ranks.json, each framework's argument "
        "files, launch.sh; with an allocation also hostfile, node_ranks, SLURM_HOSTFILE and "
        "rank_hosts.json",
    )
    p.add_argument(
        "--other-traffic",
        metavar="FILE",
        help="YAML/JSON `uplinks: {SWITCH: SHARE}`: the share (0-0.75) of each named switch's "
        "uplink other jobs' traffic takes; the placement prices and avoids it",
    )
    p.add_argument(
        "--export-placement-model",
        metavar="FILE",
        help="debug: write the CP-SAT placement model to FILE (.txt: text proto, else binary; "
        "several layouts: FILE-1, FILE-2, ...)",
    )


def _add_moe_routing(p: argparse.ArgumentParser) -> None:
    """How a MoE's router spreads its tokens (Workload.moe_capacity_factor, moe_pad_to_capacity,
    moe_force_balance; compute.moe_routing prices them, `--explain` says which applied)."""
    p.add_argument(
        "--moe-capacity-factor",
        type=_positive_float,
        help="token-drop MoE: each expert takes at most factor x its mean rows, the rest are "
        "dropped (Megatron --moe-expert-capacity-factor; default: dropless)",
    )
    p.add_argument(
        "--moe-pad-to-capacity",
        action="store_true",
        default=None,
        help="pad every expert's input to its capacity (Megatron "
        "--moe-pad-expert-input-to-capacity; needs --moe-capacity-factor)",
    )
    p.add_argument(
        "--moe-force-balance",
        action="store_true",
        default=None,
        help="routing forced even, a benchmarking mode (Megatron "
        "--moe-router-force-load-balancing, torchtitan --debug.moe_force_load_balance): the "
        "busiest expert-parallel rank carries the mean load, not the 1.15x assumed otherwise",
    )


def _add_memory_options(p: argparse.ArgumentParser) -> None:
    """Workload options that change what training keeps in memory (cost_models/specs.py
    Workload; sources there and in docs/cost_model.md#memory)."""
    p.add_argument(
        "--optimizer-moments",
        choices=("fp32", "bf16"),
        help="dtype of Adam's moments (default fp32; bf16: Megatron --use-precision-aware-"
        "optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, DeepSeek-V3; Megatron runs "
        "it from ZeRO-1 up: the distributed optimizer or Megatron-FSDP)",
    )
    p.add_argument(
        "--activation-func-fp8-input-store",
        action="store_true",
        default=None,
        help="keep SwiGLU inputs for backward in fp8 (Megatron-Core "
        "activation_func_fp8_input_store; DeepSeek-V3)",
    )
    p.add_argument(
        "--attention-output-store",
        choices=("separate", "e5m6"),
        help="attention output kept for backward: separate bf16 + GEMM-input copies (default) "
        "or one E5M6 copy (DeepSeek-V3; no launcher here has it)",
    )
    p.add_argument(
        "--cp-comm-type",
        choices=("p2p", "a2a"),
        help="context-parallel attention under Megatron (--cp-comm-type): p2p, Transformer "
        "Engine's K/V ring, or a2a, its all-to-all of Q, K, V and the output (DeepSpeed-Ulysses "
        "style), which takes sliding windows and attention sinks (default: p2p, a2a for a "
        "model with either, as Megatron-Bridge's gpt-oss recipes)",
    )
    p.add_argument(
        "--main-grads",
        choices=("fp32", "bf16"),
        help="dtype of the gradient buffer and its data-parallel reduction (default fp32, "
        "Megatron-LM's under bf16; bf16: Megatron --grad-reduce-in-bf16, NVIDIA's performance "
        "recipes; with --framework deepspeed bf16, DeepSpeed's own, the only one it plans)",
    )
    p.add_argument(
        "--fp8-params",
        action="store_true",
        default=None,
        help="keep the primary weights in fp8 (nvfp4: NVFP4) and all-gather them so "
        "(Megatron --fp8-param-gather / --fp4-param-gather; needs a quantized --precision)",
    )
    p.add_argument(
        "--bf16-layers-start",
        type=int,
        help="first N transformer layers in bf16 under --precision fp8 | mxfp8 | nvfp4 "
        "(Megatron --first-last-layers-bf16 --num-layers-at-start-in-bf16; default 0)",
    )
    p.add_argument(
        "--bf16-layers-end",
        type=int,
        help="last N transformer layers in bf16 (Megatron --num-layers-at-end-in-bf16; "
        "default 0)",
    )


def _workload_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The memory options and MoE routing the command line set (_add_memory_options,
    _add_moe_routing)."""
    names = (
        "optimizer_moments",
        "activation_func_fp8_input_store",
        "attention_output_store",
        "main_grads",
        "fp8_params",
        "bf16_layers_start",
        "bf16_layers_end",
        "moe_capacity_factor",
        "moe_pad_to_capacity",
        "moe_force_balance",
    )
    fields = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if getattr(args, "cp_comm_type", None) is not None:
        fields["cp_attention"] = {"p2p": "fused_ring", "a2a": "a2a"}[args.cp_comm_type]
    return fields


PROGRESS_AFTER_S = 2.0
"""A search or sweep still running after this long gets a progress line on stderr (issue 28)."""


class _Elapsed:
    """A line rich re-renders on every refresh: what runs and for how long."""

    def __init__(self, what: str) -> None:
        self.what, self.start = what, time.perf_counter()

    def __rich__(self) -> str:
        return f"[dim]{escape(self.what)}: {time.perf_counter() - self.start:,.0f} s[/dim]"


@contextlib.contextmanager
def _progress(what: str) -> Iterator[None]:
    """A transient progress line on stderr for work that runs past PROGRESS_AFTER_S; only on a
    terminal (never in a pipe, so never mixed into --json stdout or a log)."""
    err = Console(stderr=True)
    if not err.is_terminal:
        yield
        return
    live = Live(_Elapsed(what), console=err, transient=True, refresh_per_second=2)
    timer = threading.Timer(PROGRESS_AFTER_S, live.start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        live.stop()


def _cmd_plan(args: argparse.Namespace, out: Console) -> int:
    allocation_flags = (args.topology, args.topology_name, args.hosts, args.nodelist, args.exclude)
    if any(allocation_flags):
        return _cmd_plan_allocation(args, out)
    with _progress("searching"):
        result = _plan_for(args)
    if args.stability or args.stability_range:
        with _progress("re-planning under perturbed constants (--stability)"):
            stable = _plan_stability(args, result)
        _render_plan(args, result, out, stable)
    else:
        _render_plan(args, result, out)
    if args.out_dir:
        _write_out_dir(args, out, result, report.result_dict(result), {})
    return EXIT_OK


def _plan_for(args: argparse.Namespace) -> PlanResult:
    return convenience.plan_for(
        args.model, args.cluster, reliability=_reliability(args), **_plan_keywords(args)
    )


def _write_out_dir(
    args: argparse.Namespace,
    out: Console,
    result: PlanResult,
    plan_json: dict[str, Any],
    allocation_files: dict[str, str],
) -> None:
    """The hand-off directory (CONTRACT.md "Hand-off files"); what was written and what a
    framework cannot express follow the report, or go to stderr when stdout is JSON or an
    export."""
    out_dir = args.out_dir
    from .export.handoff import handoff_files

    files, skipped = handoff_files(result, plan_json, allocation=bool(allocation_files))
    files.update(allocation_files)
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        (folder / "launch.sh").chmod(0o755)
    except OSError as exc:
        raise InvalidInput(f"--out-dir: cannot write {out_dir}: {exc.strerror}") from None
    lines = [f"wrote {out_dir}: {', '.join(sorted(files))}"]
    lines += [f"not written: {line}" for line in skipped]
    for line in lines:
        if args.json or args.emit:
            sys.stderr.write(line + "\n")
        else:  # free text: wraps at the terminal's width like the report above it
            out.print(Text(line))


def _cmd_plan_allocation(args: argparse.Namespace, out: Console) -> int:
    if not args.topology or not (args.hosts or args.nodelist):
        raise InvalidInput("plan: an allocation needs --topology FILE and --hosts or --nodelist")
    if args.global_batch_range is not None:
        raise InvalidInput("plan: --global-batch-range is not supported with an allocation")
    if _reliability(args) is not None:
        raise InvalidInput(
            "plan: --goodput, --reliability and --objective goodput are not supported with an "
            "allocation (plan without one, then place the chosen plan)"
        )
    if _workload_fields(args):
        raise InvalidInput(
            "plan: --optimizer-moments, --activation-func-fp8-input-store and "
            "--attention-output-store are not supported with an allocation"
        )
    alloc = load_allocation(
        models_zoo.load_cluster(args.cluster),
        args.topology,
        hosts_file=args.hosts,
        nodelist=args.nodelist,
        exclude=args.exclude,
        topology_name=args.topology_name,
    )
    try:
        with _progress("searching and placing on the allocation"):
            placed = _place(args, alloc)
    except NoFeasiblePlan as exc:  # exit 1: say what was read (hosts kept, dropped, GPUs)
        for line in read_summary(alloc):
            exc.add_note(line)
        raise
    except InvalidInput as exc:  # exit 2 stays one line: what was read, in brackets
        exc.args = (f"{exc} [{read_line(alloc)}]",)
        raise
    return _report_placed(args, out, placed)


def _place(args: argparse.Namespace, alloc: Allocation) -> Any:
    return convenience.plan_on_allocation_for(
        args.model,
        args.cluster,
        topology=alloc,
        num_gpus=args.gpus,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        precision=args.precision,
        place_top=args.place_top,
        place_export=args.export_placement_model,
        other_traffic=args.other_traffic,
        framework=_framework(args),
        **search_kwargs(args),
    )


def _report_placed(args: argparse.Namespace, out: Console, placed: Any) -> int:
    from .export.handoff import allocation_files
    from .place.joint import node_hosts
    from .report.dicts import allocation_dict

    result, best, alloc = placed.result, placed.best, placed.allocation
    # One placed view in every format: the JSON `allocation` object (CONTRACT.md) and the
    # placed rank map, groups and Allocation section of the text reports.
    hostfile = node_hosts(result.cluster, alloc, best.host_of_rank)
    view = placed_view(result.cluster, placed, hostfile)
    json_allocation = allocation_dict(result.cluster, alloc, best)
    _render_plan(args, result, out, placed=view, allocation=json_allocation)
    if args.out_dir:
        payload = report.result_dict(result)
        payload["allocation"] = json_allocation
        files = allocation_files(result.cluster, alloc, best)
        _write_out_dir(args, out, result, payload, files)
    return EXIT_OK


def _stability_ranges(items: list[str] | None) -> dict[str, tuple[float, float]]:
    from .calibrate.stability import SETTERS

    ranges = {}
    for item in items or []:
        name, _, span = item.partition("=")
        lo, _, hi = span.partition(":")
        try:
            low, high = float(lo), float(hi)
        except ValueError:
            raise InvalidInput(f"--stability-range: expected NAME=LO:HI (got {item!r})") from None
        if name not in SETTERS:
            raise InvalidInput(f"--stability-range: unknown {name!r}; known: {', '.join(SETTERS)}")
        if not 0 < low <= high <= 1:
            raise InvalidInput(f"--stability-range: {name} needs 0 < LO <= HI <= 1 (got {item!r})")
        ranges[name] = (low, high)
    return ranges


def _plan_stability(args: argparse.Namespace, result: PlanResult) -> dict[str, Any]:
    from .calibrate.stability import stability

    kwargs = search_kwargs(args)
    kwargs.pop("max_nodes", None)  # the result's cluster is already sized by it
    kwargs["top_k"] = 1
    if result.global_batch_range is not None:  # each re-plan picks its own batch again
        kwargs["global_batch_range"] = result.global_batch_range
    # The plan's own framework (its rank orders, ZeRO stages, recompute modes, caps): each re-plan
    # searches the space the plan was found in, only the constants move.
    space, options = convenience.search_inputs(result.framework, **kwargs)

    def replan(cluster: Any) -> PlanResult:
        return api.plan(result.model, cluster, result.workload, space, options)

    return stability(result, replan, _stability_ranges(args.stability_range))


def _render_plan(
    args: argparse.Namespace,
    result: PlanResult,
    out: Console,
    stable: dict[str, Any] | None = None,
    placed: PlacedView | None = None,
    allocation: dict[str, Any] | None = None,
) -> None:
    """Write the plan in the requested format; exports are checked before anything is written.
    `stable`: the --stability check, added to the JSON as `stability` and printed as a line;
    `placed` / `allocation`: a plan on an allocation, its placed view in the text formats and its
    `allocation` object in the JSON."""
    if args.emit:
        text, note = emit_text(args.emit, result, args.json, args.framework_version)
    elif args.framework_version:
        raise InvalidInput("--framework-version: goes with --emit megatron|torchtitan|deepspeed")
    if args.html:
        try:
            Path(args.html).write_text(report.render_html(result, placed), encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"--html: cannot write {args.html}: {exc.strerror}") from None
    if args.emit:
        sys.stdout.write(text)
        sys.stderr.write(note)
    elif args.json:
        payload = report.result_dict(result)
        if stable is not None:
            payload["stability"] = stable
        if allocation is not None:
            payload["allocation"] = allocation
        _emit_json(payload)
    elif args.markdown:
        sys.stdout.write(report.render_markdown(result, placed))
        if stable is not None:
            sys.stdout.write(f"\n**Ranking stability:** {stable['line']}\n")
    else:
        out.print(report.render_plan(result, placed))
        if stable is not None:
            out.print(f"[bold]ranking[/bold] {escape(stable['line'])}")  # free text: wraps


def _cmd_estimate(args: argparse.Namespace, out: Console) -> int:
    fields: dict[str, Any] = {
        "tp": args.tp,
        "pp": args.pp,
        "dp": args.dp,
        "cp": args.cp,
        "ep": args.ep,
        "vp": args.vp,
        "micro_batch": args.micro_batch,
        "recompute": args.recompute,
        "zero_stage": args.zero,
    }
    if args.dp_shard is not None:
        fields["dp_shard"] = args.dp_shard
    # Recompute knobs only when given (Layout refuses them under another mode).
    if args.recompute_modules is not None:
        fields["recompute_modules"] = tuple(args.recompute_modules)
    if args.recompute_method is not None:
        fields["recompute_method"] = args.recompute_method
    if args.recompute_num_layers is not None:
        fields["recompute_num_layers"] = args.recompute_num_layers
    if args.sequence_parallel is not None:  # unset: on whenever tp > 1, as plan searches
        fields["sequence_parallel"] = args.sequence_parallel
    fields["pp_schedule"] = args.pp_schedule
    fields["ep_overlap"] = args.ep_overlap
    if args.tp_comm_overlap is not None:  # unset: the framework profile's default
        if args.tp_comm_overlap and args.tp <= 1:
            raise InvalidInput("--tp-comm-overlap needs --tp > 1 (no TP collectives to overlap)")
        fields["tp_comm_overlap"] = args.tp_comm_overlap
    if args.cpu_offload_layers is not None:
        fields["cpu_offload_layers"] = args.cpu_offload_layers
    for key in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        if getattr(args, key):
            fields[key] = True
    layout = api.layout_with_defaults(fields)
    model = models_zoo.load_model(args.model)
    cluster = models_zoo.load_cluster(args.cluster, args.gpus)
    workload = api.make_workload(
        model,
        seq_len=args.seq_len,
        global_batch=args.global_batch,
        precision=args.precision,
        moe_dispatcher=args.moe_dispatcher,
        **_workload_fields(args),
        **({} if args.tp_overlap is None else {"tp_overlap": args.tp_overlap}),
    )
    name = _framework(args)
    if name == api.AUTO_FRAMEWORK:
        name = api.default_framework(cluster)
    e = api.estimate(
        model, cluster, layout, workload, framework=name, memory_headroom=args.memory_headroom
    )
    rel = _reliability(args)
    good = None if rel is None else goodput_plan.score(model, cluster, workload, e, rel)
    cannot = [] if name is None else api.framework_violations(model, layout, name, workload)
    prof = framework_profile(name) if name else None
    # The workload as priced (the framework's physics filled in), as plan's inputs.workload.
    priced = prof.workload(workload, model) if prof else workload
    if args.json:
        payload = report.estimate_dict(e, model, cluster.gpu.hbm_gib)
        payload["framework"] = prof and {"name": prof.name, "version": prof.version}
        payload["workload"] = priced.model_dump()
        payload["framework_violations"] = cannot
        payload["warnings"] = plan_warnings(cluster, e)
        if good is not None:
            payload["goodput"] = goodput_dict(good)
        _emit_json(payload)
    else:
        words = [f"{name} cannot run this layout: {v}" for v in cannot]
        out.print(report.render_estimate(e, cluster, priced, model, words, args.explain))
        if good is not None:
            out.print(goodput_line(good), soft_wrap=True)
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace, out: Console) -> int:
    rows = validate_file(args.data, cluster_file=args.cluster_file)
    if args.json:
        _emit_json([r.contract_dict() for r in rows])
    elif args.markdown:
        sys.stdout.write(validation_markdown(rows, Path(args.data).name))
    else:
        out.print(render_validation(rows))
    return EXIT_OK


def _cmd_presets(args: argparse.Namespace, out: Console) -> int:
    if args.constants:
        return _presets_constants(args, out)
    kinds = [args.kind] if args.kind else ["models", "gpus", "clusters"]
    listing = {k: models_zoo.preset_summaries(k) for k in kinds}
    if args.json:
        _emit_json(listing[args.kind] if args.kind else listing)
    else:
        for kind, rows in listing.items():
            out.print(report.presets_table(kind, rows))
    return EXIT_OK


def _presets_constants(args: argparse.Namespace, out: Console) -> int:
    from models_zoo import provenance

    if args.kind == "gpus":
        rows = provenance.gpu_constants(models_zoo.load_gpu(args.constants))
    elif args.kind == "clusters":
        rows = provenance.cluster_constants(models_zoo.load_cluster(args.constants))
    else:
        raise InvalidInput("presets --constants: give the kind, gpus or clusters, before it")
    if args.json:
        _emit_json(rows)
        return EXIT_OK
    for line in constants_lines(rows):
        out.print(line, soft_wrap=True)
    return EXIT_OK


# --------------------------------------------------------------------------------------- whatif


def _add_whatif(sub: Any) -> None:
    w = sub.add_parser("whatif", help="vary one network parameter and re-plan at each value")
    _add_plan_inputs(w)
    w.add_argument(
        "--vary",
        required=True,
        choices=(*whatif.PARAMETERS, *whatif_goodput.PARAMETERS),
        help="parameter (mtbf, storage-gb-per-s, spares: re-plan by goodput, docs/goodput.md)",
    )
    w.add_argument(
        "--reliability",
        metavar="FILE",
        help="goodput inputs of a reliability sweep (mtbf, storage-gb-per-s, spares)",
    )
    w.add_argument(
        "--values",
        required=True,
        help="comma-separated values, e.g. 100,200,400; slice-shape: 16x16x16,8x16x32; "
        "fabric: rail-only",
    )
    w.add_argument("--tier", help="the one tier --vary oversubscription tapers (by name)")
    w.add_argument("--gpu-hour-price", type=_positive_float, help="$ per GPU-hour (no network)")
    w.add_argument("--network-cost-share", type=float, default=0.0, help="network share of cost")
    w.add_argument("--token-budget", type=_positive_float, help="tokens to train (time and cost)")
    w.add_argument(
        "--network-prices", help="YAML/JSON overriding the network bill of materials' prices"
    )
    w.add_argument(
        "--amortization-years",
        type=_positive_float,
        help="years the network's capital cost is spread over (adds it to the GPU-hour price)",
    )
    w.add_argument("--plot", help="write a PNG or SVG chart (needs the [plot] extra)")


def _parse_values(text: str, parameter: str = "") -> list[float] | list[str]:
    if parameter in whatif.CATEGORICAL:  # shapes (16x16x16) and fabric names, checked there
        words = [v.strip() for v in text.split(",") if v.strip()]
        if len(words) > MAX_WHATIF_VALUES:
            raise InvalidInput(f"--values: at most {MAX_WHATIF_VALUES} values (got {len(words)})")
        return words
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidInput(f"--values: must be comma-separated numbers (got {text!r})") from None
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise InvalidInput(f"--values: must be finite numbers (got {bad[0]})")
    if len(values) > MAX_WHATIF_VALUES:
        raise InvalidInput(f"--values: at most {MAX_WHATIF_VALUES} values (got {len(values)})")
    return values


MAX_WHATIF_VALUES = 32
"""Each value is one more plan of up to --time-limit seconds."""


def _cmd_whatif(args: argparse.Namespace, out: Console) -> int:
    if args.plot:
        plot.pyplot(args.plot)  # fail before the plans if the extra is missing
    with _progress(f"re-planning at each value of {args.vary}"):
        r = _whatif_for(args)
    return _render_whatif(args, r, out)


def _whatif_for(args: argparse.Namespace) -> Any:
    sweep: Any = whatif.whatif
    network: dict[str, Any] = {
        "tier": args.tier,
        "network_prices": args.network_prices,
        "amortization_years": args.amortization_years,
    }
    if args.vary in whatif_goodput.PARAMETERS:
        if any(v is not None for v in network.values()):
            raise InvalidInput(
                f"--vary {args.vary}: --tier, --network-prices and --amortization-years apply to "
                "network sweeps"
            )
        sweep, network = whatif_goodput.whatif_reliability, {
            "reliability": load_reliability(args.reliability)
        }
    elif args.reliability:
        raise InvalidInput(f"--reliability applies to --vary {', '.join(whatif_goodput.PARAMETERS)}")
    return sweep(
        args.model,
        args.cluster,
        args.vary,
        _parse_values(args.values, args.vary),
        gpu_hour_price=args.gpu_hour_price,
        network_cost_share=args.network_cost_share,
        token_budget=args.token_budget,
        **network,
        **_plan_keywords(args),
    )


def _render_whatif(args: argparse.Namespace, r: Any, out: Console) -> int:
    if args.plot:
        plot.save_plot(r, args.plot)
    cluster = models_zoo.load_cluster(args.cluster, args.gpus)
    name = _framework(args)
    if name == api.AUTO_FRAMEWORK:
        name = api.default_framework(cluster)
    prof = framework_profile(name) if name else None  # None: no framework claim (a TPU)
    if args.json:
        payload = whatif_dict(r)
        payload["framework"] = prof and {"name": prof.name, "version": prof.version}
        _emit_json(payload)
        return EXIT_OK
    version = prof.version if prof else ""
    out.print(render_whatif(r, cluster, models_zoo.load_model(args.model), version))
    return EXIT_OK


# ---------------------------------------------------------------- calibrate / measure (issue 18)


def _add_calibration(sub: Any) -> None:
    c = sub.add_parser("calibrate", help="fit a cluster file to your own measurements")
    c.add_argument(
        "--cluster", required=True, help="preset name or cluster YAML/JSON to start from"
    )
    c.add_argument("--nccl-tests", nargs="+", metavar="FILE", help="nccl-tests output files")
    c.add_argument(
        "--gemm", metavar="CSV", help="GEMM table m,n,k,dtype,tflops|time_ms (stored + curve fit)"
    )
    c.add_argument(
        "--attention", metavar="CSV", help="attention table (stored + curve fit)"
    )
    c.add_argument("--steps", metavar="YAML", help="measured steps of your own runs")
    c.add_argument(
        "--kernels",
        metavar="DIR",
        help="kernel tables: gemm.csv, attention.csv, grouped_gemm.csv, memory_bound.csv; "
        "'builtin': the tables shipped for the cluster's GPU",
    )
    c.add_argument("--grouped-gemm", metavar="CSV", help="grouped GEMM table (one file)")
    c.add_argument("--memory-bound", metavar="CSV", help="memory-bound ops table (one file)")
    c.add_argument(
        "--system-file",
        metavar="JSON",
        help="a peer simulator's system file (Calculon systems/*.json): GEMM and memory tables",
    )
    c.add_argument(
        "--aiconfigurator-nccl",
        nargs="+",
        metavar="PARQUET",
        help="aiconfigurator's measured nccl_perf.parquet (nccl-tests runs; needs pyarrow)",
    )
    c.add_argument("--out", required=True, metavar="FILE", help="cluster file (YAML) to write")
    c.add_argument("--name", help="name of the calibrated cluster (default: <cluster>-calibrated)")
    c.add_argument("--json", action="store_true")
    m = sub.add_parser(
        "measure", help="measure a model's kernels here; GEMM/attention sweeps; nccl-tests lines"
    )
    m.add_argument("what", choices=("kernels", "gemm", "attention", "nccl"))
    m.add_argument("--out", metavar="CSV", help="CSV to write (gemm, attention)")
    m.add_argument("--device", default="cuda", help="torch device (default cuda)")
    m.add_argument("--tiny", action="store_true", help="a few small shapes (a smoke test)")
    m.add_argument("--cluster", help="kernels: the cluster priced; nccl: the tiers to cover")
    m.add_argument("--dry-run", action="store_true", help="nccl: print the commands only")
    _add_measure_kernels(m)


def _int_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated positive whole numbers (`1,2,4,8`)."""
    parse = _positive(int, "comma-separated whole numbers")
    return tuple(parse(x.strip()) for x in text.split(","))


def _dtype_list(text: str) -> tuple[str, ...]:
    out = tuple(x.strip().lower() for x in text.split(","))
    bad = [x for x in out if x not in ("bf16", "fp8")]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"must be bf16, fp8 or bf16,fp8 (got {text!r})")
    return out


def _add_measure_kernels(m: argparse.ArgumentParser) -> None:
    m.add_argument("--model", help="kernels: the model whose look-ups to measure")
    m.add_argument("--out-dir", metavar="DIR", help="kernels: folder of kernel tables to write")
    m.add_argument(
        "--shapes-only",
        metavar="FILE",
        help="kernels: write the shapes as JSON, measure nothing (for planner/calibrate/sweep.py)",
    )
    m.add_argument("--tp", type=_int_list, default=(1, 2, 4, 8), help="kernels: TP degrees")
    m.add_argument("--dtypes", type=_dtype_list, default=("bf16", "fp8"), help="bf16,fp8")
    m.add_argument("--seq-len", type=_positive_int, help="kernels: default the model's own")
    m.add_argument(
        "--micro-batches",
        type=_int_list,
        default=SearchSpace.model_fields["micro_batches"].default,
        help="kernels: micro-batch sizes (default: the search's)",
    )
    m.add_argument("--cp", type=_int_list, default=(1, 2, 4, 8), help="kernels: CP degrees")
    m.add_argument(
        "--ep", type=_int_list, default=(1, 2, 4, 8, 16, 32, 64), help="kernels: EP degrees (MoE)"
    )
    m.add_argument("--min-time-ms", type=_positive_float, default=10.0, help="timed per shape")
    m.add_argument("--budget-s", type=_positive_float, help="kernels: stop after this long")
    m.add_argument(
        "--sustained-s",
        type=_positive_float,
        help="kernels: then this long each of 8192^3 bf16 and fp8 GEMMs (sustained*.csv)",
    )


def _cmd_calibrate(args: argparse.Namespace, out: Console) -> int:
    from . import calibrate as cal

    cluster, rep = cal.calibrate(
        args.cluster,
        nccl_tests=args.nccl_tests,
        gemm=args.gemm,
        attention=args.attention,
        steps_file=args.steps,
        name=args.name,
        kernels=args.kernels,
        grouped_gemm=args.grouped_gemm,
        memory_bound=args.memory_bound,
        system_file=args.system_file,
        aiconfigurator_nccl=args.aiconfigurator_nccl,
    )
    cal.write_cluster_file(cluster, args.out)
    rep = rep.written_to(args.out)
    if args.json:
        _emit_json(rep.json_dict())
        return EXIT_OK
    for line in calibration_lines(rep):
        out.print(line, soft_wrap=True)
    return EXIT_OK


def _cmd_measure(args: argparse.Namespace, out: Console) -> int:
    from .calibrate import measure

    if args.what == "nccl":
        if not args.cluster:
            raise InvalidInput("measure nccl: --cluster is required")
        if not args.dry_run:
            raise InvalidInput(
                "measure nccl: only --dry-run is supported (run the printed commands on the cluster,"
                " then pass their output to planner calibrate --nccl-tests)"
            )
        sys.stdout.write(measure.nccl_commands_text(models_zoo.load_cluster(args.cluster)))
        return EXIT_OK
    if args.what == "kernels":
        return _measure_kernels(args, out)
    if not args.out:
        raise InvalidInput(f"measure {args.what}: --out CSV is required")
    n, where = measure.run_sweep(args.what, args.out, device=args.device, tiny=args.tiny)
    out.print(f"{n} rows -> {escape(args.out)} ({escape(where)})")
    return EXIT_OK


def _measure_kernels(args: argparse.Namespace, out: Console) -> int:
    from .calibrate import measure

    if not args.model or not args.cluster:
        raise InvalidInput("measure kernels: --model and --cluster are required")
    if not (args.out_dir or args.shapes_only):
        raise InvalidInput("measure kernels: --out-dir DIR (or --shapes-only FILE) is required")
    doc = measure.shapes_document(
        args.model,
        args.cluster,
        seq_len=args.seq_len,
        tps=args.tp,
        dtypes=args.dtypes,
        micro_batches=args.micro_batches,
        cps=args.cp,
        eps=args.ep,
    )
    kinds = ("gemm", "grouped_gemm", "attention", "memory_bound")
    counts = ", ".join(f"{k} {len(doc[k])}" for k in kinds)
    if args.shapes_only:
        measure.write_shapes(doc, args.shapes_only)
        out.print(f"{counts} shapes -> {escape(args.shapes_only)}", soft_wrap=True)
        if not args.out_dir:
            return EXIT_OK
    meta = measure.run_kernels(
        doc,
        args.out_dir,
        device=args.device,
        tiny=args.tiny,
        min_time_ms=args.min_time_ms,
        budget_s=args.budget_s,
        sustained_s=args.sustained_s or 0.0,
    )
    rows = ", ".join(f"{k} {n}" for k, n in meta["rows"].items())
    out.print(
        f"{rows} rows -> {escape(args.out_dir)} ({escape(meta['device'])}, {meta['wall_s']} s; "
        f"{len(meta['skipped'])} skipped, {meta['not_measured_budget']} over budget)",
        soft_wrap=True,
    )
    return EXIT_OK


# ------------------------------------------------------------------------------------ bill


def _add_bill(sub: Any) -> None:
    b = sub.add_parser("bill", help="the network's bill of materials at N GPUs")
    b.add_argument("--cluster", required=True, help="preset name or cluster YAML/JSON")
    b.add_argument("--gpus", type=_positive_int, help="GPUs (default: the cluster's own size)")
    b.add_argument("--prices", help="YAML/JSON overriding any component's usd / w, pue, $/kWh")
    b.add_argument("--json", action="store_true", help="print JSON only (CONTRACT.md)")


def _cmd_bill(args: argparse.Namespace, out: Console) -> int:
    cluster = models_zoo.load_cluster(args.cluster, args.gpus)
    result = network_bom.bill(cluster, network_bom.load_prices(args.prices))
    if args.json:
        _emit_json(network_bom.bill_dict(result))
        return EXIT_OK
    out.print(render_bill(result, cluster.name))
    return EXIT_OK


# ---------------------------------------------------------------------------------- design


def _add_design(sub: Any) -> None:
    d = sub.add_parser("design", help="search network designs for a workload mix")
    d.add_argument("--workload", required=True, metavar="FILE", help="YAML list of {model, "
                   "global_batch, seq_len, precision, share}")  # fmt: skip
    d.add_argument("--gpu", required=True, help="GPU id (planner presets gpus)")
    d.add_argument("--gpus", required=True, type=_positive_int, help="GPUs in the fleet")
    d.add_argument("--designs", metavar="FILE", help="YAML narrowing or widening the design space")
    d.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="where the plan searches run: a local process pool or Ray")  # fmt: skip
    d.add_argument("--workers", type=_positive_int, help="local processes (default: all cores)")
    d.add_argument("--cache-dir", metavar="DIR", help="reuse and store each design point's result")
    d.add_argument("--network-budget", type=_positive_float, metavar="USD",
                   help="most network capital per GPU the best design may cost")  # fmt: skip
    d.add_argument("--min-throughput", type=_positive_float, metavar="TOKENS",
                   help="least share-weighted tokens/s/GPU the best design must reach")  # fmt: skip
    d.add_argument("--gpu-hour-price", type=_positive_float, help="$ per GPU-hour without network")
    d.add_argument("--amortization-years", type=_positive_float, help="years the network's "
                   "capital is spread over")  # fmt: skip
    d.add_argument("--network-prices", metavar="FILE", help="YAML/JSON overriding component prices")
    d.add_argument("--no-prune", action="store_true", help="evaluate every design (slow; checks)")
    d.add_argument("--html", metavar="FILE", help="write the report and frontier chart as HTML")
    d.add_argument("--plot", metavar="FILE", help="write the frontier chart (PNG or SVG)")
    d.add_argument("--json", action="store_true", help="print JSON only (CONTRACT.md)")


def _cmd_design(args: argparse.Namespace, out: Console) -> int:
    from .design import mix, pricing, search

    plt = plot.pyplot(args.plot) if args.plot else None  # fail before the search
    html_plt = _html_pyplot() if args.html else None
    costs = pricing.Costs(
        args.gpu_hour_price or pricing.DEFAULT_GPU_HOUR_USD,
        args.amortization_years or pricing.DEFAULT_AMORTIZATION_YEARS,
        network_bom.load_prices(args.network_prices),
    )
    result = search.search_designs(
        mix.load_mix(args.workload),
        models_zoo.load_gpu(args.gpu),
        args.gpus,
        costs,
        designs_file=args.designs,
        network_budget_usd_per_gpu=args.network_budget,
        min_tokens_per_s_per_gpu=args.min_throughput,
        prune=not args.no_prune,
        backend=args.backend,
        workers=args.workers,
        cache_dir=args.cache_dir,
        progress=not args.json,
    )
    if plt is not None:
        save_frontier_plot(result, args.plot, plt)
    if args.html:
        _write_text(args.html, render_design_html(result, html_plt))
    if args.json:
        _emit_json(design_dict(result))
        return EXIT_OK
    out.print(render_design(result))
    return EXIT_OK


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"--html: cannot write {path}: {exc.strerror or exc}") from None


def _html_pyplot() -> Any:
    """matplotlib for the HTML page's chart, or None (the page is written without it)."""
    try:
        return plot.pyplot("chart.png")
    except InvalidInput:
        return None


def _add_emit(sub: Any) -> None:
    e = sub.add_parser("emit", help="re-emit a saved plan (plan.json of --out-dir) for a launcher")
    e.add_argument("--from", dest="source", required=True, metavar="PLAN_JSON")
    e.add_argument("--emit", choices=EMIT_TARGETS, required=True)
    e.add_argument("--framework-version", metavar="VERSION")
    e.add_argument("--json", action="store_true")


def _cmd_emit(args: argparse.Namespace, out: Console) -> int:
    """The saved plan's export, without searching again."""
    from .export.handoff import load_saved_plan

    try:  # the shared reader: its limits (depth, size) hold for a saved plan too
        data = read_data_file(args.source, as_json=True)
    except InvalidInput as exc:
        raise InvalidInput(f"--from: {exc}") from None
    result = load_saved_plan(data, args.source)
    text, note = emit_text(args.emit, result, args.json, args.framework_version)
    sys.stdout.write(text)
    sys.stderr.write(note)
    return EXIT_OK


COMMANDS = {
    "bill": _cmd_bill,
    "design": _cmd_design,
    "emit": _cmd_emit,
    "calibrate": _cmd_calibrate,
    "measure": _cmd_measure,
    "whatif": _cmd_whatif,
    "plan": _cmd_plan,
    "estimate": _cmd_estimate,
    "validate": _cmd_validate,
    "presets": _cmd_presets,
}


def main(argv: list[str] | None = None) -> int:
    """The `planner` command: exit 0 / 1 / 2 (CONTRACT.md), or 141 when stdout's reader closed
    the pipe (`planner presets | head`), quietly like any Unix filter."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
        return code
    except BrokenPipeError:
        return _stdout_closed()


class _PipeConsole(Console):
    """The CLI's consoles (stdout's report, stderr's lines). rich's own answer to a closed pipe
    is SystemExit(1), which would read as "no feasible plan" (exit 1, CONTRACT.md): raise the
    error so `main` ends with 141."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "stdout closed")


def _stdout_closed() -> int:
    """Stop writing to a pipe nobody reads, without a traceback or Python's "Exception ignored"
    line: stdout is pointed at /dev/null so the interpreter's exit flush of what is still
    buffered succeeds (the recipe of the Python docs, library/signal.html "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (an in-process caller's)
        pass
    return EXIT_STDOUT_CLOSED


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    err = _PipeConsole(stderr=True, highlight=False)
    # --debug anywhere (before or after the subcommand; issue 28): the traceback of a bad input
    # or "no feasible plan" goes to stderr above its one line; the exit code stays 2 / 1.
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    as_json = "--json" in argv
    if not argv:  # bare `planner`: the help, not a usage error
        build_parser().print_help()
        return EXIT_OK
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args, _PipeConsole(highlight=False))
    except SystemExit as exc:  # --version and --help print and stop here
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except NoFeasiblePlan as exc:
        if debug:
            traceback.print_exc()
        err.print(f"[red]no feasible plan:[/red] {escape(str(exc))}", soft_wrap=True)
        notes = list(getattr(exc, "__notes__", []))  # e.g. the allocation that was read
        for note in notes:
            err.print(escape(note), soft_wrap=True)
        if as_json:
            _emit_error(EXIT_INFEASIBLE, str(exc), reasons=[*exc.reasons, *notes])
        return EXIT_INFEASIBLE
    except (PlannerError, ValidationError) as exc:
        if debug:
            traceback.print_exc()
        msg = describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
        msg = _flag_named(msg, argv)
        err.print(f"[red]error:[/red] {escape(msg)}", soft_wrap=True)
        if as_json:
            _emit_error(EXIT_BAD_INPUT, msg)
        return EXIT_BAD_INPUT


_FIELD_FLAGS = {
    "cpu_offload_layers": "--cpu-offload-layers",
    "account_for_embedding_in_pipeline_split": "--account-for-embedding-in-pipeline-split",
    "account_for_loss_in_pipeline_split": "--account-for-loss-in-pipeline-split",
    "fp8_params": "--fp8-params",
    "bf16_layers_start": "--bf16-layers-start",
    "bf16_layers_end": "--bf16-layers-end",
    "main_grads": "--main-grads",
    "recompute_modules": "--recompute-modules",
    "recompute_method": "--recompute-method",
    "optimizer_moments": "--optimizer-moments",
    "activation_func_fp8_input_store": "--activation-func-fp8-input-store",
    "attention_output_store": "--attention-output-store",
    "moe_capacity_factor": "--moe-capacity-factor",
    "moe_pad_to_capacity": "--moe-pad-to-capacity",
    "moe_force_balance": "--moe-force-balance",
}
"""Layout / Workload fields a command-line flag sets: a rule about the field (the Layout's or
Workload's own check, cost_models.rules, a framework's refusal) names the flag the user typed."""


def _flag_named(message: str, argv: list[str]) -> str:
    """`message` led by the flag behind it ('--fp8-params: fp8_params needs precision fp8 ...')
    when it is a rule about a field that a flag on this command line set; else unchanged. The
    validation prefix of a spec built from flags ('layout: ') is dropped: the flag says
    where."""
    rule = re.sub(r"^(?:layout|workload): ", "", message)
    field = re.match(r"[a-z_0-9]+", rule)
    flag = _FIELD_FLAGS.get(field.group(0)) if field else None
    if field and field.group(0) == "recompute_method" and flag not in argv:
        flag = "--recompute-num-layers"  # one rule names both knobs
    if flag is None or not any(a == flag or a.startswith(flag + "=") for a in argv):
        return message
    return f"{flag}: {rule}"


_FIELD = re.compile(r"^(--[\w-]+|[^\s:]+\.(?:json|ya?ml|csv|txt|log|conf)(?::\d+)?|[\w./-]+:\d+)")


def _error_field(message: str) -> str | None:
    """The flag or file(:line) a one-line message starts with ('--gpus 4,096: ...',
    'cluster.yaml: tiers.1 ...', 'topology.conf:12: ...'), when it names one."""
    if message.startswith("file not found: "):
        return message.removeprefix("file not found: ")
    for start, flag in _MESSAGE_FLAGS:
        if message.startswith(start):
            return flag
    m = (
        _FIELD.match(message)
        or re.search(r"\bargument (--[\w-]+)", message)
        or re.search(r"\barguments are required: (--[\w-]+)", message)  # argparse: the first
    )
    return m.group(1) if m else None


_MESSAGE_FLAGS = (
    ("unknown model preset ", "--model"),
    ("unknown cluster preset ", "--cluster"),
    ("unknown gpu preset ", "--gpu"),
    ("precision: ", "--precision"),
)
"""Messages about a flag's value that do not start with the flag (the readers behind it serve
files too, where the file name comes first and _FIELD names it)."""


def _emit_error(code: int, message: str, reasons: list[str] | None = None) -> None:
    """docs/contract.md "Errors with --json": one object on stdout (the line is on stderr)."""
    error: dict[str, Any] = {"exit_code": code, "message": message, "field": _error_field(message)}
    if reasons is not None:
        error["reasons"] = reasons
    try:
        sys.stdout.write(json.dumps({"error": error}, indent=2) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # nobody reads stdout: the error's exit code and stderr line stand
        _stdout_closed()
