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


def test_readme_estimate_agrees_with_plan_for_the_same_layout():
    """Issue 20: `estimate` takes the defaults `plan` searches under (sequence parallel whenever
    TP > 1, the same memory headroom), so the README's example layout gets the plan's numbers."""
    import planner

    best = planner.plan("llama3-70b", "dgx-h100", num_gpus=64, global_batch=128).best
    example = re.search(r"planner\.estimate\(.*?\{(.*?)\}", README, re.DOTALL).group(1)
    layout = {k: int(v) for k, v in re.findall(r'"(\w+)": (\d+)', example)}
    assert layout == {a: getattr(best.layout, a) for a in layout}  # the plan's own layout
    one = planner.estimate("llama3-70b", "dgx-h100", layout, num_gpus=64, global_batch=128)
    assert one.step_time_s == best.step_time_s
    assert one.peak_memory_gib == best.peak_memory_gib
    assert one.fits_in_memory and best.fits_in_memory
    assert one.usable_memory_gib == best.usable_memory_gib == 72.0
