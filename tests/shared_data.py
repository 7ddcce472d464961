"""../shared/data/published_runs.yaml parsed once per test session: a parse is ~0.2 s and
several tests read the records (each caller gets its own deep copy, so none sees another's
edits). `planner validate` itself still parses the file on every CLI call."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

PUBLISHED_RUNS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "published_runs.yaml"


@functools.cache
def _parsed(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text())


def published_runs() -> list[dict]:
    """The records of published_runs.yaml, as yaml.safe_load gives them."""
    return copy.deepcopy(_parsed(PUBLISHED_RUNS))
