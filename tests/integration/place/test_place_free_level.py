"""Issue 27: a "free" level (no domain holds a whole block: every unit there is a split block)
below a level that holds some but fewer than D blocks per domain. units.k_values gave the free
level only D and the level above 1..cap < D, so no key nested and the DP table was empty:
`ValueError: min() arg is an empty sequence` in evaluate.dp_choice on valid input. The free level
now takes the values of the level above (k_L = k_L+1 nests); its k sets no span (the forced lone
flag prices the split blocks' parts), so the CP-SAT model, the validator and the tables agree."""

from __future__ import annotations

import itertools
import json

import pytest

import models_zoo
from cost_models.specs import Layout
from planner import api
from planner.cli import main
from planner.place import allocation as A
from planner.place import model as M
from planner.place import oracle, pricing
from planner.place.units import k_values

# 8-GPU hosts, one per ToR, three ToRs per pod; a TP 8 x CP 2 unit is two hosts, so no ToR
# holds a whole unit and each pod holds one of the D = 2 units a stage needs.
TOPOLOGY = """\
SwitchName=tor0 Nodes=h01
SwitchName=tor1 Nodes=h02
SwitchName=tor2 Nodes=h03
SwitchName=tor3 Nodes=h04
SwitchName=tor4 Nodes=h05
SwitchName=tor5 Nodes=h06
SwitchName=pod0 Switches=tor[0-2]
SwitchName=pod1 Switches=tor[3-5]
"""
HOSTS = "h01 slots=8\nh04 slots=8\nh02 slots=8\nh05 slots=8\n"


def _run(argv, capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    steps, solver = out["allocation"]["step_time_s"], out["allocation"]["solver"]
    assert steps["placed"] <= min(steps["scheduler_order"], steps["best_rank_order"])
    assert solver["status"] == "OPTIMAL"
    return out


def test_free_leaf_level_under_short_pods_places(tmp_path, capsys):
    """The traceback in small (the shipped example with --seq-len 131072 --tp 1 --pp 1 had the
    same shape: CP 64 units of 8 hosts on 2-host ToRs, pods holding one of two)."""
    (tmp_path / "topology.conf").write_text(TOPOLOGY)
    (tmp_path / "hosts").write_text(HOSTS)
    argv = ["plan", "--model", "llama3-8b", "--cluster", "llama3-roce-24k", "--global-batch",
            "16", "--tp", "8", "--cp", "2", "--pp", "1", "--topology",
            str(tmp_path / "topology.conf"), "--hosts", str(tmp_path / "hosts")]  # fmt: skip
    out = _run(argv, capsys)
    # the placed map re-prices to CP-SAT's objective (printed to the microsecond)
    placed = out["allocation"]["step_time_s"]["placed"]
    assert abs(placed - out["allocation"]["solver"]["objective"]) <= 1e-6


def test_fuzz_case_gb200_global_batch_7_places(tmp_path, capsys):
    """bench/fuzz.py --kind allocation --seed 1's traceback (notes i27v): uneven leaves, one
    leaf alone under a pod switch, two hosts kept."""
    (tmp_path / "topology.conf").write_text(
        "SwitchName=leaf0 Nodes=n[001-002]\nSwitchName=leaf1 Nodes=n003\n"
        "SwitchName=leaf2 Nodes=n[004-005]\nSwitchName=leaf3 Nodes=n[006-023]\n"
        "SwitchName=pod1 Switches=leaf3\n"
    )
    argv = ["plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72-superpod", "--topology",
            str(tmp_path / "topology.conf"), "--time-limit", "0.3", "--global-batch", "7",
            "--nodelist", "n[003,011]", "--place-top", "1", "--gpus", "8"]  # fmt: skip
    _run(argv, capsys)


def _small_free(pod_size: int):
    spec = models_zoo.load_model("llama3-8b")
    layout = Layout(tp=8, cp=2, dp=2)
    hosts = ["n00", "n01", "n03", "n04", "n06", "n07"]
    pod = {h: f"pod{int(h[1:]) // pod_size}" for h in hosts}
    levels = [{h: f"leaf{h}" for h in hosts}, pod]
    cluster = models_zoo.load_cluster("llama3-roce-24k", layout.world_size)
    wl = api.make_workload(spec, global_batch=16, seq_len=8192)
    return spec, cluster, wl, layout, A.synthetic(cluster, hosts, levels)


@pytest.mark.parametrize(("pod_size", "values"), [(3, [1]), (6, [1, 2])])
def test_free_level_table_nests_and_cpsat_equals_brute_force(pod_size, values):
    """Pods of 3 ToRs hold 1 of the D = 2 units (the traceback's shape); pods of 6 hold both
    (one of them spare). The leaf level is free either way and takes the pods' values."""
    spec, cluster, wl, layout, alloc = _small_free(pod_size)
    um = M.unit_model(spec, cluster, wl, layout, alloc)
    n = len(um.levels)
    assert k_values(um, 0) == k_values(um, 1) == values
    assert um.dp_class and all(
        a <= b for key in um.dp_class for a, b in itertools.pairwise(key[:n])
    )
    # the free level's k sets no span: with its (forced) lone flag, every k there costs the same
    flag = n + [lv for lv in range(n) if um.crossing[lv]].index(0)
    costs: dict[tuple, set] = {}
    for key, c in um.dp_class.items():
        if key[flag]:
            costs.setdefault(key[1:], set()).add(tuple(um.class_cost[c]))
    assert costs and all(len(v) == 1 for v in costs.values())
    sol = M.solve(um, time_limit_s=30)
    assert sol.status == "OPTIMAL"
    best_us, _ = oracle.counted_optimum(spec, cluster, wl, alloc, um)
    assert abs(sol.objective_us - best_us) <= 2
    assert M.objective_us(um, sol.counts) == sol.objective_us
    repriced = pricing.price(spec, cluster, wl, um.layout, alloc, sol.host_of_rank)
    assert abs(round(repriced.step_time_s * 1e6) - sol.objective_us) <= 2
