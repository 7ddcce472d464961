"""Brute-force oracle: score every legal layout with the cost model and sort.

It stays in the product as the reference the branch and bound (planner/search/table.py) is tested
against (same candidates, same objective, same tie-break), and as the engine for small spaces. It
shares only the candidate enumeration with the engine (candidates.py: what is legal), never the
search: no bounds, no pruning, no CP-SAT. With a global batch range every layout is scored at
the largest legal batch that fits (candidates.largest_fitting, checked against every batch in
tests/integration/search/test_sat_batch_range.py) and plans sort by time per sequence. With
SearchSpace.stage_split "search" a pp > 1 layout out of memory with the even split is scored on
the best split that fits, found by scoring every composition of the layers into pp x vp chunks
(`brute_force_split`), where the engine solves a CP-SAT model (planner/search/partition.py).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Callable

from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.pipeline import even_chunk_counts, split_slots
from cost_models.pricer import Pricer
from cost_models.specs import Cluster, Estimate, Layout, ModelSpec, Workload

from ..types import SearchSpace, SolverOptions, SolveStats
from .candidates import (
    HARD_MARGIN_S,
    LIMIT_REJECTIONS,
    TIMED_OUT,
    DeadlinePassed,
    batch_choices,
    enumerate_layouts,
    family_key,
    largest_fitting,
    nothing_scored,
    plan_key,
    simplicity_rank,
)
from .scale import TIME_QUANTUM_S, per_sequence_quanta  # noqa: F401 (re-exported)
from .work import WORK_PER_POP, WORK_PER_SCORE, default_work_limit


def within(best_q: int, tolerance: float) -> int:
    """The largest time in quanta within `tolerance` of `best_q`."""
    return math.floor(best_q * (1 + tolerance))


def plan_batch(e: Estimate) -> int:
    """The global batch (sequences) a plan was scored with."""
    return e.global_batch_seqs


def rank_key(e: Estimate, batch_max: int | None = None) -> tuple:
    """(time per sequence in quanta, simplicity): with a fixed batch (batch_max None or the
    plan's own batch) the first is the step time in TIME_QUANTUM_S, exactly as before."""
    batch = plan_batch(e)
    return (
        per_sequence_quanta(e.step_time_s, batch, batch_max or batch),
        simplicity_rank(e.layout),
    )


def select_families(
    estimates: list[Estimate], options: SolverOptions, batch_max: int | None
) -> list[Estimate]:
    """The best plan of each family (candidates.family_key; plan_key with top_variants), in rank
    order: the first top_k families, and after them every family within the simplicity tolerance
    of the best plan (the recommendation chooses among those, planner.api)."""
    family = plan_key if options.top_variants else family_key
    best: dict[tuple, Estimate] = {}
    for e in sorted(estimates, key=lambda e: rank_key(e, batch_max)):
        best.setdefault(family(e.layout), e)
    ranked = list(best.values())
    if not ranked:
        return []
    limit = within(rank_key(ranked[0], batch_max)[0], options.simplicity_tolerance)
    return [
        e for i, e in enumerate(ranked) if i < options.top_k or rank_key(e, batch_max)[0] <= limit
    ]


def objective_s(e: Estimate, space: SearchSpace) -> float:
    """The reported objective: step time (fixed batch) or seconds per sequence (range)."""
    return e.step_time_s if space.global_batch_range is None else e.step_time_s / plan_batch(e)


def usable_memory_gib(cluster: Cluster, space: SearchSpace) -> float:
    return cluster.gpu.hbm_gib * (1 - space.memory_headroom)


def search(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    options: SolverOptions,
) -> tuple[list[Estimate], SolveStats, dict[str, int]]:
    """Ranked feasible estimates (best first, top_k), stats, and rejection counts."""
    start = time.perf_counter()
    # The oracle honours --time-limit like the branch and bound (planner/search/table.py): it
    # stops scoring at the deadline once a plan fits, or at deadline + HARD_MARGIN_S regardless;
    # the plans then rank only what was scored (status STOPPED, no bound).
    deadline = start + options.time_limit_s
    try:
        layouts, rejected = enumerate_layouts(
            model, cluster, workload, space, deadline=deadline + HARD_MARGIN_S
        )
    except DeadlinePassed:
        raise NoFeasiblePlan(nothing_scored(options.time_limit_s)) from None
    usable = usable_memory_gib(cluster, space)
    feasible: list[Estimate] = []
    smallest: Estimate | None = None
    pricers = {workload.global_batch_seqs: Pricer(model, cluster, workload)}

    def pricer_at(batch: int) -> Pricer:
        found = pricers.get(batch)
        if found is None:
            w = workload.model_copy(update={"global_batch_seqs": batch})
            found = pricers[batch] = Pricer(model, cluster, w)
        return found

    # The work limit (deterministic, like the branch and bound's: work.default_work_limit)
    # counts the layouts and the estimates scored (WORK_PER_POP, WORK_PER_SCORE), and stops
    # before the clock once a plan fits, so a cut oracle also repeats its answer.
    work_limit = default_work_limit(options)
    work = 0.0
    stopped, stopped_by = False, None
    for num_tried, layout in enumerate(layouts):
        now = time.perf_counter()
        if feasible and work_limit is not None and work > work_limit:
            stopped, stopped_by = True, "work_limit"
        elif now > deadline and (feasible or now > deadline + HARD_MARGIN_S):
            stopped, stopped_by = True, "time_limit"
        if stopped:
            rejected[LIMIT_REJECTIONS[stopped_by]] += len(layouts) - num_tried
            layouts = layouts[:num_tried]
            break
        e, fits, scored = _score(layout, pricer_at, workload, space, usable)
        work += WORK_PER_POP + WORK_PER_SCORE * scored
        if fits:
            feasible.append(e)
        else:
            rejected["peak memory above usable HBM"] += 1
            if smallest is None or e.peak_memory_gib < smallest.peak_memory_gib:
                smallest = e
    if not feasible:
        why = why_none(cluster, space, usable, len(layouts), smallest, rejected)
        raise NoFeasiblePlan(_none_fits(why, stopped, options, layouts, smallest, rejected))
    batch_max = space.batch_max
    ranked = select_families(feasible, options, batch_max)
    best = objective_s(ranked[0], space)
    stats = SolveStats(
        engine="exhaustive",
        status="STOPPED" if stopped else "PROVED",  # PROVED: every candidate scored
        objective=best,
        best_bound=None if stopped else best,
        gap=None if stopped else 0.0,
        wall_time_s=time.perf_counter() - start,
        work_units=work,
        stopped_by=stopped_by,
        num_candidates=len(layouts) + _count(rejected),
        num_scored=len(layouts),
        num_feasible=len(feasible),
        objective_unit=space.objective_unit,
    )
    return ranked, stats, dict(rejected)


def _score(
    layout: Layout,
    pricer_at: Callable[[int], Pricer],
    workload: Workload,
    space: SearchSpace,
    usable: float,
) -> tuple[Estimate, bool, int]:
    """(estimate, whether it fits, estimates scored) of a layout: with a fixed batch its one
    estimate; with a range the largest legal batch that fits (candidates.largest_fitting says why that is the
    layout's best), else the last batch tried; with stage_split "search" (fixed batch only:
    SearchSpace refuses it with a range) a layout out of memory on the even split is scored on
    its best split that fits (brute_force_split)."""
    tried: dict[int, Estimate] = {}

    def fits(batch: int) -> bool:
        e = tried[batch] = pricer_at(batch).estimate(layout)
        return e.peak_memory_gib <= usable

    batches = batch_choices(workload, space, layout.micro_batch, layout.dp, layout.pp, layout.vp)
    chosen, last = largest_fitting(batches, fits)
    e = tried[batches[last] if chosen is None else chosen]
    # A layout counting the embedding / loss in the split has Megatron's split only.
    accounted = split_slots(layout) != (0, 0)
    if chosen is None and space.stage_split == "search" and layout.pp > 1 and not accounted:
        p = pricer_at(batches[0])
        found = brute_force_split(p.model, p.cluster, workload, layout, usable)
        scored = len(tried) + split_count(p.model, layout)
        if found is not None:
            return found, True, scored
        return e, False, scored
    return e, chosen is not None, len(tried)


def _none_fits(
    why: str,
    stopped: bool,
    options: SolverOptions,
    layouts: list[Layout],
    smallest: Estimate | None,
    rejected: Counter[str],
) -> str:
    """Why no plan was found: why_none's reasons, or, stopped by the time limit, that."""
    if not stopped:
        return why
    if smallest is None:
        return nothing_scored(options.time_limit_s)
    # some were scored, none fits: say how close the best came
    return (
        f"no plan that fits found within the time limit ({options.time_limit_s:g} s + "
        f"{HARD_MARGIN_S:g} s margin; {len(layouts)} of {len(layouts) + rejected[TIMED_OUT]}"
        f" legal layouts scored): {why}"
    )


MAX_SPLITS = 20_000  # compositions the oracle scores per layout before refusing


def compositions(total: int, parts: int):
    """Every way to write `total` as an ordered sum of `parts` positive integers."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        edges = (0, *cuts, total)
        yield tuple(b - a for a, b in itertools.pairwise(edges))


def split_count(model: ModelSpec, layout) -> int:
    """Splits of the model's layers into pp x vp non-empty chunks (brute_force_split scores
    each): C(layers - 1, chunks - 1)."""
    return math.comb(model.num_layers - 1, layout.pp * layout.vp - 1)


def brute_force_split(
    model: ModelSpec, cluster: Cluster, workload: Workload, layout, usable: float
) -> Estimate | None:
    """The layout scored on its best split that fits, by scoring every split (None: none fits).

    Best: the least step time (in quanta, as plans rank), then the least sum_c |n_c - even_c|
    (the engine's tie-break toward the even split), then the first in enumeration order.
    """
    chunks = layout.pp * layout.vp
    count = split_count(model, layout)
    if count > MAX_SPLITS:
        raise InvalidInput(
            f"stage_split: the exhaustive engine would score {count} splits of "
            f"{model.num_layers} layers into {chunks} chunks (at most {MAX_SPLITS}); use the "
            f"default engine"
        )
    even = even_chunk_counts(model, chunks)  # the cost model's even split
    best, best_key = None, None
    pricer = Pricer(model, cluster, workload)
    for split in compositions(model.num_layers, chunks):
        e = pricer.estimate(layout, layers_per_stage=split)
        if e.peak_memory_gib > usable:
            continue
        deviation = sum(abs(n - m) for n, m in zip(split, even, strict=True))
        key = (per_sequence_quanta(e.step_time_s, plan_batch(e), None), deviation)
        if best_key is None or key < best_key:
            best, best_key = e, key
    return best


def _count(rejected: Counter[str]) -> int:
    """Rejected candidates not already in the scored `layouts`: everything but the out-of-memory
    ones (scored). Those a limit left unscored count, as the branch and bound counts every
    candidate whether it was reached or not (table.num_candidates)."""
    return sum(v for k, v in rejected.items() if k != "peak memory above usable HBM")


def why_none(
    cluster: Cluster,
    space: SearchSpace,
    usable: float,
    num_legal: int,
    smallest: Estimate | None,
    rejected: Counter[str],
) -> str:
    if smallest is None:
        top = "; ".join(f"{n:,} x {reason}" for reason, n in rejected.most_common(4))
        return (
            f"no legal layout for {cluster.num_gpus:,} GPUs: every candidate breaks a rule "
            f"({top or _empty_space_reason(cluster, space)})"
        )
    lo = smallest.layout
    return (
        f"no layout fits in memory: the smallest peak any of {num_legal:,} legal layouts needs is "
        f"{smallest.peak_memory_gib:.1f} GiB per GPU (tp={lo.tp} pp={lo.pp} dp={lo.dp} cp={lo.cp} "
        f"ep={lo.ep} recompute={lo.recompute} zero={lo.zero_stage} micro_batch={lo.micro_batch}) "
        f"but only {usable:.1f} GiB is usable ({cluster.gpu.hbm_gib:.0f} GiB HBM minus "
        f"{space.memory_headroom:.0%} headroom); "
        f"{oom_advice(space, lo, smallest.peak_memory_gib, cluster.gpu.hbm_gib)}"
    )


def oom_advice(space: SearchSpace, lo: Layout, peak_gib: float, hbm_gib: float) -> str:
    """What could still shrink memory, offering only knobs the search has not yet turned: a
    smaller micro-batch only when the smallest layout's is above 1, full recompute or ZeRO-3
    only when the space forbade them, unpinning only pinned degrees, less headroom only when the
    peak fits in the whole HBM."""
    ways = ["use more GPUs", "a shorter sequence"]
    if lo.micro_batch > 1:
        ways.append(f"a micro-batch below {lo.micro_batch}")
    offload = space.cpu_offload_layers
    if offload:  # candidates.offload_space pinned pp 1 and recompute none: not the user's pins
        ways.append(
            f"offload more than {offload} layers, or drop --cpu-offload-layers (pipeline "
            "stages and recompute are tried then)"
        )
    elif "full" not in space.recompute:
        ways.append("allow full recompute (add full to --recompute)")
    if 3 not in space.zero_stages:
        ways.append("allow ZeRO-3 (add 3 to --zero)")
    pinned = [f"--{a} {getattr(space, a)}" for a in ("tp", "pp", "dp", "cp", "ep")
              if getattr(space, a) is not None and not (offload and a == "pp")]  # fmt: skip
    if pinned:
        ways.append(f"drop the pins ({' '.join(pinned)})")
    if peak_gib <= hbm_gib and space.memory_headroom > 0:
        ways.append(f"a smaller --memory-headroom than {space.memory_headroom:g}")
    return ", ".join(ways[:-1]) + " or " + ways[-1]


def _empty_space_reason(cluster: Cluster, space: SearchSpace) -> str:
    """Why no (tp, pp, cp, dp) with tp * pp * cp * dp == num_gpus survives the pins and caps."""
    n = cluster.num_gpus
    pins = {a: getattr(space, a) for a in ("tp", "pp", "cp", "dp") if getattr(space, a)}
    product = 1
    for v in pins.values():
        product *= v
    if pins and n % product:
        named = " x ".join(f"{a} {v}" for a, v in pins.items())
        return f"the pinned degrees ({named} = {product}) do not divide the {n} GPUs"
    return f"the pins and caps leave no tp x pp x cp x dp equal to the {n} GPUs"
