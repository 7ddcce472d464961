"""Issue 27: other jobs' traffic on the allocation's switch uplinks (planner/place/traffic.py),
priced into the uplink sharing so the placement moves around a noisy neighbour."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_place_allocation import TAPERED, _small

from cost_models.errors import InvalidInput
from planner import api
from planner.cli import main
from planner.place import evaluate, oracle, pricing, traffic
from planner.place import model as M

EXAMPLE = ["plan", "--model", "llama3.1-70b", "--cluster", "llama3-roce-24k",
           "--global-batch", "64", "--pp", "2", "--topology",
           "docs/examples/allocation/topology.conf", "--hosts",
           "docs/examples/allocation/hostfile", "--exclude", "gpu010", "--place-top", "1"]  # fmt: skip


def _loaded(alloc, tier: int, switch: str, pct: int):
    busy = {tier: np.zeros(len(alloc.names[tier - 1]), dtype=np.int64)}
    busy[tier][alloc.names[tier - 1].index(switch)] = pct
    return traffic.LoadedAllocation(**vars(alloc), busy_pct=busy)


def test_a_loaded_pod_moves_the_placement_and_cpsat_still_equals_brute_force():
    """Two pods behind 7:1 uplinks: half of pod0's uplink taken by another job moves the
    stage whose DP groups left pod0 (443.3 ms -> 383.4 ms under the load); CP-SAT's objective
    equals every count matrix priced exactly on the loaded allocation, and its map re-prices
    to it."""
    leaves, drained, layout, pods, taper = TAPERED[4]
    spec, cluster, wl, alloc = _small(leaves, drained, layout, pods=pods, taper=taper)
    wl = api.make_workload(spec, global_batch=2 * layout.dp)
    before = M.solve(M.unit_model(spec, cluster, wl, layout, alloc), time_limit_s=30)
    loaded = _loaded(alloc, 3, "pod0", 50)
    um = M.unit_model(spec, cluster, wl, layout, loaded)
    assert um.uplink_max == [4, 8]  # leaves untouched; pods: ceil(4 / (1 - 0.5))
    after = M.solve(um, time_limit_s=30)
    assert after.status == "OPTIMAL"
    assert after.counts != before.counts
    assert evaluate.objective_us(um, after.counts) < evaluate.objective_us(um, before.counts)
    best_us, _ = oracle.counted_optimum(spec, cluster, wl, loaded, um)
    assert abs(after.objective_us - best_us) <= 2
    e = pricing.price(spec, cluster, wl, um.layout, loaded, after.host_of_rank)
    assert abs(round(e.step_time_s * 1e6) - after.objective_us) <= 2
    # the old map, priced on the loaded allocation, pays for the load
    old = pricing.price(spec, cluster, wl, um.layout, loaded, before.host_of_rank)
    assert old.step_time_s > e.step_time_s
    # docs/cli.md (--other-traffic) quotes these two step times
    assert (round(old.step_time_s * 1e3, 1), round(e.step_time_s * 1e3, 1)) == (443.3, 383.4)


def test_no_load_leaves_every_step_unchanged():
    leaves, drained, layout, pods, taper = TAPERED[4]
    spec, cluster, wl, alloc = _small(leaves, drained, layout, pods=pods, taper=taper)
    zero = traffic.LoadedAllocation(**vars(alloc), busy_pct={})
    hosts = pricing.host_order_map(cluster, layout)
    assert pricing.uplink_steps(cluster, zero, layout, hosts) == pricing.uplink_steps(
        cluster, alloc, layout, hosts
    )


def test_cli_other_traffic_prices_the_load(tmp_path, capsys):
    """The shipped example with one pod's uplink half taken: still placed (exit 0) and the
    placed step is dearer than without the load, never cheaper."""
    assert main([*EXAMPLE, "--json"]) == 0
    free = json.loads(capsys.readouterr().out)["allocation"]["step_time_s"]["placed"]
    load = tmp_path / "load.yaml"
    load.write_text("uplinks:\n  pod1: 0.5\n  not-in-this-allocation: 0.7\n")
    assert main([*EXAMPLE, "--json", "--other-traffic", str(load)]) == 0
    busy = json.loads(capsys.readouterr().out)["allocation"]["step_time_s"]["placed"]
    assert busy > free


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("uplinks:\n  pod1: 0.9\n", "not a share from 0 to 0.75"),
        ("uplinks:\n  pod1: yes\n", "not a share"),
        ("pod1: 0.5\n", "expected one key, uplinks"),
        ("uplinks:\n  nowhere: 0.5\n", "none of nowhere is a switch"),
        ("uplinks: [\n", "malformed YAML"),
        ("[" * 3000, "nested more than 64 levels"),  # escaped as a RecursionError (issue 28 fuzz)
    ],
)
def test_bad_traffic_file_is_one_line_naming_the_file(tmp_path, capsys, text, words):
    load = tmp_path / "load.yaml"
    load.write_text(text)
    assert main([*EXAMPLE, "--other-traffic", str(load)]) == 2
    err = capsys.readouterr().err
    assert words in err and str(load) in err and len(err.strip().splitlines()) == 1


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInput, match="none.yaml: file not found"):
        traffic._read(tmp_path / "none.yaml")
