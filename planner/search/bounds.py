"""The branch and bound's lower bounds are the Pricer's (cost_models/bounds.py, with the proof of
their admissibility; planner/search/table.py calls them there). `StepLowerBound` keeps the names
the search's oracle and brute-force tests were written against."""

from __future__ import annotations

from cost_models.bounds import SAFETY, LayerTotals
from cost_models.pricer import Pricer


class StepLowerBound(Pricer):
    """A Pricer; `step_s` and `placement_step_s` are its step_bound_s and placement_bound_s."""

    step_s = Pricer.step_bound_s
    placement_step_s = Pricer.placement_bound_s


__all__ = ["SAFETY", "LayerTotals", "StepLowerBound"]
