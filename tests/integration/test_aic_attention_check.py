"""bench/aic_attention_check.py reads aiconfigurator's context-attention parquet tables: the rows
it keeps and refuses are checked on hand-written rows (no pyarrow needed); the whole check on a
tiny folder tree with figures worked out by hand runs only where pyarrow is installed (it is not
a project dependency; CI skips it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_attention_check as aac  # noqa: E402

P = Path("ctx.parquet")


def _row(**kw) -> dict:
    row = {"batch_size": 1, "isl": 4096, "num_heads": 8, "num_key_value_heads": 2,
           "head_dim": 128, "attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16",
           "window_size": 0, "kernel_source": "torch_flow", "latency": 0.5}
    return {**row, **kw}


def test_keeps_bf16_full_attention_rows_only():
    rows = [_row(), _row(attn_dtype="fp8", kv_cache_dtype="fp8"), _row(kv_cache_dtype="fp8"),
            _row(window_size=128), _row(isl=2048)]
    kept = aac.prefill_rows(rows, P)
    assert [(r["isl"], r["attn_dtype"]) for r in kept] == [(4096, "bfloat16"), (2048, "bfloat16")]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(latency=0.0), "ctx.parquet: row 0: latency must be > 0 (ms)"),
        (_row(latency=float("nan")), "ctx.parquet: row 0: latency must be > 0 (ms)"),
        (_row(num_heads=0), "ctx.parquet: row 0: num_heads must be a positive integer"),
        (_row(num_heads=6, num_key_value_heads=4),
         "ctx.parquet: row 0: num_heads must be a multiple of num_key_value_heads"),
    ],
)
def test_bad_rows_are_one_line(row, message):
    with pytest.raises(aac.TableError) as err:
        aac.prefill_rows([row], P)
    assert str(err.value) == message


def test_missing_column_named():
    row = _row()
    del row["latency"]
    with pytest.raises(aac.TableError, match=r"^ctx.parquet: no column latency \("):
        aac.prefill_rows([row], P)


def test_flops_and_rows_above_peak_by_hand():
    # 2 b s (s / 2) h (d + d) = 2 x 1 x 4096 x 2048 x 8 x 256 = 34,359,738,368 FLOPs
    assert aac.causal_fwd_flops(1, 4096, 8, 128) == 34_359_738_368
    table = {(1, 4096, 8, 2, 128): 0.034359738368}  # 1,000 TFLOP/s
    assert aac.above_peak(table, 989.4) == 1
    assert aac.above_peak(table, 1000.5) == 0


def test_no_tables_is_one_line(tmp_path, capsys):
    assert aac.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path}: no */attention/*/*/context_attention_perf.parquet")
    assert "\n" not in err


def test_without_pyarrow_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(aac.TableError, match=r"^ctx.parquet: .* needs pyarrow \(pip install"):
        aac._read_parquet(P)


SHARED_CSV = (
    "batch,seq,heads,kv_heads,head_dim,v_head_dim,causal,dtype,kernel,time_ms,forward_ms\n"
    "1,4096,8,2,128,128,true,bf16,fused,2.0,0.4\n"
    "2,2048,8,2,128,128,true,bf16,fused,1.5,0.25\n"
    "1,4096,8,2,128,128,true,bf16,fa2,3.0,0.8\n"
)


def _tree(tmp_path: Path, pq, pa) -> tuple[Path, Path]:
    shared = tmp_path / "shared"
    for gpu in ("h100-sxm-80gb", "h200-sxm-141gb"):
        (shared / gpu).mkdir(parents=True)
        (shared / gpu / "attention.csv").write_text(SHARED_CSV)
    data = tmp_path / "data"
    tables = (
        ("h100_sxm", [_row(latency=0.6), _row(batch_size=2, isl=2048, latency=0.3)]),
        ("b200_sxm", [_row(latency=0.034359738368 * 1000 / 1125)]),  # half the 2,250 peak
        ("b300_sxm", [_row(latency=0.034359738368 * 1000 / 1500)]),
    )
    for system, rows in tables:
        folder = data / system / "attention" / "trtllm" / "1.0"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / aac.TABLE)
    return data, shared


def test_whole_check_by_hand(tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    data, shared = _tree(tmp_path, pq, pa)
    assert aac.main([str(data), str(shared)]) == 0
    out = capsys.readouterr().out
    # 0.6 / 0.4 = 1.5 and 0.3 / 0.25 = 1.2: median 1.35; FlashAttention-2: 0.6 / 0.8
    assert ("h100_sxm trtllm 1.0 torch_flow: n 2: median 1.350, P10 1.200, P90 1.500, "
            "range 1.200-1.500 | n 1: median 0.750") in out
    assert "b200_sxm trtllm 1.0 torch_flow: 4096: 0.500; 0 of 1 rows above the peak" in out
    assert "b300_sxm / b200_sxm trtllm 1.0 torch_flow: n 1: median 1.333" in out
    # H100 at 4,096: 34.36 GFLOP / 0.6 ms = 57.27 TFLOP/s, 0.05788 of 989.4; B200 0.5 of its peak
    assert "b200_sxm torch_flow / h100_sxm torch_flow, trtllm 1.0: 4096: 8.64" in out
    # 5: carried from the H100's measured fwd + bwd (2.0 ms at that shape) by the forward speed
    # (0.6 ms on the H100, 34.36 GFLOP / 1,125 TFLOP/s on the B200): 3.5 x 1,125 x 0.6 / (2.0 x
    # 2,250) = 0.525 of the B200's peak; the B300 at 1,500 TFLOP/s: 0.7. Priced: the B200 at the
    # generation's 0.57 for both passes; the B300 (measured attention_speed_vs_flagship) forward
    # 0.57 x 1.168 = 0.66576 and backward 0.57 x 1.07 (its bf16 GEMM speed) = 0.6099, over 1 + 2.5
    # forwards of FLOPs:
    # 3.5 / (1 / 0.66576 + 2.5 / 0.6099) = 0.6249
    assert "b200_sxm trtllm 1.0 torch_flow: 4096: 0.525; all 0.525 (n 1); priced 0.57" in out
    assert "b300_sxm trtllm 1.0 torch_flow: 4096: 0.700; all 0.700 (n 1); priced 0.6249" in out
