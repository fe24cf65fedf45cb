"""Shared factories for the tests."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # lets tests import browser_support

# Before any test builds the app (app.web.settings reads these): Starlette's TestClient sends `Host: testserver`,
# which the server answers to only when told (as a deployment names its host), and uploads go to a store of the
# session's own instead of the user's ~/.cache.
os.environ.setdefault("SCHED_SIM_ALLOWED_HOSTS", "testserver")
if "SCHED_SIM_STORE_DIR" not in os.environ:
    os.environ["SCHED_SIM_STORE_DIR"] = tempfile.mkdtemp(prefix="sched-sim-test-store-")
    atexit.register(shutil.rmtree, os.environ["SCHED_SIM_STORE_DIR"], True)
# A `sched-sim worker` the developer left running never runs the suite's commands (tests/test_worker.py asks for
# one of its own).
os.environ.setdefault("SCHED_SIM_NO_WORKER", "1")

from sim_core import Scenario, run  # noqa: E402
from sim_core.kernel import warm  # noqa: E402
from sim_core.policies import BY_NAME  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """The dashboard and API in-process, its kernels warm; one per test module (a module may define its own)."""
    from fastapi.testclient import TestClient  # only the modules that ask for it pay for the web app's import

    from app.web import app

    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        yield c


def pytest_sessionstart(session):
    # With a cold cache, the cluster, prefill/decode and autoscaled kernels compile in a low-priority process on
    # the core the session leaves idle, so the tests that first run them load them instead (warm.py).
    # One for the whole run: under pytest-xdist, the controller's (its workers skip this).
    if not hasattr(session.config, "workerinput"):
        session.config._fleet_compiler = warm.start_fleet_compiler()


def pytest_collection_modifyitems(items):
    # schemathesis (4.32) names each API operation's test "test_x[GET /api/run]" but sets its id the way pytest 8
    # kept it (Node._nodeid), which pytest 9 no longer reads (Node._id, structured): every operation's test has the
    # function's id, and pytest-xdist, which runs the suite and schedules by id, ran one operation of the 8
    # (tests/test_fuzz_api.py). Each gets the id its name says.
    for item in items:
        if type(item).__name__ != "SchemathesisFunction":
            continue
        own = f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}"
        if item.nodeid != own:
            try:
                from _pytest.nodeid import coerce_node_id  # pytest >= 9
            except ImportError:
                item._nodeid = own
            else:
                item._id = coerce_node_id(own)


def pytest_sessionfinish(session):
    warm.stop_compiler(getattr(session.config, "_fleet_compiler", None))


def small_scenario(**overrides) -> Scenario:
    """A few dozen requests on a small GPU: fast, but with queueing."""
    base = dict(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=40, rate=8.0, seed=1)
    base.update(overrides)
    return Scenario(**base)


@pytest.fixture
def scenario_factory():
    return small_scenario


def seed_scenario(scheduler: str, **fields) -> Scenario:
    """A seed's scenario as the seeds were written: on the RTX 3050 with max_model_len 8,192 and, for a
    chunked-prefill scheduler, vLLM V0's 512-token budget (the engine's default there is now vLLM's 2,048)."""
    chunked = {"token_budget": 512} if BY_NAME[scheduler].chunked_prefill else {}
    return Scenario(**{"hardware": "rtx3050", "max_model_len": 8192, **chunked, **fields, "scheduler": scheduler})


@pytest.fixture(scope="session")
def rag_results():
    """Seed 004's experiment 1: rag on an RTX 3050, FCFS against chunked prefill, a minute of arrivals."""
    return {
        seed: {s: run(seed_scenario(s, workload="rag", duration=60, seed=seed)) for s in ("fcfs", "chunked")}
        for seed in (0, 1, 2)
    }


@pytest.fixture(scope="module")
def site():
    """The browser tests' live server and chromium, one per test module (browser_support.browser_site)."""
    from browser_support import browser_site

    from app.web import app

    with browser_site(app) as pair:
        yield pair
    # The job boards are the process's, not the server's: a sweep, plan or frontier a module's pages left running
    # would hold the next module's jobs in the queue behind it (a goodput figure once waited past its 120 s). The
    # server's lifespan has cancelled them as it stopped (jobs.cancel_all): wait until their threads end them.
    import time

    from app.web import jobs

    jobs.cancel_all()  # again, should a server have been stopped without its lifespan's end
    deadline = time.monotonic() + 30
    while jobs.running_jobs() and time.monotonic() < deadline:
        time.sleep(0.05)
    if jobs.running_jobs():  # each module after it would wait its 30 s too (a job left running for ever did)
        import warnings

        warnings.warn(f"{jobs.running_jobs()} job(s) still running 30 s after they were cancelled", stacklevel=1)
