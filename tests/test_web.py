"""The pages: full page vs htmx fragment from one URL (with Vary), canonical shareable URLs, inline errors next to
their fields, escaping of everything user-supplied, embeds, trace uploads and goodput sweeps."""

from __future__ import annotations

import html as html_module
import json
import math
import re
import time

import pytest
from fastapi.testclient import TestClient

from app.web import app
from app.web.present import unserved_share
from sim_core import Scenario

HX = {"HX-Request": "true"}
SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
FIGURE_JSON = re.compile(r'<script type="application/json" (data-[a-z-]+)="([^"]+)">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)  # warm-up runs in the background
        yield c


def figure_blobs(html: str) -> dict[str, object]:
    """Every JSON blob embedded for plotly; parsing is strict (no NaN/Infinity, which JSON.parse rejects)."""
    def strict(token):
        raise ValueError(f"non-JSON number {token}")

    return {f"{kind}:{target}": json.loads(body, parse_constant=strict)
            for kind, target, body in FIGURE_JSON.findall(html)}


def test_default_page_is_seed_004(client):
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["vary"].startswith("HX-Request")
    html = r.text
    assert html.startswith("<!doctype html>")
    for needle in ("rtx3050", "rag workload", "fcfs", "chunked", 'id="scenario-form"', "/static/vendor/htmx.min.js",
                   "/static/vendor/plotly.min.js"):
        assert needle in html
    assert not re.search(r"""src=["']https?://""", html), "no script may come from a CDN"
    blobs = figure_blobs(html)
    assert {"data-figure-for:plot-cdf", "data-figure-for:plot-kv", "data-kv-frames-for:plot-kv",
            "data-figure-for:plot-timeline", "data-figure-for:plot-gantt-fcfs",
            "data-figure-for:plot-gantt-chunked"} <= set(blobs)


def test_fragment_and_full_page_from_one_url(client):
    full = client.get("/?" + SMALL)
    frag = client.get("/?" + SMALL, headers=HX)
    assert full.status_code == frag.status_code == 200
    assert "<html" in full.text and "<html" not in frag.text
    assert 'id="scenario-form"' in frag.text and 'id="card-metrics"' in frag.text
    assert frag.headers["vary"].startswith("HX-Request") and full.headers["vary"].startswith("HX-Request")
    # Scenario fields in declaration order: max_model_len (not at the model's context) after the seed.
    assert frag.headers["hx-push-url"] == "/?schedulers=fcfs,chunked&hardware=rtx3050&workload=chat&duration=20.0" \
                                          "&num_requests=30&seed=5&max_model_len=8192"
    restore = client.get("/?" + SMALL, headers={**HX, "HX-History-Restore-Request": "true"})
    assert "<html" in restore.text


def test_pushed_url_renders_the_same_numbers(client):
    messy = ("/?schedulers=fcfs&schedulers=chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
             "&rate=&model=&tp=")
    pushed = client.get(messy, headers=HX).headers["hx-push-url"]
    a = figure_blobs(client.get(messy).text)
    b = figure_blobs(client.get(pushed).text)
    assert a == b
    table = re.compile(r'<td class="num[^"]*">([^<]*)</td>')
    assert table.findall(client.get(messy).text) == table.findall(client.get(pushed).text)


def test_no_query_equals_the_explicit_default(client):
    pushed = client.get("/", headers=HX).headers["hx-push-url"]
    # The page's own deployment keeps the seed's 8,192-token max_model_len (page_scenario.SEED_SETTINGS), and its
    # URL says so: a URL naming the GPU takes the model's context otherwise.
    assert pushed == "/?schedulers=fcfs,chunked&hardware=rtx3050&workload=rag&duration=20.0&max_model_len=8192"
    assert figure_blobs(client.get("/").text) == figure_blobs(client.get(pushed).text)


def test_inline_error_next_to_the_field(client):
    r = client.get("/?hardware=rtx3050&max_model_len=8192&model=llama-3-70b")
    assert r.status_code == 422
    html = r.text
    field = html[html.index('id="f-model"'):]
    err = field[:field.index("</div>")]
    assert 'id="err-model"' in err and "llama-3-70b needs" in err and "rtx3050 has 8 GB" in err
    assert 'id="scenario-form"' in html and 'aria-invalid="true"' in html
    frag = client.get("/?tp=12&rate=-1", headers=HX)
    assert frag.status_code == 422 and "hx-push-url" not in frag.headers
    assert 'id="err-tp"' in frag.text and 'id="err-rate"' in frag.text
    assert "between 1 and 8" in frag.text


def test_web_limits_inline(client):
    html = client.get("/?rate=100&duration=600").text
    assert 'id="err-rate"' in html and "20,000" in html
    html = client.get("/?trace=/etc/passwd").text
    assert 'id="err-trace"' in html and "cannot be given over the web" in html
    assert "root:" not in html


@pytest.mark.parametrize("query", [
    "workload=%3Cscript%3Ealert(1)%3C/script%3E",
    "schedulers=%3Cscript%3Ealert(1)%3C/script%3E",
    "%3Cscript%3Ealert(1)%3C/script%3E=1",
    "rate=%3Cscript%3Ealert(1)%3C/script%3E",
    "model=%22%3E%3Cscript%3Ealert(1)%3C/script%3E",
])
def test_user_input_is_escaped(client, query):
    for path in ("/", "/embed/cdf"):
        r = client.get(path + "?" + query)
        assert r.status_code == 422
        assert "<script>alert(1)" not in r.text
        assert "&lt;script&gt;alert(1)" in r.text or "\\u003cscript\\u003e" in r.text


def test_uploaded_file_name_is_escaped(client):
    r = client.post("/upload", headers=HX,
                    files={"trace": ("<script>alert(1)</script>.csv", "arrival_s,prompt_tokens,output_tokens\n0,5,5\n",
                                     "text/csv")})
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text and "&lt;script&gt;" in r.text


def test_upload_then_replay(client):
    csv = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{k * 0.2:.1f},{50 + k},{10 + k}\n" for k in range(30))
    r = client.post("/upload", headers=HX, files={"trace": ("mine.csv", csv, "text/csv")})
    assert r.status_code == 200 and r.headers["hx-trigger-after-settle"] == "trace-uploaded"
    upload_id = re.search(r'name="upload" value="([0-9a-f]+)"', r.text).group(1)
    page = client.get(f"/?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&upload={upload_id}", headers=HX)
    assert page.status_code == 200
    assert f"upload={upload_id}" in page.headers["hx-push-url"]
    assert "Replaying <strong>mine.csv</strong>: 30 requests" in page.text
    # Goodput-vs-rate curves replay the trace at other rates (its own is 5 req/s: 29 gaps of 0.2 s): the form
    # proposes a range around it, starting where its 30 arrivals still fit the web's 600 s.
    assert "need a workload preset" not in page.text
    assert re.search(r'name="rate_max"[^>]*value="10"', page.text), page.text[page.text.find("rate_max") - 300:][:600]
    plain = client.post("/upload", files={"trace": ("mine.csv", csv, "text/csv")}, follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == f"/?upload={upload_id}"


def test_an_upload_posted_with_every_scenario_field_is_read(client):
    """The dashboard's form posts every field it holds beside the file (htmx includes the enclosing form): a body
    with one field per scenario field, and each scheduler its own, is read, not refused as too many fields."""
    csv = "arrival_s,prompt_tokens,output_tokens\n0,5,5\n1,6,6\n"
    fields = {name: "" for name in Scenario.model_fields} | {"schedulers": ["fcfs", "chunked", "sjf"]}
    r = client.post("/upload", headers=HX, data=fields, files={"trace": ("mine.csv", csv, "text/csv")})
    assert r.status_code == 200 and "Replaying <strong>mine.csv</strong>" in r.text, r.text[:300]


def test_bad_uploads_inline(client):
    r = client.post("/upload", headers=HX, files={"trace": ("t.csv", "a,b\n1,2\n", "text/csv")})
    assert r.status_code == 422 and 'class="field-error"' in r.text and "lacks column" in r.text
    big = b"x" * (5 * 1024 * 1024 + 1)
    r = client.post("/upload", headers=HX, files={"trace": ("big.csv", big, "text/csv")})
    assert r.status_code == 422 and "5 MB" in r.text
    r = client.get("/?upload=00000000deadbeef")
    assert r.status_code == 422 and 'id="err-upload"' in r.text


@pytest.mark.parametrize("figure, needle", [
    ("metrics", 'id="card-metrics"'), ("cdf", 'data-figure-for="plot-cdf"'),
    ("timeline", 'data-figure-for="plot-timeline"'), ("kv", 'data-kv-frames-for="plot-kv"'),
    ("gantt", 'data-figure-for="plot-gantt-chunked"'), ("goodput", 'id="goodput-status"'),
])
def test_embeds(client, figure, needle):
    r = client.get(f"/embed/{figure}?{SMALL}")
    assert r.status_code == 200 and needle in r.text
    assert 'id="scenario-form"' not in r.text and "<html" in r.text
    figure_blobs(r.text)


def test_embed_errors(client):
    assert client.get("/embed/pie?" + SMALL).status_code == 404
    r = client.get("/embed/cdf?tp=12")
    assert r.status_code == 422 and "between 1 and 8" in r.text


def test_embed_options_pick_a_panel_caption_and_bare_chrome(client):
    r = client.get(f"/embed/gantt?{SMALL}&scheduler=chunked&caption=1&chrome=0&width=960&height=540")
    assert r.status_code == 200, r.text
    blobs = figure_blobs(r.text)
    assert "data-figure-for:plot-gantt-chunked" in blobs and "data-figure-for:plot-gantt-fcfs" not in blobs
    assert 'class="embed bare"' in r.text and "width: 960px; height: 540px;" in r.text
    caption = re.search(r'id="embed-caption">([^<]*)<', r.text).group(1)
    assert caption.startswith("chunked · ") and "chat workload, 30 requests, seed 5" in caption
    # One panel of a comparison keeps the comparison's time axis.
    both = figure_blobs(client.get(f"/embed/gantt?{SMALL}").text)
    assert (blobs["data-figure-for:plot-gantt-chunked"]["layout"]["xaxis"]["range"]
            == both["data-figure-for:plot-gantt-fcfs"]["layout"]["xaxis"]["range"])
    kv = figure_blobs(client.get(f"/embed/kv?{SMALL}&scheduler=fcfs&caption=My+slide").text)
    assert [s["name"] for s in kv["data-kv-frames-for:plot-kv"]["schedulers"]] == ["fcfs"]
    assert 'class="embed"' in client.get(f"/embed/cdf?{SMALL}&caption=My+slide").text
    assert ">My slide</p>" in client.get(f"/embed/cdf?{SMALL}&caption=My+slide").text
    goodput = client.get(f"/embed/goodput?{SMALL}&scheduler=chunked&rate_min=2&rate_max=6&rate_step=2")
    assert goodput.status_code == 200 and "schedulers=chunked&" in goodput.text
    # Alone, `scheduler` is the one scheduler simulated.
    alone = figure_blobs(client.get("/embed/gantt?scheduler=spf&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30").text)
    assert list(alone) == ["data-figure-for:plot-gantt-spf"]


@pytest.mark.parametrize("options, field, needle", [
    ("width=100", "width", "between 240 and 3840 pixels (got 100)"),
    ("height=5000", "height", "between 160 and 2160 pixels (got 5000)"),
    ("width=wide", "width", "whole number of pixels between 240 and 3840"),
    ("chrome=no", "chrome", "must be 0"),
    ("caption=" + "x" * 201, "caption", "at most 200 characters"),
    ("scheduler=spf", "scheduler", "one of the compared schedulers, fcfs, chunked"),
])
def test_embed_options_out_of_range_are_422_naming_the_field(client, options, field, needle):
    r = client.get(f"/embed/cdf?{SMALL}&{options}")
    assert r.status_code == 422
    assert f"<code>{field}</code>: " in r.text and needle in r.text


def test_goodput_sweep_polls_until_drawn(client):
    q = SMALL + "&rate_min=2&rate_max=6&rate_step=2"
    r = client.get("/goodput?" + q, headers=HX)
    assert r.status_code == 200 and r.headers["vary"].startswith("HX-Request")
    assert "rate_min=2" in r.headers["hx-push-url"]
    deadline = time.monotonic() + 60
    while 'hx-trigger="every 500ms"' in r.text:
        assert time.monotonic() < deadline
        job = re.search(r'hx-get="(/goodput/[0-9a-f]+)"', r.text).group(1)
        assert re.search(r"\d+/6 points", r.text)
        time.sleep(0.2)
        r = client.get(job, headers=HX)
    blobs = figure_blobs(r.text)
    fig = blobs["data-figure-for:plot-goodput"]
    assert {t["name"] for t in fig["data"]} >= {"fcfs", "chunked"}
    assert "knee" in r.text
    # The pushed URL, loaded cold, shows the finished curves.
    page = client.get("/?" + q)
    assert "data-figure-for:plot-goodput" in figure_blobs(page.text)
    assert client.get("/goodput?" + q, follow_redirects=False).status_code == 303


def test_goodput_bad_range_is_inline(client):
    r = client.get("/goodput?" + SMALL + "&rate_min=1&rate_max=100&rate_step=0.01", headers=HX)
    assert r.status_code == 422 and "rate_step" in r.text
    assert client.get("/goodput/0000000000000000", headers=HX).status_code == 404


def test_goodput_sweep_over_the_work_budget_is_inline(client):
    r = client.get("/goodput?hardware=h100&workload=agent&duration=600&token_budget=16&rate_min=1&rate_max=10"
                   "&rate_step=1", headers=HX)
    assert r.status_code == 422 and "engine steps in all" in r.text


def test_unchecking_every_scheduler_is_an_error(client):
    r = client.get("/?schedulers=&hardware=rtx3050&max_model_len=8192", headers=HX)
    assert r.status_code == 422 and 'id="err-schedulers"' in r.text


def test_static_and_favicon(client):
    assert client.get("/static/js/app.js").status_code == 200
    assert client.get("/static/css/app.css").status_code == 200
    assert client.get("/favicon.ico").headers["content-type"].startswith("image/svg")


def test_kv_cells_code_the_majority_owner_and_stay_bounded():
    """Cells decode (as static/js/kv_paint.js does) to the owner holding most of their blocks; a fragmented pool
    is coarsened instead of growing the page without bound."""
    import numpy as np

    from app.web import runview

    rng = np.random.default_rng(0)
    frames = rng.integers(-1, 5, size=(6, 50)).astype(np.int32)
    kv = runview.kv_data(frames, np.arange(6.0))
    k = kv["k"]
    for f in range(6):
        codes = np.repeat(kv["runs"][f][0::2], kv["runs"][f][1::2])
        assert len(codes) == kv["cells"] == 50
        owners, used = codes // (k + 1) - 1, codes % (k + 1)
        assert (owners == frames[f]).all() and (used == (frames[f] >= 0)).all()
    from app.web.kvgrid import cell_codes

    codes = cell_codes(np.array([[3, 3, 1, -1, 2, 1, 2, 1, -1, -1, -1, -1]], np.int32), 4)[0]
    assert [(c // 5 - 1, c % 5) for c in codes] == [(3, 3), (1, 4), (-1, 0)]  # (majority owner, blocks in use)
    big = rng.integers(-1, 20_000, size=(120, 40_000)).astype(np.int32)  # every block a different owner
    kv = runview.kv_data(big, np.linspace(0, 10, 120))
    assert sum(map(len, kv["runs"])) <= runview.RUN_BUDGET * 1.05
    assert len(kv["runs"]) == len(kv["frame_s"]) == len(kv["usage"]) >= runview.MIN_FRAMES


def test_head_answers_like_get_without_a_body(client):
    get = client.get("/healthz")
    head = client.head("/healthz")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert client.head("/?" + SMALL).status_code == 200


def test_security_headers_and_only_embeds_are_frameable(client):
    page = client.get("/healthz")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self';" in csp and "unsafe-inline'; img" in csp
    embed = client.get("/embed/metrics?" + SMALL.replace("schedulers=fcfs,chunked&", ""))
    assert embed.status_code == 200
    assert "x-frame-options" not in embed.headers
    assert "frame-ancestors" not in embed.headers["content-security-policy"]  # any page may frame it, file:// too
    assert "script-src 'self';" in embed.headers["content-security-policy"]
    assert embed.headers["x-content-type-options"] == "nosniff"


def test_static_files_are_compressed_and_cached_by_version(client):
    page = client.get("/healthz")
    assert page.status_code == 200
    from app.web.templating import asset_version

    versioned = client.get(f"/static/vendor/plotly.min.js?v={asset_version()}", headers={"Accept-Encoding": "gzip"})
    assert versioned.status_code == 200
    assert versioned.headers["content-encoding"] == "gzip"
    assert "immutable" in versioned.headers["cache-control"]
    plain = client.get("/static/vendor/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert plain.headers["cache-control"] == "no-cache" and "content-encoding" not in plain.headers
    assert len(plain.content) > 1_000_000  # the raw bundle; gzip sends about a third (httpx decodes it here)
    html = client.get("/?" + SMALL).text
    assert f"/static/vendor/plotly.min.js?v={asset_version()}" in html


def test_while_kernels_compile_pages_answer_and_poll_and_the_api_says_503(client):
    ready = client.app.state.kernels_ready
    ready.clear()
    try:
        page = client.get("/?" + SMALL)
        assert page.status_code == 200 and "Compiling the simulator" in page.text
        assert 'hx-trigger="every 2s"' in page.text and 'hx-select="#results"' in page.text
        api = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=5")
        assert api.status_code == 503 and api.headers["retry-after"] == "5"
        assert client.get("/healthz").json()["kernels_ready"] is False
    finally:
        ready.set()
    assert "Compiling the simulator" not in client.get("/?" + SMALL).text
    assert client.get("/healthz").json()["kernels_ready"] is True


def test_a_typo_shows_what_was_typed_and_keeps_results(client):
    """`/?duration=abc` shows "abc" in the field with the message beside it, and still shows results (the scenario
    without the typo, dimmed and said to be so), never "Nothing simulated yet". Its 422 comes at once: results not
    cached yet load after it (/stale-results), cached ones are in it."""
    url = "/?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&duration=abc"
    r = client.get(url)
    assert r.status_code == 422
    if 'id="stale-loading"' in r.text:  # not cached yet: the page loads them after its 422
        assert "Nothing simulated yet" not in r.text
        lazy = html_module.unescape(re.search(r'hx-get="(/stale-results\?[^"]*)"', r.text).group(1))
        assert client.get(lazy, headers=HX).status_code == 200
        r = client.get(url)
    html = r.text
    field = html[html.index('id="f-duration"'):]
    assert field[:field.index(">")].count('value="abc"') == 1
    err = field[:field.index("</div>")]
    assert 'id="err-duration"' in err and "(got &#39;abc&#39;)" in err
    assert 'id="card-metrics"' in html and "Nothing simulated yet" not in html
    assert 'class="results stale"' in html and 'id="stale-note"' in html
    assert "<code>duration</code> at its default" in html
    # An htmx request gets no fallback: the page keeps the results it shows (static/js/form.js dims them).
    frag = client.get("/?duration=abc", headers=HX)
    assert frag.status_code == 422 and 'id="card-metrics"' not in frag.text
    assert 'id="stale-note-template"' in frag.text


def test_out_of_range_duration_states_the_web_limit(client):
    html = client.get("/?duration=-5").text
    field = html[html.index('id="f-duration"'):]
    err = field[:field.index("</div>")]
    assert "at most 600 s on the web" in err and "604800" not in err and "(got &#39;-5&#39;)" in err
    api = client.get("/api/run?duration=-5&num_requests=")
    assert api.status_code == 422 and "at most 600 s on the web" in api.text


THREE = "/?schedulers=fcfs,chunked,slo&hardware=rtx3050&max_model_len=8192&workload=rag&duration=20"


def api_metrics(client, page_url: str) -> dict:
    """Each scheduler's metrics for a page's scenario, from the JSON API (the page's defaults made explicit)."""
    r = client.get("/api/run?" + page_url.removeprefix("/?"))
    assert r.status_code == 200, r.text[:300]
    return {name: entry["metrics"] for name, entry in r.json()["schedulers"].items()}
METRIC_ROW = re.compile(r'<tr><th scope="row"[^>]*>(.*?)</th>(.*?)</tr>', re.S)
METRIC_CELL = re.compile(r'<td class="num( best)?">([^<]*)(?:<span class="unserved"[^>]*>([^<]*)</span>)?</td>')


def test_one_time_axis_and_one_kv_grid_per_comparison(client):
    """Every Gantt, the engine timeline and the KV player span the same [0, end]; every KV grid has the same
    cells (blocks per cell, columns) though the pools differ, and the summary names each pool."""
    html = client.get(THREE).text
    blobs = figure_blobs(html)
    span = blobs["data-figure-for:plot-timeline"]["layout"]["xaxis"]["range"]
    assert span[0] == 0 and span[1] > 0
    ends = []
    for name in ("fcfs", "chunked", "slo"):
        gantt = blobs[f"data-figure-for:plot-gantt-{name}"]
        assert gantt["layout"]["xaxis"]["range"] == span
        ends.append(max(x for t in gantt["data"] for x in t["x"] if x is not None))
    assert max(ends) == pytest.approx(span[1], abs=1e-3) and min(ends) < span[1] - 0.5  # runs end apart
    frames = blobs["data-kv-frames-for:plot-kv"]
    assert frames["horizon"] == span[1]
    grids = frames["schedulers"]
    assert len({g["blocks"] for g in grids}) == 2  # fcfs's pool is smaller: its token budget needs more memory
    assert len({g["k"] for g in grids}) == 1 and len({g["cols"] for g in grids}) == 1
    grid = blobs["data-figure-for:plot-kv"]["grid"]  # one canvas size for every scheduler (static/js/kv_player.js)
    assert grid["cols"] == grids[0]["cols"] and grid["rows"] == max(g["rows"] for g in grids)
    assert grid["cols"] * grid["rows"] >= max(g["cells"] for g in grids)
    # vLLM's 2,048-token budget on this GPU for chunked and slo, max_model_len's 8,192 for fcfs
    assert "KV pool 7,476 blocks (fcfs), 8,052 blocks (chunked, slo)" in html


def test_best_only_among_runs_that_served_every_request(client):
    """slo sheds some requests: on a latency row it is never bold, and where its value would have won, its
    share not served is flagged beside it. Rows over all requests (goodput) still crown anyone."""
    html = client.get(THREE).text
    rows = {re.sub("<[^>]+>", "", label).strip(): METRIC_CELL.findall(cells) for label, cells in METRIC_ROW.findall(html)}
    not_served = f"{unserved_share(api_metrics(client, THREE)['slo']):.0%} not served"
    assert not_served != "0% not served"
    flagged = 0
    for label, cells in rows.items():
        if re.match(r"(\w+: )?(Mean|Median|P\d+|Max) (TTFT|TPOT|ITL|E2EL)", label):
            assert len(cells) == 3 and not cells[2][0], label  # slo (third) never bold on a latency row
            assert not cells[0][2] and not cells[1][2]  # fcfs and chunked served everyone: never flagged
            flagged += cells[2][2] == not_served
    # slo's mean TTFT is the lowest, yet the best is chunked's (with vLLM's 2,048-token budget), which served all
    assert rows["Mean TTFT ms"][2][2] == not_served and [b for b, _, _ in rows["Mean TTFT ms"]] == ["", " best", ""]
    assert flagged >= 10
    assert any(best for best, _, _ in rows["Goodput req/s"])
    assert not any(best for best, _, _ in rows["Rejected: shed by admission control: TTFT target already out of reach"])


FIGURE_HOOKS = {"kv", "gantt", "cdf", "timeline", "goodput", "metrics", "attribution", "step-time"}


def test_every_figure_container_carries_a_stable_hook(client):
    html = client.get(THREE).text
    hooks = re.findall(r'data-figure="([^"]+)"', html)
    assert set(hooks) <= FIGURE_HOOKS
    assert {"kv", "gantt", "cdf", "timeline", "metrics"} <= set(hooks) and hooks.count("gantt") == 3
    plots = re.findall(r'<div class="plot" id="plot-([a-z-]+)"[^>]*>', html)
    assert plots and all('data-figure="' in tag for tag in re.findall(r'<div class="plot"[^>]*>', html))


def test_rejected_requests_have_no_ttft_in_the_gantt(client):
    gantt = figure_blobs(client.get(THREE).text)["data-figure-for:plot-gantt-slo"]
    rejected = [t for t in gantt["data"] if t["name"] == "rejected"]
    assert rejected and rejected[0]["x"]
    assert "TTFT" not in rejected[0]["hovertemplate"] and "never served" in rejected[0]["hovertemplate"]


def test_latency_axes_have_readable_ticks_and_an_slo_does_not_stretch_them(client):
    near = figure_blobs(client.get(THREE).text)["data-figure-for:plot-cdf"]["layout"]
    for axis in ("xaxis", "xaxis2", "xaxis3"):
        lo, hi = near[axis]["range"]
        ticks = [t for t in near[axis]["tickvals"] if lo <= math.log10(t) <= hi]
        assert 4 <= len(ticks) <= 12 and len(near[axis]["ticktext"]) == len(near[axis]["tickvals"])
    assert any(s["xref"] == "x" for s in near["shapes"])  # the TTFT target (1,000 ms) is near the data: drawn
    far = figure_blobs(client.get(THREE + "&slo_ttft_ms=900000").text)["data-figure-for:plot-cdf"]["layout"]
    assert far["xaxis"]["range"][1] < 5  # TTFTs here are seconds at most: the axis stays below 100 s
    assert not any(s["xref"] == "x" for s in far["shapes"])
    assert any(n["text"] == "TTFT SLO 900000 ms →" for n in far["annotations"])


def test_takeaway_sentence_is_computed_from_the_results(client):
    two = client.get("/?" + SMALL.replace("num_requests=30", "num_requests=60")).text
    sentence = re.search(r'<p class="takeaway" id="takeaway">([^<]*)</p>', two).group(1)
    assert re.match(r"(fcfs|chunked) (cuts|raises) [\w ]+ from [\d,.]+ (ms|req/s) \((fcfs|chunked)\) to [\d,.]+ "
                    r"(ms|req/s)", sentence) or "within 15%" in sentence, sentence
    three = client.get(THREE).text
    m = api_metrics(client, THREE)  # the seed lesson: chunked prefill cuts FCFS's ITL tail
    assert (f"chunked cuts P99 ITL from {m['fcfs']['itl_ms']['p99']:,.1f} ms (fcfs) to "
            f"{m['chunked']['itl_ms']['p99']:,.1f} ms") in three
    assert f"slo leaves {unserved_share(m['slo']):.0%} of requests unserved (rejected or shed)" in three
    one = client.get("/?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30").text
    assert "fcfs serves 30 of 30 requests" in one and "tick another scheduler" in one


def test_jitted_code_the_web_runs_from_request_threads_releases_the_gil():
    """A jitted call holds the GIL for its whole length unless compiled nogil, and then the event loop (every
    /healthz, every cached page) waits for it: the KV grid over a long run takes tens of ms."""
    from numba import config

    from app.web import kvgrid
    from sim_core.kernel import content_hash, engine

    if config.DISABLE_JIT:
        pytest.skip("plain Python: nothing is compiled")
    for fn in (kvgrid.cell_codes, kvgrid._majority, content_hash.block_hashes, engine.simulate):
        assert fn.targetoptions.get("nogil"), fn.__name__
