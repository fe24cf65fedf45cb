"""A plan over a rate schedule on the web (issue 41, item 5; app/web/plan_autoscaling.py): one job plans at the
schedule's peak, then compares the cheapest plan held static with each autoscaler over the schedule, exactly as
`sched-sim plan --rate-schedule --json` does; its progress counts the comparison's runs, Cancel stops it, and a
comparison too big for the web is refused before it is queued, naming the field."""

from __future__ import annotations

import json
import threading
import time

from app.cli import main
from app.web import plan_jobs
from app.web.plan_autoscaling import (
    DAY_PRESET,
    DAY_SCHEDULE,
    comparison_work_problems,
    saving_sentence,
)
from app.web.plan_page import parse_plan_request
from sim_core import Scenario
from sim_core.studies.autoscale_compare import Comparison, Row

SCHEDULE = "0:1,100:6"
SMALL = ["--model", "llama-3.2-1b", "--gpus", "rtx3050", "--tp", "1", "--max-model-len", "8192", "--workload", "chat",
         "--rate-schedule", SCHEDULE]


def _query(duration: int) -> str:
    return (f"model=llama-3.2-1b&gpus=rtx3050&tp=1&max_model_len=8192&workload=chat&rate_schedule={SCHEDULE}"
            f"&duration={duration}")


def _poll(client, url: str, seen: list[int] | None = None, every: float = 0.2) -> dict:
    r = client.get(url)
    assert r.status_code in (200, 202), r.text
    deadline = time.monotonic() + 900
    while r.status_code == 202 and time.monotonic() < deadline:
        if seen is not None:
            seen.append(r.json()["done"])
        time.sleep(every)
        r = client.get(r.json()["poll"])
    assert r.status_code == 200, r.text
    return r.json()


def test_the_jobs_comparison_is_the_clis_plan_json(client, capsys):
    doc = _poll(client, "/api/plan?" + _query(300))
    assert main(["plan", *SMALL, "--duration", "300", "--workers", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert doc["status"] == "done" and doc["rate"] == cli["rate"] == 6
    assert [p["scenario"] for p in doc["plans"]] == [p["scenario"] for p in cli["plans"]]
    assert doc["autoscaling"] == cli["autoscaling"]
    assert [r["deployment"] for r in doc["autoscaling"]["rows"]] == ["static", "utilization", "predictive"]
    page = client.get(f"/plan/job/{doc['id']}")  # the page's fragment of the same job: the table and the sentence
    assert page.status_code == 200 and 'id="card-autoscaling"' in page.text
    assert "against the static " in page.text and "that meets the SLO at the peak" in page.text
    assert page.text.count('class="cluster-time-link"') == 3  # 300 s: within /cluster-time's budget


def test_progress_counts_the_comparisons_runs(client, monkeypatch):
    real = plan_jobs.compare

    def slow(scenario, plans, autoscalers, on_row):
        def row(done: int, total: int) -> None:
            on_row(done, total)
            time.sleep(0.6)  # long enough for the polls below to see each row's count
        return real(scenario, plans, autoscalers, on_row=row)

    monkeypatch.setattr(plan_jobs, "compare", slow)
    seen: list[int] = []
    doc = _poll(client, "/api/plan?" + _query(240), seen, every=0.1)
    total = doc["total"]
    assert doc["done"] == total and seen == sorted(seen) and seen[0] < total
    assert {total - 2, total - 1} <= set(seen)  # the static row, then the first autoscaler's, each counted


def test_cancel_stops_the_comparison_and_leaves_no_result(client, monkeypatch):
    real, gate, calls = plan_jobs.compare, threading.Event(), []

    def gated(scenario, plans, autoscalers, on_row):
        def row(done: int, total: int) -> None:
            on_row(done, total)
            if done == 1:
                gate.wait(60)  # the static row is done: the test cancels before the autoscalers run
        calls.append("started")
        out = real(scenario, plans, autoscalers, on_row=row)
        calls.append("finished")
        return out

    monkeypatch.setattr(plan_jobs, "compare", gated)
    r = client.get("/api/plan?" + _query(180))
    assert r.status_code == 202
    doc = r.json()
    deadline = time.monotonic() + 900
    while doc["done"] < doc["total"] - 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        doc = client.get(doc["poll"]).json()
    assert client.post(doc["cancel"]).status_code == 200
    gate.set()
    doc = _poll(client, doc["poll"])
    assert doc["status"] == "cancelled" and "autoscaling" not in doc and "plans" not in doc
    assert calls == ["started"]  # the comparison was stopped, never finished
    page = client.get(f"/plan/job/{doc['id']}")
    assert "data-cancelled" in page.text


def _fields(r) -> list[str]:
    return [d["loc"][-1] for d in r.json()["detail"]]


def test_a_day_too_big_for_the_web_is_refused_naming_the_field(client):
    busy = "model=llama-3-8b&gpus=h100&tp=1&workload=chat&duration=86400&rate_schedule=diurnal:period=86400,min=10,max=30"
    r = client.get("/api/plan?" + busy)
    assert r.status_code == 422 and _fields(r) == ["rate_schedule"], r.text
    assert "mean of at most" in r.text and "req/s" in r.text
    week = f"model=llama-3-8b&gpus=h100&tp=1&workload=chat&duration=604800&rate_schedule={DAY_SCHEDULE}"
    r = client.get("/api/plan?" + week)
    assert r.status_code == 422 and _fields(r) == ["duration"] and "duration must be at most" in r.text, r.text
    page = client.get("/plan?" + week)
    assert page.status_code == 422 and "duration must be at most" in page.text


def test_a_peak_too_busy_for_the_web_names_the_schedule_not_the_duration(client):
    """The plan at a schedule's peak holds it over at most PEAK_PLAN_S: 40 req/s for 600 s is 24,000 requests, over
    the web's 20,000 a run — the peak is what to lower (the duration the user gave is already cut to 600 s)."""
    peaky = ("model=llama-3-8b&gpus=h100&tp=1&workload=chat&duration=3600"
             "&rate_schedule=diurnal:period=3600,min=1,max=40")
    r = client.get("/api/plan?" + peaky)
    assert r.status_code == 422 and _fields(r) == ["rate_schedule"], r.text
    assert "the plan at the schedule's peak, 40 req/s over 600 s" in r.text and "at most 33.33 req/s" in r.text


def test_the_day_preset_is_within_the_web_budget():
    pairs = [(k, v) for k, value in DAY_PRESET.items() for v in (value if isinstance(value, list) else [value])]
    scenario, _ = parse_plan_request([(k, v) for k, v in pairs if v != ""], page=True)
    assert scenario.rate_schedule == DAY_SCHEDULE and scenario.duration == 86400 and scenario.rate is None
    assert comparison_work_problems(scenario) == []


def test_the_saving_sentence_names_the_best_autoscaler_and_the_static_deployment():
    s = Scenario(model="llama-3-8b", hardware="h100", replicas=4, rate_schedule=DAY_SCHEDULE, duration=86400)
    plan = type("P", (), {"scenario": s})()
    rows = [Row("static", s, 4, 96.0, 200.0, 0.995, 0.9), Row("utilization", s, 4, 80.0, 160.0, 0.99, 0.8, 1 - 80 / 96),
            Row("predictive", s, 4, 66.0, 140.0, 0.992, 0.85, 1 - 66 / 96)]
    text = saving_sentence(Comparison(DAY_SCHEDULE, 20.0, plan, rows))
    assert text.startswith("predictive saves 31% of GPU-hours (30 GPU-h) against the static 4 x h100 tp1")
    assert text.endswith("at 99.2% SLO attainment.")  # 4 replicas: no note that there is nothing to scale
    one = Scenario(model="llama-3-8b", hardware="h100", rate_schedule=DAY_SCHEDULE, duration=86400)
    scaled = Scenario(model="llama-3-8b", hardware="h100", rate_schedule=DAY_SCHEDULE, duration=86400,
                      autoscaler="utilization", min_replicas=1, max_replicas=1)
    alone = [Row("static", one, 1, 24.0, 50.0, 1.0, 1.0), Row("utilization", scaled, 1, 24.0, 50.0, 1.0, 1.0, 0.0)]
    assert saving_sentence(Comparison(DAY_SCHEDULE, 5.0, type("P", (), {"scenario": one})(), alone)).endswith(
        "One replica meets the peak, so an autoscaler that keeps at least one has nothing to scale.")
    worse = [rows[0], Row("utilization", s, 4, 120.0, 250.0, 0.999, 0.95, 1 - 120 / 96)]
    assert saving_sentence(Comparison(DAY_SCHEDULE, 20.0, plan, worse)).startswith(
        "utilization costs 25% of GPU-hours more (24 GPU-h)")
