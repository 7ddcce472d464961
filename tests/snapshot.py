"""Snapshot checks of the report views (text at a fixed width, no colour), files in SNAPSHOTS;
UPDATE_SNAPSHOTS=1 rewrites them (review the diff)."""

import os
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "unit" / "planner" / "snapshots"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing snapshot {name}: run with UPDATE_SNAPSHOTS=1"
    assert text == path.read_text()


def assert_readable(text: str, width: int) -> None:
    """Issue 20: nothing wider than the console, and no cell cut short: the only "…" allowed is
    a memory table's ellipsis row (every cell "…")."""
    assert max(len(line) for line in text.splitlines()) <= width
    for line in text.splitlines():
        if "…" in line:
            assert set(line.split()) == {"…"}, f"cut cell: {line!r}"
