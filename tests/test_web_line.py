"""Requests and the simulation lane's line (issue #37): invalid input is answered before it takes a place (its
422 never waits behind simulations), and a request told to come back (503) keeps its place with its ticket.
Deterministic: the line is set up full or busy by hand; simulations are counted, not timed."""

from __future__ import annotations

import html
import re

import pytest

from app.web import api, http, service
from app.web.lane import FairLine

PAGE = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=10&seed=21"


@pytest.fixture
def simulated(monkeypatch):
    runs: list[str] = []
    real = service.simulate_requests

    def counted(scenario, *a, **k):
        runs.append(scenario.scheduler)
        return real(scenario, *a, **k)

    monkeypatch.setattr(service, "simulate_requests", counted)
    service.clear_caches()
    return runs


@pytest.fixture
def busy_line(monkeypatch):
    """Every slot taken by requests that never finish, room to wait: a request that took a place would wait for
    ever (the test would hang), so an answer at all shows it took none."""
    line = FairLine(slots=2, max_line=64, hold_s=1e9)
    for _ in range(2):
        line.join()
    monkeypatch.setattr(http, "LINE", line)
    return line


def test_an_invalid_page_embed_or_api_request_is_answered_without_a_place_in_line(
    client, busy_line, simulated
):
    page = client.get("/?" + PAGE + "&duration=abc")
    assert page.status_code == 422 and 'id="err-duration"' in page.text
    frag = client.get("/?" + PAGE + "&duration=abc", headers={"HX-Request": "true"})
    assert frag.status_code == 422
    assert client.get("/embed/cdf?" + PAGE + "&tp=99").status_code == 422
    assert client.get("/api/run?" + PAGE + "&tp=99").status_code == 422
    bad = "hardware%3Drtx3050%26tp%3D99"
    for url in (f"/vs?a={bad}&b={bad}", f"/diff?a={bad}&b={bad}", "/cluster-time?" + PAGE + "&tp=99"):
        assert client.get(url).status_code == 422, url
    assert busy_line.waiting == 0 and busy_line.running == 2 and simulated == []


def test_a_cold_invalid_page_loads_the_results_without_its_typo_after_its_422(client, simulated):
    page = client.get("/?" + PAGE + "&duration=abc")
    assert page.status_code == 422 and simulated == []  # the fallback was not cached: nothing simulated yet
    assert 'id="stale-loading"' in page.text
    lazy = html.unescape(re.search(r'hx-get="(/stale-results\?[^"]*)"', page.text).group(1))
    assert "abc" not in lazy and lazy.endswith(
        "&stale=duration"
    )  # the valid fields only, the invalid one named
    results = client.get(lazy, headers={"HX-Request": "true"})
    assert results.status_code == 200 and 'id="card-metrics"' in results.text
    assert 'id="stale-note"' in results.text and "<code>duration</code> at its default" in results.text
    assert sorted(simulated) == ["chunked", "fcfs"]
    again = client.get("/?" + PAGE + "&duration=abc")  # now cached: shown at once, dimmed
    assert (
        'id="card-metrics"' in again.text
        and 'id="stale-note"' in again.text
        and "stale-loading" not in again.text
    )


def test_a_request_told_to_come_back_keeps_its_place_with_its_ticket(client, monkeypatch, simulated):
    line = FairLine(slots=1, max_line=64, hold_s=0.0)  # any wait at all: come back
    running = line.join().place
    monkeypatch.setattr(http, "LINE", line)
    checks = []
    real_check = api._over_budget
    monkeypatch.setattr(api, "_over_budget", lambda *a: checks.append(a) or real_check(*a))
    first = client.get("/api/run?" + PAGE)
    assert first.status_code == 503 and simulated == [] and len(checks) == 1
    queue = first.json()["queue"]
    assert queue["position"] == 1 and first.headers["retry-after"] == str(queue["retry_after_s"])
    assert first.headers["queue-ticket"] == queue["ticket"] and "number 1 in line" in first.json()["detail"]
    later = client.get("/api/run?" + PAGE.replace("seed=21", "seed=22"))
    assert later.json()["queue"]["position"] == 2  # behind the absent first client
    line.leave(running)  # the slot frees while both are away: it waits for the first, due back first
    back = client.get("/api/run?" + PAGE, headers={"Queue-Ticket": queue["ticket"]})
    assert back.status_code == 200 and sorted(simulated) == ["chunked", "fcfs"]
    # The time it waited for its place this time (none: its slot was waiting for it), apart from the run's own.
    assert re.fullmatch(r'line;dur=\d+;desc="waited in line"', back.headers["server-timing"])
    assert int(back.headers["server-timing"].split("dur=")[1].split(";")[0]) < 1000
    assert len(checks) == 2  # the second seed's; the retry's budget was checked the first time (a lookup now)
    assert (
        line.waiting == 1 and line.running == 0
    )  # its place used and given back; the later one's still held


def test_a_page_told_to_come_back_polls_with_its_ticket(client, monkeypatch, simulated):
    line = FairLine(slots=1, max_line=64, hold_s=0.0)
    line.join()
    monkeypatch.setattr(http, "LINE", line)
    page = client.get("/?" + PAGE)
    assert page.status_code == 503 and "The server is busy" in page.text and "number 1 in line" in page.text
    ticket = page.headers["queue-ticket"]
    assert f'hx-headers=\'{{"Queue-Ticket": "{ticket}"}}\'' in page.text and simulated == []
