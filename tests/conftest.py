"""Shared factories for the tests."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # lets tests import browser_support

from sim_core import Scenario, run  # noqa: E402


def small_scenario(**overrides) -> Scenario:
    """A few dozen requests on a small GPU: fast, but with queueing."""
    base = dict(hardware="rtx3050", workload="chat", num_requests=40, rate=8.0, seed=1)
    base.update(overrides)
    return Scenario(**base)


@pytest.fixture
def scenario_factory():
    return small_scenario


@pytest.fixture(scope="session")
def rag_results():
    """Seed 004's experiment 1: rag on an RTX 3050, FCFS against chunked prefill, a minute of arrivals."""
    return {
        seed: {s: run(Scenario(scheduler=s, workload="rag", hardware="rtx3050", duration=60, seed=seed))
               for s in ("fcfs", "chunked")}
        for seed in (0, 1, 2)
    }


@pytest.fixture(scope="module")
def site():
    """The browser tests' live server and chromium, one per test module (browser_support.browser_site)."""
    from browser_support import browser_site

    from app.web import app

    with browser_site(app) as pair:
        yield pair
