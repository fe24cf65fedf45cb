"""/vs's curve cards (app/web/vs_curves.py, issue #41 item 3): both variants' goodput curves over ONE rate grid, and
both variants' frontiers, each on one plot. The plotted points are each variant's own sweep or frontier as the JSON
API answers it (/api/sweep, /api/frontier with that variant's query); the curves' inputs go in /vs's URL and its
embed; a bad input is a 422 naming its field; Cancel stops both jobs; a card is drawn from one reading of each job.
The browser test (tests/test_browser_variants.py) draws them from the forms."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from app.web.charts import color
from app.web.service import SweepJob
from app.web.templating import templates
from app.web.variant_figures import variants_goodput_figure
from app.web.vs_curves import goodput_status

SIDE = "schedulers=fcfs&hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=chat&duration=5&seeds=2"
SPEC_ON = SIDE + "&spec_method=eagle"
PAIR = urlencode({"a": SIDE, "b": SPEC_ON})
RATES = "rate_min=1&rate_max=4&rate_step=1"
FRONTIER = "frontier_gpus=rtx3050&frontier_isl=64&frontier_osl=16&frontier_max_concurrency=2&frontier_tp=1"
HX = {"HX-Request": "true"}


def done(client, url: str, poll: str) -> str:
    """The card's status once its jobs are done: `url` starts them, `poll` (/vs/goodput or /vs/frontier) is
    polled as the card polls."""
    r = client.get(url, headers=HX)
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 300
    while (m := re.search(rf'hx-get="{poll}/(\w+/\w+)"', r.text)) and time.monotonic() < deadline:
        time.sleep(0.3)
        r = client.get(f"{poll}/{m.group(1)}", headers=HX)
    assert r.status_code == 200 and not m, r.text
    return r.text


def plotted(html: str, plot: str) -> dict:
    return json.loads(re.search(rf'data-figure-for="{plot}">(.*?)</script>', html, re.S).group(1))


def lines(fig: dict, panel: str = "y") -> dict[str, dict]:
    """A figure's named lines (not bands, not the reference line) on one panel's y axis."""
    return {t["name"]: t for t in fig["data"] if t.get("mode") == "lines+markers" and t.get("yaxis", "y") == panel}


def test_both_variants_goodput_curves_are_their_sweeps_on_one_plot(client):
    current = "http://testserver/vs?" + PAIR + "&frontier_gpus=rtx3050"
    r = client.get("/vs/goodput?" + PAIR + "&" + RATES, headers={**HX, "HX-Current-URL": current})
    pushed = dict(parse_qsl(urlsplit(r.headers["HX-Push-Url"]).query))  # the link draws both cards again
    assert pushed["rate_max"] == "4" and pushed["frontier_gpus"] == "rtx3050" and "spec_method=eagle" in pushed["b"]
    fig = plotted(done(client, "/vs/goodput?" + PAIR + "&" + RATES, "/vs/goodput"), "plot-vs-goodput")
    goodput, attainment = lines(fig), lines(fig, "y2")
    assert set(goodput) == set(attainment) == {"A · fcfs", "B · fcfs"}  # one plot, each variant named
    assert goodput["A · fcfs"]["line"]["color"] != goodput["B · fcfs"]["line"]["color"]
    for variant, side in (("A", SIDE), ("B", SPEC_ON)):
        api = client.get("/api/sweep?" + side + "&" + RATES)  # the same sweep: found, not run again
        assert api.status_code == 200, api.text
        points = api.json()["schedulers"]["fcfs"]["points"]
        assert goodput[f"{variant} · fcfs"]["x"] == [p["rate"] for p in points] == [1.0, 2.0, 3.0, 4.0]
        assert goodput[f"{variant} · fcfs"]["y"] == [p["goodput"] for p in points]
        assert attainment[f"{variant} · fcfs"]["y"] == [round(p["slo_attainment"] * 100, 2) for p in points]
        bands = [t for t in fig["data"] if t["name"] == f"{variant} · fcfs 95% band"]
        assert len(bands) == 4 and bands[1]["fill"] == "tonexty"  # its 95% band over the 2 seeds, both panels
    caption = fig["export"]["caption"]
    assert caption.startswith("A: ") and " | B: " in caption and "speculative decoding eagle" in caption
    assert caption.count("means over 2 seeds (0–1)") == 2 and "1–4 req/s" in caption
    embed = client.get("/embed/vs?" + PAIR + "&" + RATES + "&figure=goodput&caption=1&width=960&height=540")
    assert embed.status_code == 200, embed.text
    assert plotted(embed.text, "plot-vs-goodput")["data"] == fig["data"]
    assert "speculative decoding eagle" in embed.text and 'href="/vs?a=' in embed.text


def test_both_variants_frontiers_are_their_frontiers_on_one_plot(client):
    fig = plotted(done(client, "/vs/frontier?" + PAIR + "&" + FRONTIER, "/vs/frontier"), "plot-vs-frontier")
    drawn = lines(fig)
    assert set(drawn) == {"A · rtx3050", "B · rtx3050"}
    for variant, side in (("A", SIDE), ("B", SPEC_ON)):
        api = client.get("/api/frontier?" + side + "&" + FRONTIER)
        assert api.status_code == 200, api.text
        front = api.json()["envelope"]["rtx3050"]
        assert drawn[f"{variant} · rtx3050"]["x"] == [round(p["tokens_per_s_per_user"], 3) for p in front]
        assert drawn[f"{variant} · rtx3050"]["y"] == [round(p["throughput_per_gpu"], 3) for p in front]
    # B tries each configuration with EAGLE as well (the frontier's definition): a different front
    assert drawn["A · rtx3050"]["y"] != drawn["B · rtx3050"]["y"]
    assert " | B: " in fig["export"]["caption"] and "spec" in fig["export"]["caption"].split(" | B: ")[1]


def test_the_vs_page_loads_the_curve_cards_with_its_urls_inputs(client):
    url = "/vs?" + PAIR + "&" + RATES + "&" + FRONTIER
    page = client.get("/vs?" + urlencode({"a": SIDE, "b": SIDE + "&max_seqs=8"}) + "&rate_min=2&rate_max=4"
                      "&rate_step=2&frontier_gpus=rtx3050&frontier_isl=9")
    assert page.status_code == 200 and 'hx-get="/vs/curves?' in page.text
    loader = parse_qsl(urlsplit(re.search(r'hx-get="(/vs/curves\?[^"]+)"', page.text).group(1).replace("&amp;", "&")).query)
    assert ("rate_min", "2") in loader and ("frontier_isl", "9") in loader
    cards = client.get("/vs/curves?" + url.partition("?")[2], headers=HX)
    assert cards.status_code == 200
    assert 'id="vs-rate_max" type="text" inputmode="decimal" value="4"' in cards.text
    assert 'value="rtx3050"' in cards.text and 'id="plot-vs-goodput"' in cards.text  # done above: drawn at once


@pytest.mark.parametrize("query, field", [
    (PAIR + "&rate_min=abc&rate_max=4&rate_step=1", "rate_min"),
    (PAIR + "&rate_min=1&rate_max=4", "rate_step"),
    (PAIR + "&rate_min=1&rate_max=4&rate_step=0", "rate_step"),
    (PAIR + "&frontier_gpus=nope", "frontier_gpus"),
    (PAIR + "&frontier_gpus=rtx3050&frontier_isl=0", "frontier_isl"),
    ("a=" + SIDE.replace("&", "%26") + "&rate_min=1&rate_max=4&rate_step=1", "b"),
    (PAIR + "&c=1&rate_min=1&rate_max=4&rate_step=1", "c"),
    (PAIR + "&b_name=" + "x" * 25 + "&rate_min=1&rate_max=4&rate_step=1", "b_name"),
    (PAIR + "&a_name=same&b_name=same&rate_min=1&rate_max=4&rate_step=1", "b_name"),
])
def test_a_bad_input_is_a_422_naming_its_field(client, query, field):
    card = "/vs/frontier?" if "frontier_" in query else "/vs/goodput?"
    for url in (card + query, "/vs/curves?" + query):
        r = client.get(url, headers=HX)
        assert r.status_code == 422, (url, r.status_code)
        assert re.search(rf"\b{field}: ", r.text), (url, r.text)
    figure = "frontier" if "frontier_" in query else "goodput"
    r = client.get(f"/embed/vs?{query}&figure={figure}")
    assert r.status_code == 422 and f"<code>{field}</code>" in r.text, r.text


def test_cancel_stops_both_sweeps(client):
    r = client.get("/vs/goodput?" + PAIR + "&rate_min=5&rate_max=8&rate_step=1", headers=HX)
    ids = re.search(r'hx-post="/vs/goodput/(\w+)/(\w+)/cancel"', r.text)
    assert ids, r.text
    r = client.post(f"/vs/goodput/{ids.group(1)}/{ids.group(2)}/cancel", headers=HX)
    assert r.status_code == 200 and "data-cancelled" in r.text and "hx-trigger" not in r.text


def test_a_pair_that_ends_while_its_card_renders_still_polls():
    a = SweepJob(id="aaa", request=None, total=4, done=4)
    b = SweepJob(id="bbb", request=None, total=4, done=3)
    a.result = {"rates": [1.0], "schedulers": {}}
    s = goodput_status([a, b])  # read while B runs
    b.result = a.result  # ...and it ends before the template is rendered
    html = templates.get_template("_vs_goodput_status.html").render(request=None, s=s)
    assert 'hx-get="/vs/goodput/aaa/bbb"' in html and "7/8 points simulated" in html


def test_variants_swept_over_different_grids_are_refused():
    sweep = {"rates": [1.0, 2.0], "target_attainment": 0.9, "slo": {}, "schedulers": {}}
    with pytest.raises(ValueError, match="one rate grid"):
        variants_goodput_figure([("A", sweep), ("B", {**sweep, "rates": [1.0, 3.0]})])


def _sweep(schedulers: tuple[str, ...], knee: float) -> dict:
    points = [{"rate": r, "goodput": r, "slo_attainment": 1.0} for r in (1.0, 2.0, 3.0, 4.0)]
    return {"rates": [1.0, 2.0, 3.0, 4.0], "target_attainment": 0.9, "slo": {},
            "schedulers": {s: {"knee_rate": knee, "points": points} for s in schedulers}}


def test_several_schedulers_a_variant_keep_their_colours_and_each_variant_its_dash():
    fig = variants_goodput_figure([("A", _sweep(("fcfs", "chunked"), 3.5)), ("B", _sweep(("fcfs", "chunked"), 1.0))])
    drawn = lines(fig)
    assert [drawn[f"A · {s}"]["line"]["color"] for s in ("fcfs", "chunked")] == [color("fcfs"), color("chunked")]
    assert drawn["B · fcfs"]["line"]["color"] == color("fcfs")
    assert {drawn[f"A · {s}"]["line"]["dash"] for s in ("fcfs", "chunked")} == {"solid"}
    assert {drawn[f"B · {s}"]["line"]["dash"] for s in ("fcfs", "chunked")} == {"dash"}
    one_each = lines(variants_goodput_figure([("A", _sweep(("fcfs",), 1.0)), ("B", _sweep(("fcfs",), 1.0))]))
    assert one_each["A · fcfs"]["line"]["color"] != one_each["B · fcfs"]["line"]["color"]
    # a knee label in the right half reads leftwards: a label past the last rate would stretch the rate axis
    labels = {n["x"]: n["xanchor"] for n in fig["layout"]["annotations"] if "knee" in n["text"]}
    assert labels == {3.5: "right", 1.0: "left"}, labels


def test_named_variants_name_the_curves_and_stay_in_every_link(client):
    named = PAIR + "&" + urlencode({"a_name": "spec off", "b_name": "spec on"})
    r = client.get("/vs/goodput?" + named + "&" + RATES, headers=HX)  # the sweeps drawn above: found, done
    assert "a_name=spec+off" in r.headers["HX-Push-Url"] and "b_name=spec+on" in r.headers["HX-Push-Url"]
    fig = plotted(r.text, "plot-vs-goodput")
    assert set(lines(fig)) == {"spec off · fcfs", "spec on · fcfs"}
    assert fig["export"]["caption"].startswith("spec off: ") and " | spec on: " in fig["export"]["caption"]
    assert fig["export"]["title"] == "Goodput vs arrival rate: spec off vs spec on"
    embed_link = re.search(r'href="(/embed/vs\?[^"]+)"', r.text).group(1).replace("&amp;", "&")
    assert ("b_name", "spec on") in parse_qsl(urlsplit(embed_link).query)
    ids = client.get("/vs/goodput?" + named + "&rate_min=5&rate_max=8&rate_step=1", headers=HX)
    polled = re.search(r'hx-get="(/vs/goodput/\w+/\w+\?[^"]+)"', ids.text)
    assert polled and "b_name=spec+on" in polled.group(1), ids.text  # the poll draws the names too
    cancel = re.search(r'hx-post="(/vs/goodput/\w+/\w+/cancel\?[^"]+)"', ids.text).group(1)
    assert client.post(cancel.replace("&amp;", "&"), headers=HX).status_code == 200
    page = client.get("/vs?" + named)
    assert "<h2>spec off <span" in page.text and 'value="spec on"' in page.text


def test_named_variants_link_to_diff_with_their_runs_alone(client):
    one = "hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&workload=chat&duration=5&schedulers=fcfs"
    page = client.get("/vs?" + urlencode({"a": one, "b": one + "&max_seqs=8", "a_name": "wide", "b_name": "narrow"}))
    assert page.status_code == 200
    href = re.search(r'id="vs-diff-link" href="([^"]+)"', page.text).group(1).replace("&amp;", "&")
    assert "_name" not in href and client.get(href).status_code == 200  # /diff compares the runs, unnamed


@pytest.mark.parametrize("inputs, field", [("rate_min=abc&rate_max=4&rate_step=1", "rate_min"),
                                           ("frontier_gpus=rtx3050&frontier_osl=0", "frontier_osl")])
def test_the_vs_page_with_a_bad_curve_input_is_a_422_naming_it(client, inputs, field):
    r = client.get("/vs?" + PAIR + "&" + inputs)
    assert r.status_code == 422 and f'id="err-{field}"><code>{field}</code>: ' in r.text, r.text[-3000:]
