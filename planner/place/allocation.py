"""The allocation a job really gets: its hosts (in the scheduler's order), the drained ones, and
the switch tree above them (topology_files.py), mapped onto the link tiers of the cluster.

Inputs (docs/cli.md#placement-on-an-allocation): a hostfile (one host per line, `#` comments,
optional `slots=N`) or a Slurm hostlist expression (`gpu[001-064,070]`, expanded by the
python-hostlist package), `--exclude` for drained hosts, and the topology file.

Hosts are whole nodes: torchrun starts the same --nproc-per-node on every host and the placement
counts whole nodes, so a hostfile line with fewer slots than the cluster's GPUs per node is
refused (exit 2, naming the host) rather than dropped; `--exclude` it to plan without it.

Switch levels map bottom-up onto the cluster's tiers above NVLink (CONTRACT.md "Placement on an
allocation"); tiers above the highest level hold the whole allocation in one domain. Blocks are
NVLink domains where the cluster's NVLink tier is larger than a node (NVL72), else the first
tier above NVLink; the tiers above the blocks group consecutive blocks in file order, as many
as the tier's domain holds (how Slurm's topology/block aggregates blocks). A flat topology has no
switches: the hosts fill the tiers in the order listed, as on an ideal block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import hostlist
import numpy as np

from cost_models.errors import InvalidInput
from cost_models.specs import Cluster

from .topology_files import Topology, expand, parse_topology, read_lines

__all__ = ["Allocation", "Topology", "load_allocation", "parse_hostfile", "parse_topology"]


# ------------------------------------------------------------------------------------- hostfile

_HOSTFILE_LINE = re.compile(
    r"^(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\s+slots\s*=\s*(?P<slots>\S+))?$"
)


def parse_hostfile(path: str | Path) -> list[tuple[str, int | None]]:
    """(host, slots or None) per line of a hostfile (OpenMPI / DeepSpeed style)."""
    out, seen = [], set()
    for number, raw in enumerate(read_lines(path, "--hosts"), start=1):
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
    gpus_per_host: int = 0  # every host is a whole node (load_allocation refuses partial ones)
    source: str = ""  # the topology file, its entry and kind, for reports

    def domain_name(self, tier: int, host_index: int) -> str:
        return self.names[tier][int(self.domains[tier][host_index])]


def load_allocation(
    cluster: Cluster,
    topology: str | Path | Topology,
    *,
    hosts_file: str | Path | None = None,
    nodelist: str | None = None,
    exclude: str | None = None,
    topology_name: str | None = None,
) -> Allocation:
    """Parse and check the allocation against the topology and the cluster's tiers."""
    if isinstance(topology, Topology):
        topo = topology
    else:
        topo = parse_topology(topology, topology_name)
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
    known = topo.hosts
    missing = [h for h, _ in listed if known is not None and h not in known]
    if missing:
        raise InvalidInput(
            f"--topology {topo.source}: host {missing[0]} of the allocation is under no switch"
            + (f" ({len(missing)} such hosts)" if len(missing) > 1 else "")
        )
    hosts, excluded = [], {}
    for h, slots in listed:
        if h in drained:
            excluded[h] = "drained (--exclude)"
            continue
        _check_slots(cluster, hosts_file, h, slots)
        hosts.append(h)
    if not hosts:
        raise InvalidInput("allocation: no healthy hosts left (every host is --exclude'd)")
    alloc = _with_domains(cluster, topo, hosts, excluded)
    alloc.source = topo.describe()
    return alloc


def _check_slots(cluster: Cluster, path: str | Path | None, host: str, slots: int | None) -> None:
    """A host is a whole node: refuse a slots= count other than the cluster's GPUs per node."""
    gpn = cluster.gpus_per_node
    if slots is None or slots == gpn:
        return
    if slots > gpn:
        raise InvalidInput(
            f"--hosts {path}: {host} slots={slots} exceeds the {gpn} GPUs per node of "
            f"cluster {cluster.name}"
        )
    # torchrun starts --nproc-per-node on every host and the placement counts whole nodes: a
    # partial host cannot join the job, and dropping it silently would shrink the job.
    raise InvalidInput(
        f"--hosts {path}: {host} slots={slots} is a partial node (cluster {cluster.name} has "
        f"{gpn} GPUs per node; the placement and torchrun use whole nodes): give it all "
        f"{gpn} slots or leave it out with --exclude {host}"
    )


def _with_domains(
    cluster: Cluster, topo: Topology, hosts: list[str], excluded: dict[str, str]
) -> Allocation:
    tiers = cluster.tiers
    gpn = cluster.gpus_per_node
    nvlink_is_node = (tiers[0].domain_size or 0) <= gpn
    first = 0 if (topo.nvlink_blocks and not nvlink_is_node) else 1
    if topo.kind == "flat":
        first = 0 if not nvlink_is_node else 1
    level_tiers = [first + i for i in range(len(topo.levels))]
    if level_tiers and level_tiers[-1] >= len(tiers):
        lv = len(tiers) - first
        raise InvalidInput(
            f"--topology {topo.source}: {len(topo.levels)} switch levels but cluster "
            f"{cluster.name} has {len(tiers) - first} tier(s) above NVLink for them "
            f"(level {lv} has no tier)"
        )
    per_tier = _tier_names(cluster, topo, hosts, first, level_tiers)
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
        gpus_per_host=gpn,
    )


def _tier_names(
    cluster: Cluster, topo: Topology, hosts: list[str], first: int, level_tiers: list[int]
) -> list[list[str]]:
    """Each host's domain name at every tier: the topology's levels where they map, nodes
    below them, and above them one domain (tree) or consecutive blocks / hosts (block, flat)."""
    tiers = cluster.tiers
    if topo.kind == "block":
        order = {b: i for i, b in enumerate(topo.block_order)}
        position = [order[topo.levels[0][h]] for h in hosts]
        size_gpus = topo.block_nodes * cluster.gpus_per_node
    else:  # flat: the hosts in the order listed
        position = list(range(len(hosts)))
        size_gpus = cluster.gpus_per_node
    per_tier: list[list[str]] = []
    for t, tier in enumerate(tiers):
        if t in level_tiers:
            level = topo.levels[level_tiers.index(t)]
            per_tier.append([level[h] for h in hosts])
        elif t < first:
            per_tier.append(list(hosts))  # the node is the NVLink domain
        elif topo.kind in ("block", "flat") and tier.domain_size is not None:
            # Consecutive blocks (hosts) fill the tier's domains, nested in the tier below.
            ratio = max(1, tier.domain_size // size_gpus)
            position = [p // ratio for p in position]
            size_gpus *= ratio
            per_tier.append([f"{tier.name}{p}" for p in position])
        elif topo.kind in ("block", "flat"):
            position = [0] * len(hosts)
            per_tier.append(["*"] * len(hosts))
        elif t < first + len(topo.levels):
            per_tier.append(per_tier[-1])
        else:
            per_tier.append(["*"] * len(hosts))  # above the topology: one domain
    return per_tier


def read_line(alloc: Allocation, limit: int = 3) -> str:
    """read_summary in one line (for an exit-2 message)."""
    gpn = alloc.gpus_per_host
    listed = len(alloc.hosts) + len(alloc.excluded)
    text = (
        f"allocation read: {len(alloc.hosts)} of {listed} hosts kept x {gpn} GPUs = "
        f"{len(alloc.hosts) * gpn} GPUs"
    )
    dropped = [f"{h} {why}" for h, why in list(alloc.excluded.items())[:limit]]
    if len(alloc.excluded) > limit:
        dropped.append(f"{len(alloc.excluded) - limit} more")
    return text + (f"; dropped {', '.join(dropped)}" if dropped else "")


def read_summary(alloc: Allocation, limit: int = 8) -> list[str]:
    """What was read, in a few lines: hosts kept (a hostlist) with their GPUs, hosts dropped
    and why (the first `limit`), and the topology."""
    gpn = alloc.gpus_per_host
    kept = hostlist.collect_hostlist(alloc.hosts)
    lines = [
        f"allocation read: {len(alloc.hosts)} hosts kept x {gpn} GPUs = "
        f"{len(alloc.hosts) * gpn} GPUs under {alloc.source or alloc.topology}",
        f"  kept (scheduler's order): {kept}",
    ]
    for host, why in list(alloc.excluded.items())[:limit]:
        lines.append(f"  dropped {host}: {why}")
    if len(alloc.excluded) > limit:
        lines.append(f"  ... and {len(alloc.excluded) - limit} more dropped")
    return lines


def synthetic(
    cluster: Cluster, hosts: Sequence[str], levels: list[dict[str, str]], name: str = "synthetic"
) -> Allocation:
    """An Allocation from in-memory levels (tests and bench/place_scaling.py)."""
    topo = Topology(source=name, kind="tree", levels=levels)
    return _with_domains(cluster, topo, list(hosts), {})
