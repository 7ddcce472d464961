"""The rank map: every parallel group, built exactly as Megatron-Core builds it, and its spans.

One source for pricing and launching. `rank_groups` returns the rank lists that `--emit ranks`
and the launcher exports print; `spans` (what the cost model prices) is the span of exactly those
lists, computed in closed form where the tier domains align with the rank grid and from the
groups themselves where they do not.

Megatron-Core (megatron/core/parallel_state.py, initialize_model_parallel) builds two grids with
`RankGenerator` and `generate_masked_orthogonal_rank_groups` (ported below as `_groups`):

* the decoder grid, order e.g. "tp-cp-ep-dp-pp" with ep size 1: TP, CP, DP, PP and the DP x CP
  gradient group ("dp-cp");
* the expert grid, the same order string with tp -> expert-TP (etp), cp -> 1, ep -> EP and
  dp -> expert-DP = world / (etp * ep * pp): the EP, expert-TP and expert-DP groups.

Our `Layout.order` lists tp, cp, dp, pp; EP sits just after CP, as in both orders Megatron
launches ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp" under --use-tp-pp-dp-mapping, megatron/training/
initialize.py). Megatron asserts that both grids give the same PP groups; `expert_pp_mismatch`
states that rule for any order (with PP last it always holds).

Span of a group kind: for each tier with domains of D consecutive ranks, the fewest members of
one group that share a domain, over every group of the kind and every domain they touch (the worst
group), rounded down to a whole factor of the next tier's span so every tier's factor is whole
(a 72-GPU NVL72 domain or a 3,072-GPU pod need not hold whole groups). The outermost tier holds
the whole group. Derivation: docs/cost_model.md#placement.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import StrEnum

import numpy as np

from .specs import Axis, Cluster, Layout

Dims = tuple[tuple[str, int], ...]  # (axis name, size) per grid dimension, innermost first


class Group(StrEnum):
    """The kinds of process group the launchers build (the keys of `rank_groups` and `spans`).
    A StrEnum: its members are the strings "tp", "dp_cp", ..., so maps keyed by either agree."""

    TP = "tp"
    CP = "cp"
    DP = "dp"
    PP = "pp"
    DP_CP = "dp_cp"  # the gradient group: DP x CP (Megatron's data-parallel-with-CP group)
    EP = "ep"
    ETP = "etp"  # expert tensor parallel (MoE parallel folding)
    EDP = "edp"  # expert data parallel
    DP_SHARD = "dp_shard"  # HSDP's shard group
    DP_REPLICATE = "dp_replicate"  # HSDP's replicas
    EDP_SHARD = "edp_shard"  # HSDP with EP: the experts' shard group (torchtitan's efsdp)
    EDP_REPLICATE = "edp_replicate"  # HSDP with EP: the experts' replicas


LAYER_GROUPS = (Group.TP, Group.CP, Group.EP)
"""The groups one layer's collectives run on: stage.layer_cost reads these spans only."""
DP_GROUPS = (
    Group.DP_CP,
    Group.EDP,
    Group.DP_SHARD,
    Group.DP_REPLICATE,
    Group.EDP_SHARD,
    Group.EDP_REPLICATE,
)
"""The groups the DP gradient and parameter traffic may run on (stage.dp_tier_times_s)."""

# Group kind -> (grid, the grid dimensions its members vary).
DECODER_KINDS = {
    Group.TP: ("tp",),
    Group.CP: ("cp",),
    Group.DP: ("dp",),
    Group.PP: ("pp",),
    Group.DP_CP: ("dp", "cp"),
}
EXPERT_KINDS = {Group.EP: ("ep",), Group.ETP: ("tp",), Group.EDP: ("dp",)}
# HSDP (Layout.dp_shard, torchtitan): dp splits into the inner shard part and the outer replicas,
# as torchtitan's mesh (pp, dp_replicate, dp_shard, cp, tp) nests them.
HSDP_KINDS = {Group.DP_SHARD: ("dp_shard", "cp"), Group.DP_REPLICATE: ("dp_rep",)}
# HSDP with EP (torchtitan): the routed experts are sharded on their own mesh, (pp, dp_replicate,
# efsdp, ep) (distributed/parallel_dims.py build_mesh; models/*/parallelize.py pass
# ["dp_replicate", "efsdp"] to apply_fsdp_to_decoder as edp_mesh): the expert-DP dimension splits
# into efsdp = dp_shard * cp * tp / (ep * etp) inner and the replicas outer.
HSDP_EXPERT_KINDS = {Group.EDP_SHARD: ("edp_shard",), Group.EDP_REPLICATE: ("edp_rep",)}


def hsdp_experts(layout: Layout) -> bool:
    """Whether the experts have HSDP groups of their own: HSDP with EP (at ep 1 they are sharded
    with the rest of their block on the dense mesh, memory.shard_groups)."""
    return layout.dp_shard is not None and layout.ep > 1


DENSE_EXPERT_KINDS = {Group.EP: ("ep",)}
"""A dense model's only expert-grid kind: EP groups of one rank (its layouts keep ep 1, rules)."""


def kind_grids(
    layout: Layout, order: tuple[Axis, ...] | None = None, *, moe: bool = True
) -> list[tuple[Dims, Mapping[Group, tuple[str, ...]]]]:
    """Every grid the launchers number the ranks on, each with the group kinds read off it (the
    grid dimensions a kind's members vary), in the order rank_groups and spans list them:
    Megatron's decoder grid; its expert grid (a dense model: the one-rank EP groups only); with
    HSDP the decoder grid with dp split (hsdp_dims), and with EP also the expert grid with
    expert-DP split (hsdp_expert_dims). The one place that decides which groups a layout has
    (rank_groups, spans, planner.place.pricing read it)."""
    out: list[tuple[Dims, Mapping[Group, tuple[str, ...]]]] = [
        (decoder_dims(layout, order), DECODER_KINDS),
        (expert_dims(layout, order), EXPERT_KINDS if moe else DENSE_EXPERT_KINDS),
    ]
    if layout.dp_shard is not None:
        out.append((hsdp_dims(layout, order), HSDP_KINDS))
        if moe and hsdp_experts(layout):
            out.append((hsdp_expert_dims(layout, order), HSDP_EXPERT_KINDS))
    return out


def hsdp_dims(layout: Layout, order: tuple[Axis, ...] | None = None) -> Dims:
    """The decoder grid with dp split into (dp_shard inner, dp_rep outer)."""
    out: list[tuple[str, int]] = []
    for name, size in decoder_dims(layout, order):
        if name == "dp":
            out += [("dp_shard", layout.shard_dp), ("dp_rep", layout.replicate_dp)]
        else:
            out.append((name, size))
    return tuple(out)


def hsdp_expert_dims(layout: Layout, order: tuple[Axis, ...] | None = None) -> Dims:
    """The expert grid with expert-DP split into (edp_shard inner, edp_rep outer): torchtitan's
    sparse mesh (pp, dp_replicate, efsdp, ep), ep innermost under its order tp-cp-dp-pp."""
    out: list[tuple[str, int]] = []
    for name, size in expert_dims(layout, order):
        if name == "dp":
            rep = layout.replicate_dp
            out += [("edp_shard", size // rep), ("edp_rep", rep)]
        else:
            out.append((name, size))
    return tuple(out)


def decoder_dims(layout: Layout, order: tuple[Axis, ...] | None = None) -> Dims:
    """Megatron's decoder RankGenerator: the order's axes with their degrees."""
    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp}
    return tuple((a.value, sizes[a.value]) for a in (layout.order if order is None else order))


def expert_dims(layout: Layout, order: tuple[Axis, ...] | None = None) -> Dims:
    """Megatron's expert RankGenerator: tp -> etp, cp -> 1 followed by ep, dp -> expert-DP."""
    edp = layout.world_size // (layout.etp * layout.ep * layout.pp)
    out: list[tuple[str, int]] = []
    for a in layout.order if order is None else order:
        if a is Axis.TP:
            out.append(("tp", layout.etp))
        elif a is Axis.CP:
            out += [("cp", 1), ("ep", layout.ep)]
        elif a is Axis.DP:
            out.append(("dp", edp))
        else:
            out.append(("pp", layout.pp))
    return tuple(out)


def strides(dims: Dims) -> dict[str, int]:
    """Rank stride of each grid dimension (the product of the sizes inside it)."""
    out, stride = {}, 1
    for name, size in dims:
        out[name] = stride
        stride *= size
    return out


def expert_pp_mismatch(layout: Layout, order: tuple[Axis, ...] | None = None) -> str | None:
    """Why Megatron-Core refuses this order for an MoE model (None: it builds it).

    initialize_model_parallel asserts decoder and expert grids give the same PP groups; a PP group
    is fixed by its stride, so the PP strides of the two grids must agree.
    """
    if layout.pp == 1:
        return None
    dec, exp = strides(decoder_dims(layout, order))["pp"], strides(expert_dims(layout, order))["pp"]
    if dec == exp:
        return None
    name = "-".join(a.value for a in (layout.order if order is None else order))
    return (
        f"rank order {name}: Megatron-Core needs the same pipeline groups for dense and expert "
        f"layers (PP stride {dec} in the dense grid, {exp} in the expert grid)"
    )


def _groups(dims: Dims, tokens: Sequence[str]) -> list[list[int]]:
    """megatron/core/parallel_state.py generate_masked_orthogonal_rank_groups: group g holds
    inner(decompose(g, unmasked_shape), unmasked_stride) + inner(decompose(i, masked_shape),
    masked_stride) for i in range(group_size). Both inner products are mixed-radix offsets,
    listed once here (`_offsets`) in the same index order."""
    sizes = [s for _, s in dims]
    mask = [name in tokens for name, _ in dims]
    members = _offsets(sizes, mask, True)
    return [[base + x for x in members] for base in _offsets(sizes, mask, False)]


def _offsets(sizes: Sequence[int], mask: Sequence[bool], masked: bool) -> list[int]:
    """inner(decompose(i, shape), stride) for i in range(prod(shape)), over the dimensions with
    mask == masked (the first dimension fastest, as decompose reads them)."""
    out = [0]
    for size, m, stride in zip(sizes, mask, _prefix(sizes), strict=False):
        if m == masked:
            out = [x + c * stride for c in range(size) for x in out]
    return out


def _prefix(sizes: Sequence[int]) -> list[int]:
    out, p = [1], 1
    for s in sizes:
        p *= s
        out.append(p)
    return out


def rank_groups(
    layout: Layout, *, moe: bool = True, order: tuple[Axis, ...] | None = None
) -> dict[str, list[list[int]]]:
    """Rank lists of every group kind (each kind's groups partition the ranks), sorted.

    `moe` False (a dense model): no expert groups beyond the trivial EP groups of one rank.
    """
    return {
        kind: sorted(_groups(dims, tokens))
        for dims, kinds in kind_grids(layout, order, moe=moe)
        for kind, tokens in kinds.items()
    }


def tier_domains(cluster: Cluster) -> tuple[int, ...]:
    """GPUs of the job in one domain of each tier: the ideal allocation the search assumes.

    Where a tier's domain divides the job (8-GPU DGX nodes, power-of-two pods) this is the domain,
    capped at the job size. Where it does not (256 GPUs over 72-GPU NVL72 racks, 16,384 GPUs over
    3,072-GPU pods) the job is spread evenly: d GPUs in each of n / d domains, d the largest
    divisor of the job size <= the domain size that holds whole inner domains (whole nodes first).
    Slurm allocates that way with the block topology's segment size (`--segment`, topology.conf
    BlockSizes; slurm.conf(5), topology.conf(5)), and it is what NVL72 training jobs use (64 of
    72 GPUs per rack: 16 of the 18 compute trays, the rest kept as spares). Numbering ranks over
    partial domains instead (72, 72, 72, 40) would split groups that an even spread keeps whole.
    A real, uneven allocation is priced by planner.place from its own hosts and switches.
    """
    n = cluster.num_gpus
    out: list[int] = []
    inner = min(cluster.gpus_per_node, n)
    for tier in cluster.tiers:
        domain = min(tier.domain_size or n, n)
        if n % domain:
            fits = [d for d in _divisors(n) if d <= domain and d % inner == 0]
            domain = max(fits) if fits else domain
        out.append(domain)
        inner = max(inner, domain) if domain % inner == 0 else inner
    return tuple(out)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in small]


def span_of_groups(groups: Sequence[Sequence[int]], domains: Sequence[int]) -> tuple[int, ...]:
    """The rule of the module docstring applied to explicit rank lists (the reference): per
    tier, the fewest ranks any one group has in any one domain it touches. Counted over all
    groups at once (each (group, domain) pair is one key), since a 6,144-GPU map has thousands
    of groups per kind."""
    ranks = np.asarray(groups, dtype=np.int64)  # (groups, degree)
    group_key = np.arange(len(ranks), dtype=np.int64)[:, None] * (int(ranks.max()) + 1)
    raw = [int(np.unique(group_key + ranks // d, return_counts=True)[1].min()) for d in domains]
    return _whole(raw, len(groups[0]))


def _whole(raw: list[int], degree: int) -> tuple[int, ...]:
    """Outermost tier: the whole group; inward, the largest divisor of the outer span <= raw."""
    out = [degree] * len(raw)
    for t in range(len(raw) - 2, -1, -1):
        out[t] = _largest_divisor_at_most(out[t + 1], raw[t])
    return tuple(out)


@functools.cache
def _largest_divisor_at_most(n: int, cap: int) -> int:
    cap = min(n, max(1, cap))
    if n % cap == 0:
        return cap
    best = 1
    for d in range(1, math.isqrt(n) + 1):  # O(sqrt n): degrees reach 131,072
        if n % d == 0:
            best = max([best] + [x for x in (d, n // d) if x <= cap])
    return best


@functools.lru_cache(maxsize=1 << 16)
def _kind_span(dims: Dims, tokens: tuple[str, ...], domains: tuple[int, ...]) -> tuple[int, ...]:
    sizes = [s for _, s in dims]
    mask = [name in tokens for name, _ in dims]
    degree = math.prod(s for s, m in zip(sizes, mask, strict=True) if m)
    if degree == 1:
        return (1,) * len(domains)
    return _whole([_fewest_together(sizes, mask, d) for d in domains], degree)


def _fewest_together(sizes: list[int], mask: list[bool], domain: int) -> int:
    """Fewest members of one group in one domain of `domain` consecutive ranks (all groups)."""
    prefix = _prefix(sizes)
    world = prefix[-1]
    if domain >= world:
        return math.prod(s for s, m in zip(sizes, mask, strict=True) if m)
    for j, size in enumerate(sizes):
        if domain % prefix[j] == 0 and prefix[j + 1] % domain == 0:
            # Aligned: a domain holds dimensions 0..j-1 whole and a block of q of dimension j,
            # the same for every group (rank // domain reads only dims > j and coord_j // q).
            q = domain // prefix[j]
            inside = math.prod(s for s, m in zip(sizes[:j], mask[:j], strict=True) if m)
            return inside * (q if mask[j] else 1)
    # Not aligned: a group's count per domain depends only on its first rank modulo the domain,
    # so each residue class of group offsets is counted once.
    members = _offsets(sizes, mask, True)
    residues = {0}
    for s, m, stride in zip(sizes, mask, prefix, strict=False):
        if not m:
            residues = {(r + c * stride) % domain for r in residues for c in range(s)}
    return min(min(Counter((r + x) // domain for x in members).values()) for r in residues)


@functools.lru_cache(maxsize=1 << 16)
def _spans(
    tp: int,
    cp: int,
    dp: int,
    pp: int,
    ep: int,
    etp: int,
    order: tuple[Axis, ...],
    domains: tuple[int, ...],
    moe: bool,
    dp_shard: int | None = None,
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    layout = Layout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, etp=etp, order=order)
    if dp_shard is not None:
        layout = layout.with_update({"dp_shard": dp_shard})
    return tuple(
        (kind, _kind_span(dims, tokens, domains))
        for dims, kinds in kind_grids(layout, moe=moe)
        for kind, tokens in kinds.items()
    )


def spans(
    cluster: Cluster, layout: Layout, order: tuple[Axis, ...] | None = None, *, moe: bool = True
) -> dict[str, tuple[int, ...]]:
    """Span (members inside one domain of each tier) of every group kind `rank_groups` builds.

    Keys: tp, cp, dp, pp, dp_cp, ep, with `moe` etp and edp, with HSDP (Layout.dp_shard)
    dp_shard and dp_replicate, and with HSDP, EP and `moe` edp_shard and edp_replicate.
    Memoized by what it reads:
    the degrees, ep, etp, the order and the tier domains.
    """
    found = _spans(
        layout.tp,
        layout.cp,
        layout.dp,
        layout.pp,
        layout.ep,
        layout.etp,
        layout.order if order is None else order,
        tier_domains(cluster),
        moe,
        layout.dp_shard,
    )
    return dict(found)
