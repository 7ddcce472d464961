"""Invariants that hold whatever the split, so a term divided by the wrong group breaks them.

Optimizer state is conserved over the ranks: summed over every GPU of every pipeline stage, the
Adam moments (plus the fp32 master below ZeRO-3, where it is the resident weight shard instead)
are the model's parameters times their bytes, times the replicas that hold a copy (HSDP's
dp / dp_shard; 1 where ZeRO shards over all of DP). Whatever the TP, PP, EP, ETP or shard group,
a layout that divides some parameters by the wrong group breaks it: HSDP of a MoE model did
(memory.shard_groups divided the experts by all of dp) until 2026-11-29. And HSDP with one replica
is sharding over all of dp, in memory and in DP traffic."""

from __future__ import annotations

import pytest

import models_zoo
from cost_models.memory import moment_bytes
from cost_models.params import total_params
from cost_models.specs import Layout
from planner import api

CASES = [
    ("qwen3-30b-a3b", 32, {"dp": 32, "zero_stage": 3, "dp_shard": 8}),
    ("qwen3-30b-a3b", 32, {"tp": 2, "dp": 16, "zero_stage": 3, "dp_shard": 4}),  # etp 2
    ("qwen3-30b-a3b", 32, {"dp": 32, "ep": 8, "zero_stage": 3}),
    ("qwen3-30b-a3b", 32, {"tp": 2, "pp": 2, "dp": 8, "ep": 8, "zero_stage": 2}),
    ("mixtral-8x7b", 32, {"dp": 32, "zero_stage": 3, "dp_shard": 16}),
    # HSDP with EP: the experts over efsdp = dp_shard*cp*tp / ep, replicated like the rest
    ("qwen3-30b-a3b", 32, {"tp": 2, "dp": 16, "ep": 8, "zero_stage": 3, "dp_shard": 8}),
    ("mixtral-8x7b", 32, {"pp": 2, "dp": 16, "ep": 4, "zero_stage": 2, "dp_shard": 8}),
    ("mixtral-8x7b", 32, {"tp": 2, "pp": 4, "dp": 4, "ep": 8, "zero_stage": 3}),
    ("llama3.1-8b", 16, {"dp": 16, "zero_stage": 3, "dp_shard": 4}),
    ("llama3.1-8b", 16, {"tp": 2, "pp": 2, "dp": 4, "zero_stage": 2}),
]


@pytest.mark.parametrize(("name", "gpus", "degrees"), CASES)
def test_optimizer_state_summed_over_the_ranks_is_the_models(name, gpus, degrees):
    model = models_zoo.load_model(name)
    cluster = models_zoo.load_cluster("dgx-h100", gpus)
    work = api.make_workload(model, seq_len=4096, global_batch=256)
    tp = degrees.get("tp", 1)
    layout = Layout(micro_batch=1, sequence_parallel=tp > 1, **degrees)
    e = api.estimate(model, cluster, layout, work, framework="torchtitan")
    lo = e.layout
    ranks_per_stage = lo.tp * lo.cp * lo.dp
    summed = sum(s.optimizer_gib for s in e.stage_memory) * 2**30 * ranks_per_stage
    per_param = moment_bytes(work) + (0 if lo.zero_stage == 3 else 4)
    replicas = lo.dp // lo.dp_shard if lo.dp_shard else 1
    # within 0.1 %: TP-replicated norms and biases are held whole on every TP rank
    assert summed == pytest.approx(total_params(model) * per_param * replicas, rel=1e-3)


ONE_REPLICA = [
    (name, tp, 1) for name in ("qwen3-30b-a3b", "mixtral-8x7b", "llama3.1-8b") for tp in (1, 2)
] + [("qwen3-30b-a3b", 2, 8), ("mixtral-8x7b", 2, 8), ("qwen3-30b-a3b", 1, 4)]


@pytest.mark.parametrize(("name", "tp", "ep"), ONE_REPLICA)
def test_hsdp_with_one_replica_prices_as_sharding_over_all_of_dp(name, tp, ep):
    """dp_shard = dp is one replica: the same states and the same gradient and parameter
    traffic as ZeRO-3 over all of dp (the two-level collectives' replica all-reduce is over
    one rank), with EP too (the experts' own efsdp mesh is then all of the expert-DP group),
    to rounding: the same link-busy and exposed DP time and step. Before 2026-11-29 a MoE
    model's HSDP traffic left its experts out, and HSDP had no edge buckets
    (stage.dp_edge_buckets_s: exposed DP up to 12 % below full sharding's, DeepSeek-V3 TP1 PP8
    DP32 EP32 on 256 H100, 0.140 vs 0.160 s)."""
    model = models_zoo.load_model(name)
    cluster = models_zoo.load_cluster("dgx-h100", 32)
    work = api.make_workload(model, seq_len=4096, global_batch=128)
    dp = 32 // tp
    kw = {"tp": tp, "dp": dp, "ep": ep, "micro_batch": 4 * tp, "recompute": "full"}
    kw["zero_stage"] = 3
    kw["sequence_parallel"] = tp > 1
    full = api.estimate(model, cluster, Layout(**kw), work, framework="torchtitan")
    one = api.estimate(model, cluster, Layout(**kw, dp_shard=dp), work, framework="torchtitan")
    assert one.peak_memory_gib == pytest.approx(full.peak_memory_gib, rel=1e-9)
    assert one.comm_total_s["dp"] == pytest.approx(full.comm_total_s["dp"], rel=1e-9)
    assert one.breakdown_s["dp_comm"] == pytest.approx(full.breakdown_s["dp_comm"], rel=1e-9)
    assert one.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
