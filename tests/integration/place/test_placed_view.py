"""Issue 27: one placed view. With an allocation the terminal (80 and 120 columns), Markdown and
HTML reports show the placed rank map, the groups on the placed map and the Allocation section
with the same cells, and --json carries the same step times, solver result and hosts in its
`allocation` object (CONTRACT.md); the ranking follows the placed step times."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest

from cost_models.specs import Axis
from planner import api
from planner.cli import main

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "allocation"
ARGV = [
    "plan", "--model", "llama3.1-70b", "--cluster", "llama3-roce-24k", "--global-batch", "64",
    "--topology", str(EXAMPLE / "topology.conf"), "--hosts", str(EXAMPLE / "hostfile"),
    "--exclude", "gpu010", "--pp", "2",
]  # fmt: skip
KINDS = ("TP", "CP", "DP", "PP", "DP x CP grad")
"""The group rows of a placed plan, in order; the CP row only where the plan has CP > 1."""


def _run(argv: list[str], columns: int | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if columns is not None:
            old = os.environ.get("COLUMNS")
            os.environ["COLUMNS"] = str(columns)
            try:
                assert main(argv) == 0
            finally:
                os.environ.pop("COLUMNS")
                if old is not None:
                    os.environ["COLUMNS"] = old
        else:
            assert main(argv) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def formats(tmp_path_factory) -> dict[str, str]:
    page = tmp_path_factory.mktemp("html") / "report.html"
    out = {"json": _run([*ARGV, "--json", "--html", str(page)])}
    out["html"] = page.read_text(encoding="utf-8")
    out["markdown"] = _run([*ARGV, "--markdown"])
    handoff = tmp_path_factory.mktemp("handoff")  # its "wrote ..." line wraps at 80 too
    out["terminal80"] = _run([*ARGV, "--out-dir", str(handoff)], 80)
    out["terminal120"] = _run(ARGV, 120)
    return out


def _html_rows(page: str) -> list[list[str]]:
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)
        rows.append([unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def _md_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|") and not line.startswith("| ---")
    ]


def _flat(text: str) -> str:
    """Whitespace (and table bars) collapsed: wrapped terminal lines read as one line."""
    return " ".join(text.replace("|", " ").split())


def test_every_format_shows_the_json_numbers_and_hosts(formats):
    payload = json.loads(formats["json"])
    alloc = payload["allocation"]
    steps = alloc["step_time_s"]
    assert payload["best"]["estimate"]["step_time_s"] == steps["placed"]
    solver = alloc["solver"]
    hosts = alloc["hostfile"]
    assert len(hosts) == 16 and len(set(hosts)) == 16 and "gpu010" not in hosts
    html_text = unescape(re.sub(r"<[^>]+>", " ", formats["html"]))
    texts = {k: formats[k] for k in ("markdown", "terminal80", "terminal120")}
    texts["html"] = html_text
    expected = [
        f"scheduler's order {steps['scheduler_order']:.4f}",
        f"best rank order {steps['best_rank_order']:.4f}",
        f"placed (from cp-sat) {steps['placed']:.4f}",
        f"solver: CP-SAT {solver['status']}, objective {solver['objective']:.4f} s, bound "
        f"{solver['best_bound']:.4f} s, gap {100 * solver['gap']:.2f}%",
        "hosts in node-rank order (the placed hostfile): " + " ".join(hosts),
        "dropped gpu010: drained (--exclude)",
        "16 hosts kept x 8 GPUs = 128 GPUs",
        "Search (on an ideal block, before placement)",  # its objective is not the placed one
    ]
    for name, text in texts.items():
        flat = _flat(text)
        for want in expected:
            assert want in flat, (name, want)
        # the ideal block's rank map and groups are not shown beside the placed ones
        assert "Groups: GPUs of one group" not in flat and "Rank map: order" not in flat, name


def test_rank_map_and_groups_are_the_same_cells_in_every_format(formats):
    md = _md_rows(formats["markdown"])
    html = _html_rows(formats["html"])
    groups = [r for r in md if r[0] in KINDS]
    cp = json.loads(formats["json"])["best"]["layout"]["cp"]
    assert [r[0] for r in groups] == [k for k in KINDS if k != "CP" or cp > 1]
    ranks = [r for r in md if len(r) == 7 and r[1].startswith("gpu")]
    assert len(ranks) == 16
    for row in groups + ranks:
        assert row in html, row
        assert " ".join(row) in _flat(formats["terminal120"]), row
    payload = json.loads(formats["json"])
    by_rank = {r["rank"]: r for r in payload["allocation"]["ranks"]}
    for row in ranks:  # the rank map's hosts are the JSON's
        assert by_rank[int(row[0])]["host"] == row[1] and by_rank[int(row[0])]["local_gpu"] == int(
            row[2]
        )
    # 80 columns: the groups table keeps the group, size, slowest tier, crossing and scheduler
    narrow = _flat(formats["terminal80"])
    for row in groups:
        assert " ".join([row[0], row[1], *row[-3:]]) in narrow, row


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_lines_fit_the_width(formats, width):
    lines = formats[f"terminal{width}"].splitlines()
    assert max(len(line) for line in lines) <= width
    assert any(line.startswith("Allocation: 16 hosts kept") for line in lines)
    assert width == 120 or any(line.startswith("wrote ") for line in lines)


def test_ranking_follows_the_placed_step_times(formats):
    payload = json.loads(formats["json"])
    steps = [p["estimate"]["step_time_s"] for p in payload["ranked"]]
    assert steps == sorted(steps) and steps[0] == payload["allocation"]["step_time_s"]["placed"]
    assert all("fastest" not in p for p in payload["ranked"])
    assert f"step {steps[0]:,.3f} s" in formats["terminal120"]


def test_rerank_resets_the_fastest_and_keeps_only_same_order_equivalents(monkeypatch):
    """The search recommended #1 (simpler) over the faster #2 (fastest_index 1); once placed the
    plans are ranked by their placed step times, so #1 is the fastest."""
    order = (Axis.TP, Axis.CP, Axis.DP, Axis.PP)
    other = (Axis.TP, Axis.CP, Axis.PP, Axis.DP)

    def est(step: float) -> SimpleNamespace:
        return SimpleNamespace(step_time_s=step, layout=SimpleNamespace(order=order))

    ideal_a, ideal_b = est(1.0), est(0.99)
    z2 = SimpleNamespace(order=order, zero_stage=2)
    reordered = SimpleNamespace(order=other, zero_stage=1)
    updates = {}
    result = SimpleNamespace(
        usable_memory_gib=70.0,
        equivalents=((z2,), (reordered, z2)),
        model_copy=lambda update: updates.update(update) or "copied",
    )
    placements = [
        SimpleNamespace(ideal=ideal_a, placed=est(1.30)),
        SimpleNamespace(ideal=ideal_b, placed=est(1.10)),
    ]
    shortlist = [(ideal_a, None), (ideal_b, None)]
    monkeypatch.setattr(api, "judge_fit", lambda e, usable: e)
    assert api._ranked_by_placement(result, shortlist, placements, 3) == "copied"
    assert updates["fastest_index"] == 0
    assert [e.step_time_s for e in updates["ranked"]] == [1.10, 1.30]
    assert updates["equivalents"] == ((z2,), (z2,))  # plan b's: the other order dropped
