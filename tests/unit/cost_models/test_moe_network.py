"""MoE traffic as it is sent and the schedules that hide it (issue 16), with hand-computed values."""

from __future__ import annotations

import factories
import pytest

import models_zoo
from cost_models import comm, estimate
from cost_models.errors import InvalidInput
from cost_models.pipeline import dualpipe_bubble_s, inflight_chunks
from cost_models.specs import LinkTier, Workload

GB = 1e9


def tier(name: str, domain: int | None, bw: float, **kw: object) -> LinkTier:
    return LinkTier.model_validate(
        {"name": name, "domain_size": domain, "bandwidth_gb_per_s": bw, "latency_us": 0.0, **kw}
    )


def test_expected_distinct_is_hypergeometric() -> None:
    # One pick always hits one bin.
    assert comm.expected_distinct(2, 1, 1) == pytest.approx(1.0)
    # 2 bins of 2 items, 2 picks: P(a bin gets none) = C(2,2)/C(4,2) = 1/6, so 2 x 5/6.
    assert comm.expected_distinct(2, 2, 2) == pytest.approx(5 / 3)
    # Picking every item hits every bin.
    assert comm.expected_distinct(4, 3, 12) == pytest.approx(4.0)


def test_per_expert_copies_cross_each_tier() -> None:
    nvl, ib = tier("nvlink", 8, 200), tier("ib", None, 50)
    # EP 64 over 8 nodes, top-8: 8 x 63/64 copies leave the GPU, 8 x 56/64 = 7 leave the node.
    got = comm.moe_tier_copies([8, 64], 8, 256, dedup=False, max_nodes=None, tiers=(nvl, ib))
    assert got == pytest.approx([8 * 63 / 64, 7.0])


def test_per_node_dedup_small_case_by_hand() -> None:
    nvl, ib = tier("nvlink", 2, 200), tier("ib", None, 50)
    # 4 GPUs on 2 nodes, one expert each, top-2. Distinct nodes D = 2(1 - C(2,2)/C(4,2)) = 5/3,
    # of which (2-1)/2 are remote: 5/6 copies over IB. Distinct GPUs G = 4(1 - C(3,2)/C(4,2))
    # = 2, of which (2-1)/2 are not the receiving GPU: 1 copy over NVLink.
    got = comm.moe_tier_copies([2, 4], 2, 4, dedup=True, max_nodes=None, tiers=(nvl, ib))
    assert got == pytest.approx([1.0, 5 / 6])


def test_node_limited_routing_cuts_deepseek_ib_copies() -> None:
    nvl, ib = tier("nvlink", 8, 200), tier("ib", None, 50)
    got = comm.moe_tier_copies([8, 64], 8, 256, dedup=True, max_nodes=4, tiers=(nvl, ib))
    # 4 reachable nodes of 32 experts: P(node missed) = prod_{i<8} (96-i)/(128-i).
    miss = 1.0
    for i in range(8):
        miss *= (96 - i) / (128 - i)
    distinct_nodes = 4 * (1 - miss)
    assert got[1] == pytest.approx(distinct_nodes * 7 / 8)
    assert 3.0 < got[1] < 3.3  # vs 7 copies per token without de-duplication
    unlimited = comm.moe_tier_copies([8, 64], 8, 256, dedup=True, max_nodes=None, tiers=(nvl, ib))
    assert got[1] < unlimited[1] < 7.0


_deepseek = factories.deepseek_v3_recipe


def test_fp8_dispatch_bf16_combine() -> None:
    from cost_models import topology
    from cost_models.stage import ep_exchange_s

    model, cluster, work, layout = _deepseek()
    # Without latency the times are bytes over bandwidth: their ratio is the bytes' ratio.
    zero = tuple(t.model_copy(update={"latency_us": 0.0}) for t in cluster.tiers)
    cluster = cluster.model_copy(update={"tiers": zero})
    span = topology.spans(cluster, layout)["ep"]
    d8, c8, _ = ep_exchange_s(model, cluster, work, layout, list(span))
    d16, c16, _ = ep_exchange_s(
        model, cluster, work.model_copy(update={"precision": "bf16"}), layout, list(span)
    )
    assert c8 == pytest.approx(c16)
    assert d8 / d16 == pytest.approx((1 + 4 / 128) / 2, rel=1e-9)



def test_megatron_flex_dispatch_sends_bf16_under_fp8() -> None:
    """Megatron's flex dispatcher hands DeepEP the bf16 hidden states (fused_a2a.fused_dispatch,
    no fp8 path; HybridEP 'we do not support fp8 dispatch'): its profile sets ep_dispatch_fp8
    False, so an fp8 run's dispatch costs what its combine does; DeepSeek's ('other') keeps fp8."""
    from cost_models import topology
    from cost_models.framework import MEGATRON, OTHER
    from cost_models.memory import buffer_bytes
    from cost_models.stage import ep_exchange_s

    model, cluster, work, layout = _deepseek()
    # Scale-out efficiency at DeepEP's measured fractions' floor (0.855): bytes alone set the ratio
    # (DeepEP's dispatch and combine kernels otherwise run at their own measured rates).
    zero = tuple(
        t.model_copy(update={"latency_us": 0.0, "efficiency": min(t.efficiency, 0.85) if j else t.efficiency})
        for j, t in enumerate(cluster.tiers)
    )
    cluster = cluster.model_copy(update={"tiers": zero})
    span = list(topology.spans(cluster, layout)["ep"])
    stated = Workload(seq_len=4096, global_batch_seqs=15360, precision="fp8", moe_dispatcher="deepep")
    mcore, own = MEGATRON.workload(stated), OTHER.workload(stated)
    assert not mcore.ep_dispatch_fp8 and own.ep_dispatch_fp8
    d_m, c_m, _ = ep_exchange_s(model, cluster, mcore, layout, span)
    d_o, c_o, _ = ep_exchange_s(model, cluster, own, layout, span)
    assert d_m == pytest.approx(c_m, rel=1e-12) and c_m == pytest.approx(c_o, rel=1e-12)
    assert d_o / d_m == pytest.approx((1 + 4 / 128) / 2, rel=1e-9)
    # Staging buffers: rows x hidden x (dispatch + combine bytes) = (2 + 2) vs (1 + 2).
    rows_h = 4096 * 8 * model.hidden_size  # micro-batch 1 x seq 4096, top-8, tp 1
    grads = buffer_bytes(model, mcore, layout, 1) - buffer_bytes(model, own, layout, 1)
    assert grads == pytest.approx(rows_h * 1.0, rel=1e-12)

def test_mpft_matches_single_plane_multi_rail() -> None:
    """DeepSeek measured MPFT and a multi-rail fat-tree within 0.1 % (arXiv 2505.09343)."""
    mpft = models_zoo.load_cluster("deepseek-v3-mpft")
    single = mpft.model_copy(
        update={
            "tiers": (mpft.tiers[0],)
            + tuple(t.model_copy(update={"kind": "switch", "rails": 1}) for t in mpft.tiers[1:])
        }
    )
    model, _, work, layout = _deepseek(pp_schedule="dualpipe")
    for dispatcher in ("alltoall", "deepep"):
        w = work.model_copy(update={"moe_dispatcher": dispatcher})
        a = estimate(model, mpft, w, layout).tokens_per_s_per_gpu
        b = estimate(model, single, w, layout).tokens_per_s_per_gpu
        assert abs(a - b) / b < 0.02, dispatcher


def test_dualpipe_bubble_by_hand() -> None:
    # (PP/2 - 1)(F&B + B - 3W): F&B = 3 s, compute 3 s (F 1, B 2, W 1), no recompute: 1 x (3 + 2 - 3).
    assert dualpipe_bubble_s(4, 3.0, 3.0, 0.0) == pytest.approx(2.0)
    assert dualpipe_bubble_s(2, 3.0, 3.0, 0.0) == 0.0
    assert dualpipe_bubble_s(16, 3.0, 3.0, 0.5) == pytest.approx(7 * (3.0 + 0.5 - 1.0))


def test_dualpipe_memory_bubble_and_rules() -> None:
    model, cluster, work, base = _deepseek()
    dual = base.model_copy(update={"pp_schedule": "dualpipe"})
    a, b = estimate(model, cluster, work, base), estimate(model, cluster, work, dual)
    # Two copies of the parameters (and their gradients): rank r holds stages r and pp - 1 - r
    # (deepseek-ai/DualPipe examples/example_dualpipe.py); optimizer states of its own stage.
    p = base.pp
    for r, sb in enumerate(b.stage_memory):
        sa, mirror = a.stage_memory[r], a.stage_memory[p - 1 - r]
        assert sb.weights_gib == pytest.approx(sa.weights_gib + mirror.weights_gib)
        assert sb.gradients_gib == pytest.approx(sa.gradients_gib + mirror.gradients_gib)
        assert sb.optimizer_gib == pytest.approx(sa.optimizer_gib)
    assert inflight_chunks(dual, 0, 120) == 17 and inflight_chunks(dual, 15, 120) == 17
    assert b.breakdown_s["bubble"] < a.breakdown_s["bubble"] / 2
    # All-to-all hidden behind the paired chunk's compute: exposed well below link-busy time.
    assert b.breakdown_s["ep_comm"] < 0.5 * b.comm_total_s["ep"]
    with pytest.raises(InvalidInput, match="even pp"):
        estimate(model, cluster, work, dual.model_copy(update={"pp": 1, "dp": 2048}))
    with pytest.raises(InvalidInput, match="2\\*pp"):
        estimate(model, cluster, work.model_copy(update={"global_batch_seqs": 1024}), dual)


def test_ep_overlap_hides_all_to_all_behind_compute() -> None:
    model, cluster, work, base = _deepseek()
    work = work.model_copy(update={"global_batch_seqs": 16384})
    base = base.model_copy(update={"pp": 8, "dp": 256, "vp": 2})
    over = base.model_copy(update={"ep_overlap": True})
    a, b = estimate(model, cluster, work, base), estimate(model, cluster, work, over)
    # The same bytes cross the links (per stage; the slowest stage may change), less is exposed.
    assert b.breakdown_s["ep_comm"] < 0.5 * a.breakdown_s["ep_comm"]
    assert b.step_time_s < a.step_time_s
    with pytest.raises(InvalidInput, match="virtual pipeline"):
        estimate(model, cluster, work, over.model_copy(update={"vp": 1}))


def test_deepseek_v3_published_layout_within_15_percent() -> None:
    """DeepSeek-V3, 2,048 H800, PP16 EP64 ZeRO-1, DualPipe, FP8: 1,542 tokens/s/GPU published
    (report Table 1: 180K GPU-hours per trillion tokens)."""
    model, cluster, work, layout = _deepseek(pp_schedule="dualpipe")
    got = estimate(model, cluster, work, layout).tokens_per_s_per_gpu
    assert abs(got - 1542) / 1542 < 0.15


def test_flex_wire_fractions_from_the_published_logical_bandwidths() -> None:
    """Each back-end's benchmark counts a token once per distinct destination node, its own node
    included; by symmetry of the benchmark's routing a distinct node is the sender's own with
    probability 1/N, so (N-1)/N of the logical GB/s crosses the NIC (CX7: 50 GB/s line rate)."""
    logical = {  # (dispatch, combine) GB/s at 2 / 4 / 8 nodes, from the READMEs
        "deepep": {2: (43, 43), 4: (58, 57), 8: (51, 50)},
        "hybridep": {2: (54.47, 53.35), 4: (47.36, 52.53), 8: (41.24, 46.57)},
    }
    for backend, rows in logical.items():
        for nodes, (d, c) in rows.items():
            wire = (d * (nodes - 1) / nodes / 50, c * (nodes - 1) / nodes / 50)
            assert comm.FLEX_WIRE_FRACTION[backend][nodes] == pytest.approx(wire, abs=5e-5)
    # 3 nodes take the 2-node figure (the largest measured count not above), 16 the 8-node one.
    assert comm.flex_wire_fractions("hybridep", 3) == comm.FLEX_WIRE_FRACTION["hybridep"][2]
    assert comm.flex_wire_fractions("deepep", 16) == comm.FLEX_WIRE_FRACTION["deepep"][8]


def test_flex_exchange_moves_at_the_backends_measured_rate_by_hand() -> None:
    """Across 2 nodes HybridEP reaches 0.5447 / 0.5335 of line rate (dispatch / combine) where the
    IB tier's NCCL efficiency is 0.9: its scale-out bytes take 0.9 / 0.5447 and 0.9 / 0.5335 as
    long; NVLink is unchanged; a tier already below the measured fraction is not slowed."""
    from cost_models.stage import ep_exchange_s

    model = models_zoo.load_model("qwen3-30b-a3b")
    nvl, ib = tier("nvlink", 8, 450, efficiency=0.8), tier("ib", None, 50, efficiency=0.9)
    cluster = models_zoo.load_cluster("dgx-h100").model_copy(update={"tiers": (nvl, ib)})
    layout = factories.layout(ep=16, dp=16)
    base = Workload(seq_len=4096, global_batch_seqs=1024, precision="bf16", moe_dispatcher="deepep")
    hybrid = base.model_copy(update={"moe_flex_backend": "hybridep"})
    span = [8, 16]
    _, _, busy_h = ep_exchange_s(model, cluster, hybrid, layout, span)
    slow_ib = cluster.model_copy(update={"tiers": (nvl, ib.model_copy(update={"efficiency": 0.5}))})
    _, _, busy_ref = ep_exchange_s(model, slow_ib, hybrid, layout, span)
    # bf16 dispatch and combine carry equal bytes: the IB busy time scales by their mean factor
    # against the same bytes at the tier's own 0.9 (0.5 / 0.9 of the 0.5-efficiency tier's time).
    factor = (0.9 / 0.5447 + 0.9 / 0.5335) / 2
    assert busy_h[1] == pytest.approx(busy_ref[1] * 0.5 / 0.9 * factor, rel=1e-12)
    assert busy_h[0] == pytest.approx(busy_ref[0], rel=1e-12)
    d_h, c_h, _ = ep_exchange_s(model, cluster, hybrid, layout, span)
    d_e, c_e, _ = ep_exchange_s(model, cluster, base, layout, span)
    assert d_h < d_e and c_h < c_e  # DeepEP V1 at 2 nodes: 0.43 of line rate
