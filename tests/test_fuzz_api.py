"""Property-based fuzzing of the HTTP API from its own OpenAPI schema (schemathesis): whatever the inputs, no 5xx.
A short run here; `bench/fuzz.py` runs the long campaign and prints its counts."""

from __future__ import annotations

import os
from collections import Counter

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from app.web import app  # noqa: E402

schema = schemathesis.openapi.from_asgi("/openapi.json", app)
CASES_PER_OPERATION = int(os.environ.get("FUZZ_CASES_PER_OPERATION", "15"))
CALLS: Counter = Counter()  # operation -> cases run; bench/fuzz.py prints it


@pytest.fixture(scope="module", autouse=True)
def kernels_ready():
    from fastapi.testclient import TestClient

    with TestClient(app) as c:  # runs the lifespan once: kernels compiled (or loaded) before fuzzing
        c.app.state.kernels_ready.wait(600)
        yield
    if os.environ.get("FUZZ_CASES_PER_OPERATION"):
        busy = CALLS.pop("503 busy, Retry-After", 0)
        print(f"\nAPI fuzz: {sum(CALLS.values())} cases ({busy} answered 503 busy with Retry-After), {dict(CALLS)}")


# The default suite runs the same cases every time (a random heavy-but-valid run could take a minute on a loaded
# machine); bench/fuzz.py's campaign (FUZZ_CASES_PER_OPERATION set) draws new ones.
@schema.parametrize()
@settings(max_examples=CASES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not os.environ.get("FUZZ_CASES_PER_OPERATION"))
def test_no_input_makes_the_api_fail_with_a_server_error(case):
    response = case.call()
    CALLS[f"{case.method} {case.path}"] += 1
    if response.status_code == 503 and response.headers.get("retry-after"):
        # The answer issue 13 asks for past the server's limits, not a failure: valid sweeps the fuzz started
        # keep running in the background, and past MAX_QUEUED_SWEEPS of them the next is told to retry.
        CALLS["503 busy, Retry-After"] += 1
        return
    assert response.status_code < 500, (response.status_code, case.path, case.query, response.text[:500])


def test_each_operation_is_a_test_of_its_own_id(request):
    """Under pytest-xdist a test runs once per node id: every operation's fuzz test needs its own (conftest)."""
    ids = [item.nodeid for item in request.session.items if item.nodeid.startswith("tests/test_fuzz_api.py::")
           and "test_no_input_makes_the_api_fail" in item.nodeid]
    if not ids:
        pytest.skip("the fuzz tests were deselected")
    assert len(ids) == len(set(ids)) >= 8 and any(i.endswith("[GET /api/run]") for i in ids), ids
