"""Issue 13, "no 5xx on any input": each reproduction from the issue answers with a page or a 4xx naming the
problem, never a server error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from test_web import figure_blobs

from app.web import app, figures

EMPTY_RUNS = ("hardware=rtx3050&max_model_len=8192&workload=rag&rate=0.01&duration=10",  # the first arrival is ~100 s away
              "hardware=rtx3050&max_model_len=8192&workload=rag&duration=0.1",
              "hardware=rtx3050&max_model_len=8192&workload=rag&duration=0.001")
FIGURES_OF_A_RUN = [f.name for f in figures.all_figures() if f.simulates and f.embeds]  # every one drawn from runs


@pytest.fixture(scope="module")
def client():
    # A server error comes back as a 500 response (as a browser would see it), not as the test's exception.
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


# ----- runs with no request, or one -----
@pytest.mark.parametrize("query", EMPTY_RUNS)
def test_a_run_without_requests_draws_empty_figures_with_a_note(client, query):
    r = client.get("/?" + query)
    assert r.status_code == 200, r.text[:300]
    blobs = figure_blobs(r.text)
    for target in ("plot-cdf", "plot-timeline", "plot-gantt-fcfs", "plot-gantt-chunked"):
        notes = [a["text"] for a in blobs[f"data-figure-for:{target}"]["layout"].get("annotations", [])]
        assert any(n.startswith("No request") for n in notes), (target, notes)
    assert "no request arrived" in r.text  # the Gantt card's caption


@pytest.mark.parametrize("figure", FIGURES_OF_A_RUN)
def test_every_embed_of_a_run_without_requests_renders(client, figure):
    r = client.get(f"/embed/{figure}?{EMPTY_RUNS[2]}")
    assert r.status_code == 200, r.text[:300]
    assert "cannot be simulated" not in r.text


def test_a_run_of_one_request_draws_every_figure(client):
    r = client.get("/?hardware=rtx3050&max_model_len=8192&workload=rag&num_requests=1")
    assert r.status_code == 200
    gantt = figure_blobs(r.text)["data-figure-for:plot-gantt-fcfs"]
    assert gantt["data"] and "annotations" not in gantt["layout"]
    assert "the only request" in r.text


# ----- sweeps around tiny rates -----
@pytest.mark.parametrize("url", ["/api/sweep?hardware=rtx3050&max_model_len=8192&workload=rag&duration=1&rate=1e-300",
                                 "/api/sweep?hardware=rtx3050&max_model_len=8192&rate_min=1e-300&rate_max=1e-299&rate_step=1e-300"])
def test_a_sweep_below_the_minimum_rate_is_refused_naming_it(client, url):
    r = client.get(url)
    assert r.status_code == 422, r.text[:300]
    detail = str(r.json()["detail"])
    assert "1e-06 requests/s" in detail or "between 1e-06 and 10000" in detail


def test_a_goodput_embed_below_the_minimum_rate_names_it(client):
    r = client.get("/embed/goodput?hardware=rtx3050&max_model_len=8192&rate=1e-320")
    assert r.status_code == 422 and "between 1e-06 and 10000" in r.text


def test_a_page_below_the_minimum_rate_names_it(client):
    # Every rate below one request in ~12 days is refused (Scenario.rate >= MIN_RATE), naming the field.
    r = client.get("/?hardware=rtx3050&max_model_len=8192&workload=rag&duration=1&rate=1e-300")
    assert r.status_code == 422 and "between 1e-06 and 10000" in r.text


def test_the_smallest_sweep_rate_has_a_usable_default_range(client):
    r = client.get("/api/sweep?hardware=rtx3050&max_model_len=8192&workload=chat&duration=1&rate=1e-6&schedulers=fcfs")
    assert r.status_code == 200
    assert r.json()["rates"][0] > 0


# ----- the JSON body: depth, size, echoed values -----
def test_a_deeply_nested_json_body_is_refused_naming_the_problem(client):
    r = client.post("/api/run", content=b"[" * 2000 + b"]" * 2000, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert "nested too deeply" in r.json()["detail"][0]["msg"]


def test_a_deeply_nested_mooncake_upload_is_refused_naming_the_line(client):
    trace = '{"timestamp": 0, "input_length": 5, "output_length": 5}\n' + "[" * 2000
    r = client.post("/api/run", files={"trace": ("t.jsonl", trace, "application/json")})
    assert r.status_code == 422
    assert "line 2: JSON nested too deeply" in r.json()["detail"][0]["msg"]


@pytest.mark.parametrize("row", ['{"timestamp": NaN, "input_length": 5, "output_length": 5}',
                                 '{"timestamp": 0, "input_length": %s, "output_length": 5}' % ("9" * 400),
                                 '{"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": [' + str(2**64) + ']}'])
def test_mooncake_numbers_out_of_range_are_refused_on_the_web(client, row):
    r = client.post("/upload", files={"trace": ("t.jsonl", row, "application/json")}, headers={"HX-Request": "true"})
    assert r.status_code == 422 and "line 1: " in r.text


def test_an_azure_trace_starting_with_a_blank_line_is_read(client):
    trace = "\nTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,100,10\n"
    r = client.post("/upload", files={"trace": ("azure.csv", trace, "text/csv")}, headers={"HX-Request": "true"})
    assert r.status_code == 200


@pytest.mark.parametrize("body", [{"hardware": "a" * 100_000}, {"schedulers": ["b" * 100_000]},
                                  {"rate": "c" * 100_000}, {"hardware": "rtx3050", "max_model_len": 8192, "rate_min": "d" * 100_000,
                                                            "rate_max": "1", "rate_step": "1"}])
def test_echoed_values_are_cut_short(client, body):
    r = client.post("/api/run", json=body)
    assert r.status_code == 422
    assert len(r.text) < 2000 and "…" in r.text


def test_echoed_values_are_cut_short_on_the_page(client):
    r = client.get("/?hardware=" + "a" * 10_000)
    assert r.status_code == 422 and "a" * 100 not in r.text and "a" * 70 + "…" in r.text


def test_a_json_body_over_the_limit_gets_413(client):
    r = client.post("/api/run", content=b'{"x": "' + b"y" * (1024 * 1024) + b'"}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "larger than 1,048,576 bytes" in r.json()["detail"]


# ----- bodies that declare no length: counted as they stream -----
async def _post_chunks(path: str, content_type: str, chunks):
    """POST `chunks` to the app as a chunked body (no Content-Length); (status, body, chunks the app read)."""
    sent, reply = [0], {"status": None, "body": b""}
    chunks = list(chunks)

    async def receive():
        if sent[0] < len(chunks):
            sent[0] += 1
            return {"type": "http.request", "body": chunks[sent[0] - 1], "more_body": sent[0] < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            reply["status"] = message["status"]
        elif message["type"] == "http.response.body":
            reply["body"] += message.get("body", b"")

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "", "scheme": "http",
             "server": ("testserver", 80), "client": ("test", 1), "app": app,
             "headers": [(b"host", b"testserver"), (b"content-type", content_type.encode()),
                         (b"transfer-encoding", b"chunked")]}
    await app(scope, receive, send)
    return reply["status"], reply["body"].decode(), sent[0]


MB_CHUNK = b"0," + b"1" * (1024 * 1024 - 3) + b"\n"  # one megabyte of (bad) CSV


def test_a_chunked_upload_is_refused_once_it_passes_5_mb():
    import asyncio

    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"trace\"; filename=\"t.csv\"\r\n"
            "Content-Type: text/csv\r\n\r\narrival_s,prompt_tokens,output_tokens\n").encode()
    chunks = [head] + [MB_CHUNK] * 20 + [f"\r\n--{boundary}--\r\n".encode()]
    status, body, read = asyncio.run(_post_chunks("/upload", f"multipart/form-data; boundary={boundary}", chunks))
    assert status == 422 and "larger than 5 MB" in body
    assert read <= 7, f"the server read {read} of {len(chunks)} chunks"


def test_a_chunked_json_body_is_refused_once_it_passes_1_mb():
    import asyncio

    chunks = [b'{"x": "'] + [b"y" * 256 * 1024] * 40 + [b'"}']
    status, body, read = asyncio.run(_post_chunks("/api/run", "application/json", chunks))
    assert status == 413 and "larger than" in body
    assert read <= 6, f"the server read {read} of {len(chunks)} chunks"


def test_fuzzer_findings_stay_fixed():
    """Found by the schemathesis campaign (bench/fuzz.py): a denormal rate divided by zero in the arrival
    process; a sweep whose range fields were all empty hit an assertion."""
    from fastapi.testclient import TestClient

    from app.web import app

    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)
        r = c.post("/api/run", json={"burstiness": 2.0, "controller_headroom": 1.0, "rate": 5e-324})
        assert r.status_code == 422 and "rate" in r.text and "1e-06" in r.text
        r = c.get("/api/sweep?num_requests=1&rate_min=&hardware=rtx3050&max_model_len=8192")
        assert r.status_code == 200, r.text
