"""Userbuffers TP overlap by configuration and GPU on the held-out Megatron-Bridge rows (an
analysis, docs/accuracy.md "Userbuffers TP overlap by configuration and GPU"): every row that
states a `userbuffers_*` configuration, priced on the presets as transcribed, with
`tp_overlap: te_default` instead, and with the overlap off; the median of measured step / priced
step - 1 per (configuration, GPU). Evaluation only: nothing is fitted.

    python bench/tp_overlap_configs.py [RUNS.yaml]
"""

from __future__ import annotations

import copy
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_gap import RUNS, priced_rows

VARIANTS = ("named", "te_default", "no overlap")


def variant(run: dict, name: str) -> dict:
    """The record as transcribed ("named"), with TE's default configuration, or without overlap."""
    out = copy.deepcopy(run)
    if name == "te_default":
        out["settings"]["tp_overlap"] = "te_default"
    elif name == "no overlap":
        out["settings"]["tp_comm_overlap"] = False
        out["settings"].pop("tp_overlap")
    return out


def table(runs: list[dict]) -> dict[tuple[str, str], list[list[float]]]:
    """(configuration, GPU) -> per row, the signed step error (%) of each VARIANTS pricing."""
    out: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    for run in runs:
        name = (run.get("settings") or {}).get("tp_overlap", "")
        if not name.startswith("userbuffers_"):
            continue
        errs = []
        for v in VARIANTS:
            ((_, _, _, _, _, priced_s, measured_s, _),) = priced_rows([variant(run, v)], [run["id"]])
            errs.append(100 * (measured_s / priced_s - 1))
        out[(name, run["gpu"])].append(errs)
    return out


def main(argv: list[str]) -> int:
    runs = yaml.safe_load(Path(argv[1] if len(argv) > 1 else RUNS).read_text())
    print("| configuration | GPU | rows | " + " | ".join(VARIANTS) + " |")
    print("|---|---|---:|" + "---:|" * len(VARIANTS))
    for (name, gpu), rows in sorted(table(runs).items()):
        meds = [statistics.median(r[i] for r in rows) for i in range(len(VARIANTS))]
        print(f"| `{name}` | {gpu} | {len(rows)} | " + " | ".join(f"{m:+.1f}" for m in meds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
