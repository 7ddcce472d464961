"""The network designs `planner design` searches (docs/networks.md "Designing the network"), and
the cluster each one is: scale-out technology, NIC speed per GPU, fabric (rail-optimised,
fat-tree, rail-only, multi-plane), oversubscription per tier above the leaf, planes, the NVLink
(scale-up) domain, two or three scale-out tiers. `--designs FILE` replaces any axis's values.

Every figure of a built cluster comes from the GPU preset (NVLink bandwidth and domain) or from
the presets the planner already validates (`h100-infiniband`, `h100-roce`, `h100-spectrum-x`,
`llama3-roce-24k`): NCCL bus-bandwidth efficiency 0.8 on NVLink and 0.9 on the network, 3 / 5 /
7 / 10 us per NVLink / leaf / spine / core hop; the technology's behaviour under load and its
switches and NICs come from `network.technology` (cost_models.comm.TECHNOLOGY_LOAD_FACTOR,
planner.network_bom). Nothing here prints.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

import models_zoo
from cost_models.comm import TECHNOLOGY_LOAD_FACTOR
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster, GpuSpec, Technology

FABRICS = ("rail-optimised", "fat-tree", "rail-only", "multi-plane")
NIC_GBPS = (100, 200, 400, 800, 1600)
NVLINK_EFFICIENCY, NETWORK_EFFICIENCY = 0.8, 0.9
LATENCY_US = {"nvlink": 3.0, "leaf": 5.0, "spine": 7.0, "core": 10.0}
TIER_SOURCE = (
    "tiers as the h100-infiniband / h100-roce presets (NVIDIA DGX SuperPOD reference "
    "architecture shape; NCCL bus bandwidth ~80 % of NVLink and ~90 % of the network's line "
    "rate; 3 / 5 / 7 us per NVLink / leaf / spine hop) and llama3-roce-24k (10 us through the "
    "aggregation layer of a three-tier Clos, Llama 3 Herd of Models arXiv 2407.21783 sec. 3.3.1)"
)
NVL72_GPUS_PER_NODE = 4
"""GB200 / GB300 NVL72: four GPUs per compute tray (NVIDIA GB200 NVL72 product page: 18 compute
trays of 2 Grace + 4 Blackwell GPUs); HGX systems: eight GPUs per node."""


@dataclass(frozen=True)
class Design:
    """One network design; `cluster_for` turns it into the Cluster the planner prices."""

    fabric: str
    technology: str
    nic_gbps: int
    oversubscription: tuple[float, ...]
    """Taper of each scale-out tier above the leaf, innermost first (empty for rail-only)."""
    planes: int
    scale_up: int
    leaf_gpus: int
    pod_gpus: int | None
    """GPUs per pod of a three-tier fabric; None: two tiers (leaf, spine)."""

    @property
    def name(self) -> str:
        tech = {"infiniband": "ib", "spectrum-x": "spx"}.get(self.technology, self.technology)
        fabric = {"rail-optimised": "rail", "fat-tree": "ft", "multi-plane": f"mp{self.planes}"}
        parts = [tech, f"{self.nic_gbps}g", fabric.get(self.fabric, self.fabric)]
        if self.oversubscription:
            parts.append("/".join(f"{o:g}" for o in self.oversubscription) + ":1")
        if self.pod_gpus is not None:
            parts.append(f"pod{self.pod_gpus}")
        parts.append(f"nvl{self.scale_up}")
        return "-".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fabric": self.fabric,
            "technology": self.technology,
            "nic_gbps": self.nic_gbps,
            "oversubscription": list(self.oversubscription),
            "planes": self.planes,
            "scale_up": self.scale_up,
            "leaf_gpus": self.leaf_gpus,
            "pod_gpus": self.pod_gpus,
        }


# ------------------------------------------------------------------------------ the space


@dataclass(frozen=True)
class Space:
    """The values of each axis; designs are their product (less the combinations that do not
    apply: planes other than 1 outside multi-plane, tapers on rail-only)."""

    technology: tuple[str, ...]
    nic_gbps: tuple[int, ...]
    fabric: tuple[str, ...]
    oversubscription: tuple[tuple[float, ...], ...]
    planes: tuple[int, ...]
    scale_up: tuple[int, ...]
    leaf_gpus: int | None
    pod_gpus: tuple[int | None, ...]


def default_space(gpu: GpuSpec) -> Space:
    """The default axes for `gpu`: InfiniBand, tuned RoCE and Spectrum-X; 400G and 800G per GPU;
    the four fabrics; 1:1, 2:1 and 4:1 above the leaf; 8 planes (one per NIC, DeepSeek-V3's
    MPFT); the 8-GPU HGX domain and the GPU's own NVLink domain where it is larger (NVL72);
    two scale-out tiers."""
    domains = sorted({8, gpu.nvlink_domain_size}) if gpu.nvlink_domain_size > 8 else [8]
    return Space(
        technology=("infiniband", "roce", "spectrum-x"),
        nic_gbps=(400, 800),
        fabric=FABRICS,
        oversubscription=((1.0,), (2.0,), (4.0,)),
        planes=(8,) if gpu.nvlink_domain_size <= 8 else (4,),
        scale_up=tuple(domains),
        leaf_gpus=None,
        pod_gpus=(None,),
    )


def gpus_per_node(gpu: GpuSpec) -> int:
    return NVL72_GPUS_PER_NODE if gpu.nvlink_domain_size == 72 else 8


def default_leaf_gpus(gpu: GpuSpec, scale_up: int) -> int:
    """GPUs under one leaf group (a scalable unit): 32 nodes of 8 (DGX SuperPOD H100 reference
    architecture, 256 GPUs) or 8 NVL72 racks (DGX SuperPOD GB200, 576 GPUs); a multiple of the
    NVLink domain either way."""
    unit = 576 if gpu.nvlink_domain_size == 72 else 256
    return unit if unit % scale_up == 0 else math.lcm(unit, scale_up)


def designs(space: Space, gpu: GpuSpec) -> list[Design]:
    """Every design of the space, in a fixed order (the order of the report)."""
    out = []
    for fabric, tech, nic, taper, planes, domain, pod in itertools.product(
        space.fabric, space.technology, space.nic_gbps, space.oversubscription,
        space.planes, space.scale_up, space.pod_gpus,
    ):  # fmt: skip
        if fabric == "rail-only":
            if taper != space.oversubscription[0] or pod != space.pod_gpus[0]:
                continue  # one rail per GPU of a node and nothing above it: no taper, no pod
            taper, pod = (), None
        elif len(taper) != 1 + (pod is not None):
            continue  # a taper per tier above the leaf: one (two tiers) or two (three)
        if fabric != "multi-plane":
            if planes != space.planes[0]:
                continue
            planes = 1
        leaf = space.leaf_gpus or default_leaf_gpus(gpu, domain)
        out.append(Design(fabric, tech, nic, tuple(taper), planes, domain, leaf, pod))
    return sorted(set(out), key=lambda d: _order(space, d))


def _order(space: Space, d: Design) -> tuple[Any, ...]:
    def at(values: tuple[Any, ...], v: Any) -> int:
        return values.index(v) if v in values else -1

    return (
        at(space.fabric, d.fabric), at(space.technology, d.technology),
        at(space.nic_gbps, d.nic_gbps), at(space.scale_up, d.scale_up),
        at(space.pod_gpus, d.pod_gpus), d.oversubscription, d.planes,
    )  # fmt: skip


# ------------------------------------------------------------------------ design -> cluster


def _tier(name: str, domain: int | None, gbps: float, latency: float, **extra: Any) -> dict:
    return {
        "name": name,
        "domain_size": domain,
        "bandwidth_gb_per_s": gbps / 8,
        "latency_us": latency,
        "efficiency": NETWORK_EFFICIENCY,
        **extra,
    }


def _scale_out(d: Design, per_node: int) -> list[dict[str, Any]]:
    sharp = {"sharp": d.technology == "infiniband"}  # InfiniBand SHARP (Quantum switches)
    if d.fabric == "rail-only":
        return [
            _tier(
                "rail", None, d.nic_gbps, LATENCY_US["leaf"], kind="rail", rails=per_node, **sharp
            )
        ]
    kind, rails = {
        "rail-optimised": ("rail", per_node),
        "fat-tree": ("switch", 1),
        "multi-plane": ("plane", d.planes),
    }[d.fabric]
    upper = "plane" if d.fabric == "multi-plane" else "switch"
    tiers = [
        _tier("leaf", d.leaf_gpus, d.nic_gbps, LATENCY_US["leaf"], kind=kind, rails=rails, **sharp)
    ]
    names = ["spine"] if d.pod_gpus is None else ["spine", "core"]
    domains = [None] if d.pod_gpus is None else [d.pod_gpus, None]
    for name, domain, taper in zip(names, domains, d.oversubscription, strict=True):
        tiers.append(
            _tier(
                name, domain, d.nic_gbps, LATENCY_US[name], kind=upper,
                rails=rails if upper == "plane" else 1, oversubscription=taper, **sharp,
            )
        )  # fmt: skip
    return tiers


def cluster_for(d: Design, gpu: GpuSpec, num_gpus: int) -> Cluster:
    """The Cluster design `d` is at `num_gpus` GPUs of `gpu` (InvalidInput if it is not one)."""
    per_node = min(gpus_per_node(gpu), d.scale_up)
    nvlink = {
        "name": "nvlink",
        "domain_size": d.scale_up,
        "bandwidth_gb_per_s": gpu.nvlink_gb_per_s,
        "latency_us": LATENCY_US["nvlink"],
        "efficiency": NVLINK_EFFICIENCY,
        "kind": "nvlink",
    }
    data = {
        "name": d.name,
        "gpu": {**gpu.model_dump(mode="json"), "nvlink_domain_size": d.scale_up},
        "gpus_per_node": per_node,
        "num_gpus": num_gpus,
        "tiers": [nvlink, *_scale_out(d, per_node)],
        "network": {"technology": d.technology},
        "source": f"planner design {d.name}: {TIER_SOURCE}",
    }
    return models_zoo.load_cluster(models_zoo.validated(Cluster, data, f"design {d.name}"))


# ------------------------------------------------------------------- faster-or-equal order


def _technology_rank(tech: str) -> tuple[float, bool]:
    """What a technology changes in the cost model: its load factor and SHARP."""
    return TECHNOLOGY_LOAD_FACTOR[tech], tech == "infiniband"


def at_least_as_fast(a: Design, b: Design) -> bool:
    """True when the cost model cannot price `b` faster than `a`: the same tiers (fabric,
    domains, planes) with at least b's bandwidth on every scale-out tier (NIC speed, taper,
    the technology's load factor) and SHARP wherever b has it. Every plan of b is then a plan
    of a whose collectives are no slower, so a's best plan is at least b's
    (tests/unit/planner/test_design.py checks the pruned frontier against the full one)."""
    if (a.fabric, a.planes, a.scale_up, a.leaf_gpus, a.pod_gpus) != (
        b.fabric, b.planes, b.scale_up, b.leaf_gpus, b.pod_gpus,
    ):  # fmt: skip
        return False
    (fa, sa), (fb, sb) = _technology_rank(a.technology), _technology_rank(b.technology)
    return (
        fa >= fb
        and (sa or not sb)
        and a.nic_gbps >= b.nic_gbps
        and all(x <= y for x, y in zip(a.oversubscription, b.oversubscription, strict=True))
    )


# ------------------------------------------------------------------------ --designs FILE

KEYS = (
    "technology", "nic_gbps", "fabric", "oversubscription", "planes", "scale_up", "leaf_gpus",
    "pod_gpus",
)  # fmt: skip


def _values(path: str, key: str, value: Any) -> list[Any]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InvalidInput(f"{path}: {key} must list at least one value")
    return items


def _whole(path: str, key: str, v: Any, allowed: tuple[int, ...] | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise InvalidInput(f"{path}: {key} values must be positive whole numbers (got {v!r})")
    if allowed is not None and v not in allowed:
        raise InvalidInput(f"{path}: {key} must be one of {', '.join(map(str, allowed))} (got {v})")
    return v


def _taper(path: str, v: Any) -> tuple[float, ...]:
    items = v if isinstance(v, list) else [v]
    if not 1 <= len(items) <= 2:
        raise InvalidInput(
            f"{path}: oversubscription entries are a number or [leaf, pod] (got {v!r})"
        )
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 1 <= x <= 64:
            raise InvalidInput(f"{path}: oversubscription must be numbers in [1, 64] (got {x!r})")
    return tuple(float(x) for x in items)


def load_space(path: str | None, gpu: GpuSpec, num_gpus: int) -> Space:
    """The default space with the axes `--designs FILE` gives replaced (InvalidInput naming the
    file, the axis and the rule)."""
    space = default_space(gpu)
    if path is not None:
        if not Path(path).is_file():
            raise InvalidInput(f"--designs: file not found: {path}")
        space = _apply(path, models_zoo.read_data_file(path), space, gpu)
    _check(path or "design space", space, gpu, num_gpus)
    return space


def _apply(path: str, data: Any, space: Space, gpu: GpuSpec) -> Space:
    if not isinstance(data, dict) or not data:
        raise InvalidInput(f"{path}: expected a mapping of axes ({', '.join(KEYS)}) to values")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise InvalidInput(f"{path}: unknown axis {unknown[0]!r}; known: {', '.join(KEYS)}")
    techs = get_args(Technology)
    update: dict[str, Any] = {}
    for key, value in data.items():
        items = _values(path, key, value) if key != "leaf_gpus" else [value]
        if key == "technology":
            bad = [t for t in items if t not in techs]
            if bad:
                raise InvalidInput(
                    f"{path}: technology must be one of {', '.join(techs)} (got {bad[0]!r})"
                )
        elif key == "fabric":
            bad = [f for f in items if f not in FABRICS]
            if bad:
                raise InvalidInput(
                    f"{path}: fabric must be one of {', '.join(FABRICS)} (got {bad[0]!r})"
                )
        elif key == "nic_gbps":
            items = [_whole(path, key, v, NIC_GBPS) for v in items]
        elif key == "oversubscription":
            items = [_taper(path, v) for v in items]
        elif key == "pod_gpus":
            items = [None if v is None else _whole(path, key, v) for v in items]
        elif key == "leaf_gpus":
            update[key] = _whole(path, key, value)
            continue
        else:
            items = [_whole(path, key, v) for v in items]
        update[key] = tuple(dict.fromkeys(items))
    return replace(space, **update)


def _check(path: str, space: Space, gpu: GpuSpec, num_gpus: int) -> None:
    per_node = gpus_per_node(gpu)
    for domain in space.scale_up:
        if domain > gpu.nvlink_domain_size or gpu.nvlink_domain_size % domain and domain != 8:
            raise InvalidInput(
                f"{path}: scale_up {domain}: {gpu.id}'s NVLink domain is "
                f"{gpu.nvlink_domain_size} GPUs (nvlink_domain_size); use 8 or "
                f"{gpu.nvlink_domain_size}"
            )
        if num_gpus > domain and num_gpus % min(per_node, domain):
            raise InvalidInput(
                f"--gpus {num_gpus:,}: must be whole nodes of {min(per_node, domain)} GPUs"
            )
    for planes in space.planes:
        if "multi-plane" in space.fabric and per_node % planes:
            raise InvalidInput(
                f"{path}: planes must divide the {per_node} GPUs of a node (got {planes})"
            )
    leaf = space.leaf_gpus
    for domain in space.scale_up:
        if leaf is not None and (leaf % domain or leaf == domain):
            raise InvalidInput(
                f"{path}: leaf_gpus ({leaf}) must be a multiple of scale_up {domain} above it"
            )
        unit = leaf or default_leaf_gpus(gpu, domain)
        for pod in space.pod_gpus:
            if pod is not None and (pod <= unit or pod % unit):
                raise InvalidInput(
                    f"{path}: pod_gpus ({pod}) must be a multiple of leaf_gpus ({unit}) above it"
                )
    tiers = {1 + (pod is not None) for pod in space.pod_gpus}
    for taper in space.oversubscription:
        if len(taper) not in tiers:
            raise InvalidInput(
                f"{path}: oversubscription {list(taper)} has {len(taper)} taper(s) but the "
                f"designs have {' or '.join(map(str, sorted(tiers)))} tier(s) above the leaf "
                "(a number for two tiers; [leaf, pod] with a pod_gpus value)"
            )
    if not designs(space, gpu):
        raise InvalidInput(
            f"{path}: no design: oversubscription lists one taper per tier above the leaf "
            "(a number for two tiers, [leaf, pod] with pod_gpus)"
        )
