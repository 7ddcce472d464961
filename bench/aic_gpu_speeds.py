"""Relative GEMM speeds between GPUs from aiconfigurator's measured tables (issue 32: no GPU
generation biased by more than 5 % at the median).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) times one framework
`Linear` forward per (m, n, k) with the same collector on every system it ships
(aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/<backend>/<version>/gemm_perf.parquet;
method: bench/aic_gemm_check.py's docstring). Its absolute level is 13-18 % faster than this
project's measured H100 table for a reason not found (docs/calibration.md), so it is not imported;
but the time of one part over another's at the same shape, same collector, same software, cancels
whatever the collector does: it is the parts' relative GEMM speed. This script prints it:

1. every (backend, version) collection held for the systems, with their device strings;
2. per collection, per pair of systems and dtype: the per-shape time ratio part / reference over
   the training shape set (m 2,048-32,768 in multiples of 256; n and k 1,024-65,536), its median,
   P10, P90 and count. dtypes: bf16; fp8 as collected (dynamic per-tensor quantize of x + GEMM);
   fp8-gemm (less the collection's computescale + scale_matrix rows for that (m, k): the GEMM
   alone), where the collection has quantize tables for both systems;
3. for one collection (--reference), the same median over shape subsets (m ranges, n / k ranges,
   GEMM size, the collector's unaligned m = 2,049... rows);
4. the GPU presets' values: this part's MAMF over the flagship's (the ratio the presets used
   before gemm_speed_vs_flagship), the shipped gemm_speed_vs_flagship, and the speed the model
   prices (achieved GEMM TFLOP/s at the large-GEMM ceiling over B200's).

5. the Blackwell flagship against the measured H100 table (--reference collection): at each
   shape where the shipped H100 table (models_zoo/kernels/h100-sxm-80gb, TN) measures or
   interpolates, the B200's priced GEMM time over the H100 table's time times the collection's
   B200 / H100 time (> 1: the B200 is priced slower than the chain says); bf16 and fp8 GEMM alone.

Speeds are reported as flagship time / part time (> 1: the part is faster), the flagship being
B200 (cost_models.calibration: the Blackwell generation's constants are B200's).

Usage: python bench/aic_gpu_speeds.py AIC_SYSTEMS_DATA [--reference trtllm/1.3.0rc20]
AIC_SYSTEMS_DATA: an aiconfigurator checkout's aic-core/src/aiconfigurator_core/systems/data
(only <system>/gemm and <system>/quantize are read). Needs pyarrow (pip install pyarrow).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aic_gemm_check import AicError, open_table, pyarrow_parquet

import models_zoo
from cost_models.calibration import calibration_for_cluster, generation_for_gpu
from cost_models.compute import Gemm, gemm_efficiency
from cost_models.kernels import EXTRAPOLATED, KernelBook
from cost_models.specs import KernelTables
from models_zoo.kernel_tables import builtin_tables

SYSTEMS = {
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
    "h100_sxm": "h100-sxm-80gb",
    "h200_sxm": "h200-sxm-141gb",
}
DEVICE_PREFIX = {
    "b200_sxm": "NVIDIA B200",
    "b300_sxm": "NVIDIA B300",
    "gb200": "NVIDIA GB200",
    "gb300": "NVIDIA GB300",
    "h100_sxm": "NVIDIA H100",
    "h200_sxm": "NVIDIA H200",
}
"""The device string (torch.cuda.get_device_name) a system's rows must carry: a collection
filed under one system but measured on another (sglang 0.5.14's b300_sxm rows say 'NVIDIA
GB300' and equal gb300's) is left out."""
FLAGSHIP = {"blackwell": "b200_sxm", "hopper": "h100_sxm"}
PAIRS = (
    ("b300_sxm", "b200_sxm"),
    ("gb200", "b200_sxm"),
    ("gb300", "b200_sxm"),
    ("gb300", "gb200"),
    ("gb300", "b300_sxm"),
    ("h200_sxm", "h100_sxm"),  # control: the same silicon (H200 = H100 compute, more HBM)
)
DTYPES = ("bf16", "fp8", "fp8-gemm")
AIC_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "fp8-gemm": "fp8"}
M_RANGE = (2048, 32768)
M_ALIGN = 256
NK_RANGE = (1024, 65536)
SHAPE_SET = (
    f"m {M_RANGE[0]:,}-{M_RANGE[1]:,} in multiples of {M_ALIGN} (tokens per micro-batch); "
    f"n and k {NK_RANGE[0]:,}-{NK_RANGE[1]:,}"
)


def read_rows(
    path: Path, columns: tuple[str, ...], keep: Callable[[dict], bool], zero_ok: bool = False
) -> list[dict]:
    """The well-formed rows of one parquet file that `keep` accepts (_valid; the others are
    counted in SKIPPED); a missing or unreadable file or column is an AicError (one line).
    zero_ok: a latency of 0 is well-formed (a quantize kernel the path does not run: sglang's
    computescale rows are 0)."""
    data = open_table(path, columns)
    rows, bad = [], 0
    for i in range(len(data[columns[0]])):
        row = {c: data[c][i] for c in columns}
        if not _valid(row, zero_ok):
            bad += 1  # a third party's file: one bad row (h100 trtllm 1.2.0rc5 has m = 0) is skipped, counted
        elif keep(row):
            rows.append(row)
    SKIPPED[str(path)] = bad
    return rows


SKIPPED: dict[str, int] = {}
"""Malformed rows skipped per file (printed with the collection)."""


def _valid(row: dict, zero_ok: bool) -> bool:
    """m, n, k positive integers; latency a positive (zero_ok: non-negative) finite number."""
    if any(not isinstance(row[c], int) or row[c] <= 0 for c in ("m", "n", "k") if c in row):
        return False
    lat = row["latency"]
    return (
        isinstance(lat, float | int) and math.isfinite(lat) and (lat > 0 or (zero_ok and lat == 0))
    )


def in_box(m: int, n: int, k: int, aligned: bool = True) -> bool:
    """The training shape set (SHAPE_SET); aligned=False: the collector's m = 2^a + 1 rows."""
    if not (M_RANGE[0] <= m <= M_RANGE[1] + 1 and NK_RANGE[0] <= min(n, k)):
        return False
    if max(n, k) > NK_RANGE[1]:
        return False
    return (m % M_ALIGN == 0) if aligned else (m % M_ALIGN == 1)


def collection(data: Path, system: str, backend: str, version: str) -> dict | None:
    """One system's collection: devices, {dtype: {(m, n, k): ms}} over the box (aligned and
    not), fp8-gemm where quantize tables exist; None where the folder holds no gemm table."""
    path = data / system / "gemm" / backend / version / "gemm_perf.parquet"
    if not path.is_file():
        return None
    cols = ("device", "gemm_dtype", "m", "n", "k", "latency")
    rows = read_rows(path, cols, lambda r: r["gemm_dtype"] in ("bfloat16", "fp8")
                     and (in_box(r["m"], r["n"], r["k"]) or in_box(r["m"], r["n"], r["k"], False)))  # fmt: skip
    out: dict = {"devices": sorted({r["device"] for r in rows}), "bf16": {}, "fp8": {}}
    out["skipped"] = SKIPPED.get(str(path), 0)
    for r in rows:
        out["bf16" if r["gemm_dtype"] == "bfloat16" else "fp8"][(r["m"], r["n"], r["k"])] = r[
            "latency"
        ]
    if any(not d.startswith(DEVICE_PREFIX[system]) for d in out["devices"]):
        out["mislabelled"] = True
    # fp8 less quantize only where the collector's fp8 path was read to be quantize + GEMM
    # (collector/trtllm/collect_gemm.py, bench/aic_gemm_check.py); sglang's computescale rows are 0
    quant = (
        quantize_ms(data / system / "quantize" / backend / version) if backend == "trtllm" else None
    )
    if quant is not None:
        gemm = {
            s: ms - quant[(s[0], s[2])] for s, ms in out["fp8"].items() if (s[0], s[2]) in quant
        }
        out["fp8-gemm"] = {s: ms for s, ms in gemm.items() if ms > 0}
    return out


def quantize_ms(folder: Path) -> dict | None:
    """(m, k) -> ms of the dynamic fp8 quantization of x (computescale + scale_matrix); None
    where the collection has no quantize tables."""
    files = [folder / f for f in ("computescale_perf.parquet", "scale_matrix_perf.parquet")]
    if not all(f.is_file() for f in files):
        return None
    out: dict = {}
    for f in files:
        for r in read_rows(f, ("m", "k", "latency"), lambda r: True, zero_ok=True):
            out[(r["m"], r["k"])] = out.get((r["m"], r["k"]), 0.0) + r["latency"]
    return out


def quantiles(ratios: list[float]) -> dict:
    r = sorted(ratios)
    q = lambda p: r[min(len(r) - 1, int(p * len(r)))]
    return {"n": len(r), "median": statistics.median(r), "p10": q(0.1), "p90": q(0.9)}


def fmt(stats: dict | None) -> str:
    if not stats or not stats["n"]:
        return "n 0"
    return (
        f"median {stats['median']:.3f} (speed {1 / stats['median']:.3f}), "
        f"P10 {stats['p10']:.3f}, P90 {stats['p90']:.3f}, n {stats['n']}"
    )


def ratios(a: dict, b: dict, dtype: str, select=lambda s: in_box(*s)) -> list[float]:
    """Per-shape time of system a over system b at the shapes both hold that `select` keeps."""
    ta, tb = a.get(dtype, {}), b.get(dtype, {})
    return [ms / tb[s] for s, ms in ta.items() if s in tb and select(s)]


def collections(data: Path) -> list[tuple[str, str]]:
    """(backend, version) folders holding a gemm table for the flagship."""
    base = data / "b200_sxm" / "gemm"
    if not base.is_dir():
        raise AicError(f"{base}: no such folder (give aiconfigurator's systems/data folder)")
    return sorted((p.parent.parent.name, p.parent.name) for p in base.glob("*/*/gemm_perf.parquet"))


def print_collections(data: Path) -> dict:
    """Section 1 and 2; returns {(backend, version): {system: collection}}."""
    loaded: dict = {}
    for backend, version in collections(data):
        systems = {s: collection(data, s, backend, version) for s in SYSTEMS}
        held = ", ".join(f"{s} {c['devices']}" for s, c in systems.items() if c)
        print(f"\n== {backend} {version}: {held}")
        for s, c in systems.items():
            if c and c["skipped"]:
                print(f"  skipped {c['skipped']} malformed row(s) of {s}'s gemm_perf.parquet")
        for s, c in systems.items():
            if c and c.get("mislabelled"):
                print(f"  left out: {s}'s rows carry device {c['devices']}, not {DEVICE_PREFIX[s]}")
                systems[s] = None
        loaded[(backend, version)] = systems
        for a, b in PAIRS:
            if systems[a] is None or systems[b] is None:
                continue
            for dtype in DTYPES:
                r = ratios(systems[a], systems[b], dtype)
                if r:
                    print(f"  {a} / {b} {dtype:8s} time: {fmt(quantiles(r))}")
    return loaded


SUBSETS: dict[str, Callable[[tuple], bool]] = {
    "m 2,048-4,352": lambda s: in_box(*s) and s[0] <= 4352,
    "m 8,192-32,768": lambda s: in_box(*s) and s[0] >= 8192,
    "n, k <= 16,384": lambda s: in_box(*s) and max(s[1:]) <= 16384,
    "n or k >= 51,200": lambda s: in_box(*s) and max(s[1:]) >= 51200,
    "k <= 4,096": lambda s: in_box(*s) and s[2] <= 4096,
    "k >= 5,120": lambda s: in_box(*s) and s[2] >= 5120,
    "2mnk < 1e12": lambda s: in_box(*s) and 2 * math.prod(s) < 1e12,
    "2mnk >= 1e12": lambda s: in_box(*s) and 2 * math.prod(s) >= 1e12,
    "unaligned m (2,049...)": lambda s: in_box(*s, aligned=False),
}


def print_subsets(systems: dict, name: str) -> None:
    print(f"\n== shape subsets, {name} (time ratio median; speed = 1 / it)")
    for a, b in PAIRS:
        if systems[a] is None or systems[b] is None:
            continue
        for dtype in ("bf16", "fp8-gemm"):
            cells = []
            for label, select in SUBSETS.items():
                r = ratios(systems[a], systems[b], dtype, select)
                cells.append(
                    f"{label} {statistics.median(r):.3f} ({len(r)})" if r else f"{label} -"
                )
            print(f"  {a} / {b} {dtype}: " + "; ".join(cells))


def print_stability(loaded: dict) -> None:
    """Median speed vs the generation's flagship per collection: the spread across versions
    and backends is the check that the relative speed is the parts', not the software's."""
    print(
        "\n== speed vs flagship (flagship time / part time, median over the shape set) per collection"
    )
    for system, gpu_id in SYSTEMS.items():
        ref = FLAGSHIP[models_zoo.load_gpu(gpu_id).generation]
        if system == ref:
            continue
        for dtype in ("bf16", "fp8", "fp8-gemm"):
            cells = []
            for (backend, version), systems in loaded.items():
                if systems[system] is None or systems[ref] is None:
                    continue
                r = ratios(systems[system], systems[ref], dtype)
                if r:
                    cells.append((f"{backend} {version}", 1 / statistics.median(r)))
            if cells:
                vals = [v for _, v in cells]
                print(
                    f"  {system} {dtype:8s}: "
                    + ", ".join(f"{c} {v:.3f}" for c, v in cells)
                    + f"  | range {min(vals):.3f}-{max(vals):.3f}"
                )


def print_presets(systems: dict, name: str) -> None:
    """The presets' speeds next to the measured ones (section 4)."""
    print(f"\n== presets vs measured ({name}); speed = vs the generation's flagship")
    for system, gpu_id in SYSTEMS.items():
        gpu = models_zoo.load_gpu(gpu_id)
        ref_id = SYSTEMS[FLAGSHIP[gpu.generation]]
        flag = models_zoo.load_gpu(ref_id)
        cal, cal_ref = generation_for_gpu(gpu), generation_for_gpu(flag)
        for dtype, mamf, peak, eff in (
            ("bf16", "mamf_bf16_tflops", "peak_bf16_tflops", "gemm_efficiency_bf16"),
            ("fp8", "mamf_fp8_tflops", "peak_fp8_tflops", "gemm_efficiency_fp8"),
        ):
            mamf_ratio = (getattr(gpu, mamf) / getattr(flag, mamf)
                          if getattr(gpu, mamf) and getattr(flag, mamf) else None)  # fmt: skip
            speeds = getattr(gpu, "gemm_speed_vs_flagship", None)
            shipped = getattr(speeds, dtype, None) if speeds else None
            priced = (
                getattr(cal, eff)
                * getattr(gpu, peak)
                / (getattr(cal_ref, eff) * getattr(flag, peak))
            )
            a, b = systems[system], systems[FLAGSHIP[gpu.generation]]
            r = (
                ratios(a, b, "bf16" if dtype == "bf16" else "fp8-gemm")
                if a and b and a is not b
                else []
            )
            measured = f"{1 / statistics.median(r):.3f}" if r else "-"
            print(
                f"  {gpu_id:16s} {dtype:4s}: MAMF / {ref_id}'s "
                f"{'-' if mamf_ratio is None else f'{mamf_ratio:.3f}'}; shipped gemm_speed_vs_flagship "
                f"{'-' if shipped is None else f'{shipped:.3f}'}; priced {priced:.3f}; aic median {measured}"
            )


def chain_ratios(systems: dict, dtype: str) -> list[float]:
    """Per shape: the B200's priced time / (H100 table time x aic B200 time / aic H100 time), at
    the shapes of the set both aic systems hold and the shipped H100 table does not extrapolate."""
    b200, h100 = systems.get("b200_sxm"), systems.get("h100_sxm")
    if not b200 or not h100:
        return []
    table = KernelBook(KernelTables.model_validate(builtin_tables("h100-sxm-80gb", "aic_gpu_speeds")))
    cluster = models_zoo.load_cluster("dgx-b200")
    cal, fp8 = calibration_for_cluster(cluster), dtype != "bf16"
    peak = (cluster.gpu.peak_fp8_tflops if fp8 else cluster.gpu.peak_bf16_tflops) * 1e12
    out = []
    for (m, n, k), ms in b200.get(dtype, {}).items():
        other = h100.get(dtype, {}).get((m, n, k))
        if other is None or not in_box(m, n, k):
            continue
        h100_s, status = table.gemm_s(m, n, k, "fp8" if fp8 else "bf16", "TN")
        if h100_s is None or status == EXTRAPOLATED:
            continue
        g = Gemm(m, n, k)
        out.append(g.flops / (peak * gemm_efficiency(g, cal, fp8)) / (h100_s * ms / other))
    return out


def print_chain(systems: dict, name: str) -> None:
    print(f"\n== B200 priced / (measured H100 table x aic B200 / H100) ({name})")
    for dtype in ("bf16", "fp8-gemm"):
        r = chain_ratios(systems, dtype)
        q = quantiles(r) if r else None
        print(f"  {dtype:8s}: " + ("n 0" if q is None else f"median {q['median']:.3f}, "
                                  f"P10 {q['p10']:.3f}, P90 {q['p90']:.3f}, n {q['n']}"))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="aiconfigurator's systems/data folder")
    p.add_argument(
        "--reference", default="trtllm/1.3.0rc20", help="backend/version for sections 3-4"
    )
    args = p.parse_args(argv)
    try:
        pyarrow_parquet()
        print(f"shape set: {SHAPE_SET}; time ratio = part / reference at the same (m, n, k)")
        loaded = print_collections(args.data)
        print_stability(loaded)
        ref = tuple(args.reference.split("/", 1))
        if ref not in loaded:
            raise AicError(f"--reference {args.reference}: no such collection under {args.data}")
        print_subsets(loaded[ref], args.reference)
        print_presets(loaded[ref], args.reference)
        print_chain(loaded[ref], args.reference)
    except AicError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
