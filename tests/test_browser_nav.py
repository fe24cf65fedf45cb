"""The top bar in a real browser (Debian's chromium through Playwright), issue #41 item 1: at 1440x900 and on a
390x844 phone, every page's top bar shows each of the tool's pages as a link of its own (no two overlap, none
leaves the screen, none is hidden), one tap opens it, and on the dashboard the links follow the scenario the form
changes to. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("playwright")

from browser_support import open_page, screenshot_dir  # noqa: E402
from test_ui41_nav import PAGES  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
VIEWPORTS = [(1440, 900), (390, 844)]
# The light pages: none of them simulates on opening (the dashboard's default scenario is cached after its first).
URLS = ("/", "/plan", "/diff", "/accuracy", "/docs")
BOXES = """() => [...document.querySelectorAll('.topbar .brand, .topbar .tagline, .topnav a')].map(e => {
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return {name: e.dataset.nav || e.className, x: r.x, y: r.y, w: r.width, h: r.height,
            shown: s.visibility !== 'hidden' && s.display !== 'none' && r.width > 0 && r.height > 0}; })"""


def overlap(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_every_page_shows_every_link_without_overlap(site, width, height):
    context, page = open_page(site, width, height, timeout_ms=120_000)
    for url in URLS:
        page.goto(page.base + url)
        boxes = page.evaluate(BOXES)
        links = [b for b in boxes if b["name"] in PAGES]
        assert [b["name"] for b in links] == list(PAGES), url
        for b in links:
            assert b["shown"] and b["x"] >= 0 and b["x"] + b["w"] <= width and b["y"] >= 0, (url, b)
            assert b["h"] >= 20, (url, b)  # a tap target, not a hairline
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not overlap(a, b), (url, width, a, b)
        bar = page.locator(".topbar").evaluate(
            "e => [e.scrollWidth, e.clientWidth, e.getBoundingClientRect().right]"
        )
        assert bar[0] <= bar[1] and bar[2] <= width, (url, bar)  # the bar itself overflows nothing
        page.locator(".topbar").screenshot(
            path=SHOTS / f"nav-{url.strip('/') or 'index'}-{width}x{height}.png"
        )
    # One tap opens a page.
    page.goto(page.base + "/docs")
    page.locator('.topnav a[data-nav="Plan"]').click()
    page.wait_for_url("**/plan")
    assert page.locator('.topnav a[aria-current="page"]').inner_text() == "Plan"
    context.close()
    assert page.errors == [], page.errors


def test_the_dashboards_links_follow_the_form(site):
    context, page = open_page(site, 1440, 900, timeout_ms=120_000)
    page.goto(page.base + "/")
    page.locator("#f-duration").fill("12")
    page.locator("#f-duration").press("Enter")
    page.wait_for_url("**duration=12**")
    autoscaling = page.locator('.topnav a[data-nav="Autoscaling"]')
    page.wait_for_function(
        "() => document.querySelector('.topnav a[data-nav=\"Autoscaling\"]').href.includes('duration=12')"
    )
    href = autoscaling.get_attribute("href")
    assert urlsplit(href).path == "/cluster-time" and parse_qs(urlsplit(href).query)["duration"] == ["12.0"]
    vs = parse_qs(urlsplit(page.locator('.topnav a[data-nav="/vs"]').get_attribute("href")).query)
    assert parse_qs(vs["a"][0])["duration"] == ["12.0"] and vs["a"] == vs["b"]
    assert page.locator('.topnav a[data-nav="Frontier"]').get_attribute("href").endswith("#card-frontier")
    context.close()
    assert page.errors == [], page.errors
