"""Yes/no fields of every input spec are strict booleans: a `1`, `"yes"` or `"true"` in a GPU,
cluster, workload or layout file (or a record's layout) is refused with one line naming the field,
where pydantic's lax mode would have read it as true (and `0` / `"no"` as false) without a word."""

from __future__ import annotations

import json
from pathlib import Path

import factories as f
import pytest
from pydantic import ValidationError

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.specs import Layout, Workload
from planner.validate import validate_record


@pytest.mark.parametrize("value", [1, 0, "yes", "true", "on"])
def test_workload_and_layout_switches_take_only_true_or_false(value) -> None:
    with pytest.raises(ValidationError, match="fp8_params"):
        Workload(seq_len=1024, global_batch_seqs=8, fp8_params=value)
    with pytest.raises(ValidationError, match="sequence_parallel"):
        Layout(tp=2, pp=1, dp=4, sequence_parallel=value)
    assert Workload(seq_len=1024, global_batch_seqs=8, fp8_params=False).fp8_params is False


def test_a_cluster_file_with_a_yes_for_a_switch_is_refused_naming_the_field(tmp_path: Path) -> None:
    data = json.loads(
        Path(models_zoo.__file__).with_name("clusters").joinpath("dgx-h100.json").read_text()
    )
    data["tiers"][0]["sharp"] = "yes"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match=r"sharp.*(boolean|bool)"):
        models_zoo.load_cluster(str(path))


def test_a_record_stating_sequence_parallel_as_1_gets_an_error_row() -> None:
    row = validate_record(f.tiny_record(layout={"sequence_parallel": 1}), None, 0)
    assert row.estimate is None and "sequence_parallel" in row.error
