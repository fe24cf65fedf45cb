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


# ----- sweeps around tiny rates -----
@pytest.mark.parametrize("url", ["/api/sweep?hardware=rtx3050&workload=rag&duration=1&rate=1e-300",
                                 "/api/sweep?hardware=rtx3050&rate_min=1e-300&rate_max=1e-299&rate_step=1e-300"])
def test_a_sweep_below_the_minimum_rate_is_refused_naming_it(client, url):
    r = client.get(url)
    assert r.status_code == 422, r.text[:300]
    assert "1e-06 requests/s" in str(r.json()["detail"])


def test_a_goodput_embed_below_the_minimum_rate_names_it(client):
    r = client.get("/embed/goodput?hardware=rtx3050&rate=1e-320")
    assert r.status_code == 422 and "1e-06 requests/s" in r.text


def test_a_page_below_the_minimum_sweep_rate_still_shows_its_run(client):
    r = client.get("/?hardware=rtx3050&workload=rag&duration=1&rate=1e-300")
    assert r.status_code == 200
    assert "Goodput-vs-rate curves: a sweep is proposed around a rate of at least 1e-06" in r.text


def test_the_smallest_sweep_rate_has_a_usable_default_range(client):
    r = client.get("/api/sweep?hardware=rtx3050&workload=chat&duration=1&rate=1e-6&schedulers=fcfs")
    assert r.status_code == 200
    assert r.json()["rates"][0] > 0
