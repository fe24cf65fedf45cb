"""Figures ready for slides (issue #26) in a real browser (Debian's chromium through Playwright): the saturated
scenario's warnings by the headline, in exports and in embeds' captions and cards; goodput bands over
seeds drawn translucent and within what they measure, a 1920x1080 export whose text is scaled for the slide and
which carries the figure's title, the scenario's caption and the runs' warnings, embeds whose text grows with
their frame, and a metrics embed that fits its frame without scrolling inside it. Screenshots go to
test-output/screenshots/."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, frame_page, open_page, screenshot_dir  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
# max_model_len 8192: llama-3.2-1b's 131k context does not fit the rtx3050 (written where the canonical URL has it)
SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20.0&max_model_len=8192"
# A slide's axis titles: 12 px on a 540 px high figure, so at least 24 px on a 1080 px one.
SLIDE_AXIS_PX = 24


@pytest.fixture
def page(site):
    context, page = open_page(site, timeout_ms=120_000, accept_downloads=True)
    errors = page.errors
    yield page
    context.close()
    assert errors == [], errors


def wait_drawn(page, plot_id: str) -> None:
    page.locator("#" + plot_id).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot_id)


def alpha(colour: str) -> float:
    m = re.fullmatch(r"rgba\(\s*\d+,\s*\d+,\s*\d+,\s*([\d.]+)\)", colour)
    return float(m.group(1)) if m else 1.0  # a #rrggbb fill is opaque


def check_goodput_bands(page, shot: str) -> None:
    """The goodput card's 95% bands over seeds: filled translucent in their scheduler's colour, under every line,
    attainment within [0, 100] % and goodput from 0 to the arrival rate."""
    wait_drawn(page, "plot-goodput")
    traces = page.locator("#plot-goodput").evaluate(
        "d => d.data.map(t => ({name: t.name, fill: t.fill || null, fillcolor: t.fillcolor || null,"
        " yaxis: t.yaxis || 'y', y: t.y, opacity: t.opacity === undefined ? 1 : t.opacity}))")
    bands = [t for t in traces if t["name"].endswith("95% band")]
    filled = [t for t in bands if t["fill"]]
    assert len(filled) == 4, [t["name"] for t in traces]  # 2 schedulers x (goodput, attainment)
    for t in filled:
        assert alpha(t["fillcolor"]) * t["opacity"] < 1, t
    assert max(y for t in bands if t["yaxis"] == "y2" for y in t["y"]) <= 100
    assert min(y for t in bands for y in t["y"]) >= 0
    names = [t["name"] for t in traces]
    assert max(names.index(t["name"]) for t in bands) < names.index("fcfs")  # under the lines
    page.locator("#card-goodput").screenshot(path=SHOTS / shot)


# Remembers the figure Plotly.downloadImage is handed (what the exported file draws), then downloads it as before.
CAPTURE_EXPORT = """() => { const real = Plotly.downloadImage;
    Plotly.downloadImage = (fig, opts) => { window.exported = {layout: fig.layout, opts: opts}; return real(fig, opts); }; }"""


def download(page, card: str, fmt: str) -> str:
    with page.expect_download() as info:
        page.locator(f'{card} [data-export="{fmt}"]').click()
    return info.value.path()


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_a_1080p_export_scales_its_text_carries_title_caption_and_warnings_and_bands_read(page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{page.base}/?{SCENARIO}&seeds=2&max_seqs=64&rate_min=2&rate_max=6&rate_step=4")
    # The saturated runs' warning by the headline, first screen; both runs' texts are the same (8 requests waiting
    # at the end of arrivals), so it names none: it concerns every run shown.
    summary = page.locator("#run-warnings summary")
    expect(summary).to_contain_text("saturated")
    expect(page.locator("#run-warnings li", has_text="saturated")).not_to_have_attribute("data-schedulers", re.compile(".*"))
    assert summary.bounding_box()["y"] + summary.bounding_box()["height"] <= height
    # The same page's goodput curves over the two seeds (swept once, the phone's visit finds them done).
    check_goodput_bands(page, f"50-goodput-bands-{width}x{height}.png")
    wait_drawn(page, "plot-cdf")
    page.evaluate(CAPTURE_EXPORT)
    page.select_option("[data-export-size]", "1920x1080")
    download(page, "#card-cdf", "png")
    exported = page.evaluate("window.exported")
    assert (exported["opts"]["width"], exported["opts"]["height"]) == (1920, 1080)
    layout = exported["layout"]
    for axis in ("xaxis", "xaxis2", "xaxis3", "yaxis"):
        assert layout[axis]["title"]["font"]["size"] >= SLIDE_AXIS_PX, (axis, layout[axis]["title"])
    assert layout["font"]["size"] >= SLIDE_AXIS_PX  # tick labels and legend inherit it
    assert "Latency distributions" in layout["title"]["text"]
    footer = next(a["text"] for a in layout["annotations"] if a.get("name") == "export-caption")
    for phrase in ("fcfs, chunked", "seed 0", "means over 2 seeds", "max sequences 64", "extrapolated",
                   "saturated"):
        assert phrase in footer, (phrase, footer)
    # The SVG is the same figure: its axis titles are drawn at the slide's size, with the title and caption.
    svg = open(download(page, "#card-cdf", "svg"), encoding="utf-8").read()
    sizes = [float(px) for px in re.findall(r'class="x\d*title"[^>]*font-size: ([\d.]+)px', svg)]
    assert len(sizes) == 3 and min(sizes) >= SLIDE_AXIS_PX, sizes
    assert "Latency distributions" in svg and "means over 2 seeds" in svg and "extrapolated" in svg
    # On screen nothing changed: the card's own figure keeps its 12 px axis titles.
    assert page.locator("#plot-cdf").evaluate("d => d._fullLayout.xaxis.title.font.size") == 12
    # An embed of the same runs (cached) with the scenario's caption says they are saturated under it.
    page.goto(f"{page.base}/embed/cdf?{SCENARIO}&seeds=2&max_seqs=64&caption=1")
    warning = page.locator("#embed-caption .caption-warning")
    expect(warning).to_contain_text("saturated")  # both runs' (the same text: no scheduler named)
    assert warning.bounding_box()["y"] + warning.bounding_box()["height"] <= height  # in the frame, not below it


def embed_frame(page, figure: str, width: int, height: int, query: str = SCENARIO + "&caption=1"):
    page.set_viewport_size({"width": width + 20, "height": height + 20})
    frame_page(page, f'<iframe src="{page.base}/embed/{figure}?{query.replace("&", "&amp;")}" width="{width}" '
                     f'height="{height}" style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function("""() => { const plots = [...document.querySelectorAll('.plot[data-figure]')];
        return plots.length ? plots.every(d => d.dataset.drawn === '1') : !!document.querySelector('#card-metrics td.num'); }""")
    frame.wait_for_timeout(300)  # plotly's responsive resize, the table's fit
    return frame


# Every element of an embed that could scroll inside it: its page, the card, each table's wrapper.
SCROLLERS = """() => [document.documentElement, ...document.querySelectorAll('.embed-main, .card, .table-wrap')]
    .map(e => [e.id || e.className || e.tagName, e.scrollWidth, e.clientWidth, e.scrollHeight, e.clientHeight])"""


@pytest.mark.parametrize("width, height", [(1920, 1080), (480, 270)])
def test_the_metrics_embed_fits_its_frame_without_scrolling_inside(page, width, height):
    frame = embed_frame(page, "metrics", width, height)
    for name, sw, cw, sh, ch in frame.evaluate(SCROLLERS):
        assert sw <= cw and sh <= ch, (name, sw, cw, sh, ch)
    assert frame.locator("#card-metrics td.num").count() > 0
    # the note under the table is zoomed with it, not left at its own size beside a shrunk or grown table
    zooms = frame.evaluate("() => ['.metrics-grid', '#bounds-note'].map(s => document.querySelector(s).style.zoom)")
    assert zooms[0] and zooms[0] == zooms[1], zooms
    page.screenshot(path=SHOTS / f"51-embed-metrics-{width}x{height}.png")


def test_an_embeds_text_grows_with_a_1080p_frame(page):
    frame = embed_frame(page, "cdf", 1920, 1080)
    sizes = frame.evaluate("() => [...document.querySelectorAll('#plot-cdf .xtitle, #plot-cdf .x2title, #plot-cdf .x3title')].map(t => parseFloat(t.style.fontSize))")
    assert len(sizes) == 3 and min(sizes) >= SLIDE_AXIS_PX, sizes
    caption = frame.locator("#embed-caption").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert caption >= 0.02 * 1080, caption
    # the saturated scenario's warning under it grows too (it was 11 px, 1% of the frame)
    warning = frame.locator("#embed-caption .caption-warning")
    assert "saturated" in warning.inner_text()
    assert warning.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= 0.8 * caption
    page.screenshot(path=SHOTS / "52-embed-cdf-1920x1080.png")


def test_present_mode_fills_the_window_and_the_arrow_keys_step_through_the_figures(page):
    from app.web import figures

    names = figures.embeddable()
    at = names.index("cdf")
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{page.base}/embed/cdf?{SCENARIO}")
    page.locator("#present-link").click()  # an embed's own link to present mode
    page.wait_for_url("**present=1")
    page.wait_for_function(DRAWN, arg="plot-cdf")
    box = page.locator("#plot-cdf").bounding_box()
    assert box["width"] >= 0.95 * 1920 and box["height"] >= 0.7 * 1080, box  # the figure fills the window
    assert not page.locator("#present-link").count() and not page.locator(".tool").first.is_visible()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"**/embed/{names[at + 1]}?{SCENARIO}&present=1")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"**/embed/cdf?{SCENARIO}&present=1")
    page.wait_for_function(DRAWN, arg="plot-cdf")
    page.keyboard.press("Escape")
    page.wait_for_url(f"**/?{SCENARIO}")


def test_a_1080p_gantt_embed_scales_its_text_but_not_its_rows(page):
    # fcfs's: the run that saturates here (chunked did too with the 512-token budget it had before vLLM's 2048)
    frame = embed_frame(page, "gantt", 1920, 1080, SCENARIO + "&scheduler=fcfs")
    drawn = frame.locator("#plot-gantt-fcfs").evaluate("""d => ({
        title: d._fullLayout.xaxis.title.font.size,
        widths: d.data.filter(t => t.mode === 'lines').map(t => t.line.width),
        served: JSON.parse(document.querySelector('script[data-figure-for="plot-gantt-fcfs"]').textContent)
            .data.filter(t => t.mode === 'lines').map(t => t.line.width)})""")
    assert drawn["title"] >= SLIDE_AXIS_PX
    warning = frame.locator("#card-gantt-fcfs .card-warning")  # the saturated run's own warning, slide-sized
    assert warning.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= SLIDE_AXIS_PX
    assert drawn["widths"] == drawn["served"] and drawn["widths"], drawn  # a row's thickness fits the plot already
