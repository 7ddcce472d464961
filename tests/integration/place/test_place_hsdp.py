"""HSDP on a real allocation: the placement prices torchtitan's dp_shard x cp and dp_replicate
groups on the placed map (which leaves and pods each placed group spans), in the CP-SAT
objective, the validator and the re-price alike. Before, pricing.placed_pieces had no HSDP
kinds, so both the objective and the re-price read those two kinds off the layout's own rank
order on an ideal cluster, wherever the placement put the groups."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from ortools.sat.python import cp_model
from test_place_allocation import _small
from test_place_model import random_counts

import models_zoo
from cost_models.estimate import estimate
from cost_models.rankmap import rank_groups
from cost_models.specs import Axis, Layout
from planner import api
from planner.place import bound, evaluate, oracle, pricing
from planner.place import constraints as cons
from planner.place import counts as C
from planner.place import model as M

# Three leaves of 3, 3 and 4 hosts; leaves 0 and 1 in pod 0, leaf 2 in pod 1; tors 1:1, pods
# 3:1, the core 7:1 (tiers: nvlink 8 GPUs, tor, pod, aggregation).
LEAVES, PODS, TAPER = [0, 0, 0, 1, 1, 1, 2, 2, 2, 2], [0, 0, 1], {2: 3.0, 3: 7.0}
# TP8 on whole nodes: one unit = one node = one dp index; dp 6 = 3 replicas x shard groups of 2
# (canonical ranks tp, cp, dp_shard, dp_replicate, pp: torchtitan's mesh order).
HSDP = Layout(tp=8, dp=6, pp=1, dp_shard=2, zero_stage=3)


def _case(layout=HSDP, leaves=LEAVES, pods=PODS, drained=()):
    spec, cluster, wl, alloc = _small(leaves, list(drained), layout, pods=pods, taper=TAPER)
    return spec, cluster, wl, alloc, M.unit_model(spec, cluster, wl, layout, alloc)


@pytest.mark.parametrize("order", [None, (Axis.PP, Axis.DP, Axis.TP, Axis.CP)])
def test_placed_hsdp_groups_are_the_launchers(order):
    """pricing's numpy groups are cost_models.rankmap's (torchtitan's mesh), HSDP kinds too."""
    lo = Layout(tp=2, cp=2, dp=12, pp=2, dp_shard=3, zero_stage=3)
    if order is not None:
        lo = lo.model_copy(update={"order": order})
    got = pricing.group_lists(lo, moe=False)
    assert {"dp_shard", "dp_replicate"} <= set(got)
    assert got == rank_groups(lo, moe=False)


# Hand count. Units in chunk order: leaf 0, leaf 1, leaf 2; dp index i on the i-th node.
# - counts (3, 3, 0): dp 0-2 under leaf 0, 3-5 under leaf 1. Shard group {2, 3} has one member
#   under each tor (piece 1), both in pod 0: dp_shard (node, tor, pod, all) = 1, 1, 2, 2.
#   Replicas {0, 2, 4}: 0 and 2 under leaf 0, 4 under leaf 1, all in pod 0: 1, 1, 3, 3.
# - counts (2, 2, 2): every shard group whole under one tor: 1, 2, 2, 2; replicas {0, 2, 4} one
#   under each tor, 4 in pod 1 alone: 1, 1, 1, 3.
# The layout's own order on the ideal cluster (what both the objective and the re-price read
# before, whatever the map) says dp_shard 1, 2, 2, 2 and dp_replicate 1, 1, 3, 3 for both.
HAND = {
    (3, 3, 0): ([1, 1, 2, 2], [1, 1, 3, 3]),
    (2, 2, 2): ([1, 2, 2, 2], [1, 1, 1, 3]),
}


def _hand_price(spec, cluster, wl, alloc, um, counts) -> float:
    """The estimate of the counts' map with HSDP's spans counted by hand (HAND), every other
    kind and the uplink steps read off the map as before."""
    hosts = M.build_map(um, [list(counts)])
    spans = pricing.placed_spans(alloc, um.layout, hosts, moe=False)
    shard, replicas = HAND[counts]
    spans = {**spans, "dp_shard": shard, "dp_replicate": replicas}
    steps = pricing.uplink_steps(cluster, alloc, um.layout, hosts, moe=False)
    pipe = pricing.uplink_steps(
        cluster, alloc, um.layout, hosts, moe=False, kinds=pricing.PIPELINE_KINDS
    )
    e = estimate(
        spec, cluster, wl, um.layout, spans=spans, uplink_steps=steps, pipeline_uplink_steps=pipe
    )
    return e.step_time_s


def test_hsdp_spans_read_off_the_placed_map():
    """The re-price and the model's objective of both maps are the estimate on the hand-counted
    spans (HAND); they differ, where the layout-order spans priced the shard and replica
    groups alike on both (3, 3, 0 re-priced 2.94 s instead of 4.22 s)."""
    spec, cluster, wl, alloc, um = _case()
    assert um.capacity == [3, 3, 4]
    steps = {}
    for counts, (shard, replicas) in HAND.items():
        want = _hand_price(spec, cluster, wl, alloc, um, counts)
        hosts = M.build_map(um, [list(counts)])
        assert pricing.price(spec, cluster, wl, um.layout, alloc, hosts).step_time_s == want
        assert evaluate.objective_us(um, [list(counts)]) == round(want * M.US)
        spans = pricing.placed_spans(alloc, um.layout, hosts, moe=False)
        assert (spans["dp_shard"], spans["dp_replicate"]) == (shard, replicas)
        steps[counts] = want
    assert steps[(3, 3, 0)] > steps[(2, 2, 2)]


def test_cpsat_optimum_is_the_true_optimum_with_hsdp():
    """CP-SAT's OPTIMAL is proved on the true price: its map keeps every shard group under one
    tor, its objective is the hand-counted price of that map (it was 2.58 s, the replicas
    priced inside a pod, for a map whose replicas cross the 7:1 core: 4.01 s), the brute force
    over every count matrix priced on its map agrees, and the counting bound holds."""
    spec, cluster, wl, alloc, um = _case()
    sol = M.solve(um, time_limit_s=30)
    assert sol.status == "OPTIMAL" and sol.counts == [[2, 2, 2]]
    assert abs(sol.objective_us - _hand_price(spec, cluster, wl, alloc, um, (2, 2, 2)) * M.US) < 2
    best_us, _ = oracle.counted_optimum(spec, cluster, wl, alloc, um)
    assert abs(sol.objective_us - best_us) <= 2
    repriced = pricing.price(spec, cluster, wl, um.layout, alloc, sol.host_of_rank)
    assert abs(round(repriced.step_time_s * M.US) - sol.objective_us) <= 2
    assert M.objective_us(um, sol.counts) == sol.objective_us
    assert bound.lower_bound_us(um) <= sol.objective_us


# (leaf of each host, drained, layout, pods): a unit of 4 dp indices over shard groups of 6
# (cuts inside a group at p = 1, 2 units), PP with HSDP, TP8 x CP2 units of two nodes, and those
# over leaves of odd size (two split blocks: the objective is an upper bound there).
RANDOM = [
    ([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3], [], Layout(tp=2, dp=12, pp=1, dp_shard=6, zero_stage=3),
     [0, 0, 1, 1]),
    ([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3], [], Layout(tp=2, dp=16, pp=2, dp_shard=8, zero_stage=2),
     [0, 0, 1, 1]),
    ([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3], [], Layout(tp=8, cp=2, dp=4, pp=1, dp_shard=2,
     zero_stage=3), [0, 0, 1, 1]),
    ([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5, 5], [], Layout(tp=8, cp=2, dp=4, pp=2,
     dp_shard=2, zero_stage=2), [0, 1, 0, 1, 0, 1]),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(RANDOM)))
def test_random_counts_price_as_their_maps(case):
    """evaluate.objective_us equals the map's re-price on random feasible counts (at least it
    where blocks are split), and the fully hinted CP-SAT model prices its hint as the
    validator does."""
    from ortools.sat.python import cp_model

    leaves, drained, layout, pods = RANDOM[case]
    spec, cluster, wl, alloc, um = _case(layout, leaves, pods, drained)
    assert len(set(um.shard_cuts)) > 1 and um.split_blocks == (2 if case == 3 else 0)
    rng = random.Random(case)
    for _ in range(6):
        counts = random_counts(um, layout.pp, rng)
        assert evaluate.infeasibility(um, counts) is None
        e = pricing.price(spec, cluster, wl, um.layout, alloc, M.build_map(um, counts))
        priced, objective = round(e.step_time_s * M.US), evaluate.objective_us(um, counts)
        if um.split_blocks:
            assert objective >= priced - 2
        else:
            assert abs(priced - objective) <= 2
    hint = sorted(C.greedy_counts(um), key=lambda row: -row[0])
    v = M.build(um, hint)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(v.sat_model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    assert round(solver.objective_value) == evaluate.objective_us(um, hint)


# Uplink senders under HSDP, counted by hand. Counts (3, 2, 1): dp 0-2 under leaf 0, 3-4 under
# leaf 1 (pod 0, 6 hosts = 48 GPUs), 5 under leaf 2 (pod 1, 32 GPUs). Shard groups {0, 1},
# {2, 3}, {4, 5}; replica groups {0, 2, 4}, {1, 3, 5}. Pod 0's uplinks (tier 3, 7:1): dp 0 and 2
# keep both groups inside pod 0, dp 1 and 3 have replica 5 in pod 1, dp 4 has shard partner 5:
# 3 of the 5 nodes send, 24 GPUs -> ceil(4 x 24 / 48) = 2 (every node's DP x CP group, all six,
# leaves pod 0: 40 GPUs -> 4, what both sides counted before). Pod 1: 8 of 32 -> 1. Tor
# uplinks (tier 2, 3:1): leaf 0 runs dp 0-2, each with a replica outside: 24 of 24 -> 4.
SENDERS_COUNTS, SENDERS_STEPS = (3, 2, 1), {2: 4, 3: 2}


def test_hsdp_uplink_senders_are_the_ranks_whose_collectives_leave():
    """The gradient window's senders under HSDP are the ranks whose dp_shard x cp or
    dp_replicate group leaves the switch (hand count above), in the re-price, the validator and
    the CP-SAT model alike; before, every rank whose DP x CP group left was counted (pod 0's step
    4, not 2), in both."""
    spec, cluster, wl, alloc, um = _case()
    counts = [list(SENDERS_COUNTS)]
    hosts = M.build_map(um, counts)
    assert pricing.uplink_steps(cluster, alloc, um.layout, hosts, moe=False) == SENDERS_STEPS
    spans = pricing.placed_spans(alloc, um.layout, hosts, moe=False)
    pipe = pricing.uplink_steps(
        cluster, alloc, um.layout, hosts, moe=False, kinds=pricing.PIPELINE_KINDS
    )

    def priced(steps):
        return estimate(
            spec, cluster, wl, um.layout, spans=spans, uplink_steps=steps,
            pipeline_uplink_steps=pipe,
        ).step_time_s

    want = priced(SENDERS_STEPS)
    assert want < priced({2: 4, 3: 4})  # the replicas' all-reduce crosses the 7:1 core
    assert pricing.price(spec, cluster, wl, um.layout, alloc, hosts).step_time_s == want
    assert evaluate.uplink_qs(um, counts) == (4, 2)
    assert evaluate.objective_us(um, counts) == round(want * M.US)
    v = M.build(um, counts)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(v.sat_model) == cp_model.OPTIMAL
    assert round(solver.objective_value) == round(want * M.US)


def test_hsdp_kept_is_the_set_count():
    """evaluate.hsdp_kept (and the CP-SAT form, on fixed runs) equals counting the dp indices of
    every run [lo, hi) of R x S whose shard block and replica group both lie in it, R, S <= 5;
    and a partial run sends at least min(run, S) of them (bound.py's step 3)."""
    for s, r in itertools.product(range(1, 6), repeat=2):
        for lo, hi in itertools.combinations_with_replacement(range(r * s + 1), 2):
            run = set(range(lo, hi))
            want = sum(
                1
                for i in run
                if set(range(i // s * s, i // s * s + s)) <= run
                and {i % s + k * s for k in range(r)} <= run
            )
            assert evaluate.hsdp_kept(lo, hi, s, r) == want
            if 0 < hi - lo < r * s:
                assert hi - lo - want >= min(hi - lo, s)


@pytest.mark.parametrize("layout", [HSDP, Layout(tp=8, dp=6, pp=1, dp_shard=3, zero_stage=3)])
def test_hsdp_kept_expr_is_exact_at_its_best(layout):
    """The CP-SAT form of hsdp_kept, maximised on every fixed run of units, reaches it exactly
    (never above: the model cannot under-count a sender)."""
    _, _, _, _, um = _case(layout)
    d = um.units_per_stage
    a = um.unit_gpus // layout.tp
    for lo, hi in itertools.combinations_with_replacement(range(d + 1), 2):
        m = cp_model.CpModel()
        x, y = m.new_int_var(lo, lo, "lo"), m.new_int_var(hi, hi, "hi")
        kept, _ = cons.hsdp_kept_expr(m, um, x, y, "t")
        m.maximize(kept)
        solver = cp_model.CpSolver()
        assert solver.solve(m) == cp_model.OPTIMAL
        want = evaluate.hsdp_kept(a * lo, a * hi, layout.shard_dp, layout.replicate_dp)
        assert round(solver.objective_value) == want


# HSDP with split blocks, counted by hand. Four leaves of 3 hosts, pods {0, 1} and {2, 3};
# TP8 x CP2 blocks of two nodes (cp 0 on the first, cp 1 on the second), dp 6 = 2 replicas x
# shard groups of 3. The leaves hold one block each, so two blocks are made of the leftover
# nodes, one per pod (hosts 2 + 5, 8 + 11), and the counts are forced: dp 0, 1 under leaves 0, 1,
# dp 2 split over them, dp 3, 4 under leaves 2, 3, dp 5 split over them. A shard group x cp
# (one tp index) {0, 1, 2} x {cp 0, cp 1} keeps dp 0 and dp 2's cp 0 under leaf 0: 3 members,
# 3 under leaf 1, 6 in pod 0; one member per node: dp_shard (node, tor, pod, all) = 1, 3, 6, 6.
# The model takes the split block's part (1 member per leaf) as the tor piece: 1, 1, 6, 6.
SPLIT = Layout(tp=8, cp=2, dp=6, pp=1, dp_shard=3, zero_stage=3)
SPLIT_LEAVES, SPLIT_PODS = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3], [0, 0, 1, 1]


def test_hsdp_split_blocks_report_an_upper_bound():
    """With split blocks the objective prices the shard group's piece at the block's part, so it
    sits above the re-priced map (4.80 s against 2.89 s here); the report says the status and
    bound are about that objective, an upper bound of the placed step (before, the solver line
    read as a proof about the plan's price)."""
    from planner.place import joint
    from planner.report.placed import solver_text

    spec, cluster, wl, alloc, um = _case(SPLIT, SPLIT_LEAVES, SPLIT_PODS)
    assert um.split_blocks == 2 and um.capacity == [1] * 6
    counts = [[1] * 6]
    hosts = M.build_map(um, counts)
    spans = pricing.placed_spans(alloc, um.layout, hosts, moe=False)
    assert spans["dp_shard"] == [1, 3, 6, 6]
    steps = pricing.uplink_steps(cluster, alloc, um.layout, hosts, moe=False)
    assert evaluate.uplink_qs(um, counts) == tuple(steps[j] for j in um.uplink_tiers)
    pipe = pricing.uplink_steps(
        cluster, alloc, um.layout, hosts, moe=False, kinds=pricing.PIPELINE_KINDS
    )

    def priced(shard):
        return estimate(
            spec, cluster, wl, um.layout, spans={**spans, "dp_shard": shard},
            uplink_steps=steps, pipeline_uplink_steps=pipe,
        ).step_time_s

    placed = pricing.price(spec, cluster, wl, um.layout, alloc, hosts).step_time_s
    assert placed == priced([1, 3, 6, 6])
    objective = evaluate.objective_us(um, counts)
    assert objective == round(priced([1, 1, 6, 6]) * M.US)
    assert objective > round(placed * M.US) + 1_000_000  # 4.80 s against 2.89 s
    p = joint.place_layout(spec, cluster, wl, estimate(spec, cluster, wl, SPLIT), alloc)
    assert p.source == "cp-sat" and p.solver["status"] == "OPTIMAL"
    assert p.solver["objective"] > p.placed.step_time_s == placed
    text = solver_text(p)
    assert "on the model's objective, an upper bound of the placed step" in text
    assert "2 block(s) split over leaves" in text
    spec, cluster, wl, alloc, _ = _case()  # no split block: the objective is the placed step
    whole = joint.place_layout(spec, cluster, wl, estimate(spec, cluster, wl, HSDP), alloc)
    assert whole.split_blocks == 0 and "upper bound" not in solver_text(whole)
    assert round(whole.placed.step_time_s * M.US) == round(whole.solver["objective"] * M.US)


# HSDP with EP (torchtitan): the routed experts are sharded on their own (dp_replicate, efsdp)
# mesh. TP2 x EP4 on 8-GPU nodes: a unit is one node, 4 dp indices, two EP groups of 2 dp
# indices x tp; shard groups of 8 dp indices (2 units), efsdp = 8 * 2 / 4 = 4 ranks (every
# second dp index of a shard block), 2 replicas.
HSDP_EP = Layout(tp=2, dp=16, ep=4, dp_shard=8, zero_stage=3, sequence_parallel=True)


def _moe_case(layout=HSDP_EP, leaves=(0, 0, 0, 1, 1, 1, 2, 2), pods=(0, 0, 1)):
    spec, cluster, wl, alloc = _small(list(leaves), [], layout, pods=list(pods), taper=TAPER)
    spec = models_zoo.load_model("qwen3-30b-a3b")
    wl = api.make_workload(spec, global_batch=8 * layout.dp)
    return spec, cluster, wl, alloc, M.unit_model(spec, cluster, wl, layout, alloc)


def test_placed_hsdp_expert_groups_are_torchtitans_sparse_mesh():
    """pricing's numpy groups carry the experts' shard and replica groups, the same as
    cost_models.rankmap's, which are torchtitan's (pp, dp_replicate, efsdp, ep) mesh."""
    lo = Layout(tp=2, cp=2, dp=8, pp=2, ep=8, dp_shard=4, zero_stage=3)
    got = pricing.group_lists(lo)
    assert {"edp_shard", "edp_replicate"} <= set(got) and got == rank_groups(lo)
    efsdp = lo.dp_shard * lo.cp * lo.tp // lo.ep
    mesh = np.arange(lo.world_size).reshape(lo.pp, lo.replicate_dp, efsdp, lo.ep)
    shards = sorted(sorted(mesh[p, r, :, e].tolist()) for p, r, e in np.ndindex(2, 2, 8))
    assert got["edp_shard"] == shards
    assert got["edp_replicate"] == got["dp_replicate"]  # the dense replicas' ranks
    assert "edp_shard" not in pricing.group_lists(lo.with_update({"ep": 1}))


def test_hsdp_with_ep_counts_price_as_their_maps():
    """The model's objective on every count matrix is the re-price of its map, the experts'
    shard and replica spans included (tables._Spans._hsdp_spans derives them from the dense
    shard pieces), and CP-SAT's OPTIMAL is the brute-force optimum."""
    spec, cluster, wl, alloc, um = _moe_case()
    assert len(set(um.shard_cuts)) > 1
    hosts_of = {}
    for counts in itertools.product(*(range(c + 1) for c in um.capacity)):
        if sum(counts) != um.units_per_stage:
            continue
        hosts = M.build_map(um, [list(counts)])
        spans = pricing.placed_spans(alloc, um.layout, hosts)
        hosts_of[counts] = spans["edp_shard"]
        e = pricing.price(spec, cluster, wl, um.layout, alloc, hosts)
        assert abs(evaluate.objective_us(um, [list(counts)]) - round(e.step_time_s * M.US)) <= 2
    assert len({tuple(s) for s in hosts_of.values()}) > 1  # the maps differ in expert spans
    sol = M.solve(um, time_limit_s=30)
    best_us, _ = oracle.counted_optimum(spec, cluster, wl, alloc, um)
    assert sol.status == "OPTIMAL" and abs(sol.objective_us - best_us) <= 2
