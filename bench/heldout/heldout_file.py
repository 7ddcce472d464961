"""The one way the held-out converters (make_mbridge_summary.py, make_nemo_summary.py,
make_foundry_summary.py, make_mlperf_summary.py, make_megatron_readme_summary.py,
make_dgxc_summary.py) write their YAML: a header of `#` lines saying where the rows come from,
the count of records and every row not transcribed with its reason, then the records; and the one
way they read the repository mirrors they convert (git, git_show)."""

from __future__ import annotations

import subprocess
import sys

import yaml


def git(git_dir: str, *args: str) -> str:
    """stdout of `git --git-dir GIT_DIR ARGS...`; CalledProcessError where git fails (a path not at
    that commit)."""
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
    ).stdout


def git_show(git_dir: str, ref: str, path: str) -> str | None:
    """The text of PATH at REF, None where it is not there."""
    try:
        return git(git_dir, "show", f"{ref}:{path}")
    except subprocess.CalledProcessError:
        return None


EVALUATION_ONLY = "HELD-OUT EVALUATION DATA: never used to fit a constant (docs/accuracy.md, bench/heldout_accuracy.py)."


def write_summary(
    header: list[str], records: list[dict], skipped: list[str], width: int = 120
) -> None:
    """`header` (lines without their `# `), the count and the skipped rows, then `records` as YAML,
    to stdout."""
    out = [f"# {line}" for line in header]
    out.append(f"# {len(records)} records; rows not transcribed ({len(skipped)}):")
    out += [f"#   {s}" for s in skipped]
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.write(yaml.safe_dump(records, sort_keys=False, width=width, allow_unicode=True))
