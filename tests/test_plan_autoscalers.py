"""`sched-sim plan` over a rate schedule (issue 24, item 4; sim_core/studies/autoscale_compare.py): the cheapest
static plan for the schedule's peak against each autoscaler, each row's figures those of a separate run()."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from app.cli import main
from app.plan_report import comparison_lines
from sim_core import Scenario, run
from sim_core.cluster_over_time import attainment_by_window
from sim_core.studies.autoscale_compare import PEAK_PLAN_S, compare
from sim_core.studies.planner import Plan

SCHEDULE = "0:1,100:6"
PLAN = ["plan", "--model", "llama-3.2-1b", "--gpus", "rtx3050", "--max-model-len", "8192", "--workload", "chat",
        "--rate-schedule", SCHEDULE, "--duration", "300"]


@pytest.fixture(scope="module")
def doc() -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*PLAN, "--json"]) == 0
    return json.loads(out.getvalue())


def test_the_plan_is_for_the_peak_and_each_row_is_a_separate_run(doc):
    assert doc["rate"] == 6 and doc["plans"]
    planned = Scenario.from_query(doc["plans"][0]["scenario"])
    assert planned.rate == 6 and planned.rate_schedule is None and planned.duration == min(300, PEAK_PLAN_S)
    rows = doc["autoscaling"]["rows"]
    assert [r["deployment"] for r in rows] == ["static", "utilization", "predictive"]
    static = Scenario.from_query(rows[0]["scenario"])
    assert static.rate_schedule == SCHEDULE and static.replicas == planned.replicas and static.autoscaler is None
    res = run(static)
    hours = res.metrics["gpus"] * res.end_s / 3600
    worst = min(a for a in attainment_by_window(res, res.end_s)["attainment"] if a is not None)
    assert (rows[0]["gpu_hours"], rows[0]["slo_attainment"], rows[0]["slo_attainment_worst_window"]) == (
        hours, res.metrics["slo_attainment"], worst)
    for r in rows[1:]:
        s = Scenario.from_query(r["scenario"])
        assert s.autoscaler == r["deployment"] and s.scaling_bounds == (1, static.replicas)
        m = run(s).metrics
        assert (r["gpu_hours"], r["cost"], r["slo_attainment"], r["slo_attainment_worst_window"]) == (
            m["gpu_hours"], m["cost"], m["slo_attainment"], m["slo_attainment_worst_window"])
        assert r["gpu_hours_saving"] == pytest.approx(1 - m["gpu_hours"] / hours)
        assert r["replicas"] <= static.replicas


def test_the_table_has_one_row_per_deployment(doc):
    base = Scenario(model="llama-3.2-1b", hardware="rtx3050", max_model_len=8192, workload="chat", rate_schedule=SCHEDULE, duration=300)
    first = doc["plans"][0]
    plan = Plan(Scenario.from_query(first["scenario"]), first["gpus"], None, None, first["replica_capacity"],
                first["metrics"])
    lines = comparison_lines(compare(base, [plan], ("utilization",)))
    assert "held static vs autoscaled" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ["deployment", "static", "utilization"]
    saving = float(lines[-1].split()[-1])
    assert saving == pytest.approx(100 * doc["autoscaling"]["rows"][1]["gpu_hours_saving"], abs=0.05)


@pytest.mark.parametrize("argv, field", [(["--autoscalers", "hpa"], "--autoscalers"),
                                         (["--rate", "2", "--autoscalers", "predictive"], "--autoscalers")])
def test_bad_autoscalers_are_refused_naming_the_flag(capsys, argv, field):
    args = PLAN[:-4] + (argv if "--rate" in argv else ["--rate-schedule", SCHEDULE, *argv])
    assert main(args) != 0
    assert field in capsys.readouterr().err
