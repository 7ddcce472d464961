"""The README's commands and library example stay true."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_opens_with_install_and_test_commands():
    commands = [line for line in README.splitlines() if line.startswith("pip install")]
    assert commands[0].startswith("pip install . && planner plan --model llama3-70b")
    assert commands[1] == "pip install '.[test]' && python -m pytest -q"


def test_readme_python_example_runs(capsys):
    block = re.search(r"```python\n(.*?)```", README, re.DOTALL).group(1)
    exec(compile(block, "README.md", "exec"), {})  # noqa: S102 -- running the README is the test
    assert "tp=" in capsys.readouterr().out
