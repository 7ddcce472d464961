"""The network's bill of materials at N GPUs: per tier, the switch model, its layers, switches,
ports, links, optics and NICs, their capital cost and power (CONTRACT.md "Network bill").

A pure function of (cluster, N, prices): `bill(cluster, prices)` with the cluster sized to N
(models_zoo.load_cluster(name, N)), so `planner design` can call it per candidate.

Scale-out fabric (docs/networks.md "Bill of materials"): a folded Clos of the switch model's
radix k at the NIC's speed (a 64 x 800G SN5600 serves 128 x 400G NICs through breakouts), with
as many layers as its endpoints need: one layer up to k endpoints, L layers up to
k x prod(down ports of the layers below the top); a non-blocking layer below the top sends k/2
ports down and k/2 up, a layer under a tier with oversubscription o sends k o / (1 + o) down.
Per layer l: switches ceil(D_l / down_l) (the top layer: ceil(D_L / k)), D_(l+1) = D_l / o_l
links up. So 64-port switches need 2 layers up to 2,048 endpoints (64 leaves + 32 spines = 96
switches) and 3 up to 65,536 (2,048 + 2,048 + 1,024 = 5,120): DeepSeek-V3 ISCA'25 (arXiv
2505.09343) Table 3, FT2 and FT3. Multi-plane (`plane` tiers) and rail-only (a `rail` tier with
no tier above it) build one Clos per plane / rail over N / planes endpoints: MPFT at 16,384
endpoints is 8 planes x 96 = 768 switches. A rail-optimised fat-tree (`rail` leaves under a
spine) is one Clos over all N. The cluster's tiers own the layers their domains need: a tier of
domain D takes the layers that reach D endpoints (k/2 per layer), the outermost tier the rest.

Scale-up fabric (the NVLink tier, kind `scale_up`): NVLink switch trays (NVL72: 9 per 72-GPU
rack, one tray per 8 GPUs) and the rack's cable backplane, or the NVSwitch chips of an 8-GPU
HGX baseboard, or a switchless mesh (MI300X) -- `Cluster.network.scale_up`, by default from the
domain's size. Torus (ICI) and WAN tiers are not priced (they come with the system, or are
leased). Every price and wattage: planner.network_prices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cost_models.specs import Cluster, LinkTier

from .network_prices import DEFAULT_PRICES, Component, Prices, load_prices

__all__ = ["Bill", "TierBill", "bill", "bill_dict", "clos", "load_prices"]

SCALE_OUT_KINDS = ("switch", "rail", "plane", "dragonfly")
HOURS_PER_YEAR = 8760
ETHERNET = ("roce", "roce-untuned", "spectrum-x")


@dataclass(frozen=True)
class TierBill:
    name: str
    kind: str
    switch_model: str
    radix: int
    port_gb_per_s: float
    layers: int
    switches: int
    switch_ports: int
    links: int
    transceivers: int
    nics: int
    capex_usd: float
    power_w: float
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Bill:
    gpus: int
    tiers: tuple[TierBill, ...]
    pue: float
    electricity_usd_per_kwh: float

    @property
    def capex_usd_per_gpu(self) -> float:
        return sum(t.capex_usd for t in self.tiers) / self.gpus

    @property
    def power_w_per_gpu(self) -> float:
        return sum(t.power_w for t in self.tiers) / self.gpus

    @property
    def energy_usd_per_gpu_hour(self) -> float:
        """W x PUE / 1000 kWh x $/kWh."""
        return self.power_w_per_gpu * self.pue / 1000 * self.electricity_usd_per_kwh


# ------------------------------------------------------------------------------ Clos counting


def _down_ports(radix: int, taper: float) -> int:
    """Ports a switch below the top layer sends down when its uplinks are tapered o:1."""
    return max(1, math.floor(radix * taper / (1 + taper)))


def clos_capacity(layers: int, radix: int, tapers: list[float]) -> int:
    """Endpoints an L-layer folded Clos reaches: k x prod(down ports below the top)."""
    cap = radix
    for layer in range(layers - 1):
        cap *= _down_ports(radix, tapers[layer] if layer < len(tapers) else 1.0)
    return cap


def clos(endpoints: int, radix: int, layers: int, tapers: list[float]) -> list[tuple[int, int]]:
    """(switches, links into the layer) per layer of an L-layer folded Clos; tapers[l] is the
    oversubscription of the uplinks leaving layer l + 1 (1 = non-blocking)."""
    out, down_links = [], float(endpoints)
    for layer in range(layers):
        taper = tapers[layer] if layer < len(tapers) else 1.0
        top = layer == layers - 1
        per_switch = radix if top else _down_ports(radix, taper)
        out.append((math.ceil(down_links / per_switch - 1e-9), math.ceil(down_links - 1e-9)))
        down_links /= taper
    return out


def _layer_plan(
    tiers: list[LinkTier], endpoints: int, per_gpu: float, radix: int, planes: int
) -> tuple[list[int], list[float]]:
    """Layers owned by each scale-out tier and the taper above each layer.

    A tier whose domain holds e endpoints (per plane; per rail on a rail-optimised leaf tier)
    needs the layers that reach e at k/2 per layer; the outermost tier needed adds layers
    until the whole Clos reaches every endpoint. A tier's oversubscription tapers the uplinks
    into its first layer. Tiers beyond the one that holds every endpoint own none."""
    owned: list[int] = []
    tapers: list[float] = []
    top, done = 0, False
    for tier in tiers:
        if done:
            owned.append(0)
            continue
        if top:
            tapers += [1.0] * (top - 1 - len(tapers))
            tapers.append(tier.oversubscription)
        reach = per_gpu / (tier.rails if tier.kind == "rail" and planes == 1 else 1)
        done = tier is tiers[-1] or tier.domain_size is None
        done = done or tier.domain_size * per_gpu >= endpoints
        if done:
            need = top + 1
            while clos_capacity(need, radix, tapers) < endpoints:
                need += 1
        else:
            e = max(2.0, tier.domain_size * reach)
            need = max(top + 1, math.ceil(math.log(e) / math.log(radix / 2) - 1e-9))
        owned.append(need - top)
        top = need
    return owned, tapers


# ------------------------------------------------------------------------------ components


def _choose(cluster: Cluster, prices: Prices, gbps: float) -> tuple[Component, Component]:
    """The switch and NIC models: the cluster's own, else by technology and NIC speed."""
    net = cluster.network
    eth = net.technology in ETHERNET
    switch = net.switch or ("sn5600" if eth else "qm9700" if gbps <= 400 else "q3400")
    nic = net.nic or (
        "connectx-8" if gbps > 400
        else "bluefield-3-supernic" if net.technology == "spectrum-x" else "connectx-7"
    )
    where = f"cluster {cluster.name} network"
    return prices.get(switch, where), prices.get(nic, where)


def _optic(prices: Prices, gbps: float) -> Component:
    """The slowest transceiver that carries a port of `gbps`."""
    optics = sorted(
        (c for c in prices.components.values() if c.kind == "transceiver"),
        key=lambda c: c.port_gbps,
    )
    return next((c for c in optics if c.port_gbps >= gbps), optics[-1])


def _cable(prices: Prices, kind: str, gbps: float) -> Component:
    cables = sorted(
        (c for c in prices.components.values() if c.kind == kind), key=lambda c: c.port_gbps
    )
    return next((c for c in cables if c.port_gbps >= gbps), cables[-1])


# ------------------------------------------------------------------------------ the bill


def bill(cluster: Cluster, prices: Prices | None = None) -> Bill:
    """The bill of materials of `cluster` at its size (cluster.num_gpus GPUs)."""
    prices = DEFAULT_PRICES if prices is None else prices
    rows = [*_scale_up_rows(cluster, prices), *_scale_out_rows(cluster, prices)]
    return Bill(cluster.num_gpus, tuple(rows), prices.pue, prices.electricity_usd_per_kwh)


def _scale_up_rows(cluster: Cluster, prices: Prices) -> list[TierBill]:
    tier, n = cluster.tiers[0], cluster.num_gpus
    # The innermost tier of a GPU cluster is its scale-up fabric (presets before issue 33 give
    # NVLink the default kind `switch`); a torus (ICI) comes with the system.
    if tier.kind not in ("nvlink", "switch") or tier.domain_size is None or tier.domain_size < 2:
        return []
    domain = min(tier.domain_size, n)
    where = f"cluster {cluster.name} network.scale_up"
    if cluster.network.scale_up:
        parts = [prices.get(cluster.network.scale_up, where)]
    elif tier.domain_size <= 8:
        parts = [prices.get("hgx-nvswitch", where)]
    else:
        parts = [prices.get("nvlink-switch-tray", where), prices.get("nvl72-cable-backplane")]
    counts = [math.ceil(n / min(p.radix, domain)) for p in parts]
    return [
        TierBill(
            tier.name, "scale_up", parts[0].name, parts[0].radix,
            tier.bandwidth_gb_per_s, 1, counts[0] if parts[0].kind == "scale_up" else 0, n, n, 0, 0,
            sum(c * p.usd for c, p in zip(counts, parts, strict=True)),
            sum(c * p.w for c, p in zip(counts, parts, strict=True)),
            tuple(f"{p.name}: {p.source}" for p in parts),
        )
    ]


def _planes(tiers: list[LinkTier]) -> int:
    """Independent Clos fabrics: the planes of a multi-plane fabric, the rails of rail-only."""
    if any(t.kind == "plane" for t in tiers):
        return max(t.rails for t in tiers if t.kind == "plane")
    return tiers[-1].rails if tiers[-1].kind == "rail" else 1


def _scale_out_rows(cluster: Cluster, prices: Prices) -> list[TierBill]:
    tiers = [t for t in cluster.tiers[1:] if t.kind in SCALE_OUT_KINDS]
    if not tiers:
        return []
    n, gbps = cluster.num_gpus, tiers[0].bandwidth_gb_per_s * 8
    switch, nic = _choose(cluster, prices, gbps)
    nics_per_gpu = math.ceil(gbps / nic.port_gbps - 1e-9)
    speed = min(gbps, nic.port_gbps)  # one NIC port
    lanes = max(1, math.ceil(speed / switch.port_gbps - 1e-9))  # switch ports per NIC port
    breakout = max(1, math.floor(switch.port_gbps / speed + 1e-9))  # NIC ports per switch port
    radix, port_gbps = switch.radix * breakout, min(speed, switch.port_gbps)
    planes = _planes(tiers)
    endpoints = math.ceil(n * nics_per_gpu * lanes / planes)
    owned, tapers = _layer_plan(tiers, endpoints, nics_per_gpu * lanes / planes, radix, planes)
    layers = clos(endpoints, radix, sum(owned), tapers)
    ctx = _RowContext(switch, nic, prices, cluster.network.endpoint_link, port_gbps, radix, planes)
    rows, first = [], 0
    for j, (tier, count) in enumerate(zip(tiers, owned, strict=True)):
        mine = layers[first : first + count]
        ups = [links for _, links in layers[first + 1 : first + count + 1]]
        nics = n * nics_per_gpu if j == 0 else 0
        rows.append(ctx.row(tier, mine, ups, nics, first == 0 and count > 0))
        first += count
    return rows


@dataclass(frozen=True)
class _RowContext:
    switch: Component
    nic: Component
    prices: Prices
    endpoint_link: str
    port_gbps: float
    radix: int
    planes: int

    def row(self, tier: LinkTier, layers: list, ups: list[int], nics: int, leaf: bool) -> TierBill:
        """One tier's counts (all planes) and their price and power."""
        p = self.planes
        switches = p * sum(s for s, _ in layers)
        links_in = p * sum(links for _, links in layers)
        ports = links_in + p * sum(ups)
        optic, fibre = _optic(self.prices, self.port_gbps), self.prices.get("fibre")
        parts: list[tuple[int, Component]] = [(switches, self.switch), (nics, self.nic)]
        endpoint = p * layers[0][1] if leaf else 0
        if leaf and self.endpoint_link != "optic":
            cable = _cable(self.prices, self.endpoint_link, self.port_gbps)
            parts.append((endpoint, cable))
            optical_links = links_in - endpoint
        else:
            optical_links = links_in
        transceivers = 2 * optical_links
        parts += [(transceivers, optic), (optical_links, fibre)]
        used = [(c, comp) for c, comp in parts if c]
        return TierBill(
            tier.name, tier.kind, self.switch.name, self.radix, self.port_gbps / 8,
            len(layers), switches, ports, links_in, transceivers, nics,
            sum(c * comp.usd for c, comp in used), sum(c * comp.w for c, comp in used),
            tuple(dict.fromkeys(f"{comp.name}: {comp.source}" for _, comp in used)),
        )


def bill_dict(b: Bill) -> dict[str, Any]:
    """CONTRACT.md "Network bill" JSON."""
    tiers = [
        {
            "name": t.name, "kind": t.kind, "switch_model": t.switch_model, "radix": t.radix,
            "port_gb_per_s": t.port_gb_per_s, "layers": t.layers, "switches": t.switches,
            "switch_ports": t.switch_ports, "links": t.links, "transceivers": t.transceivers,
            "nics": t.nics, "capex_usd": t.capex_usd, "power_w": t.power_w,
            "sources": list(t.sources),
        }
        for t in b.tiers
    ]
    return {
        "gpus": b.gpus,
        "tiers": tiers,
        "capex_usd_per_gpu": b.capex_usd_per_gpu,
        "power_w_per_gpu": b.power_w_per_gpu,
    }


# ------------------------------------------------------------------ whatif's per-GPU figures


def network_capex_usd_per_gpu(cluster: Cluster, prices: Prices | None = None) -> float:
    return bill(cluster, prices).capex_usd_per_gpu


def network_power_w_per_gpu(cluster: Cluster, prices: Prices | None = None) -> float:
    """Watts the network draws per GPU (IT power, before PUE)."""
    return bill(cluster, prices).power_w_per_gpu


def network_energy_usd_per_gpu_hour(cluster: Cluster, prices: Prices | None = None) -> float:
    return bill(cluster, prices).energy_usd_per_gpu_hour
