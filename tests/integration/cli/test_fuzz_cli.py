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
