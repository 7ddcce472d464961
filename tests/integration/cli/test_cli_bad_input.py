"""Every bad-input class through the CLI: exit code, one message naming the field and rule."""

import json
import subprocess
import sys

import pytest

from planner.cli import main

EST = "estimate --model llama3-70b --cluster dgx-h100 --gpus 64 --global-batch 128".split()


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


MODEL_YAML = """\
name: tiny
num_layers: 4
hidden_size: 1024
ffn_hidden_size: 4096
num_attention_heads: 8
num_kv_heads: 8
vocab_size: 32000
"""


def test_misspelled_key_in_model_file(tmp_path, capsys):
    path = write(tmp_path, "m.yaml", MODEL_YAML.replace("hidden_size", "hiden_size", 1))
    code, out, err = run(["plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "8"], capsys)
    assert code == 2 and out == ""
    assert "hiden_size: unknown field" in err and "hidden_size: Field required" in err


def test_wrong_type_in_model_file(tmp_path, capsys):
    path = write(tmp_path, "m.yaml", MODEL_YAML.replace("num_layers: 4", "num_layers: four"))
    code, _, err = run(["plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "8"], capsys)
    assert code == 2 and "num_layers: Input should be a valid integer" in err


@pytest.mark.parametrize(
    "text,field",
    [
        ("num_layers: -4", "num_layers: Input should be greater than 0"),
        ("hidden_size: 0", "hidden_size: Input should be greater than 0"),
    ],
)
def test_zero_or_negative_size_in_file(tmp_path, capsys, text, field):
    key = text.split(":")[0]
    body = "\n".join(
        text if line.startswith(key + ":") else line for line in MODEL_YAML.splitlines()
    )
    path = write(tmp_path, "m.yaml", body)
    code, _, err = run(["plan", "--model", path, "--cluster", "dgx-h100", "--gpus", "8"], capsys)
    assert code == 2 and field in err


@pytest.mark.parametrize("flag,value", [("--gpus", "0"), ("--gpus", "-8"), ("--global-batch", "0")])
def test_zero_or_negative_flag(capsys, flag, value):
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", flag, value]
    code, _, err = run(argv, capsys)
    assert code == 2 and f"argument {flag}: must be positive" in err


def test_gpu_count_not_whole_nodes(capsys):
    code, _, err = run(
        ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "12"], capsys
    )
    assert code == 2 and "num_gpus (12) must be whole nodes" in err


def test_degrees_do_not_multiply_to_gpu_count(capsys):
    argv = [*EST, "--tp", "8", "--pp", "2", "--dp", "2"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "tp*pp*dp*cp (8*2*2*1 = 32) must equal the GPU count (64)" in err


def test_degree_does_not_divide_heads(capsys):
    argv = "estimate --model llama3-70b --cluster dgx-h100 --gpus 48 --global-batch 96"
    argv += " --tp 3 --pp 1 --dp 16"
    code, _, err = run(argv.split(), capsys)
    assert code == 2 and "tp (3) must divide num_attention_heads (64)" in err


def test_pp_vp_does_not_divide_layers(capsys):
    argv = [*EST, "--tp", "1", "--pp", "64", "--dp", "1", "--vp", "2"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "pp*vp (64*2) must not exceed num_layers (80)" in err


def test_ep_does_not_divide_experts(capsys):
    argv = "estimate --model mixtral-8x7b --cluster dgx-h100 --gpus 16 --global-batch 64"
    argv += " --tp 1 --pp 1 --dp 16 --ep 16"
    code, _, err = run(argv.split(), capsys)
    assert code == 2 and "ep (16) must divide num_experts (8)" in err


def test_unknown_preset_suggests_closest(capsys):
    code, _, err = run(["plan", "--model", "llama3-7b", "--cluster", "dgx-h100"], capsys)
    assert code == 2 and "unknown model preset 'llama3-7b'" in err and "llama3-70b" in err
    code, _, err = run(["plan", "--model", "llama3-8b", "--cluster", "dgx-h10"], capsys)
    assert code == 2 and "unknown cluster preset 'dgx-h10'" in err and "dgx-h100" in err


def test_malformed_yaml(tmp_path, capsys):
    path = write(tmp_path, "m.yaml", "name: x\nnum_layers: [1, 2\n")
    code, _, err = run(["plan", "--model", path, "--cluster", "dgx-h100"], capsys)
    assert code == 2 and "malformed YAML at line" in err


def test_malformed_json(tmp_path, capsys):
    path = write(tmp_path, "c.json", '{"name": "x", "gpus_per_node": 8,,}')
    code, _, err = run(["plan", "--model", "llama3-8b", "--cluster", path], capsys)
    assert code == 2 and "malformed JSON at line 1" in err


def test_bad_cluster_file_field(tmp_path, capsys):
    cluster = {
        "name": "c",
        "gpu": "h100-sxm-80gb",
        "gpus_per_node": 8,
        "num_gpus": 16,
        "tiers": [
            {"name": "nvlink", "domain_size": 8, "bandwidth_gb_per_s": -450, "latency_us": 3}
        ],
    }
    path = write(tmp_path, "c.json", json.dumps(cluster))
    code, _, err = run(["plan", "--model", "llama3-8b", "--cluster", path], capsys)
    assert code == 2 and "tiers.0.bandwidth_gb_per_s: Input should be greater than or equal to 0.001" in err


def test_unknown_flag_is_bad_input(capsys):
    code, _, err = run(
        ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpu", "8"], capsys
    )
    assert code == 2 and "unrecognized arguments" in err


def test_no_feasible_plan_exits_1_with_reason(capsys):
    argv = [
        "plan",
        "--model",
        "llama3.1-405b",
        "--cluster",
        "dgx-h100",
        "--gpus",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "8192",
    ]
    code, out, err = run(argv, capsys)
    assert code == 1 and out == ""
    assert "no layout fits in memory: the smallest peak" in err and "GiB is usable" in err


def test_console_entry_point_reports_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "plan", "--model", "nope", "--cluster", "dgx-h100"],
        capture_output=True,
        text=True,
        check=False,  # the exit code is what this test checks
    )
    assert proc.returncode == 2
    assert "unknown model preset 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_pins_that_cannot_multiply_to_the_gpu_count_are_named(capsys):
    # Issue 20: a pin that can never divide the GPUs is bad input (2), not an infeasible search.
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "16", "--tp", "3"]
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert "tp 3: a pinned degree must divide the number of GPUs (16); 16 / 3 = 5.33" in err
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "3"]
    assert run(argv, capsys)[0] == 2
    argv = [*argv[:-2], "--tp", "8", "--pp", "16"]  # each divides 64, together they do not
    code, out, err = run(argv, capsys)
    assert code == 2 and "pinned degrees (tp 8 x pp 16 = 128) do not divide the 64 GPUs" in err
