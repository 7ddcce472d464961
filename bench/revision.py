"""The revision a bench record was measured on (shared by the scripts that write records)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def revision() -> str:
    """Short commit of the checkout; PLANNER_REVISION names it for a frozen copy (git archive),
    "unknown" outside git."""
    if os.environ.get("PLANNER_REVISION"):
        return os.environ["PLANNER_REVISION"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()
