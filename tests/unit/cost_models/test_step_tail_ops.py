"""The per-step tail's own measured kernels (cost_models.stage.ADAM_OP, CHUNK_CAT_OP): where a
cluster's kernel tables hold the op, its streaming rate (KernelBook.streaming_bytes_per_s) prices
the Adam step's bytes and FSDP2's reduce-scatter copy-in; without it every byte stays at the HBM
figure, exactly as before. Expected values by hand."""

from __future__ import annotations

import pytest
from factories import cluster, dense_model

from cost_models.kernels import HBM_STREAMING_BYTES, KernelBook
from cost_models.memory import StageParams
from cost_models.pricer import Pricer
from cost_models.specs import KernelTables, Layout, Workload
from cost_models.stage import ADAM_OP, CHUNK_CAT_OP, CLIP_OP, fsdp_copies_s, stage_optimizer_s

P = 1e9
HBM = 1e12
SP = StageParams(dense=0.75 * P, expert=0.25 * P, largest_layer=0.1 * P, num_layers=8)
ADAM = 0.5e12  # bytes/s
CAT = 0.25e12


def _w(**over) -> Workload:
    # these price the optimizer step's own bytes; the gradient memset of the same tail is
    # tests/unit/cost_models/test_grad_zeroing.py's, the buckets' NaN check
    # test_grad_bucket_passes.py's
    return Workload(seq_len=4096, global_batch_seqs=64, **{"grad_zeroing": False, "grad_nan_check": False, **over})


def _ms(nbytes: float, rate: float) -> float:
    return nbytes / rate * 1e3


def test_streaming_rate_is_the_median_of_the_streaming_rows_only():
    big = HBM_STREAMING_BYTES
    rows = (
        ("copy", big, _ms(big, 3e12)),
        (ADAM_OP, big, _ms(big, 2e12)),
        (ADAM_OP, 4 * big, _ms(4 * big, 2.2e12)),
        (ADAM_OP, 16 * big, _ms(16 * big, 2.6e12)),
        (ADAM_OP, big / 2, _ms(big / 2, 9e12)),  # from L2: says nothing about a step's sizes
    )
    book = KernelBook(KernelTables(memory_bound=rows, source="t"))
    assert book.streaming_bytes_per_s(ADAM_OP) == pytest.approx(2.2e12)
    assert book.streaming_bytes_per_s(CHUNK_CAT_OP) is None
    small = KernelBook(KernelTables(memory_bound=((ADAM_OP, big / 2, 1.0),), source="t"))
    assert small.streaming_bytes_per_s(ADAM_OP) is None


@pytest.mark.parametrize("zero,dp,shard", [(0, 8, 1), (1, 8, 8)])
def test_adam_bytes_at_the_op_rate_the_rest_at_hbm(zero, dp, shard):
    """30 B of Adam per parameter (fp32 moments, bf16 weight write) at the op's rate; the clip
    passes' 12 B at the HBM figure."""
    lo, w = Layout(dp=dp, zero_stage=zero), _w(grad_clip="clip")
    got = stage_optimizer_s(lo, SP, HBM, w, adam_bytes_per_s=ADAM)
    assert got == pytest.approx(P / shard * (30 / ADAM + 12 / HBM), rel=1e-12)
    assert stage_optimizer_s(lo, SP, HBM, w) == pytest.approx(P / shard * 42 / HBM, rel=1e-12)


@pytest.mark.parametrize("clip,extra", [("none", 0), ("norm", 4), ("clip", 12)])
def test_clip_bytes_at_their_own_rate(clip, extra):
    """The clip passes (4 B norm, 8 B scale) at the clip op's rate, Adam at its own."""
    CLIP = 0.8e12
    lo, w = Layout(dp=8, zero_stage=1), _w(grad_clip=clip)
    got = stage_optimizer_s(lo, SP, HBM, w, adam_bytes_per_s=ADAM, clip_bytes_per_s=CLIP)
    assert got == pytest.approx(P / 8 * (30 / ADAM + extra / CLIP), rel=1e-12)
    # a clip rate alone: Adam stays at the HBM figure
    alone = stage_optimizer_s(lo, SP, HBM, w, clip_bytes_per_s=CLIP)
    assert alone == pytest.approx(P / 8 * (30 / HBM + extra / CLIP), rel=1e-12)


def test_bf16_main_grads_cast_stays_at_hbm():
    """Megatron's bf16 main gradients: the shard's cast to fp32 (2 + 4 B) runs before the step,
    its own kernel, at the HBM figure; Adam's 30 B at the op's rate."""
    lo, w = Layout(dp=8, zero_stage=1), _w(grad_clip="none", main_grads="bf16")
    got = stage_optimizer_s(lo, SP, HBM, w, adam_bytes_per_s=ADAM)
    assert got == pytest.approx(P / 8 * (30 / ADAM + 6 / HBM), rel=1e-12)


def test_chunk_cat_bytes_at_the_op_rate():
    """ZeRO-3, 4 micro-batches, shard group 8 (test_clip_and_fsdp_copies.py by hand): the 4
    reduce-scatter copy-ins (6 B per element) at the op's rate, gathers and accumulation at
    HBM."""
    lo, m, s = Layout(dp=8, zero_stage=3), 4, 8
    got = fsdp_copies_s(lo, SP, m, HBM, _w(fsdp_copies="fsdp2"), chunk_cat_bytes_per_s=CAT)
    gathers = 2 * m * (P / s * 6 + P * 4)
    accumulate = (m - 1) * P / s * 12
    assert got == pytest.approx((gathers + accumulate) / HBM + m * P * 6 / CAT, rel=1e-12)


def test_pricer_reads_the_rates_from_the_cluster_tables():
    big = 8 * HBM_STREAMING_BYTES
    rows = (
        (ADAM_OP, big, _ms(big, ADAM)),
        (CLIP_OP, big, _ms(big, 0.8e12)),
        (CHUNK_CAT_OP, big, _ms(big, CAT)),
    )
    base = cluster()
    tabled = base.model_copy(
        update={"kernels": KernelTables(memory_bound=(("copy", big, 1.0), *rows), source="t")}
    )
    m, w = dense_model(), _w(fsdp_copies="fsdp2")
    priced = Pricer(m, tabled, w)
    assert priced.adam_bytes_per_s == pytest.approx(ADAM)
    assert priced.chunk_cat_bytes_per_s == pytest.approx(CAT)
    assert priced.clip_bytes_per_s == pytest.approx(0.8e12)
    plain = Pricer(m, base, w)
    assert plain.adam_bytes_per_s is None and plain.chunk_cat_bytes_per_s is None
    assert plain.clip_bytes_per_s is None
    lo = Layout(dp=8, zero_stage=3)
    sp = plain.stage_params(lo, plain.stage_counts(lo)[0], 0)
    # slower per-op rates than the HBM figure: the tail grows, and only the tail
    assert priced.stage_optimizer_s(lo, sp) > plain.stage_optimizer_s(lo, sp)
