"""Issue 28: the docs stand alone and their generated figures cannot go stale."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _script():
    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "bench/docs_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_figures"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_generated_blocks_are_current():
    """The fast blocks (schemas, presets, input limits, the accuracy tables from `planner
    validate`, the tables rendered from the committed measurement records) equal what the code
    generates now, and no page lost a block it must keep."""
    figures = _script()
    assert figures.missing_blocks() == [], "a page lost its generated-block markers"
    assert figures.stale() == [], "run python bench/docs_figures.py and commit the docs"
    text = (ROOT / "docs/contract.md").read_text()
    assert {"model-schema", "cluster-presets", "model-presets"} <= set(
        re.findall(r"<!-- generated: ([\w-]+) -->", text)
    )


@pytest.mark.slow
def test_slow_generated_blocks_are_current():
    """The examples that run the CLI for seconds each (stability, calibration, placement,
    simplicity order) print what the docs show."""
    figures = _script()
    assert figures.stale(slow=True) == [], "run python bench/docs_figures.py --slow"


@pytest.mark.slow
def test_plan_scaling_record_repeats():
    """README "Performance" is rendered from bench/results/plan_scaling.json: re-plan each case
    once and compare what repeats run to run (the wall and CPU times cannot)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import plan_scaling

    record = json.loads((ROOT / "bench/results/plan_scaling.json").read_text())
    for row in record["rows"]:
        again = plan_scaling.measure(row["case"], 0, 0, 600.0, row["stage_split"], repeat=1)
        fields = plan_scaling.deterministic_fields(None).keys()
        assert {k: again[k] for k in fields} == {k: row[k] for k in fields}, (
            f"case {row['case']}: rerun `{record['command']}`"
        )


def test_a_stale_block_is_caught(tmp_path):
    figures = _script()
    doc = tmp_path / "x.md"
    doc.write_text("<!-- generated: model-schema -->\n| old |\n<!-- end generated -->\n")
    assert figures.stale([doc]) and figures.stale([doc])[0].endswith("x.md: model-schema")
    slow = tmp_path / "y.md"
    slow.write_text("<!-- generated: stability-example -->\nold\n<!-- end generated -->\n")
    # The real generator runs the CLI for seconds (the slow test runs it): the selection of
    # slow blocks is what is checked here, with a stand-in that answers at once.
    figures.GENERATORS["stability-example"] = figures.Figure(lambda: "new", slow=True)
    assert figures.stale([slow]) == []  # a slow block is the slow test's
    assert figures.stale([slow], slow=True)[0].endswith("y.md: stability-example")


def test_every_block_name_has_a_generator():
    figures = _script()
    for path in figures.DOCS:
        for name in re.findall(r"<!-- generated: ([\w-]+) -->", path.read_text()):
            assert name in figures.GENERATORS, f"{path.name}: {name}"
    for page, names in figures.REQUIRED.items():
        assert names <= set(figures.GENERATORS), page


def test_docs_do_not_point_outside_the_repository():
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert "CONTRACT.md" not in path.read_text(), path.name
    # The model schema lives in docs/, with every ModelSpec field.
    from cost_models.specs import ModelSpec

    contract = (ROOT / "docs/contract.md").read_text()
    assert all(f"| `{name}` |" in contract for name in ModelSpec.model_fields)


def test_install_commands_name_the_distribution():
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert name == "planner-placement"
    texts = [p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]]
    texts += [p.read_text() for p in (ROOT / "planner").rglob("*.py")]
    for text in texts:
        for extra in re.findall(r"pip install '([\w.-]+)\[", text):
            assert extra in (".", name), extra


def test_goodput_derivation_quotes_its_command(capsys):
    """docs/goodput.md derives the Llama 3 405B record's goodput by hand; its bold results and
    the step time it uses are what the command it names prints."""
    from planner.cli import main

    text = (ROOT / "docs/goodput.md").read_text()
    section = text[text.index("### Llama 3 405B, 16,384 H100") : text.index("### ByteDance")]
    flat = " ".join(section.split())
    cmd = re.search(r"`(planner estimate --model llama3\.1-405b [^`]*--goodput)`", flat).group(1)
    assert main([*cmd.split()[1:], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = out["goodput"]
    bold = [float(x) for x in re.findall(r"\*\*([\d.]+)(?: per day| s)?\*\*", section)]
    assert bold == [
        round(g["interruptions_per_day"], 2),
        round(g["checkpoint_write_s"], 2),
        round(g["checkpoint_interval_s"], 1),
        round(g["restart_s"], 1),
        round(g["ettr"], 3),
    ]
    assert f"steps of {out['step_time_s']:.3f} s" in flat


def _doc_value(cell: str, unit_s: bool) -> float | None:
    cell = cell.strip()
    m = re.fullmatch(r"([\d.]+)( us| ms)?", cell)
    if m is None:
        return None
    scale = {" us": 1e-6, " ms": 1e-3, None: 1.0}[m.group(2)]
    return float(m.group(1)) * (scale if unit_s else 1.0)


def test_cost_model_calibration_table_quotes_the_constants():
    """docs/cost_model.md "Calibration": each generation's value in the table is the one in
    cost_models/calibration.py (the physics helpers change them; the table must follow)."""
    from cost_models import calibration

    text = (ROOT / "docs/cost_model.md").read_text()
    table = text[text.index("| constant | ampere | hopper | blackwell |") :].split("\n\n")[0]
    checked = 0
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = cells[0].strip("`")
        for gen, cell in zip(("ampere", "hopper", "blackwell"), cells[1:4], strict=True):
            c = calibration.calibration_for(gen)
            code = getattr(c, name, getattr(calibration, name, None))
            shown = _doc_value(cell, name.endswith("_s"))
            if code is None or shown is None:
                continue
            assert shown == pytest.approx(code, rel=1e-9), f"{name} ({gen}): {cell} vs {code}"
            checked += 1
    assert checked >= 30


def test_accuracy_notes_quote_each_records_error():
    """docs/accuracy.md's hand-written notes name records with their error in bold
    (`**id (+71 %)**`): each is the record's error now, to the digits shown."""
    figures = _script()
    rows = {r.id: r for r in figures._validation_rows()}
    text = (ROOT / "docs/accuracy.md").read_text()
    quoted = re.findall(r"\*\*([\w.-]+) \(([+-][\d.]+) %\)\*\*", text)
    assert quoted
    for rid, shown in quoted:
        digits = len(shown.split(".")[1]) if "." in shown else 0
        assert f"{rows[rid].tokens_error_pct:+.{digits}f}" == shown, rid


def test_readme_placement_figures_are_the_records():
    """README's placement paragraph quotes bench/results/place_scaling.json (rendered into
    docs/cli.md): every step time and change it names is in the record's table."""
    figures = _script()
    readme = " ".join((ROOT / "README.md").read_text().split())
    start = readme.index("Placement on a fragmented allocation")
    para = readme[start : readme.index("## Reliability", start)]
    table = figures.place_scaling()
    quoted = re.findall(r"(\d+\.\d{3} s|-\d+\.\d+ %)", para)
    assert quoted
    for figure in quoted:
        assert figure in table, figure


def _design_record() -> dict:
    return json.loads((ROOT / "bench/results/design_answers.json").read_text())


def test_design_answers_record_prices_as_the_code_does():
    """docs/networks.md's `planner design` answers are rendered from bench/results/
    design_answers.json (minutes of plan searches). What does not need a plan search is re-derived
    here: every recorded design's network capital, power and cost per GPU-hour from its bill, and
    its $ per million tokens from its recorded throughput, on this revision's price list."""
    import shlex

    import models_zoo
    from planner import network_bom
    from planner.design import pricing, search

    record = _design_record()
    assert record["revision"] and record["command"].startswith("python bench/design_answers.py")
    costs = pricing.Costs(
        pricing.DEFAULT_GPU_HOUR_USD, pricing.DEFAULT_AMORTIZATION_YEARS,
        network_bom.load_prices(None),
    )  # fmt: skip
    for case in record["cases"]:
        args = dict(zip(*[iter(shlex.split(case["args"].replace(" --no-prune", "")))] * 2))
        built = {
            c.design.name: c
            for c in search.candidates(
                models_zoo.load_gpu(args["--gpu"]), int(args["--gpus"]), args.get("--designs"),
                costs,
            )
        }  # fmt: skip
        assert case["json"]["search"]["designs"] == len(built), case["name"]
        for d in case["json"]["designs"]:
            c = built[d["name"]]
            assert d["network_capex_usd_per_gpu"] == pytest.approx(c.bill.capex_usd_per_gpu)
            assert d["network_power_w_per_gpu"] == pytest.approx(c.bill.power_w_per_gpu)
            assert d["network_usd_per_gpu_hour"] == pytest.approx(c.network_usd_per_gpu_hour)
            assert d["usd_per_m_tokens"] == pytest.approx(
                costs.usd_per_m_tokens(c.bill, d["tokens_per_s_per_gpu"])
            ), (case["name"], d["name"])
            shares = [p["share"] for p in d["plans"]]
            mixed = sum(s * p["estimate"]["tokens_per_s_per_gpu"]
                        for s, p in zip(shares, d["plans"], strict=True))  # fmt: skip
            assert d["tokens_per_s_per_gpu"] == pytest.approx(mixed)


def test_design_answer_blocks_quote_the_recorded_reports():
    """Each docs/networks.md design block holds its case's report as recorded (and the fast
    block check above keeps them equal to what the record renders)."""
    text = (ROOT / "docs/networks.md").read_text()
    for case in _design_record()["cases"]:
        block = text[text.index(f"<!-- generated: design-{case['name']} -->") :]
        block = block[: block.index("<!-- end generated -->")]
        assert f"`planner design {case['args']}`" in block
        assert "Evaluated designs" in block or case["name"] == "default"


@pytest.mark.slow
def test_design_points_record_repeats():
    """docs/search.md's backend table is rendered from bench/results/design_points.json: its
    first point's plan search, run again, finds the recorded plan (timings cannot repeat)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import design_points

    record = json.loads((ROOT / "bench/results/design_points.json").read_text())
    assert record["identical"]
    point = tuple(record["points"][0])
    assert design_points.plan_point(point) == record["results"][0], (
        f"rerun `{record['command']}`"
    )


def _record_figures() -> list[tuple[str, str]]:
    """(page, the text it must hold) for the hand-written figures of docs/accuracy.md and
    docs/cost_model.md that quote `planner validate` on the shared runs outside the bold
    `**id (+x %)**` notes: per-GPU signed medians, single records, and async-TP gains."""
    import statistics  # noqa: PLC0415

    rows = list(_script()._validation_rows())
    err = {r.id: r.tokens_error_pct for r in rows}

    def gpu(name: str) -> str:
        return f"{statistics.median(r.tokens_error_pct for r in rows if r.gpu == name and r.tokens_error_pct is not None):+.1f}"  # noqa: E501

    def gain(vanilla: str, async_tp: str) -> float:
        by = {r.id: r.estimate.tokens_per_s_per_gpu for r in rows if r.estimate is not None}
        return (by[async_tp] / by[vanilla] - 1) * 100

    ring = ["torchtitan-202412-h100-llama31-8b-8gpu-cp4-128k",
            "torchtitan-202412-h100-llama31-8b-8gpu-cp8-256k",
            "torchtitan-202412-h100-llama31-405b-512gpu-cp2-64k"]  # fmt: skip
    tt = "torchtitan-202412-h100-llama31-70b-256gpu-2d"
    gains = (
        gain("torchtitan-202506-h100-llama3-70b-256gpu-bf16-vanilla-tp",
             "torchtitan-202506-h100-llama3-70b-256gpu-bf16-async-tp"),
        gain(tt, f"{tt}-asynctp"),
        gain("torchtitan-202506-h100-llama3-8b-64gpu-float8-vanilla-tp",
             "torchtitan-202506-h100-llama3-8b-64gpu-float8-async-tp"),
    )  # fmt: skip
    compiled = gain("torchtitan-202412-h100-llama31-8b-8gpu-fsdp",
                    "torchtitan-202412-h100-llama31-8b-8gpu-fsdp-compile")  # fmt: skip
    acc, cm = "docs/accuracy.md", "docs/cost_model.md"
    q235 = err["mbridge-25.11-h100-qwen3-235b-a22b"]
    return [
        (acc, f"**GB200 {gpu('gb200')} %**"),
        (acc, f"H200 {gpu('h200-sxm-141gb')} %"),
        (acc, f"**B200 {gpu('b200')} %**"),
        (acc, f"**GB300 {gpu('gb300')} %**"),
        (acc, f"**A100-40GB {gpu('a100-sxm-40gb')} %**"),
        (acc, f"**H800 {gpu('h800-sxm-80gb')} %**"),
        (acc, f"now {err['mbridge-25.09-h100-deepseekv3']:+.1f} %; Qwen3-235B (26.04.01) -33 %, "
              f"now {err['mbridge-26.04.01-h100-qwen3-235b-a22b']:+.1f} %; DeepSeek-V3 on GB300 "
              f"-36 %, now {err['mbridge-26.08-gb300-deepseekv3']:+.1f} %."),
        (acc, f"Qwen3-235B on 25.11 ({q235:+.1f} %)"),
        (acc, "are now " + " / ".join(f"{err[r]:+.1f}" for r in ring) + " %."),
        (acc, f"+{err['mosaic-mpt-13b-h100-amp_bf16-8gpu-seq32768']:.1f} % now"),
        (cm, f"Qwen3-235B on 25.11 ({q235:+.0f} %) and DeepSeek-V3 on GB300 "
             f"({err['mbridge-26.08-gb300-deepseekv3']:+.0f} %)"),
        (cm, f"(DeepSeek-V3 EP64 on H100 {err['mbridge-25.09-h100-deepseekv3']:+.0f} %, "
             f"Qwen3-235B 26.04.01 {err['mbridge-26.04.01-h100-qwen3-235b-a22b']:+.0f} %)"),
        (cm, f"over-predicted by {err['mbridge-25.11-h100-qwen3-30b-a3b']:.1f} %"),
        (cm, f"on the code today, +{gains[0]:.1f} % and +{gains[1]:.1f} %."),
        (cm, f"(+{min(gains):.0f}-{max(gains):.0f} % predicted"),
        (cm, f"(ratio 1.16); the model gives {1 + compiled / 100:.2f}."),
    ] + [(cm, "within 3.5 % once")] * (max(abs(err[r]) for r in ring) <= 3.5)  # fmt: skip


def test_hand_written_record_figures_are_current():
    """Every figure of _record_figures stands in its page as the code computes it now (the
    within-3.5 % claim only while it holds: it drops out of the list, and fails, otherwise)."""
    figures = _record_figures()
    assert len(figures) == 17
    for page, expected in figures:
        text = " ".join((ROOT / page).read_text().split())
        assert expected in text, f"{page}: {expected!r}"
