"""fp8 primary weights (Workload.fp8_params, Megatron-LM --fp8-param-gather), by hand:
Megatron's distributed optimizer keeps fp8 parameters in a uint8 param buffer and all-gathers
1 B per element (param_and_grad_buffer.py), mxfp8 gathers bf16 through the gradient buffer;
Transformer Engine keeps a 1 B transpose on GPUs without non-TN fp8 GEMMs (Hopper) and
row-wise + column-wise data with E8M0 scales under MXFP8 (tensor/utils.py)."""

from __future__ import annotations

import json

import factories as f
import pytest

from cost_models.memory import StageParams, param_gather_bytes, state_bytes, weight_bytes
from cost_models.specs import Layout, Workload
from cost_models.stage import dp_tier_times_s, optimizer_bytes_per_param
from planner.cli import main
from planner.export.launch import _megatron_memory_options
from planner.validate import RunRecord, record_inputs, validate_record

FP8 = Workload(seq_len=8, global_batch_seqs=8, precision="fp8")
FP8_PARAMS = FP8.model_copy(update={"fp8_params": True})
CURRENT = FP8_PARAMS.model_copy(update={"fp8_dynamic_scaling": True})
BLOCKWISE = FP8_PARAMS.model_copy(update={"fp8_recipe": "blockwise"})
MX = Workload(seq_len=8, global_batch_seqs=8, precision="mxfp8", fp8_params=True)


def test_fp8_params_need_an_fp8_precision() -> None:
    with pytest.raises(ValueError, match="fp8_params needs precision fp8, mxfp8 or nvfp4"):
        Workload(seq_len=8, global_batch_seqs=8, fp8_params=True)  # bf16


def test_weight_bytes_by_recipe_and_gpu() -> None:
    assert weight_bytes(FP8, "blackwell") == 2  # fp8 compute alone keeps bf16 weights
    assert weight_bytes(FP8_PARAMS, "blackwell") == 1  # non-TN fp8 GEMMs: no transpose
    assert weight_bytes(FP8_PARAMS, "hopper") == 2  # 1 B data + 1 B transpose
    assert weight_bytes(CURRENT, "blackwell") == 1
    assert weight_bytes(BLOCKWISE, "blackwell") == 2  # column-wise storage everywhere
    assert weight_bytes(MX, "blackwell") == 2 + 2 / 32  # two directions + E8M0 scales


def test_param_gather_bytes() -> None:
    assert (param_gather_bytes(None), param_gather_bytes(FP8)) == (2, 2)
    assert param_gather_bytes(FP8_PARAMS) == param_gather_bytes(BLOCKWISE) == 1
    assert param_gather_bytes(MX) == 2  # bf16 through the gradient buffer


def test_state_bytes_weights_at_fp8() -> None:
    sp = StageParams(dense=1000.0, expert=0.0, largest_layer=100.0, num_layers=4)
    lo = Layout(dp=8, zero_stage=1)
    w, g, o = state_bytes(sp, lo, 4, FP8_PARAMS, weight_bytes=1)
    assert (w, g, o) == (1000, 4 * 1000, 12 * 1000 / 8)  # gradients and optimizer unchanged
    z3 = lo.model_copy(update={"zero_stage": 3})
    # ZeRO-3: fp32 master shard + Megatron-FSDP's 1 B (uint8) model-weight shard + the gathered
    # layers, now at 1 B: all 4 of this small stage (its prefetch gathers whole layers until
    # 5e8 elements, memory.zero3_gathered_elements)
    assert state_bytes(sp, z3, 4, FP8_PARAMS, weight_bytes=1)[0] == (4 + 1) * 1000 / 8 + 4 * 100


def test_optimizer_writes_the_fp8_shard() -> None:
    # 30 B of fp32 Adam with the 2 B bf16 write -> 28 + 1 (delayed: scale from the history)
    assert optimizer_bytes_per_param(FP8) == 30
    assert optimizer_bytes_per_param(FP8_PARAMS) == 29
    assert optimizer_bytes_per_param(CURRENT) == 28 + 4 + 1  # amax pass over the master
    assert optimizer_bytes_per_param(MX) == 28 + 4 + 2 + 2 / 32


def test_fp8_params_halve_the_parameter_all_gather() -> None:
    """400M parameters all-gathered over 8 nodes (factories.cluster: 50 GB/s at 0.9, ring
    latency 7 x 8 us): 1 B instead of 2 B each; the reduce-scatter is unchanged."""
    cluster = f.cluster(64)
    layout = Layout(tp=8, pp=2, dp=8, zero_stage=1, sequence_parallel=True)
    sp = StageParams(dense=400e6, expert=0.0, largest_layer=10e6, num_layers=40)
    span = {"dp_cp": [1, 8]}
    g2, a2 = dp_tier_times_s(cluster, layout, sp, span, stage=1)
    g1, a1 = dp_tier_times_s(cluster, layout, sp, span, stage=1, gather_bytes=1)
    assert a2[1] == pytest.approx(7 / 8 * 400e6 * 2 / (50e9 * 0.9) + 7 * 8e-6)
    assert a1[1] == pytest.approx(7 / 8 * 400e6 * 1 / (50e9 * 0.9) + 7 * 8e-6)
    assert g1 == g2


def test_megatron_export_states_fp8_param_gather() -> None:
    assert _megatron_memory_options(FP8_PARAMS, Layout(dp=8, zero_stage=1)) == [
        "--fp8-param-gather"
    ]
    with pytest.raises(Exception, match="distributed optimizer"):
        _megatron_memory_options(FP8_PARAMS, Layout(dp=8, zero_stage=0))


def _record(settings: dict, precision: str = "fp8") -> dict:
    return f.tiny_record(settings, layout={"precision": precision})


def test_records_state_fp8_params() -> None:
    _, _, w, _ = record_inputs(RunRecord.model_validate(_record({})).model_dump())
    assert not w.fp8_params
    rec = RunRecord.model_validate(_record({"fp8_params": True})).model_dump()
    assert record_inputs(rec)[2].fp8_params
    row = validate_record(_record({"fp8_params": True}, precision="bf16"))
    assert row.estimate is None and "fp8_params needs precision fp8, mxfp8 or nvfp4" in row.error


def test_estimate_fp8_params_flag_on_blackwell(capsys) -> None:
    """`estimate --fp8-params` on GB200 (no transpose): every stage's weights halve, its
    gradients and optimizer state stay; bf16 precision is refused with one line, exit 2."""
    argv = ["estimate", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--gpus", "64"]
    argv += ["--global-batch", "128", "--seq-len", "8192", "--tp", "4", "--pp", "4", "--dp", "4"]
    stages = []
    for extra in ([], ["--fp8-params"]):
        assert main([*argv, "--precision", "fp8", *extra, "--json"]) == 0
        stages.append(json.loads(capsys.readouterr().out)["stage_memory_gib"])
    assert len(stages[0]) == 4
    for bf16, fp8 in zip(*stages, strict=True):
        assert fp8["weights_gib"] == pytest.approx(bf16["weights_gib"] / 2)
        assert fp8["gradients_gib"] == bf16["gradients_gib"]
        assert fp8["optimizer_gib"] == bf16["optimizer_gib"]
    assert main([*argv, "--fp8-params"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fp8_params needs precision fp8, mxfp8 or nvfp4" in err[0]


def test_fp8_params_rule_out_zero0() -> None:
    from cost_models.rules import layout_violations

    model, cluster = f.dense_model(), f.cluster(8)
    lo = Layout(dp=8, zero_stage=0)
    assert "fp8_params needs a ZeRO stage >= 1" in " ".join(
        layout_violations(model, cluster, FP8_PARAMS, lo)
    )
    assert not any("fp8_params" in v for v in layout_violations(model, cluster, FP8, lo))


FP4_PARAMS = Workload(seq_len=8, global_batch_seqs=8, precision="nvfp4", fp8_params=True)


def test_nvfp4_primary_weights_by_hand() -> None:
    """Megatron --fp4-param-gather (Megatron-Bridge's NVFP4 recipe): 0.5 B row-wise data in the
    param buffer, gathered as such; resident with its E4M3 scales per 16 and the column-wise
    copy built after the gather; the optimizer reads the master for the amax, writes the
    row-wise data and scales."""
    assert weight_bytes(FP4_PARAMS, "blackwell") == 2 * (0.5 + 1 / 16)
    assert param_gather_bytes(FP4_PARAMS) == 0.5
    assert optimizer_bytes_per_param(FP4_PARAMS) == 28 + 4 + 0.5 + 1 / 16
    assert _megatron_memory_options(FP4_PARAMS, Layout(dp=8, zero_stage=1)) == [
        "--fp4-param-gather"
    ]
