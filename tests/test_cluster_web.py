"""Clusters on the dashboard and the web API (issue 10 item 4): a replicas=N or prefill/decode scenario renders
200 with the cluster view in place of the KV animation, its per-engine data equal to what sim_core's own run of
the same scenario reports; bad cluster inputs are a 422 naming the field; the web's limits count every engine."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.web import app, clusterview
from app.web.inputs import MAX_BLOCK_TABLE_ENTRIES, work_problems
from sim_core import Scenario, resolve, run
from sim_core.kernel.state import S_KV_BLOCKS, S_RUNNING, S_START, S_WAITING
from sim_core.runner import make_requests

FIGURE_JSON = re.compile(r'<script type="application/json" (data-[a-z-]+)="([^"]+)">(.*?)</script>', re.S)
BASE = dict(hardware="rtx3050", workload="chat", num_requests=60, seed=5)
REPLICAS = "schedulers=fcfs,chunked&hardware=rtx3050&workload=chat&num_requests=60&seed=5&replicas=2"
POOLS = ("schedulers=fcfs&hardware=rtx3050&workload=rag&num_requests=40&seed=3&prefill_replicas=1"
         "&decode_replicas=2")


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        yield c


def blobs(html: str) -> dict[str, dict]:
    def strict(token):
        raise ValueError(f"non-JSON number {token}")

    return {target: json.loads(body, parse_constant=strict) for kind, target, body in FIGURE_JSON.findall(html)
            if kind == "data-figure-for"}


def fields_of(response) -> list[str]:
    assert response.status_code == 422, response.text
    return [d["loc"][-1] for d in response.json()["detail"]]


def engine_rows(fig: dict) -> list[dict]:
    """Per engine row of a cluster figure (y axis titled with the engine's name): its traces by name."""
    layout = fig["layout"]
    rows = []
    for key in sorted((k for k in layout if re.fullmatch(r"yaxis\d*", k)), key=lambda k: int(k[5:] or 1)):
        title = layout[key].get("title", {}).get("text", "")
        if re.fullmatch(r"(replica|prefill|decode) \d+", title):
            ref = "y" + key[5:]
            traces = {t["name"]: t for t in fig["data"] if t.get("yaxis") == ref}
            kv_ref = next(("y" + k[5:] for k, ax in layout.items() if k.startswith("yaxis")
                           and ax.get("overlaying") == ref), None)
            traces.update({t["name"]: t for t in fig["data"] if kv_ref and t.get("yaxis") == kv_ref})
            rows.append({"name": title, "traces": traces})
    return rows


def rounded(a, digits):
    return [None if not np.isfinite(x) else float(x) for x in np.round(np.asarray(a, float), digits)]


def check_engines_against_core(fig: dict, res) -> None:
    rows = engine_rows(fig)
    assert [r["name"] for r in rows] == [log.name for log in res.engine_logs]
    for row, log in zip(rows, res.engine_logs, strict=True):
        steps = log.steps
        t = row["traces"]
        if len(steps) > clusterview.ENGINE_POINTS:  # bucketed in time, each point its bucket's most
            assert 0 < len(t["running requests"]["y"]) <= clusterview.ENGINE_POINTS
            assert max(t["running requests"]["y"]) == int(steps[:, S_RUNNING].max())
            assert max(t["waiting requests"]["y"]) == int(steps[:, S_WAITING].max())
            continue
        assert 0 < len(steps)  # a few engines: every logged step, not bucketed
        assert t["running requests"]["x"] == rounded(steps[:, S_START], 4)
        assert t["running requests"]["y"] == steps[:, S_RUNNING].astype(int).tolist()
        assert t["waiting requests"]["y"] == steps[:, S_WAITING].astype(int).tolist()
        assert t["KV in use (% of pool)"]["y"] == rounded(steps[:, S_KV_BLOCKS] * 100 / log.num_blocks, 2)


def test_a_large_clusters_rows_keep_each_buckets_peak():
    """Many engines share a point budget: a row is bucketed in time, each point the most of its bucket."""
    rng = np.random.default_rng(0)
    steps = {"start_s": np.cumsum(rng.uniform(0.001, 0.02, 1000)), "waiting": rng.integers(0, 50, 1000),
             "running": rng.integers(0, 9, 1000), "kv_blocks": rng.integers(0, 100, 1000)}
    rows = clusterview._engine_rows(steps, 100, points=100)
    assert 50 <= len(rows["t"]) <= 100 and rows["steps_logged"] == 1000
    assert max(rows["waiting"]) == steps["waiting"].max() and max(rows["kv_pct"]) == steps["kv_blocks"].max()
    # Each point: the first step of its bucket, and the most of the steps up to the next point.
    idx = np.searchsorted(steps["start_s"].round(4), rows["t"])
    for k, (a, b) in enumerate(zip(idx, list(idx[1:]) + [1000], strict=True)):
        assert rows["running"][k] == steps["running"][a:b].max()


def test_replicas_page_shows_the_cluster_in_place_of_the_kv_view(client):
    r = client.get("/?" + REPLICAS)
    assert r.status_code == 200, r.text[-2000:]
    figs = blobs(r.text)
    assert {"plot-cluster-fcfs", "plot-cluster-chunked", "plot-cluster-requests-fcfs"} <= set(figs)
    assert "plot-kv" not in figs and "plot-timeline" not in figs  # no frames, no merged step log
    assert r.text.count('data-figure="cluster"') == 2
    assert 'data-engines="2"' in r.text
    assert "<li>2 replicas, round_robin router</li>" in r.text
    for name in ("fcfs", "chunked"):
        res = run(Scenario(scheduler=name, replicas=2, **BASE))
        fig = figs[f"plot-cluster-{name}"]
        check_engines_against_core(fig, res)
        # The router's row: each engine's arrivals are the requests sim_core sent it, at their arrival times.
        for e in range(2):
            trace = next(t for t in fig["data"] if t.get("yaxis") == "y" and t["name"] == f"replica {e}")
            mine = np.flatnonzero(res.replica_of == e)
            assert sorted(trace["x"]) == sorted(rounded(res.requests.arrival_s[mine], 4))
            assert f"({len(mine):,} requests in all)" in trace["hovertemplate"]
        # The engine table is metrics["replicas"].
        table = re.search(rf'data-engines-for="plot-cluster-{name}">(.*?)</table>', r.text, re.S).group(1)
        for share in res.metrics["replicas"]:
            assert f"{share['served_tokens']:,}" in table and f"{share['requests']:,}" in table
    # The cluster metrics are rows of the metrics table.
    table = r.text[r.text.index('id="card-metrics"'):]
    assert "Load imbalance" in table and "GPUs" in table


def test_disaggregated_page_shows_pools_and_kv_transfers(client):
    r = client.get("/?" + POOLS)
    assert r.status_code == 200, r.text[-2000:]
    fig = blobs(r.text)["plot-cluster-fcfs"]
    res = run(Scenario(scheduler="fcfs", hardware="rtx3050", workload="rag", num_requests=40, seed=3,
                       prefill_replicas=1, decode_replicas=2))
    check_engines_against_core(fig, res)
    assert [log.name for log in res.engine_logs] == ["prefill 0", "decode 0", "decode 1"]
    # KV transfers: one segment per hand-over, from its transfer start to its delivery, per decode engine.
    h = res.handover
    for d in range(2):
        trace = next(t for t in fig["data"] if t["name"] == f"KV → decode {d}")
        mine = np.flatnonzero(h.to_decode == d)
        starts, ends = trace["x"][0::3], trace["x"][1::3]
        assert len(starts) == len(mine) > 0
        assert sorted(starts) == sorted(rounded(h.transfer_start[mine], 5))
        assert sorted(ends) == sorted(rounded(h.delivered[mine], 5))
    assert "<li>1 prefill + 2 decode engines, KV over ib400, round_robin router</li>" in r.text
    metrics = r.text[r.text.index('id="card-metrics"'):]
    for label in ("KV transfer", "KV transfers", "Load imbalance"):
        assert label in metrics
    # The API answers the same scenario with the cluster metrics.
    api = client.get("/api/run?" + POOLS).json()["schedulers"]["fcfs"]["metrics"]
    assert api["kv_transfers"] == res.metrics["kv_transfers"] == int((h.to_decode >= 0).sum())
    assert [row["served_tokens"] for row in api["replicas"]] == [row["served_tokens"]
                                                                 for row in res.metrics["replicas"]]


def test_request_bars_are_coloured_by_the_engine_that_served_each(client):
    r = client.get("/?" + REPLICAS)
    fig = blobs(r.text)["plot-cluster-requests-fcfs"]
    res = run(Scenario(scheduler="fcfs", replicas=2, **BASE))
    for e in range(2):
        trace = next(t for t in fig["data"] if t["name"] == f"replica {e}: decode")
        rows = {y for y in trace["y"] if y is not None}
        assert rows == set(np.flatnonzero((res.replica_of == e) & res.finished).tolist())


def test_cluster_embed_and_downloads(client):
    embed = client.get("/embed/kv?" + POOLS)
    assert embed.status_code == 200 and 'data-figure="cluster"' in embed.text
    one = POOLS.replace("schedulers=fcfs", "scheduler=fcfs")
    trace = client.get("/download/trace.json?" + one)
    assert trace.status_code == 200
    names = {e["args"]["name"] for e in trace.json()["traceEvents"] if e.get("name") == "process_name"}
    assert {"prefill 0", "decode 0", "decode 1"} <= names
    csv = client.get("/download/requests.csv?" + one)
    assert csv.status_code == 200 and len(csv.text.strip().splitlines()) == 41


def test_single_engine_page_keeps_its_kv_view(client):
    r = client.get("/?" + REPLICAS.replace("&replicas=2", ""))
    figs = blobs(r.text)
    assert "plot-kv" in figs and "plot-timeline" in figs
    assert 'data-figure="cluster"' not in r.text


@pytest.mark.parametrize("query, field", [
    ("replicas=65", "replicas"),
    ("replicas=0", "replicas"),
    ("replicas=two", "replicas"),
    ("prefill_replicas=2", "decode_replicas"),  # one pool without the other
    ("replicas=2&prefill_replicas=1&decode_replicas=1", "replicas"),
    ("router=fastest", "router"),
    ("replicas=2&router_staleness_ms=-5", "router_staleness_ms"),
    ("prefill_replicas=1&decode_replicas=1&kv_link=carrier-pigeon", "kv_link"),
])
def test_bad_cluster_input_is_422_naming_the_field(client, query, field):
    assert field in fields_of(client.get("/api/run?hardware=rtx3050&num_requests=10&" + query))
    page = client.get("/?hardware=rtx3050&num_requests=10&" + query, headers={"HX-Request": "true"})
    assert page.status_code == 422 and f'id="err-{field}"' in page.text


def test_every_engines_block_table_counts_against_the_web_limit(client):
    """One engine's block table fits; 64 of them do not, and the answer names max_seqs with a value that fits."""
    s = Scenario(hardware="rtx3050", workload="rag", num_requests=20, seed=1, max_seqs=4096)
    reqs = make_requests(s, resolve(s))
    blocks = -(-int((reqs.prompt_tokens + reqs.output_tokens).max()) // s.block_size)
    assert 4096 * blocks <= MAX_BLOCK_TABLE_ENTRIES < 64 * 4096 * blocks  # the case this test is about
    assert work_problems(s, 2048, reqs) == []
    cluster = s.model_copy(update={"replicas": 64})
    (field, message), = work_problems(cluster, 2048, reqs)
    allowed = int(re.search(r"at most ([\d,]+)", message).group(1).replace(",", ""))
    assert field == "max_seqs" and 64 * allowed * blocks <= MAX_BLOCK_TABLE_ENTRIES < 64 * (allowed + 1) * blocks
    r = client.get("/api/run?hardware=rtx3050&workload=rag&num_requests=20&seed=1&max_seqs=4096&replicas=64")
    assert fields_of(r) == ["max_seqs"]


def metric_cell(html: str, label: str) -> str:
    """The first value cell of the metrics table's row whose name is `label`."""
    table = html[html.index('id="card-metrics"'):]
    m = re.search(r'class="term"[^>]*>' + re.escape(label) + r'</button>.*?<td class="num[^"]*">([^<]*)<', table,
                  re.S)
    assert m, label
    return m.group(1).strip()


def test_metrics_table_shows_the_cluster_metrics_as_the_core_reports_them(client):
    from app.web.present import fmt_value

    query = "schedulers=chunked&hardware=a100&workload=rag&num_requests=30&seed=2&prefill_replicas=1&decode_replicas=2"
    r = client.get("/?" + query)
    assert r.status_code == 200
    m = run(Scenario(scheduler="chunked", hardware="a100", workload="rag", num_requests=30, seed=2,
                     prefill_replicas=1, decode_replicas=2)).metrics
    assert m["cost_per_mtok"] is not None and m["kv_transfers"] == 30
    for label, value, kind in (("Cost per 1M output tokens", m["cost_per_mtok"], "usd"),
                               ("Load imbalance", m["load_imbalance"], "average"),
                               ("Mean KV transfer", m["kv_transfer_ms"]["mean"], "ms"),
                               ("P99 KV transfer", m["kv_transfer_ms"]["p99"], "ms"),
                               ("KV transfers", m["kv_transfers"], "count"),
                               ("GPUs", m["gpus"], "count")):
        assert metric_cell(r.text, label) == fmt_value(value, kind), label
