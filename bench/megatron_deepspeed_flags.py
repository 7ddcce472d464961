"""Print the command-line flags Megatron-DeepSpeed's parser registers, for
tests/integration/search/megatron_deepspeed_flags.txt (the deepspeed export's launch arguments are
checked against it: Megatron-DeepSpeed is not on PyPI, so the frameworks environment cannot run
its parser).

Reads megatron/arguments.py from a git snapshot of github.com/deepspeedai/Megatron-DeepSpeed
(every `add_argument('--flag', '--alias', ...)` string) plus the four flags its parse_args adds
through `deepspeed.add_config_arguments` (DeepSpeed 0.19.8 deepspeed/__init__.py
_add_core_arguments: --deepspeed, --deepspeed_config, --deepscale, --deepscale_config).

Usage: python bench/megatron_deepspeed_flags.py GIT_DIR [REV] > tests/integration/search/megatron_deepspeed_flags.txt
"""

from __future__ import annotations

import re
import subprocess
import sys

DEEPSPEED_CORE = ("--deepspeed", "--deepspeed_config", "--deepscale", "--deepscale_config")


def flags(source: str) -> list[str]:
    """Every option string of every add_argument call in `source`."""
    found = set(DEEPSPEED_CORE)
    for call in re.finditer(r"add_argument\(\s*((?:(['\"])--[^'\"]+\2\s*,\s*)+)", source):
        found.update(re.findall(r"['\"](--[^'\"]+)['\"]", call.group(1)))
    return sorted(found)


def main(argv: list[str]) -> int:
    git_dir, rev = argv[0], (argv[1] if len(argv) > 1 else "HEAD")
    show = ["git", f"--git-dir={git_dir}", "show", f"{rev}:megatron/arguments.py"]
    source = subprocess.run(show, check=True, capture_output=True, text=True).stdout
    commit = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"# Megatron-DeepSpeed {commit[:12]} megatron/arguments.py add_argument flags, plus")
    print(
        "# deepspeed.add_config_arguments' four (DeepSpeed 0.19.8). bench/megatron_deepspeed_flags.py"
    )
    print("\n".join(flags(source)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
