"""CP-SAT optimum == exhaustive oracle optimum on random small instances (deterministic mode).

Objectives are compared, not plans (ties are possible in principle, although the simplicity rank
makes them unlikely). Every returned plan is also checked by an independent validator written here
from the rules, not from cost_models.rules.
"""

from __future__ import annotations

import random

import factories
import pytest

from cost_models.errors import NoFeasiblePlan
from cost_models.estimate import estimate
from cost_models.specs import Estimate, ModelSpec, Workload
from planner.search import exhaustive
from planner.search import solve as sat
from planner.types import SearchSpace, SolverOptions

NUM_INSTANCES = 200


def _instance(rng: random.Random) -> tuple[ModelSpec, object, Workload, SearchSpace, int]:
    n = rng.choice([8, 16, 32, 64, 128, 256])
    if rng.random() < 0.5:
        model = factories.dense_model(
            num_layers=rng.choice([8, 12, 16, 32]), hidden_size=rng.choice([1024, 2048, 4096])
        )
    else:
        model = factories.moe_model(num_layers=rng.choice([8, 16]))
    cluster = factories.cluster(
        n, ib_gb_per_s=rng.choice([25, 50, 100]), oversubscription=rng.choice([1.0, 2.0])
    )
    seq = rng.choice([2048, 4096, 8192])
    work = Workload(seq_len=seq, global_batch_seqs=n * rng.choice([1, 2, 4]))
    fields: dict = {
        "micro_batches": tuple(sorted(rng.sample([1, 2, 4], rng.randint(1, 2)))),
        "max_vp": rng.choice([1, 2]),
        "recompute": tuple(rng.sample(["none", "selective", "full"], rng.randint(1, 2))),
        "zero_stages": tuple(sorted(rng.sample([0, 1, 2, 3], rng.randint(1, 2)))),
        "search_order": rng.random() < 0.5,
        "memory_headroom": rng.choice([0.0, 0.1, 0.5, 0.9]),
        "max_pp": 4,
        "max_cp": 2,
    }
    # Keep the oracle cheap on the larger clusters: pin TP there.
    if n >= 64:
        fields["tp"] = rng.choice([2, 4, 8])
    top_k = rng.choice([1, 3])
    return model, cluster, work, SearchSpace(**fields), top_k


def validate_plan(model: ModelSpec, cluster, work: Workload, space: SearchSpace, e: Estimate):
    """Independent checks of a returned plan (not using cost_models.rules)."""
    lo = e.layout
    assert lo.tp * lo.pp * lo.dp * lo.cp == cluster.num_gpus, "degrees multiply to the GPU count"
    assert model.num_attention_heads % lo.tp == 0, "tp divides the heads"
    assert work.global_batch_seqs % (lo.micro_batch * lo.dp) == 0, "batch splits evenly"
    m = work.global_batch_seqs // (lo.micro_batch * lo.dp)
    assert lo.vp == 1 or m % lo.pp == 0, "interleaving runs micro-batches in rounds of pp"
    assert lo.pp * lo.vp <= model.num_layers and model.num_layers % (lo.pp * lo.vp) == 0
    if model.moe is None:
        assert lo.ep == 1
    else:
        assert model.moe.num_experts % lo.ep == 0 and (lo.tp * lo.dp * lo.cp) % lo.ep == 0
    assert lo.recompute in space.recompute and lo.zero_stage in space.zero_stages
    assert lo.micro_batch in space.micro_batches and lo.vp <= space.max_vp
    for axis in ("tp", "pp", "dp", "cp", "ep"):
        pin = getattr(space, axis)
        assert pin is None or getattr(lo, axis) == pin
    usable = cluster.gpu.hbm_gib * (1 - space.memory_headroom)
    assert len(e.stage_memory) == lo.pp
    for stage in e.stage_memory:  # every stage within its own memory
        assert stage.total_gib <= usable + 1e-9
    # The reported numbers are the cost model's numbers for that layout.
    split = e.layers_per_stage  # the plan's own stage partition (planner/search/partition.py)
    assert split is None or (len(split) == lo.pp * lo.vp and sum(split) == model.num_layers)
    assert estimate(model, cluster, work, lo, layers_per_stage=split).step_time_s == e.step_time_s


def check_against_oracle(i, model, cluster, work, space, opts):
    """(CP-SAT top k, oracle top k) after checking they agree, or None when neither finds a plan.

    Objective and status PROVED with gap 0, the whole top k in step time rank by rank, and every
    returned plan through the independent validator."""
    try:
        oracle, o_stats, _ = exhaustive.search(model, cluster, work, space, opts)
    except NoFeasiblePlan:
        with pytest.raises(NoFeasiblePlan):
            sat.search(model, cluster, work, space, opts)
        return None
    ranked, stats, _ = sat.search(model, cluster, work, space, opts)
    assert stats.status == "PROVED" and stats.gap == 0.0, i
    assert stats.objective == o_stats.objective, (i, model.name, cluster.num_gpus, space)
    assert [e.step_time_s for e in ranked] == [e.step_time_s for e in oracle], i
    for e in ranked:
        validate_plan(model, cluster, work, space, e)
    return ranked, oracle


@pytest.mark.slow
def test_cp_sat_objective_equals_oracle_on_random_instances():
    rng = random.Random(20261123)
    options_for = {k: SolverOptions(top_k=k, deterministic=True) for k in (1, 3)}
    solved = infeasible = 0
    for i in range(NUM_INSTANCES):
        model, cluster, work, space, k = _instance(rng)
        if check_against_oracle(i, model, cluster, work, space, options_for[k]) is None:
            infeasible += 1
            continue
        solved += 1
    # The instance mix must exercise both outcomes, mostly solvable.
    assert solved >= NUM_INSTANCES // 2 and infeasible >= 1, (solved, infeasible)


def test_validator_rejects_a_broken_plan():
    model, cluster, work = factories.dense_model(), factories.cluster(16), factories.workload()
    space = SearchSpace(tp=2)
    ranked, _, _ = sat.search(model, cluster, work, space, SolverOptions(top_k=1))
    validate_plan(model, cluster, work, space, ranked[0])
    broken = ranked[0].model_copy(update={"layout": ranked[0].layout.model_copy(update={"tp": 4})})
    with pytest.raises(AssertionError):
        validate_plan(model, cluster, work, space, broken)


def test_deterministic_mode_repeats_exactly():
    model, cluster, work = factories.moe_model(), factories.cluster(32), factories.workload()
    space, opts = SearchSpace(max_vp=2), SolverOptions(top_k=3, deterministic=True)
    first, s1, _ = sat.search(model, cluster, work, space, opts)
    second, s2, _ = sat.search(model, cluster, work, space, opts)
    assert [e.layout for e in first] == [e.layout for e in second]
    assert (s1.objective, s1.status) == (s2.objective, s2.status)


def test_oracle_shares_no_search_code_with_the_engine():
    """Agreement is evidence only if the oracle does not run the engine's code: it imports the
    candidate enumeration (what is legal) and the cost model, never the branch and bound, its
    bounds, the partition model or CP-SAT."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(exhaustive))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    engine = {".table", ".bounds", ".partition", ".partition_caps", ".solve", "ortools"}
    assert not {m for m in imported if any(m.startswith(e) for e in engine)}, imported
