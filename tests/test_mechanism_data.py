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


@pytest.mark.parametrize("name, i, entry", list(entries()), ids=lambda x: str(x)[:40])
def test_every_entry_is_cited_with_a_positive_value_in_a_known_unit(name, i, entry):
    where = f"{name} entry {i}"
    for key in REQUIRED:
        assert key in entry, f"{where}: missing {key!r}"
    for key in ("source_id", "url", "what", "where"):
        assert isinstance(entry[key], str) and entry[key].strip(), f"{where}: {key!r} must be non-empty text"
    assert entry["url"].startswith("https://"), f"{where}: url {entry['url']!r}"
    assert entry["unit"] in UNITS, f"{where}: unit {entry['unit']!r} is not one of {sorted(UNITS)}"
    values = numbers(entry["value"])
    assert values, f"{where}: empty value list"
    for v in values:
        # bool is an int to Python: refuse it where a measurement is meant.
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{where}: value {v!r} is not a number"
        assert math.isfinite(v) and v > 0, f"{where}: value {v!r} must be positive"
    if entry["unit"] == "fraction":
        assert all(v <= 1 for v in values), f"{where}: a fraction above 1"
    if isinstance(entry["value"], list) and entry["unit"] != "fraction":
        # A list that is not a per-position series of rates is a [low, high] range.
        assert len(values) == 2 and values[0] <= values[1], f"{where}: a range is [low, high]"


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
