"""Means and 95% confidence intervals over seeds (`seeds` = N)."""

from __future__ import annotations

import json

import pytest

from sim_core import Scenario, run_seeds
from sim_core.statistics import aggregate, mean_ci95, t_975


def test_student_t_interval_of_known_samples():
    mean, low, high = mean_ci95([1.0, 2.0, 3.0, 4.0])
    # sd = 1.2910, t(0.975, 3) = 3.182: half-width 3.182 * 1.2910 / 2 = 2.054
    assert mean == 2.5 and high - mean == pytest.approx(2.0540, abs=1e-3) and mean - low == pytest.approx(2.0540, abs=1e-3)
    assert mean_ci95([7.0]) == (7.0, 7.0, 7.0)
    assert t_975(45) == 2.021 and t_975(1000) == 1.96  # between table rows: the smaller df (wider interval)


def test_aggregate_keeps_the_nesting_and_leaves_non_numbers_alone():
    docs = [{"a": 1, "b": {"p99": 10.0, "flag": True}, "name": "x", "none": None},
            {"a": 3, "b": {"p99": 14.0, "flag": True}, "name": "x", "none": 2.0}]
    means, ci = aggregate(docs)
    assert means == {"a": 2.0, "b": {"p99": 12.0, "flag": True}, "name": "x", "none": None}
    assert set(ci) == {"a", "b"} and set(ci["b"]) == {"p99"}
    assert ci["a"][0] < 2.0 < ci["a"][1]


def small(**kw) -> Scenario:
    return Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", rate=3.0, duration=20, **kw)


def test_seeds_run_consecutive_seeds_and_average_them():
    runs = run_seeds(small(seed=5, seeds=3))
    assert runs.seeds == [5, 6, 7]
    p99 = [r.metrics["ttft_ms"]["p99"] for r in runs.results]
    assert runs.metrics["ttft_ms"]["p99"] == pytest.approx(sum(p99) / 3)
    low, high = runs.ci95["ttft_ms"]["p99"]
    assert low <= runs.metrics["ttft_ms"]["p99"] <= high and low < high
    assert len({json.dumps(r.metrics, sort_keys=True) for r in runs.results}) == 3  # really different seeds


def test_the_interval_narrows_as_seeds_grow():
    def width(n: int) -> float:
        low, high = run_seeds(small(seeds=n)).ci95["ttft_ms"]["p99"]
        return high - low

    assert width(12) < width(3)
