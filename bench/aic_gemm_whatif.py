"""What aiconfigurator's measured GEMM tables would do to the Blackwell records (issue 32 item 2).

EVALUATION ONLY, nothing is shipped from it: bench/aic_gemm_check.py says why the tables are not
imported. For each Blackwell GPU preset (b200, b300, gb200, gb300), and for the H100 as a
control, this writes aiconfigurator's trtllm GEMM rows of that system (bf16, and fp8 less its quantization kernels; m >= 256;
aic_gemm_check.write_gemm_csv) as a gemm.csv, a cluster file = the GPU's validate preset
(planner.validate.SYSTEM_FOR_GPU) + `kernels: {path: that folder}` (GEMMs from the table,
everything else as the preset prices it), and prices the shared runs and the held-out
Megatron-Bridge rows (bench/heldout/mbridge_performance_summary.yaml, those that are not shared
records) on the presets as shipped (the efficiency curve) and on those files. Prints per group n,
median / P90 of |error| and the signed median (error = predicted / measured tokens/s - 1, %).

Usage: python bench/aic_gemm_whatif.py AIC_SYSTEMS_DATA [--version 1.3.0rc20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml
from aic_gemm_check import BLACKWELL, AicError, write_gemm_csv
from heldout_accuracy import RUNS, SHARED, shared_twins, summary

from models_zoo.kernel_tables import BUILTIN_ROOT
from planner.validate import SYSTEM_FOR_GPU, validate_file

CLUSTERS = ROOT / "models_zoo" / "clusters"


def _line(errs: list[float]) -> str:
    """heldout_accuracy.summary() as "median / P90 / signed"."""
    if not errs:
        return "-"
    med, p90, signed = summary(errs)
    return f"{med:.1f} / {'-' if p90 is None else f'{p90:.1f}'} / {signed:+.1f}"


def cluster_files(data: Path, version: str, tmp: Path) -> dict[str, str]:
    """GPU id -> a cluster file pricing its GEMMs from aiconfigurator's table. The H100's
    folder is its shipped one (models_zoo/kernels/h100-sxm-80gb) with gemm.csv replaced, so
    only the GEMM rows differ from the preset as shipped."""
    out = {}
    for system, gpu in {"h100_sxm": "h100-sxm-80gb", **BLACKWELL}.items():
        folder = tmp / gpu
        if gpu == "h100-sxm-80gb":
            shutil.copytree(BUILTIN_ROOT / gpu, folder)
        n = write_gemm_csv(data, system, version, folder / "gemm.csv")
        cluster = json.loads((CLUSTERS / f"{SYSTEM_FOR_GPU[gpu]}.json").read_text())
        cluster["kernels"] = {"path": str(folder)}
        path = tmp / f"{SYSTEM_FOR_GPU[gpu]}-aic.json"
        path.write_text(json.dumps(cluster))
        out[gpu] = str(path)
        print(f"{gpu}: {n} rows from {system} -> {path.name}")
    return out


def score(path: str, files: dict[str, str]) -> tuple[dict, dict]:
    """(record id -> error on the presets, record id -> error with the aic tables)."""
    base = {r.id: r.tokens_error_pct for r in validate_file(path)}
    aic = dict(base)
    for gpu, f in files.items():
        for r in validate_file(path, f):
            if r.gpu == gpu:
                aic[r.id] = r.tokens_error_pct
    return base, aic


def report(title: str, runs: list[dict], base: dict, aic: dict) -> None:
    print(f"\n{title}: group, n, curve (presets) median / P90 / signed, aic tables median / P90 / signed")
    groups = [("Blackwell, all", lambda r: r["gpu"] in BLACKWELL.values())]
    for gpu in ("h100-sxm-80gb", *BLACKWELL.values()):
        groups.append((f"  {gpu}", lambda r, g=gpu: r["gpu"] == g))
        for kind, moe in (("dense", False), ("MoE", True)):
            groups.append((f"    {gpu} {kind}", lambda r, g=gpu, m=moe: r["gpu"] == g
                           and bool(r["model"].get("moe")) == m))  # fmt: skip
            precs = sorted({str(r["layout"].get("precision")) for r in runs if r["gpu"] == gpu
                            and bool(r["model"].get("moe")) == moe})  # fmt: skip
            for p in precs:
                groups.append((f"      {gpu} {kind} {p}", lambda r, g=gpu, m=moe, p=p: r["gpu"] == g
                               and bool(r["model"].get("moe")) == m
                               and str(r["layout"].get("precision")) == p))  # fmt: skip
    groups.append(("all records", lambda r: True))
    for label, keep in groups:
        ids = [r["id"] for r in runs if keep(r) and base.get(r["id"]) is not None
               and aic.get(r["id"]) is not None]  # fmt: skip
        if ids:
            print(f"{label:36} {len(ids):4d}  {_line([base[i] for i in ids]):24} "
                  f"{_line([aic[i] for i in ids])}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path)
    p.add_argument("--version", default="1.3.0rc20")
    args = p.parse_args(argv)
    shared_runs = yaml.safe_load(SHARED.read_text())
    held_runs = yaml.safe_load(RUNS.read_text())
    twins = shared_twins(held_runs, SHARED)
    held_runs = [r for r in held_runs if r["id"] not in twins]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            files = cluster_files(args.data, args.version, Path(tmp))
        except AicError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        held_path = Path(tmp) / "held_out.yaml"
        held_path.write_text(yaml.safe_dump(held_runs, sort_keys=False))
        shared = score(str(SHARED), files)
        held = score(str(held_path), files)
    report("shared runs", shared_runs, *shared)
    report("held-out runs", held_runs, *held)
    pooled = ({**shared[0], **held[0]}, {**shared[1], **held[1]})
    report("pooled (shared + held-out)", shared_runs + held_runs, *pooled)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
