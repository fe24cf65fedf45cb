"""Request-level A/B (sim_core/request_diff.py): per-request changes add up to the runs' own figures, each
request's cause parts add up to its change, and runs over different requests are refused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sim_core import SCHEDULER_NAMES, Scenario
from sim_core.kernel.attribution import ATTRIBUTION_PARTS
from sim_core.request_diff import CAUSE_METRICS, METRICS, RequestsDiffer, request_diff
from sim_core.runner import run

# Three presets of different kinds: one class of long prompts, several classes, and conversations (whose follow-up
# turns arrive when their parent ends, so their arrivals differ from one scheduler to the next).
PRESETS = {"rag": dict(workload="rag", hardware="rtx3050", max_model_len=8192, rate=6.0, num_requests=36, seed=3),
           "mixed": dict(workload="mixed", hardware="rtx3050", max_model_len=8192, rate=8.0, num_requests=36, seed=5),
           "multiturn": dict(workload="multiturn", hardware="rtx3050", max_model_len=8192, rate=4.0, num_requests=36, seed=7)}


@pytest.fixture(scope="module")
def runs():
    return {(p, s): run(Scenario(scheduler=s, transport_overhead_ms=3.0, **kw))
            for p, kw in PRESETS.items() for s in SCHEDULER_NAMES}


def _check_adds_up(a, b) -> bool:
    """The identities of one pair; True when both runs served the same requests (so run means compare)."""
    d = request_diff(a, b)
    assert set(d.change) == set(METRICS) and set(d.causes) == set(CAUSE_METRICS)
    for m in CAUSE_METRICS:
        # Each request's parts sum to its change (the attribution's own sums are exact to ~1e-12 s).
        assert np.allclose(d.causes[m].sum(axis=1), d.change[m], rtol=0, atol=1e-6), m
        # ... and so their means sum to the mean change.
        assert sum(d.causes_ms()[m].values()) == pytest.approx(d.mean_change_ms()[m], abs=1e-6)
    both = np.zeros(d.requests, bool)
    both[d.ids] = True
    for m in ("ttft_ms", "e2el_ms"):  # the change is B's value minus A's, request by request
        va = (a.first_token_s if m == "ttft_ms" else a.finish_s) - a.requests.arrival_s
        vb = (b.first_token_s if m == "ttft_ms" else b.finish_s) - b.requests.arrival_s
        assert np.allclose(d.change[m], (vb - va)[both] * 1e3, rtol=0, atol=1e-6)
    if d.only_a or d.only_b:
        return False
    assert len(d) == a.metrics["completed"] == b.metrics["completed"]
    e2el = d.mean_change_ms()["e2el_ms"]
    assert abs(e2el - (b.metrics["e2el_ms"]["mean"] - a.metrics["e2el_ms"]["mean"])) <= 1e-9
    assert abs(d.mean_change_ms()["ttft_ms"] - (b.metrics["ttft_ms"]["mean"] - a.metrics["ttft_ms"]["mean"])) <= 1e-9
    assert d.run_change_ms["e2el_ms"]["mean"] == pytest.approx(e2el, abs=1e-9)
    return True


@pytest.mark.parametrize("preset", PRESETS)
def test_changes_add_up_for_every_scheduler_pair(runs, preset):
    same_served = [_check_adds_up(runs[preset, x], runs[preset, y])
                   for x, y in itertools.combinations(SCHEDULER_NAMES, 2)]
    # Only admission control (slo) sheds requests here: every other pair compares run means too.
    assert sum(same_served) >= len(list(itertools.combinations([s for s in SCHEDULER_NAMES if s != "slo"], 2)))


def test_a_run_against_itself_changes_nothing(runs):
    d = request_diff(runs["rag", "fcfs"], runs["rag", "fcfs"])
    assert len(d) == 36
    assert all((v == 0).all() for v in d.change.values())
    assert d.counts() == {"hurt": 0, "helped": 0, "unchanged": 36}
    assert len(d.most_hurt(5)) == 0 and len(d.most_helped(5)) == 0


def test_most_hurt_and_json(runs):
    d = request_diff(runs["rag", "fcfs"], runs["rag", "chunked"])
    hurt = d.most_hurt(5)
    assert len(hurt) > 0
    c = d.change["e2el_ms"]
    assert list(c[hurt]) == sorted(c[hurt], reverse=True) and c[hurt[0]] == c.max()
    doc = d.to_json()
    assert len(doc["requests"]) == len(d) and doc["parts"] == list(ATTRIBUTION_PARTS)
    one = doc["requests"][int(hurt[0])]
    assert one["id"] == int(d.ids[hurt[0]])
    assert sum(one["causes_ms"]["e2el_ms"].values()) == pytest.approx(one["change_ms"]["e2el_ms"], abs=1e-6)
    assert one["b"]["e2el_ms"] - one["a"]["e2el_ms"] == pytest.approx(one["change_ms"]["e2el_ms"])
    counts = doc["by_e2el"]
    assert counts["hurt"] + counts["helped"] + counts["unchanged"] == len(d)


def test_ttft_split_is_the_attribution_at_the_first_token():
    """Result.attr_first covers arrival -> first token, on one engine, replicas and disaggregated pools; the
    whole-latency row only grows after it."""
    base = dict(hardware="h100", model="llama-3-8b", workload="chat", rate=20.0, num_requests=60, seed=4)
    for extra in ({}, {"replicas": 2}, {"prefill_replicas": 1, "decode_replicas": 1},
                  {"workload": "rag", "hardware": "rtx3050", "max_model_len": 8192, "model": "llama-3.2-1b", "kv_blocks": 700,
                   "preemption": "recompute", "rate": 6.0}):
        res = run(Scenario(**{**base, **extra}))
        done = res.finished
        ttft_s = res.first_token_s[done] - res.requests.arrival_s[done]
        assert np.allclose(res.attr_first[done].sum(axis=1), ttft_s, rtol=1e-9, atol=1e-9), extra
        assert (res.attr_first[done] <= res.attribution[done] + 1e-12).all(), extra


@pytest.mark.parametrize("change, said", [
    ({"seed": 4}, "different requests: request 0's"),
    ({"rate": 7.0}, "arrival_s"),
    ({"num_requests": 20}, "A has 36, B 20"),
    ({"workload": "chat"}, "different requests"),
])
def test_runs_over_different_requests_are_refused(runs, change, said):
    other = run(Scenario(scheduler="fcfs", **{**PRESETS["rag"], **change}))
    with pytest.raises(RequestsDiffer, match=said):
        request_diff(runs["rag", "fcfs"], other)


def test_whole_scenarios_over_the_same_requests_compare():
    """Two deployments (another GPU, a token budget) over the same requests: an A/B of whole scenarios."""
    base = dict(workload="chat", rate=10.0, num_requests=40, seed=2, model="llama-3.2-1b")
    a = run(Scenario(scheduler="fcfs", hardware="rtx3050", max_model_len=8192, **base))
    b = run(Scenario(scheduler="chunked", hardware="a100", token_budget=512, **base))
    assert _check_adds_up(a, b)
    assert request_diff(a, b).mean_change_ms()["e2el_ms"] < 0  # the bigger GPU is faster


# ----- the CLI: sched-sim diff -----
CLI_A = "scheduler=fcfs&workload=rag&hardware=rtx3050&max_model_len=8192&num_requests=30&seed=3"
CLI_B = "schedulers=chunked,fcfs&workload=rag&hardware=rtx3050&max_model_len=8192&num_requests=30&seed=3"


def _cli(capsys, argv):
    from app.cli import main

    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_carries_every_request_and_the_totals(capsys):
    import json

    code, out, err = _cli(capsys, ["diff", "--a", CLI_A, "--b", CLI_B, "--json", "--top", "3"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["a"]["scheduler"] == "fcfs" and doc["b"]["scheduler"] == "chunked"  # B's first scheduler
    assert "note: --b names 2 schedulers (chunked, fcfs); the A/B runs its first, chunked" in err
    assert "--a names" not in err
    assert len(doc["requests"]) == doc["compared"] == 30
    for r in doc["requests"]:
        assert set(r["change_ms"]) == set(METRICS)
        # seven values, each rounded to 6 places
        assert sum(r["causes_ms"]["e2el_ms"].values()) == pytest.approx(r["change_ms"]["e2el_ms"], abs=4e-6)
    mean = sum(r["change_ms"]["e2el_ms"] for r in doc["requests"]) / 30
    # Each request's values are written rounded to 6 places (TEXT_DECIMALS): the mean over them, within half that.
    assert doc["mean_change_ms"]["e2el_ms"] == pytest.approx(mean, abs=5e-7)
    assert set(doc["causes_ms"]) == set(CAUSE_METRICS)
    assert 0 < len(doc["most_hurt"]) <= 3
    worst = doc["most_hurt"][0]
    assert doc["requests"][worst]["change_ms"]["e2el_ms"] == max(r["change_ms"]["e2el_ms"] for r in doc["requests"])
    t = doc["timelines"][str(worst)]
    assert t["a"] and t["b"] and t["a"][0][0] in ("queued", "prefill")


def test_cli_tables_list_the_most_hurt_with_both_timelines(capsys):
    code, out, err = _cli(capsys, ["diff", "--a", CLI_A + "&seeds=3", "--b", CLI_B, "--top", "2", "--by", "ttft_ms"])
    assert code == 0, err
    assert "note: --a asks for seeds=3; the A/B compares the requests of one run, seed 3" in err
    assert "Most hurt by TTFT" in out and "mean change per request (ms)" in out
    assert out.count("    A  ") == out.count("    B  ") >= 1  # each listed request: A's timeline, B's below it
    for part in ATTRIBUTION_PARTS:
        assert part.replace("_", " ") in out


@pytest.mark.parametrize("a, b, said", [
    (CLI_A, CLI_B.replace("seed=3", "seed=4"), "--b: the runs have different requests"),
    (CLI_A, CLI_B + "&rate=abc", "--b: --rate: must be a number"),
    (CLI_A.replace("fcfs", "nope"), CLI_B, "--a: --scheduler: must be one of"),
    (CLI_A + "&upload=abc", CLI_B, "--a: its trace was uploaded"),
])
def test_cli_refuses_bad_input_naming_the_run(capsys, a, b, said):
    code, out, err = _cli(capsys, ["diff", "--a", a, "--b", b])
    assert code == 2 and said in err and "Traceback" not in err


# ----- the web: /api/diff, /diff and the results page's card -----
WEB_A = "scheduler=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=30&seed=3"
WEB_B = WEB_A.replace("fcfs", "chunked")


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from app.web import app

    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        yield c


def test_api_diff_answers_the_clis_document(client, capsys):
    import json
    from urllib.parse import urlencode

    r = client.get("/api/diff?" + urlencode({"a": WEB_A, "b": WEB_B, "top": 3}))
    assert r.status_code == 200, r.text[:300]
    api = r.json()
    code, out, _ = _cli(capsys, ["diff", "--a", WEB_A, "--b", WEB_B, "--json", "--top", "3"])
    cli = json.loads(out)
    for key in ("requests", "mean_change_ms", "causes_ms", "most_hurt", "most_helped", "timelines", "by_e2el"):
        assert api[key] == cli[key], key
    assert api["a"]["scheduler"] == "fcfs" and api["b"]["scheduler"] == "chunked"
    summary = client.get("/openapi.json").json()["paths"]["/api/diff"]["get"]["summary"]
    assert "a=QUERY&b=QUERY" in summary


@pytest.mark.parametrize("params, field, said", [
    ({"a": WEB_A}, "b", "give run B"),
    ({"a": WEB_A, "b": WEB_B.replace("seed=3", "seed=4")}, "b", "different requests"),
    ({"a": WEB_A + "&rate=x", "b": WEB_B}, "a", "rate:"),
    ({"a": WEB_A, "b": WEB_B, "by": "p99"}, "by", "must be one of"),
    ({"a": WEB_A, "b": WEB_B, "top": "0"}, "top", "from 1 to"),
    ({"a": WEB_A, "b": WEB_B, "scheduler": "fcfs"}, "scheduler", "not a parameter here"),
])
def test_api_diff_names_the_bad_parameter(client, params, field, said):
    from urllib.parse import urlencode

    r = client.get("/api/diff?" + urlencode(params))
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert any(d["loc"] == ["query", field] and said in d["msg"] for d in detail), detail


def test_the_results_page_offers_the_ab_of_two_compared_schedulers(client):
    import re
    from html import unescape
    from urllib.parse import parse_qsl

    page = client.get("/?schedulers=fcfs&schedulers=chunked&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=30").text
    assert 'id="card-request-diff"' in page
    options = re.findall(r'<select name="a"[^>]*>(.*?)</select>', page, re.S)[0]
    queries = {name: unescape(q) for q, name in re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', options)}
    assert set(queries) == {"fcfs", "chunked"}
    assert dict(parse_qsl(queries["chunked"]))["schedulers"] == "chunked"
    # What the form sends opens the A/B page, with its most hurt requests and their timelines.
    from urllib.parse import urlencode

    r = client.get("/diff?" + urlencode({"a": queries["fcfs"], "b": queries["chunked"]}))
    assert r.status_code == 200
    assert 'id="diff-hurt"' in r.text and r.text.count('data-figure="diff-timeline"') >= 2
    one = client.get("/?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=30").text
    assert 'id="card-request-diff"' not in one  # one scheduler: nothing to pair


def test_cli_diff_of_speculative_decoding_blames_decode_not_prefill(capsys):
    """EAGLE on H100/llama-3-8b/chat at 20 req/s, where it shortens E2EL: the diff puts the gain in decode. Prefill
    happens before the first token, so each request's prefill change is its TTFT's (the steps verifying draft
    tokens were counted as prefill, and the diff blamed prefill +2,189 ms on EAGLE)."""
    import json

    a = "hardware=h100&model=llama-3-8b&workload=chat&rate=20&num_requests=100&seed=1"
    code, out, err = _cli(capsys, ["diff", "--a", a, "--b", a + "&spec_method=eagle", "--json", "--no-timelines"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["compared"] == 100 and doc["mean_change_ms"]["e2el_ms"] < 0  # EAGLE matters here
    causes = doc["causes_ms"]["e2el_ms"]
    assert min(causes, key=causes.get) == "decode"
    assert max(causes, key=lambda p: abs(causes[p])) == "decode"
    for r in doc["requests"]:
        assert r["causes_ms"]["e2el_ms"]["prefill"] == pytest.approx(r["causes_ms"]["ttft_ms"]["prefill"], abs=4e-6)
