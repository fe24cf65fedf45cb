"""The cited measurements the next engine mechanisms stand on (issues #23 and #24): speculative decoding
(spec_decode.json), tiered KV offload (kv_tiers.json), multi-LoRA (lora.json) and provisioning (startup.json).

Nothing in the engine reads them yet; these checks keep the files in the shape a later change can rely on: every
entry says where its number comes from (source_id listed in docs/SOURCES-mechanisms.md, url, verbatim location),
and every value is a positive number (or a list of them: a range or a per-position series) in a known unit."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from sim_core.data import read

ROOT = Path(__file__).resolve().parents[1]
SOURCES_DOC = ROOT / "docs" / "SOURCES-mechanisms.md"
FILES = ("spec_decode.json", "kv_tiers.json", "lora.json", "startup.json")
REQUIRED = ("source_id", "url", "what", "value", "unit", "where")
# The units the files may use; a new unit is added here on purpose, so a consumer can convert every one it reads.
UNITS = {
    "tokens_per_step", "tokens_per_s", "fraction", "ratio", "count", "layers", "params_B", "rank",
    "s", "ms", "s_per_token", "GB/s", "GiB/s", "TiB/s", "IOPS",
}
# The proposers issue #23 names, plus "none" for a baseline row measured without speculation.
METHODS = {"ngram", "draft", "eagle", "eagle3", "mtp", "none"}


def numbers(value) -> list:
    """The numbers an entry's value holds: one, or each of a list (a range or a per-position series)."""
    return list(value) if isinstance(value, list) else [value]


def entries():
    for name in FILES:
        for i, entry in enumerate(read(name)["entries"]):
            yield name, i, entry


def test_each_file_loads_with_an_about_and_entries():
    for name in FILES:
        doc = read(name)
        assert set(doc) == {"about", "entries"}, name
        assert isinstance(doc["about"], str) and doc["about"].strip(), name
        assert doc["entries"], name


def problems(entry: dict) -> list[str]:
    """What is wrong with one entry (empty when it is fine), each naming the key."""
    found = [f"missing {key!r}" for key in REQUIRED if key not in entry]
    if found:
        return found
    found += [f"{key!r} must be non-empty text" for key in ("source_id", "url", "what", "where")
              if not (isinstance(entry[key], str) and entry[key].strip())]
    if isinstance(entry["url"], str) and not entry["url"].startswith("https://"):
        found.append(f"url {entry['url']!r} is not https")
    if entry["unit"] not in UNITS:
        found.append(f"unit {entry['unit']!r} is not one of {sorted(UNITS)}")
    values = numbers(entry["value"])
    if not values:
        found.append("value is an empty list")
    for v in values:
        # bool is an int to Python: refuse it where a measurement is meant.
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            found.append(f"value {v!r} is not a positive number")
    if found:
        return found
    if entry["unit"] == "fraction" and any(v > 1 for v in values):
        found.append("a fraction above 1")
    if isinstance(entry["value"], list) and entry["unit"] != "fraction":
        # A list that is not a per-position series of rates is a [low, high] range.
        if len(values) != 2 or values[0] > values[1]:
            found.append("a range is [low, high]")
    return found


@pytest.mark.parametrize("name, i, entry", list(entries()), ids=lambda x: str(x)[:40])
def test_every_entry_is_cited_with_a_positive_value_in_a_known_unit(name, i, entry):
    assert problems(entry) == [], f"{name} entry {i}"


GOOD = {"source_id": "x", "url": "https://example.org", "what": "w", "value": 1.5, "unit": "s", "where": "Table 1"}


@pytest.mark.parametrize("change, expected", [
    ({"url": None}, "missing 'url'"),
    ({"where": " "}, "'where' must be non-empty text"),
    ({"url": "http://example.org"}, "url 'http://example.org' is not https"),
    ({"unit": "furlongs"}, "unit 'furlongs' is not one of"),
    ({"value": 0}, "value 0 is not a positive number"),
    ({"value": -2.0}, "value -2.0 is not a positive number"),
    ({"value": True}, "value True is not a positive number"),
    ({"value": "3"}, "value '3' is not a positive number"),
    ({"value": float("nan")}, "value nan is not a positive number"),
    ({"value": []}, "value is an empty list"),
    ({"value": 1.2, "unit": "fraction"}, "a fraction above 1"),
    ({"value": [5, 2]}, "a range is [low, high]"),
    ({"value": [1, 2, 3]}, "a range is [low, high]"),
])
def test_a_bad_entry_is_refused_naming_what_is_wrong(change, expected):
    assert problems(GOOD) == []
    entry = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    assert any(p.startswith(expected) for p in problems(entry)), problems(entry)


def test_every_source_id_is_described_in_the_sources_doc():
    """A number is only as good as the note saying what was measured: every source_id has its section."""
    described = set(re.findall(r"^## (\S+)", SOURCES_DOC.read_text(encoding="utf-8"), flags=re.M))
    used = {entry["source_id"] for _, _, entry in entries()}
    assert used <= described, sorted(used - described)


def test_speculative_decoding_entries_name_their_method_and_acceptance_lengths_are_at_least_one():
    """An acceptance length counts the target's bonus token, so it is >= 1 and <= k + 1 where k is known."""
    for i, entry in enumerate(read("spec_decode.json")["entries"]):
        assert entry.get("method") in METHODS, f"spec_decode.json entry {i}: method {entry.get('method')!r}"
        if entry["unit"] == "tokens_per_step":
            assert entry["value"] >= 1, i
            if entry.get("k") is not None:
                assert entry["value"] <= entry["k"] + 1, i
        if entry["unit"] == "fraction" and isinstance(entry["value"], list) and entry.get("k"):
            if entry.get("derived"):
                assert len(entry["value"]) == entry["k"], f"one rate per draft position, entry {i}"


def test_derived_numbers_say_how_they_were_derived():
    for name, i, entry in entries():
        if entry.get("derived"):
            assert "derived" in entry["where"], f"{name} entry {i}: the derivation belongs in 'where'"
