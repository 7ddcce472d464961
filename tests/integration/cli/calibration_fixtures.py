"""Measurement files for the calibration tests, written in the tools' own formats.

nccl-tests text follows NVIDIA/nccl-tests src/util.cu (writeDeviceReport, writeResultHeader,
writeBenchmarkLinePreamble/Body with getFloatStr widths, writeResultFooter) line for line.
"""

from __future__ import annotations

import math
from pathlib import Path

from cost_models.specs import Cluster
from planner.calibrate import nccl

PROGRAM = {
    "all_reduce": ("all_reduce_perf", "float", "sum", 4),
    "all_gather": ("all_gather_perf", "float", "none", 4),
    "reduce_scatter": ("reduce_scatter_perf", "float", "sum", 4),
    "all_to_all": ("alltoall_perf", "float", "none", 4),
    "sendrecv": ("sendrecv_perf", "float", "sum", 4),
}


def _float_str(value: float, width: int) -> str:
    """nccl-tests getFloatStr: %.2f, else %.1f, else %.0f, else %e that fits the width."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return f"{{:{width}.1e}}".format(value)


def nccl_log_text(
    collective: str,
    times_us: list[tuple[int, float]],
    *,
    ranks: int,
    gpus_per_node: int,
    gpu_name: str = "NVIDIA H100 80GB HBM3",
    mixed_gpu: str | None = None,
    cut_after: int | None = None,
) -> str:
    prog, typ, op, word = PROGRAM[collective]
    factor = nccl.busbw_factor(collective, ranks)
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807",
        f"# Collective test starting: {prog}",
        (
            "# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0"
        ),
        "#",
        "# Using devices",
    ]
    for r in range(ranks):
        host = f"node{r // gpus_per_node:03d}"
        dev = r % gpus_per_node
        name = mixed_gpu if (mixed_gpu and r == ranks - 1) else gpu_name
        lines.append(
            f"#  Rank {r:2d} Group {0:2d} Pid {40000 + r:6d} on {host:>10s} device {dev:2d} "
            f"[{0:04x}:{0x18 + dev:02x}:{0:02x}] {name}"
        )
    lines += [
        "#",
        (
            f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place"
            "                       in-place          "
        ),
        (
            f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  "
            f"{'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  "
            f"{'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} "
        ),
        (
            f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  "
            f"{'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
            f"{'(GB/s)':>6s}  {'':>6s} "
        ),
    ]
    busbws = []
    for i, (size, t_us) in enumerate(times_us):
        if cut_after is not None and i >= cut_after:
            return "\n".join(lines) + "\n"
        algbw = size / (t_us * 1e-6) / 1e9
        busbw = algbw * factor
        busbws.append(busbw)
        body = f"  {_float_str(t_us, 7)}  {_float_str(algbw, 6)}  {_float_str(busbw, 6)}  {0:6g}"
        lines.append(f"{size:12d}  {size // word:12d}  {typ:>8s}  {op:>6s}  {-1:6d}{body}{body}")
    lines += [
        f"# {'Out of bounds values':<20s} : 0 OK",
        f"# {'Avg bus bandwidth':<20s} : {sum(busbws) / len(busbws):g} ",
        "#",
        f"# Collective test concluded: {prog}",
        "",
    ]
    return "\n".join(lines)


SIZES = [2**e for e in range(10, 34, 1)]  # 1 KiB .. 8 GiB, -f 2


def write_nccl_log(path: Path, truth: Cluster, collective: str, ranks: int, **kw: object) -> Path:
    """A log whose times are what `truth` (a cluster with known tier values) predicts."""
    j = nccl.tier_index_for(
        nccl.NcclLog(
            str(path),
            collective,
            ranks,
            tuple(f"h{i}" for i in range(max(1, ranks // truth.gpus_per_node))),
            "x",
        ),
        truth,
    )
    span = nccl._span(ranks, truth, j)
    times = [
        (s, 1e6 * nccl.model_time_s(collective, s, ranks, truth.tiers[: j + 1], span))
        for s in SIZES
    ]
    path.write_text(
        nccl_log_text(collective, times, ranks=ranks, gpus_per_node=truth.gpus_per_node, **kw)
    )
    return path


def gemm_csv(
    path: Path,
    peak_tflops: float,
    ceiling: float,
    half_dim: float,
    dtype: str,
    shapes: list[tuple[int, int, int]],
) -> Path:
    rows = ["m,n,k,dtype,tflops"]
    for m, n, k in shapes:
        eff = ceiling * math.prod(d / (d + half_dim) for d in (m, n, k))
        rows.append(f"{m},{n},{k},{dtype},{peak_tflops * eff:.6g}")
    path.write_text("\n".join(rows) + "\n")
    return path


GEMM_SHAPES = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 1024, 8192),
    (8192, 14336, 4096),
    (4096, 28672, 8192),
]
