"""A time budget that holds on a loaded machine (issue 28): "did this command stop at its
deadline?" judged by the work it did, not by how long other processes kept it off the CPU.

A plan's deadline is wall-clock: a search stops when the clock says so, however little CPU it
got. Two ways a command can overrun it:
- it keeps computing past the deadline (a loop that never looks at the clock: the 1,000,000-GPU
  hang, legal_shapes at seed 201). That work is the same on any machine, so its CPU time
  passes the budget whatever the load: `min(cpu_s, wall_s) > budget_s` (the minimum, because a
  multi-threaded solver's CPU time can exceed its wall time).
- it waits past the deadline (blocked, asleep, a worker never joined): little CPU, long wall.
  The wall time is compared with the budget stretched by the slowdown measured right before and
  after the command: a fixed pure-Python reference loop's wall time over its own CPU time (1 on
  an idle core, about 4 when four runnable processes share it). No stored idle figure is needed:
  the reference calibrates itself in the same process at the same moment.
On an idle machine the slowdown is 1 and the rule is the plain `wall_s > budget_s`.

bench/fuzz.py (its "over time" class) and the timed fuzz-regression tests use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REFERENCE_ITERATIONS = 250_000
"""About 20 ms of pure-Python work on one idle core of this machine: long enough to span many
scheduler slices (a 5 ms sample swung 1.5-5x at load 8), short enough to run before and after
every timed case."""


def _reference() -> tuple[float, float]:
    """Wall and CPU seconds of the reference loop, now."""
    wall, cpu = time.perf_counter(), time.process_time()
    acc = 0
    for i in range(REFERENCE_ITERATIONS):
        acc = (acc * 31 + i) % 1_000_003
    return time.perf_counter() - wall, time.process_time() - cpu


def slowdown() -> float:
    """Wall time over CPU time of the reference loop, now (>= 1)."""
    wall, cpu = _reference()
    return max(1.0, wall / cpu) if cpu > 0 else 1.0


@dataclass(frozen=True)
class Timed:
    wall_s: float
    cpu_s: float
    slowdown: float
    """The mean of the reference's slowdown before and after the command (timed(budget_s=...):
    two right after it, and 1.0 where the wall time stayed within the budget: no slowdown can
    change that verdict, so none is measured)."""

    def over(self, budget_s: float) -> bool:
        """True when the command overran `budget_s` by its own doing (module docstring)."""
        computed_past = min(self.cpu_s, self.wall_s) > budget_s
        waited_past = self.wall_s > budget_s * self.slowdown
        return computed_past or waited_past

    def describe(self, budget_s: float) -> str:
        return (
            f"{self.wall_s:.1f} s wall, {self.cpu_s:.1f} s CPU > {budget_s:.1f} s "
            f"(x{self.slowdown:.1f} load slowdown for the wall time)"
        )


def timed(
    fn: Callable[[], Any], *, reference: bool = True, budget_s: float | None = None
) -> tuple[Any, Timed]:
    """fn()'s result and its Timed (fn's exceptions propagate); `reference` False skips the
    slowdown measurement (slowdown 1: the plain wall rule).

    With `budget_s`, the reference runs only when the wall time passed the budget: within it,
    no load can make `over(budget_s)` true (slowdown >= 1, and the CPU rule needs wall > budget
    too), so the verdict is the same as with the measurement, and the ~40 ms of reference work
    per call is saved (the fuzz profile times ~60 cases). Past it, the slowdown is the mean of
    two references right after the command (the load it ran under, measured at once)."""
    before = slowdown() if reference and budget_s is None else 1.0
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if not reference:
        return result, Timed(wall, cpu, 1.0)
    if budget_s is None:
        return result, Timed(wall, cpu, (before + slowdown()) / 2)
    if wall <= budget_s:
        return result, Timed(wall, cpu, 1.0)
    return result, Timed(wall, cpu, (slowdown() + slowdown()) / 2)
