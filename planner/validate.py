"""`planner validate`: predicted vs measured tokens/s/GPU (and peak memory) on published runs.

A record is turned into a model, a cluster (the GPU's usual system, with the scale-out bandwidth
read from the record's `interconnect` text where it states one), a workload and a layout. Fields
the record leaves null take documented defaults (FILL_RULES). A record that cannot be scored gets
its reason in `error`; it never stops the run.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    StrictBool,
    StrictInt,
    ValidationError,
)

import models_zoo
from cost_models import estimate
from cost_models.errors import InvalidInput, PlannerError, describe_validation_error
from cost_models.framework import (
    PHYSICS_FIELDS,
    input_violations,
    record_profile,
    zero_input_violations,
)
from cost_models.params import total_params
from cost_models.specs import (
    MAX_GPUS,
    MAX_LAYERS,
    MAX_TOKENS,
    Cluster,
    Estimate,
    Layout,
    ModelSpec,
    Precision,
    Recompute,
    Workload,
)

# Null layout fields in a record take these values (what Megatron-LM does when the flag is absent,
# except zero_stage: NeMo / Megatron-Bridge recipes turn the distributed optimizer on).
FILL_RULES: dict[str, Any] = {
    "vp": 1,
    "micro_batch": 1,
    "recompute": "none",
    "zero_stage": 1,
    "cp": 1,
    "ep": 1,
    "precision": "bf16",
}
NETWORK_SETTINGS = frozenset(
    {"moe_dispatcher", "moe_flex_backend", "pp_schedule", "max_nodes_per_token", "ep_overlap"}
)
"""Issue 16's run settings: the MoE dispatcher (Workload.moe_dispatcher; its flex back-end,
Workload.moe_flex_backend), the pipeline schedule
(Layout.pp_schedule), node-limited routing (MoESpec.max_nodes_per_token) and the MoE all-to-all
overlapped with another micro-batch (Layout.ep_overlap: Megatron's
overlap_moe_expert_parallel_comm)."""
MEMORY_SETTINGS = frozenset(
    {
        "optimizer_moments",
        "activation_func_fp8_input_store",
        "attention_output_store",
        "grads_set_to_none",
        "logits_alive_in_backward",
        "fsdp_root_holds_embedding",
        "fused_qkv",
        "main_grads",
        "fp8_params",
    }
)
"""Workload fields that change what a run keeps in memory (cost_models/specs.py Workload);
unstated, each keeps the Workload default (main_grads: fp32, Megatron-LM's under bf16)."""
LAYOUT_SETTINGS = frozenset({"recompute_modules", "cpu_offload_layers"})
"""Layout fields a record's layout mapping has no column for: the modules a selective
recompute reruns (Layout.recompute_modules, Megatron TransformerConfig.recompute_modules;
unstated: Megatron's default, core_attn) and the layers whose activations CPU offloading moves
to the host (Layout.cpu_offload_layers, Megatron --cpu-offloading-num-layers; unstated: 0)."""
PEAK_MEMORY_STATS = ("total", "allocated")
"""What a record's peak_memory_gib measured (its `settings.peak_memory_stat`): 'total' (the
default) is compared with the whole predicted peak; 'allocated' is
torch.cuda.max_memory_allocated, which holds neither the CUDA context nor the caching
allocator's reserved-but-free blocks, so it is compared with the peak less the stage's reserve
(StageMemory.reserve_gib: cost_models.memory CUDA_CONTEXT_GIB and ALLOCATOR_OVERHEAD)."""
COMPUTE_SETTINGS = frozenset(
    {"fp8_recipe", "cuda_graphs", "full_iteration_cuda_graph", "moe_force_balance", "fused_norm",
     "bf16_layers_start", "bf16_layers_end", "moe_router_padding", "moe_capacity_factor",
     "moe_pad_to_capacity"}
)  # fmt: skip
"""Workload fields of a run's compute recipe that no framework profile sets (issue 32): the fp8
scaling recipe (Megatron --fp8-recipe delayed / tensorwise / blockwise) and per-layer CUDA
graphs (Megatron --cuda-graph-impl transformer_engine) or one graph of the whole iteration
(--cuda-graph-impl full_iteration) and forced-even MoE routing (Megatron
--moe-router-force-load-balancing) and, on an eager run, whether its PyTorch fuses the norm
(Workload.fused_norm), and the layers kept in bf16 under a quantized precision (Megatron
--first-last-layers-bf16: Workload.bf16_layers_start / _end), and MoE routing padded to the
quantization alignment (Megatron --moe-router-padding-for-fp8: Workload.moe_router_padding), and
token-drop MoE (Megatron --moe-expert-capacity-factor / --moe-pad-expert-input-to-capacity:
Workload.moe_capacity_factor / moe_pad_to_capacity)."""
DP_SETTINGS = frozenset({"dp_bucket_elements"})
"""The data-parallel gradient bucket a run set (Workload.dp_bucket_elements; Megatron
--ddp-bucket-size, DistributedDataParallelConfig.bucket_size): how many collectives the
reduction is issued as and how large the last one, which no backward hides, is
(cost_models.stage.dp_buckets, dp_edge_buckets_s)."""
RECORD_SETTINGS = (
    frozenset(PHYSICS_FIELDS)
    | DP_SETTINGS
    | {"tp_comm_overlap", "vp"}
    | NETWORK_SETTINGS
    | MEMORY_SETTINGS
    | COMPUTE_SETTINGS
    | LAYOUT_SETTINGS
    | {"peak_memory_stat"}
)
"""Keys of a record's explicit `settings` mapping: Workload physics fields, the layout's
tp_comm_overlap, and vp (a stated interleaved schedule the layout leaves null),
NETWORK_SETTINGS, MEMORY_SETTINGS, COMPUTE_SETTINGS and LAYOUT_SETTINGS (the shared data
file's `settings:` field)."""

SYSTEM_FOR_GPU = {
    "a100-sxm-40gb": "dgx-a100",
    "a100-sxm-80gb": "dgx-a100",
    "h100-sxm-80gb": "dgx-h100",
    "h100-sxm-96gb-hbm2e-500w": "dgx-h100",
    "h200-sxm-141gb": "dgx-h200",
    "h800-sxm-80gb": "h800",
    "b200": "dgx-b200",
    "gb200": "gb200-nvl72",
    "gb300": "gb300-nvl72",
    "b300": "dgx-b300",
    "mi300x": "mi300x-roce",
    "mi355x": "mi355x-roce",
}


def _error_pct(predicted: float, measured: float | None) -> float | None:
    """Signed error of a prediction in % of the measurement (None where nothing was measured)."""
    if not measured:
        return None
    return (predicted - measured) / measured * 100


@dataclass(frozen=True)
class ValidationRow:
    id: str
    source: str
    gpu: str
    family: str
    measured_tokens_per_s_per_gpu: float | None
    measured_peak_memory_gib: float | None
    estimate: Estimate | None
    error: str | None
    hbm_gib: float | None = None
    params_total: int | None = None
    params_active: int | None = None
    filled: tuple[str, ...] = ()
    """Layout fields the record left null and FILL_RULES filled (they drive memory and time)."""
    workload_key: str | None = None
    """The job the run trained (model architecture without its name, GPU, sequence length,
    global batch): runs with the same key and a different layout_key form the pairs of
    `pair_order`."""
    layout_key: str | None = None
    """How the run was laid out: the record's layout (global batch aside), framework, settings."""
    peak_memory_stat: str = "total"
    """What the record's peak memory measured (PEAK_MEMORY_STATS)."""

    @property
    def predicted_peak_gib(self) -> float | None:
        """The predicted peak in the statistic the record measured (PEAK_MEMORY_STATS)."""
        e = self.estimate
        if e is None:
            return None
        if self.peak_memory_stat == "allocated" and e.stage_memory:
            return max(s.total_gib - s.reserve_gib for s in e.stage_memory)
        return e.peak_memory_gib

    @property
    def fit_note(self) -> str | None:
        """A predicted peak above the GPU's HBM: the record cannot run as described."""
        e = self.estimate
        if e is None or self.hbm_gib is None or e.peak_memory_gib <= self.hbm_gib:
            return None
        note = (
            f"cannot fit as described: predicted peak {e.peak_memory_gib:.1f} GiB > "
            f"{self.hbm_gib:.0f} GiB HBM"
        )
        if self.filled:
            note += f"; unset in the record, filled by default: {', '.join(self.filled)}"
        return note + (
            "; the run used memory savings the record does not state (offload, recompute), "
            "or the memory model overestimates it"
        )

    @property
    def tokens_error_pct(self) -> float | None:
        if self.estimate is None:
            return None
        return _error_pct(self.estimate.tokens_per_s_per_gpu, self.measured_tokens_per_s_per_gpu)

    @property
    def memory_error_pct(self) -> float | None:
        predicted = self.predicted_peak_gib
        if predicted is None:
            return None
        return _error_pct(predicted, self.measured_peak_memory_gib)

    def contract_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "id": self.id,
            "predicted_tokens_per_s_per_gpu": e.tokens_per_s_per_gpu if e else None,
            "predicted_step_time_s": e.step_time_s if e else None,
            "predicted_peak_memory_gib": self.predicted_peak_gib,
            "fits_in_memory": e.fits_in_memory if e else None,
            "mfu": e.mfu if e else None,
            "error": self.error,
            "params_total": self.params_total,
            "params_active": self.params_active,
            "measured_tokens_per_s_per_gpu": self.measured_tokens_per_s_per_gpu,
            "tokens_error_pct": self.tokens_error_pct,
            "measured_peak_memory_gib": self.measured_peak_memory_gib,
            "memory_error_pct": self.memory_error_pct,
        }


def scale_out_gb_per_s(text: str | None, gpus_per_node: int) -> float | None:
    """Per-GPU scale-out bandwidth stated in an interconnect description, in GB/s (or None)."""
    if not text:
        return None
    nics = re.search(r"(\d+)\s*x\s*(\d+)\s*G(?:b/s|bps|\b)", text)
    if nics:
        return int(nics.group(1)) * int(nics.group(2)) / 8 / gpus_per_node
    per_node = re.search(r"(\d+)\s*G(?:b/s|bps)\s+node-node", text)
    if per_node:
        return int(per_node.group(1)) / 8 / gpus_per_node
    gbit = re.search(r"(\d+)\s*G(?:b/s|bps)", text)
    if gbit:
        return int(gbit.group(1)) / 8
    gbyte = re.search(r"(\d+(?:\.\d+)?)\s*GB/s per GPU", text)
    if gbyte:
        return float(gbyte.group(1))
    return None


def record_cluster(record: dict[str, Any], cluster: Cluster | None = None) -> Cluster:
    """The record's cluster: `cluster` (a calibrated cluster file) when its GPU is the record's,
    else the GPU's usual system. A calibrated cluster keeps its measured tiers (the record's
    interconnect text does not override what was measured)."""
    gpu_id = record["gpu"]
    if cluster is not None and cluster.gpu.id == gpu_id:
        calibrated = cluster.model_dump()
        n = int(record["num_gpus"])
        per_node = int(record.get("gpus_per_node") or calibrated["gpus_per_node"])
        if n % per_node == 0 or n < per_node:
            calibrated["gpus_per_node"] = per_node
        calibrated["num_gpus"] = n
        return Cluster.model_validate(calibrated)
    system = SYSTEM_FOR_GPU.get(gpu_id)
    if system is None:
        raise InvalidInput(f"gpu: no known system for GPU {gpu_id!r}")
    base = models_zoo.load_cluster(system).model_dump()
    if base["gpu"]["id"] != gpu_id:
        # A system's kernel tables were measured on its own GPU (models_zoo/kernels/index.json):
        # another GPU priced on that system (the 500 W H100 96GB on dgx-h100) keeps the curve.
        base["kernels"] = None
    base["gpu"] = models_zoo.load_gpu(gpu_id).model_dump()
    n = int(record["num_gpus"])
    per_node = int(record.get("gpus_per_node") or base["gpus_per_node"])
    if n % per_node == 0 or n < per_node:
        base["gpus_per_node"] = per_node
    bw = scale_out_gb_per_s(record.get("interconnect"), base["gpus_per_node"])
    if bw is not None:
        base["tiers"] = [base["tiers"][0]] + [
            {**t, "bandwidth_gb_per_s": bw} for t in base["tiers"][1:]
        ]
    base["num_gpus"] = n
    return Cluster.model_validate(base)


def record_settings(record: dict[str, Any]) -> dict[str, Any]:
    """The record's explicit run settings: its own `settings` mapping (published_runs.yaml's
    field for what a publication states only in prose), else none."""
    settings = record.get("settings")
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise InvalidInput("settings: must be a mapping of setting -> value")
    unknown = sorted(set(settings) - RECORD_SETTINGS)
    if unknown:
        raise InvalidInput(
            f"settings: unknown {', '.join(unknown)}; known: {', '.join(sorted(RECORD_SETTINGS))}"
        )
    stat = settings.get("peak_memory_stat", "total")
    if stat not in PEAK_MEMORY_STATS:
        raise InvalidInput(
            f"settings: peak_memory_stat must be one of {', '.join(PEAK_MEMORY_STATS)}, got {stat!r}"
        )
    return settings


def _switch(settings: dict[str, Any], key: str) -> bool:
    """A true/false setting as written: bool("false") would be True."""
    value = settings[key]
    if not isinstance(value, bool):
        raise InvalidInput(f"settings: {key} must be true or false, got {value!r}")
    return value


def record_inputs(
    record: dict[str, Any], cluster: Cluster | None = None
) -> tuple[ModelSpec, Cluster, Workload, Layout]:
    """Model, cluster, workload and layout of a record. The physics come from the profile of
    its `framework` field (cost_models.framework.RECORD_FRAMEWORKS; absent: `other`, the cost
    model's defaults) and its explicit `settings`; nothing is read from notes or source text."""
    model = ModelSpec.model_validate(record["model"])
    lay = {k: (v if v is not None else FILL_RULES.get(k)) for k, v in record["layout"].items()}
    profile = record_profile(record.get("framework") or "other")
    settings = record_settings(record)
    own = MEMORY_SETTINGS | COMPUTE_SETTINGS | DP_SETTINGS
    physics = {k: v for k, v in settings.items() if k in PHYSICS_FIELDS or k in own}
    for key in ("moe_dispatcher", "moe_flex_backend"):
        if key in settings:
            physics[key] = settings[key]
    if model.moe is not None and "max_nodes_per_token" in settings:
        moe = model.moe.model_copy(update={"max_nodes_per_token": settings["max_nodes_per_token"]})
        model = model.model_copy(update={"moe": moe})
    workload = profile.workload(
        Workload(
            seq_len=model.seq_len or 4096,
            global_batch_seqs=lay["global_batch_seqs"],
            precision=lay["precision"],
            **physics,
        ),
        model,
    )
    sp = lay.get("sequence_parallel")
    if record["layout"].get("vp") is None and "vp" in settings:
        lay["vp"] = settings["vp"]
    fields: dict[str, Any] = {}
    if "tp_comm_overlap" in settings:
        fields["tp_comm_overlap"] = _switch(settings, "tp_comm_overlap") and lay["tp"] > 1
    if "pp_schedule" in settings:
        fields["pp_schedule"] = settings["pp_schedule"]
    if "ep_overlap" in settings:
        fields["ep_overlap"] = _switch(settings, "ep_overlap")
    if "recompute_modules" in settings:
        fields["recompute_modules"] = settings["recompute_modules"]
    if "cpu_offload_layers" in settings:
        fields["cpu_offload_layers"] = settings["cpu_offload_layers"]
    for key in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        if lay.get(key):  # stated true (null / absent: Megatron's default, false)
            fields[key] = True
    if lay.get("etp"):  # unstated: 1, or tp where the launcher's experts follow TP at EP 1
        fields["etp"] = lay["etp"]
    layout = profile.layout(
        Layout(
            tp=lay["tp"],
            pp=lay["pp"],
            dp=lay["dp"],
            cp=lay["cp"],
            ep=lay["ep"],
            vp=lay["vp"],
            micro_batch=lay["micro_batch"],
            recompute=lay["recompute"],
            zero_stage=lay["zero_stage"],
            sequence_parallel=bool(lay["tp"] > 1 if sp is None else sp),
            **fields,
        ),
        model,
    )
    # A record stating an input its framework's launcher cannot run (bf16 main gradients or fp8
    # primary weights under torchtitan / DeepSpeed, CPU offloading outside Megatron) is refused
    # as plan and the exports refuse it (FrameworkProfile.no_inputs), never priced as if it ran.
    refused = input_violations(profile, workload, layout.cpu_offload_layers)
    refused += zero_input_violations(profile, workload, layout)  # Megatron bf16 moments at ZeRO-0
    if refused:
        raise InvalidInput(f"settings: framework {profile.name} cannot run {'; '.join(refused)}")
    return model, record_cluster(record, cluster), workload, layout


def record_split(record: RunRecord | dict[str, Any]) -> tuple[int, ...] | None:
    """The pipeline split a record's layout states (RunLayout.layers_per_stage), for estimate's
    layers_per_stage; None: the planner's even split."""
    if isinstance(record, RunRecord):
        split = record.layout.layers_per_stage
    else:
        split = record["layout"].get("layers_per_stage")
    return None if split is None else tuple(split)


# ------------------------------------------------------------------------- record schema
# The fields of ../shared/data/published_runs.yaml (its header documents them). A record is
# checked against RunRecord before anything reads it; a record that breaks it is reported with
# its reason and the others are still scored (issue 19: loss-free validate).

Framework = Literal[
    "megatron", "torchtitan", "deepspeed", "megatron-deepspeed", "llm-foundry", "other"
]
"""published_runs.yaml header: the training software that produced the run (the keys of
cost_models.framework.RECORD_FRAMEWORKS, which
tests/integration/cli/test_fuzz_regressions.py checks)."""
_Text = Annotated[str, Field(max_length=10_000)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class RunLayout(_Record):
    """A record's `layout`; null fields take FILL_RULES."""

    tp: PositiveInt = Field(le=MAX_GPUS)
    pp: PositiveInt = Field(le=MAX_GPUS)
    dp: PositiveInt = Field(le=MAX_GPUS)
    cp: PositiveInt | None = Field(None, le=MAX_GPUS)
    ep: PositiveInt | None = Field(None, le=MAX_GPUS)
    etp: PositiveInt | None = Field(
        None,
        le=MAX_GPUS,
        description="expert tensor parallel degree (Megatron --expert-tensor-parallel-size); "
        "null: 1",
    )
    vp: PositiveInt | None = Field(None, le=MAX_LAYERS)
    sequence_parallel: StrictBool | None = None
    zero_stage: Literal[0, 1, 2, 3] | None = None
    micro_batch: PositiveInt | None = Field(None, le=MAX_TOKENS)
    global_batch_seqs: PositiveInt = Field(le=MAX_TOKENS)
    recompute: Recompute | None = None
    precision: Precision | None = None
    # Megatron-Core's pipeline-split flags as the run set them (absent or null: false):
    # Layout.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split.
    account_for_embedding_in_pipeline_split: StrictBool | None = None
    account_for_loss_in_pipeline_split: StrictBool | None = None
    # The run's own pipeline split where it set one (Megatron --pipeline-model-parallel-layout
    # or --decoder-first/last-pipeline-num-layers): decoder layers per model chunk, pp * vp of
    # them in model order (rules.split_violations); absent or null: the planner's even split.
    layers_per_stage: list[Annotated[StrictInt, Field(ge=0, le=MAX_LAYERS)]] | None = Field(
        None, max_length=MAX_LAYERS
    )


class RunRecord(_Record):
    """One measured run (published_runs.yaml schema); `model` is checked by ModelSpec later."""

    id: _Text | None = None
    framework: Framework | None = None
    source: _Text | None = None
    confidence: Literal["high", "medium", "low"] | None = None
    model: dict[str, Any]
    gpu: _Text
    num_gpus: PositiveInt = Field(le=MAX_GPUS)
    gpus_per_node: PositiveInt | None = Field(None, le=MAX_GPUS)
    interconnect: _Text | None = None
    layout: RunLayout
    measured_tokens_per_s_per_gpu: PositiveFloat | None = None
    tokens_derivation: _Text | None = None
    measured_step_time_s: PositiveFloat | None = None
    measured_mfu_pct: float | None = Field(None, gt=0, le=100)
    peak_memory_gib: PositiveFloat | None = None
    notes: _Text | None = None
    settings: dict[str, Any] | None = Field(
        None, description="explicit run settings (record_settings checks the keys)"
    )


def _measured(value: Any) -> float | None:
    """A measured figure of a record that may not have passed RunRecord: a finite number or None
    (the row still shows what was measured next to the reason it was not scored)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _family(record: dict[str, Any]) -> str:
    model = record.get("model")
    name = str(model.get("name", "?")) if isinstance(model, dict) else "?"
    match = re.search(r"[A-Za-z]{2,}", name)  # "530B (MegaScale ...)" -> megascale
    return match.group(0).lower() if match else "?"


def validate_record(
    record: Any, cluster: Cluster | None = None, index: int | None = None
) -> ValidationRow:
    """Score one record; any reason it cannot be scored goes into the row's `error` (one line).
    `index` (its position in the file) names a record without an id."""
    fallback = "?" if index is None else f"#{index}"
    if not isinstance(record, dict):
        return ValidationRow(fallback, "?", "?", "?", None, None, None, "record is not a mapping")
    raw_id = record.get("id")
    rid = " ".join(raw_id.split())[:120] if isinstance(raw_id, str) and raw_id.strip() else fallback
    row = {
        "id": rid,
        "source": rid.split("-")[0],
        "gpu": " ".join(str(record.get("gpu", "?")).split())[:60],
        "family": _family(record),
        "measured_tokens_per_s_per_gpu": _measured(record.get("measured_tokens_per_s_per_gpu")),
        "measured_peak_memory_gib": _measured(record.get("peak_memory_gib")),
    }
    stated = record.get("layout") if isinstance(record.get("layout"), dict) else {}
    filled = tuple(
        f"{k}={FILL_RULES[k]}" for k in ("recompute", "micro_batch", "zero_stage", "vp")
        if k in FILL_RULES and stated.get(k) is None
    )  # fmt: skip
    try:
        checked = RunRecord.model_validate(record)
    except ValidationError as err:
        return ValidationRow(**row, estimate=None, error=describe_validation_error(err))
    try:
        # record_inputs reads the checked record (every known field present, null if absent).
        model, on, workload, layout = record_inputs(checked.model_dump(), cluster)
        e = estimate(model, on, workload, layout, layers_per_stage=record_split(checked))
        stat = record_settings(checked.model_dump()).get("peak_memory_stat", "total")
        return ValidationRow(
            **row,
            peak_memory_stat=stat,
            estimate=e,
            error=None,
            hbm_gib=on.gpu.hbm_gib,
            params_total=total_params(model),
            params_active=total_params(model, active_only=True),
            filled=filled,
            **_pair_keys(checked, model, workload),
        )
    except ValidationError as err:
        return ValidationRow(**row, estimate=None, error=describe_validation_error(err))
    except (PlannerError, KeyError, TypeError, ValueError, ArithmeticError) as err:
        reason = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        return ValidationRow(**row, estimate=None, error=" ".join(reason.split()))


def _pair_keys(checked: RunRecord, model: ModelSpec, workload: Workload) -> dict[str, str]:
    """workload_key and layout_key of a scored record (canonical JSON, so equal means equal)."""
    arch = model.model_dump(mode="json", exclude={"name", "seq_len"})
    job = [arch, checked.gpu, workload.seq_len, workload.global_batch_seqs]
    run = [
        checked.layout.model_dump(mode="json", exclude={"global_batch_seqs"}),
        checked.framework,
        checked.settings,
    ]
    return {
        "workload_key": json.dumps(job, sort_keys=True),
        "layout_key": json.dumps(run, sort_keys=True),
    }


def validate_file(path: str, cluster_file: str | None = None) -> list[ValidationRow]:
    """Score every record; with `cluster_file`, records on its GPU are priced on that cluster."""
    cluster = models_zoo.load_cluster(cluster_file) if cluster_file else None
    data = models_zoo.read_data_file(Path(path))
    if not isinstance(data, list):
        raise InvalidInput(
            f"{path}: expected a YAML list of run records, got {type(data).__name__}"
        )
    return [validate_record(r, cluster, i) for i, r in enumerate(data)]


# ----------------------------------------------------------------------------------- summaries


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending list."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def error_summary(rows: list[ValidationRow]) -> dict[str, dict[str, dict[str, float]]]:
    """Median and P90 absolute % error overall and by source, GPU and model family."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        err = r.tokens_error_pct
        if err is None:
            continue
        for dim, key in (
            ("overall", "all"),
            ("source", r.source),
            ("gpu", r.gpu),
            ("family", r.family),
        ):
            groups[dim][key].append(abs(err))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for dim, by_key in groups.items():
        out[dim] = {}
        for key, errs in sorted(by_key.items()):
            errs.sort()
            out[dim][key] = {
                "n": len(errs),
                "median_abs_pct": statistics.median(errs),
                "p90_abs_pct": percentile(errs, 0.9),
                "max_abs_pct": errs[-1],
            }
    return out


# ------------------------------------------------------------------------------ layout pair order

TIE_PCT = 2.0
"""Two measured rates closer than this (% of the slower) are a tie: no order to match. Whole
training steps repeat less exactly than the kernels in them (the shared H100 kernel tables repeat
within 1.1 % per GEMM shape at the median, P90 3.3 %: ../shared/data/kernels/README.md), so a
published 1-2 % difference between two runs says little about which layout is faster."""


@dataclass(frozen=True)
class LayoutPair:
    """Two scored, measured records of one job (workload_key, and `within` where given) with
    different layout_keys; `fast` is the one measured faster (input order on an exact tie)."""

    job: str
    fast: ValidationRow
    slow: ValidationRow

    @property
    def measured_gap_pct(self) -> float:
        """How much faster `fast` was measured, in % of `slow`."""
        fast = self.fast.measured_tokens_per_s_per_gpu
        return (fast / self.slow.measured_tokens_per_s_per_gpu - 1) * 100

    @property
    def predicted_gap_pct(self) -> float:
        """How much faster `fast` is predicted, in % of `slow` (negative: predicted slower)."""
        pred_fast = self.fast.estimate.tokens_per_s_per_gpu
        return (pred_fast / self.slow.estimate.tokens_per_s_per_gpu - 1) * 100

    @property
    def tie(self) -> bool:
        return self.measured_gap_pct < TIE_PCT

    @property
    def agrees(self) -> bool:
        """Predicted in the measured order (a predicted tie does not agree)."""
        return self.predicted_gap_pct > 0


def layout_pairs(
    rows: list[ValidationRow], within: Callable[[ValidationRow], str] | None = None
) -> list[LayoutPair]:
    """Every pair of scored, measured rows of one job (same workload_key: model architecture,
    GPU, sequence length, global batch; and the same `within(row)` where given, e.g. the software
    release a set of runs was measured on, so that rows of different releases never pair) that
    differ in layout_key (layout, framework or run settings, precision included). Input order."""
    jobs: dict[str, list[ValidationRow]] = defaultdict(list)
    for r in rows:
        if r.workload_key is not None and r.tokens_error_pct is not None:
            job = r.workload_key if within is None else json.dumps([within(r), r.workload_key])
            jobs[job].append(r)
    out: list[LayoutPair] = []
    for job, runs in jobs.items():
        for i, a in enumerate(runs):
            for b in runs[i + 1 :]:
                if a.layout_key == b.layout_key:
                    continue
                fast_a = a.measured_tokens_per_s_per_gpu >= b.measured_tokens_per_s_per_gpu
                out.append(LayoutPair(job, *((a, b) if fast_a else (b, a))))
    return out


@dataclass(frozen=True)
class PairOrder:
    """How often the model orders two layouts of the same job as the measurements do (issue 32's
    target: >= 95 %). Counted over `layout_pairs` less the measured ties (TIE_PCT); a pair agrees
    when the predicted tokens/s/GPU order the two the same way (a predicted tie does not agree)."""

    pairs: int
    agree: int
    jobs: int
    """Jobs (workload keys) with at least one counted pair."""
    disagree: tuple[tuple[str, str], ...]
    """Each pair that does not agree: (the record measured faster, the other one)."""
    ties: int = 0
    """Pairs set aside as measured ties (less than TIE_PCT apart)."""

    @property
    def fraction(self) -> float | None:
        return self.agree / self.pairs if self.pairs else None


def order_of(pairs: list[LayoutPair]) -> PairOrder:
    """Pair order over `pairs` (from layout_pairs), measured ties set aside."""
    counted = [p for p in pairs if not p.tie]
    return PairOrder(
        pairs=len(counted),
        agree=sum(p.agrees for p in counted),
        jobs=len({p.job for p in counted}),
        disagree=tuple((p.fast.id, p.slow.id) for p in counted if not p.agrees),
        ties=len(pairs) - len(counted),
    )


def pair_order(
    rows: list[ValidationRow], within: Callable[[ValidationRow], str] | None = None
) -> PairOrder:
    """Layout pair order over the scored, measured rows (layout_pairs, then order_of)."""
    return order_of(layout_pairs(rows, within))
