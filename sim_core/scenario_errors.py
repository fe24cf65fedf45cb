"""Invalid scenario input, reported field by field: each pydantic error as a message naming the field and what it
allows (ScenarioError), the one thing every face (CLI, URL, API) shows for bad input. The messages read the bounds
off the model they are given (field_bounds.py); scenario.py's parse_scenario gives them the Scenario."""

from __future__ import annotations

from pydantic import BaseModel

from .field_bounds import range_text
from .quoting import quote


def model_error_field(err: dict, fallback: str, model: type[BaseModel]) -> tuple[str, dict]:
    """A model-level validator's error names its field as "field: message" (a field of `model`); pydantic gives it
    no location."""
    if not err["loc"] and err["type"] == "value_error":
        field, sep, rest = err["msg"].removeprefix("Value error, ").partition(": ")
        if sep and field in model.model_fields:
            return field, {**err, "msg": rest}
    return ".".join(str(x) for x in err["loc"]) or fallback, err


class ScenarioError(ValueError):
    """Invalid scenario input: a list of (field, message) pairs, each message saying what is allowed."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{f}: {m}" for f, m in problems))


def describe_error(err: dict, model: type[BaseModel], unknown_field: str = "is not a field of this request") -> str:
    """One pydantic error as a message saying what `model`'s field allows (`unknown_field`: what a name that is
    no field of it is told)."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    got = err.get("input")
    got_s = f" (got {quote(got)})" if got is not None and not isinstance(got, dict) else ""
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        field = str(err["loc"][-1]) if err["loc"] else ""
        allowed = range_text(field, model) if field in model.model_fields else ""
        if allowed:
            return f"must be {allowed}{got_s}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}{got_s}"
    if kind == "extra_forbidden":
        return unknown_field
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    return err["msg"] + got_s
