"""What a design costs to run, per GPU-hour and per million tokens (docs/networks.md "Designing
the network"): the GPU-hour without the network, plus the network's capital spread over its
years, plus the electricity it draws (W x PUE x $/kWh, planner.network_prices). Each default is
an input (`planner design --gpu-hour-price --amortization-years --network-prices`) with its
source, or labelled an assumption. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from cost_models.errors import InvalidInput

from ..network_bom import HOURS_PER_YEAR, Bill
from ..network_prices import ENERGY_SOURCE, Prices

DEFAULT_GPU_HOUR_USD = 2.0
GPU_HOUR_SOURCE = (
    "assumption: an H100 SXM GPU-hour without its network, about the 2024-25 rental price of one "
    "H100 ($2-3 per GPU-hour on demand, e.g. Lambda 1x H100 $2.49/h; "
    "computespec.pages.dev/learn/pricing/cost-per-gpu-hour); set --gpu-hour-price for another GPU"
)
DEFAULT_AMORTIZATION_YEARS = 5.0
AMORTIZATION_SOURCE = (
    "assumption: network equipment written off over 5 years, between the 4 and 6 years "
    "operators depreciate data-centre servers and network gear over"
)


@dataclass(frozen=True)
class Costs:
    """The inputs that turn a bill and a throughput into $ per million tokens."""

    gpu_hour_usd: float
    amortization_years: float
    prices: Prices

    def __post_init__(self) -> None:
        if not self.gpu_hour_usd >= 0:
            raise InvalidInput(f"--gpu-hour-price: must be >= 0 (got {self.gpu_hour_usd})")
        if not self.amortization_years > 0:
            raise InvalidInput(f"--amortization-years: must be > 0 (got {self.amortization_years})")

    def network_usd_per_gpu_hour(self, bill: Bill) -> float:
        """The network's capital over its amortisation hours, plus its energy, per GPU-hour."""
        capex = bill.capex_usd_per_gpu / (self.amortization_years * HOURS_PER_YEAR)
        return capex + bill.energy_usd_per_gpu_hour

    def usd_per_m_tokens(self, bill: Bill, tokens_per_s_per_gpu: float) -> float:
        """All-in $ per GPU-hour over the tokens one GPU trains in that hour, x 1e6."""
        hourly = self.gpu_hour_usd + self.network_usd_per_gpu_hour(bill)
        return hourly / (tokens_per_s_per_gpu * 3600) * 1e6

    def assumptions(self) -> dict[str, dict[str, object]]:
        """Each cost input with its value and its source (report and JSON)."""
        gpu = GPU_HOUR_SOURCE if self.gpu_hour_usd == DEFAULT_GPU_HOUR_USD else "--gpu-hour-price"
        years = (
            AMORTIZATION_SOURCE
            if self.amortization_years == DEFAULT_AMORTIZATION_YEARS
            else "--amortization-years"
        )
        return {
            "gpu_hour_usd": {"value": self.gpu_hour_usd, "source": gpu},
            "amortization_years": {"value": self.amortization_years, "source": years},
            "pue": {"value": self.prices.pue, "source": ENERGY_SOURCE},
            "electricity_usd_per_kwh": {
                "value": self.prices.electricity_usd_per_kwh,
                "source": ENERGY_SOURCE,
            },
        }
