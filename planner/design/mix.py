"""The workload mix of `planner design --workload FILE` (CONTRACT.md "Network design"): a YAML/JSON
list of `{model, global_batch, seq_len, precision, share}`, each the share of the fleet's time one
training job takes. Every bad input is one InvalidInput line naming the file, the entry and the
rule; nothing here prints.

    - {model: llama3.1-405b, global_batch: 2048, seq_len: 8192, precision: bf16, share: 0.5}
    - {model: deepseek-v3, global_batch: 15360, seq_len: 4096, precision: fp8, share: 0.5}

`model` is what `--model` takes (a preset name, a model file, a Hugging Face config.json); the
optional `moe_dispatcher` (alltoall | deepep) is the MoE token exchange the job runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.specs import ModelSpec

from ..api import make_workload

FIELDS = ("model", "global_batch", "seq_len", "precision", "share")
OPTIONAL = ("moe_dispatcher",)
PRECISIONS = ("bf16", "fp8")
DISPATCHERS = ("alltoall", "deepep")
SHARE_TOLERANCE = 1e-6
MAX_ENTRIES = 16
"""Each entry is one plan search per design point."""


@dataclass(frozen=True)
class MixEntry:
    model: str
    """As given (preset name or file path): what a design point re-loads in its worker."""
    model_name: str
    """The model's own name (ModelSpec.name), for reports."""
    global_batch: int
    seq_len: int
    precision: str
    share: float
    moe_dispatcher: str = "alltoall"
    spec: ModelSpec | None = field(default=None, compare=False, hash=False, repr=False)
    label: str = ""
    """How reports name the entry: the model's name (with its seq_len and precision where two
    entries share a model)."""

    def as_point(self) -> dict[str, Any]:
        """The plain-data form a design point carries (JSON-able, picklable)."""
        return {
            "model": self.model,
            "global_batch": self.global_batch,
            "seq_len": self.seq_len,
            "precision": self.precision,
            "moe_dispatcher": self.moe_dispatcher,
        }


def _whole(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"{where}: {key} must be a positive whole number (got {value!r})")
    return value


def _entry(path: str, i: int, item: Any) -> MixEntry:
    where = f"{path}: entry #{i + 1}"
    if not isinstance(item, dict):
        raise InvalidInput(f"{where}: expected a mapping with {', '.join(FIELDS)}")
    unknown = sorted(set(item) - set(FIELDS) - set(OPTIONAL))
    if unknown:
        known = ", ".join((*FIELDS, *OPTIONAL))
        raise InvalidInput(f"{where}: unknown field {unknown[0]!r}; known: {known}")
    missing = [k for k in FIELDS if k not in item]
    if missing:
        raise InvalidInput(
            f"{where}: missing field {missing[0]!r} (each entry needs {', '.join(FIELDS)})"
        )
    model = item["model"]
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput(f"{where}: model must be a preset name or a model file (got {model!r})")
    try:
        spec = models_zoo.load_model(model)
    except InvalidInput as err:
        raise InvalidInput(f"{where}: model: {err}") from None
    precision = item["precision"]
    if precision not in PRECISIONS:
        raise InvalidInput(
            f"{where}: precision must be one of {', '.join(PRECISIONS)} (got {precision!r})"
        )
    share = item["share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share):
        raise InvalidInput(f"{where}: share must be a number in (0, 1] (got {share!r})")
    if not 0 < share <= 1:
        raise InvalidInput(f"{where}: share must be in (0, 1] (got {share})")
    dispatcher = item.get("moe_dispatcher", "alltoall")
    if dispatcher not in DISPATCHERS:
        raise InvalidInput(
            f"{where}: moe_dispatcher must be one of {', '.join(DISPATCHERS)} (got {dispatcher!r})"
        )
    entry = MixEntry(
        model.strip(),
        spec.name,
        _whole(where, "global_batch", item["global_batch"]),
        _whole(where, "seq_len", item["seq_len"]),
        precision,
        float(share),
        dispatcher,
        spec,
    )
    try:  # the workload's own bounds (sequence length, batch), as `plan` checks them
        make_workload(
            spec, seq_len=entry.seq_len, global_batch=entry.global_batch, precision=precision
        )
    except InvalidInput as err:
        raise InvalidInput(f"{where}: {err}") from None
    return entry


def parse_mix(data: Any, path: str) -> tuple[MixEntry, ...]:
    """The mix from parsed YAML/JSON (InvalidInput naming `path`, the entry and the rule)."""
    if not isinstance(data, list) or not data:
        raise InvalidInput(
            f"{path}: expected a non-empty list of workloads, each {{{', '.join(FIELDS)}}}"
        )
    if len(data) > MAX_ENTRIES:
        raise InvalidInput(f"{path}: at most {MAX_ENTRIES} workloads (got {len(data)})")
    entries = tuple(_entry(path, i, item) for i, item in enumerate(data))
    names = [e.model_name for e in entries]
    entries = tuple(
        replace(
            e,
            label=e.model_name
            if names.count(e.model_name) == 1
            else f"{e.model_name} ({e.seq_len}, {e.precision}, batch {e.global_batch})",
        )
        for e in entries
    )
    total = math.fsum(e.share for e in entries)
    if abs(total - 1) > SHARE_TOLERANCE:
        raise InvalidInput(f"{path}: shares must sum to 1 (they sum to {total:g})")
    return entries


def load_mix(path: str) -> tuple[MixEntry, ...]:
    """`--workload FILE`: the validated mix."""
    if not Path(path).is_file():
        raise InvalidInput(f"--workload: file not found: {path}")
    return parse_mix(models_zoo.read_data_file(path), path)
