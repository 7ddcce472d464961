"""Plain-text pieces every view shares (terminal, Markdown, HTML, whatif): the layout in words and
in one compact cell, table cells, header and summary lines, and the labels of the step's terms.
No rich here: terminal.py wraps these in tables; markdown.py and html.py print them as they are."""

from __future__ import annotations

from cost_models.calibration import calibration_for_cluster
from cost_models.compute import CP_STEP_TERM, fp4_speed_over_fp8
from cost_models.params import total_params
from cost_models.specs import (
    Cluster,
    Estimate,
    Layout,
    ModelSpec,
    StageMemory,
    Workload,
    recompute_label,
)
from cost_models.stage import ADAM_OP, CHUNK_CAT_OP, CLIP_OP

from ..types import PlanResult

RANK_MAP_NODES = 2  # nodes shown in full; a compact rule covers the rest


MEMORY_ROWS_EACH_END = 3  # stages shown at each end of a deep pipeline (plus the peak stage)


TERM_LABELS = {
    "compute": "compute",
    "recompute": "recompute",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP all-to-all",
    "pp_comm": "PP p2p",
    "dp_comm": "DP grad/param",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
}


LAYOUT_KEY = (
    "layout: degrees (CP/EP/ETP/VP shown when > 1; HSDP<r>x<s>: DP replicas x shard group), mb "
    "micro-batch size, sel/full recompute (none when absent; sel:<modules>, full:b<n> / full:u<n> "
    "block / uniform layers), Z ZeRO stage, split:E/L embedding / loss counted as a layer in the "
    "pipeline split, o: rank order when not tp-cp-dp-pp (first letters, innermost first); "
    "sequence parallel whenever TP > 1 unless noSP"
)
"""The layout cell's key (Layout.label), for tables without a memory column (whatif)."""
LAYOUT_LEGEND = LAYOUT_KEY + "; GiB: peak memory per GPU"


MEMORY_HEADER = ("stage", "weights", "grads", "optim", "activ", "buffers", "total", "use")


def model_params(model: ModelSpec) -> dict[str, int]:
    """Total parameters and those one token touches (equal for a dense model)."""
    return {
        "params_total": total_params(model),
        "params_active": total_params(model, active_only=True),
    }


def params_text(model: ModelSpec) -> str:
    """'70.6B params' or '671.0B params, 37.5B active', and the multi-token-prediction layers
    trained beside the model, which the model card's count leaves out (params.mtp_join_params)."""
    p = model_params(model)
    text = f"{_count(p['params_total'])} params"
    if p["params_active"] != p["params_total"]:
        text += f", {_count(p['params_active'])} active"
    if model.mtp_num_layers:
        text += f"; + {model.mtp_num_layers} MTP layer(s) on the last pipeline stage"
    return text


def _count(n: int) -> str:
    return f"{n / 1e12:.2f}T" if n >= 1e12 else f"{n / 1e9:.1f}B" if n >= 1e8 else f"{n / 1e6:.0f}M"


def recompute_words(lo: Layout) -> str:
    """recompute mode, with Megatron modules / full-recompute method when set."""
    if lo.recompute == "selective" and lo.recompute_modules is not None:
        return "selective:" + "+".join(lo.recompute_modules)
    if lo.recompute == "full" and lo.recompute_method is not None:
        return f"full:{lo.recompute_method}{lo.recompute_num_layers or 1}"
    return lo.recompute


def recompute_short(lo: Layout) -> str:
    """The recompute part of Layout.label: sel:attn+ln+mlp, full:b2, ... (cost_models.specs)."""
    return recompute_label(lo)


def layout_line(e: Estimate) -> str:
    lo = e.layout
    parts = [f"TP{lo.tp}", f"PP{lo.pp}", f"DP{lo.dp}", f"CP{lo.cp}"]
    if lo.ep > 1:
        parts.append(f"EP{lo.ep}")
    if lo.etp > 1:
        parts.append(f"ETP{lo.etp}")
    if lo.vp > 1:
        parts.append(f"VP{lo.vp}")
    extras = [
        f"micro-batch {lo.micro_batch} x {e.num_microbatches}",
        f"recompute {recompute_words(lo)}",
        f"ZeRO-{lo.zero_stage}",
        "SP" if lo.sequence_parallel else "no SP",
    ]
    if lo.dp_shard is not None:
        extras.append(f"HSDP {lo.replicate_dp}x{lo.dp_shard}")
    if lo.pp_schedule == "dualpipe":
        extras.append("DualPipe")
    if lo.ep_overlap:
        extras.append("EP all-to-all overlapped")
    if lo.cpu_offload_layers:
        extras.append(f"CPU offload of {lo.cpu_offload_layers} layers' activations")
    counted = [
        part
        for part, on in (
            ("embedding", lo.account_for_embedding_in_pipeline_split),
            ("loss", lo.account_for_loss_in_pipeline_split),
        )
        if on
    ]
    if counted:
        extras.append(f"{' and '.join(counted)} counted as a layer in the PP split")
    if lo.order != Layout.model_fields["order"].default:
        extras.append("order " + "-".join(a.value for a in lo.order))
    return " ".join(parts) + "  |  " + ", ".join(extras)


def compact_layout(e: Estimate) -> str:
    """The layout in one short cell, e.g. 'TP8 PP4 DP2 VP5 mb1 sel Z1' (Layout.label;
    LAYOUT_LEGEND)."""
    return e.layout.label


def memory_rows(stages: tuple[StageMemory, ...]) -> list[StageMemory | None]:
    """The stages a memory table shows: all up to 2*MEMORY_ROWS_EACH_END + 1, else both ends
    and the peak stage, with None where stages are skipped (an ellipsis row)."""
    n = len(stages)
    if n <= 2 * MEMORY_ROWS_EACH_END + 1:
        return list(stages)
    peak = max(range(n), key=lambda i: stages[i].total_gib)
    keep = sorted(
        set(range(MEMORY_ROWS_EACH_END)) | set(range(n - MEMORY_ROWS_EACH_END, n)) | {peak}
    )
    out: list[StageMemory | None] = []
    for prev, i in zip([-1, *keep], keep, strict=False):
        if i != prev + 1:
            out.append(None)
        out.append(stages[i])
    return out


PEAK_PHASE_WORDS = {
    "end_of_backward": "FSDP2's end of backward (every gradient and the last unit's reduce "
    "buffers)",
    "optimizer_step": "the optimizer step (activations freed; the fp32 copies the framework "
    "casts its 16-bit gradients into)",
}
"""StageMemory.peak_phase past the backward start, in words."""


def memory_phase_notes(stages: tuple[StageMemory, ...]) -> list[str]:
    """One line per peak phase other than the backward start: which stages peak there, and that
    their grads column carries the phase's excess (StageMemory.peak_phase)."""
    lines = []
    for phase, words in PEAK_PHASE_WORDS.items():
        ids = [s.stage for s in stages if s.peak_phase == phase]
        if not ids:
            continue
        which = f"stage {ids[0]}" if len(ids) == 1 else f"{len(ids)} stages ({compress(ids)})"
        lines.append(
            f"{which}: peak at {words}; grads include that phase's excess over the backward start"
        )
    return lines


def gathered_notes(stages: tuple[StageMemory, ...]) -> list[str]:
    """One line where ZeRO-3 holds parameters gathered at the peak: how much of the weights
    column they are (StageMemory.gathered_gib), the rest being the shards."""
    held = [s.gathered_gib for s in stages if s.gathered_gib > 0]
    if not held:
        return []
    low, high = min(held), max(held)
    amount = f"{high:.1f} GiB" if high - low < 0.05 else f"{low:.1f}-{high:.1f} GiB a stage"
    return [f"weights: the ZeRO-3 shards and {amount} of parameters held gathered at the peak"]


def compress(ids: list[int]) -> str:
    """0, 1, 2, 5 -> '0-2, 5'."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def memory_title(usable_gib: float, hbm_gib: float | None) -> str:
    what = "Memory per GPU by pipeline stage, GiB"
    if hbm_gib is None or abs(hbm_gib - usable_gib) < 0.05:
        return f"{what} (usable {usable_gib:.1f})"
    headroom = 1 - usable_gib / hbm_gib
    return f"{what} (usable {usable_gib:.1f} = {hbm_gib:.0f} HBM - {headroom:.0%} headroom)"


def stage_memory_cells(s: StageMemory, usable_gib: float) -> list[str]:
    """One pipeline stage's memory cells (terminal and Markdown tables)."""
    return [
        str(s.stage),
        f"{s.weights_gib:.1f}",
        f"{s.gradients_gib:.1f}",
        f"{s.optimizer_gib:.1f}",
        f"{s.activations_gib:.1f}",
        f"{s.buffers_gib + s.reserve_gib:.1f}",
        f"{s.total_gib:.1f}",
        f"{s.total_gib / usable_gib:.0%}",
    ]


def rank_cells(i: int, e: Estimate, best: Estimate) -> list[str]:
    """One ranked plan's cells (terminal and Markdown tables)."""
    return [
        str(i),
        compact_layout(e),
        f"{e.tokens_per_s_per_gpu:,.1f}",
        f"{e.mfu:.1%}",
        f"{e.step_time_s:,.3f}",
        f"{e.peak_memory_gib:.1f}",
        f"{vs_best(e, best):+.1%}",
    ]


def vs_best(e: Estimate, best: Estimate) -> float:
    """Time per sequence against the best (the step time when both have the same batch)."""
    if e.global_batch_seqs == best.global_batch_seqs:
        return e.step_time_s / best.step_time_s - 1
    return (e.step_time_s / e.global_batch_seqs) / (best.step_time_s / best.global_batch_seqs) - 1


def memory_options_text(workload: Workload) -> str:
    """The workload's non-default memory options (Workload.optimizer_moments, ...), as
    ", a, b" to append to a header; "" when none is set."""
    parts = []
    if workload.optimizer_moments != "fp32":
        parts.append(f"{workload.optimizer_moments} Adam moments")
    if workload.activation_func_fp8_input_store:
        parts.append("fp8 SwiGLU inputs")
    if workload.attention_output_store != "separate":
        parts.append(f"{workload.attention_output_store.upper()} attention output")
    if workload.main_grads != "fp32":
        parts.append(f"{workload.main_grads} gradients")
    if workload.fp8_params:
        parts.append("fp8 weights")
    return "".join(", " + p for p in parts)


def header_text(cluster: Cluster, workload: Workload, model: ModelSpec) -> str:
    return (
        f"{model.name} ({params_text(model)}) on {cluster.num_gpus:,} x {cluster.gpu.name} "
        f"({cluster.name}), seq {workload.seq_len:,}, global batch "
        f"{workload.global_batch_seqs:,} seqs, {workload.precision}"
        f"{memory_options_text(workload)}"
    )


def defaults_text(hbm_gib: float, usable_gib: float) -> str:
    """The defaults plan, estimate and whatif share, stated in every report."""
    headroom = 1 - usable_gib / hbm_gib
    return (
        f"Defaults: sequence parallel whenever TP > 1; fit judged against {usable_gib:.1f} GiB "
        f"usable = {hbm_gib:.0f} GiB HBM - {headroom:.0%} headroom"
    )


def solver_line(result: PlanResult) -> str:
    """Status, objective, bound, gap, time and counts of the search in one line."""
    s = result.solver

    unit = " s/sequence" if s.objective_unit == "s_per_sequence" else " s"
    if s.objective_unit == "goodput_tokens_per_s_per_gpu":
        unit = " goodput tokens/s/GPU"

    def secs(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g}{unit}" if unit != " s" else f"{v:.4f} s"

    gap = "n/a" if s.gap is None else f"{s.gap:.2%}"
    if s.status == "STOPPED" and s.gap is not None and s.gap == 0:
        gap = "0 for #1 only (the ranking below it is not proved)"
    seed = getattr(s, "seed", None)
    seed_text = "" if seed is None else f", seed {seed}"
    bound = "open bound" if s.status == "STOPPED" else "bound"
    stopped = {
        "work_limit": " (stopped by the work limit)",
        "time_limit": " (stopped by the time limit)",
    }.get(getattr(s, "stopped_by", None) or "", "")
    return (
        f"engine {s.engine}, status {s.status}{stopped}, objective {secs(s.objective)}, {bound} "
        f"{secs(s.best_bound)}, gap {gap}{seed_text}, {s.wall_time_s:.2f} s wall; "
        f"{s.num_candidates:,} candidates, {s.num_scored:,} scored, {s.num_feasible:,} fit in "
        "memory"
    )


def summary_text(result: PlanResult) -> str:
    best = result.best
    target = f" for {result.framework_version}" if result.framework else ""
    text = (
        f"Best{target}: {layout_line(best)}\n{best.tokens_per_s_per_gpu:,.1f} tokens/s/GPU, MFU "
        f"{best.mfu:.1%}, step {best.step_time_s:,.3f} s, peak memory "
        f"{best.peak_memory_gib:.1f} GiB of {result.usable_memory_gib:.1f} GiB usable"
    )
    batch_range = getattr(result, "global_batch_range", None)
    if batch_range is not None:  # each plan has its own batch; ranked by tokens/s
        batches = ", ".join(str(e.global_batch_seqs) for e in result.ranked)
        text += (
            f"\nglobal batch range [{batch_range[0]}, {batch_range[1]}] seqs, ranked by tokens/s;"
            f" batch of each ranked plan: {batches}"
        )
    return text


def rejection_lines(result: PlanResult) -> list[str]:
    top = sorted(result.rejections.items(), key=lambda kv: -kv[1])[:6]
    return [f"{n:>7,} x {reason}" for reason, n in top]



def _layer_list(layers: list[int], limit: int = 6) -> str:
    shown = ", ".join(str(i) for i in layers[:limit])
    return shown + (", ..." if len(layers) > limit else "")


def attention_text(e: Estimate) -> str | None:
    """One line on sliding-window attention as priced (Estimate.attention): which layers are
    windowed, the window, and where the windowed layers' time came from; None without one."""
    a = e.attention
    if a is None:
        return None
    win, full = a["windowed_layers"], a["full_layers"]
    line = f"Attention: sliding window of {a['sliding_window']:,} tokens on {len(win)} of "
    line += f"{len(win) + len(full)} layers"
    if full:
        line += f" (full attention on layers {_layer_list(full)}, 0-based)"
    if a.get("priced_as") == "kernel_table":
        line += (
            f"; windowed layers take {a['forward_ratio']:.2f}x (forward) / "
            f"{a['backward_ratio']:.2f}x (backward) of full attention's time, {a['status']} "
            f"from the kernel table's {a['kernel']} window rows (FLOP ratio "
            f"{a['flop_ratio']:.2f})"
        )
    elif a.get("priced_as") == "tile_model":
        why = (
            "no kernel-table window rows span this sequence and window: extrapolated"
            if "status" in a
            else "the cluster has no kernel tables"
        )
        line += (
            f"; windowed layers take {a['forward_ratio']:.2f}x (forward) / "
            f"{a['backward_ratio']:.2f}x (backward) of full attention's time on the tile model "
            f"({why}: whole 128-token tiles plus a fixed cost per query tile; FLOP ratio "
            f"{a['flop_ratio']:.2f})"
        )
    else:
        line += f"; {a['priced_as']}"
    return line


def cp_text(e: Estimate, workload: Workload, model: ModelSpec) -> str | None:
    """One line where the plan's CP is Transformer Engine's all-to-all (Workload.cp_attention
    "a2a"): the launcher must be told (Megatron --cp-comm-type a2a, which the export writes);
    None otherwise."""
    if e.layout.cp <= 1 or workload.cp_attention != "a2a":
        return None
    line = (
        f"Context parallelism: all-to-all of Q, K, V and the output over CP {e.layout.cp} "
        "(Transformer Engine, Megatron --cp-comm-type a2a), priced exposed"
    )
    why = [w for w, on in (("sliding windows", model.sliding_window is not None),
                           ("attention sinks", model.attention_sinks)) if on]  # fmt: skip
    if why:
        line += f"; the p2p ring refuses this model's {' and '.join(why)}"
    return line


COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "dp_comm", "pp_comm")


def offload_text(e: Estimate) -> str:
    """CPU activation offloading as priced (Estimate.offload), one line ending in a newline;
    "" without offloading."""
    o = e.offload
    if o is None:
        return ""
    return (
        f"CPU offload: the first {o['layers']} layers' activations over the "
        f"{o['host_link_gb_per_s']:g} GB/s host link, copies {o['host_link_busy_s']:.3f} s per "
        f"step, {o['exposed_s']:.3f} s of it waited for (in compute)\n"
    )


def attention_speed_text(e: Estimate) -> str:
    """The attention passes' measured / assumed speed vs the flagship (Estimate.attention_speed),
    one line ending in a newline; "" where the peak ratio prices them."""
    a = e.attention_speed
    if a is None:
        return ""
    return (
        f"attention on {a['gpu']}: forward {a['forward']:.3f}x the generation flagship's speed "
        f"({a['forward_basis']}: {a['forward_from']}), backward {a['backward']:.3f}x "
        f"({a['backward_basis']}: {a['backward_from']}, only the forward is measured); "
        f"`planner presets gpus --constants {a['gpu']}` gives the sources\n"
    )


def dp_exposure_text(e: Estimate) -> str:
    """`estimate --explain`: the exposed data-parallel seconds (breakdown dp_comm) by cause
    (Estimate.dp_exposure), one line ending in a newline; "" where none is exposed."""
    d = e.dp_exposure
    if d is None:
        return ""
    return (
        f"DP grad/param exposed {e.breakdown_s['dp_comm']:.3f} s of {d['link_busy_s']:.3f} s "
        f"on the links (stage {d['stage']}): {d['beyond_overlap_window_s']:.3f} past the "
        f"overlap windows, {d['last_gradient_bucket_s']:.3f} the last gradient bucket and "
        f"{d['first_parameter_bucket_s']:.3f} the first parameter bucket (the edge buckets "
        f"nothing hides), {d['compute_slowed_beside_nccl_s']:.3f} compute slowed beside the "
        "hidden NCCL kernels"
        + (
            f", {d['shared_embedding_all_reduce_s']:.3f} the shared word embedding's gradient "
            "all-reduce between the first and last pipeline stages"
            if d.get("shared_embedding_all_reduce_s")
            else ""
        )
        + "\n"
    )


def step_tail_text(e: Estimate) -> str:
    """`estimate --explain`: the step's tail (breakdown optimizer) with its gradient memset
    apart (Estimate.step_tail), one line ending in a newline; "" where there is no memset."""
    t = e.step_tail
    if t is None or not (t["grad_zeroing_s"] or t["grad_bucket_passes_s"]):
        return ""
    passes = ""
    if t["grad_bucket_passes_s"]:
        passes = (
            f"{t['grad_bucket_passes_s']:.3f} s reading {t['grad_bucket_passes_gb']:.1f} GB of "
            "gradient buckets before their collectives (Megatron's NaN check and pre-scale), "
        )
    return (
        f"optimizer step {t['optimizer_s']:.3f} s (stage {t['stage']}): "
        f"{t['grad_zeroing_s']:.3f} s zeroing {t['grad_zeroing_gb']:.1f} GB of gradients before "
        "the first backward (Megatron's grad-buffer memset, torch zero_grad(set_to_none=False)), "
        f"{passes}{t['optimizer_step_s']:.3f} s norm, clip and Adam over the rank's shard\n"
    )


def moe_routing_text(e: Estimate) -> str:
    """`estimate --explain`: the busiest EP rank's routed rows the expert GEMMs and the EP
    all-to-all are priced at, and why (Estimate.moe_routing), one line ending in a newline; ""
    for a dense model."""
    r = e.moe_routing
    if r is None:
        return ""
    return (
        f"MoE routing: expert GEMMs and EP all-to-all at the busiest EP rank's "
        f"{r['busiest_rank_over_mean']:.2f}x the mean routed rows ({r['why']})\n"
    )


STEP_TAIL_OPS = (ADAM_OP, CLIP_OP, CHUNK_CAT_OP)
"""The step tail's kernel-table ops (stage_optimizer_s, fsdp_copies_s)."""


def explain_text(e: Estimate) -> str:
    """`estimate --explain`: which table priced each term, and how (Estimate.kernels: per
    term, look-ups measured / interpolated / extrapolated; extrapolated ones are priced on the
    efficiency curves or, for collectives, the network model)."""
    k = e.kernels
    off = offload_text(e) + attention_speed_text(e) + moe_routing_text(e) + dp_exposure_text(e)
    off += step_tail_text(e)
    if k is None:
        return off + (
            "priced on the model: the cluster has no kernel tables (compute on the efficiency "
            "curves, collectives on the alpha-beta network model)"
        )
    lines = [off + f"kernel tables: {k['table']}"]
    for term, counts in k["terms"].items():
        parts = ", ".join(f"{counts[s]} {s}" for s in ("measured", "interpolated", "extrapolated"))
        model = "network model" if term in COMM_TERMS else "efficiency curve"
        how = f"priced on the {model}"
        if term == "tp_overlap_split":  # cost_models/tp_overlap.py overlap_s
            how = "the GEMM kept whole, its split into TP-overlap pieces not priced"
        if term in STEP_TAIL_OPS:  # cost_models/stage.py stage_optimizer_s / fsdp_copies_s
            how = "priced at the HBM figure, the table has no streaming row of the op"
        if term == CP_STEP_TERM:  # cost_models/compute.py cp_step_rate
            how = (  # carried to the step's call by kernels.tile_rate_ratio
                "that CP ring step priced from the full-sequence causal call's rate by the tile model"
            )
        if term in k.get("without_rows", ()):  # e.g. kernels: {builtin: ID, tables: [attention]}
            total = sum(counts.values())
            lines.append(f"  {term}: {total} look-ups, none in the tables (no {term} rows): {how}")
            continue
        lines.append(f"  {term}: {parts} look-ups (extrapolated: {how})")
    if not any(t in k["terms"] for t in COMM_TERMS):
        lines.append("  collectives: no curves in the tables, priced on the network model")
    return "\n".join(lines)


def fp4_text(cluster: Cluster, workload: Workload) -> str:
    """`estimate --explain` under --precision nvfp4: the rate the NVFP4 GEMMs are priced at
    (cost_models.compute.gemm_hardware) over the part's fp8 GEMMs, and whether it was measured;
    "" for other precisions."""
    gpu = cluster.gpu
    if workload.precision != "nvfp4" or gpu.peak_fp4_tflops is None or gpu.peak_fp8_tflops is None:
        return ""
    ratio, measured = fp4_speed_over_fp8(gpu)
    carried = gpu.fp4_gemm_speed.carried_from if gpu.fp4_gemm_speed else None
    if carried:
        basis = f"measured on {carried}, carried to {gpu.id}: {gpu.id} fp4_gemm_speed"
    elif measured:
        basis = f"measured: {gpu.id} fp4_gemm_speed"
    else:
        basis = f"the datasheet peak ratio, an assumption: no NVFP4 GEMM measured on {gpu.id}"
    return (
        f"\nNVFP4 GEMMs: {ratio:.2f}x the speed of the part's per-tensor fp8 GEMMs ({basis}; "
        f"presets gpus --constants {gpu.id})"
    )


def streaming_text(cluster: Cluster) -> str:
    """`estimate --explain`: the HBM bandwidth the memory-bound ops outside the kernel tables
    (norms, activations, casts, residual adds, optimizer step, MoE permutes) are priced at, and
    where that fraction of the datasheet comes from."""
    gpu = cluster.gpu
    fraction = calibration_for_cluster(cluster).hbm_efficiency
    values = cluster.calibration.values if cluster.calibration is not None else None
    if values is not None and values.hbm_efficiency is not None:
        basis = "the cluster's calibrated hbm_efficiency"
    elif gpu.hbm_streaming_efficiency is not None:
        basis = f"measured on {gpu.id}: hbm_streaming_efficiency (presets gpus --constants)"
    else:
        basis = f"the {gpu.generation} generation's hbm_efficiency, an assumption"
    return (
        f"memory-bound ops outside the tables: {fraction * gpu.hbm_bandwidth_gb_per_s:,.0f} "
        f"GB/s = {fraction:.3f} of the {gpu.hbm_bandwidth_gb_per_s:,.0f} GB/s datasheet ({basis})"
    )

