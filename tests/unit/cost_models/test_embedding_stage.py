"""The input embedding priced on the first pipeline stage (issue 32 item 4, uneven first and last
stages): its forward gather and dense weight gradient by hand, and the stage that carries it in
the estimate, the bounds and the per-rank terms the CP-SAT stage partition reads."""

from __future__ import annotations

import pytest
from factories import H100, cluster, dense_model, layout, workload

from cost_models.calibration import calibration_for, hbm_bytes_per_s
from cost_models.compute import EMBED_GRAD_BYTES, embedding_time
from cost_models.pricer import Pricer


def test_embedding_seconds_by_hand():
    model = dense_model()  # hidden 4096, vocab 128256, rope
    cal = calibration_for("hopper")
    hbm = hbm_bytes_per_s(H100, cal)
    w = workload(seq_len=4096)  # 4096 tokens per micro-batch, Megatron gradient accumulation
    # TP 1: gather (read 2 + write 2 B) and the [s, b, h] transpose (4 B) per element of [t, h]
    one = embedding_time(model, H100, cal, w, layout())
    assert one.forward_s == pytest.approx(4096 * 4096 * 8 / hbm + cal.kernel_overhead_s)
    # backward: the same [t, h] passes, then the [V, h] gradient zero-filled (2 B) and added to
    # the fp32 main_grad (read 4 + 2, write 4)
    grad = 128256 * 4096 * 12 / hbm
    assert EMBED_GRAD_BYTES["megatron"] == 12
    assert one.backward_s == pytest.approx(4096 * 4096 * 8 / hbm + grad + cal.kernel_overhead_s)
    # TP 4: the masked rows of tokens outside the shard (2 B) and a quarter of the gradient
    four = embedding_time(model, H100, cal, w, layout(tp=4))
    assert four.elementwise_s == pytest.approx(4096 * 4096 * 10 / hbm)
    assert four.elementwise_backward_s == pytest.approx(4096 * 4096 * 10 / hbm + grad / 4)
    # FSDP (torchtitan): the bf16 gradient accumulated by autograd, 2 + 6 B
    fsdp = embedding_time(model, H100, cal, workload(seq_len=4096, dp_sync="fsdp"), layout())
    assert fsdp.elementwise_backward_s == pytest.approx(
        4096 * 4096 * 8 / hbm + 128256 * 4096 * 8 / hbm
    )
    # a learned position table: a second gather (4 B) and the add (6 B)
    gpt = embedding_time(dense_model(max_position_embeddings=8192), H100, cal, w, layout())
    assert gpt.elementwise_s == pytest.approx(4096 * 4096 * 18 / hbm)


def test_embedding_sits_on_the_first_stage_and_the_head_on_the_last():
    model, w = dense_model(), workload(seq_len=4096, global_batch=64)
    p = Pricer(model, cluster(64), w)
    lo = layout(tp=2, pp=4, dp=8)
    times = p.layer_times(lo)
    assert times.embed_s > 0 and times.head_s > 0
    span = p.spans(lo)
    counts = p.stage_counts(lo)  # even: 8 layers per rank
    terms = p.stage_terms(lo, counts, span)
    middle = terms[1].compute_s
    assert terms[2].compute_s == middle
    assert terms[0].compute_s == pytest.approx(middle + times.embed_s)
    assert terms[3].compute_s == pytest.approx(middle + times.head_s)
    # the end stages' TP collectives outside the layers (stage.end_stage_tp_costs) are TP terms
    first, last = p.end_costs(lo, span)
    assert first.tp_s > 0 and last.tp_s > 0
    assert terms[0].tp_s == pytest.approx(terms[1].tp_s + first.tp_s)
    assert terms[3].tp_s == pytest.approx(terms[1].tp_s + last.tp_s)
    # the per-rank terms of the stage partition and the DP overlap read the same stage
    ends = ((0, times.embed_s + first.tp_s), (1, 0.0), (3, times.head_s + last.tp_s))
    for r, extra in ends:
        stage_s, _dp, _opt = p.rank_terms_s(lo, span, r, 8, 0)
        assert stage_s == pytest.approx(p.rank_terms_s(lo, span, 1, 8, 0)[0] + extra)
        assert p.stage_compute_s(lo, (8, 0), r == 3, r == 0) == terms[r].compute_s
    # pp 1: one stage carries both
    one = layout(tp=8, dp=8)
    t1 = p.layer_times(one)
    only = p.stage_terms(one, p.stage_counts(one), p.spans(one))[0]
    layers = p.layer_costs(one, p.spans(one)).dense
    assert only.compute_s == pytest.approx(32 * layers.compute_s + t1.embed_s + t1.head_s)


def test_bounds_stay_below_the_estimate_with_the_embedding():
    model, w = dense_model(num_layers=8), workload(seq_len=4096, global_batch=64)
    p = Pricer(model, cluster(64), w)
    for lo in (layout(pp=4, dp=16), layout(tp=2, pp=2, dp=16), layout(pp=8, dp=8)):
        step_s = p.estimate(lo).step_time_s
        assert p.step_bound_s(lo) <= step_s
        assert p.placement_bound_s(lo) <= step_s
        # with the DP terms: the step itself, shaved by bounds.SAFETY (1e-9)
        with_dp = p.placement_bound_s(lo, with_dp=True)
        assert with_dp <= step_s
        assert with_dp == pytest.approx(step_s, rel=2e-9)


def test_default_split_is_megatrons_split_with_the_embedding_and_loss_counted():
    # megatron-core 0.19.2 transformer_block.py get_num_layers_to_build: with
    # --account-for-embedding/loss-in-pipeline-split each rank gets (L + 2) / pp layer slots and
    # the first / last gives one to the embedding / the loss. The export states the split itself
    # (never these flags, which Megatron refuses beside an explicit layout).
    from cost_models.pipeline import chunk_layer_counts

    per = (126 + 2) // 16
    assert chunk_layer_counts(126, 16) == [per - 1] + [per] * 14 + [per - 1]
    per = (127 + 1) // 16  # the loss counted only: the last chunk is one short
    assert chunk_layer_counts(127, 16) == [per] * 15 + [per - 1]
