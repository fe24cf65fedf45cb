"""The Accuracy page in a real browser (Debian's chromium through Playwright), issue #41 item 6, at 1440x900 and
on a 390x844 phone: one click from the top bar, its tables drawn at once (read from
sim_core/data/validation_rows.json), its filters narrow the rows and the URL follows them (the same URL reopens the
same view in a fresh context), nothing overflows the page sideways (the tables scroll in their own boxes).
Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
VIEWPORTS = [(1440, 900), (390, 844)]


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_the_accuracy_page_filters_by_model_and_gpu(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=60_000)
    page.goto(page.base + "/docs")
    page.locator('.topnav a[data-nav="Accuracy"]').click()
    page.wait_for_url("**/accuracy")
    expect(page.locator("#acc-rows")).to_be_visible()
    page.select_option("#acc-model", "deepseek-r1")
    page.select_option("#acc-gpu", "mi300x")
    page.locator("#acc-form button[type=submit]").click()
    page.wait_for_url("**gpu=mi300x**")
    assert parse_qs(urlsplit(page.url).query) == {"model": ["deepseek-r1"], "gpu": ["mi300x"]}
    combo = page.locator('tr[data-combo="deepseek-r1|mi300x|sglang"]')
    expect(combo.locator(".badge-optimistic")).to_be_visible()
    rows = page.locator("tr[data-row]")
    assert rows.count() >= 1
    for text in rows.locator("td:nth-child(2)").all_inner_texts():
        assert text == "mi300x"
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, overflow
    page.screenshot(path=SHOTS / f"accuracy-{width}.png")
    fresh = context.browser.new_context(viewport={"width": width, "height": height})
    again = fresh.new_page()
    again.goto(page.url)
    expect(again.locator('tr[data-combo="deepseek-r1|mi300x|sglang"]')).to_be_visible()
    assert again.locator("tr[data-row]").count() == rows.count()
    fresh.close()
    assert not page.errors, page.errors
    context.close()
