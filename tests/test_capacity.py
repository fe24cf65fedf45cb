"""sched-sim capacity (sim_core/studies/capacity.py) and running any dashboard URL's scenario from the CLI (--scenario)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sim_core import Scenario, run
from sim_core.studies.capacity import capacity, max_rate


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


def test_a_ceiling_ends_the_search_once_a_rate_at_or_above_it_is_met():
    calls = []
    rate, runs = max_rate(Scenario(rate=5.0), 0.9, 0.03, knee_at(100.0, calls), ceiling=5.0)
    assert rate == 5.0 and runs == 1 and calls == [5.0]
    rate, _ = max_rate(Scenario(rate=5.0), 0.9, 0.03, knee_at(7.3), ceiling=50.0)  # below the ceiling: the knee
    assert 7.3 / 1.03 <= rate <= 7.3


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
    code = main(["capacity", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "chat", "--duration", "20", "--seeds", "2",
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
    url = "http://localhost:8000/?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=5&t=2.5"
    assert main(["compare", "--scenario", url, "--json"]) == 0
    via_url = json.loads(capsys.readouterr().out)
    assert main(["compare", "--schedulers", "fcfs,chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--workload", "rag",
                 "--duration", "5", "--json"]) == 0
    via_flags = json.loads(capsys.readouterr().out)
    assert via_url == via_flags and list(via_url["schedulers"]) == ["fcfs", "chunked"]
    # Flags override the query; run takes the query's first scheduler.
    assert main(["run", "--scenario", url, "--duration", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["schedulers"]) == ["fcfs"] and doc["scenario"]["duration"] == 3.0
    assert main(["run", "--scenario", "upload=abc123"]) == 2
    assert "--trace FILE" in capsys.readouterr().err


# ----- sched-sim plan -----
@pytest.fixture(scope="module")
def chat_plan():
    from sim_core.studies.planner import SearchSpace, plan

    base = Scenario(model="llama-3-8b", workload="chat", duration=30)
    return plan(base, 12.0, SearchSpace(["rtx3050", "l40s", "a100"], [1, 2], ["chunked"], max_gpus=6))


def test_a_plan_is_the_cheapest_replica_count_that_meets_the_slo(chat_plan):
    plans = chat_plan.plans
    assert plans and [p.cost_per_hour for p in plans] == sorted(p.cost_per_hour for p in plans)
    for p in plans:
        s = p.scenario
        assert p.gpus == s.replicas * s.tp <= 6 and p.metrics["slo_attainment"] >= 0.9
        assert p.cost_per_hour == pytest.approx(p.gpus * p.metrics["cost_per_hour"] / p.metrics["gpus"])
        if s.replicas > 1:  # minimal: one replica fewer misses (the verification trims the estimate)
            fewer = s.model_copy(update={"replicas": s.replicas - 1,
                                         "router": s.router if s.replicas > 2 else "round_robin"})
            assert run(fewer).metrics["slo_attainment"] < 0.9
    fronts = [p for p in plans if p.pareto]
    assert fronts and fronts[0] is plans[0]  # the cheapest is always on the front
    for p in plans:
        dominated = any(q.cost_per_hour <= p.cost_per_hour and q.metrics["ttft_ms"]["p99"] < p.metrics["ttft_ms"]["p99"]
                        for q in plans if q is not p)
        assert p.pareto != dominated or p.cost_per_hour == plans[0].cost_per_hour


def test_a_plan_says_why_a_candidate_is_out(chat_plan):
    reasons = {(i.hardware, i.tp): i.reason for i in chat_plan.infeasible}
    assert "GB" in reasons[("rtx3050", 1)]  # 16 GB of weights on an 8 GB card
    assert len(chat_plan.plans) + len(chat_plan.infeasible) == chat_plan.candidates == 6  # each has its line
    for i in chat_plan.infeasible:
        assert i.kind in ("fit", "gpus", "pruned", "slo", "verify") and i.reason


def test_a_plan_runs_from_the_command_line_as_its_scenario(capsys, chat_plan):
    p = chat_plan.plans[0]
    assert main(["run", "--scenario", p.scenario.to_query(), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["schedulers"][p.scenario.scheduler]["metrics"]
    assert "bounds" in metrics  # the CLI adds the clairvoyant bounds; a plan's runs do not compute them
    assert {k: v for k, v in metrics.items() if k != "bounds"} == json.loads(json.dumps(p.metrics))
    assert main(["plan", "--workload", "chat", "--gpus", "a100"]) == 2
    assert "--model" in capsys.readouterr().err
