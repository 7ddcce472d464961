"""`planner calibrate --system-file` (issue 32): a peer simulator's system file (Calculon's
systems/*.json layout) read by an importer into GEMM and memory-bound tables, marked as an
assumption. The fixture below is written here in Calculon's format (calculon/processor.py and
memory.py: the first threshold <= the op's size gives its efficiency); the expected times are
computed by hand from it."""

from __future__ import annotations

import json

import pytest

import models_zoo
from cost_models.kernels import KernelBook
from models_zoo.kernel_tables import BUILTIN_ROOT, gemm_rows
from models_zoo.provenance import cluster_constants
from planner.cli import main

STEPS = [[128, 0.9], [16, 0.8], [1, 0.5], [0, 0.1]]  # GFLOP threshold, efficiency
MEM = [[100, 0.9], [10, 0.7], [0, 0.3]]  # MB threshold, efficiency
SYSTEM = {
    "matrix": {
        "float16": {"tflops": 1000, "gflops_efficiency": STEPS},
        "float8": {"tflops": 2000, "gflops_efficiency": STEPS},
    },
    "vector": {"float16": {"tflops": 120, "gflops_efficiency": [[0, 0.5]]}},
    "mem1": {"GiB": 80, "GBps": 3000, "MB_efficiency": MEM},
    "processing_mode": "no_overlap",
    "networks": [],
}


def _calculon_s(flops: float, tflops: float) -> float:
    eff = next(e for t, e in STEPS if flops / 1e9 >= t)
    return flops / (tflops * 1e12 * eff)


def _import(tmp_path, system, *extra, cluster="dgx-h100"):
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(system))
    out = tmp_path / "c.yaml"
    args = ["calibrate", "--cluster", cluster, "--system-file", str(path), "--out", str(out)]
    code = main([*args, *extra])
    return code, out


def test_imported_tables_follow_calculons_rule_inside_each_step(tmp_path, capsys):
    code, out = _import(tmp_path, SYSTEM)
    assert code == 0
    text = capsys.readouterr().out
    assert "basis assumption" in text and "not imported networks" in text
    cl = models_zoo.load_cluster(str(out))
    assert cl.kernels.basis == "assumption" and "Calculon system file" in cl.kernels.source
    book = KernelBook(cl.kernels)
    # shapes whose FLOPs lie mid-step (>= 2x from each edge): squares and real layer shapes
    shapes = [(512, 512, 512), (1024, 2048, 1024), (2048, 4096, 2048), (8192, 8192, 8192),
              (8192, 28672, 8192), (4096, 128256, 4096)]
    for m, n, k in shapes:
        flops = 2.0 * m * n * k
        edges = [t * 1e9 for t, _ in STEPS if t]
        assert all(abs(flops / e) >= 2 or abs(e / flops) >= 2 for e in edges)
        for dtype, layout, tflops in (("bf16", "NT", 1000), ("fp8", "TN", 2000)):
            got, status = book.gemm_s(m, n, k, dtype, layout)
            assert status in ("measured", "interpolated")
            assert got == pytest.approx(_calculon_s(flops, tflops), rel=0.01), (m, n, k, dtype)
    for nbytes, eff in ((1e6, 0.3), (30e6, 0.7), (1e9, 0.9)):
        got, _ = book.memory_bound_s("rmsnorm", nbytes)
        assert got == pytest.approx(nbytes / (3000e9 * eff), rel=0.01)
    rows = {r["constant"]: r for r in cluster_constants(cl)}
    assert rows["kernels"]["basis"] == "assumption"


def test_older_layout_reads_the_same(tmp_path):
    old = dict(SYSTEM, matrix={"tflops": 1000, "gflops_efficiency": {"float16": STEPS}})
    _, new_out = _import(tmp_path, dict(SYSTEM, matrix={"float16": SYSTEM["matrix"]["float16"]}))
    new = models_zoo.load_cluster(str(new_out)).kernels.gemm
    code, old_out = _import(tmp_path, old)
    assert code == 0 and models_zoo.load_cluster(str(old_out)).kernels.gemm == new


def test_measured_tables_replace_the_imported_kinds(tmp_path):
    code, out = _import(tmp_path, SYSTEM, "--kernels", "builtin")
    assert code == 0
    cl = models_zoo.load_cluster(str(out))
    shipped = BUILTIN_ROOT / "h100-sxm-80gb"  # gemm.csv (1,681 rows) + the split pieces
    pieces = len(gemm_rows(shipped / "gemm_pieces.csv"))
    assert cl.kernels.basis == "measured" and len(cl.kernels.gemm) == 1681 + pieces
    gemm = tmp_path / "g.csv"
    gemm.write_text(
        "m,n,k,dtype,layout,time_ms\n4096,4096,4096,bf16,TN,0.2\n2048,2048,2048,bf16,TN,0.03\n"
        "8192,8192,8192,bf16,TN,1.5\n"
    )
    code, out = _import(tmp_path, SYSTEM, "--gemm", str(gemm))
    cl = models_zoo.load_cluster(str(out))
    assert code == 0 and cl.kernels.basis == "assumption"  # memory-bound rows still imported
    assert len(cl.kernels.gemm) == 3 and cl.kernels.memory_bound


@pytest.mark.parametrize(
    ("system", "words"),
    [
        ("not json", ("malformed JSON", "a Calculon system file is JSON")),
        ("[" * 3000, ("nested more than 64 levels",)),  # was a RecursionError (issue 28 fuzz)
        ({"mem1": {}}, ("matrix: required",)),
        ({"matrix": {"float32": {}}}, ("matrix: has none of float16, bfloat16, float8",)),
        (
            {"matrix": {"float16": {"tflops": 1000, "gflops_efficiency": [[1, 0.5], [16, 0.9]]}}},
            ("matrix.float16.gflops_efficiency[1]", "strictly descending"),
        ),
        (
            {"matrix": {"float16": {"tflops": 1000, "gflops_efficiency": [[16, 1.5], [0, 0.1]]}}},
            ("matrix.float16.gflops_efficiency[0]", "[0, 1]"),
        ),
        (
            {"matrix": {"float16": {"tflops": 1000, "gflops_efficiency": [[16, 0.9], [1, 0.5]]}}},
            ("matrix.float16.gflops_efficiency", "last threshold must be 0"),
        ),
        (
            {"matrix": {"float16": {"tflops": 312, "gflops_efficiency": STEPS}}},
            ("matrix.float16.tflops", "not this cluster's GPU", "h100-sxm-80gb"),
        ),
        (
            dict(SYSTEM, mem1={"GBps": -1, "MB_efficiency": MEM}),
            ("mem1.GBps", "must be a number"),
        ),
    ],
)
def test_bad_system_files_are_one_line_naming_file_and_field(tmp_path, capsys, system, words):
    path = tmp_path / "sys.json"
    path.write_text(system if isinstance(system, str) else json.dumps(system))
    args = ["calibrate", "--cluster", "dgx-h100", "--system-file", str(path)]
    assert main([*args, "--out", str(tmp_path / "o.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sys.json" in err
    for w in words:
        assert w in err, err
