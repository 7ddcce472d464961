"""Integer scaling for CP-SAT, in one place: CP-SAT has no floats.

Step times are counted in TIME_QUANTUM_S (1 µs): differences below it are ties, which the
simplicity rank then breaks. The objective packs (step quanta, simplicity rank) into one integer,
step * TIME_RANGE + rank, and must stay below 2**53 so the solver's double objective is exact.
"""

from __future__ import annotations

TIME_QUANTUM_S = 1e-6
MAX_EXACT = 2**53


def time_to_quanta(seconds: float) -> int:
    return round(seconds / TIME_QUANTUM_S)


def tie_range(num_ranks: int) -> int:
    """The multiplier of the step time: a power of ten above every simplicity rank."""
    r = 10
    while r <= num_ranks:
        r *= 10
    return r


def objective_coefficient(step_s: float, rank: int, tie: int) -> int:
    value = time_to_quanta(step_s) * tie + rank
    if not 0 <= rank < tie:
        raise ValueError(f"simplicity rank {rank} outside [0, {tie})")
    if value >= MAX_EXACT:
        raise OverflowError(f"objective coefficient {value} >= 2**53: coarsen TIME_QUANTUM_S")
    return value
