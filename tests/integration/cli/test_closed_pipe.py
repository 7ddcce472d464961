"""Output piped into a reader that stops early (`planner presets | head`) ends like any Unix
filter's: exit 141 (128 + SIGPIPE, what a shell reports for `yes | head`), nothing on stderr
(no traceback, no Python "Exception ignored" line). Real processes and real OS pipes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import EXIT_STDOUT_CLOSED

ROOT = Path(__file__).resolve().parents[3]
RUNS = str(ROOT.parent / "shared" / "data" / "published_runs.yaml")
SMALL = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "128"]


def _closed_reader(argv: list[str]) -> tuple[int, str]:
    """Run `planner ARGV` with stdout a pipe whose only reader is closed before the command has
    written anything (it takes ~1 s to import): its first write meets EPIPE, every time."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize(
    "argv",
    [
        ["presets"],
        ["validate", "--data", RUNS, "--markdown"],
        ["plan", *SMALL, "--json"],
        ["whatif", *SMALL, "--vary", "nic-gbps", "--values", "200,800"],
    ],
    ids=["presets", "validate-markdown", "plan-json", "whatif"],
)
def test_a_closed_pipe_ends_quietly_with_141(argv):
    code, err = _closed_reader(argv)
    assert (code, err) == (EXIT_STDOUT_CLOSED, "")


def test_a_bad_input_keeps_exit_2_and_its_line_when_nobody_reads_the_json():
    code, err = _closed_reader(["plan", "--model", "nope", "--cluster", "dgx-h100", "--json"])
    assert code == 2
    assert err.startswith("error: unknown model preset 'nope'")
    assert "Traceback" not in err and "Exception ignored" not in err


def test_presets_into_head_in_a_shell():
    # The user's own line. Whether `planner` still had output to write when `head` left depends
    # on timing (all of it may fit in the pipe first: exit 0); the status is 141 otherwise, and
    # stderr stays empty either way. Before the fix it was exit 1 (rich's SystemExit(1)).
    script = f'"{sys.executable}" -m planner presets | head -n 1; echo "status=${{PIPESTATUS[0]}}"'
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    first, status = proc.stdout.splitlines()
    assert first.startswith("models")
    assert status in (f"status={EXIT_STDOUT_CLOSED}", "status=0")
    assert proc.stderr == ""


def test_stderr_into_the_same_closed_pipe_ends_with_141():
    # `planner plan --model nope ... 2>&1 | true`: the error line itself meets the closed pipe;
    # rich's SystemExit(1) would have read as "no feasible plan".
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", "plan", "--model", "nope", "--cluster", "dgx-h100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    assert proc.wait(timeout=120) == EXIT_STDOUT_CLOSED
