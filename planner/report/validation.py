"""`planner validate` as a reader sees it: predicted vs measured as rich tables (ids never cut at
any width), the error summary, and the accuracy page (docs/accuracy.md) as Markdown. Nothing here
prints."""

from __future__ import annotations

import math

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from ..validate import TIE_PCT, PairOrder, ValidationRow, error_summary, pair_order


class _RecordTable:
    """Predicted vs measured, one row per record, ids never cut: when the longest id and the
    numbers do not fit one line, each record takes two (its id, then its numbers); notes and
    errors are numbered footnotes under the table, where they wrap as free text."""

    def __init__(self, rows: list[ValidationRow]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        with_mem = any(r.measured_peak_memory_gib for r in self.rows)
        cols = ["meas", "pred", "error", "GiB", *(["GiB m"] * with_mem), "note"]
        notes = [(r, r.error or r.fit_note) for r in self.rows]
        numbered = {id(r): i for i, (r, n) in enumerate((x for x in notes if x[1]), 1)}
        cells = []
        for r in self.rows:
            e = r.estimate
            err = r.tokens_error_pct
            cells.append(
                [
                    _num(r.measured_tokens_per_s_per_gpu),
                    _num(e.tokens_per_s_per_gpu if e else None),
                    "" if err is None else f"{err:+.1f}%",
                    _num(r.predicted_peak_gib),
                    *([_num(r.measured_peak_memory_gib)] * with_mem),
                    f"[{numbered[id(r)]}]" if id(r) in numbered else "",
                ]
            )
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
        yield Text("Predicted vs measured tokens/s/GPU", style="bold")
        # Each further column costs its width, 2 of padding and 1 of divider (box.SIMPLE_HEAD).
        longest = max((len(r.id) for r in self.rows), default=2)
        if longest + sum(w + 3 for w in widths) <= options.max_width:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
            table.add_column("id", no_wrap=True)
            for c in cols:
                table.add_column(c, justify="left" if c == "note" else "right", no_wrap=True)
            for r, row in zip(self.rows, cells, strict=True):
                table.add_row(r.id, *row)
            yield table
        else:  # narrow: each id whole on its own line, its numbers on the next
            def line(row: list[str]) -> str:
                return "  " + "   ".join(
                    v.ljust(w) if c == "note" else v.rjust(w)
                    for c, v, w in zip(cols, row, widths, strict=True)
                ).rstrip()

            header = line(cols)
            yield Text("id\n" + header, style="bold")
            yield Text("─" * min(options.max_width, max(len(header), longest)))
            for r, row in zip(self.rows, cells, strict=True):
                yield Text(r.id, no_wrap=True, overflow="ignore")
                yield Text(line(row), no_wrap=True, overflow="ignore")
        yield Text(
            "meas, pred: tokens/s/GPU measured and predicted; error: (pred - meas) / meas; "
            "GiB: predicted peak memory per GPU" + ("; GiB m: measured" if with_mem else ""),
            style="dim",
        )
        for r, note in notes:
            if note:
                yield Text(f"[{numbered[id(r)]}] {r.id}: {note}")


def render_validation(rows: list[ValidationRow]) -> Group:
    summary = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for col in ("group", "n", "median", "P90", "max"):
        summary.add_column(col, justify="left" if col == "group" else "right", no_wrap=True)
    for dim, by_key in error_summary(rows).items():
        for key, s in by_key.items():
            summary.add_row(
                f"{dim}: {key}",
                str(int(s["n"])),
                f"{s['median_abs_pct']:.1f}%",
                f"{s['p90_abs_pct']:.1f}%",
                f"{s['max_abs_pct']:.1f}%",
            )
    failed = sum(1 for r in rows if r.error)
    return Group(
        _RecordTable(rows),
        Text("Absolute % error of tokens/s/GPU", style="bold"),
        summary,
        Text(f"{len(rows) - failed}/{len(rows)} records scored"),
        *(Text(line) for line in pair_order_lines(pair_order(rows))),
    )


def _ties(order: PairOrder) -> str:
    """The measured ties a pair order set aside, in words ("" when none)."""
    if not order.ties:
        return ""
    return f"; {order.ties} measured ties, less than {TIE_PCT:g} % apart, set aside"


def pair_order_lines(order: PairOrder, bullet: str = "  ") -> list[str]:
    """Layout pair order in words, then each pair the model orders the other way round (one
    line each, after `bullet`)."""
    if order.fraction is None:
        return ["Layout pair order: no pairs (no two measured records of one model, GPU, "
                "sequence length and global batch with different layouts or run settings"
                f"{_ties(order)})"]  # fmt: skip
    head = (
        f"Layout pair order: {order.agree} of {order.pairs} pairs ({order.fraction:.1%}) "
        f"predicted in the measured order (pairs: records of the same model, GPU, sequence "
        f"length and global batch with different layouts or run settings; {order.jobs} such jobs"
        f"{_ties(order)})"
    )
    return [head + (":" if order.disagree else "")] + [
        f"{bullet}{a} measured faster than {b}, predicted not faster" for a, b in order.disagree
    ]



def validation_markdown(rows: list[ValidationRow], data_name: str) -> str:
    """The accuracy page (docs/accuracy.md): summary by group, then every record."""
    lines = [
        "# Cost-model accuracy",
        "",
        f"Generated by `planner validate --data {data_name} --markdown`. Error is (predicted -",
        "measured) / measured tokens/s/GPU; groups report the absolute error.",
        "",
        "| group | n | median | P90 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for dim, by_key in error_summary(rows).items():
        for key, s in by_key.items():
            lines.append(
                f"| {dim}: {key} | {int(s['n'])} | {s['median_abs_pct']:.1f}% | "
                f"{s['p90_abs_pct']:.1f}% | {s['max_abs_pct']:.1f}% |"
            )
    order = pair_order_lines(pair_order(rows), bullet="- ")
    lines += ["", order[0], *([""] + order[1:] if order[1:] else [])]
    lines += [
        "",
        "| record | measured | predicted | error | MFU | peak GiB (pred / meas) | largest terms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        e = r.estimate
        if e is None:
            lines.append(
                f"| {r.id} | {_num(r.measured_tokens_per_s_per_gpu)} | | | | | "
                f"not scored: {r.error} |"
            )
            continue
        top = sorted(e.breakdown_s.items(), key=lambda kv: -kv[1])[:3]
        terms = ", ".join(f"{k} {v / e.step_time_s:.0%}" for k, v in top if v > 0)
        err = r.tokens_error_pct
        mem = f"{r.predicted_peak_gib or 0.0:.1f} / {_num(r.measured_peak_memory_gib) or '-'}"
        lines.append(
            f"| {r.id} | {_num(r.measured_tokens_per_s_per_gpu)} | "
            f"{e.tokens_per_s_per_gpu:,.1f} | {'' if err is None else f'{err:+.1f}%'} | "
            f"{e.mfu:.1%} | {mem} | {terms} |"
        )
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:,.1f}"
