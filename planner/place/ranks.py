"""The rank map of a layout: which GPU holds which (dp, pp, cp, tp, ep) coordinates, and groups.

Everything follows `cost_models.topology` (the one place that decides placement): ranks are
numbered with `Layout.order`, innermost axis fastest, rank r sits on GPU r and node
r // gpus_per_node. An axis's group varies only that axis's coordinate, so its members are
`stride` apart where `stride` is `topology.axis_strides`. EP groups follow Megatron-Core's expert
order (etp, ep, edp inside one pipeline stage): expert coordinates are read from the stage-local
index with TP innermost, so EP members are etp x the TP stride apart, as topology assumes.
"""

from __future__ import annotations

from typing import Any

from cost_models import topology
from cost_models.specs import Cluster, Layout

AXES = ("tp", "cp", "dp", "pp")
MAP_KEYS = ("dp", "pp", "cp", "tp", "ep")


def coordinates(layout: Layout, rank: int) -> dict[str, int]:
    """(tp, cp, dp, pp, ep) coordinates of one rank."""
    strides = topology.axis_strides(layout)
    degrees = topology.axis_degrees(layout)
    coords = {a: (rank // strides[a]) % degrees[a] for a in AXES}
    coords["ep"] = (_stage_local_index(layout, coords) // layout.etp) % layout.ep
    return coords


def _stage_local_index(layout: Layout, coords: dict[str, int]) -> int:
    """Index of a rank among the tp*cp*dp ranks of its pipeline stage, TP innermost.

    Megatron-Core re-splits these ranks into (etp, ep, edp) for expert layers, TP fastest.
    """
    rest = [a.value for a in layout.order if a.value not in ("tp", "pp")]
    index, inner = coords["tp"], layout.tp
    for axis in rest:
        index += coords[axis] * inner
        inner *= getattr(layout, axis)
    return index


def rank_groups(layout: Layout) -> dict[str, list[list[int]]]:
    """Rank list of every TP, CP, DP, PP and EP group (each axis's groups partition the ranks)."""
    world = layout.world_size
    all_coords = [coordinates(layout, r) for r in range(world)]
    out: dict[str, list[list[int]]] = {}
    for axis in (*AXES, "ep"):
        groups: dict[tuple[Any, ...], list[int]] = {}
        for rank, c in enumerate(all_coords):
            groups.setdefault(_group_key(layout, axis, c), []).append(rank)
        out[axis] = sorted(groups.values())
    return out


def _group_key(layout: Layout, axis: str, c: dict[str, int]) -> tuple[Any, ...]:
    """What the members of one group of `axis` share: every coordinate but that axis's."""
    if axis == "ep":
        local = _stage_local_index(layout, c)
        # Same pipeline stage, same etp coordinate and same expert-DP coordinate.
        return (c["pp"], local % layout.etp, local // (layout.etp * layout.ep))
    return tuple(c[a] for a in AXES if a != axis)


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
        if layout.order[0].value == "tp" and layout.order[-1].value == "pp":
            block = layout.world_size // layout.pp  # a stage's ranks are contiguous, TP fastest
            inner = f"r % {block}" if layout.etp == 1 else f"r % {block} // {layout.etp}"
            parts.append(f"ep = ({inner}) % {layout.ep}")
        else:
            parts.append(f"ep = (stage-local index, TP fastest) // {layout.etp} % {layout.ep}")
    return "; ".join(parts)


def group_tiers(cluster: Cluster, layout: Layout) -> dict[str, str | None]:
    """The slowest tier each axis's groups cross (None: groups of one GPU)."""
    spans = topology.spans(cluster, layout)
    out: dict[str, str | None] = {}
    for axis in (*AXES, "ep"):
        tier = topology.outermost_tier(cluster, spans[axis])
        out[axis] = None if tier is None else tier.name
    return out


def device_mesh(layout: Layout) -> dict[str, Any]:
    """`init_device_mesh` shape and names realizing the placement (outermost dimension first).

    A DeviceMesh is row-major: its last dimension varies fastest, so the innermost axis of
    `Layout.order` goes last. EP is not a mesh dimension: it re-splits tp*cp*dp per stage.
    """
    axes = [a.value for a in reversed(layout.order)]
    return {
        "mesh_shape": [getattr(layout, a) for a in axes],
        "mesh_dim_names": axes,
        "call": (
            f"init_device_mesh('cuda', {tuple(getattr(layout, a) for a in axes)}, "
            f"mesh_dim_names={tuple(axes)})"
        ),
    }
