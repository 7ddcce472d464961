"""Global batch range: each plan takes its own batch, plans rank by time per sequence.

Checked against brute force over every batch of small ranges with estimate(): the cost model's
step is affine in the number of micro-batches (so time per sequence never rises with the batch)
and memory never falls with it (candidates.largest_fitting relies on both); the range search
equals the best of the fixed-batch searches; the oracle and CP-SAT agree with a range; bad ranges
exit 2 naming the field.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import factories
import pytest

import planner
from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.estimate import estimate
from cost_models.rules import layout_violations
from cost_models.specs import Layout, Workload
from planner.cli import main
from planner.search import exhaustive
from planner.search import solve as sat
from planner.search.candidates import batch_choices, enumerate_layouts, largest_fitting
from planner.search.scale import per_sequence_quanta
from planner.types import SearchSpace, SolverOptions


def _with_batch(work: Workload, batch: int) -> Workload:
    return work.model_copy(update={"global_batch_seqs": batch})


LAYOUTS = [
    Layout(tp=2, pp=4, dp=2, micro_batch=1, recompute="selective", zero_stage=1),
    Layout(tp=1, pp=4, dp=4, vp=2, micro_batch=1, zero_stage=2),
    Layout(tp=2, pp=2, dp=4, micro_batch=2, zero_stage=3, recompute="full"),
    Layout(tp=4, pp=1, dp=4, micro_batch=1, zero_stage=2),
    Layout(tp=2, pp=2, dp=2, cp=2, micro_batch=1, zero_stage=0),
]


@pytest.mark.parametrize("lo", LAYOUTS, ids=lambda lo: f"pp{lo.pp}vp{lo.vp}z{lo.zero_stage}")
@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_step_is_affine_in_microbatches_and_memory_grows(lo: Layout, moe: bool):
    """step(m) = max over pipeline stages of (m*T_r + C_r), T_r, C_r >= 0 (a stage's exposed DP
    time has a per-micro-batch part under ZeRO-3 and a per-step part, its edge buckets:
    stage.dp_edge_buckets_s): convex and piecewise linear, every piece with a non-negative
    intercept; time per sequence non-increasing; memory non-decreasing."""
    model = factories.moe_model(num_layers=16) if moe else factories.dense_model(num_layers=16)
    cluster = factories.cluster(16)
    work = factories.workload(global_batch=16)
    if moe:
        lo = lo.model_copy(update={"ep": 2})
    step = lo.micro_batch * lo.dp
    # m = 1 .. 12 micro-batches: below and above pp (where memory saturates); interleaving takes
    # multiples of pp only (cost_models.rules).
    ms = [m for m in range(1, 13) if lo.vp == 1 or m % lo.pp == 0]
    ests = [estimate(model, cluster, _with_batch(work, m * step), lo) for m in ms]
    times = [e.step_time_s for e in ests]
    slopes = [(t2 - t1) / (m2 - m1) for (m1, t1), (m2, t2) in itertools.pairwise(zip(ms, times))]
    assert all(s >= 0 for s in slopes)
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(slopes))  # convex
    for (m1, t1), s in zip(zip(ms, times), slopes, strict=False):
        assert t1 - m1 * s >= -1e-9 * t1  # each piece's intercept C >= 0
    per_seq = [t / (m * step) for m, t in zip(ms, times, strict=True)]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(per_seq))
    peaks = [e.peak_memory_gib for e in ests]
    assert all(b >= a for a, b in itertools.pairwise(peaks))


def test_largest_fitting_batch_is_the_best_batch_by_brute_force():
    """For every layout of a small space and several memory limits, the batch largest_fitting
    picks has the smallest time per sequence of all batches in the range that fit."""
    model, cluster = factories.dense_model(num_layers=8), factories.cluster(8)
    lo_b, hi_b = 4, 24
    space = SearchSpace(global_batch_range=(lo_b, hi_b), max_vp=2, search_order=False)
    work = factories.workload(global_batch=hi_b)
    layouts, _ = enumerate_layouts(model, cluster, work, space)
    checked = 0
    for lo in layouts[::7]:
        every = {
            b: estimate(model, cluster, _with_batch(work, b), lo)
            for b in range(lo_b, hi_b + 1)
            if not layout_violations(model, cluster, _with_batch(work, b), lo)  # every legal b
        }
        peaks = sorted({e.peak_memory_gib for e in every.values()})
        for usable in (peaks[0] - 1, *peaks):  # none fit, then each memory threshold
            fitting = {b: e for b, e in every.items() if e.peak_memory_gib <= usable}
            choices = batch_choices(work, space, lo.micro_batch, lo.dp, lo.pp, lo.vp)
            assert sorted(choices, reverse=True) == list(choices) and set(choices) == set(every)
            chosen, _ = largest_fitting(
                choices, lambda b, u=usable, ev=every: ev[b].peak_memory_gib <= u
            )
            if not fitting:
                assert chosen is None
                continue
            best = min(per_sequence_quanta(e.step_time_s, b, hi_b) for b, e in fitting.items())
            assert per_sequence_quanta(every[chosen].step_time_s, chosen, hi_b) == best
            assert chosen == max(fitting)
            checked += 1
    assert checked > 20


def _per_seq_key(e, batch_max: int) -> int:
    return per_sequence_quanta(e.step_time_s, exhaustive.plan_batch(e), batch_max)


@pytest.mark.parametrize("headroom", [0.1, 0.75])
def test_range_equals_best_of_the_fixed_batch_searches(headroom: float):
    model, cluster = factories.dense_model(num_layers=8), factories.cluster(16)
    lo_b, hi_b = 12, 36
    kw = {
        "max_vp": 2,
        "max_pp": 4,
        "micro_batches": (1, 2),
        "memory_headroom": headroom,
        "top_k": 1,
    }
    best_fixed: int | None = None
    for b in range(lo_b, hi_b + 1):
        try:
            r = factories.plan(model, cluster, factories.workload(global_batch=b), **kw)
        except NoFeasiblePlan:
            continue
        key = _per_seq_key(r.best, hi_b)
        best_fixed = key if best_fixed is None else min(best_fixed, key)
    assert best_fixed is not None
    work = factories.workload(global_batch=hi_b)
    ranged = factories.plan(model, cluster, work, global_batch_range=(lo_b, hi_b), **kw)
    assert _per_seq_key(ranged.best, hi_b) == best_fixed
    assert lo_b <= ranged.global_batch() <= hi_b
    assert ranged.workload.global_batch_seqs == ranged.global_batch()
    assert ranged.solver.objective_unit == "s_per_sequence"
    # The objective is the fastest plan's (the recommendation may be a simpler one within the
    # simplicity tolerance).
    fast = ranged.fastest_index
    assert ranged.solver.objective == ranged.ranked[fast].step_time_s / ranged.global_batch(fast)


def test_fixed_batch_as_a_one_point_range_gives_the_same_plans():
    model, cluster = factories.moe_model(num_layers=8), factories.cluster(16)
    work = factories.workload(global_batch=32)
    kw = {"max_vp": 2, "max_pp": 4, "micro_batches": (1, 2), "top_k": 3}
    fixed = factories.plan(model, cluster, work, **kw)
    point = factories.plan(model, cluster, work, global_batch_range=(32, 32), **kw)
    assert [e.layout for e in fixed.ranked] == [e.layout for e in point.ranked]
    assert [e.step_time_s for e in fixed.ranked] == [e.step_time_s for e in point.ranked]
    assert fixed.solver.objective_unit == "step_time_s"
    assert point.solver.objective == pytest.approx(fixed.solver.objective / 32, rel=1e-12)


def _instance(rng: random.Random):
    n = rng.choice([8, 16, 32])
    if rng.random() < 0.5:
        model = factories.dense_model(num_layers=rng.choice([8, 12, 16]), hidden_size=2048)
    else:
        model = factories.moe_model(num_layers=8)
    cluster = factories.cluster(n, ib_gb_per_s=rng.choice([25, 100]))
    lo_b = rng.randint(1, 2 * n)
    hi_b = lo_b + rng.randint(0, 2 * n)
    space = SearchSpace(
        global_batch_range=(lo_b, hi_b),
        micro_batches=tuple(sorted(rng.sample([1, 2, 4], rng.randint(1, 2)))),
        max_vp=rng.choice([1, 2]),
        recompute=tuple(rng.sample(["none", "selective", "full"], rng.randint(1, 2))),
        zero_stages=tuple(sorted(rng.sample([0, 1, 2, 3], rng.randint(1, 2)))),
        search_order=rng.random() < 0.5,
        memory_headroom=rng.choice([0.0, 0.5, 0.8, 0.9]),
        max_pp=4,
        max_cp=2,
        tp=rng.choice([None, 2, 4]),
    )
    work = Workload(seq_len=rng.choice([2048, 4096]), global_batch_seqs=hi_b)
    return model, cluster, work, space, rng.choice([1, 3])


def test_oracle_and_cp_sat_agree_with_a_range():
    rng = random.Random(20261123)
    agreed = infeasible = 0
    for _ in range(24):
        model, cluster, work, space, top_k = _instance(rng)
        opts = SolverOptions(top_k=top_k)
        hi_b = space.global_batch_range[1]
        try:
            want, want_stats, _ = exhaustive.search(model, cluster, work, space, opts)
        except (NoFeasiblePlan, InvalidInput) as err:
            with pytest.raises(type(err)):
                sat.search(model, cluster, work, space, opts)
            infeasible += 1
            continue
        got, got_stats, _ = sat.search(model, cluster, work, space, opts)
        assert [_per_seq_key(e, hi_b) for e in got] == [_per_seq_key(e, hi_b) for e in want]
        assert got_stats.objective == want_stats.objective
        for e in got:  # each plan carries a legal batch of the range, scored at that batch
            b = exhaustive.plan_batch(e)
            lo = e.layout
            assert space.global_batch_range[0] <= b <= hi_b and b % (lo.micro_batch * lo.dp) == 0
            assert estimate(model, cluster, _with_batch(work, b), lo).step_time_s == e.step_time_s
            assert e.peak_memory_gib <= exhaustive.usable_memory_gib(cluster, space)
        agreed += 1
    assert agreed >= 12 and infeasible >= 1


@pytest.mark.parametrize("engine", ["branch-and-bound", "exhaustive"])
def test_memory_bound_batch_below_the_largest_legal_one(engine: str):
    """pp 4 holds min(4 - r, m) micro-batches: at 4 or more the plan does not fit, at 3 it does."""
    model, cluster = factories.dense_model(num_layers=16), factories.cluster(8)
    work = factories.workload(seq_len=8192, global_batch=6)
    pins = {"tp": 2, "pp": 4, "max_cp": 1, "max_vp": 1, "micro_batches": (1,)}
    pins |= {"recompute": ("none",), "zero_stages": (1,)}
    lo = Layout(tp=2, pp=4, dp=1, micro_batch=1, zero_stage=1, sequence_parallel=True)
    peaks = [estimate(model, cluster, _with_batch(work, b), lo).peak_memory_gib for b in (3, 4)]
    assert peaks[0] < peaks[1]
    headroom = 1 - (peaks[0] + peaks[1]) / 2 / cluster.gpu.hbm_gib
    r = factories.plan(
        model, cluster, work, global_batch_range=(1, 6), memory_headroom=headroom, engine=engine,
        **pins,
    )  # fmt: skip
    assert r.global_batch() == 3 and r.best.layout.order == lo.order
    fixed = []  # brute force: one fixed-batch search per batch
    for b in range(1, 7):
        try:
            one = factories.plan(
                model, cluster, _with_batch(work, b), memory_headroom=headroom, **pins
            )
            fixed.append((_per_seq_key(one.best, 6), b))
        except NoFeasiblePlan:
            pass
    assert [b for _, b in fixed] == [1, 2, 3] and min(fixed)[1] == 3


def _plan_cli(capsys, *extra: str) -> tuple[int, str, str]:
    argv = [
        "plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8",
        "--max-vp", "1", "--micro-batches", "1", "2", "--top", "2", *extra,
    ]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.mark.parametrize(
    ("bounds", "rule"),
    [
        (("40", "20"), "must not exceed MAX"),
        (("0", "20"), "must be at least 1"),
        (("5", "7"), "no batch in \\[5, 7\\] is a multiple of micro_batch\\*dp"),
    ],
)
def test_bad_range_exits_2_naming_the_field(capsys, bounds, rule):
    extra = ("--dp", "8") if bounds == ("5", "7") else ()
    code, out, err = _plan_cli(capsys, "--global-batch-range", *bounds, *extra)
    assert code == 2 and out == ""
    assert "global_batch_range" in err
    assert re.search(rule, err.replace("\n", ""))


def test_fixed_and_range_flags_exclude_each_other(capsys):
    code, _, err = _plan_cli(capsys, "--global-batch", "8", "--global-batch-range", "8", "16")
    assert code == 2 and "--global-batch" in err


def test_library_range_rejects_bad_shapes():
    model, cluster = factories.dense_model(num_layers=8), factories.cluster(8)
    with pytest.raises(InvalidInput, match="global_batch_range"):
        planner.plan_for(model, cluster, global_batch=(8, 4))
    with pytest.raises(InvalidInput, match="global_batch_range"):
        planner.plan_for(model, cluster, global_batch=8, global_batch_range=(8, 16))


def test_json_shows_each_plans_global_batch(capsys):
    code, out, _ = _plan_cli(capsys, "--global-batch-range", "30", "70", "--json")
    assert code == 0
    data = json.loads(out)
    batches = [p["layout"]["global_batch_seqs"] for p in data["ranked"]]
    for p, b in zip(data["ranked"], batches, strict=True):
        lo = p["layout"]
        assert 30 <= b <= 70 and b == lo["num_microbatches"] * lo["micro_batch"] * lo["dp"]
    assert data["best"]["layout"]["global_batch_seqs"] == batches[0]
    assert data["inputs"]["workload"]["global_batch_seqs"] == batches[0]
    assert data["solver"]["objective_unit"] == "s_per_sequence"


def test_reports_show_each_plans_batch(capsys):
    code, out, _ = _plan_cli(capsys, "--global-batch-range", "30", "70", "--markdown")
    assert code == 0 and "Global batch range [30, 70] seqs, ranked by tokens/s" in out
    code, out, _ = _plan_cli(capsys, "--global-batch-range", "30", "70")
    assert code == 0 and "global batch range [30, 70] seqs" in out.replace("\n", " ")
    assert "s/sequence" in out


def test_runner_ups_compare_at_the_best_plans_batch():
    """Ranked plans with different batches: 'vs best' follows time per sequence, not step time."""
    from planner.report import findings

    model, cluster = factories.dense_model(num_layers=16), factories.cluster(8)
    work = factories.workload(seq_len=8192, global_batch=6)
    r = factories.plan(
        model, cluster, work, global_batch_range=(1, 6), tp=2, pp=4, max_cp=1, micro_batches=(1,),
        recompute=("none",), zero_stages=(1,), memory_headroom=0.7, top_k=5,
    )  # fmt: skip
    batches = [r.global_batch(i) for i in range(len(r.ranked))]
    assert len(set(batches)) > 1
    shares = [u.slower_share for u in findings.runner_ups(r)]
    assert all(s >= -1e-9 for s in shares) and shares == sorted(shares)
    per_seq = [e.step_time_s / b for e, b in zip(r.ranked, batches, strict=True)]
    for s, t in zip(shares, per_seq[1:], strict=True):
        assert s == pytest.approx(t / per_seq[0] - 1, abs=1e-12)


def test_oracle_and_cp_sat_agree_where_memory_forces_smaller_batches():
    """A sweep of memory limits through the region where deep or wide layouts only fit with
    fewer micro-batches: both engines rank the same top 5, some plans below their largest batch."""
    model, cluster = factories.dense_model(num_layers=16), factories.cluster(8)
    work = factories.workload(seq_len=8192, global_batch=16)
    opts = SolverOptions(top_k=5)
    below_largest = 0
    for i in range(12):
        space = SearchSpace(
            global_batch_range=(1, 16), memory_headroom=0.72 + 0.005 * i, max_vp=4, max_cp=2,
            max_tp=2, micro_batches=(1, 2), recompute=("none",), zero_stages=(0, 1),
        )  # fmt: skip
        try:
            want, _, _ = exhaustive.search(model, cluster, work, space, opts)
        except NoFeasiblePlan:
            with pytest.raises(NoFeasiblePlan):
                sat.search(model, cluster, work, space, opts)
            continue
        got, _, _ = sat.search(model, cluster, work, space, opts)
        assert [_per_seq_key(e, 16) for e in got] == [_per_seq_key(e, 16) for e in want]
        below_largest += sum(
            exhaustive.plan_batch(e)
            < batch_choices(work, space, e.layout.micro_batch, e.layout.dp)[0]
            for e in got
        )
    assert below_largest >= 3
