"""The rank map of a layout: which GPU holds which (dp, pp, cp, tp, ep) coordinates, and groups.

Every group comes from cost_models.rankmap, the one source the cost model prices from: Megatron-
Core's decoder grid (TP, CP, DP, PP, DP x CP) and expert grid (EP, expert-TP, expert-DP inside one
pipeline stage), ranks numbered with `Layout.order`, innermost axis fastest. Rank r sits on GPU r
and node r // gpus_per_node.
"""

from __future__ import annotations

from typing import Any

from cost_models import rankmap, topology
from cost_models.specs import Cluster, Layout

AXES = ("tp", "cp", "dp", "pp")
MAP_KEYS = ("dp", "pp", "cp", "tp", "ep")


def coordinates(layout: Layout, rank: int) -> dict[str, int]:
    """(tp, cp, dp, pp) coordinates of one rank in the decoder grid, ep in the expert grid."""
    coords = _coords(rankmap.decoder_dims(layout), rank)
    coords["ep"] = _coords(rankmap.expert_dims(layout), rank)["ep"]
    return coords


def _coords(dims: rankmap.Dims, rank: int) -> dict[str, int]:
    out, stride = {}, 1
    for name, size in dims:
        out[name] = (rank // stride) % size
        stride *= size
    return out


def rank_groups(layout: Layout, *, moe: bool = True) -> dict[str, list[list[int]]]:
    """Rank list of every group kind (cost_models.rankmap.rank_groups): tp, cp, dp, pp, dp_cp,
    ep, and for an MoE model (`moe`) etp and edp; with HSDP dp_shard and dp_replicate, and with
    HSDP, EP and `moe` edp_shard and edp_replicate; each kind's groups partition the ranks."""
    return rankmap.rank_groups(layout, moe=moe)


def rank_row(cluster: Cluster, layout: Layout, rank: int) -> dict[str, int]:
    """One row of the rank map: rank, node, local GPU and the coordinates."""
    c = coordinates(layout, rank)
    node, gpu = divmod(rank, cluster.gpus_per_node)
    return {"rank": rank, "node": node, "gpu": gpu, **{k: c[k] for k in MAP_KEYS}}


def rank_map(cluster: Cluster, layout: Layout, max_nodes: int | None = None) -> list[dict]:
    """Rank-map rows for the first `max_nodes` nodes (all when None)."""
    count = layout.world_size
    if max_nodes is not None:
        count = min(count, max_nodes * cluster.gpus_per_node)
    return [rank_row(cluster, layout, r) for r in range(count)]


def compact_rule(cluster: Cluster, layout: Layout) -> str:
    """The rank map for every rank as one formula per coordinate."""
    strides = topology.axis_strides(layout)
    degrees = topology.axis_degrees(layout)
    parts = [f"node = r // {cluster.gpus_per_node}", f"gpu = r % {cluster.gpus_per_node}"]
    for axis in ("dp", "pp", "cp", "tp"):
        if degrees[axis] == 1:
            parts.append(f"{axis} = 0")
            continue
        s = strides[axis]
        term = "r" if s == 1 else f"(r // {s})"
        last = s * degrees[axis] == layout.world_size
        parts.append(f"{axis} = {term}" if last else f"{axis} = {term} % {degrees[axis]}")
    if layout.ep > 1:
        s = strides["ep"]
        term = "r" if s == 1 else f"(r // {s})"
        parts.append(f"ep = {term} % {layout.ep}")
    return "; ".join(parts)


def group_tiers(cluster: Cluster, layout: Layout, *, moe: bool = True) -> dict[str, str | None]:
    """The slowest tier each axis's groups cross (None: groups of one GPU)."""
    spans = topology.spans(cluster, layout, moe=moe)
    out: dict[str, str | None] = {}
    for axis in (*AXES, "ep"):
        tier = topology.outermost_tier(cluster, spans[axis])
        out[axis] = None if tier is None else tier.name
    return out


def device_mesh(layout: Layout) -> dict[str, Any]:
    """`init_device_mesh` shape and names realizing the placement (outermost dimension first).

    A DeviceMesh is row-major: its last dimension varies fastest, so the innermost axis of
    `Layout.order` goes last. EP is not a mesh dimension: it re-splits tp*cp*dp per stage.
    HSDP (Layout.dp_shard) splits dp into dp_replicate (outer) and dp_shard (inner), the
    dimensions torchtitan's ParallelDims names (its mesh (pp, dp_replicate, dp_shard, cp, tp)),
    so FSDP2's 2-D mesh is mesh["dp_replicate", "dp_shard"] (with CP flattened into the shard).
    """
    hsdp = layout.dp_shard is not None
    dims = rankmap.hsdp_dims(layout) if hsdp else rankmap.decoder_dims(layout)
    axes = [{"dp_rep": "dp_replicate"}.get(name, name) for name, _ in reversed(dims)]
    shape = tuple(size for _, size in reversed(dims))
    return {
        "mesh_shape": list(shape),
        "mesh_dim_names": axes,
        "call": f"init_device_mesh('cuda', {shape}, mesh_dim_names={tuple(axes)})",
    }
