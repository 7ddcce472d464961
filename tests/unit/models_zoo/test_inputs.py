"""models_zoo.inputs: the shared safe reader (limits and one-line messages) other inputs reuse."""

from __future__ import annotations

import pytest

from cost_models.errors import InvalidInput
from models_zoo import inputs


def test_reads_yaml_and_json(tmp_path):
    (tmp_path / "a.yaml").write_text("a: [1, 2]\n")
    (tmp_path / "a.json").write_text('{"a": [1, 2]}')
    assert inputs.read_data_file(tmp_path / "a.yaml") == {"a": [1, 2]}
    assert inputs.read_data_file(tmp_path / "a.json") == {"a": [1, 2]}


def test_file_size_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_FILE_BYTES", 10)
    (tmp_path / "a.yaml").write_text("a: 1234567890\n")
    with pytest.raises(InvalidInput, match="a.yaml: larger than"):
        inputs.read_data_file(tmp_path / "a.yaml")


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInput, match="nope.yaml: file not found"):
        inputs.read_data_file(tmp_path / "nope.yaml")
    with pytest.raises(InvalidInput, match="cannot read file"):
        inputs.read_data_file(tmp_path)  # a folder: the system's reason


def test_depth_limit_is_exact(tmp_path):
    ok = "[" * inputs.MAX_DEPTH + "]" * inputs.MAX_DEPTH
    deep = "[" * (inputs.MAX_DEPTH + 1) + "]" * (inputs.MAX_DEPTH + 1)
    for suffix in (".yaml", ".json"):
        (tmp_path / f"ok{suffix}").write_text(ok)
        (tmp_path / f"deep{suffix}").write_text(deep)
        inputs.read_data_file(tmp_path / f"ok{suffix}")
        with pytest.raises(InvalidInput, match="nested more than 64 levels"):
            inputs.read_data_file(tmp_path / f"deep{suffix}")


def test_shared_aliases_count_once_per_use(tmp_path):
    # 10 x 10 x 10 values through aliases: 1,000 leaves, well inside the limit.
    text = "a: &a [1,2,3,4,5,6,7,8,9,10]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b]\n"
    (tmp_path / "a.yaml").write_text(text)
    assert len(inputs.read_data_file(tmp_path / "a.yaml")["c"]) == 3


@pytest.mark.parametrize("raw", [b"\xff", b"ok: 1\n\xc3(", b"a: 1\nb: \x80\n"])
def test_bad_bytes_name_line_and_column(tmp_path, raw):
    (tmp_path / "a.yaml").write_bytes(raw)
    with pytest.raises(InvalidInput, match=r"a.yaml: not UTF-8 text: byte .* at line \d column"):
        inputs.read_data_file(tmp_path / "a.yaml")


def test_one_line_folds_and_cuts():
    assert inputs.one_line("a\n  b\tc") == "a b c"
    assert len(inputs.one_line("x" * 1000)) == inputs.MAX_MESSAGE_CHARS


def test_where_record_uses_id_or_index():
    assert inputs.where_record("f.yaml", 3, {"id": "run-1"}) == "f.yaml: record 'run-1'"
    assert inputs.where_record("f.yaml", 3, {"id": 7}) == "f.yaml: record #3"
    assert inputs.where_record("f.yaml", 3, "junk") == "f.yaml: record #3"


def test_yaml_and_json_count_depth_alike(tmp_path):
    text = "[" * inputs.MAX_DEPTH + "1" + "]" * inputs.MAX_DEPTH
    for suffix in (".yaml", ".json"):
        (tmp_path / f"a{suffix}").write_text(text)
        inputs.read_data_file(tmp_path / f"a{suffix}")


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "- &r {model: *r}\n"])
def test_recursive_alias_is_refused(tmp_path, text):
    (tmp_path / "a.yaml").write_text(text)
    with pytest.raises(InvalidInput, match="a YAML alias refers to itself"):
        inputs.read_data_file(tmp_path / "a.yaml")
