"""Megatron-Core's account_for_embedding / account_for_loss_in_pipeline_split as Layout inputs
(issue 32 item 4, uneven first and last stages): the split they set (megatron-core 0.19.2
transformer_block.get_num_layers_to_build, checked against the real one in
tests/frameworks/test_pipeline_split_flags.py), TransformerConfig's divisibility rules, and the
stages the Pricer composes from them. Counts by hand."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, layout, workload

from cost_models.errors import InvalidInput
from cost_models.framework import DEEPSPEED, MEGATRON, TORCHTITAN, profile_violations
from cost_models.pipeline import accounted_chunk_counts, layout_chunk_counts, stage_layers
from cost_models.pricer import Pricer
from cost_models.rules import layout_violations
from cost_models.specs import Layout

BOTH = {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}


def test_the_split_by_hand():
    # Llama 3.1 405B at PP 16 x VP 8 (Megatron-Bridge's GB200 recipe): 126 + 2 = 128 slots, one
    # per chunk; the first chunk holds the embedding alone, the last the loss alone.
    assert accounted_chunk_counts(126, 128, (1, 1)) == [0] + [1] * 126 + [0]
    # PP 16 x VP 4: two slots per chunk, the end chunks one layer short.
    assert accounted_chunk_counts(126, 64, (1, 1)) == [1] + [2] * 62 + [1]
    # Only one slot: the chunk that holds it is short, the other end full (31 + 1 = 32 over 8).
    assert accounted_chunk_counts(31, 8, (1, 0)) == [3] + [4] * 7
    assert accounted_chunk_counts(31, 8, (0, 1)) == [4] * 7 + [3]
    # The cost model's own split shortens the last chunk there, not the first.
    assert layout_chunk_counts(dense_model(num_layers=31), layout(pp=4, vp=2)) == [4] * 7 + [3]
    lo = layout(pp=4, vp=2, account_for_embedding_in_pipeline_split=True)
    assert layout_chunk_counts(dense_model(num_layers=31), lo) == [3] + [4] * 7
    # Ranks hold chunks c, c + pp, ...: rank 0 gets chunk 0 (short) and chunk 4.
    assert [len(s) for s in stage_layers(dense_model(num_layers=31), lo)] == [7, 8, 8, 8]


def test_megatron_divisibility_rules():
    model, c, w = dense_model(num_layers=126), cluster(256), workload(global_batch=1536)
    deep = Layout(tp=4, pp=16, dp=4, vp=8)
    assert "pp*vp (16*8) must not exceed num_layers (126)" in layout_violations(model, c, w, deep)
    assert layout_violations(model, c, w, deep.with_update(BOTH)) == []
    # 126 + 1 = 127 does not divide by 16; 126 + 2 = 128 over 16 is 8 per rank, not a multiple of 3
    one = deep.with_update({"account_for_loss_in_pipeline_split": True})
    assert layout_violations(model, c, w, one) == [
        "account_for_loss_in_pipeline_split needs num_layers + loss (126 + 1 = 127) divisible "
        "by pp (16)"
    ]
    three = Layout(tp=4, pp=16, dp=4, vp=3, **BOTH)
    problems = layout_violations(model, c, workload(global_batch=1536 * 3), three)
    assert problems == [
        "account_for_embedding_in_pipeline_split needs num_layers + embedding + loss per "
        "pipeline rank (128/16 = 8) divisible by vp (3)"
    ]


def test_the_pricer_composes_the_accounted_stages():
    """PP 16 x VP 8 over 126 layers: ranks 0 and 15 hold 7 layers (their end chunks hold the
    embedding / the loss alone), the others 8; the embedding's time stays on rank 0 and the LM
    head's on rank 15 (stage_terms)."""
    model, w = dense_model(num_layers=126), workload(seq_len=4096, global_batch=256)
    p = Pricer(model, cluster(256), w)
    lo = Layout(tp=4, pp=16, dp=4, vp=8, **BOTH)
    counts = p.stage_counts(lo)
    assert counts == [(7, 0)] + [(8, 0)] * 14 + [(7, 0)]
    span = p.spans(lo)
    terms = p.stage_terms(lo, counts, span)
    times = p.layer_times(lo)
    per_layer = (terms[1].compute_s) / 8
    assert terms[0].compute_s == pytest.approx(7 * per_layer + times.embed_s)
    assert terms[15].compute_s == pytest.approx(7 * per_layer + times.head_s)
    e = p.estimate(lo)
    assert e.layout.account_for_loss_in_pipeline_split
    # The cached even counts of (pp, vp) never serve an accounted layout, nor the other way.
    loss_only = Layout(tp=4, pp=4, dp=16, vp=2, account_for_loss_in_pipeline_split=True)
    plain = Layout(tp=4, pp=4, dp=16, vp=2)
    m31 = Pricer(dense_model(num_layers=31), cluster(256), w)
    embed_only = loss_only.with_update(
        {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": False}
    )
    assert m31.stage_counts(plain) == [(8, 0), (8, 0), (8, 0), (7, 0)]  # the last rank short
    assert m31.stage_counts(embed_only) == [(7, 0), (8, 0), (8, 0), (8, 0)]  # not the cached one
    assert m31.stage_counts(loss_only) == [(8, 0), (8, 0), (8, 0), (7, 0)]


def test_an_own_split_is_refused_with_the_flags():
    model, w = dense_model(num_layers=30), workload(global_batch=64)
    p = Pricer(model, cluster(32), w)
    lo = Layout(tp=4, pp=4, dp=2, vp=2, **BOTH)
    with pytest.raises(InvalidInput, match="layers_per_stage: a split of its own cannot be given"):
        p.estimate(lo, layers_per_stage=(3, 4, 4, 4, 4, 4, 4, 3))


def test_frameworks():
    """Megatron and torchtitan (first / last_stage_less_layers) run the split; Megatron-DeepSpeed
    partitions transformer layers only."""
    model = dense_model(num_layers=30)
    lo = Layout(tp=4, pp=4, dp=2, **BOTH)
    assert profile_violations(MEGATRON, model, lo) == []
    assert profile_violations(TORCHTITAN, model, lo.with_update({"zero_stage": 0})) == []
    assert profile_violations(DEEPSPEED, model, lo.with_update({"zero_stage": 0})) == [
        "account_for_embedding/loss_in_pipeline_split: Megatron-DeepSpeed partitions "
        "transformer layers only (PipelineModule partition_method 'type:transformer')"
    ]


@pytest.mark.parametrize("bad", [1, "true", "yes", None])
def test_strict_booleans(bad):
    with pytest.raises(ValueError, match="account_for_loss_in_pipeline_split"):
        Layout(tp=1, account_for_loss_in_pipeline_split=bad)
