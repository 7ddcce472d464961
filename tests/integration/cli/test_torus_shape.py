"""`whatif --vary slice-shape` (issue 16 point 5): the torus dimensions of the job's slice.

Hand computations use the cost model's torus rules (docs/networks.md, fabric kinds): per
dimension of f chips carrying L bytes per chip of a uniform all-to-all, the busy time is
max(L / (2B), f L / (8B)) on a ring closed by its wrap-around link (f = dim_size > 2) and L / B
on a dimension of 2 (no wrap-around rule, no bisection bound); B = 100 GB/s x 0.8 per link.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import models_zoo
from cost_models import comm, estimate, topology
from cost_models.errors import InvalidInput
from cost_models.specs import Layout, Workload
from cost_models.stage import ep_exchange_s
from planner import cli
from planner.report.findings import plan_warnings
from planner.whatif import vary_cluster

B = 100e9 * 0.8  # tpu-v5p-4096: bytes/s per link and direction after efficiency


def shaped(shape: str, gpus: int | None = None):
    return vary_cluster(models_zoo.load_cluster("tpu-v5p-4096", gpus), "slice-shape", shape)


def test_shape_sets_dims_and_domains() -> None:
    c = shaped("8x16x32")
    assert [(t.name, t.dim_size, t.domain_size) for t in c.tiers] == [
        ("ici-x", 8, 8),
        ("ici-y", 16, 128),
        ("ici-z", 32, None),
    ]
    assert shaped("16x16x16").tiers == models_zoo.load_cluster("tpu-v5p-4096").tiers


def test_elongated_slice_has_less_bisection_for_the_whole_slice_all_to_all() -> None:
    """All-to-all of P bytes per chip over all 4,096 chips. Tier j carries P (n - n_(j-1)) / n.
    16x16x16: every dimension closed, the busiest is x: 16 P (4095/4096) / (8B) = 2 P / B.
    8x16x32: z carries P (4096 - 128) / 4096 over 32 chips: 32 P (3968/4096) / (8B) = 3.875 P / B.
    Both pay 12 latencies of 2 us (log2 4096 levels on the slowest tier crossed)."""
    payload = 1e9
    span = [16, 256, 4096], [8, 128, 4096]
    cube, long = shaped("16x16x16"), shaped("8x16x32")
    lat = 12 * 2e-6
    t_cube = comm.all_to_all_time_s(payload, span[0], cube.tiers)
    t_long = comm.all_to_all_time_s(payload, span[1], long.tiers)
    assert t_cube == pytest.approx(16 * payload * 4095 / 4096 / (8 * B) + lat)
    assert t_long == pytest.approx(32 * payload * 3968 / 4096 / (8 * B) + lat)
    # The textbook bisection ratio is 2 (512 vs 256 wrap-around links across the long axis).
    assert (t_long - lat) / (t_cube - lat) == pytest.approx(3.875 / (2 * 4095 / 4096))


def _ep_layout(ep: int, dp: int) -> Layout:
    return Layout(tp=1, pp=1, dp=dp, ep=ep)


def test_ep_layout_gets_slower_by_the_computed_ratio_on_an_elongated_slice() -> None:
    """Qwen3-30B-A3B, EP128 over 512 chips (whole 4x4x4 cubes, full torus on v5p).
    8x8x8: EP spans [8, 64, 128]; the busiest dimension is x, 8 chips closed, carrying
    L (127/128): 8 L (127/128) / (8B). 4x4x32: EP spans [4, 16, 128]: 8 of z's 32 chips, an
    open line (bisection of one link each way), carrying L (128 - 16) / 128: 8 L (112/128) / (4B).
    The ratio of the busiest tier's time is 2 x 112 / 127 = 1.76."""
    model = models_zoo.load_model("qwen3-30b-a3b")
    work = Workload(seq_len=4096, global_batch_seqs=512)
    lo = _ep_layout(128, 512)
    busy = {}
    for shape, span in (("8x8x8", [8, 64, 128]), ("4x4x32", [4, 16, 128])):
        c = shaped(shape, 512)
        assert list(topology.spans(c, lo)["ep"]) == span
        busy[shape] = ep_exchange_s(model, c, work, lo, span)[2]
    assert max(busy["4x4x32"]) / max(busy["8x8x8"]) == pytest.approx(2 * 112 / 127)
    # Per tier, in units of L / B: closed rings max(1/2, f/8), open lines max(1, f/4), and a
    # dimension crossed by 2 members only (z of 8x8x8) at the plain link rate.
    unit = busy["8x8x8"][0] / (127 / 128)
    assert busy["8x8x8"] == pytest.approx([unit * 127 / 128, unit * 120 / 128, unit * 64 / 128])
    assert busy["4x4x32"] == pytest.approx(
        [unit * 0.5 * 127 / 128, unit * 0.5 * 124 / 128, unit * 2 * 112 / 128]
    )
    # The whole estimate feels it: the exposed expert all-to-all grows.
    e = {s: estimate(model, shaped(s, 512), work, lo) for s in ("8x8x8", "4x4x32")}
    assert e["4x4x32"].breakdown_s["ep_comm"] > 1.3 * e["8x8x8"].breakdown_s["ep_comm"]


def test_tp_on_ici_is_not_warned_about() -> None:
    """TP spanning ici-x and ici-y of a torus is the design (no NVLink domain to leave)."""
    model = models_zoo.load_model("llama3-70b")
    c = shaped("4x4x8", 128)
    lo = Layout(tp=8, pp=1, dp=16)
    assert list(topology.spans(c, lo)["tp"]) == [4, 8, 8]  # crosses ici-x into ici-y
    e = estimate(model, c, Workload(seq_len=4096, global_batch_seqs=64), lo)
    assert not [w for w in plan_warnings(c, e) if "cross the" in w]


@pytest.mark.parametrize(
    ("cluster", "shape", "message"),
    [
        ("tpu-v5p-4096", "8x8x8", "holds 512 chips but the job runs on 4,096"),
        ("tpu-v5p-4096", "16x256", "has 2 sizes; cluster tpu-v5p-4096 has 3 torus dimensions"),
        ("tpu-v5p-4096", "16x1x256", "whole numbers >= 2 joined by 'x'"),
        ("tpu-v5p-4096", "big", "whole numbers >= 2 joined by 'x'"),
        ("dgx-h100-superpod", "16x16x4", "has no torus tier"),
    ],
)
def test_bad_shapes_exit_2(capsys, cluster: str, shape: str, message: str) -> None:
    argv = ["whatif", "--model", "llama3-8b", "--cluster", cluster, "--vary", "slice-shape"]
    assert cli.main([*argv, "--values", shape]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    with pytest.raises(InvalidInput):
        vary_cluster(models_zoo.load_cluster(cluster), "slice-shape", shape)


def test_cli_slice_shape_sweep_json(capsys) -> None:
    argv = ["whatif", "--model", "qwen3-30b-a3b", "--cluster", "tpu-v5p-4096", "--gpus", "512"]
    argv += ["--global-batch", "512", "--tp", "1", "--pp", "1", "--ep", "128"]
    argv += ["--vary", "slice-shape", "--values", "8x8x8,4x4x32", "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["value"] for p in out["points"]] == ["8x8x8", "4x4x32"]
    ep = [p["breakdown_s"]["ep_comm"] for p in out["points"]]
    assert ep[1] > 1.3 * ep[0]
    # docs/networks.md quotes this command's figures.
    tok = [p["tokens_per_s_per_gpu"] for p in out["points"]]
    doc = " ".join((Path(__file__).resolve().parents[3] / "docs/networks.md").read_text().split())
    assert (
        f"time goes from {ep[0]:.3f} to {ep[1]:.3f} s per step and throughput from "
        f"{tok[0]:,.0f} to {tok[1]:,.0f} tokens/s/GPU"
    ) in doc
    # 512 chips of the 16x16x16 preset, filled innermost first: 16 x 16 x 2 of 16-chip rings.
    assert out["conclusions"][-1] == (
        "The baseline is the preset's torus as the job fills it: 16x16x2 (rings 16x16x16)."
    )


@pytest.mark.slow
def test_free_search_figure_of_the_docs(capsys) -> None:
    # docs/networks.md: "Searched freely (the same command without --tp 1 --pp 1 --ep 128), the
    # plan adapts: 4x4x32 picks EP32 ... at N tokens/s/GPU".
    argv = ["whatif", "--model", "qwen3-30b-a3b", "--cluster", "tpu-v5p-4096", "--gpus", "512"]
    argv += ["--global-batch", "512", "--vary", "slice-shape", "--values", "8x8x8,4x4x32", "--json"]
    assert cli.main(argv) == 0
    elongated = json.loads(capsys.readouterr().out)["points"][1]
    assert elongated["plan"]["layout"]["ep"] == 32
    doc = " ".join((Path(__file__).resolve().parents[3] / "docs/networks.md").read_text().split())
    assert "4x4x32 picks EP32, a 4x4x2 block of whole x and y rings, at " in doc
    assert f"at {elongated['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU" in doc
