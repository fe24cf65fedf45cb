"""sim_core.metric_catalog: every metric a run reports is catalogued once, and the table rows it yields follow
its rules (which rows a set of runs shows)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim_core import Scenario, run
from sim_core.metric_catalog import BY_KEY, KINDS, METRICS, SHOWN, table_sections, value_at

UNITS = {"ms", "s", "req/s", "tok/s", "%", "count", "flag", "$/h", "$", "J", "J/tok", "W", "gCO2"}


def leaf_keys(d: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        out |= leaf_keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}"}
    return out


def catalogued(key: str) -> bool:
    return any(re.fullmatch(re.escape(m.key).replace(r"\*", r"[^.]+"), key) for m in METRICS)


@pytest.fixture(scope="module")
def runs():
    """Runs that between them report every kind of key: request classes, the prefix cache, shed and rejected
    requests."""
    small = dict(hardware="rtx3050", max_model_len=8192, num_requests=40, seed=1)
    return {
        "rag-cache": run(Scenario(workload="rag", prefix_cache=True, **small), bounds=True).metrics,
        "one-class": run(Scenario(workload="code", scheduler="fcfs", **small)).metrics,
        "shed": run(Scenario(workload="chat", scheduler="slo", rate=200, slo_ttft_ms=50,
                             **{**small, "max_model_len": 1024})).metrics,
        "replicas": run(Scenario(workload="chat", replicas=2, **small)).metrics,
        "pools": run(Scenario(workload="chat", prefill_replicas=1, decode_replicas=1, **small)).metrics,
        "kv-tiers": run(Scenario(workload="multiturn", prefix_cache=True, kv_blocks=60, kv_offload_cpu_gb=0.004,
                                 kv_offload_disk_gb=0.02, **small)).metrics,
        "spec": run(Scenario(workload="chat", spec_method="eagle", **small)).metrics,
        "autoscaled": run(Scenario(workload="chat", autoscaler="predictive", autoscale_replica_rate=2, **small)).metrics,
        "autoscaled-pools": run(Scenario(workload="chat", prefill_replicas=1, decode_replicas=1,
                                         autoscaler="predictive", autoscale_replica_rate=2, **small)).metrics,
        "lora": run(Scenario(workload="chat", lora_adapters=4, max_loras=2, **small)).metrics,
        "reasoning": run(Scenario(workload="reasoning", **{**small, "num_requests": 4})).metrics,
        "energy-pools": run(Scenario(workload="chat", prefill_replicas=1, decode_replicas=1, energy=True,
                                     **{**small, "hardware": "l4"})).metrics,
        "energy-priced": run(Scenario(workload="chat", energy=True, energy_price_per_kwh=0.12, grid_gco2_per_kwh=400,
                                      **{**small, "hardware": "l4"})).metrics,
    }


def test_every_reported_key_is_catalogued(runs):
    for name, metrics in runs.items():
        missing = sorted(k for k in leaf_keys(metrics) if not catalogued(k))
        assert missing == [], f"{name}: add these to sim_core/metric_catalog.py: {missing}"


def test_every_catalogued_key_is_reported(runs):
    seen = set().union(*(leaf_keys(m) for m in runs.values()))
    for m in METRICS:
        assert any(re.fullmatch(re.escape(m.key).replace(r"\*", r"[^.]+"), k) for k in seen), m.key


def test_records_are_well_formed():
    assert len(BY_KEY) == len(METRICS)
    labels = [m.label for m in METRICS]
    assert len(set(labels)) == len(labels)
    for m in METRICS:
        assert m.unit in UNITS and m.kind in KINDS and m.shown in SHOWN and m.better in ("lower", "higher", None)
        assert ("*" in m.key) == bool(m.part) == ("{}" in m.label), m.key
        assert "(" not in m.label and ")" not in m.label, m.label  # tables put the unit in parentheses
        assert m.description[0].isupper() and m.description.endswith("."), m.key
        assert (m.unit == "%") == (m.kind == "fraction"), m.key


def titles_and_labels(runs: list[dict]) -> list[tuple[str, list[str]]]:
    return [(s.title, [r.metric.label for r in s.rows]) for s in table_sections(runs)]


def test_tables_show_prefix_cache_rows_only_when_a_run_had_it(runs):
    with_cache = dict(titles_and_labels([runs["rag-cache"], runs["one-class"]]))
    assert with_cache["Prefix cache"] == ["Prefix cache hit rate", "Prefill tokens saved", "Cache evictions"]
    rows = {r.metric.key: r.values for s in table_sections([runs["rag-cache"], runs["one-class"]]) for r in s.rows}
    assert rows["prefix_cache_hit_rate"][1] is None  # the run without the cache shows no value
    assert "Prefix cache" not in dict(titles_and_labels([runs["one-class"]]))


def test_tables_show_class_rows_for_mixed_workloads_one_class_at_a_time(runs):
    classes = list(runs["rag-cache"]["per_class"])
    assert len(classes) == 2
    rows = dict(titles_and_labels([runs["rag-cache"]]))["Per request class"]
    per_class = ["requests", "completed", "SLO attainment", "P99 TTFT", "P99 E2EL"]
    assert rows == [f"{c}: {what}" for c in classes for what in per_class]
    assert "Per request class" not in dict(titles_and_labels([runs["one-class"]]))


def test_rare_events_and_rejection_reasons_show_only_when_they_happen(runs):
    shed = runs["shed"]
    assert shed["shed"] > 0 and shed["rejected_reasons"]
    requests = dict(titles_and_labels([shed]))["Requests"]
    assert "Shed" in requests and "Degraded" not in requests
    assert [f"Rejected: {r}" for r in sorted(shed["rejected_reasons"])] == [x for x in requests
                                                                         if x.startswith("Rejected: ")]
    assert "Shed" not in dict(titles_and_labels([runs["one-class"]]))["Requests"]


def test_value_at_follows_dotted_keys(runs):
    m = runs["one-class"]
    assert value_at(m, "ttft_ms.p99") == m["ttft_ms"]["p99"] and value_at(m, "no.such") is None


def test_catalogue_imports_no_web_or_plotting_library():
    code = ("import sys, sim_core.metric_catalog, sim_core.fields, sim_core.studies.sweep; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'fastapi', 'starlette', 'jinja2', 'plotly', 'uvicorn', 'app'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"
