"""Cluster over time in a real browser (Debian's chromium through Playwright), issue #24 item 5: /cluster-time with
two autoscalers draws the offered load, each one's replicas by state, the queue and the SLO attainment per window
on one time axis (a zoom of one row moves every row), the utilization run's equal to sim_core's own; its CSV has
the same numbers; its link round-trips to the same figure and its form changes it; its embed draws the figure
alone in a 960x540 frame; at 1440x900, then 390x844, nothing overflows the page. One page visit after another in
one test: the runs simulate once. Screenshots go to test-output/screenshots/."""

from __future__ import annotations

import csv
import io
import json

import pytest

pytest.importorskip("playwright")

from browser_support import DRAWN, open_page, screenshot_dir  # noqa: E402
from test_cluster_time import SCENARIO, scenario  # noqa: E402

from sim_core import run  # noqa: E402

pytestmark = pytest.mark.browser
SHOTS = screenshot_dir()
POLICIES = ("utilization", "predictive")
URL = "/cluster-time?" + SCENARIO + "&autoscalers=" + ",".join(POLICIES)
PLOT = "plot-cluster-time"
# The drawn figure's rows top to bottom (y axes: title, top, height), each row's x range, and its traces (name,
# the y axis they are on, their y values).
ROWS = """d => { const L = d._fullLayout, ys = Object.keys(L).filter(k => /^yaxis\\d*$/.test(k));
    return {rows: ys.map(k => ({axis: k, title: L[k].title.text, top: L[k]._offset, height: L[k]._length}))
                    .sort((a, b) => a.top - b.top),
            ranges: Object.keys(L).filter(k => /^xaxis\\d*$/.test(k)).map(k => L[k].range.map(Number)),
            traces: d.data.map(t => ({name: t.name, type: t.type, y: t.y, yaxis: t.yaxis || 'y'}))}; }"""


def drawn(page) -> dict:
    page.locator("#" + PLOT).scroll_into_view_if_needed()
    page.wait_for_function(DRAWN, arg=PLOT)
    return page.locator("#" + PLOT).evaluate(ROWS)


def figure_json(page) -> dict:
    return json.loads(page.locator(f'script[data-figure-for="{PLOT}"]').text_content())


def check_rows(fig: dict) -> dict[str, str]:
    """The rows in order, apart, on one x range; {row title: its y axis ref}."""
    titles = [r["title"].replace("<br>", " ") for r in fig["rows"]]  # a long one on two lines
    assert titles == ["offered (req/s)", *POLICIES, "waiting (req)", "SLO met (%)"], titles
    rows = fig["rows"]
    assert all(r["height"] > 20 for r in rows)
    assert all(a["top"] + a["height"] <= b["top"] for a, b in zip(rows, rows[1:], strict=False))
    assert all(r == fig["ranges"][0] for r in fig["ranges"]), fig["ranges"]  # one time axis
    return {r["title"].replace("<br>", " "): "y" + r["axis"][5:] for r in rows}


def test_two_autoscalers_on_one_time_axis_at_1440_and_on_a_phone(site):
    context, page = open_page(site, 1440, 900, timeout_ms=90_000)
    assert page.goto(page.base + URL).status == 200
    fig = drawn(page)
    axis = check_rows(fig)
    on = {(t["name"], t["yaxis"]): t for t in fig["traces"]}
    assert on[("arrivals (offered)", axis["offered (req/s)"])]["type"] == "bar"
    assert ("rate schedule", axis["offered (req/s)"]) in on
    res = run(scenario(SCENARIO + "&autoscaler=utilization"))
    for state in ("provisioning", "serving", "draining"):  # replicas by state, stacked, as the run had them
        assert on[(state, axis["utilization"])]["y"] == [round(v, 3) for v in res.metrics["replicas_over_time"][state]]
    met = [None if a is None else round(a * 100, 2) for a in res.metrics["slo_attainment_by_window"]["attainment"]]
    assert on[("utilization", axis["SLO met (%)"])]["y"][1:-1] == met
    for policy in POLICIES:
        assert (policy, axis["waiting (req)"]) in on and (policy, axis["SLO met (%)"]) in on
        assert sum(on[("serving", axis[policy])]["y"]) > 0
    assert max(on[("provisioning", axis["utilization"])]["y"]) > 0  # the step was followed
    # One time axis: zooming the top row moves every row.
    page.locator("#" + PLOT).evaluate("d => Plotly.relayout(d, {'xaxis.range': [60, 180]})")
    zoomed = page.locator("#" + PLOT).evaluate(ROWS)["ranges"]
    assert all(r == [60, 180] for r in zoomed), zoomed
    page.locator("#card-cluster-time").screenshot(path=SHOTS / "70-cluster-time-1440.png")
    first = figure_json(page)
    # Its numbers as CSV: a row per run and window, the figure's.
    answer = page.request.get(page.base + page.locator("#cluster-time-csv").get_attribute("href"))
    assert answer.status == 200 and "attachment" in answer.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(answer.text())))
    windows = len(res.metrics["replicas_over_time"]["start_s"])
    assert [r["run"] for r in rows] == [p for p in POLICIES for _ in range(windows)]
    assert [float(r["serving"]) for r in rows[:windows]] == pytest.approx(on[("serving", axis["utilization"])]["y"],
                                                                          abs=1e-3)
    embed = page.locator("#card-cluster-time a.tool", has_text="Embed").get_attribute("href")
    # Its link round-trips; its form changes it (one policy unticked).
    link = page.locator("#ct-permalink").get_attribute("href")
    assert link != URL and "autoscalers=utilization,predictive" in link  # the canonical query, not the one typed
    with page.expect_navigation():
        page.locator("#ct-permalink").click()
    assert page.url == page.base + link and figure_json(page) == first
    page.locator("#ct-edit > summary").click()
    page.locator("#ct-form label.chip", has_text="predictive").click()
    assert not page.locator("input[name=autoscalers][value=predictive]").is_checked()
    with page.expect_navigation():
        page.locator("#ct-submit").click()
    assert "autoscalers=utilization" in page.url and "predictive" not in page.url
    assert [r["title"] for r in drawn(page)["rows"]][1:3] == ["utilization", "waiting<br>(req)"]
    # Its embed: the figure alone, inside a 960x540 frame.
    page.set_content(f'<iframe src="{page.base}{embed.replace("&", "&amp;")}&amp;caption=1" width="960" '
                     'height="540" style="border: 0"></iframe>')
    frame = page.main_frame.child_frames[0]
    frame.wait_for_function(DRAWN, arg=PLOT, timeout=60_000)
    assert [r["title"] for r in frame.locator("#" + PLOT).evaluate(ROWS)["rows"]][1:3] == list(POLICIES)
    box = frame.locator("#" + PLOT).bounding_box()
    assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= 960 and box["y"] + box["height"] <= 540
    assert "utilization, predictive" in frame.locator("#embed-caption").inner_text()
    page.screenshot(path=SHOTS / "71-embed-cluster-time-960x540.png")
    # On a 390x844 phone: every row, nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.goto(page.base + URL).status == 200
    check_rows(drawn(page))
    sizes = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert sizes[0] <= sizes[1], sizes
    box = page.locator("#" + PLOT).bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.screenshot(path=SHOTS / "72-cluster-time-390.png", full_page=True)
    context.close()
    assert page.errors == [], page.errors
