"""The `whatif --plot` chart (PNG or SVG; needs the optional `plot` extra, matplotlib)."""

from __future__ import annotations

from typing import Any

from cost_models.errors import InvalidInput

from .. import DISTRIBUTION
from ..whatif import PARAMETERS, WhatIfResult
from .text import compact_layout
from .whatif_view import value_text


def pyplot(path: str) -> Any:
    """matplotlib.pyplot (Agg), or InvalidInput if the extra is missing or the suffix is wrong."""
    # The file name is checked first: a wrong suffix is the same mistake with or without the extra.
    if not path.lower().endswith((".png", ".svg")):
        raise InvalidInput(f"--plot: file must end in .png or .svg (got {path!r})")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidInput(
            "--plot: matplotlib is not installed: pip install matplotlib, or the [plot] extra: "
            f"pip install '{DISTRIBUTION}[plot]' (from a checkout: pip install '.[plot]')"
        ) from None
    return plt


def save_plot(r: WhatIfResult, path: str) -> None:
    """Tokens/s/GPU against the swept value, MFU on the right axis, the baseline as a dashed line,
    each point labelled with its plan where the plan changes, model and cluster in the title.

    MFU is tokens/s/GPU times a constant for one model and sequence length (6N + attention FLOPs
    per token over the GPU's peak), so it is the right axis of the same line, not a second line
    drawn on top of the first. Needs the optional `plot` extra (matplotlib).
    """
    plt = pyplot(path)
    words = any(isinstance(p.value, str) for p in r.points)
    # Shapes and fabric names are categories: one evenly spaced position each, in given order.
    xs = list(range(len(r.points))) if words else [p.value for p in r.points]
    tokens = [p.best.tokens_per_s_per_gpu for p in r.points]
    base = r.baseline.best
    mfu_per_token = base.mfu / base.tokens_per_s_per_gpu
    fig, ax = plt.subplots(figsize=(8, 4.8))
    line = ax.plot(xs, tokens, marker="o", color="tab:blue", label="best plan: tokens/s/GPU")
    base_line = ax.axhline(
        base.tokens_per_s_per_gpu, color="tab:gray", linestyle="--", linewidth=1.2,
        label=f"baseline (unmodified cluster): {base.tokens_per_s_per_gpu:,.0f} tokens/s/GPU, "
        f"MFU {base.mfu:.1%}",
    )  # fmt: skip
    previous = compact_layout(base)
    for x, y, p in zip(xs, tokens, r.points, strict=True):
        layout = compact_layout(p.best)
        if layout != previous:
            ax.annotate(layout, (x, y), textcoords="offset points", xytext=(4, -12), fontsize=7)
        previous = layout
    ax.set_xlabel(f"{r.parameter}: {PARAMETERS.get(r.parameter, '')}", fontsize=8)
    ax.set_ylabel("tokens/s/GPU")
    right = ax.secondary_yaxis(
        "right", functions=(lambda t: 100 * t * mfu_per_token, lambda m: m / 100 / mfu_per_token)
    )
    right.set_ylabel("MFU %")
    if not words and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [value_text(p.value) for p in r.points])
    ax.legend(handles=[*line, base_line], loc="best", fontsize=8)
    ax.set_title(
        f"{r.model or 'model'} on {r.cluster} ({r.num_gpus} GPUs): whatif {r.parameter}",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
