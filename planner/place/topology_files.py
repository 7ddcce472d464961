"""Switch topologies as the scheduler describes them, read into switch levels bottom-up.

Formats (docs/cli.md#placement-on-an-allocation), all read by content:

- Slurm's topology.conf (doc/man/man5/topology.conf.5): the tree format (`SwitchName=NAME
  Nodes=HOSTLIST` for leaves, `SwitchName=NAME Switches=LIST` above them, optional `LinkSpeed=N`),
  parsed as src/plugins/topology/tree/switch_record.c does (a switch has nodes or child switches;
  its level is 1 + its highest child's, leaves are level 0), or the block format (`BlockName=NAME
  Nodes=HOSTLIST` and one `BlockSizes=B0,B1,...`, src/plugins/topology/block/block_record.c);
  keys are case-insensitive, `#` starts a comment, a trailing backslash continues a line;
- Slurm's topology.yaml (doc/man/man5/topology.yaml.5; Slurm >= 25.05): a list of topologies,
  each `topology: NAME`, optional `cluster_default: BOOL` and exactly one of `tree: {switches:
  [{switch, children | nodes}]}`, `block: {block_sizes: [...], blocks: [{block, nodes}]}` or
  `flat: true | {...}`; the one a partition uses is named by `--topology-name` (slurm.conf
  `PartitionName=... Topology=NAME`), else the first with `cluster_default: true`, else the
  first (src/interfaces/topology.c sorts the cluster default first);
- the product's own YAML: `levels: [{switch: HOSTLIST, ...}, ...]` bottom-up.

BlockSizes are in nodes (the first is the planning base block; each further one is the base
times a power of two, at most 2^15: block_record.c `_list_to_bitmap`). They are Slurm's
scheduling aggregates, not switches, so they are checked and kept (`block_sizes`) but define
no tier: the tiers above the blocks group consecutive blocks in file order (allocation.py).
NVIDIA's topograph writes both formats (`# block001=NVL11` comments, BlockSizes last).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostlist
import yaml
from pydantic import Field, ValidationError, field_validator

from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import Spec
from models_zoo.inputs import unreadable


def expand(expr: str, where: str) -> list[str]:
    """Hosts of a Slurm hostlist expression, in order (python-hostlist)."""
    try:
        return hostlist.expand_hostlist(expr.strip())
    except hostlist.BadHostlist as exc:
        raise InvalidInput(f"{where}: bad hostlist {expr!r}: {exc}") from None


def read_lines(path: str | Path, what: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:  # "file not found" in the words every reader uses
        raise unreadable(f"{what}: {path}", exc) from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{what}: {path} is not UTF-8 text") from None


@dataclass
class Topology:
    """Switch levels bottom-up: levels[i] maps each host to its level-i switch (or block).

    kind: "tree" (switches; tiers above the top level hold everything), "block" (one level of
    blocks; the tiers above group consecutive blocks in `block_order`), "flat" (no levels: the
    hosts fill the tiers in the order listed) or "yaml" (the product's levels)."""

    source: str
    kind: str
    levels: list[dict[str, str]]
    link_speed: dict[str, int] = field(default_factory=dict)
    nvlink_blocks: bool = False  # the first level may be NVLink domains (racks)
    block_order: list[str] = field(default_factory=list)
    block_nodes: int = 0  # Slurm's planning base block size, nodes
    block_sizes: list[int] = field(default_factory=list)
    name: str = ""  # the topology.yaml entry read

    @property
    def hosts(self) -> set[str] | None:
        """Hosts under some switch; None: every host (flat)."""
        if self.kind == "flat":
            return None
        return set(self.levels[0]) if self.levels else set()

    def describe(self) -> str:
        what = f"{self.source}" + (f" (topology {self.name})" if self.name else "")
        return f"{what}, {self.kind}"


Entry = tuple[str, dict[str, str]]  # (where, lower-case KEY -> value)

_KEY_VALUE = re.compile(r"(\w+)=(\S+)")


def _fields(at: str, line: str) -> dict[str, str]:
    """KEY=VALUE pairs of one line (keys lower-cased: Slurm's keys are case-insensitive)."""
    out: dict[str, str] = {}
    rest = _KEY_VALUE.sub("", line).strip()
    if rest:
        raise InvalidInput(f"{at}: expected KEY=VALUE pairs, got {rest!r}")
    for key, value in _KEY_VALUE.findall(line):
        if key.lower() in out:
            raise InvalidInput(f"{at}: {key} given twice")
        out[key.lower()] = value
    return out


def _conf_entries(path: str) -> list[Entry]:
    """Non-empty lines without comments as entries; a trailing backslash continues a line."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(read_lines(path, "--topology"), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            at = f"{path}:{start}"
            out.append((at, _fields(at, line)))
    return out


def parse_topology(path: str | Path, name: str | None = None) -> Topology:
    """A topology.conf (tree or block), Slurm's topology.yaml or the product's YAML, by content;
    `name` picks a topology.yaml entry (--topology-name)."""
    path = str(path)
    text = "\n".join(read_lines(path, "--topology"))
    if path.endswith((".yaml", ".yml")) or _looks_yaml(text):
        return _parse_yaml(path, text, name)
    if name is not None:
        raise InvalidInput(f"--topology-name {name}: {path} is a topology.conf (one topology)")
    entries = _conf_entries(path)
    if not entries:
        raise InvalidInput(f"{path}: no switches or blocks")
    if any(k in ("blockname", "blocksizes") for _, f in entries[:1] for k in f):
        return _parse_block(path, _block_conf(entries))
    return _parse_tree(path, entries)


def _looks_yaml(text: str) -> bool:
    """The first line that is not blank or a comment opens a YAML list or `levels:`."""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            return line.startswith(("-", "levels:"))
    return False


# ------------------------------------------------------------------------------------------ tree


def _tree_switches(entries: list[Entry]) -> tuple[dict, dict, dict, dict]:
    """Leaves -> hosts, other switches -> children, link speeds and where each was defined."""
    nodes: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    speed: dict[str, int] = {}
    where: dict[str, str] = {}
    for at, fields in entries:
        f = dict(fields)
        name = f.pop("switchname", None)
        if name is None:
            raise InvalidInput(f"{at}: expected SwitchName=NAME (tree format)")
        if name in where:
            raise InvalidInput(f"{at}: switch {name} already defined at {where[name]}")
        where[name] = at
        unknown = set(f) - {"nodes", "switches", "linkspeed"}
        if unknown:
            raise InvalidInput(f"{at}: unknown key {min(unknown)} for a switch")
        if "nodes" in f and "switches" in f:
            raise InvalidInput(f"{at}: switch {name} has both child switches and nodes")
        if "linkspeed" in f:
            if not f["linkspeed"].isdigit():
                raise InvalidInput(f"{at}: LinkSpeed must be a whole number")
            speed[name] = int(f["linkspeed"])
        if "nodes" in f:
            nodes[name] = expand(f["nodes"], at)
        else:  # a switch with neither is an empty leaf (switch_record.c)
            children[name] = expand(f["switches"], at) if "switches" in f else []
    return nodes, children, speed, where


def _owners(members: dict[str, list[str]], where: dict[str, str], twice: str) -> dict[str, str]:
    """Member -> the switch that lists it; a member listed by two switches is refused with
    `twice` (the member, the first switch, the second) at the second one's line."""
    owner: dict[str, str] = {}
    for sw, items in members.items():
        for item in items:
            if item in owner:
                raise InvalidInput(f"{where[sw]}: {twice.format(item, owner[item], sw)}")
            owner[item] = sw
    return owner


def _parse_tree(path: str, entries: list[Entry], name: str = "") -> Topology:
    nodes, children, speed, where = _tree_switches(entries)
    for sw, kids in children.items():
        for kid in kids:
            if kid not in where or kid == sw:
                raise InvalidInput(f"{where[sw]}: switch {sw} lists unknown switch {kid}")
    level = _levels(children, where, set(nodes))
    parent = _owners(children, where, "switch {} has two parents ({}, {})")
    host_leaf = _owners(nodes, where, "node {} is under two leaf switches ({}, {})")
    if not host_leaf:
        raise InvalidInput(f"{path}: no switch lists nodes")
    levels: list[dict[str, str]] = [dict(host_leaf)]
    for lv in range(1, max(level.values()) + 1):
        row: dict[str, str] = {}
        for h, below in levels[-1].items():
            up = parent.get(below)
            # A switch skipping a level (a leaf under a level-2 switch), or a root below the
            # top level: its hosts sit in a domain of their own there, named after it.
            row[h] = up if up is not None and level[up] == lv else below
        levels.append(row)
    return Topology(source=path, kind="tree", levels=levels, link_speed=speed, name=name)


def _levels(children: dict[str, list[str]], where: dict[str, str], leaves: set[str]) -> dict:
    """Each switch's level: 1 + its highest child's; leaves (and empty switches) 0."""
    level: dict[str, int] = dict.fromkeys(leaves, 0)

    def level_of(sw: str, stack: tuple[str, ...] = ()) -> int:
        if sw in level:
            return level[sw]
        if sw in stack:
            raise InvalidInput(f"{where[sw]}: switch {sw} is its own ancestor")
        kids = children.get(sw, [])
        level[sw] = 1 + max((level_of(k, (*stack, sw)) for k in kids), default=-1)
        return level[sw]

    for sw in where:
        level_of(sw)
    return level


# ----------------------------------------------------------------------------------------- block


Block = tuple[str, str, list[str]]  # (where, name, hosts)


def _block_conf(entries: list[Entry]) -> tuple[list[Block], tuple[str, list[str]] | None]:
    """BlockName lines and the BlockSizes line of a topology.conf."""
    blocks: list[Block] = []
    sizes: tuple[str, list[str]] | None = None
    for at, f in entries:
        if "blocksizes" in f:
            if len(f) != 1:
                raise InvalidInput(f"{at}: BlockSizes stands on a line of its own")
            if sizes is not None:
                raise InvalidInput(f"{at}: BlockSizes given twice (first at {sizes[0]})")
            sizes = (at, f["blocksizes"].split(","))
            continue
        g = dict(f)
        name = g.pop("blockname", None)
        if name is None or set(g) - {"nodes"}:
            raise InvalidInput(f"{at}: expected BlockName=NAME Nodes=HOSTLIST (block format)")
        blocks.append((at, name, expand(g["nodes"], at) if "nodes" in g else []))
    return blocks, sizes


def _block_sizes(at: str, raw: list[Any], first_block_nodes: int) -> list[int]:
    """Slurm's rule (block_record.c): whole numbers > 0; each a power-of-two multiple (at most
    2^15) of the first, the planning base block size in nodes."""
    try:
        sizes = [int(str(s).strip()) for s in raw]
    except ValueError:
        raise InvalidInput(f"{at}: BlockSizes must be whole numbers (got {raw})") from None
    if not sizes or min(sizes) <= 0:
        raise InvalidInput(f"{at}: BlockSizes must be whole numbers above 0 (got {sizes})")
    base = sizes[0]
    for s in sizes[1:]:
        ratio = s // base
        if s % base or ratio & (ratio - 1) or ratio > 2**15:
            raise InvalidInput(
                f"{at}: BlockSizes {s} is not the base block size {base} times a power of two"
                " (at most 2^15; Slurm's topology/block rule)"
            )
    return sizes


def _parse_block(
    path: str, conf: tuple[list[Block], tuple[str, list[Any]] | None], name: str = ""
) -> Topology:
    blocks, raw_sizes = conf
    if not blocks:
        raise InvalidInput(f"{path}: no BlockName lines")
    seen: dict[str, str] = {}
    host_block: dict[str, str] = {}
    for at, block, hosts in blocks:
        if block in seen:
            raise InvalidInput(f"{at}: block {block} already defined at {seen[block]}")
        seen[block] = at
        for h in hosts:
            if h in host_block:
                raise InvalidInput(f"{at}: node {h} is in two blocks ({host_block[h]}, {block})")
            host_block[h] = block
    first_nodes = next((len(h) for _, _, h in blocks if h), 0)
    sizes = _block_sizes(*raw_sizes, first_nodes) if raw_sizes else []
    base = sizes[0] if sizes else first_nodes
    if base == 0:
        raise InvalidInput(f"{path}: blocks list no nodes and BlockSizes is not set")
    return Topology(
        source=path,
        kind="block",
        levels=[host_block],
        nvlink_blocks=True,
        block_order=[b for _, b, _ in blocks],
        block_nodes=base,
        block_sizes=sizes,
        name=name,
    )


# ------------------------------------------------------------------------------------------ YAML


def _yaml_data(path: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise InvalidInput(f"{path}{at}: not valid YAML") from None


def _parse_yaml(path: str, text: str, name: str | None) -> Topology:
    data = _yaml_data(path, text)
    if isinstance(data, dict) and "levels" in data:
        if name is not None:
            raise InvalidInput(f"--topology-name {name}: {path} lists levels, not topologies")
        return _parse_levels(path, data)
    if not isinstance(data, list) or not data:
        raise InvalidInput(
            f"{path}: expected Slurm's topology.yaml (a list of '- topology: NAME' entries)"
            " or 'levels:'"
        )
    entry, at = _pick(path, data, name)
    kinds = [k for k in ("tree", "block", "flat", "ring", "torus3d") if k in entry]
    if len(kinds) != 1:
        raise InvalidInput(f"{at}: needs exactly one of tree, block, flat (got {kinds or 'none'})")
    kind = kinds[0]
    unknown = set(entry) - {"topology", "cluster_default", kind}
    if unknown:
        raise InvalidInput(f"{at}: unknown key {min(map(str, unknown))}")
    topo_name = str(entry["topology"])
    if kind == "flat":
        if entry["flat"] is False:
            raise InvalidInput(f"{at}.flat: false names no topology type")
        return Topology(source=path, kind="flat", levels=[], name=topo_name)
    if kind in ("ring", "torus3d"):
        raise InvalidInput(
            f"{at}: {kind} topologies are not supported (tree, block or flat); "
            "name another with --topology-name"
        )
    body = entry[kind]
    if not isinstance(body, dict):
        raise InvalidInput(f"{at}.{kind}: expected a mapping")
    if kind == "tree":
        return _parse_tree(path, _yaml_switches(f"{at}.tree", body), topo_name)
    return _parse_block(path, _yaml_blocks(f"{at}.block", body), topo_name)


def _pick(path: str, data: list[Any], name: str | None) -> tuple[dict[str, Any], str]:
    """The entry named `name`, else the first cluster default, else the first."""
    names = []
    for i, entry in enumerate(data):
        at = f"{path}: [{i}]"
        if not isinstance(entry, dict) or "topology" not in entry:
            raise InvalidInput(f"{at}: each entry needs 'topology: NAME'")
        if next(iter(entry)) != "topology":
            raise InvalidInput(f"{at}: 'topology' must be the entry's first attribute")
        default = entry.get("cluster_default", False)
        if not isinstance(default, bool):
            raise InvalidInput(f"{at}.cluster_default: expected true or false")
        names.append(str(entry["topology"]))
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInput(f"{path}: topology {dup} defined twice")
    if name is not None:
        if name not in names:
            raise InvalidInput(f"--topology-name {name}: {path} has {', '.join(names)}")
        i = names.index(name)
    else:
        i = next((j for j, e in enumerate(data) if e.get("cluster_default") is True), 0)
    return data[i], f"{path}: topology {names[i]}"


def _text(at: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(f"{at}: expected a name or hostlist, got {value!r}")
    return str(value)


def _yaml_items(at: str, body: dict[str, Any], key: str, keys: set[str]) -> list[tuple]:
    unknown = set(body) - {key, "block_sizes"}
    if unknown:
        raise InvalidInput(f"{at}: unknown key {min(map(str, unknown))}")
    items = body.get(key)
    if not isinstance(items, list) or not items:
        raise InvalidInput(f"{at}.{key}: expected a non-empty list")
    out = []
    for j, item in enumerate(items):
        where = f"{at}.{key}[{j}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where}: expected a mapping")
        bad = set(item) - keys
        if bad:
            raise InvalidInput(f"{where}: unknown key {min(map(str, bad))}")
        out.append((where, {k: _text(f"{where}.{k}", v) for k, v in item.items()}))
    return out


def _yaml_switches(at: str, body: dict[str, Any]) -> list[Entry]:
    """tree.switches as topology.conf entries (switch -> SwitchName, children -> Switches)."""
    if "block_sizes" in body:
        raise InvalidInput(f"{at}: unknown key block_sizes")
    rename = {"switch": "switchname", "children": "switches", "nodes": "nodes"}
    items = _yaml_items(at, body, "switches", set(rename))
    return [(w, {rename[k]: v for k, v in f.items()}) for w, f in items]


def _yaml_blocks(at: str, body: dict[str, Any]) -> tuple[list[Block], tuple | None]:
    blocks = []
    for where, f in _yaml_items(at, body, "blocks", {"block", "nodes"}):
        if "block" not in f:
            raise InvalidInput(f"{where}: each block needs 'block: NAME'")
        blocks.append((where, f["block"], expand(f["nodes"], where) if "nodes" in f else []))
    sizes = body.get("block_sizes")
    if sizes is None:
        return blocks, None
    if not isinstance(sizes, list):
        raise InvalidInput(f"{at}.block_sizes: expected a list of node counts")
    return blocks, (f"{at}.block_sizes", sizes)


class TopologyYaml(Spec):
    """The product's topology file: switch levels bottom-up, each switch -> its children (a
    hostlist of nodes on the first level, of the level below's switch names above it)."""

    levels: list[dict[str, str]] = Field(min_length=1)
    nvlink_domains: bool = Field(
        False, description="the first level lists NVLink domains (racks), not leaf switches"
    )

    @field_validator("levels")
    @classmethod
    def _non_empty(cls, v: list[dict[str, str]]) -> list[dict[str, str]]:
        for i, level in enumerate(v):
            if not level:
                raise ValueError(f"level {i} lists no switches")
        return v


def _parse_levels(path: str, data: Any) -> Topology:
    try:
        spec = TopologyYaml.model_validate(data)
    except ValidationError as err:
        raise InvalidInput(describe_validation_error(err, path)) from None
    levels: list[dict[str, str]] = []
    for i, level in enumerate(spec.levels):
        row: dict[str, str] = {}
        for name, children in level.items():
            for child in expand(str(children), f"{path}: levels.{i}.{name}"):
                if i == 0:
                    if child in row:
                        raise InvalidInput(f"{path}: levels.0: node {child} listed twice")
                    row[child] = name
                else:
                    below = [h for h, s in levels[-1].items() if s == child]
                    if not below:
                        raise InvalidInput(f"{path}: levels.{i}.{name}: unknown switch {child}")
                    for h in below:
                        row[h] = name
        if i:
            for h in levels[-1]:
                row.setdefault(h, levels[-1][h])
        levels.append(row)
    return Topology(source=path, kind="yaml", levels=levels, nvlink_blocks=spec.nvlink_domains)
