"""bench/aic_fp4_speed.py: NVFP4 over fp8 GEMM time on one part from aiconfigurator's parquet
files, on tiny files written here with the ratios worked out by hand (fp8 less its quantize rows,
nvfp4 less the estimated input cast). pyarrow is not a project dependency: skipped without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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


def test_te_b300_rate_carried_by_the_part_to_part_quotient(tmp_path: Path, capsys) -> None:
    # the TE profile's 12 GEMMs as (m, n, k), 15,872 tokens snapped to the held 16,384: eight
    # distinct shapes (the down projection's fprop is its wgrad's shape once snapped); each part
    # holds exactly those, fp8 (with quantize rows) and nvfp4
    shapes = sorted({fp4.snap(s, {(16384, n, k) for n in (4096, 12288, 16384)
                                  for k in (4096, 12288, 16384)}
                               | {(m, n, 16384) for m in (4096, 16384) for n in (4096, 12288, 16384)})
                     for s in fp4.te_shapes()})  # fmt: skip
    assert len(fp4.te_shapes()) == 12 and len(shapes) == 8
    quant = {(m, k): (0.01, 0.01) for m, _, k in shapes}
    times = {"b200_sxm": (2.0, 1.6), "b300_sxm": (2.0, 1.25)}  # fp8 as collected, nvfp4 per shape
    for system, (t8, t4) in times.items():
        rows = [("fp8", *s, t8) for s in shapes] + [("nvfp4", *s, t4) for s in shapes]
        device = "NVIDIA B200" if system == "b200_sxm" else "NVIDIA B300 SXM6 AC"
        _system(tmp_path, system, device, rows, quant)
    # by hand: fp8 GEMM alone 2.0 - 0.02 per shape; nvfp4 less the cast m k 2.5625 B / HBM rate
    speed = {}
    shapes12 = [fp4.snap(s, set(shapes)) for s in fp4.te_shapes()]
    for system, (t8, t4) in times.items():
        gpu = models_zoo.load_gpu(fp4.BLACKWELL[system])
        rate = hbm_bytes_per_s(gpu, generation_for_gpu(gpu))
        fp8_ms = sum(t8 - 0.02 for _ in shapes12)
        fp4_ms = sum(t4 - s[0] * s[2] * 2.5625 / rate * 1e3 for s in shapes12)
        speed[system] = fp8_ms / fp4_ms
    te = 6.812 / 3.764  # TE's B300 profile: per-tensor fp8 / NVFP4 per layer
    got = fp4.carried(tmp_path, "trtllm", "1.3.0rc20")
    assert got["b300_sxm"][1] == pytest.approx(te, rel=1e-12)  # the measured part keeps its own
    assert got["b200_sxm"][0] == pytest.approx(speed["b200_sxm"], rel=1e-12)
    assert got["b200_sxm"][1] == pytest.approx(
        te * speed["b200_sxm"] / speed["b300_sxm"], rel=1e-12
    )
    assert got["b200_sxm"][1] < te  # NVFP4 gains less over fp8 on this B200 than on the B300
    # without the B300 in the collection nothing is carried
    assert fp4.carried(tmp_path, "trtllm", "1.3.0rc10") == {}
    assert fp4.main([str(tmp_path)]) == 0
    assert (
        f"b200_sxm  fp8 / nvfp4 {speed['b200_sxm']:.3f} -> over_fp8 {got['b200_sxm'][1]:.3f}"
        in (capsys.readouterr().out)
    )
