"""Hand-computed values for each cost-model term."""

import math

import pytest
from factories import H100, cluster, dense_model, layout, workload

from cost_models import comm, params
from cost_models.calibration import calibration_for
from cost_models.compute import Gemm, attention_core_flops, gemm_efficiency
from cost_models.memory import StageParams, layer_activation_bytes, state_bytes
from cost_models.pipeline import chunk_layer_counts, inflight_chunks, schedule_time_s
from cost_models.specs import Layout, LinkTier, Workload

NVLINK = LinkTier(
    name="nvlink", domain_size=8, bandwidth_gb_per_s=450, latency_us=3, efficiency=0.8
)
IB = LinkTier(name="ib", domain_size=None, bandwidth_gb_per_s=50, latency_us=8, efficiency=0.9)


def test_llama3_8b_parameter_count_by_hand():
    m = dense_model()  # Llama 3 8B shape
    attn = 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 4096
    mlp = 3 * 4096 * 14336 + 4096
    emb = 128256 * 4096
    assert params.total_params(m) == 32 * (attn + mlp) + emb + emb + 4096 == 8_030_261_248


def test_ring_all_reduce_inside_nvlink():
    t = comm.collective_time_s("all_reduce", 1e9, [8, 8], (NVLINK, IB))
    # Ring (NCCL tuning.cc: 2(n-1) steps of latency) beats tree (2 / 0.92 bytes per byte) here.
    expected = 2 * 7 / 8 * 1e9 / (450e9 * 0.8) + 2 * 7 * 3e-6
    assert t == pytest.approx(expected, rel=1e-12)


def test_hierarchical_all_reduce_across_nodes():
    # 8 GPUs per node x 4 nodes: NVLink bytes on the full payload, IB bytes on 1/8 of it; NCCL's
    # flat ring takes 2 x (32 - 4) NVLink steps and 2 x 3 network steps (tuning.cc nsteps).
    t = comm.collective_time_s("all_reduce", 1e9, [8, 32], (NVLINK, IB))
    nvl = 1.75 * 1e9 / 360e9 + 2 * 28 * 3e-6
    ib = 2 * 3 / 4 * (1e9 / 8) / 45e9 + 2 * 3 * 8e-6
    assert t == pytest.approx(nvl + ib, rel=1e-12)


def test_all_to_all_limited_by_slowest_tier():
    t = comm.all_to_all_time_s(1e9, [8, 64], (NVLINK, IB))
    ib = 1e9 * (64 - 8) / 64 / 45e9
    assert t == pytest.approx(ib + 8e-6 * 6, rel=1e-12)


def test_p2p_and_oversubscription():
    assert comm.p2p_time_s(1e8, IB) == pytest.approx(8e-6 + 1e8 / 45e9)
    tapered = IB.model_copy(update={"oversubscription": 4.0})
    assert comm.p2p_time_s(1e8, tapered) == pytest.approx(8e-6 + 4 * 1e8 / 45e9)
    assert comm.p2p_time_s(1e8, None) == 0.0


def test_gemm_efficiency_shape_rolloff():
    cal = calibration_for("hopper")
    big = gemm_efficiency(Gemm(8192, 8192, 8192), cal, fp8=False)
    assert big == pytest.approx(cal.gemm_efficiency_bf16 * (8192 / (8192 + cal.gemm_half_dim)) ** 3)
    assert gemm_efficiency(Gemm(8192, 512, 8192), cal, fp8=False) < big


def test_causal_attention_flops():
    flops = attention_core_flops(dense_model(), workload(seq_len=4096), Layout())
    assert flops == 4096 * 4096 * 32 * (128 + 128)  # 2 FLOP/MAC x half of s^2 (causal)
    halved = attention_core_flops(dense_model(), workload(seq_len=4096), Layout(tp=2, cp=2))
    assert halved == flops / 4


def test_pipeline_bubble_1f1b_and_interleaved():
    steady, bubble, slowest = schedule_time_s([1.0] * 4, num_microbatches=8, vp=1)
    assert (steady, bubble, slowest) == (8.0, 3.0, 0)
    assert schedule_time_s([1.0] * 4, 8, vp=2)[1] == 1.5
    steady, bubble, slowest = schedule_time_s([1.0, 2.0, 1.0, 1.0], 8, vp=1)
    assert (steady, bubble, slowest) == (16.0, 3.0, 1)


def test_inflight_microbatches():
    assert inflight_chunks(Layout(pp=4), 0, 8) == 4
    assert inflight_chunks(Layout(pp=4), 3, 8) == 1
    assert inflight_chunks(Layout(pp=4), 0, 2) == 2  # fewer micro-batches than stages
    # interleaved rank 0: 2(p-1) + (v-1)p + 1 = 11 chunks of half a stage
    assert inflight_chunks(Layout(pp=4, vp=2), 0, 8) == 5.5


def test_uneven_chunks_go_to_the_middle():
    # 61 = 16 x 3 + 13: thirteen chunks get a 4th layer, the edge chunks keep 3
    assert chunk_layer_counts(61, 16) == [3] + [4] * 13 + [3, 3]
    assert sum(chunk_layer_counts(94, 24)) == 94


def test_zero_state_bytes():
    sp = StageParams(dense=1e9, expert=0.0, largest_layer=1e8, num_layers=10)
    assert state_bytes(sp, Layout(dp=4, zero_stage=0)) == (2e9, 4e9, 12e9)
    assert state_bytes(sp, Layout(dp=4, zero_stage=1)) == (2e9, 4e9, 3e9)
    assert state_bytes(sp, Layout(dp=4, zero_stage=2)) == (2e9, 1e9, 3e9)
    assert state_bytes(sp, Layout(dp=4, zero_stage=2), num_microbatches=4) == (2e9, 4e9, 3e9)
    w, g, o = state_bytes(sp, Layout(dp=4, zero_stage=3))
    # the fp32 master and the 16-bit shard (Workload.zero3_16bit_shard, Megatron's default)
    assert (w, g, o) == ((4 + 2) * 2.5e8 + 2 * 1e8 * 2, 1e9, 2e9)
    no16 = Workload(seq_len=4096, global_batch_seqs=64, zero3_16bit_shard=False)
    # with a workload, Megatron-FSDP's prefetch (Workload.zero3_prefetch_elements, 5e8): the
    # running layer and the 5 gathered ahead of it; one ahead without it
    assert state_bytes(sp, Layout(dp=4, zero_stage=3), 1, no16)[0] == 1e9 + 6 * 1e8 * 2
    one = no16.model_copy(update={"zero3_prefetch_elements": None})
    assert state_bytes(sp, Layout(dp=4, zero_stage=3), 1, one)[0] == 1e9 + 2 * 1e8 * 2


def test_activation_bytes_by_hand():
    m, w = dense_model(), workload(seq_len=4096)
    h, f = 4096, 14336
    per_token = 2 * h + (32 + 2 * 8) * 128 + 2 * f + 2 * h + 32 * 128 + f
    got = layer_activation_bytes(m, w, Layout(), is_moe=False, recompute="none")
    assert got == 4096 * (per_token * 2 + 32 * 4)  # + flash attention's fp32 LSE per head
    assert layer_activation_bytes(m, w, Layout(), is_moe=False, recompute="full") == 4096 * h * 2


def test_estimate_rejects_illegal_layout_with_reason():
    from cost_models import InvalidInput, estimate

    with pytest.raises(InvalidInput, match=r"tp\*pp\*dp\*cp .* must equal the GPU count \(64\)"):
        estimate(dense_model(), cluster(64), workload(), layout(tp=8, dp=4))
    with pytest.raises(InvalidInput, match=r"tp \(64\) must divide num_attention_heads \(32\)"):
        estimate(dense_model(), cluster(64), workload(), layout(tp=64))
    assert math.isfinite(H100.peak_bf16_tflops)
