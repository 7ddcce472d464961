"""The fp8 / bf16 GEMM speed ratio: what the kernels measure, what the efficiency curves price, and
what the held-out bf16 / fp8 twins of one job say (docs/accuracy.md "The fp8 / bf16 speed ratio on
Hopper").

    python bench/fp8_ratio_check.py [--level BF16_CEILING ...]

Prints three blocks:

1. Measured: per GPU with shipped kernel tables (models_zoo/kernels, measured), the fp8 / bf16
   TFLOP/s ratio of the GEMMs both dtypes hold at one (m, n, k, layout) (median, P10, P90); per GPU
   preset with a Maximum Achievable Matmul FLOPS pair (GpuSpec.mamf_*), its fp8 / bf16 ratio; and
   the curve's large-GEMM ratio, gemm_efficiency_fp8 x fp8 peak / (gemm_efficiency_bf16 x bf16
   peak) of the generation (cost_models.calibration.CALIBRATION).
2. Held-out twins: rows of bench/heldout/*_summary.yaml that ran one job in one container (GPU,
   model, GPU count, layout and run settings the same but for the precision and the fp8-only
   settings: fp8_recipe, fp8_params, any key naming fp8), one bf16 and one fp8; per source, GPU and
   fp8 recipe, the median of (predicted fp8 / bf16 speed) / (measured fp8 / bf16 speed) - 1, i.e.
   how much faster than measured the model makes fp8 relative to bf16 (presets as shipped).
3. What-if (nothing shipped): the Hopper fp8 ceiling tied to its bf16 ceiling by the measured
   MAMF ratio (H100 SXM: 1,402.6 / 1,978.9 over 794.5 / 989.4 = 0.883), at the shipped bf16
   ceiling and at each --level: the shared records and the held-out rows that are not shared
   records (median / P90 / signed median of predicted / measured tokens/s - 1, %), all and H100,
   and the held-out twins' ratio error again.

The held-out rows are the acceptance check, never fitted (bench/heldout_accuracy.py); the level a
tie would need is bench/fit_calibration.py's business, with its leave-one-source-out guard.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from heldout_accuracy import container_of, shared_twins

import models_zoo
from cost_models import calibration
from models_zoo.kernel_tables import gemm_rows
from planner.validate import percentile, validate_record

SHARED = ROOT.parent / "shared" / "data" / "published_runs.yaml"
HELDOUT = sorted((ROOT / "bench" / "heldout").glob("*_summary.yaml"))
KERNELS = Path(models_zoo.__file__).parent / "kernels"


def table_ratios(gpu_id: str) -> list[float]:
    """fp8 / bf16 speed at every (m, n, k, layout) the GPU's shipped gemm.csv holds in both
    (models_zoo.kernel_tables.gemm_rows, the tables' own reader: time_ms per row)."""
    path = KERNELS / gpu_id / "gemm.csv"
    if not path.exists():
        return []
    by: dict[tuple, dict[str, float]] = defaultdict(dict)
    for m, n, k, dtype, layout, time_ms in gemm_rows(path):
        by[(m, n, k, layout)][dtype] = time_ms
    return sorted(v["bf16"] / v["fp8"] for v in by.values() if "fp8" in v and "bf16" in v)


def curve_ratio(gen: str, gpu) -> float | None:
    cal = calibration.CALIBRATION[gen]
    if gpu.peak_fp8_tflops is None:
        return None
    fp8 = cal.gemm_efficiency_fp8 * gpu.peak_fp8_tflops
    return fp8 / (cal.gemm_efficiency_bf16 * gpu.peak_bf16_tflops)


def mamf_ratio(gen: str) -> float | None:
    """The generation's flagship MAMF fp8 / bf16 speed ratio (calibration.mamf_*_fraction are
    MAMF over the flagship's peaks)."""
    cal = calibration.CALIBRATION[gen]
    if cal.mamf_fp8_fraction is None or cal.flagship_peak_fp8_tflops is None:
        return None
    fp8 = cal.mamf_fp8_fraction * cal.flagship_peak_fp8_tflops
    bf16 = cal.mamf_bf16_fraction * (cal.flagship_peak_bf16_tflops or 0)
    return fp8 / bf16 if bf16 else None


def measured_block() -> list[str]:
    out = ["1. fp8 / bf16 GEMM speed: measured against the curve's large-GEMM ratio"]
    for gen in ("hopper", "blackwell"):
        cal = calibration.CALIBRATION[gen]
        out.append(
            f"  {gen}: curve gemm_efficiency fp8 {cal.gemm_efficiency_fp8} / bf16 "
            f"{cal.gemm_efficiency_bf16}; flagship MAMF ratio "
            f"{mamf_ratio(gen):.3f}"
            if mamf_ratio(gen)
            else f"  {gen}: no MAMF pair"
        )
    for gpu_id in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "gb200", "gb300", "b300"):
        gpu = models_zoo.load_gpu(gpu_id)
        gen = gpu.generation
        curve = curve_ratio(gen, gpu)
        table = table_ratios(gpu_id)
        mamf = None
        if gpu.mamf_fp8_tflops and gpu.mamf_bf16_tflops:
            mamf = gpu.mamf_fp8_tflops / gpu.mamf_bf16_tflops
        cells = [f"curve {curve:.3f}" if curve else "curve -"]
        cells.append(f"MAMF {mamf:.3f}" if mamf else "MAMF -")
        if table:
            cells.append(
                f"shipped table {statistics.median(table):.3f} (P10 {percentile(table, 0.1):.3f}, "
                f"P90 {percentile(table, 0.9):.3f}, {len(table)} shapes)"
            )
        out.append(f"  {gpu_id:16s} " + "; ".join(cells))
    return out


def _job(run: dict) -> str:
    lay = {k: v for k, v in run["layout"].items() if k != "precision"}
    settings = {k: v for k, v in (run.get("settings") or {}).items() if "fp8" not in k}
    model = {k: v for k, v in run["model"].items() if k != "name"}
    return json.dumps(
        [container_of(run), run["gpu"], run["num_gpus"], model, lay, settings], sort_keys=True
    )


def twins(runs: list[dict]) -> list[tuple[dict, dict]]:
    """(bf16 row, fp8 row) of every job with exactly one of each."""
    by: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        precision = run["layout"].get("precision")
        if precision in ("bf16", "fp8"):
            by[_job(run)][precision].append(run)
    return [
        (v["bf16"][0], v["fp8"][0])
        for v in by.values()
        if len(v["bf16"]) == 1 and len(v["fp8"]) == 1
    ]


def predicted(run: dict) -> float | None:
    row = validate_record(run)
    return None if row.estimate is None else row.estimate.tokens_per_s_per_gpu


def twin_block(pairs: list[tuple[dict, dict]], title: str) -> list[str]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for bf16, fp8 in pairs:
        pb, pf = predicted(bf16), predicted(fp8)
        if pb is None or pf is None:
            continue
        measured = fp8["measured_tokens_per_s_per_gpu"] / bf16["measured_tokens_per_s_per_gpu"]
        error = 100 * ((pf / pb) / measured - 1)
        recipe = (fp8.get("settings") or {}).get("fp8_recipe") or "-"
        moe = "MoE" if bf16["model"].get("moe") else "dense"
        source = bf16["id"].split("-")[0]
        groups[(source, bf16["gpu"], moe, recipe)].append(error)
        groups[("all", bf16["gpu"], "", "")].append(error)
    out = [title, "  source   gpu              kind   fp8 recipe   n   median ratio error %"]
    for (source, gpu, kind, recipe), errs in sorted(groups.items()):
        out.append(
            f"  {source:8s} {gpu:16s} {kind:6s} {recipe:10s} {len(errs):3d}   "
            f"{statistics.median(errs):+6.1f}"
        )
    return out


def accuracy(runs: list[dict], keep) -> str:
    errs = []
    for run in runs:
        if not keep(run) or not run.get("measured_tokens_per_s_per_gpu"):
            continue
        p = predicted(run)
        if p is not None:
            errs.append(100 * (p / run["measured_tokens_per_s_per_gpu"] - 1))
    a = sorted(abs(e) for e in errs)
    return f"n {len(a):3d}  {statistics.median(a):4.1f} / {percentile(a, 0.9):4.1f} / {statistics.median(errs):+5.1f}"


@contextlib.contextmanager
def hopper(bf16: float, fp8: float):
    table = dict(calibration.CALIBRATION)
    table["hopper"] = dataclasses.replace(
        table["hopper"], gemm_efficiency_bf16=bf16, gemm_efficiency_fp8=fp8
    )
    with mock.patch.dict(calibration.CALIBRATION, table):
        yield


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", type=float, nargs="*", default=[],
                        help="Hopper bf16 ceilings to price the tie at, besides the shipped one")  # fmt: skip
    args = parser.parse_args(argv)
    shared = yaml.safe_load(SHARED.read_text())
    heldout = [r for path in HELDOUT for r in yaml.safe_load(path.read_text())]
    twin_ids = shared_twins(heldout, SHARED)
    heldout = [r for r in heldout if r["id"] not in twin_ids]
    pairs = twins(heldout)
    print("\n".join(measured_block()))
    print()
    print(
        "\n".join(
            twin_block(
                pairs, f"2. Held-out bf16 / fp8 twins ({len(pairs)} jobs), presets as shipped"
            )
        )
    )
    cal = calibration.CALIBRATION["hopper"]
    tie = mamf_ratio("hopper") * 989.4 / 1978.9 if mamf_ratio("hopper") else None
    assert tie is not None
    print()
    print(f"3. What-if (not shipped): Hopper gemm_efficiency_fp8 = bf16 x {tie:.4f} (MAMF tie)")

    def h100(run: dict) -> bool:
        return run["gpu"] == "h100-sxm-80gb"

    variants = [("shipped", cal.gemm_efficiency_bf16, cal.gemm_efficiency_fp8)]
    for level in [cal.gemm_efficiency_bf16, *args.level]:
        variants.append((f"tie at bf16 {level:g}", level, level * tie))
    print(
        "  variant (bf16 / fp8)            shared all            shared H100           held-out all          held-out H100         pooled H100"
    )
    for name, bf16, fp8 in variants:
        with hopper(bf16, fp8):
            cells = [
                accuracy(shared, lambda r: True),
                accuracy(shared, h100),
                accuracy(heldout, lambda r: True),
                accuracy(heldout, h100),
                accuracy(shared + heldout, h100),
            ]
        print(f"  {name} ({bf16:.4f} / {fp8:.4f})".ljust(40) + "   ".join(cells))
    for name, bf16, fp8 in variants[1:]:
        with hopper(bf16, fp8):
            block = twin_block(pairs, f"  twins, {name}: H100 and H200 groups")
        print(
            "\n".join([block[0]] + [row for row in block[2:] if " h100" in row or " h200" in row])
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
