"""What a field of a pydantic input model accepts (its choices and bounds), read off the model it is given. fields.py
reads the Scenario's by default; scenario_errors.py describes any model's errors with it, without importing the
Scenario it serves (scenario.py imports scenario_errors).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel


@dataclass(frozen=True)
class FieldInfo:
    """One field of an input model as the faces describe it."""

    name: str
    description: str
    default: object
    choices: tuple | None  # the values of a Literal[...] field, else None
    optional: bool  # None is accepted (the field then takes a preset's or the GPU's default)
    lo: float | int | None
    lo_exclusive: bool  # lo itself is not allowed (gt rather than ge)
    hi: float | int | None
    hi_exclusive: bool
    is_int: bool
    is_bool: bool


def _union_args(annotation) -> tuple:
    """The members of `X | Y` / Optional[X]; (annotation,) for anything else."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


@cache
def field_info(name: str, model: type[BaseModel]) -> FieldInfo:
    """The choices and bounds of one field of `model` (KeyError for a name that is not a field)."""
    info = model.model_fields[name]
    members = _union_args(info.annotation)
    concrete = [a for a in members if a is not type(None)]
    choices = next((typing.get_args(a) for a in concrete if typing.get_origin(a) is typing.Literal), None)
    lo = hi = None
    lo_exclusive = hi_exclusive = False
    for m in info.metadata:
        if getattr(m, "ge", None) is not None:
            lo, lo_exclusive = m.ge, False
        if getattr(m, "gt", None) is not None:
            lo, lo_exclusive = m.gt, True
        if getattr(m, "le", None) is not None:
            hi, hi_exclusive = m.le, False
        if getattr(m, "lt", None) is not None:
            hi, hi_exclusive = m.lt, True
    return FieldInfo(
        name=name, description=info.description or name, default=info.default, choices=choices,
        optional=type(None) in members, lo=lo, lo_exclusive=lo_exclusive, hi=hi, hi_exclusive=hi_exclusive,
        # bool is a subclass of int: a bool field is not an int field.
        is_int=int in concrete and float not in concrete, is_bool=bool in concrete,
    )


def number_text(value) -> str:
    """A bound as people write it: 604800.0 -> "604800", 0.05 -> "0.05", 1e9 -> "1000000000"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def bounds_text(name: str, model: type[BaseModel]) -> str:
    """The bounds in symbols: ">= 1, <= 8", "> 0, <= 10000"; "" for an unbounded field."""
    f = field_info(name, model)
    parts = []
    if f.lo is not None:
        parts.append(f"{'>' if f.lo_exclusive else '>='} {number_text(f.lo)}")
    if f.hi is not None:
        parts.append(f"{'<' if f.hi_exclusive else '<='} {number_text(f.hi)}")
    return ", ".join(parts)


def range_text(name: str, model: type[BaseModel]) -> str:
    """The bounds as a phrase that follows "must be": "between 1 and 8", "greater than 0 and at most 10000";
    "" for an unbounded field."""
    f = field_info(name, model)
    lo, hi = number_text(f.lo), number_text(f.hi)
    if f.lo is not None and f.hi is not None and not (f.lo_exclusive or f.hi_exclusive):
        return f"between {lo} and {hi}"
    lower = None if f.lo is None else (f"greater than {lo}" if f.lo_exclusive else f"at least {lo}")
    upper = None if f.hi is None else (f"less than {hi}" if f.hi_exclusive else f"at most {hi}")
    return " and ".join(p for p in (lower, upper) if p)
