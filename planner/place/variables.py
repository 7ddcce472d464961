"""The placement model's CP-SAT variables and their hint (cpsat-primer's nurse_vars.py): the
decision counts x[s][leaf] (units of stage s under a leaf) are made here; the auxiliary
variables each constraint family needs (pieces, balance, uplink steps) are made by that family
(constraints.py) and recorded here, with their hinted values, so the model is fully hinted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from .counted import UnitModel


@dataclass
class PlacementVars:
    """Variable handles of one placement model, the hint's counts and every (variable, hinted
    value) pair in the order they were made."""

    sat_model: cp_model.CpModel
    um: UnitModel
    x: list[list[Any]]  # stage -> leaf -> units (the decisions)
    hint: list[list[int]] = field(default_factory=list)  # counts the hint is made of
    hints: list[tuple[Any, int]] = field(default_factory=list)
    hint_choice: tuple[int, ...] = ()  # the hint's DP table key (evaluate.dp_choice)
    xb: dict[tuple[int, int], Any] = field(default_factory=dict)  # (stage, split block) -> bool
    ks: list[Any] = field(default_factory=list)  # level -> smallest piece
    lones: list[Any] = field(default_factory=list)  # crossing level -> lone flag
    bals: list[Any] = field(default_factory=list)  # level -> PP groups balanced (pp > 1)
    level_ys: list[list[list[Any]]] = field(default_factory=list)  # level -> stage -> domain
    belows: list[tuple[int, Any]] = field(default_factory=list)  # (level, k_L = k_L+1)
    hs: list[Any] = field(default_factory=list)  # level -> HSDP shard piece (tables.shard_cuts)
    prefix: list[list[Any]] = field(default_factory=list)  # stage -> chunk-order prefix counts

    def hint_with(self, var: Any, value: int) -> Any:
        self.hints.append((var, value))
        return var

    def add_hints(self) -> None:
        for var, value in self.hints:
            self.sat_model.add_hint(var, value)

    def extract(self, solver: cp_model.CpSolver) -> list[list[int]]:
        """The counts of the solver's solution."""
        return [[int(solver.value(v)) for v in row] for row in self.x]


def new_vars(sat_model: cp_model.CpModel, um: UnitModel) -> PlacementVars:
    """x[s][leaf] in 0..min(D, the leaf's capacity)."""
    d, leaves = um.units_per_stage, range(len(um.leaf_hosts))
    x = [
        [sat_model.new_int_var(0, min(d, um.capacity[j]), f"x{s}_{j}") for j in leaves]
        for s in range(um.layout.pp)
    ]
    return PlacementVars(sat_model=sat_model, um=um, x=x)
