"""Where each parallel group lands on the link tiers, read from the one rank map.

Ranks are numbered with the layout's `order` (innermost axis fastest, as Megatron's `--order`
string and torchtitan's device-mesh order do), and rank r sits on GPU r: consecutive ranks share
the NVLink domain first, then the next tier, and so on. The groups themselves and their spans come
from cost_models.rankmap (Megatron-Core's RankGenerator, dense and expert grids); this module
turns spans into per-tier factors and the slowest tier crossed. Derivation:
docs/cost_model.md#placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .rankmap import Group, decoder_dims, expert_dims, strides
from .rankmap import spans as rank_spans
from .rankmap import tier_domains as rank_tier_domains
from .specs import Axis, Cluster, Layout, LinkTier

# Group kinds that are not one parallel axis (gradient, expert and HSDP groups).
_NOT_AXES = (
    Group.DP_CP,
    Group.EDP,
    Group.ETP,
    Group.DP_SHARD,
    Group.DP_REPLICATE,
    Group.EDP_SHARD,
    Group.EDP_REPLICATE,
)


def axis_strides(layout: Layout, order: tuple[Axis, ...] | None = None) -> dict[str, int]:
    """Rank stride of every axis (and of EP, in Megatron's expert grid) under the layout's order
    (or `order`), read from the grids of cost_models.rankmap."""
    out = strides(decoder_dims(layout, order))
    out["ep"] = strides(expert_dims(layout, order))["ep"]
    return out


def axis_degrees(layout: Layout) -> dict[str, int]:
    return {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp, "pp": layout.pp, "ep": layout.ep}


def tier_domains(cluster: Cluster) -> list[int]:
    """GPUs in one domain of each tier, capped at the cluster size."""
    return list(rank_tier_domains(cluster))


def spans(
    cluster: Cluster,
    layout: Layout,
    order: tuple[Axis, ...] | None = None,
    *,
    moe: bool = True,
) -> dict[str, Sequence[int]]:
    """Span of every group kind the launchers build (cost_models.rankmap.spans): tp, cp, dp, pp,
    the DP x CP gradient group `dp_cp`, ep, and for an MoE model (`moe`) expert-TP `etp` and
    expert-DP `edp`. `order` replaces the layout's own."""
    return rank_spans(cluster, layout, order, moe=moe)


def placement(
    cluster: Cluster, layout: Layout, span: Mapping[str, Sequence[int]] | None = None
) -> dict[str, dict[str, int]]:
    """Factor of each axis's degree on each tier (one axis's factors multiply to its degree);
    `span` (spans of the layout, or an override) saves recomputing them."""
    out: dict[str, dict[str, int]] = {}
    for axis, group in (spans(cluster, layout) if span is None else span).items():
        if axis in _NOT_AXES:
            continue
        factors, inner = {}, 1
        for tier, n in zip(cluster.tiers, group, strict=True):
            factors[tier.name] = max(1, n // inner)
            inner = max(inner, n)
        out[axis] = factors
    return out


def outermost_tier(cluster: Cluster, span: Sequence[int]) -> LinkTier | None:
    """The slowest tier a group crosses (None for a group of one GPU)."""
    if span[-1] <= 1:
        return None
    for tier, n in zip(cluster.tiers, span, strict=True):
        if n >= span[-1]:
            return tier
    return cluster.tiers[-1]
