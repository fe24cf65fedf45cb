"""The cluster view in a real browser (Debian's chromium through Playwright): a replicas=2 page and a disaggregated
1 prefill + 1 decode page draw the cluster figure with one row per engine, its router row and (P/D) its KV
transfers, without console errors, at 1440x900 and on a 390x844 phone. Screenshots go to
test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SMALL = "hardware=rtx3050&workload=rag&num_requests=40&seed=3"
PAGES = {
    "replicas": ("/?schedulers=fcfs,chunked&" + SMALL + "&replicas=2&router=least_outstanding",
                 ["replica 0", "replica 1"]),
    "pd": ("/?schedulers=fcfs&" + SMALL + "&prefill_replicas=1&decode_replicas=1", ["prefill 0", "decode 0"]),
}
# The engine rows a drawn cluster figure has: y axes titled with an engine's name, each with its own band.
ENGINE_ROWS = """d => Object.keys(d._fullLayout).filter(k => /^yaxis\\d*$/.test(k))
    .map(k => d._fullLayout[k]).filter(ax => !ax.overlaying && ax.title && /^(replica|prefill|decode) \\d+$/.test(ax.title.text))
    .map(ax => ({name: ax.title.text, top: ax._offset, height: ax._length}))"""



def cluster_page(site, width: int, height: int):
    return open_page(site, width, height, timeout_ms=60_000)


def engine_rows(page, plot: str) -> list[dict]:
    page.locator("#" + plot).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot)
    return page.locator("#" + plot).evaluate(ENGINE_ROWS)


@pytest.mark.parametrize("kind", sorted(PAGES))
@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_cluster_figure_has_one_row_per_engine(site, kind, width, height):
    context, page = cluster_page(site, width, height)
    url, names = PAGES[kind]
    response = page.goto(page.base + url)
    assert response.status == 200
    assert page.locator("#card-kv").count() == 0  # the cluster view takes the KV animation's place
    plot = "plot-cluster-fcfs"
    assert page.locator("#" + plot).get_attribute("data-figure") == "cluster"
    rows = engine_rows(page, plot)
    assert [r["name"] for r in rows] == names
    assert all(r["height"] > 20 for r in rows)
    ordered = sorted(rows, key=lambda r: r["top"])
    assert all(a["top"] + a["height"] <= b["top"] for a, b in zip(ordered, ordered[1:], strict=False))
    # Drawn: each row's lines are in the SVG, and the router row has a mark per request.
    paths = page.locator(f"#{plot} .scatterlayer .trace").count()
    assert paths >= 3 * len(names)
    marks = page.locator("#" + plot).evaluate(
        "d => d.data.filter(t => t.yaxis === 'y').reduce((n, t) => n + t.x.length, 0)")
    assert marks == 40
    if kind == "pd":
        transfers = page.locator("#" + plot).evaluate(
            "d => d.data.filter(t => (t.name || '').startsWith('KV → ')).reduce((n, t) => n + t.x.length / 3, 0)")
        assert transfers == 40
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    card = page.locator("#card-cluster-fcfs")
    card.scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg="plot-cluster-requests-fcfs")
    page.screenshot(path=SHOTS / f"40-cluster-{kind}-{width}x{height}.png")
    card.screenshot(path=SHOTS / f"41-cluster-card-{kind}-{width}x{height}.png")
    context.close()
    assert page.errors == [], page.errors


def test_a_click_on_the_cluster_time_axis_places_the_cursor(site):
    context, page = cluster_page(site, 1440, 900)
    page.goto(page.base + PAGES["pd"][0])
    plot = "plot-cluster-fcfs"
    engine_rows(page, plot)
    box = page.locator(f"#{plot} .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    cursor = page.locator(f"#{plot} > .time-cursor")
    assert cursor.count() == 1 and cursor.is_visible()
    assert float(page.locator("#" + plot).get_attribute("data-cursor-time")) > 0
    context.close()
    assert page.errors == [], page.errors


@pytest.mark.parametrize("kind", sorted(PAGES))
def test_the_cluster_embed_fits_a_960x540_slide_frame(site, kind):
    """/embed/kv of a cluster shows each scheduler's cluster figure alone, every one inside the frame."""
    context, page = open_page(site, 1200, 700)
    query = PAGES[kind][0].removeprefix("/?") + "&caption=1"
    page.set_content(f'<iframe src="{page.base}/embed/kv?{query.replace("&", "&amp;")}" width="960" height="540" '
                     'style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function("() => [...document.querySelectorAll('[data-figure=cluster]')]"
                            ".every(d => d.dataset.drawn === '1')", timeout=90_000)
    frame.wait_for_timeout(300)
    sizes = frame.evaluate("""() => { const d = document.documentElement;
        return [d.scrollWidth, d.clientWidth, d.scrollHeight, d.clientHeight]; }""")
    assert sizes[0] <= sizes[1] and sizes[2] <= sizes[3], sizes
    boxes = frame.evaluate("""() => [...document.querySelectorAll('.plot[data-figure], #embed-caption')]
        .map(e => { const r = e.getBoundingClientRect(); return [e.id, r.left, r.top, r.right, r.bottom]; })""")
    assert [b[0] for b in boxes if b[0].startswith("plot-")] == [
        f"plot-cluster-{s}" for s in ("fcfs", "chunked")[:2 if kind == "replicas" else 1]]
    for name, left, top, right, bottom in boxes:
        assert left >= 0 and top >= 0 and right <= 960 and bottom <= 540, (name, left, top, right, bottom)
    assert [r["name"] for r in frame.locator("#plot-cluster-fcfs").evaluate(ENGINE_ROWS)] == PAGES[kind][1]
    shape = "2 replicas, least_outstanding router" if kind == "replicas" else "1 prefill + 1 decode engines"
    assert shape in frame.locator("#embed-caption").inner_text()
    page.screenshot(path=SHOTS / f"42-embed-cluster-{kind}-960x540.png")
    context.close()
    assert page.errors == [], page.errors
