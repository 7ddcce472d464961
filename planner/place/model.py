"""CP-SAT placement of one layout on an allocation: pipeline stages and data-parallel blocks to
leaves and pods (DESIGN.md "Where CP-SAT earns its place", issue 17).

Unit of placement: U = max(GPUs per node, tp x cp, etp x ep) consecutive stage-local ranks (one
TP x CP block of one or more DP indices of one stage, whole EP groups), i.e. B = U / GPUs-per-node
whole nodes under one leaf. The placed layout numbers ranks tp, cp, dp, pp (innermost first), so a
stage's ranks are contiguous and a unit is D = tp*cp*dp / U-th of a stage. Nodes under one switch
are interchangeable, so the model counts units per switch: x[s, leaf] = units of stage s under
that leaf (no node-level symmetry).

Objective, integer microseconds, precomputed with cost_models.estimate on the spans a map with
those counts has (planner/place/pricing.py reads the same spans off the map it builds):

- DP, DP x CP and expert-DP groups of stage s have y[s, d] * u members in domain d of level L
  (y: the stage's units under d); the smallest piece over stages and domains,
  k_L = min{y[s, d] : y[s, d] > 0}, sets the kind's span at that tier (rounded to whole factors
  per tier, pricing.nest). Encoded as k_L <= every used piece, plus, where the table does not fall
  monotonically as pieces grow, a witness piece equal to k_L;
- HSDP (Layout.dp_shard): torchtitan's dp_shard x cp groups (S consecutive dp indices) and
  dp_replicate groups on the placed map too. h_L = the fewest members a shard group keeps at any
  stage's cut between level-L domains along build_map's chunk order (tables.shard_cuts of the
  stage's prefix count there; an element per stage and cut, a min equality: exact); the shard
  span is min(k_L a cp, h_L), the replicas' max(1, floor(k_L a / S)) (tables._Spans._hsdp_spans);
- PP groups stay inside the domains of level L iff every stage has the same count in every
  domain of L (pigeonhole: otherwise some dp index has two stages in different domains; equal
  counts let the map give chunk c of every stage the same domain). b_L => equal counts (and the
  converse, reified, where PP does not get cheaper inward); b_L is fixed false where no domain
  split can hold pp equal shares;
- uplink sharing (cost_models/uplink.py): per tapered tier j, the step q_j of the gradient
  window, 4 x (GPUs of stages not wholly inside switch d) <= (job's GPUs under d) x q_j for every
  switch d (a bool per stage and switch: wholly inside; with HSDP the GPUs whose dp_shard x cp
  or dp_replicate group leaves d, constraints.hsdp_kept_expr on each stage's run), and the step
  p_j of the pipeline window
  (PP groups inside d: the intersection of the stages' chunk ranges along build_map's order,
  from prefix-count variables; split blocks' GPUs always leave);
- step = T_dp[class(k_0, k_1, ..., lone flags), q_1, ...] + T_pp[lowest balanced level, p_1, ...]
  (AddAllowedAssignments: the pieces pick a class, the class and the steps the cost; the PP
  table over level and steps): the DP and PP terms are separate terms of the step sum
  (estimate's breakdown), so the table is additive in them; each entry is rounded to a
  microsecond, so the objective matches re-pricing the map to within 2 us.

Blocks of B > 1 nodes (TP x CP over several nodes) stay inside one leaf where the leaves hold
enough of them; where they do not (leaves with a remainder of fewer than B nodes), just enough
split blocks are made of the leftover nodes (inside one pod first), each a pseudo-leaf of
capacity 1. A split block belongs to the domains of a level that hold all its nodes; at a level
whose domains it spans, PP groups are not balanced there and the DP kinds' piece is taken as
min(k x u, the smallest part of a split block): a lower bound on the map's piece, so there the
objective is an upper bound on re-pricing (the map is always re-priced exactly, joint.py), and
the status and bound are about it (the report says so: joint.Placement.split_blocks); with HSDP
the shard group's piece is the block's part at every crossing level (tables._Spans._hsdp_spans),
the loosest case. Without split blocks the objective is the re-priced step.

Layout of the model (the cpsat-primer's): units.py (the counted form), tables.py (the cost
tables), counted.py (UnitModel, built complete), variables.py (the decision counts and the
hint), constraints.py (one function per constraint family), objective.py (the DP and PP
terms), evaluate.py (the objective and feasibility recomputed from counts, independent of the
solver), counts.py (heuristic counts for the hint); this module puts them together and solves.

Constraints: every stage gets its D units; each leaf holds at most floor(healthy nodes / B)
units; stages are interchangeable, so their counts on the first leaf are ordered. The full hint
is the cheapest of: the scheduler's order packed stage by stage into leaves, a best-fit packing
(pods, then leaves), and the baselines' own maps read as counts (joint.py), so CP-SAT starts at
the better baseline. Deterministic mode: one worker, fixed seed, a deterministic-time limit;
probing is off (it spent the time limit at 16,384 GPUs). The result carries CP-SAT's status,
objective, bound, gap and wall time; out of time before any solution (UNKNOWN) the hint is
returned with CP-SAT's bound.
"""


from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ortools.sat.python import cp_model

from cost_models.errors import InvalidInput

from . import constraints as cons
from .bound import lower_bound_us
from .counted import UnitModel, unit_model
from .counts import best_fit_counts, greedy_counts, host_order_counts
from .evaluate import dp_choice, dp_cost, infeasibility, objective_us, pipe_qs, q_index
from .evaluate import shard_pieces, summary, uplink_qs
from .objective import add_dp_cost, add_pp_cost
from .tables import US, dp_monotone
from .units import CANONICAL, Unplaceable, build_map, counts_of_map, level_counts
from .variables import PlacementVars, new_vars

# The names the rest of planner.place and the tests use from this module.
__all__ = [
    "CANONICAL",
    "LARGE_COUNTS",
    "LARGE_LEAVES",
    "US",
    "Solution",
    "UnitModel",
    "Unplaceable",
    "build_map",
    "counts_of_map",
    "dp_cost",
    "greedy_counts",
    "level_counts",
    "objective_us",
    "pipe_qs",
    "q_index",
    "solve",
    "unit_model",
    "uplink_qs",
]
_summary, _dp_choice = summary, dp_choice  # tests read the validator's pieces by these names

# From this many leaves on, solve first without the uplink steps (joint.place_layout): at
# 16,384 GPUs (95 leaves, TP8 PP16 DP64 CP2) the exact model alone reached 7.70 s in 2 s, the
# two phases 7.16 s.
LARGE_LEAVES = 32
LARGE_COUNTS = 4096  # stages x leaves above which the model is large (joint.py, solve)
# Deterministic mode stops on CP-SAT's deterministic clock; the wall limit is a backstop only,
# wide enough that a loaded machine does not change the answer (at 4x, 16,384 GPUs on the
# shared 2-core box hit it: UNKNOWN, 6.81-7.45 s across seeds instead of the unloaded 6.58 s).
BACKSTOP = 20


@dataclass
class Solution:
    status: str
    objective_us: int
    bound_us: float
    gap: float
    wall_time_s: float
    counts: list[list[int]]
    host_of_rank: np.ndarray


def _hint(um: UnitModel, hints, full_uplinks: bool) -> list[list[int]]:
    """The cheapest of the greedy packing, the best-fit packing, `hints` and (with split blocks)
    the scheduler's order with matched split blocks, stages ordered as the symmetry cut asks."""
    starts = [greedy_counts(um), best_fit_counts(um), *hints]
    if um.split_blocks:
        starts.append(host_order_counts(um))
    hint = min(starts, key=lambda c: objective_us(um, c, full_uplinks=full_uplinks))
    return sorted(hint, key=lambda row: -row[0])


def build(
    um: UnitModel,
    hint: list[list[int]],
    *,
    fixed_top: list[list[int]] | None = None,
    full_uplinks: bool = False,
) -> PlacementVars:
    """The CP-SAT model over the counts, fully hinted with `hint` (no solving)."""
    v = new_vars(cp_model.CpModel(), um)
    cons.add_assignment(v)
    # Where the tables fall as pieces grow and as PP groups move inward (the usual case; checked,
    # not assumed), k_L <= every used piece and "balanced => equal counts" suffice: the
    # objective pushes k_L up to the smallest piece and takes the lowest balanced level. Else
    # both are tied exactly (k equals a witness piece; balance reified both ways).
    dp_exact = not dp_monotone(um, um)
    pp_exact = not all(
        all(a <= b for a, b in zip(r1, r2, strict=True))
        for r1, r2 in itertools.pairwise(um.pp_table)
    )
    v.hint = hint
    for s, row in enumerate(v.x):
        for j, var in enumerate(row):
            v.hint_with(var, hint[s][j])
    hint_qs = uplink_qs(um, hint)
    v.hint_choice = dp_choice(um, *summary(um, hint)[::2], hint_qs, shard_pieces(um, hint))
    cons.add_split_blocks(v)
    balanced = []
    for lv in range(len(um.levels)):
        ys, used_at = cons.add_pieces(v, lv, dp_exact)
        if um.crossing[lv]:
            cons.add_lone(v, lv, used_at)
        if um.layout.pp > 1:
            balanced.append(cons.add_balance(v, lv, ys, pp_exact))
    cons.add_piece_nesting(v)
    cons.add_shard_pieces(v)
    dp_var = add_dp_cost(v, hint_qs, full_uplinks)
    pp_var = add_pp_cost(v, len(um.levels) - sum(balanced), full_uplinks)
    if fixed_top is not None:
        cons.add_fixed_top(v, fixed_top)
    v.sat_model.minimize(dp_var + pp_var)
    v.add_hints()
    return v


def _configure(
    solver: cp_model.CpSolver, *, time_limit_s: float, deterministic: bool, seed: int, large: bool
) -> None:
    p = solver.parameters
    p.max_time_in_seconds = time_limit_s
    if deterministic:
        # Reproducible: stop on CP-SAT's deterministic clock (its seconds ran ~2.4x slower than
        # wall seconds at 16,384 GPUs here), the wall limit only a backstop.
        p.max_deterministic_time = time_limit_s / 2
        p.max_time_in_seconds = BACKSTOP * time_limit_s
    p.random_seed = seed
    p.num_workers = 1 if deterministic else 8
    # Probing spends seconds on the thousands of piece literals before the search starts; the
    # search with the hint improves faster without it (16,384 GPUs: first improvement at 5 s
    # instead of none in 10 s).
    p.cp_model_probing_level = 0
    if large:
        # Presolve of the large model (131,072 GPUs: 81,000 variables) took 7 of its 18 wall
        # seconds at a 10 s limit and changed neither the solution nor the bound.
        p.cp_model_presolve = False


def solve(
    um: UnitModel,
    *,
    time_limit_s: float = 60.0,
    deterministic: bool = True,
    seed: int = 0,
    hints: tuple[list[list[int]], ...] | list[list[list[int]]] = (),
    fixed_top: list[list[int]] | None = None,
    full_uplinks: bool = False,
    export_path: str | Path | None = None,
    known_bound_us: int = 0,
) -> Solution:
    """CP-SAT over the counts; status, objective, bound and gap are CP-SAT's own. The hint is
    the cheapest of the greedy packing and `hints` (counts, e.g. of the better baseline).
    `fixed_top` (units of each stage per top-level domain) restricts the model to those pod
    counts (planner/place/decompose.py): its status and bound then hold for the restriction
    only. `full_uplinks` prices every uplink at its full taper (no q variables: the objective is
    an upper bound of the map's price, re-priced here), a warm start. `export_path` writes the
    model (with its hint) there before solving (CpModel.export_to_file: a .txt name gives the
    text format, any other the binary proto), so a slow placement can be handed on as a file.
    The reported bound is the best of CP-SAT's, the counting bound (bound.py) and
    `known_bound_us` (a bound proved elsewhere, relax.py); where the hint already meets it the
    hint is returned as OPTIMAL without searching (not with fixed_top or an export)."""
    start = time.perf_counter()
    hint = _hint(um, hints, full_uplinks)
    proved = max(known_bound_us, lower_bound_us(um))
    if fixed_top is None and export_path is None and objective_us(um, hint) <= proved:
        return _proved(um, hint, start)
    v = build(um, hint, fixed_top=fixed_top, full_uplinks=full_uplinks)
    if export_path is not None and not v.sat_model.export_to_file(str(export_path)):
        raise InvalidInput(f"--export-placement-model: cannot write {export_path}")
    solver = cp_model.CpSolver()
    large = um.layout.pp * len(um.leaf_hosts) > LARGE_COUNTS
    _configure(
        solver, time_limit_s=time_limit_s, deterministic=deterministic, seed=seed, large=large
    )
    status = solver.solve(v.sat_model)
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        counts = v.extract(solver)
        obj = round(solver.objective_value)
        if full_uplinks:  # the model's upper bound; the counts' own value
            obj = objective_us(um, counts)
    elif status == cp_model.UNKNOWN:  # out of time before a solution: the hint stands
        counts, obj = hint, objective_us(um, hint)
    else:
        raise InvalidInput(f"placement: CP-SAT found no assignment ({name})")
    why = infeasibility(um, counts)
    assert why is None, f"placement model returned infeasible counts: {why}"  # a model bug
    bound = min(max(solver.best_objective_bound, proved), obj)
    return Solution(
        status=name,
        objective_us=obj,
        bound_us=bound,
        gap=max(0.0, (obj - bound) / obj) if obj else 0.0,
        wall_time_s=time.perf_counter() - start,
        counts=counts,
        host_of_rank=build_map(um, counts),
    )


def _proved(um: UnitModel, counts: list[list[int]], start: float) -> Solution:
    """Counts whose objective meets a proven lower bound: optimal, no search needed."""
    why = infeasibility(um, counts)
    assert why is None, f"placement hint is infeasible: {why}"  # a model bug
    obj = objective_us(um, counts)
    return Solution(
        status="OPTIMAL",
        objective_us=obj,
        bound_us=obj,
        gap=0.0,
        wall_time_s=time.perf_counter() - start,
        counts=counts,
        host_of_rank=build_map(um, counts),
    )
