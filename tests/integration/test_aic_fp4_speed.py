"""bench/aic_fp4_speed.py: NVFP4 over fp8 GEMM time on one part from aiconfigurator's parquet
files, on tiny files written here with the ratios worked out by hand (fp8 less its quantize rows,
nvfp4 less the estimated input cast). pyarrow is not a project dependency: skipped without it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import aic_fp4_speed as fp4
from test_aic_gpu_speeds import QUANT, SHAPES, _system

import models_zoo
from cost_models.calibration import generation_for_gpu, hbm_bytes_per_s


def test_nvfp4_over_fp8_gemm_alone_by_hand(tmp_path: Path, capsys) -> None:
    fp8_ms = (0.6, 1.1, 2.2)  # less quantize 0.1, 0.1, 0.2 -> GEMM alone 0.5, 1.0, 2.0
    nvfp4_ms = (0.45, 0.9, 1.2)
    rows = [("fp8", *s, t) for s, t in zip(SHAPES, fp8_ms)]
    rows += [("nvfp4", *s, t) for s, t in zip(SHAPES, nvfp4_ms)]
    _system(tmp_path, "b200_sxm", "NVIDIA B200", rows, QUANT)
    gpu = models_zoo.load_gpu("b200")
    bytes_per_s = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))
    cast = [s[0] * s[2] * 2.5625 / bytes_per_s * 1e3 for s in SHAPES]
    want = sorted((t - c) / g for t, c, g in zip(nvfp4_ms, cast, (0.5, 1.0, 2.0)))
    c = fp4.collection(tmp_path, "b200_sxm", "trtllm", "1.3.0rc20")
    got = sorted(
        fp4.time_ratios(
            fp4.nvfp4_rows(tmp_path, "b200_sxm", "trtllm", "1.3.0rc20"),
            c["fp8-gemm"],
            lambda s: s[0] * s[2] * fp4.NVFP4_CAST_BYTES / bytes_per_s * 1e3,
        )
    )
    assert len(got) == 3 and all(abs(a - b) < 1e-12 for a, b in zip(got, want))
    assert fp4.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"cast-adjusted median {want[1]:.3f}" in out
    assert "nvfp4 / fp8 time raw median 0.900" in out  # 0.9 / 1.0, the middle shape
