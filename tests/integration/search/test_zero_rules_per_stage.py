"""The search checks every (ZeRO stage, option) it may pick against the rules that read the
ZeRO stage (cost_models.rules.zero_violations), not only the space's first stage, and a
framework's launcher refuses no input the search priced (notes: /work/notes/edges2.md)."""

from __future__ import annotations

import json

import factories
import pytest

from cost_models.errors import InvalidInput
from planner import api
from planner.cli import main
from planner.search import candidates
from planner.types import SearchSpace


def _fp8_params_setup():
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    work = factories.workload(1024, 16, precision="fp8", fp8_params=True)
    return model, cluster, work


def test_legal_bases_check_every_zero_stage_not_the_first() -> None:
    """Was (main 23cb353, without api's narrowing of the space): every base rejected with
    'fp8_params needs a ZeRO stage >= 1', because legality was checked at zero_stages[0] = 0
    only; ZeRO-1..3 were never looked at."""
    model, cluster, work = _fp8_params_setup()
    space = SearchSpace(zero_stages=(0, 1, 2, 3))
    bases, rejected = candidates.legal_bases(model, cluster, work, space)
    assert bases and all(b.zero_stage == 1 for b in bases)
    # no base refused for it: only each base's ZeRO-0, once per recompute mode, is counted
    assert sum(n for r, n in rejected.items() if "fp8_params" in r) == len(bases) * 3
    shapes, _ = candidates.legal_shapes(model, cluster, work, space)
    assert {s.zero_stage for s in shapes} == {1, 2, 3}  # every stage the rule allows, no ZeRO-0


def test_a_stage_only_later_in_the_space_is_found() -> None:
    model, cluster, work = _fp8_params_setup()
    space = SearchSpace(zero_stages=(0, 3))
    bases, _ = candidates.legal_bases(model, cluster, work, space)
    assert bases and {b.zero_stage for b in bases} == {3}
    none = SearchSpace(zero_stages=(0,))
    bases, rejected = candidates.legal_bases(model, cluster, work, none)
    assert not bases and any("fp8_params" in reason for reason in rejected)


def test_plans_with_fp8_params_never_take_zero_0_through_the_library() -> None:
    model, cluster, work = _fp8_params_setup()
    result = factories.plan(model, cluster, work)
    assert result.ranked and all(e.layout.zero_stage >= 1 for e in result.ranked)


EST = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16"]
EST += ["--global-batch", "128", "--seq-len", "8192"]


@pytest.mark.parametrize("framework", ["torchtitan", "deepspeed"])
@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--optimizer-moments", "bf16"], "--optimizer-moments"),
        (["--activation-func-fp8-input-store"], "--activation-func-fp8-input-store"),
        (["--attention-output-store", "e5m6"], "--attention-output-store"),
    ],
)
def test_inputs_the_export_refuses_are_not_planned(capsys, framework, extra, flag) -> None:
    """Was (main 23cb353): `plan --framework torchtitan --optimizer-moments bf16` ranked plans
    priced with 8 B of optimizer state per parameter (exit 0), and `--emit torchtitan` then
    refused them: 'bf16 optimizer moments (optimizer_moments): no field here'."""
    assert main([*EST, "--framework", framework, *extra, "--json"]) == 2
    cap = capsys.readouterr()
    assert len(cap.err.strip().splitlines()) == 1 and "Traceback" not in cap.err
    error = json.loads(cap.out)["error"]
    assert error["field"] == flag and framework in error["message"]


def test_the_library_refuses_bf16_moments_for_torchtitan() -> None:
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    work = factories.workload(1024, 16, optimizer_moments="bf16")
    with pytest.raises(InvalidInput, match="optimizer_moments bf16: torchtitan"):
        api.plan(model, cluster, work, SearchSpace(framework="torchtitan"), api.SolverOptions())


# ------------------------------------------- memory_phases fsdp2 below ZeRO-3 (refused, not half-applied)


PHASES = "memory_phases fsdp2 is priced for ZeRO-3 and for ZeRO-0 without PP only"


@pytest.mark.parametrize(("zero", "pp"), [(1, 1), (2, 1), (0, 2)])
def test_a_record_stating_fsdp2_phases_it_does_not_model_is_refused(zero, pp) -> None:
    """Was (main 23cb353): scored with the states additive and only the loss / rebuild order of
    FSDP2's phases applied, without a word. ZeRO-2 ('never') and ZeRO-0 under PP are still
    refused; ZeRO-0 without PP is priced since edges3 (memory.fsdp2_phased)."""
    from planner.validate import validate_record

    settings = {"memory_phases": "fsdp2"}
    layout = {"zero_stage": zero, "pp": pp, "dp": 8 // pp}
    row = validate_record(factories.tiny_record(settings, framework="torchtitan", layout=layout))
    assert row.estimate is None
    assert f"{PHASES} (got ZeRO-{zero}, pp {pp})" in row.error
    for ok_zero in (0, 3):
        ok = validate_record(
            factories.tiny_record(settings, framework="torchtitan", layout={"zero_stage": ok_zero})
        )
        assert ok.error is None and ok.estimate is not None


def test_the_search_keeps_fsdp2_phases_to_the_stages_it_prices() -> None:
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    work = factories.workload(1024, 16, memory_phases="fsdp2")
    result = factories.plan(model, cluster, work)
    assert result.ranked
    assert all(e.layout.zero_stage == 3 or (e.layout.zero_stage, e.layout.pp) == (0, 1)
               for e in result.ranked)  # fmt: skip


def test_fsdp2_zero0_is_zero3_phases_on_a_one_rank_shard() -> None:
    """torchtitan's ZeRO-0 without PP is FSDP2 over a one-rank shard mesh: priced as the
    ZeRO-3 phases with every parameter on the shard, which is what one GPU (DP 1, nothing to
    shard) runs; against the additive states: fp32 parameters (4 B) and no fp32 master in the
    optimizer, which keeps only the moments: 8 of 12 B per parameter."""
    model = factories.dense_model(num_layers=4)
    phases = factories.workload(1024, 16, memory_phases="fsdp2")
    zero0 = api.estimate(model, factories.cluster(8), factories.layout(dp=8, zero_stage=0), phases)
    one_gpu_work = phases.model_copy(update={"global_batch_seqs": 2})  # the same 2 micro-batches
    one_gpu = api.estimate(
        model, factories.cluster(1), factories.layout(dp=1, zero_stage=3), one_gpu_work
    )
    a, b = zero0.stage_memory[0], one_gpu.stage_memory[0]
    assert zero0.num_microbatches == one_gpu.num_microbatches == 2
    assert (a.weights_gib, a.gradients_gib, a.optimizer_gib) == (
        b.weights_gib, b.gradients_gib, b.optimizer_gib
    )  # fmt: skip
    additive = phases.model_copy(update={"memory_phases": "additive"})
    flat = api.estimate(model, factories.cluster(8), factories.layout(dp=8, zero_stage=0), additive)
    assert a.optimizer_gib == pytest.approx(flat.stage_memory[0].optimizer_gib * 8 / 12, rel=1e-12)


# ------------------------------------- every stage a ZeRO rule takes out is counted (edges3)

FP8 = "fp8_params needs a ZeRO stage >= 1 (the distributed optimizer or FSDP)"


def _count(rejected, start: str) -> int:
    return sum(n for reason, n in rejected.items() if reason.startswith(start))


def test_stages_a_zero_rule_takes_out_are_counted_with_their_reason() -> None:
    """Was (main 2e7f2f7): with fp8 primary weights the base was kept at ZeRO-1 and its ZeRO-0
    dropped without a count, so `rejections` never said why no ZeRO-0 plan was offered. One
    base here (tp 2 pp 1 cp 1 dp 4, micro-batch 1), 3 recompute modes: ZeRO-0 x 3 = 3."""
    model, cluster, work = _fp8_params_setup()
    space = SearchSpace(tp=2, pp=1, cp=1, micro_batches=(1,), zero_stages=(0, 1, 2, 3))
    bases, rejected = candidates.legal_bases(model, cluster, work, space)
    assert len(bases) == 1 and len(space.recompute) == 3
    assert _count(rejected, FP8) == 3
    both = work.model_copy(update={"memory_phases": "fsdp2"})
    bases, rejected = candidates.legal_bases(model, cluster, both, space)
    assert [b.zero_stage for b in bases] == [3]
    # each stage under its own first broken rule: ZeRO-0 fp8_params, ZeRO-1 and -2 fsdp2
    assert _count(rejected, FP8) == 3
    assert _count(rejected, PHASES) == 6


def test_a_base_every_stage_refuses_counts_each_stage_by_its_rule() -> None:
    model, cluster, work = _fp8_params_setup()
    both = work.model_copy(update={"memory_phases": "fsdp2"})
    space = SearchSpace(tp=2, pp=1, cp=1, micro_batches=(1,), zero_stages=(0, 2))
    bases, rejected = candidates.legal_bases(model, cluster, both, space)
    assert not bases
    assert _count(rejected, FP8) == 3
    assert _count(rejected, PHASES) == 3


@pytest.mark.parametrize("engine", ["branch-and-bound", "exhaustive"])
def test_plan_rejections_count_the_zero_stages_the_rules_take_out(engine) -> None:
    """The plan's rejections (the JSON's `rejections`, the report's why-refused lines) count
    ZeRO-0 once per legal base and recompute mode under fp8_params, for both engines; the
    plans are the ones the same space without ZeRO-0 gives."""
    model, cluster, work = _fp8_params_setup()
    result = factories.plan(model, cluster, work, engine=engine, framework=None)
    bases, _ = candidates.legal_bases(model, cluster, work, SearchSpace(framework=None))
    assert _count(result.rejections, FP8) == len(bases) * 3
    without = factories.plan(
        model, cluster, work, engine=engine, framework=None, zero_stages=(1, 2, 3)
    )
    assert [e.layout for e in result.ranked] == [e.layout for e in without.ranked]
    assert _count(without.rejections, FP8) == 0


# ------------------------- Megatron's bf16 moments: ZeRO >= 1 (distributed optimizer / FSDP)

BF16_EST = ["estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8"]
BF16_EST += ["--global-batch", "64", "--seq-len", "4096", "--tp", "1", "--pp", "1", "--dp", "8"]
BF16_EST += ["--framework", "megatron", "--optimizer-moments", "bf16", "--json"]


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_estimate_says_megatron_runs_bf16_moments_from_zero1(capsys, zero) -> None:
    assert main([*BF16_EST, "--zero", str(zero)]) == 0
    cannot = json.loads(capsys.readouterr().out)["framework_violations"]
    said = [v for v in cannot if v.startswith("optimizer_moments bf16 needs ZeRO >= 1")]
    assert bool(said) == (zero == 0)


@pytest.mark.parametrize("zero", [0, 3])
def test_a_record_of_megatron_bf16_moments_is_refused_at_zero0_only(zero) -> None:
    from planner.validate import validate_record

    row = validate_record(
        factories.tiny_record({"optimizer_moments": "bf16"}, layout={"zero_stage": zero})
    )
    if zero == 0:
        assert row.estimate is None and "optimizer_moments bf16 needs ZeRO >= 1" in row.error
    else:
        assert row.error is None and row.estimate is not None


@pytest.mark.parametrize(("zero", "ratio"), [(1, 8 / 12), (2, 8 / 12), (3, 4 / 8)])
def test_bf16_moments_are_priced_on_the_shard_of_every_stage(zero, ratio) -> None:
    """Optimizer bytes per parameter of the shard: ZeRO-1 / 2 hold the fp32 master and the
    moments (4 + 8 B, 4 + 4 B with bf16 moments); Megatron-FSDP's ZeRO-3 keeps the fp32 main
    weights with the weights and only the moments in the optimizer (8 B, 4 B)."""
    model, cluster = factories.dense_model(num_layers=4), factories.cluster(8)
    lo = factories.layout(dp=8, zero_stage=zero)
    gib = {}
    for moments in ("fp32", "bf16"):
        work = factories.workload(1024, 16, optimizer_moments=moments)
        e = api.estimate(model, cluster, lo, work, framework="megatron")
        gib[moments] = e.stage_memory[0].optimizer_gib
    assert gib["bf16"] == pytest.approx(gib["fp32"] * ratio, rel=1e-12)
