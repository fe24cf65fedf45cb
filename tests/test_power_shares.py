"""sim_core/studies/power_shares.py: the power model's two shares (sim_core/energy.py) are what the regression on
InferenceX's B200 records gives, and those records are not the rows the energy group validates against."""

from __future__ import annotations

import pytest

from sim_core.energy import ACTIVE_SHARE, MEMORY_SHARE
from sim_core.studies.check_rows import VALIDATION_DIR, read_rows
from sim_core.studies.power_shares import calibration_rows, derive_shares


def test_the_calibration_records_are_disjoint_from_the_validated_rows():
    calibration = calibration_rows()
    assert len(calibration) == 23
    assert {r["source"] for r in calibration} == {"inferencex_power_p90_backfill"}
    validated = read_rows(VALIDATION_DIR / "energy_mlenergy.csv")
    assert {r["source"] for r in validated} == {"mlenergy_v3"}
    assert not {r["model"] for r in calibration} & {r["model"] for r in validated}


@pytest.mark.slow
def test_the_shares_in_the_power_model_are_the_derived_ones():
    got = derive_shares()
    assert got["records"] == 23
    assert got["active_share"] == pytest.approx(ACTIVE_SHARE, abs=0.001)
    assert got["memory_share"] == pytest.approx(MEMORY_SHARE, abs=0.001)
    assert got["median_abs_residual"] < 0.05  # the line fits the records, not just their mean
