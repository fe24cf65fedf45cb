"""The public energy measurements (validation/energy_*.csv) and power constants (validation/energy_constants.md)
stay usable: they parse, their units are physically plausible for the GPU that produced them, the columns a
source defines by a formula still follow it, and every row names a source that ENERGY_SOURCES.md documents."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "validation"
CSV_FILES = ("energy_mlenergy.csv", "energy_inferencex.csv")
REQUIRED = ("source", "model", "gpu", "num_gpus", "tp", "engine", "engine_version")


def _rows(name: str) -> list[dict[str, str]]:
    with open(VALIDATION / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


def _constants() -> list[dict[str, str]]:
    """The rows of the '## Table' section of energy_constants.md."""
    text = (VALIDATION / "energy_constants.md").read_text(encoding="utf-8")
    table = text.split("## Table", 1)[1].split("\n## ", 1)[0]
    cells = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| gpu ") and not line.startswith("| ---")
    ]
    return [dict(zip(("gpu", "quantity", "value", "unit", "source", "note"), c, strict=True)) for c in cells]


def _board_limits() -> dict[str, float]:
    return {r["gpu"]: float(r["value"]) for r in _constants() if r["quantity"] == "board_power_limit"}


def _limit(gpu: str) -> float:
    return _board_limits()[gpu.lower()]


@pytest.mark.parametrize("name", CSV_FILES)
def test_csvs_parse_with_one_row_per_configuration(name):
    rows = _rows(name)
    assert len(rows) > 20
    for r in rows:
        assert all(r[c].strip() for c in REQUIRED), r
        assert int(r["num_gpus"]) >= int(r["tp"]) >= 1
    keys = [tuple(v for k, v in r.items() if k not in ("notes",)) for r in rows]
    assert len(keys) == len(set(keys)), "a configuration is listed twice"


@pytest.mark.parametrize("name", CSV_FILES)
def test_every_row_cites_a_documented_source(name):
    documented = set(re.findall(r"^## (\S+)$", (VALIDATION / "ENERGY_SOURCES.md").read_text(encoding="utf-8"), re.M))
    assert {r["source"] for r in _rows(name)} <= documented


def test_every_catalog_gpu_has_a_board_limit_and_constants_are_in_range():
    catalog = json.loads((ROOT / "sim_core" / "data" / "gpus.json").read_text(encoding="utf-8"))["entries"]
    limits = _board_limits()
    assert {g["key"] for g in catalog} <= set(limits)
    sources = (VALIDATION / "energy_constants.md").read_text(encoding="utf-8").split("## Sources", 1)[1]
    for r in _constants():
        assert r["gpu"] in limits and r["unit"] == "W", r
        for value in map(float, r["value"].split("-")):
            assert 0 < value <= limits[r["gpu"]], r
        assert all(f"**{s.strip()}**" in sources for s in r["source"].split(",")), r


def test_mlenergy_power_is_the_deployment_total_within_the_boards_limit():
    for r in _rows("energy_mlenergy.csv"):
        n, total = int(r["num_gpus"]), float(r["avg_power_w_total"])
        assert 0 < total <= _limit(r["gpu"]) * n, r
        assert float(r["avg_power_w_per_gpu_derived"]) == pytest.approx(total / n, abs=6e-4)
        joules, tok_s = float(r["joules_per_output_token"]), float(r["throughput_tok_s"])
        assert 0 < joules < 100 and tok_s > 0
        assert joules == pytest.approx(total / tok_s, rel=1e-6), (
            "energy per token is total power / throughput"
        )
        assert float(r["energy_per_response_j"]) == pytest.approx(
            joules * float(r["avg_output_len"]), rel=1e-6
        )
        assert r["reasoning"] == ("on" if r["task"] == "gpqa" else "off")
    positions = [(r["source_file"], r["config_index"]) for r in _rows("energy_mlenergy.csv")]
    assert len(positions) == len(set(positions)), "each row is one entry of a source file"


def test_inferencex_power_within_the_boards_limit():
    for r in _rows("energy_inferencex.csv"):
        n, limit = int(r["num_gpus"]), _limit(r["gpu"])
        per_gpu = [
            _num(r[c]) for c in ("avg_power_w_per_gpu", "p90_power_w_per_gpu") if _num(r[c]) is not None
        ]
        assert all(0 < p <= limit for p in per_gpu), r
        if _num(r["avg_power_w_total"]) is not None:
            assert 0 < float(r["avg_power_w_total"]) <= limit * n, r
        joules = [
            _num(r[c])
            for c in (
                "joules_per_output_token",
                "joules_per_total_token",
                "joules_per_output_token_derived",
                "joules_per_total_token_derived",
            )
        ]
        assert any(j is not None for j in joules) and all(0 < j < 100 for j in joules if j is not None), r


def test_inferencex_derived_columns_follow_their_documented_formula():
    derived = [r for r in _rows("energy_inferencex.csv") if r["joules_per_output_token_derived"]]
    assert derived
    for r in derived:
        energy = float(r["avg_power_w_per_gpu"]) * int(r["num_gpus"]) * float(r["duration_s"])
        tin, tout = int(r["total_input_tokens"]), int(r["total_output_tokens"])
        assert float(r["joules_per_output_token_derived"]) == pytest.approx(energy / tout, abs=1e-6)
        assert float(r["joules_per_total_token_derived"]) == pytest.approx(energy / (tin + tout), abs=1e-6)
        assert float(r["output_throughput_tok_s_derived"]) == pytest.approx(
            tout / float(r["duration_s"]), abs=1e-3
        )


def test_inferencex_printed_joules_match_printed_power_and_throughput():
    """Issue #828 prints J/out_tok to two decimals beside total power and output tok/s per GPU."""
    printed = [r for r in _rows("energy_inferencex.csv") if r["output_throughput_tok_s_per_gpu"]]
    assert printed
    for r in printed:
        tok_s = float(r["output_throughput_tok_s_per_gpu"]) * int(r["num_gpus"])
        assert float(r["joules_per_output_token"]) == pytest.approx(
            float(r["avg_power_w_total"]) / tok_s, abs=0.006
        )
