"""A run can be stopped from another thread (a web client that went away): it stops within milliseconds."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sim_core import Scenario
from sim_core.runner import Cancelled, RunOptions, make_requests, resolve, simulate_requests


def test_setting_the_cancel_flag_stops_a_long_run_at_once():
    s = Scenario(hardware="h100", workload="chat", rate=40.0, num_requests=200_000, seed=3)
    r = resolve(s)
    reqs = make_requests(s, r)
    simulate_requests(s, r, reqs.take(10))  # compile first (or load the cache): only the run itself is timed
    cancel = np.zeros(1, np.int64)
    threading.Timer(0.3, lambda: cancel.__setitem__(0, 1)).start()
    start = time.perf_counter()
    with pytest.raises(Cancelled, match="still in flight"):
        simulate_requests(s, r, reqs, RunOptions(cancel=cancel))
    assert time.perf_counter() - start < 1.5  # the whole run takes ~2.5 s on this machine's core


def test_an_unset_flag_changes_nothing():
    s = Scenario(hardware="rtx3050", max_model_len=8192, num_requests=50, seed=4)
    r = resolve(s)
    reqs = make_requests(s, r)
    a = simulate_requests(s, r, reqs)
    b = simulate_requests(s, r, reqs, RunOptions(cancel=np.zeros(1, np.int64)))
    assert a.metrics == b.metrics


def test_a_client_that_goes_away_cancels_its_simulation_within_a_second():
    import asyncio

    from app.web.http import CLIENT_CLOSED, run_until_disconnect

    seen = {}

    def slow_simulation(cancel):  # stands in for a run: the engine polls the flag the same way
        start = time.perf_counter()
        while cancel[0] == 0 and time.perf_counter() - start < 10:
            time.sleep(0.01)
        seen["stopped_after_s"] = time.perf_counter() - start

    class GoneAfter:
        headers: dict = {}  # no Queue-Ticket

        def __init__(self, seconds):
            self.at = time.perf_counter() + seconds

        async def is_disconnected(self):
            return time.perf_counter() >= self.at

    response = asyncio.run(run_until_disconnect(GoneAfter(0.3), slow_simulation))
    assert response.status_code == CLIENT_CLOSED
    assert seen["stopped_after_s"] < 0.3 + 1.0


def test_a_cancelled_web_run_is_not_cached_and_the_next_request_computes_it():
    from app.web import service
    from app.web.inputs import parse_request

    req = parse_request({"hardware": "rtx3050", "max_model_len": 8192, "num_requests": "200", "seed": "17", "schedulers": "fcfs"})
    service.clear_caches()
    with pytest.raises(Cancelled):
        service.compare(req, np.ones(1, np.int64))  # already cancelled: stops at its first check
    views = service.compare(req)
    assert views[0].metrics["completed"] == 200
