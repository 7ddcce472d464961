"""SearchSpace.stage_split "search": CP-SAT engine == exhaustive oracle on random small instances,
every plan re-estimated on its own split by the independent validator; the switch through the CLI
and its refusal with a global batch range."""

from __future__ import annotations

import json

import random

import pytest
from test_sat_property import _instance, check_against_oracle

import planner
from cost_models.errors import InvalidInput
from cost_models.pipeline import chunk_layer_counts
from planner.cli import main
from planner.types import SearchSpace, SolverOptions

NUM_INSTANCES = 80
"""80 since 2026-11-29: with 60 the mix kept only 3 plans on a CP-SAT split once ZeRO-3 priced
Megatron-FSDP's 16-bit shard (instance 7's TP1 PP4 DP8 ZeRO-3 on 2-3-4-3 held exactly its 4.0 GiB
before; now TP2 PP4 DP4 on the even split wins). More instances, the same assertions."""
# Headrooms around the peaks of the instances' pipelines, so that the even split is often just
# out of memory (the only case where "search" changes anything).
HEADROOMS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)


def _deviation(e) -> int | None:
    """sum_c |n_c - even_c| of a plan's split (None: the even split)."""
    split = e.layers_per_stage
    if split is None:
        return None
    even = chunk_layer_counts(sum(split), len(split))
    return sum(abs(n - m) for n, m in zip(split, even, strict=True))


@pytest.mark.slow
def test_search_split_cp_sat_equals_oracle_on_random_instances():
    rng = random.Random(20261124)
    options_for = {k: SolverOptions(top_k=k, deterministic=True) for k in (1, 3)}
    solved = infeasible = uneven = 0
    for i in range(NUM_INSTANCES):
        model, cluster, work, space, k = _instance(rng)
        # At most 12 layers: the oracle scores every composition into pp x vp chunks (<= 330).
        model = model.model_copy(update={"num_layers": min(model.num_layers, 12)})
        space = space.model_copy(
            update={
                "stage_split": "search",
                "memory_headroom": rng.choice(HEADROOMS),
                "micro_batches": (1,),  # keeps the oracle fast; the split is the point here
                # recompute modules / block recompute would let the even split fit more often
                "recompute_granularity": False,
            }
        )
        space = SearchSpace.model_validate(space.model_dump())
        # validate_plan re-estimates each plan on its own e.layers_per_stage.
        found = check_against_oracle(i, model, cluster, work, space, options_for[k])
        if found is None:
            infeasible += 1
            continue
        ranked, oracle = found
        # Same step times (check_against_oracle); the splits are equally good by the rule's own
        # tie-break (distance from the even split). Beyond it two splits are indistinguishable.
        assert [_deviation(e) for e in ranked] == [_deviation(e) for e in oracle], i
        uneven += sum(e.layers_per_stage is not None for e in ranked)
        solved += 1
    # The mix must exercise plans on a CP-SAT split, plans on the even split, and no plan.
    # (80 instances: 74 solved, 6 infeasible, 4 plans on a CP-SAT split. Instance 40 was the
    # regression of the split chosen on compute alone: tp 8 cp 2, the TP and CP traffic per layer
    # made 2-4-4-2 25% faster than the 2-4-5-1 it picked; planner/search/partition.py.)
    assert solved >= NUM_INSTANCES // 2 and infeasible >= 1 and uneven >= 4, (
        solved,
        infeasible,
        uneven,
    )


def test_search_split_refuses_a_global_batch_range():
    with pytest.raises(InvalidInput, match="stage_split"):
        planner.plan_for("llama3.1-8b", "dgx-h100", num_gpus=8, global_batch=(8, 64), stage_split="search")


PLAN = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--json"]


def test_stage_split_flag_through_the_cli(capsys):
    code = main([*PLAN, "--global-batch-range", "8", "64", "--stage-split", "search"])
    out, err = capsys.readouterr()
    assert code == 2 and "stage_split" in err and "Traceback" not in err
    assert json.loads(out)["error"]["exit_code"] == 2  # --json: the error object on stdout
    assert main([*PLAN, "--global-batch", "64", "--stage-split", "search", "--top", "1"]) == 0
    searched = capsys.readouterr().out
    assert main([*PLAN, "--global-batch", "64", "--top", "1"]) == 0
    even = capsys.readouterr().out
    assert '"step_time_s"' in searched and '"step_time_s"' in even
