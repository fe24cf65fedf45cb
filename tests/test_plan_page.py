"""The dashboard's Plan tab (/plan) and /api/plan: the same plans as `sched-sim plan`, inputs checked with each
problem named, the work bounded before a job starts, and no input that makes the server fail (fuzzed)."""

from __future__ import annotations

import json
import re
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from app.web import plan_jobs, plan_page, service
from sim_core import ScenarioError

SMALL = "model=llama-3-8b&workload=chat&rate=12&duration=10&gpus=a100,l40s&tp=1"


def _finished(client, url: str) -> dict:
    r = client.get(url)
    assert r.status_code in (200, 202), r.text
    deadline = time.monotonic() + 300
    while r.status_code == 202 and time.monotonic() < deadline:
        time.sleep(0.2)
        r = client.get(r.json()["poll"])
    assert r.status_code == 200, r.text
    return r.json()


def test_the_api_plans_what_the_cli_plans(client, capsys):
    doc = _finished(client, "/api/plan?" + SMALL)
    assert main(["plan", "--model", "llama-3-8b", "--workload", "chat", "--rate", "12", "--duration", "10",
                 "--gpus", "a100,l40s", "--tp", "1", "--workers", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [p["scenario"] for p in doc["plans"]] == [p["scenario"] for p in cli["plans"]]
    assert [p["cost_per_hour"] for p in doc["plans"]] == [p["cost_per_hour"] for p in cli["plans"]]
    assert doc["status"] == "done" and doc["done"] == doc["total"] and doc["simulations"] == cli["simulations"]
    first = doc["plans"][0]
    assert first["link"].startswith("/?schedulers=chunked&hardware=")
    assert "model=llama-3-8b" in first["link"] and "rate=12" in first["link"]
    assert client.get("/api/plan/" + doc["id"]).json()["plans"] == doc["plans"]  # kept, not searched again
    assert client.get("/api/plan/nosuchjob").status_code == 404


def test_bad_plan_inputs_name_each_field(client):
    r = client.get("/api/plan?gpus=x100&tp=3&max_gpus=0&hardware=a100&rate=-1&duration=1e9")
    assert r.status_code == 422
    fields = {d["loc"][-1] if isinstance(d, dict) and "loc" in d else None for d in r.json()["detail"]}
    assert {"gpus", "tp", "max_gpus", "hardware", "rate"} <= fields, r.json()
    page = client.get("/plan?gpus=x100&token_budgets=abc")
    assert page.status_code == 422 and "unknown GPU" in page.text and "token budget" in page.text.lower()


def test_a_plan_for_a_trace_points_to_the_cli(client):
    r = client.get("/api/plan?model=llama-3-8b&gpus=h100&upload=0123456789abcdef")
    assert r.status_code == 422 and "sched-sim plan --trace FILE" in r.text
    assert [p["loc"][-1] for p in r.json()["detail"]] == ["upload"]


def test_the_web_bounds_a_plans_work_before_it_starts(client):
    many = "model=llama-3-8b&gpus=l4,l40s,a100,h100,h200&tp=1,2,4,8"  # 20 candidates
    r = client.get("/api/plan?" + many)
    assert r.status_code == 422 and "at most 16" in r.text
    long = "model=llama-3-8b&gpus=h100&rate=400&duration=600"
    r = client.get("/api/plan?" + long)
    assert r.status_code == 422 and "duration" in r.text
    r = client.get("/api/plan?model=llama-3-8b&gpus=h100&seeds=4")
    assert r.status_code == 422 and "seeds" in r.text


def test_the_plan_page_polls_then_shows_plans_and_the_pareto_plot(client):
    page = client.get("/plan?" + SMALL)
    assert page.status_code == 200 and 'name="gpus" value="a100" checked' in page.text
    job_id = re.search(r"/plan/job/(\w+)", page.text) or re.search(r'id="card-plans"', page.text)
    deadline = time.monotonic() + 300
    while job_id and "every 500ms" in (page.text) and time.monotonic() < deadline:
        time.sleep(0.2)
        page = client.get(f"/plan/job/{job_id.group(1)}")
    assert 'id="card-plans"' in page.text and 'data-figure-for="plot-pareto"' in page.text
    assert 'class="plan-link" href="/?schedulers=chunked&amp;hardware=' in page.text
    assert client.get("/plan/job/nosuchjob").status_code == 404
    assert 'href="/plan"' in client.get("/").text  # the nav link


def test_a_busy_server_says_so(client, monkeypatch):
    def busy(*a):
        raise service.BusyError("2 plans are already running or queued")

    monkeypatch.setattr(plan_page, "start_plan", busy)
    assert client.get("/api/plan?model=llama-3-8b&gpus=h100&rate=3").status_code == 503
    r = client.get("/plan?model=llama-3-8b&gpus=h100&rate=3")
    assert r.status_code == 503 and "already running" in r.text


KEYS = ["gpus", "tp", "schedulers", "token_budgets", "topologies", "max_gpus", "attainment", "model", "workload",
        "rate", "duration", "seeds", "slo_ttft_ms", "slo_tpot_ms", "hardware", "replicas", "trace", "upload",
        "scheduler", "num_requests", "token_budget", "t", "junk"]
VALUES = st.one_of(st.sampled_from(["", "0", "1", "2", "-1", "1e400", "nan", "inf", "a100", "h100,l4", "1:2",
                                    "colocated", "0:1", "chunked", "fcfs,fcfs", "llama-3-8b", "chat", "512",
                                    "8", "3", "0.5", "9" * 300, "é", "\x00"]),
                   st.text(max_size=10))


def test_any_plan_query_is_answered_without_a_server_error(client, monkeypatch):
    started = []

    def fake_start(scenario, inputs):  # no search: the parsing, the checks and the pages are what is fuzzed
        started.append(inputs)
        return plan_jobs.PlanJob("fuzz", scenario, inputs, scenario.rate)

    monkeypatch.setattr(plan_page, "start_plan", fake_start)

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(pairs=st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=6))
    def answered(pairs):
        for url in ("/plan", "/api/plan"):
            r = client.get(url, params=pairs)
            assert r.status_code in (200, 202, 422), (url, pairs, r.status_code, r.text[:300])
        try:
            plan_page.parse_plan_request(pairs, page=False)
        except ScenarioError as e:
            assert e.problems and all(isinstance(f, str) and m for f, m in e.problems)

    answered()
    assert started  # some fuzzed queries were valid plans
