"""Measured step minus priced step, per token and layer a GPU runs, for held-out rows (a missing
per-token cost shows as a constant here; a missing per-layer or per-step cost does not).

For every record of RUNS.yaml whose id contains each of the given substrings: the priced step
(`cost_models.estimate`, the record's own settings, presets as shipped), the measured step (the
same tokens at the measured tokens/s/GPU), their difference, and that difference over the tokens
one GPU pushes through its layers in a step (tokens per GPU per step x layers per pipeline stage),
in microseconds. docs/accuracy.md "gpt-oss-120b on Blackwell" quotes it.

Usage: python bench/heldout_gap.py [--runs RUNS.yaml] SUBSTRING [SUBSTRING ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from cost_models.estimate import estimate
from planner.validate import RunRecord, record_inputs

RUNS = Path(__file__).resolve().parent / "heldout" / "mbridge_performance_summary.yaml"


def gap_rows(runs: list[dict], needles: list[str]) -> list[tuple[str, float, float, float]]:
    """(id, priced step s, measured step s, gap in us per token and layer) per matching record."""
    out = []
    for run in runs:
        if not all(n in run["id"] for n in needles):
            continue
        record = RunRecord.model_validate(run).model_dump()
        model, cluster, workload, layout = record_inputs(record)
        est = estimate(model, cluster, workload, layout)
        tokens = est.tokens_per_s_per_gpu * est.step_time_s  # tokens per GPU per step
        measured_s = tokens / record["measured_tokens_per_s_per_gpu"]
        layers = model.num_layers / layout.pp
        gap_us = (measured_s - est.step_time_s) / (tokens * layers) * 1e6
        out.append((run["id"], est.step_time_s, measured_s, gap_us))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("needles", nargs="+")
    p.add_argument("--runs", default=str(RUNS))
    args = p.parse_args(argv)
    runs = yaml.safe_load(Path(args.runs).read_text())
    for rid, priced, measured, gap in gap_rows(runs, args.needles):
        print(
            f"{rid:50} priced {priced:7.2f} s  measured {measured:7.2f} s  gap {gap:+6.2f} us/token/layer"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
