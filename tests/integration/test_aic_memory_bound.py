"""bench/aic_memory_bound.py: streaming-kernel bandwidth per GPU from aiconfigurator's quantize
tables, checked on tiny parquet files written here with the fractions worked out by hand; a
system's rows measured on another device left out, and without pyarrow one line naming the
package. pyarrow is not a dependency of the project: the tests that write parquet skip where it is
absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_memory_bound as mb  # noqa: E402

V = ("trtllm", "1.3.0rc20")
ONE_SHOT = (8192, 4096)  # 33.5 M elements, a 67 MB bf16 input: inside 32 MB .. 2^27 elements
LARGE = (16384, 16384)  # 268 M elements: above the grid cap
SMALL = (1024, 1024)  # a 2 MB input: launch-bound, in no bin


def _ms(shape: tuple[int, int], fraction: float, datasheet_gb_per_s: float) -> float:
    """The latency at which 3 B per element move at `fraction` of the datasheet."""
    return 3 * shape[0] * shape[1] / (fraction * datasheet_gb_per_s * 1e9) * 1e3


def _write(data: Path, system: str, device: str, rows: dict) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = data / system / "quantize" / V[0] / V[1] / "scale_matrix_perf.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {
        "device": [device] * len(rows),
        "m": [s[0] for s in rows],
        "k": [s[1] for s in rows],
        "latency": list(rows.values()),
    }
    pq.write_table(pa.table(cols), path)


def _data(tmp_path: Path) -> Path:
    # B200 at 0.5 of 8,000 GB/s, H100 at 0.8 of 3,350 GB/s at every shape; the small row at 0.01
    for system, device, fraction, sheet in (
        ("b200_sxm", "NVIDIA B200", 0.5, 8000),
        ("h100_sxm", "NVIDIA H100 80GB HBM3", 0.8, 3350),
    ):
        rows = {s: _ms(s, fraction, sheet) for s in (ONE_SHOT, LARGE)}
        rows[SMALL] = _ms(SMALL, 0.01, sheet)
        _write(tmp_path, system, device, rows)
    _write(tmp_path, "b300_sxm", "NVIDIA GB300", {ONE_SHOT: 1.0})  # filed under the wrong system
    return tmp_path


def test_fractions_per_size_bin_by_hand(tmp_path):
    data = _data(tmp_path)
    b200 = mb.scale_matrix(data, "b200_sxm", *V)
    assert mb.fractions(b200, "trtllm", "b200_sxm", "one-shot") == pytest.approx([0.5])
    assert mb.fractions(b200, "trtllm", "b200_sxm", "large") == pytest.approx([0.5])
    # the eager sglang chain moves 21 B per element: the same latency is 7x the fraction
    assert mb.fractions(b200, "sglang", "b200_sxm", "one-shot") == pytest.approx([3.5])
    assert mb.scale_matrix(data, "b300_sxm", *V)["mislabelled"]
    assert mb.scale_matrix(data, "gb200", *V) is None


def test_chain_carries_the_h100_table_by_the_time_ratio(tmp_path):
    systems = mb.load_all(_data(tmp_path))[V]
    # H100 time / B200 time = (0.5 x 8,000) / (0.8 x 3,350) = 1.49254 at every shape; the H100
    # table's copy rows 2,807.1 2,910.8 2,982.8 2,962.2 2,880.8 GB/s: median 2,910.8 GB/s,
    # x 1.49254 / 8,000 = 0.54306 of the B200's datasheet
    per_op = mb.chain(systems, "b200_sxm")
    speed = 0.5 * 8000 / (0.8 * 3350)
    assert sorted(per_op["copy"]) == pytest.approx(
        sorted(g * speed / 8000 for g in (2807.1, 2910.8, 2982.8, 2962.2, 2880.8))
    )
    assert mb.statistics.median(per_op["copy"]) == pytest.approx(2910.8 * speed / 8000)


def test_whole_report_by_hand(tmp_path, capsys):
    assert mb.main([str(_data(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "left out: trtllm 1.3.0rc20 b300_sxm's rows carry device ['NVIDIA GB300']" in out
    assert "b200_sxm  NVIDIA B200            one-shot 0.500 (0.500-0.500, n 1); large 0.500" in out
    assert "h100_sxm  NVIDIA H100 80GB HBM3  one-shot 0.800 (0.800-0.800, n 1)" in out
    assert "b200_sxm : trtllm 1.3.0rc20 0.500 [0.625]" in out  # 0.5 / 0.8
    assert "trtllm 1.3.0rc20 b200_sxm : copy 0.543" in out
    assert "b200             0.850 x 8,000 GB/s: generation constant; measured 0.500" in out
    assert "h100-sxm-80gb    0.850 x 3,350 GB/s: generation constant; measured 0.800" in out
    assert "gb200            0.850 x 8,000 GB/s: generation constant; measured -" in out


def test_without_pyarrow_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert mb.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: reading aiconfigurator's parquet files needs pyarrow: pip install pyarrow\n"
    )


def test_folder_without_tables_one_line(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    assert mb.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "no <system>/quantize/*/*/scale_matrix_perf.parquet" in err
