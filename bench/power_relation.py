"""How fast a Hopper GPU computes at its 700 W cap against the share of time it computes, from one
loan's files (bench/results/h200-2026-11-27b, README there), and what that relation would do to the
H100 rows if it were priced (a what-if; nothing in the cost model reads it).

Reads `layer_power_shares.csv` (bench/measure_layer_power.py --shares: whole decoder layers with
the GPU otherwise waiting, at busy shares 0.5-1.0; the layer timed as the kernel tables time a
shape; one call from a cool GPU), `power_share_idle.csv` (bench/measure_power_share.py --filler
idle: the Llama 3 70B TP8 GEMM mix likewise); the folder's `layer_power.csv` (layers back to back
for 20 s) is read in its README. Prints, per layer, its time at each busy share over its time at
busy share 1 (back to back, at the cap), the SM clock and the power; the GEMM mix's TFLOP/s at each
share; and the layer timed the tables' way over the capped time.

`--whatif` prices the H100 records of the shared file and of three held-out files (Megatron-Bridge,
NeMo, llm-foundry; the MLPerf file came after this what-if) on the presets (the efficiency curve)
and with `kernels: builtin` (the measured tables), and scales each record's compute
terms (compute, recompute, optimizer) by the relation at its priced busy share (compute over the
step), relative to busy share 1 (`--reference 1`, the capped rate, what the tables hold) or to
given busy shares (the curve, fitted on whole steps, sits at some busy share of its own). Prints
median / P90 / signed error per file before and after; tables: the H100 records, curve: the
Hopper 700 W ones (H100, H200, H800).

Usage: python bench/power_relation.py [FOLDER] [--whatif [--reference B [B ...]]]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "bench" / "results" / "h200-2026-11-27b"


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def layer_relation(folder: Path) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per layer ("llama3-70b tp8"): (measured busy share, time over the time at busy share 1,
    median SM clock MHz, median power W) for each target share, windows after the first."""
    out: dict[str, list[tuple[float, float, float, float]]] = {}
    rows = [r for r in _rows(folder / "layer_power_shares.csv") if r["method"] == "share"]
    for key in dict.fromkeys(f"{r['work']} tp{r['tp']}" for r in rows):
        mine = [r for r in rows if f"{r['work']} tp{r['tp']}" == key and r["window"] != "0"]
        shares = sorted({float(r["target_share"]) for r in mine})
        med = {s: [r for r in mine if float(r["target_share"]) == s] for s in shares}
        capped = statistics.median(float(r["ms"]) for r in med[1.0])
        out[key] = [
            (
                statistics.median(float(r["busy_share"]) for r in rs),
                statistics.median(float(r["ms"]) for r in rs) / capped,
                statistics.median(float(r["sm_clock_mhz"]) for r in rs),
                statistics.median(float(r["power_w"]) for r in rs),
            )
            for rs in med.values()
        ]
    return out


def speed_relation(folder: Path) -> tuple[list[float], list[float]]:
    """(busy shares, speed over the capped speed), the layers' mean at each target share."""
    per = list(layer_relation(folder).values())
    shares = [statistics.mean(p[i][0] for p in per) for i in range(len(per[0]))]
    speed = [statistics.mean(1 / p[i][1] for p in per) for i in range(len(per[0]))]
    return shares, speed


def table_method(folder: Path) -> dict[str, tuple[float, float]]:
    """Per layer: (median time the tables' way, median capped time), ms."""
    rows = _rows(folder / "layer_power_shares.csv")
    out = {}
    for key in dict.fromkeys(f"{r['work']} tp{r['tp']}" for r in rows if r["method"] == "table"):
        mine = [r for r in rows if f"{r['work']} tp{r['tp']}" == key]
        table = statistics.median(float(r["ms"]) for r in mine if r["method"] == "table")
        capped = [
            float(r["ms"]) for r in mine if r["method"] == "share" and r["target_share"] == "1.0"
        ]
        out[key] = (table, statistics.median(capped[1:]))
    return out


def gemm_relation(folder: Path) -> list[tuple[str, float, float, float, float]]:
    """(dtype, measured GEMM share, TFLOP/s, median SM clock, median power) per target share."""
    rows = _rows(folder / "power_share_idle.csv")
    out = []
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        for share in dict.fromkeys(r["target_share"] for r in rows if r["dtype"] == dtype):
            rs = [r for r in rows if r["dtype"] == dtype and r["target_share"] == share]
            rs = rs[1:] or rs
            out.append(
                (
                    dtype,
                    statistics.median(float(r["gemm_share"]) for r in rs),
                    statistics.median(float(r["gemm_tflops"]) for r in rs),
                    statistics.median(float(r["sm_clock_mhz"]) for r in rs),
                    statistics.median(float(r["power_w"]) for r in rs),
                )
            )
    return out


def interp(x: float, xs: list[float], ys: list[float]) -> float:
    """Piecewise-linear in x, held flat outside [xs[0], xs[-1]]."""
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


HOPPER_700W = {"h100-sxm-80gb", "h200-sxm-141gb", "h800-sxm-80gb"}
"""The GPUs this relation was measured for: the GH100 die at a 700 W cap (H200's own loan)."""


def whatif(folder: Path, references: list[float]) -> None:
    """Per file and basis: errors before, and after scaling each record's compute terms by
    speed(reference) / speed(its priced busy share), for each reference. Tables: the H100 records
    on dgx-h100 + `kernels: builtin`; curve: the Hopper 700 W records on their presets."""
    import json
    import tempfile

    import yaml

    import models_zoo
    from cost_models.estimate import estimate
    from planner.validate import RunRecord, record_inputs

    shares, speed = speed_relation(folder)
    files = [
        ROOT.parent / "shared" / "data" / "published_runs.yaml",
        *(
            ROOT / "bench" / "heldout" / f"{s}_performance_summary.yaml"
            for s in ("mbridge", "nemo", "foundry")
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data = json.loads(
            (Path(models_zoo.__file__).parent / "clusters" / "dgx-h100.json").read_text()
        )
        path = Path(tmp) / "dgx-h100-tables.json"
        path.write_text(json.dumps({**data, "kernels": "builtin"}))
        tables = models_zoo.load_cluster(str(path))
    print(
        "what-if, compute scaled by speed(reference) / speed(busy share); median / P90 / signed %"
    )
    head = "  ".join(f"ref {r:<17}" for r in references)
    print(f"{'file':36} {'n':>3}  {'basis':7} {'as priced':17}  {head}")
    for f in files:
        loaded = yaml.safe_load(f.read_text())
        runs = loaded if isinstance(loaded, list) else loaded["runs"]
        for basis, cluster, gpus in (
            ("curve", None, HOPPER_700W),
            ("tables", tables, {"h100-sxm-80gb"}),
        ):
            priced = []
            for run in runs:
                if run.get("gpu") not in gpus:
                    continue
                record = RunRecord.model_validate(run).model_dump()
                est = estimate(*record_inputs(record, cluster))
                b = est.breakdown_s
                busy = b["compute"] + b["recompute"] + b.get("optimizer", 0.0)
                priced.append((est, busy, record["measured_tokens_per_s_per_gpu"]))
            if not priced:
                continue
            cells = [_line([(e.tokens_per_s_per_gpu / m - 1) * 100 for e, _, m in priced])]
            for reference in references:
                ref = interp(reference, shares, speed)
                errs = []
                for est, busy, measured in priced:
                    factor = ref / interp(busy / est.step_time_s, shares, speed)
                    step = est.step_time_s - busy + busy * factor
                    errs.append(
                        (est.tokens_per_s_per_gpu * est.step_time_s / step / measured - 1) * 100
                    )
                cells.append(_line(errs))
            print(f"{f.name:36} {len(priced):3d}  {basis:7} " + "  ".join(f"{c:21}" for c in cells))


def _line(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    p90 = a[min(len(a) - 1, round(0.9 * (len(a) - 1)))]
    return f"{statistics.median(a):4.1f} {p90:5.1f} {statistics.median(errs):+5.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", nargs="?", default=str(FOLDER))
    p.add_argument("--whatif", action="store_true")
    p.add_argument("--reference", type=float, nargs="+", default=[1.0])
    args = p.parse_args(argv)
    folder = Path(args.folder)
    print(
        "layers (bf16, 8,192 tokens), GPU otherwise waiting: busy share, time / time at busy share 1, SM MHz, W"
    )
    for key, pts in layer_relation(folder).items():
        cells = "  ".join(f"{b:.2f}: {t:.3f} {c:4.0f} {w:3.0f}" for b, t, c, w in pts)
        print(f"  {key:16} {cells}")
    print("the layer timed as the tables time a shape, over its time at the cap:")
    for key, (table, capped) in table_method(folder).items():
        print(f"  {key:16} {table:.2f} / {capped:.2f} ms = {table / capped:.3f}")
    print("Llama 3 70B TP8 GEMM mix, GPU otherwise waiting: share, TFLOP/s, SM MHz, W")
    for dtype, share, tf, clk, w in gemm_relation(folder):
        print(f"  {dtype:5} {share:.2f}  {tf:6.0f}  {clk:4.0f}  {w:3.0f}")
    if args.whatif:
        sys.path.insert(0, str(ROOT))
        whatif(folder, args.reference)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
