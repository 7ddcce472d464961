"""Reduce a custom fabric, given as a networkx graph, to the nested link tiers the cost model reads.

Graph schema (networkx node-link data in a cluster file under `graph:`): GPU nodes have
`type: gpu`; switch nodes have `type: switch`, an integer `level` (0 = NVSwitch inside a node or
rack, 1 = leaf, 2 = spine, ...), and optionally `kind` (a TierKind; default `nvlink` at level 0,
else `switch`) and `latency_us`. Edges carry `gb_per_s` (one direction).

Tier of level L: its domains are the GPU sets connected through switches of level <= L (they
must all be the same size, the nesting the cost model assumes). A GPU's bandwidth at level L is
the sum of its own links into level-L switches (its NICs) -- for L >= 1 the scale-out NICs. The
oversubscription of level L is that bandwidth over the per-GPU share of the uplinks leaving one
level-(L-1) domain towards level L (a 4:1 leaf has four times more down- than up-link capacity).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import networkx as nx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from cost_models.errors import InvalidInput, describe_validation_error
from cost_models.specs import MAX_GB_PER_S, MAX_GPUS, MAX_LATENCY_US, MIN_GB_PER_S, TierKind

DEFAULT_EFFICIENCY = {"nvlink": 0.8}
SCALE_OUT_EFFICIENCY = 0.9  # busbw / line rate on IB/RoCE (see the dgx-h100 preset's source)


def _domains(graph: nx.Graph, gpus: list[Any], level: int) -> list[frozenset[Any]]:
    keep = [
        n
        for n, d in graph.nodes(data=True)
        if d.get("type") == "gpu" or (d.get("type") == "switch" and d["level"] <= level)
    ]
    comps = nx.connected_components(graph.subgraph(keep))
    found = [frozenset(n for n in c if n in gpus) for c in comps]
    return sorted((c for c in found if c), key=sorted)


def tiers_from_graph(graph: nx.Graph, where: str = "graph") -> list[dict[str, Any]]:
    """LinkTier field dicts, innermost first (InvalidInput if the graph does not nest evenly)."""
    gpus = {n for n, d in graph.nodes(data=True) if d.get("type") == "gpu"}
    switches = {n: d for n, d in graph.nodes(data=True) if d.get("type") == "switch"}
    if not gpus or not switches:
        raise InvalidInput(f"{where}: needs nodes of type gpu and type switch")
    if any(not isinstance(d.get("level"), int) for d in switches.values()):
        raise InvalidInput(f"{where}: every switch needs an integer level")
    tiers: list[dict[str, Any]] = []
    prev: list[frozenset[Any]] = []
    for level in sorted({d["level"] for d in switches.values()}):
        domains = _domains(graph, sorted(gpus), level)
        sizes = {len(c) for c in domains}
        if len(sizes) != 1:
            raise InvalidInput(f"{where}: level {level} domains differ in size ({sorted(sizes)})")
        at_level = {n for n, d in switches.items() if d["level"] == level}
        # NVSwitch links at level 0; above it, the GPU's scale-out NICs (into any level >= 1).
        nics = {n for n, d in switches.items() if (d["level"] >= 1) == (level >= 1)}
        nic = min(
            sum(graph.edges[g, s]["gb_per_s"] for s in graph.neighbors(g) if s in nics)
            for g in gpus
        )
        if nic <= 0:
            raise InvalidInput(f"{where}: some GPU has no link into a level-{level} switch")
        over = 1.0
        below = {n for n, d in switches.items() if d["level"] < level}
        for inner in prev:
            reach = nx.node_connected_component(graph.subgraph(set(inner) | below), min(inner))
            inner_switches = reach & below
            up = sum(
                d["gb_per_s"]
                for a, b, d in graph.edges(inner_switches, data=True)
                if (b if a in inner_switches else a) in at_level
            )
            if up > 0:
                over = max(over, nic / (up / len(inner)))
        kinds = {switches[s].get("kind") for s in at_level} - {None}
        kind = kinds.pop() if len(kinds) == 1 else ("nvlink" if level == 0 else "switch")
        latency = max(switches[s].get("latency_us", 3.0 if level == 0 else 5.0) for s in at_level)
        tiers.append(
            {
                "name": f"level{level}",
                "domain_size": len(domains[0]) if len(domains) > 1 else None,
                "bandwidth_gb_per_s": nic,
                "latency_us": latency,
                "efficiency": DEFAULT_EFFICIENCY.get(kind, SCALE_OUT_EFFICIENCY),
                "oversubscription": over,
                "kind": kind,
            }
        )
        prev = domains
    return tiers


NodeId = Annotated[str | int, Field(union_mode="left_to_right")]
MAX_GRAPH_NODES = 2 * MAX_GPUS
MAX_LEVEL = 16


class GraphNode(BaseModel):
    """One node of the node-link data: a GPU, or a switch with its level."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    id: NodeId
    type: Literal["gpu", "switch"]
    level: int | None = Field(None, ge=0, le=MAX_LEVEL, description="switches only")
    kind: TierKind | None = None
    latency_us: float | None = Field(None, ge=0, le=MAX_LATENCY_US)
    name: str | None = None

    @model_validator(mode="after")
    def _switch_has_level(self) -> GraphNode:
        if self.type == "switch" and self.level is None:
            raise ValueError("a switch needs an integer level (0 = NVSwitch, 1 = leaf, ...)")
        if self.type == "gpu" and (self.level, self.kind, self.latency_us) != (None,) * 3:
            raise ValueError("level, kind and latency_us belong to switches, not GPUs")
        return self


class GraphEdge(BaseModel):
    """One link, its bandwidth in GB/s per direction."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    source: NodeId
    target: NodeId
    gb_per_s: float = Field(ge=MIN_GB_PER_S, le=MAX_GB_PER_S)

    @field_validator("gb_per_s", mode="before")
    @classmethod
    def _int_is_a_number(cls, v: Any) -> Any:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


class FabricGraph(BaseModel):
    """networkx node-link data (nx.node_link_data(G, edges="edges")) of an undirected graph."""

    model_config = ConfigDict(extra="forbid", strict=True)

    directed: Literal[False] = False
    multigraph: Literal[False] = False
    graph: dict[str, Any] = Field(default_factory=dict)
    nodes: list[GraphNode] = Field(min_length=2, max_length=MAX_GRAPH_NODES)
    edges: list[GraphEdge] = Field(min_length=1, max_length=8 * MAX_GRAPH_NODES)


def graph_from_data(data: Any, where: str) -> nx.Graph:
    """A graph from node-link data ({nodes: [{id, ...}], edges: [{source, target, ...}]}),
    checked by FabricGraph first (InvalidInput naming the node or edge and the rule)."""
    where = f"{where}: graph"
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: expected node-link data (a mapping), got {type(data).__name__}")
    try:
        spec = FabricGraph.model_validate(data)
    except ValidationError as err:
        raise InvalidInput(describe_validation_error(err, where)) from None
    # Ids are compared (sorted) below: one type for all, as text ("3" and 3 are one node).
    ids = [str(n.id) for n in spec.nodes]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInput(f"{where}: nodes: id {dup!r} appears more than once")
    known = set(ids)
    graph = nx.Graph()
    for nid, node in zip(ids, spec.nodes, strict=True):
        graph.add_node(nid, **node.model_dump(exclude={"id"}, exclude_none=True))
    for i, edge in enumerate(spec.edges):
        a, b = str(edge.source), str(edge.target)
        for end in (a, b):
            if end not in known:
                raise InvalidInput(f"{where}: edges.{i}: node {end!r} is not in nodes")
        if a == b:
            raise InvalidInput(f"{where}: edges.{i}: a link from {a!r} to itself")
        if graph.has_edge(a, b):
            raise InvalidInput(f"{where}: edges.{i}: a second link between {a!r} and {b!r}")
        graph.add_edge(a, b, gb_per_s=edge.gb_per_s)
    return graph
