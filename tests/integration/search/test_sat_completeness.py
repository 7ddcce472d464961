"""Search completeness on the published runs with <= 8 GPUs (the full set: bench/search_completeness.py):
the planner's best is at least as fast as the record's own layout unless a documented constraint
keeps that layout out of the space."""

from pathlib import Path

import pytest
from shared_data import published_runs

from planner.search.completeness import check_record

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "published_runs.yaml"


def _small_records() -> list[dict]:
    if not DATA.exists():
        return []
    return [r for r in published_runs() if int(r.get("num_gpus") or 0) <= 8]


@pytest.mark.skipif(not DATA.exists(), reason="shared data not checked out")
def test_best_plan_is_at_least_the_published_layout():
    rows = [check_record(r) for r in _small_records()]
    assert len(rows) >= 10
    inside = [r for r in rows if r.excluded_by is None]
    assert len(inside) >= 5
    for r in inside:
        assert r.best_tokens_per_s_per_gpu >= r.record_tokens_per_s_per_gpu * (1 - 1e-12), r.id
