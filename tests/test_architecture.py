"""Imports go one way: planner -> models_zoo -> cost_models; only planner uses ortools and rich."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "cost_models": {"planner", "models_zoo", "ortools", "rich", "yaml", "networkx"},
    "models_zoo": {"planner", "ortools", "rich"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_import_direction():
    for package, banned in FORBIDDEN.items():
        for path in (ROOT / package).rglob("*.py"):
            bad = imported_roots(path) & banned
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_cli_prints_or_exits():
    for package in ("cost_models", "models_zoo", "planner"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name in ("cli.py", "__main__.py"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in ("print", "exit"), (
                        f"{path.name} calls {node.func.id}"
                    )


def test_every_python_package_is_shipped():
    # A package missing from pyproject's explicit list imports from a checkout but not from
    # `pip install .` (planner.search once did exactly that).
    import tomllib

    root = Path(__file__).resolve().parents[1]
    listed = set(
        tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(root).parts)
        for top in ("planner", "cost_models", "models_zoo")
        for init in (root / top).rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
