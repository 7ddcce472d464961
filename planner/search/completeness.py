"""Search completeness against published runs: is each record's own layout in the space, and is
the planner's best at least as fast (by the same cost model) as that layout?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cost_models import framework
from cost_models.errors import InvalidInput, NoFeasiblePlan
from cost_models.estimate import estimate
from cost_models.rules import layout_violations

from ..types import SearchSpace, SolverOptions
from ..validate import record_inputs
from . import solve


@dataclass
class CompletenessRow:
    id: str
    num_gpus: int
    record_tokens_per_s_per_gpu: float | None  # predicted for the record's own layout
    best_tokens_per_s_per_gpu: float | None  # predicted for the planner's best plan
    excluded_by: str | None  # the documented constraint that keeps the record's layout out

    @property
    def ratio(self) -> float | None:
        """record / best (1.0: the published layout is the planner's optimum)."""
        if self.record_tokens_per_s_per_gpu is None or not self.best_tokens_per_s_per_gpu:
            return None
        return self.record_tokens_per_s_per_gpu / self.best_tokens_per_s_per_gpu


def exclusion(record_layout, model, cluster, workload, space: SearchSpace) -> str | None:
    """Why the record's layout is outside `space` (None if it is inside)."""
    lo = record_layout
    problems = layout_violations(model, cluster, workload, lo)
    if problems:
        return f"illegal under cost_models.rules: {problems[0]}"
    if lo.micro_batch not in space.micro_batches:
        return f"micro_batch {lo.micro_batch} not in {space.micro_batches}"
    if lo.vp > space.max_vp:
        return f"vp {lo.vp} > max_vp {space.max_vp}"
    prof = space.profile
    searched_etp = framework.expert_tp(prof, model, lo.tp, lo.ep)
    if lo.etp != searched_etp:
        return f"expert-TP {lo.etp} is not searched (the search's: {searched_etp})"
    if lo.sequence_parallel != (lo.tp > 1):
        return "sequence parallelism is always on when tp > 1"
    if lo.recompute not in space.recompute or lo.zero_stage not in space.zero_stages:
        return "recompute / ZeRO choice outside the space"
    usable = cluster.gpu.hbm_gib * (1 - space.memory_headroom)
    peak = estimate(model, cluster, workload, lo).peak_memory_gib
    if peak > usable:
        return f"peak {peak:.1f} GiB above usable {usable:.1f} GiB (memory headroom)"
    return None


def check_record(record: dict[str, Any], space: SearchSpace | None = None) -> CompletenessRow:
    space = space or SearchSpace()
    rid = str(record.get("id", "?"))
    model, cluster, workload, lo = record_inputs(record)
    try:
        rec = estimate(model, cluster, workload, lo).tokens_per_s_per_gpu
    except InvalidInput:
        rec = None
    excluded = exclusion(lo, model, cluster, workload, space)
    try:
        ranked, _, _ = solve.search(model, cluster, workload, space, SolverOptions(top_k=1))
        best = ranked[0].tokens_per_s_per_gpu
    except NoFeasiblePlan as err:
        best, excluded = None, excluded or f"no feasible plan: {err}"
    return CompletenessRow(rid, cluster.num_gpus, rec, best, excluded)
