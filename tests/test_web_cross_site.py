"""Another site's link or frame starts no simulation and no job here (issue #37): it gets a cached page, a page
with a Run button, or (the JSON API) a 403 saying how to proceed. The server's own pages, typed URLs and clients
without Fetch Metadata stay one step. Counted on the service's simulations and the job boards' starts, not on
timing."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import pytest

from app.web import app, cross_site, jobs, service

SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=12&seed=5"
CROSS = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
FRAMED = {**CROSS, "Sec-Fetch-Dest": "iframe"}
SAME_SITE = {**CROSS, "Sec-Fetch-Site": "same-site"}
OWN = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
TYPED = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
# Every GET route that may start work, with a query that would start it.
WORK_URLS = [
    "/?" + SMALL,
    "/api/run?" + SMALL,
    "/embed/cdf?" + SMALL,
    "/goodput?" + SMALL + "&rate_min=1&rate_max=4&rate_step=1",
    "/api/sweep?" + SMALL + "&rate_min=1&rate_max=4&rate_step=1",
    "/plan?hardware=rtx3050&max_model_len=8192",
    "/api/plan?hardware=rtx3050&max_model_len=8192",
    "/frontier?" + SMALL,
    "/api/frontier?" + SMALL,
    "/cluster-time?" + SMALL,
    "/embed/cluster-time?" + SMALL,
    "/download/cluster-time.csv?" + SMALL,
    "/vs?" + SMALL,
    "/diff?a=" + SMALL.replace("&", "%26") + "&b=" + SMALL.replace("&", "%26").replace("seed=5", "seed=6"),
    "/api/diff?a="
    + SMALL.replace("&", "%26")
    + "&b="
    + SMALL.replace("&", "%26").replace("seed=5", "seed=6"),
    "/requests.csv?" + SMALL + "&scheduler=fcfs",
    "/trace.json?" + SMALL + "&scheduler=fcfs",
    "/kv/engine?" + SMALL,
    "/gantt/window?" + SMALL + "&scheduler=fcfs",
]


@pytest.fixture
def starts(monkeypatch):
    """Simulations and jobs started while the test runs: ["simulate", "job:<board>", ...]."""
    started: list[str] = []
    real_simulate, real_start = service.simulate_requests, jobs.JobBoard.start

    def simulate(*a, **k):
        started.append("simulate")
        return real_simulate(*a, **k)

    def start(self, job, run):
        started.append(f"job:{self.name}")
        return real_start(self, job, run)

    monkeypatch.setattr(service, "simulate_requests", simulate)
    monkeypatch.setattr(jobs.JobBoard, "start", start)
    service.clear_caches()
    return started


@pytest.mark.parametrize("url", WORK_URLS)
@pytest.mark.parametrize("headers", [CROSS, FRAMED, SAME_SITE], ids=["cross-site", "iframe", "same-site"])
def test_another_sites_navigation_starts_nothing(client, starts, url, headers):
    r = client.get(url, headers=headers)
    assert starts == [], (url, r.status_code)
    if url.startswith("/api/"):
        doc = r.json()
        assert r.status_code == 403 and doc["reason"] == "cross_site_navigation"
        assert "another site" in doc["detail"] and "open the URL directly" in doc["detail"]
    else:
        assert r.status_code == 200 and 'id="run-button"' in r.text and "another site" in r.text


def test_the_run_button_repeats_the_query_and_runs_from_our_own_page(client, starts):
    r = client.get("/?" + SMALL, headers=CROSS)
    fields = re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', r.text)
    assert fields == parse_qsl(SMALL) and '<form method="get" action="/">' in r.text
    assert starts == []
    clicked = client.get("/?" + SMALL, headers=OWN)  # the form's submission: a navigation from this origin
    assert clicked.status_code == 200 and "simulate" in starts and 'id="run-button"' not in clicked.text


@pytest.mark.parametrize("headers", [OWN, TYPED, {}], ids=["same-origin", "typed-url", "curl"])
def test_direct_use_runs_in_one_step(client, starts, headers):
    r = client.get("/api/run?" + SMALL.replace("seed=5", "seed=8"), headers=headers)
    assert r.status_code == 200 and set(r.json()["schedulers"]) == {"fcfs", "chunked"}
    assert starts.count("simulate") == 2  # one run per scheduler


def test_a_page_already_rendered_from_cached_runs_is_shown_as_it_is(client, starts):
    own = client.get("/?" + SMALL.replace("seed=5", "seed=9"), headers=OWN)
    assert own.status_code == 200 and "simulate" in starts
    starts.clear()
    shared = client.get("/?" + SMALL.replace("seed=5", "seed=9"), headers=CROSS)
    assert shared.status_code == 200 and shared.text == own.text and starts == []
    assert shared.headers["x-frame-options"] == "DENY"  # the headers every page gets


def test_head_from_another_site_starts_nothing_either(client, starts):
    r = client.head("/api/run?" + SMALL, headers=CROSS)
    assert r.status_code == 403 and r.content == b"" and starts == []


def _flat_routes(routes) -> list:
    """Every route, those of included routers too (FastAPI nests them: an included router's `original_router`;
    its prefix is in the included context)."""
    out = []
    for r in routes:
        inner = getattr(r, "original_router", None)
        if inner is None:
            out.append(r)
            continue
        prefix = r.include_context.prefix
        out += [
            type("R", (), {"path": prefix + x.path, "methods": getattr(x, "methods", None)})
            for x in _flat_routes(inner.routes)
        ]
    return out


def _example_path(route) -> str:
    return re.sub(r"\{[^}]+\}", "x", route.path)


def test_every_get_route_is_either_covered_or_listed_as_starting_no_work(client, starts):
    """A new route is covered by default: only the NO_WORK list lets another site's navigation through, and each
    route on it is checked here to start nothing when navigated to."""
    routes = [r for r in _flat_routes(app.routes) if "GET" in (getattr(r, "methods", None) or ())]
    assert len(routes) > 20
    for route in routes:
        path = _example_path(route)
        r = client.get(path + "?" + SMALL, headers=CROSS)
        assert starts == [], path
        if not cross_site.NO_WORK.match(path):
            assert r.status_code in (200, 403) and (
                "run-button" in r.text or "cross_site_navigation" in r.text
            ), path
