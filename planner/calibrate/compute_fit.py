"""Fit the compute model's efficiency constants on GEMM and attention sweeps (CSV).

GEMM (CONTRACT.md "Calibration": header ``m,n,k,dtype,tflops``; ``time_ms`` may replace
``tflops``): the cost model times a GEMM at peak x ceiling x prod_d d / (d + half_dim)
(cost_models.compute.gemm_efficiency). Per dtype the fit picks half_dim on a log grid refined by
golden-section search and, for each half_dim, the ceiling in closed form (the mean log ratio of
measured to shape factor), minimising squared log error: relative error counts the same at every
size. Attention (``batch,seq,heads,kv_heads,head_dim,causal,dtype`` and ``time_ms`` or
``tflops``, optional ``kernel`` fused|fa2): the model has one constant per kernel class
(cost_models.compute.attention_efficiency), fitted as the geometric mean of achieved / bf16 peak;
its per-row residuals show how far the sweep's shapes are from one constant.

Both curves are only the fallback for shapes outside the measured table (`planner calibrate`
stores the rows themselves, planner.calibrate._kernels; issue 32), and are fitted only on rows
that take at least LAUNCH_BOUND_S: below that a kernel's time is launch overhead and tail, not
throughput, and a toy shape must never set the large-GEMM ceiling.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from cost_models.calibration import calibration_for_cluster
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster
from models_zoo.inputs import decode_text, unreadable
from models_zoo.kernel_tables import ATTENTION_KERNELS

from .sweep import attention_flops

DTYPES = ("bf16", "fp8")
HALF_DIM_RANGE = (0.0, 4096.0)
LAUNCH_BOUND_S = 20e-6
"""Rows faster than this are launch-bound and left out of the curve fits: a kernel launch plus
its wave tail costs ~5-10 us on Hopper (CUDA launch latency; the shared H100 sweep's smallest
GEMMs run 5-15 us at 10-40 % of peak), so 20 us keeps that overhead under about half the time."""


def _read_csv(path: str, required: tuple[str, ...], one_of: tuple[str, ...]) -> list[dict]:
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise unreadable(path, err) from None
    text = decode_text(raw, str(path))  # one-line error naming the bad byte's line (issue 19)
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise InvalidInput(
            f"{path}:1: header lacks {', '.join(missing)} (expected {','.join(required)},"
            f"{'|'.join(one_of)})"
        )
    if not any(c in header for c in one_of):
        raise InvalidInput(f"{path}:1: header needs one of {', '.join(one_of)}")
    rows = []
    for i, raw in enumerate(reader, 2):
        row = {k.strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        if None in raw:
            raise InvalidInput(f"{path}:{i}: more fields than the header has")
        if not any(row.values()):
            continue
        row["_line"] = i
        rows.append(row)
    return rows


def _positive(row: dict, key: str, path: str, cast: type = float) -> float:
    text = row.get(key, "")
    try:
        value = cast(text)
    except ValueError:
        raise InvalidInput(f"{path}:{row['_line']}: {key} {text!r} is not a number") from None
    if not (isinstance(value, int) or math.isfinite(value)) or value <= 0:
        raise InvalidInput(f"{path}:{row['_line']}: {key} must be > 0 (got {text!r})")
    return value


@dataclass(frozen=True)
class GemmPoint:
    line: int
    m: int
    n: int
    k: int
    dtype: str
    tflops: float

    @property
    def seconds(self) -> float:
        return 2.0 * self.m * self.n * self.k / (self.tflops * 1e12)


def read_gemm_csv(path: str) -> list[GemmPoint]:
    points = []
    for row in _read_csv(path, ("m", "n", "k", "dtype"), ("tflops", "time_ms")):
        m, n, k = (int(_positive(row, c, path, int)) for c in ("m", "n", "k"))
        dtype = row["dtype"].lower()
        if dtype not in DTYPES:
            raise InvalidInput(f"{path}:{row['_line']}: dtype {dtype!r} is not bf16 or fp8")
        if row.get("tflops"):
            tflops = _positive(row, "tflops", path)
        else:
            tflops = 2.0 * m * n * k / (_positive(row, "time_ms", path) * 1e-3) / 1e12
        points.append(GemmPoint(row["_line"], m, n, k, dtype, tflops))
    if not points:
        raise InvalidInput(f"{path}:1: no data rows")
    return points


def shape_factor(p: GemmPoint, half_dim: float) -> float:
    return math.prod(d / (d + half_dim) for d in (p.m, p.n, p.k))


@dataclass(frozen=True)
class GemmFit:
    dtype: str
    ceiling: float
    half_dim: float
    points: int
    max_residual_pct: float
    peak_tflops: float
    launch_bound: int  # rows under LAUNCH_BOUND_S, left out of the fit


def _ceiling_for(points: list[GemmPoint], peak: float, half: float) -> tuple[float, float]:
    """Closed-form log-space ceiling for a given half_dim, and the sum of squared log errors."""
    logs = [math.log(p.tflops / peak) - math.log(shape_factor(p, half)) for p in points]
    c = sum(logs) / len(logs)
    return math.exp(c), sum((v - c) ** 2 for v in logs)


def fit_gemm(path: str, cluster: Cluster) -> tuple[list[GemmFit], list[str]]:
    """One fit per dtype present in the sweep, on its rows that are not launch-bound; and a
    line for each dtype left at the generation's constants (fewer than 3 such shapes)."""
    points = read_gemm_csv(path)
    fits, skipped = [], []
    for dtype in DTYPES:
        pts = [p for p in points if p.dtype == dtype]
        if not pts:
            continue
        peak = _check_gemm_points(path, pts, dtype, cluster)
        slow = [p for p in pts if p.seconds >= LAUNCH_BOUND_S]
        if len({(p.m, p.n, p.k) for p in slow}) < 3:
            skipped.append(
                f"{dtype}: {len(slow)} row(s) take >= {LAUNCH_BOUND_S * 1e6:g} us, the fit needs "
                "3 shapes or more: generation constants kept"
            )
            continue
        half = _best_half_dim(slow, peak)
        ceiling, _ = _ceiling_for(slow, peak, half)
        # A roll-off extrapolated past peak is capped there; the residual shows what it costs.
        ceiling = min(ceiling, 1.0)
        resid = max(abs(ceiling * shape_factor(p, half) * peak - p.tflops) / p.tflops for p in slow)
        fits.append(
            GemmFit(dtype, ceiling, half, len(slow), 100 * resid, peak, len(pts) - len(slow))
        )
    return fits, skipped


def _check_gemm_points(path: str, pts: list[GemmPoint], dtype: str, cluster: Cluster) -> float:
    """The dtype's dense peak, after refusing a sweep too small to fit or above the peak."""
    gpu = cluster.gpu
    shapes = len({(p.m, p.n, p.k) for p in pts})
    if shapes < 3:
        raise InvalidInput(
            f"{path}:{pts[-1].line}: {dtype} sweep has {len(pts)} point(s) on {shapes} shape(s); "
            "the fit needs 3 or more shapes"
        )
    peak = gpu.peak_bf16_tflops if dtype == "bf16" else gpu.peak_fp8_tflops
    if peak is None:
        raise InvalidInput(f"{path}:{pts[0].line}: fp8 rows but {gpu.id} has no fp8 peak")
    for p in pts:
        if p.tflops > peak * 1.02:
            raise InvalidInput(
                f"{path}:{p.line}: {p.tflops:g} TFLOP/s is above the {gpu.id} {dtype} dense "
                f"peak ({peak:g}): wrong GPU in --cluster, or a sparse / wrong-unit number"
            )
    return peak


def _best_half_dim(pts: list[GemmPoint], peak: float) -> float:
    lo, hi = HALF_DIM_RANGE
    grid = [0.0] + [2**e for e in range(3, 13)]
    best = min(grid, key=lambda h: _ceiling_for(pts, peak, h)[1])
    i = grid.index(best)
    a, b = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):  # golden section on the bracket around the best grid point
        c, d = b - g * (b - a), a + g * (b - a)
        if _ceiling_for(pts, peak, c)[1] < _ceiling_for(pts, peak, d)[1]:
            b = d
        else:
            a = c
    return min(hi, max(lo, (a + b) / 2))


@dataclass(frozen=True)
class AttentionFit:
    kernel: str
    efficiency: float
    points: int
    max_residual_pct: float
    launch_bound: int  # rows under LAUNCH_BOUND_S, left out of the fit


def fit_attention(path: str, cluster: Cluster) -> list[AttentionFit]:
    """Achieved / bf16 peak per kernel class (`fused` -> attention_efficiency; `fa2` rows give
    fa2_attention_speed = fa2 efficiency / fused efficiency, the fused one fitted or default)."""
    need = ("batch", "seq", "heads", "kv_heads", "head_dim", "causal", "dtype")
    rows = _read_csv(path, need, ("time_ms", "tflops"))
    peak = cluster.gpu.peak_bf16_tflops
    by_kernel: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        line = row["_line"]
        b, s, h, kvh, d = (
            int(_positive(row, c, path, int))
            for c in ("batch", "seq", "heads", "kv_heads", "head_dim")
        )
        if h % kvh:
            raise InvalidInput(f"{path}:{line}: heads ({h}) must be a multiple of kv_heads ({kvh})")
        causal = row["causal"].lower()
        if causal not in ("true", "false", "1", "0"):
            raise InvalidInput(f"{path}:{line}: causal must be true or false (got {causal!r})")
        if row["dtype"].lower() != "bf16":
            raise InvalidInput(f"{path}:{line}: attention dtype must be bf16 (the model's kernel)")
        kernel = (row.get("kernel") or "fused").lower()
        if kernel not in ATTENTION_KERNELS:
            raise InvalidInput(
                f"{path}:{line}: kernel must be {', '.join(ATTENTION_KERNELS[:-1])} or "
                f"{ATTENTION_KERNELS[-1]} (got {kernel!r})"
            )
        table_only = ("flex", "unfused", "unfused_torch")
        if kernel in table_only or (row.get("window") or "0").strip() not in ("", "0"):
            # FlexAttention, unfused and sliding-window rows are table rows only (windowed /
            # full ratios price windowed layers, cost_models.kernels.KernelBook.window_ratio;
            # unfused rows price Workload.attention_kernel "unfused" where a table holds them,
            # its roofline elsewhere): the curve's constants are full attention of the fused
            # and FA2 kernels.
            by_kernel.setdefault("table_only", [])
            continue
        flops = attention_flops(b, s, h, d, causal in ("true", "1"))
        if row.get("time_ms"):
            tflops = flops / (_positive(row, "time_ms", path) * 1e-3) / 1e12
        else:
            tflops = _positive(row, "tflops", path)
        if tflops > peak * 1.02:
            raise InvalidInput(f"{path}:{line}: {tflops:g} TFLOP/s is above the bf16 peak {peak:g}")
        by_kernel.setdefault(kernel, []).append((line, tflops / peak, flops / (tflops * 1e12)))
    return _attention_fits(path, by_kernel)


def _attention_fits(path: str, by_kernel: dict[str, list[tuple]]) -> list[AttentionFit]:
    """Geometric mean efficiency per kernel over its rows that are not launch-bound."""
    fits = []
    for kernel in ("fused", "fa2"):
        rows = by_kernel.get(kernel, [])
        if not rows:
            continue
        if len(rows) < 2:
            raise InvalidInput(
                f"{path}:{rows[0][0]}: one {kernel} attention point; the fit needs 2 or more"
            )
        effs = [e for _, e, seconds in rows if seconds >= LAUNCH_BOUND_S]
        if len(effs) < 2:
            continue  # the generation constant stays (calibrate reports no fit for it)
        eff = math.exp(sum(math.log(e) for e in effs) / len(effs))
        resid = max(abs(eff - e) / e for e in effs)
        fits.append(AttentionFit(kernel, eff, len(effs), 100 * resid, len(rows) - len(effs)))
    if not by_kernel:
        raise InvalidInput(f"{path}:1: no data rows")
    return fits


def default_fused_attention(cluster: Cluster) -> float:
    return calibration_for_cluster(cluster).attention_efficiency
