"""Long work on the dashboard server (issue 26): sweeps queue off the request threads (503 + Retry-After when the
queue is full, pages and static files answering meanwhile), a request's whole work is budgeted before it starts,
simulations stop when their client leaves, at the server's time limit, or at a sweep's or plan's Cancel, and the
result caches are bounded by bytes."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.web import budget, cache, http, inputs, plan_jobs, service
from app.web.jobs import CANCELLED_TEXT, ENDED_WITHOUT_RESULT, JobBoard, JobRecord
from app.web.lane import FairLine
from sim_core import SCHEDULER_NAMES
from sim_core.runner import Cancelled, make_requests, resolve, simulate_requests


@pytest.fixture(scope="module")
def client():
    from app.web import app

    with TestClient(app) as c:
        # Until the kernels are compiled (minutes into a cold cache on a busy machine) the API answers 503.
        assert c.app.state.kernels_ready.wait(900)
        yield c


@dataclass
class Job(JobRecord):  # a job of the tests' own boards: what the board reads, nothing else
    id: str


def _timed(call):
    start = time.perf_counter()
    out = call()
    return out, time.perf_counter() - start


# ----- the queue ---------------------------------------------------------------------------------------------
def test_sweeps_wait_off_the_request_threads_and_a_full_queue_answers_503_with_retry_after(client, monkeypatch):
    """8 synchronous sweeps at once: 4 queue (waiting without a request thread), the rest are told when to retry;
    meanwhile a cached page and app.js answer at once. Before, each waiting sweep held one of the 4 request
    threads, and pages and static files queued behind them."""
    release = _held_board(monkeypatch)  # its sweeps stand in for long ones: they run until released
    board = service._sweeps
    page = "/?duration=5&seed=91"
    assert client.get(page).status_code == 200  # simulated once: cached from now on
    answers: list = []

    def sweep(seed: int) -> None:
        answers.append(client.get(f"/api/sweep?duration=5&seed={seed}&rate_min=1&rate_max=2&rate_step=1"))

    threads = [threading.Thread(target=sweep, args=(seed,)) for seed in range(8)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while sum(a.status_code == 503 for a in answers) < 8 - inputs.MAX_QUEUED_SWEEPS:
            assert time.monotonic() < deadline, [a.status_code for a in answers]
            time.sleep(0.05)
        assert board.running_jobs() == inputs.MAX_QUEUED_SWEEPS
        for busy in answers:
            assert int(busy.headers["retry-after"]) >= 1
            assert busy.json()["retry_after_s"] == int(busy.headers["retry-after"])
            assert "retry in about" in busy.json()["detail"] and "max_queued_sweeps" in busy.json()["detail"]
            assert busy.json()["limit"] == {"name": "max_queued_sweeps", "value": inputs.MAX_QUEUED_SWEEPS}
        for url in (page, "/static/js/app.js", "/healthz"):
            response, took = _timed(lambda url=url: client.get(url))
            assert response.status_code == 200 and took < 1.0, (url, took)
    finally:
        release.set()
        for t in threads:
            t.join(20)
    assert sorted(a.status_code for a in answers) == [200] * inputs.MAX_QUEUED_SWEEPS + [503] * 4


def _held_board(monkeypatch) -> threading.Event:
    """service's sweep board replaced by one whose sweeps run until the returned event is set (or cancelled)."""
    monkeypatch.setattr(service, "_sweeps", JobBoard("held", inputs.MAX_QUEUED_SWEEPS, 8, service._sweeps._busy))
    release = threading.Event()

    def held_sweep(job):
        while not release.is_set() and not job.state.cancel[0]:
            time.sleep(0.01)
        job.result = {"rates": [], "target_attainment": service.KNEE_TARGET, "slo": {}, "schedulers": {}}

    monkeypatch.setattr(service, "_run_sweep", held_sweep)
    return release


def test_a_sweep_past_the_time_limit_answers_503_and_the_same_query_collects_it(client, monkeypatch):
    release = _held_board(monkeypatch)
    monkeypatch.setattr(inputs, "REQUEST_TIME_LIMIT_S", 0.3)
    query = "/api/sweep?duration=5&seed=92&rate_min=1&rate_max=2&rate_step=1"
    try:
        late, took = _timed(lambda: client.get(query))
        assert late.status_code == 503 and took < 2.0, late.text
        assert late.json()["limit"] == {"name": "request_time_limit_s", "value": 0.3}
        assert int(late.headers["retry-after"]) >= 1 and "ask again" in late.json()["detail"]
        assert service._sweeps.running_jobs() == 1  # the sweep goes on
        state = late.json()["sweep"]
        assert state["status"] == "running" and state["cancel"] == f"/api/sweep/{state['id']}/cancel"
    finally:
        release.set()
    assert client.get(query).status_code == 200  # found again, done
    assert client.post(state["cancel"]).json()["status"] == "done"  # too late to cancel: it says so


def test_a_stopping_server_cancels_its_jobs():
    from fastapi import FastAPI

    from app.web.server import lifespan

    board = JobBoard("lifespan", 1, keep=4, busy=service._sweeps._busy)

    def run(job):
        while not job.state.cancel[0]:
            time.sleep(0.01)

    async def serve_then_stop():  # the app's lifespan (on an app of its own: the module's keeps its state)
        async with lifespan(FastAPI()):
            return board.start(Job("held"), run)[0]

    job = asyncio.run(serve_then_stop())
    job.state.future.result(5)
    assert job.error == CANCELLED_TEXT


def test_finished_jobs_are_kept_within_a_bound_in_bytes():
    board = JobBoard("bytes", 1, keep=8, busy=service._sweeps._busy, keep_bytes=2500)

    def run(job):
        job.result = b"x" * 1000

    for key in "abcd":
        board.start(Job(key), run)[1].result(5)
    assert [k for k in "abcd" if board.get(k)] == ["c", "d"]


def test_a_page_whose_runs_are_cached_is_answered_as_rendered_before(client, monkeypatch):
    from app.web import pages

    renders = []
    render = pages._index
    monkeypatch.setattr(pages, "_index", lambda *a: renders.append(1) or render(*a))
    page = "/?duration=5&seed=93"
    first, again = client.get(page), client.get(page)
    assert first.status_code == again.status_code == 200 and len(renders) == 1
    assert again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
    service.clear_caches()  # the runs are gone: the page is simulated and rendered afresh
    assert client.get(page).content == first.content and len(renders) == 2


def test_retry_after_follows_the_running_jobs_pace():
    board = JobBoard("pace", 1, keep=4, busy=lambda retry: service.BusyError("busy", retry))
    release = threading.Event()

    def run(job):
        job.done = 5  # half done after about 0.2 s: about 0.2 s to go
        time.sleep(0.2)
        release.wait(5)
        job.result = 1

    job, _ = board.start(Job("a", total=10), run)
    time.sleep(0.3)
    with pytest.raises(service.BusyError) as busy:
        board.start(Job("b", total=10), run)
    assert 1 <= busy.value.retry_after <= 2
    release.set()
    job.state.future.result(5)
    board.start(Job("b"), run)[1].result(5)  # a place freed: accepted


# ----- Cancel ------------------------------------------------------------------------------------------------
def _long_sweep_query(seed: int) -> str:
    return (f"/?schedulers=chunked&hardware=a100&workload=chat&duration=600&seed={seed}"
            "&rate_min=10&rate_max=30&rate_step=10")


def _wait_running(job, timeout=20.0) -> None:
    deadline = time.monotonic() + timeout
    while job.state.started_at is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_cancel_stops_a_running_sweep_within_a_second(client):
    req = service.page_request(parse_qsl(_long_sweep_query(501)[2:]))
    job = service.start_sweep(req)
    _wait_running(job)
    time.sleep(0.3)  # inside its first point's simulation
    assert job.running
    response, _ = _timed(lambda: client.post(f"/goodput/{job.id}/cancel", headers={"HX-Request": "true"}))
    cancelled_at = time.perf_counter()
    assert response.status_code == 200 and "Sweep cancelled" in response.text
    job.future.result(5)
    assert time.perf_counter() - cancelled_at < 1.0
    assert job.error == CANCELLED_TEXT and job.result is None and job.done < job.total
    assert "Sweep cancelled" in client.get(f"/goodput/{job.id}").text
    assert client.post(f"/api/sweep/{job.id}/cancel").json()["status"] == "cancelled"  # the API's view of it
    assert service._sweeps.find(job.id) is None  # asking again starts it afresh


def test_a_sweeps_progress_has_a_cancel_button(client, monkeypatch):
    board = JobBoard("button", 1, keep=4, busy=service._sweeps._busy)
    monkeypatch.setattr(service, "_sweeps", board)
    release = threading.Event()
    monkeypatch.setattr(service, "_run_sweep", lambda job: release.wait(10))
    try:
        html = client.get("/goodput?duration=5&seed=77&rate_min=1&rate_max=2&rate_step=1",
                          headers={"HX-Request": "true"}).text
        assert 'hx-post="/goodput/' in html and ">Cancel</button>" in html
    finally:
        release.set()


def test_a_queued_job_that_is_cancelled_never_starts():
    board = JobBoard("queue", 2, keep=4, busy=lambda retry: service.BusyError("busy", retry))
    release, ran = threading.Event(), []

    def run(job):
        ran.append(job.id)
        release.wait(5)
        job.result = 1

    first, _ = board.start(Job("first"), run)
    second, _ = board.start(Job("second"), run)
    board.cancel("second")
    release.set()
    second.state.future.result(5)
    assert ran == ["first"] and second.error == CANCELLED_TEXT


def test_a_run_that_ends_without_a_result_leaves_no_job_running():
    """A job whose run returned (or raised a BaseException past its handler) with neither result nor error would
    count as running for ever: a place in the queue never freed, and a stopping server waiting on it."""
    board = JobBoard("silent", 2, keep=4, busy=lambda retry: service.BusyError("busy", retry))

    def interrupted(job):
        raise KeyboardInterrupt  # past every `except Exception` of the real runs

    quiet, _ = board.start(Job("quiet"), lambda job: None)
    loud, _ = board.start(Job("loud"), interrupted)
    quiet.state.future.result(5)
    with pytest.raises(KeyboardInterrupt):
        loud.state.future.result(5)
    assert quiet.error == loud.error == ENDED_WITHOUT_RESULT
    assert board.running_jobs() == 0 and board.find("quiet") is None  # asking again retries it
    assert board.cancel_running() == 0  # a stopping server finds nothing left to stop


def test_cancel_stops_a_plan_within_a_second(client, monkeypatch):
    """The plan's job runs inside its cancel scope: a simulation deep inside the search (here, one long run
    given no flag of its own) stops at Cancel."""
    from sim_core import Scenario

    s = Scenario(model="llama-3-8b", workload="chat", hardware="a100", num_requests=100_000, rate=40.0, seed=3)
    r = resolve(s)
    reqs = make_requests(s, r)  # made beforehand: only the simulation is the plan's (tens of seconds of it)

    def long_plan(job):
        try:
            simulate_requests(s, r, reqs)
        except Cancelled as e:
            job.error = str(e)

    monkeypatch.setattr(plan_jobs, "_run", long_plan)
    started = client.get("/api/plan?model=llama-3-8b&workload=chat&rate=11&gpus=a100&tp=1&schedulers=fcfs"
                         "&duration=30&seed=3")
    assert started.status_code == 202, started.text
    key = started.json()["id"]
    job = plan_jobs.get_plan_job(key)
    _wait_running(job)
    time.sleep(0.3)
    response = client.post(f"/api/plan/{key}/cancel")
    cancelled_at = time.perf_counter()
    job.state.future.result(5)
    assert time.perf_counter() - cancelled_at < 1.0
    assert response.json()["status"] == "cancelled"
    assert client.get(f"/api/plan/{key}").json()["status"] == "cancelled"
    html = client.get(f"/plan/job/{key}").text
    assert "Plan cancelled" in html


# ----- the whole request's budget ----------------------------------------------------------------------------
def test_a_request_over_the_work_budget_is_refused_at_once_naming_the_field_and_budget(client, monkeypatch):
    query = f"/api/run?schedulers={','.join(SCHEDULER_NAMES)}&seeds=10&duration=600&rate=33"
    full = FairLine(service.MAX_SIMULATIONS, service.MAX_SIMULATIONS, service.LINE_HOLD_S)
    for _ in range(service.MAX_SIMULATIONS):
        full.join()
    monkeypatch.setattr(http, "LINE", full)  # the line full: the budget is checked before it, still
    response, took = _timed(lambda: client.get(query))
    assert response.status_code == 422, response.text
    assert took < 1.0
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["query", "seeds"]
    assert f"{inputs.MAX_REQUEST_REQUESTS:,}" in problem["msg"] and "at most 1 seed" in problem["msg"]
    limits = client.get("/api/catalog").json()["limits"]
    assert limits["max_request_requests"] == inputs.MAX_REQUEST_REQUESTS
    assert limits["max_request_steps"] == inputs.MAX_REQUEST_STEPS
    assert limits["request_time_limit_s"] == inputs.REQUEST_TIME_LIMIT_S


def test_many_engines_count_in_the_budget(client):
    # token_budget 512, the chunked scheduler's own budget this was written with: vLLM's 2,048 on the A100 takes a
    # quarter of the prefill steps, and the run then fits the step budget.
    response, took = _timed(lambda: client.get(
        "/api/run?schedulers=chunked&duration=600&rate=33&prefill_replicas=64&decode_replicas=64&token_budget=512"))
    assert response.status_code == 422 and took < 1.0, response.text
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["query", "prefill_replicas"]
    assert f"{inputs.MAX_REQUEST_STEPS:,}" in problem["msg"]


def test_the_budget_accepts_what_fits_and_says_how_many_seeds_would():
    req = inputs.parse_request({"schedulers": ",".join(SCHEDULER_NAMES), "duration": "600", "rate": "33"},
                               max_seeds=inputs.MAX_API_SEEDS)
    s = req.scenario
    reqs = make_requests(s, resolve(s))
    budgets = {n: resolve(req.for_scheduler(n)).token_budget for n in req.schedulers}
    assert len(reqs) * len(req.schedulers) <= inputs.MAX_REQUEST_REQUESTS
    assert budget.request_work_problems(req, reqs, budgets) == []
    doubled = inputs.parse_request({"schedulers": ",".join(SCHEDULER_NAMES), "duration": "600", "rate": "33",
                                    "seeds": "2"}, max_seeds=inputs.MAX_API_SEEDS)
    (field, message), = budget.request_work_problems(doubled, reqs, budgets)
    assert field == "seeds" and "at most 1 seed(s) with these schedulers" in message


# ----- disconnects and the time limit ------------------------------------------------------------------------
def _asgi_get(app, path: str, query: str, leave_after_s: float) -> tuple[int, float]:
    """GET through the ASGI app whose client disconnects after `leave_after_s`: (status, seconds from the
    disconnect to the answer)."""
    status, left = {}, {}

    async def go():
        leaves = time.perf_counter() + leave_after_s

        async def receive():  # starlette polls this in a cancelled scope: it answers only once the client left
            while time.perf_counter() < leaves:
                await asyncio.sleep(0.01)
            left.setdefault("at", time.perf_counter())
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]

        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "root_path": "",
                 "query_string": query.encode(), "headers": [(b"host", b"testserver")], "scheme": "http",
                 "server": ("testserver", 80), "client": ("127.0.0.1", 1), "http_version": "1.1", "app": app}
        await app(scope, receive, send)

    asyncio.run(go())
    return status["code"], time.perf_counter() - left["at"]


def test_an_embed_stops_simulating_when_its_frame_goes_away(client):
    # Three schedulers on 18k RAG requests: ~1.7 s on an idle 2-core machine, so still running when the client
    # leaves (one scheduler on chat finished in ~0.5 s, sometimes before the 0.4 s leave); a seed no other test
    # uses, so no cached view answers at once.
    status, after = _asgi_get(client.app, "/embed/kv",
                              "schedulers=fcfs,chunked,spf&hardware=a100&workload=rag&duration=600&rate=30&seed=614",
                              0.4)
    assert status == http.CLIENT_CLOSED
    assert after < 1.0
    assert service.SIM_SLOTS._value == service.MAX_SIMULATIONS  # no simulation left running


def test_a_simulation_past_the_time_limit_is_stopped(monkeypatch):
    monkeypatch.setattr(http, "REQUEST_TIME_LIMIT_S", 0.3)
    seen = {}

    def slow(cancel):
        while not cancel[0]:
            time.sleep(0.01)
        seen["flag"] = int(cancel[0])

    class Stays:
        headers: dict = {}  # no Queue-Ticket

        async def is_disconnected(self):
            return False

    response, took = _timed(lambda: asyncio.run(http.run_until_disconnect(Stays(), slow)))
    assert response.status_code == 503 and b"time limit" in response.body
    assert seen["flag"] == http.CANCEL_TOO_LONG and took < 1.0


# ----- memory ------------------------------------------------------------------------------------------------
def test_caches_are_bounded_by_bytes():
    lru = cache.SingleFlightLRU(maxsize=100, max_bytes=1000, sizeof=len)
    for k in range(10):
        lru.get_or_compute(str(k), lambda: b"x" * 300)
    assert lru.bytes <= 1000 and [k for k in map(str, range(10)) if lru.get(k)] == ["7", "8", "9"]
    lru.get_or_compute("huge", lambda: b"x" * 5000)  # larger than the whole cache: answered, not kept
    assert lru.get("huge") is None and lru.bytes <= 1000


def test_deep_size_counts_array_buffers_and_containers():
    arr = np.zeros(100_000)
    size = cache.deep_size({"a": arr, "b": [arr[:10], list(range(1000))], "c": (1.5, "text")})
    assert arr.nbytes < size < arr.nbytes + 200_000


def test_a_job_whose_pages_stopped_polling_is_cancelled(monkeypatch):
    from app.web import jobs

    monkeypatch.setattr(jobs, "ABANDONED_S", 0.2)
    monkeypatch.setattr(jobs, "REAP_EVERY_S", 0.05)
    board = JobBoard("reap", 2, keep=4, busy=lambda retry: service.BusyError("busy", retry))

    def run(job):
        while not job.state.cancel[0]:
            time.sleep(0.01)

    polled, _ = board.start(Job("polled"), run)
    board.polled(polled)  # a page showed it, then was closed
    never, _ = board.start(Job("never"), run)  # never polled (the API's plans): kept
    polled.state.future.result(5)
    assert polled.error == CANCELLED_TEXT and never.running
    board.cancel("never")
    never.state.future.result(5)


def test_lora_adapters_weigh_each_step_in_the_budget():
    """Each engine step of a LoRA run walks every adapter: 68,391 of them make a run the step count alone accepts
    about 340 times the work, and the refusal names lora_adapters."""
    # token_budget 512 as written (vLLM's 2,048 on the A100 takes fewer steps, and 68,391 adapters then fit)
    data = {"model": "qwen3-8b", "hardware": "a100", "duration": "600", "rate": "33", "token_budget": "512"}
    few, many = (inputs.parse_request({**data, "lora_adapters": n}) for n in ("100", "68391"))
    reqs = make_requests(few.scenario, resolve(few.scenario))
    budgets = {n: resolve(few.for_scheduler(n)).token_budget for n in few.schedulers}
    assert budget.request_work_problems(few, reqs, budgets) == []
    (field, message), = budget.request_work_problems(many, reqs, budgets)
    assert field == "lora_adapters" and "at most" in message


def test_model_uncertainty_counts_its_ensemble_in_the_budget():
    from sim_core.studies import model_error

    data = {"schedulers": "fcfs,chunked", "duration": "600", "rate": "33"}
    req = inputs.parse_request(data, max_seeds=inputs.MAX_API_SEEDS)
    s = req.scenario
    reqs = make_requests(s, resolve(s))
    budgets = {n: resolve(req.for_scheduler(n)).token_budget for n in req.schedulers}
    assert budget.request_work_problems(req, reqs, budgets) == []
    ensemble = inputs.parse_request({**data, "model_uncertainty": "1"}, max_seeds=inputs.MAX_API_SEEDS)
    assert len(reqs) * 2 * (1 + model_error.MEMBERS) > inputs.MAX_REQUEST_REQUESTS
    (field, message), = budget.request_work_problems(ensemble, reqs, budgets)
    assert field == "model_uncertainty" and f"+ {model_error.MEMBERS} ensemble runs" in message
