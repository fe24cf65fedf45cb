"""Clusters on the dashboard and the web API (issue 10 item 4, issue 21): a replicas=N or prefill/decode scenario
renders 200 with the KV view of one engine (picked in a list, the busiest first; /kv/engine answers another's) and
the cluster view under it, the Gantt of every request (each one's engines in its hover, every request of a zoomed
window) and a Perfetto trace with a process per engine and request tracks, all equal to what sim_core's own run of
the same scenario reports; bad cluster inputs are a 422 naming the field; the web's limits count every engine."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from app.web import clusterview
from app.web.inputs import MAX_BLOCK_TABLE_ENTRIES, work_problems
from app.web.kvstates import CELL_HELD
from sim_core import BlockState, Scenario, resolve, run
from sim_core.kernel.state import S_DURATION, S_KV_BLOCKS, S_RUNNING, S_START, S_WAITING
from sim_core.runner import make_requests

FIGURE_JSON = re.compile(r'<script type="application/json" (data-[a-z-]+)="([^"]+)">(.*?)</script>', re.S)
BASE = dict(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=60, seed=5)
REPLICAS = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=60&seed=5&replicas=2"
POOLS = ("schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=40&seed=3&prefill_replicas=1"
         "&decode_replicas=2")


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
            assert 0 < len(t["running requests"]["y"]) <= 2 * clusterview.ENGINE_POINTS  # with idle ends
            assert max(t["running requests"]["y"]) == int(steps[:, S_RUNNING].max())
            assert max(t["waiting requests"]["y"]) == int(steps[:, S_WAITING].max())
            continue
        assert 0 < len(steps)  # a few engines: every logged step, not bucketed
        # Each step, then where the engine idled after it (no step right at its end, or its last step) a point
        # at its end with none running, its other values held.
        start, end = steps[:, S_START], steps[:, S_START] + steps[:, S_DURATION]
        points = []  # (time, running, the step whose waiting and KV use it shows)
        for k in range(len(steps)):
            points.append((start[k], int(steps[k, S_RUNNING]), k))
            if k == len(steps) - 1 or start[k + 1] > end[k] + 1e-9:
                points.append((end[k], 0, k))
        assert len(steps) < len(points) <= 2 * len(steps)
        at = [k for _, _, k in points]
        assert t["running requests"]["x"] == rounded([x for x, _, _ in points], 4)
        assert t["running requests"]["y"] == [r for _, r, _ in points]
        assert t["waiting requests"]["y"] == steps[at, S_WAITING].astype(int).tolist()
        assert t["KV in use (% of pool)"]["y"] == rounded(steps[at, S_KV_BLOCKS] * 100 / log.num_blocks, 2)


def held_at(rows: dict, key: str, t: float) -> float:
    """What an engine row's step line shows at time t: the last point's value at or before t."""
    return rows[key][int(np.searchsorted(rows["t"], t, side="right")) - 1]


@pytest.mark.parametrize("points", [1000, 40])
def test_an_idle_engine_is_drawn_running_nothing(points):
    """Issue 26: a step's `running` counts its batch, the finishing request too, so a line held from an engine's
    last step to its next drew the idle time between as "1 running". Between two bursts, and after the last
    step, the row says 0 running, bucketed (40 points for 400 steps) or not; waiting and KV keep their values."""
    burst = np.arange(200) * 0.01  # back to back: each step ends as the next starts
    steps = {"start_s": np.concatenate([burst, 10.0 + burst]), "duration_s": np.full(400, 0.01),
             "waiting": np.zeros(400), "running": np.ones(400), "kv_blocks": np.full(400, 30.0)}
    rows = clusterview._engine_rows(steps, 100, points=points)
    assert rows["bucketed"] == (points < 400)
    for t in (1.0, 5.0, 9.99, 11.0):
        expected = 0 if 2.0 <= t < 10.0 else 1  # the first burst ends at 2.0 s, the second starts at 10 s
        assert held_at(rows, "running", t) == expected, t
    assert held_at(rows, "running", 13.0) == 0 and rows["t"][-1] == pytest.approx(12.0, abs=1e-4)
    assert set(rows["kv_pct"]) == {30.0}
    # A sampled log (every 4th step) has gaps between its rows that are no idle time: nothing is added.
    sampled = clusterview._engine_rows({k: v[::4] for k, v in steps.items()}, 100, points=1000, step_stride=4)
    assert len(sampled["t"]) == 100 and set(sampled["running"]) == {1}


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


def test_replicas_page_shows_an_engines_kv_view_and_the_cluster(client):
    r = client.get("/?" + REPLICAS)
    assert r.status_code == 200, r.text[-2000:]
    figs = blobs(r.text)
    assert {"plot-cluster-fcfs", "plot-cluster-chunked", "plot-cluster-requests-fcfs"} <= set(figs)
    assert "plot-kv" in figs and "plot-timeline" not in figs  # one engine's frames; no merged step log
    assert r.text.index('id="card-kv"') < r.text.index('id="card-cluster-fcfs"')  # the cluster view under it
    assert r.text.count('data-figure="cluster"') == 2
    assert 'data-engines="2"' in r.text
    assert "<li>2 replicas, round_robin router, 2 GPUs in all</li>" in r.text
    for name in ("fcfs", "chunked"):
        res = run(Scenario(scheduler=name, replicas=2, **BASE), record_events=True)  # as the page runs it
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
    res = run(Scenario(scheduler="fcfs", hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40, seed=3,
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
    assert "<li>1 prefill + 2 decode engines, KV over ib400, round_robin router to the prefill engines, 3 GPUs in all</li>" in r.text
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
    assert 'id="plot-kv"' not in embed.text  # the embed of a cluster's card: the cluster view alone
    one = POOLS.replace("schedulers=fcfs", "scheduler=fcfs")
    trace = client.get("/download/trace.json?" + one)
    assert trace.status_code == 200
    check_trace(trace.json(), run(Scenario(scheduler="fcfs", hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40,
                                           seed=3, prefill_replicas=1, decode_replicas=2), record_events=True))
    csv = client.get("/download/requests.csv?" + one)
    assert csv.status_code == 200 and len(csv.text.strip().splitlines()) == 41


def check_trace(trace: dict, res) -> None:
    """A cluster's Perfetto trace: a process per engine (named as sim_core names it) with its steps, and a track per
    request whose slices are sim_core's timeline of that request."""
    from sim_core import timeline
    from sim_core.trace_export import ENGINE_PID_BASE, REQUEST_TID_BASE, REQUESTS_PID

    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    names = [log.name for log in res.engine_logs]
    assert processes == {REQUESTS_PID: "requests"} | {ENGINE_PID_BASE + e: n for e, n in enumerate(names)}
    for e, log in enumerate(res.engine_logs):  # every step of each engine, in its own process
        steps = [x for x in events if x["pid"] == ENGINE_PID_BASE + e and x.get("cat") == "step"]
        assert len(steps) == len(log.steps)
    tracks = {e["tid"] - REQUEST_TID_BASE for e in events if e.get("name") == "thread_name"
              and e["pid"] == REQUESTS_PID}
    assert tracks == set(range(len(res.requests)))
    slices = sorted((x["tid"] - REQUEST_TID_BASE, x["name"]) for x in events
                    if x["pid"] == REQUESTS_PID and x.get("cat") == "request" and x["ph"] == "X")
    assert slices == sorted((r, timeline.SEGMENT_KINDS[k]) for r, k, _, _ in timeline.request_segments(res))
    assert trace["metadata"]["requests_shown"] == len(res.requests) and not trace["metadata"]["notes"]


def test_single_engine_page_keeps_its_kv_view(client):
    r = client.get("/?" + REPLICAS.replace("&replicas=2", ""))
    figs = blobs(r.text)
    assert "plot-kv" in figs and "plot-timeline" in figs
    assert 'data-figure="cluster"' not in r.text
    assert "data-kv-engine" not in r.text  # no engine to pick


# ----- issue 21: the KV view, the Gantt and the Perfetto trace of a cluster -----
CLUSTERS = {
    "replicas": "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=60&seed=3&replicas=4",
    "pools": "schedulers=fcfs&hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=60&seed=3&prefill_replicas=1"
             "&decode_replicas=3",
}
CLUSTER_ENGINES = {"replicas": [f"replica {e}" for e in range(4)],
                   "pools": ["prefill 0", "decode 0", "decode 1", "decode 2"]}


def core_run(query: str, scheduler: str):
    """sim_core's own run of a page's scenario, recording what the web records (events, each engine's frames)."""
    from urllib.parse import parse_qsl

    from app.web import run_budget
    from app.web.inputs import PAGE_DEFAULTS, PAGE_SCHEDULERS, parse_request, query_to_dict

    req = parse_request(query_to_dict(parse_qsl(query)), defaults=PAGE_DEFAULTS, default_schedulers=PAGE_SCHEDULERS)
    s = req.for_scheduler(scheduler)
    return run(s, record_events=True, kv_frames=run_budget.recorded_frames_for(resolve(s)))


def used_blocks(runs: list[int], k: int) -> int:
    """Blocks held by requests in one frame's run-length coded cells (kvgrid: code = (owner + 1) * (k + 1) + used)."""
    return sum((code % (k + 1)) * length for code, length in zip(runs[0::2], runs[1::2], strict=True))


def page_select(html: str) -> tuple[list[str], str]:
    select = re.search(r"<select data-kv-engine[^>]*>(.*?)</select>", html, re.S).group(1)
    options = re.findall(r"<option( selected)?>([^<]+)</option>", select)
    return [name for _, name in options], next(name for chosen, name in options if chosen)


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_the_kv_view_of_a_cluster_is_each_engines_pool_as_sim_core_recorded_it(client, kind):
    query = CLUSTERS[kind]
    r = client.get("/?" + query)
    assert r.status_code == 200
    names, picked = page_select(r.text)
    assert names == CLUSTER_ENGINES[kind]
    schedulers = re.search(r"schedulers=([\w,]+)", query).group(1).split(",")
    runs = {name: core_run(query, name) for name in schedulers}
    served = np.sum([[row["served_tokens"] for row in res.metrics["replicas"]] for res in runs.values()], axis=0)
    assert picked == names[int(np.argmax(served))]  # the busiest engine, by tokens served
    embedded = json.loads(re.search(r'data-kv-frames-for="plot-kv">(.*?)</script>', r.text, re.S).group(1))
    checked = 0
    for e, name in enumerate(names):
        answer = client.get("/kv/engine?" + query + "&engine=" + name)
        assert answer.status_code == 200 and answer.json()["engine"] == name
        frames = answer.json()["frames"]
        if name == picked:
            assert frames == embedded  # the page opens on the busiest engine's frames
        for panel in frames["schedulers"]:
            log = runs[panel["name"]].engine_logs[e]
            assert panel["engine"] == name and panel["blocks"] == log.num_blocks
            k = panel["k"]
            for f, t in enumerate(panel["frame_s"]):
                row = int(np.argmin(np.abs(log.kv_frame_s - t)))  # the instant sim_core recorded it at
                assert abs(log.kv_frame_s[row] - t) < 1e-4
                assert used_blocks(panel["runs"][f], k) == int((log.kv_frames[row] >= 0).sum()), (name, f)
                states = log.kv_frame_state[row]
                in_use = int(np.isin(states, [BlockState.USED, BlockState.SHARED]).sum())
                assert panel["usage"][f] == round(in_use / log.num_blocks, 4)
                checked += in_use > 0
    assert checked > 0
    if kind == "pools":  # a prefill engine holds prefilled KV for the decode engines, owned by no running request
        assert '"key":"held"' in re.search(r'data-figure-for="plot-kv">(.*?)</script>', r.text, re.S).group(1)
        prefill = client.get("/kv/engine?" + query + "&engine=prefill 0").json()["frames"]["schedulers"][0]
        log = runs["fcfs"].engine_logs[0]
        held = 0
        for f, t in enumerate(prefill["frame_s"]):
            row = int(np.argmin(np.abs(log.kv_frame_s - t)))
            unowned = int((np.isin(log.kv_frame_state[row], [BlockState.USED, BlockState.SHARED])
                           & (log.kv_frames[row] < 0)).sum())
            cells = sum(n for st, n in zip(prefill["states"][f][0::2], prefill["states"][f][1::2], strict=True)
                        if st == CELL_HELD)
            assert (cells > 0) == (unowned > 0) and cells * prefill["k"] >= unowned / 2, (f, cells, unowned)
            held += cells
        assert held > 0


def test_a_clusters_frames_share_what_one_engine_may_record():
    from app.web import run_budget, runview

    for deployment in (dict(replicas=4), dict(prefill_replicas=1, decode_replicas=3), dict(replicas=64)):
        s = Scenario(hardware="a100", workload="chat", **deployment)
        r = resolve(s)
        blocks = run_budget.engine_blocks(r)
        assert len(blocks) == s.engines
        n = run_budget.recorded_frames_for(r)
        # An engine keeps up to twice the frames asked for: all of them together within one engine's budget.
        assert 2 * n * sum(blocks) <= runview.FRAME_BUDGET
        assert 0 < n <= runview.recorded_frames(sum(blocks)) <= runview.recorded_frames(blocks[0])
    assert run_budget.recorded_frames_for(resolve(Scenario(hardware="a100", replicas=64))) < runview.recorded_frames(
        resolve(Scenario(hardware="a100")).num_blocks)  # many engines: fewer frames each
    res = core_run(CLUSTERS["replicas"], "fcfs")
    assert sum(log.kv_frames.size for log in res.engine_logs) <= runview.FRAME_BUDGET


def test_kv_engine_refuses_what_it_cannot_show_naming_the_field(client):
    assert fields_of(client.get("/kv/engine?" + CLUSTERS["replicas"] + "&engine=replica 9")) == ["engine"]
    assert fields_of(client.get("/kv/engine?" + CLUSTERS["replicas"])) == ["engine"]
    assert fields_of(client.get("/kv/engine?hardware=rtx3050&max_model_len=8192&num_requests=10&engine=replica 0")) == ["engine"]
    assert fields_of(client.get("/kv/engine?" + CLUSTERS["replicas"] + "&engine=replica 0&replicas=x")) == [
        "replicas"]
    # The page's view parameters are no scenario fields: a shared link with engine= and t= opens.
    assert client.get("/?" + CLUSTERS["replicas"] + "&engine=replica%201&t=2.5").status_code == 200


@pytest.mark.parametrize("kind", sorted(CLUSTERS))
def test_a_clusters_gantt_names_the_engines_that_served_each_request(client, kind):
    from sim_core.views import request_engines

    query = CLUSTERS[kind]
    r = client.get("/?" + query)
    fig = blobs(r.text)["plot-gantt-fcfs"]
    res = core_run(query, "fcfs")
    named = request_engines(res)
    decode = next(t for t in fig["data"] if t["name"] == "decode")
    assert "served by %{customdata[14]}" in decode["hovertemplate"]
    rows = {c[0]: c[14] for c in decode["customdata"] if c}
    assert len(rows) == int(res.finished.sum()) == 60
    assert rows == {rid: named[rid] for rid in rows}
    assert set(rows.values()) <= {*CLUSTER_ENGINES[kind]} | {f"prefill 0 → decode {d}" for d in range(3)}
    if kind == "pools":
        assert all(" → decode " in v for v in rows.values())
    # Every request's segments: sim_core's timeline of the cluster's run, kind by kind.
    from sim_core import timeline

    drawn = {t["name"]: sum(y is not None for y in t["y"]) // (1 if t["mode"] == "markers" else 2)
             for t in fig["data"]}
    segments = timeline.request_segments(res)
    assert drawn == {name: sum(k == kind_ for _, k, _, _ in segments)
                     for kind_, name in enumerate(timeline.SEGMENT_KINDS) if any(k == kind_ for _, k, _, _ in segments)}


ZOOMED = "schedulers=fcfs&hardware=a100&workload=chat&rate=30&duration=30&seed=2&replicas=4"


def test_a_zoomed_cluster_gantt_draws_every_request_in_flight(client):
    from sim_core import timeline

    r = client.get("/?" + ZOOMED)
    total, shown = (int(x) for x in re.search(r'data-rows="(\d+)" data-total="(\d+)"', r.text).groups()[::-1])
    assert shown < total  # the page shows a sample
    answer = client.get("/gantt/window?" + ZOOMED + "&gantt=fcfs&t0=10&t1=14").json()
    res = core_run(ZOOMED, "fcfs")
    expected = {rid for rid, _, a, b in timeline.request_segments(res) if a <= 14 and b >= 10}
    assert set(answer["ids"]) == expected and answer["shown"] == len(expected) > shown / 2
    decode = next(t for t in answer["figure"]["data"] if t["name"] == "decode")
    assert "served by" in decode["hovertemplate"]
    assert {c[14] for c in decode["customdata"] if c} <= {f"replica {e}" for e in range(4)}


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
    assert field in fields_of(client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=10&" + query))
    page = client.get("/?hardware=rtx3050&max_model_len=8192&num_requests=10&" + query, headers={"HX-Request": "true"})
    assert page.status_code == 422 and f'id="err-{field}"' in page.text


def test_every_engines_block_table_counts_against_the_web_limit(client):
    """One engine's block table fits; 64 of them do not, and the answer names max_seqs with a value that fits."""
    s = Scenario(hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=20, seed=1, max_seqs=4096)
    reqs = make_requests(s, resolve(s))
    blocks = -(-int((reqs.prompt_tokens + reqs.output_tokens).max()) // s.block_size)
    assert 4096 * blocks <= MAX_BLOCK_TABLE_ENTRIES < 64 * 4096 * blocks  # the case this test is about
    assert work_problems(s, 2048, reqs) == []
    cluster = s.model_copy(update={"replicas": 64})
    (field, message), = work_problems(cluster, 2048, reqs)
    allowed = int(re.search(r"at most ([\d,]+)", message).group(1).replace(",", ""))
    assert field == "max_seqs" and 64 * allowed * blocks <= MAX_BLOCK_TABLE_ENTRIES < 64 * (allowed + 1) * blocks
    r = client.get("/api/run?hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=20&seed=1&max_seqs=4096&replicas=64")
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
