"""Issue 28: the docs stand alone and their generated figures cannot go stale."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "bench/docs_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_blocks_are_current():
    figures = _script()
    assert figures.stale() == [], "run python bench/docs_figures.py and commit the docs"
    text = (ROOT / "docs/contract.md").read_text()
    assert {"model-schema", "cluster-presets", "model-presets"} <= set(
        re.findall(r"<!-- generated: ([\w-]+) -->", text)
    )


def test_a_stale_block_is_caught(tmp_path):
    figures = _script()
    doc = tmp_path / "x.md"
    doc.write_text("<!-- generated: model-schema -->\n| old |\n<!-- end generated -->\n")
    assert figures.stale([doc]) and figures.stale([doc])[0].endswith("x.md: model-schema")


def test_docs_do_not_point_outside_the_repository():
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert "CONTRACT.md" not in path.read_text(), path.name
    # The model schema lives in docs/, with every ModelSpec field.
    from cost_models.specs import ModelSpec

    contract = (ROOT / "docs/contract.md").read_text()
    assert all(f"| `{name}` |" in contract for name in ModelSpec.model_fields)


def test_install_commands_name_the_distribution():
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert name == "planner-placement"
    texts = [p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]]
    texts += [p.read_text() for p in (ROOT / "planner").rglob("*.py")]
    for text in texts:
        for extra in re.findall(r"pip install '([\w.-]+)\[", text):
            assert extra in (".", name), extra
