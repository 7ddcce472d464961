"""Alpha-beta time of the collectives on the tiers a group spans.

A collective over a group that spans several tiers runs hierarchically (NCCL's rings and trees
carry the same bytes per link): at tier j the group has f_j = n_j / n_{j-1} members per inner
domain, each GPU moves its share S / n_{j-1} over that tier at the tier's achievable bus bandwidth
(line rate x efficiency / oversubscription). Ring factors: all-reduce 2(f-1)/f, reduce-scatter and
all-gather (f-1)/f (Thakur, Rabenseifner & Gropp 2005; nccl-tests PERFORMANCE.md bus bandwidth).
Latency: alpha per tree level, log2(f) levels. Derivations: docs/cost_model.md#communication.
"""

from __future__ import annotations

import math

from .specs import LinkTier


def ring_factor(n: int, kind: str) -> float:
    """Bytes on the wire per byte of payload, per GPU, for a ring collective over n GPUs."""
    if n <= 1:
        return 0.0
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    raise ValueError(f"unknown collective {kind!r}")


def effective_bandwidth_bytes_per_s(tier: LinkTier) -> float:
    return tier.bandwidth_gb_per_s * 1e9 * tier.efficiency / tier.oversubscription


def _latency_s(tier: LinkTier, f: int) -> float:
    return tier.latency_us * 1e-6 * math.ceil(math.log2(f)) if f > 1 else 0.0


def collective_time_s(
    kind: str, payload_bytes: float, span: list[int], tiers: tuple[LinkTier, ...]
) -> float:
    """Hierarchical ring all-reduce / all-gather / reduce-scatter of payload_bytes per GPU."""
    total, inner = 0.0, 1
    for tier, n in zip(tiers, span, strict=True):
        f = max(1, n // inner)
        if f > 1:
            share = payload_bytes / inner
            total += ring_factor(f, kind) * share / fabric_bandwidth_bytes_per_s(tier, f)
            total += _latency_s(tier, f) * (2 if kind == "all_reduce" else 1)
        inner = max(inner, n)
    return total


def all_to_all_time_s(payload_bytes: float, span: list[int], tiers: tuple[LinkTier, ...]) -> float:
    """All-to-all of payload_bytes per GPU: each tier carries the bytes leaving its inner domain.

    Tiers run concurrently, so the slowest tier sets the time (max over tiers).
    """
    n = span[-1]
    if n <= 1:
        return 0.0
    slowest, inner, latency = 0.0, 1, 0.0
    for tier, members in zip(tiers, span, strict=True):
        if members > inner:
            leaving = payload_bytes * (n - inner) / n
            busy = leaving / fabric_bandwidth_bytes_per_s(tier, members // inner, ring=False)
            slowest = max(slowest, busy + cross_rail_forward_s(leaving, tier, tiers[0]))
            latency = max(latency, tier.latency_us * 1e-6)
        inner = max(inner, members)
    return slowest + latency * math.ceil(math.log2(n))


def p2p_time_s(payload_bytes: float, tier: LinkTier | None) -> float:
    """One point-to-point send of payload_bytes across `tier` (0 when there is no peer)."""
    if tier is None or payload_bytes <= 0:
        return 0.0
    return tier.latency_us * 1e-6 + payload_bytes / effective_bandwidth_bytes_per_s(tier)


# ------------------------------------------------------------------------------ fabric kinds
# How each tier kind (specs.TierKind) turns line rate into the bandwidth a collective sees.
# docs/networks.md derives each rule and gives the sources of the preset figures.


def fabric_bandwidth_bytes_per_s(tier: LinkTier, members: int, *, ring: bool = True) -> float:
    """Per-GPU bus bandwidth of `tier` for a ring (or an all-to-all) over `members` inner domains.

    `switch`, `nvlink`, `rail`, `plane`, `dragonfly` and `wan` tiers: line rate x efficiency /
    oversubscription (a taper above the leaf, or a dragonfly's global links, divide the share
    each GPU gets). `torus`: a ring that closes over the whole dimension (members == dim_size)
    uses the wrap-around link and both directions of every link, so it moves twice the bytes of
    a ring embedded in an open line segment of the dimension (members < dim_size), which must
    traverse each link once per direction (Google TPU v4 paper, Jouppi et al. 2023, sec. 2).
    `dragonfly`: the tier's bandwidth is the group's global links shared by its GPUs. Uniform
    all-to-all traffic spreads over all global links (minimal routing); a ring sends every byte
    to one neighbouring group, which adaptive routing spreads over the other groups by Valiant
    detours that cross two global links, halving the rate (Kim et al., ISCA 2008, sec. 4.2).
    """
    base = effective_bandwidth_bytes_per_s(tier)
    if tier.kind == "dragonfly" and ring and members > 1:
        return 0.5 * base
    if tier.kind == "torus" and tier.dim_size is not None and members >= tier.dim_size > 2:
        return 2.0 * base
    return base


def cross_rail_forward_s(leaving_bytes: float, tier: LinkTier, inner: LinkTier) -> float:
    """Extra time an all-to-all spends forwarding cross-rail bytes over NVLink first.

    On a rail-optimized or multi-plane tier with R rails (planes), a GPU's NIC reaches only the
    GPUs on its own rail; (R - 1) / R of the bytes bound for other rails hop over NVLink to the
    GPU on the right rail (NCCL PXN; DeepSeek-V3 sec. 3.2.1 routes IB then NVLink). Ring
    collectives keep every hop on one rail, so they pay nothing.
    """
    if tier.kind not in ("rail", "plane") or tier.rails <= 1 or inner is tier:
        return 0.0
    forwarded = leaving_bytes * (tier.rails - 1) / tier.rails
    return forwarded / effective_bandwidth_bytes_per_s(inner)
