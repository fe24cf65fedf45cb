"""The dashboard's Frontier card (app/web/figures/frontier.py, app/web/frontier_page.py): the card on the results
page proposes GPUs where the model fits, /frontier runs the sweep as a background job the card polls until its
figure (a line per GPU) is drawn, /api/frontier answers its points, bad inputs are named."""

from __future__ import annotations

import json
import re
import time

import pytest
from fastapi.testclient import TestClient

from app.web import app, figures
from app.web.figures.frontier import frontier_figure, gpu_color, proposed_gpus
from sim_core import Scenario

PAGE = "hardware=rtx3050&max_model_len=8192&workload=rag&duration=10"
CARD = "frontier_gpus=rtx3050&frontier_gpus=h100&frontier_isl=256&frontier_osl=32&frontier_max_concurrency=4"


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        yield c


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


def test_a_frontier_is_drawn_as_a_line_per_gpu(client):
    text = _drawn(client, f"/frontier?{PAGE}&{CARD}")
    fig = json.loads(re.search(r'data-figure-for="plot-frontier">(.*?)</script>', text, re.S).group(1))
    lines = {t["name"]: t for t in fig["data"]}
    assert set(lines) == {"rtx3050", "h100"}
    for name, t in lines.items():
        assert t["marker"]["color"] == gpu_color(name) and len(t["x"]) == 3  # users 1, 2, 4
        assert t["x"] == sorted(t["x"])
    assert "tokens/s per user" in fig["layout"]["xaxis"]["title"]["text"]
    doc = client.get(f"/api/frontier?{PAGE}&{CARD}").json()  # the same job, done
    assert doc["status"] == "done" and doc["concurrencies"] == [1, 2, 4] and len(doc["points"]) == 6
    assert {"hardware", "scenario", "concurrency", "tokens_per_s_per_user", "throughput_per_gpu",
            "cost_per_mtok"} <= set(doc["points"][0])
    # one model on every GPU: the page's (rtx3050's default), not each GPU's own default
    assert len({re.search(r"model=([\w.-]+)", p["scenario"]).group(1) for p in doc["points"]}) == 1


@pytest.mark.parametrize(("query", "field"), [
    ("frontier_gpus=nope", "frontier_gpus"), ("frontier_gpus=h100&frontier_isl=0", "frontier_isl"),
    ("frontier_gpus=h100&frontier_max_concurrency=100000", "frontier_max_concurrency"),
    ("frontier_gpus=h100&frontier_basis=input", "frontier_basis"), ("frontier_gpus=h100&tp=9", "tp"),
    ("frontier_gpus=h100&frontier_min_tokens_per_s_per_user=-1", "frontier_min_tokens_per_s_per_user"),
    ("frontier_gpus=" + ",".join(["h100", "a100", "l4", "b200", "h200", "mi300x", "l40s"]), "frontier_gpus"),
])
def test_bad_input_is_refused_naming_it(client, query, field):
    r = client.get(f"/frontier?{PAGE}&{query}")
    assert r.status_code == 422 and f"{field}:" in r.text, r.text[:400]
    api = client.get(f"/api/frontier?{PAGE}&{query}")
    assert api.status_code == 422 and field in [d["field"] for d in api.json()["detail"]]


def test_a_gpu_the_model_does_not_fit_is_named_beside_the_others(client):
    text = _drawn(client, "/frontier?hardware=h100&model=llama-3-70b&quantization=fp8&tp=2&workload=rag"
                          "&frontier_gpus=h100,rtx3050&frontier_isl=128&frontier_osl=16&frontier_max_concurrency=2")
    assert "<b>rtx3050</b>" in text and "rtx3050 has 8 GB" in text


def test_a_gone_job_says_so(client):
    assert client.get("/frontier/0123456789abcdef").status_code == 404
    assert client.post("/frontier/0123456789abcdef/cancel").status_code == 404


def test_the_figure_marks_points_off_a_gpus_front_apart():
    pts = [{"hardware": "h100", "tokens_per_s_per_user": 50.0, "throughput_per_gpu": 100.0, "concurrency": 1,
            "cost_per_mtok": 1.0, "pareto": True},
           {"hardware": "h100", "tokens_per_s_per_user": 40.0, "throughput_per_gpu": 90.0, "concurrency": 2,
            "cost_per_mtok": None, "pareto": False}]
    fig = frontier_figure(pts, "total")
    assert [t["mode"] for t in fig["data"]] == ["lines+markers", "markers"]
    assert fig["data"][1]["customdata"] == [[2, "no price"]]
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
    assert f"<b>{best['hardware']}</b> with {best['concurrency']} users" in line
    fig = json.loads(re.search(r'data-figure-for="plot-frontier">(.*?)</script>', text, re.S).group(1))
    ring = next(t for t in fig["data"] if t["name"] == "cheapest at the floor")
    assert ring["x"] == [round(best["tokens_per_s_per_user"], 3)]
    unreachable = _drawn(client, f"/frontier?{PAGE}&{CARD}&frontier_min_tokens_per_s_per_user=99999")
    assert "No priced point gives each user" in unreachable
