"""planner calibrate / measure (issue 18): fixture logs and sweeps in the tools' own formats go
in, the fitted cluster reproduces them, round-trips, and is priced by estimate / validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from calibration_fixtures import GEMM_SHAPES, gemm_csv, nccl_log_text, write_nccl_log
from conftest import SHARED
from factories import with_builtin_tables
from shared_data import published_runs

import models_zoo
from cost_models import estimate
from cost_models.calibration import calibration_for, calibration_for_cluster
from cost_models.compute import layer_time
from cost_models.specs import ClusterCalibration, Layout
from planner.api import make_workload
from planner.calibrate import calibrate, cluster_yaml, nccl, write_cluster_file
from planner.calibrate.steps import scaled_cluster
from planner.cli import main


def run_calibrate(tmp_path: Path, capsys, flag: str, path: Path) -> tuple[int, str]:
    """`planner calibrate --cluster dgx-h100 FLAG PATH --out TMP/o.yaml`: (exit code, stderr)."""
    code = main(
        ["calibrate", "--cluster", "dgx-h100", flag, str(path), "--out", str(tmp_path / "o.yaml")]
    )
    return code, capsys.readouterr().err


def _truth(name: str, effs: list[float], lats: list[float]):
    c = models_zoo.load_cluster(name)
    tiers = tuple(
        t.model_copy(update={"efficiency": e, "latency_us": lat})
        for t, e, lat in zip(c.tiers, effs, lats, strict=True)
    )
    return c.model_copy(update={"tiers": tiers})


@pytest.fixture
def superpod_logs(tmp_path):
    truth = _truth("dgx-h100-superpod", [0.72, 0.63, 0.55], [4.0, 9.0, 14.0])
    logs = [
        write_nccl_log(tmp_path / "ar_nvlink.txt", truth, "all_reduce", 8),
        write_nccl_log(tmp_path / "ag_nvlink.txt", truth, "all_gather", 8),
        write_nccl_log(tmp_path / "ar_leaf.txt", truth, "all_reduce", 16),
        write_nccl_log(tmp_path / "rs_leaf.txt", truth, "reduce_scatter", 16),
        write_nccl_log(tmp_path / "ar_spine.txt", truth, "all_reduce", 512),
    ]
    return truth, [str(p) for p in logs]


def test_parse_log_reads_ranks_hosts_and_rows(superpod_logs):
    _, paths = superpod_logs
    log = nccl.parse_log(paths[2])
    assert (log.collective, log.ranks, log.num_nodes) == ("all_reduce", 16, 2)
    assert log.gpu_name == "NVIDIA H100 80GB HBM3"
    assert len(log.rows) == 24 and log.avg_busbw_gb_per_s > 0


def test_nccl_fit_recovers_tiers_and_reproduces_busbw(superpod_logs):
    truth, paths = superpod_logs
    cluster, report = calibrate("dgx-h100-superpod", nccl_tests=paths)
    for fitted, true in zip(cluster.tiers, truth.tiers, strict=True):
        assert fitted.efficiency == pytest.approx(true.efficiency, rel=0.01)
        assert fitted.latency_us == pytest.approx(true.latency_us, rel=0.03)
    assert {r.tier for r in report.nccl} == {"nvlink", "rail-leaf", "spine"}
    # every printed bus bandwidth (>= 1 GB/s, so 3 digits) within 3 %
    for path in paths:
        log = nccl.parse_log(path)
        for row in log.rows:
            if row.busbw_gb_per_s >= 1.0:
                pred = nccl.predicted_busbw_gb_per_s(log, cluster, row)
                assert pred == pytest.approx(row.busbw_gb_per_s, rel=0.03), (path, row.line)
    assert max(r.max_busbw_error_pct for r in report.nccl) < 3.0
    consts = {f.constant for f in report.fits}
    assert "tiers.spine.efficiency" in consts and "tiers.nvlink.latency_us" in consts


def test_cluster_file_round_trips_and_plan_commands_accept_it(superpod_logs, tmp_path, capsys):
    _, paths = superpod_logs
    out = tmp_path / "cal.yaml"
    code = main(
        [
            "calibrate",
            "--cluster",
            "dgx-h100-superpod",
            "--nccl-tests",
            *paths,
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["out"] == str(out)
    loaded = models_zoo.load_cluster(str(out))
    fitted, _ = calibrate("dgx-h100-superpod", nccl_tests=paths)
    assert loaded == fitted
    assert cluster_yaml(loaded) == out.read_text()  # write(load(file)) is the file
    fits = yaml.safe_load(out.read_text())["calibration"]["fits"]
    assert all({"source", "max_residual_pct", "value"} <= set(f) for f in fits)
    base = ["--model", "llama3-8b", "--cluster", str(out), "--gpus", "16", "--json"]
    assert (
        main(["estimate", *base, "--global-batch", "32", "--tp", "2", "--pp", "1", "--dp", "8"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["tokens_per_s_per_gpu"] > 0
    assert main(["plan", *base, "--global-batch", "32", "--time-limit", "20", "--top", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]


@pytest.mark.parametrize(
    ("kind", "needle"),
    [("cut", "log cut short"), ("mixed", "mixed GPU types"), ("garbage", "expected 'size")],
)
def test_malformed_nccl_logs_exit_2_naming_file_and_line(tmp_path, capsys, kind, needle):
    times = [(2**e, 10.0 + 2**e / 1e5) for e in range(10, 20)]
    if kind == "cut":
        text = nccl_log_text("all_reduce", times, ranks=8, gpus_per_node=8, cut_after=5)
    elif kind == "mixed":
        text = nccl_log_text(
            "all_reduce", times, ranks=8, gpus_per_node=8, mixed_gpu="NVIDIA A100-SXM4-80GB"
        )
    else:
        text = nccl_log_text("all_reduce", times, ranks=8, gpus_per_node=8)
        lines = text.splitlines()
        row = next(i for i, line in enumerate(lines) if line.strip().startswith("4096 "))
        lines[row] = lines[row][:40]  # a row cut mid-way
        text = "\n".join(lines) + "\n"
    path = tmp_path / f"{kind}_all_reduce_perf.txt"
    path.write_text(text)
    code, err = run_calibrate(tmp_path, capsys, "--nccl-tests", path)
    assert code == 2
    assert needle in err and f"{path}:" in err.replace("\n", "")
    assert not (tmp_path / "o.yaml").exists()


def half_rate_b200_gemms(path: Path, dtype: str) -> Path:
    """A GEMM sweep of a B200 whose GEMMs reach half of what the generation default assumes."""
    peak = models_zoo.load_cluster("dgx-b200").gpu.model_dump()[f"peak_{dtype}_tflops"]
    default = calibration_for("blackwell")
    eff = getattr(default, f"gemm_efficiency_{dtype}") / 2
    return gemm_csv(path, peak, eff, default.gemm_half_dim, dtype, GEMM_SHAPES)


def test_gemm_fit_reproduces_rates_and_half_peak_b200_predicts_accordingly(tmp_path, capsys):
    b200 = models_zoo.load_cluster("dgx-b200")
    default = calibration_for("blackwell")
    csv = half_rate_b200_gemms(tmp_path / "gemm.csv", "bf16")
    out = tmp_path / "b200.yaml"
    assert main(["calibrate", "--cluster", "dgx-b200", "--gemm", str(csv), "--out", str(out)]) == 0
    cal = models_zoo.load_cluster(str(out))
    c = calibration_for_cluster(cal)
    assert c.gemm_efficiency_bf16 == pytest.approx(default.gemm_efficiency_bf16 / 2, rel=0.01)
    assert c.gemm_half_dim == pytest.approx(default.gemm_half_dim, rel=0.03)
    for line in csv.read_text().splitlines()[1:]:
        m, n, k, _, tflops = line.split(",")
        eff = c.gemm_efficiency_bf16
        for d in (int(m), int(n), int(k)):
            eff *= d / (d + c.gemm_half_dim)
        assert eff * b200.gpu.peak_bf16_tflops == pytest.approx(float(tflops), rel=0.03)
    model = models_zoo.load_model("llama3-70b")
    wl = make_workload(model, seq_len=8192, global_batch=64)
    lay = Layout(tp=4, pp=2, dp=8)
    sized = models_zoo.load_cluster(str(out), 64)
    t_cal = layer_time(model, sized.gpu, calibration_for_cluster(sized), wl, lay, is_moe=False)
    t_def = layer_time(model, sized.gpu, default, wl, lay, is_moe=False)
    assert t_cal.gemm_s == pytest.approx(2 * t_def.gemm_s, rel=0.02)
    e_cal = estimate(model, sized, wl, lay)
    e_def = estimate(model, models_zoo.load_cluster("dgx-b200", 64), wl, lay)
    assert e_cal.step_time_s > 1.3 * e_def.step_time_s
    # the default is unchanged when the calibration block sets nothing
    empty = models_zoo.load_cluster("dgx-b200", 64).model_copy(
        update={"calibration": ClusterCalibration()}
    )
    assert estimate(model, empty, wl, lay) == e_def


def test_gemm_sweep_with_one_point_is_refused(tmp_path, capsys):
    csv = tmp_path / "one.csv"
    csv.write_text("m,n,k,dtype,tflops\n4096,4096,4096,bf16,700\n")
    code, err = run_calibrate(tmp_path, capsys, "--gemm", csv)
    assert code == 2 and f"{csv}:2" in err and "3 or more shapes" in err


def test_gemm_rate_above_peak_names_the_line(tmp_path, capsys):
    csv = gemm_csv(tmp_path / "g.csv", 989.0, 0.7, 300, "bf16", GEMM_SHAPES)
    lines = csv.read_text().splitlines()
    lines[3] = "2048,2048,2048,bf16,5000"
    csv.write_text("\n".join(lines) + "\n")
    code, err = run_calibrate(tmp_path, capsys, "--gemm", csv)
    assert code == 2 and f"{csv}:4" in err


def test_attention_fit(tmp_path):
    h100 = models_zoo.load_cluster("dgx-h100")
    peak = h100.gpu.peak_bf16_tflops
    rows = ["batch,seq,heads,kv_heads,head_dim,causal,dtype,kernel,tflops"]
    for b, s in ((8, 1024), (4, 2048), (2, 4096), (1, 8192)):
        rows.append(f"{b},{s},32,8,128,true,bf16,fused,{0.5 * peak:.6g}")
        rows.append(f"{b},{s},32,8,128,true,bf16,fa2,{0.3 * peak:.6g}")
    csv = tmp_path / "attn.csv"
    csv.write_text("\n".join(rows) + "\n")
    cluster, _ = calibrate("dgx-h100", attention=str(csv))
    c = calibration_for_cluster(cluster)
    assert c.attention_efficiency == pytest.approx(0.5, rel=1e-4)
    assert c.fa2_attention_speed == pytest.approx(0.6, rel=1e-4)


def _steps_yaml(path: Path, truth_cluster, runs):
    items = []
    for name, model_name, n, gb, lay in runs:
        model = models_zoo.load_model(model_name)
        wl = make_workload(model, seq_len=4096, global_batch=gb)
        e = estimate(model, models_zoo.load_cluster(truth_cluster, n), wl, lay)
        items.append(
            {
                "name": name,
                "model": model_name,
                "num_gpus": n,
                "seq_len": 4096,
                "global_batch": gb,
                "layout": lay.model_dump(mode="json", exclude={"order"}),
                "measured_step_time_s": e.step_time_s,
            }
        )
    path.write_text(yaml.safe_dump(items))
    return path


RUNS = [
    ("a", "llama3-8b", 16, 64, Layout(tp=1, pp=1, dp=16, zero_stage=1)),
    ("b", "llama3-8b", 32, 128, Layout(tp=2, pp=1, dp=16, sequence_parallel=True)),
    ("c", "llama3-8b", 64, 128, Layout(tp=1, pp=2, dp=32)),
    ("d", "llama3-8b", 16, 32, Layout(tp=4, pp=1, dp=4, sequence_parallel=True)),
]


def _curve_h100():
    """dgx-h100 on its efficiency curve alone (the preset less the attention rows it ships with,
    docs/calibration.md "Decision, 2026-11-28"): the step factors scale the curve
    (planner/calibrate/steps.py scaled_cluster)."""
    cluster = models_zoo.load_cluster("dgx-h100")
    assert cluster.kernels is not None and not cluster.kernels.gemm  # attention rows only
    return cluster.model_copy(update={"kernels": None})


def _fit_known_factors(tmp_path, base):
    """Steps priced on `base` x (compute 0.85, network 0.8), fitted back on `base`: the compute
    factor comes back within 3 %, every run and its leave-one-out prediction close."""
    truth = scaled_cluster(base, 0.85, 0.8)
    path = _steps_yaml(tmp_path / "steps.yaml", truth, RUNS)
    _, report = calibrate(base, steps_file=str(path))
    s = report.steps.json_dict()
    assert s["compute_scale"] == pytest.approx(0.85, rel=0.03)
    assert s["max_abs_error_pct"] < 3 and s["max_abs_leave_one_out_pct"] < 5
    return s, report


def test_steps_fit_recovers_global_factors_with_leave_one_out(tmp_path):
    _, report = _fit_known_factors(tmp_path, _curve_h100())
    names = {f.constant for f in report.fits}
    assert "steps.compute_scale" in names


def test_steps_fit_scales_the_measured_tables(tmp_path):
    """dgx-h100 on its shipped measured tables (`kernels: builtin`): the compute factor scales
    their GEMM / grouped GEMM / attention rows (times / factor), memory-bound rows stay."""
    base = with_builtin_tables(models_zoo.load_cluster("dgx-h100"))
    assert base.kernels is not None and base.kernels.gemm
    doubled = scaled_cluster(base, 2.0, 1.0).kernels
    m, n, k, dtype, layout, t_ms = base.kernels.gemm[0]
    assert doubled.gemm[0] == (m, n, k, dtype, layout, t_ms / 2)
    assert doubled.attention[0][9] == base.kernels.attention[0][9] / 2
    assert doubled.grouped_gemm[0][5] == base.kernels.grouped_gemm[0][5] / 2
    assert doubled.memory_bound == base.kernels.memory_bound
    s, _ = _fit_known_factors(tmp_path, base)
    # The upper bound keeps every measured GEMM row at or below its datasheet peak.
    top = s["bounds"]["compute_scale"][1]
    gpu = base.gpu
    peak = {"bf16": gpu.peak_bf16_tflops, "fp8": gpu.peak_fp8_tflops}
    fastest = max(2 * m * n * k / (t * 1e-3) / 1e12 / peak[d] for m, n, k, d, _, t in base.kernels.gemm)
    assert top * fastest == pytest.approx(1.0)


def test_steps_fit_refuses_when_a_factor_hits_its_bound(tmp_path, capsys):
    base = _curve_h100()
    path = _steps_yaml(tmp_path / "steps.yaml", base, RUNS)
    items = yaml.safe_load(path.read_text())
    for it in items:  # 3x faster than any physical efficiency allows
        it["measured_step_time_s"] /= 3
    path.write_text(yaml.safe_dump(items))
    curve = tmp_path / "curve.yaml"
    curve.write_text(cluster_yaml(base))
    args = ["calibrate", "--cluster", str(curve), "--steps", str(path)]
    code = main([*args, "--out", str(tmp_path / "o.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to fit" in err and "upper bound" in err


def test_steps_schema_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "steps.yaml"
    path.write_text(
        "- name: x\n  model: llama3-8b\n  num_gpus: 8\n  global_batch: 8\n"
        "  layout: {tp: 1, dp: 8}\n  measured_step_time_s: 1.0\n  bogus: 1\n"
    )
    code, err = run_calibrate(tmp_path, capsys, "--steps", path)
    assert code == 2 and "bogus" in err and "run 1" in err


@pytest.mark.skipif(not (SHARED / "data/published_runs.yaml").exists(), reason="no ../shared")
def test_validate_cluster_file_prices_matching_records(tmp_path, capsys):
    runs = published_runs()
    subset = [r for r in runs if r.get("gpu") == "b200"][:3]
    subset += [r for r in runs if r.get("gpu") == "h100-sxm-80gb"][:3]
    data = tmp_path / "runs.yaml"
    data.write_text(yaml.safe_dump(subset))
    csv = half_rate_b200_gemms(tmp_path / "gemm.csv", "bf16")
    fp8 = half_rate_b200_gemms(tmp_path / "fp8.csv", "fp8")
    csv.write_text(csv.read_text() + "".join(fp8.read_text().splitlines(True)[1:]))
    cal_cluster, _ = calibrate("dgx-b200", gemm=str(csv))
    out = tmp_path / "b200.yaml"
    write_cluster_file(cal_cluster, str(out))
    assert main(["validate", "--data", str(data), "--json"]) == 0
    before = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert main(["validate", "--data", str(data), "--cluster-file", str(out), "--json"]) == 0
    after = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    changed = [r["id"] for r in subset if before[r["id"]] != after[r["id"]]]
    assert changed and all(r["gpu"] == "b200" for r in subset if r["id"] in changed)
    assert all(before[r["id"]] == after[r["id"]] for r in subset if r["gpu"] != "b200")


def test_measure_nccl_dry_run_covers_every_tier(capsys):
    assert main(["measure", "nccl", "--cluster", "dgx-h100-superpod", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for tier, ranks in (("nvlink", 8), ("rail-leaf", 16), ("spine", 512)):
        assert f"# tier {tier}: {ranks} GPUs" in out
    assert "srun -N 2 " in out and "mpirun -np 512 " in out and "all_reduce_perf" in out
    # one GPU per node (DP beside TP 8) and the two-node PP hop, for the collective curves
    assert "mpirun -np 2 --map-by ppr:1:node" in out and "_1pn_sendrecv.txt" in out


def test_measure_tiny_cpu_sweep(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "gemm.csv"
    assert main(["measure", "gemm", "--device", "cpu", "--tiny", "--out", str(out)]) == 0
    header, *rows = out.read_text().splitlines()
    assert header == "m,n,k,dtype,tflops" and len(rows) == 3
    attn = tmp_path / "attn.csv"
    assert main(["measure", "attention", "--device", "cpu", "--tiny", "--out", str(attn)]) == 0
    header, *rows = attn.read_text().splitlines()
    assert header.startswith("batch,seq,heads,kv_heads,head_dim,causal,dtype") and len(rows) == 2


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter", "all_to_all", "sendrecv"])
def test_every_nccl_test_kind_fits_the_scale_out_tier(tmp_path, kind):
    truth = _truth("dgx-h100", [0.7, 0.6], [4.0, 12.0])
    paths = [
        str(write_nccl_log(tmp_path / "ar8.txt", truth, "all_reduce", 8)),
        str(write_nccl_log(tmp_path / f"{kind}16.txt", truth, kind, 16)),
    ]
    cluster, report = calibrate("dgx-h100", nccl_tests=paths)
    assert cluster.tiers[1].efficiency == pytest.approx(0.6, rel=0.01)
    assert cluster.tiers[1].latency_us == pytest.approx(12.0, rel=0.03)
    assert max(r.max_busbw_error_pct for r in report.nccl) < 3.0


def test_bus_bandwidth_above_line_rate_is_refused(tmp_path, capsys):
    # NVLS-style: the log's NVLink tier runs at twice the preset's line rate
    fast = _truth("dgx-h100", [0.7, 0.6], [4.0, 12.0])
    fast = fast.model_copy(
        update={
            "tiers": (fast.tiers[0].model_copy(update={"bandwidth_gb_per_s": 900}),)
            + fast.tiers[1:]
        }
    )
    path = write_nccl_log(tmp_path / "nvls_all_reduce.txt", fast, "all_reduce", 8)
    code, err = run_calibrate(tmp_path, capsys, "--nccl-tests", path)
    assert code == 2 and "line rate" in err and "NVLS" in err


def test_old_rank_line_format_and_gpu_mismatch(tmp_path, capsys):
    import re

    times = [(2**e, 10.0 + 2**e / 1e5) for e in range(10, 20)]
    text = nccl_log_text(
        "all_reduce", times, ranks=8, gpus_per_node=8, gpu_name="NVIDIA A100-SXM4-80GB"
    )
    # nccl-tests < 2.11: "#   Rank  0 Pid  1234 on   node000 device  0 [0x07] NAME"
    text = re.sub(r"Group\s+\d+ ", "", text)
    text = re.sub(r"\[\d{4}:([0-9a-f]{2}):\d{2}\]", r"[0x\1]", text)
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(text)
    log = nccl.parse_log(path)
    assert log.ranks == 8 and log.gpu_name == "NVIDIA A100-SXM4-80GB"
    code, err = run_calibrate(tmp_path, capsys, "--nccl-tests", path)
    assert code == 2 and "A100" in err and "measured on" in err
