"""Invalid scenario input, reported field by field: each pydantic error as a message naming the field and what it
allows (ScenarioError), the one thing every face (CLI, URL, API) shows for bad input."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from .quoting import quote

if TYPE_CHECKING:
    from .scenario import Scenario


def model_error_field(err: dict, fallback: str) -> tuple[str, dict]:
    """A model-level validator's error names its field as "field: message"; pydantic gives it no location."""
    from .scenario import Scenario  # scenario.py imports this module at its end

    if not err["loc"] and err["type"] == "value_error":
        field, sep, rest = err["msg"].removeprefix("Value error, ").partition(": ")
        if sep and field in Scenario.model_fields:
            return field, {**err, "msg": rest}
    return ".".join(str(x) for x in err["loc"]) or fallback, err


class ScenarioError(ValueError):
    """Invalid scenario input: a list of (field, message) pairs, each message saying what is allowed."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{f}: {m}" for f, m in problems))


def describe_error(err: dict, model: type[BaseModel] | None = None) -> str:
    """One pydantic error as a message saying what `model`'s field (default: Scenario's) allows."""
    from .scenario import Scenario

    model = model or Scenario
    ctx = err.get("ctx") or {}
    kind = err["type"]
    got = err.get("input")
    got_s = f" (got {quote(got)})" if got is not None and not isinstance(got, dict) else ""
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        # Imported here, not at the top: fields reads the Scenario model this module defines.
        from .fields import range_text

        field = str(err["loc"][-1]) if err["loc"] else ""
        allowed = range_text(field, model) if field in model.model_fields else ""
        if allowed:
            return f"must be {allowed}{got_s}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}{got_s}"
    if kind == "extra_forbidden":
        return "is not a scenario field" if model is Scenario else "is not a field of this request"
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    return err["msg"] + got_s


def parse_scenario(data: dict) -> Scenario:
    """Validate raw input (strings allowed) into a Scenario, or raise ScenarioError naming each bad field."""
    from .scenario import Scenario

    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field, err = model_error_field(err, "scenario")
            problems.append((field, describe_error(err)))
        raise ScenarioError(problems) from None
