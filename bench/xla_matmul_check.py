"""OpenXLA's GEMM perf table checked against this project's measured H100 table (issue 32).

OpenXLA ships `xla/backends/gpu/cost_model/matmul_interpolator_data.h` (Apache-2.0): a text
proto of GEMM FLOP/s per device key (`sm_90`, `sm_100`) for b x m x n x k dots, b in {1, 2, 4},
m, n, k in {256, ..., 4096}, per dtype key (`bf16xbf16->bf16`, `f8e4m3fnxf8e4m3fn->bf16`, ...).
XLA measured it with `xla/tools/matmul_perf_table_gen.cc`: one warm-up, 5 runs each with
small-range and large-range fake arguments, the median of every kernel's CUPTI duration, FLOP/s
= 2 b m n k / that median (integer ns). Nothing of it is shipped or imported here (the data
are not this project's, and the check below says they are not per-shape measurements the
model can use: docs/calibration.md#openxlas-matmul-table-looked-at-not-imported). This script
reads the user's own copy and prints the figures that decision rests on:

1. sm_90 against `../shared/data/kernels/h100-sxm-80gb/gemm.csv` at the shapes both hold;
   rows above the GPU's dense peak (not one GEMM's time);
2. the fallback curve's (ceiling, half_dim) fitted, as `planner calibrate --gemm` does, on each;
3. the Blackwell preset's curve against the sm_100 rows (dims 256-4,096).

Usage: python bench/xla_matmul_check.py matmul_interpolator_data.h [SHARED_KERNELS_DIR]
"""

from __future__ import annotations

import csv
import math
import re
import sys
from pathlib import Path

from aic_gemm_check import ratio_summary

import models_zoo
from cost_models.calibration import calibration_for_cluster
from planner.calibrate.compute_fit import (
    LAUNCH_BOUND_S,
    GemmPoint,
    _best_half_dim,
    _ceiling_for,
)

BF16 = "bf16xbf16->bf16"
FP8 = "f8e4m3fnxf8e4m3fn->bf16"
_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([{}])|(-?\d[\d.eE+-]*)|([A-Za-z_]\w*)\s*:?|"([^"]*)")')


class TableError(ValueError):
    """A malformed table: the message is one line naming the file position."""


def _tokens(text: str, path: str, first_line: int) -> list[tuple[str, str, int]]:
    """(kind, value, file line) for `{`, `}`, names, strings and numbers; comments dropped."""
    out, pos = [], 0
    body = text.rstrip()
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if not m or m.end() == pos:
            line = first_line + body.count("\n", 0, pos)
            raise TableError(f"{path}:{line}: unexpected text {body[pos:pos + 20].strip()!r}")
        line = first_line + body.count("\n", 0, m.start(m.lastindex))
        if m.group(2):
            out.append(("brace", m.group(2), line))
        elif m.group(3):
            out.append(("num", m.group(3), line))
        elif m.group(4):
            out.append(("name", m.group(4), line))
        elif m.group(5) is not None:
            out.append(("str", m.group(5), line))
        pos = m.end()
    return out


def _parse_block(toks: list, i: int, path: str) -> tuple[list, int]:
    """Fields of one message up to its closing brace: [(name, value or sub-list, line)]."""
    fields = []
    while i < len(toks):
        kind, val, line = toks[i]
        if val == "}" and kind == "brace":
            return fields, i + 1
        if kind != "name" or i + 1 >= len(toks):
            raise TableError(f"{path}:{line}: expected a field name, got {val!r}")
        nxt = toks[i + 1]
        if nxt[:2] == ("brace", "{"):
            sub, i = _parse_block(toks, i + 2, path)
            fields.append((val, sub, line))
        elif nxt[0] == "brace":
            raise TableError(f"{path}:{nxt[2]}: {val} has no value")
        else:
            fields.append((val, nxt[1], line))
            i += 2
    raise TableError(f"{path}: a block opened is never closed (file cut short?)")


def _proto_text(text: str, path: str) -> tuple[str, int]:
    """The text proto (inside the header's raw string R\"pb( ... )pb\", or the whole file) and
    the file line it starts on."""
    m = re.search(r'R"pb\((.*?)\)pb"', text, re.DOTALL)
    if m:
        return m.group(1), 1 + text.count("\n", 0, m.start(1))
    if "entries" not in text:
        raise TableError(f"{path}: no GEMM perf table (no R\"pb(...)pb\" string, no entries)")
    return text, 1


def _int(fields: list, name: str, path: str, line: int) -> int:
    for key, val, fline in fields:
        if key == name:
            if not isinstance(val, str) or not val.isdigit() or int(val) <= 0:
                raise TableError(f"{path}:{fline}: {name} must be a positive integer")
            return int(val)
    raise TableError(f"{path}:{line}: GEMM entry lacks {name}")


def _entry_rows(fields: list, path: str, line: int) -> list[tuple]:
    """(b, m, n, k, dtype key, FLOP/s) for one GEMM entry, one per `flops` pair."""
    dims = [_int(fields, d, path, line) for d in ("b", "m", "n", "k")]
    rows = []
    for key, val, fline in fields:
        if key != "flops":
            continue
        pair = {k: v for k, v, _ in val} if isinstance(val, list) else {}
        try:
            rate = float(pair["value"])
        except (KeyError, ValueError):
            raise TableError(f"{path}:{fline}: flops needs a key and a numeric value") from None
        if not (math.isfinite(rate) and rate > 0):
            raise TableError(f"{path}:{fline}: flops value must be > 0")
        rows.append((*dims, pair.get("key", ""), rate))
    return rows


def read_table(path: str) -> dict[str, list[tuple]]:
    """Device key -> [(b, m, n, k, dtype key, FLOP/s)] from a matmul_interpolator_data.h copy."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise TableError(f"{path}: cannot read ({err})") from None
    body, first_line = _proto_text(text, path)
    toks = _tokens(body, path, first_line)
    top, end = _parse_block(toks + [("brace", "}", 0)], 0, path)
    if end <= len(toks):
        raise TableError(f"{path}:{toks[end - 1][2]}: a closing brace without its block")
    table: dict[str, list[tuple]] = {}
    for name, val, line in top:
        if name != "entries" or not isinstance(val, list):
            raise TableError(f"{path}:{line}: expected `entries {{ key: ... value {{ ... }} }}`")
        device = next((v for k, v, _ in val if k == "key"), None)
        body = next((v for k, v, _ in val if k == "value"), None)
        if not isinstance(device, str) or not isinstance(body, list):
            raise TableError(f"{path}:{line}: a device entry needs a key and a value block")
        rows = table.setdefault(device, [])
        for ename, eval_, eline in body:
            if ename == "entries" and isinstance(eval_, list):
                rows.extend(_entry_rows(eval_, path, eline))
    if not any(table.values()):
        raise TableError(f"{path}: no GEMM entries found")
    return table


def _rates(table: dict, device: str, dtype: str) -> dict[tuple, float]:
    """(m, n, k) -> TFLOP/s of the un-batched (b = 1) rows."""
    return {(m, n, k): f / 1e12 for b, m, n, k, key, f in table.get(device, [])
            if b == 1 and key == dtype}


def check_h100(table: dict, shared: Path) -> None:
    rows = list(csv.DictReader((shared / "h100-sxm-80gb" / "gemm.csv").open()))
    gpu = models_zoo.load_gpu("h100-sxm-80gb")
    pairs = (("bf16", BF16, gpu.peak_bf16_tflops), ("fp8", FP8, gpu.peak_fp8_tflops))
    for ours, key, peak in pairs:
        xla = _rates(table, "sm_90", key)
        ratios = [xla[s] / float(r["tflops"]) for r in rows if r["dtype"] == ours
                  and (s := (int(r["m"]), int(r["n"]), int(r["k"]))) in xla]
        above = sum(v > peak for v in xla.values())
        print(f"sm_90 {key} / measured H100 {ours} at the same (m, n, k): {ratio_summary(ratios)}; "
              f"{above} of {len(xla)} sm_90 rows above the {peak:g} TFLOP/s dense peak")


def _fit(points: list[GemmPoint], peak: float) -> str:
    slow = [p for p in points if p.seconds >= LAUNCH_BOUND_S]
    if len(slow) < 3:
        return f"{len(slow)} rows >= 20 us: too few to fit"
    half = _best_half_dim(slow, peak)
    ceiling, _ = _ceiling_for(slow, peak, half)
    return f"{len(slow)} of {len(points)} rows >= 20 us: ceiling {ceiling:.3f}, half_dim {half:.0f}"


def check_fits(table: dict, shared: Path) -> None:
    rows = csv.DictReader((shared / "h100-sxm-80gb" / "gemm.csv").open())
    ours = [GemmPoint(0, int(r["m"]), int(r["n"]), int(r["k"]), "bf16", float(r["tflops"]))
            for r in rows if r["dtype"] == "bf16"]
    small = [p for p in ours if max(p.m, p.n, p.k) <= 4096]
    h100, b200 = models_zoo.load_gpu("h100-sxm-80gb"), models_zoo.load_gpu("b200")
    print(f"fit, measured H100 bf16, every row: {_fit(ours, h100.peak_bf16_tflops)}")
    print(f"fit, measured H100 bf16, dims <= 4096: {_fit(small, h100.peak_bf16_tflops)}")
    for device, gpu in (("sm_90", h100), ("sm_100", b200)):
        pts = [GemmPoint(0, *s, "bf16", v) for s, v in _rates(table, device, BF16).items()]
        print(f"fit, XLA {device} bf16 (b = 1): {_fit(pts, gpu.peak_bf16_tflops)}")


def check_blackwell_curve(table: dict) -> None:
    cluster = models_zoo.load_cluster("dgx-b200")
    cal, gpu = calibration_for_cluster(cluster), cluster.gpu
    for key, ceiling, peak in ((BF16, cal.gemm_efficiency_bf16, gpu.peak_bf16_tflops),
                               (FP8, cal.gemm_efficiency_fp8, gpu.peak_fp8_tflops)):
        rates = _rates(table, "sm_100", key)
        for tag, floor_s in (("every row", 0.0), ("rows >= 20 us", LAUNCH_BOUND_S)):
            ratios = [peak * ceiling * math.prod(d / (d + cal.gemm_half_dim) for d in s) / v
                      for s, v in rates.items() if 2 * math.prod(s) / (v * 1e12) >= floor_s]
            if ratios:
                print(f"b200 curve ({ceiling:g}, half_dim {cal.gemm_half_dim:g}) / sm_100 {key}, "
                      f"{tag}: {ratio_summary(ratios)}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "kernels"
    shared = Path(argv[1]) if len(argv) > 1 else default
    try:
        table = read_table(argv[0])
    except TableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("devices: " + ", ".join(f"{d} ({len(r)} rows)" for d, r in sorted(table.items())))
    check_h100(table, shared)
    check_fits(table, shared)
    check_blackwell_curve(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
