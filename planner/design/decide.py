"""Which term decides a design: the tier the design thins (the tapered tier, the missing spine of
rail-only, else the NIC speed of the outermost scale-out tier), the parallel axes whose groups
cross it in each workload's best plan (planner.place.ranks.group_tiers) and the exposed
communication term of those axes that costs the step most. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from cost_models.specs import Cluster, Estimate

from ..place import ranks
from .space import Design

AXIS_TERM = {"tp": "tp_comm", "cp": "cp_comm", "ep": "ep_comm", "pp": "pp_comm", "dp": "dp_comm"}


@dataclass(frozen=True)
class Decision:
    tier: str
    """The tier the design thins."""
    thinned: str
    """How: `2:1 taper`, `rail-only (no spine)`, `400G per GPU`."""
    axes: tuple[str, ...]
    """The axes whose groups cross that tier in the plan."""
    term: str | None
    """The exposed comm term of those axes that costs most (None: nothing crossing it is
    exposed)."""
    exposed_s: float
    share: float
    """exposed_s / step time."""

    def as_dict(self) -> dict[str, object]:
        return {
            "tier": self.tier,
            "thinned": self.thinned,
            "axes": list(self.axes),
            "term": self.term,
            "exposed_s": self.exposed_s,
            "share_of_step": self.share,
        }


def thinned_tier(d: Design, cluster: Cluster) -> tuple[int, str]:
    """(tier index, how) of the tier design `d` saves on."""
    last = len(cluster.tiers) - 1
    if d.fabric == "rail-only":
        return last, "rail-only: no spine, cross-rail traffic over NVLink"
    tapered = [i for i, o in enumerate(d.oversubscription) if o > 1]
    if tapered:
        j = tapered[-1]
        return 2 + j, f"{d.oversubscription[j]:g}:1 taper"
    return last, f"{d.nic_gbps}G per GPU, full bisection"


def decide(d: Design, cluster: Cluster, plan: Estimate) -> Decision:
    """The deciding term of one workload's best plan on design `d`."""
    j, how = thinned_tier(d, cluster)
    index = {t.name: i for i, t in enumerate(cluster.tiers)}
    crossed = ranks.group_tiers(cluster, plan.layout)
    axes = tuple(
        a
        for a, t in crossed.items()
        if t is not None and index[t] >= j and getattr(plan.layout, a) > 1
    )
    exposed = {AXIS_TERM[a]: plan.breakdown_s.get(AXIS_TERM[a], 0.0) for a in axes}
    term = max(exposed, key=lambda t: (exposed[t], t), default=None)
    seconds = exposed.get(term, 0.0) if term else 0.0
    if term is not None and seconds <= 0:
        term = None
    return Decision(cluster.tiers[j].name, how, axes, term, seconds, seconds / plan.step_time_s)
