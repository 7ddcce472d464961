"""Goodput: what a plan trains per second once failures, checkpoints and stragglers are paid for.

Three effects, each switched by an explicit input (Reliability) with a cited default:

1. Interruptions. Failure rates per component (GPU, HBM, silent data corruption, host, NIC,
   switch/cable, software) per unit-day, scaled by the job's GPUs, nodes, NICs and scale-out
   links. Defaults: the Llama 3 405B pre-training record (Llama Team, "The Llama 3 Herd of
   Models", arXiv 2407.21783, sec. 3.3.4 and Table 5): 466 interruptions in 54 days on 16,384
   H100 (2,048 Grand Teton hosts), 47 planned and 419 unexpected, by root cause.
2. Checkpoints. The checkpoint each rank writes follows the plan's sharding (bf16 weights,
   fp32 master and Adam moments of its TP/PP/EP shard, split over data-parallel replicas as the
   save strategy does), written at the cluster's storage bandwidth, blocking, asynchronous or
   to peers' host memory. The interval is Daly's optimum (J. T. Daly, "A higher order estimate
   of the optimum checkpoint interval for restart dumps", FGCS 22 (2006) 303-312), which
   refines Young's sqrt(2 delta M) (J. W. Young, CACM 17(9), 1974); the effective training
   time ratio (ETTR) is Daly's expected wall time for exponential failures with restarts.
3. Stragglers. A slowdown distribution per GPU priced through the plan's synchronous groups:
   a pipeline's steady state runs at its slowest stage, and the step ends at the data-parallel
   synchronisation, so the step is set by the slowest GPU of the job for m - 1 micro-batch
   slots plus each stage's own group for the fill and drain (docs/goodput.md#stragglers).

Pure: no I/O. planner reads a reliability file into Reliability (planner --reliability).
Derivations and the validation against published ETTR records: docs/goodput.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, field_validator

from .memory import moment_bytes, stage_params, state_bytes
from .pipeline import stage_layers, with_mtp
from .specs import Cluster, Estimate, InputSpec, Layout, ModelSpec, Spec, Workload

SECONDS_PER_DAY = 86_400.0

# ----------------------------------------------------------------------------- published record
# Llama 3 405B (arXiv 2407.21783 sec. 3.3.4, Table 5): unexpected interruptions by root cause
# in a 54-day snapshot of pre-training on 16,384 H100 GPUs, 8 per Grand Teton host (sec. 3.3.1).
LLAMA3_DAYS = 54.0
LLAMA3_GPUS = 16_384
LLAMA3_NODES = LLAMA3_GPUS // 8
LLAMA3_NICS = LLAMA3_GPUS  # one 400 Gb/s RoCE NIC per GPU (sec. 3.3.1)
# Scale-out links the job crossed, as scale_out_links() counts them on the llama3-roce-24k
# preset: NIC-ToR 16,384 + ToR-pod 16,384 + pod-aggregation 16,384 / 7 (1:7 taper, sec. 3.3.1).
LLAMA3_LINKS = LLAMA3_GPUS * (1 + 1 + 1 / 7)
LLAMA3_PLANNED = 47  # "automated maintenance operations such as firmware upgrades" (sec. 3.3.4)
LLAMA3_UNEXPECTED = {
    # component: (Table 5 root causes and counts, the unit the rate scales with)
    "gpu": ({"Faulty GPU": 148, "GPU SRAM Memory": 19, "GPU System Processor": 17,
             "GPU Thermal Interface + Sensor": 6}, "gpu"),
    "hbm": ({"GPU HBM3 Memory": 72}, "gpu"),
    "sdc": ({"Silent Data Corruption": 6}, "gpu"),
    "host": ({"Host Maintenance": 32, "SSD": 3, "Power Supply": 3, "Server Chassis": 2,
              "IO Expansion Board": 2, "CPU": 2, "System Memory": 2}, "node"),
    "nic": ({"NIC": 7}, "nic"),
    "network": ({"Network Switch/Cable": 35}, "link"),
    "software": ({"Software Bug": 54, "NCCL Watchdog Timeouts": 7, "Dependency": 2}, "gpu"),
}
LLAMA3_EXPOSURE = {"gpu": LLAMA3_GPUS, "node": LLAMA3_NODES, "nic": LLAMA3_NICS,
                   "link": LLAMA3_LINKS}
HARDWARE = frozenset({"gpu", "hbm", "sdc", "host", "nic"})
"""Components whose failure takes a node out of the job: it restarts on a replacement node."""

# ------------------------------------------------------------------------------------ defaults
DEFAULT_STORAGE_GB_PER_S = 2_000.0
"""Aggregate checkpoint write bandwidth: Tectonic's 2 TB/s sustained (peak 7 TB/s) behind the
Llama 3 cluster (arXiv 2407.21783 sec. 3.3.1, "Storage")."""
DEFAULT_HOST_LINK_GB_PER_S = 63.0
"""GPU -> host copy for a snapshot: PCIe 5.0 x16, 32 GT/s x 16 lanes x 128/130 / 8 bits =
63 GB/s per direction (PCI-SIG PCIe 5.0 base specification; H100 SXM's host interface)."""
Unit = Literal["gpu", "node", "nic", "link"]
CheckpointMode = Literal["blocking", "async", "in_memory"]
SaveStrategy = Literal["balanced", "first_replica"]


class ComponentRate(InputSpec):
    """Interruptions per unit per day of one component, the unit it scales with, and why."""

    per_unit_per_day: NonNegativeFloat = Field(le=1e3)
    unit: Unit
    hardware: bool = Field(description="takes a node out: restart waits for a replacement")
    source: str = ""


def llama3_rate(name: str) -> ComponentRate:
    """A component's default rate: its Table 5 count over the record's unit-days."""
    causes, unit = LLAMA3_UNEXPECTED[name]
    count = sum(causes.values())
    rate = count / (LLAMA3_EXPOSURE[unit] * LLAMA3_DAYS)
    listed = ", ".join(f"{k} {v}" for k, v in causes.items())
    return ComponentRate(
        per_unit_per_day=rate,
        unit=unit,
        hardware=name in HARDWARE,
        source=f"Llama 3 (arXiv 2407.21783) Table 5: {listed} = {count} in {LLAMA3_DAYS:g} days "
        f"over {LLAMA3_EXPOSURE[unit]:,.0f} {unit}s"
        + ("; per-GPU scaling of software failures is an assumption" if name == "software" else ""),
    )


def default_components() -> dict[str, ComponentRate]:
    return {name: llama3_rate(name) for name in LLAMA3_UNEXPECTED}


def default_planned() -> ComponentRate:
    return ComponentRate(
        per_unit_per_day=LLAMA3_PLANNED / (LLAMA3_NODES * LLAMA3_DAYS),
        unit="node",
        hardware=False,
        source="Llama 3 (arXiv 2407.21783) sec. 3.3.4: 47 planned interruptions in 54 days on "
        "2,048 hosts; scaling them per host (firmware upgrades) is an assumption",
    )


MAX_STRAGGLER_FACTOR = 101.0
"""A straggler computes at most 101x the fastest GPU's time (straggler_slowdown <= 100): slower
than that is a broken GPU, not a straggler."""


class Reliability(InputSpec):
    """Failure, checkpoint, restart and straggler inputs of the goodput model, with defaults.

    Every default cites its source or is labelled an assumption (docs/goodput.md#inputs); a
    reliability file (planner --reliability FILE) overrides any of them."""

    components: dict[str, ComponentRate] = Field(default_factory=default_components)
    planned: ComponentRate = Field(default_factory=default_planned)
    checkpoint: CheckpointMode = Field(
        "blocking",
        description="blocking: training waits for the write (Megatron-LM's default, "
        "--async-save off); async: it waits only for the copy to host memory and the write "
        "runs behind (--async-save, torch.distributed.checkpoint.async_save); in_memory: "
        "copies go to peers' host memory over the scale-out network (Gemini, SOSP 2023)",
    )
    save_strategy: SaveStrategy = Field(
        "balanced",
        description="who writes replicated state: balanced over data-parallel replicas "
        "(Megatron dist-checkpointing fully parallel save, torch.distributed.checkpoint dedup) "
        "or the first replica alone (DeepSpeed's model-state files, Megatron's legacy torch "
        "format)",
    )
    storage_gb_per_s: float | None = Field(
        None, gt=0, le=1e7, description="aggregate write/read bandwidth; null: the cluster's "
        "storage_gb_per_s, else DEFAULT_STORAGE_GB_PER_S (Llama 3's Tectonic, 2 TB/s)",
    )
    node_storage_gb_per_s: float = Field(
        50.0, gt=0, le=1e6, description="one node's share of storage bandwidth: one 400 Gb/s "
        "front-end port (assumption)",
    )
    host_link_gb_per_s: float = Field(DEFAULT_HOST_LINK_GB_PER_S, gt=0, le=1e6)
    restart_s: NonNegativeFloat = Field(
        600.0, le=1e6, description="relaunch, communicator and data-loader set-up after an "
        "interruption, before the checkpoint load (assumption; Llama 3's >90 % ETTR at 8.6 "
        "interruptions per day bounds the whole loss per interruption below 1,000 s)",
    )
    node_replace_s: NonNegativeFloat = Field(
        180.0, le=1e6, description="extra wait for a replacement node after a hardware "
        "failure when no hot spare is free (assumption)",
    )
    mtbf_scale: float = Field(
        1.0, gt=0, le=1e6, description="multiplies every component's mean time between "
        "failures (divides its rate): 2 halves the interruptions (whatif --vary mtbf)",
    )
    spare_nodes: NonNegativeInt = Field(0, le=1_000_000, description="hot spare nodes held")
    node_repair_days: float = Field(
        3.0, gt=0, le=1e4, description="time a failed node is out before it rejoins the spare "
        "pool (assumption)",
    )
    checkpoint_interval_s: float | None = Field(
        None, gt=0, le=1e9, description="training seconds between checkpoints; null: Daly's "
        "optimum",
    )
    straggler_fraction: float = Field(0.0, ge=0, le=1, description="share of GPUs that are slow")
    straggler_slowdown: NonNegativeFloat = Field(
        0.0, le=MAX_STRAGGLER_FACTOR - 1, description="how much slower a slow GPU computes (0.2: 20 % slower)"
    )
    straggler_factors: tuple[float, ...] | None = Field(
        None, min_length=1, max_length=1_048_576, description="a measured table: each GPU's "
        "compute time relative to the fastest (>= 1); replaces fraction/slowdown",
    )

    @field_validator("straggler_factors")
    @classmethod
    def _factors_at_least_one(cls, v: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if v is not None and min(v) < 1:
            raise ValueError("each factor is a time relative to the fastest GPU: >= 1")
        if v is not None and max(v) > MAX_STRAGGLER_FACTOR:
            # the same bound as straggler_slowdown's (<= 100: 101x the fastest)
            raise ValueError(
                f"each factor is a time relative to the fastest GPU: at most "
                f"{MAX_STRAGGLER_FACTOR:g} (got {max(v):g})"
            )
        return v

    def storage_bandwidth_gb_per_s(self, cluster: Cluster) -> float:
        return self.storage_gb_per_s or cluster.storage_gb_per_s or DEFAULT_STORAGE_GB_PER_S


# ------------------------------------------------------------------------------- interruptions


def scale_out_links(cluster: Cluster) -> float:
    """Links a job of cluster.num_gpus GPUs crosses beyond NVLink: per scale-out tier it spans,
    one link per GPU below the tier divided by the tier's taper (a Clos tier with o:1
    oversubscription has 1/o uplinks per downlink). One NIC per GPU (assumption)."""
    n = cluster.num_gpus
    links = 0.0
    inner = cluster.tiers[0].domain_size or n
    for tier in cluster.tiers[1:]:
        if inner >= n:
            break
        if tier.kind != "wan":
            links += n / tier.oversubscription
        inner = tier.domain_size or n
    return links


def job_units(cluster: Cluster) -> dict[str, float]:
    """How many of each failing unit the job holds."""
    multi_node = cluster.num_gpus > cluster.gpus_per_node
    return {
        "gpu": float(cluster.num_gpus),
        "node": float(cluster.num_nodes),
        "nic": float(cluster.num_gpus if multi_node else 0),
        "link": scale_out_links(cluster),
    }


def interruptions_per_day(rel: Reliability, cluster: Cluster) -> dict[str, float]:
    """Unexpected interruptions per day by component, plus "planned"."""
    units = job_units(cluster)
    rates = {
        k: c.per_unit_per_day * units[c.unit] / rel.mtbf_scale for k, c in rel.components.items()
    }
    rates["planned"] = rel.planned.per_unit_per_day * units[rel.planned.unit]
    return rates


# --------------------------------------------------------------------------------- checkpoints


@dataclass(frozen=True, slots=True)
class CheckpointSize:
    """Bytes of one checkpoint: the largest per-rank write and the whole checkpoint."""

    max_rank_bytes: float
    total_bytes: float


def checkpoint_bytes_per_param(layout: Layout, workload: Workload) -> int:
    """bf16 weights 2 B + fp32 master 4 B + Adam moments (memory.moment_bytes); under ZeRO-3
    the fp32 sharded parameters are the weights (memory.state_bytes), so 4 B + moments."""
    return (0 if layout.zero_stage == 3 else 2) + 4 + moment_bytes(workload)


def first_replica_rank_bytes(sp, layout: Layout, workload: Workload) -> float:
    """What the first data-parallel replica's rank writes when it alone saves replicated state:
    its whole weights and its optimizer state as memory.state_bytes holds it (ZeRO-1/2 shard
    the optimizer, so every replica writes that share; ZeRO-3 shards everything)."""
    _, grads, optim = state_bytes(sp, layout, 1, workload)
    if layout.zero_stage == 3:
        return grads + optim  # ZeRO-3: fp32 sharded params (= the fp32 gradient shard's size)
    return 2 * (sp.dense + sp.expert) + optim


def checkpoint_size(
    model: ModelSpec, layout: Layout, workload: Workload,
    layers_per_stage: tuple[int, ...] | None, strategy: SaveStrategy,
) -> CheckpointSize:
    """Per-rank and total checkpoint bytes from the plan's sharding (memory.stage_params).

    A stage's dense state is replicated over its dp*cp ranks, its routed experts over the
    expert-data-parallel group dp*cp*tp/(ep*etp) (memory.state_bytes' sharding); `balanced`
    spreads each replicated tensor's write over its replicas, `first_replica` leaves it to one."""
    first_moe = model.num_dense_layers if model.moe is not None else model.num_layers
    per_param = checkpoint_bytes_per_param(layout, workload)
    ranks_per_stage = layout.tp * layout.cp * layout.dp
    expert_rep = max(1, ranks_per_stage // (layout.ep * layout.etp))
    max_rank = total = 0.0
    for r, layers in enumerate(stage_layers(model, layout, layers_per_stage)):
        nd = sum(1 for i in layers if i < first_moe)
        nd, nm = with_mtp(model, layout, r, (nd, len(layers) - nd))  # the last stage's MTP too
        sp = stage_params(model, layout, nd, nm, r)
        balanced = per_param * (sp.dense / (layout.dp * layout.cp) + sp.expert / expert_rep)
        total += balanced * ranks_per_stage
        rank = balanced
        if strategy == "first_replica":
            rank = max(balanced, first_replica_rank_bytes(sp, layout, workload))
        max_rank = max(max_rank, rank)
    return CheckpointSize(max_rank, total)


def storage_write_s(size: CheckpointSize, cluster: Cluster, rel: Reliability) -> float:
    """A write to shared storage ends when both the aggregate bandwidth and the busiest node's
    port have carried their bytes (every GPU of a node writing its rank's share)."""
    aggregate = size.total_bytes / (rel.storage_bandwidth_gb_per_s(cluster) * 1e9)
    per_gpu_gb_per_s = rel.node_storage_gb_per_s / min(cluster.gpus_per_node, cluster.num_gpus)
    return max(aggregate, size.max_rank_bytes / (per_gpu_gb_per_s * 1e9))


def scale_out_gb_per_s(cluster: Cluster) -> float:
    """Per-GPU bandwidth to a peer on another node (the first tier above NVLink)."""
    tier = cluster.tiers[1] if len(cluster.tiers) > 1 else cluster.tiers[0]
    return tier.bandwidth_gb_per_s * tier.efficiency


@dataclass(frozen=True, slots=True)
class CheckpointCost:
    """Seconds: training paused per checkpoint (blocking), until it is durable after the pause
    (persist, lost on a failure in between), and to read it back on restart (load)."""

    blocking_s: float
    persist_s: float
    write_s: float
    load_s: float


def checkpoint_cost(size: CheckpointSize, cluster: Cluster, rel: Reliability) -> CheckpointCost:
    """Blocking: the write is the pause. Async: the pause is the copy to pinned host memory and
    the write follows. In memory: the copy to host, then to a peer's host over the scale-out
    network, read back the same way (storage only for a double failure, not priced)."""
    snapshot = size.max_rank_bytes / (rel.host_link_gb_per_s * 1e9)
    write = storage_write_s(size, cluster, rel)
    if rel.checkpoint == "blocking":
        return CheckpointCost(write, 0.0, write, write)
    if rel.checkpoint == "async":
        return CheckpointCost(snapshot, write, write, write)
    peer = size.max_rank_bytes / (scale_out_gb_per_s(cluster) * 1e9)
    return CheckpointCost(snapshot, peer, peer, peer)


# -------------------------------------------------------------------------- interval and ETTR


def young_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Young (1974): tau = sqrt(2 delta M)."""
    return math.sqrt(2 * delta_s * mtbf_s)


def daly_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Daly (2006), the perturbation solution: tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (1/9) delta / 2M]
    - delta for delta < 2M, else M. Daly's figs. 3-5 check it: M = 24 h, 6 h, 15 min with
    delta = 5 min give 117, 57 and 9.1 min."""
    if delta_s <= 0:
        return 0.0
    if delta_s >= 2 * mtbf_s:
        return mtbf_s
    x = delta_s / (2 * mtbf_s)
    return young_interval_s(delta_s, mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - delta_s


EXP_SAFE = 700.0
"""Below this, e^x is a finite float (the largest is e^709.78)."""


def daly_ettr(tau_s: float, delta_s: float, restart_s: float, mtbf_s: float) -> float:
    """Share of wall time spent on kept training: Daly (2006)'s complete model, wall time for
    T_s of work, T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau, so ETTR = T_s / T_w.
    Exponential failures that may strike during a checkpoint or a restart."""
    if not math.isfinite(mtbf_s):
        return tau_s / (tau_s + delta_s) if tau_s + delta_s > 0 else 1.0
    if tau_s + delta_s <= 0:  # free, continuous checkpoints: only the restarts cost
        return math.exp(-restart_s / mtbf_s)
    x = (tau_s + delta_s) / mtbf_s
    if x + restart_s / mtbf_s < EXP_SAFE:
        return tau_s / (mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1(x))
    # An interval and checkpoint far longer than the MTBF (or a restart far longer): e^x
    # overflows a float (x > ~709), so the same formula in logs, where ln(e^x - 1) = x +
    # ln(1 - e^-x); the share underflows towards 0, as it should (the fuzz found the overflow:
    # a straggler table with a 9.2e18 factor).
    log_wall = math.log(mtbf_s) + restart_s / mtbf_s + x + math.log1p(-math.exp(-x))
    return math.exp(math.log(tau_s) - log_wall) if tau_s > 0 else 0.0


# ---------------------------------------------------------------------------------- hot spares


def spare_free_probability(spares: int, hardware_per_day: float, repair_days: float) -> float:
    """Chance a hardware failure finds a free hot spare. Failed nodes are out for repair_days,
    so the nodes out at a failure are Poisson with mean hardware_per_day x repair_days (Poisson
    arrivals see time averages); a spare is free when fewer than `spares` are out."""
    if spares <= 0:
        return 0.0
    mean = hardware_per_day * repair_days
    term = math.exp(-mean)
    below = 0.0
    for k in range(spares):
        below += term
        term *= mean / (k + 1)
    return min(1.0, below)


# ---------------------------------------------------------------------------------- stragglers


def expected_max_two_point(n: int, fraction: float, slowdown: float) -> float:
    """E[max of n GPUs' time factors] when each is 1 + slowdown with probability `fraction`,
    else 1: 1 + slowdown x P(some member slow) = 1 + slowdown (1 - (1 - fraction)^n)."""
    return 1.0 + slowdown * -math.expm1(n * math.log1p(-fraction)) if fraction < 1 else 1 + slowdown


def expected_max_table(n: int, factors: tuple[float, ...]) -> float:
    """E[max of n GPUs drawn without replacement from a measured table of K factors]:
    P(max <= v_(i)) = C(i, n) / C(K, n) for the i-th smallest; with n > K, draws with
    replacement (i/K)^n (the table samples a larger fleet)."""
    values = sorted(factors)
    k = len(values)
    prev = total = 0.0
    for i, v in enumerate(values, start=1):
        if n <= k:
            cdf = 0.0 if i < n else math.exp(_log_comb(i, n) - _log_comb(k, n))
        else:
            cdf = (i / k) ** n
        total += v * (cdf - prev)
        prev = cdf
    return total


def _log_comb(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def expected_max_factor(n: int, rel: Reliability) -> float:
    if rel.straggler_factors is not None:
        return expected_max_table(n, rel.straggler_factors)
    return expected_max_two_point(n, rel.straggler_fraction, rel.straggler_slowdown)


def sync_group_size(layout: Layout, num_gpus: int) -> int:
    """GPUs that run one stage's micro-batch in lockstep: the TP x CP group, widened to the EP
    all-to-all's group for MoE layers; at most one stage's GPUs."""
    return max(1, min(num_gpus // layout.pp, layout.tp * layout.cp * max(1, layout.ep)))


def straggler_extra_s(e: Estimate, num_gpus: int, rel: Reliability) -> float:
    """Expected seconds a step gains from slow GPUs (docs/goodput.md#stragglers).

    A 1F1B pipeline with stage times t_k takes (m - 1) max_k t_k + sum_k t_k; the data-parallel
    synchronisation ends the step at the slowest replica. A slow member slows its group's
    compute (not its communication), so with t_c = (compute + recompute) / m per micro-batch:
    extra = t_c [m (E[max over the job] - 1) + (pp - 1) (E[max over a group] - 1)]: the
    bottleneck stage holds the slowest GPU for all m micro-batches, the other stages' fill and
    drain add their own group's maximum."""
    lo = e.layout
    m = e.num_microbatches
    t_c = (e.breakdown_s.get("compute", 0.0) + e.breakdown_s.get("recompute", 0.0)) / m
    job = expected_max_factor(num_gpus, rel) - 1
    group = expected_max_factor(sync_group_size(lo, num_gpus), rel) - 1
    return t_c * (m * job + (lo.pp - 1) * group)


# ------------------------------------------------------------------------------------- goodput


class Goodput(Spec):
    """One plan's goodput figures (CONTRACT.md "Goodput": contract() holds its JSON keys)."""

    interruptions_per_day: float
    per_day_by_component: dict[str, float]
    mtbf_s: float
    checkpoint_rank_gb: float
    checkpoint_total_gb: float
    checkpoint_interval_s: float
    checkpoint_write_s: float
    checkpoint_blocking_s: float
    restart_s: float
    spare_free: float
    ettr: float
    step_time_s: float
    straggler_step_s: float
    spare_gpus: int
    tokens_per_s_per_gpu: float
    goodput_tokens_per_s_per_gpu: float

    def contract(self) -> dict[str, float | None]:
        """The JSON object; an interval is null where nothing fails and none was asked for."""
        interval = self.checkpoint_interval_s
        return {
            "interruptions_per_day": self.interruptions_per_day,
            "checkpoint_interval_s": interval if math.isfinite(interval) else None,
            "checkpoint_write_s": self.checkpoint_write_s,
            "restart_s": self.restart_s,
            "ettr": self.ettr,
            "goodput_tokens_per_s_per_gpu": self.goodput_tokens_per_s_per_gpu,
        }


@dataclass(frozen=True, slots=True)
class Interruptions:
    """Per-day rates and what an unexpected interruption costs before the checkpoint load."""

    per_day: dict[str, float]
    unexpected_per_day: float
    planned_per_day: float
    spare_free: float
    relaunch_s: float  # restart_s plus the expected wait for a replacement node


def interruptions(rel: Reliability, cluster: Cluster) -> Interruptions:
    per_day = interruptions_per_day(rel, cluster)
    planned = per_day["planned"]
    unexpected = sum(v for k, v in per_day.items() if k != "planned")
    hardware = sum(v for k, v in per_day.items() if k in rel.components
                   and rel.components[k].hardware)
    spare = spare_free_probability(rel.spare_nodes, hardware, rel.node_repair_days)
    share = hardware / unexpected if unexpected > 0 else 0.0
    relaunch = rel.restart_s + share * (1 - spare) * rel.node_replace_s
    return Interruptions(per_day, unexpected, planned, spare, relaunch)


def mtbf_s(per_day: float) -> float:
    return SECONDS_PER_DAY / per_day if per_day > 0 else math.inf


def checkpoint_interval_s(delta_s: float, persist_s: float, mtbf: float, step_s: float,
                          rel: Reliability) -> float:
    """Daly's optimum (or the input's interval), no shorter than the previous checkpoint's
    persist (the next save waits for it), in whole steps (checkpoints fall between steps)."""
    tau = rel.checkpoint_interval_s
    if tau is None:
        tau = daly_interval_s(delta_s, mtbf) if math.isfinite(mtbf) else math.inf
    tau = max(tau, persist_s)
    if not math.isfinite(tau):
        return math.inf
    return max(1, round(tau / step_s)) * step_s


def ettr_upper_bound(rel: Reliability, cluster: Cluster) -> float:
    """An ETTR no plan on this cluster can beat: daly_ettr <= e^(-R/M) for any interval (since
    e^y - 1 >= y), with R at least the relaunch (load, persist >= 0), the planned factor at
    most 1 - planned x restart_s, and the spares' share of GPUs whatever the plan. The goodput
    objective's search bound (planner.goodput_rank): goodput <= tokens/s/GPU x this."""
    it = interruptions(rel, cluster)
    m = mtbf_s(it.unexpected_per_day)
    unexpected = math.exp(-it.relaunch_s / m) if math.isfinite(m) else 1.0
    planned = max(0.0, 1 - it.planned_per_day * rel.restart_s / SECONDS_PER_DAY)
    return unexpected * planned * spare_share(rel, cluster)


def spare_share(rel: Reliability, cluster: Cluster) -> float:
    """The job's share of the GPUs it holds: hot spares are paid for but do not train."""
    spare_gpus = rel.spare_nodes * cluster.gpus_per_node
    return cluster.num_gpus / (cluster.num_gpus + spare_gpus)


def goodput(
    model: ModelSpec, cluster: Cluster, workload: Workload, e: Estimate, rel: Reliability
) -> Goodput:
    """The goodput figures of one scored plan on its cluster (the job holds cluster.num_gpus)."""
    it = interruptions(rel, cluster)
    size = checkpoint_size(model, e.layout, workload, e.layers_per_stage, rel.save_strategy)
    cost = checkpoint_cost(size, cluster, rel)
    step = e.step_time_s + straggler_extra_s(e, cluster.num_gpus, rel)
    m = mtbf_s(it.unexpected_per_day)
    tau = checkpoint_interval_s(cost.blocking_s, cost.persist_s, m, step, rel)
    restart = it.relaunch_s + cost.load_s
    if math.isfinite(tau):
        ettr = daly_ettr(tau, cost.blocking_s, restart + cost.persist_s, m)
    else:
        ettr = 1.0  # no failures and no interval asked for: never checkpoint
    ettr *= max(0.0, 1 - it.planned_per_day * restart / SECONDS_PER_DAY)
    tokens = workload.global_batch_seqs * workload.seq_len
    nominal = e.tokens_per_s_per_gpu
    good = tokens / step / cluster.num_gpus * ettr * spare_share(rel, cluster)
    return Goodput(
        interruptions_per_day=it.unexpected_per_day + it.planned_per_day,
        per_day_by_component=it.per_day,
        mtbf_s=m,
        checkpoint_rank_gb=size.max_rank_bytes / 1e9,
        checkpoint_total_gb=size.total_bytes / 1e9,
        checkpoint_interval_s=tau,
        checkpoint_write_s=cost.write_s,
        checkpoint_blocking_s=cost.blocking_s,
        restart_s=restart,
        spare_free=it.spare_free,
        ettr=ettr,
        step_time_s=e.step_time_s,
        straggler_step_s=step,
        spare_gpus=rel.spare_nodes * cluster.gpus_per_node,
        tokens_per_s_per_gpu=nominal,
        goodput_tokens_per_s_per_gpu=good,
    )
