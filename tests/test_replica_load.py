"""The replica-load figure (app/web/figures/replica_load.py), served at /embed/replica-load: per engine of a
cluster, the requests it served and its busy time, equal to what sim_core's own run of the same scenario reports;
a single engine's embed says the figure needs several engines, and its page has no such card."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from sim_core import RequestState, Scenario, run, views

BASE = dict(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=60, seed=5)
QUERY = "schedulers=fcfs,chunked&" + "&".join(f"{k}={v}" for k, v in BASE.items())
BLOB = re.compile(r'<script type="application/json" data-figure-for="plot-replica-load">(.*?)</script>', re.S)


def figure_of(response) -> dict:
    assert response.status_code == 200, response.text[:500]
    return json.loads(BLOB.search(response.text).group(1))


def test_four_replicas_load_is_what_the_core_reports(client):
    fig = figure_of(client.get(f"/embed/replica-load?{QUERY}&replicas=4"))
    for name in ("fcfs", "chunked"):
        res = run(Scenario(scheduler=name, replicas=4, **BASE))
        served, busy = (next(t for t in fig["data"] if t["name"] == name and t.get("yaxis", "y") == axis)
                        for axis in ("y", "y2"))
        assert served["x"] == busy["x"] == ["replica 0", "replica 1", "replica 2", "replica 3"]
        finished = res.status == RequestState.FINISHED
        assert served["y"] == [int(((res.replica_of == e) & finished).sum()) for e in range(4)]
        assert sum(served["y"]) == int(finished.sum()) > 0  # every completed request, once
        duration = views.STEP_COLUMNS.index("duration_s")
        for e, (log, share) in enumerate(zip(res.engine_logs, res.metrics["replicas"], strict=True)):
            # the engine's own busy total, as its metrics report it ...
            assert busy["y"][e] == pytest.approx(share["gpu_busy_fraction"] * res.metrics["duration_s"], abs=1e-4)
            assert served["y"][e] == share["completed"]
            # ... which is its step log's total when the log keeps every step (else an estimate from its samples)
            logged = float(log.steps[:, duration].sum()) * log.step_stride
            assert busy["y"][e] == (pytest.approx(logged, abs=1e-4) if log.step_stride == 1
                                    else pytest.approx(logged, rel=0.1))


def test_pools_show_each_engine_of_both_pools(client):
    fig = figure_of(client.get(f"/embed/replica-load?{QUERY}&prefill_replicas=1&decode_replicas=2&scheduler=fcfs"))
    res = run(Scenario(scheduler="fcfs", prefill_replicas=1, decode_replicas=2, **BASE))
    served = next(t for t in fig["data"] if t["name"] == "fcfs" and t.get("yaxis", "y") == "y")
    assert served["x"] == ["prefill 0", "decode 0", "decode 1"]
    assert served["y"] == [row["completed"] for row in res.metrics["replicas"]]
    finished = res.status == RequestState.FINISHED
    assert served["y"][0] == int(finished.sum())  # one prefill engine: every completed request's prefill
    # the decode engines' share: every completed request handed over (one wanting a single token never is)
    assert sum(served["y"][1:]) == int((finished & (res.handover.to_decode >= 0)).sum()) > 0
    assert not any(t["name"] == "chunked" for t in fig["data"])  # one panel of the comparison


def test_a_single_engine_needs_several(client):
    r = client.get(f"/embed/replica-load?{QUERY}")
    fig = figure_of(r)
    assert fig["data"] == []
    assert [a["text"] for a in fig["layout"]["annotations"]] == [
        "Replica load needs several engines: set replicas above 1, or prefill and decode pools "
        "(prefill_replicas, decode_replicas)."]
    page = client.get(f"/?{QUERY}")
    assert page.status_code == 200 and 'id="card-replica-load"' not in page.text
    cluster = client.get(f"/?{QUERY}&replicas=4")
    assert cluster.text.index('id="card-cluster-fcfs"') < cluster.text.index('id="card-replica-load"')
    assert np.isfinite(figure_of(cluster)["data"][0]["y"]).all()
