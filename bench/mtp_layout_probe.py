"""Megatron-Bridge's DeepSeek-V3 rows priced three ways: as transcribed (no MTP stated), with
their multi-token-prediction layer on the planner's even split (pipeline.even_chunk_counts), and
with it on the recipes' own pipeline layout (set_deepseek_v3_pipeline_model_parallel_layout,
src/megatron/bridge/recipes/deepseek/deepseek_v3.py at 067f987df; the same map at fa0315ae2,
5776a6d90 and 8f341b04f). Prints the signed error (predicted / measured - 1) and the peak memory
of each; docs/accuracy.md "DeepSeek-V3 rows and multi-token prediction" reads it.

    python bench/mtp_layout_probe.py [bench/heldout/mbridge_performance_summary.yaml]
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from cost_models.errors import PlannerError
from cost_models.estimate import estimate
from planner.validate import RunRecord, record_inputs

ROOT = Path(__file__).resolve().parents[1]
# (pp, vp) -> decoder layers per chunk, model order: _get_deepseek_v3_pipeline_layout's map with
# the MTP layer and the loss in the last chunk.
RECIPE_LAYOUT = {
    (4, 1): (16, 16, 16, 13),
    (8, 1): (8,) * 7 + (5,),
    (4, 2): (8,) * 7 + (5,),
    (16, 1): (4,) * 15 + (1,),
    (8, 2): (4,) * 15 + (1,),
    (4, 4): (4,) * 15 + (1,),
}


def main(path: str) -> None:
    rows = yaml.safe_load(Path(path).read_text())
    head = f"{'as stated':>16s} {'MTP, even':>16s} {'MTP, recipe':>16s}"
    print(f"{'record':55s} {'pp x vp':8s} {head}")
    for r in rows:
        if not str(r["model"].get("name", "")).startswith("DeepSeek-V3"):
            continue
        try:
            model, cluster, work, lo = record_inputs(RunRecord.model_validate(r).model_dump())
        except PlannerError as err:
            print(f"{r['id']:55s} not scored: {err}")
            continue
        measured = r["measured_tokens_per_s_per_gpu"]
        mtp = model.model_copy(update={"mtp_num_layers": 1})
        split = RECIPE_LAYOUT.get((lo.pp, lo.vp))
        cells = []
        for m, s in ((model, None), (mtp, None), (mtp, split)):
            if len(cells) == 2 and s is None:
                cells.append("- (no map entry)")
                continue
            try:
                e = estimate(m, cluster, work, lo, layers_per_stage=s)
            except PlannerError as err:
                cells.append("not scored")
                continue
            err_pct = 100 * (e.tokens_per_s_per_gpu / measured - 1)
            cells.append(f"{err_pct:+6.1f} % {e.peak_memory_gib:4.0f} G")
        row = " ".join(f"{c:>16s}" for c in cells)
        print(f"{r['id']:55s} {lo.pp:>2d} x {lo.vp:<3d} {row}")


if __name__ == "__main__":
    default = ROOT / "bench/heldout/mbridge_performance_summary.yaml"
    main(sys.argv[1] if len(sys.argv) > 1 else str(default))
