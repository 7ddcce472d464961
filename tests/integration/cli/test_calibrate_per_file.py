"""`planner calibrate --gemm CSV --attention CSV` (issue 32): the per-file flags store their rows
as the calibrated cluster's kernel tables (looked up), and the two-constant curves fitted on them
are only the fallback outside the tables, fitted on rows that are not launch-bound."""

from __future__ import annotations

import csv

import pytest
from conftest import SHARED

import models_zoo
from cost_models.kernels import MEASURED, KernelBook, attention_fwd_flops
from planner.calibrate import calibrate
from planner.calibrate.compute_fit import LAUNCH_BOUND_S
from planner.cli import main

H100 = SHARED / "data" / "kernels" / "h100-sxm-80gb"


def _csv(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.skipif(not H100.is_dir(), reason="no ../shared kernel tables")
def test_per_file_flags_reproduce_every_measured_point_within_3_percent(tmp_path, capsys):
    out = tmp_path / "h100.yaml"
    args = ["calibrate", "--cluster", "dgx-h100", "--out", str(out)]
    args += ["--gemm", str(H100 / "gemm.csv"), "--attention", str(H100 / "attention.csv")]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    # one residual line per stored table first, then the fallback curve's constants
    table_lines = [i for i, x in enumerate(lines) if x.lstrip().startswith(("gemm:", "attention:"))]
    curve_lines = [i for i, x in enumerate(lines) if "fallback curve" in x]
    assert len(table_lines) == 2 and all("residual" in lines[i] for i in table_lines)
    assert curve_lines and max(table_lines) < min(curve_lines)
    book = KernelBook(models_zoo.load_cluster(str(out)).kernels)
    res = []
    for r in _csv(H100 / "gemm.csv"):  # read here, independently of the calibrate code
        m, n, k = (float(r[c]) for c in "mnk")
        seconds, status = book.gemm_s(m, n, k, r["dtype"], r["layout"])
        res.append(abs(seconds / (float(r["time_ms"]) * 1e-3) - 1))
        assert status == MEASURED
    for r in _csv(H100 / "attention.csv"):
        b, s, h, kv, d, dv = (
            float(r[c]) for c in ("batch", "seq", "heads", "kv_heads", "head_dim", "v_head_dim")
        )
        causal = r["causal"] == "true"
        per_flop, _ = book.attention_s_per_flop(
            b, s, h, kv, d, dv, causal=causal, window=0, kernel=r["kernel"]
        )
        seconds = per_flop[0] * attention_fwd_flops(b, s, h, d, dv, causal)
        res.append(abs(seconds / (float(r["time_ms"]) * 1e-3) - 1))
    assert len(res) == 1681 + 122 and max(res) <= 0.03


def test_contract_formats_without_optional_columns(tmp_path):
    gemm = tmp_path / "gemm.csv"
    shapes = ((1024, 1024, 1024, 400.0), (4096, 4096, 4096, 700.0), (8192, 8192, 8192, 750.0))
    gemm.write_text(
        "m,n,k,dtype,tflops,note\n" + "".join(f"{m},{n},{k},bf16,{t},x\n" for m, n, k, t in shapes)
    )
    attn = tmp_path / "attn.csv"
    attn.write_text(
        "batch,seq,heads,kv_heads,head_dim,causal,dtype,tflops\n"
        "1,4096,32,8,128,true,bf16,400\n2,8192,32,8,128,true,bf16,450\n"
    )
    # on dgx-h100 without its shipped tables: the calibration holds exactly the two files
    curve = models_zoo.load_cluster("dgx-h100").model_copy(update={"kernels": None})
    cluster, rep = calibrate(curve, gemm=str(gemm), attention=str(attn))
    book = KernelBook(cluster.kernels)
    for m, n, k, tflops in shapes:
        # no layout column: the row stands for all three passes of a Linear
        for lay in ("TN", "NN", "NT"):
            seconds, status = book.gemm_s(m, n, k, "bf16", lay)
            assert status == MEASURED
            assert seconds == pytest.approx(2 * m * n * k / (tflops * 1e12), rel=1e-9)
    # no kernel / v_head_dim / window: fused, v_head_dim = head_dim, full attention
    per_flop, status = book.attention_s_per_flop(
        2, 8192, 32, 8, 128, 128, causal=True, window=0, kernel="fused"
    )
    assert status == MEASURED
    assert per_flop[0] == pytest.approx(3.5 / 450e12, rel=1e-9)
    assert set(rep.kernels.tables) == {"gemm", "attention"}


def test_launch_bound_rows_do_not_set_the_fallback_curve(tmp_path):
    h100 = models_zoo.load_cluster("dgx-h100")
    peak = h100.gpu.peak_bf16_tflops
    rows = ["m,n,k,dtype,tflops"]
    for d in (2048, 4096, 8192):  # on the curve: ceiling 0.6, half_dim 0 (flat)
        rows.append(f"{d},{d},{d},bf16,{0.6 * peak:.6g}")
    # a toy shape at 5 us, measured near peak by a bad timer: it would lift the ceiling
    tiny = 2 * 256**3 / 5e-6 / 1e12
    assert 2 * 256**3 / (tiny * 1e12) < LAUNCH_BOUND_S
    rows.append(f"256,256,256,bf16,{min(tiny, peak):.6g}")
    gemm = tmp_path / "g.csv"
    gemm.write_text("\n".join(rows) + "\n")
    cluster, _ = calibrate("dgx-h100", gemm=str(gemm))
    fit = {f.constant: f for f in cluster.calibration.fits}["gemm_efficiency_bf16"]
    assert fit.value == pytest.approx(0.6, rel=1e-3) and fit.points == 3
    assert fit.note.startswith("fallback curve") and "1 launch-bound rows" in fit.note
    # the toy shape is still a table row: looked up as measured
    assert KernelBook(cluster.kernels).gemm_s(256, 256, 256, "bf16", "TN")[1] == MEASURED


def test_gemm_flag_replaces_the_kernels_folders_gemm(tmp_path):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "gemm.csv").write_text("m,n,k,dtype,layout,time_ms\n1024,1024,1024,bf16,TN,0.01\n")
    (folder / "attention.csv").write_text(
        "batch,seq,heads,kv_heads,head_dim,causal,dtype,time_ms\n1,4096,32,8,128,true,bf16,1.0\n"
    )
    gemm = tmp_path / "mine.csv"
    gemm.write_text(
        "m,n,k,dtype,layout,time_ms\n"
        + "".join(f"{d},{d},{d},bf16,TN,{d**3 * 3e-12:.6g}\n" for d in (2048, 4096, 8192))
    )
    cluster, _ = calibrate("dgx-h100", kernels=str(folder), gemm=str(gemm))
    assert [r[0] for r in cluster.kernels.gemm] == [2048, 4096, 8192]
    assert len(cluster.kernels.attention) == 1


@pytest.mark.parametrize(
    ("flag", "text", "needle"),
    [
        ("--gemm", "m,n,k,dtype,layout,tflops\n{rows}1024,1024,1024,bf16,XY,300\n", "layout"),
        ("--gemm", "m,n,k,dtype\n1024,1024,1024,bf16\n", "header needs one of"),
        (
            "--attention",
            "batch,seq,heads,kv_heads,head_dim,v_head_dim,causal,dtype,time_ms\n"
            "1,4096,32,8,128,128,true,bf16,1\n1,4096,32,8,128,-1,true,bf16,1\n",
            "v_head_dim",
        ),
    ],
)
def test_bad_per_file_tables_are_one_line_exit_2(tmp_path, capsys, flag, text, needle):
    ok_rows = "".join(f"{d},{d},{d},bf16,TN,500\n" for d in (2048, 4096, 8192))
    path = tmp_path / "bad.csv"
    path.write_text(text.format(rows=ok_rows))
    out = tmp_path / "o"
    code = main(["calibrate", "--cluster", "dgx-h100", flag, str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"{path}:" in err and needle in err and "\n" not in err
    assert not out.exists()
