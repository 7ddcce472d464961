"""estimate(): score one layout; the step is composed by cost_models.pricer.Pricer.

Per micro-batch and pipeline stage: layer compute (forward, backward, recompute) plus the
in-layer collectives that sit on the critical path (TP, CP beyond what attention hides, EP
all-to-alls). The pipeline schedule turns stage times into a step; DP gradient / parameter
traffic overlaps with the backward (forward) of the last (first) micro-batch and only the excess
is exposed; the optimizer step is memory-bound. Derivations: docs/cost_model.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .compute import model_flops_per_token
from .pricer import Pricer
from .specs import Cluster, Estimate, Layout, ModelSpec, Workload


def estimate(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    layout: Layout,
    *,
    layers_per_stage: tuple[int, ...] | None = None,
    spans: Mapping[str, Sequence[int]] | None = None,
    uplink_steps: Mapping[int, int] | None = None,
    pipeline_uplink_steps: Mapping[int, int] | None = None,
) -> Estimate:
    """Score one layout. Raises InvalidInput (naming the rule) if the layout is illegal.

    `spans` (group kind -> members inside one domain of each tier, as cost_models.rankmap.spans
    gives them) replaces the spans of the layout's rank order: a placement on a real allocation
    prices its explicit rank -> host map through it. Kinds it leaves out keep the layout's.
    `uplink_steps` (tier -> step q of cost_models.uplink) prices the gradient window of the DP
    kinds at the effective oversubscription of each tier named (the share of its switches'
    ports that send upward); tiers not named keep their taper. `pipeline_uplink_steps` does the
    same for the pipeline window: the PP sends and the TP, CP and EP exchanges of the steady
    state.

    One call builds one Pricer; to score many layouts of one (model, cluster, workload), build
    a Pricer once and call its estimate(), which reuses the per-layer and per-stage pieces.
    """
    return Pricer(model, cluster, workload).estimate(
        layout,
        layers_per_stage=layers_per_stage,
        spans=spans,
        uplink_steps=uplink_steps,
        pipeline_uplink_steps=pipeline_uplink_steps,
    )


__all__ = ["estimate", "model_flops_per_token"]
