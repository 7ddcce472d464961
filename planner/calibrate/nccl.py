"""Read nccl-tests output as the tools print it and fit each link tier's efficiency and latency.

The text format is nccl-tests' own (github NVIDIA/nccl-tests, src/util.cu): writeDeviceReport
prints ``# nThread N nGpus G minBytes ...`` then ``# Using devices`` and one
``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s`` line per rank (older
releases print ``[0x%02x]``); writeResultHeader the two ``# size count type redop root time algbw
busbw #wrong`` header rows (out-of-place, then in-place); writeBenchmarkLinePreamble /
writeBenchmarkLineBody one row per size (``%12li  %12li  %8s  %6s  %6s`` then ``  %7s  %6s  %6s
%6g`` twice, or ``N/A`` for #wrong without validation); writeResultFooter
``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : X``. A log without that last
line was cut short.

The fit is the cost model's own collective formula (cost_models.comm.collective_time_s,
all_to_all_time_s, p2p_time_s) over the tier the ranks span: its time is linear in 1/efficiency of
that tier and in its latency, given the inner tiers (fitted first), so a least-squares fit on
relative error gives both (alpha-beta). Bus bandwidth = algbw x the nccl-tests factor
(doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather / reduce-scatter / alltoall (n-1)/n,
sendrecv 1), which the cost model's ring factors equal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cost_models import comm, commtable
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster, LinkTier
from models_zoo.inputs import unreadable

RANK_LINE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[[^\]]*\]\s+(.+?)\s*$"
)
"""Releases before 2.11 print no `Group` field and the bus id as `[0x%02x]`."""
GPU_MODEL = re.compile(
    r"\b(GB300|GB200|B300|B200|H800|H200|H100|A100|MI355X|MI300X)\b", re.IGNORECASE
)
ROW_FIELDS = (9, 13, 15, 21, 23)
"""Fields of a result row: in-place only (trace replay), both bodies, both + a 2-token -T
timestamp; per-iteration timing (-I 1) bodies of 8 columns, with or without the timestamp."""
HEADER_LINE = re.compile(r"^#\s+nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)")
STARTING = re.compile(r"^#\s+Collective test starting:\s+(\S+)")
AVG_BUSBW = re.compile(r"^#\s+Avg bus bandwidth\s*:\s*(\S+)")
NCCL_ALGO = re.compile(r"NCCL INFO NCCL_ALGO set by environment to\s+(\S+)")
"""NCCL's own line under NCCL_DEBUG=INFO when NCCL_ALGO forced the algorithm (src/graph/
tuning.cc: INFO(NCCL_ENV, "NCCL_ALGO set by environment to %s", algoStr))."""
PROGRAMS = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "sendrecv",
}


@dataclass(frozen=True)
class Row:
    line: int
    size_bytes: int
    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float


@dataclass
class NcclLog:
    path: str
    collective: str
    ranks: int
    hosts: tuple[str, ...]
    gpu_name: str
    rows: list[Row] = field(default_factory=list)
    avg_busbw_gb_per_s: float = 0.0
    algorithm: str = "auto"
    """NCCL_ALGO as NCCL logged it (lower case), `auto` when the log shows none."""

    @property
    def num_nodes(self) -> int:
        return len(self.hosts)


def _number(text: str, path: str, lineno: int, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"{path}:{lineno}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{path}:{lineno}: {what} {text!r} must be a finite number >= 0")
    return value


def _collective(path: str, program: str | None, lineno: int) -> str:
    names = [program] if program else []
    names.append(Path(path).name)
    for name in names:
        for prog, kind in PROGRAMS.items():
            if prog in name or prog.removesuffix("_perf") in name:
                return kind
    raise InvalidInput(
        f"{path}:{lineno}: cannot tell which collective this log measured (no '# Collective test "
        f"starting' line and the file name names none of {', '.join(PROGRAMS)})"
    )


def _read_lines(path: str | Path) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError as err:
        raise unreadable(path, err) from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not a text file (nccl-tests output expected)") from None


def _data_row(fields: list[str], per_iteration: bool, p: str, i: int) -> Row | None:
    """One message size's row (None for size or time 0): the mean of the out-of-place and
    in-place bodies; a body with wrong results is refused."""
    # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong,
    # then a timestamp with -T; with per-iteration timing (-I 1) each body has 4 more
    # columns (i_min i_max i_p99 i_cv%).
    if len(fields) not in ROW_FIELDS or not fields[0].isdigit():
        raise InvalidInput(
            f"{p}:{i}: expected 'size count type redop root' and 4 columns for "
            f"out-of-place and for in-place, got {len(fields)} fields"
        )
    size = int(fields[0])
    if per_iteration and len(fields) >= 21:
        bodies = [fields[5:9], fields[13:17]]
    elif len(fields) >= 13:
        bodies = [fields[5:9], fields[9:13]]
    else:  # in-place only (trace replay prints no out-of-place body)
        bodies = [fields[5:9]]
    vals = [
        [_number(b[j], p, i, name) for j, name in enumerate(("time", "algbw", "busbw"))]
        for b in bodies
    ]
    for b in bodies:
        if b[3] not in ("0", "N/A"):
            raise InvalidInput(f"{p}:{i}: #wrong is {b[3]}: this run gave wrong results")
    time_us = sum(v[0] for v in vals) / len(vals)
    algbw = sum(v[1] for v in vals) / len(vals)
    busbw = sum(v[2] for v in vals) / len(vals)
    return Row(i, size, time_us, algbw, busbw) if size > 0 and time_us > 0 else None


def _rank_line(
    m: re.Match[str], ranks: dict[int, str], hosts: list[str], gpus: set[str], p: str, i: int
) -> None:
    """Record a '#  Rank N ... on HOST device D [..] GPU' line; one GPU type per run."""
    rank, host, gpu = int(m.group(1)), m.group(4), m.group(6)
    if rank in ranks:
        raise InvalidInput(f"{p}:{i}: rank {rank} listed twice")
    ranks[rank] = host
    if host not in hosts:
        hosts.append(host)
    gpus.add(gpu)
    if len(gpus) > 1:
        raise InvalidInput(
            f"{p}:{i}: mixed GPU types in one run ({', '.join(sorted(gpus))}); calibrate "
            "one GPU type at a time"
        )


def _check_complete(
    p: str, end: int, header_line: int, ranks: dict[int, str], avg: float | None, n_rows: int
) -> None:
    """A whole run: header, rank lines 0..n-1, the average line, at least two sizes."""
    if not header_line:
        raise InvalidInput(f"{p}:1: no '# nThread ... nGpus ...' header: not nccl-tests output")
    if not ranks:
        raise InvalidInput(
            f"{p}:{header_line}: no '#  Rank N Group G Pid P on HOST device D' lines"
        )
    if sorted(ranks) != list(range(len(ranks))):
        raise InvalidInput(f"{p}:{end}: rank lines are not 0..{len(ranks) - 1}; log cut short?")
    if avg is None:
        raise InvalidInput(
            f"{p}:{end}: log cut short (no '# Avg bus bandwidth' line after the last row)"
        )
    if n_rows < 2:
        raise InvalidInput(f"{p}:{end}: {n_rows} message size(s); a fit needs at least 2")


def parse_log(path: str | Path) -> NcclLog:
    """One nccl-tests log; raises InvalidInput naming the file and line on anything malformed."""
    p = str(path)
    lines = _read_lines(path)
    program, header_line, ranks, hosts, gpus = None, 0, {}, [], set()
    per_iteration = False
    rows: list[Row] = []
    avg = None
    algorithm = "auto"
    for i, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if m := NCCL_ALGO.search(line):
            algorithm = m.group(1).lower()
        elif m := STARTING.match(line):
            program = m.group(1)
        elif line.startswith("# Per-Iteration Report"):
            per_iteration = True
        elif HEADER_LINE.match(line):
            if header_line:
                raise InvalidInput(
                    f"{p}:{i}: a second nccl-tests run starts here (first at line {header_line});"
                    " give each run its own file"
                )
            header_line = i
        elif m := RANK_LINE.match(line):
            _rank_line(m, ranks, hosts, gpus, p, i)
        elif m := AVG_BUSBW.match(line):
            avg = _number(m.group(1), p, i, "average bus bandwidth")
        elif line and not line.startswith("#"):
            if not header_line:
                raise InvalidInput(
                    f"{p}:{i}: data before the '# nThread ... nGpus ...' header: not nccl-tests "
                    "output"
                )
            row = _data_row(line.split(), per_iteration, p, i)
            if row is not None:
                rows.append(row)
    _check_complete(p, len(lines), header_line, ranks, avg, len(rows))
    return NcclLog(
        p,
        _collective(p, program, header_line),
        len(ranks),
        tuple(hosts),
        next(iter(gpus)),
        rows,
        avg,
        algorithm,
    )


# ------------------------------------------------------------------------------------ fitting


def check_gpu(log: NcclLog, cluster: Cluster) -> None:
    """Refuse a log from another GPU model than the cluster's (H100 log, B200 cluster)."""
    logged = GPU_MODEL.search(log.gpu_name)
    ours = GPU_MODEL.search(f"{cluster.gpu.id} {cluster.gpu.name}")
    if logged and ours and logged.group(1).upper() != ours.group(1).upper():
        raise InvalidInput(
            f"{log.path}: measured on {log.gpu_name!r} but --cluster {cluster.name} has "
            f"{cluster.gpu.name}: start from a cluster with that GPU"
        )


def tier_index_for(log: NcclLog, cluster: Cluster) -> int:
    """The outermost tier a run over `ranks` GPUs on `hosts` nodes spans (the same number of
    ranks on every host, contiguous hosts: commtable.group_span). One rank per GPU on whole
    nodes measures what the tiers carry when every GPU sends; fewer per host (mpirun
    -npernode 1) measures the groups a plan spreads one GPU per node (DP beside TP 8)."""
    per_node = log.ranks / log.num_nodes
    if log.num_nodes > 1 and (per_node != int(per_node) or per_node > cluster.gpus_per_node):
        raise InvalidInput(
            f"{log.path}: {log.ranks} ranks on {log.num_nodes} hosts ({per_node:g} per host) but "
            f"{cluster.name} has {cluster.gpus_per_node} GPUs per node: run the same number of "
            "ranks on every host, at most one per GPU"
        )
    span = _span(log.ranks, cluster, len(cluster.tiers) - 1, log.num_nodes)
    if log.ranks > max(span):
        raise InvalidInput(f"{log.path}: {log.ranks} ranks exceed every tier of {cluster.name}")
    return commtable.outer_index(span)


def _span(ranks: int, cluster: Cluster, j: int, nodes: int | None = None) -> list[int]:
    """Group members within each tier's domain for `ranks` GPUs on `nodes` contiguous nodes
    (None: whole nodes), tiers 0..j (commtable.group_span)."""
    if nodes is None:
        nodes = max(1, -(-ranks // cluster.gpus_per_node))
    return list(commtable.group_span(ranks, nodes, cluster)[: j + 1])


def model_time_s(
    log_kind: str, size: float, ranks: int, tiers: tuple[LinkTier, ...], span: list[int]
) -> float:
    if log_kind == "all_to_all":
        return comm.all_to_all_time_s(size, span, tiers)
    if log_kind == "sendrecv":
        return comm.p2p_time_s(size, tiers[-1])
    return comm.collective_time_s(log_kind, size, span, tiers)


@dataclass(frozen=True)
class TierFit:
    tier: int
    efficiency: float
    latency_us: float
    sources: tuple[str, ...]
    points: int
    max_residual_pct: float


def _probe(
    log: NcclLog, size: float, tiers: tuple[LinkTier, ...], span: list[int], eff: float, lat: float
) -> float:
    """Modelled time of one row with the outermost of `tiers` set to (eff, lat)."""
    probe = tiers[-1].model_copy(update={"efficiency": eff, "latency_us": lat})
    return model_time_s(log.collective, size, log.ranks, tiers[:-1] + (probe,), span)


def fit_tier(logs: list[NcclLog], cluster: Cluster, j: int) -> TierFit:
    """Efficiency and latency of tier j from the logs that span it (inner tiers as in cluster).

    The modelled time t(S) = c0(S) + a(S) / eff + b(S) * latency_us is linear in x = 1/eff and
    y = latency_us: c0 is the time with this tier at infinite bandwidth and zero latency, a and b
    the parts per unit of 1/eff and of latency (from the model at two settings). Least squares
    weights each row by 1/t_measured, so every message size counts by relative error.
    """
    tiers = cluster.tiers[: j + 1]
    rows, targets = [], []
    for log in logs:
        span = _span(log.ranks, cluster, j, log.num_nodes)
        for r in log.rows:
            # t(1/x, y) = c0 + a x + b y: evaluate at x = 1 (eff 1) and x = 2 (eff 0.5).
            c_eff1 = _probe(log, r.size_bytes, tiers, span, 1.0, 0.0)
            a = _probe(log, r.size_bytes, tiers, span, 0.5, 0.0) - c_eff1
            c0 = c_eff1 - a
            b = _probe(log, r.size_bytes, tiers, span, 1.0, 1.0) - c_eff1
            meas = r.time_us * 1e-6
            rows.append([a / meas, b / meas])
            targets.append((meas - c0) / meas)
    A, y = np.array(rows), np.array(targets)
    where = ", ".join(sorted({log.path for log in logs}))
    if not np.any(A[:, 0] > 0):
        raise InvalidInput(f"{where}: these runs do not cross tier {tiers[j].name!r}")
    (x, lat), *_ = np.linalg.lstsq(A, y, rcond=None)
    if lat < 0:  # latency below zero: fit bandwidth alone at zero latency
        lat = 0.0
        x = float(np.dot(A[:, 0], y) / np.dot(A[:, 0], A[:, 0]))
    if x <= 0:
        raise InvalidInput(
            f"{where}: tier {tiers[j].name!r}: no positive bandwidth fits these times"
        )
    points = [(log, r, _span(log.ranks, cluster, j, log.num_nodes)) for log in logs for r in log.rows]

    def residuals(p: np.ndarray) -> np.ndarray:
        """Relative time error per row with the model evaluated as is (no linearisation)."""
        return np.array(
            [
                _probe(log, r.size_bytes, tiers, span, 1.0 / p[0], p[1]) / (r.time_us * 1e-6) - 1
                for log, r, span in points
            ]
        )

    # The linear solve is exact where the model is linear in (1/eff, latency): rings and p2p.
    # An all-to-all takes the slowest tier (a max), so refine on the model itself.
    # Below the inner tiers' latency the max hides this tier's: start from several latencies.
    starts = [(x, lat)] + [(x, float(y0)) for y0 in (1.0, 5.0, 20.0, 100.0)]
    fits = [_levenberg_marquardt(residuals, np.array(p0)) for p0 in starts]
    x, lat = min(fits, key=lambda p: float(np.sum(residuals(np.array(p)) ** 2)))
    eff = 1.0 / x
    if eff > 1.0:
        raise InvalidInput(
            f"{where}: tier {tiers[j].name!r}: measured bus bandwidth is {eff:.2f}x the tier's "
            f"line rate x 1/oversubscription ({tiers[j].bandwidth_gb_per_s:g} GB/s): the cluster's "
            "bandwidth_gb_per_s is too low, or NCCL reduced in the switch (NVLS / SHARP; measure "
            "with NCCL_NVLS_ENABLE=0 NCCL_COLLNET_ENABLE=0)"
        )
    resid = np.abs(residuals(np.array([x, lat])))
    return TierFit(
        j,
        float(eff),
        float(lat),
        tuple(sorted({log.path for log in logs})),
        len(y),
        float(100 * resid.max()),
    )


def _levenberg_marquardt(
    residuals: Callable[[np.ndarray], np.ndarray], p: np.ndarray, iterations: int = 100
) -> tuple[float, float]:
    """Damped Gauss-Newton on (x = 1/eff > 0, latency_us >= 0), finite-difference Jacobian."""
    lam = 1e-3
    r = residuals(p)
    cost = float(r @ r)
    for _ in range(iterations):
        steps = np.array([max(1e-6, 1e-4 * abs(p[0])), max(1e-4, 1e-4 * abs(p[1]))])
        jac = np.column_stack(
            [(residuals(p + np.eye(2)[k] * steps[k]) - r) / steps[k] for k in range(2)]
        )
        grad, hess = jac.T @ r, jac.T @ jac
        improved = False
        for _ in range(10):
            try:
                delta = np.linalg.solve(hess + lam * np.diag(np.diag(hess) + 1e-12), -grad)
            except np.linalg.LinAlgError:
                break
            trial = np.array([max(1e-3, p[0] + delta[0]), max(0.0, p[1] + delta[1])])
            r_trial = residuals(trial)
            c_trial = float(r_trial @ r_trial)
            if c_trial < cost:
                p, r, improved = trial, r_trial, cost - c_trial > 1e-15 * max(cost, 1e-30)
                cost, lam = c_trial, max(lam / 10, 1e-9)
                break
            lam *= 10
        if not improved:
            break
    return float(p[0]), float(p[1])


def predicted_busbw_gb_per_s(log: NcclLog, cluster: Cluster, row: Row) -> float:
    """Bus bandwidth the (fitted) cluster predicts for one row of a log."""
    j = tier_index_for(log, cluster)
    t = model_time_s(
        log.collective,
        row.size_bytes,
        log.ranks,
        cluster.tiers[: j + 1],
        _span(log.ranks, cluster, j, log.num_nodes),
    )
    return row.size_bytes / t / 1e9 * busbw_factor(log.collective, log.ranks)


busbw_factor = commtable.busbw_factor
"""busbw / algbw as nccl-tests computes it (doc/PERFORMANCE.md; each test's GetBw)."""


def table_rows(log: NcclLog) -> list[list]:
    """The log's rows as collective-table rows (cost_models.specs.CollectiveRow): bus bandwidth
    from the measured time (mean of out-of-place and in-place), not the printed busbw, whose
    %6.2f keeps no digit for small messages."""
    f = busbw_factor(log.collective, log.ranks)
    return [
        [log.collective, log.ranks, log.num_nodes, r.size_bytes,
         r.size_bytes / (r.time_us * 1e-6) / 1e9 * f, log.algorithm]
        for r in log.rows
    ]


def tabled_busbw_gb_per_s(
    log: NcclLog, cluster: Cluster, row: Row, book: commtable.CollectiveBook
) -> float:
    """Bus bandwidth a cluster with collective curves (`book`, built on it) prices one row of
    a log at: the model's time times the curves' factor (cost_models.commtable)."""
    span = commtable.group_span(log.ranks, log.num_nodes, cluster)
    t = commtable.model_time_s(log.collective, row.size_bytes, span, cluster.tiers)
    t *= book.factor(log.collective, span, row.size_bytes)
    return row.size_bytes / t / 1e9 * busbw_factor(log.collective, log.ranks)
