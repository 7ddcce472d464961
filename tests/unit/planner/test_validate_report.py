"""`planner validate` as a reader sees it (issue 20): ids whole at 80 and 120 columns, notes as
footnotes, and a record whose predicted peak exceeds HBM says it cannot fit as described."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import factories as f
import pytest
import yaml
from rich.console import Console
from snapshot import assert_readable, check_snapshot

from planner.report.validation import render_validation
from planner.validate import validate_record

RUNS = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "published_runs.yaml"
PICK = (
    "mbridge-25.11-gb200-llama3-70b",  # 402 GiB predicted on 184 GiB GPUs: say so
    "torchtitan-202412-h100-llama31-405b-512gpu-interleaved-1f1b",  # the longest id
    "mbridge-25.11-h100-qwen3-235b-a22b",
)


def picked_rows():
    if not RUNS.exists():
        pytest.skip("shared/data/published_runs.yaml not present")
    records = {r["id"]: r for r in yaml.safe_load(RUNS.read_text())}
    return [validate_record(records[i]) for i in PICK if i in records]


def frozen_rows():
    """The picked rows with their estimates as frozen on disk (factories.frozen): the snapshot
    tests the table, not today's cost model."""
    return [
        r
        if r.estimate is None
        else dataclasses.replace(r, estimate=f.frozen(f"validate_{r.id}", lambda r=r: r.estimate))
        for r in picked_rows()
    ]


@pytest.mark.parametrize("width", [80, 120])
def test_validate_snapshot_keeps_ids_whole(width):
    rows = frozen_rows()
    buf = io.StringIO()
    Console(width=width, color_system=None, file=buf).print(render_validation(rows))
    text = buf.getvalue()
    check_snapshot(f"validate_{width}.txt", text)
    assert_readable(text, width)
    for r in rows:  # every id whole on one line, at either width
        assert any(line.split()[:1] == [r.id] for line in text.splitlines()), r.id


def test_gb200_llama3_70b_says_it_cannot_fit_as_described():
    rows = {r.id: r for r in picked_rows()}
    row = rows["mbridge-25.11-gb200-llama3-70b"]
    assert row.estimate.peak_memory_gib > row.hbm_gib == 184
    assert row.fit_note.startswith("cannot fit as described: predicted peak")
    assert "recompute=none" in row.fit_note  # the record does not state its recompute
