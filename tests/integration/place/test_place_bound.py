"""Issue 27: the counting bound (planner/place/bound.py) and the top-level relaxation
(planner/place/relax.py) never exceed the placement model's optimum: checked against brute
force over every count matrix (the model's own objective, and every host permutation where
units are single nodes) and CP-SAT's proven optima; the bound is not the tables' cheapest
entry where capacities force the uplink steps and lone parts."""

from __future__ import annotations

import random

import pytest
from test_place_allocation import PIPE_TAPERED, SMALL, TAPERED, _small

from cost_models.estimate import estimate
from cost_models.specs import Layout
from planner.place import bound, oracle, relax
from planner.place import model as M
from planner.place.evaluate import infeasibility, objective_us
from planner.place.joint import place_layout


def _cases():
    out = [(leaves, drained, layout, [0, 0, 1, 1], None) for leaves, drained, layout in SMALL]
    return out + list(TAPERED) + list(PIPE_TAPERED)


def _multi_node(seed: int):
    """Seeded allocations of at most 12 nodes with two-node blocks (often split blocks), two
    pods behind 3:1 / 7:1 uplinks; None where the healthy hosts are too few."""
    rng = random.Random(seed)
    n_leaves = rng.randint(2, 4)
    pp = rng.choice([1, 2, 3])
    tp, cp = rng.choice([(16, 1), (8, 2), (4, 4)])
    leaves = sorted(rng.randint(0, n_leaves - 1) for _ in range(rng.randint(2 * pp, 12)))
    drained = [i for i in range(len(leaves)) if rng.random() < 0.15]
    dp = max(1, (len(leaves) - len(drained) - rng.randint(0, 1)) // (2 * pp))
    pods = [rng.randint(0, 1) for _ in range(n_leaves)]
    layout = Layout(tp=tp, cp=cp, pp=pp, dp=dp)
    spec, cluster, wl, alloc = _small(leaves, drained, layout, pods=pods, taper={2: 3.0, 3: 7.0})
    if layout.world_size > 8 * len(alloc.hosts):
        return None
    try:
        return spec, cluster, wl, alloc, M.unit_model(spec, cluster, wl, layout, alloc)
    except M.Unplaceable:
        return None


def _check_against_brute_force(spec, cluster, wl, alloc, um):
    lb = bound.lower_bound_us(um)
    model_us, _ = oracle.counted_optimum(spec, cluster, wl, alloc, um, tables=True)
    assert lb <= model_us
    top = relax.solve_top(um, time_limit_s=20)
    if top is not None:
        assert top.bound_us <= model_us
        if top.status == "OPTIMAL":
            assert top.objective_us <= model_us
            filled = relax.fill_leaves(um, top)
            assert infeasibility(um, filled) is None
            packed = relax.improve_pods(um, top, filled, time_limit_s=5)
            assert infeasibility(um, packed) is None
            assert objective_us(um, packed) >= max(lb, top.bound_us)
    sol = M.solve(um, time_limit_s=30)
    assert sol.status == "OPTIMAL" and sol.objective_us == model_us
    assert sol.bound_us == sol.objective_us
    return lb, model_us


@pytest.mark.parametrize(("leaves", "drained", "layout", "pods", "taper"), _cases())
def test_bounds_never_exceed_the_brute_force_optimum(leaves, drained, layout, pods, taper):
    """Whole-node units behind tapered uplinks (the TAPERED / PIPE_TAPERED cases price the
    steps below the full taper): both bounds <= the optimum over every count matrix."""
    spec, cluster, wl, alloc = _small(leaves, drained, layout, pods=pods, taper=taper)
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    _check_against_brute_force(spec, cluster, wl, alloc, um)


@pytest.mark.parametrize("seed", range(10))
def test_bounds_with_split_blocks(seed):
    """Two-node blocks on odd leaves: split blocks, lone parts, pods."""
    case = _multi_node(seed)
    if case is None:
        pytest.skip("too few healthy hosts, or no placement")
    _check_against_brute_force(*case)


def test_counting_bound_against_every_host_permutation():
    """Units of one node: the bound is at most the best of every assignment of units to
    hosts (the counting argument itself is not assumed)."""
    layout = Layout(tp=8, pp=2, dp=2)
    spec, cluster, wl, alloc = _small(
        [0, 0, 0, 1, 1, 2], [], layout, pods=[0, 1, 1], taper={2: 3.0, 3: 7.0}
    )
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    best = oracle.host_permutation_optimum(spec, cluster, wl, alloc, um)
    assert bound.lower_bound_us(um) <= best
    top = relax.solve_top(um, time_limit_s=10)
    assert top is not None and top.bound_us <= best + 2  # table entries are rounded to 1 us


def test_random_counts_never_price_below_the_bound():
    """Many random count matrices of the multi-node cases (every one the model accepts)."""
    rng = random.Random(5)
    for seed in range(10):
        case = _multi_node(seed)
        if case is None:
            continue
        um = case[-1]
        lb = bound.lower_bound_us(um)
        pp, d = um.layout.pp, um.units_per_stage
        for _ in range(40):
            left, counts = list(um.capacity), []
            for _ in range(pp):
                row = [0] * len(left)
                for _ in range(d):
                    j = rng.choice([j for j, c in enumerate(left) if c])
                    row[j] += 1
                    left[j] -= 1
                counts.append(row)
            assert infeasibility(um, counts) is None
            assert objective_us(um, counts) >= lb


def test_forced_steps_and_lone_parts_by_hand():
    """Pods of 4 and 2 one-node leaves and TP8 PP2 DP3 (stages of 3 nodes, 6 of 6 nodes used,
    slack 0): the 2-node pod holds no whole stage, so all its 16 GPUs send upward in the
    gradient window (q = 4 at the pods' uplinks); the 4-node pod holds one and sends 8 of 32
    (q = 1), so the tier's least step is 4. Every leaf is one node and forced: k_0 <= 1."""
    layout = Layout(tp=8, pp=2, dp=3)
    spec, cluster, wl, alloc = _small(
        [0, 1, 2, 3, 4, 5], [], layout, pods=[0, 0, 0, 0, 1, 1], taper={2: 3.0, 3: 7.0}
    )
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    lim = bound.limits(um)
    assert lim.slack == 0 and lim.kmax[0] == 1
    top_tier = um.uplink_levels.index(len(um.levels) - 1)
    assert lim.q_lb[top_tier] == 4
    lb = bound.lower_bound_us(um)
    cheapest = min(min(row) for row in um.class_cost) + min(min(r) for r in um.pp_table)
    assert lb > cheapest  # the tables' cheapest entry (CP-SAT's old bound) is below it
    sol = M.solve(um, time_limit_s=30)
    assert sol.status == "OPTIMAL" and lb <= sol.objective_us
    # TP16 (two-node blocks) on a one-node leaf and a three-node leaf: the leftover node of
    # the second and the first's only node make a split block, with a part on a leaf that
    # holds no whole block: lone at the leaves for every placement.
    layout = Layout(tp=16, pp=1, dp=2)
    spec, cluster, wl, alloc = _small([0, 1, 1, 1], [], layout)
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    assert um.split_blocks == 1 and um.capacity[:2] == [0, 1]
    assert bound.limits(um).lone_forced == [1]
    model_us, _ = oracle.counted_optimum(spec, cluster, wl, alloc, um, tables=True)
    assert bound.lower_bound_us(um) == model_us  # forced lone: the bound is the optimum here


def test_a_fill_that_meets_the_bound_ends_the_search_as_optimal():
    """36 leaves in 3 pods: the top-level phase runs (joint._top_phase); whatever it finds, the
    reported bound is at most the objective and at least the counting bound, and the placed
    map is no worse than either baseline."""
    rng = random.Random(3)
    leaves = [i for i in range(M.LARGE_LEAVES + 4) for _ in range(rng.randint(1, 3))]
    layout = Layout(tp=8, pp=2, dp=24)
    pods = [i // 12 for i in range(M.LARGE_LEAVES + 4)]
    spec, cluster, wl, alloc = _small(leaves, [], layout, pods=pods, taper={2: 3.0, 3: 7.0})
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    p = place_layout(spec, cluster, wl, estimate(spec, cluster, wl, layout), alloc, time_limit_s=4)
    s = p.solver
    assert bound.lower_bound_us(um) / 1e6 - 1e-6 <= s["best_bound"] <= s["objective"]
    if s["gap"] == 0.0:
        assert s["status"] == "OPTIMAL"
    assert p.placed.step_time_s <= min(p.scheduler.step_time_s, p.best_order.step_time_s)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_large_random_allocations_through_the_top_phase(seed):
    """32-48 uneven leaves in 2-3 pods behind 3:1 / 7:1, 5 % drained, one- and two-node blocks,
    pp 1-4 (the top-level phase runs): placed <= both baselines, counting bound <= reported
    bound <= objective, and the objective is the re-priced map where no block is split."""
    rng = random.Random(seed)
    n_leaves = rng.randint(32, 48)
    leaves = [i for i in range(n_leaves) for _ in range(rng.randint(1, 4))]
    drained = [i for i in range(len(leaves)) if rng.random() < 0.05]
    tp, cp = rng.choice([(8, 1), (8, 2), (16, 1), (4, 1)])
    pp = rng.choice([1, 2, 3, 4])
    stage_nodes = (len(leaves) - len(drained) - rng.randint(0, 2)) // pp
    dp = stage_nodes // max(1, tp * cp // 8) * max(1, 8 // (tp * cp))
    layout = Layout(tp=tp, cp=cp, pp=pp, dp=dp)
    pods = [i * rng.randint(2, 3) // n_leaves for i in range(n_leaves)]
    spec, cluster, wl, alloc = _small(leaves, drained, layout, pods=pods, taper={2: 3.0, 3: 7.0})
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    p = place_layout(spec, cluster, wl, estimate(spec, cluster, wl, layout), alloc, time_limit_s=2)
    s = p.solver
    assert p.placed.step_time_s <= min(p.scheduler.step_time_s, p.best_order.step_time_s)
    assert bound.lower_bound_us(um) / 1e6 - 1e-6 <= s["best_bound"] <= s["objective"]
    if p.source == "cp-sat" and not um.split_blocks:
        assert abs(p.placed.step_time_s - s["objective"]) <= 2e-6
