"""Request-level A/B in a real browser (Debian's chromium through Playwright): from the landing page's comparison
(fcfs vs chunked on rag, rtx3050) to /diff, which lists the most hurt requests with their two timelines, A's above
B's, on a desktop and on a phone. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
LANDING = "schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20.0"


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_the_ab_view_lists_the_most_hurt_requests_with_both_timelines(site, viewport):
    w, h = viewport
    context, page = open_page(site, w, h, timeout_ms=60_000)
    try:
        page.goto(page.base + "/?" + LANDING)
        card = page.locator("#card-request-diff")
        card.scroll_into_view_if_needed()
        assert card.locator("select[name=a] option:checked").inner_text() == "fcfs"
        assert card.locator("select[name=b] option:checked").inner_text() == "chunked"
        card.locator("button[type=submit]").click()
        page.wait_for_url("**/diff?**")
        hurt = page.locator("#diff-hurt .diff-request")
        assert hurt.count() > 0
        # The page's most hurt are the API's, in its order, each with the change it reports.
        api = page.request.get(page.base + "/api/diff?" + page.url.split("?", 1)[1]).json()
        ids = [int(x.get_attribute("id").rsplit("-", 1)[1]) for x in hurt.all()]
        assert ids == api["most_hurt"]
        changes = {r["id"]: r["change_ms"]["e2el_ms"] for r in api["requests"]}
        assert changes[ids[0]] == max(changes.values()) > 0
        # The first one's timelines: drawn, A's row above B's, both rows with segments.
        first = hurt.first
        plot_id = first.locator(".plot").get_attribute("id")
        first.scroll_into_view_if_needed()
        page.wait_for_function(DRAWN, arg=plot_id)
        rows = page.evaluate("id => { const d = document.getElementById(id); const ax = d._fullLayout.yaxis;"
                             " return d.data.map(t => [t.y.find(v => v !== null), ax.d2p(t.y.find(v => v !== null))]); }",
                             plot_id)
        a_px = {px for label, px in rows if label.startswith("A ·")}
        b_px = {px for label, px in rows if label.startswith("B ·")}
        assert a_px and b_px and max(a_px) < min(b_px)  # A's row is drawn above B's (smaller y in pixels)
        for plot in ("plot-diff-scatter", "plot-diff-causes"):
            page.locator("#" + plot).scroll_into_view_if_needed()
            page.wait_for_function(DRAWN, arg=plot)
        scatter = page.evaluate("() => document.getElementById('plot-diff-scatter').data[0].y.length")
        assert scatter == api["compared"]
        assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        page.locator("#diff-summary").scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / f"75-diff-{w}x{h}.png")
        first.screenshot(path=SHOTS / f"75-diff-most-hurt-{w}x{h}.png")
        assert page.errors == [], page.errors
    finally:
        context.close()


def test_a_bad_query_is_named_on_the_page(site):
    context, page = open_page(site, 1440, 900, timeout_ms=60_000, expected_422=True)
    try:
        a = LANDING.replace("schedulers=fcfs,chunked", "scheduler=fcfs")
        page.goto(page.base + "/diff?" + urlencode({"a": a, "b": a.replace("duration=20.0", "duration=10")}))
        error = page.locator("#err-b")
        assert "different requests" in error.inner_text()
        assert page.locator("#diff-b").get_attribute("aria-invalid") == "true"
    finally:
        context.close()
