"""Evaluate independent design points in parallel: in-process, a local process pool, or Ray.

`evaluate(points, fn)` maps a module-level `fn` over `points` and returns the results in input
order. The backend and the worker count change only how fast: every point runs the same `fn` on
the same input, results are placed by index, and when points fail the error raised is the one
of the first failing point in input order (the serial run's error), whichever worker finished
first. With `cache_dir` each result is kept on disk under its key (planner/design/cache.py) and
points with the same key are computed once.

Errors: a PlannerError raised by `fn` (InvalidInput, NoFeasiblePlan) comes back as itself, its
type and one-line message, no worker traceback attached (the CLI prints it as usual); any other
exception is re-raised as its own type with a note naming the point and carrying the worker's
traceback.

Ray is optional (`pip install '.[ray]'`) and imported only on that path. `ray.init` connects to
RAY_ADDRESS when it is set (shipping this checkout's three packages to the cluster, so it runs
the same code), else starts a local Ray with `workers` CPUs. A Ray already initialised (by the
caller or an earlier call) is used as it is and left running.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cost_models.errors import InvalidInput, PlannerError

from .cache import DiskCache, default_key

P = TypeVar("P")
R = TypeVar("R")

BACKENDS = ("local", "ray")
RAY_MISSING = "--backend ray needs Ray: pip install '.[ray]'"
CODE_PACKAGES = ("cost_models", "models_zoo", "planner")
"""Shipped to a remote Ray cluster as py_modules (runtime_env) so it runs this code."""

Outcome = tuple[bool, Any, str]
"""What a worker sends back: (True, result, "") or (False, exception, worker traceback)."""
Done = Callable[[int, Any], None]


def run_point(fn: Callable[[Any], Any], point: Any) -> Outcome:
    """One evaluation in a worker. Failures come back as values, not raised, so every backend
    hands the driver the same thing: the exception (picklable) and its traceback as text."""
    try:
        return True, fn(point), ""
    except PlannerError as err:
        return False, _portable(err), ""
    except Exception as err:
        trace = traceback.format_exc()  # before _portable drops the traceback
        return False, _portable(err), trace


def _portable(err: BaseException) -> BaseException:
    """The exception if it survives pickling, else a RuntimeError with its type and text."""
    err.__traceback__ = None
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err


@dataclass
class _FirstFailure:
    """The failure with the lowest input index seen so far: the one a serial run would hit."""

    index: int | None = None
    error: BaseException | None = None
    trace: str = ""

    def record(self, index: int, error: BaseException, trace: str) -> None:
        if self.index is None or index < self.index:
            self.index, self.error, self.trace = index, error, trace

    def beyond(self, index: int) -> bool:
        """Whether `index` comes after a known failure (its result can no longer matter)."""
        return self.index is not None and index > self.index

    def raise_if_any(self, points: Sequence[Any]) -> None:
        if self.error is None or self.index is None:
            return
        err = self.error
        if not isinstance(err, PlannerError):
            where = f"design point {self.index} ({_short(points[self.index])})"
            err.add_note(f"{where} failed in a worker:\n{self.trace}".rstrip())
        raise err from None


def _short(point: Any, limit: int = 200) -> str:
    text = repr(point)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Plan:
    """Which points still need computing after the cache and duplicate keys are taken out."""

    keys: list[str] | None
    todo: list[int] = field(default_factory=list)
    same_as: dict[int, int] = field(default_factory=dict)  # index -> the index computing it
    results: dict[int, Any] = field(default_factory=dict)


def _plan(points: Sequence[Any], key: Callable[[Any], str] | None, cache: DiskCache | None):
    if key is None and cache is not None:
        key = default_key
    keys = [key(p) for p in points] if key is not None else None
    plan = _Plan(keys)
    first: dict[str, int] = {}
    for i in range(len(points)):
        if keys is not None:
            if keys[i] in first:
                plan.same_as[i] = first[keys[i]]
                continue
            first[keys[i]] = i
            if cache is not None:
                hit, value = cache.get(keys[i])
                if hit:
                    plan.results[i] = value
                    continue
        plan.todo.append(i)
    return plan


def _check(backend: str, workers: int | None) -> None:
    if backend not in BACKENDS:
        choices = " or ".join(BACKENDS)
        raise InvalidInput(f"--backend: unknown backend {backend!r}; choose {choices}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise InvalidInput(f"--workers must be a positive whole number (got {workers!r})")
    if workers is not None and workers < 1:
        raise InvalidInput(f"--workers must be a positive whole number (got {workers})")


def evaluate(
    points: Sequence[P],
    fn: Callable[[P], R],
    *,
    backend: str = "local",
    workers: int | None = None,
    cache_dir: str | Path | None = None,
    key: Callable[[P], str] | None = None,
    progress: bool = True,
) -> list[R]:
    """`[fn(p) for p in points]`, computed in parallel and possibly from the cache.

    backend "local": a process pool of `workers` processes (None: os.cpu_count(); 1: serially
    in this process); "ray": Ray tasks (see the module docstring). `fn` must be a module-level
    function and points and results picklable. `cache_dir`: keep results there by
    `key(point)` (default: canonical JSON of the point, cache.default_key); `key` must capture
    everything the result depends on besides the code. Points with equal keys are computed once
    and share one result object. `progress`: a bar on stderr when stderr is a terminal."""
    points = list(points)
    _check(backend, workers)
    cache = DiskCache(cache_dir, fn) if cache_dir is not None else None
    plan = _plan(points, key, cache)
    followers: dict[int, int] = {}
    for leader in plan.same_as.values():
        followers[leader] = followers.get(leader, 0) + 1
    with _progress_bar(len(points), enabled=progress) as bar:
        bar.advance(len(plan.results) + sum(followers.get(i, 0) for i in plan.results))

        def done(index: int, value: Any) -> None:
            plan.results[index] = value
            if cache is not None and plan.keys is not None:
                cache.put(plan.keys[index], value)
            bar.advance(1 + followers.get(index, 0))

        if plan.todo:
            runner = _run_ray if backend == "ray" else _run_local
            runner(fn, points, plan.todo, workers, done)
    return [plan.results[plan.same_as.get(i, i)] for i in range(len(points))]


# ------------------------------------------------------------------------ local: serial, pool


def _run_local(
    fn: Callable[[Any], Any], points: list[Any], todo: list[int], workers: int | None, done: Done
) -> None:
    count = min(workers or os.cpu_count() or 1, len(todo))
    if count <= 1:
        _run_serial(fn, points, todo, done)
    else:
        _run_pool(fn, points, todo, count, done)


def _run_serial(fn: Callable[[Any], Any], points: list[Any], todo: list[int], done: Done) -> None:
    for i in todo:
        try:
            value = fn(points[i])
        except PlannerError:
            raise
        except Exception as err:
            err.add_note(f"design point {i} ({_short(points[i])}) failed")
            raise
        done(i, value)


def _pool_context() -> multiprocessing.context.BaseContext:
    """fork on Linux: the workers start with planner already imported (a spawned worker spends
    ~1.5 s importing it). The driver holds no threads when the pool starts (the progress bar
    refreshes on the main thread), which is what makes fork safe. Elsewhere the platform's
    default (spawn on macOS and Windows)."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _run_pool(
    fn: Callable[[Any], Any], points: list[Any], todo: list[int], count: int, done: Done
) -> None:
    failure = _FirstFailure()
    with ProcessPoolExecutor(max_workers=count, mp_context=_pool_context()) as pool:
        futures: dict[Future[Outcome], int] = {
            pool.submit(run_point, fn, points[i]): i for i in todo
        }
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=futures.__getitem__):
                    if future.cancelled():
                        continue
                    _settle(futures[future], future.result(), failure, done)
                if failure.index is not None:  # later points cannot change the outcome
                    for future in pending:
                        if failure.beyond(futures[future]):
                            future.cancel()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    failure.raise_if_any(points)


def _settle(index: int, outcome: Outcome, failure: _FirstFailure, done: Done) -> None:
    ok, value, trace = outcome
    if ok:
        done(index, value)
    else:
        failure.record(index, value, trace)


# ------------------------------------------------------------------------------------- Ray


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InvalidInput(RAY_MISSING) from None
    return ray


def _start_ray(ray: Any, workers: int | None) -> None:
    """Initialise Ray unless it already is (by the caller, or by an earlier evaluate call: a
    search calls evaluate once per wave of points and must not pay Ray's start, ~8 s, each
    time). Ray shuts itself down when the process exits."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS") or None
    options: dict[str, Any] = {
        "log_to_driver": False,  # worker output would land on our stdout (--json: only JSON)
        "include_dashboard": False,
        "logging_level": logging.ERROR,  # stderr keeps to the progress bar and real errors
    }
    if address is None:
        # "local": a new local Ray even when `ray start` left one running on this machine
        # (address=None would join that one, and refuse num_cpus).
        options["num_cpus"] = workers
    else:
        import importlib

        modules = [importlib.import_module(name) for name in CODE_PACKAGES]
        options["runtime_env"] = {"py_modules": modules}
    try:
        ray.init(address=address or "local", **options)
    except Exception as err:
        where = f"RAY_ADDRESS={address}" if address else "a local Ray"
        reason = " ".join(str(err).split())[:300]
        raise InvalidInput(f"--backend ray: cannot start or reach {where}: {reason}") from None


def _run_ray(
    fn: Callable[[Any], Any], points: list[Any], todo: list[int], workers: int | None, done: Done
) -> None:
    ray = _import_ray()
    _start_ray(ray, workers)
    _ray_tasks(ray, fn, points, todo, done)


def _ray_tasks(
    ray: Any, fn: Callable[[Any], Any], points: list[Any], todo: list[int], done: Done
) -> None:
    remote = ray.remote(num_cpus=1, max_retries=0)(run_point)
    fn_ref = ray.put(fn)
    refs = {remote.remote(fn_ref, points[i]): i for i in todo}
    pending = list(refs)
    failure = _FirstFailure()
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            if pending:  # take every other finished task in the same round
                more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                ready += more
            for ref in sorted(ready, key=refs.__getitem__):
                _settle(refs[ref], _ray_get(ray, ref), failure, done)
            if failure.index is not None:
                for ref in [r for r in pending if failure.beyond(refs[r])]:
                    ray.cancel(ref)
                    pending.remove(ref)
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        raise
    failure.raise_if_any(points)


def _ray_get(ray: Any, ref: Any) -> Outcome:
    """The task's outcome. A task Ray itself could not run (the function or a module it needs
    cannot be imported on the workers, a worker died) is a failure of that point like any other
    (the first in input order is raised), with what to check."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:
        hint = (
            "Ray could not run it: can its workers import the planner, its dependencies and "
            "the evaluated function's module?"
        )
        return False, err, hint


# -------------------------------------------------------------------------------- progress


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def advance(self, steps: int) -> None:
        return None


class _RichBar(_NoBar):
    """A rich progress bar on stderr, redrawn on the main thread only (auto_refresh off: no
    refresh thread exists when the process pool forks)."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self.progress = Progress(
            "design points",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,  # forked workers must not inherit a proxy of our stdout
            redirect_stderr=False,
        )
        self.task = self.progress.add_task("evaluate", total=total)

    def __enter__(self) -> _RichBar:
        self.progress.start()
        self.progress.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def advance(self, steps: int) -> None:
        if steps:
            self.progress.update(self.task, advance=steps, refresh=True)


def _progress_bar(total: int, *, enabled: bool) -> _NoBar:
    if enabled and total and sys.stderr.isatty():
        return _RichBar(total)
    return _NoBar()
