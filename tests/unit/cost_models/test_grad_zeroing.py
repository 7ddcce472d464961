"""The step's in-place zeroing of the gradients (Workload.grad_zeroing, stage.grad_zero_bytes):
Megatron's grad-buffer memset every iteration (training.py train_step -> zero_grad_buffer ->
param_and_grad_buffer.py reset `grad_data.zero_()`), torch's zero_grad(set_to_none=False).
Expected values by hand from the code the docstrings cite."""

from __future__ import annotations

import pytest

from cost_models.framework import DEEPSPEED, LLM_FOUNDRY, MEGATRON, TORCHTITAN
from cost_models.memory import StageParams
from cost_models.specs import Layout, Workload
from cost_models.stage import grad_zero_bytes, stage_optimizer_s

P = 1e9  # parameters one GPU of the stage holds (after TP / EP), before ZeRO
HBM = 1e12
SP = StageParams(dense=0.75 * P, expert=0.25 * P, largest_layer=0.1 * P, num_layers=8)


def _w(**over) -> Workload:
    return Workload(seq_len=4096, global_batch_seqs=64, **over)


@pytest.mark.parametrize("zero", [0, 1])
def test_megatron_zeroes_every_parameter_of_the_rank_under_the_distributed_optimizer(zero):
    """The DDP buffer holds a gradient for each of the rank's parameters, dense and expert, also
    when the distributed optimizer shards the states: 1e9 x 4 B (fp32 main grads)."""
    lo = Layout(dp=8, zero_stage=zero)
    assert grad_zero_bytes(lo, SP, _w()) == pytest.approx(4 * P)
    assert grad_zero_bytes(lo, SP, _w(main_grads="bf16")) == pytest.approx(2 * P)


def test_a_sharded_gradient_buffer_zeroes_its_shard():
    """ZeRO-3 keeps the shard (dense over dp x cp = 8, expert over the expert-DP group
    dp x cp x tp / ep = 2); a ZeRO-2 the shard where every backward reduces at any micro-batch
    count (FSDP2 under torchtitan's 'every_micro_batch', Megatron-FSDP's
    'zero2_every_micro_batch'). Megatron's ZeRO-2 under 'last_micro_batch' is the distributed
    optimizer from two micro-batches on, and is charged the whole buffer at one too (the step
    stays affine in the micro-batches: stage.grad_zero_bytes)."""
    shard = 0.75 * P / 8 + 0.25 * P / 2
    assert grad_zero_bytes(Layout(dp=8, ep=4, zero_stage=3), SP, _w()) == pytest.approx(4 * shard)
    lo2 = Layout(dp=8, ep=4, zero_stage=2)
    assert grad_zero_bytes(lo2, SP, _w()) == pytest.approx(4 * P)
    for mode in ("every_micro_batch", "zero2_every_micro_batch"):
        w = _w(dp_accumulation=mode)
        assert grad_zero_bytes(lo2, SP, w) == pytest.approx(4 * shard)
    # torchtitan under pipelining defers the reduction to the last backward: the whole buffer
    lo2pp = Layout(dp=8, pp=2, ep=4, zero_stage=2)
    assert grad_zero_bytes(lo2pp, SP, _w(dp_accumulation="every_micro_batch")) == pytest.approx(
        4 * P
    )


def test_no_memset_where_the_step_frees_the_gradients():
    lo = Layout(dp=8, zero_stage=1)
    assert grad_zero_bytes(lo, SP, _w(grad_zeroing=False)) == 0
    assert grad_zero_bytes(lo, SP, _w(grads_set_to_none=True)) == 0
    assert grad_zero_bytes(lo, SP, None) == 0


def test_the_memset_is_part_of_the_stage_tail_at_the_hbm_rate():
    lo = Layout(dp=8, zero_stage=1)
    with_s = stage_optimizer_s(lo, SP, HBM, _w())
    without_s = stage_optimizer_s(lo, SP, HBM, _w(grad_zeroing=False))
    assert with_s - without_s == pytest.approx(4 * P / HBM, rel=1e-12)
    # with the Adam / clip rates of a kernel table it stays at the HBM figure
    tab = stage_optimizer_s(lo, SP, HBM, _w(), 2e12, 3e12)
    tab_off = stage_optimizer_s(lo, SP, HBM, _w(grad_zeroing=False), 2e12, 3e12)
    assert tab - tab_off == pytest.approx(4 * P / HBM, rel=1e-12)


def test_profiles_say_which_steps_zero_and_cite_it():
    assert MEGATRON.physics["grad_zeroing"].value is True
    assert "grad_data.zero_()" in MEGATRON.physics["grad_zeroing"].source
    assert TORCHTITAN.physics["grad_zeroing"].value is True
    assert "disable_cuda_graphs" in TORCHTITAN.physics["grad_zeroing"].source
    assert DEEPSPEED.physics["grad_zeroing"].value is False
    assert LLM_FOUNDRY.physics["grad_zeroing"].value is False
    w = _w()
    assert DEEPSPEED.workload(w).grad_zeroing is False
    assert MEGATRON.workload(w).grad_zeroing is True


def test_the_estimate_reports_the_memset_inside_the_optimizer_term(capsys):
    """Estimate.step_tail splits breakdown optimizer exactly: Llama 3 8B at TP 1 on 64 H100
    zeroes its whole fp32 buffer (8.03 G parameters x 4 B = 32.1 GB) at the HBM figure, the rest
    is the norm, clip and Adam over the 1/64 shard; `estimate --explain` says it, the JSON
    carries it, and a DeepSpeed plan (set_to_none) has no memset."""
    import json

    from planner.cli import main

    argv = [
        "estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64",
        "--global-batch", "256", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "64",
    ]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    t = out["step_tail"]
    assert t["optimizer_s"] == pytest.approx(out["breakdown_s"]["optimizer"], rel=1e-12)
    passes_s = t["grad_bucket_passes_s"]
    assert t["grad_zeroing_s"] + passes_s + t["optimizer_step_s"] == pytest.approx(t["optimizer_s"])
    assert t["grad_zeroing_gb"] == pytest.approx(8.03e9 * 4 / 1e9, rel=0.01)
    assert t["grad_zeroing_s"] == pytest.approx(t["grad_zeroing_gb"] * 1e9 / (3350e9 * 0.85))
    # Megatron's NaN check reads the same buffer once before the reduce-scatter (no pre-scale:
    # the profile averages in the collective): test_grad_bucket_passes.py
    assert t["grad_bucket_passes_gb"] == pytest.approx(t["grad_zeroing_gb"], rel=1e-12)
    assert main([*argv, "--explain"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"{t['grad_zeroing_s']:.3f} s zeroing {t['grad_zeroing_gb']:.1f} GB of gradients" in text
    assert f"{passes_s:.3f} s reading {t['grad_bucket_passes_gb']:.1f} GB of gradient" in text
    assert main([*argv, "--framework", "deepspeed", "--json"]) == 0
    ds = json.loads(capsys.readouterr().out)["step_tail"]
    assert ds["grad_zeroing_s"] == 0 and ds["optimizer_step_s"] == ds["optimizer_s"]
    assert ds["grad_bucket_passes_s"] == 0
