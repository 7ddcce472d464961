"""Goodput in the reports: the PLAN's JSON object, a line per plan, and the HTML breakdown."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from cost_models.goodput import Goodput


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def goodput_dict(g: Goodput) -> dict[str, Any]:
    """CONTRACT.md's six keys first, then the breakdown behind them."""
    return {
        **g.contract(),
        "unexpected_per_day": g.interruptions_per_day - g.per_day_by_component.get("planned", 0.0),
        "per_day_by_component": dict(g.per_day_by_component),
        "mtbf_s": _finite(g.mtbf_s),
        "checkpoint_rank_gb": g.checkpoint_rank_gb,
        "checkpoint_total_gb": g.checkpoint_total_gb,
        "checkpoint_blocking_s": g.checkpoint_blocking_s,
        "spare_free_probability": g.spare_free,
        "spare_gpus": g.spare_gpus,
        "step_time_s": g.step_time_s,
        "straggler_step_time_s": g.straggler_step_s,
        "tokens_per_s_per_gpu": g.tokens_per_s_per_gpu,
    }


def _interval(g: Goodput) -> str:
    s = g.checkpoint_interval_s
    return "never" if not math.isfinite(s) else f"every {s / 60:,.1f} min"


def goodput_line(g: Goodput) -> str:
    """One line: what failures and slow GPUs leave of the plan's throughput."""
    straggle = ""
    if g.straggler_step_s > g.step_time_s:
        straggle = f", stragglers +{g.straggler_step_s / g.step_time_s - 1:.1%} step"
    return (
        f"goodput {g.goodput_tokens_per_s_per_gpu:,.1f} tokens/s/GPU: ETTR {g.ettr:.1%} with "
        f"{g.interruptions_per_day:.2f} interruptions/day, checkpoint {_interval(g)} "
        f"({g.checkpoint_write_s:,.1f} s write, {g.checkpoint_rank_gb:,.2f} GB/rank), restart "
        f"{g.restart_s:,.0f} s{straggle}"
    )


def goodput_rows(g: Goodput) -> list[tuple[str, str]]:
    """(label, value) rows of the breakdown, for the HTML report and the terminal table."""
    rows = [
        ("tokens/s/GPU (step time)", f"{g.tokens_per_s_per_gpu:,.1f}"),
        ("step with stragglers", f"{g.straggler_step_s:,.3f} s (nominal {g.step_time_s:,.3f} s)"),
        ("interruptions per day", f"{g.interruptions_per_day:.2f}"),
    ]
    rows += [(f"  {name}", f"{v:.3f}/day") for name, v in g.per_day_by_component.items()]
    mtbf = "none" if not math.isfinite(g.mtbf_s) else f"{g.mtbf_s / 3600:,.2f} h"
    rows += [
        ("mean time between unexpected interruptions", mtbf),
        ("checkpoint per rank / total", f"{g.checkpoint_rank_gb:,.2f} GB / "
         f"{g.checkpoint_total_gb:,.0f} GB"),
        ("checkpoint write / training paused", f"{g.checkpoint_write_s:,.2f} s / "
         f"{g.checkpoint_blocking_s:,.2f} s"),
        ("checkpoint interval", _interval(g)),
        ("restart (relaunch, replacement, load)", f"{g.restart_s:,.0f} s"),
        ("hot spare free at a failure", f"{g.spare_free:.0%} ({g.spare_gpus} spare GPUs)"),
        ("ETTR", f"{g.ettr:.2%}"),
        ("goodput tokens/s/GPU", f"{g.goodput_tokens_per_s_per_gpu:,.1f}"),
    ]
    return rows


def goodput_html(g: Goodput) -> str:
    body = "".join(
        f"<tr><td>{escape(k)}</td><td class=\"num\">{escape(v)}</td></tr>"
        for k, v in goodput_rows(g)
    )
    return (
        "<h2>Goodput</h2><p class=\"sub\">Failures, checkpoints and stragglers "
        "(docs/goodput.md).</p><table>" + body + "</table>"
    )


def goodput_conclusions(labelled: list[tuple[str, Goodput, float | None]]) -> list[str]:
    """What a reliability sweep says: the value with the cheapest kept token (with a price),
    else the most goodput, against the baseline (the first row). Rows: (label, figures, $/M)."""
    base_label, base, base_cost = labelled[0]
    if base_cost is not None:
        label, g, cost = min(labelled, key=lambda t: (t[2], -t[1].goodput_tokens_per_s_per_gpu))
        if label == base_label:
            return [f"No value beats the baseline's ${base_cost:.3f} per million kept tokens."]
        return [
            f"Cheapest per kept token: {label} at ${cost:.3f}/M (baseline ${base_cost:.3f}/M), "
            f"ETTR {g.ettr:.1%} vs {base.ettr:.1%}."
        ]
    label, g, _ = max(labelled, key=lambda t: t[1].goodput_tokens_per_s_per_gpu)
    return [
        f"Most goodput: {label} at {g.goodput_tokens_per_s_per_gpu:,.1f} tokens/s/GPU (baseline "
        f"{base.goodput_tokens_per_s_per_gpu:,.1f}), ETTR {g.ettr:.1%} vs {base.ettr:.1%}."
    ]
