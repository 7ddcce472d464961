"""A part's measured streaming-kernel HBM fraction (GpuSpec hbm_streaming_efficiency) replaces its
generation's hbm_efficiency in every memory-bound term (cost_models.calibration.generation_for_gpu,
hbm_bytes_per_s; docs/calibration.md "Streaming kernels per part": measured on the Blackwell parts,
not switched on in their presets)."""

from __future__ import annotations

import json

import pytest

import models_zoo
from cost_models.calibration import (
    CALIBRATION,
    calibration_for_cluster,
    generation_for_gpu,
    hbm_bytes_per_s,
)
from cost_models.compute import layer_time
from cost_models.errors import InvalidInput
from cost_models.specs import ClusterCalibration, GpuSpec, Layout
from models_zoo.inputs import validated
from models_zoo.provenance import gpu_constants
from planner.cli import main
from planner.report.text import streaming_text
from tests.factories import workload as make_workload

MEASURED = {"value": 0.5, "source": "hand-made test input"}


def _b200(**field) -> GpuSpec:
    data = {**models_zoo.load_gpu("b200").model_dump(), "hbm_streaming_efficiency": None}
    if field:
        data["hbm_streaming_efficiency"] = {**MEASURED, **field}
    return GpuSpec.model_validate(data)


def test_bytes_per_s_are_the_datasheet_times_the_measured_fraction():
    # 8,000 GB/s x 0.5 = 4e12 B/s; without the field the generation's 0.85: 6.8e12 B/s
    part, bare = _b200(value=0.5), _b200()
    assert hbm_bytes_per_s(part, generation_for_gpu(part)) == pytest.approx(4e12, rel=1e-12)
    assert hbm_bytes_per_s(bare, generation_for_gpu(bare)) == pytest.approx(6.8e12, rel=1e-12)
    gemm = [generation_for_gpu(g).gemm_efficiency_bf16 for g in (part, bare)]
    assert gemm[0] == gemm[1]


def test_memory_bound_time_scales_by_the_ratio_and_nothing_else():
    # every elementwise byte of a layer moves at 0.5 instead of 0.85 of the datasheet: its
    # elementwise seconds grow by 0.85 / 0.5 = 1.7, the GEMMs and attention do not move
    model = models_zoo.load_model("llama3-8b")
    workload = make_workload(seq_len=8192, global_batch=64)
    layout = Layout(tp=1, pp=1, dp=8)
    times = []
    for gpu in (_b200(), _b200(value=0.5)):
        cal = generation_for_gpu(gpu)
        times.append(layer_time(model, gpu, cal, workload, layout, is_moe=False))
    bare, part = times
    assert part.elementwise_s == pytest.approx(bare.elementwise_s * 0.85 / 0.5, rel=1e-12)
    assert (part.gemm_s, part.attention_s) == (bare.gemm_s, bare.attention_s)


def _b200_cluster(value: float | None = 0.5):
    cluster = models_zoo.load_cluster("dgx-b200")
    gpu = _b200(value=value) if value is not None else _b200()
    return cluster.model_copy(update={"gpu": gpu})


def test_a_calibrated_cluster_override_wins():
    cluster = _b200_cluster()
    assert calibration_for_cluster(cluster).hbm_efficiency == 0.5  # the part's measurement
    values = ClusterCalibration.model_validate({"values": {"hbm_efficiency": 0.7}})
    calibrated = cluster.model_copy(update={"calibration": values})
    assert calibration_for_cluster(calibrated).hbm_efficiency == 0.7
    assert "calibrated hbm_efficiency" in streaming_text(calibrated)


@pytest.mark.parametrize(
    ("field", "rule"),
    [
        ({"value": 0.0, "source": "x"}, "value: Input should be greater than or equal to 0.1"),
        ({"value": 1.2, "source": "x"}, "value: Input should be less than or equal to 1"),
        ({"value": 0.5}, "source: Field required"),
        ({"value": 0.5, "source": ""}, "source: String should have at least 1 character"),
        (
            {"value": 0.5, "source": "x", "sorce": "x"},
            "sorce: unknown field (check the spelling)",
        ),
    ],
)
def test_bad_field_is_one_line_naming_it(field, rule):
    data = {**models_zoo.load_gpu("b200").model_dump(), "hbm_streaming_efficiency": field}
    with pytest.raises(InvalidInput) as err:
        validated(GpuSpec, data, "my-gpu.json")
    assert str(err.value) == f"my-gpu.json: hbm_streaming_efficiency.{rule}"


def test_cli_cluster_file_with_a_bad_value_exits_2_with_one_line(tmp_path, capsys):
    cluster = models_zoo.load_cluster("dgx-b200").model_dump(mode="json")
    cluster["gpu"]["hbm_streaming_efficiency"] = {"value": 1.5, "source": "my bench"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster))
    argv = ["estimate", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8",
            "--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "gpu.hbm_streaming_efficiency.value" in err and "less than or equal to 1" in err


def test_a_cluster_file_with_the_field_prices_it_and_says_so(tmp_path, capsys):
    cluster = models_zoo.load_cluster("dgx-b200").model_dump(mode="json")
    cluster["gpu"]["hbm_streaming_efficiency"] = {"value": 0.541, "source": "my bench"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster))
    loaded = models_zoo.load_cluster(str(path))
    assert calibration_for_cluster(loaded).hbm_efficiency == 0.541
    row = {r["constant"]: r for r in gpu_constants(loaded.gpu)}["hbm_efficiency"]
    assert row == {
        "constant": "hbm_efficiency",
        "value": 0.541,
        "basis": "measured",
        "why": "this part's hbm_streaming_efficiency (replaces the blackwell value 0.85): my bench",
    }
    argv = ["estimate", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8",
            "--global-batch", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8",
            "--explain"]  # fmt: skip
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "4,328 GB/s = 0.541 of the 8,000 GB/s datasheet (measured on b200" in out


@pytest.mark.parametrize("gpu_id", models_zoo.list_presets("gpus"))
def test_no_preset_is_switched_on_and_each_keeps_its_generation_value(gpu_id):
    # the measured Blackwell values (bench/aic_memory_bound.py) are not shipped: docs/calibration.md
    # "Streaming kernels per part" says why (held-out MoE rows turn 5-8 points pessimistic)
    gpu = models_zoo.load_gpu(gpu_id)
    assert gpu.hbm_streaming_efficiency is None
    assert generation_for_gpu(gpu).hbm_efficiency == CALIBRATION[gpu.generation].hbm_efficiency
    row = {r["constant"]: r for r in gpu_constants(gpu)}["hbm_efficiency"]
    assert row["basis"] == "assumption"


def test_explain_names_the_bandwidth_and_where_it_comes_from():
    b200 = streaming_text(_b200_cluster(0.541))
    # 8,000 x 0.541 = 4,328 GB/s
    assert b200 == (
        "memory-bound ops outside the tables: 4,328 GB/s = 0.541 of the 8,000 GB/s datasheet "
        "(measured on b200: hbm_streaming_efficiency (presets gpus --constants))"
    )
    assert streaming_text(models_zoo.load_cluster("dgx-b200")).endswith(
        "6,800 GB/s = 0.850 of the 8,000 GB/s datasheet (the blackwell generation's "
        "hbm_efficiency, an assumption)"
    )
    h100 = streaming_text(models_zoo.load_cluster("dgx-h100"))
    assert h100.endswith("2,848 GB/s = 0.850 of the 3,350 GB/s datasheet (the hopper "
                         "generation's hbm_efficiency, an assumption)")  # fmt: skip
