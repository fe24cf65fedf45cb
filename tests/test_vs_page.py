"""Scenario against scenario (/vs, app/web/vs_page.py): the URL form (round trip, bad input named by side and field,
never a 5xx), the pair's shared axes (share_axes on made-up figures, and on the page's own figures), and the links
between the results page, /vs and /diff."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from app.web import service
from app.web.inputs import MAX_PAGE_SEEDS, MAX_REQUESTS
from app.web.vs_page import MAX_PAIR_REQUESTS, axis_extent, parse_vs, share_axes
from sim_core import SCHEDULER_NAMES, ScenarioError

A = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
B = A.replace("rtx3050", "a100")
ONE = "scheduler=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
FIGURE_JSON = re.compile(r'<script type="application/json" data-figure-for="([^"]+)">(.*?)</script>', re.S)
ERROR = re.compile(r'<p class="field-error" id="err-([^"]+)">(.*?)</p>', re.S)


def vs_url(a: str, b: str, **more: str) -> str:
    return "/vs?" + urlencode({"a": a, "b": b, **more})


def problems(pairs) -> dict[str, str]:
    with pytest.raises(ScenarioError) as e:
        parse_vs(pairs)
    return dict(e.value.problems)


# ----- the URL form -----
def test_the_canonical_query_round_trips():
    vs = parse_vs([("a", A), ("b", B)])
    assert vs.a.schedulers == vs.b.schedulers == ("fcfs", "chunked")
    assert (vs.a.scenario.hardware, vs.b.scenario.hardware) == ("rtx3050", "a100")
    again = parse_vs(parse_qsl(vs.query()))
    assert again == vs and again.query() == vs.query()
    # A side may be a whole dashboard URL; how a page was viewed (t, engine) or swept is not part of it.
    url = parse_vs([("a", "http://host/?" + A + "&t=3.5&engine=r0"), ("b", B)])
    assert url == vs


def test_a_side_given_as_field_changes_is_the_other_side_changed():
    vs = parse_vs([("a", A), ("b.hardware", "a100"), ("b.token_budget", "")])
    assert vs.b == parse_vs([("a", A), ("b", B)]).b
    with_b = parse_vs([("a", A), ("b", A), ("b.replicas", "2")])
    assert with_b.b.scenario.replicas == 2 and with_b.a.scenario.replicas == 1


def test_bad_input_names_the_side_and_the_field():
    got = problems([("a", A.replace("fcfs,", "nope,")), ("b", B.replace("a100", "tpu9"))])
    assert set(got) == {"a", "b"}
    assert got["a"].startswith("schedulers: ") and "nope" in got["a"]
    assert got["b"].startswith("hardware: ") and "tpu9" in got["b"]
    assert problems([("a", A), ("b.token_budget", "lots")])["b"].startswith("token_budget: ")
    assert "give scenario B" in problems([("a", A)])["b"]
    assert "given more than once" in problems([("a", A), ("a", A), ("b", B)])["a"]
    assert "not a parameter here" in problems([("a", A), ("b", B), ("by", "e2el_ms")])["by"]
    assert problems([("a", A), ("b", B + "&seed=1&seed=2")])["b"].startswith("seed: ")


def test_the_pair_is_limited_to_one_pages_work():
    assert MAX_PAIR_REQUESTS == len(SCHEDULER_NAMES) * MAX_PAGE_SEEDS * MAX_REQUESTS
    # The largest page allowed alone, against anything: each side is within the web's limits, the pair is not.
    biggest = (f"schedulers={','.join(SCHEDULER_NAMES)}&hardware=h100&workload=chat&num_requests={MAX_REQUESTS}"
               f"&rate=100&seeds={MAX_PAGE_SEEDS}")
    alone = service.page_request(parse_qsl(biggest))
    assert len(alone.schedulers) * alone.scenario.seeds * alone.scenario.num_requests == MAX_PAIR_REQUESTS
    got = problems([("a", biggest), ("b", ONE)])
    assert list(got) == ["b"] and "at most" in got["b"] and f"{MAX_PAIR_REQUESTS:,}" in got["b"]


@pytest.mark.parametrize("query", [
    "a=&b=", "a=%25&b=%3D%3D", "a=schedulers%3D&b=x", "b.=1&a.=2", "a=" + "x" * 3000 + "&b=1",
    "a=hardware%3Da100%26duration%3D-1&b=hardware%3Da100%26duration%3Dnan", "a.rate=1e400&b.seed=1.5",
    "a=workload%3Dchat%26num_requests%3D99999999&b=" + "%26" * 50,
])
def test_garbage_is_a_422_never_a_5xx(client, query):
    r = client.get("/vs?" + query)
    assert r.status_code == 422, (query, r.status_code)
    assert ERROR.search(r.text)


def test_the_page_names_each_bad_side(client):
    r = client.get(vs_url(A.replace("fcfs,", "nope,"), B.replace("num_requests=30", "num_requests=0")))
    assert r.status_code == 422
    errors = dict(ERROR.findall(r.text))
    assert errors["a"].startswith("schedulers: ") and errors["b"].startswith("num_requests: ")
    assert 'id="vs-a" name="a" rows="3" spellcheck="false" aria-invalid="true"' in r.text


def test_quick_form_changes_redirect_to_the_canonical_url(client):
    r = client.get(vs_url(A, A, **{"b.hardware": "a100", "b.model": ""}), follow_redirects=False)
    assert r.status_code == 303
    target = urlsplit(r.headers["location"])
    assert target.path == "/vs" and target.query == parse_vs([("a", A), ("b", B)]).query()


# ----- shared axes -----
def line(x, y, **extra):
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, **extra}


def test_share_axes_unites_the_ranges_of_each_axis():
    fa = {"data": [line([0, 1, 2], [5, 7, 6])], "layout": {"xaxis": {"range": [0, 2]}, "yaxis": {}}}
    fb = {"data": [line([0, 4], [1, 20])], "layout": {"xaxis": {"range": [0, 4]}, "yaxis": {}}}
    share_axes([fa, fb])
    assert fa["layout"]["xaxis"]["range"] == fb["layout"]["xaxis"]["range"] == [0, 4]
    lo, hi = fa["layout"]["yaxis"]["range"]
    assert fb["layout"]["yaxis"]["range"] == [lo, hi] and lo < 1 and hi > 20
    assert fa["layout"]["yaxis"]["autorange"] is False


def test_share_axes_sums_stacks_and_leaves_categories_and_followers_alone():
    def bars(xs):
        return [{"type": "bar", "orientation": "h", "y": ["fcfs", "chunked"], "x": x} for x in xs]
    fa = {"data": bars([[10, 20], [30, 5]]), "layout": {"barmode": "stack", "xaxis": {"rangemode": "tozero"},
                                                          "yaxis": {"autorange": "reversed"}}}
    fb = {"data": bars([[1, 2], [3, 4]]), "layout": {"barmode": "stack", "xaxis": {"rangemode": "tozero"},
                                                     "yaxis": {"autorange": "reversed"}}}
    assert axis_extent(fa, "xaxis")[0] == 0 and 40 < axis_extent(fa, "xaxis")[1] < 45  # fcfs: 10 + 30
    assert axis_extent(fa, "yaxis") == "category"
    share_axes([fa, fb])
    assert fa["layout"]["xaxis"]["range"] == fb["layout"]["xaxis"]["range"]
    assert "range" not in fa["layout"]["yaxis"] and "range" not in fb["layout"]["yaxis"]
    follow = {"data": [line([0, 1], [0, 1], xaxis="x2")], "layout": {"xaxis2": {"matches": "x"}}}
    other = {"data": [line([0, 9], [0, 1], xaxis="x2")], "layout": {"xaxis2": {"matches": "x"}}}
    share_axes([follow, other])
    assert "range" not in follow["layout"]["xaxis2"]


def test_share_axes_merges_a_log_axis_ticks():
    fa = {"data": [], "layout": {"xaxis": {"type": "log", "range": [0, 1], "tickvals": [1, 2, 5, 10],
                                           "ticktext": ["1", "2", "5", "10"]}}}
    fb = {"data": [], "layout": {"xaxis": {"type": "log", "range": [1, 3], "tickvals": [10, 100, 1000],
                                           "ticktext": ["10", "100", "1,000"]}}}
    share_axes([fa, fb])
    for f in (fa, fb):
        assert f["layout"]["xaxis"]["range"] == [0, 3]
        assert f["layout"]["xaxis"]["tickvals"] == [1, 2, 5, 10, 100, 1000]
        assert f["layout"]["xaxis"]["ticktext"][-1] == "1,000"


def figures_of(html: str) -> dict[str, dict]:
    """The page's plotly figures by their plot's id (the KV players' specs, which are no plotly figures, left out)."""
    figs = {target: json.loads(body) for target, body in FIGURE_JSON.findall(html)}
    return {k: f for k, f in figs.items() if "layout" in f}


KV_FRAMES = re.compile(r'<script type="application/json" data-kv-frames-for="([^"]+)">(.*?)</script>', re.S)


def test_the_pages_figures_share_their_axes_across_the_pair(client):
    r = client.get(vs_url(A, B))
    assert r.status_code == 200
    figs = figures_of(r.text)
    names = sorted({k.split("-", 2)[2] for k in figs})
    # The Gantt too, a pair per scheduler: the same requests' rows on one time axis and one request axis.
    assert {"cdf", "timeline", "attribution", "step-time", "gantt-fcfs", "gantt-chunked"} <= set(names)
    for name in names:
        fa, fb = figs[f"plot-a-{name}"], figs[f"plot-b-{name}"]
        assert fa["data"] != fb["data"], name  # two different scenarios drawn, not one twice
        for key, ax in fa["layout"].items():
            if re.fullmatch(r"[xy]axis\d*", key) and "range" in ax:
                assert fb["layout"][key]["range"] == ax["range"], (name, key)
    # Every numeric axis of the CDF and the timeline is fixed (no autorange left to differ in the browser).
    for name in ("cdf", "timeline"):
        for key, ax in figs[f"plot-a-{name}"]["layout"].items():
            if re.fullmatch(r"[xy]axis\d*", key) and not ax.get("matches"):
                assert "range" in ax, (name, key)
    # The time axis spans the slower side's run: the rtx3050 (A) runs longer than the a100 (B).
    a_end = max(x for t in figs["plot-a-timeline"]["data"] for x in t["x"])
    b_end = max(x for t in figs["plot-b-timeline"]["data"] for x in t["x"])
    assert b_end < a_end <= figs["plot-b-timeline"]["layout"]["xaxis"]["range"][1]
    # The KV players, one a side, on one grid (the same cells a row) and the pair's time.
    frames = {k: json.loads(v) for k, v in KV_FRAMES.findall(r.text)}
    assert set(frames) == {"plot-a-kv", "plot-b-kv"}
    grids = {(e["cols"], f["horizon"]) for f in frames.values() for e in f["schedulers"]}
    assert len(grids) == 1 and all(len(f["schedulers"]) == 2 for f in frames.values())
    # Both sides' numbers: a metrics table each, headed by its schedulers.
    assert r.text.count('class="metrics-grid"') == 2
    assert 'id="vs-changes"' in r.text and "<td>rtx3050</td><td>a100</td>" in r.text
    assert 'id="vs-diff-link"' not in r.text  # two schedulers a side: no one run each to compare by request


# ----- links between the pages -----
def test_results_page_diff_page_and_vs_link_each_other(client):
    home = client.get("/?" + A)
    link = re.search(r'id="vs-open" href="([^"]+)"', home.text).group(1).replace("&amp;", "&")
    pair = parse_vs(parse_qsl(urlsplit(link).query))
    assert pair.a == pair.b and pair.a.query(sweep=False) == re.search(
        r'href="/api/run\?([^"]+)"', home.text).group(1).replace("&amp;", "&")
    one_each = client.get(vs_url(ONE, ONE.replace("fcfs", "chunked")))
    assert one_each.status_code == 200
    diff_href = re.search(r'id="vs-diff-link" href="([^"]+)"', one_each.text).group(1).replace("&amp;", "&")
    assert urlsplit(diff_href).path == "/diff"
    diff = client.get(diff_href)
    assert diff.status_code == 200
    back = re.search(r'id="diff-vs-link" href="([^"]+)"', diff.text).group(1).replace("&amp;", "&")
    assert parse_vs(parse_qsl(urlsplit(back).query)) == parse_vs(parse_qsl(urlsplit(diff_href).query))


SINGLE = "scheduler=chunked&hardware=a100&workload=chat&num_requests=60&rate=20&seed=1"


@pytest.mark.parametrize("a, b", [
    (SINGLE, SINGLE.replace("a100", "h100")),  # A100 vs H100
    (SINGLE + "&token_budget=512", SINGLE + "&token_budget=2048"),
    (SINGLE, SINGLE + "&replicas=4"),  # one engine vs four: B has the replica-load figure, A a timeline
])
def test_the_issues_pairs_draw_on_shared_axes(client, a, b):
    r = client.get(vs_url(a, b))
    assert r.status_code == 200
    figs = figures_of(r.text)
    pairs = [name[len("plot-a-"):] for name in figs if name.startswith("plot-a-") and "plot-b-" + name[7:] in figs]
    assert {"cdf", "attribution", "step-time"} <= set(pairs)
    for name in pairs:
        la, lb = figs["plot-a-" + name]["layout"], figs["plot-b-" + name]["layout"]
        for key in (k for k in la if re.fullmatch(r"[xy]axis\d*", k)):
            assert la[key].get("range") == lb[key].get("range"), (name, key)
    one_sided = {name.split("-", 2)[2] for name in figs} - set(pairs)
    assert r.text.count("Not drawn for scenario") == len(one_sided)
    if "replicas=4" in b:
        assert one_sided == {"replica-load", "timeline"}
    assert 'id="vs-diff-link"' in r.text  # one scheduler a side, over the same requests
