"""Typed names for the pieces a step is made of: the breakdown terms, the flows that load a link
tier, and the per-stage sums the Pricer composes (cost_models/pricer.py).

The strings are CONTRACT.md's `breakdown_s` / `comm_total_s` keys; they are written out only at
the Estimate boundary (`Term.value`, `Flow.value`), never used as keys inside the cost model.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from .specs import Layout

T = TypeVar("T")


class Term(Enum):
    """Exposed seconds per step, in the order the step sums them (Estimate.breakdown_s)."""

    COMPUTE = "compute"
    RECOMPUTE = "recompute"
    TP_COMM = "tp_comm"
    CP_COMM = "cp_comm"
    EP_COMM = "ep_comm"
    PP_COMM = "pp_comm"
    DP_COMM = "dp_comm"
    BUBBLE = "bubble"
    OPTIMIZER = "optimizer"


class Flow(Enum):
    """Traffic that keeps a link tier busy (Estimate.comm_total_s keys, in this order)."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    PP = "pp"
    DP = "dp"

    @property
    def term(self) -> Term:
        """The breakdown term its exposed time is charged to."""
        return Term(f"{self.value}_comm")


LAYER_FLOWS = (Flow.TP, Flow.CP, Flow.EP)
"""The flows inside a layer (per micro-batch); PP and DP are per stage boundary / per step."""


@dataclass(frozen=True, slots=True)
class ByKind(Generic[T]):
    """One value per layer kind: dense (None: the model has none) and MoE (None: none)."""

    dense: T | None
    moe: T | None

    def of(self, is_moe: bool) -> T | None:
        return self.moe if is_moe else self.dense

    def items(self) -> list[tuple[bool, T]]:
        """(is_moe, value) of the kinds present, dense first."""
        return [(k, v) for k, v in ((False, self.dense), (True, self.moe)) if v is not None]


@dataclass(slots=True)
class StageTerms:
    """One pipeline stage, one micro-batch, one GPU: seconds by term (estimate()'s per-stage sum).

    The `*_total_s` fields are the link-busy seconds of TP/CP/EP (overlapped or not); `busy` is,
    per layer flow, the seconds it keeps each tier (cluster.tiers order) busy.
    """

    compute_s: float = 0.0
    recompute_s: float = 0.0
    tp_s: float = 0.0
    cp_s: float = 0.0
    ep_s: float = 0.0
    tp_total_s: float = 0.0
    cp_total_s: float = 0.0
    ep_total_s: float = 0.0
    busy: dict[Flow, list[float]] = field(default_factory=dict)
    offload_s: float = 0.0
    """The compute stream's wait for CPU activation offloading copies (stage.offload_exposed_s),
    charged to compute (the stream stalls; no link tier of the cluster carries it)."""

    @property
    def time_s(self) -> float:
        """The stage's seconds per micro-batch: compute, recompute, exposed TP/CP/EP and the
        offloading copies' wait."""
        return sum(
            (self.compute_s, self.recompute_s, self.tp_s, self.cp_s, self.ep_s, self.offload_s)
        )

    def busy_s(self, flow: Flow, tier: int) -> float:
        per_tier = self.busy.get(flow)
        return 0.0 if per_tier is None else per_tier[tier]

    def mean(self, other: StageTerms) -> StageTerms:
        """The mean of two stages, term by term (DualPipe's pair of stages on one rank)."""
        busy = {
            f: [
                (a + b) / 2 for a, b in zip(self._busy(f, other), other._busy(f, self), strict=True)
            ]
            for f in LAYER_FLOWS
            if f in self.busy or f in other.busy
        }
        return StageTerms(
            (self.compute_s + other.compute_s) / 2,
            (self.recompute_s + other.recompute_s) / 2,
            (self.tp_s + other.tp_s) / 2,
            (self.cp_s + other.cp_s) / 2,
            (self.ep_s + other.ep_s) / 2,
            (self.tp_total_s + other.tp_total_s) / 2,
            (self.cp_total_s + other.cp_total_s) / 2,
            (self.ep_total_s + other.ep_total_s) / 2,
            busy,
            (self.offload_s + other.offload_s) / 2,
        )

    def _busy(self, flow: Flow, other: StageTerms) -> list[float]:
        found = self.busy.get(flow)
        return found if found is not None else [0.0] * len(other.busy[flow])

    def exposed_s(self, term: Term) -> float:
        """Seconds per micro-batch of one of the layer terms (compute ... ep_comm)."""
        return {
            Term.COMPUTE: self.compute_s,
            Term.RECOMPUTE: self.recompute_s,
            Term.TP_COMM: self.tp_s,
            Term.CP_COMM: self.cp_s,
            Term.EP_COMM: self.ep_s,
        }[term]

    def total_s(self, flow: Flow) -> float:
        """Link-busy seconds per micro-batch of a layer flow."""
        return {Flow.TP: self.tp_total_s, Flow.CP: self.cp_total_s, Flow.EP: self.ep_total_s}[flow]


LAYER_TERMS = (Term.COMPUTE, Term.RECOMPUTE, Term.TP_COMM, Term.CP_COMM, Term.EP_COMM)
"""The terms a stage's per-micro-batch time is made of (charged m times on the critical stage)."""


def layout_key(left_out: tuple[str, ...]) -> Callable[[Layout], tuple]:
    """A cache key function: a Layout's fields but `left_out` (the fields a cached piece does not
    read), in declaration order."""
    return operator.attrgetter(*(f for f in Layout.model_fields if f not in left_out))
