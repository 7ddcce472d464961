"""Search inputs (SearchSpace, SolverOptions) and outputs (SolveStats, PlanResult)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StrictBool,
    ValidationInfo,
    field_validator,
)

from cost_models.framework import FrameworkProfile, profile
from cost_models.goodput import Goodput
from cost_models.specs import (
    MAX_GPUS,
    MAX_LAYERS,
    MAX_TOKENS,
    Axis,
    Cluster,
    Estimate,
    InputSpec,
    Layout,
    ModelSpec,
    PipelineSchedule,
    Recompute,
    Spec,
    Workload,
)

# The rank orders Megatron-Core builds (megatron/training/initialize.py: order "tp-cp-ep-dp-pp",
# or "tp-cp-ep-pp-dp" under --use-tp-pp-dp-mapping; EP sits just before DP, cost_models.rankmap).
MEGATRON_RANK_ORDERS: tuple[tuple[Axis, ...], ...] = (
    (Axis.TP, Axis.CP, Axis.DP, Axis.PP),
    (Axis.TP, Axis.CP, Axis.PP, Axis.DP),
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
    recompute_granularity: bool = Field(
        True,
        description="also search Megatron's finer recompute knobs: selective recompute_modules "
        "beyond core_attn and full recompute of only some layers per model chunk (block); "
        "candidates.recompute_choices lists them",
    )
    framework: Literal["megatron", "torchtitan", "deepspeed"] | None = Field(
        None,
        description="restrict the space to what this framework runs (cost_models.framework: "
        "rank orders within rank_orders, ZeRO stages, recompute, interleaving, CP/EP, pipeline "
        "splits); None: no framework rules (planner.plan_for, planner.search_inputs and the CLI default to megatron)",
    )
    search_order: bool = Field(
        True, description="search the rank order (placement of axes on tiers); False: tp,cp,dp,pp"
    )
    rank_orders: tuple[tuple[Axis, ...], ...] | None = Field(
        MEGATRON_RANK_ORDERS,
        description="rank orders the search may offer (innermost axis first): by default the two "
        "Megatron-Core builds; a framework profile narrows them; None: all 24 (exploration)",
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

    pp_schedules: tuple[PipelineSchedule, ...] = Field(
        ("1f1b",),
        min_length=1,
        description="pipeline schedules tried: 1f1b (interleaved when vp > 1) and, where the "
        "framework runs it, dualpipe (DeepSeek-V3; fixed global batch, even stage split only)",
    )
    ep_overlap: tuple[bool, ...] = Field(
        (False,),
        min_length=1,
        description="MoE all-to-all overlap with another micro-batch's compute tried (Megatron "
        "--overlap-moe-expert-parallel-comm); True only applies to layouts with ep > 1",
    )

    cpu_offload_layers: NonNegativeInt = Field(
        0,
        le=MAX_LAYERS,
        strict=True,
        description="CPU activation offloading of the first this many layers in every plan "
        "(Layout.cpu_offload_layers, Megatron --cpu-offloading-num-layers): the search keeps "
        "to pp 1 and recompute none, as Megatron refuses offloading with either; 0: off",
    )
    account_for_embedding_in_pipeline_split: StrictBool | None = Field(
        None,
        description="every pp > 1 plan counts the input embedding as one decoder layer in its "
        "stage split (Layout.account_for_embedding_in_pipeline_split, Megatron "
        "--account-for-embedding-in-pipeline-split); None, with the loss's None too: the search "
        "counts them only where pp * vp exceeds num_layers by one (the loss) or two (both)",
    )
    account_for_loss_in_pipeline_split: StrictBool | None = Field(
        None,
        description="every pp > 1 plan counts the loss as one decoder layer in its stage split "
        "(Layout.account_for_loss_in_pipeline_split, Megatron "
        "--account-for-loss-in-pipeline-split); None: see the embedding's",
    )

    @field_validator("pp_schedules")
    @classmethod
    def _dualpipe_needs_fixed_batch_even_split(
        cls, v: tuple[str, ...], info: ValidationInfo
    ) -> tuple[str, ...]:
        # DualPipe needs an even number of micro-batches (batch_choices steps by micro_batch*dp)
        # and the CP-SAT stage partition prices the 1F1B schedule only.
        if "dualpipe" in v and info.data.get("global_batch_range") is not None:
            raise ValueError("dualpipe needs a fixed global batch, not a global batch range")
        if "dualpipe" in v and info.data.get("stage_split") == "search":
            raise ValueError("dualpipe is priced with the even stage split only")
        return v

    @field_validator("stage_split")
    @classmethod
    def _split_needs_fixed_batch(cls, v: str, info: ValidationInfo) -> str:
        # The partition solver is built for one batch; a range would need one per batch.
        if v == "search" and info.data.get("global_batch_range") is not None:
            raise ValueError("search needs a fixed global batch, not a global batch range")
        return v

    @field_validator("rank_orders")
    @classmethod
    def _orders_are_permutations(
        cls, v: tuple[tuple[Axis, ...], ...] | None
    ) -> tuple[tuple[Axis, ...], ...] | None:
        if v is not None:
            if not v:
                raise ValueError("give at least one rank order (None searches all 24)")
            for order in v:
                if sorted(order) != sorted(Axis):
                    raise ValueError(f"each order must list tp, cp, dp, pp once (got {order})")
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
    def profile(self) -> FrameworkProfile | None:
        """The framework profile the space is narrowed to (cost_models.framework); None: a
        search without framework restriction."""
        return None if self.framework is None else profile(self.framework)

    @property
    def batch_max(self) -> int | None:
        """The range's MAX, which plans are ranked at (scale.scaled_step_s); None: fixed batch."""
        return None if self.global_batch_range is None else self.global_batch_range[1]

    @property
    def objective_unit(self) -> Literal["step_time_s", "s_per_sequence"]:
        return "step_time_s" if self.global_batch_range is None else "s_per_sequence"


class SolverOptions(InputSpec):
    """How the search runs."""

    engine: Literal["branch-and-bound", "exhaustive"] = Field(
        "branch-and-bound",
        description="branch-and-bound (default: exact best-first search whose bounds and stage "
        "partition use CP-SAT) or the exhaustive oracle",
    )
    top_k: PositiveInt = Field(5, le=10_000, description="ranked plans returned")
    top_variants: bool = Field(
        False,
        description="rank every plan (near variants of the best: other ZeRO stages and rank "
        "orders) instead of one plan per family (degrees, vp, micro-batch, recompute)",
    )
    simplicity_tolerance: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="among plans within this fraction of the fastest, recommend the simplest "
        "(fewer parallel axes, no interleaving, no CP, lower ZeRO); 0: always the fastest",
    )
    time_limit_s: PositiveFloat = Field(60.0, le=1e6, description="seconds, whole search")
    objective: Literal["step_time", "goodput"] = Field(
        "step_time",
        description="rank by step time (per sequence with a batch range) or by goodput "
        "tokens/s/GPU (cost_models.goodput; planner/search/goodput_rank.py proves the ranking)",
    )
    deterministic: bool = True
    seed: NonNegativeInt = Field(0, le=2**31 - 1, description="CP-SAT random_seed (an int32)")
    work_limit: PositiveFloat | None = Field(
        None,
        le=1e9,
        description="with deterministic: the branch and bound's work limit in work units (about "
        "a millisecond each on the reference machine; planner/search/work.py WORK_PER_*), so "
        "that a search cut short stops at the same point on every machine; None: half the time "
        "limit's worth (work.default_work_limit). The time limit stays the wall-clock backstop",
    )


class SolveStats(Spec):
    """What the search did: status, objective and bound (step time, seconds), gap, wall time."""

    engine: Literal["exhaustive", "branch-and-bound"]
    status: Literal["PROVED", "STOPPED", "INFEASIBLE"] = Field(
        description="the search's certificate (docs/search.md#certificate)"
    )
    objective: float | None
    best_bound: float | None
    gap: float | None
    wall_time_s: float
    num_candidates: int = Field(description="layouts enumerated before filtering")
    num_scored: int = Field(description="layouts scored by the cost model")
    num_feasible: int = Field(description="layouts that fit in memory")
    objective_unit: Literal["step_time_s", "s_per_sequence", "goodput_tokens_per_s_per_gpu"] = (
        Field(
            "step_time_s",
            description="unit of objective and best_bound: step time (fixed global batch), "
            "seconds per sequence (global batch range), or goodput tokens/s/GPU (--objective "
            "goodput; higher is better, planner/search/goodput_rank.py)",
        )
    )
    work_units: float = Field(
        0.0, description="the search's work (planner/search/work.py WORK_PER_*)"
    )
    stopped_by: Literal["work_limit", "time_limit"] | None = Field(
        None,
        description="which limit cut the search short (STOPPED): the work limit (repeatable: "
        "the same input stops at the same point) or the wall-clock time limit (may differ run "
        "to run); None where none did",
    )
    num_partition_models: int = Field(
        0, description="stage-partition CP-SAT models solved (stage_split search)"
    )
    num_unproved_partitions: int = Field(
        0, description="of those, models stopped at their work limit before a proof (STOPPED)"
    )
    partition_max_gap: float | None = Field(
        None, description="largest gap any partition model reported (its own bound)"
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
    equivalents: tuple[tuple[Layout, ...], ...] = Field(
        (),
        description="per ranked plan, the other ZeRO stages / rank orders priced exactly like it "
        "(collapsed into it; planner/search/recommend.py)",
    )
    fastest_index: int = Field(
        0,
        description="index in `ranked` of the fastest plan; 0 unless a simpler plan within the "
        "simplicity tolerance is recommended first",
    )
    simplicity_tolerance: float = Field(0.0, description="the tolerance the recommendation used")
    framework: Literal["megatron", "torchtitan", "deepspeed"] | None = Field(
        None,
        description="the framework the plans are for (cost_models.framework profile); None: "
        "a search without framework restriction",
    )
    goodput: tuple[Goodput, ...] = Field(
        (),
        description="per ranked plan, its goodput figures (plan --goodput, --objective goodput; "
        "cost_models.goodput); empty without",
    )

    @property
    def framework_version(self) -> str | None:
        """The framework release the plans and exports target (the profile's version)."""
        return None if self.framework is None else profile(self.framework).version

    @property
    def best(self) -> Estimate:
        return self.ranked[0]

    def global_batch(self, index: int = 0) -> int:
        """Global batch (sequences) of a ranked plan: with a range each plan has its own."""
        return self.ranked[index].global_batch_seqs

    def plan_workload(self, index: int = 0) -> Workload:
        """The workload a ranked plan was scored with (its own global batch); launcher exports
        are functions of the result and this workload (planner/export/plan_exports.py)."""
        return self.workload.model_copy(update={"global_batch_seqs": self.global_batch(index)})
