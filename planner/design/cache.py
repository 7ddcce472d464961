"""Results of design-point evaluations kept on disk, so a re-run or a wider grid reuses them.

An entry is named by the SHA-256 of a salt and the point's key (`key(point)`, a string that must
capture everything the result depends on apart from the code). The salt covers the evaluating
function's name and the code and data it can reach: the bytes of every `.py`, `.json` and `.csv`
file of cost_models/, models_zoo/ and planner/ (the version lives in one; the shipped kernel
tables are CSV), so any change to the model, the presets or the search starts a fresh set of
entries instead of serving stale results.

Writes are atomic (a temporary file in the same folder, then os.replace), so a killed run never
leaves half an entry under a real name; an entry that cannot be read back (truncated, garbage,
written by another code version) is a miss and is computed again and overwritten. Entries are
pickles: point the cache only at a folder you own (unpickling runs code).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from cost_models.errors import InvalidInput

CODE_PACKAGES = ("cost_models", "models_zoo", "planner")
CODE_SUFFIXES = (".py", ".json", ".csv")  # code, presets, shipped kernel tables
ENTRY_SUFFIX = ".pkl"


@functools.cache
def code_salt() -> str:
    """SHA-256 over every code/data file of the three packages (paths and bytes, in sorted
    order; planner/__init__.py holds the version): the same checkout, the same salt in every
    process."""
    digest = hashlib.sha256(b"planner design cache 1\n")
    root = Path(__file__).resolve().parents[2]  # planner/design/cache.py -> the packages' folder
    for package in CODE_PACKAGES:
        files = sorted(
            p for p in (root / package).rglob("*") if p.suffix in CODE_SUFFIXES and p.is_file()
        )
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def function_name(fn: Callable[..., Any]) -> str:
    """`module.qualname` of the evaluating function: two functions never share entries."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def default_key(point: Any) -> str:
    """A stable text for a point when the caller gives no `key`: canonical JSON of a pydantic
    model, a dataclass or plain data (sorted keys), else repr()."""
    if hasattr(point, "model_dump"):  # pydantic v2
        point = point.model_dump(mode="json")
    elif is_dataclass(point) and not isinstance(point, type):
        point = asdict(point)
    try:
        return json.dumps(point, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(point)


class DiskCache:
    """Entries under `folder`, two hex digits of fan-out: folder/ab/abcdef....pkl."""

    def __init__(self, folder: str | Path, fn: Callable[..., Any]) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise InvalidInput(f"cache folder {self.folder}: a file, not a folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InvalidInput(
                f"cache folder {self.folder}: cannot create it ({err.strerror})"
            ) from None
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise InvalidInput(f"cache folder {self.folder}: not writable")
        self.salt = f"{code_salt()}\n{function_name(fn)}\n"

    def digest(self, key: str) -> str:
        return hashlib.sha256((self.salt + key).encode()).hexdigest()

    def path(self, digest: str) -> Path:
        return self.folder / digest[:2] / (digest + ENTRY_SUFFIX)

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, result) for a readable entry; (False, None) for none or a corrupt one."""
        digest = self.digest(key)
        try:
            with open(self.path(digest), "rb") as f:
                stored_digest, value = pickle.load(f)
        except FileNotFoundError:
            return False, None
        except Exception:  # truncated, garbage, a class that no longer exists: recompute
            return False, None
        if stored_digest != digest:  # a file copied under another entry's name
            return False, None
        return True, value

    def put(self, key: str, value: Any) -> None:
        """Store atomically; a full disk or a lost folder costs only the reuse, not the run."""
        digest = self.digest(key)
        target = self.path(digest)
        try:
            target.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=ENTRY_SUFFIX)
            try:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump((digest, value), f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except Exception:  # unwritable, or a result that cannot be pickled: just not reused
            return
