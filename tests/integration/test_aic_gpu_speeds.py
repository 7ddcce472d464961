"""bench/aic_gpu_speeds.py: relative GEMM speeds between GPUs from aiconfigurator's parquet files,
checked on tiny files written here with the ratios worked out by hand; malformed rows skipped and
counted, a system's rows measured on another device left out, and without pyarrow one line naming
the package. pyarrow is not a dependency of the project: the tests that write parquet skip where it
is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_gpu_speeds as speeds  # noqa: E402

V = ("trtllm", "1.3.0rc20")
COLS = ("framework", "version", "device", "gemm_dtype", "m", "n", "k", "latency")


def _write(path: Path, cols: dict[str, list]) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)


def _system(
    data: Path, system: str, device: str, rows: list[tuple], quant: dict | None = None
) -> None:
    cols: dict[str, list] = {c: [] for c in COLS}
    for dtype, m, n, k, ms in rows:
        for c, v in zip(COLS, ("TRTLLM", V[1], device, dtype, m, n, k, ms)):
            cols[c].append(v)
    _write(data / system / "gemm" / V[0] / V[1] / "gemm_perf.parquet", cols)
    for i, name in enumerate(("computescale_perf.parquet", "scale_matrix_perf.parquet")):
        q = quant or {}
        qcols = {
            "m": [s[0] for s in q],
            "k": [s[1] for s in q],
            "latency": [v[i] for v in q.values()],
        }
        if quant is not None:
            _write(data / system / "quantize" / V[0] / V[1] / name, qcols)


SHAPES = [(2048, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 1024)]
B200 = [("bfloat16", *s, t) for s, t in zip(SHAPES, (1.0, 2.0, 4.0))]
B200 += [("fp8", *s, t) for s, t in zip(SHAPES, (0.6, 1.1, 2.2))]
B200 += [("bfloat16", 1024, 4096, 4096, 0.5),  # m below 2,048: outside the shape set
         ("bfloat16", 2049, 4096, 4096, 1.0),  # the collector's unaligned m: a subset only
         ("bfloat16", 2048, 512, 4096, 0.1)]  # n below 1,024: outside  # fmt: skip
QUANT = {(2048, 4096): (0.05, 0.05), (4096, 4096): (0.05, 0.05), (8192, 1024): (0.1, 0.1)}


def _data(tmp_path: Path, part_device: str = "NVIDIA GB300") -> Path:
    _system(tmp_path, "b200_sxm", "NVIDIA B200", B200, QUANT)
    part = [("bfloat16", *s, t) for s, t in zip(SHAPES, (0.8, 1.8, 3.0))]
    part += [("fp8", *s, t) for s, t in zip(SHAPES, (0.5, 1.0, 2.0))]
    part += [("bfloat16", 1024, 4096, 4096, 0.1), ("bfloat16", 2049, 4096, 4096, 0.5),
             ("bfloat16", 4096, 0, 4096, 1.0)]  # a malformed row (n = 0)  # fmt: skip
    _system(
        tmp_path,
        "gb300",
        part_device,
        part,
        {s: (0.05, 0.05) if s[0] < 8192 else (0.1, 0.1) for s in QUANT},
    )
    return tmp_path


def test_ratios_over_the_shape_set_by_hand(tmp_path):
    data = _data(tmp_path)
    b200 = speeds.collection(data, "b200_sxm", *V)
    gb300 = speeds.collection(data, "gb300", *V)
    # bf16 time gb300 / b200 at the three shapes: 0.8, 0.9, 0.75 -> median 0.8 (speed 1.25)
    assert sorted(speeds.ratios(gb300, b200, "bf16")) == pytest.approx([0.75, 0.8, 0.9])
    stats = speeds.quantiles(speeds.ratios(gb300, b200, "bf16"))
    assert (stats["n"], stats["median"]) == (3, pytest.approx(0.8))
    # fp8 as collected 0.5/0.6, 1.0/1.1, 2.0/2.2; GEMM alone (less 0.1 / 0.1 / 0.2 of quantize):
    # 0.4/0.5 = 0.8, 0.9/1.0 = 0.9, 1.8/2.0 = 0.9 -> median 0.9
    assert statistics_median(speeds.ratios(gb300, b200, "fp8-gemm")) == pytest.approx(0.9)
    # the unaligned m = 2,049 row is a subset of its own: 0.5 / 1.0
    unaligned = speeds.SUBSETS["unaligned m (2,049...)"]
    assert speeds.ratios(gb300, b200, "bf16", unaligned) == [0.5]
    assert (gb300["skipped"], b200["skipped"]) == (1, 0)


def statistics_median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def test_rows_of_another_device_are_left_out(tmp_path, capsys):
    data = _data(tmp_path, part_device="NVIDIA B200")
    loaded = speeds.print_collections(data)
    out = capsys.readouterr().out
    assert "left out: gb300's rows carry device ['NVIDIA B200'], not NVIDIA GB300" in out
    assert loaded[V]["gb300"] is None
    assert "skipped 1 malformed row(s) of gb300's gemm_perf.parquet" in out


def test_main_prints_the_speeds(tmp_path, capsys):
    assert speeds.main([str(_data(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "gb300 / b200_sxm bf16     time: median 0.800 (speed 1.250)" in out
    assert "gb300 bf16    : trtllm 1.3.0rc20 1.250" in out
    assert "gb300            bf16: MAMF / b200's -; shipped gemm_speed_vs_flagship 1.222" in out


def test_without_pyarrow_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert speeds.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err == "error: reading aiconfigurator's parquet files needs pyarrow: pip install pyarrow\n"
    )


def test_missing_folder_one_line(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    assert speeds.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: ")
        and err.count("\n") == 1
        and "b200_sxm/gemm: no such folder" in err
    )


def test_chain_to_the_measured_h100_table_by_hand():
    """Section 5: the B200's priced time over the shipped H100 table's time (8,192 x 4,096 x
    4,096 bf16 TN: 0.41528 ms, a measured row) times aiconfigurator's B200 / H100 time (0.2 /
    0.4 ms); a shape the table would extrapolate and one outside the shape set are skipped. No
    parquet: the systems are written as collection() returns them."""
    shape, far, small = (8192, 4096, 4096), (32768, 65536, 65536), (1024, 4096, 4096)
    systems = {
        "b200_sxm": {"bf16": {shape: 0.2, far: 50.0, small: 0.1}},
        "h100_sxm": {"bf16": {shape: 0.4, far: 100.0, small: 0.2}},
    }
    flops = 2 * 8192 * 4096 * 4096
    shape_factor = 8192 / (8192 + 325) * (4096 / (4096 + 325)) ** 2  # gemm_half_dim 325
    priced_s = flops / (2250e12 * 0.77 * shape_factor)  # B200 bf16 peak x the Blackwell 0.77
    expected = priced_s / (0.41528e-3 * 0.2 / 0.4)
    assert speeds.chain_ratios(systems, "bf16") == [pytest.approx(expected)]
    assert speeds.chain_ratios({"b200_sxm": systems["b200_sxm"]}, "bf16") == []
