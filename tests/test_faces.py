"""One definition per concept across the faces: the CLI's metrics table and `sched-sim list`, the dashboard's
metrics table and `/docs` show the same metric names, units and descriptions, all from sim_core's catalogue."""

from __future__ import annotations

import html
import json
import re

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.web import app
from sim_core.metric_catalog import METRICS, Metric

ARGS = {"schedulers": "fcfs,chunked", "hardware": "rtx3050", "max_model_len": "8192", "workload": "rag",
        "num_requests": "40", "prefix_cache": "true"}  # two request classes and the prefix cache: every kind of row shows
DASHBOARD_ROW = re.compile(r'<th scope="row" title="([^"]*)"><button type="button" class="term"[^>]*>([^<]*?)</button>'
                           r'(?: <span class="unit">([^<]*)</span>)?</th>')
DOCS_ROW = re.compile(r'<tr id="metric-[^"]*"><td>([^<]*)</td><td>([^<]*)</td><td><code>([^<]*)</code></td>'
                      r'<td>([^<]*)</td><td>([^<]*)</td></tr>')


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        c.app.state.kernels_ready.wait(600)  # warm-up runs in the background
        yield c


def catalogue_entry(name: str) -> Metric:
    """The catalogue metric a table row's name comes from (`retrieval: P99 TTFT` from `{}: P99 TTFT`)."""
    found = [m for m in METRICS if m.label == name
             or (m.part and re.fullmatch(re.escape(m.label).replace(r"\{\}", ".+"), name))]
    assert len(found) == 1, f"{name!r} is not one catalogue label"
    return found[0]


def cli_rows(capsys) -> list[tuple[str, str]]:
    """(name, unit) of each row of `sched-sim compare`'s metrics table."""
    argv = ["compare"] + [a for k, v in ARGS.items() for a in (f"--{k.replace('_', '-')}", v)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(k for k, line in enumerate(lines) if "Serving Benchmark Result" in line)
    rows = []
    for line in lines[start + 2:]:
        if line.startswith("="):
            break
        if line.startswith("-"):  # a section heading
            continue
        text = re.split(r"\s{2,}", line)[0]
        name, inside = re.fullmatch(r"([^()]+?)(?: \(([^()]*)\))?", text).groups()
        rows.append((name, (inside or "").split(", ")[0]))
    return rows


def dashboard_rows(client) -> list[tuple[str, str, str]]:
    """(name, unit, description) of each row of the dashboard's metrics table, in reading order."""
    page = client.get("/?" + "&".join(f"{k}={v}" for k, v in ARGS.items()))
    assert page.status_code == 200
    table = page.text[page.text.index('class="metrics-grid"'):]
    return [(html.unescape(n), html.unescape(u or ""), html.unescape(d)) for d, n, u in DASHBOARD_ROW.findall(table)]


def test_cli_and_dashboard_tables_show_the_same_rows_from_the_catalogue(capsys, client):
    cli = cli_rows(capsys)
    dashboard = dashboard_rows(client)
    assert cli == [(name, unit) for name, unit, _ in dashboard]
    names = [name for name, _ in cli]
    assert {"Goodput", "P99 ITL", "Prefix cache hit rate", "retrieval: P99 TTFT", "chat: SLO attainment"} <= set(names)
    for name, unit, description in dashboard:
        m = catalogue_entry(name)
        assert unit == m.unit_text and description == m.description, name


def test_docs_and_cli_list_render_the_whole_catalogue(capsys, client):
    docs = client.get("/docs")
    assert docs.status_code == 200
    rows = [tuple(html.unescape(x) for x in r) for r in DOCS_ROW.findall(docs.text)]
    assert rows == [(m.doc_label, m.unit, m.doc_key, m.better or "", m.description) for m in METRICS]

    assert main(["list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["metrics"]
    assert [(x["label"], x["unit"], x["key"], x["description"]) for x in listed] == [
        (m.doc_label, m.unit, m.doc_key, m.description) for m in METRICS]

    assert main(["list"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for m in METRICS:
        assert f"{m.doc_label} {m.unit} {m.doc_key} {' '.join(m.description.split())}" in text, m.key

