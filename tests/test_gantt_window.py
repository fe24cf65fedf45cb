"""The Gantt at scale (app/web/ganttindex.py, app/web/gantt_window.py): a long run's Gantt shows a sample; a time window
asked of the server comes back with every request in flight in it, or a clear message when there are too many."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.web import app, service
from app.web.ganttindex import WINDOW_ROWS, TooMany, gantt_index, window
from sim_core import Scenario, timeline
from sim_core.runner import run

LONG = "schedulers=fcfs,chunked&hardware=a100&workload=chat&rate=20&duration=75&seed=2"


@pytest.fixture(scope="module")
def result():
    return run(Scenario(scheduler="chunked", hardware="a100", workload="chat", rate=20.0, duration=75.0, seed=2),
               record_events=True)


def test_a_window_holds_every_request_in_flight_in_it(result):
    n = len(result.requests)
    assert n > 1000
    index = gantt_index(result)
    segs = timeline.request_segments(result)
    t0, t1 = 30.0, 31.5
    expected = sorted({r for r, _, s, e in segs if s <= t1 and e >= t0})
    g = window(index, t0, t1)
    assert g["rows"]["id"] == expected and g["shown"] == len(expected) > 20
    drawn = {g["rows"]["id"][row] for seg in g["segments"].values() for row in seg["row"]}
    assert drawn == set(expected)
    # Each request's segments are exactly its own, at their times.
    k = g["rows"]["id"].index(expected[0])
    mine = sorted((s, e) for seg in g["segments"].values() for row, s, e in zip(seg["row"], seg["start"],
                  seg["end"], strict=True) if row == k)
    assert mine == sorted((round(s, 5), round(e, 5)) for r, _, s, e in segs if r == expected[0])


def test_too_many_requests_in_a_window_is_refused_with_a_count(result):
    index = gantt_index(result)
    with pytest.raises(TooMany, match=r"requests are in flight between .* to at most 1,000"):
        window(index, 0.0, result.end_s, limit=WINDOW_ROWS)
    # A box over some rows: only those requests (here a slice of the whole run).
    g = window(index, 0.0, result.end_s, requests=(100.4, 399.6))
    assert g["rows"]["id"] == list(range(101, 400))


def test_the_endpoint_answers_a_figure_a_message_or_a_422():
    service.clear_caches()
    with TestClient(app) as client:
        client.app.state.kernels_ready.wait(600)
        page = client.get("/?" + LONG)
        assert page.status_code == 200 and 'data-total="' in page.text
        body = client.get(f"/gantt/window?{LONG}&gantt=chunked&t0=30&t1=31.5").json()
        fig = body["figure"]
        ys = {y for t in fig["data"] for y in t["y"] if y is not None}
        assert ys == set(body["ids"]) and body["shown"] == len(ys) > 20
        assert fig["layout"]["xaxis"]["range"][0] == 0  # the comparison's span: the page zooms it
        assert "in flight between 30.00 s and 31.50 s" in body["message"]
        many = client.get(f"/gantt/window?{LONG}&gantt=chunked&t0=0&t1=80").json()
        assert many["figure"] is None and "to at most 1,000" in many["message"]
        box = client.get(f"/gantt/window?{LONG}&gantt=chunked&t0=0&t1=80&r0=200&r1=260").json()
        assert box["ids"] == list(range(200, 261))
        for bad, field in (("gantt=spf&t0=1&t1=2", "gantt"), ("gantt=fcfs&t0=abc&t1=2", "t0"),
                           ("gantt=fcfs&t0=3&t1=2", "t1"), ("gantt=fcfs&t0=1", "t1"),
                           ("gantt=fcfs&t0=1&t1=2&r0=5&r1=4", "r1"), ("gantt=fcfs&t0=1&t1=2&r0=x&r1=4", "r0")):
            r = client.get(f"/gantt/window?{LONG}&{bad}")
            assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == field, (bad, r.text)
