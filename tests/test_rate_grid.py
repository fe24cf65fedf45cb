"""sim_core.studies.sweep.rate_grid: the one grid of arrival rates the CLI sweep, the web sweep and the proposed default
range all use, and its input checks (which must fail before any list is built)."""

from __future__ import annotations

import math

import pytest

from app.web.inputs import RateRange, parse_request
from app.web.sweep_range import default_sweep
from sim_core import Scenario, ScenarioError
from sim_core.studies.sweep import MAX_RATE_POINTS, MIN_SWEEP_RATE, default_rate_range, nice_step, rate_grid


def problems(**kwargs) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as caught:
        rate_grid(**kwargs)
    return caught.value.problems


def test_grid_includes_both_ends_despite_float_steps():
    assert rate_grid(2, 18, 4) == [2, 6, 10, 14, 18]
    assert rate_grid(0.1, 0.7, 0.1) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    assert rate_grid(5, 5, 1) == [5]
    assert rate_grid(1, 2, 10) == [1]


def test_default_step_gives_nine_rates():
    assert rate_grid(2, 18) == [2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert rate_grid(3, 3) == [3]


@pytest.mark.parametrize("step", [1e-6, 1e-300, 5e-324])
def test_a_tiny_step_is_refused_before_building_the_grid(step):
    [(field, message)] = problems(rate_min=1, rate_max=2, rate_step=step)
    assert field == "rate_step"
    assert f"at most {MAX_RATE_POINTS:,}" in message and "at least 0.00101" in message
    # The step the message proposes does fit.
    assert len(rate_grid(1, 2, 0.00101)) <= MAX_RATE_POINTS


def test_the_limit_on_points_is_the_callers():
    assert len(rate_grid(1, 16, 1, max_points=16)) == 16
    [(field, message)] = problems(rate_min=1, rate_max=17, rate_step=1, max_points=16)
    assert field == "rate_step" and "gives 17 rates" in message and "at most 16" in message


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "3", True, None])
@pytest.mark.parametrize("field", ["rate_min", "rate_max", "rate_step"])
def test_non_finite_or_non_numeric_input_names_its_field(field, bad):
    if field == "rate_step" and bad is None:
        return  # no step means the default grid
    given = {"rate_min": 1.0, "rate_max": 2.0, "rate_step": 0.5, field: bad}
    assert [f for f, _ in problems(**given)] == [field]


def test_rates_must_be_scenario_rates():
    [(field, message)] = problems(rate_min=1, rate_max=20_000, rate_step=5000)
    assert field == "rate_max" and "between 1e-06 and 10000" in message and "20000" in message
    assert [f for f, _ in problems(rate_min=0, rate_max=2, rate_step=1)] == ["rate_min"]
    assert [f for f, _ in problems(rate_min=1, rate_max=2, rate_step=0)] == ["rate_step"]


def test_max_below_min_names_rate_max():
    [(field, message)] = problems(rate_min=18, rate_max=2, rate_step=4)
    assert field == "rate_max" and "rate_min" in message and "18" in message


def test_default_range_uses_nice_steps_within_the_cap():
    assert [nice_step(x) for x in (0.3, 1, 1.1, 2.2, 4, 7)] == [0.5, 1, 2, 2.5, 5, 10]
    lo, hi, step = default_rate_range(6)
    assert (lo, hi, step) == (1, 12, 1)
    lo, hi, step = default_rate_range(100, cap=30)
    assert hi <= 30 and lo == step and len(rate_grid(lo, hi, step)) <= 13


def test_web_sweeps_use_the_same_grid():
    s = Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", duration=20)
    proposed = default_sweep(s)
    assert proposed.rates() == rate_grid(proposed.rate_min, proposed.rate_max, proposed.rate_step)
    req = parse_request({"rate_min": "0.1", "rate_max": "0.7", "rate_step": "0.1", "duration": "20"})
    assert req.sweep == RateRange(0.1, 0.7, 0.1) and req.sweep.rates() == rate_grid(0.1, 0.7, 0.1)
    with pytest.raises(ScenarioError) as caught:
        parse_request({"rate_min": "1", "rate_max": "2", "rate_step": "1e-300"})
    assert [f for f, _ in caught.value.problems] == ["rate_step"]
    with pytest.raises(ScenarioError) as caught:
        parse_request({"rate_min": "nan", "rate_max": "2", "rate_step": "1"})
    assert [f for f, _ in caught.value.problems] == ["rate_min"]


@pytest.mark.parametrize("rate", [1e-300, 5e-324, 0.0, float("nan"), float("inf")])
def test_no_default_range_around_a_rate_below_the_minimum_or_not_finite(rate):
    with pytest.raises(ScenarioError) as caught:
        default_rate_range(rate, cap=float("inf"))
    [(field, message)] = caught.value.problems
    assert field == "rate" and f"{MIN_SWEEP_RATE:g} requests/s" in message


def test_the_minimum_rate_has_a_default_range_the_grid_accepts():
    lo, hi, step = default_rate_range(MIN_SWEEP_RATE, cap=float("inf"))
    assert rate_grid(lo, hi, step) == [MIN_SWEEP_RATE, 2 * MIN_SWEEP_RATE]
