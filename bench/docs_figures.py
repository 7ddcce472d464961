"""Regenerate the generated blocks of README.md and docs/*.md, or check that they are current.

A generated block sits between `<!-- generated: NAME -->` and `<!-- end generated -->`; NAME
picks the function below that writes it. `python bench/docs_figures.py` rewrites every block in
place; `--check` exits 1 naming each stale block
(tests/integration/test_docs_figures.py runs the check, so a
figure in a block cannot go stale: change the code, rerun this script, commit both).

Blocks are built from the code's own data (schemas, presets): cheap and deterministic.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import models_zoo  # noqa: E402
from cost_models.specs import MLASpec, ModelSpec, MoESpec  # noqa: E402

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)


def _type_name(annotation: Any) -> str:
    """A schema type in words: int, float, bool, str, null, or the nested block's name."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if annotation is type(None):
        return "null"
    if annotation is MoESpec:
        return "moe block"
    if annotation is MLASpec:
        return "mla block (or true)"
    return getattr(annotation, "__name__", str(annotation))


def _field_rows(cls: type, prefix: str = "") -> list[str]:
    rows = []
    for name, f in cls.model_fields.items():
        required = "required" if f.is_required() else f"default `{f.default!r}`".replace("'", "")
        rows.append(
            f"| `{prefix}{name}` | {_type_name(f.annotation)} | {required} | "
            f"{(f.description or '').replace('|', '/')} |"
        )
    return rows


def model_schema() -> str:
    """The model file's fields (YAML or JSON), from cost_models.specs.ModelSpec."""
    head = ["| field | type | required / default | meaning |", "|---|---|---|---|"]
    return "\n".join(
        head + _field_rows(ModelSpec) + _field_rows(MoESpec, "moe.") + _field_rows(MLASpec, "mla.")
    )


def cluster_presets() -> str:
    """`planner presets clusters` as a table: GPU, size, node, NVLink domain, fabric."""
    head = [
        "| preset | GPU | GPUs | up to | per node | NVLink domain | scale-out tiers (GB/s per GPU) |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    rows = []
    for r in models_zoo.preset_summaries("clusters"):
        tiers = ", ".join(f"{t['tier']} {t['gb_per_s']:g}" for t in r["fabric"][1:])
        rows.append(
            f"| {r['name']} | {r['gpu']} | {r['num_gpus']:,} | {r['max_gpus']:,} | "
            f"{r['gpus_per_node']} | {r['nvlink_domain']} | {tiers} |"
        )
    return "\n".join(head + rows)


def model_presets() -> str:
    """`planner presets models` as a table: parameters (total, active), layers, width."""
    head = ["| preset | model | params | active | layers | hidden | experts |",
            "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    rows = [
        f"| {r['name']} | {r['model']} | {r['params_total'] / 1e9:,.1f}B | "
        f"{r['params_active'] / 1e9:,.1f}B | {r['num_layers']} | {r['hidden_size']:,} | "
        f"{r['num_experts'] or '-'} |"
        for r in models_zoo.preset_summaries("models")
    ]
    return "\n".join(head + rows)


def place_scaling() -> str:
    """docs/cli.md "Scale": bench/place_scaling.py's record (bench/results/place_scaling.json,
    written by its --record; timings cannot be regenerated, so the block renders the record)."""
    import json  # noqa: PLC0415

    sys.path.insert(0, str(ROOT / "bench"))
    import place_scaling as bench  # noqa: PLC0415 -- a script beside this one

    record = json.loads((ROOT / "bench" / "results" / "place_scaling.json").read_text())
    load = ", ".join(f"{x:.1f}" for x in record["load_average"])
    return "\n".join(
        [
            f"Recorded by `{record['command']}` on revision {record['revision']}, "
            f"{record['cpus']} cores, load average {load} (1, 5, 15 min) at the end:",
            "",
            bench.render(record),
        ]
    )


GENERATORS = {
    "model-schema": model_schema,
    "cluster-presets": cluster_presets,
    "model-presets": model_presets,
    "place-scaling": place_scaling,
}


def render(text: str, where: str) -> str:
    """`text` with every generated block rewritten; unknown block names are an error."""

    def one(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in GENERATORS:
            raise SystemExit(f"{where}: unknown generated block {name!r}")
        return f"{m.group(1)}{GENERATORS[name]()}\n{m.group(4)}"

    return BLOCK.sub(one, text)


def stale(paths: list[Path] = DOCS) -> list[str]:
    """The `file: block` names whose text differs from what the code generates now."""
    out = []
    for path in paths:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            if render(m.group(0), path.name) != m.group(0):
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                out.append(f"{shown}: {m.group('name')}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    args = parser.parse_args()
    if args.check:
        old = stale()
        for name in old:
            print(f"stale generated block: {name} (run python bench/docs_figures.py)")
        return 1 if old else 0
    for path in DOCS:
        text = path.read_text()
        new = render(text, path.name)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
