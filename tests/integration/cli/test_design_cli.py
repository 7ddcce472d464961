"""`planner design` end to end (issue 29): bad input is one line and exit 2 (JSON error object
with --json), a small real search prints CONTRACT.md's JSON, deterministic, and its pruned
frontier is the full evaluation's."""

import json

import pytest

from planner.cli import main

MIX = (
    "- {model: llama3-8b, global_batch: 32, seq_len: 2048, precision: bf16, share: 0.5}\n"
    "- {model: llama3-8b, global_batch: 64, seq_len: 1024, precision: fp8, share: 0.5}\n"
)
SPACE = (
    "leaf_gpus: 16\ntechnology: [infiniband, roce]\nnic_gbps: [100, 400]\n"
    "fabric: [rail-optimised]\noversubscription: [1]\n"
)
WIDE = SPACE.replace("roce]", "roce, roce-untuned]").replace("[1]", "[1, 4]")


def _files(tmp_path, mix=MIX, space=SPACE):
    w, d = tmp_path / "mix.yaml", tmp_path / "designs.yaml"
    w.write_text(mix)
    d.write_text(space)
    return [
        "design",
        "--workload",
        str(w),
        "--gpu",
        "h100-sxm-80gb",
        "--gpus",
        "32",
        "--designs",
        str(d),
    ]


@pytest.mark.parametrize(
    ("mix", "space", "extra", "words"),
    [
        (MIX.replace("share: 0.5}\n-", "share: 0.4}\n-"), SPACE, [], "shares must sum to 1"),
        (MIX, SPACE + "scale_up: [72]\n", [], "NVLink domain is 8"),
        (MIX, SPACE, ["--gpu", "no-such-gpu"], "no-such-gpu"),
        (MIX, SPACE, ["--backend", "slurm"], "--backend"),
        (MIX, SPACE, ["--plot", "chart.pdf"], "--plot: file must end in .png or .svg"),
    ],
)
def test_bad_input_exit_2_one_line(tmp_path, capsys, mix, space, extra, words) -> None:
    args = _files(tmp_path, mix, space)
    if extra[:1] == ["--gpu"]:
        args[args.index("--gpu") + 1] = extra[1]
        extra = []
    assert main([*args, *extra, "--json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert error["exit_code"] == 2 and words in error["message"]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_workload_file(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "design",
                "--workload",
                str(tmp_path / "none.yaml"),
                "--gpu",
                "h100-sxm-80gb",
                "--gpus",
                "64",
            ]
        )
        == 2
    )
    assert "--workload: file not found" in capsys.readouterr().err


def test_design_json_contract_and_determinism(tmp_path, capsys) -> None:
    args = _files(tmp_path)
    assert main([*args, "--json"]) == 0
    first = capsys.readouterr().out
    data = json.loads(first)
    assert set(data) >= {"designs", "frontier", "best"}
    for d in data["designs"]:
        assert set(d) >= {
            "cluster",
            "network_capex_usd_per_gpu",
            "network_power_w_per_gpu",
            "tokens_per_s_per_gpu",
            "usd_per_m_tokens",
            "plans",
        }
        assert len(d["plans"]) == 2 and {"layout", "estimate"} <= set(d["plans"][0])
        assert d["cluster"]["num_gpus"] == 32
    assert data["best"] in range(len(data["designs"]))
    front = [data["designs"][i] for i in data["frontier"]]
    costs = [d["network_capex_usd_per_gpu"] for d in front]
    tokens = [d["tokens_per_s_per_gpu"] for d in front]
    assert costs == sorted(costs) and tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    search = data["search"]
    assert search["designs"] == 4 and search["skipped"]["dominated"] > 0
    assert len(data["designs"]) + sum(search["skipped"].values()) == 4
    # shares weight each workload's own tokens/s/GPU
    d = data["designs"][data["best"]]
    mean = sum(0.5 * p["estimate"]["tokens_per_s_per_gpu"] for p in d["plans"])
    assert d["tokens_per_s_per_gpu"] == pytest.approx(mean)
    assert main([*args, "--json"]) == 0
    assert capsys.readouterr().out == first


@pytest.mark.slow
def test_real_pruned_frontier_equals_unpruned(tmp_path, capsys) -> None:
    args = _files(tmp_path, space=WIDE)
    runs = []
    for extra in ([], ["--no-prune"]):
        assert main([*args, *extra, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        names = [d["name"] for d in data["designs"]]
        runs.append(
            (
                [names[i] for i in data["frontier"]],
                names[data["best"]],
                [(b["network_budget_usd_per_gpu"], names[b["design"]]) for b in data["per_budget"]],
            )
        )
    assert runs[0] == runs[1]


def test_terminal_report_reads_at_80_columns(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out_html, out_png = tmp_path / "d.html", tmp_path / "d.png"
    one = SPACE.replace("[infiniband, roce]", "[infiniband]").replace("[100, 400]", "[400]")
    args = [*_files(tmp_path, space=one), "--html", str(out_html)]
    # --plot needs the optional [plot] extra (matplotlib); the README's test install has none.
    try:
        import matplotlib  # noqa: F401

        plots = True
    except ImportError:
        plots = False
    assert main([*args, "--plot", str(out_png)] if plots else args) == 0
    text = capsys.readouterr().out
    assert "Frontier" in text and "Best design per network budget" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "<table>" in out_html.read_text()
    assert not plots or out_png.stat().st_size > 0


@pytest.mark.slow
def test_ray_backend_prints_the_local_json(tmp_path, capsys) -> None:
    """CONTRACT.md: `--backend ray` gives identical output (a local Ray, 2 workers)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")
    args = [*_files(tmp_path), "--json"]
    assert main([*args, "--workers", "2"]) == 0
    local = capsys.readouterr().out
    try:
        assert main([*args, "--backend", "ray", "--workers", "2"]) == 0
    finally:
        # evaluate() keeps the local Ray it started for the next call; later tests
        # (tests/integration/design/test_design_ray.py) start their own from none.
        ray.shutdown()
    assert capsys.readouterr().out == local
