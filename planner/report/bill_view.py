"""`planner bill` as a rich table (one row per tier) and the component sources. Nothing here
prints."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.text import Text

from ..network_bom import Bill
from .terminal import compact_table


def render_bill(b: Bill, cluster_name: str) -> Group:
    """Per tier: switch model, layers, switches, ports, links, optics, NICs, capital and power;
    then the totals per GPU and where every price and wattage comes from."""
    table = compact_table(
        "tier", "switch", "L", "switches", "links", "optics", "$M", "kW", right_from=2
    )
    for t in b.tiers:
        model = t.switch_model
        if t.kind != "scale_up":
            model = f"{model} {t.radix}x{t.port_gb_per_s * 8:g}"
        table.add_row(
            t.name, model, str(t.layers), f"{t.switches:,}", f"{t.links:,}",
            f"{t.transceivers:,}", f"{t.capex_usd / 1e6:,.1f}",
            f"{t.power_w / 1000:,.0f}",
        )
    nics = sum(t.nics for t in b.tiers)
    total = Text(
        f"{nics:,} NICs (in the first scale-out tier's $ and kW)\n"
        f"per GPU: ${b.capex_usd_per_gpu:,.0f} capital, {b.power_w_per_gpu:,.1f} W, "
        f"${b.energy_usd_per_gpu_hour:.4f}/h of energy at PUE {b.pue:g}, "
        f"${b.electricity_usd_per_kwh:g}/kWh"
    )
    sources = sorted({s for t in b.tiers for s in t.sources})
    return Group(
        Text(f"network bill: {cluster_name}, {b.gpus:,} GPUs", style="bold"),
        table,
        total,
        Text("sources:", style="bold"),
        # wrapped at the console's width under a hanging indent, each source its own item
        *(Padding(Text(s), (0, 0, 0, 2), expand=False) for s in sources),
    )
