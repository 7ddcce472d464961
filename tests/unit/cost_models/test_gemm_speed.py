"""A part's measured GEMM speed relative to its generation's flagship (GpuSpec
gemm_speed_vs_flagship) scales the generation's GEMM efficiencies (cost_models.calibration.
generation_for_gpu; docs/calibration.md "Relative GEMM speed between parts")."""

from __future__ import annotations

import json

import pytest

import models_zoo
from cost_models.calibration import CALIBRATION, generation_for_gpu
from cost_models.compute import Gemm, gemm_time_s
from cost_models.errors import InvalidInput
from cost_models.specs import GpuSpec
from models_zoo.inputs import validated
from models_zoo.provenance import gpu_constants
from planner.cli import main
from tests.factories import H100

BLACKWELL = CALIBRATION["blackwell"]
# A Blackwell part built by hand: 2,500 / 5,000 TFLOP/s datasheet peaks (B200: 2,250 / 4,500).
PART = H100.model_copy(
    update={"generation": "blackwell", "peak_bf16_tflops": 2500.0, "peak_fp8_tflops": 5000.0}
)
SPEED = {"bf16": 1.2, "fp8": 1.1, "source": "hand-made test input"}


def _part(**speed) -> GpuSpec:
    data = {**PART.model_dump(), "gemm_speed_vs_flagship": {**SPEED, **speed}}
    return GpuSpec.model_validate(data)


def test_efficiency_is_the_flagships_times_the_measured_speed_on_the_parts_peak():
    # bf16: B200 0.77 x 2,250 = 1,732.5 TFLOP/s; x 1.2 = 2,079 TFLOP/s = 0.8316 of 2,500.
    # fp8: 0.59 x 4,500 = 2,655 TFLOP/s; x 1.1 = 2,920.5 TFLOP/s = 0.5841 of 5,000.
    cal = generation_for_gpu(_part())
    assert cal.gemm_efficiency_bf16 == pytest.approx(0.8316, rel=1e-12)
    assert cal.gemm_efficiency_fp8 == pytest.approx(0.5841, rel=1e-12)
    assert cal.attention_efficiency == BLACKWELL.attention_efficiency  # GEMMs only


def test_it_replaces_the_mamf_ratio_and_ceiling():
    # A MAMF of 1,800 (0.72 of peak) would give 0.77 x 0.72 / 0.7756 = 0.715 and hold it at
    # 0.72; the measured speed gives 0.8316 regardless.
    part = _part().model_copy(update={"mamf_bf16_tflops": 1800.0})
    assert generation_for_gpu(part).gemm_efficiency_bf16 == pytest.approx(0.8316, rel=1e-12)


def test_no_fp8_speed_keeps_the_fp8_mamf_ratio():
    # fp8 3,600 / 5,000 = 0.72 against B200's 3,432.5 / 4,500: 0.59 x 0.72 / 0.76278 = 0.5569.
    part = _part(fp8=None).model_copy(update={"mamf_fp8_tflops": 3600.0})
    cal = generation_for_gpu(part)
    assert cal.gemm_efficiency_fp8 == pytest.approx(0.59 * 0.72 / (3432.5 / 4500), rel=1e-12)
    assert cal.gemm_efficiency_bf16 == pytest.approx(0.8316, rel=1e-12)


def test_speed_one_on_the_flagships_peaks_is_the_flagship():
    part = _part(bf16=1.0, fp8=1.0).model_copy(
        update={"peak_bf16_tflops": 2250.0, "peak_fp8_tflops": 4500.0}
    )
    assert generation_for_gpu(part) is BLACKWELL


def test_gemm_time_follows_the_speed():
    g = Gemm(m=8192, n=8192, k=8192)
    fast, flagship = _part(), models_zoo.load_gpu("b200")
    t_part = gemm_time_s([g], fast, generation_for_gpu(fast), fp8=False)
    t_flag = gemm_time_s([g], flagship, generation_for_gpu(flagship), fp8=False)
    assert t_flag / t_part == pytest.approx(1.2, rel=1e-12)


def test_above_the_datasheet_peak_is_refused():
    # 0.77 x 1.4 x 2,250 / 2,000 = 1.21 of the peak
    with pytest.raises(
        InvalidInput, match=r"gemm_speed_vs_flagship.bf16 1.4 puts its GEMMs at 1.21 of"
    ):
        generation_for_gpu(_part(bf16=1.4).model_copy(update={"peak_bf16_tflops": 2000.0}))


def test_a_generation_without_a_flagship_is_refused():
    part = _part().model_copy(update={"generation": "cdna3"})
    with pytest.raises(InvalidInput, match="has no flagship part"):
        generation_for_gpu(part)


@pytest.mark.parametrize(
    ("speed", "rule"),
    [
        (
            {"bf16": 0.1, "source": "x"},
            "gemm_speed_vs_flagship.bf16: Input should be greater than or equal to 0.25",
        ),
        (
            {"bf16": 1.0, "fp8": 9.0, "source": "x"},
            "gemm_speed_vs_flagship.fp8: Input should be less than or equal to 4",
        ),
        ({"bf16": 1.0}, "gemm_speed_vs_flagship.source: Field required"),
        (
            {"bf16": 1.0, "source": ""},
            "gemm_speed_vs_flagship.source: String should have at least 1 character",
        ),
        (
            {"bf16": 1.0, "source": "x", "sorce": "x"},
            "gemm_speed_vs_flagship.sorce: unknown field (check the spelling)",
        ),
    ],
)
def test_bad_field_is_one_line_naming_it(speed, rule):
    with pytest.raises(InvalidInput) as err:
        validated(GpuSpec, {**PART.model_dump(), "gemm_speed_vs_flagship": speed}, "my-gpu.json")
    assert str(err.value) == f"my-gpu.json: {rule}"


def test_fp8_speed_without_fp8_units_is_refused():
    data = {**PART.model_dump(), "peak_fp8_tflops": None, "gemm_speed_vs_flagship": SPEED}
    with pytest.raises(InvalidInput, match="fp8 is given but peak_fp8_tflops is null"):
        validated(GpuSpec, data, "my-gpu.json")


def test_cli_cluster_file_with_a_bad_speed_exits_2_with_one_line(tmp_path, capsys):
    cluster = models_zoo.load_cluster("dgx-b200").model_dump(mode="json")
    gpu = models_zoo.load_gpu("b300").model_dump()
    gpu["gemm_speed_vs_flagship"]["bf16"] = -1
    cluster["gpu"] = gpu
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster))
    argv = ["estimate", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8",
            "--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "gpu.gemm_speed_vs_flagship.bf16" in err and "greater than or equal to 0.25" in err


@pytest.mark.parametrize(
    ("gpu_id", "bf16", "fp8"),
    [("b300", 1.070, 1.062), ("gb200", 1.071, 1.005), ("gb300", 1.222, 1.161)],
)
def test_blackwell_presets_carry_the_measured_speed_and_its_source(gpu_id, bf16, fp8):
    gpu = models_zoo.load_gpu(gpu_id)
    speed = gpu.gemm_speed_vs_flagship
    assert (speed.bf16, speed.fp8) == (bf16, fp8)
    for words in ("ai-dynamo/aiconfigurator", "095f58a51c4c", "trtllm/1.3.0rc20", "NVIDIA B200",
                  "m 2,048-32,768", "median", "bench/aic_gpu_speeds.py"):  # fmt: skip
        assert words in speed.source
    cal = generation_for_gpu(gpu)
    assert cal.gemm_efficiency_bf16 == pytest.approx(
        0.77 * bf16 * 2250 / gpu.peak_bf16_tflops, rel=1e-12
    )
    assert cal.gemm_efficiency_fp8 == pytest.approx(
        0.59 * fp8 * 4500 / gpu.peak_fp8_tflops, rel=1e-12
    )
    rows = {r["constant"]: r for r in gpu_constants(gpu)}
    assert rows["gemm_speed_vs_flagship.bf16"] == {
        "constant": "gemm_speed_vs_flagship.bf16",
        "value": bf16,
        "basis": "measured",
        "why": speed.source,
    }
    assert "gemm_speed_vs_flagship.bf16" in rows["gemm_efficiency_bf16"]["why"]
    assert rows["gemm_efficiency_bf16"]["value"] == cal.gemm_efficiency_bf16


@pytest.mark.parametrize(
    ("generation", "flagship"), [("hopper", "h100-sxm-80gb"), ("blackwell", "b200")]
)
def test_flagship_peaks_are_the_flagship_presets(generation, flagship):
    gpu = models_zoo.load_gpu(flagship)
    cal = CALIBRATION[generation]
    assert (cal.flagship_peak_bf16_tflops, cal.flagship_peak_fp8_tflops) == (
        gpu.peak_bf16_tflops,
        gpu.peak_fp8_tflops,
    )
    assert gpu.gemm_speed_vs_flagship is None  # 1 by definition: it keeps the generation values
    assert generation_for_gpu(gpu) is cal
