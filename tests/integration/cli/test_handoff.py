"""`plan ... --out-dir` without an allocation (issue 26): every hand-off file, arguments-only
argument files, a launch.sh bash accepts, and `planner emit --from plan.json` re-emitting the saved
plan exactly as `plan --emit` printed it."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from planner.cli import main

BASE = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "2"]


def test_out_dir_without_allocation_writes_the_handoff(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*BASE, "--out-dir", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout stays pure JSON
    names = {p.name for p in out.iterdir()}
    assert {"plan.json", "ranks.json", "megatron_args.txt", "megatron_env.sh", "launch.sh"} <= names
    lines = (out / "megatron_args.txt").read_text().splitlines()
    assert all(line.startswith("--") for line in lines)  # no comments, one flag per line
    args = (out / "megatron_args.txt").read_text().split()
    assert args[args.index("--tensor-model-parallel-size") + 1] == "2"
    assert "--normalization" in args and "--rotary-base" in args
    assert subprocess.run(["bash", "-n", str(out / "launch.sh")]).returncode == 0
    if "ds_config.json" in names:
        json.loads((out / "ds_config.json").read_text())
    for line in captured.err.splitlines():
        assert line.startswith(("wrote ", "not written: "))
    # Re-emit from the saved plan without searching: the same text as plan --emit.
    assert main([*BASE, "--emit", "megatron"]) == 0
    direct = capsys.readouterr().out
    assert main(["emit", "--from", str(out / "plan.json"), "--emit", "megatron"]) == 0
    assert capsys.readouterr().out == direct
    assert shlex.split(direct.splitlines()[1]) == args


def test_launch_defaults_to_the_framework_the_plan_was_searched_for(tmp_path, capsys):
    """A torchtitan plan whose layout Megatron can also run: launch.sh starts torchtitan unless
    told otherwise, and the Megatron case says its figures are not Megatron's."""
    out = tmp_path / "run"
    argv = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
            "--framework", "torchtitan", "--out-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    script = (out / "launch.sh").read_text()
    assert {"torchtitan_args.txt", "megatron_args.txt"} <= {p.name for p in out.iterdir()}
    assert ': "${FRAMEWORK:=torchtitan}"' in script
    assert script.index("  torchtitan)") < script.index("  megatron)")
    megatron_case = script[script.index("  megatron)") :]
    assert "this plan was searched for torchtitan" in megatron_case
    assert "this plan was searched for" not in script[: script.index("  megatron)")]
    assert subprocess.run(["bash", "-n", str(out / "launch.sh")]).returncode == 0


def test_emit_deepspeed_stdout_is_json_and_one_torchtitan_version(capsys):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    base += ["--framework", "deepspeed"]
    assert main([*base, "--emit", "deepspeed"]) == 0
    captured = capsys.readouterr()
    assert "train_batch_size" in json.loads(captured.out)
    assert "--tensor-model-parallel-size" in captured.err
    tt = ["plan", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    tt += ["--framework", "torchtitan", "--emit", "torchtitan"]
    assert main(tt) == 0
    text = capsys.readouterr().out
    assert text.count("torchtitan.train arguments") == 1 and "0.3.0" in text
    assert main([*tt, "--framework-version", "9.9"]) == 2
    assert "--framework-version" in capsys.readouterr().err


def test_emit_from_a_file_without_a_saved_plan_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "plan.json"
    bad.write_text("{}")
    assert main(["emit", "--from", str(bad), "--emit", "megatron"]) == 2
    assert "plan_result" in capsys.readouterr().err


def test_torchtitan_refuses_a_model_no_recipe_builds(capsys):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16"]
    assert main([*base, "--framework", "torchtitan", "--emit", "torchtitan"]) == 2
    err = capsys.readouterr().err
    assert "no torchtitan 0.3.0 recipe builds 'Llama 3 8B'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("[" * 3000, "nested more than 64 levels"),  # was a RecursionError (issue 28 fuzz)
        ("{not json", "malformed JSON"),
        (None, "plan.json: file not found"),
    ],
)
def test_emit_from_a_broken_file_is_one_line(tmp_path, capsys, raw, words):
    bad = tmp_path / "plan.json"
    if raw is not None:
        bad.write_text(raw)
    assert main(["emit", "--from", str(bad), "--emit", "megatron"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.count("--from") == 1 and words in err, err
