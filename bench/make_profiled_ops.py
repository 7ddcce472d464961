"""Write models_zoo/kernels/{h100-sxm-80gb,h200-sxm-141gb}/memory_bound_profiled.csv: the optimizer
step, the gradient clip and FSDP2's reduce-scatter copy-in as memory-bound rows
(cost_models.stage.ADAM_OP, CLIP_OP, CHUNK_CAT_OP), from the kernel times torch.profiler recorded
inside whole training steps.

    python bench/make_profiled_ops.py [--check]

Why: the tables hold copy / add / norm rows, and the per-step tail was priced at the HBM figure
(datasheet x hbm_efficiency). The step profiles show two of its kernels that do not run at it, and
do not speed up with HBM as the copy rows do (per config below; H200 / H100 copy rows 1.42x):
torch's fused AdamW (FusedAdamMathFunctor, 28 B per parameter) streams at about 0.86 of the H100's
copy rate and 0.79 of the H200's (1.31x), clip_grad_norm_'s foreach norm and scale (12 B per
parameter) at 0.91 and 0.86 (1.35x), and FSDP2's chunk_cat of bf16 gradients into the fp32
reduce-scatter input (chunk_cat_cuda_kernel<float, BFloat16>, 6 B per element) at about 0.62 and
0.47 (1.08x).

From where: the first single-GPU sets, whose kernel tables the project measured on the same
machines (bench/results/h100-2026-11-26/single-gpu-steps/steps: 11 configs, one H100 80GB HBM3;
bench/results/h200-2026-11-27/steps: the same 11 configs, one H200), profile_<config>.json: the
summed CUDA time and call count per kernel name over one profiled step
(bench/device_train_steps.py).
A row per config and op: bytes = the config's parameters (cost_models.params.total_params of its
record in steps_runs.yaml; every parameter is in the one-GPU shard) x 28 for Adam, x 12 for the
clip (its record's grad_clip "clip": norm 4 + scale 8), and x 6 x the
reductions of the step (cost_models.accumulation.dp_rounds: one per micro-batch under torchtitan's
FSDP2, which the `ga2` config's doubled chunk_cat time shows) for chunk_cat; time = the summed
kernel time. The held-out sets (other configs: bench/results/h100-2026-11-26/single-gpu-held-out,
bench/results/h200-2026-11-27/held-out-steps) are not read into the rows; the script prints their
rates beside the rows' as a check.

`--check` compares the shipped files with what the script would write (exit 1 if they differ).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cost_models.accumulation import dp_rounds
from cost_models.kernel_shapes import MEMORY_BYTES_PER_ELEMENT
from cost_models.params import total_params
from cost_models.pipeline import num_microbatches
from cost_models.stage import (
    ADAM_OP,
    CHUNK_CAT_OP,
    CLIP_BYTES_PER_PARAM,
    CLIP_OP,
    FSDP2_REDUCE_BYTES,
)
from planner.validate import RunRecord, record_inputs

H100 = ROOT / "bench" / "results" / "h100-2026-11-26"
H200 = ROOT / "bench" / "results" / "h200-2026-11-27"
SETS = {
    "h100-sxm-80gb": (H100 / "single-gpu-steps" / "steps", H100 / "single-gpu-held-out" / "steps"),
    "h200-sxm-141gb": (H200 / "steps", H200 / "held-out-steps"),
}
KERNELS = {
    ADAM_OP: ("FusedAdamMathFunctor",),
    CLIP_OP: ("LpNormFunctor", "BinaryOpScalarTensorFunctor<float, 1, 1, 0>, std::multiplies"),
    CHUNK_CAT_OP: ("chunk_cat_cuda_kernel",),
}
"""Substrings of the profiled kernel names of each op (torch 2.11): the fused AdamW; the
gradient clip's _foreach_norm and _foreach_mul_ by the clip coefficient (a tensor scalar);
FSDP2's foreach_reduce_scatter_copy_in."""
COLUMNS = ("op", "bytes", "time_ms", "gb_per_s", "config", "kernel_calls")


def op_rows(steps: Path) -> list[list]:
    """One row per profiled config and op of a steps folder (module docstring)."""
    rows = []
    for record in yaml.safe_load((steps / "steps_runs.yaml").read_text()):
        name = record["id"].removeprefix("single-gpu-")
        profile = steps / f"profile_{name}.json"
        if not profile.is_file():
            continue
        kernels = json.loads(profile.read_text())
        checked = RunRecord.model_validate(record).model_dump()
        model, _cluster, workload, layout = record_inputs(checked)
        params = total_params(model)
        m = num_microbatches(workload.global_batch_seqs, layout)
        reduces, _gathers = dp_rounds(layout, m, workload.dp_accumulation)
        nbytes = {
            ADAM_OP: params * MEMORY_BYTES_PER_ELEMENT[ADAM_OP],  # fp32 AdamW: 28 B
            CLIP_OP: params * CLIP_BYTES_PER_PARAM[workload.grad_clip],
            CHUNK_CAT_OP: params * FSDP2_REDUCE_BYTES[0] * reduces,
        }
        for op, markers in KERNELS.items():
            found = [
                v for k, v in kernels.items()
                if any(mk in k for mk in markers) and not k.startswith("aten::")
            ]  # fmt: skip
            if not found or not nbytes[op]:
                continue
            us = sum(v["us"] for v in found)
            calls = sum(v["count"] for v in found)
            b = int(round(nbytes[op]))
            rate = b / (us * 1e-6) / 1e9
            rows.append([op, b, f"{us * 1e-3:.5f}", f"{rate:.1f}", name, calls])
    return rows


def render(rows: list[list]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(sorted(rows, key=lambda r: (r[0], r[4])))
    return out.getvalue()


def _rates(rows: list[list], op: str) -> list[float]:
    return [float(r[3]) for r in rows if r[0] == op]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped files")
    args = ap.parse_args(argv)
    status = 0
    for gpu, (steps, held_out) in SETS.items():
        rows = op_rows(steps)
        text = render(rows)
        path = ROOT / "models_zoo" / "kernels" / gpu / "memory_bound_profiled.csv"
        check = op_rows(held_out)
        for op in KERNELS:
            mine, theirs = _rates(rows, op), _rates(check, op)
            print(
                f"{gpu} {op}: {len(mine)} rows, median {statistics.median(mine):,.0f} GB/s "
                f"({min(mine):,.0f}-{max(mine):,.0f}); held-out configs (not shipped) "
                f"{statistics.median(theirs):,.0f} GB/s ({min(theirs):,.0f}-{max(theirs):,.0f})"
            )
        if args.check:
            if not path.is_file() or path.read_text() != text:
                print(f"{path}: differs from what bench/make_profiled_ops.py writes")
                status = 1
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
