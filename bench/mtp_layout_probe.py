"""Megatron-Bridge's DeepSeek-V3 rows priced three ways: as transcribed (since 2026-11-28 with the
multi-token-prediction layer and the pipeline layout their recipe ran, where one matched:
make_mbridge_summary.pipeline_of), without either (the transcription before: no MTP, the
planner's even split), and with the MTP layer on the planner's even split (pipeline.
even_chunk_counts) instead of the recipe's layout. Prints the signed error (predicted / measured
- 1) and the peak memory of each; docs/accuracy.md "DeepSeek-V3 rows and multi-token prediction"
reads it.

    python bench/mtp_layout_probe.py [bench/heldout/mbridge_performance_summary.yaml]
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from cost_models.errors import PlannerError
from cost_models.estimate import estimate
from planner.validate import RunRecord, record_inputs, record_split

ROOT = Path(__file__).resolve().parents[1]


def main(path: str) -> None:
    rows = yaml.safe_load(Path(path).read_text())
    head = f"{'as transcribed':>16s} {'no MTP, even':>16s} {'MTP, even':>16s}"
    print(f"{'record':55s} {'pp x vp':8s} {'layout':7s} {head}")
    for r in rows:
        if not str(r["model"].get("name", "")).startswith("DeepSeek-V3"):
            continue
        try:
            checked = RunRecord.model_validate(r)
            model, cluster, work, lo = record_inputs(checked.model_dump())
        except PlannerError as err:
            print(f"{r['id']:55s} not scored: {err}")
            continue
        measured = r["measured_tokens_per_s_per_gpu"]
        split = record_split(checked)
        cases = (
            (model, split),
            (model.model_copy(update={"mtp_num_layers": 0}), None),
            (model.model_copy(update={"mtp_num_layers": 1}), None),
        )
        cells = []
        for m, s in cases:
            try:
                e = estimate(m, cluster, work, lo, layers_per_stage=s)
            except PlannerError:
                cells.append("not scored")
                continue
            err_pct = 100 * (e.tokens_per_s_per_gpu / measured - 1)
            cells.append(f"{err_pct:+6.1f} % {e.peak_memory_gib:4.0f} G")
        stated = "recipe" if split else "-"
        row = " ".join(f"{c:>16s}" for c in cells)
        print(f"{r['id']:55s} {lo.pp:>2d} x {lo.vp:<3d} {stated:7s} {row}")


if __name__ == "__main__":
    default = ROOT / "bench/heldout/mbridge_performance_summary.yaml"
    main(sys.argv[1] if len(sys.argv) > 1 else str(default))
