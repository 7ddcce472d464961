"""The search's deterministic work limit (docs/search.md "Work limit: the same input gives the
same plans"): what a search did, counted and weighted, so that a search cut short stops at the same
point on every machine. The branch and bound (planner/search/table.py) and the exhaustive oracle
(planner/search/exhaustive.py) count it; solve.py, goodput_plan.py pass the limit."""

from __future__ import annotations

from ..types import SolverOptions

# The weights: what the search did, each thing weighted by what it costs, in units of about a
# millisecond on the reference machine (2 cores; `python bench/search_work.py` measures the weights and prints the
# milliseconds per unit on the machine it runs on). A search cut short by it stops at the same
# entry on every machine, so the same input gives the same plans; the wall-clock time limit
# stays the backstop (a machine much slower than the reference reaches it first, and says so).
WORK_PER_POP = 0.12  # a heap entry popped: bounds, the memory check of a shape
WORK_PER_SCORE = 0.7  # a plan priced by the full cost model (estimate)
WORK_PER_MEMORY_EVAL = 0.015  # a stage memory for the partition's caps (partition_caps)
WORK_PER_TABLE_CELL = 0.03  # a rank's (dense, MoE) count priced for a partition model's tables
WORK_PER_MODEL = 2.0  # a partition model built (its variables and constraints)
WORK_PER_SAT_UNIT = 4000.0  # one unit of CP-SAT's own deterministic time (solver.deterministic_time)

WORK_UNITS_PER_S = 1000.0
"""Work units (WORK_PER_*) the reference machine does per second."""
WORK_SHARE_OF_TIME = 0.5
"""The default work limit is this share of the time limit's worth of work: a machine (or a
loaded one) up to 1 / WORK_SHARE_OF_TIME times slower than the reference still stops at the work
limit, so the same input gives the same plans there; slower, the time limit stops it first and
the stats say so (SolveStats.stopped_by)."""


def default_work_limit(options: SolverOptions) -> float | None:
    """The search's work limit: the caller's, else half the time limit's worth; None (time
    limit only) without `deterministic`."""
    if not options.deterministic:
        return None
    if options.work_limit is not None:
        return options.work_limit
    return WORK_SHARE_OF_TIME * WORK_UNITS_PER_S * options.time_limit_s
