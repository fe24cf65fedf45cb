"""sched-sim capacity (sim_core/capacity.py) and running any dashboard URL's scenario from the CLI (--scenario)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sim_core import Scenario
from sim_core.capacity import capacity, max_rate


def knee_at(knee: float, calls: list | None = None):
    """A deployment whose SLO attainment drops from 1 to 0 past `knee` req/s."""
    def attainment(scenario, rate):
        if calls is not None:
            calls.append(rate)
        return 1.0 if rate <= knee else 0.0
    return attainment


@pytest.mark.parametrize("start", [0.01, 1.0, 7.3, 100.0, 5000.0])
def test_the_search_finds_the_knee_within_its_tolerance_from_any_start(start):
    rate, runs = max_rate(Scenario(rate=start), 0.9, 0.03, knee_at(7.3))
    assert 7.3 / 1.03 <= rate <= 7.3 and runs < 30


def test_a_deployment_that_never_meets_the_target_has_no_capacity():
    rate, _ = max_rate(Scenario(rate=1.0), 0.9, 0.03, lambda s, r: 0.5)
    assert rate is None
    assert capacity(Scenario(rate=1.0, seeds=2), 0.9, 0.03, lambda s, r: 0.5).mean is None


def test_capacity_over_seeds_is_a_mean_with_an_interval():
    knees = {0: 6.0, 1: 7.0, 2: 8.0}
    cap = capacity(Scenario(rate=1.0, seeds=3), 0.9, 0.01, lambda s, r: 1.0 if r <= knees[s.seed] else 0.0)
    assert all(knees[k] / 1.01 <= v <= knees[k] for k, v in enumerate(cap.per_seed))
    assert cap.ci95[0] < cap.mean < cap.ci95[1] and 6.9 < cap.mean <= 7.0


def test_capacity_on_the_command_line(capsys):
    code = main(["capacity", "--hardware", "rtx3050", "--workload", "chat", "--duration", "20", "--seeds", "2",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    rates = doc["max_rate"]["per_seed"]
    assert doc["max_rate"]["seeds"] == [0, 1] and len(rates) == 2 and all(r > 0.1 for r in rates)
    assert doc["max_rate"]["mean"] == pytest.approx(sum(rates) / 2) and doc["simulations"] >= 4
    assert main(["capacity", "--trace", "x.csv"]) == 2
    assert "--trace" in capsys.readouterr().err


def test_a_dashboard_url_runs_from_the_command_line(capsys):
    url = "http://localhost:8000/?schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=5&t=2.5"
    assert main(["compare", "--scenario", url, "--json"]) == 0
    via_url = json.loads(capsys.readouterr().out)
    assert main(["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--workload", "rag",
                 "--duration", "5", "--json"]) == 0
    via_flags = json.loads(capsys.readouterr().out)
    assert via_url == via_flags and list(via_url["schedulers"]) == ["fcfs", "chunked"]
    # Flags override the query; run takes the query's first scheduler.
    assert main(["run", "--scenario", url, "--duration", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["schedulers"]) == ["fcfs"] and doc["scenario"]["duration"] == 3.0
    assert main(["run", "--scenario", "upload=abc123"]) == 2
    assert "--trace FILE" in capsys.readouterr().err
