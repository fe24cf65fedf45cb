"""The dashboard's energy figures (issue #40): "power" (app/web/figures/power.py, from app/web/power_series.py) and
"energy" (app/web/figures/energy.py). Their data is the run's: each pool's power line integrates to its GPU energy
in metrics.energy (one engine, replicas, P/D pools, an autoscaled fleet), its peak is the run's peak, its dashed
lines sit at the GPU's board limit and the scenario's power cap; the bars are the metrics /api/run reports for the
same query, titled from the metric catalogue. A scenario with energy off has neither card, and their embeds say
what to set; a bad power cap is refused naming the field."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import numpy as np
import pytest

from app.web.figures.energy import PANELS
from app.web.power_series import bucket_max, step_integral
from sim_core import parse_scenario, run
from sim_core.catalog import GPUS
from sim_core.metric_catalog import BY_KEY

BASE = "hardware=l4&model=llama-3.2-1b&max_model_len=4096&workload=chat&num_requests=60&rate=4&seed=1&energy=true"
TOPOLOGIES = {
    "one engine": "",
    "replicas": "&replicas=2",
    "P/D pools": "&prefill_replicas=1&decode_replicas=1",
    "autoscaled": "&autoscaler=predictive&autoscale_replica_rate=2&provision_delay_s=30",
}
BLOB = r'<script type="application/json" data-figure-for="plot-{}">(.*?)</script>'


def figure_of(response, name: str) -> dict:
    assert response.status_code == 200, response.text[:500]
    return json.loads(re.search(BLOB.format(name), response.text, re.S).group(1))


def series(fig: dict, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bucket edges, mean W per GPU, GPUs held) of one drawn line; the last value only repeats the one before."""
    t = next(t for t in fig["data"] if t["name"] == name)
    as_array = lambda v: np.array([np.nan if x is None else x for x in v], float)  # noqa: E731
    return as_array(t["x"]), as_array(t["y"])[:-1], as_array(t["customdata"])[:-1]


def drawn_joules(edges: np.ndarray, mean_w: np.ndarray, gpus: np.ndarray) -> float:
    return float(np.nansum(mean_w * gpus * np.diff(edges)))


@pytest.mark.parametrize("shape", TOPOLOGIES.values(), ids=TOPOLOGIES.keys())
def test_each_pools_power_line_integrates_to_its_energy_and_peaks_at_the_runs_peak(client, shape):
    query = f"schedulers=fcfs&{BASE}{shape}"
    fig = figure_of(client.get(f"/embed/power?{query}"), "power")
    api = client.get(f"/api/run?{query}").json()
    energy = api["schedulers"]["fcfs"]["metrics"]["energy"]
    # the same run simulated by sim_core directly, from the scenario the API echoes (with its events, as the web
    # runs it: a cluster run without them keeps a sample of its steps, and its energy is then an estimate)
    core = run(parse_scenario({**api["scenario"], "scheduler": "fcfs"}), record_events=True).metrics["energy"]
    assert core["gpu_energy_j"] == pytest.approx(energy["gpu_energy_j"], rel=1e-9)
    pools = {"P/D pools": ("prefill", "decode")}.get(
        next(k for k, v in TOPOLOGIES.items() if v == shape), (None,))
    total = 0.0
    for pool in pools:
        edges, mean_w, gpus = series(fig, f"fcfs · {pool}" if pool else "fcfs")
        joules = drawn_joules(edges, mean_w, gpus)
        if pool:
            assert joules == pytest.approx(core["pool_energy_j"][pool], rel=1e-4)
        total += joules
        assert np.nanmax(mean_w) <= GPUS["l4"].board_power_w + 1e-6
    assert total == pytest.approx(core["gpu_energy_j"], rel=1e-4)
    peaks = [y for t in fig["data"] if t["name"].endswith(" peak") for y in t["y"] if y is not None]
    assert max(peaks) == pytest.approx(core["peak_power_w_per_gpu"], abs=1e-3)
    if shape == "":  # one engine held over the whole run: the line's mean is the run's mean power per GPU
        assert float(np.mean(mean_w)) == pytest.approx(core["avg_power_w_per_gpu"], rel=1e-4)


def test_the_dashed_lines_sit_at_the_board_limit_and_the_cap_and_no_peak_passes_the_cap(client):
    cap = 60.0
    fig = figure_of(client.get(f"/?schedulers=fcfs,chunked&{BASE}&power_cap_w={cap:g}"), "power")
    lines = {s["name"]: s["y0"] for s in fig["layout"]["shapes"]}
    assert lines == {"power cap 60 W": cap, "NVIDIA L4 board limit 72 W": GPUS["l4"].board_power_w}
    assert all(s["y0"] == s["y1"] and s["yref"] == "y" for s in fig["layout"]["shapes"])
    assert fig["layout"]["yaxis"]["range"][1] > GPUS["l4"].board_power_w  # the board line is inside the plot
    peaks = [y for t in fig["data"] if t["name"].endswith(" peak") for y in t["y"] if y is not None]
    assert peaks and max(peaks) <= cap + 1e-9
    assert {t["name"] for t in fig["data"]} == {"fcfs", "fcfs peak", "chunked", "chunked peak"}


def test_the_bars_are_the_apis_metrics_titled_from_the_catalogue(client):
    query = f"schedulers=fcfs,chunked&{BASE}&energy_price_per_kwh=0.2&grid_gco2_per_kwh=400&seeds=2"
    page = client.get(f"/?{query}")
    fig = figure_of(page, "energy")
    assert "The first seed&#39;s runs (seed 1)." in page.text  # the power card draws one seed's runs, and says so
    api = client.get(f"/api/run?{query}").json()["schedulers"]
    assert [t["name"] for t in fig["data"]] == [BY_KEY[k].label for k in PANELS]
    for k, (trace, key) in enumerate(zip(fig["data"], PANELS, strict=True)):
        axis = fig["layout"]["yaxis" if k == 0 else f"yaxis{k + 1}"]
        assert axis["title"]["text"] == f"{BY_KEY[key].label} ({BY_KEY[key].unit})"
        assert trace["x"] == ["fcfs", "chunked"]
        part = key.split(".")[1]
        assert trace["y"] == [api[s]["metrics"]["energy"][part] for s in ("fcfs", "chunked")]
        # over two seeds: each bar's 95% interval, as the API reports it
        for s, value, up, down in zip(trace["x"], trace["y"], trace["error_y"]["array"],
                                      trace["error_y"]["arrayminus"], strict=True):
            low, high = api[s]["ci95"]["energy"][part]
            assert (value - down, value + up) == (pytest.approx(low), pytest.approx(high))


def test_without_a_price_or_grid_only_the_energy_panel_is_drawn(client):
    fig = figure_of(client.get(f"/embed/energy?schedulers=fcfs&{BASE}"), "energy")
    assert [t["name"] for t in fig["data"]] == [BY_KEY["energy.joules_per_output_token"].label]
    assert "xaxis2" not in fig["layout"] and "error_y" not in fig["data"][0]


def test_energy_off_has_no_energy_cards_and_their_embeds_say_what_to_set(client):
    query = BASE.replace("&energy=true", "")
    page = client.get(f"/?schedulers=fcfs&{query}")
    assert page.status_code == 200
    assert 'id="card-metrics"' in page.text
    assert 'id="card-power"' not in page.text and 'id="card-energy"' not in page.text
    for name, words in (("power", "set energy"), ("energy", "set energy")):
        fig = figure_of(client.get(f"/embed/{name}?schedulers=fcfs&{query}"), name)
        assert fig["data"] == [] and words in fig["layout"]["annotations"][0]["text"]


def test_a_power_cap_outside_the_gpus_range_is_refused_naming_the_field(client):
    r = client.get(f"/embed/power?schedulers=fcfs&{BASE}&power_cap_w=80")
    assert r.status_code == 422
    assert "power_cap_w" in r.text and "at most its board limit (72 W)" in r.text


def test_a_step_functions_bucket_integrals_and_maxima():
    # 2 W over [0, 1), 6 W over [1, 1.5), 0 from 1.5 on; buckets of 0.75 s
    times, values = np.array([0.0, 1.0, 1.5]), np.array([2.0, 6.0, 0.0])
    edges = np.array([0.0, 0.75, 1.5, 2.25])
    assert np.diff(step_integral(times, values, edges)).tolist() == pytest.approx([1.5, 0.5 + 3.0, 0.0])
    assert step_integral(times, values, np.array([-1.0, 10.0])).tolist() == [0.0, 5.0]
    assert bucket_max(times, values, edges).tolist() == [2.0, 6.0, 0.0]
    # a value that begins inside a bucket and ends inside it still counts
    assert bucket_max(np.array([0.0, 0.1, 0.2]), np.array([1.0, 9.0, 1.0]), np.array([0.0, 1.0])).tolist() == [9.0]
    assert step_integral(np.array([]), np.array([]), edges).tolist() == [0.0] * 4


def test_vs_draws_each_sides_power_with_its_own_cap_on_one_power_axis(client):
    one = f"schedulers=fcfs&{BASE}"
    r = client.get("/vs?" + urlencode({"a": one + "&power_cap_w=60", "b": one}))
    a, b = figure_of(r, "a-power"), figure_of(r, "b-power")
    assert [s["name"] for s in a["layout"]["shapes"]] == ["power cap 60 W", "NVIDIA L4 board limit 72 W"]
    assert [s["name"] for s in b["layout"]["shapes"]] == ["NVIDIA L4 board limit 72 W"]
    assert a["layout"]["yaxis"]["range"] == b["layout"]["yaxis"]["range"]
