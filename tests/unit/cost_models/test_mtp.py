"""Multi-token prediction (ModelSpec.mtp_num_layers) priced on the last pipeline stage: one more
transformer layer of the last layer's kind per depth (pipeline.with_mtp), its join to the trunk
and its LM-head pass (compute.lm_head_time), its parameters and saved tensors (memory), its
FLOPs as Megatron counts them, and what the launchers take or refuse."""

from __future__ import annotations

import pytest
from factories import H100, cluster, dense_model, layout, moe_model, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import MTP_JOIN_BYTES, embedding_time, lm_head_time, model_flops_per_token
from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.memory import MTP_SAVED_BYTES, logits_bytes, stage_params, stage_tensors
from cost_models.pipeline import even_chunk_counts, with_mtp
from cost_models.pricer import Pricer
from cost_models.rules import layout_violations
from cost_models.specs import Layout, ModelSpec
from planner.export.launch import (
    megatron_deepspeed_model_args,
    megatron_model_args,
    torchtitan_recipe,
)


def _mtp(model: ModelSpec, depth: int) -> ModelSpec:
    return model.model_copy(update={"mtp_num_layers": depth})


def test_mtp_layers_join_the_last_rank_as_the_last_layer_kind():
    moe, dense = moe_model(mtp_num_layers=1), dense_model(mtp_num_layers=2)
    lo = Layout(pp=4)
    assert with_mtp(moe, lo, 3, (0, 4)) == (0, 5)
    assert with_mtp(moe, lo, 2, (0, 4)) == (0, 4)  # only the last rank
    assert with_mtp(dense, lo, 3, (8, 0)) == (10, 0)
    assert with_mtp(moe_model(), lo, 3, (0, 4)) == (0, 4)  # no MTP, no change
    # the even split counts the MTP layer as one of the last chunk's (even_chunk_counts)
    assert even_chunk_counts(moe_model(), 4) == [4, 4, 4, 4]
    assert even_chunk_counts(moe, 4) == [4, 5, 4, 3]
    assert Pricer(moe, cluster(4), workload()).stage_counts(lo) == [(1, 3), (0, 5), (0, 4), (0, 4)]
    # where the last chunk would keep no decoder layer, the plain even split
    assert even_chunk_counts(dense_model(num_layers=8, mtp_num_layers=3), 4) == [2, 2, 2, 2]


def test_head_time_adds_a_head_pass_and_the_join_per_depth():
    cal = calibration_for("hopper")
    hbm = hbm_bytes_per_s(H100, cal)
    base_model = dense_model()  # hidden 4096, vocab 128256
    w, lo = workload(seq_len=4096), layout(tp=2, sequence_parallel=True)
    base = lm_head_time(base_model, H100, cal, w, lo)
    two = lm_head_time(_mtp(base_model, 2), H100, cal, w, lo)
    h, t = 4096, 4096
    # the output GEMM three times, and eh_proj [t, 2h] x [2h, h / tp] twice
    head_flops = 2 * t * 128256 / 2 * h
    assert base.model_flops == pytest.approx(head_flops)
    assert two.model_flops == pytest.approx(3 * head_flops + 2 * (2 * t * h / 2 * 2 * h))
    # memory-bound: three cross-entropies, two embedding look-ups (weight gradient included)
    # and two joins over the sequence-parallel shard (t / tp rows)
    embed = embedding_time(base_model, H100, cal, w, lo)
    join_fwd, join_bwd = (2 * t / 2 * h * b / hbm for b in MTP_JOIN_BYTES)
    assert two.elementwise_s == pytest.approx(
        3 * base.elementwise_s + 2 * embed.elementwise_s + join_fwd
    )
    embed_bwd = embed.backward_s - embed.overhead_s
    bwd_elem = two.elementwise_backward_s
    assert bwd_elem == pytest.approx(3 * 2 * base.elementwise_s + 2 * embed_bwd + join_bwd)
    assert two.overhead_s == pytest.approx(3 * base.overhead_s)


def test_eh_proj_runs_in_the_workload_precision():
    cal = calibration_for("hopper")
    model = _mtp(dense_model(), 1)
    lo = layout()
    bf16 = lm_head_time(model, H100, cal, workload(), lo)
    fp8 = lm_head_time(model, H100, cal, workload(precision="fp8"), lo)
    base_bf16 = lm_head_time(dense_model(), H100, cal, workload(), lo)
    base_fp8 = lm_head_time(dense_model(), H100, cal, workload(precision="fp8"), lo)
    assert base_fp8.gemm_s == pytest.approx(base_bf16.gemm_s)  # the head stays bf16
    assert fp8.gemm_s - base_fp8.gemm_s < bf16.gemm_s - base_bf16.gemm_s  # eh_proj does not


def test_last_stage_parameters_and_tensors():
    model = moe_model()  # hidden 2048, vocab 32000, untied
    mtp = _mtp(model, 1)
    h = 2048
    lo = Layout(pp=4, tp=2)
    base = stage_params(model, lo, 0, 4, 3)
    one = stage_params(mtp, lo, 0, 4, 3)
    # the same layers: only the join (eh_proj [2h, h], three norm scales) and the embedding copy
    join = (2 * h * h + 3 * h) / 2
    copy = 32000 * h / 2
    assert one.dense - base.dense == pytest.approx(join + copy)
    assert one.head - base.head == pytest.approx(join + copy)
    assert one.expert == base.expert
    # one pipeline stage: the embedding is the first stage's own, no copy
    flat = Layout(tp=2)
    assert stage_params(mtp, flat, 0, 16, 0).dense - stage_params(model, flat, 0, 16, 0).dense == (
        pytest.approx(join)
    )
    # tensors: enorm, hnorm, eh_proj, final_layernorm, and the copy where pp > 1
    assert stage_tensors(mtp, lo, 0, 4, 3)[0] - stage_tensors(model, lo, 0, 4, 3)[0] == 5
    assert stage_tensors(mtp, flat, 0, 16, 0)[0] - stage_tensors(model, flat, 0, 16, 0)[0] == 4
    # tied embeddings already keep a copy on the last stage: MTP shares it
    tied = Layout(pp=4)
    t0, t1 = dense_model(tied_embeddings=True), dense_model(tied_embeddings=True, mtp_num_layers=1)
    assert stage_params(t1, tied, 8, 0, 3).dense - stage_params(t0, tied, 8, 0, 3).dense == (
        pytest.approx(2 * 4096 * 4096 + 3 * 4096)
    )


def test_every_depth_keeps_its_logits_and_join_tensors():
    model, w = dense_model(), workload(seq_len=4096)
    lo = Layout(tp=4, sequence_parallel=True)
    base = logits_bytes(model, w, lo)
    two = logits_bytes(_mtp(model, 2), w, lo)
    assert two == pytest.approx(3 * base + 2 * 4096 / 4 * 4096 * MTP_SAVED_BYTES)


def test_flops_count_as_megatron_counts_them():
    """megatron/training/training.py num_floating_point_operations: the MTP layer as one more
    layer of the last kind, eh_proj, and one more logit GEMM per depth."""
    model = moe_model()
    one = model_flops_per_token(_mtp(model, 1), 4096)
    base = model_flops_per_token(model, 4096)
    per_moe_layer = model_flops_per_token(model.model_copy(update={"num_layers": 17}), 4096) - base
    h = model.hidden_size
    assert one - base == pytest.approx(per_moe_layer + 4 * h * h + 2 * 32000 * h)


def test_estimate_prices_the_mtp_stage():
    """pp 2, four decoder layers a stage: the last stage holds its layers, the MTP layer and two
    head passes; the step grows, the first stage's memory does not."""
    model = moe_model(num_layers=8)
    cl, w = cluster(2), workload(global_batch=16)
    lo = Layout(pp=2, recompute="selective")
    base = estimate(model, cl, w, lo, layers_per_stage=(4, 4))
    one = estimate(_mtp(model, 1), cl, w, lo, layers_per_stage=(4, 4))
    assert one.step_time_s > base.step_time_s
    assert one.stage_memory[0].total_gib == pytest.approx(base.stage_memory[0].total_gib)
    assert one.stage_memory[1].total_gib > base.stage_memory[1].total_gib


def test_ep_overlap_takes_one_mtp_layer_at_most():
    model = moe_model(mtp_num_layers=2)
    lo = Layout(tp=1, dp=8, ep=8, ep_overlap=True)
    problems = layout_violations(model, cluster(8), workload(global_batch=64), lo)
    assert any("ep_overlap takes at most one MTP layer" in p for p in problems)
    assert not any(
        "MTP" in p
        for p in layout_violations(_mtp(model, 1), cluster(8), workload(global_batch=64), lo)
    )


def test_megatron_takes_the_depth_and_other_launchers_refuse_it():
    w = workload()
    args = megatron_model_args(_mtp(dense_model(), 1), w)
    assert args[args.index("--mtp-num-layers") + 1] == "1"
    assert "--mtp-num-layers" not in megatron_model_args(dense_model(), w)
    with pytest.raises(InvalidInput, match="rope"):
        megatron_model_args(dense_model(max_position_embeddings=8192, mtp_num_layers=1), w)
    with pytest.raises(InvalidInput, match="multi-token prediction"):
        megatron_deepspeed_model_args(_mtp(dense_model(), 1), w)
    qwen = ModelSpec.model_validate(
        {**moe_model().model_dump(), "name": "Qwen3-30B-A3B", "mtp_num_layers": 1}
    )
    with pytest.raises(InvalidInput, match="no multi-token prediction"):
        torchtitan_recipe(qwen)


def test_checkpoints_hold_the_mtp_layer():
    """goodput.checkpoint_size sums memory.stage_params over the stages the plan builds: the
    last one's MTP layer and join are saved too (one GPU a stage: no replica to share them)."""
    from cost_models.goodput import checkpoint_bytes_per_param, checkpoint_size

    model, lo, w = moe_model(num_layers=8), Layout(pp=2), workload(global_batch=16)
    base = checkpoint_size(model, lo, w, (4, 4), "balanced")
    one = checkpoint_size(_mtp(model, 1), lo, w, (4, 4), "balanced")
    p0, p1 = stage_params(model, lo, 0, 4, 1), stage_params(_mtp(model, 1), lo, 0, 5, 1)
    grown = p1.dense + p1.expert - p0.dense - p0.expert
    assert grown > 0
    per_param = checkpoint_bytes_per_param(lo, w)
    assert one.total_bytes - base.total_bytes == pytest.approx(per_param * grown)
