"""Module-level functions for planner.design.backends tests: a process pool and Ray workers
import them by name (tests/ is on their path), as they would a real design evaluation."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cost_models.errors import InvalidInput, NoFeasiblePlan


def square(x: int) -> dict:
    return {"x": x, "square": x * x, "pid_free": True}


def plan_summary(point: tuple[str, int]) -> dict:
    """A real plan search (the per-point work of `planner design`): the best layout's fields
    and its predicted step time, as plain data."""
    from planner.convenience import plan_for

    model, gpus = point
    best = plan_for(model, "dgx-h100", num_gpus=gpus, top_k=1).best
    return {
        "layout": best.layout.model_dump(mode="json"),
        "step_time_s": best.step_time_s,
        "tokens_per_s_per_gpu": best.tokens_per_s_per_gpu,
    }


def fail_some(x: int) -> int:
    """3 and 5 fail; 5 fails at once, 3 only after a pause, so a pool sees 5's failure first."""
    if x == 3:
        time.sleep(0.5)
        raise InvalidInput(f"point {x}: field x must not be 3")
    if x == 5:
        raise InvalidInput(f"point {x}: field x must not be 5")
    return x


def no_plan(x: int) -> int:
    raise NoFeasiblePlan(f"nothing fits point {x}", reasons=("memory", "batch"))


def divide(x: int) -> float:
    return 1 / x


class Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = __import__("threading").Lock()  # a lock cannot be pickled


def raise_unpicklable(x: int) -> int:
    raise Unpicklable(f"bad {x}")


def count_calls(x: int) -> int:
    """Appends one line per call to $DESIGN_CALLS (a file shared by every worker)."""
    with open(Path(os.environ["DESIGN_CALLS"]), "a") as f:
        f.write(f"{x}\n")
    return x * 10
