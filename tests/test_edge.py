"""The server's edge (issue 26): which Host and Origin it answers, the upload store on disk, connection limits,
a bare /api/run, /docs' own address and the 4xx/5xx answers the OpenAPI schema lists."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn
from fastapi.testclient import TestClient

from app.web import service, serving
from app.web.middleware import AllowedHostsAndOrigin, host_allowed, host_name
from app.web.server import create_app
from app.web.settings import Settings
from app.web.store import BlobStore, content_id

TRACE = ("arrival_s,prompt_tokens,output_tokens\n"
         + "".join(f"{k * 0.25:.2f},{200 + 37 * k % 900},{30 + k % 40}\n" for k in range(40))).encode()


@pytest.fixture
def own_store():
    """Tests that build their own app (and so point the process's upload store elsewhere) put it back after."""
    before = service._store
    yield
    service.use_store(before)


def settings(tmp_path, **overrides) -> Settings:
    values = dict(allowed_hosts=("testserver",), store_dir=str(tmp_path / "store"), store_max_mb=16,
                  max_connections=100)
    return Settings(**(values | overrides))


# ----- Host -----
def test_a_host_the_server_does_not_answer_to_gets_400(client):
    for path in ("/healthz", "/api/catalog", "/", "/docs"):
        r = client.get(path, headers={"Host": "evil.example"})
        assert r.status_code == 400, path
        assert "evil.example" in r.json()["detail"] and "--allowed-hosts" in r.json()["detail"]
    assert client.post("/api/run", json={}, headers={"Host": "evil.example:8000"}).status_code == 400


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "LOCALHOST.", "127.0.0.1", "127.0.0.1:8000",
                                  "[::1]", "[::1]:8000", "dash.localhost:8000", "192.168.1.20:8000", "testserver"])
def test_localhost_names_addresses_and_the_configured_hosts_are_answered(client, host):
    assert client.get("/healthz", headers={"Host": host}).status_code == 200


def test_allowed_hosts_come_from_the_setting(tmp_path, own_store):
    s = Settings.from_env({"SCHED_SIM_ALLOWED_HOSTS": "sim.example.org, *.corp.example",
                           "SCHED_SIM_STORE_DIR": str(tmp_path)})
    assert s.allowed_hosts == ("sim.example.org", "*.corp.example")
    c = TestClient(create_app(s))
    for host, status in (("sim.example.org", 200), ("sim.example.org:443", 200), ("a.corp.example", 200),
                         ("corp.example", 400), ("evil.example", 400), ("sim.example.org.evil.example", 400),
                         ("localhost", 200)):
        assert c.get("/healthz", headers={"Host": host}).status_code == status, host
    anything = TestClient(create_app(settings(tmp_path, allowed_hosts=("*",))))
    assert anything.get("/healthz", headers={"Host": "evil.example"}).status_code == 200
    with pytest.raises(ValueError, match="SCHED_SIM_ALLOWED_HOSTS"):
        Settings.from_env({"SCHED_SIM_ALLOWED_HOSTS": "http://sim.example.org/"})


def test_host_name_parsing():
    assert host_name("[::1]:8000") == "::1"
    assert host_name("Example.ORG.:80") == "example.org"
    assert host_name("example.org") == "example.org"
    assert host_allowed("::1", ()) and host_allowed("10.0.0.1", ()) and not host_allowed("evil.example", ())
    assert not host_allowed("evillocalhost", ())  # *.localhost is a suffix match on a dot


# ----- Origin -----
def test_a_cross_site_request_that_starts_work_gets_403(client):
    before = service.cache_stats()
    r = client.post("/api/run", json={"duration": 5}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["detail"]
    r = client.post("/upload", files={"trace": ("t.csv", TRACE)}, headers={"Origin": "null"})
    assert r.status_code == 403
    r = client.post("/api/run", json={"duration": 5}, headers={"Sec-Fetch-Site": "cross-site"})  # no Origin
    assert r.status_code == 403
    # another site's page loading a simulation URL as an image or script
    r = client.get("/?duration=5", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
    assert r.status_code == 403
    # a script elsewhere fetching the API from a browser without Fetch Metadata: only its Origin tells
    r = client.get("/api/run?duration=5", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["detail"]
    assert service.cache_stats() == before  # nothing was simulated


def test_same_origin_requests_navigations_and_scripts_without_origin_pass(client):
    r = client.post("/upload", files={"trace": ("t.csv", TRACE)}, headers={"Origin": "http://testserver",
                                                                         "Sec-Fetch-Site": "same-origin"})
    assert r.status_code in (200, 303)
    assert client.post("/api/run", json={"workload": "bogus"}).status_code == 422  # curl, scripts: no Origin
    # a shared link or an embed opened from another site is a navigation
    r = client.get("/healthz", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert r.status_code == 200
    # an embed framed in a sandboxed iframe has an opaque origin: its scripts and styles load "cross-site"
    r = client.get("/static/js/app.js", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                                                 "Sec-Fetch-Dest": "script"})
    assert r.status_code == 200
    # ... and module scripts come in CORS mode (Origin: null): the answer must let that opaque origin run them
    r = client.get("/static/js/figures.js", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors",
                                                     "Sec-Fetch-Dest": "script", "Origin": "null"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    assert client.get("/healthz", headers={"Origin": "https://status.example"}).status_code == 200  # a monitor
    assert client.get("/api/catalog", headers={"Origin": "http://testserver"}).status_code == 200  # our own page


def test_a_client_gone_mid_body_is_not_a_server_error():
    """A dropped slow upload raises ClientDisconnect in the route: nobody is left to answer, and a traceback per
    connection would flood the log (and, on a pipe nobody reads, stall the server)."""
    import anyio
    from starlette.requests import ClientDisconnect, Request

    async def upload(scope, receive, send):
        await Request(scope, receive).body()

    async def gone():
        return {"type": "http.disconnect"}

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/upload", "headers": [(b"host", b"localhost")]}
    with pytest.raises(ClientDisconnect):
        anyio.run(upload, scope, gone, send)
    anyio.run(AllowedHostsAndOrigin(upload), scope, gone, send)
    assert sent == []


# ----- the upload store -----
def test_the_store_is_bounded_in_bytes_and_evicts_the_least_recently_used(tmp_path):
    store = BlobStore(tmp_path, max_bytes=3000)
    a, b, c = (store.put("trace", bytes([k]) * 900, {"n": k}, f"{k}.csv") for k in range(3))
    assert store.total_bytes <= 3000 and {store.get("trace", x).meta["n"] for x in (a, b, c)} == {0, 1, 2}
    store.get("trace", a)  # a is now the most recently used: b is the oldest
    d = store.put("model", b"m" * 900, {"n": 3})  # kinds share the bound
    assert store.total_bytes <= 3000
    assert store.get("trace", b) is None and not (tmp_path / "trace" / f"{b}.bin").exists()
    assert store.get("trace", a).data == bytes([0]) * 900 and store.get("model", d).meta == {"n": 3}
    # a new store on the folder (a restarted server) finds the items, in the same order of use
    again = BlobStore(tmp_path, max_bytes=3000)
    assert again.total_bytes == store.total_bytes
    again.get("trace", c)
    again.put("trace", b"x" * 900, {})
    assert again.get("trace", a) is None and again.get("trace", c) is not None
    with pytest.raises(ValueError, match="larger than the whole store"):
        again.put("trace", b"y" * 4000, {})
    assert again.get("trace", "../../etc/passwd") is None and again.get("trace", "0" * 16) is None
    assert content_id(b"same", "mine.csv") != content_id(b"same", "yours.csv")


def test_an_uploaded_trace_is_still_there_after_a_restart(tmp_path, own_store):
    with TestClient(create_app(settings(tmp_path))) as c:
        c.app.state.kernels_ready.wait(600)
        first = c.post("/api/run", files={"trace": ("mine.csv", TRACE)}, data={"schedulers": "fcfs"})
        assert first.status_code == 200, first.text
        uid = first.json()["upload"]
    with TestClient(create_app(settings(tmp_path))) as c:  # a new server on the same store: memory is empty
        assert service._uploads.get(uid) is None
        again = c.get(f"/api/run?schedulers=fcfs&upload={uid}")
        assert again.status_code == 200, again.text
        assert again.json()["schedulers"] == first.json()["schedulers"]
        assert "mine.csv" in c.get(f"/?upload={uid}").text
    with TestClient(create_app(settings(tmp_path, store_dir=str(tmp_path / "elsewhere")))) as c:
        r = c.get(f"/api/run?upload={uid}")
        assert r.status_code == 422 and "upload the CSV again" in r.text


# ----- a bare /api/run, /docs -----
def test_api_run_without_parameters_runs_the_landing_pages_scenario(client):
    landing = service.page_request([]).query(sweep=False)
    bare, explicit = client.get("/api/run"), client.get(f"/api/run?{landing}")
    assert bare.status_code == explicit.status_code == 200
    assert bare.json() == explicit.json()
    assert set(bare.json()["schedulers"]) == {"fcfs", "chunked"}
    assert client.post("/api/run", json={}).json() == bare.json()
    # The catalogue's page_defaults are that scenario too (max_model_len included: the page's own deployment keeps
    # the seed's 8,192 tokens, which a URL naming the GPU would not get by default).
    defaults = client.get("/api/catalog").json()["page_defaults"]
    assert client.get("/api/run", params=defaults).json() == bare.json()


def test_docs_show_the_address_they_were_served_from(tmp_path, own_store):
    c = TestClient(create_app(settings(tmp_path, allowed_hosts=("sim.example.org",))),
                   base_url="http://sim.example.org:8765")
    page = c.get("/docs").text
    assert "curl 'http://sim.example.org:8765/api/run?" in page
    assert "localhost:8000" not in page


# ----- the OpenAPI schema -----
def test_the_schema_lists_every_error_answer_the_api_gives(client):
    paths = client.get("/openapi.json").json()["paths"]
    expected = {("get", "/api/run"): {"400", "422", "503"}, ("post", "/api/run"): {"400", "403", "413", "422", "503"},
                ("get", "/api/sweep"): {"400", "422", "503"}, ("get", "/api/step-time"): {"400", "422"}}
    for (method, path), codes in expected.items():
        responses = paths[path][method]["responses"]
        assert codes <= set(responses), (method, path, set(responses))
        detail = responses["422"]["content"]["application/json"]["schema"]
        assert "detail" in detail["properties"], (method, path)
    for path, methods in paths.items():  # every operation: the Host check's 400; all but /healthz: the 403
        for method, op in methods.items():
            assert "400" in op["responses"] and ("403" in op["responses"]) == (path != "/healthz"), (method, path)
    assert {"422", "503"} <= set(paths["/api/diff"]["get"]["responses"])
    assert paths["/healthz"]["get"]["responses"]["503"]["content"]["application/json"]["schema"]["required"] == [
        "status", "kernels_error"]


def test_a_405_names_every_method_the_path_answers(client):
    """Starlette's Allow named only the first matching route's methods (GET /api/run's, not POST's)."""
    r = client.options("/api/run")
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
    assert client.put("/upload").headers["allow"] == "POST"
    assert set(client.post("/static/js/app.js").headers["allow"].split(", ")) == {"GET", "HEAD"}


# ----- connection limits (what `sched-sim serve` runs; bench/bench_connections.py at scale) -----
async def _ok(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):  # read the whole body first, as the upload routes do
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _get(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return s.recv(1024)


def _closed(s: socket.socket, wait: float = 0.0) -> bool:
    s.settimeout(wait or 0.01)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_half_open_connections_are_bounded_and_dropped_after_the_header_timeout():
    limit, timeout = 5, 0.6
    # What each wait below checks is that the server drops the connection, not how soon this thread sees it: the
    # slack covers a loaded machine (the suite's other workers), and a wait ends as soon as the drop is seen.
    slack = 5.0
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_ok, http=serving.guarded_protocol(limit, timeout, 2 * timeout),
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    held = []
    try:
        while not server.started:
            time.sleep(0.01)
        for _ in range(3 * limit):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
            held.append(s)
        assert _get(port).startswith(b"HTTP/1.1 200")  # a new client gets in: the oldest waiting one made room
        time.sleep(0.2)
        open_now = [s for s in held if not _closed(s)]
        assert 0 < len(open_now) < limit  # the newest ones, and the 200's own connection was one of the limit
        assert all(_closed(s, wait=timeout + slack) for s in open_now)  # dropped at the header deadline
        # a kept-alive connection gets a new deadline after each answer, and is answered while within it
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            for _ in range(2):
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert s.recv(1024).startswith(b"HTTP/1.1 200")
            s.sendall(b"GET / HTTP/1.1\r\n")
            assert _closed(s, wait=timeout + slack)
        # bodies that trickle: dropped at the body deadline, and to make room for a new client at the limit
        slow = []
        for _ in range(limit + 2):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nx")
            slow.append(s)
        held += slow
        time.sleep(0.2)
        assert _get(port).startswith(b"HTTP/1.1 200")
        assert 0 < sum(not _closed(s) for s in slow) < limit
        assert all(_closed(s, wait=2 * timeout + slack) for s in slow)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # a whole body in time is answered
            s.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\nab")
            time.sleep(timeout)  # past the header deadline, within the body's
            s.sendall(b"cd")
            assert s.recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_serve_runs_the_app_with_the_guarded_protocol(monkeypatch, tmp_path):
    configs = []
    monkeypatch.setattr(serving.uvicorn, "Server", lambda config: configs.append(config) or type(
        "S", (), {"run": lambda self: None})())
    serving.serve("127.0.0.1", 8123, settings(tmp_path, max_connections=300))
    [config] = configs
    assert config.app == "app.web:app" and (config.host, config.port) == ("127.0.0.1", 8123)
    assert issubclass(config.http, serving._HeaderDeadline) and config.http.max_connections <= 300
    assert config.http.header_timeout_s == serving.HEADER_TIMEOUT_S
    assert serving.connection_limit(settings(tmp_path, max_connections=5000), 1024) == 1024 - serving.FD_RESERVE


def test_the_schema_states_the_cross_field_rules(client):
    """What the validators check across fields is in the schema, so data valid by the schema passes them."""
    jsonschema = pytest.importorskip("jsonschema")  # installed with schemathesis (the test extra)
    paths = client.get("/openapi.json").json()["paths"]
    [query] = paths["/api/run"]["get"]["parameters"]
    check = jsonschema.Draft202012Validator(query["schema"]).is_valid
    for data, ok in (({"schedulers": "fcfs,chunked"}, True), ({"schedulers": "fcfs", "scheduler": "spf"}, False),
                     ({"prefill_replicas": 1}, False), ({"prefill_replicas": 1, "decode_replicas": 2}, True),
                     ({"prefill_replicas": 0, "decode_replicas": 0}, True),
                     ({"decode_hardware": "h100"}, False), ({"schedulers": "fcfs,bogus"}, False),
                     ({"decode_hardware": "h100", "prefill_replicas": 1, "decode_replicas": 1}, True),
                     ({"prefill_replicas": 1, "decode_replicas": 1, "replicas": 2}, False), ({"nope": 1}, False),
                     ({"decode_tp": 2}, False)):
        assert check(data) is ok, data
        query_string = "&".join(f"{k}={v}" for k, v in data.items())
        if ok:  # the server agrees: nothing the schema allows here is refused for its combination
            assert client.get(f"/api/run?{query_string}&num_requests=10").status_code in (200, 503), data
    [sweep] = paths["/api/sweep"]["get"]["parameters"]
    assert not jsonschema.Draft202012Validator(sweep["schema"]).is_valid({"rate_min": 1, "rate_max": 2})
    [step] = paths["/api/step-time"]["get"]["parameters"]
    step_ok = jsonschema.Draft202012Validator(step["schema"]).is_valid
    assert not step_ok({"prefill_tokens": 0}) and step_ok({"decode_seqs": 4}) and step_ok({"prefill_tokens": 64})
    body = paths["/api/run"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert not jsonschema.Draft202012Validator(body).is_valid({"schedulers": ["fcfs"], "scheduler": "spf"})
    # null in a JSON body is "not given": a pool field set to null needs no pools, and the server agrees
    assert jsonschema.Draft202012Validator(body).is_valid({"decode_tp": None, "num_requests": 10})
    assert client.post("/api/run", json={"decode_tp": None, "num_requests": 10}).status_code in (200, 503)
    assert not jsonschema.Draft202012Validator(body).is_valid({"decode_tp": 2})
    # a blank value is "not given", in the schema as on the server (a form's blank field; null in a JSON body)
    blank_body = {"prefill_replicas": None, "scheduler": "", "schedulers": ["fcfs"], "num_requests": 10}
    assert jsonschema.Draft202012Validator(body).is_valid(blank_body)
    assert client.post("/api/run", json=blank_body).status_code in (200, 503)
    blank_query = {"prefill_replicas": "", "autoscaler": "", "num_requests": 10, "schedulers": "fcfs"}
    assert check(blank_query) and not check({"prefill_replicas": 1, "decode_replicas": ""})
    assert client.get("/api/run", params=blank_query).status_code in (200, 503)
    assert not jsonschema.Draft202012Validator(sweep["schema"]).is_valid({"rate_min": 1, "rate_max": 2,
                                                                          "rate_step": ""})
    page = client.get("/docs").text
    assert "not both" in page and "Errors:" in page and "<code>rate_min</code>" in page
