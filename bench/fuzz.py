"""CLI fuzzer (issue 19): generated command lines and input files, run in-process.

Every case is a command line plus the files it names, drawn from a seeded random.Random, so a
case number always means the same case: plan / estimate / whatif / presets flags (wild values
too); model YAML/JSON and Hugging Face config.json; cluster YAML/JSON in the tier and the networkx
fabric-graph form, and cluster files naming kernel tables (`kernels: {path: DIR}`, `builtin`);
validate data files; corrupt bytes; plans on an allocation (`--topology` as a tree or block
topology.conf, Slurm's topology.yaml or the levels YAML; `--hosts`, `--nodelist`, `--exclude`);
`calibrate`'s inputs (nccl-tests logs, GEMM and attention CSVs, a steps YAML, kernel-table
folders, grouped-GEMM and memory-bound tables, a Calculon system file); `--goodput` /
`--reliability FILE`; `bill --prices FILE`; `emit --from` a saved plan; and `design`'s workload-mix
and design-space files. Each case runs `planner.cli.main(argv)` in a scratch folder and is
checked for:

* traceback: an exception escaped main (the CLI must turn every error into an exit code);
* bad exit code: anything but 0, 1 (no feasible plan), 2 (bad input); or exit 2 with a message
  that is not exactly one line; or --json with exit 0 and stdout that does not parse, or with
  exit 1 / 2 and no `{"error": ...}` object on stdout (docs/contract.md);
* over time: the command ran past its own budget: its limit (--time-limit per plan; whatif runs
  one plan per value plus the baseline) + the search's HARD_MARGIN_S + SLACK_S of process
  overhead. Judged load-independently (tests/load_clock.py): its CPU time (and wall time) past
  the budget, or its wall time past the budget times the load slowdown measured by a reference
  loop in this process right before and after it (1 on an idle machine: the plain wall rule);
* nondeterministic: a second run (every DETERMINISM_EVERY-th case) prints something else, once
  wall times are blanked (a search the deadline stopped -- "not scored before the time limit"
  in its output -- is exempt: it scored what the clock allowed).

    python bench/fuzz.py --cases 2000           # fixed seed 0; prints the summary line last
    python bench/fuzz.py --cases 200 --seed 7 --show   # print each failing case

tests/integration/cli/test_fuzz_cli.py runs a small fixed-seed profile of the same generator under
hypothesis in the default suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from planner.cli import main
from planner.search.candidates import HARD_MARGIN_S, TIMED_OUT
from tests.load_clock import Timed, timed

SLACK_S = 3.0
"""Process overhead allowed beyond the limit + margin: model/cluster loading, rendering (on an
idle machine; tests/load_clock.py stretches the wall-time budget by the measured load)."""
DETERMINISM_EVERY = 4
MODELS = ["llama3-8b", "mixtral-8x7b", "mcore-gpt-1.7b", "qwen3-30b-a3b", "llama2-7b", "gpt3-175b",
          "gpt-oss-120b"]
CLUSTERS = ["dgx-h100", "dgx-b200", "gb200-nvl72", "two-dc-h100", "tpu-v5p-4096", "h800"]
WILD = ["0", "-1", "1e9", "inf", "nan", "abc", "", "1.5", "１２８", "9" * 30, "-0", "1e-300"]

MODEL = {
    "name": "fuzz-dense",
    "num_layers": 32,
    "hidden_size": 4096,
    "ffn_hidden_size": 14336,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "head_dim": None,
    "vocab_size": 128256,
    "gated_mlp": True,
    "mla": False,
    "moe": None,
    "seq_len": 4096,
}
# gpt-oss's attention and MLP fields (sinks, alternating windows, untruncated YaRN, the experts'
# clamped quick-GeGLU with its offset), so mutations reach them too.
MODEL_OSS = {
    **MODEL,
    "name": "fuzz-oss",
    "ffn_hidden_size": None,
    "moe": {"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 2880},
    "linear_bias": True,
    "attention_sinks": True,
    "sliding_window": 128,
    "full_attention_every": 2,
    "activation": "quick_gelu",
    "glu_linear_offset": 1.0,
    "activation_clamp": 7.0,
    "rope_scaling": {"type": "yarn", "factor": 32.0, "truncate": False},
}
HF = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
CLUSTER = {
    "name": "fuzz",
    "gpu": "h100-sxm-80gb",
    "gpus_per_node": 8,
    "num_gpus": 64,
    "tiers": [
        {"name": "nvlink", "domain_size": 8, "bandwidth_gb_per_s": 450, "latency_us": 3.0},
        {"name": "ib", "domain_size": None, "bandwidth_gb_per_s": 50, "latency_us": 5.0},
    ],
}
RECORD = {
    "id": "fuzz-run",
    "framework": "megatron",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 8,
    "gpus_per_node": 8,
    "interconnect": "NVLink; 400 Gb/s per GPU",
    "model": dict(MODEL),
    "layout": {
        "tp": 1,
        "pp": 1,
        "dp": 8,
        "cp": 1,
        "ep": 1,
        "vp": None,
        "sequence_parallel": False,
        "zero_stage": 1,
        "micro_batch": 1,
        "global_batch_seqs": 8,
        "recompute": "selective",
        "precision": "bf16",
    },
    "measured_tokens_per_s_per_gpu": 6000.0,
    "peak_memory_gib": None,
}


def _graph(nodes: int) -> dict[str, Any]:
    """A one-leaf fabric with `nodes` NVLink islands of 8 GPUs (node-link data)."""
    ns: list[dict[str, Any]] = [
        {"id": "spine", "type": "switch", "level": 2},
        {"id": "leaf0", "type": "switch", "level": 1},
    ]
    es: list[dict[str, Any]] = [{"source": "leaf0", "target": "spine", "gb_per_s": 200}]
    for n in range(nodes):
        ns.append({"id": f"nvsw{n}", "type": "switch", "level": 0, "kind": "nvlink"})
        for g in range(8):
            ns.append({"id": f"g{n}_{g}", "type": "gpu"})
            es.append({"source": f"g{n}_{g}", "target": f"nvsw{n}", "gb_per_s": 450})
            es.append({"source": f"g{n}_{g}", "target": "leaf0", "gb_per_s": 50})
    return {"directed": False, "multigraph": False, "graph": {}, "nodes": ns, "edges": es}


def _wild_value(rng: random.Random) -> Any:
    return rng.choice(
        [
            0,
            -1,
            1,
            2**63,
            1e-300,
            1e300,
            float("inf"),
            float("nan"),
            "",
            "x",
            [],
            [1, 2],
            {},
            {"a": 1},
            None,
            True,
            3.5,
            7,
        ]
    )


def _mutate(rng: random.Random, data: Any, rounds: int = 2) -> Any:
    """Drop, retype or add keys at random depths (a deep copy is mutated)."""
    data = json.loads(json.dumps(data))
    for _ in range(rounds):
        target = data
        for _ in range(rng.randint(0, 3)):
            kids = (
                [v for v in target.values() if isinstance(v, (dict, list)) and v]
                if isinstance(target, dict)
                else [v for v in target if isinstance(v, (dict, list)) and v]
            )
            if not kids:
                break
            target = rng.choice(kids)
        if isinstance(target, dict) and target:
            key = rng.choice(sorted(target))
            op = rng.random()
            if op < 0.3:
                del target[key]
            elif op < 0.85:
                target[key] = _wild_value(rng)
            else:
                target[rng.choice(["extra", key + "_x", "Name"])] = _wild_value(rng)
        elif isinstance(target, list) and target:
            i = rng.randrange(len(target))
            target[i] = _wild_value(rng) if rng.random() < 0.5 else target[i]
            if rng.random() < 0.3:
                target.append(_wild_value(rng))
    return data


def _dump(rng: random.Random, data: Any, name: str) -> bytes:
    if name.endswith(".json"):
        return json.dumps(data).encode()
    try:
        return yaml.safe_dump(data, allow_unicode=True).encode()
    except yaml.YAMLError:
        return json.dumps(data).encode()


def _corrupt(rng: random.Random, raw: bytes) -> bytes:
    op = rng.randrange(8)
    if op == 7:
        return rng.choice([b"a: &a [1, *a]\n", b"- &r {model: *r}\n", b"a: *nope\n"])
    if op == 0:
        return raw[: rng.randrange(max(1, len(raw)))]
    if op == 1:
        return raw + b"\x00" * rng.randint(1, 50)
    if op == 2:
        i = rng.randrange(max(1, len(raw)))
        return raw[:i] + bytes([rng.choice([0xF6, 0xFF, 0xC3, 0x80])]) + raw[i:]
    if op == 3:
        depth = rng.choice([10, 70, 500, 3000])
        return b"[" * depth + b"]" * (depth if rng.random() < 0.5 else 0)
    if op == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if op == 5:
        return b"a: &a [1, 2]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n" + raw[:20]
    return b"\xef\xbb\xbf" + raw  # a BOM: valid


@dataclass
class Case:
    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)

    def budget_s(self) -> float | None:
        """Seconds the command may take (limit x plans + margin + slack); None: no limit."""
        if "--time-limit" not in self.argv:
            return None
        try:
            limit = float(self.argv[self.argv.index("--time-limit") + 1])
        except (IndexError, ValueError):
            return None
        if not limit > 0 or limit == float("inf"):
            return None
        plans = 1
        if self.argv[0] == "whatif" and "--values" in self.argv:
            text = self.argv[self.argv.index("--values") + 1]
            plans = 1 + len([v for v in text.split(",") if v.strip()])
        if "--topology" in self.argv:  # the search, then the placement solves (their share)
            plans = 2
        return plans * (limit + HARD_MARGIN_S) + SLACK_S


def _limit(rng: random.Random) -> list[str]:
    return ["--time-limit", rng.choice(["0.001", "0.3", "1", "2"])]


ALLOC_CLUSTERS = ["dgx-h100", "llama3-roce-24k", "gb200-nvl72", "gb200-nvl72-superpod"]


def _host_names(rng: random.Random) -> tuple[list[list[str]], str]:
    """Hosts n001.. grouped in leaves (or racks) of random sizes; the prefix for hostlists."""
    leaves, k = [], 1
    for _ in range(rng.randint(1, 6)):
        size = rng.choice([1, 2, 2, 4, 18])
        leaves.append([f"n{k + j:03d}" for j in range(size)])
        k += size
    return leaves, "n"


def _hostlist(hosts: list[str]) -> str:
    import hostlist

    return hostlist.collect_hostlist(hosts)


def _topology_file(rng: random.Random, leaves: list[list[str]]) -> tuple[str, bytes, list[str]]:
    """A topology in one of the formats users have (tree / block topology.conf, Slurm's
    topology.yaml with tree, block and flat entries, the product's levels YAML); the names a
    --topology-name may pick."""
    fmt = rng.choice(["tree", "block", "slurm_yaml", "slurm_yaml", "levels"])
    pods, i = [], 0
    while i < len(leaves):  # consecutive leaves under one pod switch each
        step = rng.randint(1, 3)
        pods.append(list(range(i, min(i + step, len(leaves)))))
        i += step
    if fmt == "tree":
        lines = [f"SwitchName=leaf{i} Nodes={_hostlist(hs)}" for i, hs in enumerate(leaves)]
        lines += [f"SwitchName=pod{i} Switches={_hostlist([f'leaf{j}' for j in p])}"
                  for i, p in enumerate(pods) if p and rng.random() < 0.8]
        return "topology.conf", ("\n".join(lines) + "\n").encode(), []
    sizes = rng.choice([[], [len(leaves[0])], [len(leaves[0]), 2 * len(leaves[0])], [3, 6], [2, 5]])
    if fmt == "block":
        lines = []
        for i, hs in enumerate(leaves):
            lines += [f"# block{i + 1:03d}=NVL{i}"]
            lines += [f"BlockName=block{i + 1:03d} Nodes={_hostlist(hs)}"]
        if sizes:
            lines.append("BlockSizes=" + ",".join(map(str, sizes)))
        return "topology.conf", ("\n".join(lines) + "\n").encode(), []
    if fmt == "levels":
        data: Any = {"levels": [{f"l{i}": _hostlist(hs) for i, hs in enumerate(leaves)}]}
        return "topology.yaml", yaml.safe_dump(data).encode(), []
    switches = [{"switch": f"leaf{i}", "nodes": _hostlist(h)} for i, h in enumerate(leaves)]
    tree = {"switches": switches}
    tree["switches"] += [{"switch": f"pod{i}", "children": _hostlist([f"leaf{j}" for j in p])}
                         for i, p in enumerate(pods) if p]
    blocks: dict[str, Any] = {"blocks": [{"block": f"b{i}", "nodes": _hostlist(hs)}
                                         for i, hs in enumerate(leaves)]}
    if sizes:
        blocks["block_sizes"] = sizes
    entries = [{"topology": "t-tree", "tree": tree}, {"topology": "t-block", "block": blocks},
               {"topology": "t-flat", "flat": True}]
    rng.shuffle(entries)
    entries = entries[: rng.randint(1, 3)]
    if rng.random() < 0.5:
        rng.choice(entries)["cluster_default"] = True
    if rng.random() < 0.15:
        entries = _mutate(rng, entries, rng.randint(1, 2))
    names = [str(e["topology"]) for e in entries if isinstance(e, dict) and "topology" in e]
    return "topology.yaml", yaml.safe_dump(entries, sort_keys=False).encode(), names


def _allocation_case(rng: random.Random) -> Case:
    """plan on an allocation: --topology in any format, --hosts (with slots=) or --nodelist,
    --exclude, sometimes a corrupted line."""
    leaves, _ = _host_names(rng)
    hosts = [h for hs in leaves for h in hs]
    name, raw, names = _topology_file(rng, leaves)
    if rng.random() < 0.1:
        lines = raw.decode().splitlines()
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(["", lines[i] * 2, lines[i][: len(lines[i]) // 2], "Nodes=n[1-",
                               "BlockSizes=0", "SwitchName=leaf0 Nodes=n001", "- topology: x"])
        raw = ("\n".join(lines) + "\n").encode()
    cluster = rng.choice(ALLOC_CLUSTERS)
    gpn = 4 if cluster.startswith("gb200") else 8
    argv = ["plan", "--model", rng.choice(["llama3-8b", "mixtral-8x7b", "mcore-gpt-1.7b"]),
            "--cluster", cluster, "--topology", name, "--time-limit", rng.choice(["0.3", "1"])]
    argv += ["--global-batch", rng.choice(["8", "16", "64", "7"])]
    files = {name: raw}
    picked = rng.sample(hosts, rng.randint(1, len(hosts)))
    bad = rng.random() < 0.25  # one wrong thing in the host input, else a valid allocation
    if rng.random() < 0.6:
        lines = [h + (f" slots={gpn}" if rng.random() < 0.4 else "") for h in picked]
        if bad:
            i = rng.randrange(len(lines))
            wrong = [f" slots={gpn // 2}", f" slots={gpn * 2}", " slots=x"]
            lines[i] = picked[i] + rng.choice(wrong)
            lines.append(rng.choice(["n999", picked[0], "# comment", "bad host line", ""]))
        files["hosts"] = ("\n".join(lines) + "\n").encode()
        argv += ["--hosts", "hosts"]
    else:
        argv += ["--nodelist", rng.choice(["n[001-", "x9", "n999"]) if bad else _hostlist(picked)]
    if rng.random() < 0.4:
        drained = rng.sample(hosts, rng.randint(1, max(1, len(hosts) // 3)))
        argv += ["--exclude", _hostlist(drained)]
    if names and rng.random() < 0.3:
        argv += ["--topology-name", rng.choice(names) if rng.random() < 0.9 else "nope"]
    if rng.random() < 0.2:  # other jobs' uplink load (docs/cli.md --other-traffic)
        load = {"uplinks": {"leaf0": rng.choice([0.5, 0.75, 0.9]), "pod0": 0.25}}
        name = rng.choice(["traffic.yaml", "traffic.json"])
        files[name] = _dump(rng, _mutate(rng, load, rng.choice([0, 1, 2])), name)
        if rng.random() < 0.1:
            files[name] = _corrupt(rng, files[name])
        argv += ["--other-traffic", name]
    for extra in rng.sample([["--place-top", "1"], ["--gpus", "8"], ["--pp", "2"], ["--markdown"],
                             ["--out-dir", "run"], ["--json"], ["--json"]], rng.randint(0, 2)):
        argv += extra
    return Case("allocation", argv, files)


NCCL_COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv"]
GEMM_ROWS = [(512, 512, 512), (2048, 2048, 2048), (8192, 8192, 8192), (4096, 28672, 8192)]
STEPS_RUN = {
    "name": "run-a",
    "model": "llama3-8b",
    "num_gpus": 64,
    "seq_len": 4096,
    "global_batch": 128,
    "layout": {"tp": 2, "pp": 1, "dp": 32, "cp": 1, "micro_batch": 1},
    "measured_step_time_s": 4.2,
}


def _nccl_log(rng: random.Random) -> bytes:
    """An nccl-tests log in the tools' own format (tests/integration/cli/calibration_fixtures.py),
    with some lines dropped, duplicated or given wild numbers."""
    from tests.integration.cli.calibration_fixtures import nccl_log_text

    collective = rng.choice(NCCL_COLLECTIVES)
    ranks = rng.choice([2, 8, 16, 64])
    times = [(2**k, rng.choice([5.0, 50.0, 500.0]) * (1 + k / 10)) for k in range(10, 30, 3)]
    text = nccl_log_text(collective, times, ranks=ranks, gpus_per_node=8)
    lines = text.splitlines()
    for _ in range(rng.randint(0, 3)):
        i = rng.randrange(len(lines))
        action = rng.choice(["drop", "dup", "wild", "cut"])
        if action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "wild":
            parts = lines[i].split()
            if parts:
                parts[rng.randrange(len(parts))] = rng.choice(WILD) or "x"
            lines[i] = "  ".join(parts)
        else:
            lines = lines[:i]
            break
    return ("\n".join(lines) + "\n").encode()


def _csv(rng: random.Random, header: list[str], rows: list[list[Any]]) -> bytes:
    """A CSV with, sometimes, a wild cell, a missing or extra column, or no header."""
    head = list(header)
    body = [list(map(str, r)) for r in rows]
    for _ in range(rng.randint(0, 3)):
        action = rng.choice(["wild", "short", "extra", "nohead", "empty"])
        if action == "wild" and body:
            row = rng.choice(body)
            row[rng.randrange(len(row))] = rng.choice(WILD)
        elif action == "short" and body:
            rng.choice(body).pop()
        elif action == "extra":
            head.append("note")
            for r in body:
                r.append("x")
        elif action == "nohead":
            head = []
        else:
            body = []
    lines = ([",".join(head)] if head else []) + [",".join(r) for r in body]
    return ("\n".join(lines) + "\n").encode()


def _calibrate_case(rng: random.Random) -> Case:
    """`planner calibrate` on nccl-tests logs, GEMM / attention CSVs and a steps YAML."""
    files: dict[str, bytes] = {}
    argv = ["calibrate", "--cluster", rng.choice(["dgx-h100", "dgx-h100", "dgx-b200"])]
    inputs = rng.sample(["nccl", "gemm", "attention", "steps"], rng.randint(1, 3))
    if "nccl" in inputs:
        names = [f"nccl{i}.txt" for i in range(rng.randint(1, 2))]
        for name in names:
            files[name] = _nccl_log(rng)
        argv += ["--nccl-tests", *names]
    if "gemm" in inputs:
        dtype = rng.choice(["bf16", "fp8"])
        rows = [[m, n, k, dtype, rng.choice(["400", "650", "900"])] for m, n, k in GEMM_ROWS]
        files["gemm.csv"] = _csv(rng, ["m", "n", "k", "dtype", "tflops"], rows)
        argv += ["--gemm", "gemm.csv"]
    if "attention" in inputs:
        header = ["batch", "seq", "heads", "kv_heads", "head_dim", "causal", "dtype", "tflops"]
        rows = [[b, s, 32, 8, 128, "true", "bf16", rng.choice(["300", "450"])]
                for b, s in ((8, 1024), (2, 4096), (1, 8192))]  # fmt: skip
        files["attn.csv"] = _csv(rng, header, rows)
        argv += ["--attention", "attn.csv"]
    if "steps" in inputs:
        runs = [
            _mutate(rng, {**STEPS_RUN, "name": f"run-{i}", "global_batch": 64 * (i + 1)},
                    rng.randint(0, 2))
            for i in range(rng.randint(1, 3))
        ]  # fmt: skip
        files["steps.yaml"] = _dump(rng, runs, "steps.yaml")
        argv += ["--steps", "steps.yaml"]
    if rng.random() < 0.2:  # one input's bytes broken
        name = rng.choice(sorted(files))
        files[name] = _corrupt(rng, files[name])
    argv += ["--out", "out.yaml"] + (["--json"] if rng.random() < 0.5 else [])
    return Case("calibrate", argv, files)


DESIGN_MIX = [
    {"model": "llama3-8b", "global_batch": 32, "seq_len": 2048, "precision": "bf16", "share": 0.5},
    {"model": "llama3-8b", "global_batch": 64, "seq_len": 1024, "precision": "fp8", "share": 0.5},
]
DESIGN_SPACE = {
    "leaf_gpus": 16, "technology": ["infiniband"], "nic_gbps": [400], "fabric": ["rail-optimised"],
    "oversubscription": [1],
}  # fmt: skip


def _design_case(rng: random.Random) -> Case:
    """`planner design` (issue 29) on a workload mix and a design-space file: small enough that a
    valid case searches in seconds (two 8B jobs, 32 GPUs, one or two designs), then mutated
    (wrong types, unknown fields, shares that do not sum to 1, absurd sizes, broken bytes)."""
    mix = [dict(e) for e in DESIGN_MIX[: rng.randint(1, 2)]]
    if len(mix) == 1:
        mix[0]["share"] = 1.0
    space = dict(DESIGN_SPACE)
    if rng.random() < 0.3:
        space["nic_gbps"] = [rng.choice([100, 200, 400, 800, 1600, 3, 0])]
    if rng.random() < 0.2:
        space["scale_up"] = [rng.choice([8, 72, 3])]
    files = {
        "mix.yaml": _dump(rng, _mutate(rng, mix, rng.choice([0, 1, 1, 2])), "mix.yaml"),
        "designs.yaml": _dump(rng, _mutate(rng, space, rng.choice([0, 1, 1, 2])), "designs.yaml"),
    }
    if rng.random() < 0.1:
        name = rng.choice(sorted(files))
        files[name] = _corrupt(rng, files[name])
    argv = ["design", "--workload", "mix.yaml", "--gpu", rng.choice(["h100-sxm-80gb", "b200", "x"])]
    argv += ["--gpus", rng.choice(["32", "32", "16", "0", "7", "1000000"]), "--workers", "1"]
    if rng.random() < 0.8:
        argv += ["--designs", "designs.yaml"]
    if rng.random() < 0.2:
        argv += [rng.choice(["--network-budget", "--min-throughput", "--gpu-hour-price",
                             "--amortization-years"]), rng.choice(WILD + ["5000", "2.5"])]  # fmt: skip
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("design", argv, files)


KERNEL_ROOT = Path(__file__).resolve().parents[1] / "models_zoo" / "kernels"
KERNEL_FILES = ["gemm", "attention", "grouped_gemm", "memory_bound", "attention_window",
                "sustained"]  # fmt: skip


def _table_sample(rng: random.Random, stem: str) -> bytes:
    """A few rows of a shipped kernel table (models_zoo/kernels/h100-sxm-80gb), in its own
    columns, sometimes with a wild cell, a missing or extra column, no header or no rows."""
    lines = (KERNEL_ROOT / "h100-sxm-80gb" / f"{stem}.csv").read_text().splitlines()
    header, body = lines[0].split(","), [ln.split(",") for ln in lines[1:] if ln]
    rows = rng.sample(body, min(len(body), rng.randint(1, 12)))
    if rng.random() < 0.5:  # keep it valid half the time
        return ("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n").encode()
    return _csv(rng, header, rows)


SYSTEM_FILE = {  # Calculon's layout (tests/integration/cli/test_calibrate_system_file.py)
    "matrix": {
        "float16": {
            "tflops": 1000, "gflops_efficiency": [[128, 0.9], [16, 0.8], [1, 0.5], [0, 0.1]]
        },
        "float8": {"tflops": 2000, "gflops_efficiency": [[128, 0.9], [0, 0.2]]},
    },
    "vector": {"float16": {"tflops": 120, "gflops_efficiency": [[0, 0.5]]}},
    "mem1": {"GiB": 80, "GBps": 3000, "MB_efficiency": [[100, 0.9], [10, 0.7], [0, 0.3]]},
    "processing_mode": "no_overlap",
    "networks": [],
}


def _kernel_folder(rng: random.Random, files: dict[str, bytes], folder: str) -> None:
    """A folder of kernel tables (some of the shipped kinds, sampled and maybe broken)."""
    for stem in rng.sample(KERNEL_FILES, rng.randint(0, 4)):
        files[f"{folder}/{stem}.csv"] = _table_sample(rng, stem)
    if rng.random() < 0.1:
        files[f"{folder}/notes.txt"] = b"not a table\n"
    if not any(name.startswith(folder + "/") for name in files):
        files[f"{folder}/README"] = b"an empty folder of tables\n"  # the folder must exist


def _kernels_case(rng: random.Random) -> Case:
    """`calibrate --kernels DIR|builtin`, `--grouped-gemm`, `--memory-bound`, `--system-file`
    (kernel table folders and single tables, a peer simulator's system file), then sometimes a
    plan on the calibrated cluster file."""
    files: dict[str, bytes] = {}
    cluster = rng.choice(["dgx-h100", "dgx-h100", "dgx-b200", "h800"])
    argv = ["calibrate", "--cluster", cluster]
    inputs = rng.sample(["kernels", "grouped", "memory", "system"], rng.randint(1, 2))
    if "kernels" in inputs:
        if rng.random() < 0.2:
            argv += ["--kernels", rng.choice(["builtin", "builtin", "nope"])]
        else:
            _kernel_folder(rng, files, "k")
            argv += ["--kernels", "k"]
    if "grouped" in inputs:
        files["gg.csv"] = _table_sample(rng, "grouped_gemm")
        argv += ["--grouped-gemm", "gg.csv"]
    if "memory" in inputs:
        files["mb.csv"] = _table_sample(rng, "memory_bound")
        argv += ["--memory-bound", "mb.csv"]
    if "system" in inputs:
        files["sys.json"] = _dump(rng, _mutate(rng, SYSTEM_FILE, rng.choice([0, 1, 2])), "s.json")
        argv += ["--system-file", "sys.json"]
    if rng.random() < 0.15:
        name = rng.choice(sorted(files) or ["x"])
        files[name] = _corrupt(rng, files.get(name, b""))
    argv += ["--out", "out.yaml"] + (["--json"] if rng.random() < 0.5 else [])
    return Case("kernels", argv, files)


def _kernel_cluster_case(rng: random.Random) -> Case:
    """A cluster file naming kernel tables (`kernels: {path: DIR}`, `builtin`,
    `{builtin: GPU}`, broken forms) planned or estimated on."""
    files: dict[str, bytes] = {}
    data: dict[str, Any] = json.loads(json.dumps(CLUSTER))
    form = rng.choice(["path", "path", "builtin", "builtin_gpu", "wild"])
    if form == "path":
        _kernel_folder(rng, files, "k")
        data["kernels"] = {"path": rng.choice(["k", "k", "missing", "c.yaml"])}
        if rng.random() < 0.2:
            data["kernels"]["source"] = rng.choice(["my tables", 7])
    elif form == "builtin":
        data["kernels"] = "builtin"
        if rng.random() < 0.3:
            data["gpu"] = rng.choice(["b200", "h200-sxm-141gb", "a100-sxm-80gb"])
    elif form == "builtin_gpu":
        data["kernels"] = {"builtin": rng.choice(["h100-sxm-80gb", "h200-sxm-141gb", "b200", 3])}
    else:
        data["kernels"] = _wild_value(rng)
    if rng.random() < 0.3:
        data = _mutate(rng, data, 1)
    name = rng.choice(["c.yaml", "c.json"])
    files[name] = _dump(rng, data, name)
    model = rng.choice(["llama3-8b", "mixtral-8x7b", "mcore-gpt-1.7b"])
    argv = ["plan", "--model", model, "--cluster", name, "--gpus", rng.choice(["8", "16", "64"])]
    if rng.random() < 0.3:
        argv = ["estimate", "--model", model, "--cluster", name, "--gpus", "8",
                "--global-batch", "16", "--tp", "2", "--pp", "1", "--dp", "4"]  # fmt: skip
    else:
        argv += _limit(rng) + ["--global-batch", rng.choice(["16", "64"])]
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("kernel_cluster", argv, files)


RELIABILITY = {
    "checkpoint": "async",
    "storage_gb_per_s": 500.0,
    "restart_s": 300.0,
    "mtbf_scale": 1.0,
    "components": {"gpu": {"per_unit_per_day": 1.0e-4}},
    "straggler_factors": [1.0, 1.02, 1.05],
}


def _goodput_case(rng: random.Random) -> Case:
    """plan / estimate with --goodput, --reliability FILE (a mutated reliability file, sometimes
    with a straggler table), --objective goodput; whatif over the reliability parameters."""
    files: dict[str, bytes] = {}
    rel = dict(RELIABILITY)
    if rng.random() < 0.3:
        del rel["straggler_factors"]
        rel["straggler_table"] = "stragglers.csv"
        rows = [rng.choice(["1.0", "1.1", "0.5", "x", "", "inf"]) for _ in range(rng.randint(0, 5))]
        head = rng.choice([["factor"], ["gpu,factor"], []])
        rows = [f"{i},{r}" for i, r in enumerate(rows)] if head == ["gpu,factor"] else rows
        files["stragglers.csv"] = ("\n".join(head + rows) + "\n").encode()
    name = rng.choice(["rel.yaml", "rel.json"])
    files[name] = _dump(rng, _mutate(rng, rel, rng.choice([0, 1, 2])), name)
    if rng.random() < 0.1:
        files[name] = _corrupt(rng, files[name])
    model, cluster = rng.choice(["llama3-8b", "mixtral-8x7b"]), rng.choice(CLUSTERS[:4])
    command = rng.choice(["plan", "plan", "estimate", "whatif"])
    argv = [command, "--model", model, "--cluster", cluster, "--gpus", rng.choice(["16", "64"])]
    if command == "estimate":
        argv += ["--global-batch", "64", "--tp", "2", "--pp", "1", "--dp", argv[-1][:1]]
    else:
        argv += _limit(rng) + ["--global-batch", "64"]
    if command == "whatif":
        vary = rng.choice(["mtbf", "storage-gb-per-s", "spares"])
        values = rng.choice(["1,2", "100,1000", "0,4", "0.5", "inf", "x"])
        argv += ["--vary", vary, "--values", values]
    argv += rng.choice(
        [["--goodput"], ["--reliability", name], ["--goodput", "--reliability", name]]
    )
    if command == "plan" and rng.random() < 0.3:
        argv += ["--objective", rng.choice(["goodput", "step_time"])]
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("goodput", argv, files)


PRICES = {"qm9700": {"usd": 40000}, "connectx-7": {"usd": 1800, "w": 24}, "pue": 1.3}


def _bill_case(rng: random.Random) -> Case:
    """`bill` on a preset or cluster file, with a mutated --prices file."""
    files: dict[str, bytes] = {}
    argv = ["bill", "--cluster", rng.choice(CLUSTERS + ALLOC_CLUSTERS)]
    if rng.random() < 0.5:
        argv += ["--gpus", rng.choice(["8", "64", "1024", "1000", "0", "1000000"])]
    if rng.random() < 0.6:
        name = rng.choice(["prices.yaml", "prices.json"])
        files[name] = _dump(rng, _mutate(rng, PRICES, rng.choice([0, 1, 2])), name)
        if rng.random() < 0.1:
            files[name] = _corrupt(rng, files[name])
        argv += ["--prices", name]
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("bill", argv, files)


_SAVED_PLAN: dict[str, Any] = {}


def _saved_plan() -> dict[str, Any]:
    """A real plan.json (`plan --out-dir`), made once per process."""
    if not _SAVED_PLAN:
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16",
                    "--global-batch", "64", "--time-limit", "5", "--out-dir", tmp + "/run"]  # fmt: skip
            quiet = contextlib.redirect_stdout(io.StringIO())
            with quiet, contextlib.redirect_stderr(io.StringIO()):
                assert main(argv) == 0, "the saved plan for emit cases did not plan"
            _SAVED_PLAN.update(json.loads((Path(tmp) / "run" / "plan.json").read_text()))
    return _SAVED_PLAN


def _emit_case(rng: random.Random) -> Case:
    """`emit --from plan.json` on a saved plan, mutated (wrong types, unknown fields, broken)."""
    data = _mutate(rng, _saved_plan(), rng.choice([0, 1, 2, 3]))
    raw = json.dumps(data).encode()
    if rng.random() < 0.15:
        raw = _corrupt(rng, raw)
    argv = ["emit", "--from", rng.choice(["plan.json", "plan.json", "nope.json"])]
    argv += ["--emit", rng.choice(["megatron", "torchtitan", "deepspeed", "mesh", "ranks"])]
    if rng.random() < 0.3:
        argv += ["--framework-version", rng.choice(["0.19", "0.8", "x", "core_r0.19.0"])]
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("emit", argv, {"plan.json": raw})


def _has_design() -> bool:
    """`planner design` exists (issue 29 lands it); before, the fuzzer leaves the kind out."""
    from planner import cli as planner_cli

    return hasattr(planner_cli, "_cmd_design")


SPECIAL = {
    "allocation": _allocation_case,
    "calibrate": _calibrate_case,
    "kernels": _kernels_case,
    "kernel_cluster": _kernel_cluster_case,
    "goodput": _goodput_case,
    "bill": _bill_case,
    "emit": _emit_case,
}
"""Kinds with a generator of their own (`--kind NAME` runs only that kind)."""


def make_case(rng: random.Random) -> Case:
    # One case in 20 is `planner design` (a valid one runs plan searches for seconds: a kind of
    # its own would dominate the run's time), once the command exists.
    if rng.random() < 0.05 and _has_design():
        return _design_case(rng)
    kind = rng.choice(
        ["flags", "flags", "model_file", "hf", "cluster_file", "graph", "validate", "corrupt",
         "allocation", "calibrate"] + list(SPECIAL)
    )  # fmt: skip
    if kind in SPECIAL:
        return SPECIAL[kind](rng)
    model, cluster = rng.choice(MODELS), rng.choice(CLUSTERS)
    gpus = ["--gpus", rng.choice(["8", "16", "64", "256", "1024", "1000", "1000000"])]
    files: dict[str, bytes] = {}
    if kind == "model_file":
        name = rng.choice(["m.yaml", "m.json"])
        base = MODEL_OSS if rng.random() < 0.25 else MODEL
        files[name] = _dump(rng, _mutate(rng, base, rng.randint(0, 3)), name)
        model = name
    elif kind == "hf":
        files["config.json"] = json.dumps(_mutate(rng, HF, rng.randint(0, 3))).encode()
        model = "config.json"
    elif kind in ("cluster_file", "graph"):
        name = rng.choice(["c.yaml", "c.json"])
        if kind == "graph":
            base = {"name": "fab", "gpu": "h100-sxm-80gb", "gpus_per_node": 8, "num_gpus": 16}
            data: Any = {**base, "graph": _graph(2)}
        else:
            data = CLUSTER
        files[name] = _dump(rng, _mutate(rng, data, rng.randint(0, 3)), name)
        cluster = name
        gpus = ["--gpus", rng.choice(["8", "16", "64"])] if rng.random() < 0.5 else []
    if kind == "validate" or (kind == "corrupt" and rng.random() < 0.4):
        name = rng.choice(["runs.yaml", "runs.json"])
        records = [_mutate(rng, RECORD, rng.randint(0, 3)) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            records = rng.choice([7, "x", {"a": 1}, None, [[1]]])
        raw = _dump(rng, records, name)
        if kind == "corrupt":
            raw = _corrupt(rng, raw)
        files[name] = raw
        argv = ["validate", "--data", name] + (["--json"] if rng.random() < 0.5 else [])
        if rng.random() < 0.2:
            argv.append("--markdown")
        return Case(kind, argv, files)
    if kind == "corrupt":
        name = rng.choice(["m.yaml", "m.json", "c.yaml"])
        base = CLUSTER if name.startswith("c") else MODEL
        files[name] = _corrupt(rng, _dump(rng, base, name))
        if name.startswith("c"):
            cluster = name
        else:
            model = name
    command = rng.choice(["plan", "plan", "plan", "estimate", "whatif", "presets"])
    if command == "presets":
        argv = ["presets"] + rng.choice([[], ["models"], ["gpus"], ["clusters"], ["nope"]])
        return Case(kind, argv + (["--json"] if rng.random() < 0.5 else []), files)
    argv = [command, "--model", model, "--cluster", cluster] + gpus
    if command == "plan":
        argv += _limit(rng)
        extras = [
            ["--global-batch", rng.choice(["64", "128", "997", "0"])],
            ["--seq-len", rng.choice(["2048", "8192", "3"])],
            ["--no-order-search"],
            ["--top", rng.choice(["1", "3", "50"])],
            ["--tp", rng.choice(["1", "2", "8", "3"])],
            ["--max-pp", rng.choice(["1", "4", "16"])],
            ["--micro-batches", "1", "2"],
            ["--recompute", "full"],
            ["--zero", "1", "3"],
            ["--stage-split", rng.choice(["even", "search"])],
            ["--engine", "exhaustive"],
            ["--precision", rng.choice(["bf16", "fp8"])],
            ["--memory-headroom", rng.choice(["0.1", "0.99", "-1", "nan"])],
            ["--global-batch-range", "64", rng.choice(["128", "16"])],
            ["--emit", rng.choice(["megatron", "torchtitan", "deepspeed", "mesh", "ranks"])],
            ["--markdown"],
            ["--max-vp", rng.choice(["1", "4", "999999999"])],
            ["--seed", rng.choice(["0", "7", str(2**40)])],
            ["--framework", rng.choice(["megatron", "torchtitan", "deepspeed", "none"])],
            ["--pp-schedules", *rng.sample(["1f1b", "dualpipe"], rng.randint(1, 2))],
            ["--max-nodes", rng.choice(["1", "2", "0", "64"])],
            [rng.choice(["--dp", "--cp", "--ep", "--pp"]), rng.choice(["1", "2", "4", "8", "3"])],
            [rng.choice(["--max-tp", "--max-cp", "--max-ep"]), rng.choice(["1", "2", "8"])],
            ["--simplicity-tolerance", rng.choice(["0", "0.01", "0.5", "2", "-1"])],
            ["--top-variants"],
            ["--all-orders"],
            ["--ep-overlap"],
            ["--moe-dispatcher", rng.choice(["alltoall", "deepep"])],
            ["--optimizer-moments", rng.choice(["fp32", "bf16"])],
            ["--moe-capacity-factor", rng.choice(["1.0", "0.01", "0", "nan", "1e9"])],
            ["--moe-pad-to-capacity"],
            ["--moe-force-balance"],
            ["--activation-func-fp8-input-store"],
            ["--attention-output-store", rng.choice(["separate", "e5m6"])],
            ["--cp-comm-type", rng.choice(["p2p", "a2a", "ring"])],
            ["--no-deterministic"],
            ["--framework-version", rng.choice(["0.19", "0.8", "x"])],
            ["--html", rng.choice(["out.html", "no/such/dir/out.html"])],
        ]
        for extra in rng.sample(extras, rng.randint(0, 5)):
            argv += extra
    elif command == "estimate":
        argv += ["--global-batch", rng.choice(["64", "128", "8"])]
        for axis in ("tp", "pp", "dp"):
            argv += [f"--{axis}", rng.choice(["1", "2", "4", "8"])]
        if rng.random() < 0.3:
            argv += ["--vp", rng.choice(["1", "2", "9999"])]
        extras = [
            ["--cp", rng.choice(["1", "2", "4"])],
            ["--ep", rng.choice(["1", "2", "8", "3"])],
            ["--micro-batch", rng.choice(["1", "2", "4", "3"])],
            ["--recompute", rng.choice(["none", "selective", "full"])],
            ["--recompute-modules", *rng.sample(["core_attn", "layernorm", "mlp", "moe_act",
                                                 "moe", "shared_experts", "mla_up_proj"], 2)],
            ["--recompute-method", rng.choice(["uniform", "block"])],
            ["--recompute-num-layers", rng.choice(["1", "2", "0", "999"])],
            ["--zero", rng.choice(["0", "1", "2", "3"])],
            [rng.choice(["--sequence-parallel", "--no-sequence-parallel"])],
            ["--framework", rng.choice(["megatron", "torchtitan", "deepspeed"])],
            ["--pp-schedule", rng.choice(["1f1b", "dualpipe"])],
            ["--ep-overlap"],
            ["--moe-dispatcher", rng.choice(["alltoall", "deepep"])],
            ["--cp-comm-type", rng.choice(["p2p", "a2a"])],
            ["--moe-capacity-factor", rng.choice(["1.25", "0", "inf"])],
            ["--moe-pad-to-capacity"],
            ["--moe-force-balance"],
            ["--precision", rng.choice(["bf16", "fp8", "mxfp8", "nvfp4"])],
            ["--seq-len", rng.choice(["2048", "8192", "3"])],
            ["--memory-headroom", rng.choice(["0.1", "0.99", "-1"])],
            ["--dp-shard", rng.choice(["1", "2", "4", "3", "0"])],
        ]  # fmt: skip
        for extra in rng.sample(extras, rng.randint(0, 4)):
            argv += extra
    else:  # whatif
        vary = rng.choice(
            [
                "nic-gbps",
                "nvlink-domain",
                "oversubscription",
                "wan-latency-ms",
                "wan-gbps",
                "planes",
                "nvlink-gb-per-s",
                "ici-gb-per-s",
                "slice-shape",
                "fabric",
                "technology",
            ]
        )
        words = {  # the categorical parameters take words (planner/whatif.py CATEGORICAL)
            "slice-shape": ["16x16x16", "4x4x4", "8x8", "0x4x4", "x"],
            "fabric": ["rail-only", "rail-optimised", "fat-tree", "x"],
            "technology": ["infiniband", "roce", "roce-untuned", "x"],
        }.get(vary, ["100", "400", "8", "72", "1", "4", "inf", "0", "1e12"])
        values = ",".join(rng.choice(words) for _ in range(rng.randint(1, 2)))
        argv += ["--vary", vary, "--values", values] + _limit(rng)
        argv += ["--global-batch", rng.choice(["64", "256"])]
    if rng.random() < 0.15:  # a wild value for a random numeric flag
        flags = [i for i, a in enumerate(argv) if a.startswith("--") and i + 1 < len(argv)]
        flags = [i for i in flags if not argv[i + 1].startswith("--")]
        if flags:
            i = rng.choice(flags)
            if argv[i] not in ("--model", "--cluster", "--time-limit"):
                argv[i + 1] = rng.choice(WILD)
    if rng.random() < 0.5 and command in ("plan", "estimate", "whatif"):
        argv.append("--json")
    return Case(kind, argv, files)


_WALL = re.compile(
    r'"wall_time_s": [0-9.e+-]+|\bin [0-9.]+ ?s\b|[0-9.]+ s wall|gap [0-9.]+%, [0-9.]+ s'
)


@dataclass
class Outcome:
    code: Any
    out: str
    err: str
    timing: Timed
    traceback: str | None = None


def run_case(case: Case, folder: Path) -> Outcome:
    for name, raw in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)  # kernel-table folders
        (folder / name).write_bytes(raw)
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()

    def call() -> tuple[Any, str | None]:
        try:
            os.chdir(folder)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    return main(list(case.argv)), None
                except SystemExit as exc:  # argparse --help / --version only
                    return (exc.code if isinstance(exc.code, int) else 2), None
        except Exception:  # noqa: BLE001 (this is what the fuzzer looks for)
            return "traceback", traceback.format_exc()
        finally:
            os.chdir(cwd)

    # the load reference only where a budget is judged and the wall time passed it (it costs
    # ~40 ms a case; within the budget no load changes the verdict: load_clock.timed)
    budget = case.budget_s()
    (code, tb), timing = timed(call, reference=budget is not None, budget_s=budget)
    return Outcome(code, out.getvalue(), err.getvalue(), timing, tb)


def problems(case: Case, first: Outcome, second: Outcome | None) -> list[str]:
    """The failure classes of one case: traceback, exit, time, determinism."""
    found = []
    if first.traceback is not None:
        last = first.traceback.strip().splitlines()[-1]
        found.append(f"traceback: {last}")
        return found
    if first.code not in (0, 1, 2):
        found.append(f"exit: code {first.code!r}")
    if first.code == 2 and len(first.err.strip().splitlines()) != 1:
        found.append(f"exit: exit 2 with a {len(first.err.strip().splitlines())}-line message")
    if (
        first.code == 0
        and "--json" in case.argv
        and not any(a in case.argv for a in ("--markdown", "--emit"))
    ):
        try:
            json.loads(first.out)
        except ValueError:
            found.append("exit: --json output does not parse")
    if first.code in (1, 2) and "--json" in case.argv and case.argv[0] != "presets":
        # docs/contract.md "Errors with --json": one error object on stdout (issue 28)
        try:
            error = json.loads(first.out)["error"]
            assert error["exit_code"] == first.code and error["message"]
        except (ValueError, KeyError, TypeError, AssertionError):
            found.append("exit: --json error without its error object on stdout")
    budget = case.budget_s()
    if budget is not None and first.timing.over(budget):
        found.append(f"time: {first.timing.describe(budget)}")
    # A search the deadline stopped scored what the clock allowed: not comparable run to run.
    timed = any(
        TIMED_OUT in o.out + o.err or "within the time limit" in o.out + o.err
        for o in (first, second)
        if o is not None
    )
    if (
        second is not None
        and not timed
        and (
            first.code != second.code
            or _WALL.sub("", first.out) != _WALL.sub("", second.out)
            or _WALL.sub("", first.err) != _WALL.sub("", second.err)
        )
    ):
        found.append("nondeterministic")
    return found


def fuzz(
    cases: int, seed: int, show: bool = False, every: int = DETERMINISM_EVERY, kind: str = ""
) -> dict:
    """`kind`: only that kind of case (SPECIAL's names and "design"; "" every kind)."""
    rng = random.Random(seed)
    counts = {"traceback": 0, "exit": 0, "time": 0, "nondeterministic": 0}
    failures = []
    codes: dict[str, int] = {}
    for n in range(cases):
        special = {**SPECIAL, "design": _design_case}
        case = special[kind](rng) if kind in special else make_case(rng)
        with tempfile.TemporaryDirectory() as tmp:
            first = run_case(case, Path(tmp))
            second = run_case(case, Path(tmp)) if every and n % every == 0 else None
        codes[str(first.code)] = codes.get(str(first.code), 0) + 1
        found = problems(case, first, second)
        for f in found:
            counts[f.split(":")[0]] += 1
        if found:
            failures.append((n, case, found))
            if show:
                print(f"case {n} ({case.kind}): {' '.join(case.argv)} -> {found}", flush=True)
                for name, raw in case.files.items():
                    print(f"  {name}: {raw[:300]!r}")
                if first.traceback:
                    print(first.traceback)
    return {"cases": cases, **counts, "failures": failures, "codes": codes}


def summary(result: dict) -> str:
    return (
        f"fuzz: {result['cases']} cases, {result['traceback']} tracebacks, "
        f"{result['exit']} bad exit codes, {result['time']} over time, "
        f"{result['nondeterministic']} nondeterministic"
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", action="store_true", help="print every failing case")
    parser.add_argument(
        "--determinism-every",
        type=int,
        default=DETERMINISM_EVERY,
        help="re-run every N-th case to check determinism (0: never)",
    )
    parser.add_argument(
        "--kind",
        choices=("", *SPECIAL, "design"),
        default="",
        help="only one kind: allocation (plans on --topology / --hosts / --nodelist), calibrate "
        "(nccl-tests logs, GEMM / attention CSVs, steps YAML), kernels (calibrate's kernel-table "
        "folders, single tables, system files), kernel_cluster (cluster files naming kernel "
        "tables), goodput (--goodput / --reliability FILE), bill (--prices FILE), emit (--from "
        "a saved plan), design (workload-mix and design-space files)",
    )
    parser.add_argument(
        "--record",
        metavar="JSON",
        help="append this run (counts, exit codes, wall time, revision, load) to a JSON list: "
        "bench/results/fuzz.json is what README.md#reliability quotes (bench/docs_figures.py)",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    result = fuzz(args.cases, args.seed, args.show, args.determinism_every, args.kind)
    wall_s = time.perf_counter() - start
    print(f"({wall_s:.0f} s wall, seed {args.seed}, exit codes {result['codes']})")
    print(summary(result))
    if args.record:
        _record(Path(args.record), args, result, wall_s)


def _record(path: Path, args: argparse.Namespace, result: dict, wall_s: float) -> None:
    # PLANNER_REVISION: the revision of a frozen copy (an exported tree has no git)
    revision = os.environ.get("PLANNER_REVISION", "")
    try:
        revision = revision or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        revision = "unknown"
    runs = json.loads(path.read_text()) if path.exists() else []
    runs.append(
        {
            "command": "python bench/fuzz.py " + shlex.join(sys.argv[1:]),
            "revision": revision,
            "cases": result["cases"],
            "seed": args.seed,
            "kind": args.kind or "all",
            "counts": {k: result[k] for k in ("traceback", "exit", "time", "nondeterministic")},
            "codes": result["codes"],
            "wall_s": round(wall_s, 1),
            "load_average": list(os.getloadavg()),
            "summary": summary(result),
        }
    )
    path.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    cli()
