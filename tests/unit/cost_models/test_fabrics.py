"""Hand-computed collective times for every fabric kind (docs/networks.md derives each rule)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
import yaml

import models_zoo
from cost_models import comm
from cost_models.errors import InvalidInput
from cost_models.specs import LinkTier
from models_zoo.fabric_graph import tiers_from_graph

GB = 1e9


def tier(name: str, domain: int | None, bw: float, **kw: object) -> LinkTier:
    return LinkTier.model_validate(
        {"name": name, "domain_size": domain, "bandwidth_gb_per_s": bw, "latency_us": 0.0, **kw}
    )


NVLINK = tier("nvlink", 8, 450, efficiency=0.8, kind="nvlink")  # 360 GB/s bus bandwidth
LEAF = tier("leaf", 64, 50, efficiency=0.9)  # 45 GB/s


def test_fat_tree_oversubscription_divides_the_spine_share() -> None:
    spine_4 = tier("spine", None, 50, efficiency=0.9, oversubscription=4)  # 11.25 GB/s
    spine_1 = tier("spine", None, 50, efficiency=0.9)
    # Two GPUs in different leaves: all-reduce of 1 GB moves 2(2-1)/2 x 1 GB over the spine.
    assert comm.collective_time_s("all_reduce", GB, [1, 1, 2], (NVLINK, LEAF, spine_4)) == (
        pytest.approx(1 / 11.25)
    )
    assert comm.collective_time_s("all_reduce", GB, [1, 1, 2], (NVLINK, LEAF, spine_1)) == (
        pytest.approx(1 / 45)
    )
    # Ring over 128 GPUs, span [8, 64, 128]: NVLink f=8 on 1 GB, leaf f=8 on the 1/8 GB share,
    # spine f=2 on the 1/64 GB share; NCCL's flat ring crosses nodes, so its 2 x (128 - 16)
    # NVLink steps cost at least the Simple protocol's 3 us network overhead (tuning.cc).
    expected = 1.75 / 360 + 2 * 7 / 8 * (1 / 8) / 45 + 1 * (1 / 64) / 11.25 + 224 * 3e-6
    got = comm.collective_time_s("all_reduce", GB, [8, 64, 128], (NVLINK, LEAF, spine_4))
    assert got == pytest.approx(expected)


def test_torus_closed_ring_uses_both_directions_open_segment_does_not() -> None:
    x = tier("x", 4, 100, efficiency=1.0, kind="torus", dim_size=4)
    y = tier("y", None, 100, efficiency=1.0, kind="torus", dim_size=4)
    # Whole dimension (4 of 4): wrap-around ring, 2 x 100 GB/s: 2 x 3/4 GB / 200 GB/s.
    assert comm.collective_time_s("all_reduce", GB, [4, 4], (x, y)) == pytest.approx(0.0075)
    # 2 of 4 chips: an open line, 100 GB/s: 2 x 1/2 GB / 100 GB/s.
    assert comm.collective_time_s("all_reduce", GB, [2, 2], (x, y)) == pytest.approx(0.01)
    # Both dimensions at once: two halves of the payload walk x then y and y then x, so each
    # dimension's links carry half the sequential bytes (x on 1/2 GB, y on the 1/8 GB share).
    assert comm.collective_time_s("all_reduce", GB, [4, 16], (x, y)) == pytest.approx(
        (0.0075 + 1.5 * 0.25 / 200) / 2
    )


def test_dragonfly_ring_pays_valiant_detour_all_to_all_does_not() -> None:
    group = tier("group", 64, 50, efficiency=1.0)
    global_ = tier("global", None, 25, efficiency=1.0, kind="dragonfly")
    # Ring between two groups: half of 25 GB/s; all-reduce of 1 GB moves 1 GB.
    assert comm.collective_time_s("all_reduce", GB, [1, 2], (group, global_)) == pytest.approx(
        1 / 12.5
    )
    # All-to-all across two groups: half the bytes leave, at the full 25 GB/s.
    assert comm.all_to_all_time_s(GB, [1, 2], (group, global_)) == pytest.approx(0.5 / 25)


@pytest.mark.parametrize("kind", ["plane", "rail"])
def test_cross_rail_all_to_all_forwards_over_nvlink(kind: str) -> None:
    nvlink = tier("nvlink", 8, 200, efficiency=1.0, kind="nvlink")
    planes = tier("planes", None, 50, efficiency=1.0, kind=kind, rails=8)
    single = tier("planes", None, 50, efficiency=1.0, kind=kind, rails=1)
    # 16 GPUs on two nodes: half the bytes leave the node (0.5 GB at 50 GB/s = 10 ms) and 7/8 of
    # those also hop over NVLink to the GPU on the right plane, beside the network transfer:
    # NVLink carries 15/16 GB leaving the GPU + 0.4375 GB forwarded = 1.375 GB / 200 = 6.9 ms,
    # so the network (10 ms) sets the time, as with one plane (arXiv 2505.09343 sec. 5.1.2).
    got = comm.all_to_all_time_s(GB, [8, 16], (nvlink, planes))
    assert got == pytest.approx(0.01)
    assert comm.all_to_all_time_s(GB, [8, 16], (nvlink, single)) == pytest.approx(0.01)
    # A slow NVLink (50 GB/s) makes the forwarded bytes the bottleneck: 1.375 GB / 50 GB/s.
    slow = tier("nvlink", 8, 50, efficiency=1.0, kind="nvlink")
    assert comm.all_to_all_time_s(GB, [8, 16], (slow, planes)) == pytest.approx(1.375 / 50)
    # Rings stay on one rail: no forwarding.
    ring = comm.collective_time_s("all_gather", GB, [1, 2], (nvlink, planes))
    assert ring == pytest.approx(0.5 / 50)


def test_wan_latency_is_milliseconds() -> None:
    site = tier("site", 64, 50, efficiency=1.0)
    wan = tier("wan", None, 1, efficiency=1.0, kind="wan").model_copy(update={"latency_us": 5000})
    # All-reduce of 100 MB between two sites: 0.1 GB at 1 GB/s, plus 2 x 5 ms (one tree level).
    got = comm.collective_time_s("all_reduce", 0.1 * GB, [1, 2], (site, wan))
    assert got == pytest.approx(0.1 + 0.01)
    assert comm.p2p_time_s(0.1 * GB, wan) == pytest.approx(0.105)


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("llama3-roce-24k", ["nvlink", "switch", "switch", "switch"]),
        ("deepseek-v3-mpft", ["nvlink", "plane", "plane"]),
        ("dgx-h100-superpod", ["nvlink", "rail", "switch"]),
        ("gb200-nvl72-superpod", ["nvlink", "rail", "switch"]),
        ("tpu-v5p-4096", ["torus", "torus", "torus"]),
        ("two-dc-h100", ["nvlink", "switch", "wan"]),
    ],
)
def test_fabric_presets_load_with_their_tier_kinds(name: str, kinds: list[str]) -> None:
    cluster = models_zoo.load_cluster(name)
    assert [t.kind for t in cluster.tiers] == kinds
    assert cluster.source


def test_llama3_cluster_tapers_seven_to_one_above_the_pod() -> None:
    tiers = models_zoo.load_cluster("llama3-roce-24k").tiers
    assert [t.domain_size for t in tiers] == [8, 16, 3072, None]
    assert tiers[-1].oversubscription == 7


def small_fat_tree() -> nx.Graph:
    """4 nodes of 2 GPUs (NVSwitch 450), 2 leaves of 2 nodes (50 per GPU), 1 spine (50 per leaf)."""
    g = nx.Graph()
    for node in range(4):
        g.add_node(f"nvs{node}", type="switch", level=0)
        for i in range(2):
            g.add_node(f"g{node}.{i}", type="gpu")
            g.add_edge(f"g{node}.{i}", f"nvs{node}", gb_per_s=450)
            g.add_edge(f"g{node}.{i}", f"leaf{node // 2}", gb_per_s=50)
    for leaf in range(2):
        g.nodes[f"leaf{leaf}"].update(type="switch", level=1)
        g.add_edge(f"leaf{leaf}", "spine", gb_per_s=50)
    g.nodes["spine"].update(type="switch", level=2)
    return g


def test_graph_reduces_to_nested_tiers_with_the_leaf_taper(tmp_path: Path) -> None:
    tiers = tiers_from_graph(small_fat_tree())
    assert [t["domain_size"] for t in tiers] == [2, 4, None]
    assert [t["bandwidth_gb_per_s"] for t in tiers] == [450, 50, 50]
    # Each leaf has 4 GPUs x 50 down and 50 up: 4:1 above the leaf.
    assert [t["oversubscription"] for t in tiers] == [1, 1, 4]
    assert [t["kind"] for t in tiers] == ["nvlink", "switch", "switch"]
    # A cluster file may give the graph instead of tiers.
    data = {
        "name": "custom",
        "gpu": "h100",
        "gpus_per_node": 2,
        "num_gpus": 8,
        "graph": nx.node_link_data(small_fat_tree(), edges="edges"),
    }
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(data))
    cluster = models_zoo.load_cluster(str(path))
    assert cluster.tiers[-1].oversubscription == 4


def test_uneven_graph_is_invalid_input() -> None:
    g = small_fat_tree()
    g.add_node("g9", type="gpu")
    g.add_edge("g9", "leaf0", gb_per_s=50)  # a GPU with no NVSwitch: level-0 domains differ
    with pytest.raises(InvalidInput, match="level 0 domains differ"):
        tiers_from_graph(g)


def test_group_straddling_a_non_power_of_two_domain_pays_the_outer_tier() -> None:
    from cost_models import topology
    from cost_models.specs import Layout

    # Two NVL72 domains (144 GPUs). DP 18 of stride 8: ranks 0..136, 9 per domain, whole.
    nvl = models_zoo.load_cluster("gb200-nvl72", 144)
    assert topology.spans(nvl, Layout(tp=8, dp=18), moe=False)["dp"] == (9, 18)
    # TP 16: group 64..79 has 8 GPUs in each domain, so TP pays the outer tier for every group
    # (before: 16 inside, as group 0..15 is).
    assert topology.spans(nvl, Layout(tp=16, dp=9), moe=False)["tp"] == (8, 16)
    # 16,384 GPUs do not fill whole 3,072-GPU pods: the ideal allocation spreads them evenly,
    # 2,048 per pod (rankmap.tier_domains), so DP 256 of stride 16 keeps 128 in one pod (with
    # ranks numbered over partial pods, 3,072 + ... + 1,024, the worst group kept only 64).
    llama = models_zoo.load_cluster("llama3-roce-24k", 16384)
    assert topology.tier_domains(llama)[2] == 2048
    spans = topology.spans(llama, Layout(tp=16, dp=256, pp=4), moe=False)
    assert spans["dp"] == (1, 1, 128, 256)
    # 256 GPUs over NVL72 racks: 64 per rack (16 of 18 trays), so an EP64 group stays on NVLink.
    nvl256 = models_zoo.load_cluster("gb200-nvl72", 256)
    assert topology.tier_domains(nvl256)[0] == 64
    assert topology.spans(nvl256, Layout(tp=1, dp=64, pp=4), moe=False)["dp"][0] == 64


def test_torus_all_to_all_bounded_by_bisection() -> None:
    x = tier("x", 16, 100, efficiency=1.0, kind="torus", dim_size=16)
    y = tier("y", None, 100, efficiency=1.0, kind="torus", dim_size=16)
    # 1 GB per chip spread over a closed ring of 16: 15/16 GB leaves each chip. Injection bound
    # 15/16 GB / 200 GB/s; bisection: 16 x 15/16 GB / (8 x 100 GB/s) -- 4x longer.
    got = comm.all_to_all_time_s(GB, [16, 16], (x, y))
    assert got == pytest.approx(16 * 15 / 16 / 800)
    assert got == pytest.approx(4 * (15 / 16) / 200)
