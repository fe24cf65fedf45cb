"""Request-level A/B in a real browser (Debian's chromium through Playwright): from the landing page's comparison
(fcfs vs chunked on rag, rtx3050) to /diff, which lists the most hurt requests with their two timelines, A's above
B's, on a desktop and on a phone; and the model's own error bars (model_uncertainty=1) on the results page: each
metric's model interval under its value, the P50/P90/P99 error bars on the latency distributions, the warnings of
schedulers whose order flips within the model's error. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir, wait_until_it_fits  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
LANDING = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"


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
        if w == 1440:
            picked_url = _pick_by_clicking(page, ids)
        assert page.errors == [], page.errors
    finally:
        context.close()
    if w == 1440:  # the pick is in the URL: a fresh browser opens the same request compared
        context, page = open_page(site, w, h, timeout_ms=60_000)
        try:
            page.goto(picked_url)
            assert page.locator("#card-diff-picked h2").inner_text() == f"Request #{ids[1]} under A and under B"
            page.wait_for_function(DRAWN, arg="plot-diff-picked")
            ring = page.evaluate("() => document.getElementById('plot-diff-scatter').data[1].customdata")
            assert ring == [ids[1]]
            assert page.errors == [], page.errors
        finally:
            context.close()


# A point of the scatter where plotly draws it, in page pixels.
POINT_XY = """([id, i]) => { const d = document.getElementById(id), L = d._fullLayout, t = d.data[0];
  const box = d.getBoundingClientRect();
  return [box.left + L._size.l + L.xaxis.d2p(t.x[i]), box.top + L._size.t + L.yaxis.d2p(t.y[i])]; }"""


def _pick_by_clicking(page, ids: list[int]) -> str:
    """Click the most hurt request's point in the scatter, then the second most hurt's timeline: each click puts
    that request in the URL and the page compares it under A and B. Returns the last URL."""
    scatter = page.locator("#plot-diff-scatter")
    scatter.scroll_into_view_if_needed()
    at = page.evaluate("([id, r]) => document.getElementById(id).data[0].customdata.findIndex(c => c[0] === r)",
                       ["plot-diff-scatter", ids[0]])
    page.mouse.click(*page.evaluate(POINT_XY, ["plot-diff-scatter", at]))
    page.wait_for_url(f"**request={ids[0]}**")
    assert page.locator("#card-diff-picked h2").inner_text() == f"Request #{ids[0]} under A and under B"
    assert page.locator("#diff-request").input_value() == str(ids[0])
    timeline = page.locator(f"#plot-diff-hurt-{ids[1]}")
    timeline.scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=f"plot-diff-hurt-{ids[1]}")
    timeline.click()
    page.wait_for_url(f"**request={ids[1]}**")
    card = page.locator("#card-diff-picked")
    assert card.locator("h2").inner_text() == f"Request #{ids[1]} under A and under B"
    labels = card.locator("tbody th").all_inner_texts()
    assert labels[:5] == ["TTFT", "TPOT", "Longest ITL", "E2EL", "queueing"], labels  # its values, then parts
    card.screenshot(path=SHOTS / "75-diff-picked-1440x900.png")
    return page.url


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


MODEL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=60&seed=3"


def test_model_intervals_show_as_ranges_error_bars_and_flip_warnings(site):
    context, page = open_page(site, 1440, 900, timeout_ms=90_000)
    try:
        query = MODEL + "&model_uncertainty=1"
        page.goto(page.base + "/?" + query)
        api = page.request.get(page.base + "/api/run?" + query).json()["schedulers"]
        page.locator("#plot-cdf").scroll_into_view_if_needed()
        page.wait_for_function(DRAWN, arg="plot-cdf")
        bars = page.evaluate("""() => document.getElementById('plot-cdf').data.filter(t => t.error_x)
            .map(t => ({name: t.name, x: t.x, y: t.y, lo: t.error_x.arrayminus, hi: t.error_x.array,
                        axis: t.xaxis}))""")
        assert {b["name"] for b in bars} == {f"{n} model 90%" for n in api}
        for b in bars:  # each bar spans the API's model_ci of that percentile
            entry = api[b["name"].split(" ")[0]]
            key = {"x": "ttft_ms", "x2": "itl_ms", "x3": "e2el_ms"}[b["axis"]]
            for x, y, lo, hi in zip(b["x"], b["y"], b["lo"], b["hi"], strict=True):
                stat = {0.5: "p50", 0.9: "p90", 0.99: "p99"}[y]
                assert x - lo == pytest.approx(entry["model_ci"][key][stat][0], abs=1e-3)
                assert x + hi == pytest.approx(entry["model_ci"][key][stat][1], abs=1e-3)
        # The metrics table: the model's range under the values it moves (goodput's, here).
        table = page.locator("#card-metrics")
        table.scroll_into_view_if_needed()
        ranges = table.locator(".model-ci")
        assert ranges.count() > 4 and all("\u2013" in r for r in ranges.all_inner_texts())
        fit = table.evaluate("c => [...c.querySelectorAll('.table-wrap')].map(w => [w.querySelector('table').scrollWidth, w.clientWidth])")
        assert fit and all(inner <= wrap for inner, wrap in fit), fit  # the ranges fit their columns
        # Every order flip the API warns of is among the page's warnings.
        flips = {x for e in api.values() for x in e["warnings"] if "swap places" in x}
        warned = page.evaluate("() => Array.from(document.querySelectorAll('#run-warnings li'))"
                               ".map(li => li.textContent).join('\\n')")
        assert flips and all(f in warned for f in flips), (flips, warned)  # this pair's goodput order flips
        page.locator("#card-cdf").screenshot(path=SHOTS / "76-model-cdf-1440x900.png")
        table.screenshot(path=SHOTS / "76-model-metrics-1440x900.png")
        page.set_viewport_size({"width": 390, "height": 844})  # on a phone: the ranges fit their cells
        wait_until_it_fits(page)  # once plotly's responsive resize has run
        page.locator("#card-cdf").screenshot(path=SHOTS / "76-model-cdf-390x844.png")
        assert page.errors == [], page.errors
    finally:
        context.close()
