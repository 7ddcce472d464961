"""The CLI against ../shared/CONTRACT.md, read from the file itself: every flag a command's usage
names exists on that command, with every value it lists; and `--json` errors name the field
("field": the flag or file, when known) for the flag-level errors a user meets first."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from planner.cli import build_parser, main

CONTRACT = Path(__file__).resolve().parents[4] / "shared" / "CONTRACT.md"
COMMANDS = ("plan", "estimate", "validate", "presets", "calibrate", "emit", "design", "bill")


def _usages() -> list[tuple[str, str]]:
    """(command, usage text) for each `planner CMD ...` in the contract: the fenced usage blocks
    (continuation lines belong to the command above) and inline spans (`plan ... --goodput`)."""
    text = CONTRACT.read_text()
    out: list[tuple[str, str]] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"planner (\w+)\s+(.*)", line) if fenced else None
        if m:
            out.append((m.group(1), m.group(2)))
        elif fenced and out and line.startswith(" ") and "--" in line:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
    for span in re.findall(r"`([^`\n]+)`", text):
        m = re.match(rf"(?:planner )?({'|'.join(COMMANDS)}) (.*--.*)", span)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def _options(command: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a for a in sub.choices[command]._actions for o in a.option_strings}


def _named() -> list[tuple[str, str, tuple[str, ...]]]:
    """(command, flag, the values the contract lists for it: `--zero 0|1|2|3`, or none)."""
    seen: dict[tuple[str, str], tuple[str, ...]] = {}
    for command, usage in _usages():
        for flag, value in re.findall(r"(--[\w-]+)(?: ([\w.|]+\|[\w.|]+))?", usage):
            values = tuple(value.split("|")) if value else ()
            seen[command, flag] = tuple(sorted({*seen.get((command, flag), ()), *values}))
    return sorted((c, f, v) for (c, f), v in seen.items())


def test_the_contract_is_read_and_names_the_commands():
    named = _named()
    assert {c for c, _, _ in named} == set(COMMANDS)
    assert ("estimate", "--zero", ("0", "1", "2", "3")) in named
    assert ("emit", "--emit", ("deepspeed", "megatron", "mesh", "ranks", "torchtitan")) in named
    assert ("plan", "--goodput", ()) in named and ("plan", "--out-dir", ()) in named
    assert len(named) >= 60


@pytest.mark.parametrize(("command", "flag", "values"), _named())
def test_every_flag_the_contract_names_exists_with_its_values(command, flag, values):
    options = _options(command)
    assert flag in options, f"planner {command} lacks {flag} (CONTRACT.md)"
    choices = options[flag].choices
    if values and choices is not None:
        assert set(values) <= {str(c) for c in choices}, f"{command} {flag}: {choices}"
    elif values:  # a free value: each listed one must parse
        for value in values:
            assert options[flag].type is None or options[flag].type(value) is not None


def _error(argv: list[str], capsys) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)["error"]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["plan", "--model", "nope", "--cluster", "dgx-h100"], "--model"),
        (["plan", "--model", "llama3-8b", "--cluster", "nope"], "--cluster"),
        (["bill", "--cluster", "nope", "--gpus", "8"], "--cluster"),
        (["plan", "--model", "llama3-8b", "--cluster", "dgx-a100", "--precision", "fp8"],
         "--precision"),
        (["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "1", "--pp", "1",
          "--dp", "8"], "--global-batch"),
        (["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--topology",
          "/nonexistent/topology.conf", "--nodelist", "gpu[1-2]"], "--topology"),
    ],
    ids=["model", "cluster", "bill-cluster", "precision", "required", "topology"],
)  # fmt: skip
def test_a_flag_level_error_names_its_flag_as_the_field(argv, field, capsys):
    # CONTRACT.md "Errors with --json": "field": "<file:line or flag, when known>". These
    # messages name a flag's value without starting with the flag, so the field was null.
    code, error = _error(argv, capsys)
    assert (code, error["exit_code"], error["field"]) == (2, 2, field)


def test_a_missing_topology_file_says_file_not_found(capsys):
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100"]
    argv += ["--topology", "/nonexistent/topology.conf", "--nodelist", "gpu[1-2]"]
    _, error = _error(argv, capsys)
    assert error["message"] == "--topology: /nonexistent/topology.conf: file not found"


def test_the_contract_s_prose_only_options_parse():
    # Named in prose, not in a usage line: `--objective goodput` (Goodput) and the kinds of
    # `planner presets [models|gpus|clusters]`.
    parser = build_parser()
    args = parser.parse_args(["plan", "--model", "m", "--cluster", "c", "--objective", "goodput"])
    assert args.objective == "goodput"
    for kind in ("models", "gpus", "clusters"):
        assert parser.parse_args(["presets", kind, "--json"]).kind == kind
