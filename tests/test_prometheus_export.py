"""`sched-sim run --metrics-out`: a simulated run as vLLM's (or SGLang's) Prometheus metrics. The text parses with
the Prometheus project's own Python parser, its histograms agree with the run's summary metrics, and a series is
timestamped OpenMetrics whose last point is the end-of-run scrape."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from app.cli import main
from sim_core import Scenario, run
from sim_core.prometheus_export import exposition_text, fine_histogram, openmetrics_series
from sim_core.prometheus_names import VLLM_TTFT_BUCKETS, length_buckets
from sim_core.prometheus_parse import parse_text, window

SCENARIO = Scenario(hardware="h100", model="llama-3-8b", num_requests=120, rate=12, seed=4)


@pytest.fixture(scope="module")
def result():
    return run(SCENARIO)


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def histogram(fam, suffix: str) -> float:
    return sum(s.value for s in fam.samples if s.name.endswith(suffix))


def test_the_scrape_parses_and_its_histograms_match_the_runs_metrics(result):
    fams = families(exposition_text(result, "vllm"))
    done = int(result.finished.sum())
    m = result.metrics
    ttft = fams["vllm:time_to_first_token_seconds"]
    assert ttft.type == "histogram" and histogram(ttft, "_count") == done
    assert histogram(ttft, "_sum") / done == pytest.approx(m["ttft_ms"]["mean"] / 1e3, rel=1e-9)
    itl = fams["vllm:inter_token_latency_seconds"]
    assert histogram(itl, "_sum") / histogram(itl, "_count") == pytest.approx(
        m["itl_ms"]["mean"] / 1e3, rel=1e-9
    )
    e2e = fams["vllm:e2e_request_latency_seconds"]
    assert histogram(e2e, "_sum") / done == pytest.approx(m["e2el_ms"]["mean"] / 1e3, rel=1e-9)
    gen = fams["vllm:generation_tokens"]  # the parser names a counter's family without _total
    assert gen.type == "counter" and gen.samples[0].name == "vllm:generation_tokens_total"
    assert gen.samples[0].value == result.generated[result.finished].sum()
    success = {s.labels["finished_reason"]: s.value for s in fams["vllm:request_success"].samples}
    assert success == {"length": done, "abort": 0.0}
    assert {s.labels["model_name"] for f in fams.values() for s in f.samples} == {"llama-3-8b"}
    steps = fams["vllm:iteration_tokens_total"]
    assert histogram(steps, "_count") == result.steps.shape[0] * result.step_stride


def test_buckets_are_vllms_cumulative_and_end_at_the_count(result):
    fams = families(exposition_text(result, "vllm"))
    for fam in fams.values():
        if fam.type != "histogram":
            continue
        buckets = [s for s in fam.samples if s.name.endswith("_bucket")]
        values = [s.value for s in buckets]
        assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf"
        assert values[-1] == histogram(fam, "_count")
    les = [
        float(s.labels["le"])
        for s in fams["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert les[:-1] == list(VLLM_TTFT_BUCKETS) and les[0] == 0.001 and les[-2] == 2560.0  # loggers.py's list
    les = [
        float(s.labels["le"])
        for s in fams["vllm:request_prompt_tokens"].samples
        if s.name.endswith("_bucket")
    ]
    assert les[:-1] == list(length_buckets(result.resolved.max_model_len))
    assert length_buckets(100) == (1, 2, 5, 10, 20, 50, 100)


def test_the_itl_buckets_count_the_engines_own_histogram():
    fine = np.zeros(30_000)  # 1 us bins up to 30 ms
    coarse = np.zeros(100)  # then 1 ms bins
    fine[5_000] = 3  # 5 ms
    fine[9_999] = 1  # just under 10 ms
    fine[10_000] = 2  # 10 ms and a half microsecond: above the 0.01 bound
    coarse[40] = 4  # 40 ms
    h = fine_histogram(fine, coarse, 1.0, (0.01, 0.025, 0.05))
    assert h.cumulative == (4.0, 6.0, 10.0, 10.0) and h.count == 10


def test_sglang_names(result):
    fams = families(exposition_text(result, "sglang"))
    assert "sglang:time_to_first_token_seconds" in fams and "sglang:num_requests" in fams
    assert not any(name.startswith("vllm:") for name in fams)
    assert histogram(fams["sglang:time_to_first_token_seconds"], "_count") == result.finished.sum()


def test_a_series_is_timestamped_openmetrics_ending_at_the_scrape(result):
    text = openmetrics_series(result, "vllm", 2.0, 1_700_000_000.0)
    assert text.endswith("# EOF\n")
    stamps = sorted({float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if not line.startswith("#")})
    assert stamps[0] == 1_700_000_002.0 and stamps[-1] == pytest.approx(
        1_700_000_000.0 + result.end_s, abs=1e-3
    )
    assert len(stamps) == math.ceil(result.end_s / 2.0)
    for t in (stamps[0], stamps[-1]):  # each point, alone, is valid OpenMetrics
        lines = [
            x for x in text.splitlines() if x.startswith("#") and "EOF" not in x or x.endswith(f" {t:.3f}")
        ]
        assert list(openmetrics_families("\n".join(lines) + "\n# EOF\n"))
    snaps = parse_text(text, "series.om")
    assert len(snaps) == len(stamps)
    last = window(snaps[-1:], "x")
    end = window(parse_text(exposition_text(result, "vllm"), "x"), "x")
    for concept in ("ttft", "e2e", "queue", "prompt_len"):
        assert last.histograms[concept] == end.histograms[concept]
    assert last.counters == end.counters
    ttft_counts = [window([s], "x").histograms["ttft"].count for s in snaps]
    assert ttft_counts == sorted(ttft_counts) and ttft_counts[0] < ttft_counts[-1]
    assert window(snaps, "x").seconds == pytest.approx(stamps[-1] - stamps[0], abs=1e-3)


def test_replicas_are_engines():
    res = run(SCENARIO.model_copy(update={"replicas": 2, "num_requests": 60}))
    fams = families(exposition_text(res, "vllm"))
    counts = {
        s.labels["engine"]: s.value
        for s in fams["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_count")
    }
    assert set(counts) == {"0", "1"} and sum(counts.values()) == res.finished.sum()
    assert all(v > 0 for v in counts.values())


def test_refused_requests_are_aborts_counted_once():
    overload = Scenario(
        hardware="h100",
        model="llama-3-8b",
        scheduler="slo",
        rate=80,
        num_requests=150,
        seed=1,
        replicas=2,
        workload="random",
        isl=4000,
        osl=64,
    )
    res = run(overload)
    assert res.rejected.sum() > 0
    fams = families(exposition_text(res, "vllm"))
    by_reason = {}
    for s in fams["vllm:request_success"].samples:
        by_reason[s.labels["finished_reason"]] = by_reason.get(s.labels["finished_reason"], 0) + s.value
    assert by_reason == {"length": res.finished.sum(), "abort": res.rejected.sum()}


def cli(capsys, argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


RUN = ["run", "--hardware", "h100", "--model", "llama-3-8b", "--num-requests", "40", "--rate", "8"]


def test_run_writes_metrics_and_follows_the_engine(capsys, tmp_path):
    path = tmp_path / "m.prom"
    code, out, _ = cli(capsys, [*RUN, "--metrics-out", path])
    assert code == 0 and f"wrote {path} (vllm metrics" in out
    assert "vllm:time_to_first_token_seconds" in families(path.read_text(encoding="utf-8"))
    code, out, _ = cli(
        capsys,
        [
            *RUN,
            "--engine",
            "sglang",
            "--metrics-out",
            path,
            "--metrics-interval",
            "1",
            "--metrics-start",
            "1700000000",
        ],
    )
    assert code == 0 and "sglang metrics" in out
    text = path.read_text(encoding="utf-8")
    assert text.endswith("# EOF\n") and re.search(
        r"^sglang:num_requests_total\{.*\} \S+ 1700000001\.000$", text, re.M
    )


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--metrics-interval", "5"], "--metrics-interval: goes with --metrics-out FILE"),
        (["--metrics-format", "sglang"], "--metrics-format: goes with --metrics-out FILE"),
        (
            ["--metrics-out", "{tmp}/m", "--metrics-interval", "0"],
            "--metrics-interval: must be greater than 0",
        ),
        (["--metrics-out", "{tmp}/m", "--metrics-format", "trt"], "--metrics-format: invalid choice"),
        (["--metrics-out", "{tmp}/m", "--metrics-start", "5"], "--metrics-start: timestamps a series"),
        (["--metrics-out", "{tmp}/nodir/m"], "--metrics-out: cannot write"),
        (["--metrics-out", "{tmp}/m", "--metrics-interval", "0.0001"], "points; at most 10,000"),
        (["--metrics-out", "{tmp}/m", "--metrics-interval", "1e-320"], "inf points; at most 10,000"),
        (
            ["--metrics-out", "{tmp}/m", "--metrics-interval", "1", "--metrics-start", "1e300"],
            "--metrics-start: must be a Unix time between 0 and 4102444800",
        ),
    ],
)
def test_bad_metrics_flags_are_one_error_line(capsys, tmp_path, extra, words):
    code, _, err = cli(capsys, [*RUN, *[x.replace("{tmp}", str(tmp_path)) for x in extra]])
    assert code == 2 and err.count("\n") == 1 and words in err, err
