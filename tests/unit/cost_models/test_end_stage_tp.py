"""The TP collectives outside the transformer layers (stage.end_stage_tp_costs): the input
embedding's on the first pipeline stage, the LM head's and the vocabulary-parallel loss's on the
last. Expected values by hand from each collective's own price on the TP group."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model, layout, workload

from cost_models import framework
from cost_models.commtable import collective_time_s
from cost_models.pricer import Pricer
from cost_models.rankmap import Group
from cost_models.stage import LOSS_ALL_REDUCES, end_stage_tp_costs
from cost_models.terms import Flow


def _priced(model, w, **lo):
    p = Pricer(model, cluster(64), w)
    lay = layout(pp=2, dp=4, **lo)
    span = p.spans(lay)
    first, last = p.end_costs(lay, span)
    tp_span = span[Group.TP]
    t = lay.micro_batch * w.seq_len / lay.cp

    def c(kind: str, size: float = t * model.hidden_size * 2) -> float:
        return collective_time_s(kind, size, tp_span, p.cluster.tiers)

    head_gemm_s = p.layer_times(lay).head.gemm_s
    return first, last, c, c("all_reduce", t * 4), head_gemm_s


def test_megatron_sequence_parallel_hides_the_heads_backward_behind_its_gemms():
    """TP 8 with sequence parallelism: the embedding's reduce-scatter (forward) and all-gather
    (backward) are exposed; the head's forward all-gather and the loss's three all-reduces too;
    its backward all-gather (again, for the weight gradient) and reduce-scatter run async
    beside the dgrad and wgrad GEMMs (128,256 / 8 x 4,096 x 4,096 tokens, far longer), so they
    are link traffic only."""
    w = framework.MEGATRON.workload(workload())
    first, last, c, loss, g = _priced(dense_model(), w, tp=8, sequence_parallel=True)
    rs, ag = c("reduce_scatter"), c("all_gather")
    assert g > max(rs, ag)
    assert first.tp_s == pytest.approx(rs + ag)
    assert first.tp_total_s == pytest.approx(rs + ag)
    assert last.tp_s == pytest.approx(ag + LOSS_ALL_REDUCES * loss)
    assert last.tp_total_s == pytest.approx(ag + LOSS_ALL_REDUCES * loss + ag + rs)
    assert first.compute_s == last.compute_s == 0.0


def test_torchtitan_waits_for_the_heads_backward_reduce_scatter():
    """DTensor's ColwiseParallel keeps the gathered input (no second all-gather) and
    reduce-scatters the input gradient before the backward goes on: exposed whole."""
    w = framework.TORCHTITAN.workload(workload())
    assert w.head_tp_backward == "exposed"
    first, last, c, loss, _g = _priced(dense_model(), w, tp=8, sequence_parallel=True)
    rs, ag = c("reduce_scatter"), c("all_gather")
    assert first.tp_s == pytest.approx(rs + ag)
    assert last.tp_s == pytest.approx(ag + LOSS_ALL_REDUCES * loss + rs)
    assert last.tp_total_s == pytest.approx(last.tp_s)


def test_without_sequence_parallelism_the_embedding_all_reduces():
    """Megatron's embedding all-reduces in forward (identity in backward); the head copies its
    input forward and all-reduces the input gradient async beside the wgrad GEMM."""
    w = framework.MEGATRON.workload(workload())
    first, last, c, loss, g = _priced(dense_model(), w, tp=4, sequence_parallel=False)
    ar = c("all_reduce")
    assert first.tp_s == pytest.approx(ar)
    assert last.tp_s == pytest.approx(LOSS_ALL_REDUCES * loss + max(0.0, ar - g))
    assert last.tp_total_s == pytest.approx(LOSS_ALL_REDUCES * loss + ar)


def test_learned_positions_all_reduce_then_scatter():
    """With a learned position table Megatron does not reduce-scatter the word embeddings
    (language_model_embedding.py reduce_scatter_embeddings): it all-reduces them, adds the
    positions, scatters (no traffic), and gathers the gradient in backward."""
    w = framework.MEGATRON.workload(workload())
    model = dense_model(position_embedding="learned", max_position_embeddings=4096)
    first, _last, c, _loss, _g = _priced(model, w, tp=8, sequence_parallel=True)
    assert first.tp_s == pytest.approx(c("all_reduce") + c("all_gather"))


def test_multi_token_prediction_runs_the_head_the_lookup_and_eh_proj():
    """D = 1: the last stage runs the head and the loss twice and looks the shifted tokens up
    in its own embedding copy once (compute.lm_head_time); each head pass's backward hides
    behind its own GEMM (its FLOP share of the head's GEMM time). The eh_proj, a column-parallel
    Linear(2h -> h): its [t, 2h] input all-gathered forward, the output all-gathered over the
    hidden dim (exposed) and scattered back, whose backward gathers the gradient (exposed); the
    input gradient's reduce-scatter and the second input gather hidden behind the eh_proj's own
    GEMM (its FLOP share), the rest exposed."""
    model = dense_model(mtp_num_layers=1)
    w = framework.MEGATRON.workload(workload())
    first, last, c, loss, g = _priced(model, w, tp=8, sequence_parallel=True)
    rs, ag = c("reduce_scatter"), c("all_gather")
    t = layout().micro_batch * w.seq_len
    rs2, ag2 = (c(k, 2 * t * model.hidden_size * 2) for k in ("reduce_scatter", "all_gather"))
    h, v = model.hidden_size, model.vocab_size
    head_f, proj_f = v / 8 * h, 2 * h * h / 8
    head_hidden, proj_hidden = (g * f / (2 * head_f + proj_f) for f in (head_f, proj_f))
    assert head_hidden > max(rs, ag)
    head = 2 * (ag + LOSS_ALL_REDUCES * loss) + (rs + ag)
    # the second gather beside the dgrad GEMM, the reduce-scatter beside the wgrad GEMM
    proj = ag2 + ag + ag + max(0.0, ag2 - proj_hidden) + max(0.0, rs2 - proj_hidden)
    assert proj > ag2 + 2 * ag  # some of it shows at TP 8
    assert last.tp_s == pytest.approx(head + proj)
    total = 2 * (ag + LOSS_ALL_REDUCES * loss + ag + rs) + (rs + ag) + (ag2 + 2 * ag + ag2 + rs2)
    assert last.tp_total_s == pytest.approx(total)
    assert first.tp_s == pytest.approx(rs + ag)


def test_no_tp_or_no_vocabulary_moves_nothing():
    w = framework.MEGATRON.workload(workload())
    first, last, *_ = _priced(dense_model(), w, tp=1)
    assert first.tp_s == last.tp_s == first.tp_total_s == last.tp_total_s == 0.0
    model = dense_model(vocab_size=None)
    p = Pricer(model, cluster(64), w)
    lay = layout(tp=8, pp=2, dp=4)
    head = p.layer_times(lay).head
    ends = end_stage_tp_costs(model, p.cluster, w, lay, head, p.spans(lay)[Group.TP])
    assert all(x.tp_s == 0.0 for x in ends)


def test_the_end_stages_carry_them_in_the_estimate():
    """estimate(): the first and last stage's exposed TP exceed a middle stage's by exactly
    these terms, and the step's TP link traffic counts them."""
    w = framework.MEGATRON.workload(workload())
    p = Pricer(dense_model(), cluster(64), w)
    lay = layout(tp=8, pp=4, dp=2, sequence_parallel=True)
    span = p.spans(lay)
    terms = p.stage_terms(lay, p.stage_counts(lay), span)
    first, last = p.end_costs(lay, span)
    assert terms[0].tp_s == pytest.approx(terms[1].tp_s + first.tp_s)
    assert terms[3].tp_s == pytest.approx(terms[1].tp_s + last.tp_s)
    assert terms[3].tp_total_s == pytest.approx(terms[1].tp_total_s + last.tp_total_s)
    # TP 8 stays in the NVLink domain: every TP second on the first tier
    assert terms[3].busy_s(Flow.TP, 0) == pytest.approx(terms[3].tp_total_s)
    assert terms[3].busy_s(Flow.TP, 1) == 0.0
