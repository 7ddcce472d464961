"""Reading user files safely: bytes -> text -> data, with limits and one-line errors.

Every user-supplied file (model, HF config.json, cluster, fabric graph, validate data, and the
placement / calibration inputs that follow the same conventions) goes through `read_data_file`:

* read as bytes, at most MAX_FILE_BYTES (a larger file is refused before it is parsed);
* decoded as UTF-8 (a leading BOM is accepted); a bad byte is reported with its line and column;
* parsed as JSON (a `.json` suffix) or YAML (anything else) with the safe loader only, nesting at
  most MAX_DEPTH deep and at most MAX_NODES values once YAML aliases are expanded (so neither a
  deeply nested file nor an alias "billion laughs" reaches the schema or the recursion limit);
* NaN / Infinity literals are refused in JSON (the schemas refuse `.nan` / `.inf` in YAML).

Every failure raises `InvalidInput` whose message is ONE line, `<file>: <what> ...`: the parser's
own text is folded onto one line by `one_line`. `where_record` and `validated` build the
`<file>: record <id or #index>: <field>: <rule>` messages of record files and schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cost_models.errors import InvalidInput, describe_validation_error

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "decode_text",
    "load_text",
    "one_line",
    "read_data_file",
    "validated",
    "where_record",
]

MAX_FILE_BYTES = 16 * 2**20
"""Largest input file read (16 MiB; the bundled published_runs.yaml is well under 1 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of lists / mappings accepted (the deepest schema, a fabric graph, needs 4)."""
MAX_NODES = 1_000_000
"""Most values in one file, counting every YAML alias expansion."""
MAX_MESSAGE_CHARS = 400
"""A parser's own text is cut to this length (a quoted line of a huge file stays readable)."""


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` with every run of whitespace (newlines included) folded to one space, cut to limit."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def decode_text(raw: bytes, where: str) -> str:
    """UTF-8 text of `raw` (a leading BOM dropped); InvalidInput with the line of a bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        col = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        bad = raw[err.start : err.start + 1]
        raise InvalidInput(
            f"{where}: not UTF-8 text: byte {bad!r} at line {line} column {col} "
            "(save the file as UTF-8)"
        ) from None


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing (before PyYAML's
    own recursion could hit Python's limit)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        # Count lists and mappings only, as _json_depth does for JSON.
        container = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        self._depth += container
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep()
            return super().compose_node(parent, index)
        finally:
            self._depth -= container


class _TooDeep(Exception):
    pass


def _expanded_size(node: yaml.Node) -> tuple[int, int]:
    """(values, depth) of a composed YAML tree with aliases expanded; memoized per node so a
    billion-laughs file is measured in linear time. Iterative (post-order), no recursion; a node
    that is its own ancestor (a recursive alias, `&a [*a]`) raises _Recursive."""
    memo: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()  # nodes whose subtree is being walked: the current ancestors
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        cur, done = stack.pop()
        key = id(cur)
        children: list[yaml.Node] = []
        if isinstance(cur, yaml.SequenceNode):
            children = list(cur.value)
        elif isinstance(cur, yaml.MappingNode):
            children = [n for pair in cur.value for n in pair]
        if done:
            size, depth = 1, 0
            for c in children:
                s, d = memo[id(c)]
                size, depth = min(size + s, MAX_NODES + 1), max(depth, d)
            memo[key] = (size, depth + (1 if children else 0))
            on_path.discard(key)
            continue
        if key in memo:
            continue
        on_path.add(key)
        stack.append((cur, True))
        for c in children:
            if id(c) in on_path:
                raise _Recursive()
            if id(c) not in memo:
                stack.append((c, False))
    return memo[id(node)]


class _Recursive(Exception):
    pass


def _json_depth(data: Any) -> int:
    depth, stack = 0, [(data, 1)]
    while stack:
        cur, d = stack.pop()
        if isinstance(cur, dict):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in cur.values())
        elif isinstance(cur, list):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in cur)
    return depth


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number this schema accepts")


def load_text(text: str, where: str, *, as_json: bool) -> Any:
    """Parse JSON or YAML text within the limits above; InvalidInput (one line) otherwise."""
    too_deep = InvalidInput(f"{where}: nested more than {MAX_DEPTH} levels deep (limit)")
    if as_json:
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as err:
            raise InvalidInput(
                f"{where}: malformed JSON at line {err.lineno} column {err.colno}: "
                f"{one_line(err.msg)}"
            ) from None
        except RecursionError:
            raise too_deep from None
        except ValueError as err:  # NaN/Infinity, an integer over Python's digit limit
            raise InvalidInput(f"{where}: malformed JSON: {one_line(str(err))}") from None
        if _json_depth(data) > MAX_DEPTH:
            raise too_deep
        return data
    loader = None
    try:
        loader = _LimitedLoader(text)  # its Reader refuses control characters right here
        node = loader.get_single_node()
        if node is None:
            return None
        size, _ = _expanded_size(node)
        if size > MAX_NODES:
            raise InvalidInput(
                f"{where}: more than {MAX_NODES:,} values once YAML aliases are expanded (limit)"
            )
        return loader.construct_document(node)
    except _TooDeep:
        raise too_deep from None
    except _Recursive:
        raise InvalidInput(f"{where}: a YAML alias refers to itself (recursive data)") from None
    except RecursionError:
        raise too_deep from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        if isinstance(err, yaml.reader.ReaderError):
            at = f" at character {err.position}"
            problem = (
                f"unacceptable character #x{err.character:04x}"
                if isinstance(err.character, int)
                else str(err.reason)
            )
        else:
            problem = getattr(err, "problem", None) or str(err)
        raise InvalidInput(f"{where}: malformed YAML{at}: {one_line(problem)}") from None
    except ValueError as err:  # e.g. an integer over Python's digit limit
        raise InvalidInput(f"{where}: malformed YAML: {one_line(str(err))}") from None
    finally:
        if loader is not None:
            loader.dispose()


def unreadable(where: str | Path, err: OSError) -> InvalidInput:
    """The one-line error for a file that cannot be read: "file not found" when it does not
    exist (the words every command uses), else the system's reason."""
    if isinstance(err, FileNotFoundError):
        return InvalidInput(f"{where}: file not found")
    return InvalidInput(f"{where}: cannot read file ({err.strerror or err})")


def read_data_file(path: Path | str, *, as_json: bool | None = None) -> Any:
    """Parse a YAML or JSON file (JSON by a `.json` suffix, or as `as_json` says) within the
    limits of this module. Every reader of a user's YAML/JSON file goes through here: a reader of
    its own (json.loads, yaml.safe_load) lets 3,000 nested brackets escape as a RecursionError
    and an alias bomb expand without bound."""
    path = Path(path)
    where = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InvalidInput(f"{where}: larger than {MAX_FILE_BYTES // 2**20} MiB (limit)")
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise unreadable(where, err) from None
    if len(raw) > MAX_FILE_BYTES:
        raise InvalidInput(f"{where}: larger than {MAX_FILE_BYTES // 2**20} MiB (limit)")
    text = decode_text(raw, where)
    if as_json is None:
        as_json = path.suffix.lower() == ".json"
    return load_text(text, where, as_json=as_json)


def where_record(where: str, index: int, record: Any) -> str:
    """`<file>: record <id>` (the record's `id` when it is a short string) or `record #<index>`."""
    rid = record.get("id") if isinstance(record, dict) else None
    if isinstance(rid, str) and rid.strip() and len(rid) <= 120:
        return f"{where}: record {one_line(rid)!r}"
    return f"{where}: record #{index}"


def validated(cls: type, data: Any, where: str) -> Any:
    """`cls.model_validate(data)`, a mapping required; InvalidInput naming `where` and the field."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise InvalidInput(describe_validation_error(err, where)) from None
