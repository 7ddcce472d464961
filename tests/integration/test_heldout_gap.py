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


def test_implied_attention_speed_by_hand() -> None:
    """--attention: implied speed = priced speed x priced / implied attention seconds, where the
    attention-free step is the same record priced with the attention core free."""
    spec = importlib.util.spec_from_file_location("heldout_gap_a", BENCH / "heldout_gap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = yaml.safe_load((BENCH / "heldout" / "foundry_performance_summary.yaml").read_text())
    ((_rid, priced, implied, tflops, implied_tflops),) = module.attention_rows(
        runs, ["foundry-125m-a100-80gb", "seq65536"]
    )
    assert abs(tflops - 97.0) < 1e-9  # flash-attn 1.x on A100, head dim 64, held at its 16K bar
    # 12 layers x 2 micro-batches (16 sequences on 8 GPUs, no recompute) x 3.5 forwards of the
    # causal core, 2 x 65,536 x 32,768 keys x 12 heads x (64 + 64), at 97 TFLOP/s
    flops = 2 * 65536 * 32768 * 12 * 128
    assert abs(priced / (12 * 2 * 3.5 * flops / 97e12) - 1) < 1e-5
    assert implied > 0 and abs(implied_tflops - tflops * priced / implied) < 1e-9


def test_tp_overlap_configs_variants_by_hand() -> None:
    """bench/tp_overlap_configs.py: the three pricings differ only in the TP-overlap settings, and
    each (configuration, GPU) cell collects the rows that state it."""
    import sys

    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("tp_overlap_configs_t", BENCH / "tp_overlap_configs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = yaml.safe_load((BENCH / "heldout" / "mbridge_performance_summary.yaml").read_text())
    run = next(r for r in runs if r["id"] == "mbridge-26.04.01-h100-llama3.1-405b-fp8")
    named, te, off = (module.variant(run, v) for v in module.VARIANTS)
    assert named == run and te["settings"]["tp_overlap"] == "te_default"
    assert off["settings"]["tp_comm_overlap"] is False and "tp_overlap" not in off["settings"]
    assert {k: v for k, v in te.items() if k != "settings"} == {k: v for k, v in run.items() if k != "settings"}
    cells = module.table([run])
    ((key, rows),) = cells.items()
    assert key == ("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "h100-sxm-80gb")
    assert len(rows) == 1 and rows[0][0] > rows[0][2]  # the named overlap hides TP time here
