"""Network bill of materials per scale-out tier: NIC ports, switch ports and links per GPU, and
their capital cost, so that `whatif` can put the network's own price next to its speed.

Counting (a folded Clos / fat-tree, per GPU): the first scale-out tier has one link per GPU (NIC
to leaf) and one leaf port; every tier above adds the uplinks of the tier below, 1 /
oversubscription per GPU, each with two switch ports (up at the lower switch, down at the upper).
One tier per switch layer: a cluster file that folds a whole fabric into one tier is priced as
one layer. A two-layer non-blocking fat-tree therefore has 2 links and 3 switch ports per GPU: 1,024 GPUs,
48 switches of 64 ports = 3,072 ports (the spreadsheet below). NVLink, torus (ICI) and WAN tiers
are not priced here (they come with the system, or are leased).

Default prices (USD, 400 Gb/s per port; `DEFAULT_PRICES_SOURCE`): one 64-port 400 Gb/s InfiniBand
switch $36,000 (fs.com variant, ~$50,000 NVIDIA's own) -> $562.5 per port; connectors and cables
$2,621,440 for 1,024 GPUs on a two-layer fat-tree = 2,048 links -> $1,280 per link (both
transceivers and the cable). NICs are priced inside the GPU server in that source, so the default
NIC price is 0 (the GPU-hour price carries it). Prices scale linearly with the port bandwidth
(an assumption: 800G = 2 x 400G); override any of them with a YAML/JSON file of the same keys.

Power (W per 400 Gb/s, `DEFAULT_POWER_SOURCE`; linear in port bandwidth like the prices): a
transceiver end 8.5 W (NVIDIA's twin-port 2x400G OSFP draws 17 W; the single-port 400G OSFP on
the NIC 9 W), two per link; a switch port 11.7 W (a Quantum-2 QM9700, 64 x 400G, 747 W typical
with passive cables, i.e. without the optics counted per link); the NIC 0 W by default, as its
price: it sits in the GPU server, whose power the GPU-hour price already pays. The network's
energy per GPU-hour is W x PUE / 1000 x $/kWh (default PUE 1.56, Uptime Institute 2024 survey
average; $0.08/kWh, US EIA 2024 average industrial price); all keys overridable in the same file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster

PRICED_KINDS = ("switch", "rail", "plane", "dragonfly")
DEFAULT_PRICES: dict[str, float] = {
    "nic_port_usd_per_400g": 0.0,
    "switch_port_usd_per_400g": 36_000 / 64,
    "link_usd_per_400g": 2_621_440 / 2_048,
    # Power and energy (DEFAULT_POWER_SOURCE); a link has a transceiver at each end.
    "nic_port_w_per_400g": 0.0,
    "switch_port_w_per_400g": 747 / 64,
    "transceiver_w_per_400g": 17 / 2,
    "electricity_usd_per_kwh": 0.08,
    "pue": 1.56,
}
TRANSCEIVERS_PER_LINK = 2
DEFAULT_PRICES_SOURCE = (
    "H100 Freakonomics (tech-talk-cto, Aug 2024) and its spreadsheet "
    "(docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc): 64-port "
    "400G InfiniBand switch $36k; connectors & cables $2,621,440 for 1,024 H100 (2 layers)"
)
DEFAULT_POWER_SOURCE = (
    "NVIDIA LinkX product specifications (docs.nvidia.com/networking): twin-port 2x400G OSFP "
    "transceiver (MMS4X00-NS) 17 W, single-port 400G OSFP (MMS4X00-NS400) 9 W typical; NVIDIA "
    "Quantum-2 QM9700 datasheet: 64 x 400G, 747 W typical with passive cables; Uptime Institute "
    "Global Data Center Survey 2024: average PUE 1.56; US EIA Electric Power Monthly: 2024 average "
    "industrial electricity price about 8 cents/kWh"
)
HOURS_PER_YEAR = 8760


@dataclass(frozen=True)
class TierBill:
    tier: str
    nic_ports_per_gpu: float
    switch_ports_per_gpu: float
    links_per_gpu: float
    capex_usd_per_gpu: float
    power_w_per_gpu: float = 0.0
    """NIC ports, switch ports and the transceivers of the links, per GPU, in watts."""


def load_prices(path: str | None) -> dict[str, float]:
    """DEFAULT_PRICES with the keys a YAML/JSON file overrides (InvalidInput on unknown keys)."""
    prices = dict(DEFAULT_PRICES)
    if path is None:
        return prices
    data: Any = models_zoo.read_data_file(Path(path))
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping of price keys to numbers")
    for key, value in data.items():
        if key not in prices:  # one file holds prices, power and energy
            raise InvalidInput(f"{path}: unknown price {key!r}; known: {', '.join(prices)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise InvalidInput(f"{path}: {key} must be a number >= 0 (got {value!r})")
        if key == "pue" and value < 1:
            raise InvalidInput(f"{path}: pue must be >= 1 (facility power / IT power; got {value})")
        prices[key] = float(value)
    return prices


def network_bill(cluster: Cluster, prices: dict[str, float] | None = None) -> list[TierBill]:
    """Per priced tier: ports and links per GPU and their capital cost per GPU."""
    prices = DEFAULT_PRICES if prices is None else prices
    out: list[TierBill] = []
    first = True
    for tier in cluster.tiers[1:]:  # tiers[0] is the NVLink domain, part of the system
        if tier.kind not in PRICED_KINDS:
            continue
        scale = tier.bandwidth_gb_per_s * 8 / 400  # price linear in port bandwidth
        if first:
            nics, ports, links = 1.0, 1.0, 1.0
            first = False
        else:
            nics, links = 0.0, 1.0 / tier.oversubscription
            ports = 2 * links
        capex = scale * (
            nics * prices["nic_port_usd_per_400g"]
            + ports * prices["switch_port_usd_per_400g"]
            + links * prices["link_usd_per_400g"]
        )
        power = scale * (
            nics * prices["nic_port_w_per_400g"]
            + ports * prices["switch_port_w_per_400g"]
            + links * TRANSCEIVERS_PER_LINK * prices["transceiver_w_per_400g"]
        )
        out.append(TierBill(tier.name, nics, ports, links, capex, power))
    return out


def network_capex_usd_per_gpu(cluster: Cluster, prices: dict[str, float] | None = None) -> float:
    return sum(b.capex_usd_per_gpu for b in network_bill(cluster, prices))


def network_power_w_per_gpu(cluster: Cluster, prices: dict[str, float] | None = None) -> float:
    """Watts the scale-out network draws per GPU (IT power, before PUE)."""
    return sum(b.power_w_per_gpu for b in network_bill(cluster, prices))


def network_energy_usd_per_gpu_hour(
    cluster: Cluster, prices: dict[str, float] | None = None
) -> float:
    """The network's electricity per GPU-hour: W x PUE / 1000 kWh x $/kWh."""
    prices = DEFAULT_PRICES if prices is None else prices
    kw = network_power_w_per_gpu(cluster, prices) / 1000
    return kw * prices["pue"] * prices["electricity_usd_per_kwh"]
