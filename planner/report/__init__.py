"""What a user reads: the terminal report (rich), its Markdown and HTML forms, the JSON dicts, and
the findings (warnings, why runner-ups lose) they share."""

from .allocation import render_allocation
from .terminal import (
    estimate_dict,
    plan_dict,
    presets_table,
    render_estimate,
    render_html,
    render_plan,
    result_dict,
)

__all__ = [
    "estimate_dict",
    "plan_dict",
    "presets_table",
    "render_allocation",
    "render_estimate",
    "render_html",
    "render_plan",
    "result_dict",
]
