"""The network's price and power list: one entry per component, each with its source or the
word "assumption" where no public figure exists (docs/networks.md "Price list").

Prices are per component, never per bit: an 800G port costs what its switch model's share
costs, not twice a 400G port (a 64 x 800G Spectrum-4 SN5600 is one switch, a 64 x 400G
Quantum-2 QM9700 another). `load_prices(FILE)` overrides any `usd` or `w` of any entry and the
energy keys (`pue`, `electricity_usd_per_kwh`) from a YAML/JSON file:

    qm9700: {usd: 40000}
    connectx-7: {usd: 1800, w: 24}
    pue: 1.3
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import models_zoo
from cost_models.errors import InvalidInput

ASSUMPTION = "assumption"


@dataclass(frozen=True)
class Component:
    name: str
    kind: str
    """switch, nic, transceiver, fibre, dac, aoc, scale_up (switch parts), scale_up_mesh."""
    usd: float
    w: float
    source: str
    radix: int = 0
    """Ports (switches); GPUs served (scale-up parts: a tray, a baseboard)."""
    port_gbps: float = 0.0
    """Port speed (switches, NICs, cables and transceivers), Gb/s."""
    technology: str = ""


_FREAKONOMICS = (
    "H100 Freakonomics (tech-talk-cto, Aug 2024) and its spreadsheet "
    "(docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc)"
)
_LINKX = (
    "NVIDIA LinkX product specifications (docs.nvidia.com/networking): twin-port 2x400G OSFP "
    "MMS4X00-NS 17 W, single-port 400G OSFP MMS4X00-NS400 9 W typical"
)

CATALOGUE: dict[str, Component] = {
    c.name: c
    for c in (
        # ---- scale-out switches
        Component(
            "qm9700", "switch", 36_000, 747,
            f"{_FREAKONOMICS}: 64-port 400G InfiniBand switch $36k; NVIDIA Quantum-2 QM9700 "
            "datasheet: 64 x NDR 400G, 747 W typical with passive cables",
            radix=64, port_gbps=400, technology="infiniband",
        ),
        Component(
            "q3400", "switch", 160_000, 3_000,
            f"{ASSUMPTION}: no public price; NVIDIA Quantum-X800 Q3400 datasheet: 144 x XDR 800G "
            "(72 OSFP), two layers reach 10,368 endpoints; power class assumed",
            radix=144, port_gbps=800, technology="infiniband",
        ),
        Component(
            "sn5600", "switch", 55_000, 1_200,
            f"{ASSUMPTION}: no public list price; NVIDIA Spectrum-4 SN5600 datasheet: 64 x 800G "
            "or 128 x 400G (51.2 Tb/s); power class assumed",
            radix=64, port_gbps=800, technology="ethernet",
        ),
        # ---- NICs / SuperNICs
        Component(
            "connectx-7", "nic", 1_800, 25,
            f"{ASSUMPTION}: street price of a ConnectX-7 400G OSFP adapter; NVIDIA ConnectX-7 "
            "user manual, Specifications: about 25 W maximum",
            port_gbps=400, technology="infiniband",
        ),
        Component(
            "bluefield-3-supernic", "nic", 2_500, 75,
            f"{ASSUMPTION}: price; NVIDIA BlueField-3 SuperNIC B3140H (400G, Spectrum-X) "
            "datasheet: 75 W power class",
            port_gbps=400, technology="spectrum-x",
        ),
        Component(
            "connectx-8", "nic", 3_000, 45,
            f"{ASSUMPTION}: price and power; NVIDIA ConnectX-8 SuperNIC: 800G (InfiniBand XDR "
            "or Spectrum-X Ethernet)",
            port_gbps=800, technology="any",
        ),
        # ---- cables and optics, per end or per cable
        Component(
            "osfp-400g", "transceiver", 590, 8.5,
            f"{_FREAKONOMICS}: $1,280 per link (two transceivers and the fibre) less $100 of "
            f"fibre, halved; {_LINKX}: 17 W per twin 2x400G module = 8.5 W per 400G end",
            port_gbps=400,
        ),
        Component(
            "osfp-800g", "transceiver", 900, 16.5,
            f"{ASSUMPTION}: 800G optics cost less per bit than 400G (about 1.5x the 400G "
            "module, not 2x); twin-port 2x400G-class power",
            port_gbps=800,
        ),
        Component(
            "osfp-200g", "transceiver", 350, 5.5, f"{ASSUMPTION}: 200G module", port_gbps=200
        ),
        Component(
            "osfp-100g", "transceiver", 150, 3.5, f"{ASSUMPTION}: 100G module", port_gbps=100
        ),
        Component(
            "osfp-1600g", "transceiver", 1_600, 25, f"{ASSUMPTION}: 1.6T module", port_gbps=1600
        ),
        Component("fibre", "fibre", 100, 0.0, f"{ASSUMPTION}: MPO fibre run in the data hall"),
        Component(
            "dac-400g", "dac", 150, 0.0,
            f"{ASSUMPTION}: passive copper, in-rack reach (<= 3 m), no power", port_gbps=400
        ),
        Component(
            "dac-800g", "dac", 250, 0.0,
            f"{ASSUMPTION}: passive copper, in-rack reach (<= 2 m)", port_gbps=800
        ),
        Component(
            "aoc-400g", "aoc", 700, 12.0,
            f"{ASSUMPTION}: active optical cable, up to ~30 m; optics at both ends", port_gbps=400
        ),
        Component(
            "aoc-800g", "aoc", 1_100, 24.0,
            f"{ASSUMPTION}: active optical cable, up to ~30 m", port_gbps=800
        ),
        # ---- scale-up fabric: radix = GPUs one part serves
        Component(
            "nvlink-switch-tray", "scale_up", 80_000, 1_200,
            f"{ASSUMPTION}: price and power of one NVLink 5 switch tray (two NVLink switch chips, "
            "144 NVLink ports = 8 GPUs x 18 links); GB200 NVL72: 9 trays per 72-GPU rack "
            "(NVIDIA GB200 NVL72 product page)",
            radix=8,
        ),
        Component(
            "nvl72-cable-backplane", "scale_up", 72_000, 0.0,
            f"{ASSUMPTION}: the NVLink copper spine of one NVL72 rack (about 5,000 cables), "
            "passive",
            radix=72,
        ),
        Component(
            "hgx-nvswitch", "scale_up", 12_000, 400,
            f"{ASSUMPTION}: the four third-generation NVSwitch chips of an HGX H100/H200 8-GPU "
            "baseboard (NVIDIA HGX H100 datasheet: 4 NVSwitch, 900 GB/s per GPU), price and "
            "power share",
            radix=8,
        ),
        Component(
            "xgmi-mesh", "scale_up_mesh", 0.0, 0.0,
            "AMD Instinct MI300X platform: the eight GPUs are joined point-to-point by "
            "Infinity Fabric links on the baseboard, no switch (AMD MI300X platform data sheet)",
            radix=8,
        ),
    )
}
ENERGY_DEFAULTS: dict[str, float] = {"pue": 1.56, "electricity_usd_per_kwh": 0.08}
ENERGY_SOURCE = (
    "Uptime Institute Global Data Center Survey 2024: average PUE 1.56; US EIA Electric Power "
    "Monthly: 2024 average industrial electricity price about 8 cents/kWh"
)


@dataclass(frozen=True)
class Prices:
    components: dict[str, Component]
    pue: float = ENERGY_DEFAULTS["pue"]
    electricity_usd_per_kwh: float = ENERGY_DEFAULTS["electricity_usd_per_kwh"]

    def get(self, name: str, where: str = "network") -> Component:
        try:
            return self.components[name]
        except KeyError:
            known = ", ".join(sorted(self.components))
            raise InvalidInput(f"{where}: unknown component {name!r}; known: {known}") from None


DEFAULT_PRICES = Prices(dict(CATALOGUE))


def _number(path: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidInput(f"{path}: {key} must be a number >= 0 (got {value!r})")
    return float(value)


def load_prices(path: str | None) -> Prices:
    """DEFAULT_PRICES with what a YAML/JSON file overrides: `NAME: {usd: x, w: y}` per
    component, `pue` and `electricity_usd_per_kwh` (InvalidInput on anything else)."""
    if path is None:
        return DEFAULT_PRICES
    data: Any = models_zoo.read_data_file(Path(path))
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping of component names to {{usd, w}}")
    comps, energy = dict(CATALOGUE), dict(ENERGY_DEFAULTS)
    for key, value in data.items():
        if key in energy:
            energy[key] = _number(path, key, value)
            if key == "pue" and energy[key] < 1:
                raise InvalidInput(f"{path}: pue must be >= 1 (facility / IT power; got {value})")
            continue
        if key not in comps:
            known = ", ".join([*sorted(comps), *energy])
            raise InvalidInput(f"{path}: unknown price {key!r}; known: {known}")
        if not isinstance(value, dict) or not value or set(value) - {"usd", "w"}:
            raise InvalidInput(f"{path}: {key} must be a mapping with usd and/or w (got {value!r})")
        fields = {k: _number(path, f"{key}.{k}", v) for k, v in value.items()}
        comps[key] = replace(comps[key], **fields, source=f"{path} (override)")
    return Prices(comps, energy["pue"], energy["electricity_usd_per_kwh"])
