"""The CLI fuzzer of bench/fuzz.py under hypothesis, a small fixed-seed profile (issue 19).

Each example draws a generated command line and its input files (model / HF config / cluster /
fabric graph / validate data / corrupt bytes) and runs planner.cli.main in-process: exit code in
{0, 1, 2}, no traceback, one line for exit 2, JSON that parses with --json, within the time limit
plus margin, and the same output on a second run. `python bench/fuzz.py --cases N` is the long
profile (README.md#reliability).
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

_PATH = Path(__file__).resolve().parents[3] / "bench" / "fuzz.py"
_spec = importlib.util.spec_from_file_location("bench_fuzz", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["bench_fuzz"] = fuzz
_spec.loader.exec_module(fuzz)


@seed(19)
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_generated_cli_cases_hold_the_contract(tmp_path_factory, case_seed):
    case = fuzz.make_case(random.Random(case_seed))
    folder = tmp_path_factory.mktemp("case")
    first = fuzz.run_case(case, folder)
    second = fuzz.run_case(case, folder) if case_seed % 3 == 0 else None
    assert fuzz.problems(case, first, second) == [], (case.argv, first.err, first.traceback)


@pytest.mark.slow
def test_fixed_seed_profile_summary_line():
    result = fuzz.fuzz(40, seed=0, every=5)
    assert fuzz.summary(result) == (
        "fuzz: 40 cases, 0 tracebacks, 0 bad exit codes, 0 over time, 0 nondeterministic"
    )


@pytest.mark.parametrize(
    ("wall_s", "cpu_s", "slowdown", "over"),
    [
        (10.0, 9.5, 1.0, True),  # idle machine: the plain wall rule
        (5.9, 5.8, 1.0, False),
        (20.0, 5.0, 4.0, False),  # starved at load 4: it computed 5 s, waited the rest
        (20.0, 8.0, 4.0, True),  # computed past the deadline under load (a clock never read)
        (30.0, 0.1, 4.0, True),  # waited past even the stretched budget (blocked, asleep)
        (5.0, 12.0, 1.0, False),  # a multi-threaded solver: CPU over wall, wall in budget
    ],
)
def test_over_time_is_judged_by_work_not_load(wall_s, cpu_s, slowdown, over):
    from tests.load_clock import Timed

    took = Timed(wall_s, cpu_s, slowdown)
    assert took.over(6.0) is over
    case = fuzz.Case("flags", ["plan", "--time-limit", "1"])  # budget 1 + 2 + 3 = 6 s
    outcome = fuzz.Outcome(0, "", "", took)
    assert any(p.startswith("time:") for p in fuzz.problems(case, outcome, None)) is over


def test_the_reference_measures_cpu_and_wall():
    from tests.load_clock import slowdown, timed

    def spin():
        acc = 0
        for i in range(300_000):
            acc += i * i
        return acc

    result, took = timed(spin)
    assert result == sum(i * i for i in range(300_000))
    assert 0 < took.cpu_s <= took.wall_s * 1.05 and took.slowdown >= 1.0
    assert slowdown() >= 1.0


def test_the_reference_runs_only_where_the_wall_time_passed_the_budget():
    from tests import load_clock

    calls = []
    real = load_clock.slowdown

    def counted():
        calls.append(1)
        return real()

    load_clock.slowdown, saved = counted, load_clock.slowdown
    try:
        _, within = load_clock.timed(lambda: None, budget_s=10.0)
        assert (within.slowdown, calls, within.over(10.0)) == (1.0, [], False)
        _, past = load_clock.timed(lambda: sum(range(100_000)), budget_s=0.0)
        assert len(calls) == 2 and past.slowdown >= 1.0 and past.over(0.0)
    finally:
        load_clock.slowdown = saved
