"""bench/aic_gemm_check.py reads aiconfigurator's GEMM and quantize parquet files; checked on tiny
files written here with their rows worked out by hand, on malformed files (one line naming the
file, column or row, and the rule) and without pyarrow (one line naming the package). pyarrow is
not a dependency of the project: the tests that write parquet skip where it is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_gemm_check as aic  # noqa: E402

VERSION = "1.3.0rc20"


def _gemm(rows: list[tuple]) -> dict[str, list]:
    cols = {c: [] for c in aic.GEMM_COLUMNS}
    for dtype, m, n, k, ms in rows:
        for c, v in zip(aic.GEMM_COLUMNS, ("TRTLLM", VERSION, "NVIDIA H100 80GB HBM3",
                                            "torch_flow", dtype, m, n, k, ms)):  # fmt: skip
            cols[c].append(v)
    return cols


def _write(path: Path, cols: dict[str, list]) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)


def _system(tmp_path: Path, gemm: list[tuple], quant: dict[tuple, tuple]) -> Path:
    base = tmp_path / "h100_sxm"
    _write(base / "gemm" / "trtllm" / VERSION / "gemm_perf.parquet", _gemm(gemm))
    for i, name in enumerate(("computescale_perf.parquet", "scale_matrix_perf.parquet")):
        cols = {"m": [s[0] for s in quant], "k": [s[1] for s in quant],
                "latency": [v[i] for v in quant.values()]}  # fmt: skip
        _write(base / "quantize" / "trtllm" / VERSION / name, cols)
    return tmp_path


ROWS = [
    ("bfloat16", 4096, 4096, 4096, 0.2),
    ("fp8", 4096, 4096, 4096, 0.15),
    ("fp8", 2048, 1024, 512, 0.01),
    ("fp8_block", 4096, 4096, 4096, 0.12),
    ("bfloat16", 128, 4096, 4096, 0.03),
]
QUANT = {(4096, 4096): (0.02, 0.03), (2048, 512): (0.006, 0.005)}


def test_rows_and_fp8_gemm_alone_by_hand(tmp_path):
    data = _system(tmp_path, ROWS, QUANT)
    rows = aic.gemm_rows(data, "h100_sxm", VERSION)
    assert rows[("fp8_block", 4096, 4096, 4096)] == 0.12
    quant = aic.quantize_ms(data, "h100_sxm", VERSION)
    assert quant == pytest.approx({(4096, 4096): 0.05, (2048, 512): 0.011})
    assert aic.aic_dtype_rows(rows, quant, "bf16") == {(4096, 4096, 4096): 0.2, (128, 4096, 4096): 0.03}
    # fp8 less amax + quantize: 0.15 - 0.05; the 2048 row's kernels outlast it (0.01 - 0.011 < 0)
    # and it is dropped, not kept negative
    assert aic.aic_dtype_rows(rows, quant, "fp8-gemm") == pytest.approx({(4096, 4096, 4096): 0.10})
    # 6 replays x copies: a 4096 x 4096 bf16 weight is 32 MiB, 2 copies fill the 50 MiB L2
    assert aic.window_ms("h100_sxm", (4096, 4096, 4096), 0.2, "bfloat16") == pytest.approx(2.4)


def test_written_table_is_this_projects_format(tmp_path):
    data = _system(tmp_path, ROWS, QUANT)
    out = tmp_path / "out" / "gemm.csv"
    assert aic.write_gemm_csv(data, "h100_sxm", VERSION, out) == 2
    # m < 256 left out; bf16 without a layout (all three passes), fp8 the GEMM alone
    assert out.read_text() == "m,n,k,dtype,time_ms\n4096,4096,4096,bf16,0.2\n4096,4096,4096,fp8,0.1\n"


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([("bfloat16", 64, 64, 64, -1.0)], r"row 0: latency must be a positive number of ms"),
        ([("bfloat16", 64, 0, 64, 1.0)], r"row 0: n must be a positive integer, got 0"),
    ],
)
def test_bad_values_name_file_row_and_rule(tmp_path, rows, match):
    data = _system(tmp_path, rows, QUANT)
    with pytest.raises(aic.AicError, match=r"gemm_perf\.parquet: " + match):
        aic.gemm_rows(data, "h100_sxm", VERSION)


def test_missing_column_and_file(tmp_path):
    path = tmp_path / "h100_sxm" / "gemm" / "trtllm" / VERSION / "gemm_perf.parquet"
    cols = _gemm(ROWS)
    del cols["latency"]
    _write(path, cols)
    with pytest.raises(aic.AicError, match=r"gemm_perf\.parquet: column 'latency' missing"):
        aic.gemm_rows(tmp_path, "h100_sxm", VERSION)
    with pytest.raises(aic.AicError, match=r"gemm_perf\.parquet: no such file"):
        aic.gemm_rows(tmp_path, "gb200", VERSION)


def test_without_pyarrow_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(aic.AicError, match=r"needs pyarrow: pip install pyarrow"):
        aic.gemm_rows(tmp_path, "h100_sxm", VERSION)
    assert aic.main([str(tmp_path)]) == 2
