"""Issue 12, round 2, in a real browser (Debian's chromium through Playwright): where the time went (a stacked
bar per scheduler, each request's own split in the Gantt hover), the Gantt at scale (zooming draws every request
in the window), the KV view's states, and the preset gallery. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("playwright")

from browser_support import launch_chromium, live_server, screenshot_dir  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

import sim_core  # noqa: E402
from app.web import app  # noqa: E402
from sim_core.attribution import ATTRIBUTION_PARTS  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
DRAWN = "id => { const d = document.getElementById(id); return !!d && d.dataset.drawn === '1'; }"
SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20.0"


@pytest.fixture(scope="module")
def site():
    sim_core.warm_up()
    with live_server(app, startup_timeout=120) as base, sync_playwright() as pw:
        browser = launch_chromium(pw)
        yield base, browser
        browser.close()


def _page(site, width=1440, height=900, **options):
    base, browser = site
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.base = base
    return context, page


@pytest.fixture
def page(site):
    context, page = _page(site)
    yield page
    context.close()
    assert page.errors == [], page.errors


def wait_drawn(page, plot_id: str) -> None:
    page.locator("#" + plot_id).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot_id)


def test_where_the_time_went_bars_sum_to_the_mean_e2el(page):
    page.goto(page.base + "/?" + SMALL)
    wait_drawn(page, "plot-attribution")
    plot = page.locator('[data-figure="attribution"]')
    bars = plot.evaluate("d => d.data.map(t => ({name: t.name, y: t.y, x: t.x}))")
    assert len(bars) == len(ATTRIBUTION_PARTS)
    api = page.request.get(page.base + "/api/run?" + SMALL).json()["schedulers"]
    for name, out in api.items():
        k = bars[0]["y"].index(name)
        total = sum(b["x"][k] for b in bars)
        assert total == pytest.approx(out["metrics"]["e2el_ms"]["mean"], rel=0.01)
        assert bars[0]["x"][k] == pytest.approx(out["metrics"]["attribution_ms"]["queue"], abs=0.01)
    page.locator("#card-attribution").screenshot(path=SHOTS / "30-attribution-1440x900.png")


def test_gantt_hover_shows_the_requests_own_split(page):
    page.goto(page.base + "/?" + SMALL + "&t=10")
    wait_drawn(page, "plot-gantt-fcfs")
    gantt = page.locator("#plot-gantt-fcfs")
    gantt.scroll_into_view_if_needed()
    # A finished request's row (its decode segment carries the split), hovered mid-axis.
    rid, split = gantt.evaluate("""d => { const t = d.data.find(t => t.name === 'decode');
        const c = t.customdata.find(c => c); return [c[0], c.slice(8, 14)]; }""")
    gx, gy = gantt.evaluate("""(d, id) => { const r = d.getBoundingClientRect(),
        xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        return [r.left + xa._offset + xa._length / 2, r.top + ya._offset + ya.l2p(id)]; }""", rid)
    page.mouse.move(gx, gy)
    label = page.locator("#plot-gantt-fcfs .hoverlayer")
    expect(label).to_contain_text("where its time went")
    expect(label).to_contain_text(f"queue {int(split[0] + 0.5):,}")
    expect(label).to_contain_text(f"decode {int(split[3] + 0.5):,}")
    page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / "31-gantt-hover-split.png")


LONG = "schedulers=fcfs,chunked&hardware=a100&workload=chat&rate=14&duration=75&seed=2"


def _in_flight(query: str, scheduler: str, t0: float, t1: float) -> set[int]:
    """The requests of the page's run with a segment in [t0, t1], from sim_core directly."""
    from urllib.parse import parse_qsl

    from app.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict
    from sim_core import timeline
    from sim_core.runner import run

    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS, default_schedulers=PAGE_SCHEDULERS)
    res = run(req.for_scheduler(scheduler), record_events=True)
    return {r for r, _, s, e in timeline.request_segments(res) if s <= t1 and e >= t0}


def _zoom_by_drag(page, plot: str, t0: float, t1: float) -> None:
    """A user's zoom: drag across the plot area from time t0 to t1 (a flat drag zooms the time axis only)."""
    box = page.locator("#" + plot).evaluate("""(d, t) => { const r = d.getBoundingClientRect(),
        xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        return [r.left + xa._offset + xa.l2p(t[0]), r.left + xa._offset + xa.l2p(t[1]),
                r.top + ya._offset + ya._length / 2]; }""", [t0, t1])
    page.mouse.move(box[0], box[2])
    page.mouse.down()
    page.mouse.move((box[0] + box[1]) / 2, box[2] + 2, steps=4)
    page.mouse.move(box[1], box[2] + 2, steps=4)
    page.mouse.up()


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_zooming_a_sampled_gantt_draws_every_request_in_the_window(site, viewport):
    context, page = _page(site, *viewport)
    try:
        page.goto(page.base + "/?" + LONG)
        plot = "plot-gantt-fcfs"
        wait_drawn(page, plot)
        gantt = page.locator("#" + plot)
        total, shown = int(gantt.get_attribute("data-total")), int(gantt.get_attribute("data-rows"))
        assert total > 1000 and shown < total
        expect(page.locator("#card-gantt-fcfs [data-window-note]")).to_contain_text("Zoom in")
        sampled = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
        _zoom_by_drag(page, plot, 30.0, 50.0)
        expect(gantt).to_have_attribute("data-window", re.compile(r"^\d"))
        t0, t1 = (float(x) for x in gantt.get_attribute("data-window").split(","))
        assert 28 < t0 < 32 and 48 < t1 < 52, (t0, t1)
        drawn = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
        expected = _in_flight(LONG, "fcfs", t0, t1)
        assert drawn == expected
        assert len(expected) > 2 * len(sampled & expected)  # far more than the sample showed there
        assert int(gantt.get_attribute("data-rows")) == len(expected)
        xr = gantt.evaluate("d => d.layout.xaxis.range")
        assert xr[0] == pytest.approx(t0, abs=1e-3) and xr[1] == pytest.approx(t1, abs=1e-3)
        expect(page.locator("#card-gantt-fcfs [data-window-note]")).to_contain_text(f"all {len(expected):,} requests")
        w, h = viewport
        page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / f"32-gantt-zoomed-{w}x{h}.png")
        # A double click zooms back out to the whole run: the sample again.
        box = gantt.evaluate("""d => { const r = d.getBoundingClientRect(), xa = d._fullLayout.xaxis,
            ya = d._fullLayout.yaxis; return [r.left + xa._offset + xa._length / 2, r.top + ya._offset + ya._length / 2]; }""")
        page.mouse.dblclick(*box)
        expect(gantt).to_have_attribute("data-rows", str(shown))
        assert gantt.get_attribute("data-window") is None
        assert page.errors == [], page.errors
    finally:
        context.close()
