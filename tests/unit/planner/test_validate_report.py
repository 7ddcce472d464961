"""`planner validate` as a reader sees it (issue 20): ids whole at 80 and 120 columns, notes as
footnotes, and a record whose predicted peak exceeds HBM says it cannot fit as described."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import factories as f
import pytest
from rich.console import Console
from shared_data import published_runs
from snapshot import assert_readable, check_snapshot

from planner.report.validation import render_validation
from planner.validate import validate_record

RUNS = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "published_runs.yaml"
PICK = (
    "mbridge-25.11-gb200-llama3-70b",  # 402 GiB predicted on 184 GiB GPUs: say so
    "torchtitan-202412-h100-llama31-405b-512gpu-interleaved-1f1b",  # the longest id
    "mbridge-25.11-h100-qwen3-235b-a22b",
)


def picked_rows():
    if not RUNS.exists():
        pytest.skip("shared/data/published_runs.yaml not present")
    records = {r["id"]: r for r in published_runs()}
    return [validate_record(records[i]) for i in PICK if i in records]


def frozen_rows():
    """The picked rows with their estimates as frozen on disk (factories.frozen): the snapshot
    tests the table, not today's cost model."""
    return [
        r
        if r.estimate is None
        else dataclasses.replace(r, estimate=f.frozen(f"validate_{r.id}", lambda r=r: r.estimate))
        for r in picked_rows()
    ]


@pytest.mark.parametrize("width", [80, 120])
def test_validate_snapshot_keeps_ids_whole(width):
    rows = frozen_rows()
    buf = io.StringIO()
    Console(width=width, color_system=None, file=buf).print(render_validation(rows))
    text = buf.getvalue()
    check_snapshot(f"validate_{width}.txt", text)
    assert_readable(text, width)
    for r in rows:  # every id whole on one line, at either width
        assert any(line.split()[:1] == [r.id] for line in text.splitlines()), r.id


def test_gb200_llama3_70b_says_it_cannot_fit_as_described():
    rows = {r.id: r for r in picked_rows()}
    row = rows["mbridge-25.11-gb200-llama3-70b"]
    assert row.estimate.peak_memory_gib > row.hbm_gib == 184
    assert row.fit_note.startswith("cannot fit as described: predicted peak")
    assert "recompute=none" in row.fit_note  # the record does not state its recompute


# ---------------------------------------------------------------- layout pair order (issue 32)

MODEL = {
    "name": "toy", "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 8,
    "num_kv_heads": 8, "ffn_hidden_size": 4096, "vocab_size": 32000, "seq_len": 2048,
}  # fmt: skip


def _record(rid, tp, dp, measured, *, batch=64, gpu="h100-sxm-80gb", name="toy", seq=2048):
    return {
        "id": rid,
        "model": {**MODEL, "name": name, "seq_len": seq},
        "gpu": gpu,
        "num_gpus": tp * dp,
        "gpus_per_node": 8,
        "layout": {"tp": tp, "pp": 1, "dp": dp, "global_batch_seqs": batch},
        "measured_tokens_per_s_per_gpu": measured,
    }


def _order(records):
    from planner.validate import pair_order

    return pair_order([validate_record(r) for r in records])


def test_pair_order_counts_layout_pairs_of_the_same_job():
    from planner.validate import validate_record as score

    pred = {tp: score(_record("x", tp, 8 // tp, 1.0)).estimate.tokens_per_s_per_gpu
            for tp in (1, 2, 4)}  # fmt: skip
    fast, mid, slow = sorted(pred, key=lambda tp: -pred[tp])
    # Measured in the predicted order: the three layouts of one job make three agreeing pairs.
    agree = [_record(f"tp{tp}", tp, 8 // tp, m) for tp, m in ((fast, 300), (mid, 200), (slow, 100))]
    order = _order(agree)
    assert (order.pairs, order.agree, order.jobs, order.disagree) == (3, 3, 1, ())
    assert order.fraction == 1.0
    # Swap the measured figures of the fastest and slowest: two of three pairs now disagree.
    swapped = [_record(f"tp{tp}", tp, 8 // tp, m) for tp, m in ((fast, 100), (mid, 200), (slow, 300))]
    order = _order(swapped)
    assert (order.pairs, order.agree) == (3, 0)
    assert set(order.disagree) == {
        (f"tp{slow}", f"tp{fast}"), (f"tp{mid}", f"tp{fast}"), (f"tp{slow}", f"tp{mid}")
    }  # fmt: skip
    mixed = [_record("a", fast, 8 // fast, 100), _record("b", mid, 8 // mid, 200),
             _record("c", slow, 8 // slow, 50)]  # fmt: skip
    order = _order(mixed)
    assert (order.pairs, order.agree, order.disagree) == (3, 2, (("b", "a"),))
    assert order.fraction == pytest.approx(2 / 3)


def test_pair_order_pairs_only_layouts_of_the_same_model_gpu_sequence_and_batch():
    base = _record("a", 1, 8, 100)
    others = [
        _record("name only", 2, 4, 200, name="toy renamed"),  # same architecture: paired
        _record("batch", 2, 4, 200, batch=128),
        _record("gpu", 2, 4, 200, gpu="a100-sxm-80gb"),
        _record("seq", 2, 4, 200, seq=4096),
        _record("same layout", 1, 8, 120),  # a repeat of the layout: not a pair
        _record("unmeasured", 4, 2, None),
        {**_record("unscored", 4, 2, 150), "layout": {"tp": 3, "pp": 1, "dp": 1}},
        _record("tie", 4, 2, 100),  # measured tie with `a`: no order to match
    ]
    order = _order([base, *others])
    # Pairs: a / name only, name only / same layout, name only / tie, same layout / tie (not
    # a / same layout: one layout; not a / tie: a measured tie).
    assert order.pairs == 4
    assert order.jobs == 1
    lone = _order([base, others[1], others[2], others[3]])
    assert (lone.pairs, lone.fraction) == (0, None)


def test_layout_pairs_keep_releases_apart_and_set_measured_ties_aside():
    from planner.report.validation import pair_order_lines
    from planner.validate import TIE_PCT, layout_pairs, order_of, pair_order

    # Two software releases ("r1/", "r2/" in the id stand for the container a row names).
    rows = [validate_record(r) for r in (
        _record("r1/a", 1, 8, 100.0),
        _record("r1/b", 2, 4, 101.0),  # 1 % faster than r1/a: a measured tie
        _record("r1/c", 4, 2, 150.0),
        _record("r2/d", 2, 4, 300.0),  # r1/b's layout, another release
        _record("r2/e", 4, 2, 90.0),
    )]  # fmt: skip
    release = lambda row: row.id.split("/")[0]  # noqa: E731
    pairs = layout_pairs(rows, within=release)
    assert [(p.fast.id, p.slow.id) for p in pairs] == [
        ("r1/b", "r1/a"), ("r1/c", "r1/a"), ("r1/c", "r1/b"), ("r2/d", "r2/e")
    ]  # fmt: skip
    gaps = [p.measured_gap_pct for p in pairs]
    assert gaps == pytest.approx([1.0, 50.0, 150 / 101 * 100 - 100, 300 / 90 * 100 - 100])
    assert [p.tie for p in pairs] == [True, False, False, False] and TIE_PCT == 2.0
    for p in pairs:
        pred = p.fast.estimate.tokens_per_s_per_gpu / p.slow.estimate.tokens_per_s_per_gpu
        assert p.predicted_gap_pct == pytest.approx((pred - 1) * 100)
        assert p.agrees == (pred > 1)
    order = order_of(pairs)
    assert (order.pairs, order.ties, order.jobs) == (3, 1, 2)
    assert order.agree == sum(p.agrees for p in pairs[1:])
    assert order.disagree == tuple((p.fast.id, p.slow.id) for p in pairs[1:] if not p.agrees)
    assert pair_order(rows, within=release) == order
    # Without the release key the five rows are one job: every pair of different layouts
    # (10 less r1/b-r2/d and r1/c-r2/e, same layouts), r1/a-r1/b still the only tie.
    mixed = pair_order(rows)
    assert (mixed.pairs, mixed.ties, mixed.jobs) == (7, 1, 1)
    assert "; 1 measured ties, less than 2 % apart, set aside)" in pair_order_lines(order)[0]
    only_tie = order_of(pairs[:1])
    assert (only_tie.pairs, only_tie.ties, only_tie.fraction) == (0, 1, None)
    assert "1 measured ties" in pair_order_lines(only_tie)[0]


def test_pair_order_is_shown_in_text_and_markdown_not_in_json():
    from planner.report.validation import pair_order_lines, validation_markdown
    from planner.validate import PairOrder

    rows = [validate_record(r) for r in (_record("a", 1, 8, 100), _record("b", 2, 4, 300))]
    order = _order([_record("a", 1, 8, 100), _record("b", 2, 4, 300)])
    buf = io.StringIO()
    Console(width=200, color_system=None, file=buf).print(render_validation(rows))
    assert pair_order_lines(order)[0] in buf.getvalue()
    md = validation_markdown(rows, "runs.yaml")
    assert pair_order_lines(order, "- ")[0] in md
    assert "Layout pair order: 0 of 1 pairs" in pair_order_lines(PairOrder(1, 0, 1, (("b", "a"),)))[0]
    assert pair_order_lines(PairOrder(1, 0, 1, (("b", "a"),)), "- ")[1] == (
        "- b measured faster than a, predicted not faster"
    )
    assert all("pair" not in key for key in rows[0].contract_dict())
