"""`planner measure kernels --device cpu --tiny` through both paths (issue 32 item 3): the script a
GPU machine with only torch runs (`python3 planner/calibrate/sweep.py kernels --shapes FILE.json`)
and the CLI. Needs torch (the frameworks' environment, .ci/run); the default suite skips it."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (.ci/run's environment has it)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SHARED_H100 = ROOT.parent / "shared" / "data" / "kernels" / "h100-sxm-80gb"
HEADERS = {
    "gemm.csv": "m,n,k,dtype,layout,time_ms,tflops",
    "attention.csv": "batch,seq,heads,kv_heads,head_dim,v_head_dim,causal,dtype,kernel,time_ms,"
    "forward_ms",
    "grouped_gemm.csv": "experts,rows_per_expert,n,k,dtype,time_ms,tflops,dense_time_ms",
    "memory_bound.csv": "op,tokens,width,dtype,bytes,time_ms,gb_per_s",
}
PLANNER_DEPENDENCIES = (
    "pydantic", "yaml", "rich", "ortools", "cost_models", "models_zoo", "planner",
)  # fmt: skip
"""What the GPU machine may lack (numpy is not among them: torch imports it where installed)."""


def _check_folder(out: Path, kinds: tuple[str, ...]) -> None:
    for name in (f"{k}.csv" for k in kinds):
        text = (out / name).read_text().splitlines()
        assert text[0] == HEADERS[name] and len(text) > 1, name
        if SHARED_H100.is_dir():  # the shared tables' own header, column for column
            assert text[0] == (SHARED_H100 / name).read_text().splitlines()[0]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["tiny"] and meta["torch"] == torch.__version__ and "date_utc" in meta
    assert "Smoke test" in (out / "README.md").read_text()


def test_script_path_needs_torch_alone(tmp_path):
    shapes = ROOT / "bench" / "kernel_shapes" / "llama3-8b.dgx-h100.json"
    out = tmp_path / "k"
    script = ROOT / "planner" / "calibrate" / "sweep.py"
    args = ["kernels", "--shapes", str(shapes), "--out-dir", str(out), "--device", "cpu", "--tiny"]
    done = subprocess.run(
        [sys.executable, "-I", str(script), *args], capture_output=True, text=True, check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "rows ->" in done.stdout
    _check_folder(out, ("gemm", "attention", "memory_bound"))


def test_script_imports_nothing_of_the_planners_dependencies(tmp_path):
    shapes = ROOT / "bench" / "kernel_shapes" / "llama3-8b.dgx-h100.json"
    script = ROOT / "planner" / "calibrate" / "sweep.py"
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{str(script)!r}, 'kernels', '--shapes', {str(shapes)!r}, '--out-dir',"
        f" {str(tmp_path / 'k')!r}, '--device', 'cpu', '--tiny']\n"
        f"sys.path.insert(0, {str(script.parent)!r})\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted(m for m in {PLANNER_DEPENDENCIES!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_cli_path_writes_a_folder_calibrate_reads_and_toy_rows_price_no_real_gemm(tmp_path):
    from cost_models.pricer import Pricer
    from cost_models.specs import Layout
    import models_zoo
    from planner.api import make_workload
    from planner.calibrate import calibrate
    from planner.cli import main

    out = tmp_path / "k"
    args = ["measure", "kernels", "--model", "mixtral-8x7b", "--cluster", "dgx-h100"]
    args += ["--tp", "1,2", "--micro-batches", "1", "--cp", "1", "--ep", "1,8"]
    assert main([*args, "--out-dir", str(out), "--device", "cpu", "--tiny"]) == 0
    _check_folder(out, ("gemm", "attention", "grouped_gemm", "memory_bound"))
    # dgx-h100 without its shipped tables (kernels: builtin), so the toy rows are the only ones
    curve = models_zoo.load_cluster("dgx-h100").model_copy(update={"kernels": None})
    cluster, report = calibrate(curve, kernels=str(out))
    assert set(report.kernels.tables) == {"gemm", "attention", "grouped_gemm", "memory_bound"}
    # Toy rows span a toy box: every look-up of the real model falls outside it and is priced
    # by the generation's curve, exactly as without the table.
    model = models_zoo.load_model("mixtral-8x7b")
    w = make_workload(model, seq_len=4096, global_batch=64)
    lo = Layout(tp=2, dp=4, ep=8, micro_batch=1)
    with_toys = Pricer(model, models_zoo.load_cluster(cluster, 8), w).estimate(lo)
    plain = Pricer(model, models_zoo.load_cluster(curve, 8), w).estimate(lo)
    terms = with_toys.kernels["terms"]
    assert all(c["measured"] == c["interpolated"] == 0 for c in terms.values()), terms
    assert with_toys.step_time_s == pytest.approx(plain.step_time_s, rel=1e-12)


def test_windowed_cases_go_to_flex_attention_and_are_never_approximated(tmp_path):
    from planner.calibrate import kernel_sweep

    full = [1, 64, 4, 1, 16, 16, True, 0, "fused"]
    shapes = {"gemm": [], "grouped_gemm": [], "memory_bound": [], "sources": [],
              "attention": [tuple(full), tuple(full[:7] + [16, "fused"])]}  # fmt: skip
    meta = kernel_sweep.measure(shapes, tmp_path, device="cpu", min_time_s=1e-3, warm_s=0)
    assert meta["rows"]["attention"] == 1  # SDPA, the full case
    # FlexAttention has no backward on a CPU: the windowed case is listed as skipped, with why
    (skip,) = meta["skipped"]
    assert skip["row"][7] == 16 and "FlexAttention" in skip["reason"]
    assert not (tmp_path / "attention_window.csv").exists()


def test_step_tail_ops_run_and_count_their_bytes():
    """The per-step tail's kernels `planner measure` lists (kernel_shapes.STEP_TAIL_ROWS: Adam,
    the gradient clip, FSDP2's chunk_cat) run through the sweep on the CPU at toy sizes: Adam
    moves the parameters, the clip scales the gradients, chunk_cat writes the bf16 inputs into
    the fp32 buffer; every row's bytes are tensors x width x the op's bytes per element."""
    from cost_models.kernel_shapes import STEP_TAIL_ROWS, step_tail_rows
    from planner.calibrate import kernel_sweep

    assert {r[0] for r in step_tail_rows()} == set(kernel_sweep.STEP_TAIL)
    for op, tensors, width, _dtype in STEP_TAIL_ROWS:
        call = kernel_sweep.STEP_TAIL[op](torch, "cpu", 2, 64)
        call()
        call()  # again: the moments exist, the clip coefficient is a tensor
    adam = kernel_sweep._adam_call(torch, "cpu", 2, 64)
    params = adam.__self__.param_groups[0]["params"]
    before = [p.detach().clone() for p in params]
    adam()
    assert all(not torch.equal(a, p) for a, p in zip(before, params, strict=True))
    row = ("chunk_cat", 3, 32, "bf16", 3 * 32 * kernel_sweep.BYTES_PER_ELEMENT["chunk_cat"], 1)
    timed = kernel_sweep.make_timer("cpu", 0.001, 1)
    op, tokens, width, dtype, nbytes, seconds, rate = kernel_sweep.run_memory(
        torch, "cpu", timed, row
    )
    assert (op, tokens, width, nbytes) == ("chunk_cat", 3, 32, 576) and float(seconds) > 0
