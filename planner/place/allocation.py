"""The allocation a job really gets: its hosts (in the scheduler's order), the drained ones, and
the switch tree above them, mapped onto the link tiers of the cluster.

Inputs (docs/cli.md#placement-on-an-allocation):

- a hostfile (one host per line, `#` comments, optional `slots=N`) or a Slurm hostlist expression
  (`gpu[001-064,070]`, expanded by the python-hostlist package), and `--exclude` for drained hosts;
- the switch hierarchy in Slurm's topology.conf: the tree format (`SwitchName=NAME Nodes=HOSTLIST`
  for leaves, `SwitchName=NAME Switches=LIST` above them, optional `LinkSpeed=N`), parsed as Slurm's
  src/plugins/topology/tree/switch_record.c does (`_parse_switches`: a switch has either Nodes or
  Switches; `_read_topo_file`; a switch's level is 1 + the highest level of its children, leaves
  are level 0), or the block format (`BlockName=NAME Nodes=HOSTLIST`, `BlockSizes=B0,B1,...`,
  src/plugins/topology/block/block_record.c); keys are case-insensitive and `#` starts a comment
  (doc/man/man5/topology.conf.5). The product's own YAML lists the levels bottom-up.

Switch levels map bottom-up onto the cluster's tiers above NVLink (CONTRACT.md "Placement on an
allocation"); tiers above the highest level hold the whole allocation in one domain. Blocks are
NVLink domains where the cluster's NVLink tier is larger than a node (NVL72), else the first
tier above NVLink; each further BlockSizes entry groups that many base-size blocks, in file order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hostlist
import numpy as np
import yaml
from pydantic import Field, ValidationError, field_validator

from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import Cluster, Spec


def expand(expr: str, where: str) -> list[str]:
    """Hosts of a Slurm hostlist expression, in order (python-hostlist)."""
    try:
        return hostlist.expand_hostlist(expr.strip())
    except hostlist.BadHostlist as exc:
        raise InvalidInput(f"{where}: bad hostlist {expr!r}: {exc}") from None


def _read(path: str | Path, what: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"{what}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{what}: {path} is not UTF-8 text") from None


# ------------------------------------------------------------------------------------- hostfile

_HOSTFILE_LINE = re.compile(
    r"^(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\s+slots\s*=\s*(?P<slots>\S+))?$"
)


def parse_hostfile(path: str | Path) -> list[tuple[str, int | None]]:
    """(host, slots or None) per line of a hostfile (OpenMPI / DeepSpeed style)."""
    out, seen = [], set()
    for number, raw in enumerate(_read(path, "--hosts"), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _HOSTFILE_LINE.match(line)
        slots = m and m.group("slots")
        if m is None or (slots is not None and not slots.isdigit()):
            raise InvalidInput(
                f"{path}:{number}: expected 'HOST' or 'HOST slots=N', got {raw.strip()!r}"
            )
        host = m.group("host")
        if host in seen:
            raise InvalidInput(f"{path}:{number}: host {host} listed twice")
        seen.add(host)
        out.append((host, None if slots is None else int(slots)))
    if not out:
        raise InvalidInput(f"{path}: no hosts")
    return out


# ------------------------------------------------------------------------------------- topology


@dataclass
class Topology:
    """Switch levels bottom-up: levels[i] maps each host to its level-i switch (or block)."""

    source: str
    kind: str  # "tree", "block" or "yaml"
    levels: list[dict[str, str]]
    link_speed: dict[str, int] = field(default_factory=dict)

    @property
    def hosts(self) -> set[str]:
        return set(self.levels[0]) if self.levels else set()


_KEY_VALUE = re.compile(r"(\w+)=(\S+)")


def _fields(path: str, number: int, line: str) -> dict[str, str]:
    """KEY=VALUE pairs of one line (keys lower-cased: Slurm's keys are case-insensitive)."""
    out: dict[str, str] = {}
    rest = _KEY_VALUE.sub("", line).strip()
    if rest:
        raise InvalidInput(f"{path}:{number}: expected KEY=VALUE pairs, got {rest!r}")
    for key, value in _KEY_VALUE.findall(line):
        if key.lower() in out:
            raise InvalidInput(f"{path}:{number}: {key} given twice")
        out[key.lower()] = value
    return out


def _lines(path: str) -> list[tuple[int, str]]:
    """Non-empty lines without comments; a trailing backslash continues a line (Slurm parser)."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(_read(path, "--topology"), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            out.append((start, line))
    return out


def parse_topology(path: str | Path) -> Topology:
    """A topology.conf (tree or block format) or the product's YAML, by content."""
    path = str(path)
    if path.endswith((".yaml", ".yml")):
        return _parse_yaml(path)
    lines = _lines(path)
    if not lines:
        raise InvalidInput(f"{path}: no switches or blocks")
    first = _fields(path, *lines[0]) if lines else {}
    if "blockname" in first or "blocksizes" in first:
        return _parse_block(path, lines)
    return _parse_tree(path, lines)


def _parse_tree(path: str, lines: list[tuple[int, str]]) -> Topology:
    nodes: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    speed: dict[str, int] = {}
    where: dict[str, int] = {}
    for number, line in lines:
        f = _fields(path, number, line)
        name = f.pop("switchname", None)
        if name is None:
            raise InvalidInput(f"{path}:{number}: expected SwitchName=NAME (tree format)")
        if name in where:
            raise InvalidInput(
                f"{path}:{number}: switch {name} already defined on line {where[name]}"
            )
        where[name] = number
        unknown = set(f) - {"nodes", "switches", "linkspeed"}
        if unknown:
            raise InvalidInput(f"{path}:{number}: unknown key {min(unknown)} for a switch")
        if "nodes" in f and "switches" in f:
            raise InvalidInput(f"{path}:{number}: switch {name} has both child switches and nodes")
        if "linkspeed" in f:
            if not f["linkspeed"].isdigit():
                raise InvalidInput(f"{path}:{number}: LinkSpeed must be a whole number")
            speed[name] = int(f["linkspeed"])
        where_line = f"{path}:{number}"
        if "nodes" in f:
            nodes[name] = expand(f["nodes"], where_line)
        else:
            children[name] = expand(f.get("switches", ""), where_line) if "switches" in f else []
    for name, kids in children.items():
        for kid in kids:
            if kid not in where:
                raise InvalidInput(
                    f"{path}:{where[name]}: switch {name} lists unknown switch {kid}"
                )
    level: dict[str, int] = {name: 0 for name in nodes}

    def level_of(name: str, stack: tuple[str, ...] = ()) -> int:
        if name in level:
            return level[name]
        if name in stack:
            raise InvalidInput(f"{path}:{where[name]}: switch {name} is its own ancestor")
        kids = children.get(name, [])
        level[name] = 1 + max((level_of(k, (*stack, name)) for k in kids), default=-1)
        return level[name]

    for name in where:
        level_of(name)
    parent: dict[str, str] = {}
    for name, kids in children.items():
        for kid in kids:
            if kid in parent:
                raise InvalidInput(
                    f"{path}:{where[name]}: switch {kid} has two parents ({parent[kid]}, {name})"
                )
            parent[kid] = name
    host_leaf: dict[str, str] = {}
    for name, hosts in nodes.items():
        for h in hosts:
            if h in host_leaf:
                raise InvalidInput(
                    f"{path}:{where[name]}: node {h} is under two leaf switches "
                    f"({host_leaf[h]}, {name})"
                )
            host_leaf[h] = name
    depth = max(level.values()) + 1
    levels: list[dict[str, str]] = [dict(host_leaf)]
    for lv in range(1, depth):
        row: dict[str, str] = {}
        for h, below in levels[-1].items():
            up = parent.get(below)
            if up is not None and level[up] != lv:
                # A switch skipping a level (a leaf under a level-2 switch): its hosts sit in a
                # domain of their own at the skipped level, named after the switch below.
                row[h] = below
            elif up is None:
                row[h] = below  # a root below the top level: its own domain above
            else:
                row[h] = up
        levels.append(row)
    return Topology(source=path, kind="tree", levels=levels, link_speed=speed)


def _parse_block(path: str, lines: list[tuple[int, str]]) -> Topology:
    blocks: list[tuple[str, list[str]]] = []
    sizes: list[int] | None = None
    for number, line in lines:
        f = _fields(path, number, line)
        if "blocksizes" in f:
            if len(f) != 1:
                raise InvalidInput(f"{path}:{number}: BlockSizes stands on a line of its own")
            try:
                sizes = [int(s) for s in f["blocksizes"].split(",")]
            except ValueError:
                raise InvalidInput(f"{path}:{number}: BlockSizes must be whole numbers") from None
            continue
        name = f.pop("blockname", None)
        if name is None or set(f) != {"nodes"}:
            raise InvalidInput(f"{path}:{number}: expected BlockName=NAME Nodes=HOSTLIST")
        blocks.append((name, expand(f["nodes"], f"{path}:{number}")))
    if not blocks:
        raise InvalidInput(f"{path}: no BlockName lines")
    levels: list[dict[str, str]] = [{h: name for name, hosts in blocks for h in hosts}]
    if sizes:
        base = sizes[0]
        for s in sizes[1:]:
            if s <= base or s % base:
                raise InvalidInput(
                    f"{path}: BlockSizes {sizes}: each size must be a multiple of the first"
                )
            group = s // base
            row = {}
            for i, (_, hosts) in enumerate(blocks):
                for h in hosts:
                    row[h] = f"agg{s}_{i // group}"
            levels.append(row)
    return Topology(source=path, kind="block", levels=levels)


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


def _parse_yaml(path: str) -> Topology:
    try:
        data = yaml.safe_load("\n".join(_read(path, "--topology")))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise InvalidInput(f"{path}{at}: not valid YAML") from None
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
    kind = "block" if spec.nvlink_domains else "yaml"
    return Topology(source=path, kind=kind, levels=levels)


# ----------------------------------------------------------------------------------- allocation


@dataclass
class Allocation:
    """Healthy hosts in the scheduler's order and their domain at every tier of the cluster.

    domains[t][i] is the index of host i's domain at tier t (tier 0: its NVLink domain, a node
    unless blocks say otherwise; the last tier: 0 for every host). names[t] names those domains.
    """

    hosts: list[str]
    excluded: dict[str, str]
    domains: list[np.ndarray]
    names: list[list[str]]
    level_tiers: list[int]  # tier index of each topology level, bottom-up
    topology: str

    def domain_name(self, tier: int, host_index: int) -> str:
        return self.names[tier][int(self.domains[tier][host_index])]


def load_allocation(
    cluster: Cluster,
    topology: str | Path | Topology,
    *,
    hosts_file: str | Path | None = None,
    nodelist: str | None = None,
    exclude: str | None = None,
) -> Allocation:
    """Parse and check the allocation against the topology and the cluster's tiers."""
    topo = topology if isinstance(topology, Topology) else parse_topology(topology)
    if (hosts_file is None) == (nodelist is None):
        raise InvalidInput("allocation: give exactly one of --hosts FILE or --nodelist EXPR")
    if hosts_file is not None:
        listed = parse_hostfile(hosts_file)
    else:
        listed = [(h, None) for h in expand(nodelist or "", "--nodelist")]
        if not listed:
            raise InvalidInput("--nodelist: no hosts")
    drained = set(expand(exclude, "--exclude")) if exclude else set()
    # Drained hosts outside the allocation are ignored: --exclude may be the cluster-wide
    # drain list (`sinfo -h -t drain -o %N`).
    gpn = cluster.gpus_per_node
    hosts, excluded = [], {}
    missing = [h for h, _ in listed if h not in topo.hosts]
    if missing:
        raise InvalidInput(
            f"--topology {topo.source}: host {missing[0]} of the allocation is under no switch"
            + (f" ({len(missing)} such hosts)" if len(missing) > 1 else "")
        )
    for h, slots in listed:
        if h in drained:
            excluded[h] = "drained (--exclude)"
        elif slots is not None and slots < gpn:
            excluded[h] = f"slots={slots} < {gpn} GPUs per node"
        elif slots is not None and slots > gpn:
            raise InvalidInput(f"--hosts: {h} slots={slots} exceeds the {gpn} GPUs per node")
        else:
            hosts.append(h)
    if not hosts:
        raise InvalidInput("allocation: no healthy hosts left")
    return _with_domains(cluster, topo, hosts, excluded)


def _with_domains(
    cluster: Cluster, topo: Topology, hosts: list[str], excluded: dict[str, str]
) -> Allocation:
    tiers = cluster.tiers
    nvlink_is_node = (tiers[0].domain_size or 0) <= cluster.gpus_per_node
    first = 1 if (topo.kind != "block" or nvlink_is_node) else 0
    level_tiers = [first + i for i in range(len(topo.levels))]
    if level_tiers and level_tiers[-1] >= len(tiers):
        lv = len(tiers) - first
        raise InvalidInput(
            f"--topology {topo.source}: {len(topo.levels)} switch levels but cluster "
            f"{cluster.name} has {len(tiers) - first} tier(s) above NVLink for them "
            f"(level {lv} has no tier)"
        )
    per_tier: list[list[str]] = []
    for t in range(len(tiers)):
        if t in level_tiers:
            level = topo.levels[level_tiers.index(t)]
            per_tier.append([level[h] for h in hosts])
        elif t == 0:
            per_tier.append(list(hosts))  # the node is the NVLink domain
        elif t < first + len(topo.levels):
            per_tier.append(per_tier[-1])
        else:
            per_tier.append(["*"] * len(hosts))  # above the topology: one domain
    per_tier[-1] = ["*"] * len(hosts)  # the outermost tier holds everything
    domains, names = [], []
    for row in per_tier:
        index: dict[str, int] = {}
        ids = np.array([index.setdefault(name, len(index)) for name in row], dtype=np.int64)
        domains.append(ids)
        names.append(list(index))
    return Allocation(
        hosts=hosts,
        excluded=excluded,
        domains=domains,
        names=names,
        level_tiers=level_tiers,
        topology=topo.source,
    )


def synthetic(
    cluster: Cluster, hosts: Sequence[str], levels: list[dict[str, str]], name: str = "synthetic"
) -> Allocation:
    """An Allocation from in-memory levels (tests and bench/place_scaling.py)."""
    topo = Topology(source=name, kind="tree", levels=levels)
    return _with_domains(cluster, topo, list(hosts), {})
