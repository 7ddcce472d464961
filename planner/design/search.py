"""`planner design`: search the network designs for a workload mix at N GPUs (CONTRACT.md
"Network design"; docs/networks.md "Designing the network").

Every design is priced by its bill of materials first (pure counting, planner.network_bom).
Plans are searched only for designs that can still matter; a design is skipped when another
design is no dearer (network capital and network cost per hour) and at least as fast:

- dominated: a design the cost model cannot price slower (space.at_least_as_fast: same tiers,
  at least its bandwidth and SHARP on every scale-out tier) costs less, or the same and comes
  first; no plan is searched for either to know it;
- bounded: its throughput is at most that of an evaluated design at least as fast as it (its
  upper bound), and an evaluated design that costs no more already reaches that bound.

A skipped design is strictly worse than one that stays (ties go to the design listed first), so
the frontier, the best design per budget and the cheapest $ per million tokens are the ones the
full evaluation finds (tests/unit/planner/test_design.py compares them). The designs that bound
the others (the fastest of each shape) go first, then the rest cheapest first, in waves of a
fixed size, so the result does not depend on the backend or its workers. Nothing here prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.specs import Cluster, Estimate, GpuSpec

from .. import network_bom
from . import backends
from .evaluate import estimate_of, evaluate_point, make_point, point_key
from .mix import MixEntry
from .pricing import Costs
from .space import Design, at_least_as_fast, cluster_for, designs, load_space

WAVE = 8
"""Designs evaluated together between two pruning passes (fixed: the output must not depend on
the number of workers)."""


@dataclass(frozen=True)
class Candidate:
    index: int
    """Position in the space's enumeration (ties go to the lower index)."""
    design: Design
    cluster: Cluster
    bill: network_bom.Bill
    network_usd_per_gpu_hour: float

    @property
    def capex(self) -> float:
        return self.bill.capex_usd_per_gpu

    def no_dearer(self, other: Candidate) -> bool:
        return (
            self.capex <= other.capex
            and self.network_usd_per_gpu_hour <= other.network_usd_per_gpu_hour
        )


@dataclass(frozen=True)
class Evaluated:
    candidate: Candidate
    plans: tuple[Estimate, ...]
    """The best plan of each workload of the mix, in mix order."""
    statuses: tuple[str, ...]
    """Each plan search's certificate (PROVED unless a time limit cut it short)."""
    tokens_per_s_per_gpu: float
    usd_per_m_tokens: float


@dataclass(frozen=True)
class Skipped:
    candidate: Candidate
    rule: str
    """dominated | bounded | infeasible"""
    by: str
    """The design that rules it out (infeasible: the workload that has no plan)."""
    bound: float | None = None
    """bounded: the throughput bound the design could not beat."""
    reason: str = ""


@dataclass(frozen=True)
class DesignResult:
    gpu: str
    num_gpus: int
    mix: tuple[MixEntry, ...]
    costs: Costs
    designs: tuple[Evaluated, ...]
    """The evaluated feasible designs, in the space's order."""
    frontier: tuple[int, ...]
    """Indices into `designs`: throughput vs network capital per GPU, cheapest first."""
    best: int | None
    """Lowest $ per million tokens within the constraints (None: no design meets them)."""
    skipped: tuple[Skipped, ...]
    total: int
    network_budget_usd_per_gpu: float | None = None
    min_tokens_per_s_per_gpu: float | None = None
    per_budget: tuple[tuple[float, int], ...] = field(default_factory=tuple)
    """(budget, design index): the best design within each frontier design's capital."""


# ------------------------------------------------------------------------------ pruning


def _beats(c: Candidate, c_tokens: float, b: Candidate, b_bound: float) -> bool:
    """c rules b out: no dearer, at least b's bound, and strictly better somewhere or first."""
    return (
        c.no_dearer(b)
        and c_tokens >= b_bound
        and (c.capex < b.capex or c_tokens > b_bound or c.index < b.index)
    )


def dominated(cands: list[Candidate]) -> tuple[list[Candidate], list[Skipped]]:
    """Rule 1, before any plan: b goes when a design at least as fast is no dearer and costs
    less or comes first."""
    keep, out = [], []
    for b in cands:
        by = next(
            (
                a for a in cands
                if a is not b and at_least_as_fast(a.design, b.design) and a.no_dearer(b)
                and (a.capex < b.capex or a.index < b.index)
            ),
            None,
        )  # fmt: skip
        if by is None:
            keep.append(b)
        else:
            out.append(Skipped(b, "dominated", by.design.name))
    return keep, out


def _bound(b: Candidate, done: dict[int, Evaluated]) -> float:
    """The most throughput b can have: the least of the evaluated designs at least as fast."""
    return min(
        (
            e.tokens_per_s_per_gpu
            for e in done.values()
            if at_least_as_fast(e.candidate.design, b.design)
        ),
        default=math.inf,
    )


def _bounded(b: Candidate, done: dict[int, Evaluated]) -> Skipped | None:
    bound = _bound(b, done)
    if math.isinf(bound):
        return None
    for e in done.values():
        if _beats(e.candidate, e.tokens_per_s_per_gpu, b, bound):
            return Skipped(b, "bounded", e.candidate.design.name, bound)
    return None


def _maximal(cands: list[Candidate]) -> list[Candidate]:
    """The designs no other candidate is strictly faster than (they bound all the others)."""
    return [
        b for b in cands
        if not any(
            a is not b and at_least_as_fast(a.design, b.design)
            and not at_least_as_fast(b.design, a.design)
            for a in cands
        )
    ]  # fmt: skip


# ------------------------------------------------------------------------------ evaluation


def _evaluate(
    wave: list[Candidate], mix: tuple[MixEntry, ...], costs: Costs, run: Any
) -> list[Evaluated | Skipped]:
    points = [make_point(c.cluster, e.spec, e.as_point()) for c in wave for e in mix]
    results = run(points)
    out: list[Evaluated | Skipped] = []
    for i, c in enumerate(wave):
        mine = results[i * len(mix) : (i + 1) * len(mix)]
        bad = next(((e, r) for e, r in zip(mix, mine, strict=True) if "error" in r), None)
        if bad is not None:
            out.append(Skipped(c, "infeasible", bad[0].model_name, reason=bad[1]["error"]))
            continue
        plans = tuple(estimate_of(r) for r in mine)
        tokens = math.fsum(
            e.share * p.tokens_per_s_per_gpu for e, p in zip(mix, plans, strict=True)
        )
        out.append(
            Evaluated(
                c, plans, tuple(r["solver"]["status"] for r in mine), tokens,
                costs.usd_per_m_tokens(c.bill, tokens),
            )
        )  # fmt: skip
    return out


def _search(
    cands: list[Candidate], mix: tuple[MixEntry, ...], costs: Costs, run: Any, prune: bool
) -> tuple[dict[int, Evaluated], list[Skipped]]:
    done: dict[int, Evaluated] = {}
    skipped: list[Skipped] = []

    def take(wave: list[Candidate]) -> None:
        for r in _evaluate(wave, mix, costs, run):
            if isinstance(r, Evaluated):
                done[r.candidate.index] = r
            else:
                skipped.append(r)

    if not prune:
        for i in range(0, len(cands), WAVE):
            take(cands[i : i + WAVE])
        return done, skipped
    cands, out = dominated(cands)
    skipped += out
    first = _maximal(cands)
    for i in range(0, len(first), WAVE):
        take(first[i : i + WAVE])
    queue = sorted(
        (c for c in cands if c.index not in {f.index for f in first}),
        key=lambda c: (c.capex, c.network_usd_per_gpu_hour, c.index),
    )
    while queue:
        left = []
        for b in queue:
            s = _bounded(b, done)
            if s is None:
                left.append(b)
            else:
                skipped.append(s)
        take(left[:WAVE])
        queue = left[WAVE:]
    return done, skipped


# ------------------------------------------------------------------------------ results


def frontier(evaluated: list[Evaluated]) -> list[int]:
    """Pareto-optimal designs, throughput vs network capital per GPU: cheapest first, each
    faster than every design before it (ties: the design listed first)."""
    order = sorted(
        range(len(evaluated)),
        key=lambda i: (evaluated[i].candidate.capex, -evaluated[i].tokens_per_s_per_gpu, i),
    )
    out, fastest = [], -math.inf
    for i in order:
        if evaluated[i].tokens_per_s_per_gpu > fastest:
            out.append(i)
            fastest = evaluated[i].tokens_per_s_per_gpu
    return out


def best_design(
    evaluated: list[Evaluated], budget: float | None, min_tokens: float | None
) -> int | None:
    """Lowest $ per million tokens among the designs within the budget and throughput floor."""
    ok = [
        i for i, e in enumerate(evaluated)
        if (budget is None or e.candidate.capex <= budget)
        and (min_tokens is None or e.tokens_per_s_per_gpu >= min_tokens)
    ]  # fmt: skip
    return min(
        ok,
        key=lambda i: (evaluated[i].usd_per_m_tokens, evaluated[i].candidate.capex, i),
        default=None,
    )


def _per_budget(
    evaluated: list[Evaluated], front: list[int], min_tokens: float | None
) -> tuple[tuple[float, int], ...]:
    out: list[tuple[float, int]] = []
    for i in front:
        budget = evaluated[i].candidate.capex
        b = best_design(evaluated, budget, min_tokens)
        if b is not None and (not out or out[-1][1] != b):
            out.append((budget, b))
    return tuple(out)


def candidates(
    gpu: GpuSpec, num_gpus: int, designs_file: str | None, costs: Costs
) -> list[Candidate]:
    """Every design of the space, built and priced (bad input fails here, before any plan)."""
    out = []
    for i, d in enumerate(designs(load_space(designs_file, gpu, num_gpus), gpu)):
        cluster = cluster_for(d, gpu, num_gpus)
        bill = network_bom.bill(cluster, costs.prices)
        out.append(Candidate(i, d, cluster, bill, costs.network_usd_per_gpu_hour(bill)))
    return out


def search_designs(
    mix: tuple[MixEntry, ...],
    gpu: GpuSpec,
    num_gpus: int,
    costs: Costs,
    *,
    designs_file: str | None = None,
    network_budget_usd_per_gpu: float | None = None,
    min_tokens_per_s_per_gpu: float | None = None,
    prune: bool = True,
    backend: str = "local",
    workers: int | None = None,
    cache_dir: str | None = None,
    progress: bool = True,
) -> DesignResult:
    """The frontier and the best design for `mix` on `num_gpus` of `gpu`. Raises InvalidInput
    for bad input and NoFeasiblePlan when no design has a plan for every workload or none
    meets the constraints."""
    cands = candidates(gpu, num_gpus, designs_file, costs)
    run = partial(
        backends.evaluate, fn=evaluate_point, backend=backend, workers=workers,
        cache_dir=cache_dir, key=point_key, progress=progress,
    )  # fmt: skip
    done, skipped = _search(cands, mix, costs, run, prune)
    evaluated = [done[c.index] for c in cands if c.index in done]
    if not evaluated:
        reasons = [
            f"{s.candidate.design.name}: {s.by}: {s.reason}"
            for s in skipped
            if s.rule == "infeasible"
        ]
        raise NoFeasiblePlan("no design has a plan for every workload of the mix", reasons[:10])
    front = frontier(evaluated)
    best = best_design(evaluated, network_budget_usd_per_gpu, min_tokens_per_s_per_gpu)
    if best is None:
        raise NoFeasiblePlan(
            "no design meets the constraints",
            _constraint_reasons(evaluated, network_budget_usd_per_gpu, min_tokens_per_s_per_gpu),
        )
    order = {c.index: k for k, c in enumerate(cands)}
    return DesignResult(
        gpu=gpu.id,
        num_gpus=num_gpus,
        mix=mix,
        costs=costs,
        designs=tuple(evaluated),
        frontier=tuple(front),
        best=best,
        skipped=tuple(sorted(skipped, key=lambda s: order[s.candidate.index])),
        total=len(cands),
        network_budget_usd_per_gpu=network_budget_usd_per_gpu,
        min_tokens_per_s_per_gpu=min_tokens_per_s_per_gpu,
        per_budget=_per_budget(evaluated, front, min_tokens_per_s_per_gpu),
    )


def _constraint_reasons(
    evaluated: list[Evaluated], budget: float | None, min_tokens: float | None
) -> list[str]:
    cheapest = min(e.candidate.capex for e in evaluated)
    fastest = max(e.tokens_per_s_per_gpu for e in evaluated)
    out = []
    if budget is not None:
        out.append(
            f"--network-budget {budget:,.0f}: the cheapest design costs ${cheapest:,.0f} per GPU"
        )
    if min_tokens is not None:
        out.append(
            f"--min-throughput {min_tokens:,.1f}: the fastest design reaches "
            f"{fastest:,.1f} tokens/s/GPU"
        )
    return out


def check_constraints(budget: float | None, min_tokens: float | None) -> None:
    for flag, v in (("--network-budget", budget), ("--min-throughput", min_tokens)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise InvalidInput(f"{flag}: must be a positive number (got {v})")
