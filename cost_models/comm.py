"""Alpha-beta time of the collectives on the tiers a group spans.

A collective over a group that spans several tiers runs hierarchically (NCCL's rings and trees
carry the same bytes per link): at tier j the group has f_j = n_j / n_{j-1} members per inner
domain, each GPU moves its share S / n_{j-1} over that tier at the tier's achievable bus bandwidth
(line rate x efficiency / oversubscription). Ring factors: all-reduce 2(f-1)/f, reduce-scatter and
all-gather (f-1)/f (Thakur, Rabenseifner & Gropp 2005; nccl-tests PERFORMANCE.md bus bandwidth).
Per phase the cheapest algorithm NCCL's tuner may pick (ring with a latency step per rank, tree,
PAT, NVLS, SHARP; phase_s). MoE exchanges put each tier's bytes on it concurrently
(moe_tier_copies, tier_loads_time_s); tier_loads_busy_s and collective_tier_s give the busy time
of every tier for the capacity check in estimate(). Derivations: docs/networks.md and
docs/cost_model.md#communication.
"""

from __future__ import annotations

import math

from .specs import LinkTier
from .units import GB, US


def ring_factor(n: int, kind: str) -> float:
    """Bytes on the wire per byte of payload, per GPU, for a ring collective over n GPUs."""
    if n <= 1:
        return 0.0
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    raise ValueError(f"unknown collective {kind!r}")


TECHNOLOGY_LOAD_FACTOR: dict[str | None, float] = {
    None: 1.0,
    "infiniband": 1.0,
    "roce": 1.0,
    "spectrum-x": 1.0,
    "roce-untuned": 0.60 / 0.95,
}
"""Bandwidth a scale-out technology keeps under many large AI flows, relative to the calibrated
(InfiniBand, adaptive routing) efficiency. InfiniBand's adaptive routing spreads flows over the
equal-cost uplinks; Meta's tuned RoCE (SIGCOMM'24, "RDMA over Ethernet for Distributed AI
Training at Meta Scale": enhanced ECMP with QP scaling and collective-aware routing) runs its
24K-GPU jobs as fast as its InfiniBand cluster; Spectrum-X keeps ~95 % effective throughput
where standard Ethernet's ECMP hashing collides flows down to ~60 % (NVIDIA, xAI Colossus
press release, Oct 2024): untuned ECMP RoCE = 0.60 / 0.95 of the others."""


def effective_bandwidth_bytes_per_s(tier: LinkTier) -> float:
    load = TECHNOLOGY_LOAD_FACTOR[tier.technology]
    return tier.bandwidth_gb_per_s * GB * tier.efficiency * load / tier.oversubscription


# NCCL's tuner (src/graph/tuning.cc, ncclTopoTuneModel), as constants:
TREE_BUS_FACTOR = 0.92
"""Tree all-reduce bus bandwidth / ring's ("busBw * .92"); its algorithm bandwidth is half the
bus bandwidth ("ratio *= .5"), so a tree moves 2 / 0.92 bytes per payload byte."""
PAT_BUS_FACTOR = 0.75
"""PAT all-gather / reduce-scatter bus bandwidth / ring's ("if (a == NCCL_ALGO_PAT) busBw *= .75");
legal only with one GPU per node (ncclPatEnable: nNodes == nRanks)."""
PAT_LINEAR_LATENCY_S = 2.8e-6
"""PAT latency: log2(nodes) x inter-node latency / 3.5 + nRanks x 2.8 us ("Still a linear part")."""
PROTOCOLS = ("ll", "ll128", "simple")
HW_LATENCY_US: dict[tuple[str, str], tuple[float, float, float]] = {
    ("nvlink", "ring"): (0.6, 1.9, 3.4),
    ("net", "ring"): (2.7, 4.0, 14.0),
    ("nvlink", "tree"): (0.6, 1.25, 4.0),
    ("net", "tree"): (5.0, 8.5, 14.0),
}
"""Per-step latency (us) of LL, LL128 and Simple: tuning.cc ncclTunerConstantsDefaults
hwLatencies (NVLINK and NET rows, Tree and Ring). The tiers' latency_us is the Simple step; a
lighter protocol saves NCCL's Simple - LL(128) difference per step, never going below NCCL's
own LL(128) figure (so a WAN's milliseconds of flight stay)."""
PROTOCOL_BUS_FACTOR: dict[str, tuple[float, float, float]] = {
    "ring": (0.5, 0.92, 1.0),
    "tree": (1 / 3.8, 120 / 128, 1.0),
}
"""Bus bandwidth of LL, LL128, Simple / Simple's: ring LL "busBw * .5", LL128 "busBw * 0.92";
tree LL "busBw * 1.0 / 3.8", LL128 "120.0 / 128.0" (tuning.cc, "Various model refinements")."""
NET_OVERHEAD_US = (1.0, 1.0, 3.0)
"""Floor of an intra-node step of a ring that crosses nodes: getNetOverhead() = 1 us (x86 Intel,
Arm), x3 for Simple ("Inter-node rings still have to launch nsteps * net overhead")."""


def step_latency_s(tier: LinkTier, algo: str, proto: int, *, net: bool) -> float:
    """One step of `algo` (ring / tree) on `tier` under protocol PROTOCOLS[proto]."""
    if proto == 2:
        return tier.latency_us * US
    hw = HW_LATENCY_US[("net" if net else "nvlink", algo)]
    return max(hw[proto], tier.latency_us - (hw[2] - hw[proto])) * US


def phase_s(
    kind: str,
    share_bytes: float,
    f: int,
    tier: LinkTier,
    *,
    one_per_node: bool,
    net: bool = True,
    ring: bool = True,
) -> float:
    """One collective phase over f members of `tier` on share_bytes per GPU: the cheapest of the
    algorithms and protocols NCCL may pick there (tier.algorithms restricts them), per size.

    Latency alpha = tier.latency_us per Simple step (step_latency_s for LL / LL128). NCCL
    tuning.cc: ring takes 2(f-1) steps for an all-reduce and f-1 for all-gather /
    reduce-scatter (nsteps); tree all-reduce 2 log2(f) levels at 2 / 0.92 bytes per byte; PAT
    (one GPU per node) log2(f) alpha / 3.5 + f x 2.8 us at 0.75 of the bandwidth. In-switch
    reduction -- NVLS on an NVSwitch tier with `nvls`, SHARP on a switch tier with `sharp` --
    sends each byte up once and receives the result once (all-reduce: the payload once instead
    of 2(f-1)/f times, one step up and one down); all-gather / reduce-scatter move ring bytes in
    one step (NCCL >= 2.20 CollNet / SHARP 3.5.2 offload them, tuning.cc: CollNetDirect for
    ncclFuncAllGather / ncclFuncReduceScatter). `ring=False` leaves the ring out (the flat ring
    across tiers is priced by collective_tier_s). `net`: the tier is a network tier (NCCL's NET
    latencies), not the NVLink domain.
    """
    if f <= 1:
        return 0.0
    bw = fabric_bandwidth_bytes_per_s(tier, f)
    a = tier.latency_us * 1e-6
    allowed = tier.algorithms
    out: list[float] = []

    def offer(name: str, seconds: float) -> None:
        if allowed is None or name in allowed:
            out.append(seconds)

    steps = 2 * (f - 1) if kind == "all_reduce" else f - 1
    rf = ring_factor(f, kind)
    ring_s = min(
        rf * share_bytes / (PROTOCOL_BUS_FACTOR["ring"][p] * bw)
        + steps * step_latency_s(tier, "ring", p, net=net)
        for p in range(3)
    )
    if ring:
        offer("ring", ring_s)
    levels = math.ceil(math.log2(f))
    if kind == "all_reduce":
        for p in range(3):
            bus = TREE_BUS_FACTOR * PROTOCOL_BUS_FACTOR["tree"][p] * bw
            lat = 2 * levels * step_latency_s(tier, "tree", p, net=net)
            offer("tree", 2 * share_bytes / bus + lat)
    elif one_per_node:
        pat_lat = levels * a / 3.5 + f * PAT_LINEAR_LATENCY_S
        offer("pat", rf * share_bytes / (PAT_BUS_FACTOR * bw) + pat_lat)
    payload = share_bytes if kind == "all_reduce" else rf * share_bytes
    if tier.nvls:
        offer("nvls", payload / bw + 2 * a)
    if tier.sharp:
        offer("sharp", payload / bw + 2 * a)
    if out:
        return min(out)
    return ring_s if ring else math.inf  # nothing legal allowed: NCCL falls back to ring


def collective_time_s(
    kind: str,
    payload_bytes: float,
    span: list[int],
    tiers: tuple[LinkTier, ...],
    buckets: int = 1,
) -> float:
    """Hierarchical all-reduce / all-gather / reduce-scatter of payload_bytes per GPU."""
    return sum(collective_tier_s(kind, payload_bytes, span, tiers, buckets))


def collective_tier_s(
    kind: str,
    payload_bytes: float,
    span: list[int],
    tiers: tuple[LinkTier, ...],
    buckets: int = 1,
) -> list[float]:
    """collective_time_s split by tier: the seconds each tier keeps busy.

    At tier j the group has f_j = n_j / n_(j-1) members per inner domain; each GPU moves its
    share S / n_(j-1) over that tier. `buckets`: the payload goes as that many equal
    collectives (gradient buckets), each paying its own latency and choosing its algorithm by
    its own size. Two ways, the cheaper taken per bucket as NCCL's tuner does:

    - NCCL's ring is one flat ring over all n ranks (tuning.cc: nsteps = n - 1, of which
      nNodes - 1 inter-node; 2x for all-reduce): a ring step at tier j is paid once per
      (j-1)-domain the ring leaves, n / n_(j-1) - n / n_j steps (the outermost tier crossed
      n / n_(j-1) - 1), so an all-gather over 2,048 nodes of 8 GPUs pays 14,336 NVLink steps
      (at least the 1 us network overhead each) and 2,047 network steps, one protocol (LL,
      LL128, Simple) for the whole ring (flat_ring_tier_s);
    - the other algorithms (tree, PAT, NVLS, SHARP) phase by phase (phase_s without the ring;
      the phase inside the NVLink domain may ring, as NCCL's tree chains and CollNet do).
    Torus tiers keep the per-dimension phases (rings along each dimension, not NCCL)."""
    if any(t.kind == "torus" for t in tiers):
        return _per_phase_tier_s(kind, payload_bytes, span, tiers, buckets, ring=True)
    share = payload_bytes / buckets
    ring = _flat_ring_tier_s(kind, share, span, tiers)
    other = _per_phase_tier_s(kind, share, span, tiers, 1, ring=False)
    best = ring if sum(ring) <= sum(other) else other
    return [buckets * x for x in best]


def _flat_ring_tier_s(
    kind: str, share_bytes: float, span: list[int], tiers: tuple[LinkTier, ...]
) -> list[float]:
    """The flat ring's seconds per tier, under the cheapest protocol for the whole ring."""
    n = span[-1]
    spanned = [j for j in range(len(tiers)) if span[j] > (span[j - 1] if j else 1)]
    if n <= 1 or not spanned:
        return [0.0] * len(tiers)
    if any(tiers[j].algorithms is not None and "ring" not in tiers[j].algorithms for j in spanned):
        return [math.inf] * len(tiers)
    multi_node = span[0] < n
    repeat = 2 if kind == "all_reduce" else 1
    best: list[float] | None = None
    for p in range(3):
        out, inner = [0.0] * len(tiers), 1
        for j in spanned:
            f, tier = span[j] // inner, tiers[j]
            steps = n // inner - (1 if j == spanned[-1] else n // span[j])
            lat = step_latency_s(tier, "ring", p, net=j > 0)
            if j == 0 and multi_node:
                lat = max(lat, NET_OVERHEAD_US[p] * US)
            bw = PROTOCOL_BUS_FACTOR["ring"][p] * fabric_bandwidth_bytes_per_s(tier, f)
            out[j] = ring_factor(f, kind) * share_bytes / inner / bw + repeat * steps * lat
            inner = span[j]
        if best is None or sum(out) < sum(best):
            best = out
    assert best is not None
    return best


def _per_phase_tier_s(
    kind: str,
    payload_bytes: float,
    span: list[int],
    tiers: tuple[LinkTier, ...],
    buckets: int,
    *,
    ring: bool,
) -> list[float]:
    out, inner = [0.0] * len(tiers), 1
    torus_dims = _torus_dims_spanned(span, tiers)
    for j, (tier, n) in enumerate(zip(tiers, span, strict=True)):
        f = max(1, n // inner)
        if f > 1:
            share = payload_bytes / inner / buckets
            if tier.kind == "torus" and torus_dims > 1:
                # Multi-dimensional collective on a torus: the payload is cut into one part per
                # dimension and each part walks the dimensions in a rotated order, so every
                # dimension's links work at once on 1/d of the bytes (TPU v4, Jouppi et al. 2023
                # sec. 2: collectives use all six links; Sack & Gropp 2015, multi-dimensional
                # all-reduce). Each part still pays every phase's latency.
                share /= torus_dims
            t = phase_s(
                kind, share, f, tier, one_per_node=inner == 1 and j > 0, net=j > 0,
                ring=ring or j == 0,
            )
            out[j] += buckets * t
        inner = max(inner, n)
    return out


def _torus_dims_spanned(span: list[int], tiers: tuple[LinkTier, ...]) -> int:
    """Torus dimensions a group spans (tiers of kind torus with more than one member)."""
    count, inner = 0, 1
    for tier, n in zip(tiers, span, strict=True):
        if tier.kind == "torus" and n // inner > 1:
            count += 1
        inner = max(inner, n)
    return count


def all_to_all_time_s(payload_bytes: float, span: list[int], tiers: tuple[LinkTier, ...]) -> float:
    """All-to-all of payload_bytes per GPU: each tier carries the bytes leaving its inner domain.

    Tiers run concurrently, so the slowest tier sets the time (max over tiers); bytes a rail or
    plane tier forwards over NVLink load the NVLink tier beside the network, not after it
    (`tier_loads_time_s`).
    """
    if span[-1] <= 1:
        return 0.0
    return tier_loads_time_s(leaving_loads(payload_bytes, span, tiers), span, tiers)


def leaving_loads(per_gpu: float, span: list[int], tiers: tuple[LinkTier, ...]) -> list[float]:
    """Load on each tier of a uniform all-to-all of `per_gpu` (bytes or copies) over the group:
    tier j carries the share leaving its inner domain, per_gpu (n - n_{j-1}) / n, and on a
    rail/plane tier the cross-rail part of it also crosses NVLink (cross_rail_bytes)."""
    n = span[-1]
    loads = [0.0] * len(span)
    inner = 1
    for j, members in enumerate(span):
        if members > inner:
            loads[j] += per_gpu * (n - inner) / n
            if j > 0:
                loads[0] += cross_rail_bytes(loads[j], tiers[j])
        inner = max(inner, members)
    return loads


def tier_loads_time_s(loads: list[float], span: list[int], tiers: tuple[LinkTier, ...]) -> float:
    """Time of an exchange that puts loads[j] bytes per GPU on tier j, all tiers at once.

    Every tier streams its own bytes concurrently (NVLink beside the NICs: DeepEP's normal
    kernels and NCCL PXN pipeline the NVLink hop with the RDMA transfer), so the busiest tier
    sets the time; latency alpha per level of a log2(n) exchange on the slowest tier crossed.
    """
    n = span[-1]
    if n <= 1:
        return 0.0
    latency, inner = 0.0, 1
    for tier, members in zip(tiers, span, strict=True):
        if members > inner:
            latency = max(latency, tier.latency_us * 1e-6)
        inner = max(inner, members)
    return max(tier_loads_busy_s(loads, span, tiers)) + latency * math.ceil(math.log2(n))


def tier_loads_busy_s(
    loads: list[float], span: list[int], tiers: tuple[LinkTier, ...]
) -> list[float]:
    """Seconds each tier streams its loads[j] bytes per GPU (the busy time of that tier)."""
    out, inner = [0.0] * len(tiers), 1
    for j, (tier, members) in enumerate(zip(tiers, span, strict=True)):
        if loads[j] > 0:
            f = max(1, members // inner)
            out[j] = loads[j] / fabric_bandwidth_bytes_per_s(tier, f, ring=False)
            if tier.kind == "torus" and f > 2:
                out[j] = max(out[j], torus_bisection_s(loads[j], f, tier))
        inner = max(inner, members)
    return out


def torus_bisection_s(leaving_bytes: float, f: int, tier: LinkTier) -> float:
    """Lower bound of a uniform all-to-all along one torus dimension of f positions.

    Each position sends `leaving_bytes` to the others; half of all of it, f x leaving / 4 per
    direction, crosses the dimension's bisection. A ring closed by its wrap-around link
    (f >= dim_size) is cut at two links, an open line at one, each `bandwidth_gb_per_s` per
    direction: f x leaving / (8 B) or / (4 B) (Dally & Towles, "Principles and Practices of
    Interconnection Networks", 2004, sec. 3.3: bisection bound of a torus). Along a 16-chip ring
    that is 4x the time of the per-chip injection bound.
    """
    closed = tier.dim_size is not None and f >= tier.dim_size > 2
    return f * leaving_bytes / ((8 if closed else 4) * effective_bandwidth_bytes_per_s(tier))


def expected_distinct(bins: int, per_bin: int, picks: int) -> float:
    """Expected number of bins hit when `picks` of bins x per_bin items are drawn without
    replacement (hypergeometric: 1 - P(a bin gets none) = 1 - C(E - b, k) / C(E, k))."""
    total = bins * per_bin
    picks = min(picks, total)
    miss = 1.0
    for i in range(picks):
        miss *= max(0.0, (total - per_bin - i) / (total - i))
    return bins * (1.0 - miss)


def moe_tier_copies(
    span: list[int],
    top_k: int,
    num_experts: int,
    *,
    dedup: bool,
    max_nodes: int | None,
    tiers: tuple[LinkTier, ...],
) -> list[float]:
    """Copies of one token each tier carries per MoE exchange (dispatch or combine), per GPU.

    Experts sit evenly on the n GPUs of the EP group; `node` is the innermost tier's domain
    (the NVLink domain), with n0 = span[0] EP members per node and N = n / n0 nodes.

    - Per-expert sending (dedup False; Megatron-Core MoEAlltoAllTokenDispatcher permutes one row
      per (token, expert) pair, token_dispatcher.py): tier j carries k (n - n_{j-1}) / n copies;
      on a rail/plane tier the (R-1)/R of them bound for another rail also cross NVLink (PXN).
    - Per-node de-duplication (dedup True; DeepEP normal kernels, docs/legacy.md "Normal
      kernels with NVLink and RDMA forwarding"): a token crosses the scale-out network once per
      destination node, to the GPU of the same local rank (same rail), which forwards it over
      NVLink to each GPU holding one of its experts. Node-limited routing (DeepSeek-V3 sec.
      2.1.2) restricts the k experts to M = max_nodes nodes, so the distinct nodes reached are
      D = expected_distinct(min(M, N), experts per node, k) and the distinct GPUs
      G = expected_distinct(min(M, N) n0, experts per GPU, k). Scale-out tier j carries
      D (N - N_{j-1}) / N copies (N_{j-1}: nodes inside tier j-1's domain); NVLink carries
      G (n0 - 1) / n0 (every GPU copy but the one landing on the receiving GPU itself).
    """
    n = span[-1]
    copies = [0.0] * len(span)
    if n <= 1:
        return copies
    if not dedup:
        return leaving_loads(top_k, span, tiers)
    n0 = span[0]
    nodes = n // n0
    reach = nodes if max_nodes is None else min(max_nodes, nodes)
    per_gpu = max(1, num_experts // n)
    distinct_nodes = expected_distinct(reach, per_gpu * n0, top_k)
    distinct_gpus = expected_distinct(reach * n0, per_gpu, top_k)
    copies[0] = distinct_gpus * (n0 - 1) / n0
    inner_nodes = 1
    for j in range(1, len(span)):
        members_nodes = span[j] // n0
        if members_nodes > inner_nodes:
            copies[j] = distinct_nodes * (nodes - inner_nodes) / nodes
        inner_nodes = max(inner_nodes, members_nodes)
    return copies


FLEX_WIRE_FRACTION: dict[str, dict[int, tuple[float, float]]] = {
    # DeepEP V1 normal kernels, docs/legacy.md "Normal kernels with NVLink and RDMA forwarding"
    # (H800, CX7 400 Gb/s = 50 GB/s; 4096 tokens, hidden 7168, top-4 groups, top-8 of 256
    # experts, FP8 dispatch, BF16 combine): dispatch / combine 43 / 43 (EP16), 58 / 57 (EP32),
    # 51 / 50 GB/s (EP64), times the remote share of the distinct nodes 0.5 / 0.75 / 0.875.
    "deepep": {2: (0.4300, 0.4300), 4: (0.8700, 0.8550), 8: (0.8925, 0.8750)},
    # HybridEP, DeepEP hybrid-ep branch docs/README_Hybrid-EP.md "H100 Platform" (CX7 400 Gb/s;
    # 4096 tokens, hidden 7168, top-8 uniform, 8 local experts, 16 SMs as Megatron-Bridge's
    # recipes set moe_hybridep_num_sms, Torch API, BF16 dispatch): dispatch / combine 54.47 /
    # 53.35 (16 ranks), 47.36 / 52.53 (32), 41.24 / 46.57 GB/s (64), times 0.5 / 0.75 / 0.875.
    "hybridep": {2: (0.5447, 0.5335), 4: (0.7104, 0.7880), 8: (0.7217, 0.8150)},
}
"""Measured scale-out rate of each flex back-end's (dispatch, combine) kernels, as a fraction of
the NIC's line rate, by the nodes of the EP group. Both benchmarks report a logical bandwidth
that counts a token once per distinct destination node, the sender's own included (DeepEP
tests/legacy/test_internode.py num_rdma_token_sent; HybridEP tests/utils.py
count_rdma_send_from_routing_map: "we do not set the local node map to zeros"; DeepEP's V2
README: "90 GB/s actually contains local rank traffic"); only the remote share of those nodes
crosses the NIC (expected_distinct over the benchmark's routing), which these fractions keep."""


def flex_wire_fractions(backend: str, nodes: int) -> tuple[float, float]:
    """(dispatch, combine) fraction of line rate a flex back-end's kernels reach across `nodes`
    nodes (FLEX_WIRE_FRACTION at the largest measured node count not above `nodes`)."""
    table = FLEX_WIRE_FRACTION[backend]
    measured = [k for k in table if k <= nodes]
    return table[max(measured)] if measured else table[min(table)]


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


def cross_rail_bytes(leaving_bytes: float, tier: LinkTier) -> float:
    """Bytes an all-to-all forwards over NVLink because they leave on another rail.

    On a rail-optimized or multi-plane tier with R rails (planes), a GPU's NIC reaches only the
    GPUs on its own rail; (R - 1) / R of the bytes bound for other rails hop over NVLink to the
    GPU on the right rail (NCCL PXN; DeepSeek-V3 sec. 3.2.1 routes IB then NVLink). The hop runs
    beside the network transfer (pipelined chunks), so it loads NVLink, not the critical path in
    series: DeepSeek measured MPFT and a single-plane multi-rail fat-tree within 0.1 % on
    all-to-all (ISCA'25, arXiv 2505.09343 sec. 5.1.2). Ring collectives keep every hop on one
    rail, so they pay nothing.
    """
    if tier.kind not in ("rail", "plane") or tier.rails <= 1:
        return 0.0
    return leaving_bytes * (tier.rails - 1) / tier.rails
