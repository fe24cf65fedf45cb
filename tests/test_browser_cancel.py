"""The Cancel button of a rate sweep in a real browser: clicking it stops the sweep on the server within a second
(its job ends, the server's CPU goes back to idle) and the card says so."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from app.web import service  # noqa: E402

pytestmark = pytest.mark.browser

# A scenario with 600 s of arrivals, swept over 16 rates of up to 19,200 requests each: the sweep runs for
# several seconds on this machine.
SCENARIO = "/?schedulers=chunked&hardware=a100&workload=chat&duration=600&seed=808"


def test_cancel_stops_a_running_sweep(site):
    context, page = open_page(site, timeout_ms=60_000)
    try:
        page.goto(page.base + SCENARIO)
        card = page.locator("#card-goodput")
        card.locator("input[name=rate_min]").fill("2")
        card.locator("input[name=rate_max]").fill("32")
        card.locator("input[name=rate_step]").fill("2")
        card.locator("button[type=submit]").click()
        button = page.locator("#goodput-status button.cancel-job")
        expect(button).to_be_visible()  # it stays put while the progress around it is polled (hx-preserve)
        job = service.get_job(button.get_attribute("hx-post").split("/")[2])
        assert job is not None and job.running
        page.locator("#card-goodput").screenshot(path=screenshot_dir() / "sweep-running.png")

        button.click()
        clicked = time.perf_counter()
        job.future.result(5)
        stopped_after = time.perf_counter() - clicked
        assert stopped_after < 1.0, stopped_after
        assert job.result is None and job.done < job.total
        expect(page.locator("#goodput-status [data-cancelled]")).to_contain_text("Sweep cancelled")
        cpu = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - cpu < 0.5  # the server (this process) is idle again
        page.locator("#card-goodput").screenshot(path=screenshot_dir() / "sweep-cancelled.png")
        assert page.errors == [], page.errors
    finally:
        context.close()


def test_cancel_stops_a_running_plan(site, monkeypatch):
    import sim_core.studies.planner
    from app.web import plan_jobs

    real_run = sim_core.studies.planner.run

    def paced_run(scenario, **kw):  # a few tenths of a second per simulation: the search lasts a while
        time.sleep(0.3)
        return real_run(scenario, **kw)

    monkeypatch.setattr(sim_core.studies.planner, "run", paced_run)
    context, page = open_page(site, timeout_ms=60_000)
    try:
        page.goto(page.base + "/plan?gpus=a100,h100&tp=1&duration=10&rate=30&seed=31")
        button = page.locator("#plan-status button.cancel-job")
        expect(button).to_be_visible()
        job = plan_jobs.get_plan_job(button.get_attribute("hx-post").split("/")[3])
        assert job is not None and job.running
        button.click()
        clicked = time.perf_counter()
        job.state.future.result(5)
        assert time.perf_counter() - clicked < 1.0
        assert job.result is None
        expect(page.locator("#plan-status [data-cancelled]")).to_contain_text("Plan cancelled")
        assert page.errors == [], page.errors
    finally:
        context.close()
