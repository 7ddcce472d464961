"""Enumerate the legal layouts for a model on a cluster, one small generator per choice.

A candidate that breaks a rule is recorded as data (its reason, counted), never raised, so the
report can say "212 candidates exceeded usable HBM; 40 had tp that does not divide the heads".
The legality rules themselves live in cost_models.rules (one copy, shared with `estimate`).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from cost_models import framework, rankmap, topology
from cost_models.compute import quant_recipe, recomputed_norms
from cost_models.errors import InvalidInput
from cost_models.rules import offload_rules, shape_violations, zero_violations
from cost_models.memory import nothing_to_shard
from cost_models.pipeline import split_slots
from cost_models.specs import Axis, Cluster, Estimate, Layout, ModelSpec, Workload

from ..types import SearchSpace

NO_BATCH = "no global batch in the range is a multiple of micro_batch*dp (*pp when interleaving)"
_NUMBERS = re.compile(r"\d+(?:[.*]\d+)*")


@functools.cache
def divisors(n: int) -> tuple[int, ...]:
    """Divisors of n, ascending, by trial division up to sqrt(n): O(sqrt n), so a 1,048,576-GPU
    cluster (the largest Cluster accepts) costs ~1,000 steps, not a million per call."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


HARD_MARGIN_S = 2.0
"""How far past its deadline a search may run to score its first plan (candidate enumeration
included): past deadline + HARD_MARGIN_S it stops with nothing scored, which the engines report
as "nothing scored within the time limit" (exit 1). README.md#reliability documents it."""


TIMED_OUT = "not scored before the time limit"
WORK_LIMITED = "not scored before the work limit"
LIMIT_REJECTIONS = {"time_limit": TIMED_OUT, "work_limit": WORK_LIMITED}
"""The rejection reason of candidates left unscored, by the limit that stopped the search
(SolveStats.stopped_by)."""


def nothing_scored(time_limit_s: float) -> str:
    """The NoFeasiblePlan message when the deadline came before any plan was scored."""
    return (
        f"nothing scored within the time limit ({time_limit_s:g} s + {HARD_MARGIN_S:g} s margin "
        "for enumerating candidates and scoring the first plan): raise --time-limit or narrow "
        "the search (pin --tp/--pp, --max-nodes, fewer --micro-batches, --no-order-search)"
    )


class DeadlinePassed(Exception):
    """Raised by the enumeration when the search's hard deadline passes (planner.search.table)."""


def reason_key(message: str) -> str:
    """A rule message with its numbers blanked, to count rejections by rule."""
    return _NUMBERS.sub("N", message)


class RuleCounter(Counter):
    """Rejections counted by rule (numbers blanked), each shown as the first message of its rule
    with its own numbers (issue 20: "global batch (128) must be a multiple of micro_batch*dp
    (48)", not "(N)")."""

    def __init__(self) -> None:
        super().__init__()
        self._first: dict[str, str] = {}

    def add(self, message: str, count: int) -> None:
        key = reason_key(message)
        first = self._first.setdefault(key, message)
        self[first] += count


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


def vp_splits(model: ModelSpec, pp: int, vp: int) -> bool:
    """Whether pp*vp chunks split the model's layers into whole chunks of equal size, where the
    embedding and the LM head may each count as one layer (Megatron --account-for-embedding/
    loss-in-pipeline-split): the first and last chunks then hold one layer fewer, as
    pipeline.chunk_layer_counts splits them. Llama 3 405B (126 layers = 128 - 2) trained at pp
    16 with interleaving this way (Llama 3 paper sec. 3.3.2); an equal-chunks rule alone
    (num_layers % (pp * vp) == 0) excludes it."""
    return pp * vp <= model.num_layers and any(
        (model.num_layers + extra) % (pp * vp) == 0 for extra in (0, 1, 2)
    )


def search_rule_violations(model: ModelSpec, layout: Layout) -> list[str]:
    """The rules the search's candidate generator applies beyond cost_models.rules, as
    messages: what `planner estimate` must refuse too (issue 28). A layout counting the
    embedding or the loss in its split has Megatron's exact rules (cost_models.rules)."""
    lo = layout
    if split_slots(lo) != (0, 0):
        return []
    too_many = lo.pp * lo.vp > model.num_layers  # cost_models.rules says that one
    if lo.vp > 1 and lo.pp > 1 and not too_many and not vp_splits(model, lo.pp, lo.vp):
        per_rank = model.num_layers / lo.pp
        return [
            f"vp ({lo.vp}): {model.num_layers} layers over pp ({lo.pp}) are {per_rank:g} per "
            f"rank, which do not split into {lo.vp} equal chunks (num_layers, or num_layers + 1 "
            f"or + 2 with the embedding and LM head counted, must be a multiple of pp*vp = "
            f"{lo.pp * lo.vp})"
        ]
    return []


def _vps(model: ModelSpec, pp: int, space: SearchSpace) -> list[int]:
    if pp == 1:
        return [1]
    L, vps = model.num_layers, range(2, space.max_vp + 1)
    pinned = _pinned_slots(space)
    if pinned is None:
        # The search's own choice: past num_layers chunks, the embedding and the loss fill
        # the first and last (split_flags); below it the even split already gives the end
        # chunks one layer fewer where Megatron's accounting would (vp_splits).
        past = space.framework != "deepspeed"
        return [1] + [v for v in vps if vp_splits(model, pp, v) or past and L < pp * v <= L + 2]
    total = L + sum(pinned)
    if not sum(pinned):
        return [1] + [v for v in vps if vp_splits(model, pp, v)]
    # Pinned: Megatron's rules exactly (cost_models.rules._split_slot_rules; a pp they rule
    # out is rejected there, counted).
    return [1] + [v for v in vps if total % pp == 0 and (total // pp) % v == 0]


def _pinned_slots(space: SearchSpace) -> tuple[int, int] | None:
    """(embedding, loss) slots every pp > 1 plan counts (SearchSpace pins), None: the search's."""
    e, loss = space.account_for_embedding_in_pipeline_split, space.account_for_loss_in_pipeline_split
    if e is None and loss is None:
        return None
    return int(bool(e)), int(bool(loss))


def split_flags(model: ModelSpec, space: SearchSpace, pp: int, vp: int) -> dict[str, bool]:
    """The account_for_* Layout fields of a (pp, vp) shape: the space's pins, else on only where
    pp * vp exceeds num_layers by one (the loss fills the last chunk) or two (the embedding the
    first too), as Megatron-Bridge's Llama 3.1 405B recipes run PP 16 x VP 8 over 126 layers,
    with interleaving (a whole pipeline rank for the embedding alone is not offered) and not
    for DeepSpeed (framework.profile_violations: no such split); never at pp 1."""
    if pp == 1:
        return {}
    pinned = _pinned_slots(space)
    if pinned is None:
        extra = pp * vp - model.num_layers
        if vp == 1 or space.framework == "deepspeed" or not 0 < extra <= 2:
            return {}
        pinned = (int(extra == 2), 1)
    return {
        "account_for_embedding_in_pipeline_split": bool(pinned[0]),
        "account_for_loss_in_pipeline_split": bool(pinned[1]),
    }


def _eps(model: ModelSpec, tp: int, dp: int, cp: int, space: SearchSpace) -> list[int]:
    # EP is carved from the tp*dp*cp ranks of a stage (expert-TP 1, Megatron MoE folding).
    if model.moe is None:
        return [1]
    legal = [e for e in divisors(tp * dp * cp) if model.moe.num_experts % e == 0]
    return _pinned_or(legal, space.ep, space.max_ep)


def _shape_tuples(
    model: ModelSpec, cluster: Cluster, space: SearchSpace
) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """(tp, pp, cp, dp, ep, vp, micro_batch): everything that legality depends on."""
    for tp, pp, cp, dp in degree_tuples(model, cluster, space):
        for ep in _eps(model, tp, dp, cp, space):
            for vp in _vps(model, pp, space):
                for mb in space.micro_batches:
                    yield tp, pp, cp, dp, ep, vp, mb


def _schedule_variants(
    space: SearchSpace, pp: int, vp: int, ep: int, precision: str = "bf16"
) -> list[tuple[str, bool]]:
    """(pp_schedule, ep_overlap) pairs to try for a shape: the space's choices where they apply
    (dualpipe: even pp, no interleaving; ep_overlap: ep > 1, Megatron's 1F1B schedule with
    virtual stages when pp > 1), so a
    switch that does not apply to a shape is not counted as a rejection."""
    # The space's framework decides whether it runs the schedule or the overlap at all
    # (cost_models.framework: no launcher here has DualPipe; Megatron's overlap needs a
    # bf16/fp16 model, which fp8 training is).
    prof = space.profile
    overlap_ok = prof is None or (prof.ep_overlap and framework.ep_overlap_precision_ok(precision))
    out = []
    for schedule in space.pp_schedules:
        if schedule == "dualpipe" and (pp < 2 or pp % 2 or vp > 1):
            continue
        if schedule == "dualpipe" and prof is not None and not prof.dualpipe:
            continue
        for overlap in space.ep_overlap:
            if overlap and (ep == 1 or schedule == "dualpipe" or (pp > 1 and vp == 1)):
                continue
            if overlap and not overlap_ok:
                continue
            out.append((schedule, overlap))
    return out


def batch_choices(
    workload: Workload, space: SearchSpace, micro_batch: int, dp: int, pp: int = 1, vp: int = 1
) -> Sequence[int]:
    """The global batches a (micro_batch, dp) base may take, largest first (a lazy range: a wide
    range costs nothing, the search only ever reads a few of them by bisection).

    Fixed batch: the workload's own. Range: every multiple of micro_batch*dp in [MIN, MAX], of
    micro_batch*dp*pp when interleaving (the two batch rules of cost_models.rules; no other rule
    reads the batch). The search only ever
    needs the largest of them that fits in memory (see `largest_fitting`).
    """
    if space.global_batch_range is None:
        return [workload.global_batch_seqs]
    lo, hi = space.global_batch_range
    step = micro_batch * dp * (pp if vp > 1 else 1)
    return range(hi // step * step, lo - 1, -step)


def largest_fitting(batches: Sequence[int], fits) -> tuple[int | None, int]:
    """(largest batch in `batches` (descending) with fits(batch), the index of the last one tried).

    Why the largest: for a fixed layout the cost model's step is m*T + C with m = batch /
    (micro_batch*dp) the number of micro-batches and T, C >= 0 independent of m (C the maximum
    over stages of a per-step DP exposure that may grow with m, see below):
      * stage times per micro-batch, the slowest stage and the bubble (sum - max) / vp do not read
        m (cost_models.pipeline.schedule_time_s); compute, recompute, TP/CP/EP terms are m * stage;
      * pp_comm is 2(pp-1) p2p sends, the optimizer step one pass over the stage's parameters;
      * dp_comm: ZeRO-0/1/2 expose max(0, grads - 2 fwd) + max(0, gather - fwd) once per step, ZeRO-3
        m times the per-micro-batch excess, and every stage its edge buckets once per step
        (stage.stage_dp_parts, dp_edge_buckets_s), plus overlap_slowdown_s, linear in them; the step
        takes the slowest stage's: max over stages r of (m*D_r + E_r), D_r, E_r >= 0.
    So time per sequence is a maximum of terms T/(micro_batch*dp) + C/(m*micro_batch*dp), each
    non-increasing in m: a larger legal batch is never worse in tokens/s. Memory is
    non-decreasing in m (in-flight micro-batches min(p - r, m) and the interleaved warm-up
    min(chunks, m*v), pipeline.inflight_chunks; ZeRO-2 keeps unsharded gradients once m > 1,
    memory.state_bytes), so the batches that fit are a suffix of the descending list and the best
    is the first that fits: found by bisection.
    tests/integration/search/test_sat_batch_range.py checks both
    claims against estimate() at every batch of small ranges.
    """
    if fits(batches[0]):
        return batches[0], 0
    last = len(batches) - 1
    if last == 0 or not fits(batches[last]):
        return None, last
    bad, good = 0, last  # fits(batches[bad]) is False, fits(batches[good]) is True
    while good - bad > 1:
        mid = (bad + good) // 2
        if fits(batches[mid]):
            good = mid
        else:
            bad = mid
    return batches[good], good


def legal_bases_batched(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], list[Sequence[int]], Counter[str]]:
    """legal_bases, and for each base its legal global batches (largest first).

    `deadline` (a time.perf_counter() value): raise DeadlinePassed once it has passed, so a huge
    space's enumeration cannot outlive the search's time limit."""
    bases: list[Layout] = []
    batches: list[Sequence[int]] = []
    rejected = RuleCounter()
    per_shape = len(space.recompute) * len(space.zero_stages)
    prof = space.profile
    zero_refused: dict[str, int] = {}  # ZeRO-rule message -> candidates, in first-seen order
    num_shapes = no_batch = 0
    for tp, pp, cp, dp, ep, vp, mb in _shape_tuples(model, cluster, space):
        num_shapes += 1
        if deadline is not None and num_shapes % 64 == 0 and time.perf_counter() > deadline:
            raise DeadlinePassed()
        choices = batch_choices(workload, space, mb, dp, pp, vp)
        if not choices:
            no_batch += 1
            rejected[NO_BATCH] += per_shape
            continue
        work = workload
        if choices[0] != workload.global_batch_seqs:
            work = workload.model_copy(update={"global_batch_seqs": choices[0]})
        for schedule, overlap in _schedule_variants(space, pp, vp, ep, workload.precision):
            base = Layout(
                tp=tp,
                pp=pp,
                dp=dp,
                cp=cp,
                ep=ep,
                etp=framework.expert_tp(prof, model, tp, ep),
                vp=vp,
                micro_batch=mb,
                recompute=space.recompute[0],
                zero_stage=space.zero_stages[0],
                sequence_parallel=tp > 1,
                pp_schedule=schedule,
                ep_overlap=overlap,
                cpu_offload_layers=space.cpu_offload_layers,
                **split_flags(model, space, pp, vp),
            )
            problems = shape_violations(model, cluster, work, base)
            if problems:
                rejected.add(problems[0], per_shape)
                continue
            stages, refused = zero_rule_split(work, space, base)
            for reason in refused:  # each stage a ZeRO rule takes out, once per recompute
                zero_refused[reason] = zero_refused.get(reason, 0) + len(space.recompute)
            if stages:
                bases.append(base.with_update({"zero_stage": stages[0]}))
                batches.append(choices)
    for reason, n in zero_refused.items():  # counted by message here, by rule once (a regex)
        rejected.add(reason, n)
    if space.global_batch_range is not None and num_shapes and no_batch == num_shapes:
        lo, hi = space.global_batch_range
        raise InvalidInput(
            f"global_batch_range: no batch in [{lo}, {hi}] is a multiple of micro_batch*dp "
            f"for any layout in the space (widen the range or allow other micro-batches)"
        )
    if space.ep is not None and model.moe is None and space.ep > 1:
        rejected[f"ep ({space.ep}) > 1 needs a mixture-of-experts model"] += 1
    return bases, batches, rejected


def zero_stages(workload: Workload, space: SearchSpace, base: Layout) -> tuple[int, ...]:
    """The space's ZeRO stages whose rules `base` keeps (cost_models.rules.zero_violations,
    e.g. fp8 primary weights need ZeRO >= 1): every stage the search may pick is checked, not
    only the first (the rest of the rules read no ZeRO stage: checked once per shape)."""
    return zero_rule_split(workload, space, base)[0]


def zero_rule_split(
    workload: Workload, space: SearchSpace, base: Layout
) -> tuple[tuple[int, ...], list[str]]:
    """(the space's ZeRO stages whose rules `base` keeps, the first broken rule's message of
    each stage it does not keep): legal_bases_batched counts every stage a rule takes out in
    the rejections, with its own reason, as it counts the shape rules. The rules: cost_models.
    rules.zero_violations and the space's framework's inputs that need a ZeRO stage
    (framework.zero_input_violations: Megatron's bf16 moments need ZeRO >= 1)."""
    prof = space.profile
    if prof is not None and not framework.states_zero_inputs(prof, workload):
        prof = None  # the usual case, once per base: no input of the profile's ZeRO rules
    kept: list[int] = []
    refused: list[str] = []
    for z in space.zero_stages:
        lo = base.with_update({"zero_stage": z})
        problems = zero_violations(workload, lo)
        if prof is not None:
            problems += framework.zero_input_violations(prof, workload, lo)
        if problems:
            refused.append(problems[0])
        else:
            kept.append(z)
    return tuple(kept), refused


def legal_bases(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """One legal layout per (degrees, ep, vp, micro_batch), canonical order, the first recompute
    and the first ZeRO choice its rules allow; and rejection counts (once per recompute x ZeRO x
    order it stands for).

    Legality is checked once per base for the rules that read no choice, which holds because of
    what cost_models.rules reads: never the order; recompute only through the modules a
    selective choice names (_recompute_rules), which recompute_choices never names where the
    model lacks them. The rules that read the ZeRO stage (rules.zero_violations: fp8 primary
    weights need ZeRO >= 1, memory_phases fsdp2 needs ZeRO-3) are checked for every stage of
    the space here (a base is legal when one stage is) and again per stage where the base
    expands (sharding_variants), so no narrowing of the space is needed for them; each stage
    they take out is counted here under its own rule, once per recompute mode, as a base the
    shape rules refuse is counted once per recompute x ZeRO stage. With a global
    batch range a base is legal when some batch in the range is (its largest legal batch is
    checked).
    """
    bases, _, rejected = legal_bases_batched(model, cluster, workload, space, deadline)
    return bases, rejected


_NO_KNOBS = {"recompute_modules": None, "recompute_method": None, "recompute_num_layers": None}


def recompute_choices(
    model: ModelSpec, workload: Workload, space: SearchSpace, base: Layout
) -> list[dict[str, Any]]:
    """The recompute settings the search tries on `base`, as Layout updates, in space.recompute
    order. The rules refuse only modules the model lacks (cost_models.rules), which these never
    name, so a base's legality holds for every choice.

    With space.recompute_granularity and a Megatron workload (selective_recompute "attention"),
    besides Megatron's defaults (selective = core_attn, full = every layer):
      * selective, light: layernorm (where a layer's norm is a module of its own:
        compute.recomputed_norms; + moe_act, mla_up_proj where the model has them):
        elementwise reruns (and the MLA up-projections) that drop the norm outputs and expert
        activations but keep the attention core;
      * selective, cheap: the light set + core_attn;
      * selective, heavy: the cheap set + mlp (dense) / shared_experts: the MLP GEMMs rerun;
      * full, block: only the first k layers of each model chunk recomputed, k half the chunk
        (rounded down), when 1 <= k is below the chunk's layers (otherwise it is uniform).
    Memory falls and recompute time rises along each chain (extends_chain; the light set
    starts its own chain after core_attn); the search weighs them.
    The list is shared (cached): callers must not modify it.
    """
    megatron = (
        space.recompute_granularity
        and space.framework in (None, "megatron")
        and workload.selective_recompute == "attention"
    )
    per_chunk = model.num_layers // (base.pp * base.vp)
    # TransformerConfig.__post_init__ (megatron-core 0.19.2): "Delayed scaling does not support
    # moe_act and layernorm recompute for fp8" (the Megatron export writes --fp8-recipe delayed
    # for that recipe, cost_models.compute.quant_recipe). A framework rule: applied when searching for Megatron.
    fp8_delayed = space.framework == "megatron" and quant_recipe(workload) == "delayed"
    # `layernorm` only where some layer's norm is a module of its own (compute.recomputed_norms:
    # Transformer Engine fuses a dense layer's into its linears); elsewhere a no-op twin
    kinds = [False] * bool(model.num_dense_layers) + [True] * bool(model.num_moe_layers)
    norms = any(any(recomputed_norms(model, workload, moe)) for moe in kinds)
    choices = _recompute_choices(model, space.recompute, megatron, per_chunk, fp8_delayed, norms)
    if base.ep_overlap and space.framework is not None:
        # Megatron asserts no full recomputation and no `moe` module with the all-to-all overlap
        # (framework.ep_overlap_violations); those choices are not runnable on this base.
        prof = framework.profile(space.framework)
        choices = _overlap_runnable(choices, prof, base)
    return choices


@functools.lru_cache(maxsize=4096)
def _overlap_runnable_cached(
    choices: tuple[tuple[tuple[str, Any], ...], ...], prof_name: str, base: Layout
) -> list[dict[str, Any]]:
    prof = framework.profile(prof_name)
    out = []
    for items in choices:
        choice = dict(items)
        if not framework.ep_overlap_violations(prof, base.with_update(choice)):
            out.append(choice)
    return out


def _overlap_runnable(
    choices: list[dict[str, Any]], prof: framework.FrameworkProfile, base: Layout
) -> list[dict[str, Any]]:
    key = tuple(tuple(sorted(c.items())) for c in choices)
    return _overlap_runnable_cached(key, prof.name, base)


def extends_chain(prev: dict[str, Any], choice: dict[str, Any]) -> bool:
    """Whether `choice` recomputes everything `prev` does and more: the same mode and, for
    selective, a superset of its modules (None: Megatron's default, core_attn); under full,
    the list runs from fewer recomputed layers (block) to every layer. Its step-time bound is
    then no lower than prev's."""
    if prev["recompute"] != choice["recompute"]:
        return False
    if choice["recompute"] != "selective":
        return True
    before = set(prev["recompute_modules"] or ("core_attn",))
    return before <= set(choice["recompute_modules"] or ("core_attn",))


def recompute_chain_heads(choices: list[dict[str, Any]]) -> list[int]:
    """Indices of the choices in a recompute_choices list that start a chain: each later
    choice of a chain recomputes more than the one before it (extends_chain: nested module
    sets; more layers recomputed), so each has a step-time bound no lower than the one before
    it and can wait until that one is first popped."""
    return [i for i, c in enumerate(choices) if i == 0 or not extends_chain(choices[i - 1], c)]


@functools.lru_cache(maxsize=256)
def _recompute_choices(
    model: ModelSpec,
    modes: tuple[str, ...],
    megatron: bool,
    per_chunk: int,
    fp8_delayed: bool,
    norms: bool = True,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for mode in modes:
        if not megatron or mode != "full":
            out.append({"recompute": mode, **_NO_KNOBS})
        if not megatron:
            continue
        if mode == "selective":
            light = ["layernorm"] if norms and not fp8_delayed else []
            heavy = []
            if model.num_moe_layers:
                light += [] if fp8_delayed else ["moe_act"]
                if model.moe is not None and model.moe.num_shared_experts:
                    heavy.append("shared_experts")
            if model.mla is not None:
                light.append("mla_up_proj")
            if model.num_dense_layers:
                heavy.append("mlp")
            cheap = ["core_attn", *light]
            # light keeps the attention core (no attention FLOPs rerun): DeepSeek-V3 recomputes
            # only its norms, MLA up-projections and SwiGLU outputs (report sec. 3.3.3, 3.2.3)
            for modules in (light, cheap, cheap + heavy):
                if not modules or modules == ["core_attn"]:
                    continue  # nothing, or Megatron's default (the plain selective choice)
                update = {**_NO_KNOBS, "recompute": mode, "recompute_modules": tuple(modules)}
                if update not in out:
                    out.append(update)
        elif mode == "full":
            for k in (per_chunk // 2,):
                if 1 <= k < per_chunk:
                    out.append(
                        {
                            "recompute": mode,
                            "recompute_method": "block",
                            "recompute_num_layers": k,
                            "recompute_modules": None,
                        }
                    )
            out.append({"recompute": mode, **_NO_KNOBS})  # every layer: the most recompute
    return out


def legal_shapes(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """Every legal base with every recompute choice (recompute_choices) and ZeRO choice
    (canonical order) that the space's framework runs."""
    bases, rejected = legal_bases(model, cluster, workload, space, deadline)
    shapes = []
    for i, base in enumerate(bases):
        # Each base expands into recompute x ZeRO (x HSDP) shapes: on a large MoE space this loop
        # alone outlived the deadline 5x (issue 28's fuzzer: 16 s past a 1 s limit).
        if deadline is not None and i % 16 == 0 and time.perf_counter() > deadline:
            raise DeadlinePassed()
        variants = sharding_variants(space, base, model.moe is not None, workload)
        for choice in recompute_choices(model, workload, space, base):
            for zero, shard in variants:
                update = {**choice, "zero_stage": zero, "dp_shard": shard}
                shape = base.with_update(update)
                problems = framework_violations(model, space, shape)
                if problems:
                    rejected[reason_key(problems[0])] += 1
                else:
                    shapes.append(shape)
    return shapes, rejected


def sharding_variants(
    space: SearchSpace, base: Layout, moe: bool, workload: Workload
) -> list[tuple[int, int | None]]:
    """(ZeRO stage, dp_shard) pairs the search tries for a base: every ZeRO stage of the space
    that the workload's ZeRO rules allow (zero_stages), and for a framework with HSDP
    (torchtitan) the hybrid shard sizes too (cost_models.framework.shard_choices)."""
    prof = space.profile
    stages = zero_stages(workload, space, base)
    if nothing_to_shard(base, moe):
        # Every shard group is one GPU: a higher stage shards nothing, so only the lowest
        # stage the space allows is a plan (issue 28: no "DP1 ZeRO-3" recommendations).
        stages = (min(stages),)
    if prof is None or not prof.hsdp:  # shard_choices: [None] (no HSDP), without a copy per stage
        return [(zero, None) for zero in stages]
    return [
        (zero, shard)
        for zero in stages
        for shard in framework.shard_choices(prof, base.with_update({"zero_stage": zero}))
    ]


def framework_space(model: ModelSpec, space: SearchSpace) -> SearchSpace:
    """`space` narrowed to what its framework runs (cost_models.framework): ZeRO stages,
    recompute modes, interleaving, CP and EP caps. A pin or a choice outside it is bad input."""
    if space.framework is None:
        return space
    p = framework.profile(space.framework)
    if model.moe is not None and not p.moe:
        raise InvalidInput(f"model: {p.name} plans for mixture-of-experts models are not modelled")
    zero = tuple(z for z in space.zero_stages if z in p.zero_stages)
    recompute = tuple(r for r in space.recompute if r in p.recompute)
    if not zero:
        raise InvalidInput(
            f"zero_stages {list(space.zero_stages)}: {p.name} runs ZeRO {list(p.zero_stages)} "
            f"({p.zero_source})"
        )
    if not recompute:
        raise InvalidInput(f"recompute: {p.name} runs {', '.join(p.recompute)}")
    if space.stage_split == "search" and p.name != "megatron":
        # Only Megatron takes any split (--pipeline-model-parallel-layout); torchtitan takes one
        # layers-per-stage number, Megatron-DeepSpeed's PipelineModule a partition method.
        raise InvalidInput(f"stage_split search: {p.name} cannot take a searched layer split")
    pinned = _pinned_slots(space) or (0, 0)
    if p.name == "deepspeed" and any(pinned):
        # framework.profile_violations: no such split in Megatron-DeepSpeed's PipelineModule.
        part = "embedding" if pinned[0] else "loss"
        raise InvalidInput(
            f"account_for_{part}_in_pipeline_split is not a deepspeed split: Megatron-DeepSpeed "
            "partitions transformer layers only (PipelineModule partition_method "
            "'type:transformer')"
        )
    update: dict = {"zero_stages": zero, "recompute": recompute}
    for axis, cap in (("vp", p.max_vp), ("cp", p.max_cp), ("ep", p.max_ep)):
        if cap is None:
            continue
        pinned = getattr(space, axis, None)
        if pinned is not None and pinned > cap:
            raise InvalidInput(f"{axis} ({pinned}): {p.name} runs {axis} <= {cap} ({p.schedules})")
        key = f"max_{axis}"
        current = getattr(space, key)
        update[key] = cap if current is None else min(current, cap)
    return space.model_copy(update=update)


def offload_space(model: ModelSpec, cluster: Cluster, space: SearchSpace) -> SearchSpace:
    """`space` narrowed to what CPU activation offloading runs with (SearchSpace.
    cpu_offload_layers > 0): pp 1 and recompute none, as Megatron's TransformerConfig.
    __post_init__ refuses offloading with pipeline parallelism or any recompute; a pin or a
    choice that rules them out, too many layers or a GPU without a host link is bad input."""
    k = space.cpu_offload_layers
    if not k:
        return space
    problems = offload_rules(model, cluster, k)
    if space.pp not in (None, 1):
        problems.append(
            f"cpu_offload_layers needs pp 1 (Megatron: no pipeline parallelism with CPU "
            f"offloading), and pp is pinned at {space.pp}"
        )
    if "none" not in space.recompute:
        problems.append(
            "cpu_offload_layers needs recompute none (Megatron: CPU offloading does not work "
            f"with activation recomputation), and the allowed modes are {list(space.recompute)}"
        )
    if problems:
        raise InvalidInput("; ".join(problems))
    return space.model_copy(update={"pp": 1, "recompute": ("none",)})


def framework_violations(model: ModelSpec, space: SearchSpace, layout: Layout) -> list[str]:
    """Why the space's framework cannot run `layout` (none without a framework)."""
    if space.framework is None:
        return []
    return framework.profile_violations(framework.profile(space.framework), model, layout)


def allowed_orders(model: ModelSpec, space: SearchSpace) -> tuple[tuple[Axis, ...], ...] | None:
    """The rank orders the search may offer: SearchSpace.rank_orders (None: all 24) and, with a
    framework, only those its launcher builds for `model` (cost_models.framework)."""
    if space.framework is None:
        return space.rank_orders
    built = framework.profile(space.framework).orders_for(model)
    if space.rank_orders is None:
        return built
    return tuple(o for o in built if o in set(space.rank_orders))


CANONICAL_ORDER: tuple[Axis, ...] = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
# Every rank order, canonical first, then the rest in a fixed (lexicographic) order.
ALL_ORDERS: tuple[tuple[Axis, ...], ...] = (CANONICAL_ORDER,) + tuple(
    o for o in itertools.permutations(CANONICAL_ORDER) if o != CANONICAL_ORDER
)


def placement_key(cluster: Cluster, layout: Layout, *, moe: bool = True) -> tuple:
    """What the cost model sees of the order: the span of every group on every tier.

    Two orders with the same spans give the same estimate and the same placement, so only the
    first of them (in ALL_ORDERS) is kept. Spans are finer than `topology.placement` (they also
    carry the DP x CP and expert groups), so deduplicating on them loses nothing.
    """
    return tuple(sorted((k, tuple(v)) for k, v in topology.spans(cluster, layout, moe=moe).items()))


NO_ORDER = "no allowed rank order builds the same pipeline groups for dense and expert layers"


class OrderCache:
    """Distinct allowed orders per degree tuple (spans depend only on the degrees, ep and etp).

    `allowed`: the orders the search may offer (SearchSpace.rank_orders; None: all 24), kept in
    ALL_ORDERS order; `search` False keeps the canonical order only. For an MoE model (`moe`) an
    order Megatron-Core refuses (cost_models.rankmap.expert_pp_mismatch) is dropped. Of orders
    whose priced spans are equal only the first is kept: the cost model cannot tell them apart.
    """

    def __init__(
        self,
        cluster: Cluster,
        search: bool = True,
        allowed: tuple[tuple[Axis, ...], ...] | None = None,
        *,
        moe: bool = True,
    ) -> None:
        self.cluster = cluster
        self.moe = moe
        if not search:
            self.allowed: tuple[tuple[Axis, ...], ...] = (CANONICAL_ORDER,)
        elif allowed is None:
            self.allowed = ALL_ORDERS
        else:
            self.allowed = tuple(o for o in ALL_ORDERS if o in set(allowed))
        self._cache: dict[tuple[int, ...], tuple[tuple[Axis, ...], ...]] = {}
        self._equivalent: dict[tuple, tuple[tuple[Axis, ...], ...]] = {}

    def spans(
        self, layout: Layout, order: tuple[Axis, ...] | None = None
    ) -> dict[str, tuple[int, ...]]:
        """cost_models.rankmap spans of `layout` (with `order` instead of its own, if given):
        memoized there by what they read (degrees, ep, etp, order, tier domains)."""
        return rankmap.spans(self.cluster, layout, order, moe=self.moe)

    def orders(self, layout: Layout) -> tuple[tuple[Axis, ...], ...]:
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        found = self._cache.get(key)
        if found is None:
            seen: dict[tuple, list[tuple[Axis, ...]]] = {}
            for order in self.allowed:
                if self.moe and rankmap.expert_pp_mismatch(layout, order) is not None:
                    continue
                # Every spans dict has the same keys in the same order: its values identify it.
                seen.setdefault(tuple(self.spans(layout, order).values()), []).append(order)
            found = self._cache[key] = tuple(group[0] for group in seen.values())
            for group in seen.values():
                self._equivalent[(*key, group[0])] = tuple(group[1:])
        return found

    def equivalent(self, layout: Layout) -> tuple[tuple[Axis, ...], ...]:
        """The allowed orders priced the same as `layout`'s own (kept) order, besides it."""
        self.orders(layout)
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp, layout.order)
        return self._equivalent.get(key, ())


def enumerate_layouts(
    model: ModelSpec,
    cluster: Cluster,
    workload: Workload,
    space: SearchSpace,
    deadline: float | None = None,
) -> tuple[list[Layout], Counter[str]]:
    """All legal layouts in the space, one per distinct placement, and rejection counts
    (DeadlinePassed once `deadline`, a time.perf_counter() value, has passed)."""
    shapes, rejected = legal_shapes(model, cluster, workload, space, deadline)
    cache = OrderCache(
        cluster, space.search_order, allowed_orders(model, space), moe=model.moe is not None
    )
    layouts = []
    for i, shape in enumerate(shapes):
        if deadline is not None and i % 64 == 0 and time.perf_counter() > deadline:
            raise DeadlinePassed()
        orders = cache.orders(shape)
        if not orders:
            rejected[NO_ORDER] += 1
        layouts += [
            shape if order == CANONICAL_ORDER else shape.with_update({"order": order})
            for order in orders
        ]
    return layouts, rejected


def simplicity_rank(layout: Layout) -> tuple[int, ...]:
    """Tie-break toward simpler plans: fewer stages, less TP/CP/EP, no interleaving, less state."""
    recompute = ("none", "selective", "full").index(layout.recompute)
    modules = 0 if layout.recompute_modules is None else len(layout.recompute_modules)
    return (
        layout.pp,
        layout.tp,
        layout.cp,
        layout.ep,
        layout.vp,
        recompute,
        modules,
        layout.recompute_num_layers or 0,
        layout.zero_stage,
        -layout.micro_batch,
        ALL_ORDERS.index(layout.order),
        layout.pp_schedule != "1f1b",
        layout.ep_overlap,
    )


def family_key(layout: Layout) -> tuple:
    """What makes a plan an alternative rather than a variant: the degrees, interleaving,
    micro-batch and recompute. Plans that differ only in ZeRO stage (or HSDP shard size) or rank
    order are variants of one family; by default the search ranks families (each by its best plan)."""
    lo = layout
    return (lo.tp, lo.pp, lo.dp, lo.cp, lo.ep, lo.vp, lo.micro_batch, lo.recompute)


def plan_key(layout: Layout) -> tuple:
    """Every plan its own family (SolverOptions.top_variants: near variants of the best)."""
    return (*family_key(layout), layout.zero_stage, layout.dp_shard, layout.order)


SHORT_SEQ_FOR_CP = 16_384
"""Below this sequence length context parallelism is a cost to justify, not an expectation:
Llama 3 trained at 8k without CP and used CP 16 only for its 128k stage (Llama 3 paper sec.
3.3.2); Megatron-LM's CP guide targets long context (docs context_parallel.rst)."""


def complexity(e: Estimate, seq_len: int, first_tier: str) -> tuple[int, ...]:
    """How complex a plan is to run, for the simplicity tolerance (less first), in this order
    (docs/search.md#recommendation):
    1. model-parallel axes (TP, PP, CP, EP) whose group leaves the first tier (the NVLink
       domain): each is a cross-node collective or P2P stream to tune and debug (DP is every
       plan's baseline axis and does not count, nor is CP from SHORT_SEQ_FOR_CP on: splitting a
       long sequence over nodes is what CP is for, Llama 3's 128k stage ran CP 16 across
       nodes; counting it made a plan with recompute win over an equally fast one without);
    2. CP at a short sequence (below SHORT_SEQ_FOR_CP);
    3. activation recompute (none < selective < full);
    4. a higher ZeRO stage;
    5. interleaving (VP > 1);
    6. model-parallel axes in use in total.
    Plans equal in all six are equally simple (VP 4 is not simpler than VP 5): the faster one
    is recommended."""
    lo = e.layout
    degrees = {"tp": lo.tp, "pp": lo.pp, "cp": lo.cp, "ep": lo.ep}
    crossing = sum(
        any(f > 1 for tier, f in e.placement.get(axis, {}).items() if tier != first_tier)
        for axis, d in degrees.items()
        if d > 1 and not (axis == "cp" and seq_len >= SHORT_SEQ_FOR_CP)
    )
    short_cp = int(lo.cp > 1 and seq_len < SHORT_SEQ_FOR_CP)
    recompute = ("none", "selective", "full").index(lo.recompute)
    in_use = sum(d > 1 for d in degrees.values())
    return (crossing, short_cp, recompute, lo.zero_stage, int(lo.vp > 1), in_use)
