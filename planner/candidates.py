"""Enumerate the legal layouts for a model on a cluster, one small generator per choice.

A candidate that breaks a rule is recorded as data (its reason, counted), never raised, so the
report can say "212 candidates exceeded usable HBM; 40 had tp that does not divide the heads".
The legality rules themselves live in cost_models.rules (one copy, shared with `estimate`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from cost_models.rules import layout_violations
from cost_models.specs import Cluster, Layout, ModelSpec, Workload

from .types import SearchSpace

_NUMBERS = re.compile(r"\d+(?:[.*]\d+)*")


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def reason_key(message: str) -> str:
    """A rule message with its numbers blanked, to count rejections by rule."""
    return _NUMBERS.sub("N", message)


def _pinned_or(values: list[int], pin: int | None, cap: int | None) -> list[int]:
    if pin is not None:
        return [pin] if pin in values else []
    return [v for v in values if cap is None or v <= cap]


def degree_tuples(
    model: ModelSpec, cluster: Cluster, space: SearchSpace
) -> Iterator[tuple[int, int, int, int]]:
    """(tp, pp, cp, dp) with tp*pp*cp*dp == num_gpus, honouring pins and caps."""
    n = cluster.num_gpus
    for tp in _pinned_or(divisors(n), space.tp, space.max_tp):
        for pp in _pinned_or(divisors(n // tp), space.pp, space.max_pp):
            for cp in _pinned_or(divisors(n // (tp * pp)), space.cp, space.max_cp):
                dp = n // (tp * pp * cp)
                if space.dp is not None and dp != space.dp:
                    continue
                yield tp, pp, cp, dp


def _vps(model: ModelSpec, pp: int, space: SearchSpace) -> list[int]:
    # Interleaving needs whole, equal chunks (Megatron: num_layers % (pp * vp) == 0).
    if pp == 1:
        return [1]
    return [1] + [v for v in range(2, space.max_vp + 1) if model.num_layers % (pp * v) == 0]


def _eps(model: ModelSpec, tp: int, dp: int, cp: int, space: SearchSpace) -> list[int]:
    # EP is carved from the tp*dp*cp ranks of a stage (expert-TP 1, Megatron MoE folding).
    if model.moe is None:
        return [1]
    legal = [e for e in divisors(tp * dp * cp) if model.moe.num_experts % e == 0]
    return _pinned_or(legal, space.ep, space.max_ep)


def enumerate_layouts(
    model: ModelSpec, cluster: Cluster, workload: Workload, space: SearchSpace
) -> tuple[list[Layout], Counter[str]]:
    """All legal layouts in the space, and a count of rejected ones by reason."""
    layouts: list[Layout] = []
    rejected: Counter[str] = Counter()
    for tp, pp, cp, dp in degree_tuples(model, cluster, space):
        for ep in _eps(model, tp, dp, cp, space):
            for vp in _vps(model, pp, space):
                for mb in space.micro_batches:
                    for recompute in space.recompute:
                        for zero in space.zero_stages:
                            layout = Layout(
                                tp=tp,
                                pp=pp,
                                dp=dp,
                                cp=cp,
                                ep=ep,
                                vp=vp,
                                micro_batch=mb,
                                recompute=recompute,
                                zero_stage=zero,
                                sequence_parallel=tp > 1,
                            )
                            problems = layout_violations(model, cluster, workload, layout)
                            if problems:
                                rejected[reason_key(problems[0])] += 1
                            else:
                                layouts.append(layout)
    if space.ep is not None and model.moe is None and space.ep > 1:
        rejected[f"ep ({space.ep}) > 1 needs a mixture-of-experts model"] += 1
    return layouts, rejected


def simplicity_rank(layout: Layout) -> tuple[int, ...]:
    """Tie-break toward simpler plans: fewer stages, less TP/CP/EP, no interleaving, less state."""
    recompute = ("none", "selective", "full").index(layout.recompute)
    return (
        layout.pp,
        layout.tp,
        layout.cp,
        layout.ep,
        layout.vp,
        recompute,
        layout.zero_stage,
        -layout.micro_batch,
    )
