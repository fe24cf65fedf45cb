"""The embeds of the pages that compare or search (app/web/page_embeds.py) and their links, in-process: a bad query
of /embed/vs, /embed/diff, /embed/frontier or /embed/plan is a 422 naming the field and what it allows (never a
5xx); a plan's and a frontier's links are page queries that ask for the same plan or frontier again; a /vs
embed draws both sides, captioned. The browser test (tests/test_browser_shareable.py) draws them in frames."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

import pytest

from app.web.frontier_page import parse_frontier_request
from app.web.plan_jobs import plan_query
from app.web.plan_page import page_query, parse_plan_request

SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&duration=10.0"
ONE = "hardware=rtx3050&max_model_len=8192&workload=rag&duration=10.0&scheduler="
PAIR = urlencode({"a": SCENARIO, "b": SCENARIO + "&max_seqs=16"})
AB = urlencode({"a": ONE + "fcfs", "b": ONE + "chunked"})
FRONTIER = ("hardware=rtx3050&model=llama-3.2-1b&max_model_len=8192&frontier_gpus=rtx3050&frontier_isl=64"
            "&frontier_osl=16&frontier_max_concurrency=2")


def problems(r) -> dict[str, str]:
    """The embed's 422 list: field -> message."""
    return dict(re.findall(r"<li><code>([^<]+)</code>: ([^<]*)</li>", r.text))


@pytest.mark.parametrize("url, field, allowed", [
    ("/embed/vs?" + PAIR + "&figure=kv", "figure", "cdf"),
    ("/embed/vs?" + PAIR + "&figure=cdf&figure=timeline", "figure", "once"),
    ("/embed/vs?a=" + SCENARIO.replace("&", "%26"), "b", "give scenario B"),
    ("/embed/vs?" + PAIR + "&c=1", "c", "is not a parameter here"),
    ("/embed/vs?" + PAIR + "&width=5", "width", "between 240 and 3840"),
    ("/embed/diff?" + AB + "&figure=gantt", "figure", "scatter, causes"),
    ("/embed/diff?" + urlencode({"a": SCENARIO, "b": ONE + "fcfs"}), "a", "names 2 schedulers"),
    ("/embed/frontier?" + FRONTIER.replace("frontier_isl=64", "frontier_isl=0"), "frontier_isl", "from 1 to 8,192"),
    ("/embed/frontier?" + FRONTIER + "&caption=" + "x" * 201, "caption", "at most 200"),
    ("/embed/plan?model=llama-3.2-1b&max_model_len=8192&gpus=", "gpus", "choose at least one of"),
    ("/embed/plan?model=llama-3.2-1b&hardware=a100", "hardware", "chosen by the plan's search"),
])
def test_a_bad_embed_query_is_a_422_naming_the_field(client, url, field, allowed):
    r = client.get(url)
    assert r.status_code == 422, (r.status_code, r.text[:300])
    found = problems(r)
    assert field in found and allowed in found[field].replace("&#39;", "'"), found


def test_a_plans_page_query_asks_for_the_same_plan_and_the_jobs_own_key_would_not():
    pairs = [("model", "llama-3-8b"), ("gpus", "a100"), ("gpus", "h100"), ("tp", "1"), ("duration", "60"),
             ("min_tokens_per_s_per_user", "20")]
    scenario, inputs = parse_plan_request(pairs, page=True)
    query = page_query(scenario, inputs)
    assert parse_plan_request(parse_qsl(query), page=True) == (scenario, inputs)
    # the job's key names the scenario's GPU and leaves the search's defaults out: the Plan tab refuses it
    with pytest.raises(Exception, match="hardware"):
        parse_plan_request(parse_qsl(plan_query(scenario, inputs)), page=True)


@pytest.mark.parametrize("extra", ["", "&frontier_tp=1&frontier_min_tokens_per_s_per_user=2.5&frontier_basis=output"])
def test_a_frontiers_query_asks_for_the_same_frontier(extra):
    ask = parse_frontier_request(parse_qsl(FRONTIER + extra))
    again = parse_frontier_request(parse_qsl(ask.query))
    assert again.key() == ask.key() and again.query == ask.query
    assert ask.query.startswith(ask.scenario_query + "&frontier_gpus=rtx3050")


def test_a_vs_embed_draws_both_sides_captioned_and_opens_the_pair(client):
    """Both sides' figure, the caption naming A's scenario and what B changes, the "Open" link /vs's own."""
    r = client.get("/embed/vs?" + PAIR + "&figure=timeline&caption=1")
    assert r.status_code == 200, r.text[:300]
    assert 'id="plot-a-timeline"' in r.text and 'id="plot-b-timeline"' in r.text
    assert re.search(r'href="/vs\?a=[^"]+" target="_blank" rel="noopener" id="open-link"', r.text)
    caption = re.search(r'id="embed-caption">([^<]*)', r.text).group(1)
    assert caption.startswith("A: fcfs, chunked · llama-3.2-1b") and caption.endswith("B: max_seqs 16"), caption


def test_a_figures_embed_caption_names_the_seeds_and_every_setting_away_from_its_default(client):
    r = client.get("/embed/cdf?" + SCENARIO + "&seeds=2&max_seqs=64&caption=1")
    assert r.status_code == 200, r.text[:300]
    caption = re.search(r'id="embed-caption">([^<]*)', r.text).group(1)
    assert "means over 2 seeds (0–1)" in caption and "max sequences 64" in caption, caption


def test_a_frontier_link_opened_in_a_browser_is_its_page_and_htmx_gets_the_cards_status(client):
    bad = FRONTIER.replace("frontier_isl=64", "frontier_isl=0")
    page = client.get("/frontier?" + bad)
    assert page.status_code == 422 and 'id="topnav"' in page.text and "frontier_isl: must be" in page.text
    card = client.get("/frontier?" + bad, headers={"HX-Request": "true"})
    assert card.status_code == 422 and 'id="topnav"' not in card.text and card.text.lstrip().startswith("<div")
