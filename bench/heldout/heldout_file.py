"""The one way the held-out converters (make_mbridge_summary.py, make_nemo_summary.py,
make_foundry_summary.py, make_mlperf_summary.py, make_megatron_readme_summary.py,
make_dgxc_summary.py) write their YAML: a header of `#` lines saying where the rows come from,
the count of records and every row not transcribed with its reason, then the records."""

from __future__ import annotations

import sys

import yaml

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
