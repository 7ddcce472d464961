"""Issue 27's placement cases through the CLI on bench/place_scaling.py's fat-tree and seeded
allocation (written out as topology.conf, hostfile and a cluster file; drained hosts --exclude'd):
Qwen3-235B-A22B at 1,024 and 2,048 GPUs, Llama 3 70B at 2,048, global batch 1,024 / 1,024 /
2,048, sequence 4,096. Prints the exit code, the three maps' step times and the solver.

    python bench/place_cli_cases.py
"""

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import place_scaling as ps

from planner.cli import main


def files(tmp: Path, n: int, seed: int) -> str:
    """Write the allocation's files under tmp; returns the drained hosts for --exclude."""
    cluster = ps.fat_tree(n)
    alloc, drained = ps.allocation(cluster, n, seed)
    leaf: dict[str, list[str]] = {}
    for i, h in enumerate(alloc.hosts):
        leaf.setdefault(alloc.names[1][alloc.domains[1][i]], []).append(h)
    for h in alloc.excluded:  # drained hosts sit under their leaf too (named by the bench's rule)
        idx = int(h[3:]) // ps.NODES_PER_LEAF
        leaf.setdefault(f"leaf{idx:04d}", []).append(h)
    lines = []
    pods: dict[int, list[str]] = {}
    for name, hs in sorted(leaf.items()):
        lines.append(f"SwitchName={name} Nodes={','.join(sorted(hs))}")
        pods.setdefault(int(name[4:]) // ps.LEAVES_PER_POD, []).append(name)
    for p, names in sorted(pods.items()):
        lines.append(f"SwitchName=pod{p:03d} Switches={','.join(names)}")
    lines.append("SwitchName=core Switches=" + ",".join(f"pod{p:03d}" for p in sorted(pods)))
    (tmp / "topology.conf").write_text("\n".join(lines) + "\n")
    (tmp / "hosts").write_text("".join(f"{h}\n" for h in sorted([*alloc.hosts, *alloc.excluded])))
    (tmp / "cluster.json").write_text(cluster.model_dump_json())
    return ",".join(sorted(alloc.excluded))


CASES = [
    ("qwen3-235b-a22b", 1024, 1024),
    ("qwen3-235b-a22b", 2048, 1024),
    ("llama3-70b", 2048, 2048),
]


def run(model: str, n: int, global_batch: int) -> str:
    tmp = Path(tempfile.mkdtemp())
    exclude = files(tmp, n, n)  # the bench's allocation seed for n GPUs
    argv = ["plan", "--model", model, "--cluster", str(tmp / "cluster.json"), "--gpus", str(n),
            "--global-batch", str(global_batch), "--seq-len", "4096",
            "--topology", str(tmp / "topology.conf"), "--hosts", str(tmp / "hosts"),
            "--exclude", exclude, "--place-top", "1", "--json"]  # fmt: skip
    out, start = io.StringIO(), time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    wall = time.perf_counter() - start
    if rc != 0:
        return f"{model} {n:,} GPUs: exit {rc}"
    a = json.loads(out.getvalue())["allocation"]
    s, st = a["solver"], a["step_time_s"]
    return (
        f"{model} {n:,} GPUs: exit 0; scheduler's order {st['scheduler_order']:.4f} s, best rank"
        f" order {st['best_rank_order']:.4f} s, placed {st['placed']:.4f} s; solver {s['status']},"
        f" gap {100 * (s['gap'] or 0):.1f} %, {s['wall_time_s']:.2f} s; whole CLI {wall:.1f} s"
    )


if __name__ == "__main__":
    for case in CASES:
        print(run(*case), flush=True)
