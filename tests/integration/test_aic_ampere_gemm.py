"""bench/aic_ampere_gemm.py: the A100 preset's GEMM curve against aiconfigurator's A100 rows, the
collector's H100 rows against a measured H100 gemm.csv, and the chain, on tiny files written here
with the ratios worked out by hand. pyarrow is not a project dependency: skipped without it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_ampere_gemm as amp
from test_aic_gpu_speeds import _write

import models_zoo
from cost_models.calibration import generation_for_gpu

COLL = ("sglang", "0.5.10")
COLS = ("framework", "version", "device", "gemm_dtype", "m", "n", "k", "latency")
SHAPES = [(4096, 4096, 4096), (8192, 8192, 4096), (16384, 4096, 16384)]


def _system(data: Path, system: str, rows: list[tuple]) -> None:
    cols: dict[str, list] = {c: [] for c in COLS}
    for dtype, m, n, k, ms in rows:
        for c, v in zip(COLS, ("SGLang", COLL[1], system, dtype, m, n, k, ms)):
            cols[c].append(v)
    _write(data / system / "gemm" / COLL[0] / COLL[1] / "gemm_perf.parquet", cols)


def _curve_ms(shape: tuple[int, int, int]) -> float:
    gpu = models_zoo.load_gpu("a100-sxm-80gb")
    cal = generation_for_gpu(gpu)
    eff = cal.gemm_efficiency_bf16 * math.prod(d / (d + cal.gemm_half_dim) for d in shape)
    return 2.0 * math.prod(shape) / (gpu.peak_bf16_tflops * 1e12 * eff) * 1e3


def test_curve_collector_offset_and_chain_by_hand(tmp_path: Path, capsys) -> None:
    # the A100 rows at 0.8 of the curve's time; the H100 rows at 1/3 of the A100's
    a100 = [("bfloat16", *s, 0.8 * _curve_ms(s)) for s in SHAPES]
    a100 += [("bfloat16", 1024, 4096, 4096, 0.1),  # m below 4,096: not a training shape
             ("fp8", 4096, 4096, 4096, 0.1),  # not bf16
             ("bfloat16", 8192, 4096, 4096, -1.0)]  # a malformed row: skipped, counted  # fmt: skip
    h100 = [("bfloat16", *s, 0.8 * _curve_ms(s) / 3) for s in SHAPES]
    _system(tmp_path, "a100_sxm", a100)
    _system(tmp_path, "h100_sxm", h100)
    # the measured H100 table holds the first shape only, at 1.25x the collector's time
    kernels = tmp_path / "kernels" / "h100-sxm-80gb"
    kernels.mkdir(parents=True)
    m, n, k = SHAPES[0]
    ms = 1.25 * 0.8 * _curve_ms(SHAPES[0]) / 3
    (kernels / "gemm.csv").write_text(
        "m,n,k,dtype,layout,time_ms,tflops\n"
        f"{m},{n},{k},bf16,TN,{ms},{2 * m * n * k / ms / 1e9}\n"
    )
    assert amp.main([str(tmp_path), "--collection", "/".join(COLL),
                     "--measured", str(tmp_path / "kernels")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "a100_sxm 4 bf16 rows (1 skipped), h100_sxm 3 (0 skipped)" in out
    assert "1. a100_sxm measured / A100 curve time, training shapes: n 3: median 0.800" in out
    assert "(TN bf16, shapes both hold): n 1: median 0.800" in out  # 1 / 1.25
    assert "3. a100_sxm / h100_sxm time, same training shapes: n 3: median 3.000" in out
    # chain at the one shape the table holds: 1.25 x 0.8 / 3 x 3 = 1.0 of the curve's time; the
    # other two lie outside the one-row table (no look-up), so they are left out
    assert "chain (H100 table look-up x a100 / h100) / A100 curve time: n 1: median 1.000" in out
    expect_tflops = [2 * math.prod(s) / (0.8 * _curve_ms(s)) / 1e9 for s in SHAPES]
    assert f"measured TFLOP/s median {sorted(expect_tflops)[1]:.1f}" in out


def test_a_missing_collection_is_one_line(tmp_path: Path, capsys) -> None:
    _system(tmp_path, "a100_sxm", [("bfloat16", *SHAPES[0], 1.0)])
    assert amp.main([str(tmp_path), "--collection", "/".join(COLL)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "h100_sxm" in err and len(err.strip().splitlines()) == 1
