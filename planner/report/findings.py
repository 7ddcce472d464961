"""What a reader should know about a plan, as plain data: warnings and why runner-ups lose.

Shared by the rich, Markdown and HTML reports; nothing here renders or prints.
"""

from __future__ import annotations

import math

from dataclasses import dataclass

from cost_models import framework, topology
from cost_models.compute import windowed_layers
from cost_models.specs import Cluster, Estimate

from ..types import PlanResult

OFFLOAD_WARN_SHARE = 0.10
"""Share of the step the compute stream may wait for CPU offload copies (Estimate.offload)
before plan and estimate warn: a report threshold, not physics (the waits are priced anyway)."""
BUBBLE_WARN_SHARE = 0.20  # issue 5: warn when the pipeline bubble exceeds 20% of the step
HEADROOM_WARN_SHARE = 0.05  # issue 5: warn below 5% of HBM left free at peak
# Terms that lose a runner-up its place, named for the reader (recompute is paid for memory).
BINDING_LABELS = {
    "compute": "compute",
    "recompute": "recompute (memory)",
    "tp_comm": "exposed TP collective",
    "cp_comm": "exposed CP collective",
    "ep_comm": "exposed EP all-to-all",
    "pp_comm": "exposed PP p2p",
    "dp_comm": "exposed DP collective",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
}


# A breakdown difference below this is rounding, not a reason (the search's time quantum).
REAL_DIFFERENCE_S = 1e-6


@dataclass(frozen=True)
class RunnerUp:
    rank: int  # 2 = second best
    estimate: Estimate
    slower_share: float  # step time over the best's, minus one (negative: faster, see `fastest`)
    binding_term: str | None  # term that grew most against the best (shrank most, if fastest)
    binding_delta_s: float  # its difference, seconds (> REAL_DIFFERENCE_S, else term is None)
    fastest: bool = False  # the fastest plan, behind a simpler one within the tolerance
    tolerance: float = 0.0

    @property
    def reason(self) -> str:
        """The "loses on" cell: the term and its real difference, or the fastest's gain."""
        if self.fastest:
            why = f"fastest, {-self.slower_share:.2%} faster"
            if self.binding_term is not None:
                why += f": {binding_label(self.binding_term)} -{self.binding_delta_s:.3f} s"
            return why
        why = binding_label(self.binding_term)
        if self.binding_term is not None:
            why += f" +{self.binding_delta_s:.3f} s"
        return why


def runner_ups(result: PlanResult) -> list[RunnerUp]:
    """Every plan after the best, with the breakdown term that costs it the most against it (for
    the fastest plan behind a simpler recommendation: the term it saves most on)."""
    best = result.best
    out = []
    for i, e in enumerate(result.ranked[1:], 2):
        # With a global batch range plans differ in batch: compare at the best plan's batch
        # (time per sequence x its batch); with one batch the factor is exactly 1.
        scale = best.global_batch_seqs / e.global_batch_seqs
        terms = sorted(set(e.breakdown_s) | set(best.breakdown_s))
        deltas = {
            t: e.breakdown_s.get(t, 0.0) * scale - best.breakdown_s.get(t, 0.0) for t in terms
        }
        fastest = i - 1 == result.fastest_index
        sign = -1.0 if fastest else 1.0
        term = max(terms, key=lambda t: (sign * deltas[t], t)) if terms else None
        delta = sign * deltas[term] if term is not None else 0.0
        out.append(
            RunnerUp(
                rank=i,
                estimate=e,
                slower_share=e.step_time_s * scale / best.step_time_s - 1,
                binding_term=term if delta > REAL_DIFFERENCE_S else None,
                binding_delta_s=max(delta, 0.0),
                fastest=fastest,
                tolerance=result.simplicity_tolerance,
            )
        )
    return out


def ranking_notes(result: PlanResult) -> list[str]:
    """Why #1 is not the fastest (the simplicity tolerance), and one line per ranked plan that
    stands for others priced exactly like it."""
    out = []
    if result.fastest_index:
        out.append(
            f"#1 is the simplest plan within {result.simplicity_tolerance:.1%} of the fastest "
            f"(#{result.fastest_index + 1}); --simplicity-tolerance 0 ranks by speed alone"
        )
    # One line per distinct list of twins (issue 28: not five identical lines under a ranking).
    by_twins: dict[str, list[int]] = {}
    for i, (e, same) in enumerate(zip(result.ranked, result.equivalents, strict=False), 1):
        if not same:
            continue
        names = []
        for lo in same:
            if lo.zero_stage != e.layout.zero_stage:
                names.append(f"ZeRO-{lo.zero_stage}")
            if lo.order != e.layout.order:
                names.append("order " + "-".join(a.value for a in lo.order))
        by_twins.setdefault(", ".join(names), []).append(i)
    for names, plans in by_twins.items():
        if len(plans) == 1:
            out.append(f"#{plans[0]} is priced the same as: {names} (kept the simplest)")
        else:
            which = ", ".join(f"#{i}" for i in plans)
            out.append(f"{which} are each priced the same as: {names} (kept the simplest)")
    return out


def binding_label(term: str | None) -> str:
    return "same step time (tie-break)" if term is None else BINDING_LABELS.get(term, term)


WAN_SATURATED_SHARE = 0.9
"""A WAN tier busy for at least this share of the step has no time left to hide traffic in."""


def plan_warnings(cluster: Cluster, e: Estimate) -> list[str]:
    """Warnings about one plan: fast-axis groups off NVLink, bubble, memory headroom."""
    out = []
    spans = topology.spans(cluster, e.layout)
    inner = cluster.tiers[0]
    for axis, degree in (("tp", e.layout.tp), ("ep", e.layout.ep)):
        tier = topology.outermost_tier(cluster, spans[axis])
        # On a torus every dimension is the chip-to-chip interconnect (ICI): TP on ici-y is meant.
        on_torus = inner.kind == "torus" and tier is not None and tier.kind == "torus"
        if degree > 1 and tier is not None and tier.name != inner.name and not on_torus:
            out.append(
                f"{axis.upper()} groups ({degree} GPUs) cross the {inner.name} domain "
                f"({inner.domain_size} GPUs) onto {tier.name}"
            )
    for tier in cluster.tiers:
        busy = e.tier_busy_s.get(tier.name, 0.0)
        if tier.kind == "wan" and busy >= WAN_SATURATED_SHARE * e.step_time_s:
            out.append(
                f"cross-site traffic keeps {tier.name} busy {busy:,.2f} s of the "
                f"{e.step_time_s:,.2f} s step: it cannot hide behind compute (more WAN "
                "bandwidth, fewer groups across sites, or less frequent synchronisation)"
            )
    bubble = e.breakdown_s.get("bubble", 0.0) / e.step_time_s
    if bubble > BUBBLE_WARN_SHARE:
        out.append(f"pipeline bubble is {bubble:.1%} of the step (above 20%)")
    off = e.offload
    if off is not None and off["exposed_s"] > OFFLOAD_WARN_SHARE * e.step_time_s:
        out.append(
            f"CPU offload copies stall the compute stream {off['exposed_s']:,.2f} s of the "
            f"{e.step_time_s:,.2f} s step: the {off['host_link_gb_per_s']:g} GB/s host link "
            f"cannot keep up with {off['layers']} layers (offload fewer)"
        )
    hbm = cluster.gpu.hbm_gib
    if not e.memory_validated:
        out.append(
            "memory figure not validated: no measured run covers this combination of "
            "framework, recompute mode, interleaving and MoE; leave HBM spare beyond the peak"
        )
    headroom = (hbm - e.peak_memory_gib) / hbm
    if headroom < HEADROOM_WARN_SHARE:
        out.append(
            f"memory headroom {headroom:.1%} of HBM (peak {e.peak_memory_gib:.1f} of "
            f"{hbm:.0f} GiB; below 5%)"
        )
    return out


def solver_warnings(result: PlanResult) -> list[str]:
    s = result.solver
    clock = []
    if s.stopped_by == "time_limit":
        clock = [
            (
                "the wall-clock time limit stopped the search before its work limit (a busy or "
                "slow machine, or --no-deterministic): a rerun may return other plans; a larger "
                "--time-limit or a smaller --work-limit makes the answer repeat"
            )
        ]
    if s.gap is not None and s.gap > 0:
        # A gap that rounds to 0.00% still leaves the ranking unproved: say how small it is.
        pct = f"{s.gap:.2%}" if s.gap >= 5e-5 else "< 0.01%"
        gap = f"search stopped with a {pct} gap (status {s.status})"
        return [f"{gap}: a plan up to {pct} faster may exist", *clock]
    out = list(clock)
    if s.num_unproved_partitions:
        out.append(
            f"{s.num_unproved_partitions} of {s.num_partition_models} stage-partition models "
            f"stopped at their work limit before a proof: their layouts' splits may not be the best"
        )
    if s.status == "STOPPED" and s.best_bound is not None and len(out) == len(clock):
        out.append(
            f"search stopped before proving the ranking: the smallest bound left open "
            f"({s.best_bound:.4g}) is not below #1's ({s.objective:.4g}), so no unscored plan "
            "beats #1, but the plans below it are ranked among those scored only"
        )
    elif s.status != "PROVED" and len(out) == len(clock):
        out.append(f"search status {s.status}: the best plan is not proven optimal")
    return out


def attention_warnings(result: PlanResult) -> list[str]:
    """What the plan's framework can do with the model's sliding-window layers
    (FrameworkProfile.sliding_window): nothing (the export refuses), or only through a recipe."""
    m = result.model
    if m.sliding_window is None or result.framework is None:
        return []
    p = framework.profile(result.framework)
    layers = len(windowed_layers(m))
    what = f"sliding-window attention ({m.sliding_window} tokens on {layers} of {m.num_layers} layers)"
    if not p.sliding_window:
        return [f"{p.name} has no option for {what}: the plan is priced with the window, the "
                f"{p.name} export refuses the model"]
    if p.name == "torchtitan":
        return [f"{p.name} builds {what} {p.sliding_window}: the export refuses other models"]
    return []


def warnings(result: PlanResult) -> list[str]:
    return (
        plan_warnings(result.cluster, result.best)
        + workload_warnings(result)
        + attention_warnings(result)
        + batch_hints(result)
        + solver_warnings(result)
    )


def _odd_part(n: int) -> int:
    while n % 2 == 0:
        n //= 2
    return n


def batch_hints(result: PlanResult) -> list[str]:
    """Issue 28: say when the global batch, not the hardware, shapes the plan, and name a batch
    that would not. (1) Fewer sequences than NVLink domains: a model replica cannot stay inside
    one domain even at micro-batch 1, so TP/CP/PP groups must cross the scale-out network.
    (2) An odd factor of the GPU count the batch lacks (576 GPUs, batch 512: 9) must be taken by
    TP, PP or CP however small the model; the smallest multiple of the factor x the shared
    power of two at or above the batch lets DP take it."""
    if result.global_batch_range is not None:
        return []  # each plan picked its own batch
    n, batch = result.cluster.num_gpus, result.workload.global_batch_seqs
    domain = result.cluster.tiers[0].domain_size or n
    out = []
    if domain < n and batch < n // domain:
        out.append(
            f"global batch {batch:,} sequences is fewer than the {n // domain:,} NVLink "
            f"domains of {n:,} GPUs: every model replica must span more than one domain; a "
            f"batch of at least {n // domain:,} sequences (one per domain), or {n:,} (one per "
            "GPU), lets data parallelism use the GPUs instead"
        )
    shared = math.gcd(batch, n)
    odd = _odd_part(n // shared)
    if odd > 1:
        step = odd * shared
        better = -(-batch // step) * step
        lo = result.best.layout
        where = ", ".join(
            f"{a.upper()}{d}" for a, d in (("tp", lo.tp), ("pp", lo.pp), ("cp", lo.cp))
            if d % odd == 0 or math.gcd(d, odd) > 1
        )  # fmt: skip
        here = f" ({where} here)" if where else ""
        out.append(
            f"global batch {batch:,} and {n:,} GPUs share only a factor {shared:,}: the "
            f"remaining odd factor {odd} must be taken by TP, PP or CP{here}; a global batch "
            f"that is a multiple of {step:,} (e.g. {better:,}) lets data parallelism take it"
        )
    return out


def workload_warnings(result: PlanResult) -> list[str]:
    """Statements the workload's opt-ins need next to their speed."""
    h = result.workload.cross_site_sync_every
    if h > 1 and any(t.kind == "wan" for t in result.cluster.tiers):
        text = (
            f"cross-site synchronisation every {h} steps (DiLoCo, arXiv 2311.08105) changes the "
            "optimisation -- sites train apart between synchronisations and an outer optimizer "
            "applies their averaged deltas -- not just the speed; validate convergence"
        )
        return [text]
    return []
