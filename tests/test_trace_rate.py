"""A trace replayed at another arrival rate (its recorded gaps scaled by one factor): `run --trace F --rate R`, and
the searches over rates that need it — sweep, capacity and issue 11's `plan --trace FILE`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from sim_core import Scenario
from sim_core.traces import TraceError, at_rate, own_rate, read_trace


def _trace_text(n: int = 300, rate: float = 6.0, seed: int = 3) -> str:
    """Poisson arrivals at `rate` with chat-like lengths (a few hundred prompt tokens, ~100 out)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, n))
    prompts = rng.integers(100, 900, n)
    outputs = rng.integers(20, 200, n)
    return "arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{a:.4f},{p},{o}\n" for a, p, o in zip(t, prompts, outputs, strict=True))


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("traces") / "chat.csv"
    path.write_text(_trace_text(), encoding="utf-8")
    return path


def _json(capsys, argv, code=0) -> dict:
    assert main([str(a) for a in argv]) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _metrics(doc: dict) -> dict:
    return next(iter(doc["schedulers"].values()))["metrics"]


def test_scaling_keeps_the_shape_of_the_arrivals_and_sets_the_mean_rate():
    reqs = read_trace("arrival_s,prompt_tokens,output_tokens\n2,10,5\n3,10,5\n3.5,10,5\n6,10,5\n", 100)
    assert own_rate(reqs) == pytest.approx(3 / 4)
    assert reqs.arrival_s.tolist() == [0, 1, 1.5, 4]  # the reader starts a trace at 0
    fast = at_rate(reqs, 3.0)  # four times as fast: every gap a quarter as long
    assert fast.arrival_s.tolist() == pytest.approx([0, 0.25, 0.375, 1])
    assert own_rate(fast) == pytest.approx(3.0)
    assert fast.prompt_tokens.tolist() == reqs.prompt_tokens.tolist()
    assert reqs.arrival_s.tolist() == [0, 1, 1.5, 4]  # the original is left alone


@pytest.mark.parametrize("rows", ["0,10,5\n", "1,10,5\n1,20,5\n"])
def test_a_trace_with_no_span_has_no_rate_to_scale(rows):
    reqs = read_trace("arrival_s,prompt_tokens,output_tokens\n" + rows, 100)
    assert own_rate(reqs) is None
    with pytest.raises(TraceError, match="one instant"):
        at_rate(reqs, 2.0)


def test_run_with_rate_replays_the_trace_at_that_rate(capsys, trace_file):
    recorded = _metrics(_json(capsys, ["run", "--trace", trace_file, "--hardware", "a100", "--json"]))
    faster = _metrics(_json(capsys, ["run", "--trace", trace_file, "--hardware", "a100", "--rate", "12", "--json"]))
    assert recorded["arrival_rate"] == pytest.approx(6.0, rel=0.15)  # the trace's own Poisson rate
    assert faster["arrival_rate"] == pytest.approx(12.0, rel=0.05)
    assert faster["num_requests"] == recorded["num_requests"] == 300
    assert faster["ttft_ms"]["p99"] > recorded["ttft_ms"]["p99"]  # the same work, sooner: more queueing


def test_rate_with_a_trace_is_no_longer_reported_as_ignored(capsys, trace_file):
    assert main(["run", "--trace", str(trace_file), "--rate", "3", "--seed", "4"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: --seed has no effect with --trace") and "--rate has" not in err


def test_plan_from_a_trace_is_minimal_and_its_scenario_reproduces_it(capsys, trace_file):
    doc = _json(capsys, ["plan", "--trace", trace_file, "--model", "llama-3-8b", "--rate", "30", "--gpus", "a100",
                         "--tp", "1", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "100", "--json"])
    first = doc["plans"][0]
    scenario = Scenario.from_query(first["scenario"])
    assert scenario.trace == str(trace_file) and scenario.rate == 30
    assert scenario.replicas > 1  # 30 req/s of this trace is more than one A100 serves

    def attainment(*flags):
        # The plan's scenario names the trace; --scenario reads a file only from --trace (tests/test_cli_hostile.py)
        return _metrics(_json(capsys, ["run", "--scenario", first["scenario"], "--trace", str(trace_file), *flags,
                                       "--json"]))["slo_attainment"]

    assert attainment() >= 0.9
    assert attainment("--replicas", str(scenario.replicas - 1)) < 0.9


def test_plan_without_rate_takes_the_traces_own(capsys, trace_file):
    doc = _json(capsys, ["plan", "--trace", trace_file, "--model", "llama-3-8b", "--gpus", "a100", "--tp", "1",
                         "--json"])
    assert doc["rate"] == pytest.approx(own_rate(read_trace(trace_file.read_text(encoding="utf-8"), 10_000)))
    assert Scenario.from_query(doc["plans"][0]["scenario"]).rate == pytest.approx(doc["rate"])


def test_sweep_and_capacity_scale_a_trace(capsys, trace_file):
    doc = _json(capsys, ["sweep", "--trace", trace_file, "--hardware", "a100", "--schedulers", "chunked",
                         "--min-rate", "5", "--max-rate", "40", "--step", "35", "--json"])
    low, high = doc["schedulers"]["chunked"]["points"]
    assert high["metrics"]["ttft_ms"]["p99"] > low["metrics"]["ttft_ms"]["p99"]
    cap = _json(capsys, ["capacity", "--trace", trace_file, "--hardware", "a100", "--json"])
    assert 5 < cap["max_rate"]["mean"] < 40


@pytest.mark.parametrize("command", [["sweep", "--min-rate", "1", "--max-rate", "2"], ["capacity"],
                                     ["plan", "--model", "llama-3-8b", "--gpus", "a100", "--tp", "1"]])
def test_a_trace_at_one_instant_cannot_be_searched_over_rates(capsys, tmp_path, command):
    path = tmp_path / "burst.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0,200,10\n", encoding="utf-8")
    assert main([*command, "--trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "one instant" in err and "Traceback" not in err


def test_the_api_scales_an_uploaded_trace_to_the_rate_given():
    from fastapi.testclient import TestClient

    from app.web import app

    text = _trace_text(n=120)
    with TestClient(app) as client:
        client.app.state.kernels_ready.wait(600)
        rates = []
        for extra in ({}, {"rate": "20"}):
            r = client.post("/api/run", files={"trace": ("t.csv", text, "text/csv")},
                            data={"scheduler": "chunked", "hardware": "a100", **extra})
            assert r.status_code == 200, r.text
            rates.append(_metrics(r.json())["arrival_rate"])
    assert rates[0] == pytest.approx(6.0, rel=0.25) and rates[1] == pytest.approx(20.0, rel=0.05)
