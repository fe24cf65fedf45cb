"""The catalogue's entries as data: gpus.json, models.json, prices.json and kv_links.json beside this file, which
sim_core/catalog.py, prices.py and links.py read into their dataclasses.

A file is {"about": "<what it holds>", "entries": [{...}, ...]}: one object per entry, in the order the catalogue
lists them. An entry's keys are its dataclass's fields (a field with a default may be left out, and then takes
it) plus its name key, and "source" / "note" where the dataclass has no such field: text for people saying where
a number comes from, kept in the file and not loaded. A numeric field may hold, instead of a number, the name of a
calibration constant the reading module lists (its docstring says which), so a value shared by several entries
is defined once, in code, beside the measurement it stands on.

Anything else is refused on load with a CatalogDataError naming the file, the entry and the key.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

DOC_KEYS = ("source", "note", "power_source")
FILE_KEYS = ("about", "entries")
# The field annotations the catalogue's dataclasses use (strings under `from __future__ import annotations`) and
# the JSON values each accepts. bool is an int to Python, so it is refused where a number is meant.
TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}
NUMERIC = ("int", "float")


class CatalogDataError(ValueError):
    """A data file or entry that cannot be loaded; the message names the file, the entry and the key."""


def where(filename: str) -> str:
    return f"sim_core/data/{filename}"


def read(filename: str) -> Any:
    """The parsed JSON of one of this package's data files (installed as package data: pyproject.toml)."""
    text = resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CatalogDataError(f"{where(filename)}: not valid JSON: {e}") from None


def entries(doc: Any, filename: str, key: str = "key") -> list[tuple[str, str, dict]]:
    """(name, label for messages, entry) for each entry of a file's document, after checking the file's shape,
    that each entry is an object with a name under `key`, and that no name repeats."""
    if not isinstance(doc, dict):
        raise CatalogDataError(f"{where(filename)}: expected an object with keys {list(FILE_KEYS)}")
    for k in doc:
        if k not in FILE_KEYS:
            raise CatalogDataError(f"{where(filename)}: unknown key {k!r}; a data file has keys {list(FILE_KEYS)}")
    if not isinstance(doc.get("about"), str) or not doc["about"]:
        raise CatalogDataError(f"{where(filename)}: missing key 'about' (a sentence on what the file holds)")
    if not isinstance(doc.get("entries"), list):
        raise CatalogDataError(f"{where(filename)}: missing key 'entries' (a list of objects, one per entry)")
    out, seen = [], set()
    for i, entry in enumerate(doc["entries"], 1):
        name = entry.get(key) if isinstance(entry, dict) else None
        label = f"{where(filename)}: entry {name!r}" if isinstance(name, str) else f"{where(filename)}: entry #{i}"
        if not isinstance(entry, dict):
            raise CatalogDataError(f"{label}: expected an object, got {type(entry).__name__}")
        if not isinstance(name, str) or not name:
            raise CatalogDataError(f"{label}: missing key {key!r} (the entry's name, a non-empty string)")
        if name in seen:
            raise CatalogDataError(f"{label}: key {key!r}: {name!r} appears twice")
        seen.add(name)
        out.append((name, label, entry))
    return out


def build(entry: dict, label: str, cls: type, key: str = "key", constants: Mapping[str, float] | None = None):
    """cls(**entry's fields): every key known (a field of cls, the name key, or a documentation key cls lacks),
    every field without a default present, each value of its field's type, constants' names resolved."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    known = [*fields, *(k for k in (key, *DOC_KEYS) if k not in fields)]
    for k in entry:
        if k not in known:
            raise CatalogDataError(f"{label}: unknown key {k!r}; known keys: {', '.join(known)}")
    for name, f in fields.items():
        if name not in entry and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise CatalogDataError(f"{label}: missing key {name!r}")
    values = {}
    for k, v in entry.items():
        if k in fields:
            values[k] = field_value(v, fields[k].type, label, k, constants or {})
        elif k != key and (not isinstance(v, str) or not v):
            raise CatalogDataError(f"{label}: key {k!r} must be a non-empty string (text for people)")
    return cls(**values)


def field_value(value: Any, annotation: str, label: str, key: str, constants: Mapping[str, float]) -> Any:
    """The value a field gets: the JSON value as it is (an int stays an int, as the Python literal did), or the
    constant a numeric field names."""
    base, _, rest = annotation.partition(" | ")
    if base not in TYPES or rest not in ("", "None"):
        raise TypeError(f"{label}: field {key!r} has annotation {annotation!r}, which the loader does not read")
    if value is None and rest == "None":
        return None
    if isinstance(value, str) and base in NUMERIC and constants:
        if value not in constants:
            raise CatalogDataError(f"{label}: key {key!r}: {value!r} is neither a number nor a constant this file "
                                   f"may name ({', '.join(constants)})")
        return constants[value]
    if isinstance(value, bool) != (base == "bool") or not isinstance(value, TYPES[base]):
        expected = base + (" or null" if rest else "")
        expected += " or a constant's name" if base in NUMERIC and constants else ""
        raise CatalogDataError(f"{label}: key {key!r}: expected {expected}, got {json.dumps(value)}")
    return value


def load(doc: Any, filename: str, cls: type, constants: Mapping[str, float] | None = None) -> dict[str, Any]:
    """{name: cls instance} for every entry of a file whose entries are named by "key", in the file's order."""
    return {name: build(entry, label, cls, "key", constants) for name, label, entry in entries(doc, filename)}
