"""Runner-ups are alternatives; the simplest plan within the tolerance is recommended."""

from __future__ import annotations

import models_zoo
import planner
from planner.report import findings
from planner.search.candidates import family_key


def _curve_h100():
    """dgx-h100 without its shipped kernel tables (the efficiency curve): there a PP 2 plan is
    0.7 % faster than DP 8, which shows the simplicity tolerance; on the tables DP 8 is the
    fastest outright (docs/search.md)."""
    return models_zoo.load_cluster("dgx-h100").model_copy(update={"kernels": None})


def test_llama2_7b_on_8_h100_recommends_dp8_and_shows_the_faster_pipeline():
    result = planner.plan_for("llama2-7b", _curve_h100(), num_gpus=8, global_batch=128)
    lo = result.best.layout
    assert (lo.tp, lo.pp, lo.dp, lo.cp, lo.vp) == (1, 1, 8, 1, 1)
    fastest = result.ranked[result.fastest_index]
    assert result.fastest_index == 1 and fastest.layout.pp == 2
    gain = 1 - fastest.step_time_s / result.best.step_time_s
    assert 0 < gain <= result.simplicity_tolerance
    assert result.solver.objective == fastest.step_time_s  # the search's optimum, unchanged
    first = findings.runner_ups(result)[0]
    assert first.fastest and first.reason.startswith(f"fastest, {gain:.2%} faster")
    # Tolerance 0: the fastest leads.
    fast = planner.plan_for(
        "llama2-7b", _curve_h100(), num_gpus=8, global_batch=128, simplicity_tolerance=0
    )
    assert fast.best.layout == fastest.layout and fast.fastest_index == 0


def test_runner_ups_differ_in_degrees_vp_micro_batch_or_recompute():
    result = planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64, global_batch=128, top_k=5)
    keys = [family_key(e.layout) for e in result.ranked]
    assert len(result.ranked) == 5 and len(set(keys)) == 5
    # ZeRO-2 with more than one micro-batch is priced as ZeRO-1: collapsed and listed.
    assert all(e.num_microbatches > 1 for e in result.ranked)
    for e, same in zip(result.ranked, result.equivalents, strict=True):
        assert e.layout.zero_stage == 1
        assert any(lo.zero_stage == 2 and lo.order == e.layout.order for lo in same)
    for r in findings.runner_ups(result):
        assert r.fastest or r.binding_delta_s > findings.REAL_DIFFERENCE_S
    # --top-variants: the near variants of the best (its ZeRO-2 twin among them).
    variants = planner.plan_for(
        "llama3-70b", "dgx-h100", num_gpus=64, global_batch=128, top_k=5, top_variants=True
    )
    assert len({family_key(e.layout) for e in variants.ranked}) < 5


def test_a_lower_zero_stage_within_the_tolerance_is_recommended_beside_the_faster_one():
    """The search ranks families, a family by its fastest ZeRO variant; Llama 3 8B on 32 H100
    at 4K and batch 64 (one micro-batch of 2): ZeRO-3 zeroes only its gradient shard each step
    (stage.grad_zero_bytes) and skips Megatron's NaN check of the whole buffer
    (stage.grad_bucket_pass_bytes), 11 ms each, and is the family's fastest, 1.5 % ahead of
    its ZeRO-2 twin. Within a 2 % simplicity tolerance that twin fits and is recommended (a
    lower ZeRO stage, docs/search.md#recommendation) and the ZeRO-3 plan stays listed as the
    fastest (recommend.simpler_twins); at the default 1 % the ZeRO-3 plan is recommended."""
    result = planner.plan_for(
        "llama3-8b", "dgx-h100", num_gpus=32, seq_len=4096, global_batch=64,
        simplicity_tolerance=0.02,
    )  # fmt: skip
    best, fastest = result.best, result.ranked[result.fastest_index]
    assert family_key(best.layout) == family_key(fastest.layout)
    assert (best.layout.zero_stage, fastest.layout.zero_stage) == (2, 3)
    assert 0 < 1 - fastest.step_time_s / best.step_time_s <= result.simplicity_tolerance
    assert best.fits_in_memory and best.usable_memory_gib == fastest.usable_memory_gib
    assert result.solver.objective == fastest.step_time_s  # the search's optimum, unchanged
    first = findings.runner_ups(result)[0]
    assert first.fastest and "optimizer step" in first.reason
    # ZeRO-1 is not offered: at one micro-batch it holds whole gradients and does not fit
    assert all(e.layout.zero_stage >= 2 for e in result.ranked if e.layout.dp == 32)
    for tolerance in (0, 0.01):
        fast = planner.plan_for(
            "llama3-8b", "dgx-h100", num_gpus=32, seq_len=4096, global_batch=64,
            simplicity_tolerance=tolerance,
        )  # fmt: skip
        assert fast.best.layout == fastest.layout and fast.fastest_index == 0
