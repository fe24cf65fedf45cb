"""Power as a knob (issue #40): a power cap per GPU (power never above it or the board limit, energy still the
integral of power, every topology; at 60 % of the board limit J/token and TPOT move as the cited capping
measurements do), the electricity price folded into the cost metrics, carbon per 1k requests, and their refusals."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from sim_core import Scenario, run
from sim_core.catalog import GPUS
from sim_core.energy import J_PER_KWH, capped_clock, scenario_power_model
from sim_core.scenario import ScenarioError, parse_scenario
from sim_core.views import engine_logs, step_columns

SMALL = dict(hardware="l4", model="llama-3.2-1b", max_model_len=4096, energy=True)
L4 = GPUS["l4"]
TOPOLOGIES = (
    {},
    {"replicas": 2},
    {"prefill_replicas": 1, "decode_replicas": 1},
    {"autoscaler": "predictive", "autoscale_replica_rate": 2, "provision_delay_s": 5},
)


def _integral(steps: dict, stride: int, model, held_s: float) -> float:
    """∫ power dt: steps' power x seconds (x stride; a strided estimate kept within held_s), idle power after."""
    busy_s = float(steps["duration_s"].sum()) * stride
    power = model.step_power_w(steps["duration_s"], steps["bytes"], steps["flops"])
    busy_j = (
        float((power * steps["duration_s"]).sum()) * stride * min(1.0, held_s / busy_s if busy_s else 1.0)
    )
    return busy_j + model.idle_w * max(held_s - busy_s, 0.0)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    shape=st.sampled_from(TOPOLOGIES),
    cap_share=st.floats(0.05, 1.0),
    rate=st.floats(1.0, 60.0),
    seed=st.integers(0, 1000),
)
def test_power_never_exceeds_the_cap_and_energy_is_its_integral(shape, cap_share, rate, seed):
    cap = L4.idle_power_w + cap_share * (L4.board_power_w - L4.idle_power_w)
    r = run(Scenario(num_requests=30, rate=rate, seed=seed, power_cap_w=cap, **SMALL, **shape))
    e = r.metrics["energy"]
    model = scenario_power_model(r.scenario, r.resolved.deployment[0].setup)
    assert e["peak_power_w_per_gpu"] <= cap + 1e-9 and cap <= L4.board_power_w
    assert model.idle_w <= e["avg_power_w_per_gpu"] <= cap + 1e-9
    if r.engine_logs:
        for log in engine_logs(r):
            power = model.step_power_w(log.steps["duration_s"], log.steps["bytes"], log.steps["flops"])
            assert (power <= cap + 1e-9).all()
        if "autoscaler" not in shape:  # autoscaled slots are held over their lives (tests/test_energy.py)
            expected = [
                _integral(v.steps, v.step_stride, model, r.metrics["duration_s"]) for v in engine_logs(r)
            ]
            assert [x["energy_j"] for x in e["engines"]] == pytest.approx(expected, rel=1e-9)
    else:
        expected = _integral(step_columns(r), r.step_stride, model, r.metrics["duration_s"])
        assert e["gpu_energy_j"] == pytest.approx(expected, rel=1e-9)


# The cited capping measurements (validation/energy_constants.md, "Power capping"): Samsi et al. 2023, LLaMA on
# A100/V100, a cap from 250 to 175 W (70 %) cut energy ~23 % and added ~6-7 % latency; the llmgarage sweep of an
# RTX 3090 (350 W) capped at 200 W (57 %) lost 6 % of decode throughput and 40 % of prefill throughput.
CITED_ENERGY_SAVING = 0.23
CITED_DECODE_SLOWDOWN = 0.065
BAND = 2.0  # the cited figures are other GPUs and caps near 60 %: agree within a factor of two


def test_a_cap_at_60_percent_lowers_energy_and_slows_decode_as_measured():
    base = dict(hardware="h100", model="llama-3-8b", num_requests=200, rate=20, seed=1, energy=True)
    full = run(Scenario(**base)).metrics
    capped = run(Scenario(**base, power_cap_w=0.6 * GPUS["h100"].board_power_w)).metrics
    saving = 1 - capped["energy"]["joules_per_output_token"] / full["energy"]["joules_per_output_token"]
    slowdown = capped["tpot_ms"]["mean"] / full["tpot_ms"]["mean"] - 1
    prefill_slowdown = capped["ttft_ms"]["mean"] / full["ttft_ms"]["mean"] - 1
    assert CITED_ENERGY_SAVING / BAND <= saving <= CITED_ENERGY_SAVING * BAND, saving
    assert 0 < slowdown <= CITED_DECODE_SLOWDOWN * BAND, slowdown
    assert prefill_slowdown > slowdown  # compute-bound prefill slows most, as in the llmgarage sweep
    assert capped["energy"]["peak_power_w_per_gpu"] <= 0.6 * GPUS["h100"].board_power_w + 1e-9


def test_the_clock_follows_the_cube_law_and_an_uncapped_run_is_unchanged():
    assert capped_clock(100.0, 700.0, None) == 1.0 and capped_clock(100.0, 700.0, 700.0) == 1.0
    assert capped_clock(100.0, 700.0, 100.0 + 600.0 / 8) == pytest.approx(0.5)
    plain = run(Scenario(num_requests=20, seed=2, **SMALL))
    at_board = run(Scenario(num_requests=20, seed=2, power_cap_w=L4.board_power_w, **SMALL))
    assert plain.metrics == at_board.metrics


def test_price_is_folded_into_cost_and_carbon_is_per_thousand_requests():
    fields = dict(hardware="h100", model="llama-3-8b", num_requests=60, rate=5, seed=3, energy=True)
    plain = run(Scenario(**fields)).metrics
    priced = run(Scenario(**fields, energy_price_per_kwh=0.2, grid_gco2_per_kwh=400)).metrics
    e = priced["energy"]
    kwh = e["energy_j"] / J_PER_KWH
    assert e["energy_cost"] == pytest.approx(kwh * 0.2)
    assert e["energy_cost_per_hour"] == pytest.approx(kwh * 0.2 / (priced["duration_s"] / 3600))
    assert priced["cost_per_hour"] == pytest.approx(plain["cost_per_hour"] + e["energy_cost_per_hour"])
    assert priced["cost_per_mtok"] / priced["cost_per_hour"] == pytest.approx(
        plain["cost_per_mtok"] / plain["cost_per_hour"]
    )
    assert e["gco2_per_1k_requests"] == pytest.approx(kwh * 400 / priced["completed"] * 1000)
    assert "gco2_per_1k_requests" not in plain["energy"] and "energy_cost" not in plain["energy"]


@pytest.mark.parametrize(
    "data, field, words",
    [
        ({"hardware": "h100", "power_cap_w": 100}, "power_cap_w", "above its idle power"),
        (
            {"hardware": "h100", "power_cap_w": 800, "energy": True},
            "power_cap_w",
            "at most its board limit (700 W)",
        ),
        ({"hardware": "rtx3050", "power_cap_w": 100}, "power_cap_w", "no measured idle power"),
        ({"power_cap_w": 5000}, "power_cap_w", "2000"),
        ({"energy_price_per_kwh": 0.1}, "energy_price_per_kwh", "set energy"),
        ({"grid_gco2_per_kwh": 300}, "grid_gco2_per_kwh", "set energy"),
        ({"energy": True, "energy_price_per_kwh": -1}, "energy_price_per_kwh", "0"),
    ],
)
def test_bad_knob_input_names_its_field_and_range(data, field, words):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data)
    problems = dict(e.value.problems)
    assert field in problems and words in problems[field], problems


def test_cli_takes_power_cap_in_watts(capsys):
    code = main(
        [
            "run",
            "--hardware",
            "l4",
            "--model",
            "llama-3.2-1b",
            "--max-model-len",
            "4096",
            "--num-requests",
            "10",
            "--energy",
            "--power-cap",
            "50",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and '"power_cap_w": 50' in out.replace(".0,", ",")
    assert main(["run", "--hardware", "l4", "--power-cap", "10"]) != 0
    assert "--power-cap" in capsys.readouterr().err
