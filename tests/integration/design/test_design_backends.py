"""planner/design/backends.py: serial, a local process pool and Ray give the same results in
input order, the same errors, and reuse the disk cache."""

from __future__ import annotations

import sys

import design_fns
import pytest

from cost_models.errors import InvalidInput, NoFeasiblePlan
from planner.design import backends
from planner.design.backends import RAY_MISSING, evaluate

REAL_POINTS = [("llama3-8b", 8), ("llama3-8b", 32), ("llama3-8b", 16), ("llama3-8b", 64)]


def test_serial_and_pool_agree_in_input_order():
    points = list(range(7, -3, -1))
    serial = evaluate(points, design_fns.square, workers=1)
    assert serial == [design_fns.square(x) for x in points]
    assert evaluate(points, design_fns.square, workers=2) == serial
    assert evaluate(points, design_fns.square, workers=5) == serial


def test_real_plan_searches_agree_serial_and_pool():
    serial = evaluate(REAL_POINTS, design_fns.plan_summary, workers=1)
    assert serial == [design_fns.plan_summary(p) for p in REAL_POINTS]
    assert evaluate(REAL_POINTS, design_fns.plan_summary, workers=2) == serial


def test_empty_and_single_point():
    assert evaluate([], design_fns.square, workers=2) == []
    assert evaluate([3], design_fns.square, workers=2) == [design_fns.square(3)]


def test_first_failure_in_input_order_wins(tmp_path):
    # 5 fails at once, 3 half a second later: a pool sees 5 first but must report 3, as serially.
    points = list(range(8))
    for workers in (1, 2, 4):
        with pytest.raises(InvalidInput) as err:
            evaluate(points, design_fns.fail_some, workers=workers)
        assert str(err.value) == "point 3: field x must not be 3"
        assert not getattr(err.value, "__notes__", None)  # a one-line input error, no trace


def test_no_feasible_plan_keeps_its_reasons():
    for workers in (1, 2):
        with pytest.raises(NoFeasiblePlan) as err:
            evaluate([1, 2], design_fns.no_plan, workers=workers)
        assert str(err.value) == "nothing fits point 1"
        assert err.value.reasons == ("memory", "batch")


def test_other_errors_keep_their_type_and_name_the_point():
    for workers in (1, 2):
        with pytest.raises(ZeroDivisionError) as err:
            evaluate([2, 1, 0, 4], design_fns.divide, workers=workers)
        notes = "\n".join(err.value.__notes__)
        assert "design point 2 (0)" in notes
        if workers > 1:  # the worker's traceback travels with it
            assert "Traceback" in notes and "return 1 / x" in notes


def test_unpicklable_error_from_a_worker_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="Unpicklable: bad 1"):
        evaluate([1, 2], design_fns.raise_unpicklable, workers=2)


def test_cache_reuses_results_for_a_rerun_and_a_wider_grid(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("DESIGN_CALLS", str(calls))
    cache = tmp_path / "cache"
    assert evaluate([1, 2, 3], design_fns.count_calls, workers=2, cache_dir=cache) == [10, 20, 30]
    assert sorted(calls.read_text().split()) == ["1", "2", "3"]
    calls.write_text("")
    assert evaluate([1, 2, 3], design_fns.count_calls, workers=2, cache_dir=cache) == [10, 20, 30]
    assert calls.read_text() == ""  # a re-run: all from the cache
    wider = [0, 1, 2, 3, 4, 5]
    assert evaluate(wider, design_fns.count_calls, workers=2, cache_dir=cache) == [
        0, 10, 20, 30, 40, 50
    ]
    assert sorted(calls.read_text().split()) == ["0", "4", "5"]


def test_equal_keys_are_computed_once(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("DESIGN_CALLS", str(calls))
    out = evaluate([4, 1, 4, 1, 2], design_fns.count_calls, workers=1, key=str)
    assert out == [40, 10, 40, 10, 20]
    assert calls.read_text().split() == ["4", "1", "2"]


def test_corrupt_cache_entry_is_recomputed(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("DESIGN_CALLS", str(calls))
    cache = tmp_path / "cache"
    evaluate([1, 2], design_fns.count_calls, workers=1, cache_dir=cache)
    for entry in cache.rglob("*.pkl"):
        entry.write_bytes(b"\x80\x05garbage")
    calls.write_text("")
    assert evaluate([1, 2], design_fns.count_calls, workers=2, cache_dir=cache) == [10, 20]
    assert sorted(calls.read_text().split()) == ["1", "2"]
    calls.write_text("")
    assert evaluate([1, 2], design_fns.count_calls, workers=1, cache_dir=cache) == [10, 20]
    assert calls.read_text() == ""  # rewritten good entries


def test_failed_points_are_not_cached_but_earlier_successes_are(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(InvalidInput):
        evaluate([0, 1, 3], design_fns.fail_some, workers=1, cache_dir=cache)
    assert len(list(cache.rglob("*.pkl"))) == 2  # 0 and 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "dask"}, "--backend: unknown backend 'dask'; choose local or ray"),
        ({"workers": 0}, "--workers must be a positive whole number (got 0)"),
        ({"workers": 2.5}, "--workers must be a positive whole number (got 2.5)"),
        ({"workers": True}, "--workers must be a positive whole number (got True)"),
    ],
)
def test_bad_backend_or_workers(kwargs, message):
    with pytest.raises(InvalidInput) as err:
        evaluate([1], design_fns.square, **kwargs)
    assert str(err.value) == message


def test_missing_ray_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(InvalidInput) as err:
        evaluate([1, 2], design_fns.square, backend="ray", workers=2)
    assert str(err.value) == RAY_MISSING == "--backend ray needs Ray: pip install '.[ray]'"


def test_all_cached_needs_no_ray(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    evaluate([1, 2], design_fns.square, workers=1, cache_dir=cache)
    monkeypatch.setitem(sys.modules, "ray", None)
    out = evaluate([1, 2], design_fns.square, backend="ray", cache_dir=cache)
    assert out == [design_fns.square(1), design_fns.square(2)]


def test_progress_bar_goes_to_stderr_only_on_a_terminal(capfd, monkeypatch):
    evaluate([1, 2, 3], design_fns.square, workers=2)
    assert capfd.readouterr() == ("", "")  # not a terminal: nothing at all
    assert isinstance(backends._progress_bar(3, enabled=True), backends._NoBar)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert isinstance(backends._progress_bar(3, enabled=True), backends._RichBar)
    assert type(backends._progress_bar(3, enabled=False)) is backends._NoBar
    assert evaluate([1, 2, 3], design_fns.square, workers=2) == [
        design_fns.square(x) for x in (1, 2, 3)
    ]
    assert capfd.readouterr().out == ""  # the bar never touches stdout
