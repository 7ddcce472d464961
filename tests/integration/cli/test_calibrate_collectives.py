"""`calibrate --nccl-tests` stores the measured curves; the calibrated cluster prices every
measured point from them (issue 32), logs in nccl-tests' own text format."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from calibration_fixtures import SIZES, nccl_log_text

import models_zoo
from cost_models.commtable import CollectiveBook, group_span, model_time_s
from planner.calibrate import nccl
from planner.cli import main

GPN = 8


def _wobble(size: int) -> float:
    """Measured / modelled time that no alpha-beta curve follows (protocol switches, chunking):
    1.05 .. 1.55 with the size."""
    return 1.3 + 0.25 * math.sin(math.log(size))


def _log(tmp: Path, name: str, coll: str, ranks: int, nodes: int, algo: str | None = None) -> str:
    c = models_zoo.load_cluster("dgx-h100")
    span = group_span(ranks, nodes, c)
    times = [(s, 1e6 * model_time_s(coll, s, span, c.tiers) * _wobble(s)) for s in SIZES]
    text = nccl_log_text(coll, times, ranks=ranks, gpus_per_node=ranks // nodes)
    if algo:  # NCCL's own line under NCCL_DEBUG=INFO when NCCL_ALGO is set
        text = f"node000:4000:4000 [0] NCCL INFO NCCL_ALGO set by environment to {algo}\n" + text
    path = tmp / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def logs(tmp_path: Path) -> list[str]:
    return [
        _log(tmp_path, "ar_nvlink.txt", "all_reduce", 8, 1),
        _log(tmp_path, "ar_2nodes.txt", "all_reduce", 16, 2),
        _log(tmp_path, "ag_2nodes.txt", "all_gather", 16, 2),
        _log(tmp_path, "rs_4x1.txt", "reduce_scatter", 4, 4),  # one rank per node
        _log(tmp_path, "a2a_2nodes.txt", "all_to_all", 16, 2),
        _log(tmp_path, "sr_pair.txt", "sendrecv", 2, 2, algo="Ring"),
    ]


def test_calibrated_cluster_reproduces_every_measured_point(logs, tmp_path, capsys) -> None:
    out = tmp_path / "cal.yaml"
    args = ["calibrate", "--cluster", "dgx-h100", "--nccl-tests", *logs, "--out", str(out)]
    code = main([*args, "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    cl = models_zoo.load_cluster(str(out))  # through the written file
    assert cl.kernels is not None and cl.kernels.source.startswith("nccl-tests: ")
    assert len(cl.kernels.collectives) == len(logs) * len(SIZES)
    book = CollectiveBook(cl)
    worst = 0.0
    for path in logs:
        log = nccl.parse_log(path)
        span = group_span(log.ranks, log.num_nodes, cl)
        for r in log.rows:
            priced = model_time_s(log.collective, r.size_bytes, span, cl.tiers)
            priced *= book.factor(log.collective, span, r.size_bytes)
            worst = max(worst, abs(priced / (r.time_us * 1e-6) - 1))
    assert worst < 0.03, worst
    for rep in report["nccl"]:
        assert rep["max_busbw_error_pct"] < 3.0
        assert rep["model_max_busbw_error_pct"] > 5.0  # the fitted alpha-beta alone cannot
    sr = next(r for r in report["nccl"] if r["collective"] == "sendrecv")
    assert sr["algorithm"] == "ring" and sr["nodes"] == 2 and sr["tier"] == "ib"


def test_estimate_explain_and_json_name_the_table(logs, tmp_path, capsys) -> None:
    out = tmp_path / "cal.yaml"
    calibrate = ["calibrate", "--cluster", "dgx-h100", "--kernels", "builtin", "--nccl-tests", *logs,
                 "--out", str(out)]  # fmt: skip
    assert main(calibrate) == 0
    capsys.readouterr()
    shape = ["--gpus", "32", "--global-batch", "64", "--tp", "8", "--pp", "2", "--dp", "2"]
    args = ["estimate", "--model", "llama3-8b", "--cluster", str(out), *shape]
    assert main([*args, "--json"]) == 0
    kern = json.loads(capsys.readouterr().out)["kernels"]
    # the measured collectives and the shipped compute tables (--kernels builtin), both named
    assert "nccl-tests: " in kern["table"] and "builtin h100-sxm-80gb" in kern["table"]
    compute = {"gemm", "attention", "memory_bound", "adam", "grad_clip"}  # + the step tail's
    assert set(kern["terms"]) == {"tp_comm", "dp_comm", "pp_comm"} | compute
    assert kern["terms"]["adam"]["measured"] == 1  # the shipped H100 folder's profiled rows
    assert kern["terms"]["tp_comm"]["measured"] + kern["terms"]["tp_comm"]["interpolated"] > 0
    assert main([*args, "--explain"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "kernel tables: builtin h100-sxm-80gb" in text and "nccl-tests:" in text
    assert "tp_comm:" in text and "pp_comm:" in text
    preset = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", *shape, "--explain"]
    assert main(preset) == 0  # the preset as shipped: attention from its tables, the rest the curve
    text = " ".join(capsys.readouterr().out.split())
    assert "kernel tables: builtin h100-sxm-80gb" in text and "(attention only)" in text
    # the GEMMs are not extrapolated from the table: it holds none of them, by the preset's choice
    assert "none in the tables (no gemm rows): priced on the efficiency curve" in text
    assert main([*preset[:-1], "--json"]) == 0
    kern = json.loads(capsys.readouterr().out)["kernels"]
    assert kern["without_rows"] == ["gemm", "grouped_gemm", "memory_bound"]
    att = kern["terms"]["attention"]
    assert att["measured"] + att["interpolated"] > 0 and att["extrapolated"] == 0
    preset = ["estimate", "--model", "llama3-8b", "--cluster", "dgx-a100", *shape, "--explain"]
    assert main(preset) == 0  # no tables ship for the A100
    assert "no kernel tables" in " ".join(capsys.readouterr().out.split())


def test_collectives_csv_in_a_kernel_folder(tmp_path, capsys) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "collectives.csv").write_text(
        "collective,ranks,nodes,bytes,busbw_gb_per_s,algorithm\n"
        "all_reduce_perf,8,1,1048576,100,\n"
        "allreduce,8,1,4194304,,\n"
    )
    out = tmp_path / "cal.yaml"
    args = ["calibrate", "--cluster", "dgx-h100", "--kernels", str(folder), "--out", str(out)]
    assert main(args) == 2
    assert "collectives.csv:3: time_us" in capsys.readouterr().err
    (folder / "collectives.csv").write_text(
        "collective,ranks,nodes,bytes,time_us\nall_reduce,8,1,1048576,20.0\nalltoall,16,2,1024,9\n"
    )
    assert main(args) == 0
    cl = models_zoo.load_cluster(str(out))
    assert cl.kernels is not None
    (ar, a2a) = cl.kernels.collectives
    assert ar[0] == "all_reduce" and ar[4] == pytest.approx(1048576 / 20e-6 / 1e9 * 2 * 7 / 8)
    assert a2a[:3] == ("all_to_all", 16, 2) and a2a[5] == "auto"
    (folder / "collectives.csv").write_text(
        "collective,ranks,nodes,bytes,time_us\nbroadcast,8,1,1048576,20.0\n"
    )
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "collectives.csv:2: collective must be one of" in err[0]
