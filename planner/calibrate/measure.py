"""`planner measure`: GEMM / attention sweeps on this machine's GPU, nccl-tests command lines.

The sweeps need torch (the `[measure]` extra); sweep.py holds them. The nccl-tests commands cover
each tier of a cluster: one run inside the innermost domain, one across each outer tier, with the
flags of nccl-tests' README (`-b` min bytes, `-e` max bytes, `-f` step factor, `-g` GPUs per
process) under Slurm (`srun`, `--switches=1` to keep a leaf-tier run under one leaf switch) and
Open MPI (`mpirun -np N --map-by ppr:G:node`).
"""

from __future__ import annotations

import math

from cost_models.errors import InvalidInput
from cost_models.specs import Cluster

from . import sweep

TESTS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
SIZES = "-b 1K -e 8G -f 2 -g 1"


def run_sweep(what: str, out: str, *, device: str = "cuda", tiny: bool = False) -> tuple[int, str]:
    """Run one sweep and write its CSV; returns (rows, device description)."""
    try:
        import torch
    except ImportError:
        raise InvalidInput(
            f"measure {what}: needs torch (pip install 'planner-placement[measure]')"
        ) from None
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise InvalidInput(
            f"measure {what}: no CUDA device here (use --device cpu for a smoke test)"
        )
    if what == "gemm":
        shapes = sweep.TINY_GEMM_SHAPES if tiny else sweep.DEFAULT_GEMM_SHAPES
        rows = sweep.gemm_sweep(
            shapes, device=device, warmup=1 if tiny else 5, iters=3 if tiny else 20
        )
        fields = sweep.GEMM_FIELDS
    else:
        configs = sweep.TINY_ATTENTION if tiny else sweep.DEFAULT_ATTENTION
        rows = sweep.attention_sweep(
            configs, device=device, warmup=1 if tiny else 3, iters=3 if tiny else 10
        )
        fields = sweep.ATTENTION_FIELDS
    try:
        sweep.write_csv(rows, fields, out)
    except OSError as err:
        raise InvalidInput(f"--out: cannot write {out}: {err.strerror}") from None
    return len(rows), sweep.device_description(device)


def tier_runs(cluster: Cluster) -> list[tuple[str, int, int]]:
    """(tier name, ranks, nodes) of one nccl-tests run per tier, on whole nodes."""
    runs = []
    inner = 1
    for tier in cluster.tiers:
        # The innermost tier is measured over its whole domain; an outer tier over two of its
        # inner domains (the cheapest run that crosses it).
        ranks = tier.domain_size if inner == 1 and tier.domain_size else 2 * inner
        ranks = min(ranks, tier.domain_size or ranks, cluster.num_gpus)
        if ranks <= inner:
            continue
        nodes = max(1, math.ceil(ranks / cluster.gpus_per_node))
        runs.append((tier.name, ranks, nodes))
        inner = tier.domain_size or ranks
    return runs


def nccl_commands_text(cluster: Cluster) -> str:
    g = cluster.gpus_per_node
    lines = [
        f"# nccl-tests runs covering each tier of {cluster.name} ({g} GPUs per node).",
        "# Build nccl-tests with MPI=1 (github.com/NVIDIA/nccl-tests), then run each block on the",
        "# cluster and pass the outputs to:",
        f"#   planner calibrate --cluster {cluster.name} --nccl-tests nccl_*.txt --out my.yaml",
        "# NCCL_NVLS_ENABLE=0 NCCL_COLLNET_ENABLE=0 measure the ring/tree algorithms the cost",
        "# model prices (in-switch reductions report bus bandwidth above line rate).",
    ]
    for name, ranks, nodes in tier_runs(cluster):
        per_node = min(g, ranks)
        leaf = " --switches=1" if nodes > 1 and name != cluster.tiers[-1].name else ""
        lines += ["", f"# tier {name}: {ranks} GPUs on {nodes} node(s)"]
        for test in TESTS:
            out = f"nccl_{name}_{test.removesuffix('_perf')}.txt"
            lines.append(
                f"NCCL_NVLS_ENABLE=0 srun -N {nodes} --ntasks-per-node={per_node} --gpus-per-node={per_node}{leaf} "
                f"--mpi=pmix ./build/{test} {SIZES} > {out}"
            )
        for test in TESTS:
            out = f"nccl_{name}_{test.removesuffix('_perf')}.txt"
            lines.append(
                f"mpirun -np {ranks} --map-by ppr:{per_node}:node -x NCCL_NVLS_ENABLE=0 "
                f"./build/{test} {SIZES} > {out}"
            )
    return "\n".join(lines) + "\n"
