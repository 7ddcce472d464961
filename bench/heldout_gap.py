"""Measured step minus priced step, per token and layer a GPU runs, for held-out rows (a missing
per-token cost shows as a constant here; a missing per-layer or per-step cost does not).

For every record of RUNS.yaml whose id contains each of the given substrings: the priced step
(`cost_models.estimate`, the record's own settings, presets as shipped), the measured step (the
same tokens at the measured tokens/s/GPU), their difference, and that difference over the tokens
one GPU pushes through its layers in a step (tokens per GPU per step x layers per pipeline stage),
in microseconds. docs/accuracy.md "gpt-oss-120b on Blackwell" quotes it.

With --attention: the attention speed each row implies if everything but the attention core is
priced right. The step is priced a second time with the attention core free (its efficiency x
1e6: unittest.mock patches cost_models.compute.attention_efficiency), the difference is the
priced attention time; the measured step less the attention-free step is the implied one, and
the priced forward + backward TFLOP/s of the row's kernel (cost_models.compute, at the row's
sequence length and head dimension) times priced / implied is the implied speed.
docs/accuracy.md "Held-out: llm-foundry" quotes it for the long-sequence rows.

Usage: python bench/heldout_gap.py [--runs RUNS.yaml] [--attention] SUBSTRING [SUBSTRING ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from unittest import mock

import yaml

from cost_models import compute
from cost_models.calibration import generation_for_gpu
from cost_models.estimate import estimate
from planner.validate import RunRecord, record_inputs, record_split

RUNS = Path(__file__).resolve().parent / "heldout" / "mbridge_performance_summary.yaml"


def priced_rows(runs: list[dict], needles: list[str]):
    """(id, model, cluster, workload, layout, priced step s, measured step s, tokens per GPU per
    step) per record whose id contains every needle: the record's own settings, presets as
    shipped; the measured step is those tokens at the measured tokens/s/GPU."""
    for run in runs:
        if not all(n in run["id"] for n in needles):
            continue
        record = RunRecord.model_validate(run).model_dump()
        model, cluster, workload, layout = record_inputs(record)
        est = estimate(model, cluster, workload, layout, layers_per_stage=record_split(record))
        tokens = est.tokens_per_s_per_gpu * est.step_time_s
        measured_s = tokens / record["measured_tokens_per_s_per_gpu"]
        yield run["id"], model, cluster, workload, layout, est.step_time_s, measured_s, tokens


def gap_rows(runs: list[dict], needles: list[str]) -> list[tuple[str, float, float, float]]:
    """(id, priced step s, measured step s, gap in us per token and layer) per matching record."""
    out = []
    for rid, model, _, _, layout, priced_s, measured_s, tokens in priced_rows(runs, needles):
        layers = model.num_layers / layout.pp
        gap_us = (measured_s - priced_s) / (tokens * layers) * 1e6
        out.append((rid, priced_s, measured_s, gap_us))
    return out


def attention_rows(runs: list[dict], needles: list[str]) -> list[tuple[str, float, float, float, float]]:
    """(id, priced attention s, implied attention s, priced TFLOP/s, implied TFLOP/s) per
    matching record (module docstring, --attention)."""
    real = compute.attention_efficiency
    out = []
    for rid, model, cluster, workload, layout, step_s, measured_s, _ in priced_rows(runs, needles):
        with mock.patch.object(
            compute, "attention_efficiency", lambda *a, **k: real(*a, **k) * 1e6
        ):
            free_s = estimate(model, cluster, workload, layout).step_time_s
        gpu = cluster.gpu
        eff = real(generation_for_gpu(gpu), workload, gpu.generation, compute.head_dims(model)[0])
        tflops = eff * gpu.peak_bf16_tflops
        priced, implied = step_s - free_s, measured_s - free_s
        out.append((rid, priced, implied, tflops, tflops * priced / implied if implied > 0 else float("nan")))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("needles", nargs="+")
    p.add_argument("--runs", default=str(RUNS))
    p.add_argument("--attention", action="store_true", help="the attention speed each row implies")
    args = p.parse_args(argv)
    runs = yaml.safe_load(Path(args.runs).read_text())
    if args.attention:
        for rid, priced, implied, tflops, implied_tflops in attention_rows(runs, args.needles):
            print(f"{rid:60} attention priced {priced:7.2f} s at {tflops:4.0f} TFLOP/s, "
                  f"implied {implied:7.2f} s: {implied_tflops:4.0f} TFLOP/s")
        return 0
    for rid, priced, measured, gap in gap_rows(runs, args.needles):
        print(
            f"{rid:50} priced {priced:7.2f} s  measured {measured:7.2f} s  gap {gap:+6.2f} us/token/layer"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
