"""Estimate.memory_validated rests on cost_models.memory.MEASURED_MEMORY_CONFIGS: the set must be
exactly the configurations of the published runs that report a measured peak memory."""

from __future__ import annotations

from pathlib import Path

from shared_data import published_runs

from cost_models.memory import MEASURED_MEMORY_CONFIGS, memory_config
from planner.validate import record_inputs

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "published_runs.yaml"


def test_measured_memory_configs_are_the_records_with_a_measured_peak() -> None:
    records = published_runs()
    covered = set()
    for record in records:
        measured = record.get("measured") or {}
        if not (measured.get("peak_memory_gib") or record.get("peak_memory_gib")):
            continue
        model, _, workload, layout = record_inputs(record)
        covered.add(memory_config(model, workload, layout))
    assert covered == MEASURED_MEMORY_CONFIGS
