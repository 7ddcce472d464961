"""A peer simulator's system file read into kernel tables (issue 32): Calculon's `systems/*.json`
(github.com/calculon-ai/calculon, Apache-2.0), by `planner calibrate --system-file FILE`.

What Calculon does with the file (calculon/processor.py, calculon/memory.py at caa4b11): a
matrix op of F FLOPs in datatype D runs at `matrix[D].tflops` x efficiency(F), where
`gflops_efficiency` lists [threshold GFLOP, efficiency] with thresholds descending and the first
threshold <= F wins (a step function; a last threshold of 0 covers every size); a memory access of
B bytes runs at `mem1.GBps` x efficiency(B) by `mem1.MB_efficiency` ([threshold MB, efficiency]).
The older layout (`matrix.tflops` with `matrix.gflops_efficiency` keyed by datatype, before
Calculon f50f3a4) is read too.

What this module makes of it (docs/calibration.md#a-peer-simulators-system-file):
- GEMM rows: square GEMMs (m = n = k = d) on a geometric grid of FLOPs, GRID_STEP apart from
  2 x MIN_DIM^3 to 2 x MAX_DIM^3, plus each step's two edges (its threshold, and just below the
  next), each at 2 d^3 / (the file's tflops x its efficiency there). `float16` / `bfloat16` give
  the bf16 rows (one per layout: the file does not tell passes apart), `float8` the fp8 rows. A
  shape's nearest points on the log-space diagonal have its own FLOPs (the projection of (log m,
  log n, log k) onto the diagonal is the geometric mean), so the look-up follows Calculon's rule
  by FLOPs; inside a step it is exact, within one grid step of a step edge it blends the two.
- memory-bound rows: the same grid over bytes for each op the measured tables name (MEMORY_OPS),
  all at mem1's bandwidth x efficiency (Calculon prices every memory access alike).
- not imported, and said so: `vector` (elementwise FLOPs), `mem2` (offload memory), `networks`
  (Calculon's network efficiency is not a tier's efficiency: calibrate tiers with --nccl-tests),
  `processing_mode`.

The tables are marked `basis: assumption`: Calculon's shipped files are its authors' settings
(the A100 and H100 files share every efficiency step), not measurements; a user whose file holds
their own measurements may set `basis: measured` in the written cluster file. Every bad value is
one line naming the file, the field and the rule.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cost_models.errors import InvalidInput
from cost_models.specs import GpuSpec
from models_zoo.inputs import read_data_file

DTYPES = {"bfloat16": "bf16", "float16": "bf16", "float8": "fp8"}
"""Calculon datatype -> kernel-table dtype (bfloat16 preferred over float16 when both are given)."""
MIN_DIM, MAX_DIM = 64, 262_144
"""Square-GEMM edge of the grid: shapes with every dimension inside are looked up, others fall
back to the curve (cost_models.kernels)."""
MIN_BYTES, MAX_BYTES = 1e4, 1e11
GRID_STEP = math.sqrt(2.0)
"""Ratio of neighbouring grid points (FLOPs or bytes): a look-up averages its 4 nearest points,
so a step edge blends over about one factor of 2 either side."""
EDGE = 0.99
"""The upper edge of a step sits 1 % below the next threshold."""
MEMORY_OPS = ("copy", "add", "rmsnorm", "layernorm", "swiglu", "gelu")
"""The memory-bound ops of ../shared/data/kernels/README.md."""
PEAK_RATIO = 2.0
"""A file whose bf16 peak is more than 2x off the cluster GPU's describes another GPU."""
NOT_IMPORTED = {
    "vector": "elementwise FLOPs (the model prices them as memory-bound)",
    "mem2": "offload memory",
    "networks": "Calculon's network efficiency is not a tier's efficiency: use --nccl-tests",
    "processing_mode": "the model's own overlap rules apply",
}


def _fail(path: Path, field: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{path}: {field}: {rule}")


def _number(value: Any, path: Path, field: str, *, low: float, high: float = math.inf) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:
        raise _fail(path, field, f"must be a number in [{low:g}, {high:g}] (got {value!r})")
    return float(value)


def _steps(value: Any, path: Path, field: str) -> list[tuple[float, float]]:
    """[threshold, efficiency] pairs as Calculon asserts them: thresholds strictly descending,
    efficiencies in (0, 1], a last threshold of 0 so that every size is covered."""
    if not isinstance(value, list) or not value:
        raise _fail(path, field, "must be a list of [threshold, efficiency] pairs")
    out: list[tuple[float, float]] = []
    for i, pair in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise _fail(path, where, f"must be a [threshold, efficiency] pair (got {pair!r})")
        threshold = _number(pair[0], path, where, low=0.0)
        eff = _number(pair[1], path, where, low=0.0, high=1.0)
        if eff == 0:
            raise _fail(path, where, "efficiency must be > 0 and <= 1 (got 0)")
        if out and threshold >= out[-1][0]:
            raise _fail(path, where, "thresholds must be strictly descending (Calculon's rule)")
        out.append((threshold, eff))
    if out[-1][0] != 0:
        raise _fail(path, field, "the last threshold must be 0, so that every size is covered")
    return out


def efficiency_at(steps: list[tuple[float, float]], size: float) -> float:
    """Calculon's step function: the efficiency of the first threshold <= size."""
    return next(eff for threshold, eff in steps if size >= threshold)


def _grid(steps: list[tuple[float, float]], unit: float, low: float, high: float) -> list[float]:
    """Sizes (FLOPs or bytes) to sample: a geometric grid plus each step's two edges."""
    n = int(math.log(high / low) / math.log(GRID_STEP))
    points = {low * GRID_STEP**i for i in range(n + 1)} | {high}
    for threshold, _eff in steps:
        edge = threshold * unit
        points |= {edge, edge * EDGE} if edge > 0 else set()
    return sorted(p for p in points if low <= p <= high)


def _matrix(data: dict[str, Any], path: Path) -> dict[str, dict[str, Any]]:
    """matrix as {datatype: {tflops, gflops_efficiency}}, either layout of the file."""
    matrix = data.get("matrix")
    if not isinstance(matrix, dict):
        raise _fail(path, "matrix", "required: an object of datatypes (Calculon system file)")
    if "tflops" in matrix and isinstance(matrix.get("gflops_efficiency"), dict):
        return {
            dt: {"tflops": matrix["tflops"], "gflops_efficiency": steps}
            for dt, steps in matrix["gflops_efficiency"].items()
        }
    return matrix


def _gemm_rows(path: Path, data: dict, gpu: GpuSpec, report: dict) -> list[list]:
    matrix = _matrix(data, path)
    chosen = {}
    for dt in ("float16", "bfloat16", "float8"):  # bfloat16 last: it wins over float16
        if isinstance(matrix.get(dt), dict):
            chosen[DTYPES[dt]] = dt
    if not chosen:
        raise _fail(
            path, "matrix", f"has none of float16, bfloat16, float8 (found: {', '.join(matrix)})"
        )
    rows: list[list] = []
    for dtype, dt in sorted(chosen.items()):
        field = f"matrix.{dt}"
        tflops = _number(matrix[dt].get("tflops"), path, f"{field}.tflops", low=1e-3)
        steps = _steps(matrix[dt].get("gflops_efficiency"), path, f"{field}.gflops_efficiency")
        peak = gpu.peak_bf16_tflops if dtype == "bf16" else gpu.peak_fp8_tflops
        if peak and not (1 / PEAK_RATIO <= tflops / peak <= PEAK_RATIO):
            raise _fail(
                path,
                f"{field}.tflops",
                f"{tflops:g} TFLOP/s is not this cluster's GPU ({gpu.id}: {peak:g} {dtype} "
                "dense); import the system file of the same GPU",
            )
        layouts = ("TN", "NN", "NT") if dtype == "bf16" else ("TN",)
        for flops in _grid(steps, 1e9, 2.0 * MIN_DIM**3, 2.0 * MAX_DIM**3):
            d = (flops / 2.0) ** (1 / 3)
            ms = flops / (tflops * 1e12 * efficiency_at(steps, flops / 1e9)) * 1e3
            rows.extend([d, d, d, dtype, lay, ms] for lay in layouts)
        report["imported"].append(
            f"{dtype} GEMMs from matrix.{dt} ({tflops:g} TFLOP/s in the file, {peak or 0:g} in "
            f"{gpu.id}; {len(steps)} steps)"
        )
    return rows


def _memory_rows(path: Path, data: dict, report: dict) -> list[list]:
    mem = data.get("mem1")
    if mem is None:
        report["not_imported"].append("mem1: absent (memory-bound ops stay on the curve)")
        return []
    if not isinstance(mem, dict):
        raise _fail(path, "mem1", "must be an object with GBps and MB_efficiency")
    gb_per_s = _number(mem.get("GBps"), path, "mem1.GBps", low=1e-3)
    steps = _steps(mem.get("MB_efficiency"), path, "mem1.MB_efficiency")
    rows = []
    for nbytes in _grid(steps, 1e6, MIN_BYTES, MAX_BYTES):
        ms = nbytes / (gb_per_s * 1e9 * efficiency_at(steps, nbytes / 1e6)) * 1e3
        rows.extend([op, nbytes, ms] for op in MEMORY_OPS)
    report["imported"].append(
        f"memory-bound ops ({', '.join(MEMORY_OPS)}) from mem1 ({gb_per_s:g} GB/s, "
        f"{len(steps)} steps)"
    )
    return rows


def read_system_file(path_text: str, gpu: GpuSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """KernelTables data (gemm and memory_bound rows, basis assumption) from a Calculon system
    file, and a report of what was imported and what was not."""
    path = Path(path_text)
    try:
        data = read_data_file(path, as_json=True)  # JSON whatever its suffix, within the limits
    except InvalidInput as err:
        raise InvalidInput(f"--system-file: {err} (a Calculon system file is JSON)") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a JSON object (Calculon system file)")
    report: dict[str, Any] = {"file": str(path), "format": "calculon", "imported": []}
    report["not_imported"] = [f"{k}: {why}" for k, why in NOT_IMPORTED.items() if k in data]
    tables = {
        "source": f"Calculon system file {path} (its authors' efficiency settings, imported)",
        "basis": "assumption",
        "gemm": _gemm_rows(path, data, gpu, report),
    }
    memory = _memory_rows(path, data, report)
    if memory:
        tables["memory_bound"] = memory
    return tables, report
