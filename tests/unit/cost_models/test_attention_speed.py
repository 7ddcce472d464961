"""A part's measured attention-forward speed relative to its generation's flagship (GpuSpec
attention_speed_vs_flagship) prices its attention forward; the backward runs at the part's
measured bf16 GEMM speed (cost_models.calibration.ATTENTION_BACKWARD_RULE; docs/calibration.md
"Relative attention speed between parts")."""

from __future__ import annotations

import dataclasses
import json

import pytest

import models_zoo
from cost_models.calibration import (
    CALIBRATION,
    attention_speeds,
    calibration_for_cluster,
    generation_for_gpu,
)
from cost_models.compute import attention_times, layer_time
from cost_models.errors import InvalidInput
from cost_models.specs import GpuSpec
from models_zoo.inputs import validated
from models_zoo.provenance import gpu_constants
from planner import api
from planner.cli import main
from tests.factories import H100, dense_model, layout, workload

BLACKWELL = CALIBRATION["blackwell"]
# A Blackwell part built by hand: 2,500 TFLOP/s bf16 peak (B200: 2,250), bf16 GEMMs 1.2x B200's,
# attention forward 1.3x (MLA 1.1x).
PART = H100.model_copy(
    update={"generation": "blackwell", "peak_bf16_tflops": 2500.0, "peak_fp8_tflops": 5000.0}
)
GEMM = {"bf16": 1.2, "fp8": 1.1, "source": "hand-made test input"}
ATTN = {"forward": 1.3, "forward_mla": 1.1, "source": "hand-made test input"}


def _part(**attn) -> GpuSpec:
    data = {**PART.model_dump(), "gemm_speed_vs_flagship": GEMM,
            "attention_speed_vs_flagship": {**ATTN, **attn}}  # fmt: skip
    return GpuSpec.model_validate(data)


def test_efficiencies_by_hand():
    # B200: 0.57 x 2,250 = 1,282.5 TFLOP/s of attention. Forward x 1.3 = 1,667.25 = 0.6669 of
    # 2,500; MLA forward x 1.1 = 0.5643; backward at the bf16 GEMM speed x 1.2 = 0.6156.
    cal = generation_for_gpu(_part())
    assert cal.attention_efficiency == pytest.approx(0.6669, rel=1e-12)
    assert cal.attention_mla_efficiency == pytest.approx(0.5643, rel=1e-12)
    assert cal.attention_backward_efficiency == pytest.approx(0.6156, rel=1e-12)
    assert cal.gemm_efficiency_bf16 == pytest.approx(0.8316, rel=1e-12)  # GEMMs as before
    assert attention_speeds(_part()) == pytest.approx((1.3, 1.1, 1.2), rel=1e-12)


def test_null_mla_speed_takes_the_forward():
    cal = generation_for_gpu(_part(forward_mla=None))
    assert cal.attention_mla_efficiency == cal.attention_efficiency


def _times(gpu: GpuSpec, model=None, **wl):
    model = model or dense_model()
    lo, w = layout(tp=2), workload(seq_len=8192, **wl)
    return attention_times(model, gpu, generation_for_gpu(gpu), w, lo, None)


def test_attention_time_follows_the_speeds():
    flagship = models_zoo.load_gpu("b200")
    fwd_f, bwd_f, _ = _times(flagship)
    assert bwd_f is None  # the flagship: the model's 2.5x forward
    fwd, bwd, _ = _times(_part())
    assert fwd_f / fwd == pytest.approx(1.3, rel=1e-12)
    assert 2.5 * fwd_f / bwd == pytest.approx(1.2, rel=1e-12)


def test_the_layer_backward_takes_the_backward_speed():
    part, model, lo, w = _part(), dense_model(), layout(tp=2), workload(seq_len=8192)
    lt = layer_time(model, part, generation_for_gpu(part), w, lo, is_moe=False)
    fwd, bwd, _ = attention_times(model, part, generation_for_gpu(part), w, lo, None)
    assert (lt.attention_s, lt.attention_backward_s) == (fwd, bwd)
    # backward_s adds the attention backward in place of 2.5x the forward
    plain = dataclasses.replace(lt, attention_backward_s=None)
    assert lt.backward_s - plain.backward_s == pytest.approx(bwd - 2.5 * fwd, rel=1e-12)
    assert bwd > 2.5 * fwd  # the backward's speed (1.2) is below the forward's (1.3)


def test_an_mla_model_takes_the_mla_forward_speed():
    flagship = models_zoo.load_gpu("b200")
    model = models_zoo.load_model("deepseek-v3")
    fwd_f, _, _ = _times(flagship, model)
    fwd, bwd, _ = _times(_part(), model)
    assert fwd_f / fwd == pytest.approx(1.1, rel=1e-12)
    assert 2.5 * fwd_f / bwd == pytest.approx(1.2, rel=1e-12)


def test_flash_attention_2_scales_both_passes():
    fwd, bwd, _ = _times(_part())
    fwd2, bwd2, _ = _times(_part(), attention_kernel="fa2")
    assert (fwd / fwd2, bwd / bwd2) == pytest.approx((0.6, 0.6), rel=1e-12)


def test_above_the_datasheet_peak_is_refused():
    # 0.57 x 2.5 x 2,250 / 2,500 = 1.28 of the peak
    with pytest.raises(
        InvalidInput, match=r"attention_speed_vs_flagship.forward 2.5 puts its attention at 1.28 of"
    ):
        generation_for_gpu(_part(forward=2.5))


@pytest.mark.parametrize(
    ("speed", "rule"),
    [
        ({"forward": 0, "source": "x"},
         "attention_speed_vs_flagship.forward: Input should be greater than or equal to 0.25"),
        ({"forward": 4.5, "source": "x"},
         "attention_speed_vs_flagship.forward: Input should be less than or equal to 4"),
        ({"forward": 1.2, "forward_mla": -1, "source": "x"},
         "attention_speed_vs_flagship.forward_mla: Input should be greater than or equal to 0.25"),
        ({"forward": 1.2}, "attention_speed_vs_flagship.source: Field required"),
        ({"forward": 1.2, "source": ""},
         "attention_speed_vs_flagship.source: String should have at least 1 character"),
    ],
)  # fmt: skip
def test_bad_field_is_one_line_naming_it(speed, rule):
    data = {**PART.model_dump(), "gemm_speed_vs_flagship": GEMM,
            "attention_speed_vs_flagship": speed}  # fmt: skip
    with pytest.raises(InvalidInput) as err:
        validated(GpuSpec, data, "my-gpu.json")
    assert str(err.value) == f"my-gpu.json: {rule}"


def test_attention_speed_needs_the_gemm_speed():
    data = {**PART.model_dump(), "attention_speed_vs_flagship": ATTN}
    with pytest.raises(InvalidInput, match="gemm_speed_vs_flagship is null"):
        validated(GpuSpec, data, "my-gpu.json")


ARGV = ["estimate", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16",
        "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]  # fmt: skip


def test_cli_cluster_file_with_a_bad_speed_exits_2_with_one_line(tmp_path, capsys):
    cluster = models_zoo.load_cluster("dgx-b300").model_dump(mode="json")
    cluster["gpu"]["attention_speed_vs_flagship"]["forward"] = 5
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster))
    assert main([*ARGV, "--cluster", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "gpu.attention_speed_vs_flagship.forward" in err and "less than or equal to 4" in err


@pytest.mark.parametrize(
    ("gpu_id", "forward", "mla", "backward"),
    [("b300", 1.168, 1.113, 1.070), ("gb200", 1.076, 1.035, 1.071),
     ("gb300", 1.280, 1.169, 1.222)],
)  # fmt: skip
def test_blackwell_presets_carry_the_measured_speed_and_its_source(gpu_id, forward, mla, backward):
    gpu = models_zoo.load_gpu(gpu_id)
    speed = gpu.attention_speed_vs_flagship
    assert (speed.forward, speed.forward_mla) == (forward, mla)
    for words in ("ai-dynamo/aiconfigurator", "095f58a51c4c", "attention/trtllm/1.3.0rc20",
                  "mla/trtllm/1.3.0rc20", "NVIDIA B200", "sequence 2,048", "median", "P10",
                  "control H200 / H100", "bench/aic_attention_speeds.py",
                  "ATTENTION_BACKWARD_RULE"):  # fmt: skip
        assert words in speed.source
    assert attention_speeds(gpu) == pytest.approx((forward, mla, backward), rel=1e-12)
    rows = {r["constant"]: r for r in gpu_constants(gpu)}
    assert rows["attention_speed_vs_flagship.forward"] == {
        "constant": "attention_speed_vs_flagship.forward",
        "value": forward,
        "basis": "measured",
        "why": speed.source,
    }
    assert rows["attention_speed_vs_flagship.forward_mla"]["basis"] == "measured"
    back = rows["attention_backward_speed_vs_flagship"]
    assert (back["value"], back["basis"]) == (pytest.approx(backward), "assumption")
    assert "arXiv 2603.05451" in back["why"] and "Blackwell Ultra" in back["why"]
    assert "attention_speed_vs_flagship.forward" in rows["attention_efficiency"]["why"]


def test_the_flagship_and_hopper_keep_the_peak_ratio():
    for gpu_id in ("b200", "h100-sxm-80gb", "h200-sxm-141gb"):
        gpu = models_zoo.load_gpu(gpu_id)
        assert gpu.attention_speed_vs_flagship is None
        cal = generation_for_gpu(gpu)
        assert cal.attention_backward_efficiency is None and cal.attention_mla_efficiency is None


def _estimate(cluster):
    model = models_zoo.load_model("llama3-8b")
    return api.estimate(model, cluster, layout(tp=1, pp=1, dp=8), workload(global_batch=16))


def test_estimate_says_where_the_speed_came_from():
    e = _estimate(models_zoo.load_cluster("dgx-b300", 8))
    a = e.attention_speed
    assert (a["forward"], a["backward"]) == pytest.approx((1.168, 1.070))
    assert (a["forward_from"], a["forward_basis"]) == ("attention_speed_vs_flagship.forward",
                                                       "measured")  # fmt: skip
    assert (a["backward_from"], a["backward_basis"]) == ("gemm_speed_vs_flagship.bf16",
                                                         "assumption")  # fmt: skip
    assert _estimate(models_zoo.load_cluster("dgx-b200", 8)).attention_speed is None


def test_cli_explain_and_json_carry_it(capsys):
    assert main([*ARGV, "--cluster", "dgx-b300", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attention_speed"]["forward_basis"] == "measured"
    assert main([*ARGV, "--cluster", "dgx-b300", "--explain"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "attention on b300: forward 1.168x the generation flagship's speed (measured:" in text


def test_a_calibrated_attention_efficiency_covers_both_passes():
    data = models_zoo.load_cluster("dgx-b300", 8).model_dump(mode="json")
    data["calibration"] = {"values": {"attention_efficiency": 0.5}}
    cluster = type(models_zoo.load_cluster("dgx-b300")).model_validate(data)
    cal = calibration_for_cluster(cluster)
    assert cal.attention_efficiency == 0.5
    assert cal.attention_backward_efficiency is None and cal.attention_mla_efficiency is None
    assert _estimate(cluster).attention_speed is None
