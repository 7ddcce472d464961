"""The CP-SAT model over the candidate table: one Boolean per (layout, placement), exactly one.

Every variable's objective coefficient packs its step time (integer quanta, planner/search/scale.py)
and its simplicity rank, so the unique optimum is the fastest plan and, among equally fast plans,
the simplest. The hint is the best plan the table's branch and bound met first (a heuristic
incumbent), so the solver starts from a full, feasible assignment.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from cost_models.specs import Estimate

from .candidates import simplicity_rank
from .scale import (
    objective_coefficient,
    objective_quantum_s,
    per_sequence_quanta,
    scaled_step_s,
    tie_range,
)


@dataclass
class SatModel:
    model: cp_model.CpModel
    choose: list[cp_model.IntVar]  # choose[i]: plan i of `estimates` is the answer
    estimates: list[Estimate]
    coefficients: list[int]
    tie: int  # objective = step quanta * tie + simplicity rank
    quantum_s: float  # the objective's time quantum (scale.objective_quantum_s)


def _batch(e: Estimate) -> int:
    return e.num_microbatches * e.layout.micro_batch * e.layout.dp


def build(estimates: list[Estimate], batch_max: int | None = None) -> SatModel:
    """One-hot choice over the scored plans that fit; minimize (step time, simplicity).

    With a global batch range (`batch_max` its MAX) the time is per sequence, in the quanta of
    scale.per_sequence_quanta; with a fixed batch it is the step time as before.
    """
    by_simplicity = sorted(
        range(len(estimates)), key=lambda i: simplicity_rank(estimates[i].layout)
    )
    rank = [0] * len(estimates)
    for r, i in enumerate(by_simplicity):
        rank[i] = r
    tie = tie_range(len(estimates))
    steps = [scaled_step_s(e.step_time_s, _batch(e), batch_max) for e in estimates]
    quantum = objective_quantum_s(max(steps), tie)
    coefficients = [
        objective_coefficient(step, rank[i], tie, quantum) for i, step in enumerate(steps)
    ]
    m = cp_model.CpModel()
    choose = [m.new_bool_var(f"plan_{i}") for i in range(len(estimates))]
    m.add_exactly_one(choose)
    m.minimize(sum(c * x for c, x in zip(coefficients, choose, strict=True)))
    # Hint: the first plan in table order whose step time is the table's best (the incumbent the
    # branch and bound found), not necessarily the simplest such plan.
    keys = [per_sequence_quanta(e.step_time_s, _batch(e), batch_max) for e in estimates]
    hint = keys.index(min(keys))
    for i, x in enumerate(choose):
        m.add_hint(x, i == hint)
    return SatModel(m, choose, estimates, coefficients, tie, quantum)
