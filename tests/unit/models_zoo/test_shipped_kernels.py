"""Kernel tables shipped as package data (models_zoo/kernels, issue 32): byte-identical to the
measured folders of ../shared/data/kernels, indexed for every GPU preset, reachable from a
cluster file as `kernels: builtin` / `{builtin: GPU_ID}`, and marked in `presets --constants`."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest
from conftest import SHARED

import models_zoo
from cost_models.errors import InvalidInput
from cost_models.specs import Cluster
from models_zoo.inputs import validated
from models_zoo.kernel_tables import (
    BUILTIN_ROOT,
    attention_rows,
    builtin_index,
    gemm_rows,
    memory_bound_rows,
    resolve_kernels,
)
from models_zoo.provenance import cluster_constants, gpu_constants
from planner.cli import main

ROOT = Path(__file__).resolve().parents[3]
MEASURED = SHARED / "data" / "kernels"
SHIPPED = ("h100-sxm-80gb", "h200-sxm-141gb")
# Files this project measured itself beyond ../shared/data/kernels (models_zoo/kernels/README.md
# names the command and the date): everything else is a byte-identical copy.
MEASURED_HERE = {
    "h100-sxm-80gb": {
        "sustained_fp8.csv", "gemm_pieces.csv", "memory_bound_profiled.csv", "attention_unfused.csv"
    },
    "h200-sxm-141gb": {"memory_bound_profiled.csv", "attention_unfused.csv"},
}


def test_every_gpu_preset_says_whether_tables_ship_and_why():
    index = builtin_index()
    assert sorted(index) == models_zoo.list_presets("gpus")
    for gpu, entry in index.items():
        if entry["folder"]:
            assert entry["basis"] == "measured" and entry["measured_by"] and entry["date"]
            assert (BUILTIN_ROOT / entry["folder"] / "gemm.csv").is_file()
        else:
            assert entry["basis"] == "none" and entry["note"], gpu
    assert sorted(g for g, e in index.items() if e["folder"]) == list(SHIPPED)


@pytest.mark.skipif(not MEASURED.is_dir(), reason="../shared/data/kernels not present")
@pytest.mark.parametrize("gpu", SHIPPED)
def test_shipped_files_are_byte_identical_to_the_measured_folder(gpu):
    measured = sorted(p.name for p in (MEASURED / gpu).glob("*.csv"))
    shipped = sorted(p.name for p in (BUILTIN_ROOT / gpu).glob("*.csv"))
    assert shipped == sorted(measured + sorted(MEASURED_HERE.get(gpu, set())))
    for name in measured:
        assert (BUILTIN_ROOT / gpu / name).read_bytes() == (MEASURED / gpu / name).read_bytes()


def test_package_data_globs_cover_every_shipped_file():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["models_zoo"]
    files = [p.relative_to(ROOT / "models_zoo").as_posix() for p in BUILTIN_ROOT.rglob("*")]
    files = [f for f in files if (ROOT / "models_zoo" / f).is_file()]
    assert len(files) >= 13
    for f in files:
        assert any(fnmatch.fnmatch(f, g) for g in globs), f


def _cluster(kernels, preset="dgx-h100") -> Cluster:
    data = models_zoo.load_cluster(preset).model_dump()
    data["kernels"] = kernels
    return validated(Cluster, resolve_kernels(data, None, "c.yaml"), "c.yaml")


@pytest.mark.skipif(not MEASURED.is_dir(), reason="../shared/data/kernels not present")
def test_builtin_gives_the_rows_of_the_measured_folder():
    own = _cluster("builtin").kernels
    named = _cluster({"builtin": "h100-sxm-80gb"}).kernels
    by_path = _cluster({"path": str(MEASURED / "h100-sxm-80gb")}).kernels
    assert own.grouped_gemm == named.grouped_gemm == by_path.grouped_gemm
    # attention: the measured folder's rows, then Megatron-LM's unfused attention measured here
    # (attention_unfused.csv, bench/make_unfused_rows.py)
    unfused = attention_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "attention_unfused.csv")
    att = [[tuple(r) for r in k.attention] for k in (own, named)]
    assert att[0] == att[1] == [*(tuple(r) for r in by_path.attention), *(tuple(r) for r in unfused)]
    # memory_bound: the measured folder's rows, then the profiled step-tail rows
    # (memory_bound_profiled.csv, bench/make_profiled_ops.py)
    profiled = memory_bound_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "memory_bound_profiled.csv")
    mem = [[tuple(r) for r in k.memory_bound] for k in (own, named)]
    assert mem[0] == mem[1]
    assert mem[0] == [*(tuple(r) for r in by_path.memory_bound), *(tuple(r) for r in profiled)]
    # gemm: the measured folder's rows, then this project's split pieces (gemm_pieces.csv)
    pieces = gemm_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "gemm_pieces.csv")
    rows = [[tuple(r) for r in k.gemm] for k in (own, named)]
    assert rows[0] == rows[1] == [*(tuple(r) for r in by_path.gemm), *(tuple(r) for r in pieces)]
    assert own.source.startswith("builtin h100-sxm-80gb") and "2026-11-26" in own.source
    h200 = _cluster("builtin", "dgx-h200").kernels
    assert h200.gemm != own.gemm and h200.source.startswith("builtin h200-sxm-141gb")


@pytest.mark.parametrize(
    ("kernels", "preset", "words"),
    [
        ("builtin", "dgx-b200", ("no built-in kernel tables for GPU 'b200'", "h100-sxm-80gb")),
        ({"builtin": "nope"}, "dgx-h100", ("GPU 'nope'", "built-in: h100-sxm-80gb")),
        ({"builtin": "h100-sxm-80gb", "path": "x"}, "dgx-h100", ("give {builtin: GPU_ID}", "tables")),
        ({"builtin": "h100-sxm-80gb", "tables": ["attn"]}, "dgx-h100",
         ("kernels.tables must be a non-empty list of gemm, attention", "'attn'")),
        ({"builtin": "h100-sxm-80gb", "tables": []}, "dgx-h100", ("non-empty list",)),
        ({"builtin": "h100-sxm-80gb", "tables": "attention"}, "dgx-h100", ("non-empty list",)),
    ],
)
def test_bad_builtin_requests_are_one_line(kernels, preset, words):
    with pytest.raises(InvalidInput) as err:
        _cluster(kernels, preset)
    msg = str(err.value)
    assert msg.startswith("c.yaml: kernels") and "\n" not in msg
    for w in words:
        assert w in msg


def test_builtin_tables_restricts_the_kinds_priced_from_measurements():
    """`kernels: {builtin: ID, tables: [attention]}`: the attention rows of the shipped folder,
    no GEMM / grouped GEMM / memory-bound rows (those terms stay on the efficiency curve) and no
    sustained GEMM rates; the source says what was kept."""
    full = _cluster({"builtin": "h100-sxm-80gb"}).kernels
    only = _cluster({"builtin": "h100-sxm-80gb", "tables": ["attention"]}).kernels
    assert only.attention == full.attention and only.attention
    assert not only.gemm and not only.grouped_gemm and not only.memory_bound
    assert only.sustained_bf16_tflops is None and full.sustained_bf16_tflops is not None
    assert only.source == f"{full.source} (attention only)"
    both = _cluster({"builtin": "h100-sxm-80gb", "tables": ["gemm", "attention"]}).kernels
    assert both.gemm == full.gemm and both.sustained_bf16_tflops == full.sustained_bf16_tflops
    assert not both.memory_bound


def test_a_cluster_file_says_builtin_and_estimate_names_the_table(tmp_path, capsys):
    data = json.loads((ROOT / "models_zoo" / "clusters" / "dgx-h100.json").read_text())
    data["kernels"] = "builtin"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    args = ["estimate", "--model", "llama3-8b", "--cluster", str(path), "--gpus", "8"]
    args += ["--global-batch", "64", "--seq-len", "8192", "--tp", "2", "--pp", "1", "--dp", "4"]
    assert main([*args, "--json"]) == 0
    kern = json.loads(capsys.readouterr().out)["kernels"]
    assert kern["table"].startswith("builtin h100-sxm-80gb")
    assert kern["terms"]["gemm"]["measured"] + kern["terms"]["gemm"]["interpolated"] > 0


def test_constants_mark_the_shipped_tables():
    h100 = {r["constant"]: r for r in gpu_constants(models_zoo.load_gpu("h100-sxm-80gb"))}
    b200 = {r["constant"]: r for r in gpu_constants(models_zoo.load_gpu("b200"))}
    assert h100["kernel_tables"]["basis"] == "measured"
    assert "../shared/data/kernels/h100-sxm-80gb" in h100["kernel_tables"]["why"]
    assert b200["kernel_tables"]["basis"] == "assumption" and b200["kernel_tables"]["value"] is None
    plain = {r["constant"]: r for r in cluster_constants(models_zoo.load_cluster("dgx-a100"))}
    assert plain["kernels"]["basis"] == "assumption"
    tabled = {r["constant"]: r for r in cluster_constants(_cluster("builtin"))}
    pieces = len(gemm_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "gemm_pieces.csv"))
    assert tabled["kernels"]["basis"] == "measured"
    assert f"{1681 + pieces} gemm" in tabled["kernels"]["why"]


def test_split_pieces_file_is_what_its_script_writes():
    """models_zoo/kernels/h100-sxm-80gb/gemm_pieces.csv comes from bench/make_gemm_pieces.py
    (three measured runs in bench/results/h100-2026-11-27, on the shipped table's level): no
    hand edit, and no piece the shipped table already holds."""
    import subprocess
    import sys

    if not MEASURED.is_dir():
        pytest.skip("../shared/data/kernels not present")
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "make_gemm_pieces.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shipped = {tuple(r[:5]) for r in gemm_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "gemm.csv")}
    pieces = gemm_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "gemm_pieces.csv")
    assert pieces and not {tuple(r[:5]) for r in pieces} & shipped


def test_profiled_ops_file_is_what_its_script_writes():
    """models_zoo/kernels/{h100-sxm-80gb,h200-sxm-141gb}/memory_bound_profiled.csv come from
    bench/make_profiled_ops.py (the step profiles committed under bench/results): no hand edit,
    only the step-tail ops the Pricer reads at their streaming rate, every row streaming."""
    import subprocess
    import sys

    from cost_models.kernels import HBM_STREAMING_BYTES
    from cost_models.stage import ADAM_OP, CHUNK_CAT_OP, CLIP_OP

    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "make_profiled_ops.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for gpu in SHIPPED:
        rows = memory_bound_rows(BUILTIN_ROOT / gpu / "memory_bound_profiled.csv")
        assert {r[0] for r in rows} == {ADAM_OP, CLIP_OP, CHUNK_CAT_OP}
        assert all(r[1] >= HBM_STREAMING_BYTES for r in rows)


def test_unfused_attention_file_is_what_its_script_writes():
    """models_zoo/kernels/{h100-sxm-80gb,h200-sxm-141gb}/attention_unfused.csv come from
    bench/make_unfused_rows.py (bench/results/h100-2026-11-28, h200-2026-11-28): no hand edit;
    each row's time is the sum of the kernels Megatron-LM runs, timed alone (by hand for the
    H100's 8 x 2,048 tokens, 32 heads of 64)."""
    import csv
    import subprocess
    import sys

    from cost_models.compute import megatron_fused_softmax

    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "make_unfused_rows.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for gpu in SHIPPED:
        rows = attention_rows(BUILTIN_ROOT / gpu / "attention_unfused.csv")
        kernels = {r[8] for r in rows}
        assert rows and kernels <= {"unfused", "unfused_torch"} and all(r[3] == r[2] for r in rows)
        # a row's kernel is the softmax Megatron-Core runs on that call
        assert all((r[8] == "unfused") == megatron_fused_softmax(r[0] * r[2], r[1]) for r in rows)
    rows = attention_rows(BUILTIN_ROOT / "h100-sxm-80gb" / "attention_unfused.csv")
    pieces = ROOT / "bench" / "results" / "h100-2026-11-28" / "unfused_pieces.csv"
    with pieces.open(newline="") as f:
        ms = {
            r["piece"]: float(r["seconds"]) * 1e3
            for r in csv.DictReader(f)
            if (r["batch"], r["seq"], r["heads"], r["head_dim"]) == ("8", "2048", "32", "64")
        }
    forward = ms["bmm1_fwd"] + ms["softmax_fwd"] + ms["bmm2_fwd"]
    backward = sum(ms[p] for p in ("bmm_dp_bwd", "bmm_dv_bwd", "softmax_bwd", "bmm_dq_bwd",
                                   "bmm_dk_bwd"))  # fmt: skip
    (row,) = [r for r in rows if r[:5] == [8, 2048, 32, 32, 64]]
    assert row[9] == pytest.approx(forward + backward, abs=1e-5)
    assert row[10] == pytest.approx(forward, abs=1e-5)
