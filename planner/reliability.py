"""Reading a reliability file (`--reliability FILE`) into cost_models.goodput.Reliability.

The file is YAML or JSON with any Reliability field (docs/goodput.md#inputs). `components` may
override part of a component (`components: {gpu: {per_unit_per_day: 1.0e-4}}` keeps the
default's unit and hardware flag) or add a new one (all of per_unit_per_day, unit, hardware).
`straggler_table: FILE` (relative to the reliability file) reads a measured per-GPU table: one
factor per line, or a CSV whose header has a `factor` column (each GPU's compute time relative
to the fastest, >= 1). Every bad value raises InvalidInput naming the file and field.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from cost_models.errors import InvalidInput
from cost_models.goodput import Reliability, default_components
from models_zoo.inputs import decode_text, read_data_file, unreadable, validated

MAX_TABLE_ROWS = 1_048_576


def load_reliability(path: str | Path | None) -> Reliability:
    """The defaults, overridden by the file's fields."""
    if path is None:
        return Reliability()
    where = str(path)
    data = read_data_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    data = dict(data)
    if "components" in data:
        data["components"] = _merged_components(data["components"], where)
    table = data.pop("straggler_table", None)
    if table is not None:
        if "straggler_factors" in data:
            raise InvalidInput(f"{where}: straggler_table: give it or straggler_factors, not both")
        data["straggler_factors"] = read_factor_table(Path(path).parent, table, where)
    return validated(Reliability, data, where)


def _merged_components(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: components: expected a mapping of component names")
    merged: dict[str, Any] = {k: v.model_dump() for k, v in default_components().items()}
    for name, fields in raw.items():
        if not isinstance(fields, dict):
            raise InvalidInput(f"{where}: components.{name}: expected a mapping of fields")
        merged[str(name)] = {**merged.get(str(name), {}), **fields}
    return merged


def read_factor_table(base: Path, table: Any, where: str) -> list[float]:
    """Factors from a one-column file or a CSV with a `factor` column."""
    if not isinstance(table, str) or not table.strip():
        raise InvalidInput(f"{where}: straggler_table: expected a file name")
    path = (base / table) if not Path(table).is_absolute() else Path(table)
    try:
        text = decode_text(path.read_bytes(), str(path))
    except OSError as err:
        raise unreadable(path, err) from None
    rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].lstrip().startswith("#")]
    column = 0
    if rows and "factor" in [c.strip() for c in rows[0]]:
        column = [c.strip() for c in rows[0]].index("factor")
        rows = rows[1:]
    if not rows or len(rows) > MAX_TABLE_ROWS:
        raise InvalidInput(f"{path}: expected 1 to {MAX_TABLE_ROWS} rows of factors")
    return [_factor(row, column, path, i) for i, row in enumerate(rows, start=1)]


def _factor(row: list[str], column: int, path: Path, line: int) -> float:
    try:
        value = float(row[column])
    except (IndexError, ValueError):
        raise InvalidInput(f"{path}: row {line}: factor: not a number") from None
    if not math.isfinite(value) or value < 1:
        raise InvalidInput(f"{path}: row {line}: factor: must be a finite number >= 1")
    return value
