"""DualPipe and the MoE all-to-all overlap in the search: bounds stay below the estimate, the
pruned table holds the exhaustive top k, and the DP / memory shortcuts equal the estimate."""

import random

import factories
import pytest

from cost_models import topology
from cost_models.estimate import estimate
from cost_models.specs import Workload
from planner.search import exhaustive
from planner.search.bounds import StepLowerBound
from planner.search.candidates import enumerate_layouts
from planner.search.table import build_table
from planner.types import SearchSpace, SolverOptions

SPACE = SearchSpace(
    max_vp=2,
    micro_batches=(1, 2),
    pp_schedules=("1f1b", "dualpipe"),
    ep_overlap=(False, True),
)


def _case(dispatcher: str):
    model = factories.moe_model(num_layers=16)
    cluster = factories.cluster(32, ib_gb_per_s=25)
    work = Workload(seq_len=4096, global_batch_seqs=128, moe_dispatcher=dispatcher)
    return model, cluster, work


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_bounds_below_estimate_with_new_schedules(dispatcher: str) -> None:
    model, cluster, work = _case(dispatcher)
    layouts, _ = enumerate_layouts(model, cluster, work, SPACE)
    dual = [lo for lo in layouts if lo.pp_schedule == "dualpipe"]
    over = [lo for lo in layouts if lo.ep_overlap]
    assert dual and over
    bound = StepLowerBound(model, cluster, work)
    rng = random.Random(3)
    for lo in rng.sample(dual, min(60, len(dual))) + rng.sample(over, min(60, len(over))):
        e = estimate(model, cluster, work, lo)
        assert 0 < bound.step_s(lo) <= e.step_time_s, lo
        full = bound.placement_step_s(lo, with_dp=True)
        assert bound.placement_step_s(lo) <= full <= e.step_time_s, lo
        # Equal unless a saturated link adds its wait to dp_comm (estimate's capacity check).
        dp_opt = e.breakdown_s["dp_comm"] + e.breakdown_s["optimizer"]
        assert bound.dp_optimizer_s(lo, topology.spans(cluster, lo)) <= dp_opt * (1 + 1e-12), lo
        assert bound.peak_memory_gib(lo) == e.peak_memory_gib, lo


@pytest.mark.slow
def test_pruned_table_contains_exhaustive_top_k_with_new_schedules() -> None:
    model, cluster, work = _case("deepep")
    space = SPACE.model_copy(update={"search_order": False, "zero_stages": (1,)})
    oracle, _, _ = exhaustive.search(model, cluster, work, space, SolverOptions(top_k=5))
    table = build_table(model, cluster, work, space, 5)
    kept = {(e.layout, e.step_time_s) for e in table.estimates}
    assert all((e.layout, e.step_time_s) in kept for e in oracle)


def test_dualpipe_space_rejects_batch_range() -> None:
    with pytest.raises(ValueError, match="fixed global batch"):
        SearchSpace(global_batch_range=(64, 128), pp_schedules=("dualpipe",))


def test_megatron_export_names_the_real_overlap_and_dispatcher_flags() -> None:
    from pathlib import Path

    from cost_models.errors import InvalidInput
    from planner.export.launch import megatron_args

    flags_file = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
    known = {
        line.split()[0]
        for line in (flags_file / "megatron_lm_flags.txt").read_text().splitlines()
        if line.startswith("--")
    }
    model, cluster, work = _case("deepep")
    layouts, _ = enumerate_layouts(model, cluster, work, SPACE)
    over = next(lo for lo in layouts if lo.ep_overlap and lo.recompute != "full")
    args = megatron_args(model, work, estimate(model, cluster, work, over))
    for flag in ("--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"):
        assert flag in args
    assert args[args.index("--moe-flex-dispatcher-backend") + 1] == "deepep"
    assert {a for a in args if a.startswith("--")} <= known
    hybrid = work.model_copy(update={"moe_flex_backend": "hybridep"})
    args = megatron_args(model, hybrid, estimate(model, cluster, hybrid, over))
    assert args[args.index("--moe-flex-dispatcher-backend") + 1] == "hybridep"
    dual = next(lo for lo in layouts if lo.pp_schedule == "dualpipe")
    with pytest.raises(InvalidInput, match="dualpipe"):
        megatron_args(model, work, estimate(model, cluster, work, dual))


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_framework_decides_which_schedules_and_overlaps_are_searched(precision: str) -> None:
    """Megatron runs no DualPipe and overlaps the all-to-all only where its own asserts allow
    (transformer_config.py: no full recompute, a bf16/fp16 model, vp > 1 with pp > 1); no framework
    (None) lifts both rules."""
    from cost_models import framework

    model, cluster, _ = _case("alltoall")
    work = Workload(seq_len=4096, global_batch_seqs=128, precision=precision)
    megatron = SPACE.model_copy(update={"framework": "megatron"})
    layouts, _ = enumerate_layouts(model, cluster, work, megatron)
    assert layouts and not any(lo.pp_schedule == "dualpipe" for lo in layouts)
    over = [lo for lo in layouts if lo.ep_overlap]
    # fp8 is a bf16 model with fp8 GEMMs (--bf16 --fp8-format), which the assert accepts
    # (the Megatron-Bridge GB300 DeepSeek-V3 recipe runs both).
    assert over
    prof = framework.profile("megatron")
    assert all(not framework.ep_overlap_violations(prof, lo, precision) for lo in over)
    assert not any(lo.recompute == "full" for lo in over)
    assert framework.ep_overlap_violations(prof, over[0], "fp32")
    free, _ = enumerate_layouts(model, cluster, work, SPACE)
    assert any(lo.pp_schedule == "dualpipe" for lo in free)
