"""A part's measured Maximum Achievable Matmul FLOPS holds its generation's GEMM ceilings
(cost_models.calibration.generation_for_gpu; docs/cost_model.md "Measured matmul ceiling")."""

from __future__ import annotations

import models_zoo
from cost_models.calibration import CALIBRATION, calibration_for_cluster, generation_for_gpu
from cost_models.compute import Gemm, gemm_time_s
from models_zoo.provenance import gpu_constants
from tests.factories import H100, cluster

# A Blackwell-generation part built by hand: 2,000 TFLOP/s bf16 / 4,000 fp8 datasheet peaks.
PART = H100.model_copy(
    update={"generation": "blackwell", "peak_bf16_tflops": 2000.0, "peak_fp8_tflops": 4000.0}
)


def test_mamf_below_the_generation_ceiling_binds():
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0, "mamf_fp8_tflops": 3000.0})
    cal = generation_for_gpu(part)
    assert cal.gemm_efficiency_bf16 == 1400.0 / 2000.0  # 0.70 < blackwell 0.77
    assert cal.gemm_efficiency_fp8 == CALIBRATION["blackwell"].gemm_efficiency_fp8  # 0.75 > 0.59


def test_no_measurement_keeps_the_generation_values():
    assert generation_for_gpu(PART) == CALIBRATION["blackwell"]


def test_gemm_time_uses_the_capped_ceiling():
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0})
    g = Gemm(m=4096, n=4096, k=4096)
    shape = (4096 / (4096 + 325.0)) ** 3
    expected_s = 2 * 4096**3 / (2000.0e12 * 0.70 * shape)
    got_s = gemm_time_s([g], part, generation_for_gpu(part), fp8=False)
    assert abs(got_s - expected_s) / expected_s < 1e-12


def test_a_calibrated_cluster_keeps_its_own_fit():
    part = PART.model_copy(update={"mamf_bf16_tflops": 1400.0})
    base = cluster().model_copy(update={"gpu": part})
    assert calibration_for_cluster(base).gemm_efficiency_bf16 == 0.70
    calibrated = base.model_validate(
        {
            **base.model_dump(),
            "calibration": {"values": {"gemm_efficiency_bf16": 0.74}},
        }
    )
    assert calibration_for_cluster(calibrated).gemm_efficiency_bf16 == 0.74


def test_gb200_preset_is_held_to_its_measured_matmul():
    gb200 = models_zoo.load_gpu("gb200")
    cal = generation_for_gpu(gb200)
    assert cal.gemm_efficiency_bf16 == gb200.mamf_bf16_tflops / gb200.peak_bf16_tflops < 0.77
    rows = {r["constant"]: r for r in gpu_constants(gb200)}
    assert rows["mamf_bf16_tflops"]["basis"] == "measured"
    assert "ml-engineering" in rows["mamf_bf16_tflops"]["why"]
    assert rows["gemm_efficiency_bf16"]["value"] == cal.gemm_efficiency_bf16
    assert "mamf_bf16_tflops" in rows["gemm_efficiency_bf16"]["why"]
