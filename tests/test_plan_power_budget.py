"""plan --power-budget-kw (issue #40): the cheapest plan within the SLOs and the power budget, a different one when
the budget binds; plans over it are listed as infeasible with the power they draw; the input is bounded."""

from __future__ import annotations

import pytest

from app.cli import main
from sim_core import Scenario
from sim_core.scenario import ScenarioError
from sim_core.studies.plan_space import parse_plan_inputs
from sim_core.studies.planner import Candidate, Plan, PlanResult, SearchSpace, plan, within_power_budget

BASE = Scenario(model="llama-3-8b", workload="chat", duration=30, seed=1)
RATE = 40.0
GPUS = ("l40s", "a100", "h100")


def _plan(hardware: str, kw: float, cost: float) -> Plan:
    s = BASE.model_copy(update={"hardware": hardware})
    return Plan(
        s,
        1,
        cost,
        None,
        1.0,
        {"energy": {"energy_j": kw * 1000.0 * 10}, "duration_s": 10.0, "ttft_ms": {"p99": 1.0}},
        candidate=Candidate(hardware, 1, "chunked", None),
    )


def test_plans_over_the_budget_become_infeasible_with_their_power():
    out = PlanResult(plans=[_plan("l40s", 1.4, 7.0), _plan("h100", 1.2, 13.0)])
    within_power_budget(out, 1.3)
    assert [p.scenario.hardware for p in out.plans] == ["h100"]
    (over,) = out.infeasible
    assert over.kind == "power" and over.power_kw == pytest.approx(1.4) and "1.3" in over.reason
    untouched = PlanResult(plans=[_plan("l40s", 1.4, 7.0)])
    within_power_budget(untouched, None)
    assert len(untouched.plans) == 1 and not untouched.infeasible


@pytest.mark.slow
def test_a_binding_budget_returns_a_different_plan_that_draws_less():
    free = plan(BASE, RATE, SearchSpace(gpus=GPUS, power_budget_kw=1e6)).plans  # energy on, nothing excluded
    cheapest, frugal = free[0], min(free, key=lambda p: p.power_kw)
    assert cheapest is not frugal, [(p.scenario.hardware, p.cost_per_hour, p.power_kw) for p in free]
    budget = (cheapest.power_kw + frugal.power_kw) / 2
    bound = plan(BASE, RATE, SearchSpace(gpus=GPUS, power_budget_kw=budget))
    best = bound.plans[0]
    assert best.scenario.hardware != cheapest.scenario.hardware and best.power_kw <= budget
    assert best.cost_per_hour > cheapest.cost_per_hour  # the budget costs money
    assert any(i.kind == "power" and i.hardware == cheapest.scenario.hardware for i in bound.infeasible)


def test_bad_budget_names_the_input():
    for bad in ("0", "-1", "1e9", "lots"):
        with pytest.raises(ScenarioError) as e:
            parse_plan_inputs({"power_budget_kw": bad})
        assert e.value.problems[0][0] == "power_budget_kw"
    assert parse_plan_inputs({"power_budget_kw": "12.5"}).space().power_budget_kw == 12.5


def test_cli_has_the_flag(capsys):
    main(["plan", "--help"])
    assert "--power-budget-kw" in capsys.readouterr().out
