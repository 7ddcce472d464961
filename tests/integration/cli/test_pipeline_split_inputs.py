"""Megatron's --account-for-embedding/loss-in-pipeline-split as inputs (issue 32 item 4): estimate and
plan flags, a record's `layout:` keys, the Megatron export, the search's own use of them, and one
line naming the flag (exit 2) for a layout Megatron would refuse or a framework without them."""

from __future__ import annotations

import json

import pytest

from planner import convenience
from planner.cli import main
from planner.validate import validate_record

EMB, LOSS = "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"
EST = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
EST += ["--global-batch", "64", "--seq-len", "4096", "--tp", "2", "--zero", "1"]


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return code, json.loads(cap.out)


def test_estimate_takes_the_flags_and_says_so(capsys) -> None:
    # 32 layers + 2 slots over pp 2: 17 per rank, 16 decoder layers each (the end chunks short).
    code, plain = _json(capsys, [*EST, "--pp", "2", "--dp", "4"])
    code2, flagged = _json(capsys, [*EST, "--pp", "2", "--dp", "4", EMB, LOSS])
    assert code == code2 == 0
    assert plain["layout"]["account_for_loss_in_pipeline_split"] is False
    assert flagged["layout"]["account_for_embedding_in_pipeline_split"] is True
    assert flagged["layout"]["account_for_loss_in_pipeline_split"] is True
    # Same layers per rank as the even split here (16 / 16): the same step.
    assert flagged["step_time_s"] == plain["step_time_s"]


@pytest.mark.parametrize(
    ("extra", "flag", "rule"),
    [
        (["--pp", "4", "--dp", "2", EMB, LOSS], EMB, "num_layers + embedding + loss (32 + 2 = 34) divisible by pp (4)"),
        (["--pp", "2", "--dp", "4", "--vp", "2", LOSS], LOSS, "(32 + 1 = 33) divisible by pp (2)"),
        (["--pp", "2", "--dp", "4", "--vp", "4", EMB, LOSS], EMB, "per pipeline rank (34/2 = 17) divisible by vp (4)"),
    ],
)
def test_what_megatron_refuses_is_one_line_naming_the_flag(capsys, extra, flag, rule) -> None:
    code, out = _json(capsys, [*EST, *extra])
    assert code == 2
    assert out["error"]["field"] == flag and rule in out["error"]["message"]


def test_plan_pins_them_and_deepspeed_refuses_them(capsys) -> None:
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    argv += ["--global-batch", "64", "--seq-len", "4096", "--pp", "2", EMB, LOSS, "--top", "3"]
    code, out = _json(capsys, argv)
    assert code == 0
    for p in out["ranked"]:
        assert p["layout"]["account_for_embedding_in_pipeline_split"] is True
        assert p["layout"]["account_for_loss_in_pipeline_split"] is True
    code, out = _json(capsys, [*argv[:-4], "--framework", "deepspeed", LOSS])
    assert code == 2 and out["error"]["field"] == LOSS
    assert "not a deepspeed split" in out["error"]["message"]


def test_megatron_export_writes_the_flags_not_a_layout_string(capsys) -> None:
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    argv += ["--global-batch", "64", "--seq-len", "4096", "--pp", "2", EMB, LOSS]
    assert main([*argv, "--emit", "megatron"]) == 0
    args = capsys.readouterr().out.split()
    assert EMB in args and LOSS in args
    assert "--pipeline-model-parallel-layout" not in args
    assert "--decoder-first-pipeline-num-layers" not in args


def test_the_search_counts_them_past_num_layers() -> None:
    """Unpinned, the Megatron search offers PP x VP chunks past the layers (405B: 16 x 8 = 128 over
    126, Megatron-Bridge's GB200 recipe) with the embedding and the loss counted, and only there."""
    result = convenience.plan_for(
        "llama3.1-405b", "gb200-nvl72", num_gpus=256, global_batch=1536, seq_len=8192,
        pp=16, tp=4, cp=1, top_k=20, precision="mxfp8",
    )  # fmt: skip
    vps = set()
    for e in result.ranked:
        lo = e.layout
        past = lo.pp * lo.vp > 126
        assert lo.account_for_loss_in_pipeline_split == past, lo.label
        assert lo.account_for_embedding_in_pipeline_split == (lo.pp * lo.vp == 128), lo.label
        vps.add(lo.vp)
    assert 8 in vps


def _record(**layout) -> dict:
    return {
        "id": "t",
        "framework": "megatron",
        "model": {
            "name": "m", "num_layers": 30, "hidden_size": 2048, "ffn_hidden_size": 8192,
            "num_attention_heads": 16, "num_kv_heads": 8, "vocab_size": 32000, "seq_len": 4096,
        },
        "gpu": "h100-sxm-80gb",
        "num_gpus": 32,
        "layout": {"tp": 2, "pp": 4, "dp": 4, "vp": 2, "global_batch_seqs": 64, **layout},
        "measured_tokens_per_s_per_gpu": 1000.0,
    }  # fmt: skip


def test_a_record_states_them_in_its_layout() -> None:
    both = {"account_for_embedding_in_pipeline_split": True, "account_for_loss_in_pipeline_split": True}
    row = validate_record(_record(**both))
    assert row.error is None and row.estimate.layout.account_for_embedding_in_pipeline_split
    assert validate_record(_record(account_for_loss_in_pipeline_split=None)).error is None
    bad = validate_record(_record(account_for_loss_in_pipeline_split="yes"))
    assert bad.estimate is None and "account_for_loss_in_pipeline_split" in bad.error
    wrong = validate_record(_record(account_for_loss_in_pipeline_split=True))  # 31 over 4
    assert "account_for_loss_in_pipeline_split needs num_layers + loss (30 + 1 = 31)" in wrong.error
