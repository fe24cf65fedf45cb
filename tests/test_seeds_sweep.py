"""Honest statistics over seeds beyond one run (issue 9, item 6): sweeps whose points are means with 95%
intervals, the knee read off the attainment band, and the same on every face (CLI, JSON API, dashboard)."""

from __future__ import annotations

import json
import re

import pytest

from app.cli import main as cli_main
from app.web import inputs, service
from app.web.figures.goodput import goodput_figure
from sim_core import Scenario, run
from sim_core.statistics import aggregate
from sim_core.studies.sweep import knee_interval, knee_rate, sweep

BASE = Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", duration=10, seed=5, seeds=3)
RATES = [1.0, 4.0, 8.0]
QUERY = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&duration=10&seed=5"


@pytest.fixture(scope="module")
def points():
    return sweep(BASE, ["fcfs", "chunked"], RATES, workers=1)


def test_a_point_is_the_mean_of_its_seeds_with_their_interval(points):
    point = points["chunked"][1]
    assert point["rate"] == 4.0 and point["seeds"] == [5, 6, 7]
    runs = [run(BASE.model_copy(update={"scheduler": "chunked", "rate": 4.0, "seed": s, "seeds": 1})).metrics
            for s in (5, 6, 7)]
    means, ci = aggregate(runs)
    assert point["metrics"] == means and point["ci95"] == ci
    low, high = point["ci95"]["ttft_ms"]["p99"]
    assert low <= point["metrics"]["ttft_ms"]["p99"] <= high


def test_the_knee_interval_brackets_the_knee(points):
    for pts in points.values():
        low, high = knee_interval(pts, 0.9)
        knee = knee_rate(pts, 0.9)
        order = [-1.0 if k is None else k for k in (low, knee, high)]
        assert order == sorted(order)
    # Past the knee of every seed's lower edge the band may still reach the target; a band that never meets it
    # has no knee at either edge.
    hopeless = [{"rate": r, "metrics": {"slo_attainment": 0.2}, "ci95": {"slo_attainment": [0.1, 0.3]}}
                for r in RATES]
    assert knee_interval(hopeless, 0.9) == (None, None)


def test_one_seed_has_no_interval():
    pts = sweep(BASE.model_copy(update={"seeds": 1}), ["fcfs"], RATES[:1], workers=1)["fcfs"]
    assert "ci95" not in pts[0] and knee_interval(pts, 0.9) is None


def test_cli_sweep_over_seeds(capsys):
    argv = ["sweep", "--schedulers", "chunked", "--hardware", "rtx3050", "--max-model-len", "8192", "--min-rate", "2", "--max-rate", "6",
            "--step", "4", "--duration", "10", "--workers", "1", "--seeds", "2"]
    assert cli_main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    entry = doc["schedulers"]["chunked"]
    first = doc["scenario"]["seed"]
    assert all(p["seeds"] == [first, first + 1] and "ci95" in p for p in entry["points"])
    assert len(entry["knee_interval"]) == 2
    assert cli_main(argv) == 0
    text = capsys.readouterr().out
    assert "±" in text and "95% band" in text


def test_api_sweep_over_seeds(client):
    r = client.get(f"/api/sweep?{QUERY}&rate_min=2&rate_max=6&rate_step=4&seeds=2")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["seeds"] == [5, 6]
    for entry in body["schedulers"].values():
        assert len(entry["knee_interval"]) == 2
        for p in entry["points"]:
            assert p["goodput"] == p["metrics"]["goodput"] and len(p["ci95"]["goodput"]) == 2


def test_seeds_count_in_a_sweeps_work_budget(client):
    # Within the request budget with one seed, over it with five: the answer names rate_max and the seeds.
    rates = "&rate_min=4&rate_max=32&rate_step=4"
    query = QUERY.replace("duration=10", "duration=600") + rates
    one = inputs.parse_request(inputs.query_to_dict(tuple(kv.split("=")) for kv in query.split("&")))
    assert one.sweep is not None
    r = client.get(f"/api/sweep?{query}&seeds=5")
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][-1] == "rate_max" and "5 seeds" in r.text


def test_the_dashboard_shows_means_with_intervals_over_seeds(client):
    page = client.get(f"/?{QUERY}&seeds=3")
    assert page.status_code == 200, page.text
    assert "Table: means over 3 seeds (5 to 7)" in page.text
    assert re.search(r'\d <span class="half-width">± \d', page.text)  # the half-width can wrap under its mean
    api = client.get(f"/api/run?{QUERY}&seeds=3").json()
    assert "ci95" in api["schedulers"]["chunked"]
    # The goodput panel draws a band per scheduler around each mean line, and shades the knee interval.
    sweep_query = f"{QUERY}&seeds=2&rate_min=2&rate_max=6&rate_step=4"
    assert client.get(f"/goodput?{sweep_query}", headers={"HX-Request": "true"}).status_code == 200
    req = inputs.parse_request(inputs.query_to_dict(tuple(kv.split("=")) for kv in sweep_query.split("&")))
    job = service.start_sweep(req)  # the page's job, found again
    figure = goodput_figure(job.future.result())
    bands = [t for t in figure["data"] if t.get("name", "").endswith("95% band")]
    assert len(bands) == 2 * 2 * 2  # 2 schedulers x (goodput, attainment) x (upper edge, filled lower edge)
    assert sum(1 for t in bands if t.get("fill") == "tonexty") == 4
