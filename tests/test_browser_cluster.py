"""The cluster view in a real browser (Debian's chromium through Playwright): a replicas=2 page and a disaggregated
1 prefill + 1 decode page draw the cluster figure with one row per engine, its router row and (P/D) its KV
transfers, without console errors, at 1440x900 and on a 390x844 phone. Issue 21: a 4-replica and a 1P+3D page
show the KV view of the engine picked in its list (the busiest first; switching redraws another engine's frames,
kept in the URL), a Gantt that draws every request of a zoomed window with the engines that served each, and a
Perfetto download with a process per engine and request tracks, each checked against sim_core's own run.
Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("playwright")

from browser_support import (  # noqa: E402
    DARK_PAPER,
    DRAWN,
    LIGHT_PAPER,
    LOW_CONTRAST_PLOT_TEXT,
    THEME_DRAWN,
    frame_page,
    open_page,
    screenshot_dir,
    wait_until_it_fits,
)

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
SMALL = "hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=40&seed=3"
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
    assert page.locator("#card-kv").count() == 1  # one engine's KV view, the cluster view under it
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
    if width == 1440 and kind == "pd":  # each row's name, in its engine's colour, reads at 4.5:1 in the light theme, the dark, and
        for scheme, paper in (("light", LIGHT_PAPER), ("dark", DARK_PAPER), ("light", LIGHT_PAPER)):  # back again
            page.emulate_media(color_scheme=scheme)
            page.wait_for_function(THEME_DRAWN, arg=paper, polling=100)
            assert page.evaluate(LOW_CONTRAST_PLOT_TEXT) == [], scheme
    kv = page.locator("#card-kv")  # the KV view of one engine above, its list of engines inside the page
    kv.scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg="plot-kv")
    assert page.locator("[data-kv-engine]").evaluate("s => [...s.options].map(o => o.value)") == names
    box = page.locator("[data-kv-engine]").bounding_box()
    assert 0 <= box["x"] and box["x"] + box["width"] <= width
    kv.screenshot(path=SHOTS / f"46-cluster-kv-card-{kind}-{width}x{height}.png")
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
    frame_page(page, f'<iframe src="{page.base}/embed/kv?{query.replace("&", "&amp;")}" width="960" height="540" '
                     'style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function("() => [...document.querySelectorAll('[data-figure=cluster]')]"
                            ".every(d => d.dataset.drawn === '1')", timeout=90_000)
    wait_until_it_fits(frame, height=True)  # no scrollbar, once plotly's responsive resize settles
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


# ----- issue 21: the KV view, the Gantt and the Perfetto trace of a cluster -----
BIG = "schedulers=fcfs&hardware=a100&workload=chat&duration=30&seed=2"
CLUSTERS = {
    "replicas": (BIG + "&rate=30&replicas=4", [f"replica {e}" for e in range(4)], "replica 0"),
    "pd": (BIG + "&rate=20&prefill_replicas=1&decode_replicas=3", ["prefill 0", "decode 0", "decode 1", "decode 2"],
           "decode 1"),
}
# The KV panel of the page: its engine, the instant of the frame painted, the blocks requests hold in it, and how
# many of its grid's cells are painted in another colour than a free cell's (read from the canvas).
PANEL = """([cols, cells, free]) => {
  const panel = document.querySelector('#plot-kv .kv-panel'), canvas = panel.querySelector('canvas');
  const ctx = canvas.getContext('2d'), scale = canvas.width / cols, hex = free.toLowerCase();
  let painted = 0;
  for (let c = 0; c < cells; c++) {
    const px = ctx.getImageData(Math.floor((c % cols + 0.4) * scale), Math.floor((Math.floor(c / cols) + 0.4) * scale), 1, 1).data;
    if ('#' + [px[0], px[1], px[2]].map(v => v.toString(16).padStart(2, '0')).join('') !== hex) painted++;
  }
  return {engine: panel.dataset.engine, t: +panel.dataset.frameTime, used: +panel.dataset.used, painted};
}"""


def core_run(query: str):
    """sim_core's own run of the page's scenario (its one scheduler), recording what the web records."""
    from urllib.parse import parse_qsl

    from app.web import run_budget
    from app.web.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict
    from sim_core import resolve, run

    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS, default_schedulers=PAGE_SCHEDULERS)
    s = req.for_scheduler(req.schedulers[0])
    return run(s, record_events=True, kv_frames=run_budget.recorded_frames_for(resolve(s)))


def frame_facts(spec: dict, frames: dict, t: float) -> tuple[int, int]:
    """(blocks held, cells not painted free) of the frame shown at instant t, from the KV view's data."""
    s = frames["schedulers"][0]
    f = max(i for i, x in enumerate(s["frame_s"]) if x <= t + 1e-9) if s["frame_s"][0] <= t else 0
    k, runs = s["k"], s["runs"][f]
    owners = [code // (k + 1) - 1 for code, n in zip(runs[0::2], runs[1::2], strict=True) for _ in range(n)]
    states = [st for st, n in zip(s["states"][f][0::2], s["states"][f][1::2], strict=True) for _ in range(n)]
    used = sum((code % (k + 1)) * n for code, n in zip(runs[0::2], runs[1::2], strict=True))
    return used, sum(o >= 0 or st in (2, 3) for o, st in zip(owners, states, strict=True))


def core_used(res, name: str, t: float) -> int:
    """Blocks requests hold in sim_core's own snapshot of engine `name` at instant t."""
    import numpy as np

    log = next(log for log in res.engine_logs if log.name == name)
    row = int(np.argmin(np.abs(log.kv_frame_s - t)))
    assert abs(log.kv_frame_s[row] - t) < 1e-4
    return int((log.kv_frames[row] >= 0).sum())


def scrub(page, frame: int) -> None:
    """Drag the player's slider to `frame` (its input, then its change on release)."""
    page.locator("[data-scrub]").evaluate("""(s, j) => { s.value = String(j);
        s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true})); }""",
                                          frame)


def check_panel(page, name: str, spec: dict, frames: dict, res) -> dict:
    free = next(s for s in spec["states"] if s["key"] == "free")["colors"][0]
    cells = frames["schedulers"][0]["cells"]
    panel = page.evaluate(PANEL, [spec["grid"]["cols"], cells, free])
    assert panel["engine"] == name
    used, painted = frame_facts(spec, frames, panel["t"])
    assert panel["used"] == used == core_used(res, name, panel["t"]), (name, panel, used)
    assert panel["painted"] == painted, (name, panel, painted)
    return panel


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_a_clusters_kv_view_draws_the_picked_engine_and_switches_to_another(site, kind):
    import json
    from urllib.parse import quote

    import numpy as np

    query, names, other = CLUSTERS[kind]
    res = core_run(query)
    busiest = names[int(np.argmax([row["served_tokens"] for row in res.metrics["replicas"]]))]
    context, page = cluster_page(site, 1440, 900)
    page.goto(page.base + "/?" + query + "&t=12")
    page.locator("#plot-kv").scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg="plot-kv")
    select = page.locator("[data-kv-engine]")
    assert select.evaluate("s => [...s.options].map(o => o.value)") == names
    assert select.input_value() == busiest != other
    spec = json.loads(page.locator('script[data-figure-for="plot-kv"]').text_content())
    assert ("held" in [s["key"] for s in spec["states"]]) == (kind == "pd")  # a prefill engine's handed-over KV
    frames = json.loads(page.locator("script[data-kv-frames-for]").text_content())
    first = check_panel(page, busiest, spec, frames, res)
    assert first["painted"] > 0 and abs(first["t"] - 12) < 1.5
    page.locator("#card-kv").screenshot(path=SHOTS / f"43-cluster-kv-{kind}-{busiest.replace(' ', '')}.png")
    # Another engine: its frames, at the same moment, and the choice in the URL.
    select.select_option(other)
    page.wait_for_function("n => { const d = document.getElementById('plot-kv');"
                           " return d.dataset.engine === n && !d.dataset.engineLoading; }", arg=other)
    answer = page.request.get(page.base + "/kv/engine?" + query + "&engine=" + quote(other)).json()
    second = check_panel(page, other, answer["kv"], answer["frames"], res)
    assert second["painted"] > 0 and abs(second["t"] - 12) < 1.5 and second["used"] != first["used"]
    assert "engine=" + quote(other) in page.url
    page.locator("#card-kv").screenshot(path=SHOTS / f"44-cluster-kv-{kind}-{other.replace(' ', '')}.png")
    # Seeking and playing work on the engine picked.
    scrub(page, 5)
    assert page.locator("#plot-kv").get_attribute("data-frame") == "5"
    check_panel(page, other, answer["kv"], answer["frames"], res)
    page.locator("[data-play]").click()
    page.wait_for_function("() => +document.getElementById('plot-kv').dataset.frame > 8")
    page.locator("[data-play]").click()
    check_panel(page, other, answer["kv"], answer["frames"], res)
    # A shared link reopens that engine's pool at that moment.
    scrub(page, 40)
    shared = page.url
    assert "t=" in shared
    fresh = context.new_page()
    fresh.on("pageerror", lambda e: page.errors.append(str(e)))
    fresh.goto(shared)
    fresh.locator("#plot-kv").scroll_into_view_if_needed()
    fresh.wait_for_function(DRAWN, arg="plot-kv")
    assert fresh.locator("[data-kv-engine]").input_value() == other
    assert fresh.locator("#plot-kv").get_attribute("data-engine") == other
    assert fresh.locator("#plot-kv").get_attribute("data-frame") == "40"
    check_panel(fresh, other, answer["kv"], answer["frames"], res)
    context.close()
    assert page.errors == [], page.errors


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


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_a_clusters_gantt_zooms_to_every_request_in_a_window_naming_their_engines(site, kind):
    import re

    from playwright.sync_api import expect

    from sim_core import timeline
    from sim_core.views import request_engines

    query = CLUSTERS[kind][0]
    res = core_run(query)
    context, page = cluster_page(site, 1440, 900)
    page.goto(page.base + "/?" + query + "&t=12")
    plot = "plot-gantt-fcfs"
    page.locator("#" + plot).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=plot)
    gantt = page.locator("#" + plot)
    total, shown = int(gantt.get_attribute("data-total")), int(gantt.get_attribute("data-rows"))
    assert total == len(res.requests) > shown  # a sample, until zoomed
    _zoom_by_drag(page, plot, 10.0, 14.0)
    expect(gantt).to_have_attribute("data-window", re.compile(r"^\d"))
    t0, t1 = (float(x) for x in gantt.get_attribute("data-window").split(","))
    assert 9 < t0 < 11 and 13 < t1 < 15, (t0, t1)
    drawn = set(gantt.evaluate("d => [...new Set(d.data.flatMap(t => t.y.filter(y => y !== null)))]"))
    expected = {r for r, _, a, b in timeline.request_segments(res) if a <= t1 and b >= t0}
    assert drawn == expected and len(expected) > shown / 2
    assert int(gantt.get_attribute("data-rows")) == len(expected)
    # Hovering a request's row says which engine(s) served it, as sim_core's run says.
    named = request_engines(res)
    rid, start, end = gantt.evaluate("""(d, w) => { const t = d.data.find(t => t.name === 'decode');
        for (let i = 0; i < t.x.length; i += 3) if (t.x[i] >= w[0] && t.x[i + 1] <= w[1] && t.x[i + 1] - t.x[i] > 0.2)
            return [t.y[i], t.x[i], t.x[i + 1]]; }""", [t0, t1])
    x, y = gantt.evaluate("""(d, a) => { const r = d.getBoundingClientRect(), xa = d._fullLayout.xaxis,
        ya = d._fullLayout.yaxis; return [r.left + xa._offset + xa.l2p((a[1] + a[2]) / 2), r.top + ya._offset + ya.l2p(a[0])]; }""",
                          [rid, start, end])
    page.mouse.move(x, y)
    label = page.locator(f"#{plot} .hoverlayer")
    expect(label).to_contain_text("served by")
    # Rows are a pixel or two apart: the label names the request under the pointer, that one or a neighbour.
    hovered = int(re.search(r"request #(\d+) · decode", label.text_content()).group(1))
    assert abs(hovered - rid) <= 3
    expect(label).to_contain_text(f"served by {named[hovered]}")
    assert (" → decode " in named[hovered]) == (kind == "pd")
    page.locator("#card-gantt-fcfs").screenshot(path=SHOTS / f"45-cluster-gantt-zoomed-{kind}.png")
    context.close()
    assert page.errors == [], page.errors


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_a_clusters_perfetto_download_has_a_process_per_engine_and_request_tracks(site, kind):
    import json

    from sim_core import timeline
    from sim_core.trace_export import ENGINE_PID_BASE, REQUEST_TID_BASE, REQUESTS_PID

    query, names, _ = CLUSTERS[kind]
    res = core_run(query)
    context, page = open_page(site, 1440, 900, timeout_ms=60_000, accept_downloads=True)
    page.goto(page.base + "/?" + query + "&t=12")
    page.locator("#card-gantt-fcfs").scroll_into_view_if_needed()
    with page.expect_download() as info:
        page.locator("#card-gantt-fcfs .tool", has_text="Perfetto").click()
    assert info.value.suggested_filename == "sched-sim-fcfs.trace.json"
    trace = json.loads(Path(info.value.path()).read_text(encoding="utf-8"))
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {REQUESTS_PID: "requests"} | {ENGINE_PID_BASE + e: n for e, n in enumerate(names)}
    for e, log in enumerate(res.engine_logs):  # each engine's steps in its own process
        assert sum(x["pid"] == ENGINE_PID_BASE + e and x.get("cat") == "step" for x in events) == len(log.steps)
    tracks = {x["tid"] - REQUEST_TID_BASE for x in events if x.get("name") == "thread_name"
              and x["pid"] == REQUESTS_PID}
    assert tracks == set(range(len(res.requests)))
    slices = sum(x["pid"] == REQUESTS_PID and x.get("cat") == "request" and x["ph"] == "X" for x in events)
    assert slices == len(timeline.request_segments(res))
    if kind == "pd":
        assert sum(x.get("cat") == "kv" and x["ph"] == "X" and x["name"].startswith("KV req") for x in events) == int(
            (res.handover.to_decode >= 0).sum())
    context.close()
    assert page.errors == [], page.errors
