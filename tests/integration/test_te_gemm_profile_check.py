"""bench/te_gemm_profile_check.py: TE's B300 GEMM profile against the cost model. The shipped
NVFP4 rate is the profile's ratio, and the cast bytes are the hand count."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import models_zoo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import te_gemm_profile_check as check


def test_the_shipped_nvfp4_rate_is_the_profiles_ratio():
    fp8 = sum(check.PROFILE["pre-quantized"]["fp8"])
    nvfp4 = sum(check.PROFILE["pre-quantized"]["nvfp4"])
    assert (round(fp8, 3), round(nvfp4, 3)) == (6.812, 3.764)  # the guide's per-layer totals
    assert models_zoo.load_gpu("b300").fp4_gemm_speed.over_fp8 == round(fp8 / nvfp4, 2)
    # the other Blackwell parts carry it from the B300 (bench/aic_fp4_speed.py)
    for part in ("b200", "gb200", "gb300"):
        assert models_zoo.load_gpu(part).fp4_gemm_speed.carried_from == "b300"


def test_model_nvfp4_gemms_run_at_the_measured_ratio_on_b300():
    gpu = models_zoo.load_gpu("b300")
    fp8, nvfp4 = (sum(check.model_gemm_ms(gpu, p)) for p in ("fp8", "nvfp4"))
    assert fp8 / nvfp4 == pytest.approx(1.81, rel=1e-9)


def test_cast_bytes_by_hand():
    # per-tensor current scaling on Blackwell: read bf16 2 B + amax pass 2 B + one fp8 copy 1 B
    # (no transpose: sm100 runs the non-TN layouts) = 5 B per element of the input M x K and the
    # weight N x K of each of the 12 GEMMs
    elements = sum(m * k + n * k for m, k, n in check.FPROP + check.DGRAD + check.WGRAD)
    gpu = models_zoo.load_gpu("b300")
    assert check.cast_bytes(gpu, "fp8") == pytest.approx(5 * elements, rel=1e-12)
    # token-sized operands: fprop inputs 28,672 T, dgrad inputs 36,864 T, wgrad both 65,536 T;
    # weights (fprop and dgrad): 2 x 4,096 x (12,288 + 4,096 + 2 x 16,384)
    assert elements == 15_872 * 131_072 + 2 * 4_096 * 49_152


def test_the_report_prints_both_sections():
    text = "\n".join(check.rows())
    assert "1. GEMMs alone" in text and "2. Casts" in text
    assert "6.812 / 3.764 = 1.810" in text
