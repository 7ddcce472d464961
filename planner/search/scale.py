"""Integer scaling for CP-SAT, in one place: CP-SAT has no floats.

Step times are counted in TIME_QUANTUM_S (1 µs): differences below it are ties, which the
simplicity rank then breaks. The CP-SAT objective coarsens it where needed (objective_quantum_s),
so no accepted input overflows it. The objective packs (step quanta, simplicity rank) into one integer,
step * TIME_RANGE + rank, and must stay below 2**53 so the solver's double objective is exact.
"""

from __future__ import annotations

import math

from cost_models.errors import InvalidInput

TIME_QUANTUM_S = 1e-6
MAX_EXACT = 2**53


def time_to_quanta(seconds: float, quantum_s: float = TIME_QUANTUM_S) -> int:
    if not math.isfinite(seconds):  # the input bounds (cost_models.specs) should prevent it
        raise InvalidInput(
            f"a step time came out as {seconds} s: some input value is beyond what the cost "
            "model can price (see the limits in README.md#reliability)"
        )
    return round(seconds / quantum_s)


def objective_quantum_s(max_step_s: float, tie: int) -> float:
    """The time quantum of the CP-SAT objective: TIME_QUANTUM_S, coarsened by powers of ten until
    the largest coefficient (max step quanta * tie + tie) stays below 2**53 (exact in a double).

    Python ints never overflow, so only this packing needs it. With the input limits a step time
    is finite but can be huge (a 1 MB/s link moving a 1 TB gradient), or the tie range large
    (tie_range of ~10**6 plans is 10**7): 1 µs then leaves only 900 s of range. A coarser quantum
    only merges step times closer than it, whose order the simplicity rank then decides.
    """
    quantum = TIME_QUANTUM_S
    while (time_to_quanta(max_step_s, quantum) + 1) * tie >= MAX_EXACT:
        quantum *= 10
    return quantum


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


def bound_s(
    objective_bound: float, tie: int, batch_max: int | None, quantum_s: float = TIME_QUANTUM_S
) -> float:
    """The solver's objective bound back in seconds: per step, or per sequence with a range."""
    seconds = (int(objective_bound) // tie) * quantum_s
    return seconds if batch_max is None else seconds / batch_max


def tie_range(num_ranks: int) -> int:
    """The multiplier of the step time: a power of ten above every simplicity rank."""
    r = 10
    while r <= num_ranks:
        r *= 10
    return r


def objective_coefficient(
    step_s: float, rank: int, tie: int, quantum_s: float = TIME_QUANTUM_S
) -> int:
    value = time_to_quanta(step_s, quantum_s) * tie + rank
    if not 0 <= rank < tie:
        raise ValueError(f"simplicity rank {rank} outside [0, {tie})")
    if value >= MAX_EXACT:
        raise OverflowError(f"objective coefficient {value} >= 2**53: coarsen TIME_QUANTUM_S")
    return value
