"""Accuracy on held-out vendor-tuned runs: Megatron-Bridge's performance summary, every container.

EVALUATION ONLY: the records of bench/heldout/mbridge_performance_summary.yaml are never used to fit
a constant. The 16 rows that are also shared records (../shared/data/published_runs.yaml, same GPU,
GPU count, layout and tokens/s) are reported apart; "held-out" means the others.

Prices the file four times with the planner.validate machinery (`planner validate --data FILE --json`):
  page     the presets as shipped, each record with only the settings the page states (the
           recipe-derived settings and selective recompute stripped: RECIPE_SETTINGS), and the
           same with the H100 records on the tables (below);
  presets  the GPU presets as shipped (every GPU on its generation's efficiency curve, the
           Hopper presets with their attention from the shipped measured tables since
           docs/calibration.md "Decision, 2026-11-28"), records as transcribed;
  tables   as presets, but the H100 records on dgx-h100 with the shipped measured tables (the
           preset's JSON plus `kernels: builtin`, `validate --cluster-file`; the presets' default
           from issue 32 item 2 to that decision), every other record as the presets price it.
Prints, per group, n, median and P90 of |error| and the signed median (error = predicted / measured
tokens/s - 1, in %; P90 by linear interpolation as `planner validate` computes it). Then layout
pair order (issue 32: "pair order of layouts of the same model and batch >= 95 %") for each of the
four pricings: planner.validate's layout_pairs (rows of the same model architecture, GPU, sequence
length and global batch that differ in layout, precision or run settings) formed within one NeMo
container only (the container a row names in its `source`; software changed between containers),
measured ties (< planner.validate.TIE_PCT apart) set aside; per GPU and per what differs in a pair;
then the out-of-order pairs and ties of the presets as shipped with both records' errors. Then the
same job on two GPUs (TWIN_GPUS: B200 / GB200, B300 / GB300, GB200 / GB300): held-out rows of one
container, model architecture, precision and fp8 recipe on both GPUs, with the signed median error on
each and the median error of the predicted speed ratio (whether a GPU's signed error is its own or
its rows' mix of jobs and containers; `--rows` lists the pairs). Last, the identical-inputs
floor (floor_section): rows whose inputs the cost model reads are the same, grouped, with the best
one prediction per group against the model's errors on those rows.
Deterministic; no pricing pass beyond the four above.

With --what-if GEN.FIELD=VALUE (repeatable): every pricing runs on a copy of the calibration
constants with those fields replaced (cost_models.calibration.CALIBRATION, e.g.
`ampere.gemm_efficiency_bf16=0.775`), for a refit the shipped constants do not take; the header
names them. Nothing is written. --what-if-fit FIT.json does the same for every constant of a
`bench/fit_calibration.py --out FIT.json` fit (docs/accuracy.md "What the shared records' unstated
software costs the constants").

Usage: python bench/heldout_accuracy.py [RUNS.yaml] [--shared PUBLISHED_RUNS.yaml] [--what-if GEN.FIELD=VALUE]
    [--what-if-fit FIT.json]
RUNS.yaml defaults to the Megatron-Bridge file; bench/heldout/nemo_performance_summary.yaml (NeMo
Framework's own tables, containers 25.02 .. 25.07, make_nemo_summary.py) is the second source, read
the same way (every record names its container as "NeMo <version> container" in its source);
foundry_performance_summary.yaml (llm-foundry, containers named by commit) and
mlperf_training_summary.yaml (MLPerf Training, NeMo containers) the third and fourth,
megatron_readme_summary.yaml (Megatron-LM's README tables) the fifth and
dgxc_performance_summary.yaml (DGX Cloud Benchmarking, NeMo containers or the README's commit) the
sixth; `bench/heldout/*_summary.yaml` scores them all as one set.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.validate import (
    FILL_RULES,
    TIE_PCT,
    LayoutPair,
    ValidationRow,
    layout_pairs,
    order_of,
    percentile,
    validate_file,
)

RUNS = ROOT / "bench" / "heldout" / "mbridge_performance_summary.yaml"
SHARED = ROOT.parent / "shared" / "data" / "published_runs.yaml"
GENERATION = {
    "h100-sxm-80gb": "Hopper H100",
    "b200": "Blackwell B200",
    "b300": "Blackwell B300",
    "gb200": "Blackwell GB200",
    "gb300": "Blackwell GB300",
    "a100-sxm-80gb": "Ampere A100 80GB",
    "a100-sxm-40gb": "Ampere A100 40GB",
}


RECIPE_SETTINGS = ("cuda_graphs", "full_iteration_cuda_graph", "moe_dispatcher", "moe_flex_backend", "ep_overlap",
                   "recompute_modules", "cpu_offload_layers", "tp_comm_overlap")
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
    shared = {_key(r): r["id"] for r in yaml.safe_load(shared_path.read_text())}
    return {r["id"]: shared[_key(r)] for r in runs if _key(r) in shared}


def load_runs(path: Path) -> list[dict]:
    return yaml.safe_load(Path(path).read_text())


def tables_cluster(preset: str, folder: Path, kernels: str | None = "builtin") -> Path:
    """`preset` pricing kernels from its GPU's shipped measured tables (the preset's JSON with
    `kernels: builtin`), or with `kernels=None` on its generation's efficiency curve alone (the
    preset's JSON less its `kernels`), written to `folder`."""
    import models_zoo

    data = json.loads((Path(models_zoo.__file__).parent / "clusters" / f"{preset}.json").read_text())
    data.pop("kernels", None)
    out = folder / f"{preset}-{'tables' if kernels else 'curve'}.json"
    out.write_text(json.dumps({**data, **({"kernels": kernels} if kernels else {})}))
    return out


def container_of(run: dict) -> str:
    """The software a row was measured in, as its `source` names it: the NeMo container ("NeMo
    26.04.01 container"), or for a table kept in a repository the commit that last changed the
    row ("rows of commit b2a43a147", make_foundry_summary.py)."""
    found = re.search(r"NeMo (\d+\.\d+(?:\.\d+)?) container|rows of commit ([0-9a-f]+)", run["source"])
    if found is None:
        raise ValueError(f"{run['id']}: source names no NeMo container nor commit: {run['source']!r}")
    return found.group(1) or found.group(2)


def summary(errs: list[float]) -> tuple[float, float | None, float]:
    """(median |error|, P90 |error| or None under 10 rows, signed median) of non-empty `errs`."""
    a = sorted(abs(e) for e in errs)
    return statistics.median(a), percentile(a, 0.9) if len(a) >= 10 else None, statistics.median(errs)


def line(errs: list[float]) -> str:
    """summary() as fixed-width table cells."""
    if not errs:
        return "-"
    med, p90, signed = summary(errs)
    return f"{med:5.1f} {'    -' if p90 is None else f'{p90:5.1f}'} {signed:+6.1f}"


def groups(runs: dict[str, dict], twins: dict[str, str]) -> list[tuple[str, Callable]]:
    def moe(rid: str) -> bool:
        return bool(runs[rid]["model"].get("moe"))

    def container(rid: str) -> str:
        return container_of(runs[rid])

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
    def order(v: str) -> tuple:  # NeMo versions in number order, then commits
        return (0, [int(x) for x in v.split(".")]) if re.fullmatch(r"[\d.]+", v) else (1, [v])

    for c in sorted({container(r) for r in runs}, key=order):
        out.append((f"  container {c}", lambda r, c=c: held(r) and container(r) == c))
    out += [
        ("  B200 8-GPU (single node) dense",
         lambda r: held(r) and runs[r]["gpu"] == "b200" and runs[r]["num_gpus"] == 8 and not moe(r)),
        ("  Qwen3 on Blackwell",
         lambda r: held(r) and runs[r]["gpu"] != "h100-sxm-80gb" and "Qwen3" in runs[r]["model"]["name"]),
        ("  Qwen3 on H100",
         lambda r: held(r) and runs[r]["gpu"] == "h100-sxm-80gb" and "Qwen3" in runs[r]["model"]["name"]),
    ]  # fmt: skip

    def userbuffers(rid: str) -> bool:  # TE userbuffers TP overlap, as the recipe set it
        s = runs[rid].get("settings") or {}
        return bool(s.get("tp_comm_overlap")) and str(s.get("tp_overlap", "")).startswith("userbuffers")

    def dense_tp(rid: str) -> bool:
        return held(rid) and not moe(rid) and runs[rid]["layout"]["tp"] > 1

    out += [
        ("  dense TP > 1, userbuffers TP overlap", lambda r: dense_tp(r) and userbuffers(r)),
        ("    of them CP 2", lambda r: dense_tp(r) and userbuffers(r) and runs[r]["layout"]["cp"] == 2),
        ("    of them CP 1", lambda r: dense_tp(r) and userbuffers(r) and runs[r]["layout"]["cp"] == 1),
        ("  dense TP > 1, TP overlap off (stated)",
         lambda r: dense_tp(r) and (runs[r].get("settings") or {}).get("tp_comm_overlap") is False),
    ]  # fmt: skip

    def foundry_bf16(rid: str, gpu: str, seq: int) -> bool:  # docs/accuracy.md's table by length
        run = runs[rid]
        return (held(rid) and run["framework"] == "llm-foundry" and run["gpu"] == gpu
                and run["layout"]["precision"] == "bf16" and run["model"]["seq_len"] == seq)  # fmt: skip

    foundry = {(runs[r]["gpu"], runs[r]["model"]["seq_len"]) for r in runs
               if runs[r]["framework"] == "llm-foundry" and runs[r]["layout"]["precision"] == "bf16"}  # fmt: skip
    for gpu, seq in sorted(foundry):
        out.append((f"  llm-foundry bf16 {GENERATION.get(gpu, gpu)} seq {seq}",
                    lambda r, g=gpu, q=seq: foundry_bf16(r, g, q)))  # fmt: skip
    return out


# ------------------------------------------------------------------------- same job, two GPUs

TWIN_GPUS = (("b200", "gb200"), ("b300", "gb300"), ("gb200", "gb300"))
"""GPU pairs compared on the same job: B200 (HGX, x86, 1,000 W, 8-GPU NVLink) against GB200
(Grace, 1,200 W, NVL72), their Blackwell Ultra successors, and the two NVL72 parts."""


def job_key(run: dict) -> str:
    """Container, model architecture, precision and fp8 recipe of a row: rows of two GPUs with one
    key ran the same job in the same software (layouts and run settings may differ)."""
    model = {k: v for k, v in run["model"].items() if k != "name"}
    recipe = (run.get("settings") or {}).get("fp8_recipe")
    return json.dumps([container_of(run), model, run["layout"]["precision"], recipe], sort_keys=True)


def same_jobs(runs: dict[str, dict], ids: Iterable[str], a: str, b: str) -> list[tuple[str, str]]:
    """(row on GPU a, row on GPU b) of every job key that has exactly one of `ids` on each GPU."""
    by: dict[tuple[str, str], list[str]] = {}
    for rid in ids:
        by.setdefault((runs[rid]["gpu"], job_key(runs[rid])), []).append(rid)
    out = []
    for (gpu, key), left in sorted(by.items()):
        right = by.get((b, key), [])
        if gpu == a and len(left) == 1 and len(right) == 1:
            out.append((left[0], right[0]))
    return out


def same_layout(x: dict, y: dict) -> bool:
    keep = ("num_gpus", "layout", "settings")
    return all(x.get(k) == y.get(k) for k in keep)


def twin_cells(runs: dict[str, dict], pairs: list[tuple[str, str]],
               err: dict[str, float], pred: dict[str, float]) -> str:
    """n, signed median error of each side, and the median error of the predicted speed ratio
    (b over a: predicted ratio / measured ratio - 1, %), which no per-GPU constant can hide."""
    if not pairs:
        return f"{0:3d}"
    ratio = [100.0 * ((pred[y] / pred[x]) / (runs[y]["measured_tokens_per_s_per_gpu"]
                                             / runs[x]["measured_tokens_per_s_per_gpu"]) - 1.0)
             for x, y in pairs]  # fmt: skip
    med = statistics.median
    return (f"{len(pairs):3d} {med(err[x] for x, _ in pairs):+6.1f} "
            f"{med(err[y] for _, y in pairs):+6.1f} {med(ratio):+6.1f}")


def twin_section(runs: dict[str, dict], twins: dict[str, str], rows: dict[str, ValidationRow],
                 show_rows: bool) -> None:
    """The same job on two GPUs (TWIN_GPUS; held-out rows, presets as shipped): is one GPU's
    signed error its own, or its rows' mix of jobs and containers?"""
    err = {rid: r.tokens_error_pct for rid, r in rows.items() if r.tokens_error_pct is not None}
    pred = {rid: rows[rid].estimate.tokens_per_s_per_gpu for rid in err}
    ids = [rid for rid in err if rid not in twins]
    print()
    print("Same job on two GPUs (held-out rows of one container, model, precision and fp8 recipe on"
          " both; recipe, presets): n, signed median error on the first GPU, on the second, and the"
          " median error of the predicted speed ratio second / first (predicted ratio / measured"
          " ratio - 1, %)")  # fmt: skip
    print(f"{'GPUs':16} {'every such job':28}  same layout and settings")
    for a, b in TWIN_GPUS:
        pairs = same_jobs(runs, ids, a, b)
        alike = [(x, y) for x, y in pairs if same_layout(runs[x], runs[y])]
        print(f"{a + ' vs ' + b:16} {twin_cells(runs, pairs, err, pred):28}  "
              f"{twin_cells(runs, alike, err, pred)}")  # fmt: skip
        for x, y in pairs if show_rows else ():
            print(f"    {x} {err[x]:+6.1f} | {y} {err[y]:+6.1f}"
                  f"{'  (same layout and settings)' if (x, y) in alike else ''}")


# ------------------------------------------------------------------------------ layout pair order

KINDS = ("precision", "layout", "settings")


def pair_kind(a: dict, b: dict) -> str:
    """What differs between the two records of a pair: "precision" (the layout's precision or the
    fp8 recipe), "layout" (another layout field, global batch aside, or the GPU count), "settings"
    (another run setting), joined with " + "; "framework" when none of them does."""

    def parts(run: dict) -> tuple:
        lay = {k: v for k, v in run["layout"].items() if k != "global_batch_seqs"}
        settings = dict(run.get("settings") or {})
        precision = (lay.pop("precision", None) or FILL_RULES["precision"],
                     settings.pop("fp8_recipe", None))  # fmt: skip
        return precision, (lay, run["num_gpus"]), settings

    diff = [k for k, x, y in zip(KINDS, parts(a), parts(b), strict=True) if x != y]
    return " + ".join(diff) or "framework"


def precisions_of(a: dict, b: dict) -> tuple[str, str] | None:
    """The two precisions of a pair that differ in precision, in name order (fp8 with its recipe
    where the record states one: "fp8 tensorwise"); None when they agree."""

    def name(run: dict) -> str:
        recipe = (run.get("settings") or {}).get("fp8_recipe")
        precision = run["layout"].get("precision") or FILL_RULES["precision"]
        return " ".join(filter(None, (precision, recipe)))

    pa, pb = sorted((name(a), name(b)))
    return None if pa == pb else (pa, pb)


def container_pairs(rows: dict[str, ValidationRow], runs: dict[str, dict]) -> list[LayoutPair]:
    """planner.validate's layout pairs (same model architecture, GPU, sequence length and global
    batch; different layout, precision or run settings), only within one container: software
    changed between containers, so a row of 26.04 and one of 26.06 never pair."""
    return layout_pairs(list(rows.values()), within=lambda r: container_of(runs[r.id]))


def pair_cell(pairs: list[LayoutPair]) -> str:
    order = order_of(pairs)
    if not order.pairs:
        return f"0 pairs{f' {order.ties}t' if order.ties else ''}"
    ties = f" {order.ties}t" if order.ties else ""
    return f"{order.agree}/{order.pairs} {order.fraction:6.1%}{ties}"


def kind_of(p: LayoutPair, recs: dict[str, dict]) -> str:
    return pair_kind(recs[p.fast.id], recs[p.slow.id])


def pair_table(variants: dict[str, tuple[list[LayoutPair], dict[str, dict]]],
               twins: dict[str, str]) -> None:
    """Pairs in order / pairs counted (and measured ties, "t") per group and pricing variant."""

    def held(p: LayoutPair) -> bool:
        return p.fast.id not in twins and p.slow.id not in twins

    rows: list[tuple[str, Callable[[LayoutPair, dict], bool]]] = [
        ("all pairs (also-shared rows included)", lambda p, recs: True),
        ("HELD-OUT pairs (neither row a shared record)", lambda p, recs: held(p)),
    ]
    for gpu, gen in GENERATION.items():
        rows.append((f"  {gen}", lambda p, recs, g=gpu: held(p) and p.fast.gpu == g))
    kinds = sorted({kind_of(p, recs) for pairs, recs in variants.values() for p in pairs})
    rows.append(("  same precision (layout or settings only)",
                 lambda p, recs: held(p) and "precision" not in kind_of(p, recs)))  # fmt: skip
    for kind in kinds:
        rows.append((f"  differ in {kind}",
                     lambda p, recs, k=kind: held(p) and kind_of(p, recs) == k))  # fmt: skip
    def precs(p: LayoutPair, recs: dict[str, dict]) -> tuple[str, str] | None:
        return precisions_of(recs[p.fast.id], recs[p.slow.id])

    for pr in sorted({precs(p, recs) for pairs, recs in variants.values() for p in pairs} - {None}):
        rows.append((f"  {pr[0]} vs {pr[1]}",
                     lambda p, recs, pr=pr: held(p) and precs(p, recs) == pr))  # fmt: skip
    print(f"{'pairs':44} " + "  ".join(f"{v:18}" for v in variants))
    for label, keep in rows:
        cells = [pair_cell([p for p in pairs if keep(p, recs)])
                 for pairs, recs in variants.values()]  # fmt: skip
        print(f"{label:44} " + "  ".join(f"{c:18}" for c in cells))


def pair_lists(variants: dict[str, tuple[list[LayoutPair], dict[str, dict]]], head: str,
               twins: dict[str, str]) -> None:
    """The `head` variant's out-of-order pairs and measured ties, each with the measured and
    predicted gap and both records' errors; then every pair of `head` another variant orders
    the other way."""
    pairs, recs = variants[head]

    def describe(p: LayoutPair) -> str:
        shared = " (a shared record)" if p.fast.id in twins or p.slow.id in twins else ""
        return (f"    {p.fast.id} > {p.slow.id}: measured {p.measured_gap_pct:+.1f} %, predicted "
                f"{p.predicted_gap_pct:+.1f} %, errors {p.fast.tokens_error_pct:+.1f} / "
                f"{p.slow.tokens_error_pct:+.1f} %; differ in "
                f"{kind_of(p, recs)}{shared}")  # fmt: skip

    wrong = [p for p in pairs if not p.tie and not p.agrees]
    print(f"Out of order, {head} ({len(wrong)}; the first measured faster; gaps in % of the slower;"
          " errors: predicted / measured - 1, faster / slower):")  # fmt: skip
    for p in wrong:
        print(describe(p))
    ties = [p for p in pairs if p.tie]
    print(f"Measured ties (< {TIE_PCT:g} % apart, not counted), {head} ({len(ties)}):")
    for p in ties:
        print(describe(p))
    verdict = {(p.fast.id, p.slow.id): p.agrees for p in pairs if not p.tie}
    for name, (other, _) in variants.items():
        moved = [p for p in other if not p.tie and (p.fast.id, p.slow.id) in verdict
                 and verdict[(p.fast.id, p.slow.id)] != p.agrees]  # fmt: skip
        if name != head:
            print(f"Pairs {name} orders otherwise than {head}: {len(moved)}"
                  + "".join(f"\n    {p.fast.id} > {p.slow.id}: "
                            f"{'in order' if p.agrees else 'out of order'}" for p in moved))  # fmt: skip


def pair_section(runs: dict[str, dict], twins: dict[str, str],
                 priced: dict[str, dict[str, ValidationRow]]) -> None:
    """Layout pair order per pricing variant (`priced`: variant -> id -> row): the table, then
    the headline variant's ("recipe, presets": the presets as shipped) out-of-order pairs."""
    stripped = {r["id"]: r for r in page_only(list(runs.values()))}
    variants = {name: (container_pairs(rows, runs), stripped if name.startswith("page") else runs)
                for name, rows in priced.items()}  # fmt: skip
    print()
    print(f"Layout pair order within one container (pairs: planner.validate's layout_pairs, rows of"
          f" the same model, GPU, sequence length and global batch in one container; measured ties,"
          f" less than {TIE_PCT:g} % apart, set aside: t): in order / counted")  # fmt: skip
    pair_table(variants, twins)
    pair_lists(variants, "recipe, presets", twins)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", default=[str(RUNS)],
                   help="held-out files; several are scored as one set, with a group per file")  # fmt: skip
    p.add_argument("--shared", default=str(SHARED))
    p.add_argument("--rows", action="store_true", help="also print every record's errors")
    p.add_argument("--what-if", action="append", default=[], metavar="GEN.FIELD=VALUE",
                   help="price on a copy of the calibration constants with this field replaced")
    p.add_argument("--what-if-fit", metavar="FIT.json",
                   help="--what-if every constant of bench/fit_calibration.py's --out file")  # fmt: skip
    args = p.parse_args(argv)
    if args.what_if_fit:
        args.what_if += fit_changes(Path(args.what_if_fit))
    if args.what_if:
        with what_if(args.what_if):
            print("What-if constants (not shipped): " + ", ".join(args.what_if))
            return _main(args)
    return _main(args)


def fit_changes(path: Path) -> list[str]:
    """bench/fit_calibration.py --out's `{"gen:field": value}` as --what-if changes (its tied fp8
    ceilings written out beside their bf16 ones: fit_calibration.TIES)."""
    try:
        fitted = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"--what-if-fit {path}: {err}") from None
    out = []
    for key, value in fitted.items():
        gen, _, field = key.partition(":")
        gens = ["ampere", "hopper", "blackwell"] if gen == "*" else [gen]
        out += [f"{g}.{field}={value}" for g in gens]
    return out


@contextlib.contextmanager
def what_if(changes: list[str]):
    """cost_models.calibration.CALIBRATION with `gen.field=value` replaced, for the duration."""
    from cost_models import calibration

    table = dict(calibration.CALIBRATION)
    for change in changes:
        target, _, value = change.partition("=")
        gen, _, field = target.partition(".")
        if gen not in table or field not in {f.name for f in dataclasses.fields(table[gen])} or not value:
            raise SystemExit(f"--what-if {change!r}: expected GEN.FIELD=VALUE with GEN one of {sorted(table)}")
        table[gen] = dataclasses.replace(table[gen], **{field: float(value)})
    with mock.patch.dict(calibration.CALIBRATION, table):
        yield


def _main(args: argparse.Namespace) -> int:
    files = {path: load_runs(Path(path)) for path in args.runs}
    runs = {r["id"]: r for rows in files.values() for r in rows}
    if len(runs) != sum(len(rows) for rows in files.values()):
        raise SystemExit("record ids repeat across the held-out files")
    twins = shared_twins(runs.values(), Path(args.shared))
    with tempfile.TemporaryDirectory() as tmp:
        combined = args.runs[0]
        if len(files) > 1:
            combined = str(Path(tmp) / "combined.yaml")
            Path(combined).write_text(yaml.safe_dump(list(runs.values()), sort_keys=False))
        args.runs = combined
        presets = {r.id: r for r in validate_file(args.runs)}
        stripped = Path(tmp) / "page_only.yaml"
        stripped.write_text(yaml.safe_dump(page_only(list(runs.values())), sort_keys=False))
        page = {r.id: r for r in validate_file(str(stripped))}
        tabled = str(tables_cluster("dgx-h100", Path(tmp)))
        h100 = {r.id: r for r in validate_file(args.runs, tabled)}
        h100_page = {r.id: r for r in validate_file(str(stripped), tabled)}
    tables = {rid: (h100[rid] if runs[rid]["gpu"] == "h100-sxm-80gb" else r)
              for rid, r in presets.items()}  # fmt: skip
    page_tables = {rid: (h100_page[rid] if runs[rid]["gpu"] == "h100-sxm-80gb" else r)
                   for rid, r in page.items()}  # fmt: skip
    unscored = sorted((rid, r.error) for rid, r in presets.items() if r.tokens_error_pct is None)
    print(f"{', '.join(files)}: {len(runs)} records, {len(twins)} also shared records, "
          f"{len(unscored)} not scored")  # fmt: skip
    for rid, err in unscored:
        print(f"  not scored: {rid}: {err}")
    print(f"{'':50}{'page settings':20}  {'page settings':20}  {'recipe settings':20}  recipe settings")
    print(f"{'group':44} {'n':>4}  {'presets: med P90 sgn':20}  {'H100 on the tables':20}  "
          f"{'presets':20}  H100 on the tables")  # fmt: skip
    origin = {r["id"]: Path(path).name for path, rows in files.items() for r in rows}
    by_file = [(f"  file {name}", lambda r, n=name: r not in twins and origin[r] == n)
               for name in dict.fromkeys(origin.values())] if len(files) > 1 else []  # fmt: skip
    for label, keep in groups(runs, twins)[:6] + by_file + groups(runs, twins)[6:]:
        ids = [rid for rid in runs if keep(rid) and presets[rid].tokens_error_pct is not None]
        if not ids:
            continue
        ids = [i for i in ids if page[i].tokens_error_pct is not None]
        p = line([page[i].tokens_error_pct for i in ids])
        pc = line([page_tables[i].tokens_error_pct for i in ids])
        a = line([presets[i].tokens_error_pct for i in ids])
        b = line([tables[i].tokens_error_pct for i in ids])
        print(f"{label:44} {len(ids):4d}  {p:20}  {pc:20}  {a:20}  {b}")
    # Every record ran, so a predicted peak above the GPU's memory is a memory-model miss (or a
    # saving the record does not state): the search would have refused the run's own layout.
    over = {name: sum(1 for rid in runs if origin[rid] == name and presets[rid].fit_note is not None)
            for name in dict.fromkeys(origin.values())}  # fmt: skip
    print("Predicted peak above the GPU's memory (recipe settings, presets; each of these runs ran): "
          f"{sum(over.values())} of {len(runs)} (" + ", ".join(f"{n} {k}" for k, n in over.items()) + ")")
    pair_section(runs, twins, {"page, tables": page_tables, "page, presets": page,
                               "recipe, tables": tables, "recipe, presets": presets})  # fmt: skip
    twin_section(runs, twins, presets, args.rows)
    floor_section(runs, presets)
    if args.rows:
        for rid in runs:
            e, t = presets[rid].tokens_error_pct, tables[rid].tokens_error_pct
            g = page[rid].tokens_error_pct
            if e is not None and g is not None:
                twin = f"  (= {twins[rid]})" if rid in twins else ""
                print(f"  {rid:58} {g:+7.1f} {e:+7.1f} {t:+7.1f}{twin}")
    return 0


def inputs_key(run: dict) -> str:
    """Everything the cost model reads of a record: model (its name aside), GPU, GPU count, GPUs
    per node, interconnect text, layout, settings and framework."""
    model = {k: v for k, v in run["model"].items() if k != "name"}
    keep = ("gpu", "num_gpus", "gpus_per_node", "interconnect", "layout", "settings", "framework")
    return json.dumps([model, *(run.get(k) for k in keep)], sort_keys=True, default=str)


def floor_section(runs: dict[str, dict], rows: dict[str, ValidationRow]) -> None:
    """Rows whose inputs are the same (inputs_key) and whose measured figures differ: the part of
    the error no model of these inputs can remove (software, clocks, the run itself). Per group of
    two or more scored rows the best one prediction is the geometric median of its measured
    figures; its |error| per row is the floor, beside the model's (recipe settings, presets)."""
    groups: dict[str, list[str]] = {}
    for rid, run in runs.items():
        if rows[rid].tokens_error_pct is not None:
            groups.setdefault(inputs_key(run), []).append(rid)
    floor, model, spreads, wide = [], [], [], []
    for ids in (g for g in groups.values() if len(g) > 1):
        measured = [float(runs[i]["measured_tokens_per_s_per_gpu"]) for i in ids]
        best = math.exp(statistics.median(math.log(m) for m in measured))
        floor += [100 * abs(best / m - 1) for m in measured]
        model += [abs(rows[i].tokens_error_pct) for i in ids]
        spreads.append(100 * (max(measured) / min(measured) - 1))
        if spreads[-1] > 20:
            wide.append(f"{' / '.join(ids)} ({spreads[-1]:.0f} %)")
    if not spreads:
        return
    def cell(errs: list[float]) -> str:
        med, p90, _ = summary(errs)
        return f"{med:.1f} / {'-' if p90 is None else f'{p90:.1f}'}"

    print(f"Identical inputs (rows that differ only in what the cost model does not read: container, "
          f"system, run): {len(floor)} rows in {len(spreads)} groups; measured spread (max / min - 1) "
          f"{statistics.median(spreads):.1f} % at the median, {sum(s > 10 for s in spreads)} groups "
          f"over 10 %; the best one prediction per group {cell(floor)} % (median / P90 |error|), "
          f"the model {cell(model)} % on the same rows")  # fmt: skip
    for group in wide:
        print(f"  over 20 %: {group}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
