"""The plan report through the command line: --html writes one self-contained page, --markdown
prints the Markdown report, an unwritable --html path is exit 2."""

import re

from planner.cli import main

# Everything the page could fetch: scripts, stylesheets, imports, remote URLs.
FETCHES = re.compile(r"https?://|<script|<link|@import|url\(|src=", re.IGNORECASE)


def test_cli_html_writes_one_self_contained_file(tmp_path, capsys):
    out = tmp_path / "plan.html"
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "4"]
    assert main([*base, "--html", str(out)]) == 0
    written = out.read_text()
    assert "Rank map" in written and "Llama 3 8B" in written
    assert FETCHES.search(written) is None
    assert "Rank map" in capsys.readouterr().out  # the terminal report still prints


def test_cli_markdown(capsys):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "4"]
    assert main([*base, "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Placement plan: Llama 3 8B")
    assert "## Rank map" in out and "| rank | node | gpu |" in out


def test_cli_html_unwritable_is_exit_2(capsys, tmp_path):
    base = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "4"]
    assert main([*base, "--html", str(tmp_path / "missing" / "x.html")]) == 2
    assert "--html: cannot write" in capsys.readouterr().err
