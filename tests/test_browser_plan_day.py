"""A plan over a rate schedule in a real browser (issue 41, item 5): the Plan form's "a day of diurnal load" preset
fills a 24 h schedule; the test shortens it (a real day is bench/bench_day_plan.py's) and finds plans: the job's
progress shows, then the static-against-autoscaled table and its saving sentence (axe-core: nothing serious or
critical); and Cancel stops such a job.
Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402
from test_browser_a11y import axe_summary, run_axe  # noqa: E402

from app.web import plan_jobs  # noqa: E402
from app.web.plan_autoscaling import DAY_SCHEDULE  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SHORT = "0:1,60:6"  # a minute of 1 req/s, then 6: quick, and the autoscalers have a peak to follow


def _paced(monkeypatch, pause_s: float) -> None:
    """Each of the comparison's runs followed by a pause, so that the progress bar is seen between them."""
    real = plan_jobs.compare

    def paced(scenario, plans, autoscalers, on_row):
        def row(done: int, total: int) -> None:
            on_row(done, total)
            time.sleep(pause_s)
        return real(scenario, plans, autoscalers, on_row=row)

    monkeypatch.setattr(plan_jobs, "compare", paced)


def _start_from_the_preset(page, duration: str) -> None:
    page.goto(page.base + "/plan")
    form = page.locator("#plan-form")
    page.locator("#preset-day").click()
    expect(form.locator("input[name=rate_schedule]")).to_have_value(DAY_SCHEDULE)
    expect(form.locator("input[name=duration]")).to_have_value("86400")
    expect(form.locator("input[name=rate]")).to_have_value("")
    expect(page.locator("#preset-day-done")).to_contain_text("Filled in")
    expect(form.locator("input[name=gpus]:checked")).to_have_count(1)  # the preset's A100 alone: one candidate
    form.locator("input[name=rate_schedule]").fill(SHORT)
    form.locator("input[name=duration]").fill(duration)
    form.locator("#plan-submit").click()
    page.wait_for_url("**/plan?**")


@pytest.mark.parametrize(("width", "height", "duration"), [(1440, 900, "150"), (390, 844, "140")])
def test_a_schedule_plans_at_the_peak_then_states_the_saving(site, monkeypatch, width, height, duration):
    _paced(monkeypatch, 1.0)
    # bypass_csp: the page's CSP (script-src 'self') would refuse the injected axe-core
    context, page = open_page(site, width, height, timeout_ms=240_000, is_mobile=width < 600, bypass_csp=True)
    _start_from_the_preset(page, duration)
    expect(page.locator("#plan-status progress")).to_be_visible()
    page.wait_for_function("() => { const p = document.querySelector('#plan-status progress');"
                           " return p && p.value > 0 && p.value < p.max; }")
    saving = page.locator("#autoscaling-saving")
    expect(saving).to_contain_text("that meets the SLO at the peak", timeout=240_000)
    assert any(w in saving.inner_text() for w in (" saves ", " costs ")), saving.inner_text()
    deployments = page.locator(".autoscaling-table tbody tr").evaluate_all("rs => rs.map(r => r.dataset.deployment)")
    assert deployments == ["static", "utilization", "predictive"]
    link = page.locator(".autoscaling-table a.cluster-time-link").first.get_attribute("href")
    assert link.startswith("/cluster-time?") and "autoscalers=static" in link
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # the table scrolls inside its card
    page.screenshot(path=SHOTS / f"plan-day-{width}.png", full_page=True)
    axe = run_axe(page)  # the new card and the preset: no serious or critical WCAG 2 A/AA violation
    assert not [v for v in axe["violations"] if v["impact"] in ("serious", "critical")], axe_summary("/plan day", axe)
    context.close()
    assert page.errors == [], page.errors


def test_cancel_stops_a_schedules_job(site, monkeypatch):
    _paced(monkeypatch, 3.0)
    context, page = open_page(site, timeout_ms=240_000)
    _start_from_the_preset(page, "130")
    button = page.locator("#plan-status button.cancel-job")
    expect(button).to_be_visible()
    button.click()
    expect(page.locator("#plan-status [data-cancelled]")).to_contain_text("Plan cancelled", timeout=30_000)
    expect(page.locator("#card-autoscaling")).to_have_count(0)
    context.close()
    assert page.errors == [], page.errors
