"""The Frontier card in a real browser (Debian's chromium through Playwright), at 1440x900 and on a 390x844
phone: the results page offers it, "Draw frontier" shows the sweep's progress, then a line per GPU and the
cheapest point at a tokens/s-per-user floor, the card inside the viewport's width; a bad length is named in the
card. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=10.0"


@pytest.fixture
def page(site):
    context, page = open_page(site, timeout_ms=60_000, expected_422=True)
    errors = page.errors
    yield page
    context.close()
    assert errors == [], errors


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_the_frontier_card_draws_a_line_per_gpu(page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{page.base}/?{SCENARIO}")
    card = page.locator("#card-frontier")
    card.scroll_into_view_if_needed()
    checked = card.locator("input[name=frontier_gpus]:checked")
    expect(checked).to_have_count(3)
    for gpu in ("h100", "b200"):  # two GPUs, short requests, up to 4 users: a few points, quickly
        card.locator(f"input[name=frontier_gpus][value={gpu}]").uncheck(force=True)
    card.locator("input[name=frontier_isl]").fill("256")
    card.locator("input[name=frontier_osl]").fill("32")
    card.locator("input[name=frontier_max_concurrency]").fill("4")
    card.locator("input[name=frontier_gpus][value=a100]").check(force=True)
    card.locator("input[name=frontier_min_tokens_per_s_per_user]").fill("1")
    card.locator("#frontier-submit").click()
    page.locator("#plot-frontier").scroll_into_view_if_needed(timeout=60_000)
    page.wait_for_function(DRAWN, arg="plot-frontier")
    names = page.locator("#plot-frontier").evaluate("d => d.data.map(t => t.name)")
    assert set(names) == {"rtx3050", "a100", "cheapest at the floor"}, names
    xs = page.locator("#plot-frontier").evaluate("d => d.data.map(t => t.x.length)")
    assert xs == [3, 3, 1]  # 1, 2, 4 users each; the cheapest point at >= 1 tok/s/user ringed
    expect(page.locator("#frontier-cheapest")).to_contain_text("Cheapest at ≥ 1 tok/s/user")
    box = card.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box  # no sideways scrolling on a phone
    plot = page.locator("#plot-frontier").bounding_box()
    assert plot["x"] + plot["width"] <= box["x"] + box["width"] + 0.5, (plot, box)
    card.screenshot(path=SHOTS / f"frontier-{width}x{height}.png")


def test_a_bad_length_is_named_in_the_card(page):
    page.goto(f"{page.base}/?{SCENARIO}")
    card = page.locator("#card-frontier")
    card.scroll_into_view_if_needed()
    card.locator("input[name=frontier_isl]").fill("0")
    card.locator("#frontier-submit").click()
    expect(page.locator("#err-frontier")).to_contain_text("frontier_isl: must be an integer from 1")
