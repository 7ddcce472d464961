"""UnitModel: the counted form of a layout on an allocation (units.py) with its cost tables
(tables.py), built complete in one place (unit_model)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from cost_models.specs import Cluster, Layout, ModelSpec, Workload

from .allocation import Allocation
from .tables import Tables, build_tables, q_monotone
from .units import Shape, Unplaceable, build_shape


@dataclass
class UnitModel(Tables, Shape):
    """The counted form of one layout on one allocation and its tables (shared by CP-SAT, the
    validator and the oracle)."""


def unit_model(
    model: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout, alloc: Allocation
) -> UnitModel:
    """Build the counted model; raises Unplaceable when the layout's stages are not whole
    units of nodes, the leaves cannot hold the units whole, or the tables break the monotony
    the model's linear uplink constraints rely on."""
    shape = build_shape(cluster, layout, alloc)
    tables = build_tables(model, cluster, workload, alloc, shape)
    if not q_monotone(shape, tables):  # more senders never help (checked, as the k tables are)
        raise Unplaceable("placement: the step falls as an uplink's senders grow")
    parts = {f.name: getattr(shape, f.name) for f in fields(Shape)}
    parts |= {f.name: getattr(tables, f.name) for f in fields(Tables)}
    return UnitModel(**parts)
