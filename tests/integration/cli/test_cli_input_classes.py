"""Each CLI command x each class of bad input file (issue 19), through planner.cli.main.

Classes: not UTF-8, truncated, wrong type, missing field, unknown field, absurd size, NaN/inf,
not a mapping / not a list, plus an unusual but valid request. Every bad one exits 2 with one
line naming the file and the field or rule; nothing prints a traceback.
"""

from __future__ import annotations

import json

import pytest

from planner.cli import main
from planner.search.scale import time_to_quanta

MODEL = {
    "name": "tiny",
    "num_layers": 4,
    "hidden_size": 1024,
    "ffn_hidden_size": 4096,
    "num_attention_heads": 8,
    "num_kv_heads": 8,
    "vocab_size": 32000,
}
CLUSTER = {
    "name": "c",
    "gpu": "h100-sxm-80gb",
    "gpus_per_node": 8,
    "num_gpus": 16,
    "tiers": [
        {"name": "nvlink", "domain_size": 8, "bandwidth_gb_per_s": 450, "latency_us": 3},
        {"name": "ib", "domain_size": None, "bandwidth_gb_per_s": 50, "latency_us": 5},
    ],
}


def _model(**change):
    return {**MODEL, **change}


def _cluster_tier(**change):
    return {**CLUSTER, "tiers": [{**CLUSTER["tiers"][0], **change}, CLUSTER["tiers"][1]]}


# (class, file name, content, the rule the message must name)
MODEL_CASES = [
    ("not utf-8", "m.yaml", b"name: \xff\n", "not UTF-8 text"),
    ("truncated", "m.json", json.dumps(MODEL)[:40].encode(), "malformed JSON"),
    ("wrong type", "m.yaml", _model(num_layers="four"), "num_layers: Input should be a valid"),
    ("missing", "m.yaml", {k: v for k, v in MODEL.items() if k != "hidden_size"}, "hidden_size"),
    ("unknown", "m.yaml", _model(hiden=3), "hiden: unknown field"),
    ("absurd", "m.yaml", _model(num_layers=10**6), "less than or equal to 10000"),
    ("not mapping", "m.yaml", [1, 2], "expected a mapping"),
]
CLUSTER_CASES = [
    ("not utf-8", "c.yaml", b"name: \xc3\n", "not UTF-8 text"),
    ("truncated", "c.yaml", b"name: c\ntiers: [", "malformed YAML"),
    ("wrong type", "c.json", {**CLUSTER, "gpus_per_node": "eight"}, "gpus_per_node"),
    ("missing", "c.json", {k: v for k, v in CLUSTER.items() if k != "tiers"}, "tiers"),
    ("unknown", "c.json", {**CLUSTER, "tier": []}, "tier: unknown field"),
    ("zero bw", "c.json", _cluster_tier(bandwidth_gb_per_s=0), "bandwidth_gb_per_s"),
    ("absurd", "c.json", _cluster_tier(domain_size=2**30), "domain_size"),
    ("not mapping", "c.json", "x", "expected a mapping"),
]


def _write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif name.endswith(".json"):
        path.write_text(json.dumps(content))
    else:
        import yaml

        path.write_text(yaml.safe_dump(content))
    return str(path)


def _commands(model, cluster):
    return {
        "plan": ["plan", "--model", model, "--cluster", cluster, "--time-limit", "2"],
        "estimate": ["estimate", "--model", model, "--cluster", cluster, "--global-batch", "16"]
        + ["--tp", "1", "--pp", "1", "--dp", "16"],
        "whatif": ["whatif", "--model", model, "--cluster", cluster, "--vary", "nic-gbps"]
        + ["--values", "400", "--time-limit", "2"],
    }


def _one_line_exit_2(argv, capsys, *needles):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 2 and out == "", (code, err)
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize("command", ["plan", "estimate", "whatif"])
@pytest.mark.parametrize("cls,name,content,rule", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_model_file_classes(tmp_path, capsys, command, cls, name, content, rule):
    path = _write(tmp_path, name, content)
    _one_line_exit_2(_commands(path, "dgx-h100")[command], capsys, name, rule)


@pytest.mark.parametrize("command", ["plan", "estimate", "whatif"])
@pytest.mark.parametrize("cls,name,content,rule", CLUSTER_CASES, ids=[c[0] for c in CLUSTER_CASES])
def test_cluster_file_classes(tmp_path, capsys, command, cls, name, content, rule):
    path = _write(tmp_path, name, content)
    _one_line_exit_2(_commands("llama3-8b", path)[command], capsys, name, rule)


@pytest.mark.parametrize(
    "cls,content,rule",
    [
        ("not utf-8", b"- id: \xe9t\xe9\n", "not UTF-8 text"),
        ("truncated", b'[{"id": "a", "gpu', "malformed JSON"),
        ("not a list", {"id": "x"}, "expected a YAML list"),
        ("scalar", 7, "expected a YAML list"),
    ],
)
def test_validate_file_classes(tmp_path, capsys, cls, content, rule):
    path = _write(tmp_path, "runs.json", content)
    _one_line_exit_2(["validate", "--data", path], capsys, "runs.json", rule)


def test_hf_config_classes(tmp_path, capsys):
    hf = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
    path = _write(tmp_path, "config.json", {**hf, "vocab_size": 32000})
    _one_line_exit_2(_commands(path, "dgx-h100")["plan"], capsys, "num_hidden_layers")
    path = _write(
        tmp_path,
        "config.json",
        {**hf, "vocab_size": [1], "num_hidden_layers": 2, "intermediate_size": 8},
    )
    _one_line_exit_2(_commands(path, "dgx-h100")["estimate"], capsys, "vocab_size")


def test_presets_bad_kind(capsys):
    _one_line_exit_2(["presets", "nope"], capsys, "invalid choice")


def test_unusual_but_valid_requests(tmp_path, capsys):
    # A BOM, CRLF line ends, a JSON model read as YAML, and a tiny global batch all work.
    raw = b"\xef\xbb\xbf" + json.dumps(MODEL).encode().replace(b", ", b",\r\n")
    path = _write(tmp_path, "m.yaml", raw)
    argv = ["plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "8"]
    assert main(argv + ["--global-batch", "1", "--time-limit", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]


# -------------------------------------------------------------- integer scaling at the limits


def test_largest_accepted_step_times_are_counted_exactly():
    # Python ints: no overflow at any finite time the input bounds allow (the CP-SAT objective
    # packing that once overflowed at 2**53 is gone from the search on main).
    assert time_to_quanta(1e300) > 2**900


def test_non_finite_step_time_is_an_input_error():
    from cost_models.errors import InvalidInput

    with pytest.raises(InvalidInput, match="beyond what the cost model can price"):
        time_to_quanta(float("inf"))
