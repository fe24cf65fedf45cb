"""The top bar (templates/_macros.html, topbar): every page links every page of the tool, one click away, and
the links to pages that take a scenario carry the scenario the page shows (issue #41)."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

SCENARIO = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
ONE = "scheduler=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=5"
PAGES = {
    "Compare": "/",
    "Frontier": "/",
    "Plan": "/plan",
    "Autoscaling": "/cluster-time",
    "A/B requests": "/diff",
    "Twin": "/twin",
    "/vs": "/vs",
    "Accuracy": "/accuracy",
    "API": "/docs",
}
NAV = re.compile(r'<nav class="topnav"[^>]*>(.*?)</nav>', re.S)
LINK = re.compile(r'<a href="([^"]*)" data-nav="([^"]*)"[^>]*>')


def nav_links(html: str) -> dict[str, str]:
    navs = NAV.findall(html)
    assert len(navs) == 1, "one top bar"
    return {unescape(label): unescape(href) for href, label in LINK.findall(navs[0])}


@pytest.mark.parametrize("url", ["/", "/plan", "/cluster-time", "/diff", "/twin", "/vs", "/accuracy", "/docs"])
def test_every_page_links_every_page(client, url):
    r = client.get(url)
    assert r.status_code == 200
    links = nav_links(r.text)
    assert list(links) == list(PAGES)
    for label, path in PAGES.items():
        assert urlsplit(links[label]).path == path, (label, links[label])
    assert links["Frontier"].endswith("#card-frontier")
    current = re.findall(r'data-nav="([^"]*)"[^>]*aria-current="page"', NAV.findall(r.text)[0])
    assert len(current) == 1 and PAGES[unescape(current[0])] == url


def scenario_of(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_the_links_carry_the_scenario_shown(client):
    shown = client.get("/?" + SCENARIO)
    links = nav_links(shown.text)
    canonical = re.search(r'data-scenario-query="([^"]*)"', shown.text).group(1)
    q = parse_qs(unescape(canonical))
    assert q["workload"] == ["chat"] and q["num_requests"] == ["30"]
    for label in ("Compare", "Frontier", "Autoscaling"):
        assert scenario_of(links[label]) == q, label
    pair = scenario_of(links["/vs"])
    assert parse_qs(pair["a"][0]) == parse_qs(pair["b"][0]) == q
    assert links["Plan"] == "/plan" and links["A/B requests"] == "/diff" and links["API"] == "/docs"
    # The pages a link opens show that scenario: cluster-time runs it, /vs opens on it.
    ct = client.get(links["Autoscaling"])
    assert ct.status_code == 200 and scenario_of(nav_links(ct.text)["Compare"])["workload"] == ["chat"]
    vs = client.get(links["/vs"])
    assert vs.status_code == 200 and scenario_of(nav_links(vs.text)["Compare"])["num_requests"] == ["30"]


def test_the_pair_pages_carry_their_a_side(client):
    diff = client.get("/diff?" + urlencode({"a": ONE, "b": ONE.replace("fcfs", "chunked")}))
    assert diff.status_code == 200
    a = scenario_of(nav_links(diff.text)["Compare"])
    assert a["schedulers"] == ["fcfs"] and a["seed"] == ["5"] and a["num_requests"] == ["30"]


def test_the_landing_page_says_what_else_the_tool_answers(client):
    html = client.get("/").text
    line = re.search(r'<p class="product-line" id="product-line">(.*?)</p>', html, re.S)
    assert line is not None
    for href in ("/plan", "#card-frontier", "/cluster-time", "/diff", "/vs", "/docs"):
        assert f'href="{href}"' in line.group(1)
