"""A part's measured Maximum Achievable Matmul FLOPS scales and holds its generation's GEMM
ceilings (cost_models.calibration.generation_for_gpu; docs/cost_model.md "Measured matmul
ceiling per part")."""

from __future__ import annotations

import pytest

import models_zoo
from cost_models.calibration import CALIBRATION, calibration_for_cluster, generation_for_gpu
from cost_models.compute import Gemm, gemm_time_s
from models_zoo.provenance import gpu_constants
from tests.factories import H100, cluster

BLACKWELL = CALIBRATION["blackwell"]
# A Blackwell-generation part built by hand: 2,000 TFLOP/s bf16 / 4,000 fp8 datasheet peaks.
PART = H100.model_copy(
    update={"generation": "blackwell", "peak_bf16_tflops": 2000.0, "peak_fp8_tflops": 4000.0}
)


def test_a_part_runs_at_its_sustained_clock_relative_to_the_flagship():
    # bf16: 1,400 / 2,000 = 0.70 of peak against B200's 1,745 / 2,250: every GEMM slower by
    # that ratio. fp8: 3,000 / 4,000 = 0.75 against B200's 3,432.5 / 4,500.
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0, "mamf_fp8_tflops": 3000.0})
    cal = generation_for_gpu(part)
    assert cal.gemm_efficiency_bf16 == pytest.approx(0.77 * 0.70 / (1745.0 / 2250), rel=1e-12)
    assert cal.gemm_efficiency_fp8 == pytest.approx(0.59 * 0.75 / (3432.5 / 4500), rel=1e-12)


def test_never_above_the_parts_own_measured_matmul():
    # 0.60 of peak: 0.77 x 0.60 / 0.7756 = 0.596, within the part's own 0.60. A generation
    # without a flagship measurement (cdna3) is only held to the part's MAMF / peak.
    high = BLACKWELL.gemm_efficiency_bf16
    part = PART.model_copy(update={"mamf_bf16_tflops": 2000.0 * 0.60})
    cal = generation_for_gpu(part)
    assert cal.gemm_efficiency_bf16 == pytest.approx(high * 0.60 / (1745.0 / 2250), rel=1e-12)
    assert cal.gemm_efficiency_bf16 <= 0.60
    flagless = PART.model_copy(update={"generation": "cdna3", "mamf_bf16_tflops": 900.0})
    assert generation_for_gpu(flagless).gemm_efficiency_bf16 == 900.0 / 2000.0  # 0.45 < 0.55


def test_no_measurement_keeps_the_generation_values():
    assert generation_for_gpu(PART) is BLACKWELL


@pytest.mark.parametrize(
    ("generation", "flagship"),
    [("ampere", "a100-sxm-80gb"), ("hopper", "h100-sxm-80gb"), ("blackwell", "b200")],
)
def test_flagship_fractions_are_the_flagship_presets(generation, flagship):
    gpu = models_zoo.load_gpu(flagship)
    cal = CALIBRATION[generation]
    assert cal.mamf_bf16_fraction == gpu.mamf_bf16_tflops / gpu.peak_bf16_tflops
    if gpu.mamf_fp8_tflops is not None:
        assert cal.mamf_fp8_fraction == gpu.mamf_fp8_tflops / gpu.peak_fp8_tflops
    assert generation_for_gpu(gpu) is cal  # the flagship itself keeps the generation values


def test_gemm_time_uses_the_parts_ceiling():
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0})
    g = Gemm(m=4096, n=4096, k=4096)
    shape = (4096 / (4096 + 325.0)) ** 3
    eff = 0.77 * 0.70 / (1745.0 / 2250)
    expected_s = 2 * 4096**3 / (2000.0e12 * eff * shape)
    got_s = gemm_time_s([g], part, generation_for_gpu(part), fp8=False)
    assert got_s == pytest.approx(expected_s, rel=1e-12)


def test_a_calibrated_cluster_keeps_its_own_fit():
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0})
    base = cluster().model_copy(update={"gpu": part})
    assert calibration_for_cluster(base).gemm_efficiency_bf16 < BLACKWELL.gemm_efficiency_bf16
    calibrated = base.model_validate(
        {**base.model_dump(), "calibration": {"values": {"gemm_efficiency_bf16": 0.74}}}
    )
    assert calibration_for_cluster(calibrated).gemm_efficiency_bf16 == 0.74


def test_without_a_measured_speed_gb200_runs_at_its_mamf_share_of_b200():
    # The preset carries gemm_speed_vs_flagship, which wins (test_gemm_speed.py); without it
    # the MAMF ratio scales the generation values.
    gb200 = models_zoo.load_gpu("gb200").model_copy(update={"gemm_speed_vs_flagship": None})
    cal = generation_for_gpu(gb200)
    ratio = (gb200.mamf_bf16_tflops / gb200.peak_bf16_tflops) / (1745.0 / 2250)
    assert ratio == pytest.approx(0.9397, abs=1e-4)  # 0.7288 / 0.7756
    assert cal.gemm_efficiency_bf16 == pytest.approx(0.77 * ratio, rel=1e-12)
    rows = {r["constant"]: r for r in gpu_constants(gb200)}
    assert rows["mamf_bf16_tflops"]["basis"] == "measured"
    assert "ml-engineering" in rows["mamf_bf16_tflops"]["why"]
    assert rows["gemm_efficiency_bf16"]["value"] == cal.gemm_efficiency_bf16
    assert "mamf_bf16_tflops" in rows["gemm_efficiency_bf16"]["why"]
