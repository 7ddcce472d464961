"""planner design (issue 29): the workload mix, the design space, the clusters it builds, and the
pruning, whose frontier, best design and best-per-budget must equal the full evaluation's."""

import itertools
import math

import pytest

import models_zoo
from cost_models.comm import TECHNOLOGY_LOAD_FACTOR
from cost_models.errors import InvalidInput
from planner import network_bom
from planner.design import search as S
from planner.design.mix import parse_mix
from planner.design.pricing import Costs
from planner.design.space import (
    Design,
    at_least_as_fast,
    cluster_for,
    default_space,
    designs,
    load_space,
)
from planner.network_prices import DEFAULT_PRICES

H100 = models_zoo.load_gpu("h100-sxm-80gb")
GB200 = models_zoo.load_gpu("gb200")
GOOD = {"model": "llama3-8b", "global_batch": 64, "seq_len": 4096, "precision": "bf16", "share": 1}


# ------------------------------------------------------------------------------ the mix


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ([], "non-empty list"),
        ([{**GOOD, "share": 0.5}], "shares must sum to 1 (they sum to 0.5)"),
        ([{**GOOD, "colour": 1}], "entry #1: unknown field 'colour'"),
        ([{k: v for k, v in GOOD.items() if k != "seq_len"}], "missing field 'seq_len'"),
        ([{**GOOD, "precision": "fp4"}], "precision must be one of bf16, fp8"),
        ([{**GOOD, "share": 0}], "share must be in (0, 1]"),
        ([{**GOOD, "global_batch": 1.5}], "global_batch must be a positive whole number"),
        ([{**GOOD, "model": "no-such-model"}], "entry #1: model:"),
        ([{**GOOD, "share": 0.5}, {**GOOD, "share": 0.5, "moe_dispatcher": "x"}], "entry #2"),
    ],
)
def test_bad_mix_is_one_line_naming_file_entry_and_rule(entries, words) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_mix(entries, "mix.yaml")
    msg = str(err.value)
    assert msg.startswith("mix.yaml: ") and words in msg and "\n" not in msg


def test_mix_labels_tell_entries_of_one_model_apart() -> None:
    mix = parse_mix([{**GOOD, "share": 0.5}, {**GOOD, "share": 0.5, "seq_len": 8192}], "m.yaml")
    assert mix[0].label != mix[1].label and mix[0].model_name == "Llama 3 8B"


# ------------------------------------------------------------------------------ the space


def test_default_space_h100_and_nvl72_domains() -> None:
    h = designs(default_space(H100), H100)
    # 3 technologies x 2 NIC speeds x (3 tapers x 3 tapered fabrics + rail-only)
    assert len(h) == 3 * 2 * (3 * 3 + 1)
    assert {d.scale_up for d in h} == {8}
    g = designs(default_space(GB200), GB200)
    assert {d.scale_up for d in g} == {8, 72}
    assert len({d.name for d in g}) == len(g)


def test_cluster_of_a_design_carries_its_choices() -> None:
    d = Design("rail-optimised", "roce", 800, (2.0,), 1, 8, 256, None)
    c = cluster_for(d, H100, 1024)
    assert [t.kind for t in c.tiers] == ["nvlink", "rail", "switch"]
    assert c.tiers[1].bandwidth_gb_per_s == 100 and c.tiers[2].oversubscription == 2
    assert c.network.technology == "roce" and not any(t.sharp for t in c.tiers)
    assert all(t.technology == "roce" for t in c.tiers[1:])
    ib = cluster_for(Design("rail-only", "infiniband", 400, (), 1, 8, 256, None), H100, 1024)
    assert [t.domain_size for t in ib.tiers] == [8, None] and ib.tiers[1].sharp
    three = cluster_for(Design("fat-tree", "roce", 400, (1.0, 4.0), 1, 8, 256, 2048), H100, 4096)
    assert [t.domain_size for t in three.tiers] == [8, 256, 2048, None]
    assert three.tiers[3].oversubscription == 4
    nvl = cluster_for(
        Design("rail-optimised", "infiniband", 400, (1.0,), 1, 72, 576, None), GB200, 1152
    )
    assert nvl.gpus_per_node == 4 and nvl.tiers[0].domain_size == 72
    # the bill prices the NVL72 scale-up fabric above the 8-GPU one
    nvl8 = cluster_for(
        Design("rail-optimised", "infiniband", 400, (1.0,), 1, 8, 576, None), GB200, 1152
    )
    assert network_bom.bill(nvl).capex_usd_per_gpu > network_bom.bill(nvl8).capex_usd_per_gpu


def test_at_least_as_fast_is_the_bandwidth_order() -> None:
    base = Design("rail-optimised", "roce", 400, (2.0,), 1, 8, 256, None)
    assert at_least_as_fast(base, base)
    faster = [
        Design("rail-optimised", "infiniband", 400, (2.0,), 1, 8, 256, None),  # SHARP
        Design("rail-optimised", "roce", 800, (2.0,), 1, 8, 256, None),
        Design("rail-optimised", "roce", 400, (1.0,), 1, 8, 256, None),
        Design("rail-optimised", "spectrum-x", 400, (2.0,), 1, 8, 256, None),  # same load factor
    ]
    for f in faster:
        assert at_least_as_fast(f, base)
    assert not at_least_as_fast(base, faster[0])
    assert not at_least_as_fast(
        Design("rail-optimised", "roce-untuned", 800, (1.0,), 1, 8, 256, None), base
    )
    assert not at_least_as_fast(
        Design("fat-tree", "infiniband", 800, (1.0,), 1, 8, 256, None), base
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("colour: [red]\n", "unknown axis 'colour'"),
        ("technology: [infiniband, myrinet]\n", "technology must be one of"),
        ("nic_gbps: [300]\n", "nic_gbps must be one of"),
        ("scale_up: [72]\n", "scale_up 72: h100-sxm-80gb's NVLink domain is 8"),
        ("oversubscription: [0.5]\n", "oversubscription must be numbers in [1, 64]"),
        ("fabric: [multi-plane]\nplanes: [3]\n", "planes must divide the 8 GPUs of a node"),
        ("leaf_gpus: 12\n", "leaf_gpus (12) must be a multiple of scale_up 8"),
        ("pod_gpus: [300]\noversubscription: [[1, 2]]\n", "pod_gpus (300) must be a multiple"),
        ("oversubscription: [[1, 2]]\n", "has 2 taper(s) but the designs have 1"),
        ("- 1\n", "expected a mapping of axes"),
    ],
)
def test_bad_designs_file_is_one_line(tmp_path, text, words) -> None:
    f = tmp_path / "designs.yaml"
    f.write_text(text)
    with pytest.raises(InvalidInput) as err:
        load_space(str(f), H100, 1024)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_designs_file_narrows_and_widens(tmp_path) -> None:
    f = tmp_path / "d.yaml"
    f.write_text(
        "technology: roce-untuned\nnic_gbps: [200]\nfabric: [fat-tree]\n"
        "pod_gpus: [null, 2048]\noversubscription: [1, [1, 4], [2, 8]]\n"
    )
    got = designs(load_space(str(f), H100, 16384), H100)
    assert [d.name for d in got] == [
        "roce-untuned-200g-ft-1:1-nvl8",
        "roce-untuned-200g-ft-1/4:1-pod2048-nvl8",
        "roce-untuned-200g-ft-2/8:1-pod2048-nvl8",
    ]


# ------------------------------------------------------------------------------ pruning


def _synthetic(c: S.Candidate) -> float:
    """A throughput monotone in every bandwidth the order compares, with a ceiling (ties)."""
    d = c.design
    load = TECHNOLOGY_LOAD_FACTOR[d.technology] * (1.03 if d.technology == "infiniband" else 1)
    taper = math.prod(1 / (1 + 0.15 * (o - 1)) for o in d.oversubscription)
    shape = {"rail-optimised": 1.0, "fat-tree": 0.97, "rail-only": 0.9, "multi-plane": 1.01}
    raw = 1000 * shape[d.fabric] * load * taper * (1 - 60 / d.nic_gbps)
    return min(raw, 900.0)


def test_pruned_search_equals_full_search(monkeypatch, tmp_path) -> None:
    """Soundness of both rules on a synthetic monotone throughput over a wide space: the
    frontier, the best design and the best per budget are the full evaluation's."""
    f = tmp_path / "d.yaml"
    f.write_text(
        "technology: [infiniband, roce, spectrum-x, roce-untuned]\nnic_gbps: [100, 200, 400, 800]\n"
        "oversubscription: [1, 2, 3, 4]\n"
    )
    costs = Costs(2.0, 5.0, DEFAULT_PRICES)
    cands = S.candidates(H100, 4096, str(f), costs)
    mix = parse_mix([GOOD], "m.yaml")
    calls = []

    def fake(wave, mix, costs, run):
        calls.extend(c.index for c in wave)
        return [
            S.Evaluated(c, (), ("PROVED",), t, costs.usd_per_m_tokens(c.bill, t))
            for c in wave
            for t in [_synthetic(c)]
        ]

    monkeypatch.setattr(S, "_evaluate", fake)
    results = {}
    for prune in (False, True):
        calls.clear()
        done, skipped = S._search(list(cands), mix, costs, None, prune)
        ev = [done[c.index] for c in cands if c.index in done]
        front = S.frontier(ev)
        for budget, floor in itertools.product((None, 6000.0, 9000.0), (None, 700.0)):
            b = S.best_design(ev, budget, floor)
            results.setdefault((budget, floor), []).append(
                None if b is None else ev[b].candidate.index
            )
        results.setdefault("front", []).append([ev[i].candidate.index for i in front])
        results.setdefault("budget", []).append(
            [(x, ev[i].candidate.index) for x, i in S._per_budget(ev, front, None)]
        )
        results.setdefault("evaluated", []).append(len(calls))
        if prune:
            assert {s.rule for s in skipped} == {"dominated", "bounded"}
    for key, (full, pruned) in results.items():
        if key != "evaluated":
            assert full == pruned, key
    full, pruned = results["evaluated"]
    assert full == len(cands) and pruned < full / 2
