"""The dashboard's Frontier card (app/web/figures/frontier.py, app/web/frontier_page.py): the card on the results
page proposes GPUs where the model fits, /frontier runs the sweep of every configuration that fits each GPU as a
background job the card polls until its figure (each GPU's envelope, a curve per configuration) is drawn,
/api/frontier answers its points, configurations and envelopes, bad inputs are named."""

from __future__ import annotations

import json
import re
import time

import pytest

from app.web import figures
from app.web.figures.frontier import frontier_figure, gpu_color, proposed_gpus
from sim_core import Scenario

PAGE = "hardware=rtx3050&max_model_len=8192&workload=rag&duration=10"
CARD = "frontier_gpus=rtx3050&frontier_gpus=h100&frontier_isl=256&frontier_osl=32&frontier_max_concurrency=4"


def _drawn(client, url: str) -> str:
    for _ in range(300):
        r = client.get(url)
        assert r.status_code == 200, r.text[:300]
        if 'id="plot-frontier"' in r.text:
            return r.text
        time.sleep(0.1)
    raise AssertionError("the frontier was not drawn in 30 s")


def test_the_card_is_registered_and_proposes_gpus_that_hold_the_model(client):
    assert figures.get("frontier") is not None and "frontier" not in figures.embeddable()
    r = client.get("/?" + PAGE)
    assert r.status_code == 200 and 'id="card-frontier"' in r.text
    ticked = re.findall(r'name="frontier_gpus" value="([\w.-]+)" checked', r.text)
    assert ticked[0] == "rtx3050" and len(ticked) == 3
    # 810 GB of llama-3.1-405b weights do not fit eight 80 GB H100s: the card proposes GPUs that hold them
    assert proposed_gpus(Scenario(hardware="h200", model="llama-3.1-405b", tp=8)) == ["h200", "b200", "mi300x"]


def _figure(text: str) -> dict:
    return json.loads(re.search(r'data-figure-for="plot-frontier">(.*?)</script>', text, re.S).group(1))


def test_a_frontier_is_drawn_as_each_gpus_envelope_over_a_curve_per_configuration(client):
    text = _drawn(client, f"/frontier?{PAGE}&{CARD}")
    doc = client.get(f"/api/frontier?{PAGE}&{CARD}").json()  # the same job, done
    assert doc["status"] == "done" and doc["concurrencies"] == [1, 2, 4]
    configs = {hw: [c["config"] for c in doc["configs"] if c["hardware"] == hw] for hw in ("rtx3050", "h100")}
    assert all(len(names) >= 2 for names in configs.values())  # several tp degrees fit a 1B model on each
    assert len(doc["points"]) == 3 * sum(map(len, configs.values()))
    assert {"hardware", "scenario", "concurrency", "tokens_per_s_per_user", "throughput_per_gpu",
            "cost_per_mtok", "config", "pareto"} <= set(doc["points"][0])
    assert set(doc["envelope"]) == {"rtx3050", "h100"} and len(doc["curves"]) == len(doc["configs"])
    # one model on every GPU: the page's (rtx3050's default), not each GPU's own default
    assert len({re.search(r"model=([\w.-]+)", p["scenario"]).group(1) for p in doc["points"]}) == 1
    fig = _figure(text)
    envelopes = {t["name"]: t for t in fig["data"] if t.get("showlegend", True)}
    assert set(envelopes) == {"rtx3050", "h100"}
    for hw, t in envelopes.items():
        assert t["line"]["color"] == gpu_color(hw) and t["line"]["width"] > 2
        assert [round(e["tokens_per_s_per_user"], 3) for e in doc["envelope"][hw]] == t["x"]
        assert {c for c, _, _ in t["customdata"]} <= set(configs[hw])  # hover names each point's configuration
    curves = [t for t in fig["data"] if t.get("showlegend", True) is False]
    assert sorted(t["name"] for t in curves) == sorted(f"{hw} {c}" for hw in configs for c in configs[hw])
    assert all(len(t["x"]) == 3 for t in curves)  # users 1, 2, 4
    assert "tokens/s per user" in fig["layout"]["xaxis"]["title"]["text"]
    line = re.search(r'id="frontier-configs">(.*?)</p>', text, re.S).group(1)
    assert all(f"<b>{hw}</b>: {', '.join(names)}" in line for hw, names in configs.items())


def test_the_cards_tp_and_ep_narrow_the_search(client):
    doc = _done(client, f"/api/frontier?{PAGE}&{CARD}&frontier_tp=1")
    assert {(c["hardware"], c["config"]) for c in doc["configs"]} == {("rtx3050", "tp1"), ("h100", "tp1")}
    assert len(doc["points"]) == 6


def _done(client, url: str) -> dict:
    for _ in range(300):
        doc = client.get(url).json()
        if doc["status"] != "running":
            return doc
        time.sleep(0.1)
    raise AssertionError("the frontier did not finish in 30 s")


@pytest.mark.parametrize(("query", "field"), [
    ("frontier_gpus=nope", "frontier_gpus"), ("frontier_gpus=h100&frontier_isl=0", "frontier_isl"),
    ("frontier_gpus=h100&frontier_max_concurrency=100000", "frontier_max_concurrency"),
    ("frontier_gpus=h100&frontier_basis=input", "frontier_basis"), ("frontier_gpus=h100&tp=9", "tp"),
    ("frontier_gpus=h100&frontier_min_tokens_per_s_per_user=-1", "frontier_min_tokens_per_s_per_user"),
    ("frontier_gpus=" + ",".join(["h100", "a100", "l4", "b200", "h200", "mi300x", "l40s"]), "frontier_gpus"),
    ("frontier_gpus=h100&frontier_tp=9", "frontier_tp"), ("frontier_gpus=h100&frontier_tp=two", "frontier_tp"),
    ("frontier_gpus=h100&frontier_ep=2", "frontier_ep"),  # the page's model is dense: no expert parallelism
])
def test_bad_input_is_refused_naming_it(client, query, field):
    r = client.get(f"/frontier?{PAGE}&{query}")
    assert r.status_code == 422 and f"{field}:" in r.text, r.text[:400]
    api = client.get(f"/api/frontier?{PAGE}&{query}")
    assert api.status_code == 422 and field in [d["field"] for d in api.json()["detail"]]


def test_a_frontier_of_more_points_than_the_server_draws_is_refused_naming_the_tp_degrees(client):
    # a mixture-of-experts model in all its configurations on six GPUs up to 256 users
    moe = "hardware=h100&model=qwen3-30b-a3b&workload=rag&duration=10"
    many = "frontier_gpus=h100,h200,b200,mi300x,b300,mi325x&frontier_max_concurrency=256"
    r = client.get(f"/frontier?{moe}&{many}")
    assert r.status_code == 422 and "frontier_tp:" in r.text and "points" in r.text, r.text[:400]
    assert client.get(f"/api/frontier?{moe}&{many}").json()["detail"][0]["field"] == "frontier_tp"
    narrowed = client.get(f"/api/frontier?{moe}&{many}&frontier_tp=8&frontier_ep=8")  # tp8 ep8 only: 54 points
    assert narrowed.status_code in (200, 202), narrowed.text[:300]
    client.post(f"/frontier/{narrowed.json()['id']}/cancel")


def test_a_gpu_the_model_does_not_fit_is_named_beside_the_others(client):
    text = _drawn(client, "/frontier?hardware=h100&model=llama-3-70b&quantization=fp8&tp=2&workload=rag"
                          "&frontier_gpus=h100,rtx3050&frontier_isl=128&frontier_osl=16&frontier_max_concurrency=2")
    assert "<b>rtx3050</b>" in text and "rtx3050 has 8 GB" in text


def test_a_gone_job_says_so(client):
    assert client.get("/frontier/0123456789abcdef").status_code == 404
    assert client.post("/frontier/0123456789abcdef/cancel").status_code == 404


def test_the_figure_draws_the_envelope_over_the_configurations_curves():
    def point(config, users, x, y, cost=1.0):
        return {"hardware": "h100", "config": config, "concurrency": users, "tokens_per_s_per_user": x,
                "throughput_per_gpu": y, "cost_per_mtok": cost}

    pts = [point("tp2", 1, 50.0, 100.0), point("tp2", 8, 40.0, 300.0), point("tp4", 1, 80.0, 60.0),
           point("tp4", 8, 38.0, 200.0, None)]  # tp4 at 8 users: beaten by tp2 at 8 on both axes
    fig = frontier_figure(pts, "total")
    envelope, tp2, tp4 = fig["data"]
    assert envelope["name"] == "h100" and envelope["x"] == [40.0, 50.0, 80.0]  # the front of both curves
    assert [c for c, _, _ in envelope["customdata"]] == ["tp2", "tp2", "tp4"]
    assert (tp2["name"], tp2["x"], tp4["name"], tp4["x"]) == ("h100 tp2", [50.0, 40.0], "h100 tp4", [80.0, 38.0])
    assert tp4["customdata"][1] == [8, "no price"] and tp2["line"]["dash"] != tp4["line"]["dash"]
    assert frontier_figure([], "output")["layout"]["annotations"][0]["text"] == "No point to draw"


def test_cancel_stops_a_running_frontier(client):
    big = ("hardware=h100&model=llama-3-8b&workload=rag&frontier_gpus=h100,b200,a100,h200,mi300x,l40s"
           "&frontier_isl=8192&frontier_osl=8192&frontier_max_concurrency=256")
    started = client.get("/frontier?" + big)
    assert started.status_code == 200 and "points simulated" in started.text
    key = re.search(r'hx-get="/frontier/([0-9a-f]+)"', started.text).group(1)
    stopped = client.post(f"/frontier/{key}/cancel")
    assert stopped.status_code == 200
    for _ in range(100):  # the running point stops within milliseconds
        r = client.get(f"/frontier/{key}")
        if "data-cancelled" in r.text:
            break
        time.sleep(0.05)
    assert "Frontier cancelled" in r.text and 'id="plot-frontier"' not in r.text


def test_the_cheapest_point_at_a_floor_is_named_and_ringed(client):
    text = _drawn(client, f"/frontier?{PAGE}&{CARD}&frontier_min_tokens_per_s_per_user=1")
    doc = client.get(f"/api/frontier?{PAGE}&{CARD}&frontier_min_tokens_per_s_per_user=1").json()
    best = doc["cheapest"]
    assert best == min((p for p in doc["points"] if p["cost_per_mtok"] is not None), key=lambda p: p["cost_per_mtok"])
    line = re.search(r'id="frontier-cheapest">(.*?)</p>', text, re.S).group(1)
    assert f"<b>{best['hardware']}</b> {best['config']} with {best['concurrency']} users" in line
    fig = _figure(text)
    ring = next(t for t in fig["data"] if t["name"] == "cheapest at the floor")
    assert ring["x"] == [round(best["tokens_per_s_per_user"], 3)]
    unreachable = _drawn(client, f"/frontier?{PAGE}&{CARD}&frontier_min_tokens_per_s_per_user=99999")
    assert "No priced point gives each user" in unreachable
