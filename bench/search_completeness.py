"""Search completeness over ../shared/data/published_runs.yaml (issue 4): for each record, plan
with its GPUs, batch and sequence length and compare the best plan's predicted tokens/s/GPU with
the record's own layout's (same cost model). Prints the Markdown table for docs/search.md.

    python bench/search_completeness.py [path] [--max-gpus N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from planner.search.completeness import check_record

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "published_runs.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT))
    ap.add_argument("--max-gpus", type=int, default=None, help="skip larger records")
    args = ap.parse_args()
    records = yaml.safe_load(Path(args.path).read_text())
    print("| record | GPUs | own layout tok/s/GPU | best tok/s/GPU | own/best | excluded by | s |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in records:
        if args.max_gpus and int(r.get("num_gpus") or 0) > args.max_gpus:
            continue
        t0 = time.perf_counter()
        row = check_record(r)
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
        own = f"{row.record_tokens_per_s_per_gpu:.0f}" if row.record_tokens_per_s_per_gpu else "-"
        best = f"{row.best_tokens_per_s_per_gpu:.0f}" if row.best_tokens_per_s_per_gpu else "-"
        why = (row.excluded_by or "").replace("|", "/")[:90]
        print(
            f"| {row.id} | {row.num_gpus:,} | {own} | {best} | {ratio} | {why} "
            f"| {time.perf_counter() - t0:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
