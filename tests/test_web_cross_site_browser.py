"""In a real browser (chromium): a frame on another site's page (here a blank page, which is no site of ours)
shows a Run button instead of simulating, and one click inside the frame draws the figure (issue #37)."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import frame_page, open_page  # noqa: E402

pytestmark = pytest.mark.browser
QUERY = "schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=8&seed=31"


def test_another_sites_frame_needs_one_click_and_our_own_page_none(site):
    context, page = open_page(site, 1000, 600)
    try:
        src = f"{page.base}/embed/cdf?{QUERY.replace('&', '&amp;')}"
        page.set_content(f'<iframe id="f" src="{src}" width="900" height="420"></iframe>')  # about:blank: elsewhere
        frame = page.frame_locator("#f")
        frame.locator("#run-button").wait_for()
        assert frame.locator("#plot-cdf").count() == 0
        frame.locator("#run-button").click()  # the frame's own page submits: same-origin
        frame.locator("#plot-cdf").wait_for(timeout=90_000)
        other = src.replace("seed=31", "seed=32")
        frame_page(page, f'<iframe id="g" src="{other}" width="900" height="420"></iframe>')  # our own origin
        page.frame_locator("#g").locator("#plot-cdf").wait_for(timeout=90_000)
        assert page.frame_locator("#g").locator("#run-button").count() == 0
    finally:
        context.close()
