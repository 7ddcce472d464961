"""`backend="ray"` gives what the serial and local-pool backends give: the same results in the
same order, the same errors. Ray is an optional extra (pip install '.[ray]'): without it these
tests skip. A local Ray takes ~10 s to start and stop, so they are marked slow (-m slow)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import design_fns
import pytest

from cost_models.errors import InvalidInput, NoFeasiblePlan
from planner.design.backends import evaluate

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")

pytestmark = pytest.mark.slow
TESTS = str(Path(design_fns.__file__).resolve().parent)
REAL_POINTS = [("llama3-8b", 8), ("llama3-8b", 32), ("llama3-8b", 16), ("llama3-8b", 64)]


def _with_tests_on_path() -> str:
    # Ray workers import design_fns by name, as a process pool's do: tests/ on their path.
    return os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)


def test_evaluate_starts_a_local_ray_once(monkeypatch):
    # Runs first (file order), before the module's shared Ray exists: evaluate() starts a local
    # Ray with `workers` CPUs and keeps it for the next call (a design search calls evaluate
    # once per wave of points).
    assert not ray.is_initialized()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("PYTHONPATH", _with_tests_on_path())
    points = list(range(6))
    try:
        out = evaluate(points, design_fns.square, backend="ray", workers=2, progress=False)
        assert out == evaluate(points, design_fns.square, workers=1)
        assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
        assert evaluate(points[::-1], design_fns.square, backend="ray") == out[::-1]
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        address="local",  # a fresh local Ray, whatever `ray start` may have left running
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": _with_tests_on_path()}},
    )
    yield
    ray.shutdown()


def test_real_plans_identical_serial_pool_ray(local_ray):
    serial = evaluate(REAL_POINTS, design_fns.plan_summary, workers=1)
    assert evaluate(REAL_POINTS, design_fns.plan_summary, workers=2) == serial
    assert evaluate(REAL_POINTS, design_fns.plan_summary, backend="ray", workers=2) == serial
    assert ray.is_initialized()  # the caller's Ray is left running


def test_ray_reports_the_first_failure_in_input_order(local_ray):
    with pytest.raises(InvalidInput) as err:
        evaluate(list(range(8)), design_fns.fail_some, backend="ray")
    assert str(err.value) == "point 3: field x must not be 3"
    assert not getattr(err.value, "__notes__", None)
    with pytest.raises(NoFeasiblePlan) as err:
        evaluate([1, 2], design_fns.no_plan, backend="ray")
    assert err.value.reasons == ("memory", "batch")


def test_ray_other_errors_keep_their_type(local_ray):
    with pytest.raises(ZeroDivisionError) as err:
        evaluate([2, 1, 0, 4], design_fns.divide, backend="ray")
    notes = "\n".join(err.value.__notes__)
    assert "design point 2 (0)" in notes and "return 1 / x" in notes


def test_ray_and_pool_share_the_cache(local_ray, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    by_ray = evaluate([1, 2, 3], design_fns.square, backend="ray", cache_dir=cache)
    assert by_ray == evaluate([1, 2, 3], design_fns.square, workers=1)
    assert len(list(cache.rglob("*.pkl"))) == 3
    monkeypatch.setitem(sys.modules, "ray", None)  # no Ray now: all must come from the cache
    assert evaluate([3, 2, 1], design_fns.square, backend="ray", cache_dir=cache) == by_ray[::-1]


def test_a_function_ray_workers_cannot_import_names_the_point(local_ray, tmp_path, monkeypatch):
    # A module only the driver can import (as when a cluster lacks the planner): Ray's own
    # error, with a note naming the point and what to check.
    (tmp_path / "driver_only_fns.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_fns

    with pytest.raises(ray.exceptions.RayError) as err:
        evaluate([1, 2], driver_only_fns.double, backend="ray")
    notes = "\n".join(err.value.__notes__)
    assert "design point 0 (1) failed" in notes and "Ray could not run it" in notes
