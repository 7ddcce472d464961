"""bench/aic_attention_speeds.py: relative attention-forward speeds between GPUs from
aiconfigurator's context-attention and context-MLA parquet files, checked on tiny files written
here with the speeds worked out by hand; rows outside the shape set ignored, malformed rows
skipped and counted, a system measured on another device or faster than its peak left out, and
without pyarrow one line naming the package. pyarrow is not a dependency of the project: the
tests that write parquet skip where it is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_attention_speeds as speeds  # noqa: E402

V = ("trtllm", "1.3.0rc20")
MHA = ("device", "kernel_source", "batch_size", "isl", "num_heads", "num_key_value_heads",
       "head_dim", "attn_dtype", "kv_cache_dtype", "window_size", "latency")  # fmt: skip
MLA = ("device", "kernel_source", "batch_size", "isl", "num_heads", "tp_size", "mla_dtype",
       "kv_cache_dtype", "latency")  # fmt: skip


def _write(path: Path, names: tuple[str, ...], rows: list[tuple]) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({c: [r[i] for r in rows] for i, c in enumerate(names)}), path)


def _system(data: Path, system: str, device: str, mha: list[tuple], mla: list[tuple]) -> None:
    """mha rows (batch, seq, heads, kv, head dim, dtype, window, ms); mla (batch, seq, heads, ms)."""
    rows = [(device, "torch_flow", b, s, h, kv, d, dt, dt, w, ms)
            for b, s, h, kv, d, dt, w, ms in mha]  # fmt: skip
    _write(data / system / "attention" / V[0] / V[1] / "context_attention_perf.parquet", MHA, rows)
    rows = [(device, "default", b, s, h, 1, "bfloat16", "bfloat16", ms) for b, s, h, ms in mla]
    _write(data / system / "mla" / V[0] / V[1] / "context_mla_perf.parquet", MLA, rows)


BF = "bfloat16"
# B200: three head-dim-128 shapes at 2K / 4K / 8K (1.0 / 2.0 / 4.0 ms), one head-dim-64 shape,
# and rows the shape set leaves out: 1K tokens, fp8, a 128-token window.
B200 = [(1, 2048, 32, 8, 128, BF, 0, 1.0), (1, 4096, 32, 8, 128, BF, 0, 2.0),
        (2, 8192, 16, 8, 128, BF, 0, 4.0), (1, 4096, 32, 8, 64, BF, 0, 1.0),
        (1, 1024, 32, 8, 128, BF, 0, 0.5), (1, 4096, 32, 8, 128, "fp8", 0, 1.0),
        (1, 4096, 32, 8, 128, BF, 128, 0.3)]  # fmt: skip
B200_MLA = [(1, 2048, 128, 2.0), (1, 4096, 128, 4.0), (1, 1024, 128, 1.0)]
# GB300 at the same shapes: 0.8 / 1.6 / 2.5 ms -> speeds 1.25 / 1.25 / 1.6; hd64 0.5 -> 2.0;
# the out-of-set rows are faster still (they must not count); one malformed row (heads 0).
GB300 = [(1, 2048, 32, 8, 128, BF, 0, 0.8), (1, 4096, 32, 8, 128, BF, 0, 1.6),
         (2, 8192, 16, 8, 128, BF, 0, 2.5), (1, 4096, 32, 8, 64, BF, 0, 0.5),
         (1, 1024, 32, 8, 128, BF, 0, 0.05), (1, 4096, 32, 8, 128, "fp8", 0, 0.1),
         (1, 4096, 32, 8, 128, BF, 128, 0.01), (1, 4096, 0, 8, 128, BF, 0, 1.0)]  # fmt: skip
GB300_MLA = [(1, 2048, 128, 1.6), (1, 4096, 128, 4.0), (1, 1024, 128, 0.1)]  # 1.25, 1.0


def _data(tmp_path: Path, device: str = "NVIDIA GB300") -> Path:
    _system(tmp_path, "b200_sxm", "NVIDIA B200", B200, B200_MLA)
    _system(tmp_path, "gb300", device, GB300, GB300_MLA)
    return tmp_path


def test_speeds_over_the_shape_set_by_hand(tmp_path):
    data = _data(tmp_path)
    b200 = speeds.collection(data, "b200_sxm", *V)
    gb300 = speeds.collection(data, "gb300", *V)
    assert sorted(speeds.speeds(gb300, b200, "mha", 128)) == pytest.approx([1.25, 1.25, 1.6])
    assert speeds.speeds(gb300, b200, "mha", 64) == [pytest.approx(2.0)]
    assert sorted(speeds.speeds(gb300, b200, "mla")) == pytest.approx([1.0, 1.25])
    assert (gb300["skipped"], b200["skipped"], gb300["left_out"]) == (1, 0, None)
    long_only = speeds.speeds(gb300, b200, "mha", 128, speeds.SUBSETS["seq 8-16K"])
    assert long_only == [pytest.approx(1.6)]


def test_main_prints_the_speeds_and_the_presets(tmp_path, capsys):
    assert speeds.main([str(_data(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "gb300 / b200_sxm hd128       speed: median 1.250, P10 1.250, P90 1.600, n 3" in out
    assert "gb300 / b200_sxm mla 192/128 speed: median 1.125, P10 1.000, P90 1.250, n 2" in out
    assert "gb300 hd128      : trtllm 1.3.0rc20 1.250  | range 1.250-1.250" in out
    assert "gb300           : shipped forward 1.280 / MLA 1.169; priced forward 1.280" in out
    assert "backward 1.222; aic hd128 1.250, aic mla 192/128 1.125" in out


def test_another_device_is_left_out(tmp_path, capsys):
    loaded = speeds.print_collections(_data(tmp_path, device="NVIDIA B200"))
    out = capsys.readouterr().out
    assert "left out: gb300: rows carry device ['NVIDIA B200'], not NVIDIA GB300" in out
    assert loaded[V]["gb300"] is None
    assert "skipped 1 malformed row(s) of gb300" in out


def test_rows_faster_than_the_peak_leave_the_system_out(tmp_path):
    # 2 x 1 x 8,192^2 / 2 x 16 x 256 FLOPs = 275 GFLOP in 0.0001 ms: far above 2,500 TFLOP/s
    fast = [(*GB300[0][:7], 0.8), (2, 8192, 16, 8, 128, BF, 0, 1e-4)]
    _system(tmp_path, "gb300", "NVIDIA GB300", fast, [])
    out = speeds.collection(tmp_path, "gb300", *V)
    assert out["left_out"] == "1 row(s) faster than its dense bf16 peak (2500 TFLOP/s)"


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
    assert err.startswith("error: ") and err.count("\n") == 1 and "no <system>/attention" in err
