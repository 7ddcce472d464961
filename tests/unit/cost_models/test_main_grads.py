"""bf16 main gradients (Workload.main_grads) and the record settings that state a run's memory
recipe (main_grads, recompute_modules), by hand: Megatron-Core keeps the gradient buffer in the
parameters' dtype unless grad_reduce_in_fp32 (param_and_grad_buffer.py group_params_for_buffers),
Megatron-LM promotes it to fp32 under bf16 (arguments.py), NVIDIA's performance recipes turn the
promotion off. Also the interleaved warm-up's extra chunk under ep_overlap (schedules.py
get_pp_rank_microbatches)."""

from __future__ import annotations

import factories as f
import pytest

from cost_models.memory import (
    STEP_CAST_HBM_BYTES,
    StageParams,
    grad_bytes,
    state_bytes,
    step_cast,
)
from cost_models.pipeline import inflight_chunks
from cost_models.specs import Layout, Workload
from cost_models.stage import (
    dp_tier_times_s,
    grad_zero_bytes,
    optimizer_bytes_per_param,
    stage_optimizer_s,
)
from planner.export.launch import _megatron_memory_options
from planner.validate import RunRecord, record_inputs, validate_record

W32 = Workload(seq_len=8, global_batch_seqs=8)
W16 = W32.model_copy(update={"main_grads": "bf16"})


def test_grad_bytes_follow_main_grads() -> None:
    assert (grad_bytes(None), grad_bytes(W32), grad_bytes(W16)) == (4, 4, 2)


def test_bf16_main_grads_state_bytes_by_hand() -> None:
    sp = StageParams(dense=1000.0, expert=6400.0, largest_layer=100.0, num_layers=2)
    lo = Layout(dp=8, ep=4, zero_stage=1)  # dense shards over 8, experts over 8/4 = 2
    sharded = 1000 / 8 + 6400 / 2
    # weights and the fp32 master + moments do not move; the full gradient buffer halves
    assert state_bytes(sp, lo, 4, W32) == (2 * 7400, 4 * 7400, 12 * sharded)
    assert state_bytes(sp, lo, 4, W16) == (2 * 7400, 2 * 7400, 12 * sharded)
    z2 = lo.model_copy(update={"zero_stage": 2})
    assert state_bytes(sp, z2, 1, W16)[1] == 2 * sharded  # one micro-batch: sharded
    z3 = lo.model_copy(update={"zero_stage": 3})
    # ZeRO-3: fp32 shard (the master) + Megatron-FSDP's bf16 shard + two gathered bf16 layers;
    # moments only in the optimizer
    want = ((4 + 2) * sharded + 2 * 100 * 2, 2 * sharded, 8 * sharded)
    assert state_bytes(sp, z3, 4, W16) == want
    dual = Layout(pp=2, dp=8, ep=4, zero_stage=1, pp_schedule="dualpipe")
    # DualPipe: both stage copies keep a bf16 gradient buffer
    assert state_bytes(sp, dual, 4, W16)[1] == 2 * 2 * 7400


def test_optimizer_step_casts_the_bf16_shard_to_fp32() -> None:
    # distrib_optimizer.py shard_model_grad.float(): read 2 + write 4 B before Adam's 30 B
    assert optimizer_bytes_per_param(W32) == 30
    sp = StageParams(dense=8e9, expert=0.0, largest_layer=1e8, num_layers=80)
    lo = Layout(dp=8, zero_stage=1)
    assert STEP_CAST_HBM_BYTES[step_cast(sp, lo, W16, 4)] == 6
    assert optimizer_bytes_per_param(W16, 6) == 36
    # the step's seconds carry the cast of the shard, 6 B x 1e9 at 1e12 B/s (and zero a buffer
    # half the size, and the NaN check reads it: 2 B instead of 4 over all 8e9 gradients);
    # none under the precision-aware optimizer's decoupled_grad
    extra = stage_optimizer_s(lo, sp, 1e12, W16) - stage_optimizer_s(lo, sp, 1e12, W32)
    zeroing = (grad_zero_bytes(lo, sp, W16) - grad_zero_bytes(lo, sp, W32)) / 1e12
    nan_check = (2 - 4) * 8e9 / 1e12
    assert extra == pytest.approx(6e9 / 1e12 + zeroing + nan_check, rel=1e-9)
    aware = W16.model_copy(update={"optimizer_moments": "bf16"})
    assert step_cast(sp, lo, aware, 4) == "none"


def test_bf16_gradients_halve_the_reduce_scatter_bytes() -> None:
    """400M parameters reduce-scattered over 8 nodes (factories.cluster: 50 GB/s at 0.9, ring
    latency 7 x 8 us per collective, one collective on stage 1): 2 B instead of 4 B each."""
    cluster = f.cluster(64)
    layout = Layout(tp=8, pp=2, dp=8, zero_stage=1, sequence_parallel=True)
    sp = StageParams(dense=400e6, expert=0.0, largest_layer=10e6, num_layers=40)
    span = {"dp_cp": [1, 8]}
    g4, a4 = dp_tier_times_s(cluster, layout, sp, span, stage=1)
    g2, a2 = dp_tier_times_s(cluster, layout, sp, span, stage=1, grad_bytes=2)
    assert g4[1] == pytest.approx(7 / 8 * 400e6 * 4 / (50e9 * 0.9) + 7 * 8e-6)
    assert g2[1] == pytest.approx(7 / 8 * 400e6 * 2 / (50e9 * 0.9) + 7 * 8e-6)
    assert a2 == a4  # the parameter all-gather stays bf16


def test_ep_overlap_adds_one_warmup_chunk_when_interleaved() -> None:
    """schedules.py: warm-up 2(p-r-1) + (v-1)p, one more under overlap_moe_expert_parallel_comm,
    plus the steady-state chunk; p 4, v 2, rank 0: 6 + 4 + 1 = 11 chunks of half a stage."""
    lo = Layout(pp=4, vp=2, dp=2, ep=2)
    assert inflight_chunks(lo, 0, 8) == 11 / 2
    assert inflight_chunks(lo.model_copy(update={"ep_overlap": True}), 0, 8) == 12 / 2
    assert inflight_chunks(lo.model_copy(update={"ep_overlap": True}), 0, 2) == 4 / 2  # m*v cap


def test_megatron_export_states_bf16_gradients() -> None:
    lo = Layout(dp=8)
    assert _megatron_memory_options(W32, lo) == []
    assert _megatron_memory_options(W16, lo) == ["--grad-reduce-in-bf16"]


def _record(settings: dict, recompute: str | None = "selective") -> dict:
    return f.tiny_record(settings, layout={"recompute": recompute})


def _inputs(record: dict) -> tuple:
    return record_inputs(RunRecord.model_validate(record).model_dump())


def test_records_state_main_grads_and_recompute_modules() -> None:
    _, _, w, lo = _inputs(_record({}))
    assert w.main_grads == "fp32" and lo.recompute_modules is None  # unstated: defaults
    _, _, w, lo = _inputs(
        _record({"main_grads": "bf16", "recompute_modules": ["layernorm", "moe_act"]})
    )
    assert w.main_grads == "bf16"
    assert lo.recompute_modules == ("layernorm", "moe_act")
    row = validate_record(_record({"recompute_modules": ["layernorm"]}, recompute=None))
    assert row.estimate is None and "recompute_modules needs recompute: selective" in row.error
    row = validate_record(_record({"main_grads": "fp16"}))
    assert row.estimate is None and "main_grads" in row.error


def test_estimate_main_grads_flag_halves_the_gradient_buffer(capsys) -> None:
    """`estimate --main-grads bf16` reaches the Workload: every stage's gradients halve, its
    weights and optimizer state stay (TP 4 PP 4 DP 4, ZeRO-1: full bf16 vs fp32 buffers)."""
    import json

    from planner.cli import main

    argv = ["estimate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64"]
    argv += ["--global-batch", "128", "--seq-len", "8192", "--tp", "4", "--pp", "4", "--dp", "4"]
    stages = []
    for extra in ([], ["--main-grads", "bf16"]):
        assert main([*argv, *extra, "--json"]) == 0
        stages.append(json.loads(capsys.readouterr().out)["stage_memory_gib"])
    assert len(stages[0]) == 4  # one row per pipeline stage
    for fp32, bf16 in zip(*stages, strict=True):
        assert bf16["gradients_gib"] == pytest.approx(fp32["gradients_gib"] / 2)
        assert bf16["weights_gib"] == fp32["weights_gib"]
        assert bf16["optimizer_gib"] == fp32["optimizer_gib"]


def test_gradient_buckets_follow_main_grads() -> None:
    """Two in-flight 40M-element buckets (memory.DP_BUCKET_ELEMENTS) at the buffer's dtype; a
    dense model at TP 1 has no other buffer."""
    import models_zoo
    from cost_models.memory import buffer_bytes

    model = models_zoo.load_model("llama3-8b")
    lo = Layout(dp=8)
    assert buffer_bytes(model, W32, lo, 1) == 2 * 40e6 * 4
    assert buffer_bytes(model, W16, lo, 1) == 2 * 40e6 * 2


@pytest.mark.parametrize(
    ("framework", "settings", "refused"),
    [
        ("torchtitan", {"main_grads": "bf16"}, "main_grads bf16: torchtitan 0.3.0 reduces"),
        ("deepspeed", {"main_grads": "fp32"}, "main_grads fp32: the deepspeed profile"),
        ("torchtitan", {"fp8_params": True}, "fp8_params: torchtitan 0.3.0 keeps fp32"),
        ("deepspeed", {"fp8_params": True}, "fp8_params: DeepSpeed with Megatron-DeepSpeed"),
    ],
)
def test_validate_refuses_a_record_its_framework_cannot_run(framework, settings, refused) -> None:
    """A record stating main gradients in a dtype its framework does not run (bf16 under
    torchtitan, fp32 under DeepSpeed) or fp8 primary weights its launcher lacks gets an error
    row naming the setting and the rule, as plan and the exports refuse it, instead of a price for a run that could not have happened."""
    layout = {"precision": "fp8", "zero_stage": 1} if "fp8_params" in settings else None
    row = validate_record(f.tiny_record(settings, framework=framework, layout=layout), None, 0)
    assert row.estimate is None
    assert row.error.startswith(f"settings: framework {framework} cannot run {refused}")
    ok = validate_record(f.tiny_record(settings, layout=layout), None, 0)  # Megatron runs both
    assert ok.error is None and ok.estimate is not None
