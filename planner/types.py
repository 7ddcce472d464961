"""Search inputs (SearchSpace, SolverOptions) and outputs (SolveStats, PlanResult)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
)

from cost_models.specs import (
    MAX_GPUS,
    MAX_LAYERS,
    MAX_TOKENS,
    Cluster,
    Estimate,
    InputSpec,
    ModelSpec,
    Recompute,
    Spec,
    Workload,
)


class SearchSpace(InputSpec):
    """What the search may choose. A pinned degree fixes that axis; the rest is searched."""

    tp: PositiveInt | None = Field(None, le=MAX_GPUS, description="pin tensor-parallel degree")
    pp: PositiveInt | None = Field(None, le=MAX_GPUS, description="pin pipeline-parallel degree")
    dp: PositiveInt | None = Field(None, le=MAX_GPUS, description="pin data-parallel degree")
    cp: PositiveInt | None = Field(None, le=MAX_GPUS, description="pin context-parallel degree")
    ep: PositiveInt | None = Field(None, le=MAX_GPUS, description="pin expert-parallel degree")
    max_tp: PositiveInt | None = Field(None, le=MAX_GPUS)
    max_pp: PositiveInt | None = Field(None, le=MAX_GPUS)
    max_cp: PositiveInt | None = Field(None, le=MAX_GPUS)
    max_ep: PositiveInt | None = Field(None, le=MAX_GPUS)
    micro_batches: tuple[Annotated[int, Field(gt=0, le=MAX_TOKENS)], ...] = Field(
        (1, 2, 4, 8), min_length=1, max_length=64
    )
    max_vp: PositiveInt = Field(8, le=MAX_LAYERS, description="largest interleaving (virtual stages) tried")
    recompute: tuple[Recompute, ...] = Field(("none", "selective", "full"), min_length=1)
    zero_stages: tuple[Literal[0, 1, 2, 3], ...] = Field((0, 1, 2, 3), min_length=1)
    search_order: bool = Field(
        True, description="search the rank order (placement of axes on tiers); False: tp,cp,dp,pp"
    )
    memory_headroom: float = Field(
        0.10, ge=0, lt=1, description="fraction of HBM kept free (fragmentation, spikes)"
    )
    global_batch_range: tuple[int, int] | None = Field(
        None,
        description="(MIN, MAX) global batch in sequences: each plan takes its own batch in the "
        "range and plans rank by time per sequence (tokens/s); None: the workload's fixed batch",
    )

    stage_split: Literal["even", "search"] = Field(
        "even",
        description="layers per pipeline stage: even (the cost model's split) or search (a "
        "pp > 1 layout out of memory with the even split takes the CP-SAT partition's split, "
        "planner/search/partition.py; slower, fixed global batch only)",
    )

    @field_validator("stage_split")
    @classmethod
    def _split_needs_fixed_batch(cls, v: str, info: ValidationInfo) -> str:
        # The partition solver is built for one batch; a range would need one per batch.
        if v == "search" and info.data.get("global_batch_range") is not None:
            raise ValueError("search needs a fixed global batch, not a global batch range")
        return v

    @field_validator("global_batch_range")
    @classmethod
    def _range_ordered(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None:
            lo, hi = v
            if lo < 1:
                raise ValueError(f"MIN ({lo}) must be at least 1")
            if lo > hi:
                raise ValueError(f"MIN ({lo}) must not exceed MAX ({hi})")
            if hi > MAX_TOKENS:
                raise ValueError(f"MAX ({hi}) must be at most {MAX_TOKENS:,} sequences")
        return v

    @property
    def batch_max(self) -> int | None:
        """The range's MAX, which plans are ranked at (scale.scaled_step_s); None: fixed batch."""
        return None if self.global_batch_range is None else self.global_batch_range[1]

    @property
    def objective_unit(self) -> Literal["step_time_s", "s_per_sequence"]:
        return "step_time_s" if self.global_batch_range is None else "s_per_sequence"


class SolverOptions(InputSpec):
    """How the search runs."""

    engine: Literal["cp-sat", "exhaustive"] = Field(
        "cp-sat", description="cp-sat (default) or the exhaustive oracle"
    )
    top_k: PositiveInt = Field(5, le=10_000, description="ranked plans returned")
    time_limit_s: PositiveFloat = Field(60.0, le=1e6, description="seconds, whole search")
    deterministic: bool = True
    seed: NonNegativeInt = Field(0, le=2**31 - 1, description="CP-SAT random_seed (an int32)")
    num_workers: PositiveInt = Field(8, le=1024)


class SolveStats(Spec):
    """What the search did: status, objective and bound (step time, seconds), gap, wall time."""

    engine: Literal["exhaustive", "cp-sat"]
    status: str
    objective: float | None
    best_bound: float | None
    gap: float | None
    wall_time_s: float
    num_candidates: int = Field(description="layouts enumerated before filtering")
    num_scored: int = Field(description="layouts scored by the cost model")
    num_feasible: int = Field(description="layouts that fit in memory")
    objective_unit: Literal["step_time_s", "s_per_sequence"] = Field(
        "step_time_s",
        description="unit of objective and best_bound: step time (fixed global batch) or seconds "
        "per sequence (global batch range)",
    )


class PlanResult(Spec):
    """Ranked plans (best first) with the search statistics and why candidates were rejected."""

    model: ModelSpec
    cluster: Cluster
    workload: Workload
    ranked: tuple[Estimate, ...]
    solver: SolveStats
    rejections: dict[str, int] = Field(description="rejection reason -> number of candidates")
    usable_memory_gib: float = Field(description="HBM per GPU minus the memory headroom")
    global_batch_range: tuple[int, int] | None = Field(
        None, description="the searched (MIN, MAX) global batch; `workload` has the best plan's"
    )

    @property
    def best(self) -> Estimate:
        return self.ranked[0]

    def global_batch(self, index: int = 0) -> int:
        """Global batch (sequences) of a ranked plan: with a range each plan has its own."""
        e = self.ranked[index]
        return e.num_microbatches * e.layout.micro_batch * e.layout.dp

    def plan_workload(self, index: int = 0) -> Workload:
        """The workload a ranked plan was scored with (its own global batch)."""
        return self.workload.model_copy(update={"global_batch_seqs": self.global_batch(index)})

    # Launcher hand-off (planner/export/launch.py, planner/place/ranks.py); `index` picks a ranked plan.

    def to_megatron_args(self, index: int = 0) -> list[str]:
        from .export.launch import megatron_args

        return megatron_args(self.model, self.plan_workload(index), self.ranked[index])

    def to_torchtitan(self, index: int = 0) -> dict:
        """{"config": {section: {field: value}}, "overrides": [...], "toml": str}."""
        from .export.launch import torchtitan

        return torchtitan(self.model, self.plan_workload(index), self.ranked[index])

    def to_deepspeed_config(self, index: int = 0) -> dict:
        from .export.launch import deepspeed_config

        return deepspeed_config(self.plan_workload(index), self.ranked[index])

    def device_mesh(self, index: int = 0) -> dict:
        """{"mesh_shape": [...], "mesh_dim_names": [...]} for init_device_mesh."""
        from .place.ranks import device_mesh

        return device_mesh(self.ranked[index].layout)

    def rank_groups(self, index: int = 0) -> dict[str, list[list[int]]]:
        from .place.ranks import rank_groups

        return rank_groups(self.ranked[index].layout)

    def rank_map(self, index: int = 0, max_nodes: int | None = None) -> list[dict]:
        """Rows {rank, node, gpu, dp, pp, cp, tp, ep}, for the first `max_nodes` nodes or all."""
        from .place.ranks import rank_map

        return rank_map(self.cluster, self.ranked[index].layout, max_nodes)
