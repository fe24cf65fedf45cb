"""Golden outputs: refactors must not change a single byte of what a fixed set of scenarios produces.

Regenerate only for an intended modelling change (`.venv/bin/python tests/golden_cases.py --write`) and say so in
the commit message.
"""

from __future__ import annotations

import pytest
from golden_cases import GOLDEN_DIR, cases, dumps, record

CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_matches_golden(name):
    scenario, trace = CASES[name]
    expected = (GOLDEN_DIR / f"{name}.json").read_text(encoding="utf-8")
    assert dumps(record(scenario, trace)) == expected


def test_every_golden_file_has_a_case():
    on_disk = {p.stem for p in GOLDEN_DIR.glob("*.json")}
    assert on_disk == set(CASES)
