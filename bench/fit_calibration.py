"""Fit the per-generation calibration constants on a published-runs file, within physical bounds,
and check the fit out of fold before anyone copies it.

    python bench/fit_calibration.py [--data ../shared/data/published_runs.yaml] [--exclude ID ...]
        [--only GROUP ...] [--objective huber|legacy] [--rounds N] [--prior TAU]
        [--guard loso|kfold|none] [--folds K] [--out FILE]

Coordinate descent over the constants of cost_models.calibration (FITTED, or those of `--only`:
a generation, a field, or one of the GROUPS below), each kept inside the range its
microbenchmarks allow (BOUNDS, sources in docs/cost_model.md#calibration), fp8 efficiency never
above bf16, and Ampere's fp8 tied to its bf16 (no fp8 units).

Objective (`--objective`):
  huber   (default) mean Huber loss of the log error ln(predicted / measured tokens/s/GPU), linear
          beyond HUBER_DELTA (10 %): a record 30 % off pulls a constant no harder than one 10 % off,
          so one outlier (H800 DeepSeek-V3 +27 %, Qwen3-30B-A3B +67 %) cannot drag a generation;
  legacy  median + 0.5 x P90 of the absolute % error (the objective of the fits before 2026-11-27).

`--prior TAU` adds TAU x the sum of each constant's squared move from its shipped value, in units
of its BOUNDS width (a ridge: 0, the default, is none): the constants move only as far as the
records as a whole insist.

Guard (`--guard loso`, the default): leave one source out. The records are grouped by the source
family `planner validate` reports (the id's first word: megatron2020, megascale, mosaic, nemo2407,
torchtitan, mbridge, ...); for each family the constants are fitted on the others, from the shipped
values, and the family's records priced with them. The out-of-fold errors are what a refit would do
to runs it has not seen: the table prints them per family next to the shipped constants' errors on
the same records. A refit whose out-of-fold error is not below the shipped constants' in-sample
error does not generalise and is not taken. `--guard kfold` (k = --folds, records in id order,
record i in fold i mod k) is the second guard: every shared Blackwell record is an mbridge one, so
leaving mbridge out leaves the Blackwell constants unfitted and loso cannot judge them.

The held-out set (bench/heldout/) is never read here: it is the acceptance check, run apart
(bench/heldout_accuracy.py). Copying values into calibration.py (rounded) is a deliberate,
reviewed step; `--out` writes the all-records fit as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cost_models.calibration as cal
from cost_models.estimate import estimate
from models_zoo import read_data_file
from planner.validate import RunRecord, percentile, record_inputs, record_split

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
GENERATIONS = ("ampere", "hopper", "blackwell")
FITTED = [
    (g, f)
    for g in GENERATIONS
    for f in ("gemm_efficiency_bf16", "gemm_efficiency_fp8", "attention_efficiency")
    if (g, f) != ("ampere", "gemm_efficiency_fp8")  # tied to bf16: no fp8 units
]
SHARED_FIELDS = (
    "gemm_half_dim",
    "kernel_overhead_s",
    "grouped_gemm_efficiency",
    "moe_layer_overhead_s",
    "expert_gemm_overhead_s",
)
FITTED += [("*", f) for f in SHARED_FIELDS]
GROUPS = {
    "moe": ("grouped_gemm_efficiency", "moe_layer_overhead_s", "expert_gemm_overhead_s"),
    "overhead": ("kernel_overhead_s",),
    "efficiencies": ("gemm_efficiency_bf16", "gemm_efficiency_fp8", "attention_efficiency"),
}
"""`--only` names: a generation, a field, one of these, or gen:field."""
HUBER_DELTA = math.log(1.10)
MULTIPLIERS = ((0.6, 0.75, 0.85, 0.93, 1.07, 1.15, 1.3, 1.6), (0.9, 0.95, 0.98, 1.02, 1.05, 1.1))
"""Trial steps per round: wide first, then fine (the last tuple repeats for later rounds)."""
MAX_STEPS = 8


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    gpu: str
    moe: bool
    measured: float
    inputs: tuple
    split: tuple[int, ...] | None = None  # the record's own pipeline split (record_split)


def load(path: Path, exclude: set[str]) -> list[Case]:
    """The records as `planner validate` prices them (RunRecord-checked, then record_inputs)."""
    cases = []
    for record in read_data_file(path):
        if record.get("id") in exclude:
            continue
        try:
            checked = RunRecord.model_validate(record)
            inputs = record_inputs(checked.model_dump())
            split = record_split(checked)
        except Exception as err:  # noqa: BLE001 - a record we cannot score is reported, not fatal
            print(f"skipped {record.get('id')}: {err}")
            continue
        cases.append(
            Case(record["id"], record["id"].split("-")[0], record["gpu"],
                 record["model"].get("moe") is not None,
                 float(record["measured_tokens_per_s_per_gpu"]), inputs, split)  # fmt: skip
        )
    return cases


def log_error(case: Case) -> float:
    e = estimate(*case.inputs, layers_per_stage=case.split)
    return math.log(e.tokens_per_s_per_gpu / case.measured)


def _get(gen: str, field: str) -> float:
    return getattr(cal.CALIBRATION["hopper" if gen == "*" else gen], field)


TIES: dict[tuple[str, str], float] = {("ampere", "gemm_efficiency_bf16"): 1.0}
"""fp8 ceilings that move with their generation's bf16 ceiling: value x the factor. Ampere's is
1 (no fp8 units: fp8 runs at the bf16 peak); `--tie-hopper-fp8` adds Hopper's at its measured
Maximum Achievable Matmul FLOPS ratio (hopper_mamf_tie), one free GEMM level instead of two."""


def hopper_mamf_tie() -> float:
    """Hopper's fp8 / bf16 GEMM ceiling ratio the measured MAMF pair implies: (mamf_fp8_fraction x
    fp8 peak) / (mamf_bf16_fraction x bf16 peak) / (fp8 peak / bf16 peak) = mamf_fp8_fraction /
    mamf_bf16_fraction (H100 SXM 1,402.6 / 1,978.9 over 794.5 / 989.4 = 0.883;
    bench/fp8_ratio_check.py)."""
    hopper = cal.CALIBRATION["hopper"]
    assert hopper.mamf_fp8_fraction is not None
    return hopper.mamf_fp8_fraction / hopper.mamf_bf16_fraction


def _put(gen: str, field: str, value: float) -> None:
    fields = {field: value}
    if (gen, field) in TIES:
        fields["gemm_efficiency_fp8"] = value * TIES[(gen, field)]
    for g in GENERATIONS if gen == "*" else [gen]:
        cal.CALIBRATION[g] = dataclasses.replace(cal.CALIBRATION[g], **fields)


def _bounds(gen: str, field: str) -> tuple[float, float]:
    return BOUNDS.get((gen, field), BOUNDS.get(("*", field), (0.0, float("inf"))))


def huber(x: float) -> float:
    a = abs(x)
    return 0.5 * a * a if a <= HUBER_DELTA else HUBER_DELTA * (a - 0.5 * HUBER_DELTA)


def abs_pct(log_errors: list[float]) -> list[float]:
    return sorted(abs(math.expm1(x)) * 100 for x in log_errors)


def objective(log_errors: list[float], kind: str) -> float:
    if kind == "huber":
        return 1e4 * statistics.fmean(huber(x) for x in log_errors)
    errs = abs_pct(log_errors)
    return statistics.median(errs) + 0.5 * percentile(errs, 0.9)


def summary(log_errors: list[float]) -> str:
    """n, median / P90 abs % (validate's percentile), signed median % of a set of errors."""
    if not log_errors:
        return "   0      -      -      -"
    errs = abs_pct(log_errors)
    signed = statistics.median(math.expm1(x) * 100 for x in log_errors)
    med, p90 = statistics.median(errs), percentile(errs, 0.9)
    return f"{len(errs):4d} {med:6.1f} {p90:6.1f} {signed:+6.1f}"


def touched(cases: list[Case], params: list[tuple[str, str]]) -> dict:
    """Per constant, the cases whose price moves when it moves (+-7 %): a trial re-prices only
    those, and a constant that touches no training case is left alone."""
    base = {c.id: log_error(c) for c in cases}
    out = {}
    for gen, field in params:
        start, hits = _get(gen, field), set()
        for mult in (0.93, 1.07):
            _put(gen, field, start * mult)
            hits |= {c.id for c in cases if abs(log_error(c) - base[c.id]) > 1e-12}
        _put(gen, field, start)
        out[(gen, field)] = hits
    return out


def fit(
    cases: list[Case], params: list, touches: dict, rounds: int, kind: str, prior: float = 0.0
) -> dict:
    """Coordinate descent from the current constants on `cases`; returns the fitted values and
    leaves them in cal.CALIBRATION. Per constant and round: every step of the round's
    MULTIPLIERS is tried from the current value and the best taken; while the best is the
    largest or smallest step, the search goes on from there (at most MAX_STEPS times), so a
    constant far from its optimum gets there within the bounds instead of stopping at the
    product of one pass's steps."""
    errs = {c.id: log_error(c) for c in cases}
    start = {p: _get(*p) for p in params}
    best = objective(list(errs.values()), kind) + penalty(start, start, prior)
    for rnd in range(rounds):
        steps = MULTIPLIERS[min(rnd, len(MULTIPLIERS) - 1)]
        for gen, field in params:
            moved = [c for c in cases if c.id in touches[(gen, field)]]
            for _ in range(MAX_STEPS if moved else 0):
                found = _best_step(gen, field, steps, moved, errs, kind, start, prior)
                if found is None or found[0] >= best - 1e-9:
                    break
                best, value, errs, mult = found
                _put(gen, field, value)
                if mult not in (min(steps), max(steps)):
                    break
    return {(g, f): _get(g, f) for g, f in params}


def penalty(values: dict, start: dict, prior: float) -> float:
    """`prior` x the sum of squared moves from the starting (shipped) values, each in units of
    its BOUNDS width: a ridge that keeps a constant where it is unless the records insist
    (0: none)."""
    out = 0.0
    for (gen, field), value in values.items():
        lo, hi = _bounds(gen, field)
        out += ((value - start[(gen, field)]) / (hi - lo)) ** 2
    return prior * out


def _best_step(gen, field, steps, moved, errs, kind, start, prior):
    """(objective, value, errors, step) of the best trial step from the current value, or None
    where every step leaves the bounds; the constant is left at its current value."""
    current, (lo, hi) = _get(gen, field), _bounds(gen, field)
    found = None
    for mult in steps:
        value = current * mult
        if not lo <= value <= hi:
            continue
        if field == "gemm_efficiency_fp8" and value > _get(gen, "gemm_efficiency_bf16"):
            continue
        _put(gen, field, value)
        trial = errs | {c.id: log_error(c) for c in moved}
        values = {p: _get(*p) for p in start}
        score = objective(list(trial.values()), kind) + penalty(values, start, prior)
        if found is None or score < found[0]:
            found = (score, value, trial, mult)
    _put(gen, field, current)
    return found


def select(only: list[str]) -> list[tuple[str, str]]:
    if not only:
        return list(FITTED)
    out = []
    for gen, field in FITTED:
        names = {gen, field, f"{gen}:{field}"} | {k for k, v in GROUPS.items() if field in v}
        if names & set(only):
            out.append((gen, field))
    return out


def restore(snapshot: dict) -> None:
    cal.CALIBRATION.clear()
    cal.CALIBRATION.update(snapshot)


def folds(cases: list[Case], how: str, k: int) -> dict[str, list[Case]]:
    """Held-out folds: one per source family (loso), or k folds of the records in id order,
    record i in fold i mod k (kfold: every GPU and source spread over the folds, so a family
    that is the only one on its GPU, mbridge on Blackwell, is still fitted without the records
    it is scored on)."""
    if how == "loso":
        return {s: [c for c in cases if c.source == s] for s in sorted({c.source for c in cases})}
    ordered = sorted(cases, key=lambda c: c.id)
    return {f"k{i}": ordered[i::k] for i in range(k)}


def guard(cases, params, touches, rounds, kind, snapshot, held, prior=0.0) -> dict[str, float]:
    """Per fold, fit on the other records from the shipped constants and price the fold with the
    result. Returns the out-of-fold log error per case id."""
    oof = {}
    for source, fold in held.items():
        restore(snapshot)
        ids = {c.id for c in fold}
        train = [c for c in cases if c.id not in ids]
        fitted = fit(train, params, touches, rounds, kind, prior)
        oof |= {c.id: log_error(c) for c in fold}
        moved = ", ".join(
            f"{g}.{f} {snapshot['hopper' if g == '*' else g].__getattribute__(f):.4g}->{v:.4g}"
            for (g, f), v in fitted.items()
            if abs(v / getattr(snapshot["hopper" if g == "*" else g], f) - 1) > 1e-9
        )
        print(f"  fold {source}: {moved or 'no change'}", flush=True)
    restore(snapshot)
    return oof


def table(cases: list[Case], columns: dict[str, dict[str, float]], kind: str) -> None:
    """Per group (all, dense, MoE, source family, GPU) n, median, P90, signed per column."""
    head = "".join(f" | {name:>27s}" for name in columns)
    print(f"{'group':24s}{head}")
    print(f"{'':24s}" + " |    n    med    P90    sgn" * len(columns))
    groups = defaultdict(list)
    for c in cases:
        for key in ("all", "MoE" if c.moe else "dense", f"src {c.source}", f"gpu {c.gpu}"):
            groups[key].append(c.id)
    for key in sorted(groups, key=lambda k: (k.split(" ")[0] not in ("all", "dense", "MoE"), k)):
        cells = "".join(f" | {summary([col[i] for i in groups[key]])}" for col in columns.values())
        print(f"{key[:24]:24s}{cells}")
    for name, col in columns.items():
        print(f"objective ({kind}) {name}: {objective(list(col.values()), kind):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=str(Path(__file__).resolve().parents[2] / "shared/data/published_runs.yaml"),
    )
    parser.add_argument("--exclude", nargs="*", default=[])
    parser.add_argument("--only", nargs="*", default=[], help="generations, fields or GROUPS")
    parser.add_argument("--objective", choices=("huber", "legacy"), default="huber")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--guard", choices=("loso", "kfold", "none"), default="loso")
    parser.add_argument("--folds", type=int, default=10, help="k of --guard kfold")
    parser.add_argument("--prior", type=float, default=0.0, help="ridge toward the shipped values")
    parser.add_argument("--out", help="write the all-records fit here (JSON)")
    parser.add_argument(
        "--tie-hopper-fp8",
        action="store_true",
        help="Hopper's fp8 ceiling = its bf16 ceiling x the measured MAMF ratio (what-if; the "
        "'shipped' column then prices the tie at the shipped bf16 ceiling)",
    )
    args = parser.parse_args()
    if args.tie_hopper_fp8:
        TIES[("hopper", "gemm_efficiency_bf16")] = hopper_mamf_tie()
        _put("hopper", "gemm_efficiency_bf16", _get("hopper", "gemm_efficiency_bf16"))
    cases = load(Path(args.data), set(args.exclude))
    params, snapshot = select(args.only), dict(cal.CALIBRATION)
    shipped = {c.id: log_error(c) for c in cases}
    touches = touched(cases, params)
    print(f"{len(cases)} records; fitting {len(params)} constants, objective {args.objective}")
    fitted = fit(cases, params, touches, args.rounds, args.objective, args.prior)
    in_sample = {c.id: log_error(c) for c in cases}
    for (gen, field), value in fitted.items():
        start = getattr(snapshot["hopper" if gen == "*" else gen], field)
        note = "" if touches[(gen, field)] else "  (touches no record)"
        print(f"  {gen:9s} {field:24s} {start:.6g} -> {value:.6g}{note}")
    columns = {"shipped": shipped, "refit in-sample": in_sample}
    if args.guard != "none":
        restore(snapshot)
        held = folds(cases, args.guard, args.folds)
        print(f"{args.guard} folds (each fitted on the records outside it):")
        columns[f"refit out-of-fold ({args.guard})"] = guard(
            cases, params, touches, args.rounds, args.objective, snapshot, held, args.prior
        )
    table(cases, columns, args.objective)
    if args.out:
        out = {f"{g}:{f}": v for (g, f), v in fitted.items()}
        # a tied fp8 ceiling moved with its bf16 one (TIES): written out as the fit left it
        out |= {f"{g}:gemm_efficiency_fp8": v * TIES[(g, f)] for (g, f), v in fitted.items()
                if (g, f) in TIES}  # fmt: skip
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
