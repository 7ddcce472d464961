"""The README's commands and library example stay true."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_readme_opens_with_install_and_test_commands():
    commands = [line for line in README.splitlines() if line.startswith("pip install")]
    assert commands[0].startswith("pip install . && planner plan --model llama3-70b")
    assert commands[1] == "pip install '.[test]' && python -m pytest -q -n 2"


def test_readme_python_example_runs(capsys):
    block = re.search(r"```python\n(.*?)```", README, re.DOTALL).group(1)
    exec(compile(block, "README.md", "exec"), {})  # noqa: S102 -- running the README is the test
    # str(layout) is its short label (Layout.label, issue 28), not a pydantic repr
    assert re.match(r"TP\d+ PP\d+ DP\d+ ", capsys.readouterr().out)


def test_readme_estimate_agrees_with_plan_for_the_same_layout():
    """Issue 20: `estimate` takes the defaults `plan` searches under (sequence parallel whenever
    TP > 1, the same memory headroom), so the README's example layout gets the plan's numbers."""
    import planner

    best = planner.plan_for("llama3-70b", "dgx-h100", num_gpus=64, global_batch=128).best
    example = re.search(r"planner\.estimate_for\(.*?\{(.*?)\}", README, re.DOTALL).group(1)
    layout = {k: int(v) for k, v in re.findall(r'"(\w+)": (\d+)', example)}
    assert layout == {a: getattr(best.layout, a) for a in layout}  # the plan's own layout
    one = planner.estimate_for("llama3-70b", "dgx-h100", layout, num_gpus=64, global_batch=128)
    assert one.step_time_s == best.step_time_s
    assert one.peak_memory_gib == best.peak_memory_gib
    assert one.fits_in_memory and best.fits_in_memory
    assert one.usable_memory_gib == best.usable_memory_gib == 72.0


def test_readme_800g_answer_matches_its_command(capsys):
    """The 800G question's figures are what its own command prints (issue 16 point 7)."""
    import json

    from planner import cli

    para = re.search(r"\*\*Are 800G NICs worth it.*?\n\n", README, re.DOTALL).group(0)
    command = re.search(r"`(planner whatif .*?)`", para, re.DOTALL).group(1).split()
    assert cli.main(command[1:]) == 0
    out = json.loads(capsys.readouterr().out)
    p400, p800 = out["points"]
    text = " ".join(para.split())
    for point in (p400, p800):  # the plans it names are the ones the command finds
        lo = point["plan"]["layout"]
        degrees = [(a, lo[a]) for a in ("tp", "pp", "dp", "cp", "vp")]
        named = [f"{a.upper()}{n}" for a, n in degrees if n > 1 or a in ("tp", "dp")]
        assert " ".join([*named, f"ZeRO-{lo['zero_stage']}"]) in text
    assert f"at {p400['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU" in text
    change = 100 * p800["change_vs_baseline"]
    assert f"at {p800['tokens_per_s_per_gpu']:,.0f} (+{change:.1f} %" in text
    assert f"from ${p400['network_capex_usd_per_gpu']:,.0f} to " in text
    assert f"to ${p800['network_capex_usd_per_gpu']:,.0f}" in text
    watts = [p["network_power_w_per_gpu"] for p in (p400, p800)]
    assert f"from {watts[0]:.0f} W to {watts[1]:.0f} W" in text
    cost = [p["cost_per_m_tokens"] for p in (p400, p800)]
    assert f"${cost[0]:.3f} at 400G and ${cost[1]:.3f} at 800G" in text


def test_readme_goodput_answer_matches_its_command(capsys):
    """The goodput question's figures are what its own command prints (issue 30)."""
    import json

    from planner.cli import main

    text = " ".join(README.split())
    cmd = re.search(r"`(planner estimate --model llama3\.1-405b [^`]*--goodput --json)`", text)
    assert main(cmd.group(1).split()[1:]) == 0
    out = json.loads(capsys.readouterr().out)
    g = out["goodput"]
    answer = text[cmd.end() : text.index("docs/goodput.md", cmd.end())]
    figures = [float(x) for x in re.findall(r"(\d+\.\d+)", answer)]
    assert figures == [
        round(g["interruptions_per_day"], 2),
        round(g["checkpoint_write_s"], 2),
        round(g["checkpoint_interval_s"], 1),
        round(g["restart_s"], 1),
        round(g["ettr"], 3),
        round(out["tokens_per_s_per_gpu"], 1),
        round(g["goodput_tokens_per_s_per_gpu"], 1),
    ]


def test_readme_placement_example_figures_match_its_command(capsys):
    """The shipped placement example's step times are what the README's second `plan` command
    prints (issue 27: the best rank order among the orders Megatron launches)."""
    import json

    from planner.cli import main

    text = " ".join(README.split())
    start = text.index("planner plan --model llama3.1-70b --cluster llama3-roce-24k")
    cmd = text[start : text.index("--out-dir", start)].replace("\\", " ").split()
    assert main([*cmd[1:], "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["allocation"]["step_time_s"]
    para = text[text.index("on the shipped example the step is") :]
    figures = [float(x) for x in re.findall(r"(\d+\.\d+) s", para)[:2]]
    assert figures == [
        round(steps["scheduler_order"], 2),
        round(steps["placed"], 2),
    ]
    assert round(steps["best_rank_order"], 2) == figures[0]  # "and with the best rank order"


def test_readme_defaults_and_test_counts_are_the_codes():
    """The defaults and test sizes the README states are the code's (issue 28: every figure)."""
    from planner.types import SolverOptions

    text = " ".join(README.split())
    options = SolverOptions()
    assert f"`--time-limit` (default {options.time_limit_s:.0f} s)" in text
    assert f"`--simplicity-tolerance` ({100 * options.simplicity_tolerance:.0f} %)" in text
    fuzz_test = (Path(__file__).parent / "cli" / "test_fuzz_cli.py").read_text()
    examples = re.search(r"max_examples=(\d+)", fuzz_test).group(1)
    summary = re.search(r"fuzz\.fuzz\((\d+), seed=0", fuzz_test).group(1)
    assert f"({examples} generated cases in the default suite, the {summary}-case summary" in text
