"""cost_models.goodput: each formula against hand-computed numbers (docs/goodput.md)."""

from __future__ import annotations

import math

import pytest

from cost_models import goodput as G
from cost_models import params as P
from cost_models.estimate import estimate
from tests import factories as F


def test_daly_interval_matches_daly_2006_figures():
    # Daly (2006) figs. 3-5: delta = 5 min, M = 24 h / 6 h / 15 min -> 117 / 57 / 9.1 min.
    minute = 60.0
    assert G.daly_interval_s(5 * minute, 24 * 60 * minute) / minute == pytest.approx(116.7, abs=0.05)
    assert G.daly_interval_s(5 * minute, 6 * 60 * minute) / minute == pytest.approx(56.7, abs=0.05)
    assert G.daly_interval_s(5 * minute, 15 * minute) / minute == pytest.approx(9.1, abs=0.05)
    # delta >= 2M: checkpoint every M.
    assert G.daly_interval_s(100.0, 40.0) == 40.0


def test_young_interval():
    # sqrt(2 x 60 s x 86,400 s) = sqrt(10,368,000) = 3,219.9 s
    assert G.young_interval_s(60.0, 86_400.0) == pytest.approx(3219.94, abs=0.01)


def test_daly_ettr_past_float_range_is_the_same_formula_in_logs():
    # Issue 28 fuzz: an interval + checkpoint of 1e6 s against a 100 s MTBF made e^x overflow
    # (OverflowError). The share is tau / (M e^(R/M) (e^x - 1)): about e^-10,000 here, 0.0.
    assert G.daly_ettr(10, 1e6, 600, 100) == 0.0
    assert G.daly_ettr(10, 0, 1e6, 100) == 0.0  # a restart far longer than the MTBF
    # Either side of the switch to logs the two forms agree.
    m = 100.0
    for x in (G.EXP_SAFE - 7.0, G.EXP_SAFE - 6.0 - 1e-9):
        tau, delta = 50.0, x * m - 50.0
        plain = tau / (m * math.exp(6.0) * math.expm1(x))
        assert G.daly_ettr(tau, delta, 6.0 * m, m) == pytest.approx(plain, rel=1e-9)
    above = G.daly_ettr(50.0, (G.EXP_SAFE - 5.0) * m - 50.0, 6.0 * m, m)
    assert above == pytest.approx(50.0 / (m * math.exp(6.0) * math.expm1(G.EXP_SAFE - 5.0)))


def test_daly_ettr_against_first_order_hand_value():
    # tau 3600, delta 60, R 600, M 86400: first order tau/(tau+delta) (1-(tau+delta)/2M)(1-R/M)
    # = 0.98361 x 0.97882 x 0.99306 = 0.95607
    assert G.daly_ettr(3600, 60, 600, 86_400) == pytest.approx(0.95607, abs=5e-4)
    # No failures: only the checkpoint pause costs.
    assert G.daly_ettr(3600, 60, 600, math.inf) == pytest.approx(3600 / 3660)
    # ETTR never beats e^(-R/M) (the goodput search bound, ettr_upper_bound).
    for tau in (1.0, 100.0, 10_000.0):
        assert G.daly_ettr(tau, 0.0, 600, 86_400) <= math.exp(-600 / 86_400)


def llama3_cluster(num_gpus: int = 16_384):
    from models_zoo import load_cluster

    return load_cluster("llama3-roce-24k").model_copy(update={"num_gpus": num_gpus})


def test_llama3_record_rates_scale_back_to_the_record():
    # 466 interruptions in 54 days on 16,384 H100 = 8.630 per day, 419 of them unexpected.
    c = llama3_cluster()
    assert G.scale_out_links(c) == pytest.approx(G.LLAMA3_LINKS)
    per_day = G.interruptions_per_day(G.Reliability(), c)
    assert sum(per_day.values()) == pytest.approx(466 / 54)
    assert per_day["planned"] == pytest.approx(47 / 54)
    assert per_day["hbm"] == pytest.approx(72 / 54)


def test_rates_scale_with_units():
    # 64 GPUs = 8 nodes behind one non-blocking IB tier: 64 NICs, 64 links.
    c = F.cluster(num_gpus=64)
    assert G.job_units(c) == {"gpu": 64.0, "node": 8.0, "nic": 64.0, "link": 64.0}
    per_day = G.interruptions_per_day(G.Reliability(), c)
    assert per_day["gpu"] == pytest.approx(190 / (16_384 * 54) * 64)
    assert per_day["host"] == pytest.approx(46 / (2_048 * 54) * 8)
    assert per_day["network"] == pytest.approx(35 / (G.LLAMA3_LINKS * 54) * 64)
    # 2:1 taper halves the uplinks; one node uses no NIC or link.
    assert G.scale_out_links(F.cluster(num_gpus=64, oversubscription=2.0)) == 32.0
    assert G.job_units(F.cluster(num_gpus=8))["nic"] == 0.0
    assert G.job_units(F.cluster(num_gpus=8))["link"] == 0.0


def test_every_default_rate_cites_its_source():
    rel = G.Reliability()
    for name, c in rel.components.items():
        assert "arXiv 2407.21783" in c.source, name
    assert "assumption" in rel.planned.source
    assert sum(sum(v[0].values()) for v in G.LLAMA3_UNEXPECTED.values()) == 419


def test_two_point_expected_max():
    # 1 + 0.5 (1 - 0.9^10) = 1 + 0.5 x 0.651322 = 1.325661
    assert G.expected_max_two_point(10, 0.1, 0.5) == pytest.approx(1.325661, abs=1e-6)
    assert G.expected_max_two_point(10, 0.0, 0.5) == 1.0
    assert G.expected_max_two_point(3, 1.0, 0.5) == 1.5


def test_table_expected_max_without_replacement():
    # Two GPUs drawn from {1, 1, 2}: max is 1 only for the pair of ones (1 of 3 pairs): 5/3.
    assert G.expected_max_table(2, (1.0, 2.0, 1.0)) == pytest.approx(5 / 3)
    # The whole table: its maximum.
    assert G.expected_max_table(3, (1.0, 2.0, 1.0)) == pytest.approx(2.0)
    # More GPUs than rows: with replacement, 1 x (1/2)^2 + 2 x 3/4 = 1.75 from {1, 2}, n = 2...
    # n = 3 > K = 2: P(max = 1) = 1/8 -> 1/8 + 2 x 7/8 = 1.875
    assert G.expected_max_table(3, (1.0, 2.0)) == pytest.approx(1.875)


def test_spare_free_probability():
    # One spare, 0.5 nodes out on average: P(none out) = e^-0.5
    assert G.spare_free_probability(1, 0.25, 2.0) == pytest.approx(math.exp(-0.5))
    # Two spares: e^-0.5 (1 + 0.5)
    assert G.spare_free_probability(2, 0.25, 2.0) == pytest.approx(1.5 * math.exp(-0.5))
    assert G.spare_free_probability(0, 0.25, 2.0) == 0.0


def dense_total_params(m) -> float:
    return (
        m.num_layers * (P.attention_params(m) + P.dense_mlp_params(m))
        + P.embedding_params(m)
        + P.lm_head_params(m)
    )


def test_checkpoint_size_follows_the_sharding():
    m = F.dense_model()
    w = F.workload()
    total = dense_total_params(m)
    lo = F.layout(tp=2, pp=1, dp=4, zero_stage=1)
    balanced = G.checkpoint_size(m, lo, w, None, "balanced")
    # 2 + 4 + 8 = 14 B per parameter, spread over all 8 ranks.
    assert balanced.total_bytes == pytest.approx(14 * total)
    assert balanced.max_rank_bytes == pytest.approx(14 * total / 8)
    # The first replica writes its bf16 TP shard (2 B / tp) and its ZeRO-1 optimizer share.
    first = G.checkpoint_size(m, lo, w, None, "first_replica")
    assert first.max_rank_bytes == pytest.approx(2 * total / 2 + 12 * total / 8)
    # ZeRO-0: the first replica holds the whole optimizer of its TP shard: 14 B / tp.
    z0 = G.checkpoint_size(m, lo.model_copy(update={"zero_stage": 0}), w, None, "first_replica")
    assert z0.max_rank_bytes == pytest.approx(14 * total / 2)


def test_checkpoint_cost_modes():
    c = F.cluster(num_gpus=64)
    size = G.CheckpointSize(max_rank_bytes=10e9, total_bytes=640e9)
    rel = G.Reliability(storage_gb_per_s=100.0, node_storage_gb_per_s=40.0)
    # Aggregate 640 GB / 100 GB/s = 6.4 s; a node's 8 ranks x 10 GB at 40 GB/s = 2 s.
    blocking = G.checkpoint_cost(size, c, rel)
    assert blocking == G.CheckpointCost(6.4, 0.0, 6.4, 6.4)
    # Async: pause for 10 GB over PCIe 5 x16 (63 GB/s), then 6.4 s to become durable.
    cost = G.checkpoint_cost(size, c, rel.model_copy(update={"checkpoint": "async"}))
    assert cost.blocking_s == pytest.approx(10 / 63)
    assert cost.persist_s == pytest.approx(6.4)
    # In memory: to a peer over IB (50 GB/s x 0.9 efficiency), read back the same way.
    mem = G.checkpoint_cost(size, c, rel.model_copy(update={"checkpoint": "in_memory"}))
    assert mem.persist_s == pytest.approx(10 / 45)
    assert mem.load_s == pytest.approx(10 / 45)
    # Slow storage: the node's port binds (10 GB x 8 / 4 GB/s = 20 s).
    slow = rel.model_copy(update={"node_storage_gb_per_s": 4.0})
    assert G.storage_write_s(size, c, slow) == pytest.approx(20.0)


def test_straggler_extra_follows_the_pipeline_formula():
    m, c, w = F.dense_model(), F.cluster(num_gpus=64), F.workload(global_batch=64)
    lo = F.layout(tp=2, pp=4, dp=8, micro_batch=1)
    e = estimate(m, c, w, lo)
    rel = G.Reliability(straggler_fraction=0.01, straggler_slowdown=0.3)
    mb = e.num_microbatches  # 64 / 8 = 8
    t_c = (e.breakdown_s["compute"] + e.breakdown_s["recompute"]) / mb
    job = 0.3 * (1 - 0.99**64)
    group = 0.3 * (1 - 0.99**2)  # the TP pair
    expected = t_c * (mb * job + 3 * group)
    assert G.straggler_extra_s(e, 64, rel) == pytest.approx(expected)
    assert G.straggler_extra_s(e, 64, G.Reliability()) == 0.0


def test_goodput_composes_the_parts():
    m, c, w = F.dense_model(), F.cluster(num_gpus=64), F.workload(global_batch=64)
    e = estimate(m, c, w, F.layout(tp=2, pp=1, dp=32, micro_batch=1, zero_stage=1))
    rel = G.Reliability()
    g = G.goodput(m, c, w, e, rel)
    it = G.interruptions(rel, c)
    mtbf = 86_400 / it.unexpected_per_day
    assert g.mtbf_s == pytest.approx(mtbf)
    assert g.interruptions_per_day == pytest.approx(it.unexpected_per_day + it.planned_per_day)
    # The interval is Daly's optimum in whole steps.
    steps = round(G.daly_interval_s(g.checkpoint_blocking_s, mtbf) / e.step_time_s)
    assert g.checkpoint_interval_s == pytest.approx(steps * e.step_time_s)
    ettr = G.daly_ettr(g.checkpoint_interval_s, g.checkpoint_blocking_s, g.restart_s, mtbf)
    ettr *= 1 - it.planned_per_day * g.restart_s / 86_400
    assert g.ettr == pytest.approx(ettr)
    assert g.goodput_tokens_per_s_per_gpu == pytest.approx(e.tokens_per_s_per_gpu * ettr)
    assert g.ettr <= G.ettr_upper_bound(rel, c)
    # Hot spares: paid for in GPUs, they remove the wait for a replacement node.
    spared = G.goodput(m, c, w, e, rel.model_copy(update={"spare_nodes": 1}))
    assert spared.spare_gpus == 8
    assert spared.restart_s < g.restart_s
    assert spared.goodput_tokens_per_s_per_gpu == pytest.approx(
        e.tokens_per_s_per_gpu * spared.ettr * 64 / 72
    )
    assert set(g.contract()) == {
        "interruptions_per_day", "checkpoint_interval_s", "checkpoint_write_s", "restart_s",
        "ettr", "goodput_tokens_per_s_per_gpu",
    }


def test_no_failures_no_checkpoints():
    m, c, w = F.dense_model(), F.cluster(num_gpus=64), F.workload(global_batch=64)
    e = estimate(m, c, w, F.layout(tp=2, pp=1, dp=32, micro_batch=1, zero_stage=1))
    zero = G.ComponentRate(per_unit_per_day=0.0, unit="gpu", hardware=False)
    rel = G.Reliability(components={"gpu": zero}, planned=zero)
    g = G.goodput(m, c, w, e, rel)
    assert g.ettr == 1.0
    assert g.contract()["checkpoint_interval_s"] is None
    assert g.goodput_tokens_per_s_per_gpu == pytest.approx(e.tokens_per_s_per_gpu)
