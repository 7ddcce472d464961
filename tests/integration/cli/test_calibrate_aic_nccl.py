"""`calibrate --aiconfigurator-nccl` reads aiconfigurator's nccl_perf.parquet (nccl-tests runs on
one node) as nccl-tests logs: rows grouped per collective and GPU count, sizes from elements,
the tier fitted and the curves stored as from `--nccl-tests`. The parquet reader is pyarrow, an
optional extra: most tests hand the importer its rows directly; the real-file test runs only
where pyarrow is installed (CI has none)."""

from __future__ import annotations

import json
import sys

import pytest

import models_zoo
from cost_models.commtable import CollectiveBook, group_span, model_time_s
from cost_models.errors import InvalidInput
from planner.calibrate import aic_nccl
from planner.cli import main

MIB = 1 << 20


def _row(op="all_reduce", n=2, elements=MIB // 2, ms=0.01, dtype="half", device="NVIDIA B200"):
    return {"framework": "TRTLLM", "version": "2.29.2", "device": device, "op_name": op,
            "kernel_source": "NCCL", "nccl_dtype": dtype, "num_gpus": n,
            "message_size": elements, "latency": ms}


@pytest.fixture
def rows(monkeypatch):
    """Replace the parquet reader by a list of rows (the test sets it)."""
    holder: list[dict] = []
    monkeypatch.setattr(aic_nccl, "_read_rows", lambda path: holder)
    return holder


def test_rows_grouped_as_nccl_tests_runs_by_hand(rows):
    rows += [
        _row(elements=2 * MIB, ms=0.05),  # 4 MiB in 50 us
        _row(elements=MIB // 2, ms=0.01),  # 1 MiB in 10 us
        _row(elements=MIB, ms=0.01, dtype="int8"),  # another dtype: left out
        _row(op="alltoall", n=4, elements=MIB // 2, ms=0.02),
    ]
    ar, a2a = aic_nccl.read_nccl_perf("perf.parquet")
    assert (ar.path, ar.collective, ar.ranks, ar.num_nodes) == (
        "perf.parquet [all_reduce x2]", "all_reduce", 2, 1)
    assert ar.gpu_name == "NVIDIA B200"
    # 1 MiB = 1,048,576 bytes in 10 us: algbw 104.8576 GB/s; all-reduce over 2: busbw x 2(1)/2
    assert [(r.size_bytes, r.time_us) for r in ar.rows] == [(MIB, 10.0), (4 * MIB, 50.0)]
    assert ar.rows[0].algbw_gb_per_s == pytest.approx(104.8576)
    assert ar.rows[0].busbw_gb_per_s == pytest.approx(104.8576)
    assert ar.rows[1].busbw_gb_per_s == pytest.approx(4 * MIB / 50e-6 / 1e9)
    # all-to-all over 4: busbw = algbw x 3/4 = 52.4288 x 0.75
    assert (a2a.collective, a2a.ranks) == ("all_to_all", 4)
    assert a2a.rows[0].busbw_gb_per_s == pytest.approx(52.4288 * 0.75)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_row(op="broadcast"), "perf.parquet: row 0: op_name must be one of all_gather, alltoall"),
        (_row(n=1), "perf.parquet: row 0: num_gpus must be at least 2"),
        (_row(elements=0), "perf.parquet: row 0: message_size must be a positive integer"),
        (_row(ms=0.0), "perf.parquet: row 0: latency must be > 0 (ms)"),
        (_row(ms=float("inf")), "perf.parquet: row 0: latency must be > 0 (ms)"),
        (_row(dtype="float"), "perf.parquet: row 0: nccl_dtype must be half or int8"),
        (_row(dtype="int8"), "perf.parquet: no half rows (nccl_dtype)"),
        ({"op_name": "all_reduce"}, "perf.parquet: no column num_gpus ("),
    ],
)
def test_bad_tables_are_one_line(rows, bad, message):
    rows.append(bad)
    with pytest.raises(InvalidInput) as err:
        aic_nccl.read_nccl_perf("perf.parquet")
    assert str(err.value).startswith(message), str(err.value)


def test_several_devices_refused(rows):
    rows += [_row(), _row(n=4, device="NVIDIA H100 80GB HBM3")]
    with pytest.raises(InvalidInput, match=r"^perf.parquet: rows from several devices \(NVIDIA"):
        aic_nccl.read_nccl_perf("perf.parquet")


def _model_rows(eff: float, lat_us: float) -> list[dict]:
    """dgx-b200's NVLink tier at (eff, lat): the times an alpha-beta fit recovers exactly."""
    c = models_zoo.load_cluster("dgx-b200")
    tier = c.tiers[0].model_copy(update={"efficiency": eff, "latency_us": lat_us})
    tiers = (tier, *c.tiers[1:])
    out = []
    for op, coll in (("all_reduce", "all_reduce"), ("all_gather", "all_gather")):
        for n in (2, 8):
            span = group_span(n, 1, c)
            for size in (64 * 1024, MIB, 16 * MIB, 256 * MIB):
                ms = 1e3 * model_time_s(coll, size, span, tiers)
                out.append(_row(op=op, n=n, elements=size // 2, ms=ms))
    return out


def test_calibrate_fits_the_tier_and_keeps_every_point(rows, tmp_path, capsys):
    rows += _model_rows(0.6, 5.0)
    out = tmp_path / "cal.yaml"
    args = ["calibrate", "--cluster", "dgx-b200", "--aiconfigurator-nccl", "perf.parquet",
            "--out", str(out), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    fitted = {f["constant"]: f for f in report["fits"]}
    assert fitted["tiers.nvlink.efficiency"]["value"] == pytest.approx(0.6, rel=1e-3)
    assert fitted["tiers.nvlink.latency_us"]["value"] == pytest.approx(5.0, rel=1e-3)
    assert fitted["tiers.nvlink.efficiency"]["source"] == "perf.parquet"
    assert [f["file"] for f in report["nccl"]] == [
        "perf.parquet [all_gather x2]", "perf.parquet [all_gather x8]",
        "perf.parquet [all_reduce x2]", "perf.parquet [all_reduce x8]"]
    cl = models_zoo.load_cluster(str(out))
    assert cl.kernels is not None and cl.kernels.source == "nccl-tests: perf.parquet"
    assert len(cl.kernels.collectives) == 16
    book = CollectiveBook(cl)
    for r in rows:  # every measured point priced at its measured time
        coll, n, size = r["op_name"], r["num_gpus"], r["message_size"] * 2
        span = group_span(n, 1, cl)
        t = model_time_s(coll, size, span, cl.tiers) * book.factor(coll, span, size)
        assert t == pytest.approx(r["latency"] * 1e-3, rel=1e-6)


def test_without_pyarrow_one_line_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    args = ["calibrate", "--cluster", "dgx-b200", "--aiconfigurator-nccl", "perf.parquet",
            "--out", str(tmp_path / "cal.yaml")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: perf.parquet: reading aiconfigurator's parquet tables needs pyarrow "
                   "(pip install 'planner-placement[parquet]')"), err


def test_real_parquet_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "nccl_perf.parquet"
    pq.write_table(pa.Table.from_pylist([_row(), _row(elements=MIB, ms=0.015)]), path)
    (log,) = aic_nccl.read_nccl_perf(str(path))
    assert [(r.size_bytes, r.time_us) for r in log.rows] == [(MIB, 10.0), (2 * MIB, 15.0)]
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InvalidInput, match=r"bad.parquet: not a readable parquet table"):
        aic_nccl.read_nccl_perf(str(bad))
