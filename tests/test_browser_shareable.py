"""Every view that compares or searches is a link and an embed (issue #41's "frontier, /vs, /diff, /cluster-time and
plan links reproduce in a fresh context and embed at 960x540 and 1920x1080 without overlap or scrolling"), in a
real browser (Debian's chromium through Playwright):

- each page's own link (its Link button, or its URL where the page is its link), opened in a fresh browser
  context, draws the same figure (the plotly JSON the page draws is the same);
- each page's embed (/embed/vs, /embed/diff, /embed/frontier, /embed/plan, /embed/cluster-time; and the metrics
  table's, /embed/metrics) fits an iframe of 960x540 and of 1920x1080: no scrollbar, its figures, caption and
  links inside the frame and apart, the texts inside each plot (title, axis titles, legend, notes) apart; in the
  1080p frame every text it shows is at least 2% of the frame's height; its caption names the scenario.

One server for the module; the cheap scenarios of the other browser tests (an RTX 3050, llama-3.2-1b, seconds of
traffic), each simulated once and cached for the rest. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, frame_page, open_page, screenshot_dir, wait_until_it_fits  # noqa: E402
from test_page_embeds import AB, PAIR, SCENARIO  # noqa: E402  (its scenarios: one definition)

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
CLUSTER_TIME = ("schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&duration=60.0&max_replicas=2"
                "&autoscalers=utilization,static")
PLAN = ("model=llama-3.2-1b&max_model_len=8192&workload=chat&rate=4&duration=10&gpus=rtx3050&tp=1"
        "&schedulers=chunked")
FRONTIER = ("schedulers=chunked&hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=rag&duration=10.0"
            "&frontier_gpus=rtx3050&frontier_isl=64&frontier_osl=16&frontier_max_concurrency=2")
# Each page: its URL, the plot whose figure it draws, and its link (None: the page's URL is its link).
PAGES = {
    "vs": ("/vs?" + PAIR, "plot-a-cdf", "#vs-permalink"),
    "diff": ("/diff?" + AB, "plot-diff-scatter", None),
    "cluster-time": ("/cluster-time?" + CLUSTER_TIME, "plot-cluster-time", "#ct-permalink"),
    "plan": ("/plan?" + PLAN, "plot-pareto", "#plan-permalink"),
    "frontier": ("/frontier?" + FRONTIER, "plot-frontier", "#frontier-permalink"),
}
EMBEDS = {
    "vs": "/embed/vs?" + PAIR,
    "vs-goodput": "/embed/vs?" + PAIR + "&figure=goodput&rate_min=1&rate_max=3&rate_step=1",
    "vs-frontier": "/embed/vs?" + PAIR + "&figure=frontier&frontier_gpus=rtx3050&frontier_isl=64&frontier_osl=16"
                   "&frontier_max_concurrency=2&frontier_tp=1",
    "diff": "/embed/diff?" + AB,
    "cluster-time": "/embed/cluster-time?" + CLUSTER_TIME,
    "plan": "/embed/plan?" + PLAN,
    "frontier": "/embed/frontier?" + FRONTIER,
    "metrics": "/embed/metrics?" + SCENARIO,
}
FRAMES = {"slide": (960, 540), "1080p": (1920, 1080)}
SLIDE_TEXT = 0.02  # of the frame's height, at 1080p
JOB_MS = 240_000  # a plan's or a frontier's job on this shared machine, the first time

FIGURE_JSON = "id => document.querySelector(`script[data-figure-for='${id}']`).textContent"
EMBED_READY = """() => { const plots = [...document.querySelectorAll('.plot[data-figure]')];
    return plots.length ? plots.every(d => d.dataset.drawn === '1') : !!document.querySelector('#card-metrics td.num'); }"""

# The embed's blocks (the card's head, each plot, the metrics grid, the caption, the links under it) and, inside
# each plot, its texts' boxes (title, axis titles, legend, notes, menus): [kind, name, left, top, right, bottom].
BOXES = """() => {
  const box = (kind, e, name) => { const r = e.getBoundingClientRect();
    return [kind, name || e.id || e.className.baseVal || e.className, r.left, r.top, r.right, r.bottom]; };
  const blocks = [...document.querySelectorAll('.embed-main .card-head, .embed-main .plot[data-figure], '
      + '.embed-main .metrics-grid, #embed-caption, .embed-foot')].filter(e => e.getClientRects().length)
      .map(e => box('block', e));
  const inner = [];
  document.querySelectorAll('.js-plotly-plot').forEach(d => {
    d.querySelectorAll('.g-gtitle, .g-xtitle, .g-x2title, .g-x3title, .g-ytitle, .g-y2title, .g-y3title, '
        + 'g.legend, g.annotation, g.updatemenu-header-group').forEach(e => {
      if (e.getBBox && e.getBoundingClientRect().width) inner.push(box(d.id, e)); });
  });
  return {blocks, inner};
}"""

# Every text the embed shows and its size as drawn: its font size times the CSS zoom of every element above it
# (the metrics table is zoomed to fit), SVG text (the plots') included; hidden text (a figure's summary for
# screen readers, plotly's hover layer) left out.
TEXT_SIZES = """() => {
  const out = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.trim(), el = n.parentElement;
    if (!text || el.closest('script, style, .visually-hidden, .hoverlayer, title')) continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    let zoom = 1;
    for (let a = el; a; a = a.parentElement) zoom *= parseFloat(getComputedStyle(a).zoom) || 1;
    out.push([el.tagName, el.id || (el.className.baseVal ?? el.className), text.slice(0, 30),
              parseFloat(cs.fontSize) * zoom]);
  }
  return out;
}"""


def overlaps(a: list, b: list, slack: float = 1.0) -> bool:
    return min(a[4], b[4]) - max(a[2], b[2]) > slack and min(a[5], b[5]) - max(a[3], b[3]) > slack


def figure_of(page, plot: str) -> str:
    page.locator("#" + plot).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot)
    return page.evaluate(FIGURE_JSON, plot)


@pytest.mark.parametrize("name", PAGES)
def test_a_pages_link_draws_the_same_figure_in_a_fresh_context(site, name):
    url, plot, link = PAGES[name]
    context, page = open_page(site, timeout_ms=JOB_MS)
    assert page.goto(page.base + url).status == 200
    first = figure_of(page, plot)
    href = page.locator(link).get_attribute("href") if link else page.url.removeprefix(page.base)
    assert href.startswith("/" + name.split("-")[0]), href
    context.close()
    assert page.errors == [], page.errors
    fresh, again = open_page(site, timeout_ms=JOB_MS)  # no cookies, no storage, no history
    assert again.goto(again.base + href).status == 200
    assert figure_of(again, plot) == first
    fresh.close()
    assert again.errors == [], again.errors


def test_the_frontier_drawn_on_the_dashboard_is_a_link(site):
    """The results page's Frontier card draws it (htmx, the URL unchanged); its Link is the frontier's page."""
    context, page = open_page(site, timeout_ms=JOB_MS)
    page.goto(page.base + "/?" + SCENARIO)
    card = page.locator("#card-frontier")
    card.scroll_into_view_if_needed()
    for gpu in card.locator("input[name=frontier_gpus]:checked").evaluate_all("bs => bs.map(b => b.value)"):
        card.locator(f"input[name=frontier_gpus][value='{gpu}']").uncheck(force=True)
    card.locator("input[name=frontier_gpus][value=rtx3050]").check(force=True)
    for field, value in (("isl", "64"), ("osl", "16"), ("max_concurrency", "2")):
        card.locator(f"input[name=frontier_{field}]").fill(value)
    card.locator("#frontier-submit").click()
    drawn = figure_of(page, "plot-frontier")
    href = page.locator("#frontier-permalink").get_attribute("href")
    assert "frontier_gpus=rtx3050" in href and "frontier_isl=64" in href and "frontier_max_concurrency=2" in href
    embed = card.locator("a.tool", has_text="Embed").get_attribute("href")
    assert embed == href.replace("/frontier?", "/embed/frontier?"), (embed, href)
    context.close()
    fresh, again = open_page(site, timeout_ms=JOB_MS)
    assert again.goto(again.base + href).status == 200
    assert figure_of(again, "plot-frontier") == drawn
    assert "rtx3050" in again.locator("#frontier-caption").inner_text()
    fresh.close()
    assert page.errors == [] and again.errors == [], (page.errors, again.errors)


@pytest.mark.parametrize("frame", FRAMES)
@pytest.mark.parametrize("name", EMBEDS)
def test_an_embed_fits_its_frame_apart_and_readable(site, name, frame):
    width, height = FRAMES[frame]
    context, page = open_page(site, width + 40, height + 40, timeout_ms=JOB_MS)
    src = (page.base + EMBEDS[name] + "&caption=1").replace("&", "&amp;")
    frame_page(page, f'<iframe src="{src}" width="{width}" height="{height}" style="border: 0"></iframe>')
    inner = page.main_frame.child_frames[0]
    inner.wait_for_function(EMBED_READY, timeout=JOB_MS, polling=250)
    wait_until_it_fits(inner, height=True)  # no scrollbar, once plotly's resize to the frame has settled
    found = inner.evaluate(BOXES)
    blocks = found["blocks"]
    assert any(b[1] == "embed-caption" for b in blocks) and any(b[0] == "block" for b in blocks), blocks
    for b in blocks:
        assert b[2] >= 0 and b[3] >= 0 and b[4] <= width + 0.5 and b[5] <= height + 0.5, b
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            assert not overlaps(a, b), (a, b)
    for i, a in enumerate(found["inner"]):
        for b in found["inner"][i + 1:]:
            assert a[0] != b[0] or not overlaps(a, b), (a, b)
    caption = inner.locator("#embed-caption").inner_text()
    assert "llama-3.2-1b" in caption, caption
    if frame == "1080p":
        sizes = inner.evaluate(TEXT_SIZES)
        assert sizes, "no text"
        small = [s for s in sizes if s[3] < SLIDE_TEXT * height]
        assert not small, small[:10]
    page.screenshot(path=SHOTS / f"80-embed-{name}-{width}x{height}.png")
    context.close()
    assert page.errors == [], page.errors
