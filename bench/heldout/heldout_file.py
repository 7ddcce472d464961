"""The one way the held-out converters (make_mbridge_summary.py, make_nemo_summary.py,
make_foundry_summary.py, make_mlperf_summary.py, make_megatron_readme_summary.py,
make_dgxc_summary.py) write their YAML: a header of `#` lines saying where the rows come from,
the count of records and every row not transcribed with its reason, then the records; and the one
way they read the repository mirrors they convert (git, git_show)."""

from __future__ import annotations

import ast
import subprocess
import sys

import yaml


def git(git_dir: str, *args: str) -> str:
    """stdout of `git --git-dir GIT_DIR ARGS...`; CalledProcessError where git fails (a path not at
    that commit)."""
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
    ).stdout


def git_show(git_dir: str, ref: str, path: str) -> str | None:
    """The text of PATH at REF, None where it is not there."""
    try:
        return git(git_dir, "show", f"{ref}:{path}")
    except subprocess.CalledProcessError:
        return None


def expr_value(node: ast.expr, env: dict[str, object]):
    """The value of a recipe's or script's expression read with ast, never run: constants
    (strings, numbers, None), lists and tuples of them, the names in `env`, and + - * // between
    them (the DeepSeek-V3 layout map's `["decoder"] * 4 + last_layer`, NeMo's
    `64 // pp_size - 1`). Anything else raises ValueError naming it."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, type(None))):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [expr_value(e, env) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b}  # fmt: skip
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        left, right = expr_value(node.left, env), expr_value(node.right, env)
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            raise ValueError(f"division by zero in {ast.unparse(node)}")
        try:
            return ops[type(node.op)](left, right)
        except TypeError as err:
            raise ValueError(f"{ast.unparse(node)}: {err}") from None
    raise ValueError(f"an expression this reader does not evaluate: {ast.unparse(node)[:80]}")


EVALUATION_ONLY = "HELD-OUT EVALUATION DATA: never used to fit a constant (docs/accuracy.md, bench/heldout_accuracy.py)."


def write_summary(
    header: list[str], records: list[dict], skipped: list[str], width: int = 120
) -> None:
    """`header` (lines without their `# `), the count and the skipped rows, then `records` as YAML,
    to stdout."""
    out = [f"# {line}" for line in header]
    out.append(f"# {len(records)} records; rows not transcribed ({len(skipped)}):")
    out += [f"#   {s}" for s in skipped]
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.write(yaml.safe_dump(records, sort_keys=False, width=width, allow_unicode=True))
