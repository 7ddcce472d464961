"""The report's layout key (LAYOUT_KEY) explains every kind of token Layout.label can print, so a
reader of `plan` can decode a cell such as `split:EL` or `HSDP2x8` without the docs."""

import re

from cost_models.specs import Axis, Layout
from planner.report.text import LAYOUT_KEY

LAYOUTS = [
    Layout(
        tp=2,
        pp=4,
        dp=16,
        cp=2,
        ep=4,
        etp=2,
        vp=3,
        micro_batch=2,
        recompute="selective",
        recompute_modules=("core_attn", "layernorm"),
        zero_stage=3,
        sequence_parallel=False,
        account_for_embedding_in_pipeline_split=True,
        account_for_loss_in_pipeline_split=True,
        order=(Axis.TP, Axis.CP, Axis.PP, Axis.DP),
    ),
    Layout(
        tp=1,
        pp=1,
        dp=16,
        dp_shard=8,
        micro_batch=1,
        recompute="full",
        recompute_method="block",
        recompute_num_layers=2,
    ),
    Layout(tp=4, pp=2, dp=1, recompute="full", recompute_num_layers=3, sequence_parallel=True),
]


def _kind(token: str) -> str:
    """The part of a label token the key must name: its letters before digits or a colon
    (`split:EL` -> `split:`, `HSDP2x8` -> `HSDP`, `full:b2` -> `full:b`, `TP4` -> `TP`)."""
    if ":" in token:
        head, tail = token.split(":", 1)
        return f"{head}:" + (tail[0] if head == "full" else "")
    return re.match(r"[A-Za-z]+", token).group(0)


def test_every_label_token_kind_is_in_the_layout_key():
    kinds = {_kind(t) for lo in LAYOUTS for t in lo.label.split()}
    assert {"split:", "HSDP", "ETP", "sel:", "full:b", "full:u", "noSP", "o:"} <= kinds
    for kind in kinds - {"TP", "PP", "DP"}:  # "degrees" covers the three always shown
        assert kind in LAYOUT_KEY, f"layout key does not explain {kind!r}"
