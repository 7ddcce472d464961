"""Read aiconfigurator's measured NCCL tables as nccl-tests runs (issue 32: a peer simulator's
measured system data is read by an importer, not converted by hand).

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships
`aic-core/src/aiconfigurator_core/systems/data/<system>/comm/nccl/<version>/nccl_perf.parquet`,
written by its collector `collector/network/collect_nccl.py`: for each collective (`op_name`
all_gather, alltoall, reduce_scatter, all_reduce) and GPU count (`num_gpus`) it runs the
nccl-tests binary (`<op>_perf -b S -e S -t N -d half|int8 -w 40 -n 100|60 -a 1 -c 0`: one
process, N threads on one node, one size per call) and records the out-of-place time nccl-tests
prints (`latency`, ms; the mean iteration time over the ranks) against `message_size`, the
size in elements (bytes / 2 for `half`, bytes for `int8`). So each (collective, GPU count,
dtype) group is one nccl-tests run over one node, and it becomes one `nccl.NcclLog`: the same
alpha-beta fit and the same collective curves as `--nccl-tests` files (planner/calibrate
`_nccl`).

pyarrow reads the file; it is an optional extra (`pip install 'planner-placement[parquet]'`),
refused with one line when missing. Every malformed value is one line naming the file, the row
and the rule.
"""

from __future__ import annotations

import math
from pathlib import Path

from cost_models.errors import InvalidInput

from .nccl import NcclLog, Row, busbw_factor

OPS = {
    "all_gather": "all_gather",
    "alltoall": "all_to_all",
    "reduce_scatter": "reduce_scatter",
    "all_reduce": "all_reduce",
}
"""aiconfigurator's op_name -> the collective (nccl-tests' program less `_perf`)."""
BYTES_PER_ELEMENT = {"half": 2, "int8": 1}
"""collect_nccl.py: `bytes_per_element = 2 if dtype == "half" else 1`."""
COLUMNS = ("op_name", "num_gpus", "message_size", "latency", "nccl_dtype")
HOST = "one node"
"""The collector runs one nccl-tests process per measurement (-t threads): a single host."""


def _read_rows(path: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415  (optional extra)
    except ImportError:
        raise InvalidInput(
            f"{path}: reading aiconfigurator's parquet tables needs pyarrow "
            "(pip install 'planner-placement[parquet]')"
        ) from None
    if not Path(path).is_file():
        raise InvalidInput(f"{path}: no such file")
    try:
        return pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow raises several types for a bad file
        raise InvalidInput(
            f"{path}: not a readable parquet table ({type(err).__name__})"
        ) from None


def _checked(r: dict, i: int, path: str) -> tuple[str, int, int, float, str]:
    """(collective, ranks, bytes, time us, dtype) of one row, or one line naming the rule."""
    where = f"{path}: row {i}"
    if r["op_name"] not in OPS:
        raise InvalidInput(
            f"{where}: op_name must be one of {', '.join(OPS)} (got {r['op_name']!r})"
        )
    if r["nccl_dtype"] not in BYTES_PER_ELEMENT:
        raise InvalidInput(f"{where}: nccl_dtype must be half or int8 (got {r['nccl_dtype']!r})")
    for col in ("num_gpus", "message_size"):
        if not isinstance(r[col], int) or r[col] <= 0:
            raise InvalidInput(f"{where}: {col} must be a positive integer")
    if r["num_gpus"] < 2:
        raise InvalidInput(f"{where}: num_gpus must be at least 2 (a collective needs a peer)")
    ms = r["latency"]
    if not isinstance(ms, (int, float)) or not (math.isfinite(ms) and ms > 0):
        raise InvalidInput(f"{where}: latency must be > 0 (ms)")
    size = r["message_size"] * BYTES_PER_ELEMENT[r["nccl_dtype"]]
    return OPS[r["op_name"]], r["num_gpus"], size, ms * 1e3, r["nccl_dtype"]


def read_nccl_perf(path: str, dtype: str = "half") -> list[NcclLog]:
    """One NcclLog per (collective, GPU count) of the `dtype` rows (half: the 2-byte collectives
    of bf16 training), sizes ascending; `path [collective xN]` names each."""
    rows = _read_rows(path)
    if rows and (missing := [c for c in COLUMNS if c not in rows[0]]):
        raise InvalidInput(
            f"{path}: no column {missing[0]} (an aiconfigurator nccl_perf table has "
            f"{', '.join(COLUMNS)})"
        )
    groups: dict[tuple[str, int], dict[int, float]] = {}
    devices: set[str] = set()
    for i, r in enumerate(rows):
        op, ranks, size, time_us, kind = _checked(r, i, path)
        if kind != dtype:
            continue
        devices.add(str(r.get("device") or ""))
        groups.setdefault((op, ranks), {})[size] = time_us
    if not groups:
        raise InvalidInput(f"{path}: no {dtype} rows (nccl_dtype)")
    if len(devices) > 1:
        raise InvalidInput(f"{path}: rows from several devices ({', '.join(sorted(devices))})")
    device = devices.pop()
    logs = []
    for (op, ranks), times in sorted(groups.items()):
        f = busbw_factor(op, ranks)
        body = [
            Row(0, size, t, size / (t * 1e-6) / 1e9, size / (t * 1e-6) / 1e9 * f)
            for size, t in sorted(times.items())
        ]
        avg = sum(r.busbw_gb_per_s for r in body) / len(body)
        logs.append(NcclLog(f"{path} [{op} x{ranks}]", op, ranks, (HOST,), device, body, avg))
    return logs
