"""The MoE routing flags (--moe-capacity-factor, --moe-pad-to-capacity, --moe-force-balance):
priced as compute.moe_routing says, carried to the launchers that run them, refused with the
flag named where a model or framework cannot."""

from __future__ import annotations

import json

import pytest
from test_new_input_edges import EST as DENSE_EST
from test_new_input_edges import _error

from planner.cli import main

MIXTRAL = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "16"]
MIXTRAL += ["--global-batch", "256", "--seq-len", "4096"]
EST = ["estimate", *MIXTRAL, "--tp", "2", "--pp", "2", "--dp", "4", "--ep", "8"]


def _estimate(capsys, extra: list[str]) -> dict:
    assert main([*EST, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_flag_prices_its_routing(capsys) -> None:
    default = _estimate(capsys, [])
    assert default["moe_routing"]["basis"] == "load_balancing"
    cases = {
        ("--moe-force-balance",): ("force_balance", 1.0),
        ("--moe-capacity-factor", "1.0"): ("capacity", 1.0),
        ("--moe-capacity-factor", "1.25", "--moe-pad-to-capacity"): ("padded", 1.25),
        ("--moe-capacity-factor", "2.0"): (
            "load_balancing",
            default["moe_routing"]["busiest_rank_over_mean"],
        ),
    }
    speed = {}
    for flags, (basis, factor) in cases.items():
        e = _estimate(capsys, list(flags))
        assert e["moe_routing"]["basis"] == basis
        assert e["moe_routing"]["busiest_rank_over_mean"] == pytest.approx(factor)
        speed[flags] = e["tokens_per_s_per_gpu"]
    # the busiest rank sets the step: fewer rows on it, a faster step
    assert speed[("--moe-force-balance",)] > default["tokens_per_s_per_gpu"]
    assert (
        speed[("--moe-capacity-factor", "1.25", "--moe-pad-to-capacity")]
        < speed[("--moe-capacity-factor", "1.0")]
    )
    assert speed[("--moe-capacity-factor", "2.0")] == pytest.approx(default["tokens_per_s_per_gpu"])


@pytest.mark.parametrize(
    ("argv", "flag", "rule"),
    [
        ([*EST, "--moe-pad-to-capacity"], "--moe-pad-to-capacity", "needs moe_capacity_factor"),
        (
            [*EST, "--moe-capacity-factor", "1", "--framework", "torchtitan"],
            "--moe-capacity-factor",
            "routes dropless",
        ),
        ([*EST, "--moe-capacity-factor", "0"], "--moe-capacity-factor", "must be positive"),
        (
            [*DENSE_EST, "--moe-force-balance"],
            "--moe-force-balance",
            "needs a mixture-of-experts model",
        ),
        (
            ["plan", *MIXTRAL, "--moe-capacity-factor", "1", "--framework", "torchtitan"],
            "--moe-capacity-factor",
            "routes dropless",
        ),
    ],
)
def test_what_cannot_run_is_refused_naming_the_flag(capsys, argv, flag, rule) -> None:
    error = _error(capsys, argv)  # exit 2, one stderr line, the --json error object
    assert error["field"] == flag and rule in error["message"]


def test_the_launchers_run_the_routing_the_plan_was_priced_at(capsys, tmp_path) -> None:
    out = tmp_path / "mixtral"
    argv = ["plan", *MIXTRAL, "--framework", "megatron", "--moe-capacity-factor", "1.0"]
    assert main([*argv, "--moe-pad-to-capacity", "--moe-force-balance", "--out-dir", str(out)]) == 0
    capsys.readouterr()
    args = (out / "megatron_args.txt").read_text().split()
    assert args[args.index("--moe-expert-capacity-factor") + 1] == "1.0"
    assert "--moe-pad-expert-input-to-capacity" in args
    assert "--moe-router-force-load-balancing" in args
    plan = json.loads((out / "plan.json").read_text())
    assert plan["inputs"]["workload"]["moe_capacity_factor"] == 1.0
    assert plan["best"]["estimate"]["moe_routing"]["basis"] == "padded"

    qwen = tmp_path / "qwen"
    argv = ["plan", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "64", "--seq-len", "4096", "--framework", "torchtitan"]
    assert main([*argv, "--moe-force-balance", "--out-dir", str(qwen)]) == 0
    capsys.readouterr()
    assert "--debug.moe_force_load_balance" in (qwen / "torchtitan_args.txt").read_text().split()
    assert main([*argv, "--out-dir", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    plain = (tmp_path / "plain" / "torchtitan_args.txt").read_text()
    assert "moe_force_load_balance" not in plain
