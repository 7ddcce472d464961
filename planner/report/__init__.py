"""What a user reads, and only here: each view renders typed results (PlanResult, Estimate,
WhatIfResult, validation rows, a PlacedPlan) and nothing here prints (cli.py does).

text.py      plain-text pieces every view shares (layout cells, header and summary lines)
findings.py  warnings and why each runner-up loses, shared by all plan views
terminal.py  rich renderables of a plan and an estimate
markdown.py, html.py   the plan report as Markdown / one offline HTML page
dicts.py     the JSON objects of docs/contract.md (plan, estimate)
placed.py    the placed view of a plan on an allocation (cells every plan view prints)
whatif_view.py, validation.py, calibration.py, plot.py   the other commands' views
"""

from .dicts import estimate_dict, plan_dict, result_dict
from .html import render_html
from .markdown import render_markdown
from .terminal import presets_table, render_estimate, render_plan

__all__ = [
    "estimate_dict",
    "plan_dict",
    "presets_table",
    "render_estimate",
    "render_html",
    "render_markdown",
    "render_plan",
    "result_dict",
]
