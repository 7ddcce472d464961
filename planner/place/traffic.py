"""Other jobs' traffic on the allocation's switch uplinks (issue 27): place around a noisy
neighbour.

cost_models/uplink.py prices a switch's uplink as shared by the job's GPUs that send upward,
taking other jobs under the switch to use their own ports' share of it. A user who knows better
(another job all-reduces across the same pod uplinks all the time) names the switches and the
share s of the uplink capacity the job's ports would get that other jobs' traffic takes:

    # --other-traffic FILE (YAML or JSON)
    uplinks:        # switch name (topology.conf SwitchName / YAML level name) -> share 0..0.75
      leaf3: 0.5
      pod1: 0.25

The job's c senders under that switch then share (1 - s) P b / o (P: the job's GPUs under it,
b their line rate, o the uplink tier's taper), each at min(b, (1 - s) P b / (o c)): the uplink
step of cost_models.uplink is ceil(UPLINK_STEPS c / ((1 - s) P)), which may now exceed
UPLINK_STEPS (an effective taper above o), and a 1:1 tier above a loaded switch joins the tiers
whose uplinks are shared. Shares are taken to 1 % (integers: the placement model stays linear).
The share is capped at 0.75 (the model tabulates the steps up to ceil(4 / (1 - s)) = 16; a
switch whose uplink is busier is better drained with --exclude). A switch name the allocation
does not have is ignored (a cluster-wide file works), as --exclude ignores hosts; a file that
names none of the allocation's switches is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cost_models import uplink
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster
from models_zoo.inputs import read_data_file

from .allocation import Allocation

MAX_SHARE = 0.75
SCALE = 100  # shares in percent


@dataclass
class LoadedAllocation(Allocation):
    """An allocation whose switch uplinks other jobs' traffic partly takes."""

    # uplink tier j -> per domain of tier j-1 (its switches): percent of the uplink taken
    busy_pct: dict[int, np.ndarray] = field(default_factory=dict)
    traffic_source: str = ""


def load_other_traffic(path: str | Path, cluster: Cluster, alloc: Allocation) -> Allocation:
    """The allocation with the file's uplink loads (see the module docstring)."""
    shares = _read(Path(path))
    busy: dict[int, np.ndarray] = {}
    found = set()
    for name, share in shares.items():
        # The switch's uplinks are the links of the tier above the highest tier it is a
        # domain of (a level the topology repeats for a tier without its own switches).
        tiers = [t for t in range(len(cluster.tiers) - 1) if name in alloc.names[t]]
        if not tiers:
            continue
        t = max(tiers)
        found.add(name)
        row = busy.setdefault(t + 1, np.zeros(len(alloc.names[t]), dtype=np.int64))
        row[alloc.names[t].index(name)] = round(share * SCALE)
    if not found:
        raise InvalidInput(
            f"--other-traffic {path}: uplinks: none of {', '.join(sorted(shares))} is a switch "
            "above the allocation's hosts"
        )
    return LoadedAllocation(**vars(alloc), busy_pct=busy, traffic_source=str(path))


def _read(path: Path) -> dict[str, float]:
    try:  # the shared reader and its limits (a reader of its own let deep nesting escape)
        data = read_data_file(path)
    except InvalidInput as exc:
        raise InvalidInput(f"--other-traffic {exc}") from None
    if not isinstance(data, dict) or set(data) != {"uplinks"} or not isinstance(
        data["uplinks"], dict
    ):
        raise InvalidInput(
            f"--other-traffic {path}: expected one key, uplinks: a mapping switch -> share"
        )
    out = {}
    for name, share in data["uplinks"].items():
        ok = isinstance(share, int | float) and not isinstance(share, bool)
        if not ok or not 0 <= share <= MAX_SHARE:
            raise InvalidInput(
                f"--other-traffic {path}: uplinks.{name}: {share!r} is not a share from 0 to "
                f"{MAX_SHARE} (the part of the switch's uplink other jobs take)"
            )
        out[str(name)] = float(share)
    return out


def busy_pct(alloc: Allocation, tier: int) -> np.ndarray | None:
    """Percent of each tier-(tier-1) switch's uplink other jobs take (None: none named)."""
    if isinstance(alloc, LoadedAllocation):
        row = alloc.busy_pct.get(tier)
        if row is not None and row.any():
            return row
    return None


def shared_tiers(cluster: Cluster, alloc: Allocation) -> list[int]:
    """Tiers whose uplinks the senders share: the tapered ones and those with a loaded switch."""
    loaded = {j for j in range(1, len(cluster.tiers)) if busy_pct(alloc, j) is not None}
    return sorted(set(uplink.tapered_tiers(cluster)) | loaded)


def scale(alloc: Allocation) -> int:
    """The factor senders are counted in against effective_ports (1 with no load: unchanged)."""
    loaded = isinstance(alloc, LoadedAllocation) and any(r.any() for r in alloc.busy_pct.values())
    return SCALE if loaded else 1


def effective_ports(alloc: Allocation, tier: int, ports: np.ndarray) -> np.ndarray:
    """The job's ports under each switch of tier-1, times the share of the uplink left to them
    (in scale(alloc) units)."""
    ports = np.asarray(ports, dtype=np.int64)
    if scale(alloc) == 1:
        return ports
    pct = busy_pct(alloc, tier)
    return ports * (SCALE - (0 if pct is None else pct))


def max_step(alloc: Allocation, tier: int) -> int:
    """The largest uplink step of the tier: ceil(UPLINK_STEPS / (1 - s)) at its busiest switch."""
    pct = busy_pct(alloc, tier)
    if pct is None:
        return uplink.UPLINK_STEPS
    return -(-uplink.UPLINK_STEPS * SCALE // (SCALE - int(pct.max())))
