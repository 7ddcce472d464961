"""Fit the per-generation calibration constants on a published-runs file, within physical bounds.

    python bench/fit_calibration.py [--data ../shared/data/published_runs.yaml] [--exclude ID ...]

Coordinate descent over the constants of cost_models.calibration, each kept inside the range its
microbenchmarks allow (BOUNDS, sources in docs/cost_model.md#calibration) and fp8 efficiency never
above bf16. Objective: median + 0.5 x P90 of the absolute tokens/s/GPU error. It prints the start
and the fitted values; copying them into calibration.py (rounded) is a deliberate, reviewed step.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cost_models.calibration as cal
from cost_models.estimate import estimate
from models_zoo import read_data_file
from planner.validate import record_inputs

BOUNDS = {
    ("ampere", "gemm_efficiency_bf16"): (
        0.70,
        0.90,
    ),  # cuBLAS sweeps: 80-90 % large, ~70 % in models
    ("hopper", "gemm_efficiency_bf16"): (0.60, 0.80),
    ("blackwell", "gemm_efficiency_bf16"): (0.55, 0.80),
    ("*", "gemm_efficiency_fp8"): (0.45, 0.75),
    ("*", "attention_efficiency"): (0.35, 0.70),  # FlashAttention-2/3 fwd+bwd
    ("*", "gemm_half_dim"): (32, 512),  # tile sizes 64-256 and wave quantization
    ("*", "kernel_overhead_s"): (5e-6, 200e-6),
    ("*", "grouped_gemm_efficiency"): (0.4, 1.0),
    ("*", "moe_layer_overhead_s"): (0.0, 2e-3),
    ("*", "expert_gemm_overhead_s"): (0.0, 100e-6),  # 1-10 kernel launches of 5-10 us
}
FITTED = [
    (g, f)
    for g in ("ampere", "hopper", "blackwell")
    for f in ("gemm_efficiency_bf16", "gemm_efficiency_fp8", "attention_efficiency")
]
FITTED += [
    ("*", f)
    for f in (
        "gemm_half_dim",
        "kernel_overhead_s",
        "grouped_gemm_efficiency",
        "moe_layer_overhead_s",
        "expert_gemm_overhead_s",
    )
]


def _get(gen: str, field: str) -> float:
    return getattr(cal.CALIBRATION["hopper" if gen == "*" else gen], field)


def _put(gen: str, field: str, value: float) -> None:
    for g in list(cal.CALIBRATION) if gen == "*" else [gen]:
        cal.CALIBRATION[g] = dataclasses.replace(cal.CALIBRATION[g], **{field: value})


def _score(inputs: list, exclude: set[str]) -> tuple[float, float, float]:
    errs = []
    for record, (m, c, w, lo) in inputs:
        if record["id"] in exclude:
            continue
        e = estimate(m, c, w, lo)
        errs.append(abs(e.tokens_per_s_per_gpu / record["measured_tokens_per_s_per_gpu"] - 1) * 100)
    errs.sort()
    p90 = errs[int(0.9 * (len(errs) - 1))]
    return statistics.median(errs) + 0.5 * p90, statistics.median(errs), p90


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=str(Path(__file__).resolve().parents[2] / "shared/data/published_runs.yaml"),
    )
    parser.add_argument("--exclude", nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    inputs = []
    for record in read_data_file(Path(args.data)):
        try:
            inputs.append((record, record_inputs(record)))
        except Exception as err:  # noqa: BLE001 - a record we cannot score is reported, not fatal
            print(f"skipped {record.get('id')}: {err}")
    exclude = set(args.exclude)
    best = _score(inputs, exclude)
    print(f"start: objective {best[0]:.2f}, median {best[1]:.2f}%, P90 {best[2]:.2f}%")
    for rnd in range(args.rounds):
        for gen, field in FITTED:
            current = _get(gen, field)
            lo, hi = BOUNDS.get((gen, field), BOUNDS.get(("*", field), (0, float("inf"))))
            for mult in (0.6, 0.75, 0.85, 0.93, 1.07, 1.15, 1.3, 1.6):
                value = current * mult
                if not lo <= value <= hi:
                    continue
                if field == "gemm_efficiency_fp8" and value > _get(gen, "gemm_efficiency_bf16"):
                    continue
                _put(gen, field, value)
                score = _score(inputs, exclude)
                if score[0] < best[0] - 1e-9:
                    best, current = score, value
            _put(gen, field, current)
        print(f"round {rnd}: objective {best[0]:.2f}, median {best[1]:.2f}%, P90 {best[2]:.2f}%")
    for gen, field in FITTED:
        print(f"  {gen:9s} {field:24s} {_get(gen, field):.6g}")


if __name__ == "__main__":
    main()
