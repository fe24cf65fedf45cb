"""The energy figures (issue #40: "power" and "energy", app/web/figures/) in a real browser (Debian's chromium through
Playwright), at 1440x900 and 390x844: both draw on the results page of a scenario with energy on, with the numbers
/api/run reports for the same URL (read off the drawn plots, not typed here), the power cap's dashed line drawn at
the cap's height on the power axis, no page scrolling sideways, the figures named and summarised and axe finding no
serious violation (in the dark theme too, at 1440); the 1920x1080 PNG and SVG of each carry its title and the
scenario's caption; each embed fits a 960x540 and a 1920x1080 frame without scrolling, with the same numbers.
Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright")

from browser_support import (  # noqa: E402
    DARK_PAPER,
    DRAWN,
    LOW_CONTRAST_PLOT_TEXT,
    THEME_DRAWN,
    frame_page,
    open_page,
    screenshot_dir,
    wait_until_it_fits,
)
from test_browser_a11y import BLOCKING, FIGURES, axe_summary, run_axe  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
# An H100 capped at 60% of its 700 W board limit (the capping case), light load: the GPUs idle between
# requests, so the power line moves between idle power and the cap; a price and a grid intensity for the cost and
# carbon panels. Static batching against chunked prefill: runs whose power and energy differ (fcfs and chunked run
# alike at this load), so a figure that swapped or merged them would not match.
SCENARIO = ("schedulers=static,chunked&hardware=h100&model=llama-3-8b&workload=chat&num_requests=60&rate=1"
            "&energy=true&power_cap_w=420&energy_price_per_kwh=0.15&grid_gco2_per_kwh=400")
SCHEDULERS = ("static", "chunked")
BAR_KEYS = ("joules_per_output_token", "energy_cost_per_mtok", "gco2_per_1k_requests")  # figures/energy.PANELS
SLIDE_AXIS_PX = 24  # a slide's axis titles: 12 px on a 540 px high figure, so at least 24 px on a 1080 px one

# What a power plot draws, as the browser holds it: each named trace's points, the shapes (reference lines) and,
# for each shape, its height in the page against the height its value has on the power axis.
DRAWN_POWER = """d => {
  const full = d._fullLayout, top = d.getBoundingClientRect().top;
  const paths = [...d.querySelectorAll('.shapelayer path')];
  return {traces: d.data.map(t => ({name: t.name, y: t.y})),
          shapes: full.shapes.map((s, i) => {
            const box = paths.find(p => p.getAttribute('data-index') === String(i)).getBoundingClientRect();
            return {name: s.name, y0: s.y0, y1: s.y1, drawn_px: box.top + box.height / 2 - top,
                    axis_px: full.yaxis._offset + full.yaxis.l2p(s.y0)}; })};
}"""
CAPTURE_EXPORT = """() => { const real = Plotly.downloadImage;
    Plotly.downloadImage = (fig, opts) => { window.exported = {layout: fig.layout, opts: opts}; return real(fig, opts); }; }"""


@pytest.fixture
def page(site):
    context, page = open_page(site, timeout_ms=120_000, accept_downloads=True, bypass_csp=True)
    errors = page.errors
    yield page
    context.close()
    assert errors == [], errors


def api_metrics(page, query: str = SCENARIO) -> tuple[dict, dict]:
    """(scenario, scheduler -> metrics) as /api/run answers for the query."""
    answer = page.request.get(f"{page.base}/api/run?{query}").json()
    return answer["scenario"], {name: s["metrics"] for name, s in answer["schedulers"].items()}


def wait_drawn(page, plot_id: str) -> None:
    page.locator("#" + plot_id).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot_id)


def check_power(drawn: dict, scenario: dict, metrics: dict) -> None:
    """The drawn power plot against the API: each scheduler's line averages to its mean power per GPU (one engine,
    held over the whole run: its buckets are equal), its band peaks at its peak power, which is the cap at most;
    the cap's line is at the cap, in the data and on the screen."""
    traces = {t["name"]: t["y"] for t in drawn["traces"]}
    cap = scenario["power_cap_w"]
    for name in SCHEDULERS:
        energy = metrics[name]["energy"]
        line = traces[name][:-1]  # the last point repeats the last bucket's value at the run's end
        assert sum(line) / len(line) == pytest.approx(energy["avg_power_w_per_gpu"], rel=1e-4), name
        assert max(traces[f"{name} peak"]) == pytest.approx(energy["peak_power_w_per_gpu"], abs=1e-3), name
        assert max(traces[f"{name} peak"]) <= cap
        assert min(line) < cap  # idle between requests: the line is not pinned at the cap
    capped = [s for s in drawn["shapes"] if s["name"].startswith("power cap")]
    assert len(capped) == 1 and capped[0]["y0"] == capped[0]["y1"] == cap, drawn["shapes"]
    for shape in drawn["shapes"]:
        assert shape["drawn_px"] == pytest.approx(shape["axis_px"], abs=1.5), shape


def check_bars(page, plot_id: str, metrics: dict) -> None:
    bars = page.locator("#" + plot_id).evaluate("d => d.data.map(t => ({x: t.x, y: t.y}))")
    assert len(bars) == len(BAR_KEYS)
    for bar, key in zip(bars, BAR_KEYS, strict=True):
        assert bar["x"] == list(SCHEDULERS)
        assert bar["y"] == [metrics[name]["energy"][key] for name in SCHEDULERS], key


def export_1080p(page, card: str, title: str) -> dict:
    """Click the card's PNG button with the 1920x1080 size chosen; what Plotly.downloadImage was handed."""
    page.select_option("[data-export-size]", "1920x1080")
    with page.expect_download():
        page.locator(f'#card-{card} [data-export="png"]').click()
    exported = page.evaluate("window.exported")
    assert (exported["opts"]["width"], exported["opts"]["height"]) == (1920, 1080)
    layout = exported["layout"]
    assert title in layout["title"]["text"]
    footer = next(a["text"] for a in layout["annotations"] if a.get("name") == "export-caption")
    for phrase in ("static, chunked", "llama-3-8b", "H100"):
        assert phrase in footer, (phrase, footer)
    assert layout["yaxis"]["title"]["font"]["size"] >= SLIDE_AXIS_PX
    # the SVG is the same figure, its title and caption written into the file
    with page.expect_download() as info:
        page.locator(f'#card-{card} [data-export="svg"]').click()
    svg = open(info.value.path(), encoding="utf-8").read()
    assert title in svg and "static, chunked" in svg and 'width="1920"' in svg and 'height="1080"' in svg
    return layout


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_the_energy_figures_draw_the_apis_numbers_and_export_for_a_slide(page, width, height):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{page.base}/?{SCENARIO}")
    wait_drawn(page, "plot-energy")
    wait_drawn(page, "plot-power")
    wait_until_it_fits(page)  # nothing reaches past the screen's right edge
    scenario, metrics = api_metrics(page)
    check_power(page.locator("#plot-power").evaluate(DRAWN_POWER), scenario, metrics)
    check_bars(page, "plot-energy", metrics)
    page.locator("#card-power").screenshot(path=SHOTS / f"60-power-{width}x{height}.png")
    page.locator("#card-energy").screenshot(path=SHOTS / f"61-energy-{width}x{height}.png")

    figures = {f["figure"]: f for f in page.evaluate(FIGURES)}
    for name in ("power", "energy"):
        f = figures[name]
        assert f["role"] == "figure" and f["label"] and f["summary"], f
        assert all(trace in f["summary"] for trace in f["names"]), f
    result = run_axe(page)
    assert not [v for v in result["violations"] if v["impact"] in BLOCKING], axe_summary("energy page", result)
    assert page.evaluate(LOW_CONTRAST_PLOT_TEXT) == []

    if width == 1440:  # the dark theme (the system's setting, switched while the page is open): the lines'
        # labels and the bars' values are recoloured to read on the dark paper
        page.emulate_media(color_scheme="dark")
        page.wait_for_function(THEME_DRAWN, arg=DARK_PAPER, polling=100)
        result = run_axe(page, ["color-contrast"])
        assert not [v for v in result["violations"] if v["impact"] in BLOCKING], axe_summary("dark", result)
        assert page.evaluate(LOW_CONTRAST_PLOT_TEXT) == []
        page.locator("#card-power").screenshot(path=SHOTS / "60-power-dark.png")
        page.emulate_media(color_scheme="light")

    page.evaluate(CAPTURE_EXPORT)
    power = export_1080p(page, "power", "Power over time")
    assert any(s["y0"] == scenario["power_cap_w"] for s in power["shapes"])  # the cap's line goes with it
    bars = export_1080p(page, "energy", "Energy per token")
    assert bars["xaxis2"]["domain"][0] > 0  # side by side on a slide, even where the phone stacked them


def embed_frame(page, figure: str, width: int, height: int):
    page.set_viewport_size({"width": width + 20, "height": height + 20})
    query = (SCENARIO + "&caption=1").replace("&", "&amp;")
    frame_page(page, f'<iframe src="{page.base}/embed/{figure}?{query}" width="{width}" height="{height}" '
                     f'style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function(DRAWN, arg=f"plot-{figure}", timeout=90_000)
    wait_until_it_fits(frame, height=True)  # once plotly's responsive resize settles: no scrollbar either way
    return frame


@pytest.mark.parametrize("width, height", [(960, 540), (1920, 1080)])
@pytest.mark.parametrize("figure", ["power", "energy"])
def test_each_energy_embed_fits_its_frame_with_the_apis_numbers(page, figure, width, height):
    frame = embed_frame(page, figure, width, height)
    boxes = frame.evaluate("""() => [...document.querySelectorAll('.plot[data-figure], #embed-caption')]
        .map(e => { const r = e.getBoundingClientRect(); return [e.id, r.left, r.top, r.right, r.bottom]; })""")
    assert [b[0] for b in boxes] == [f"plot-{figure}", "embed-caption"]
    for name, left, top, right, bottom in boxes:
        assert left >= 0 and top >= 0 and right <= width and bottom <= height, (name, left, top, right, bottom)
    scenario, metrics = api_metrics(page)
    if figure == "power":
        check_power(frame.locator("#plot-power").evaluate(DRAWN_POWER), scenario, metrics)
    else:
        check_bars(frame, "plot-energy", metrics)
    if height == 1080:  # its text grows with the frame
        size = frame.locator(f"#plot-{figure}").evaluate("d => d._fullLayout.yaxis.title.font.size")
        assert size >= SLIDE_AXIS_PX, size
    page.screenshot(path=SHOTS / f"62-embed-{figure}-{width}x{height}.png")
