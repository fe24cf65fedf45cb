"""What each `Scenario` field accepts, read off the pydantic model in one place.

The CLI's flag help, the dashboard's form, the web's own input checks and `parse_scenario`'s error messages all
describe a field's choices and bounds; they read them here, so a field added to or tightened in the model shows up
the same way on every face without touching any of them.

    field_info("tp")   -> FieldInfo(name="tp", lo=1, hi=8, is_int=True, ...)
    field_info("decode_seqs", StepShape)   (another input model: the step-time command's)
    bounds_text("tp")  -> ">= 1, <= 8"            (compact, for flag help and type errors)
    range_text("tp")   -> "between 1 and 8"       (a phrase, for "must be ..." messages)
"""

from __future__ import annotations

from pydantic import BaseModel

from . import field_bounds
from .field_bounds import FieldInfo, number_text
from .scenario import Scenario


def field_info(name: str, model: type[BaseModel] = Scenario) -> FieldInfo:
    """The choices and bounds of one field of `model` (KeyError for a name that is not a field)."""
    return field_bounds.field_info(name, model)


def bounds_text(name: str, model: type[BaseModel] = Scenario) -> str:
    """The bounds in symbols: ">= 1, <= 8", "> 0, <= 10000"; "" for an unbounded field."""
    return field_bounds.bounds_text(name, model)


def range_text(name: str, model: type[BaseModel] = Scenario) -> str:
    """The bounds as a phrase that follows "must be": "between 1 and 8"; "" for an unbounded field."""
    return field_bounds.range_text(name, model)


__all__ = ["FieldInfo", "bounds_text", "field_info", "number_text", "range_text"]
