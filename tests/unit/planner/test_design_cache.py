"""planner/design/cache.py: stable keys, atomic entries, corrupt entries read as misses."""

from __future__ import annotations

import dataclasses
import os
import pickle

import pytest

from cost_models.errors import InvalidInput
from cost_models.specs import Layout
from planner.design import cache as design_cache
from planner.design.cache import DiskCache, code_salt, default_key


def first(x):
    return x


def second(x):
    return x


@dataclasses.dataclass
class Point:
    model: str
    gpus: int


def test_roundtrip_and_miss(tmp_path):
    c = DiskCache(tmp_path, first)
    assert c.get("a") == (False, None)
    c.put("a", {"tokens": 1.5, "plan": (1, 2)})
    assert c.get("a") == (True, {"tokens": 1.5, "plan": (1, 2)})
    # Another process (a new DiskCache on the same folder) reads the same entry.
    assert DiskCache(tmp_path, first).get("a") == (True, {"tokens": 1.5, "plan": (1, 2)})


def test_entries_are_per_function(tmp_path):
    DiskCache(tmp_path, first).put("a", 1)
    assert DiskCache(tmp_path, second).get("a") == (False, None)


def test_salt_is_stable_and_covers_the_code(tmp_path):
    assert code_salt() == code_salt()
    assert len(code_salt()) == 64
    c = DiskCache(tmp_path, first)
    assert c.digest("k") == DiskCache(tmp_path, first).digest("k")
    assert c.digest("k") != c.digest("k2")


@pytest.mark.parametrize(
    "garbage", [b"", b"not a pickle", pickle.dumps(("wrong digest", 1)), pickle.dumps(7)]
)
def test_corrupt_entry_is_a_miss_then_overwritten(tmp_path, garbage):
    c = DiskCache(tmp_path, first)
    c.put("a", 1)
    path = c.path(c.digest("a"))
    path.write_bytes(garbage)
    assert c.get("a") == (False, None)
    c.put("a", 2)
    assert c.get("a") == (True, 2)


def test_truncated_entry_is_a_miss(tmp_path):
    c = DiskCache(tmp_path, first)
    c.put("a", list(range(1000)))
    path = c.path(c.digest("a"))
    path.write_bytes(path.read_bytes()[:50])
    assert c.get("a") == (False, None)


def test_writes_leave_no_temporary_files(tmp_path):
    c = DiskCache(tmp_path, first)
    for i in range(5):
        c.put(str(i), i)
    names = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert len(names) == 5 and not [n for n in names if n.startswith(".tmp-")]


def test_unpicklable_result_is_just_not_kept(tmp_path):
    c = DiskCache(tmp_path, first)
    c.put("a", lambda: 1)  # a lambda cannot be pickled: no entry, no error
    assert c.get("a") == (False, None)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_folder_that_cannot_be_made_is_invalid_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidInput, match="cache folder .*file/sub"):
        DiskCache(blocker / "sub", first)
    with pytest.raises(InvalidInput, match="file, not a folder"):
        DiskCache(blocker, first)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_invalid_input(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(InvalidInput, match="not writable"):
            DiskCache(tmp_path, first)
    finally:
        tmp_path.chmod(0o700)


def test_default_key_is_canonical():
    assert default_key({"b": 1, "a": [1, 2]}) == default_key({"a": [1, 2], "b": 1})
    assert default_key(Point("llama3-8b", 64)) == '{"gpus":64,"model":"llama3-8b"}'
    layout = Layout(tp=8, pp=2, dp=4)
    assert default_key(layout) == default_key(Layout(tp=8, pp=2, dp=4))
    assert default_key(layout) != default_key(Layout(tp=8, pp=4, dp=2))
    assert default_key(("m", 8)) == '["m",8]'
    assert default_key({1, 2}) == repr({1, 2})  # not JSON: repr


def test_salt_reads_every_package(monkeypatch):
    # The salt walks cost_models, models_zoo and planner; a file's bytes move it.
    seen = []
    real = design_cache.Path.read_bytes

    def spy(self):
        seen.append(self)
        return real(self)

    design_cache.code_salt.cache_clear()
    monkeypatch.setattr(design_cache.Path, "read_bytes", spy)
    try:
        design_cache.code_salt()
    finally:
        design_cache.code_salt.cache_clear()
    names = {p.as_posix() for p in seen}
    assert any(n.endswith("/cost_models/pricer.py") for n in names)
    assert any(n.endswith(".json") and "/models_zoo/" in n for n in names)
    assert any(n.endswith("/planner/__init__.py") for n in names)  # holds __version__
