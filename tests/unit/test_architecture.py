"""Imports go one way: planner -> models_zoo -> cost_models; only planner uses ortools and rich; no
import cycles among modules; docs/architecture.md lists exactly the imports between rooms."""

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "cost_models": {"planner", "models_zoo", "ortools", "rich", "yaml", "networkx"},
    "models_zoo": {"planner", "ortools", "rich"},
}


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a file's syntax tree, parsed once for all the tests of this module (they
    walk the same ~300 files; parsing them per test cost ~10 s of the default suite)."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in nodes(path):
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
            for node in nodes(path):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in ("print", "exit"), (
                        f"{path.name} calls {node.func.id}"
                    )


def test_every_python_package_is_shipped():
    # A package missing from pyproject's explicit list imports from a checkout but not from
    # `pip install .` (planner.search once did exactly that).
    import tomllib

    root = Path(__file__).resolve().parents[2]
    listed = set(
        tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(root).parts)
        for top in ("planner", "cost_models", "models_zoo")
        for init in (root / top).rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


# --------------------------------------------------------------- the module graph (issue 24)

PACKAGES = ("cost_models", "models_zoo", "planner")
MAX_FUNCTION_LINES = 100


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the three packages (a package is its
    __init__.py)."""
    out = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported_modules(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the three packages `module` imports anywhere in its file (module level,
    inside functions, under TYPE_CHECKING), relative imports resolved. `from pkg import name`
    is an edge to pkg.name when that is a module, else to pkg (its __init__, whose own imports
    then count: a re-export is an edge through the package)."""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in nodes(path):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - (node.level - 1)]
                source = ".".join(parent + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [
                f"{source}.{a.name}" if f"{source}.{a.name}" in known else source
                for a in node.names
            ]
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


@functools.cache
def _module_graph():
    import networkx as nx

    known = module_files()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        graph.add_edges_from((module, t) for t in _imported_modules(module, path, known))
    return graph


def module_graph():
    """The module graph (built once per session; a copy, so no test can change another's)."""
    return _module_graph().copy()


def test_module_graph_sees_every_kind_of_import():
    # Relative, function-level and package re-exports all count (the cycle test relies on it).
    graph = module_graph()
    assert graph.has_edge("planner.report.terminal", "planner.types")  # from ..types import
    assert graph.has_edge("planner.report", "planner.report.terminal")  # __init__ re-export
    assert graph.has_edge("planner.cli", "planner.report")  # from . import report
    assert graph.has_edge("planner.cli", "planner.calibrate.measure")  # inside a function


def test_no_import_cycles():
    """No two modules of cost_models, models_zoo and planner import each other, directly or
    round a longer loop (deferred imports and package re-exports count)."""
    import networkx as nx

    cycles = [" -> ".join([*c, c[0]]) for c in nx.simple_cycles(module_graph())]
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles)[:20])


def test_no_function_over_100_lines():
    """STYLE: no function over 100 lines (aim for <= 60) in the three packages; nested
    functions are measured on their own and inside their parent."""
    long = []
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            for node in nodes(path):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    assert not long, "functions over 100 lines:\n" + "\n".join(sorted(long))


# ------------------------------------------------------- docs/architecture.md (the room map)

ARCHITECTURE = ROOT / "docs" / "architecture.md"
# planner/'s own modules are three rooms: the command line, the shared search types, the
# published-run records; the rest of its top level is the library.
FILE_ROOMS = {
    "planner.cli": "planner/cli.py",
    "planner.__main__": "planner/cli.py",
    "planner.types": "planner/types.py",
    "planner.validate": "planner/validate.py",
}


def room_of(module: str, packages: set[str]) -> str:
    """The room (folder, or one of FILE_ROOMS) a module lives in."""
    if module in FILE_ROOMS:
        return FILE_ROOMS[module]
    folder = module if module in packages else module.rpartition(".")[0]
    return folder.replace(".", "/") + "/"


def room_graph() -> set[tuple[str, str]]:
    known = module_files()
    packages = {m for m, p in known.items() if p.name == "__init__.py"}
    return {
        (room_of(a, packages), room_of(b, packages))
        for a, b in module_graph().edges
        if room_of(a, packages) != room_of(b, packages)
    }


def documented_edges() -> set[tuple[str, str]]:
    """The `A -> B` lines of the fenced block under '## Imports' in docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    block = text.split("## Imports", 1)[1].split("```", 2)[1]
    edges = set()
    for line in block.splitlines():
        if "->" in line:
            a, b = (s.strip() for s in line.split("#")[0].split("->"))
            edges.add((a, b))
    return edges


def test_architecture_map_lists_exactly_the_imports_between_rooms():
    found, documented = room_graph(), documented_edges()
    missing = sorted(found - documented)
    stale = sorted(documented - found)
    assert not missing and not stale, (
        "docs/architecture.md '## Imports' is out of date:\n"
        + "".join(f"  add    {a} -> {b}\n" for a, b in missing)
        + "".join(f"  remove {a} -> {b}\n" for a, b in stale)
    )


def test_rooms_import_one_way():
    import networkx as nx

    loops = list(nx.simple_cycles(nx.DiGraph(sorted(room_graph()))))
    assert not loops, f"rooms importing each other: {loops}"
