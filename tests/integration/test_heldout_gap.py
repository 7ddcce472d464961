"""bench/heldout_gap.py: the per-token gap is (measured - priced step) / (tokens x layers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_gap_by_hand() -> None:
    spec = importlib.util.spec_from_file_location("heldout_gap_t", BENCH / "heldout_gap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = yaml.safe_load((BENCH / "heldout" / "mbridge_performance_summary.yaml").read_text())
    ((rid, priced, measured, gap),) = module.gap_rows(runs, ["26.04-gb200-gpt-oss"])
    run = next(r for r in runs if r["id"] == rid)
    tokens = run["layout"]["global_batch_seqs"] * run["model"]["seq_len"] / run["num_gpus"]
    assert abs(measured - tokens / run["measured_tokens_per_s_per_gpu"]) < 1e-9
    want = (measured - priced) / (tokens * run["model"]["num_layers"] / run["layout"]["pp"]) * 1e6
    assert abs(gap - want) < 1e-9 and gap > 0.3
