"""FSDP2 memory phases and the eager step's saved tensors (issue 32, helper ttmem), from
hand-computed inputs. Measured counterpart: bench/results/h100-2026-11-26 single-GPU steps
(docs/cost_model.md#fsdp2-phases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import dense_model, layout, moe_model, workload

from cost_models.memory import (
    StageParams,
    fsdp2_end_of_backward_bytes,
    layer_activation_tensors,
    logits_bytes,
    state_bytes,
)
from cost_models.stage import (
    LayerActivations,
    peak_grads,
    stage_activation_bytes,
    stage_peak,
)
from cost_models.terms import ByKind
from planner.validate import validate_record

ROOT = Path(__file__).resolve().parents[3]
HELD_OUT = ROOT / "bench/results/h100-2026-11-26/single-gpu-held-out/steps/steps_runs.yaml"

# 1,000 parameters on the stage, of which a 200-parameter head and a 150-parameter embedding;
# the largest layer has 100.
SP = StageParams(
    dense=1000.0, expert=0.0, largest_layer=100.0, num_layers=4, head=200.0, embedding=150.0
)


def fsdp2(**over):
    # FSDP2 gathers one unit ahead and queues no gradient buckets (Megatron-FSDP's knob off)
    return workload(memory_phases="fsdp2", zero3_prefetch_elements=None, **over)


def test_one_rank_fsdp2_keeps_fp32_shards_and_the_root_unsharded():
    lo = layout(zero_stage=3)  # dp 1: nothing to shard, still FSDP2's layout
    w = fsdp2(grads_set_to_none=True, fsdp_root_holds_embedding=True)
    # 4 B fp32 shard + 2 B x (head + embedding) unsharded; no gradients yet; 8 B moments
    assert state_bytes(SP, lo, 1, w) == (4 * 1000 + 2 * 350, 0.0, 8 * 1000)
    # a second micro-batch's backward starts with the first one's sharded fp32 gradients
    assert state_bytes(SP, lo, 2, w)[1] == 4 * 1000
    # gradients left allocated by the last step (set_to_none False)
    assert state_bytes(SP, lo, 1, fsdp2())[1] == 4 * 1000
    # torchtitan's units: only [norm, lm_head] stays unsharded through the loss
    assert state_bytes(SP, lo, 1, fsdp2())[0] == 4 * 1000 + 2 * 200
    # additive (the default) at one rank is ZeRO-0: 2 B weights, 4 B grads, 12 B optimizer
    assert state_bytes(SP, lo, 1, workload()) == (2 * 1000, 4 * 1000, 12 * 1000)


def test_sharded_fsdp2_stage_without_the_loss_gathers_two_layers():
    lo = layout(zero_stage=3, dp=4)
    first = StageParams(dense=1000.0, expert=0.0, largest_layer=100.0, num_layers=4,
                        embedding=150.0)  # fmt: skip
    weights, grads, optim = state_bytes(first, lo, 1, fsdp2())
    assert weights == 4 * 1000 / 4 + 2 * 2 * 100  # shard + two gathered bf16 layers
    assert (grads, optim) == (4 * 250, 8 * 250)
    # the loss stage: the head unit unsharded (full, 2 B), no layer gathered at the loss
    assert state_bytes(SP, lo, 1, fsdp2())[0] == 4 * 250 + 2 * 200


def test_end_of_backward_adds_the_last_units_reduce_input():
    lo = layout(zero_stage=3)
    # 16 B per parameter (4 fp32 shard + 4 grad + 8 moments) + 4 B fp32 reduce-scatter input
    root = fsdp2(fsdp_root_holds_embedding=True)
    assert fsdp2_end_of_backward_bytes(SP, lo, root) == 16 * 1000 + 4 * 350
    assert fsdp2_end_of_backward_bytes(SP, lo, fsdp2()) == 16 * 1000 + 4 * 150  # embedding
    last = StageParams(dense=1000.0, expert=0.0, largest_layer=100.0, num_layers=4, head=200.0)
    assert fsdp2_end_of_backward_bytes(last, lo, fsdp2()) == 16 * 1000 + 4 * 200


def test_peak_grads_charges_the_end_phase_excess():
    lo = layout(zero_stage=3)
    w = fsdp2(grads_set_to_none=True, fsdp_root_holds_embedding=True)
    weights, grads, optim = state_bytes(SP, lo, 1, w)  # 4700, 0, 8000
    end = 16 * 1000 + 4 * 350  # 17,400
    # small activations: the end of backward is the peak, total = end
    got = peak_grads(w, lo, SP, (1000.0, 0.0, weights, grads, optim), 1)[0]
    assert 1000 + weights + got + optim == pytest.approx(end)
    # large activations: the backward start is the peak, gradients stay 0
    assert peak_grads(w, lo, SP, (9000.0, 0.0, weights, grads, optim), 1)[0] == 0.0
    # the phase is named where the estimate reports it (StageMemory.peak_phase)
    phase = stage_peak(w, lo, SP, (4, 0), lambda: None, (1000.0, 0.0, weights, grads, optim), 1)[1]
    assert phase == "end_of_backward"
    big = stage_peak(w, lo, SP, (4, 0), lambda: None, (9000.0, 0.0, weights, grads, optim), 1)
    assert big[1] == "backward"
    # additive accounting and ZeRO < 3 never move
    assert peak_grads(workload(), lo, SP, (1000.0, 0.0, weights, grads, optim), 1)[0] == grads
    assert peak_grads(w, layout(zero_stage=2), SP, (1000.0, 0.0, 1.0, 2.0, 3.0), 1)[0] == 2.0


def test_loss_and_checkpoint_rebuild_are_sequential_under_fsdp2():
    model = dense_model()  # vocab 128,256
    lo = layout(recompute="full")
    acts = LayerActivations(own=ByKind(10.0, None), none=ByKind(1e6, None))
    logits = 4096 * 128256 * 12  # eager fp32 loss, one 4,096-token micro-batch
    eager = dict(cross_entropy="eager_fp32")
    additive = stage_activation_bytes(model, workload(**eager), lo, 0, (2, 0), acts, 1)
    assert additive == 2 * 10 + 1e6 + logits
    phased = stage_activation_bytes(model, fsdp2(**eager), lo, 0, (2, 0), acts, 1)
    assert phased == 2 * 10 + max(1e6, logits)
    big = LayerActivations(own=ByKind(10.0, None), none=ByKind(1e10, None))
    assert stage_activation_bytes(model, fsdp2(**eager), lo, 0, (2, 0), big, 1) == 20 + 1e10


def test_logits_alive_in_backward_adds_the_bf16_logits():
    model = dense_model()
    kept = workload(cross_entropy="eager_fp32", logits_alive_in_backward=True)
    assert logits_bytes(model, kept, layout()) == 4096 * 128256 * (12 + 2)
    # loss_parallel under TP: 16 B + 2 B, over the vocab shard
    assert logits_bytes(model, kept, layout(tp=2)) == 4096 * 128256 / 2 * (16 + 2)
    fused = workload(logits_alive_in_backward=True)  # Megatron's fused loss: not eager
    assert logits_bytes(model, fused, layout()) == 4096 * 128256 * 6


def _names(model, w, lo, is_moe=False):
    tensors = layer_activation_tensors(model, w, lo, is_moe=is_moe, recompute="none")
    return {t.name: t.elements for t in tensors}


def test_eager_fused_qkv_keeps_the_rotary_outputs():
    model = dense_model()  # 32 heads, 8 KV heads of 128
    got = _names(model, workload(fused_elementwise=False, fused_qkv=True), layout())
    assert got["rotary_q_k"] == (32 + 8) * 128
    assert got["q_k_v"] == (32 + 2 * 8) * 128
    assert "rotary_q_k" not in _names(model, workload(fused_elementwise=False), layout())
    assert "rotary_q_k" not in _names(model, workload(fused_qkv=True), layout())  # compiled


def test_eager_swiglu_and_moe_keep_silu_and_expert_outputs():
    dense = _names(dense_model(), workload(fused_elementwise=False), layout())
    assert dense["silu_out"] == 14336
    assert "silu_out" not in _names(dense_model(), workload(), layout())
    moe = moe_model()
    m = moe.moe
    got = _names(moe, workload(fused_elementwise=False), layout(), is_moe=True)
    rows = m.top_k  # token copies per token on this GPU (tp 1, etp 1)
    assert got["silu_out"] == rows * m.expert_ffn_hidden_size
    assert got["expert_out"] == rows * moe.hidden_size
    fused = _names(moe, workload(), layout(), is_moe=True)
    assert "silu_out" not in fused and "expert_out" not in fused


def test_held_out_step_allocated_peak_by_hand():
    """h7b8-seq4096-mb1 (Qwen2.5-7B dims, 8 layers; measured 49.54 GiB max_memory_allocated):
    fp32 shards + Adam 12 B/param, root embedding + head + norm in bf16, eager saved tensors
    per token and layer, and the eager loss with the bf16 logits alive (14 B per logit)."""
    rec = next(r for r in json.loads(HELD_OUT.read_text()) if r["id"].endswith("h7b8-seq4096-mb1"))
    row = validate_record(rec)
    p, h, f, nh, kv, d, v, layers, t = 2954423808, 3584, 18944, 28, 4, 128, 152064, 8, 4096
    attn = 2 * h * 2 + (nh + 2 * kv) * d * 2 + (nh + kv) * d * 2 + nh * d * 2 + nh * 4
    mlp = 2 * h * 2 + 4 * f * 2
    hand = 12 * p + 2 * (2 * v * h + h) + layers * t * (attn + mlp) + 14 * t * v
    assert row.predicted_peak_gib * 2**30 == pytest.approx(hand, rel=1e-12)
    assert row.contract_dict()["predicted_peak_memory_gib"] == row.predicted_peak_gib
    e = row.estimate
    assert row.predicted_peak_gib == pytest.approx(e.peak_memory_gib - e.stage_memory[0].reserve_gib)


def test_peak_memory_stat_is_checked():
    rec = json.loads(HELD_OUT.read_text())[0]
    rec["settings"]["peak_memory_stat"] = "reserved"
    row = validate_record(rec)
    assert row.estimate is None and "peak_memory_stat" in (row.error or "")
