"""Time quanta, in one place: the key every engine ranks and prunes by.

Step times are counted in TIME_QUANTUM_S (1 µs): differences below it are ties, which the
simplicity rank then breaks. MAX_EXACT (2**53) is the largest integer a CP-SAT objective (a
double) holds exactly (planner/search/partition.py scales its objective below it).
"""

from __future__ import annotations

import math

from cost_models.errors import InvalidInput

TIME_QUANTUM_S = 1e-6
MAX_EXACT = 2**53


def time_to_quanta(seconds: float) -> int:
    """Python ints never overflow; only a non-finite time cannot be counted (issue 19: the input
    bounds of cost_models.specs keep every accepted input's times finite)."""
    if not math.isfinite(seconds):
        raise InvalidInput(
            f"a step time came out as {seconds} s: some input value is beyond what the cost "
            "model can price (see the limits in README.md#reliability)"
        )
    return round(seconds / TIME_QUANTUM_S)


def scaled_step_s(step_s: float, batch: int, batch_max: int | None) -> float:
    """The plan's time for `batch_max` sequences (time per sequence x MAX of the batch range).

    With a global batch range plans rank by step_s / batch; scaling it by the range's MAX keeps
    the magnitude (and the 2**53 headroom) of a step time. With a fixed batch (batch_max None or
    equal to batch) the ratio is exactly 1.0 and this is step_s, bit for bit.
    """
    return step_s if batch_max is None else step_s * (batch_max / batch)


def per_sequence_quanta(step_s: float, batch: int, batch_max: int | None) -> int:
    """scaled_step_s in quanta: the key every engine ranks and prunes by."""
    return time_to_quanta(scaled_step_s(step_s, batch, batch_max))
