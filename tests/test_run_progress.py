"""Progress for capacity searches (issue #41's leftover "80 s of simulating… on the first autoscaler selection"):
the rate search tells each run's number and, once bracketed, the most it can take (rate_search.search_rate's
`progress`); the autoscaler's capacity search reports it through sim_core.progress; the dashboard keeps each
page's reports by its query (app/web/run_progress.py) and GET /api/progress answers them while the page's request
is still out, which static/js/run_progress.js shows in place of "simulating…"."""

from __future__ import annotations

import threading
import time

import pytest

from app.web.run_progress import doing, reported_as
from sim_core import Scenario, cluster_over_time
from sim_core.progress import report, reporting
from sim_core.studies.rate_search import bisections_left, search_rate


def _threshold(limit: float):
    return lambda scenario, rate: 1.0 if rate <= limit else 0.0


@pytest.mark.parametrize("limit", [0.3, 2.0, 7.3, 55.0])
def test_the_search_numbers_its_runs_and_never_takes_more_than_it_said(limit):
    told = []
    found, runs = search_rate(Scenario(rate=2.0), _threshold(limit), progress=lambda n, r, most: told.append((n, most)))
    assert [n for n, _ in told] == list(range(1, runs + 1))  # one report before each run, numbered
    bounds = [most for _, most in told if most is not None]
    assert bounds and all(runs <= most for most in bounds)  # "of at most n" held
    assert bounds == sorted(bounds) and bounds[-1] == runs  # each bisection's bound is exact for a halving search
    assert found == pytest.approx(limit, rel=0.031)


def test_bisections_left_halves_the_brackets_logarithm_down_to_the_tolerance():
    assert bisections_left(1.0, 2.0, 0.03) == 5  # log 2 / log 1.03 = 23.4 -> 2^5 = 32 >= 23.4
    assert bisections_left(1.0, 1.02, 0.03) == 0


def test_bisections_left_is_the_cap_when_no_tolerance_floor_is_left(monkeypatch):
    from sim_core.studies import rate_search

    monkeypatch.setattr(rate_search, "MIN_TOLERANCE", 0.0)  # as tests/test_cli_hostile.py does: no division by 0
    assert bisections_left(1.0, 2.0, 0.0) == rate_search.MAX_BISECTIONS


def test_a_report_reaches_only_the_callback_its_thread_set():
    heard = []
    report("nobody listens")  # no callback: dropped
    with reporting(heard.append):
        report("one")
        other = threading.Thread(target=report, args=("another thread",))
        other.start()
        other.join()
    report("after")
    assert heard == ["one"]


def test_a_pages_runs_are_what_it_is_doing_until_they_end():
    with reported_as("q=1"):
        assert doing("q=1") is None
        report("run 2 of at most 7")
        assert doing("q=1") == "run 2 of at most 7" and doing("q=2") is None
    assert doing("q=1") is None


def test_a_page_of_two_runs_says_the_latest_report_of_either():
    said_b, done = threading.Event(), threading.Event()

    def run_b():
        with reported_as("q=3"):
            report("b: run 1")
            said_b.set()
            done.wait(10)

    with reported_as("q=3"):
        report("a: run 1")
        other = threading.Thread(target=run_b)
        other.start()
        said_b.wait(10)
        assert doing("q=3") == "b: run 1"
        report("a: run 2")
        assert doing("q=3") == "a: run 2"
        done.set()
        other.join()


# An autoscaled page whose capacity search blocks on its second run until the test has read the progress.
PAGE = ("schedulers=chunked&hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=chat&duration=60"
        "&rate_schedule=0:1,30:3&autoscaler=predictive&max_replicas=3&seed=41")


def hold_the_second_capacity_run(monkeypatch) -> threading.Event:
    """The autoscaler's capacity search, stood in for: a replica meets the SLO up to 4 req/s, and the search's
    second run waits until the returned gate is set (the page is then on "run 2" for as long as a test needs)."""
    gate, calls = threading.Event(), []

    def attainment(run, scenario, rate):
        calls.append(rate)
        if len(calls) == 2:
            gate.wait(60)
        return 1.0 if rate <= 4.0 else 0.0

    monkeypatch.setattr(cluster_over_time, "slo_attainment", attainment)
    return gate


def test_the_page_says_which_capacity_run_it_is_on_while_it_waits(client, monkeypatch):
    gate = hold_the_second_capacity_run(monkeypatch)
    answer = {}
    page = threading.Thread(target=lambda: answer.setdefault("r", client.get("/?" + PAGE)))
    page.start()
    try:
        deadline, said = time.monotonic() + 120, None
        while time.monotonic() < deadline and not (said or "").count("run 2"):
            said = client.get("/api/progress?" + PAGE).json()["doing"]
            time.sleep(0.05)
        assert said is not None and "one replica serves within the SLO, for the autoscaler's plan: run 2" in said
    finally:
        gate.set()
        page.join(300)
    assert answer["r"].status_code == 200
    assert client.get("/api/progress?" + PAGE).json() == {"doing": None}


def test_a_bad_query_is_refused_naming_the_field(client):
    r = client.get("/api/progress?rate=-3")
    assert r.status_code == 422 and "rate" in r.text
