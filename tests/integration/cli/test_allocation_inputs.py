"""Issue 27: the allocation inputs users have -- Slurm's topology.yaml (tree, block, flat; several
topologies), block topologies for NVL72 racks as NVIDIA's topograph writes them, partial hosts --
and what a failed plan says it read."""

from __future__ import annotations

from pathlib import Path

import pytest

import models_zoo
from cost_models.errors import InvalidInput
from planner.cli import main
from planner.place import allocation as A

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "allocation"
ROCE = "llama3-roce-24k"  # tiers: nvlink (8), tor (16), pod (3,072), aggregation
NVL72 = "gb200-nvl72-superpod"  # tiers: nvlink (72), rail-leaf (576), spine; 4 GPUs per node


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_slurm_yaml_tree_reads_like_the_topology_conf():
    conf = A.parse_topology(EXAMPLE / "topology.conf")
    yml = A.parse_topology(EXAMPLE / "topology.yaml")  # cluster_default: roce-tree
    assert yml.kind == "tree" and yml.name == "roce-tree"
    assert yml.levels[:2] == conf.levels and len(yml.levels) == 3  # + the aggregation root
    cluster = models_zoo.load_cluster(ROCE)
    kw = {"hosts_file": EXAMPLE / "hostfile", "exclude": "gpu010"}
    a = A.load_allocation(cluster, EXAMPLE / "topology.conf", **kw)
    b = A.load_allocation(cluster, EXAMPLE / "topology.yaml", **kw)
    assert [d.tolist() for d in a.domains] == [d.tolist() for d in b.domains]


def test_yaml_picks_the_named_then_the_cluster_default_then_the_first(tmp_path):
    body = "  block:\n    blocks:\n      - block: b0\n        nodes: n[0-1]\n"
    two = "- topology: first\n" + body + "- topology: second\n  cluster_default: true\n" + body
    path = _write(tmp_path, "t.yaml", two)
    assert A.parse_topology(path).name == "second"
    assert A.parse_topology(path, "first").name == "first"
    assert A.parse_topology(_write(tmp_path, "u.yaml", "- topology: only\n" + body)).name == "only"
    with pytest.raises(InvalidInput, match=r"--topology-name third: .*t.yaml has first, second"):
        A.parse_topology(path, "third")
    with pytest.raises(InvalidInput, match="is a topology.conf"):
        A.parse_topology(EXAMPLE / "topology.conf", "roce-tree")


def test_topograph_block_conf_on_nvl72_racks():
    topo = A.parse_topology(EXAMPLE / "topology-nvl72.conf")
    assert topo.kind == "block" and topo.block_nodes == 18 and topo.block_sizes == [18, 36, 72]
    assert topo.levels[0]["nvl03n05"] == "block003" and len(topo.levels) == 1
    yml = A.parse_topology(EXAMPLE / "topology-nvl72.yaml")  # the same racks, named NVL1..16
    assert yml.kind == "block" and yml.levels[0]["nvl03n05"] == "NVL3"
    cluster = models_zoo.load_cluster(NVL72)
    alloc = A.load_allocation(
        cluster, topo, hosts_file=EXAMPLE / "hostfile-nvl72", exclude="nvl03n07"
    )
    assert alloc.level_tiers == [0] and len(alloc.hosts) == 63  # racks: NVLink domains
    racks = {alloc.domain_name(0, i) for i in range(len(alloc.hosts))}
    assert racks == {"block003", "block005", "block011", "block014"}
    # rail-leaf (576 GPUs = 8 racks of 72): consecutive racks in file order, 1-8 and 9-16
    leaf = {alloc.hosts[i][:5]: alloc.domain_name(1, i) for i in range(len(alloc.hosts))}
    assert leaf == {"nvl03": "rail-leaf0", "nvl05": "rail-leaf0", "nvl11": "rail-leaf1",
                    "nvl14": "rail-leaf1"}
    assert set(alloc.names[2]) == {"*"}


def test_block_tiers_on_a_node_nvlink_cluster_and_flat_fill_in_order(tmp_path):
    cluster = models_zoo.load_cluster(ROCE)
    blocks = A.parse_topology(EXAMPLE / "topology.yaml", "tor-blocks")
    alloc = A.load_allocation(cluster, blocks, nodelist="gpu[001-004,013]")
    assert alloc.level_tiers == [1]  # blocks are the first tier above NVLink (ToR pairs)
    assert alloc.domains[1].tolist() == [0, 0, 1, 1, 2]
    assert alloc.domains[2].tolist() == [0] * 5  # pod: 3,072 GPUs hold all 12 blocks
    flat = _write(tmp_path, "flat.yaml", "- topology: f\n  flat: true\n")
    alloc = A.load_allocation(cluster, flat, nodelist="gpu[007,001-003]")  # any host
    assert alloc.hosts == ["gpu007", "gpu001", "gpu002", "gpu003"]
    assert alloc.domains[0].tolist() == [0, 1, 2, 3]  # a node is the NVLink domain
    assert alloc.domains[1].tolist() == [0, 0, 1, 1]  # ToR: 16 GPUs, two hosts as listed
    nvl = models_zoo.load_cluster(NVL72)
    alloc = A.load_allocation(nvl, flat, nodelist="x[1-20]")
    assert alloc.domains[0].tolist() == [0] * 18 + [1] * 2  # 72-GPU domains of 18 trays


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("BlockName=b0 Nodes=n[0-1]\nBlockSizes=2,6\n", "bad.conf:2", "power of two"),
        ("BlockName=b0 Nodes=n[0-1]\nBlockSizes=2,x\n", "bad.conf:2", "whole numbers"),
        ("BlockName=b0 Nodes=n0\nBlockName=b0 Nodes=n1\n", "bad.conf:2", "already defined"),
        ("BlockName=b0 Nodes=n0\nBlockName=b1 Nodes=n0\n", "bad.conf:2", "in two blocks"),
        ("BlockName=b0 Nodes=n0\nBlockSizes=1\nBlockSizes=2\n", "bad.conf:3", "twice"),
        ("BlockName=b0 Nodes=n0 Switches=s\n", "bad.conf:1", "BlockName=NAME Nodes"),
    ],
)
def test_bad_block_conf_exits_2_naming_the_line(tmp_path, capsys, text, where, words):
    path = _write(tmp_path, "bad.conf", text)
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--topology", path]
    assert main([*argv, "--nodelist", "n0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{where}:" in err and words in err


YAML_CASES = [
    ("levels: 3\n", "bad.yaml: levels", "list"),
    ("{a: 1}\n", "bad.yaml", "a list of '- topology: NAME' entries"),
    ("- flat: true\n", "bad.yaml: [0]", "topology: NAME"),
    ("- flat: true\n  topology: t\n", "bad.yaml: [0]", "first attribute"),
    ("- topology: t\n  cluster_default: 2\n  flat: true\n", "[0].cluster_default", "true or"),
    ("- topology: t\n", "topology t", "exactly one of tree, block, flat"),
    ("- topology: t\n  flat: true\n  tree: {}\n", "topology t", "exactly one"),
    ("- topology: t\n  flat: true\n- topology: t\n  flat: true\n", "bad.yaml", "defined twice"),
    ("- topology: t\n  flat: false\n", "topology t.flat", "names no topology"),
    ("- topology: t\n  ring:\n    rings: []\n", "topology t", "ring topologies are not"),
    ("- topology: t\n  flat: true\n  colour: red\n", "topology t", "unknown key colour"),
    ("- topology: t\n  tree: {switches: 3}\n", "topology t.tree.switches", "non-empty list"),
    ("- topology: t\n  tree:\n    switches:\n      - {switch: s, nodes: 'n[0-'}\n",
     "topology t.tree.switches[0]", "bad hostlist"),
    ("- topology: t\n  tree:\n    switches:\n      - {switch: s, node: n0}\n",
     "topology t.tree.switches[0]", "unknown key node"),
    ("- topology: t\n  tree:\n    switches:\n      - {switch: s, children: x}\n",
     "topology t.tree.switches[0]", "unknown switch x"),
    ("- topology: t\n  tree:\n    switches:\n      - {switch: s, nodes: [n0]}\n",
     "topology t.tree.switches[0].nodes", "expected a name or hostlist"),
    ("- topology: t\n  block:\n    blocks:\n      - {nodes: n0}\n",
     "topology t.block.blocks[0]", "block: NAME"),
    ("- topology: t\n  block:\n    block_sizes: [1, 3]\n    blocks:\n      - {block: b}\n",
     "topology t.block.block_sizes", "power of two"),
    ("- topology: t\n  block:\n    block_sizes: 4\n    blocks:\n      - {block: b, nodes: n0}\n",
     "topology t.block.block_sizes", "list of node counts"),
    ("- topology: t\n  tree: [1]\n", "topology t.tree", "mapping"),
    ("- topology: t\n  flat: true\n   bad: indent\n", "bad.yaml:3", "not valid YAML"),
]


@pytest.mark.parametrize(("text", "where", "words"), YAML_CASES)
def test_bad_topology_yaml_exits_2_naming_the_field(tmp_path, capsys, text, where, words):
    path = _write(tmp_path, "bad.yaml", text)
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--topology", path]
    assert main([*argv, "--nodelist", "n0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert where in err and words in err, err


def test_partial_host_is_refused_naming_it_never_dropped(tmp_path, capsys):
    hosts = _write(tmp_path, "hosts", "gpu001\ngpu002 slots=4\n")
    argv = ["plan", "--model", "llama3-8b", "--cluster", ROCE, "--global-batch", "16"]
    argv += ["--topology", str(EXAMPLE / "topology.conf"), "--hosts", hosts]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "gpu002 slots=4 is a partial node" in err and "--exclude gpu002" in err
    cluster = models_zoo.load_cluster(ROCE)
    alloc = A.load_allocation(cluster, EXAMPLE / "topology.conf", hosts_file=hosts,
                              exclude="gpu002")
    assert alloc.hosts == ["gpu001"] and alloc.gpus_per_host == 8


def test_failures_say_what_was_read(capsys):
    base = ["plan", "--model", "llama3.1-405b", "--cluster", ROCE, "--global-batch", "64"]
    base += ["--topology", str(EXAMPLE / "topology.conf"), "--hosts", str(EXAMPLE / "hostfile")]
    base += ["--exclude", "gpu010"]
    assert main([*base, "--tp", "1", "--pp", "1", "--cp", "1"]) == 1
    err = capsys.readouterr().err
    assert "allocation read: 16 hosts kept x 8 GPUs = 128 GPUs" in err
    assert "kept (scheduler's order): gpu[001-003,005-006,008-009,011,013-014,016-017," in err
    assert "dropped gpu010: drained (--exclude)" in err
    assert main([*base, "--gpus", "256"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.endswith(
        "[allocation read: 16 of 17 hosts kept x 8 GPUs = 128 GPUs; dropped gpu010 drained"
        " (--exclude)]"
    )
