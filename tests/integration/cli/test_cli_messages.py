"""Messages a user reads (issue 20): inputs checked against the hardware, reasons with their
numbers, advice that offers only what is left to try, --version, bare `planner`, and the same
defaults for estimate as for plan."""

from __future__ import annotations

import io
import json

import factories as f
import pytest
from rich.console import Console
from snapshot import assert_readable, check_snapshot

from cost_models.specs import Layout
from planner import DISTRIBUTION, __version__, api, report
from planner.cli import main
from planner.search.exhaustive import oom_advice
from planner.types import SearchSpace


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_fp8_on_a100_is_bad_input(command, capsys):
    argv = [command, "--model", "llama3-8b", "--cluster", "dgx-a100", "--gpus", "8"]
    argv += ["--global-batch", "16", "--precision", "fp8"]
    if command == "estimate":
        argv += ["--tp", "8", "--pp", "1", "--dp", "1"]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert "precision: fp8 needs FP8 tensor cores, which NVIDIA A100" in err


@pytest.mark.parametrize("precision", ["mxfp8", "nvfp4"])
def test_block_scaled_precisions_on_hopper_are_one_line(precision, capsys):
    argv = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "16", "--precision", precision, "--tp", "8", "--pp", "1", "--dp", "1"]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"precision: {precision} needs" in err and "hopper" in err


def test_version_and_bare_planner(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"planner {__version__} ({DISTRIBUTION})"
    code, out, _ = run([], capsys)
    assert code == 0 and out.startswith("usage: planner") and "whatif" in out


def test_rejection_reasons_carry_their_numbers(capsys):
    argv = ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64"]
    _, out, _ = run([*argv, "--global-batch", "128", "--json"], capsys)
    reasons = json.loads(out)["rejections"]
    assert reasons and not any("(N)" in r for r in reasons)
    assert any(r.startswith("global batch (128) must be a multiple of") for r in reasons)


def test_oom_advice_offers_only_what_is_left():
    space = SearchSpace(micro_batches=(1,), recompute=("none",), zero_stages=(1,), tp=8)
    one = Layout(tp=8, micro_batch=1)
    advice = oom_advice(space, one, peak_gib=200.0, hbm_gib=80.0)
    assert "micro-batch" not in advice  # already 1
    assert "add full to --recompute" in advice and "add 3 to --zero" in advice
    assert "--tp 8" in advice and "headroom" not in advice  # 200 GiB > HBM: headroom cannot help
    two = Layout(tp=8, micro_batch=2)
    assert "a micro-batch below 2" in oom_advice(SearchSpace(), two, peak_gib=75.0, hbm_gib=80.0)


def test_estimate_defaults_match_plan(capsys):
    argv = ["estimate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64"]
    argv += ["--global-batch", "128", "--tp", "4", "--pp", "4", "--dp", "2", "--cp", "2"]
    code, out, _ = run([*argv, "--vp", "5", "--json"], capsys)
    e = json.loads(out)
    assert e["layout"]["sequence_parallel"] is True  # TP > 1
    assert (e["hbm_gib"], e["usable_memory_gib"], e["fits_in_memory"]) == (80, 72.0, True)
    code, out, _ = run([*argv, "--vp", "5", "--json", "--no-sequence-parallel"], capsys)
    assert json.loads(out)["layout"]["sequence_parallel"] is False
    code, out, _ = run([*argv, "--vp", "5", "--json", "--memory-headroom", "0"], capsys)
    assert json.loads(out)["usable_memory_gib"] == 80
    code, _, err = run([*argv, "--memory-headroom", "1.5"], capsys)
    assert code == 2 and "--memory-headroom" in err and "[0, 1)" in err


def test_estimate_prices_a_stated_hsdp_layout(capsys):
    """`estimate --dp-shard N` prices torchtitan's HSDP (with EP the experts' own mesh); a shard
    size that does not divide dp, or whose experts' mesh is not whole, is one line, exit 2."""
    argv = ["estimate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--gpus", "64"]
    argv += ["--global-batch", "256", "--tp", "1", "--pp", "1", "--dp", "64", "--ep", "8"]
    argv += ["--zero", "3", "--framework", "torchtitan", "--json"]
    code, out, _ = run([*argv, "--dp-shard", "16"], capsys)
    hsdp = json.loads(out)
    code, out, _ = run(argv, capsys)
    full = json.loads(out)
    assert code == 0 and hsdp["layout"]["dp_shard"] == 16 and full["layout"]["dp_shard"] is None
    assert hsdp["peak_memory_gib"] > full["peak_memory_gib"]  # states replicated 4x
    for shard, rule in (("12", "must divide dp"), ("4", "must be a multiple of ep*etp")):
        code, out, _ = run([*argv, "--dp-shard", shard], capsys)
        assert code == 2 and rule in json.loads(out)["error"]["message"]


@pytest.mark.parametrize("width", [80, 120])
def test_estimate_snapshot(width):
    model, cluster, work = f.dense_model(), f.cluster(32), f.workload(global_batch=64)
    lo = api.layout_with_defaults({"tp": 4, "pp": 2, "dp": 4, "vp": 4, "micro_batch": 2})
    e = f.frozen_estimate("estimate_view", model, cluster, lo, work)
    buf = io.StringIO()
    Console(width=width, color_system=None, file=buf).print(
        report.render_estimate(e, cluster, work, model)
    )
    text = buf.getvalue()
    check_snapshot(f"estimate_{width}.txt", text)
    assert_readable(text, width)
    assert "usable = 80 GiB HBM - 10% headroom" in " ".join(text.split())


def test_cli_oom_advice_at_micro_batch_one(capsys):
    argv = ["plan", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "8"]
    argv += ["--global-batch", "8", "--micro-batches", "1", "--recompute", "none", "--zero", "1"]
    code, out, err = run(argv, capsys)
    assert code == 1 and out == ""
    err = " ".join(err.split())
    assert "micro_batch=1" in err and "micro-batch below" not in err
    assert "add full to --recompute" in err and "add 3 to --zero" in err
