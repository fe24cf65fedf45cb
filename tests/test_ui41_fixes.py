"""Issue #41's leftovers, each as the page or the API answers it: /docs lists the job routes, /plan refuses an
empty checkbox group, a rate schedule's error names the accepted forms, the A/B colours read at 4.5:1, every page
has a skip link, the compile card promises no time, a plan of several engines opens as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.web import pages
from app.web.figures.goodput import _ci_bands
from app.web.plan_page import CHOSEN_INPUTS, scenario_link
from app.web.present import cluster_phrase
from sim_core import Scenario
from sim_core.rate_schedule import ScheduleError, parse

REPO = Path(__file__).resolve().parent.parent
PLAN = "model=llama-3-8b&workload=chat&rate=12&duration=10&tp=1"


# ----- item 4: /docs lists every /api route, the job routes the schema leaves out included -----
def test_the_api_docs_list_the_plan_and_frontier_routes(client):
    html = client.get("/docs").text
    listed = set(re.findall(r'<span class="method method-\w+">(\w+)</span> <code>([^<]+)</code>', html))
    for op in (
        ("GET", "/api/plan"),
        ("GET", "/api/plan/{job_id}"),
        ("POST", "/api/plan/{job_id}/cancel"),
        ("GET", "/api/frontier"),
        ("GET", "/api/run"),
        ("GET", "/api/diff"),
    ):
        assert op in listed, op
    assert "frontier_max_concurrency" in html  # what /api/frontier takes, from its docstring


# ----- item 5: a checkbox group left empty is an error naming it, never the defaults -----
@pytest.mark.parametrize("name", list(CHOSEN_INPUTS))
def test_an_empty_checkbox_group_on_plan_is_a_field_error(client, name):
    query = PLAN.replace("&tp=1", "") + f"&{name}=" + ("&tp=1" if name != "tp" else "")
    r = client.get("/plan?" + query)
    assert r.status_code == 422
    error = re.search(rf'<p class="field-error" id="err-{name}">(.*?)</p>', r.text, re.S)
    assert error and "choose at least one of" in error.group(1) and CHOSEN_INPUTS[name][0] in error.group(1)
    api = client.get("/api/plan?" + query)
    assert api.status_code == 422
    assert any(d["loc"][-1] == name and "at least one" in d["msg"] for d in api.json()["detail"]), api.json()


def test_the_plan_form_sends_each_group_even_with_every_box_unchecked(client):
    html = client.get("/plan").text
    for name in CHOSEN_INPUTS:
        assert f'<input type="hidden" name="{name}" value="">' in html


# ----- item 6: the plan page's note on plans of several engines is what the main page does -----
def test_a_plan_of_several_engines_opens_on_the_main_page_as_it_is(client):
    source = (REPO / "templates" / "_plan_status.html").read_text(encoding="utf-8")
    assert "with a note" not in source and "several engines" in source
    link = scenario_link(
        Scenario(
            hardware="a100",
            model="llama-3-8b",
            workload="chat",
            rate=6,
            duration=5,
            replicas=2,
            scheduler="chunked",
        )
    )
    r = client.get(link)
    assert r.status_code == 200 and 'id="results"' in r.text
    assert re.search(r"\b2 replicas\b|2× A100", r.text), "the page shows the two engines"


# ----- item 7: a rate schedule in no known form names every form and its ranges -----
@pytest.mark.parametrize("text", ["sinus:5", "square", "5"])
def test_a_schedule_in_no_form_names_the_forms_and_ranges(text):
    with pytest.raises(ScheduleError) as e:
        parse(text)
    message = str(e.value)
    for form in ("seconds:rate", "diurnal:", "ramp:", "burst:", "10000 req/s", "604800 s"):
        assert form in message, (text, message)
    if text == "sinus:5":
        assert "no shape 'sinus'" in message


def test_the_page_names_them_too(client):
    r = client.get("/api/run?schedulers=fcfs&rate_schedule=sinus:5&duration=10")
    assert r.status_code == 422
    msg = [d["msg"] for d in r.json()["detail"] if d["loc"][-1] == "rate_schedule"][0]
    assert "diurnal:" in msg and "ramp:" in msg and "burst:" in msg


# ----- item 9: the A/B page's won/lost colours read at 4.5:1 on its cards and page, light and dark -----
def luminance(hex_colour: str) -> float:
    c = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_the_ab_colours_meet_4_5_to_1():
    app_css = (REPO / "static" / "css" / "app.css").read_text(encoding="utf-8")
    light, dark = app_css.split("@media (prefers-color-scheme: dark)", 1)
    backgrounds = {
        theme: [re.search(rf"--{v}: (#[0-9a-f]{{6}})", css).group(1) for v in ("card", "bg")]
        for theme, css in (("light", light), ("dark", dark))
    }
    diff_css = (REPO / "static" / "css" / "diff.css").read_text(encoding="utf-8")
    light_rules, dark_rules = diff_css.split("@media (prefers-color-scheme: dark)", 1)
    for theme, rules in (("light", light_rules), ("dark", dark_rules)):
        for cls in ("diff-won", "diff-lost"):
            colour = re.search(rf"\.{cls} {{ color: (#[0-9a-f]{{6}})", rules).group(1)
            for bg in backgrounds[theme]:
                assert contrast(colour, bg) >= 4.5, (theme, cls, colour, bg, contrast(colour, bg))


# ----- item 10: every page's first focusable element skips to its content -----
@pytest.mark.parametrize("url", ["/", "/plan", "/vs", "/diff", "/cluster-time", "/docs", "/accuracy", "/guide/model"])
def test_every_page_starts_with_a_skip_link(client, url):
    html = client.get(url).text
    body = html.split("<body", 1)[1]
    first = re.search(r"<(a|button|input|select|textarea)\b[^>]*>", body).group(0)
    target = re.search(r'class="skip-link" href="#([\w-]+)"', first)
    assert target, (url, first)
    assert re.search(rf'id="{target.group(1)}"[^>]*tabindex="-1"', html), (url, target.group(1))


# ----- item 11: the compile card promises no time, and counts the time waited -----
def test_the_compile_card_promises_no_time(client, monkeypatch):
    monkeypatch.setattr(pages, "kernels_ready", lambda request: False)
    r = client.get("/?schedulers=fcfs&duration=7")
    card = re.search(r'<div class="card empty" id="warming".*?</div>', r.text, re.S).group(0)
    assert "Compiling the simulator" in card and "half a minute" not in card and "about a second" not in card
    assert "data-elapsed" in card
    assert "tickElapsed" in (REPO / "static" / "js" / "app.js").read_text(encoding="utf-8")


# ----- item 8: /diff refuses a side of several schedulers rather than take the first -----
def test_a_diff_side_of_two_schedulers_is_refused_naming_them(client):
    one = "hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=30&seed=3"
    query = {"a": "schedulers=fcfs,chunked&" + one, "b": "scheduler=slo&" + one}
    api = client.get("/api/diff", params=query)
    assert api.status_code == 422
    msg = [d["msg"] for d in api.json()["detail"] if d["loc"][-1] == "a"][0]
    assert "2 schedulers (fcfs, chunked)" in msg and "scheduler=fcfs" in msg
    page = client.get("/diff", params=query)
    assert page.status_code == 422 and "2 schedulers (fcfs, chunked)" in page.text


# ----- item 3: over seeds, a value every seed agrees on shows no "± 0" -----
def test_a_value_the_same_in_every_seed_has_no_plus_minus(client):
    html = client.get(
        "/?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=40&seeds=2"
    ).text
    cells = re.findall(r'<td class="num[^"]*">(.*?)</td>', html, re.S)
    assert any("half-width" in c for c in cells)  # a latency varies: it has its ± half-width
    assert not any(re.search(r"± 0(?:\.0+)?\s*<", c) for c in cells), [c for c in cells if "± 0" in c]


# ----- item 12: a goodput band never rises above the offered load -----
def test_the_goodput_band_stops_at_the_offered_load():
    def point(rate, good, good_ci, arrivals_ci):
        return {
            "rate": rate,
            "goodput": good,
            "slo_attainment": 0.9,
            "ci95": {"goodput": good_ci, "slo_attainment": [0.8, 1.0], "arrival_rate": arrivals_ci},
        }

    points = [
        point(5.0, 4.9, [3.96, 5.84], [4.5, 5.9]),
        point(8.0, 8.1, [7.0, 9.2], [7.4, 8.8]),
        point(2.0, 1.0, [0.5, 1.5], [1.7, 2.3]),
    ]
    high = next(t["y"] for t in _ci_bands("fcfs", "#e8590c", points) if "fill" not in t and "yaxis" not in t)
    assert high == [
        5.0,
        8.1,
        1.5,
    ]  # 5.84 at 5 offered before; a mean above the rate keeps its band to the line


# ----- item 2: the summary chips state the deployment's GPUs, the fleet's bounds, the load as it arrived -----
def test_the_deployment_chip_counts_every_gpu_and_the_fleets_bounds():
    dp = cluster_phrase(Scenario(hardware="h200", model="deepseek-v3", tp=1, ep=16, attention_dp=True))
    assert "16 GPUs in all" in dp and "EP16" in dp and "16 attention data-parallel ranks" in dp
    assert "1 replicas" not in dp
    fleet = Scenario(
        hardware="a100", autoscaler="utilization", max_replicas=6, rate_schedule="0:1,60:6", duration=120
    )
    assert "1–6 replicas" in cluster_phrase(fleet) and "(1–6 GPUs)" in cluster_phrase(fleet)
    pd = cluster_phrase(Scenario(hardware="a100", prefill_replicas=1, decode_replicas=2))
    assert "router to the prefill engines" in pd and "3 GPUs in all" in pd
    assert cluster_phrase(Scenario(hardware="a100")) == ""
    wide = Scenario(hardware="h100", model="qwen3-30b-a3b", tp=1, prefill_replicas=1, decode_replicas=3,
                    decode_ep=8, attention_dp=True)  # 1 + 3 x 8 GPUs: each decode replica is 8 ranks
    assert ("1 prefill + 3 decode engines, decode replicas of 8 attention-DP ranks (EP8), KV over ib400"
            in cluster_phrase(wide)) and "25 GPUs in all" in cluster_phrase(wide)


def test_the_workload_chip_says_the_rate_and_time_the_requests_arrived_over(client):
    query = "schedulers=fcfs&hardware=a100&model=llama-3-8b&workload=multiturn&duration=30&seed=2"
    metrics = client.get("/api/run?" + query).json()["schedulers"]["fcfs"]["metrics"]
    html = client.get("/?" + query).text
    chip = re.search(r"<li>multiturn workload: (.*?)</li>", html).group(1)
    n, rate = metrics["num_requests"], metrics["arrival_rate"]
    assert chip == f"{n:,} requests at {rate:.3g} req/s over {n / rate:,.0f} s, seed 2", chip


def test_the_plan_form_ticks_each_groups_defaults(client):
    html = client.get("/plan").text
    for name in CHOSEN_INPUTS:  # no group stands empty, meaning a default the page does not show
        assert re.search(rf'name="{name}" value="[^"]+" checked', html), name


# ----- leftover: the TPOT SLO's note was cut on the phone (its text ran right of a line at the axis's end) -----
def test_an_slo_note_runs_into_its_panel_from_a_line_at_either_end():
    from types import SimpleNamespace

    from app.web.figures.cdf import cdf_figure

    def view(ttft, itl):
        def cdf(xs):
            return {"x": xs, "y": [(k + 1) / len(xs) for k in range(len(xs))]}

        return SimpleNamespace(scheduler="fcfs", metrics={"slo": {"ttft_ms": 2000.0, "tpot_ms": 5.0}},
                               cdf={"ttft": cdf(ttft), "itl": cdf(itl), "e2el": cdf([900.0, 1500.0])})

    # TTFT's target lies past its data (the axis's right end); ITL's below its data (the left end).
    fig = cdf_figure([view([100.0, 300.0, 600.0], [20.0, 30.0, 40.0])])
    notes = {a["text"].split(" ")[0]: a for a in fig["layout"]["annotations"]}
    assert notes["TTFT"]["xanchor"] == "right"
    assert notes["TPOT"]["xanchor"] == "left"
