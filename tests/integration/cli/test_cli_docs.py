"""docs/cli.md matches the parser (issue 20): every flag of every command is documented in that
command's section, and the top-level flags in the introduction.

New commands or flags fail here with the list of what docs/cli.md lacks; document them in the
command's `## name` section (a table row or the usage block both count)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from planner.cli import build_parser

DOCS = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text()


def sections() -> dict[str, str]:
    """`## name` (or `## a, b`: each name) -> its text up to the next `## ` heading; "" -> the
    text before the first."""
    parts = re.split(r"^## (.+?)\s*$", DOCS, flags=re.MULTILINE)
    out = {"": parts[0]}
    for heading, text in zip(parts[1::2], parts[2::2], strict=True):
        for name in heading.split(","):
            out[name.strip()] = text
    return out


def documented(flag: str, text: str) -> bool:
    return re.search(re.escape(flag) + r"(?![\w-])", text) is not None


def parser_flags() -> dict[str, list[str]]:
    """Command -> its long flags ("" for the flags before the command), --help excluded."""
    parser = build_parser()
    out: dict[str, list[str]] = {"": []}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = [
                    o for a in sub._actions for o in a.option_strings
                    if o.startswith("--") and o != "--help"
                ]  # fmt: skip
        else:
            out[""] += [o for o in action.option_strings if o.startswith("--") and o != "--help"]
    return out


def test_every_flag_of_every_command_is_documented():
    docs = sections()
    intro = docs[""]
    missing = []
    for command, flags in parser_flags().items():
        if command and command not in docs:
            missing.append(f"{command}: no '## {command}' section")
            continue
        text = docs[command] if command else intro
        # Flags shared by plan/estimate/whatif are documented once in the introduction.
        missing += [f"{command or 'planner'} {f}" for f in flags
                    if not documented(f, text) and not documented(f, intro)]  # fmt: skip
    assert not missing, "docs/cli.md does not document: " + ", ".join(missing)


def test_docs_count_the_commands():
    commands = [c for c in parser_flags() if c]
    words = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    assert f"has {words.get(len(commands), len(commands))} commands" in DOCS
    for c in commands:
        assert f"`{c}`" in sections()[""], c
