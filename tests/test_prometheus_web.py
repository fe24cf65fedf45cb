"""/download/metrics.prom: a dashboard run's Prometheus metrics, as `sched-sim run --metrics-out` writes them."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.web import app

QUERY = "scheduler=chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3"


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)  # warm-up runs in the background
        yield c


def test_the_metrics_download_is_the_runs_scrape(client):
    r = client.get("/download/metrics.prom?" + QUERY)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert r.headers["content-disposition"].endswith('filename="sched-sim-chunked.prom"')
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    metrics = client.get("/api/run?" + QUERY.replace("scheduler=", "schedulers=")).json()
    completed = metrics["schedulers"]["chunked"]["metrics"]["completed"]
    count = [s.value for s in fams["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_count")]
    assert count == [completed]
    r = client.get("/download/metrics.prom?" + QUERY + "&engine=sglang")
    assert "sglang:time_to_first_token_seconds_count" in r.text and "vllm:" not in r.text


@pytest.mark.parametrize("query, field", [
    ("schedulers=fcfs,chunked&num_requests=30", "scheduler"),
    ("scheduler=fcfs&duration=-5", "duration"),
])
def test_the_metrics_download_refuses_bad_queries_naming_the_field(client, query, field):
    r = client.get("/download/metrics.prom?" + query)
    assert r.status_code == 422 and field in r.text
