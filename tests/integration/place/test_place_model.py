"""The placement model's pieces (planner/place/model.py and its modules): a fully hinted model
whose hint is feasible and priced as the validator prices it, the validator's feasibility
check, and the model export behind --export-placement-model."""

from __future__ import annotations

import json

import random

import pytest
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model
from test_place_allocation import SMALL, TAPERED, _small

from planner.place import counts as C
from planner.place import evaluate
from planner.place import model as M


def _instances():
    for leaves, drained, layout in SMALL[:4]:
        yield _small(leaves, drained, layout, pods=[0, 0, 1, 1]), layout
    for leaves, drained, layout, pods, taper in TAPERED[:3]:
        yield _small(leaves, drained, layout, pods=pods, taper=taper), layout


@pytest.mark.parametrize("case", range(7))
def test_every_hint_is_feasible_and_priced_as_the_validator_prices_it(case):
    """Every variable is hinted (the hint alone, fixed, solves the model) and the model's
    objective at the hint is evaluate.objective_us of its counts: the constraint families and
    the objective agree with the independent validator on the heuristics' counts."""
    (spec, cluster, wl, alloc), layout = list(_instances())[case]
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    for counts in (C.greedy_counts(um), C.best_fit_counts(um)):
        hint = sorted(counts, key=lambda row: -row[0])
        assert evaluate.infeasibility(um, hint) is None
        v = M.build(um, hint)
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.num_workers = 1
        status = solver.solve(v.sat_model)
        assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        assert v.extract(solver) == hint
        assert round(solver.objective_value) == evaluate.objective_us(um, hint)


def test_validator_names_what_is_wrong():
    (spec, cluster, wl, alloc), layout = next(_instances())
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    good = C.greedy_counts(um)
    assert evaluate.infeasibility(um, good) is None
    short = [list(r) for r in good]
    short[0][short[0].index(max(short[0]))] -= 1
    assert "needs" in evaluate.infeasibility(um, short)
    over = [list(r) for r in good]
    full = next(j for j in range(len(um.capacity)) if sum(r[j] for r in good) == um.capacity[j])
    s, a = next((s, a) for s, r in enumerate(good) for a, n in enumerate(r) if n and a != full)
    over[s][a] -= 1
    over[s][full] += 1  # one unit moved into a full leaf
    assert "room for" in evaluate.infeasibility(um, over)


@pytest.mark.parametrize("suffix", [".txt", ".pb"])
def test_exported_model_resolves_to_the_same_objective(tmp_path, suffix):
    """The exported model (with its hint) is the model solved: CP-SAT alone, reading the file,
    reaches the same optimum."""
    (spec, cluster, wl, alloc), layout = list(_instances())[4]
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    path = tmp_path / f"placement{suffix}"
    sol = M.solve(um, time_limit_s=30, export_path=path)
    assert sol.status == "OPTIMAL"
    again = cp_model.CpModel()
    if suffix == ".txt":
        again.proto.parse_text_format(path.read_text())
    else:
        proto = cp_model_pb2.CpModelProto()
        proto.ParseFromString(path.read_bytes())
        again.proto.parse_text_format(str(proto))
    assert len(again.proto.solution_hint.vars) == len(again.proto.variables)  # fully hinted
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(again) == cp_model.OPTIMAL
    assert round(solver.objective_value) == sol.objective_us


def test_cli_exports_one_model_per_placed_layout(tmp_path, capsys):
    from planner.cli import main

    out = tmp_path / "m.pb"
    argv = ["plan", "--model", "llama3.1-70b", "--cluster", "llama3-roce-24k",
            "--global-batch", "64", "--pp", "2", "--topology",
            "docs/examples/allocation/topology.conf", "--hosts",
            "docs/examples/allocation/hostfile", "--exclude", "gpu010", "--place-top", "2",
            "--export-placement-model", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]  # one entry per placed layout
    # the 2 shortlisted plans; where neither keeps TP x CP inside one 8-GPU node, the best
    # whole-node plan joins them and is placed too (api._whole_node_plan)
    placed = [r["layout"] for r in ranked]
    cross_node = sum(lo["tp"] * lo["cp"] > 8 for lo in placed)
    assert (len(placed), cross_node) in ((2, 0), (2, 1), (3, 2))
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"m-{i}.pb" for i in range(1, len(placed) + 1)]


def random_counts(um: M.UnitModel, pp: int, rng: random.Random) -> list[list[int]]:
    """Units per (stage, domain): each stage's units dealt one by one to a random domain with
    capacity left (a feasible count matrix of `um`)."""
    left = list(um.capacity)
    counts = [[0] * len(left) for _ in range(pp)]
    for s in range(pp):
        for _ in range(um.units_per_stage):
            j = rng.choice([j for j in range(len(left)) if left[j]])
            counts[s][j] += 1
            left[j] -= 1
    return counts


def test_random_counts_validator_matches_the_map_pricing():
    """evaluate.objective_us prices counts as the map they build re-prices (within the 1 us
    rounding of two table entries), on random feasible counts."""
    from planner.place import pricing

    (spec, cluster, wl, alloc), layout = list(_instances())[5]
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    rng = random.Random(0)
    for _ in range(5):
        counts = random_counts(um, layout.pp, rng)
        assert evaluate.infeasibility(um, counts) is None
        e = pricing.price(spec, cluster, wl, um.layout, alloc, M.build_map(um, counts))
        assert abs(round(e.step_time_s * 1e6) - evaluate.objective_us(um, counts)) <= 2
