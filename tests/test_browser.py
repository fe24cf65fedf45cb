"""The dashboard in a real browser (Debian's chromium through Playwright): load, compare, share, go back, play the
KV animation, read the Gantt, draw goodput curves, embed, export an SVG, and see an inline error. Screenshots go
to test-output/screenshots/ for a person to look at."""

from __future__ import annotations

import json
import re
import struct
import time
import zlib
from pathlib import Path

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, frame_page, open_page, screenshot_dir, wait_until_it_fits  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from app.web import figures, service  # noqa: E402
from sim_core.metric_catalog import BY_KEY  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()



@pytest.fixture
def page(site):
    # A 422 answer (an inline error) is expected; chromium still logs it as a failed resource.
    context, page = open_page(site, timeout_ms=30_000, expected_422=True, accept_downloads=True)
    errors = page.errors
    yield page
    context.close()
    assert errors == [], errors


def table_numbers(page) -> list[str]:
    return page.locator("#card-metrics td.num").all_inner_texts()


def wait_drawn(page, plot_id: str) -> None:
    page.locator("#" + plot_id).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot_id)


def test_default_page_compare_share_and_back(page):
    page.goto(page.base + "/")
    expect(page.locator("#card-metrics thead").first).to_contain_text("fcfs")
    expect(page.locator("#card-metrics thead").first).to_contain_text("chunked")
    expect(page.locator(".summary")).to_contain_text("rag workload")
    page.screenshot(path=SHOTS / "01-default-page.png")
    first_numbers = table_numbers(page)

    # Add a scheduler: results update in place and the URL becomes the canonical one.
    page.locator("label.chip", has_text="spf").click()
    # The page's own max_model_len (8192, the seed's: the model's 131k context does not fit this GPU) is written
    # into the URL in the fields' order, so the shared URL, which names the GPU, runs it too.
    page.wait_for_url("**/?schedulers=fcfs,spf,chunked&hardware=rtx3050&workload=rag&duration=20.0&max_model_len=8192")
    # A run may wait its turn in the simulation line on a loaded machine (CI's two cores compiling other files'
    # kernels; the line may hold a request up to LINE_HOLD_S before it has a pace): the results come, later.
    expect(page.locator("#card-metrics thead").first).to_contain_text("spf", timeout=90_000)
    wait_drawn(page, "plot-cdf")
    page.screenshot(path=SHOTS / "02-three-schedulers.png")
    shared_url, shared_numbers = page.url, table_numbers(page)
    assert len(shared_numbers) == len(first_numbers) // 2 * 3

    # The shared URL, opened cold in a fresh page, shows the same numbers.
    fresh = page.context.browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
    fresh.goto(shared_url)
    expect(fresh.locator("#card-metrics thead").first).to_contain_text("spf", timeout=90_000)
    assert table_numbers(fresh) == shared_numbers
    assert fresh.locator('label.chip:has-text("spf") input').is_checked()
    fresh.context.close()

    # Back returns to the previous view, re-rendered (a full reload of that URL).
    page.go_back()
    page.wait_for_url(page.base + "/")
    expect(page.locator("#card-metrics thead").first).not_to_contain_text("spf", timeout=90_000)
    assert table_numbers(page) == first_numbers
    # Back reloaded "/" (htmx's history miss), and htmx handles a popstate only from DOMContentLoaded: a Forward
    # before it changes the URL of the reloaded page and nothing else (a real user is never that quick).
    page.wait_for_load_state("load")
    page.go_forward()
    expect(page.locator("#card-metrics thead").first).to_contain_text("spf", timeout=90_000)


CURSOR_AT = """([plot, t]) => {
  const d = document.getElementById(plot), xa = d._fullLayout.xaxis, line = d.querySelector('.time-cursor');
  return {hidden: line.hidden, left: parseFloat(line.style.left), expected: xa._offset + xa.l2p(t)};
}"""


def kv_time(page) -> float:
    return float(page.locator("#plot-kv").get_attribute("data-time"))


def test_kv_animation_moves_the_gantt_cursor(page):
    page.goto(page.base + "/")
    wait_drawn(page, "plot-kv")
    kv = page.locator("#plot-kv")
    expect(page.locator("#card-kv .kv-legend")).to_contain_text("decoding")
    page.locator("#card-kv").screenshot(path=SHOTS / "03-kv-grid.png")
    wait_drawn(page, "plot-gantt-fcfs")
    page.locator("#card-kv").scroll_into_view_if_needed()
    start = int(kv.get_attribute("data-frame"))
    page.locator("[data-scrub]").fill("0")  # rewind, then play
    page.wait_for_function("() => document.getElementById('plot-kv').dataset.frame === '0'")
    page.locator("[data-play]").click()
    page.wait_for_function("() => +document.getElementById('plot-kv').dataset.frame >= 5")
    page.locator("[data-play]").click()  # pause
    expect(page.locator("[data-play]")).to_contain_text("Play")
    frame = int(kv.get_attribute("data-frame"))
    assert frame >= 5 and frame != start
    t = kv_time(page)
    cursor = page.evaluate(CURSOR_AT, ["plot-gantt-fcfs", t])
    assert cursor["hidden"] is False and abs(cursor["left"] - cursor["expected"]) < 1
    assert f"t={t:.2f}" in page.url  # pausing writes the playback time into the URL
    label = page.locator("[data-clock]").inner_text()
    assert label.startswith("t = ") and label.endswith(" s")
    page.locator("#card-kv").screenshot(path=SHOTS / "04-kv-playing.png")
    with page.expect_download() as info:  # the canvases, composed into one PNG
        page.locator('#card-kv [data-export="png"]').click()
    assert info.value.suggested_filename == "sched-sim-kv.png"
    assert open(info.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    info.value.save_as(SHOTS / "04b-kv-export.png")


def test_click_on_a_time_axis_seeks_and_t_is_in_the_url(page):
    page.goto(page.base + "/")
    wait_drawn(page, "plot-kv")
    wait_drawn(page, "plot-gantt-chunked")
    horizon = float(page.locator("[data-kv-frames-for]").evaluate("s => JSON.parse(s.textContent).horizon"))
    steps = int(page.locator("[data-scrub]").get_attribute("max"))
    page.locator("#plot-gantt-chunked").scroll_into_view_if_needed()
    target = 11.0
    x, y = page.locator("#plot-gantt-chunked").evaluate("""(d, t) => { const xa = d._fullLayout.xaxis,
        r = d.getBoundingClientRect(); return [r.left + xa._offset + xa.l2p(t), r.top + d._fullLayout._size.t + 40]; }""",
                                                            target)
    page.mouse.click(x, y)
    page.wait_for_function(f"() => Math.abs(+document.getElementById('plot-kv').dataset.time - {target}) < "
                           f"{horizon / steps}")
    t = kv_time(page)
    assert f"t={t:.2f}" in page.url
    cursor = page.evaluate(CURSOR_AT, ["plot-timeline", t]) if page.locator("#plot-timeline .time-cursor").count() \
        else None
    shared = page.url
    # The shared link, opened cold, shows the same frame and puts the cursor there.
    fresh = page.context.new_page()
    fresh.goto(shared)
    fresh.wait_for_function(DRAWN, arg="plot-kv")
    assert kv_time(fresh) == t
    fresh.locator("#plot-gantt-fcfs").scroll_into_view_if_needed()
    fresh.wait_for_function(DRAWN, arg="plot-gantt-fcfs")
    restored = fresh.evaluate(CURSOR_AT, ["plot-gantt-fcfs", t])
    assert restored["hidden"] is False and abs(restored["left"] - restored["expected"]) < 1
    fresh.close()
    assert cursor is None or abs(cursor["left"] - cursor["expected"]) < 1


def test_gantt_has_one_row_per_shown_request(page):
    page.goto(page.base + "/?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0")
    for name in ("fcfs", "chunked"):
        plot = "plot-gantt-" + name
        wait_drawn(page, plot)
        shown = int(page.locator("#" + plot).get_attribute("data-rows"))
        rows = page.locator("#" + plot).evaluate(
            "d => new Set(d.data.flatMap(t => t.y.filter(y => y !== null))).size")
        assert rows == shown > 50
        expect(page.locator(f"#card-gantt-{name} .sub")).to_contain_text(f"all {shown} requests")
    page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / "05-gantt-fcfs.png")
    wait_drawn(page, "plot-timeline")
    page.locator("#card-timeline").screenshot(path=SHOTS / "06-timeline.png")
    page.locator("#card-cdf").screenshot(path=SHOTS / "07-cdf.png")


def test_goodput_curves_and_svg_export(page):
    page.goto(page.base + "/")
    card = page.locator("#card-goodput")
    card.scroll_into_view_if_needed()
    card.locator("input[name=rate_min]").fill("1")
    card.locator("input[name=rate_max]").fill("7")
    card.locator("input[name=rate_step]").fill("2")
    card.locator("button[type=submit]").click()
    page.wait_for_url("**rate_min=1&rate_max=7&rate_step=2")
    wait_drawn(page, "plot-goodput")
    names = page.locator("#plot-goodput").evaluate("d => d.data.map(t => t.name)")
    assert {"fcfs", "chunked"} <= set(names)
    expect(card.locator(".knees")).to_contain_text("knee")
    card.screenshot(path=SHOTS / "08-goodput.png")

    with page.expect_download() as info:
        card.locator('[data-export="svg"]').click()
    download = info.value
    assert download.suggested_filename.endswith(".svg")
    svg = open(download.path(), encoding="utf-8").read()
    assert svg.lstrip().startswith("<svg") and "goodput" in svg


def png_size_and_corner(path) -> tuple[int, int, tuple[int, ...]]:
    """(width, height, RGBA of the top-left pixel) of an 8-bit PNG: a filter never changes a first row's first
    pixel (its left and upper neighbours are zero), so it is the first bytes after the filter byte."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, color_type = struct.unpack(">IIBB", data[16:26])
    assert depth == 8 and color_type in (2, 6)
    idat, at = b"", 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            idat += data[at + 8:at + 8 + length]
        at += 12 + length
    first = zlib.decompressobj().decompress(idat, 8)
    pixel = tuple(first[1:5]) if color_type == 6 else (*first[1:4], 255)
    return width, height, pixel


def download_export(page, card: str, button: str) -> str:
    with page.expect_download() as info:
        page.locator(f"{card} {button}").click()
    return info.value.path()


def test_exports_at_a_fixed_slide_size_and_background(page):
    page.goto(page.base + "/?t=8")
    wait_drawn(page, "plot-cdf")
    wait_drawn(page, "plot-kv")
    # On-screen size, doubled; taller by the title and the footer (caption, warnings) the export adds above and under.
    png = png_size_and_corner(download_export(page, "#card-cdf", '[data-export="png"]'))[:2]
    on_screen = [2 * round(x) for x in page.locator("#plot-cdf").evaluate("d => [d.offsetWidth, d.offsetHeight]")]
    assert png[0] == on_screen[0] and on_screen[1] + 60 <= png[1] <= 2 * on_screen[1], (png, on_screen)
    page.select_option("[data-export-size]", "1600x900")
    page.select_option("[data-export-background]", "transparent")
    for card in ("#card-cdf", "#card-kv"):
        width, height, corner = png_size_and_corner(download_export(page, card, '[data-export="png"]'))
        assert (width, height) == (1600, 900) and corner[3] == 0, (card, corner)
    svg = open(download_export(page, "#card-cdf", '[data-export="svg"]'), encoding="utf-8").read()
    assert re.search(r'<svg[^>]* width="1600" height="900"', svg)
    page.select_option("[data-export-size]", "1920x1080")
    page.select_option("[data-export-background]", "white")
    for card in ("#card-cdf", "#card-kv"):
        assert png_size_and_corner(download_export(page, card, '[data-export="png"]')) == (1920, 1080, (255,) * 4)
    # The choice outlives a run: change the scenario, and the next export is still 1920x1080.
    page.locator("#f-duration").fill("10")
    page.locator("#f-duration").press("Tab")  # one change, one run
    page.wait_for_url("**duration=10.0**")
    expect(page.locator(".summary")).to_contain_text("over 10 s")
    expect(page.locator("#workspace")).not_to_have_class(re.compile("htmx-request"))
    wait_drawn(page, "plot-cdf")
    assert page.locator("[data-export-size]").input_value() == "1920x1080"
    assert png_size_and_corner(download_export(page, "#card-cdf", '[data-export="png"]'))[:2] == (1920, 1080)
    page.locator(".results-head").screenshot(path=SHOTS / "21-export-options.png")


def test_the_page_downloads_each_schedulers_requests_and_trace(page):
    page.goto(page.base + "/?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3")
    expect(page.locator("#card-metrics thead").first).to_contain_text("chunked")
    page.locator("#card-gantt-chunked .card-head").screenshot(path=SHOTS / "30-gantt-downloads-1440x900.png")
    with page.expect_download() as info:
        page.locator("#card-gantt-chunked .tool", has_text="CSV").click()
    assert info.value.suggested_filename == "sched-sim-chunked-requests.csv"
    rows = open(info.value.path(), encoding="utf-8").read().splitlines()
    assert rows[0].startswith("request,class,arrival_s,prompt_tokens,output_tokens,status,ttft_ms") and len(rows) == 31
    with page.expect_download() as info:
        page.locator("#card-gantt-fcfs .tool", has_text="Perfetto").click()
    assert info.value.suggested_filename == "sched-sim-fcfs.trace.json"
    assert json.loads(Path(info.value.path()).read_text(encoding="utf-8"))["metadata"]["requests_total"] == 30


def test_dark_mode_follows_the_system_setting(site):
    context, page = open_page(site, color_scheme="dark", accept_downloads=True)
    errors = page.errors
    page.goto(page.base + "/?t=8")
    wait_drawn(page, "plot-cdf")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert max(map(int, re.findall(r"\d+", background)[:3])) < 40, background  # a dark page
    paper = page.locator("#plot-cdf").evaluate("d => [d._fullLayout.paper_bgcolor, d._fullLayout.font.color]")
    assert paper == ["#161b22", "#c9d1d9"]
    wait_drawn(page, "plot-kv")
    assert page.locator('.kv-legend [data-state="free"]').evaluate("s => s.style.getPropertyValue('--c')") == "#2d333b"
    # The system switching back to light recolours what is drawn, and back to dark again.
    page.emulate_media(color_scheme="light")
    page.wait_for_function("() => document.getElementById('plot-cdf')._fullLayout.paper_bgcolor === '#ffffff'")
    expect(page.locator('.kv-legend [data-state="free"]')).not_to_have_attribute("style", re.compile("#2d333b"))
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("() => document.getElementById('plot-cdf')._fullLayout.paper_bgcolor === '#161b22'")
    # A download is for a slide: light, whatever the screen shows.
    assert png_size_and_corner(download_export(page, "#card-cdf", '[data-export="png"]'))[2] == (255,) * 4
    page.locator("#card-kv").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "22-dark-1440x900.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#card-cdf").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "23-dark-390x844.png")
    context.close()
    assert errors == [], errors


def boxes_overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def test_a_390_px_phone_has_no_overlap_or_clipping(page):
    """Issue 12's phone: latency panels side by side overprinted, KV titles overprinted, the metrics table was
    clipped. At 390x844 nothing is wider than the screen, the latency panels are stacked, captions stand apart,
    and a table wider than its card scrolls inside it to its last column."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page.base + "/?schedulers=fcfs,spf,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0&t=8")
    wait_drawn(page, "plot-cdf")
    wait_drawn(page, "plot-kv")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    for card in page.locator(".results > *").all():
        assert card.evaluate("c => c.scrollWidth <= c.clientWidth"), card.get_attribute("id")
    # The three latency panels are stacked: full width each, one band each, no band over another.
    domains = page.locator("#plot-cdf").evaluate("""d => ['', '2', '3'].map(k =>
        [d._fullLayout['xaxis' + k].domain, d._fullLayout['yaxis' + k].domain])""")
    assert all(x == [0, 1] for x, _ in domains)
    bands = sorted(y for _, y in domains)
    assert all(lower[1] < upper[0] for lower, upper in zip(bands, bands[1:], strict=False)), bands
    captions = [c.bounding_box() for c in page.locator(".kv-panel figcaption").all()]
    assert not any(boxes_overlap(a, b) for i, a in enumerate(captions) for b in captions[i + 1:]), captions
    heads = [h.bounding_box() for h in page.locator(".card-head > div:first-child, .card-head > .tools").all()]
    assert all(h["x"] + h["width"] <= 390 for h in heads)
    # The metrics table scrolls inside its card, metric names staying in view, to its last column.
    wrap = page.locator("#card-metrics .table-wrap").first
    wrap.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "24-metrics-390x844.png")
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    last, name, box = (page.locator("#card-metrics thead").first.locator("th").last.bounding_box(),
                       page.locator("#card-metrics tbody th").nth(1).bounding_box(), wrap.bounding_box())
    assert box["x"] <= last["x"] and last["x"] + last["width"] <= box["x"] + box["width"] + 1
    assert box["x"] <= name["x"] <= box["x"] + 12  # sticky: still at the left edge
    page.screenshot(path=SHOTS / "25-metrics-scrolled-390x844.png")
    page.locator("#card-cdf").screenshot(path=SHOTS / "26-latency-stacked-390x844.png")
    page.locator("#card-kv").screenshot(path=SHOTS / "27-kv-three-390x844.png")
    page.locator("#card-gantt-spf").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "28-gantt-head-390x844.png")


def test_a_tap_on_a_metric_name_shows_what_it_measures(site):
    """The glossary works on touch: a phone has no hover, so the descriptions (the metric catalogue's) must not
    live only in tooltips."""
    context, page = open_page(site, 390, 844, has_touch=True, is_mobile=True)
    errors = page.errors
    page.goto(page.base + "/")
    term = page.locator("#card-metrics .term", has_text=re.compile(r"^P99 ITL$"))
    term.scroll_into_view_if_needed()
    term.tap()
    help_text = page.locator("#card-metrics th:has(.term[aria-expanded=true]) .term-help")
    expect(help_text).to_have_text(BY_KEY["itl_ms.p99"].description)
    box, screen = help_text.bounding_box(), 390
    assert box["x"] >= 0 and box["x"] + box["width"] <= screen
    page.screenshot(path=SHOTS / "29-glossary-tap-390x844.png")
    term.tap()
    expect(help_text).to_have_count(0)  # a second tap folds it away
    expect(page.locator("#card-metrics .term-help:visible")).to_have_count(0)
    expect(term).to_have_attribute("aria-expanded", "false")
    context.close()
    assert errors == [], errors


def test_embed_page(page):
    page.goto(page.base + "/embed/kv?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0")
    wait_drawn(page, "plot-kv")
    assert page.locator("#scenario-form").count() == 0
    page.screenshot(path=SHOTS / "09-embed-kv.png")
    # An iframe on someone else's page, and a sandboxed one (an opaque origin: its scripts load "cross-site").
    src = f"{page.base}/embed/cdf?schedulers=fcfs,chunked&amp;hardware=rtx3050&amp;max_model_len=8192&amp;workload=rag&amp;duration=20.0"
    page.set_content(f'<iframe id="plain" src="{src}" width="1000" height="460"></iframe>'
                     f'<iframe id="sandboxed" sandbox="allow-scripts" src="{src}" width="1000" height="460"></iframe>')
    for frame in (page.frame_locator("#plain"), page.frame_locator("#sandboxed")):
        expect(frame.locator("#plot-cdf .main-svg").first).to_be_visible()
    page.screenshot(path=SHOTS / "10-embed-cdf-iframe.png")


SLIDE_FRAME = (960, 540)
# What shows that an embed has drawn its figure: every plot in it drawn (plotly's and the KV player's set
# data-drawn), or, with no plot, the metrics table filled in.
EMBED_READY = """() => { const plots = [...document.querySelectorAll('.plot[data-figure]')];
    return plots.length ? plots.every(d => d.dataset.drawn === '1') : !!document.querySelector('#card-metrics td.num'); }"""


@pytest.mark.parametrize("figure", figures.embeddable())
def test_every_embed_fits_a_960x540_slide_frame(page, figure):
    """Issue 12: in a 960x540 iframe nothing overflows (no scrollbar, every figure and the caption inside it)."""
    width, height = SLIDE_FRAME
    query = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0&caption=1"
    frame_page(page, f'<iframe src="{page.base}/embed/{figure}?{query.replace("&", "&amp;")}" width="{width}" '
                     f'height="{height}" style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function(EMBED_READY, timeout=90_000)
    wait_until_it_fits(frame, height=True)  # once plotly's responsive resize settles: no scrollbar
    boxes = frame.evaluate("""() => [...document.querySelectorAll('.plot[data-figure], #embed-caption, .embed-foot')]
        .map(e => { const r = e.getBoundingClientRect(); return [e.id || e.className, r.left, r.top, r.right, r.bottom]; })""")
    assert any(b[0] == "embed-caption" for b in boxes)
    for name, left, top, right, bottom in boxes:
        assert left >= 0 and top >= 0 and right <= width and bottom <= height, (name, left, top, right, bottom)
    if figure == "kv":
        for canvas in frame.locator(".kv-panel canvas").all():
            box = canvas.bounding_box()
            assert box["y"] + box["height"] <= height, box
    page.screenshot(path=SHOTS / f"19-embed-{figure}-960x540.png")


def test_a_bare_embed_shows_one_panel_at_the_size_asked(page):
    page.goto(page.base + "/embed/gantt?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0"
              "&scheduler=chunked&chrome=0&caption=Chunked+prefill+on+an+RTX+3050&width=800&height=450")
    wait_drawn(page, "plot-gantt-chunked")
    assert page.locator("[data-figure=gantt]").count() == 1
    assert page.locator(".tool").evaluate_all("ts => ts.filter(t => t.offsetParent !== null).length") == 0
    assert not page.locator(".embed-foot").is_visible()
    expect(page.locator("#embed-caption")).to_have_text("Chunked prefill on an RTX 3050")
    main = page.locator(".embed-main").bounding_box()
    assert (main["width"], main["height"]) == (800, 450)
    plot = page.locator("#plot-gantt-chunked").bounding_box()
    assert plot["y"] + plot["height"] <= 450 and plot["width"] <= 800
    page.locator(".embed-main").screenshot(path=SHOTS / "20-embed-bare-800x450.png")


def test_inline_error_for_an_impossible_setup(page):
    page.goto(page.base + "/")
    page.select_option("#f-model", "llama-3-70b")
    error = page.locator("#err-model")
    expect(error).to_contain_text("llama-3-70b needs")
    expect(error).to_contain_text("rtx3050 has 8 GB")
    # The last good results stay, dimmed, under a note saying they are not the form's scenario.
    expect(page.locator("#results")).to_have_class(re.compile(r"\bstale\b"))
    expect(page.locator("#stale-note")).to_contain_text("Not updated")
    expect(page.locator("#card-metrics")).to_be_visible()
    page.screenshot(path=SHOTS / "11-inline-error.png")
    page.locator("#f-rate").fill("-1")
    page.locator("#f-rate").press("Enter")
    expect(page.locator("#err-rate")).to_contain_text("between 1e-06 and 10000")
    # An error in a folded "Advanced" field unfolds it (the form itself is never redrawn).
    assert not page.locator("details.advanced").evaluate("d => d.open")
    page.locator("#f-token_budget").evaluate("i => { i.value = 'lots'; i.dispatchEvent(new Event('change', {bubbles: true})); }")
    expect(page.locator("#err-token_budget")).to_be_visible()
    assert page.locator("#f-token_budget").input_value() == "lots"


def test_weights_auto_names_the_format_the_model_runs(page):
    """quantization's default, auto (the checkpoint's format), says which format that is, and follows the model
    picked, even one that does not fit (the form's labels come from every answer, a 422 included)."""
    page.goto(page.base + "/")
    auto = page.locator('#f-quantization option[value="auto"]')
    expect(auto).to_have_text("checkpoint default: fp16")
    assert page.locator("#f-quantization").input_value() == "auto"
    page.select_option("#f-model", "gpt-oss-20b")
    expect(auto).to_have_text("checkpoint default: mxfp4 as int4")  # no FP4 tensor cores: vLLM's weight-only Marlin path


def test_trace_upload_replays_it(page, tmp_path):
    trace = tmp_path / "my-trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{k * 0.25:.2f},{200 + 37 * k % 900},{30 + k % 40}\n" for k in range(40)), encoding="utf-8")
    page.goto(page.base + "/?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&duration=10.0")
    page.set_input_files("#f-trace", str(trace))
    expect(page.locator(".trace-info")).to_contain_text("my-trace.csv: 40 requests")
    page.wait_for_url("**upload=*")
    expect(page.locator(".summary")).to_contain_text("trace my-trace.csv: 40 requests")
    # Goodput-vs-rate curves replay the trace at each rate, from a range proposed around its own 4 req/s.
    card = page.locator("#card-goodput")
    card.scroll_into_view_if_needed()
    assert float(card.locator("input[name=rate_min]").input_value()) < 4 < \
        float(card.locator("input[name=rate_max]").input_value())
    card.locator("button[type=submit]").click()
    page.wait_for_url("**rate_step=*")
    assert "upload=" in page.url
    wait_drawn(page, "plot-goodput")
    assert {"fcfs", "chunked"} <= set(page.locator("#plot-goodput").evaluate("d => d.data.map(t => t.name)"))
    page.locator("[data-clear-trace]").click()
    expect(page.locator(".summary")).to_contain_text("chat workload")
    assert "upload=" not in page.url


def test_an_edit_during_a_run_is_never_lost(page, monkeypatch):
    """Issue 12's race: change the GPU, tick another scheduler 0.4 s later, while the first run is still going.
    Both changes end up in the form, the URL and the simulated results."""
    compare = service.compare

    def slow_first_run(req, cancel=None, min_cell=1):  # the GPU change alone simulates slowly, so the tick lands mid-run
        if req.scenario.hardware == "l4" and "spf" not in req.schedulers:
            time.sleep(1.5)
        return compare(req, cancel, min_cell)

    monkeypatch.setattr(service, "compare", slow_first_run)
    page.goto(page.base + "/")
    expect(page.locator("#card-metrics thead").first).to_contain_text("chunked")
    page.select_option("#f-hardware", "l4")
    page.wait_for_timeout(400)
    assert "htmx-request" in page.locator("#workspace").get_attribute("class")  # the first run is in flight
    page.locator("label.chip", has_text="spf").click()
    # The form carries the page's max_model_len (8192, shown in its field) to the GPU picked.
    page.wait_for_url("**/?schedulers=fcfs,spf,chunked&hardware=l4&workload=rag&duration=20.0&max_model_len=8192")
    expect(page.locator("#card-metrics thead").first).to_contain_text("spf")
    expect(page.locator(".summary")).to_contain_text("L4")
    expect(page.locator("#workspace")).not_to_have_class(re.compile("htmx-request"))
    assert page.locator("#f-hardware").input_value() == "l4"
    assert page.locator('label.chip:has-text("spf") input').is_checked()
    assert page.locator('label.chip:has-text("fcfs") input').is_checked()


def test_a_typo_keeps_the_last_results_dimmed(page):
    page.goto(page.base + "/")
    expect(page.locator("#card-metrics thead").first).to_contain_text("chunked")
    numbers = table_numbers(page)
    page.locator("#f-duration").fill("abc")
    page.locator("#f-duration").press("Enter")
    expect(page.locator("#err-duration")).to_contain_text("'abc'")
    expect(page.locator("#results")).to_have_class(re.compile(r"\bstale\b"))
    expect(page.locator("#stale-note")).to_be_visible()
    page.locator("#f-rate").fill("4")
    page.locator("#f-rate").press("Tab")  # another run, still refused for the duration: it must not wipe the rate
    expect(page.locator("#workspace")).not_to_have_class(re.compile("htmx-request"))
    assert page.locator("#f-duration").input_value() == "abc"
    assert page.locator("#f-rate").input_value() == "4"
    assert table_numbers(page) == numbers and "Nothing simulated" not in page.locator("#results").inner_text()
    page.screenshot(path=SHOTS / "12-typo-keeps-results.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#f-duration").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "12b-typo-field-390x844.png")
    page.locator("#stale-note").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "12c-typo-results-390x844.png")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.locator("#f-duration").fill("10")
    page.locator("#f-duration").press("Enter")
    page.wait_for_url("**&rate=4.0&duration=10.0&max_model_len=8192")  # the page's own max_model_len, carried
    expect(page.locator("#err-duration")).to_have_count(0)
    expect(page.locator("#results")).not_to_have_class(re.compile(r"\bstale\b"))
    assert table_numbers(page) != numbers


def test_every_time_figure_of_a_comparison_shares_one_x_range(page):
    """Read from plotly's own layout once drawn: each Gantt and the engine timeline show the same time window."""
    page.goto(page.base + "/?schedulers=fcfs,chunked,slo&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20.0")
    plots = ["plot-gantt-fcfs", "plot-gantt-chunked", "plot-gantt-slo", "plot-timeline"]
    ranges = []
    for plot in plots:
        wait_drawn(page, plot)
        ranges.append(page.locator("#" + plot).evaluate("d => d._fullLayout.xaxis.range"))
    assert ranges[0][0] == 0 and ranges[0][1] > 25
    assert all(r == ranges[0] for r in ranges), ranges
    assert float(page.locator("#plot-kv").get_attribute("data-time")) <= ranges[0][1]
    page.locator("#card-kv").screenshot(path=SHOTS / "13-kv-one-grid.png")
    page.locator("#card-metrics").screenshot(path=SHOTS / "14-metrics-unserved-flag.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#card-metrics").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "14b-metrics-390x844.png")
    page.locator("#plot-gantt-fcfs").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "14c-gantt-390x844.png")


def test_landing_shows_the_takeaway_and_a_kv_view_that_plays_by_itself(page):
    """At 1440x900 the first screen holds the computed takeaway and the KV view, which plays without a click."""
    page.add_init_script("""window.kvTimes = []; new MutationObserver(ms => ms.forEach(m => {
        if (m.target.id === 'plot-kv' && m.attributeName === 'data-time') window.kvTimes.push(m.target.dataset.time);
      })).observe(document, {attributes: true, subtree: true, attributeFilter: ['data-time']});""")
    page.goto(page.base + "/")
    m = {n: e["metrics"] for n, e in page.request.get(page.base + "/api/run?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192"
                                                      "&workload=rag&duration=20").json()["schedulers"].items()}
    expect(page.locator("#takeaway")).to_contain_text(f"chunked cuts P99 ITL from {m['fcfs']['itl_ms']['p99']:,.1f} "
                                                      f"ms (fcfs) to {m['chunked']['itl_ms']['p99']:,.1f} ms")
    page.wait_for_function(DRAWN, arg="plot-kv")
    start = page.locator("[data-kv-frames-for]").evaluate("s => JSON.parse(s.textContent).start")
    page.wait_for_function(f"() => +document.getElementById('plot-kv').dataset.frame === {start}")
    times = page.evaluate("window.kvTimes")
    assert len(set(times)) > 10 and float(times[0]) == 0  # it played from the start, by itself
    assert "t=" not in page.url  # autoplay is not a moment anyone chose to share
    for selector in ("#takeaway", "#plot-kv canvas"):
        box = page.locator(selector).first.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 900, (selector, box)
    page.screenshot(path=SHOTS / "15-landing-1440x900.png")
    page.set_viewport_size({"width": 390, "height": 844})
    wait_until_it_fits(page, "#card-kv")  # the player lays its grids out again: they fit a phone
    card = page.locator("#card-kv")
    card.scroll_into_view_if_needed()
    card.screenshot(path=SHOTS / "16-kv-390x844.png")
    page.locator("#takeaway").scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "17-takeaway-390x844.png")


def test_hovering_links_a_request_in_the_gantt_and_the_kv_view(page):
    page.goto(page.base + "/?t=10")  # a still moment: nothing plays
    wait_drawn(page, "plot-kv")
    wait_drawn(page, "plot-gantt-fcfs")
    page.locator("#card-kv").scroll_into_view_if_needed()
    # A request holding blocks now, and where its first cell is on fcfs's canvas.
    owner, cx, cy = page.evaluate("""() => {
      const spec = JSON.parse(document.querySelector('[data-kv-frames-for]').textContent).schedulers[0];
      const t = +document.getElementById('plot-kv').dataset.time;
      let f = 0; while (f + 1 < spec.frame_s.length && spec.frame_s[f + 1] <= t + 1e-9) f++;
      const runs = spec.runs[f], K = spec.k + 1;
      for (let i = 0, c = 0; i < runs.length; c += runs[i + 1], i += 2) {
        const owner = Math.floor(runs[i] / K) - 1;
        if (owner >= 0) {
          const canvas = document.querySelector('.kv-panel[data-scheduler="fcfs"] canvas'), r = canvas.getBoundingClientRect();
          const cell = r.width / spec.cols;
          return [owner, r.left + (c % spec.cols + 0.5) * cell, r.top + (Math.floor(c / spec.cols) + 0.5) * cell];
        }
      }
    }""")
    page.mouse.move(cx, cy)
    expect(page.locator(".kv-tip")).to_contain_text(f"request #{owner}")
    expect(page.locator("#plot-gantt-fcfs")).to_have_attribute("data-highlight", str(owner))
    band = page.locator("#plot-gantt-fcfs .row-highlight")
    expect(band).to_be_visible()
    row_y = page.locator("#plot-gantt-fcfs").evaluate(
        "(d, id) => d.getBoundingClientRect().top + d._fullLayout.yaxis._offset + d._fullLayout.yaxis.l2p(id)", owner)
    box = band.bounding_box()
    assert box["y"] <= row_y <= box["y"] + box["height"]
    page.locator("#card-kv").screenshot(path=SHOTS / "18-kv-hover.png")
    # And the other way: hovering a Gantt row lights up that request's blocks.
    page.locator("#plot-gantt-fcfs").scroll_into_view_if_needed()
    gx, gy = page.locator("#plot-gantt-fcfs").evaluate("""(d, id) => { const r = d.getBoundingClientRect(),
        xa = d._fullLayout.xaxis, ya = d._fullLayout.yaxis;
        return [r.left + xa._offset + xa._length / 2, r.top + ya._offset + ya.l2p(id)]; }""", owner)
    page.mouse.move(gx, gy)
    expect(page.locator('.kv-panel[data-scheduler="fcfs"]')).to_have_attribute("data-highlight", str(owner))
    page.mouse.move(5, 5)
    expect(page.locator('.kv-panel[data-scheduler="fcfs"]')).not_to_have_attribute("data-highlight", str(owner))
