"""Accuracy on held-out vendor-tuned runs: Megatron-Bridge's performance summary, every container.

EVALUATION ONLY: the records of bench/heldout/mbridge_performance_summary.yaml are never used to fit
a constant. The 16 rows that are also shared records (../shared/data/published_runs.yaml, same GPU,
GPU count, layout and tokens/s) are reported apart; "held-out" means the others.

Prices the file four times with the planner.validate machinery (`planner validate --data FILE --json`):
  page     the presets as shipped, each record with only the settings the page states (the
           recipe-derived settings and selective recompute stripped: RECIPE_SETTINGS), and the
           same with the H100 records on the curve (below);
  presets  the GPU presets as shipped (the H100 on the shipped measured tables, `kernels: builtin`),
           records as transcribed;
  curve    as presets, but the H100 records on dgx-h100 without its tables (the preset's JSON less
           its `kernels` line, `validate --cluster-file`: the Hopper efficiency curve, the presets'
           default before issue 32), every other record as the presets price it.
Prints, per group, n, median and P90 of |error| and the signed median (error = predicted / measured
tokens/s - 1, in %; P90 by linear interpolation as `planner validate` computes it). Deterministic.

Usage: python bench/heldout_accuracy.py [RUNS.yaml] [--shared PUBLISHED_RUNS.yaml]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.validate import percentile, validate_file  # noqa: E402

RUNS = ROOT / "bench" / "heldout" / "mbridge_performance_summary.yaml"
SHARED = ROOT.parent / "shared" / "data" / "published_runs.yaml"
GENERATION = {
    "h100-sxm-80gb": "Hopper H100",
    "b200": "Blackwell B200",
    "b300": "Blackwell B300",
    "gb200": "Blackwell GB200",
    "gb300": "Blackwell GB300",
}


RECIPE_SETTINGS = ("cuda_graphs", "moe_dispatcher", "ep_overlap", "recompute_modules", "cpu_offload_layers")
"""The settings make_mbridge_summary.py takes from a performance recipe, not from the page."""


def page_only(runs: list[dict]) -> list[dict]:
    """The records with only the page's own settings (fp8 recipe, force-balanced routing)."""
    out = []
    for run in runs:
        settings = {k: v for k, v in (run.get("settings") or {}).items() if k not in RECIPE_SETTINGS}
        out.append({**run, "settings": settings, "layout": {**run["layout"], "recompute": None}})
    return out


def _key(run: dict) -> tuple:
    lay = run["layout"]
    return (run["gpu"], run["num_gpus"], lay["tp"], lay["pp"], lay["global_batch_seqs"],
            float(run["measured_tokens_per_s_per_gpu"]))  # fmt: skip


def shared_twins(runs: Iterable[dict], shared_path: Path) -> dict[str, str]:
    """Held-out id -> shared id for rows that are also shared records (same GPU, GPU count, TP, PP,
    global batch and tokens/s)."""
    if not shared_path.exists():
        return {}
    shared = {_key(r): r["id"] for r in yaml.safe_load(shared_path.read_text())
              if "Megatron-Bridge" in str(r.get("source"))}  # fmt: skip
    return {r["id"]: shared[_key(r)] for r in runs if _key(r) in shared}


def load_runs(path: Path) -> list[dict]:
    return yaml.safe_load(Path(path).read_text())


def curve_cluster(preset: str, folder: Path) -> Path:
    """`preset` without its kernel tables (the preset's JSON less its `kernels: builtin` line),
    written to `folder`: the generation's efficiency curve prices every kernel, as the Hopper
    presets did before issue 32 switched them to the shipped tables."""
    import models_zoo  # noqa: PLC0415
    from planner.calibrate import cluster_yaml  # noqa: PLC0415

    out = folder / f"{preset}-curve.yaml"
    cluster = models_zoo.load_cluster(preset)
    out.write_text(cluster_yaml(cluster.model_copy(update={"kernels": None})))
    return out


def line(errs: list[float]) -> str:
    if not errs:
        return "-"
    a = sorted(abs(e) for e in errs)
    p90 = f"{percentile(a, 0.9):5.1f}" if len(a) >= 10 else "    -"
    return f"{statistics.median(a):5.1f} {p90} {statistics.median(errs):+6.1f}"


def groups(runs: dict[str, dict], twins: dict[str, str]) -> list[tuple[str, Callable]]:
    def moe(rid: str) -> bool:
        return bool(runs[rid]["model"].get("moe"))

    def container(rid: str) -> str:
        return runs[rid]["source"].split("NeMo ")[1].split(" ")[0]

    def held(rid: str) -> bool:
        return rid not in twins

    out: list[tuple[str, Callable]] = [
        ("all transcribed", lambda r: True),
        ("also shared records", lambda r: not held(r)),
        ("HELD-OUT all", held),
        ("HELD-OUT dense", lambda r: held(r) and not moe(r)),
        ("HELD-OUT MoE", lambda r: held(r) and moe(r)),
        ("HELD-OUT confidence high", lambda r: held(r) and runs[r]["confidence"] == "high"),
    ]
    out.append(("H100, every row (also-shared included)",
                lambda r: runs[r]["gpu"] == "h100-sxm-80gb"))  # fmt: skip
    for gpu, gen in GENERATION.items():
        out.append((f"  {gen}", lambda r, g=gpu: held(r) and runs[r]["gpu"] == g))
        for kind, want in (("dense", False), ("MoE", True)):
            out.append((f"    {gen} {kind}",
                        lambda r, g=gpu, w=want: held(r) and runs[r]["gpu"] == g and moe(r) == w))  # fmt: skip
    for c in sorted({container(r) for r in runs}, key=lambda v: [int(x) for x in v.split(".")]):
        out.append((f"  container {c}", lambda r, c=c: held(r) and container(r) == c))
    out += [
        ("  B200 8-GPU (single node) dense",
         lambda r: held(r) and runs[r]["gpu"] == "b200" and runs[r]["num_gpus"] == 8 and not moe(r)),
        ("  Qwen3 on Blackwell",
         lambda r: held(r) and runs[r]["gpu"] != "h100-sxm-80gb" and "Qwen3" in runs[r]["model"]["name"]),
        ("  Qwen3 on H100",
         lambda r: held(r) and runs[r]["gpu"] == "h100-sxm-80gb" and "Qwen3" in runs[r]["model"]["name"]),
    ]  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="?", default=str(RUNS))
    p.add_argument("--shared", default=str(SHARED))
    p.add_argument("--rows", action="store_true", help="also print every record's errors")
    args = p.parse_args(argv)
    runs = {r["id"]: r for r in load_runs(Path(args.runs))}
    twins = shared_twins(runs.values(), Path(args.shared))
    presets = {r.id: r for r in validate_file(args.runs)}
    with tempfile.TemporaryDirectory() as tmp:
        stripped = Path(tmp) / "page_only.yaml"
        stripped.write_text(yaml.safe_dump(page_only(list(runs.values())), sort_keys=False))
        page = {r.id: r for r in validate_file(str(stripped))}
        flat = str(curve_cluster("dgx-h100", Path(tmp)))
        h100 = {r.id: r for r in validate_file(args.runs, flat)}
        h100_page = {r.id: r for r in validate_file(str(stripped), flat)}
    curve = {rid: (h100[rid] if runs[rid]["gpu"] == "h100-sxm-80gb" else r)
             for rid, r in presets.items()}  # fmt: skip
    page_curve = {rid: (h100_page[rid] if runs[rid]["gpu"] == "h100-sxm-80gb" else r)
                  for rid, r in page.items()}  # fmt: skip
    unscored = sorted((rid, r.error) for rid, r in presets.items() if r.tokens_error_pct is None)
    print(f"{args.runs}: {len(runs)} records, {len(twins)} also shared records, "
          f"{len(unscored)} not scored")  # fmt: skip
    for rid, err in unscored:
        print(f"  not scored: {rid}: {err}")
    print(f"{'':50}{'page settings':20}  {'page settings':20}  {'recipe settings':20}  recipe settings")
    print(f"{'group':44} {'n':>4}  {'presets: med P90 sgn':20}  {'H100 on the curve':20}  "
          f"{'presets (H100 tables)':20}  H100 on the curve")  # fmt: skip
    for label, keep in groups(runs, twins):
        ids = [rid for rid in runs if keep(rid) and presets[rid].tokens_error_pct is not None]
        if not ids:
            continue
        ids = [i for i in ids if page[i].tokens_error_pct is not None]
        p = line([page[i].tokens_error_pct for i in ids])
        pc = line([page_curve[i].tokens_error_pct for i in ids])
        a = line([presets[i].tokens_error_pct for i in ids])
        b = line([curve[i].tokens_error_pct for i in ids])
        print(f"{label:44} {len(ids):4d}  {p:20}  {pc:20}  {a:20}  {b}")
    if args.rows:
        for rid in runs:
            e, t = presets[rid].tokens_error_pct, curve[rid].tokens_error_pct
            g = page[rid].tokens_error_pct
            if e is not None and g is not None:
                twin = f"  (= {twins[rid]})" if rid in twins else ""
                print(f"  {rid:58} {g:+7.1f} {e:+7.1f} {t:+7.1f}{twin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
