"""The twin page (issue #39 item 5, app/web/twin_page.py, sim_core/twin.py): an uploaded scrape of a server beside
the simulation of the load it saw. The same deployment's scrape is matched; a slower server's scrape is stated as
slower than the simulation; a bad upload or field is a 422 naming it, never a 5xx."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core import Scenario, resolve, run
from sim_core.hardware_profile import Profile
from sim_core.kernel.cost_constants import default_constants
from sim_core.prometheus_export import exposition_text, openmetrics_series
from sim_core.prometheus_parse import HistogramWindow
from sim_core.twin import histogram_quantile

DEPLOYMENT = {"hardware": "h100", "model": "llama-3-8b"}
LOAD = Scenario(**DEPLOYMENT, num_requests=240, rate=8, seed=2, workload="random", isl=1024, osl=128)
# The slower server: GEMMs and memory at half the catalog's efficiency (another card behind the same name).
SLOWER = {"compute_efficiency": 0.5, "bandwidth_efficiency": 0.5}
ERROR = re.compile(r'class="field-error" id="err-([^"]+)">([^<]*)')


def slower_run(scenario: Scenario):
    setup = resolve(scenario).setup
    base = default_constants(setup)
    constants = replace(base, **{k: getattr(base, k) * f for k, f in SLOWER.items()})
    profile = Profile(setup.gpu.key, setup.model.key, setup.quantization, scenario.tp, constants)
    return run(scenario.model_copy(update={"hardware_profile": profile.compact()}))


@pytest.fixture(scope="module")
def same_series() -> str:
    return openmetrics_series(run(LOAD), "vllm", 5.0, 1.7e9)


def post(client, text: str | bytes, name: str = "scrape.prom", **fields):
    body = text.encode() if isinstance(text, str) else text
    return client.post("/twin", files={"scrape": (name, body)}, data={**DEPLOYMENT, **fields})


def rows(html: str) -> dict[str, tuple[str, str, str]]:
    """{row key: (scrape, simulation, difference)} from the page's tables."""
    out = {}
    for key, cells in re.findall(r'<tr data-key="([^"]+)">(.*?)</tr>', html, re.S):
        out[key] = tuple(c.strip() for c in re.findall(r'<td class="num">([^<]*)</td>', cells))
    return out


def figure(html: str) -> dict:
    return json.loads(re.search(r'data-figure-for="plot-twin">(.*?)</script>', html, re.S).group(1))


def test_histogram_quantile_is_prometheus_linear_interpolation():
    h = HistogramWindow((1.0, 2.0, 4.0), (1.0, 3.0, 4.0, 4.0), 7.0, 4.0)
    assert histogram_quantile(0.5, h) == pytest.approx(1.5)  # rank 2: half-way through (1, 2]
    assert histogram_quantile(0.25, h) == pytest.approx(1.0)
    assert histogram_quantile(1.0, h) == pytest.approx(4.0)
    beyond = HistogramWindow((1.0,), (1.0, 4.0), 10.0, 4.0)
    assert histogram_quantile(0.9, beyond) == 1.0  # in +Inf: the highest finite bound, as Prometheus says
    assert histogram_quantile(0.5, HistogramWindow((1.0,), (0.0, 0.0), 0.0, 0.0)) is None


def test_the_form_is_linked_from_the_top_bar(client):
    r = client.get("/twin")
    assert r.status_code == 200 and 'enctype="multipart/form-data"' in r.text and 'name="scrape"' in r.text
    assert 'href="/twin" data-nav="Twin"' in client.get("/").text


def test_a_scrape_of_the_same_deployment_is_matched(client, same_series):
    r = post(client, same_series)
    assert r.status_code == 200, ERROR.findall(r.text)
    got = rows(r.text)
    for key in ("ttft_mean", "itl_mean", "e2e_mean", "e2e_p50", "prompt_len_mean", "output_len_p90"):
        assert got[key][2] and abs(int(got[key][2].rstrip("%"))) <= 10, (key, got[key])
    assert "rate=" in r.text and "isl=1024" in r.text  # the load was derived from the scrape
    fig = figure(r.text)
    assert [t["name"] for t in fig["data"]] == ["scrape", "simulation"] * 5
    assert fig["data"][0]["y"][-1] == 100.0 and fig["data"][1]["y"][-1] == 100.0


def test_a_slower_servers_scrape_is_stated_slower_than_the_simulation(client):
    r = post(client, openmetrics_series(slower_run(LOAD), "vllm", 5.0, 1.7e9))
    assert r.status_code == 200, ERROR.findall(r.text)
    got = rows(r.text)
    for key in ("ttft_mean", "itl_mean", "e2e_mean"):
        assert float(got[key][0]) > float(got[key][1]), (key, got[key])  # measured slower than simulated
        assert int(got[key][2].rstrip("%")) <= -10
    diffs = re.search(r'id="twin-differences">(.*?)</ul>', r.text, re.S).group(1)
    assert "TTFT mean: simulated" in diffs and "E2E latency mean" in diffs


def test_a_single_scrape_needs_a_stated_rate(client):
    one = exposition_text(run(LOAD), "vllm")
    r = post(client, one)
    assert r.status_code == 422 and "arrival rate" in dict(ERROR.findall(r.text))["scrape"]
    assert post(client, one, rate="8").status_code == 200


@pytest.mark.parametrize("body, fields, field, words", [
    ("", {}, "scrape", "no file"),
    (b"\xff\xfe\x00binary", {}, "scrape", "not UTF-8"),
    ("not a metric line at all\n", {}, "scrape", "line 1: not a Prometheus sample line"),
    ("vllm:x 1\nvllm:y{le=\"0.1\"} two\n", {}, "scrape", "line 2"),
    ('{"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}', {}, "scrape", "matrix or vector"),
    ("node_cpu_seconds_total 5\n", {}, "scrape", "no vLLM or SGLang metrics"),
    ('vllm:num_requests_running{model_name="m"} 3\n', {}, "scrape", "no vllm:time_to_first_token_seconds"),
    (None, {"tp": "abc"}, "tp", ""),
    (None, {"tp": "3"}, "tp", ""),
    (None, {"engine": "sglang"}, "scrape", "engine=vllm"),
    (None, {"model": "no-such-model"}, "model", ""),
    (None, {"rate": "-1"}, "rate", ""),
])
def test_bad_uploads_and_fields_are_422s_naming_them(client, same_series, body, fields, field, words):
    r = post(client, same_series if body is None else body, **fields)
    assert r.status_code == 422, (r.status_code, ERROR.findall(r.text))
    errors = dict(ERROR.findall(r.text))
    assert field in errors and words in errors[field], errors


def test_an_upload_over_the_limit_is_refused_by_its_size(client):
    r = post(client, "#" * (6 * 1024 * 1024))
    assert r.status_code == 422 and "MB" in dict(ERROR.findall(r.text))["scrape"]


def query_range(series: str) -> str:
    """An OpenMetrics series as the JSON Prometheus' /api/v1/query_range answers (a matrix, a series per name and
    label set, [unix seconds, "value"] points)."""
    matrix: dict[str, dict] = {}
    for line in series.splitlines():
        if not line or line.startswith("#"):
            continue
        sample, value, ts = line.rsplit(" ", 2)
        name, _, labels = sample.partition("{")
        metric = {"__name__": name} | dict(
            (k, v.strip('"')) for k, v in (p.split("=", 1) for p in labels.rstrip("}").split(",") if p)
        )
        matrix.setdefault(sample, {"metric": metric, "values": []})["values"].append([float(ts), value])
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(matrix.values())}})


def test_a_query_range_answer_is_a_window_with_its_kv_usage_compared(client, same_series):
    r = post(client, query_range(same_series), name="range.json")
    assert r.status_code == 200, ERROR.findall(r.text)
    assert re.search(r"\d+ snapshots over \d+ s", r.text)
    scrape, simulation, diff = rows(r.text)["kv_usage"]
    assert float(scrape) > 0 and float(simulation) > 0 and diff  # a series' mean gauge is compared
    one = post(client, exposition_text(run(LOAD), "vllm"), rate="8")
    assert rows(one.text)["kv_usage"][0] == "n/a"  # a single scrape's gauge is one instant: not compared


def test_another_sites_form_cannot_post_a_scrape(client, same_series):
    r = client.post("/twin", files={"scrape": ("s.prom", same_series.encode())}, data=DEPLOYMENT,
                    headers={"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403 and "twin-summary" not in r.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode),
                 st.lists(st.sampled_from(['vllm:time_to_first_token_seconds_bucket{le="0.1"} 3',
                                           'vllm:time_to_first_token_seconds_count 3', "vllm:x NaN", "{", "# EOF",
                                           'vllm:inter_token_latency_seconds_sum{a="\\"q"} -1', '{"data": 1}']),
                          max_size=6).map(lambda lines: "\n".join(lines).encode())))
def test_no_upload_makes_the_page_fail(client, body):
    r = post(client, body)
    assert r.status_code in (200, 422), r.status_code
    if r.status_code == 422:
        assert ERROR.search(r.text)  # the problem is said under a field


def test_an_sglang_scrape_needs_no_engine_chosen_and_a_wrong_one_is_named(client):
    series = openmetrics_series(run(LOAD.model_copy(update={"engine": "sglang"})), "sglang", 5.0, 1.7e9)
    assert '<option value="" selected>' in client.get("/twin").text  # the engine's blank choice: the scrape's
    r = post(client, series, engine="")
    assert r.status_code == 200, ERROR.findall(r.text)
    assert "sglang metrics" in r.text and "engine=sglang" in r.text  # derived from the scrape's names
    wrong = post(client, series, engine="vllm")
    assert wrong.status_code == 422 and "engine=sglang" in dict(ERROR.findall(wrong.text))["scrape"]
