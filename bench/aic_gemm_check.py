"""aiconfigurator's measured GEMM tables checked against this project's measured H100 / H200 tables
(issue 32 item 2: a peer simulator's measured system file).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships GEMM latencies its
collector measured: aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/<backend>/<version>/
gemm_perf.parquet (columns framework, version, device, op_name, kernel_source, gemm_dtype, m, n, k,
latency in ms) and, for fp8, the activation-quantization kernels the fp8 rows include:
<system>/quantize/<backend>/<version>/computescale_perf.parquet and scale_matrix_perf.parquet (m, k,
latency). Method (collector/trtllm/collect_gemm.py, collector/helper.py `benchmark_with_power`): one
TensorRT-LLM `Linear` forward, y = x W^T (this project's TN layout), random normal bf16 data; the
`fp8` rows run TRT-LLM's dynamic per-tensor path (amax of x, quantize x, cuBLAS fp8 GEMM); 3 eager
warm-ups, the calls captured in a CUDA graph, 3 warm replays, then the mean over 6 replays timed
with CUDA events; a weight smaller than L2 gets ceil(L2 / weight bytes) copies (at most 5) called
in turn inside the graph, and the time is divided by the copies.

This script reads the user's copy of those files (pyarrow needed: pip install pyarrow) and prints:

1. per system: device string, framework / version, rows per dtype and kernel source;
2. aiconfigurator's H100 / H200 rows over ../shared/data/kernels at the (m, n, k) both hold in TN
   (time ratio aic / ours: median, P10, P90, range): bf16, fp8 as collected (with quantization) and
   fp8 less its compute-scale and scale-matrix kernels (the GEMM alone, what ours timed);
3. the same by aiconfigurator's time per call, and by its weight copies (1-5: the same harness
   timing a 1-5 times longer window);
4. aiconfigurator's rows inside our table's box that are not ours, against the project's look-up
   (cost_models.kernels, interpolated);
5. the same ratio against this project's other H100 tables (bench/results/h100-2026-11-26/*), and
   those against the shared table: how far our own machines differ;
6. per Blackwell system, aiconfigurator's bf16 rows over the GPU preset's efficiency curve at
   training shapes (m >= 2,048; n, k 1,024-16,384): what the shipped model assumes;
7. one system's rows over another's at the same shapes (the same collector on two GPUs).

Usage: python bench/aic_gemm_check.py AIC_SYSTEMS_DATA [--version 1.3.0rc20]
           [--measured ../shared/data/kernels] [--results bench/results/h100-2026-11-26]
AIC_SYSTEMS_DATA: an aiconfigurator checkout's aic-core/src/aiconfigurator_core/systems/data.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import models_zoo
from cost_models.calibration import generation_for_gpu
from cost_models.kernels import INTERPOLATED, KernelBook
from cost_models.specs import KernelTables
from models_zoo.kernel_tables import read_kernel_files

GEMM_COLUMNS = ("framework", "version", "device", "kernel_source", "gemm_dtype", "m", "n", "k", "latency")
QUANT_COLUMNS = ("m", "k", "latency")
OURS = {"h100_sxm": "h100-sxm-80gb", "h200_sxm": "h200-sxm-141gb"}
BLACKWELL = {"b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300"}
L2_BYTES = {"h100_sxm": 50 * 2**20, "h200_sxm": 50 * 2**20}
"""The L2 the collector queries (cudaDevAttrL2CacheSize; H100 / H200 SXM: 50 MiB), for its copy
count: ceil(L2 / weight bytes), 1 to 5 (collect_gemm.py run_gemm)."""
BYTES = {"bfloat16": 2, "fp8": 1}
TIME_BINS_MS = (0.1, 0.3, 1.0, 3.0, math.inf)


class AicError(ValueError):
    """A missing or malformed file: the message is one line naming the file, column and rule."""


def pyarrow_parquet():
    """pyarrow.parquet, or one line naming the package (pyarrow is not a project dependency)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise AicError("reading aiconfigurator's parquet files needs pyarrow: pip install pyarrow") from None
    return pq


def open_table(path: Path, columns: tuple[str, ...]) -> dict[str, list]:
    """The named columns of one parquet file as lists; a missing or unreadable file or column is
    one line (AicError). The rows are not checked (read_parquet refuses a bad one,
    aic_gpu_speeds.read_rows skips and counts it)."""
    pq = pyarrow_parquet()
    if not path.is_file():
        raise AicError(f"{path}: no such file")
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a bad file
        raise AicError(f"{path}: not a readable parquet file ({type(err).__name__})") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise AicError(f"{path}: column {missing[0]!r} missing (needs {', '.join(columns)})")
    return {c: table.column(c).to_pylist() for c in columns}


def read_parquet(path: Path, columns: tuple[str, ...]) -> dict[str, list]:
    """The named columns of one parquet file, checked: one line per problem (AicError)."""
    data = open_table(path, columns)
    for c in ("m", "n", "k"):
        for i, v in enumerate(data.get(c, [])):
            if not isinstance(v, int) or v <= 0:
                raise AicError(f"{path}: row {i}: {c} must be a positive integer, got {v!r}")
    for i, v in enumerate(data["latency"]):
        if not isinstance(v, float | int) or not math.isfinite(v) or v <= 0:
            raise AicError(f"{path}: row {i}: latency must be a positive number of ms, got {v!r}")
    return data


def gemm_rows(data_dir: Path, system: str, version: str) -> dict[tuple, float]:
    """(dtype, m, n, k) -> latency ms of one system's TRT-LLM GEMM table."""
    d = read_parquet(data_dir / system / "gemm" / "trtllm" / version / "gemm_perf.parquet", GEMM_COLUMNS)
    return {(t, m, n, k): lat for t, m, n, k, lat in zip(d["gemm_dtype"], d["m"], d["n"], d["k"], d["latency"])}


def quantize_ms(data_dir: Path, system: str, version: str) -> dict[tuple, float]:
    """(m, k) -> ms of the dynamic fp8 quantization of x (compute scale + scale matrix)."""
    base = data_dir / system / "quantize" / "trtllm" / version
    out: dict[tuple, float] = {}
    for name in ("computescale_perf.parquet", "scale_matrix_perf.parquet"):
        d = read_parquet(base / name, QUANT_COLUMNS)
        for m, k, lat in zip(d["m"], d["k"], d["latency"]):
            out[(m, k)] = out.get((m, k), 0.0) + lat
    return out


def describe(data_dir: Path, system: str, version: str) -> str:
    d = read_parquet(data_dir / system / "gemm" / "trtllm" / version / "gemm_perf.parquet", GEMM_COLUMNS)
    counts: dict[tuple, int] = {}
    for t, src in zip(d["gemm_dtype"], d["kernel_source"]):
        counts[(t, src)] = counts.get((t, src), 0) + 1
    kinds = ", ".join(f"{t} ({src}) {n}" for (t, src), n in sorted(counts.items()))
    return (f"{system}: {sorted(set(d['device']))} {sorted(set(d['framework']))} "
            f"{sorted(set(d['version']))}: {len(d['m'])} rows: {kinds}")


def ratio_summary(ratios: list[float]) -> str:
    """n, median, P10, P90 and range of per-shape ratios, one line (also printed by
    bench/aic_attention_check.py and bench/xla_matmul_check.py)."""
    if not ratios:
        return "n 0"
    r = sorted(ratios)
    q = lambda p: r[min(len(r) - 1, int(p * len(r)))]
    return (f"n {len(r)}: median {statistics.median(r):.3f}, P10 {q(0.1):.3f}, P90 {q(0.9):.3f}, "
            f"range {r[0]:.3f}-{r[-1]:.3f}")


def our_rows(path: Path, dtype: str, layout: str = "TN") -> dict[tuple, float]:
    """(m, n, k) -> time_ms of one measured gemm.csv's rows of a dtype and layout."""
    with open(path, newline="") as f:
        return {(int(r["m"]), int(r["n"]), int(r["k"])): float(r["time_ms"])
                for r in csv.DictReader(f) if r["dtype"] == dtype and r.get("layout", "TN") == layout}


def aic_dtype_rows(aic: dict, quant: dict | None, dtype: str) -> dict[tuple, float]:
    """(m, n, k) -> ms of aiconfigurator's rows of our dtype: bf16, fp8 as collected, or fp8-gemm
    (fp8 less its quantization kernels, where both tables hold the (m, k))."""
    key = "bfloat16" if dtype == "bf16" else "fp8"
    out = {s[1:]: ms for s, ms in aic.items() if s[0] == key}
    if dtype == "fp8-gemm":
        out = {s: ms - quant[(s[0], s[2])] for s, ms in out.items() if (s[0], s[2]) in quant}
        out = {s: ms for s, ms in out.items() if ms > 0}
    return out


def write_gemm_csv(data_dir: Path, system: str, version: str, out: Path, min_m: int = 256) -> int:
    """aiconfigurator's bf16 rows and fp8 GEMM-alone rows (m >= min_m) as a gemm.csv of this
    project's format without a layout column: a bf16 row stands for all three layouts, an fp8
    row for TN (and so every layout). Returns the rows written."""
    aic = gemm_rows(data_dir, system, version)
    quant = quantize_ms(data_dir, system, version)
    lines = ["m,n,k,dtype,time_ms"]
    for dtype, ours in (("bf16", "bf16"), ("fp8-gemm", "fp8")):
        for (m, n, k), ms in sorted(aic_dtype_rows(aic, quant, dtype).items()):
            if m >= min_m:
                lines.append(f"{m},{n},{k},{ours},{ms:.6g}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return len(lines) - 1


def copies(system: str, shape: tuple, dtype: str) -> int:
    """How many weight copies the collector called in turn per replay (collect_gemm.py)."""
    _m, n, k = shape
    return max(1, min(5, math.ceil(L2_BYTES[system] / (n * k * BYTES.get(dtype, 1)))))


def window_ms(system: str, shape: tuple, ms: float, dtype: str) -> float:
    """The collector's timed window: 6 graph replays of every copy."""
    return 6 * copies(system, shape, dtype) * ms


def check_exact(system: str, aic: dict, quant: dict, measured: Path) -> None:
    ours_dir = measured / OURS[system]
    for dtype in ("bf16", "fp8", "fp8-gemm"):
        ours = our_rows(ours_dir / "gemm.csv", "bf16" if dtype == "bf16" else "fp8")
        rows = aic_dtype_rows(aic, quant, dtype)
        pairs = [(s, rows[s] / t) for s, t in ours.items() if s in rows]
        print(f"{system} {dtype} aic / {OURS[system]} TN, same (m, n, k): {ratio_summary([r for _, r in pairs])}")
        if dtype == "fp8":
            continue
        lo = 0.0
        wdt = "bfloat16" if dtype == "bf16" else "fp8"
        for hi in TIME_BINS_MS:
            sel = [r for s, r in pairs if lo < rows[s] <= hi]
            print(f"  aic time per call {lo:g}-{hi:g} ms: {ratio_summary(sel)}")
            lo = hi
        for n in range(1, 6):  # same harness, n x longer timed window
            sel = [r for s, r in pairs if copies(system, s, wdt) == n]
            print(f"  {n} weight copies (timed window 6 x {n} calls): {ratio_summary(sel)}")


def check_lookup(system: str, aic: dict, quant: dict, measured: Path) -> None:
    """aiconfigurator's rows (m >= 256) inside our TN table's box, not measured by us, against the
    project's look-up in our table (interpolated)."""
    data = read_kernel_files({"gemm": measured / OURS[system] / "gemm.csv"}, "ours")
    book = KernelBook(KernelTables.model_validate(data))
    for dtype in ("bf16", "fp8-gemm"):
        ours_dt = "bf16" if dtype == "bf16" else "fp8"
        exact = our_rows(measured / OURS[system] / "gemm.csv", ours_dt)
        ratios = []
        for s, ms in sorted(aic_dtype_rows(aic, quant, dtype).items()):
            if s[0] < 256 or s in exact:
                continue
            got, status = book.gemm_s(*s, ours_dt, "TN")
            if status == INTERPOLATED:
                ratios.append(ms * 1e-3 / got)
        print(f"{system} {dtype} aic / our look-up (interpolated, not measured by us): {ratio_summary(ratios)}")


def check_our_machines(aic: dict, measured: Path, results: Path) -> None:
    shared = our_rows(measured / "h100-sxm-80gb" / "gemm.csv", "bf16")
    rows = aic_dtype_rows(aic, None, "bf16")
    for path in sorted(results.glob("**/gemm.csv")):
        ours = our_rows(path, "bf16")
        vs_aic = [rows[s] / t for s, t in ours.items() if s in rows]
        vs_shared = [t / shared[s] for s, t in ours.items() if s in shared]
        name = path.parent.relative_to(results)
        print(f"h100_sxm bf16 aic / {name} TN: {ratio_summary(vs_aic)}")
        print(f"  {name} / h100-sxm-80gb (shared) TN: {ratio_summary(vs_shared)}")


def check_blackwell(data_dir: Path, version: str) -> None:
    for system, gpu_id in {"h100_sxm": "h100-sxm-80gb", **BLACKWELL}.items():
        gpu = models_zoo.load_gpu(gpu_id)
        cal = generation_for_gpu(gpu)
        peak = gpu.peak_bf16_tflops * 1e12 * cal.gemm_efficiency_bf16
        ratios = []
        for (t, m, n, k), ms in gemm_rows(data_dir, system, version).items():
            if t != "bfloat16" or m < 2048 or not (1024 <= n <= 16384 and 1024 <= k <= 16384):
                continue
            shape = math.prod(d / (d + cal.gemm_half_dim) for d in (m, n, k))
            ratios.append(ms * 1e-3 / (2.0 * m * n * k / (peak * shape)))
        print(f"{system} bf16 aic / {gpu_id} preset curve (ceiling {cal.gemm_efficiency_bf16:.3f} x "
              f"{gpu.peak_bf16_tflops:g} TFLOP/s, half_dim {cal.gemm_half_dim:g}): {ratio_summary(ratios)}")


RELATIVE = (("h200_sxm", "h100_sxm"), ("gb200", "b200_sxm"), ("b300_sxm", "b200_sxm"),
            ("gb300", "gb200"), ("gb300", "b300_sxm"))


def check_relative(data_dir: Path, version: str) -> None:
    """One system's rows over another's at the same training shapes (m >= 2,048; n, k >=
    1,024): the same collector on two GPUs, so its method cancels."""
    cache: dict[str, tuple[dict, dict]] = {}
    for a, b in RELATIVE:
        for s in (a, b):
            if s not in cache:
                cache[s] = (gemm_rows(data_dir, s, version), quantize_ms(data_dir, s, version))
        for dtype in ("bf16", "fp8-gemm"):
            ra, rb = (aic_dtype_rows(*cache[s], dtype) for s in (a, b))
            ratios = [ms / rb[s] for s, ms in ra.items() if s in rb
                      and s[0] >= 2048 and min(s[1:]) >= 1024]  # fmt: skip
            print(f"{a} / {b} {dtype} time, same training shapes: {ratio_summary(ratios)}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument("--version", default="1.3.0rc20", help="the trtllm collection (folder name)")
    p.add_argument("--measured", type=Path, default=ROOT.parent / "shared" / "data" / "kernels")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "h100-2026-11-26")
    args = p.parse_args(argv)
    try:
        for system in (*OURS, *BLACKWELL):
            print(describe(args.data, system, args.version))
        for system in OURS:
            aic = gemm_rows(args.data, system, args.version)
            quant = quantize_ms(args.data, system, args.version)
            check_exact(system, aic, quant, args.measured)
            check_lookup(system, aic, quant, args.measured)
        check_our_machines(gemm_rows(args.data, "h100_sxm", args.version), args.measured, args.results)
        check_blackwell(args.data, args.version)
        check_relative(args.data, args.version)
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
