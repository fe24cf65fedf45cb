"""The JSON API: answer shapes, the same numbers as the pages, a clear 422 naming the field for every kind of bad
input, and correct answers under concurrent load."""

from __future__ import annotations

import csv
import io
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from app.web import app, inputs, service
from sim_core import SCHEDULER_NAMES, Scenario, request_table
from sim_core.step_time import parse_step_shape, step_time_doc

SMALL = "schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3"


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)  # warm-up runs in the background
        yield c


def fields_of(response) -> list[str]:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail and all(d["msg"] for d in detail)
    return [d["loc"][-1] for d in detail]


def csv_trace(rows: int = 20, step: float = 0.25) -> str:
    lines = ["arrival_s,prompt_tokens,output_tokens"]
    lines += [f"{k * step:.3f},{100 + 7 * k % 300},{20 + k % 50}" for k in range(rows)]
    return "\n".join(lines) + "\n"


def test_healthz_and_catalog(client):
    assert client.get("/healthz").json()["status"] == "ok"
    cat = client.get("/api/catalog").json()
    assert [s["name"] for s in cat["schedulers"]] == list(SCHEDULER_NAMES)
    assert {"rtx3050", "a100"} <= {h["key"] for h in cat["hardware"]}
    assert all(h["default_model"] for h in cat["hardware"])
    assert {"rag", "chat"} <= {w["name"] for w in cat["workloads"]}
    assert cat["limits"]["max_requests"] == inputs.MAX_REQUESTS
    assert cat["page_defaults"]["schedulers"] == ["fcfs", "chunked"]


def test_run_get_shape(client):
    r = client.get("/api/run?" + SMALL)
    assert r.status_code == 200
    body = r.json()
    assert set(body) >= {"scenario", "query", "schedulers"}
    assert body["scenario"]["hardware"] == "rtx3050" and body["scenario"]["num_requests"] == 30
    assert list(body["schedulers"]) == ["fcfs", "chunked"]
    for run in body["schedulers"].values():
        m = run["metrics"]
        assert m["num_requests"] == 30
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            assert {"mean", "p50", "p99"} <= set(m[key])
        assert {"goodput", "slo_attainment", "mbu", "mfu", "preemptions", "kv_cache_usage", "slo"} <= set(m)
        assert run["resolved"]["model"] == "llama-3.2-1b"
    # The canonical query names every field it needs, so the API and the pages read it the same way.
    # max_model_len is not at its default (the model's context), so the query carries it, in declaration order.
    assert body["query"].startswith("schedulers=fcfs,chunked&hardware=rtx3050&workload=chat")
    assert "&max_model_len=8192" in body["query"]


def test_default_scheduler_is_the_models(client):
    body = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=10").json()
    assert list(body["schedulers"]) == ["chunked"]
    one = client.get("/api/run?scheduler=fcfs&hardware=rtx3050&max_model_len=8192&num_requests=10").json()
    assert list(one["schedulers"]) == ["fcfs"]


def test_post_json_matches_get(client):
    got = client.get("/api/run?" + SMALL).json()
    posted = client.post("/api/run", json={"schedulers": ["fcfs", "chunked"], "hardware": "rtx3050", "max_model_len": 8192,
                                           "workload": "chat", "num_requests": 30, "seed": 3})
    assert posted.status_code == 200
    assert posted.json()["schedulers"] == got["schedulers"]


# A profile for the RTX 3050's default model, every constant off the catalog's.
PROFILE = ("rtx3050/llama-3.2-1b/fp16/tp1:compute_efficiency=0.4,bandwidth_efficiency=0.6,attention_efficiency=0.4,"
           "step_overhead_ms=3,overhead_per_seq_us=15")


def test_a_hardware_profile_is_a_field_of_run_and_step_time(client):
    base = {"scheduler": "chunked", "hardware": "rtx3050", "max_model_len": 8192, "num_requests": 10, "seed": 3}
    plain = client.get("/api/run", params=base).json()
    fitted = client.get("/api/run", params={**base, "hardware_profile": PROFILE}).json()
    assert fitted["scenario"]["hardware_profile"] == PROFILE and "hardware_profile=" in fitted["query"]
    tpot = [b["schedulers"]["chunked"]["metrics"]["tpot_ms"]["mean"] for b in (plain, fitted)]
    assert tpot[1] > tpot[0]  # lower efficiencies, more overhead: slower tokens
    posted = client.post("/api/run", json={**base, "hardware_profile": PROFILE}).json()
    assert posted["schedulers"] == fitted["schedulers"]
    step = {"hardware": "rtx3050", "decode_seqs": 8, "decode_context": 500}  # one step: no max_model_len
    ms = [client.get("/api/step-time", params=p).json()["step_ms"] for p in (step, {**step, "hardware_profile": PROFILE})]
    assert ms[1] > ms[0]
    assert fields_of(client.get("/api/step-time", params={**step, "hardware": "l4", "hardware_profile": PROFILE})) \
        == ["hardware_profile"]
    assert fields_of(client.get("/api/run", params={**base, "tp": 2, "hardware_profile": PROFILE})) \
        == ["hardware_profile"]


def test_post_trace_upload(client):
    files = {"trace": ("mine.csv", csv_trace(25), "text/csv")}
    r = client.post("/api/run", files=files, data={"schedulers": "fcfs,chunked", "hardware": "rtx3050", "max_model_len": 8192})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["upload"] and f"upload={body['upload']}" in body["query"]
    assert all(run["metrics"]["num_requests"] == 25 for run in body["schedulers"].values())
    # The upload id then works in a plain GET (and in page URLs).
    again = client.get(f"/api/run?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&upload={body['upload']}").json()
    assert again["schedulers"]["fcfs"] == body["schedulers"]["fcfs"]


@pytest.mark.parametrize("query, field", [
    ("hardware=tpu-v9", "hardware"),
    ("tp=12", "tp"),
    ("tp=3", "tp"),  # does not divide the heads
    ("rate=-1", "rate"),
    ("rate=abc", "rate"),
    ("rate=nan", "rate"),
    ("hardware=rtx3050&max_model_len=8192&model=llama-3-70b", "model"),  # 131 GB of weights on an 8 GB GPU
    ("hardware=rtx3050&max_model_len=8192&kv_blocks=99999999", "kv_blocks"),
    ("rate=100&duration=600", "rate"),  # 60,000 requests
    ("workload=chat&duration=6000", "duration"),
    ("num_requests=50000", "num_requests"),
    ("trace=/etc/passwd", "trace"),
    ("schedulers=fcfs,nope", "schedulers"),
    ("schedulers=", "schedulers"),
    ("colour=blue", "colour"),
    ("hardware=a100&hardware=h100", "hardware"),
    ("upload=0123456789abcdef", "upload"),
    ("block_size=7", "block_size"),
])
def test_bad_query_is_422_naming_the_field(client, query, field):
    r = client.get("/api/run?" + query)
    assert field in fields_of(r)


def test_every_problem_is_reported_at_once(client):
    r = client.get("/api/run?tp=12&rate=-1&hardware=tpu")
    assert {"tp", "rate", "hardware"} <= set(fields_of(r))


def test_model_too_big_says_why(client):
    r = client.get("/api/run?hardware=rtx3050&max_model_len=8192&model=llama-3-70b")
    msg = r.json()["detail"][0]["msg"]
    assert "llama-3-70b needs" in msg and "rtx3050 has 8 GB" in msg and "int4" in msg


def test_too_many_requests_says_the_limit(client):
    msg = client.get("/api/run?rate=100&duration=600").json()["detail"][0]["msg"]
    assert "20,000" in msg and "33.33" in msg


@pytest.mark.parametrize("body, field", [
    ({"trace": "/etc/passwd"}, "trace"),
    ({"hardware": "rtx3050", "max_model_len": 8192, "tp": 12}, "tp"),
    ({"schedulers": ["fcfs", "bogus"]}, "schedulers"),
    ({"rate": -1}, "rate"),
])
def test_bad_json_body(client, body, field):
    assert field in fields_of(client.post("/api/run", json=body))


def test_body_that_is_not_a_scenario(client):
    assert fields_of(client.post("/api/run", json=[1, 2])) == ["body"]
    bad = client.post("/api/run", content=b"{not json", headers={"content-type": "application/json"})
    assert fields_of(bad) == ["body"]
    assert fields_of(client.post("/api/run", content=b"x", headers={"content-type": "text/plain"})) == ["body"]


@pytest.mark.parametrize("content, needle", [
    ("prompt_tokens,output_tokens\n10,10\n", "lacks column"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,10\n1,ten,10\n", "line 3"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
    ("", "empty"),
])
def test_malformed_trace_upload(client, content, needle):
    r = client.post("/api/run", files={"trace": ("t.csv", content, "text/csv")})
    assert fields_of(r) == ["trace"]
    assert needle in r.json()["detail"][0]["msg"]


def test_oversized_and_binary_uploads(client):
    big = b"arrival_s,prompt_tokens,output_tokens\n" + b"0,1,1\n" * (inputs.MAX_UPLOAD_BYTES // 6 + 10)
    r = client.post("/api/run", files={"trace": ("big.csv", io.BytesIO(big), "text/csv")})
    assert fields_of(r) == ["trace"] and "5 MB" in r.json()["detail"][0]["msg"]
    r = client.post("/api/run", files={"trace": ("x.csv", b"\xff\xfe\x00\x81garbage", "text/csv")})
    assert fields_of(r) == ["trace"] and "UTF-8" in r.json()["detail"][0]["msg"]
    r = client.post("/api/run", files={"other": ("x.csv", b"a", "text/csv")})
    assert fields_of(r) == ["trace"]


def test_trace_with_too_many_rows(client):
    rows = inputs.MAX_UPLOAD_ROWS + 1
    text = "arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * rows
    r = client.post("/api/run", files={"trace": ("rows.csv", text, "text/csv")})
    assert fields_of(r) == ["trace"] and "100000" in r.json()["detail"][0]["msg"]


def test_trace_larger_than_a_web_run(client):
    text = csv_trace(inputs.MAX_REQUESTS + 5, step=0.001)
    r = client.post("/api/run", files={"trace": ("t.csv", text, "text/csv")}, data={"hardware": "rtx3050", "max_model_len": 8192})
    assert fields_of(r) == ["num_requests"]


def test_sweep(client):
    r = client.get("/api/sweep?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30"
                   "&rate_min=2&rate_max=8&rate_step=3")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rates"] == [2.0, 5.0, 8.0] and body["target_attainment"] == 0.9
    for run in body["schedulers"].values():
        assert [p["rate"] for p in run["points"]] == [2.0, 5.0, 8.0]
        assert all(0 <= p["slo_attainment"] <= 1 and p["goodput"] >= 0 for p in run["points"])
        assert run["knee_rate"] is None or run["knee_rate"] in body["rates"]


def test_a_sweep_replays_an_uploaded_trace_at_each_rate(client):
    """Every point replays all of the trace, its gaps scaled to the point's rate (traces.at_rate): the same
    requests each time, arriving faster, so TTFT does not fall as the rate rises. Without a range, the proposed
    one surrounds the trace's own rate (4 req/s: 40 arrivals 0.25 s apart)."""
    upload = client.post("/api/run", files={"trace": ("t.csv", csv_trace(40), "text/csv")},
                         data={"schedulers": "fcfs", "hardware": "rtx3050", "max_model_len": 8192}).json()["upload"]
    r = client.get(f"/api/sweep?schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&upload={upload}"
                   "&rate_min=2&rate_max=20&rate_step=6")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rates"] == [2.0, 8.0, 14.0, 20.0]
    for run in body["schedulers"].values():
        assert [p["metrics"]["num_requests"] for p in run["points"]] == [40] * 4
        spans = [p["metrics"]["num_requests"] / p["rate"] for p in run["points"]]
        assert spans == sorted(spans, reverse=True)
        ttft = [p["metrics"]["ttft_ms"]["p99"] for p in run["points"]]
        assert ttft[-1] >= ttft[0]
    proposed = client.get(f"/api/sweep?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&upload={upload}").json()
    assert proposed["rates"][0] < 4.0 < proposed["rates"][-1] <= 8.0


def test_a_trace_sweep_is_refused_where_it_cannot_be_replayed(client):
    at_once = "arrival_s,prompt_tokens,output_tokens\n" + "0,100,20\n" * 10
    flat = client.post("/api/run", files={"trace": ("t.csv", at_once, "text/csv")},
                       data={"schedulers": "fcfs", "hardware": "rtx3050", "max_model_len": 8192}).json()["upload"]
    r = client.get(f"/api/sweep?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&upload={flat}")
    assert fields_of(r) == ["upload"] and "one instant" in r.text
    upload = client.post("/api/run", files={"trace": ("t.csv", csv_trace(40), "text/csv")},
                         data={"schedulers": "fcfs", "hardware": "rtx3050", "max_model_len": 8192}).json()["upload"]
    # 40 arrivals at 0.05 req/s span 780 s, past the web's 600 s of arrivals.
    r = client.get(f"/api/sweep?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&upload={upload}&rate_min=0.05&rate_max=1"
                   "&rate_step=0.25")
    assert fields_of(r) == ["rate_min"] and "at least 0.065 req/s" in r.text


def test_a_sweep_the_scenario_cannot_run_is_refused_naming_the_field(client):
    # Found by the API fuzz: each refusal came from inside the background job, as a 500.
    for query, field in (("concurrency=1", "concurrency"), ("rate_schedule=0:5,30:10", "rate_schedule"),
                         ("kv_offload_cpu_gb=1", "kv_offload_cpu_gb")):  # the last one found by the run itself
        r = client.get(f"/api/sweep?schedulers=fcfs&hardware=rtx3050&max_model_len=8192&{query}")
        assert r.status_code == 422 and fields_of(r) == [field], r.text


def test_sweep_limits(client):
    assert fields_of(client.get("/api/sweep?rate_min=1&rate_max=100&rate_step=0.1")) == ["rate_step"]
    assert fields_of(client.get("/api/sweep?rate_min=5&rate_max=1&rate_step=1")) == ["rate_max"]
    assert "rate_max" in fields_of(client.get("/api/sweep?duration=600&rate_min=1&rate_max=300&rate_step=20"))


def test_openapi_documents_the_scenario(client):
    spec = client.get("/openapi.json").json()
    [query] = spec["paths"]["/api/run"]["get"]["parameters"]  # the query string as one object: its rules span fields
    params = set(query["schema"]["properties"])
    assert {"schedulers", "hardware", "rate", "slo_ttft_ms"} <= params and "trace" not in params
    assert {"application/json", "multipart/form-data"} == set(spec["paths"]["/api/run"]["post"]["requestBody"]["content"])
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/api/run" in docs.text and "cdn" not in docs.text.lower()


def test_concurrent_clients_all_get_correct_answers(client):
    """16 threads at once, half on the API and half on the page, each with its own scenario: every answer is
    the same as a sequential run of that scenario."""
    service.clear_caches()
    queries = [f"schedulers=fcfs,chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=40&seed={k}" for k in range(8)]
    expected = {q: client.get("/api/run?" + q).json()["schedulers"] for q in queries}
    service.clear_caches()

    def get(url):  # as a client honouring Retry-After does: the server runs 2 simulations at once, sheds the rest
        for _ in range(100):  # (the page answers 200 with a "busy" card that polls again)
            r = client.get(url)
            if r.status_code != 503 and "simulations; retry in a few seconds" not in r.text:
                return r
            time.sleep(0.1)
        return r

    def api(q):
        r = get("/api/run?" + q)
        return r.status_code, r.json()["schedulers"] == expected[q]

    def page(q):
        r = get("/?" + q)
        ttft = f"{expected[q]['fcfs']['metrics']['ttft_ms']['p50']:,.1f}"
        return r.status_code, ttft in r.text

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(api, q) for q in queries] + [pool.submit(page, q) for q in queries]
        results = [f.result(timeout=120) for f in futures]
    assert results == [(200, True)] * 16


def test_the_api_averages_over_seeds_like_the_cli(client):
    r = client.get("/api/run?" + SMALL + "&seeds=3")
    assert r.status_code == 200, r.text[:300]
    for name, entry in r.json()["schedulers"].items():
        assert entry["seeds"] == [3, 4, 5]  # SMALL has seed=3
        low, high = entry["ci95"]["ttft_ms"]["p99"]
        assert low <= entry["metrics"]["ttft_ms"]["p99"] <= high, name
    # seeds=1 is the plain answer, without intervals
    assert client.get("/api/run?" + SMALL + "&seeds=1").json() == client.get("/api/run?" + SMALL).json()


def test_seeds_beyond_the_web_limits_are_refused_not_ignored(client):
    assert "seeds" in fields_of(client.get("/api/run?" + SMALL + f"&seeds={inputs.MAX_API_SEEDS + 1}"))
    assert "seeds" in fields_of(client.get("/api/sweep?" + SMALL + f"&seeds={inputs.MAX_API_SEEDS + 1}"))
    page = client.get("/?" + SMALL + f"&seeds={inputs.MAX_PAGE_SEEDS + 1}")
    assert page.status_code == 422 and f"must be at most {inputs.MAX_PAGE_SEEDS} on the dashboard" in page.text


def test_a_full_server_answers_busy_at_once_and_health_stays_quick(client, monkeypatch):
    import time

    from app.web import rendered, service

    monkeypatch.setattr(service, "SIM_WAIT_S", 0.05)
    service.clear_caches()
    taken = [service.SIM_SLOTS.acquire(timeout=1) for _ in range(service.MAX_SIMULATIONS)]
    try:
        assert all(taken)
        start = time.perf_counter()
        r = client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=7&seed=11")
        assert r.status_code == 503 and r.headers["retry-after"] == "5" and "retry" in r.json()["detail"]
        busy_page = client.get("/?hardware=rtx3050&max_model_len=8192&num_requests=7&seed=11").text
        assert busy_page.count("The server is busy") == 1
        assert f'id="{rendered.RESULTS_POLL_ID}" hx-get="/?' in busy_page  # the poll whose answers replace the entry
        assert client.get("/embed/cdf?hardware=rtx3050&max_model_len=8192&num_requests=7&seed=11").status_code == 503
        assert client.get("/healthz").status_code == 200
        assert time.perf_counter() - start < 2.0
    finally:
        for _ in taken:
            service.SIM_SLOTS.release()
    assert client.get("/api/run?hardware=rtx3050&max_model_len=8192&num_requests=7&seed=11").status_code == 200


def test_the_results_poll_replaces_the_history_entry_and_a_change_pushes_one(client):
    """The busy or compiling card's poll fills in the page it is on: its answer replaces the history entry. Were
    it pushed, Back would step through polls and, after Back reloaded a busy page, Forward would find nothing."""
    from app.web import rendered

    q = "/?hardware=rtx3050&max_model_len=8192&num_requests=7&seed=11"
    poll = client.get(q, headers={"HX-Request": "true", "HX-Trigger": rendered.RESULTS_POLL_ID})
    assert poll.status_code == 200 and "HX-Push-Url" not in poll.headers
    assert poll.headers["HX-Replace-Url"].startswith("/?") and "seed=11" in poll.headers["HX-Replace-Url"]
    change = client.get(q, headers={"HX-Request": "true", "HX-Trigger": "scenario-form"})
    assert "HX-Replace-Url" not in change.headers and change.headers["HX-Push-Url"] == poll.headers["HX-Replace-Url"]


def test_agent_turns_count_toward_the_request_limit(client):
    # 33.33 sessions/s for 600 s passes the arrival-rate check, but every session makes ~3 turns more.
    r = client.get("/api/run?hardware=a100&workload=agent&duration=600&rate=33.33&schedulers=chunked")
    assert "rate" in fields_of(r)
    assert "agent sessions count every turn" in r.text


def test_work_is_bounded_by_engine_steps_not_only_by_request_count():
    import numpy as np

    from app.web.inputs import MAX_WEB_STEPS, work_problems
    from sim_core.workload import Requests

    n = 1500  # few requests, long prompts: 90M tokens at 16 a step would be 5.6M steps
    reqs = Requests(np.zeros(n), np.full(n, 60_000, np.int64), np.full(n, 10, np.int64), np.zeros(n, np.int64),
                    ("trace",))
    s = Scenario(hardware="rtx3050", token_budget=16, max_model_len=65_536)
    (field, message), = work_problems(s, 16, reqs)
    assert field == "token_budget" and f"at most {MAX_WEB_STEPS:,}" in message
    assert "token_budget must be at least 19," in message  # 90,015,000 tokens / 5M steps = 18.003, rounded up
    assert work_problems(s, 64, reqs) == []  # 1.4M steps: fine


def test_the_same_content_uploaded_under_two_names_keeps_both_names():
    text = csv_trace(5).encode()
    a = service.add_upload(text, "mine.csv")
    b = service.add_upload(text, "yours.csv")
    assert (a.filename, b.filename) == ("mine.csv", "yours.csv") and a.id != b.id
    assert service.add_upload(text, "mine.csv").id == a.id  # same name and content: the same upload


def test_a_trace_replay_takes_no_seeds(client):
    r = client.post("/api/run", files={"trace": ("t.csv", csv_trace(), "text/csv")},
                    data={"hardware": "rtx3050", "max_model_len": 8192, "seeds": "2"})
    assert "seeds" in fields_of(r) and "same run" in r.text


def test_a_sweep_over_the_work_budget_is_refused_before_it_runs(client):
    """Within the request estimate (agent sessions, not their turns) but far over the engine-step budget: refused
    at once, naming rate_max."""
    url = ("/api/sweep?schedulers=fcfs,chunked&hardware=h100&workload=agent&duration=600&token_budget=16"
           "&rate_min=1&rate_max=10&rate_step=1")
    started = time.monotonic()
    r = client.get(url)
    assert time.monotonic() - started < 2.0
    assert fields_of(r) == ["rate_max"], r.text
    assert f"engine steps in all (10 rates x 2 schedulers); the web sweeps at most {inputs.MAX_SWEEP_STEPS:,}" in r.text
    # One point alone over one run's budget says which point.
    r = client.get(url.replace("rate_min=1&rate_max=10&rate_step=1", "rate_min=20&rate_max=30&rate_step=10"))
    assert fields_of(r) == ["rate_max"] and "point at 30 req/s is too large" in r.text, r.text


def test_past_the_in_flight_limit_the_api_answers_503_at_once_without_a_thread(client, monkeypatch):
    from app.web import http
    from app.web.lane import FairLine

    full = FairLine(service.MAX_SIMULATIONS, service.MAX_SIMULATIONS, service.LINE_HOLD_S)  # room for the running
    held = [full.join().place for _ in range(service.MAX_SIMULATIONS)]
    monkeypatch.setattr(http, "LINE", full)
    started = time.monotonic()
    r = client.get("/api/run?" + SMALL.replace("seed=3", "seed=77"))
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1 and "busy" in r.json()["detail"]
    assert r.json()["queue"]["ticket"] is None and r.json()["limit"]["name"] == "max_in_flight_requests"
    assert time.monotonic() - started < 0.5  # not the SIM_WAIT_S a request inside the pool waits for a slot
    full.leave(held.pop())
    assert client.get("/api/run?" + SMALL.replace("seed=3", "seed=77")).status_code == 200
    assert full.running == service.MAX_SIMULATIONS - 1 and full.waiting == 0  # its place given back
    # A full line still answers what needs no simulation: a cached result, an invalid scenario.
    held.append(full.join().place)
    assert client.get("/api/run?" + SMALL.replace("seed=3", "seed=77")).status_code == 200
    assert client.get("/api/run?" + SMALL + "&tp=99").status_code == 422


def test_the_131k_token_upload_reproduction_is_refused_quickly(client):
    """The hardening issue's reproduction: 20,000 rows of 131k-token prompts at token_budget=16 cost ~130 s of CPU
    and ~10 GB before; now a 422 naming the field, within 2 s."""
    rows = "\n".join(f"{k * 0.01:.2f},131000,16" for k in range(20_000))
    trace = "arrival_s,prompt_tokens,output_tokens\n" + rows
    started = time.monotonic()
    r = client.post("/api/run", files={"trace": ("long.csv", trace, "text/csv")},
                    data={"hardware": "h100", "model": "llama-3.2-1b", "token_budget": "16", "max_model_len": "131072",
                          "schedulers": "fcfs,spf,chunked,slo,fair,cache_aware,edf"})
    assert time.monotonic() - started < 2.0
    (problem,) = r.json()["detail"]
    assert r.status_code == 422 and problem["loc"] == ["body", "token_budget"], r.text[:300]
    assert "at least 163,770,000 engine steps; the web runs at most 5,000,000" in problem["msg"]


def test_step_time_answers_the_breakdown_and_422_names_the_field(client):
    r = client.get("/api/step-time?hardware=a100&model=llama-3-8b&prefill_tokens=512")
    assert r.status_code == 200, r.text
    doc = r.json()
    assert sum(doc["components_ms"].values()) == pytest.approx(doc["step_ms"])
    cli_doc = step_time_doc(parse_step_shape({"hardware": "a100", "model": "llama-3-8b", "prefill_tokens": 512}))
    assert doc["step_ms"] == pytest.approx(cli_doc["step_ms"])
    for query, field, words in [("tp=9&decode_seqs=1", "tp", "between 1 and 8"),
                                ("decode_seqs=x", "decode_seqs", "integer between 0 and 4096"),
                                ("decode_seqs=1&context_tokens=-5", "context_tokens", "between 0 and"),
                                ("", "prefill_tokens", "decode_seqs"),
                                ("model=llama-3-70b&decode_seqs=1", "model", "needs"),
                                ("hardware=h100&tp=3&decode_seqs=1", "tp", "does not divide"),
                                ("decode_seqs=1&bogus=1", "bogus", "not a field")]:
        r = client.get("/api/step-time?" + query)
        assert r.status_code == 422, (query, r.text)
        detail = r.json()["detail"]
        assert any(d["loc"] == ["query", field] and words in d["msg"] for d in detail), (query, detail)


def test_run_answers_carry_validity_warnings(client):
    r = client.get("/api/run?schedulers=chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=20")
    assert r.status_code == 200, r.text[:300]
    entry = r.json()["schedulers"]["chunked"]
    assert "metrics" in entry and any("rtx3050" in w for w in entry["warnings"])
    assert client.get("/api/step-time?hardware=l4&decode_seqs=1").json()["warnings"][0].startswith("hardware l4")


def test_per_request_csv_download_has_a_row_per_request(client):
    r = client.get("/download/requests.csv?scheduler=chunked&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert 'filename="sched-sim-chunked-requests.csv"' in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert r.text.splitlines()[0] == ",".join(request_table.COLUMNS)
    metrics = client.get("/api/run?" + SMALL).json()["schedulers"]["chunked"]["metrics"]
    assert len(rows) == metrics["num_requests"] == 30
    served = [row for row in rows if row["status"] == "finished"]
    assert len(served) == metrics["completed"]
    ttft = sorted(float(row["ttft_ms"]) for row in served)
    assert sum(ttft) / len(ttft) == pytest.approx(metrics["ttft_ms"]["mean"], rel=1e-6)
    assert [float(row["arrival_s"]) for row in rows] == sorted(float(row["arrival_s"]) for row in rows)


def test_perfetto_trace_download_has_every_request(client):
    r = client.get("/download/trace.json?scheduler=fcfs&hardware=rtx3050&max_model_len=8192&workload=chat&num_requests=30&seed=3")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.headers["content-disposition"].endswith('filename="sched-sim-fcfs.trace.json"')
    trace = r.json()
    assert trace["metadata"]["requests_total"] == trace["metadata"]["requests_shown"] == 30
    threads = {e["tid"] for e in trace["traceEvents"] if e.get("pid") == 2 and e["ph"] == "X"}
    assert len(threads) == 30


@pytest.mark.parametrize("query, field", [
    ("schedulers=fcfs,chunked&workload=chat&num_requests=30", "scheduler"),
    ("scheduler=nope&num_requests=30", "scheduler"),
    ("scheduler=fcfs&duration=-5", "duration"),
])
def test_downloads_refuse_bad_queries_naming_the_field(client, query, field):
    for route in ("/download/requests.csv", "/download/trace.json"):
        assert field in fields_of(client.get(f"{route}?{query}"))
