"""Read measured kernel tables (CSV, ../shared/data/kernels/README.md formats) into the rows of
cost_models.specs.KernelTables (issue 32).

A folder holds `gemm.csv`, `attention.csv`, `grouped_gemm.csv`, `memory_bound.csv`, each
optional; a cluster file names one with `kernels: {path: DIR}` (relative to the cluster file),
and `planner calibrate --kernels DIR` copies its rows into the calibrated cluster. Every bad value
is one line naming the file, its line and the rule.

Tables measured by this project ship with the package (models_zoo/kernels/, README there, indexed
per GPU preset in index.json): `kernels: builtin` takes the shipped tables of the cluster's own
GPU, `kernels: {builtin: GPU_ID}` those of a named GPU, `calibrate --kernels builtin` the same as
a flag. They are byte-identical copies of ../shared/data/kernels, read by the same readers.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from pathlib import Path
from typing import Any

from cost_models.commtable import busbw_factor
from cost_models.errors import InvalidInput
from cost_models.kernels import ATTENTION_FLOPS_FWD_BWD, attention_fwd_flops

from .inputs import decode_text, unreadable

ATTENTION_KERNELS = ("fused", "fa2", "flex", "unfused", "unfused_torch")
"""cuDNN fused attention, FlashAttention-2, FlexAttention (compiled; torchtitan's kernel for
windowed models), unfused attention (BMM, softmax, BMM with the score matrix in HBM,
Workload.attention_kernel "unfused") with Megatron's fused softmax kernel and with Megatron-Core's
PyTorch softmax fallback (cost_models.compute.megatron_fused_softmax says which a call runs): the
`kernel` column of an attention row."""

BUILTIN_ROOT = Path(__file__).parent / "kernels"
"""Shipped kernel tables: one folder per GPU preset id, index.json says which exist and why."""
BUILTIN = "builtin"
TABLES = ("gemm", "attention", "grouped_gemm", "memory_bound", "collectives")
"""The tables of cost_models.specs.KernelTables."""
FILES = (*TABLES, "attention_window", "attention_unfused", "gemm_pieces", "memory_bound_profiled")
TABLE_OF = {
    "attention_window": "attention",
    "attention_unfused": "attention",
    "gemm_pieces": "gemm",
    "memory_bound_profiled": "memory_bound",
}
"""A file whose rows join another kind's table: attention_window.csv (sliding-window and full
attention through one kernel, ../shared/data/kernels/README.md) and attention_unfused.csv
(Megatron-LM's unfused attention measured beside a copied attention.csv: bench/make_unfused_rows.py)
hold attention rows;
gemm_pieces.csv (GEMM rows measured beside a copied gemm.csv, e.g. the TP-overlap split pieces of
the shipped H100 folder: models_zoo/kernels/README.md) holds GEMM rows;
memory_bound_profiled.csv (memory-bound rows of kernels timed inside whole training steps by
torch.profiler, e.g. the optimizer step and FSDP2's copy-in of the shipped Hopper folders:
bench/make_profiled_ops.py) holds memory-bound rows."""
REQUIRED = {
    "gemm": ("m", "n", "k", "dtype"),
    "attention": ("batch", "seq", "heads", "kv_heads", "head_dim", "causal", "dtype"),
    "grouped_gemm": ("experts", "rows_per_expert", "n", "k", "dtype", "time_ms"),
    "memory_bound": ("op", "bytes", "time_ms"),
    "collectives": ("collective", "ranks", "nodes", "bytes"),
}
TIME_COLUMNS = {"gemm": ("time_ms", "tflops"), "attention": ("time_ms", "tflops")}
"""CONTRACT.md "Calibration": a GEMM or attention row gives its time or its rate (time wins)."""
LAYOUTS = ("TN", "NN", "NT")


def read_csv_rows(
    path: Path, required: tuple[str, ...], one_of: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Data rows as {column: text, "_line": n}; a missing column or ragged row is refused,
    extra columns are ignored."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise unreadable(path, err) from None
    reader = csv.DictReader(decode_text(raw, str(path)).splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise InvalidInput(
            f"{path}:1: header lacks {', '.join(missing)} (needs {','.join(required)})"
        )
    if one_of and not any(c in header for c in one_of):
        raise InvalidInput(f"{path}:1: header needs one of {', '.join(one_of)}")
    rows = []
    for i, rec in enumerate(reader, 2):
        if None in rec:
            raise InvalidInput(f"{path}:{i}: more fields than the header has")
        row = {k.strip(): (v or "").strip() for k, v in rec.items() if k is not None}
        if any(row.values()):
            rows.append({**row, "_line": i})
    return rows


def number(row: dict[str, Any], key: str, path: Path, *, zero_ok: bool = False) -> float:
    """A finite number > 0 (>= 0 with zero_ok) from `row[key]`, or one line naming the cell."""
    text = row.get(key, "")
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"{path}:{row['_line']}: {key} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        rule = ">= 0" if zero_ok else "> 0"
        raise InvalidInput(
            f"{path}:{row['_line']}: {key} must be a finite number {rule} (got {text!r})"
        )
    return int(value) if value.is_integer() else value


def _choice(row: dict[str, Any], key: str, path: Path, allowed: tuple[str, ...], default: str):
    value = (row.get(key) or default).strip()
    value = value.upper() if key == "layout" else value.lower()
    if value not in allowed:
        raise InvalidInput(
            f"{path}:{row['_line']}: {key} must be one of {', '.join(allowed)} (got {value!r})"
        )
    return value


def _time_ms(r: dict[str, Any], path: Path, flops: float) -> float:
    """The row's time_ms, or the time its `tflops` means for `flops` FLOPs."""
    if r.get("time_ms") or not r.get("tflops"):
        return number(r, "time_ms", path)
    return flops / (number(r, "tflops", path) * 1e12) * 1e3


def gemm_rows(path: Path) -> list[list]:
    """One row per (shape, layout); a row without a layout stands for all three passes of a
    Linear (CONTRACT.md), stored once per layout for bf16 (fp8 TN rows already stand for every
    layout: cost_models.kernels.KernelBook.gemm_s)."""
    out = []
    for r in read_csv_rows(path, REQUIRED["gemm"], TIME_COLUMNS["gemm"]):
        m, n, k = (number(r, c, path) for c in ("m", "n", "k"))
        dtype = _choice(r, "dtype", path, ("bf16", "fp8"), "bf16")
        time_ms = _time_ms(r, path, 2.0 * m * n * k)
        if r.get("layout"):
            layouts = (_choice(r, "layout", path, LAYOUTS, "TN"),)
        else:
            layouts = LAYOUTS if dtype == "bf16" else ("TN",)
        out.extend([m, n, k, dtype, lay, time_ms] for lay in layouts)
    return out


def attention_rows(path: Path) -> list[list]:
    """`tflops` counts forward + backward as the model does: ATTENTION_FLOPS_FWD_BWD x
    attention_fwd_flops (FlashAttention's benchmark convention)."""
    out = []
    for r in read_csv_rows(path, REQUIRED["attention"], TIME_COLUMNS["attention"]):
        b, s, h, kv, d = (
            number(r, c, path) for c in ("batch", "seq", "heads", "kv_heads", "head_dim")
        )
        dv = number(r, "v_head_dim", path) if r.get("v_head_dim") else d
        if h % kv:
            raise InvalidInput(
                f"{path}:{r['_line']}: heads ({h}) must be a multiple of kv_heads ({kv})"
            )
        causal = _choice(r, "causal", path, ("true", "false", "1", "0"), "true") in ("true", "1")
        _choice(r, "dtype", path, ("bf16",), "bf16")
        window = number(r, "window", path, zero_ok=True) if r.get("window") else 0
        if window and not causal:
            raise InvalidInput(f"{path}:{r['_line']}: a window needs causal attention")
        kernel = _choice(r, "kernel", path, ATTENTION_KERNELS, "fused")
        fwd = number(r, "forward_ms", path) if r.get("forward_ms") else 0
        flops = ATTENTION_FLOPS_FWD_BWD * attention_fwd_flops(b, s, h, d, dv, causal, window)
        out.append([b, s, h, kv, d, dv, causal, window, kernel, _time_ms(r, path, flops), fwd])
    return out


def grouped_gemm_rows(path: Path) -> list[list]:
    out = []
    for r in read_csv_rows(path, REQUIRED["grouped_gemm"]):
        e, rows, n, k = (number(r, c, path) for c in ("experts", "rows_per_expert", "n", "k"))
        dtype = _choice(r, "dtype", path, ("bf16", "fp8"), "bf16")
        out.append([e, rows, n, k, dtype, number(r, "time_ms", path)])
    return out


def memory_bound_rows(path: Path) -> list[list]:
    out = []
    for r in read_csv_rows(path, REQUIRED["memory_bound"]):
        if not r.get("op"):
            raise InvalidInput(f"{path}:{r['_line']}: op is empty")
        out.append([r["op"].lower(), number(r, "bytes", path), number(r, "time_ms", path)])
    return out


COLLECTIVE_NAMES = {
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "all_gather": "all_gather",
    "allgather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "sendrecv": "sendrecv",
}
"""The `collective` column: nccl-tests' program names without `_perf`, or the model's names."""


def collective_rows(path: Path) -> list[list]:
    """`collective,ranks,nodes,bytes` and `busbw_gb_per_s` (nccl-tests' busbw column) or
    `time_us` (its time; busbw = bytes / time x the nccl-tests factor); optional `algorithm`
    (empty: auto, NCCL's own choice). cost_models.specs.CollectiveRow."""
    out = []
    for r in read_csv_rows(path, REQUIRED["collectives"], ("busbw_gb_per_s", "time_us")):
        name = r["collective"].lower().removesuffix("_perf")
        if name not in COLLECTIVE_NAMES:
            raise InvalidInput(
                f"{path}:{r['_line']}: collective must be one of "
                f"{', '.join(sorted(set(COLLECTIVE_NAMES)))} (got {r['collective']!r})"
            )
        op = COLLECTIVE_NAMES[name]
        ranks, nodes, size = (number(r, c, path) for c in ("ranks", "nodes", "bytes"))
        if not isinstance(ranks, int) or not isinstance(nodes, int) or ranks < 2 or ranks % nodes:
            raise InvalidInput(
                f"{path}:{r['_line']}: ranks ({ranks}) must be an integer >= 2 and a multiple of "
                f"nodes ({nodes})"
            )
        if r.get("busbw_gb_per_s"):
            busbw = number(r, "busbw_gb_per_s", path)
        else:
            busbw = size / (number(r, "time_us", path) * 1e-6) / 1e9 * busbw_factor(op, ranks)
        algo = (r.get("algorithm") or "auto").lower()
        out.append([op, ranks, nodes, size, busbw, algo])
    return out


SUSTAINED = {"sustained": "bf16", "sustained_fp8": "fp8"}
"""measure_sustained.py's file (../shared/data/kernels/README.md) and bench/
measure_sustained_fp8.py's, each optional beside the tables: file stem -> GEMM dtype."""


def sustained_tflops(path: Path) -> float:
    """The GEMM rate a GPU holds under its power cap: the median TFLOP/s of every 2-second
    window of a sustained CSV after each workload's first (the first holds the ramp from idle
    clocks down to the cap)."""
    windows: dict[str, list[float]] = {}
    for r in read_csv_rows(path, ("workload", "tflops")):
        windows.setdefault(r["workload"], []).append(number(r, "tflops", path))
    steady = sorted(x for w in windows.values() for x in w[1:])
    if not steady:
        raise InvalidInput(f"{path}:1: no steady windows (needs >= 2 rows per workload)")
    mid = len(steady) // 2
    return steady[mid] if len(steady) % 2 else (steady[mid - 1] + steady[mid]) / 2


READERS = {
    "gemm": gemm_rows,
    "attention": attention_rows,
    "attention_window": attention_rows,
    "attention_unfused": attention_rows,
    "gemm_pieces": gemm_rows,
    "grouped_gemm": grouped_gemm_rows,
    "memory_bound": memory_bound_rows,
    "memory_bound_profiled": memory_bound_rows,
    "collectives": collective_rows,
}


def read_kernel_files(files: dict[str, Path], source: str) -> dict[str, Any]:
    """KernelTables data from one CSV per table kind (`files`: kind -> path)."""
    data: dict[str, Any] = {"source": source}
    for kind, path in files.items():
        if kind in SUSTAINED:
            data[f"sustained_{SUSTAINED[kind]}_tflops"] = sustained_tflops(path)
            continue
        rows = READERS[kind](path)
        if not rows:
            raise InvalidInput(f"{path}:1: no data rows")
        table = TABLE_OF.get(kind, kind)
        data[table] = data.get(table, []) + rows
    return data


def kernel_dir_files(folder: Path, where: str) -> dict[str, Path]:
    """Table kind -> CSV of a kernel-tables folder (each of FILES optional, at least one
    present, and SUSTAINED where the folder has it); `where` names the field or flag that gave
    the folder."""
    if not folder.is_dir():
        raise InvalidInput(f"{where}: {folder} is not a folder of kernel tables")
    files = {kind: folder / f"{kind}.csv" for kind in FILES if (folder / f"{kind}.csv").is_file()}
    if not files:
        raise InvalidInput(
            f"{where}: {folder} holds none of {', '.join(f + '.csv' for f in FILES)}"
        )
    for stem in SUSTAINED:
        if (folder / f"{stem}.csv").is_file():
            files[stem] = folder / f"{stem}.csv"
    return files


def read_kernel_dir(folder: Path, where: str) -> dict[str, Any]:
    """KernelTables data from a folder (kernel_dir_files)."""
    return read_kernel_files(kernel_dir_files(folder, where), str(folder))


@functools.cache
def builtin_index() -> dict[str, dict[str, Any]]:
    """GPU preset id -> what models_zoo/kernels/index.json says about its shipped tables
    (`folder` null where none were found: `note` says what was looked for)."""
    return json.loads((BUILTIN_ROOT / "index.json").read_text())["gpus"]


def builtin_source(gpu_id: str) -> str:
    """How a shipped table names itself in a cluster (Cluster.kernels.source, estimate --json)."""
    entry = builtin_index()[gpu_id]
    return f"builtin {gpu_id}: {entry['measured_by']}, {entry['date']} ({entry['source']})"


def builtin_folder(gpu_id: str, where: str) -> Path:
    """The folder of the tables shipped for `gpu_id`, or one line saying which GPUs have them."""
    entry = builtin_index().get(gpu_id)
    if entry is None or not entry.get("folder"):
        have = ", ".join(g for g, e in sorted(builtin_index().items()) if e.get("folder"))
        raise InvalidInput(
            f"{where}: no built-in kernel tables for GPU {gpu_id!r} (models_zoo/kernels/"
            f"index.json says why); built-in: {have}"
        )
    return BUILTIN_ROOT / entry["folder"]


def builtin_tables(gpu_id: str, where: str) -> dict[str, Any]:
    """KernelTables data of the tables shipped for `gpu_id`. Read once per process: the files
    are package data and never change."""
    folder = builtin_folder(gpu_id, where)
    return dict(_read_builtin_cached(folder.name, builtin_source(gpu_id)))


@functools.cache
def _read_builtin_cached(folder: str, source: str) -> tuple[tuple[str, Any], ...]:
    data = read_kernel_dir(BUILTIN_ROOT / folder, f"models_zoo/kernels/{folder}")
    data["source"] = source
    return tuple((k, tuple(tuple(r) for r in v) if k in FILES else v) for k, v in data.items())


def _builtin_id(kern: Any, data: dict[str, Any], where: str) -> str | None:
    """The GPU id whose shipped tables `kernels:` asks for (None: not a built-in request)."""
    if kern == BUILTIN:
        gpu = data.get("gpu")
        gpu_id = gpu.get("id") if isinstance(gpu, dict) else getattr(gpu, "id", None)
        if not isinstance(gpu_id, str):
            raise InvalidInput(f"{where}: kernels: builtin needs the cluster's gpu to have an id")
        return gpu_id
    if isinstance(kern, dict) and BUILTIN in kern:
        if not set(kern) <= {BUILTIN, "tables"} or not isinstance(kern[BUILTIN], str):
            raise InvalidInput(
                f"{where}: kernels: give {{builtin: GPU_ID}} (GPU_ID a text id such as "
                "h100-sxm-80gb; optionally tables: [KIND, ...]), or builtin, or {path: DIR}, "
                "or inline rows"
            )
        return kern[BUILTIN]
    return None


def _only_tables(kern: Any, tables: dict[str, Any], where: str) -> dict[str, Any]:
    """`tables` restricted to the kinds `kernels: {builtin: ID, tables: [KIND, ...]}` names (the
    terms priced from measurements; every other term on the generation's efficiency curve, as
    without tables); all of them where no `tables` list is given."""
    kinds = kern.get("tables") if isinstance(kern, dict) else None
    if kinds is None:
        return tables
    if (not isinstance(kinds, list) or not kinds
            or any(not isinstance(k, str) or k not in TABLES for k in kinds)):  # fmt: skip
        raise InvalidInput(
            f"{where}: kernels.tables must be a non-empty list of {', '.join(TABLES)}, got {kinds!r}"
        )
    kept = {k: v for k, v in tables.items() if k in kinds}
    if "gemm" in kinds:  # the sustained-clock rates belong to the GEMM rows
        kept.update({k: v for k, v in tables.items() if k.startswith("sustained_")})
    kept["source"] = f"{tables['source']} ({', '.join(kinds)} only)"
    return kept


def resolve_kernels(data: dict[str, Any], base: Path | None, where: str) -> dict[str, Any]:
    """`data` with `kernels: {path: DIR}` replaced by the folder's rows (DIR relative to the
    cluster file's folder) and `kernels: builtin` / `{builtin: GPU_ID}` by the shipped tables;
    inline rows pass through to validation."""
    kern = data.get("kernels")
    gpu_id = _builtin_id(kern, data, where)
    if gpu_id is not None:
        tables = builtin_tables(gpu_id, f"{where}: kernels")
        return {**data, "kernels": _only_tables(kern, tables, f"{where}: kernels")}
    if not isinstance(kern, dict) or "path" not in kern:
        return data
    extra = sorted(set(kern) - {"path", "source"})
    if extra or not isinstance(kern["path"], str):
        raise InvalidInput(
            f"{where}: kernels: give either {{path: DIR}} or inline rows (source, gemm, "
            f"attention, grouped_gemm, memory_bound), not {', '.join(extra) or 'a non-text path'}"
        )
    folder = Path(kern["path"])
    if base is not None and not folder.is_absolute():
        folder = base / folder
    tables = read_kernel_dir(folder, f"{where}: kernels.path")
    tables["source"] = kern.get("source") or kern["path"]
    return {**data, "kernels": tables}
