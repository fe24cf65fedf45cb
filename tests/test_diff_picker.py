"""/diff's request picker (issue #41: "/diff has no request lookup"): one request compared in full, by id, under A
and under B (sim_core.request_diff.picked_request: its values, each run's split of its E2EL, its timelines), on
/api/diff, on the page (the id in the URL, a bad id named with the ids allowed) and in /embed/diff. Clicking a point
or a timeline to pick one: tests/test_browser_diff.py."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlencode

import numpy as np
import pytest

from sim_core import Scenario
from sim_core.kernel.attribution import ATTRIBUTION_PARTS
from sim_core.request_diff import NotCompared, diff_document, request_values_ms
from sim_core.runner import run

BASE = dict(workload="rag", hardware="rtx3050", max_model_len=8192, rate=6.0, num_requests=30, seed=3)
A = "scheduler=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=30&seed=3"
B = A.replace("fcfs", "chunked")


def test_a_picked_request_is_its_values_its_parts_and_timelines_in_each_run():
    a = run(Scenario(scheduler="fcfs", transport_overhead_ms=2.0, **BASE), record_events=True)
    b = run(Scenario(scheduler="chunked", transport_overhead_ms=2.0, **BASE), record_events=True)
    doc, d = diff_document(a, b, with_requests=False, pick=7)
    p = doc["picked"]
    assert p["id"] == 7 and p["prompt_tokens"] == int(a.requests.prompt_tokens[7])
    for side, r in (("a", a), ("b", b)):
        e2el_ms = (r.finish_s[7] - r.requests.arrival_s[7]) * 1e3 + 2.0  # the run's own E2EL, with the overhead
        assert p[side]["e2el_ms"] == pytest.approx(e2el_ms, abs=1e-6)
        assert list(p["parts_ms"][side]) == list(ATTRIBUTION_PARTS)
        assert sum(p["parts_ms"][side].values()) == pytest.approx(p[side]["e2el_ms"], abs=1e-6)  # parts add up
        assert np.allclose(list(p["parts_ms"][side].values()), request_values_ms(r)[1]["e2el_ms"][7])
        kinds = {k for k, _, _ in p["timelines"][side]}
        assert "decode" in kinds and p["timelines"][side][-1][2] == pytest.approx(r.finish_s[7], abs=1e-6)
    for m, change in p["change_ms"].items():
        assert change == pytest.approx(p["b"][m] - p["a"][m])
    with pytest.raises(NotCompared, match="from 0 to 29"):
        diff_document(a, b, with_requests=False, pick=30)
    assert "picked" not in diff_document(a, b, with_requests=False)[0]


def test_the_page_api_and_embed_show_the_picked_request_and_name_a_bad_id(client):
    api = client.get("/api/diff?" + urlencode({"a": A, "b": B, "request": 4})).json()["picked"]
    page = client.get("/diff?" + urlencode({"a": A, "b": B, "request": 4}))
    assert page.status_code == 200
    html = page.text
    assert re.search(r"<h2>Request #4 under A and under B</h2>", html)
    assert 'value="4"' in re.search(r'<input id="diff-request"[^>]*>', html).group(0)
    rows = dict((label, (a, b)) for label, a, b in re.findall(
        r'<tr[^>]*><th scope="row">([^<]+)</th><td>([^<]+)</td><td>([^<]+)</td>', html))
    assert rows["E2EL"] == (f"{api['a']['e2el_ms']:,.1f}", f"{api['b']['e2el_ms']:,.1f}")
    assert rows["queueing"][0] == f"{api['parts_ms']['a']['queue']:,.1f}"
    assert 'id="plot-diff-picked"' in html
    # The page's links keep the pick: the embed of this request, the listed requests' "compare this request".
    embed = unescape(re.search(r'id="diff-picked-embed" href="([^"]+)"', html).group(1))
    assert "request=4" in embed and "figure=request" in embed
    shown = client.get(embed)
    assert shown.status_code == 200 and "Request #4" in shown.text
    picks = [unescape(h) for h in re.findall(r'class="diff-pick" href="([^"]+)"', html)]
    assert picks and all(h.count("request=") == 1 for h in picks)
    scatter = client.get("/embed/diff?" + urlencode({"a": A, "b": B, "request": 4})).text
    assert '"name":"picked"' in scatter.replace(" ", "")  # the scatter rings the picked point


@pytest.mark.parametrize("given, said", [("31", "must be a request id from 0 to 29 (got 31)"),
                                         ("x1", "must be a request id, a whole number from 0"),
                                         ("-2", "must be a request id, a whole number from 0")])
def test_a_bad_request_id_is_named_with_the_ids_allowed(client, given, said):
    for path in ("/diff", "/api/diff", "/embed/diff"):
        r = client.get(path + "?" + urlencode({"a": A, "b": B, "request": given}))
        assert r.status_code == 422, (path, r.status_code)
        if path == "/api/diff":
            assert any(e["loc"] == ["query", "request"] and said in e["msg"] for e in r.json()["detail"])
        else:
            assert said in unescape(r.text) and "request" in r.text
    r = client.get("/embed/diff?" + urlencode({"a": A, "b": B, "figure": "request"}))
    assert r.status_code == 422 and "give the id of the request" in r.text
