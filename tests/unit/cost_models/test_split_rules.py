"""A split of the caller's own (estimate's layers_per_stage) is checked before it is priced:
pp * vp entries, none negative, the model's layers in all (rules.split_violations)."""

from __future__ import annotations

import re

import pytest
from factories import cluster, dense_model, workload

from cost_models.errors import InvalidInput
from cost_models.estimate import estimate
from cost_models.specs import Layout

LO = Layout(pp=2, dp=4)


@pytest.mark.parametrize(
    ("split", "rule"),
    [
        ((16, 16, 0), "has 3 entries; pp * vp is 2"),
        ((-1, 33), "each entry must be a whole number >= 0"),
        ((True, 31), "each entry must be a whole number >= 0"),
        ((40, 0), "sums to 40; the model has 32 layers"),
    ],
)
def test_a_bad_split_names_its_rule(split, rule):
    with pytest.raises(InvalidInput, match=re.escape(rule)):
        estimate(dense_model(), cluster(8), workload(), LO, layers_per_stage=split)


def test_a_split_may_leave_a_chunk_without_decoder_layers():
    """`E|t*32|L`: the last stage holds the LM head and the loss alone (Megatron's layout string
    permits it); its time is the head's."""
    e = estimate(dense_model(), cluster(8), workload(), LO, layers_per_stage=(32, 0))
    assert e.stage_memory[1].total_gib < e.stage_memory[0].total_gib


def test_a_record_states_its_own_split():
    """A record's layout `layers_per_stage` (Megatron's layout string or first / last-stage
    counts, as the run set them) is the split validate prices; a bad one is the record's error,
    one line naming the rule."""
    from factories import tiny_record

    from planner.validate import validate_record

    layout = {"pp": 2, "dp": 4}
    even = validate_record(tiny_record(num_layers=8, layout=layout))
    own = validate_record(tiny_record(num_layers=8, layout={**layout, "layers_per_stage": [2, 6]}))
    assert even.error is None and own.error is None
    assert own.estimate.layers_per_stage == (2, 6)
    assert own.estimate.step_time_s > even.estimate.step_time_s  # 6 layers on one stage
    bad = validate_record(tiny_record(num_layers=8, layout={**layout, "layers_per_stage": [2, 5]}))
    assert bad.estimate is None and "sums to 7; the model has 8 layers" in bad.error
    typed = validate_record(tiny_record(num_layers=8, layout={**layout, "layers_per_stage": "2,6"}))
    assert typed.estimate is None and "layers_per_stage" in typed.error
