"""Issue 13, "no 5xx on any input": each reproduction from the issue answers with a page or a 4xx naming the
problem, never a server error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from test_web import figure_blobs

from app.web import app

EMPTY_RUNS = ("hardware=rtx3050&workload=rag&rate=0.01&duration=10",  # the first arrival is ~100 s away
              "hardware=rtx3050&workload=rag&duration=0.1",
              "hardware=rtx3050&workload=rag&duration=0.001")
FIGURES_OF_A_RUN = ("cdf", "gantt", "timeline", "kv", "metrics")


@pytest.fixture(scope="module")
def client():
    # A server error comes back as a 500 response (as a browser would see it), not as the test's exception.
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


# ----- runs with no request, or one -----
@pytest.mark.parametrize("query", EMPTY_RUNS)
def test_a_run_without_requests_draws_empty_figures_with_a_note(client, query):
    r = client.get("/?" + query)
    assert r.status_code == 200, r.text[:300]
    blobs = figure_blobs(r.text)
    for target in ("plot-cdf", "plot-timeline", "plot-gantt-fcfs", "plot-gantt-chunked"):
        notes = [a["text"] for a in blobs[f"data-figure-for:{target}"]["layout"].get("annotations", [])]
        assert any(n.startswith("No request") for n in notes), (target, notes)
    assert "no request arrived" in r.text  # the Gantt card's caption


@pytest.mark.parametrize("figure", FIGURES_OF_A_RUN)
def test_every_embed_of_a_run_without_requests_renders(client, figure):
    r = client.get(f"/embed/{figure}?{EMPTY_RUNS[2]}")
    assert r.status_code == 200, r.text[:300]
    assert "cannot be simulated" not in r.text


def test_a_run_of_one_request_draws_every_figure(client):
    r = client.get("/?hardware=rtx3050&workload=rag&num_requests=1")
    assert r.status_code == 200
    gantt = figure_blobs(r.text)["data-figure-for:plot-gantt-fcfs"]
    assert gantt["data"] and "annotations" not in gantt["layout"]
    assert "the only request" in r.text
