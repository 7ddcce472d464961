"""`planner measure kernels` (issue 32 item 3): the shapes file it writes without torch, the one
committed for the device run, its one-line refusals, and the torch-free parts of the sweep
(planner/calibrate/kernel_sweep.py; the CPU run itself: tests/frameworks/
test_measure_kernels_cpu.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from planner.calibrate import kernel_sweep
from planner.calibrate.measure import shapes_document
from planner.cli import main

ROOT = Path(__file__).resolve().parents[3]
HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_shapes_only_writes_the_derived_rows_without_torch(tmp_path, capsys):
    out = tmp_path / "s.json"
    args = ["measure", "kernels", "--model", "llama3-8b", "--cluster", "dgx-h100"]
    args += ["--tp", "1,8", "--micro-batches", "1", "--cp", "1", "--shapes-only", str(out)]
    assert main(args) == 0
    doc = json.loads(out.read_text())
    assert doc == json.loads(json.dumps(shapes_document(
        "llama3-8b", "dgx-h100", tps=(1, 8), micro_batches=(1,), cps=(1,)
    )))  # fmt: skip
    assert doc["format"] == kernel_sweep.FORMAT and doc["seq_len"] == 8192
    assert doc["tokens"] == [8192] and doc["tps"] == [1, 8]
    # 5 GEMMs (QKV, output, FC1, FC2, LM head) + torchtitan's separate K/V and W3 matmuls, each
    # pass in bf16 and fp8 ...
    assert any(r[:3] == [8192, 128256, 4096] and r[4] == "TN" for r in doc["gemm"])
    assert capsys.readouterr().out.startswith(f"gemm {len(doc['gemm'])}, grouped_gemm 0")


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b"])
def test_committed_device_shapes_are_what_the_model_looks_up_today(model):
    path = ROOT / "bench" / "kernel_shapes" / f"{model}.dgx-h100.json"
    now = shapes_document(model, "dgx-h100", cps=(1, 2, 4))  # bench/kernel_shapes/make.sh
    assert json.loads(path.read_text()) == json.loads(json.dumps(now)), (
        f"{path} is stale: the cost model's look-ups changed; run sh bench/kernel_shapes/make.sh"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tp", "3", "--shapes-only", "x.json"], "--tp: none of 3 splits"),
        (["--dtypes", "fp4", "--shapes-only", "x.json"], "--dtypes"),
        (["--tp", "0", "--shapes-only", "x.json"], "--tp"),
        ([], "--out-dir DIR (or --shapes-only FILE) is required"),
    ],
)
def test_bad_input_is_one_line_exit_2(extra, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["measure", "kernels", "--model", "llama3-8b", "--cluster", "dgx-h100", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_missing_model_is_one_line_exit_2(capsys):
    assert main(["measure", "kernels", "--cluster", "dgx-h100", "--out-dir", "x"]) == 2
    assert "--model and --cluster are required" in capsys.readouterr().err


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed here")
def test_measuring_without_torch_says_how_to_measure_elsewhere(capsys, tmp_path):
    args = ["measure", "kernels", "--model", "llama3-8b", "--cluster", "dgx-h100"]
    assert main([*args, "--out-dir", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert "needs torch" in err and "--shapes-only" in err


def test_shapes_files_union_and_refuse_other_json(tmp_path):
    a = shapes_document("llama3-8b", "dgx-h100", tps=(8,), micro_batches=(1,), cps=(1,))
    b = shapes_document("llama3-8b", "dgx-h100", tps=(4, 8), micro_batches=(1,), cps=(1,))
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    both = kernel_sweep.read_shapes([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert {tuple(r) for r in b["gemm"]} == set(both["gemm"])  # b holds a; no duplicates
    assert len(both["gemm"]) == len(b["gemm"]) and len(both["sources"]) == 2
    (tmp_path / "c.json").write_text(json.dumps({"gemm": []}))
    with pytest.raises(ValueError, match="not a shapes file"):
        kernel_sweep.read_shapes([str(tmp_path / "c.json")])


def test_tiny_keeps_a_few_toy_rows_of_each_kind():
    doc = shapes_document("mixtral-8x7b", "dgx-h100", tps=(1, 2), micro_batches=(1,), cps=(1,))
    shapes = {k: [tuple(r) for r in doc[k]] for k in kernel_sweep.KINDS}
    tiny = kernel_sweep.tiny_shapes(shapes)
    lo, hi = kernel_sweep.TINY_DIM
    for kind in kernel_sweep.KINDS:
        assert 1 <= len(tiny[kind]) <= kernel_sweep.TINY_ROWS
    assert all(lo <= d <= hi for r in tiny["gemm"] for d in r[:3])
    assert all(e <= 4 and lo <= min(r, n, k) and max(r, n, k) <= hi
               for e, r, n, k, _d in tiny["grouped_gemm"])  # fmt: skip
    assert all(h % kv == 0 and s == 32 for _b, s, h, kv, *_ in tiny["attention"])
    assert all(b == t * w * kernel_sweep.BYTES_PER_ELEMENT[op]
               for op, t, w, _d, b, _k in tiny["memory_bound"])  # fmt: skip


def test_sweep_counts_bytes_as_the_shape_derivation_does():
    from cost_models.kernel_shapes import MEMORY_BYTES_PER_ELEMENT

    assert kernel_sweep.BYTES_PER_ELEMENT == MEMORY_BYTES_PER_ELEMENT
