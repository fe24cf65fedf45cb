"""Scenario against scenario (/vs) in a real browser (Debian's chromium through Playwright), on a desktop and on a
phone: the pair's figures (the Gantt of each scheduler and the KV players among them) drawn with the same axis
ranges, and grids, on both sides (read from plotly's layouts and the canvases on the page), A beside B (A above B
on a phone), and the pair's URL opened in a fresh browser context showing the same two scenarios, figures and
numbers. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
A = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=40&seed=3"

# Everything a reader compares across the pair, read from the page: per plot its traces' lengths and its axes'
# ranges as plotly holds them after drawing (the full layout: what is on screen), and every number in the text.
SNAPSHOT = """() => {
  const plots = {};
  document.querySelectorAll('.vs-card .plot:not(.kv-view)').forEach(d => {
    const axes = {};
    Object.keys(d._fullLayout || {}).filter(k => /^[xy]axis\\d*$/.test(k)).forEach(k => {
      const ax = d._fullLayout[k];
      if (ax.type !== 'category') axes[k] = ax.range.map(v => +(+v).toPrecision(10));
    });
    plots[d.id] = {axes: axes, points: d.data.map(t => (t.x || []).length)};
  });
  const text = sel => Array.from(document.querySelectorAll(sel)).map(e => e.innerText.trim());
  return {plots: plots, sides: text('#vs-summary .vs-side'), changes: text('#vs-changes'),
          metrics: text('.vs-card .metrics td'), a: document.getElementById('vs-a').value,
          b: document.getElementById('vs-b').value};
}"""


def draw_all(page) -> list[str]:
    ids = page.eval_on_selector_all(".vs-card .plot", "els => els.map(e => e.id)")
    for plot in ids:
        page.locator("#" + plot).scroll_into_view_if_needed()
        page.wait_for_function(DRAWN, arg=plot)
    return ids


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_a_pair_shares_its_axes_and_its_url_round_trips(site, viewport):
    w, h = viewport
    context, page = open_page(site, w, h, timeout_ms=90_000)
    fresh = None
    try:
        # From the results page: A is its scenario, B a copy changed with the quick form (the GPU).
        page.goto(page.base + "/?" + A)
        page.locator("#vs-open").click()
        page.wait_for_url("**/vs?**")
        assert page.locator("#vs-a").input_value() == page.locator("#vs-b").input_value()
        assert page.locator("#vs-edit").evaluate("d => d.open")  # B is A's copy: the form to change it is open
        page.select_option("#vs-b-hardware", "a100")
        page.locator("#vs-submit").click()
        page.wait_for_url("**/vs?a=*&b=*")
        assert "hardware%3Da100" in page.url.split("&b=", 1)[1] and "hardware%3Drtx3050" in page.url
        ids = draw_all(page)
        assert {"plot-a-cdf", "plot-b-cdf", "plot-a-timeline", "plot-b-timeline", "plot-a-gantt-fcfs",
                "plot-b-gantt-chunked", "plot-a-kv", "plot-b-kv"} <= set(ids)
        shot = page.evaluate(SNAPSHOT)
        # The KV players: a grid per scheduler a side, cells as large on both sides (one grid for the pair).
        cells = page.evaluate("""() => ['a', 'b'].map(s => Array.from(document.querySelectorAll(
            '#plot-' + s + '-kv canvas')).map(c => c.width))""")
        assert all(cells) and len(set(cells[0] + cells[1])) == 1, cells
        for plot_a in (p for p in ids if p.startswith("plot-a-") and p != "plot-a-kv"):
            plot_b = "plot-b-" + plot_a[len("plot-a-"):]
            axes_a, axes_b = shot["plots"][plot_a]["axes"], shot["plots"][plot_b]["axes"]
            assert axes_a and axes_a == axes_b, (plot_a, axes_a, axes_b)
        # A beside B on a desktop; A above B on a phone, each as wide as the other.
        box_a = page.locator("#plot-a-cdf").bounding_box()
        box_b = page.locator("#plot-b-cdf").bounding_box()
        assert abs(box_a["width"] - box_b["width"]) < 2
        if w >= 1000:
            assert abs(box_a["y"] - box_b["y"]) < 2 and box_b["x"] >= box_a["x"] + box_a["width"]
        else:
            assert box_b["y"] >= box_a["y"] + box_a["height"] and abs(box_a["x"] - box_b["x"]) < 2
        assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        for card in page.locator(".vs-main > .card").all():  # a wide metrics table scrolls inside its side
            assert card.evaluate("c => c.scrollWidth <= c.clientWidth"), card.get_attribute("id")
        assert "rtx3050" in shot["changes"][0] and "a100" in shot["changes"][0]
        assert len(shot["metrics"]) > 10
        page.locator("#vs-summary").scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / f"80-vs-{w}x{h}.png")
        page.locator("#vs-card-cdf").screenshot(path=SHOTS / f"80-vs-cdf-{w}x{h}.png")
        page.locator("#vs-card-gantt-fcfs").screenshot(path=SHOTS / f"80-vs-gantt-{w}x{h}.png")
        page.locator("#vs-card-kv").screenshot(path=SHOTS / f"80-vs-kv-{w}x{h}.png")
        assert page.errors == [], page.errors

        # The pair's link, opened in a new context (nothing shared with the first): the same pair.
        link = page.locator("#vs-permalink").get_attribute("href")
        assert page.base + link == page.url
        fresh, again = open_page(site, w, h, timeout_ms=90_000)
        again.goto(again.base + link)
        assert draw_all(again) == ids
        assert again.evaluate(SNAPSHOT) == shot
        assert again.errors == [], again.errors
    finally:
        context.close()
        if fresh is not None:
            fresh.close()


def test_a_bad_side_is_named_on_the_page(site):
    context, page = open_page(site, 1440, 900, timeout_ms=60_000, expected_422=True)
    try:
        page.goto(page.base + "/vs?" + urlencode({"a": A, "b": A.replace("rtx3050", "tpu9")}))
        error = page.locator("#err-b")
        assert error.inner_text().startswith("hardware: ") and "tpu9" in error.inner_text()
        assert page.locator("#vs-b").get_attribute("aria-invalid") == "true"
        assert page.locator("#err-a").count() == 0
        assert page.errors == [], page.errors
    finally:
        context.close()
