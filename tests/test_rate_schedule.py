"""Load that changes over time: the rate schedule's text form, its rate and cumulative rate, the arrivals it
gives (time rescaling of the workload's renewal process), the scenario rules around it, and its faces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from sim_core import Scenario, ScenarioError, resolve
from sim_core.rate_schedule import ScheduleError, arrivals, parse
from sim_core.runner import make_requests
from sim_core.studies.capacity import max_rate
from sim_core.studies.sweep import sweep


@pytest.mark.parametrize("text", ["0:5,600:20,1800:5", "diurnal:period=86400,min=4,max=40,peak=50400",
                                  "ramp:from=2,to=20,over=600", "burst:base=5,peak=40,at=300,width=60,every=600"])
def test_canonical_text_round_trips(text):
    s = parse(text)
    assert parse(s.text()) == s and s.text() == text


def test_defaults_and_spacing_are_made_canonical():
    assert parse(" 0:5, 600:20 ").text() == "0:5,600:20"
    assert parse("diurnal:period=100,min=1,max=3").text() == "diurnal:period=100,min=1,max=3,peak=50"
    assert parse("burst:base=1,peak=9,at=10,width=5").text() == "burst:base=1,peak=9,at=10,width=5,every=0"


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("5:3", "must start at 0"), ("0:5,0:6", "starts must increase"), ("0:x", "not a number"),
    ("0:1e9", "between 1e-06 and 10000 req/s"), ("0:0", "no piece with a rate above 0"),
    ("0:0,60:0.0", "no piece with a rate above 0"), ("0:1e-9", "between"), ("diurnal:period=0,min=1,max=2", "above 0"),
    ("diurnal:period=10,min=3,max=2", "must not exceed"), ("ramp:from=1", "missing to, over"),
    ("ramp:from=1,to=2,over=3,speed=4", "not one of"), ("burst:base=1,peak=2,at=1,width=5,every=2", "at least"),
    ("ramp:from=1,from=2,to=3,over=4", "twice"), ("0:1,nan:2", "between"),
])
def test_bad_schedules_say_what_is_wrong(text, words):
    with pytest.raises(ScheduleError, match=words):
        parse(text)


@given(st.text(max_size=60))
@settings(max_examples=300, deadline=None)
def test_any_text_parses_or_raises_a_schedule_error(text):
    try:
        s = parse(text)
    except ScheduleError:
        return
    assert parse(s.text()) == s


def test_a_quiet_piece_has_no_arrivals():
    quiet = parse("0:4,100:0,300:4")
    t = arrivals(quiet, np.random.default_rng(3), 1.0, None, 400.0)
    assert not ((t >= 100) & (t < 300)).any() and (t < 100).sum() > 300 and (t >= 300).sum() > 300


def test_rates_and_their_integral():
    s = parse("0:5,600:20,1800:5")
    np.testing.assert_array_equal(s.rate_at([0, 599.9, 600, 1799, 1800, 5000]), [5, 5, 20, 20, 5, 5])
    assert s.cumulative(np.array([2400.0]))[0] == 5 * 600 + 20 * 1200 + 5 * 600
    assert s.mean_rate(2400) == 12.5 and s.peak_rate(2400) == 20
    d = parse("diurnal:period=1000,min=4,max=40,peak=300")
    assert d.rate_at(300) == pytest.approx(40) and d.rate_at(800) == pytest.approx(4)
    assert d.mean_rate(1000) == pytest.approx(22, rel=1e-4)
    r = parse("ramp:from=2,to=20,over=600")
    assert r.rate_at(300) == pytest.approx(11) and r.rate_at(10_000) == 20
    b = parse("burst:base=5,peak=40,at=300,width=60,every=600")
    np.testing.assert_array_equal(b.rate_at([299, 300, 359, 360, 900, 1000]), [5, 40, 40, 5, 40, 5])


def test_a_constant_schedule_gives_the_arrivals_of_the_rate_field():
    for workload in ("chat", "rag"):
        a = Scenario(workload=workload, rate=10, duration=100, seed=3)
        b = Scenario(workload=workload, rate_schedule="0:10", duration=100, seed=3)
        ra, rb = make_requests(a, resolve(a)), make_requests(b, resolve(b))
        assert len(ra) == len(rb)
        np.testing.assert_allclose(rb.arrival_s, ra.arrival_s, atol=1e-9)


def test_arrivals_follow_the_schedule_window_by_window():
    """Over 40 seeds the mean count per phase is within 3 standard errors of what the schedule integrates to."""
    s = parse("0:2,30:12,60:2")
    edges = [0, 30, 60, 90]
    counts = np.array([np.histogram(arrivals(s, np.random.default_rng(k), 1.0, None, 90.0), bins=edges)[0]
                       for k in range(40)])
    expected = np.array([60, 360, 60])
    assert np.all(np.abs(counts.mean(axis=0) - expected) < 3 * np.sqrt(expected / 40))


@given(st.sampled_from(["0:3,20:30,40:1", "diurnal:period=50,min=1,max=30", "ramp:from=40,to=1,over=30",
                        "burst:base=1,peak=50,at=10,width=5,every=20"]),
       st.floats(0.3, 3.0), st.integers(0, 2**32 - 1), st.one_of(st.none(), st.integers(1, 300)))
@settings(max_examples=60, deadline=None)
def test_arrivals_are_sorted_and_inside_the_run(text, burstiness, seed, n):
    t = arrivals(parse(text), np.random.default_rng(seed), burstiness, n, 60.0)
    assert np.all(np.isfinite(t)) and np.all(np.diff(t) >= 0) and t[0] >= 0 if len(t) else True
    if n is None:
        assert np.all(t < 60.0)
    else:
        assert len(t) == n and t[0] == 0.0


def test_the_scenario_rules_around_a_schedule():
    with pytest.raises(ValueError, match="rate_schedule: .*leave rate unset"):
        Scenario(rate=3, rate_schedule="0:1")
    with pytest.raises(ValueError, match="rate_schedule: a trace replays"):
        Scenario(trace="x.csv", rate_schedule="0:1")
    s = Scenario(rate_schedule=" 0:1, 10:3", duration=20)
    assert s.rate_schedule == "0:1,10:3" and Scenario.from_query(s.to_query()) == s
    assert s.offered_rate() == 2.0 and resolve(s).rate == 2.0
    with pytest.raises(ScenarioError) as sweep_err:
        sweep(s, ["fcfs"], [1.0, 2.0])
    with pytest.raises(ScenarioError) as capacity_err:
        max_rate(s)
    assert sweep_err.value.problems[0][0] == capacity_err.value.problems[0][0] == "rate_schedule"


def test_cli_runs_a_schedule_and_names_the_flag_when_it_is_wrong(capsys):
    assert main(["run", "--workload", "rag", "--hardware", "a100", "--rate-schedule", "0:2,10:8", "--duration",
                 "20"]) == 0
    assert "a rate following 0:2,10:8 (mean 5 req/s)" in capsys.readouterr().out
    assert main(["run", "--rate-schedule", "0:2,1:"]) == 2
    assert "--rate-schedule" in capsys.readouterr().err


def test_the_dashboard_draws_offered_load_for_a_schedule():
    from fastapi.testclient import TestClient

    from app.web import app

    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        page = c.get("/?schedulers=fcfs,chunked&workload=rag&hardware=a100&rate_schedule=0:2,10:8&duration=20")
        assert page.status_code == 200 and "card-offered-load" in page.text
        plain = c.get("/?schedulers=fcfs&workload=rag&hardware=a100&rate=2&duration=5")
        assert "card-offered-load" not in plain.text
        embed = c.get("/embed/offered-load?schedulers=fcfs&workload=rag&hardware=a100&rate_schedule=0:2,10:8"
                      "&duration=20")
        assert embed.status_code == 200 and "rate schedule" in embed.text
        bad = c.get("/api/run?rate_schedule=0:2,1:x")
        assert bad.status_code == 422 and "rate_schedule" in bad.text
