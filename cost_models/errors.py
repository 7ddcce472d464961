"""Error types shared by every layer. Only planner/cli.py turns them into exit codes."""

from __future__ import annotations

from pydantic import ValidationError


class PlannerError(Exception):
    """Base for errors the user can act on (bad input, nothing fits)."""


class InvalidInput(PlannerError, ValueError):
    """A user-supplied value breaks a rule; the message names the field and the rule (exit 2)."""


class NoFeasiblePlan(PlannerError):
    """No layout fits; the message says why (exit 1). `reasons`: the separate reasons the
    message joins (default: the message itself), for `--json`'s error object."""

    def __init__(self, message: str = "", reasons: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(message)
        self.reasons = tuple(reasons) or (message,)


def describe_validation_error(
    err: ValidationError, where: str = "", rename: dict[str, str] | None = None
) -> str:
    """`<where>: field.path: rule; ...` on one line, without pydantic's URLs. `rename` maps a
    field path to the name the user wrote (a Hugging Face config key)."""
    parts = []
    errors = err.errors(include_url=False)
    for e in errors[:MAX_FIELD_ERRORS]:
        loc = ".".join(_short(p) for p in e["loc"])
        loc = (rename or {}).get(loc, loc)  # e.g. a Hugging Face key for our field
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling)"
        # A rule over several fields (a model validator) has no location; its message names
        # the fields itself ("fp8_params needs precision fp8 ...").
        parts.append(f"{loc}: {msg}" if loc else msg)
    if len(errors) > MAX_FIELD_ERRORS:
        parts.append(f"and {len(errors) - MAX_FIELD_ERRORS} more")
    prefix = f"{where}: " if where else ""
    # One line always: a user's key may hold a newline, a rule's text may too.
    return " ".join((prefix + "; ".join(parts)).split())


MAX_FIELD_ERRORS = 8
"""Field errors listed in one message (the rest are counted): the line stays readable."""


def _short(part: object) -> str:
    text = str(part)
    return text if len(text) <= 60 else repr(text[:57] + "...")
