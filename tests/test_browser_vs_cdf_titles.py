"""/vs's latency distributions keep their titles apart (issue #41: "/vs CDF panel titles overlap"): on each side's
three panels, at 1440x900 (side by side, half a page each) and 390x844 (stacked), light and dark, with long model
names on both sides, no axis title's box meets another's, a tick label or a panel's plot area. One page load per
size."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

pytest.importorskip("playwright")

from browser_support import DARK_PAPER, DRAWN, LIGHT_PAPER, open_page, screenshot_dir  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
A = ("schedulers=fcfs,chunked&hardware=h100&model=qwen3-coder-480b-a35b&quantization=fp8&tp=8&max_model_len=16384"
     "&workload=chat&num_requests=40&seed=3")
B = "schedulers=fcfs,chunked&hardware=h200&model=qwen3-next-80b-a3b&tp=2&max_model_len=16384&workload=chat&num_requests=40&seed=3"

# In page pixels: each axis title's box, each tick label's, each panel's plot area (from plotly's own layout).
BOXES = """id => { const d = document.getElementById(id), L = d._fullLayout, page = d.getBoundingClientRect();
  const box = e => { const b = e.getBoundingClientRect();
    return {text: e.textContent, x0: b.left, y0: b.top, x1: b.right, y1: b.bottom}; };
  const titles = [...d.querySelectorAll('.infolayer [class^="g-"][class$="title"] text')].map(box)
    .filter(b => b.text && b.x1 > b.x0);
  const ticks = [...d.querySelectorAll('.xtick text, .x2tick text, .x3tick text, .ytick text, .y2tick text,'
                                       + ' .y3tick text')].map(box).filter(b => b.text && b.x1 > b.x0);
  const plots = ['', '2', '3'].map(k => { const x = L['xaxis' + k], y = L['yaxis' + k];
    return {text: 'plot ' + (k || '1'), x0: page.left + x._offset, x1: page.left + x._offset + x._length,
            y0: page.top + y._offset, y1: page.top + y._offset + y._length}; });
  return {titles, ticks, plots}; }"""


def _meets(a: dict, b: dict) -> bool:
    return a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]


PLOT_IN_THEME = """([id, paper]) => { const d = document.getElementById(id);
  return !!(d && d._fullLayout && d._fullLayout.paper_bgcolor === paper); }"""


def _overlaps(boxes: dict) -> list[tuple[str, str]]:
    titles = boxes["titles"]
    bad = [(a["text"], b["text"]) for i, a in enumerate(titles) for b in titles[i + 1:] if _meets(a, b)]
    bad += [(t["text"], o["text"]) for t in titles for o in boxes["ticks"] + boxes["plots"] if _meets(t, o)]
    return bad


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_the_cdf_panels_titles_meet_nothing(site, viewport):
    w, h = viewport
    context, page = open_page(site, w, h, timeout_ms=120_000, color_scheme="light")
    try:
        page.goto(page.base + "/vs?" + urlencode({"a": A, "b": B}))
        for theme, paper in (("light", LIGHT_PAPER), ("dark", DARK_PAPER)):
            page.emulate_media(color_scheme=theme)
            for side in "ab":
                plot = f"plot-{side}-cdf"
                page.locator("#" + plot).scroll_into_view_if_needed()
                page.wait_for_function(DRAWN, arg=plot)
                # This plot redrawn in the theme (not every plot on the page: one drawn lazily while the theme
                # switched kept CI's phone run waiting 120 s on the page-wide check).
                page.wait_for_function(PLOT_IN_THEME, arg=[plot, paper], polling=100)
                boxes = page.evaluate(BOXES, plot)
                assert len(boxes["titles"]) == 6, boxes["titles"]  # three x titles, three y titles
                assert _overlaps(boxes) == [], (side, theme, _overlaps(boxes))
                if theme == "light":
                    page.locator("#" + plot).screenshot(path=SHOTS / f"77-vs-cdf-{side}-{w}x{h}.png")
        assert page.errors == [], page.errors
    finally:
        context.close()
