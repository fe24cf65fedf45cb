"""Issue #41's leftover "80 s of simulating… on the first autoscaler selection", in a real browser: while the
form's request waits on the autoscaler's capacity search, the "simulating…" line says which run of the search it
is on (static/js/run_progress.js polling GET /api/progress), and goes back to "simulating…" once the answer is in.
Fails before the fix: the line said "simulating…" throughout."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import open_page  # noqa: E402
from playwright.sync_api import expect  # noqa: E402
from test_run_progress import hold_the_second_capacity_run  # noqa: E402

pytestmark = pytest.mark.browser

# Opened with the replica's rate given (no search); clearing that field asks the page to search for it.
GIVEN = ("/?schedulers=chunked&hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=chat&duration=60"
         "&rate_schedule=0:1,30:3&autoscaler=predictive&max_replicas=3&seed=4141&autoscale_replica_rate=5")


def test_the_busy_line_says_which_capacity_run_the_page_waits_on(site, monkeypatch):
    gate = hold_the_second_capacity_run(monkeypatch)
    context, page = open_page(site, 1440, 900, timeout_ms=120_000)
    try:
        page.goto(page.base + GIVEN)
        field = page.locator("input[name=autoscale_replica_rate]")
        field.fill("")
        field.dispatch_event("change")
        busy = page.locator("#scenario-form .busy")
        expect(busy).to_contain_text("one replica serves within the SLO, for the autoscaler's plan: run 2",
                                     timeout=60_000)
        gate.set()
        expect(busy).to_have_text("simulating…", timeout=120_000)
        expect(busy).to_be_hidden()
        assert page.errors == [], page.errors
    finally:
        gate.set()
        context.close()
