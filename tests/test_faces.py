"""One definition per concept across the faces: the dashboard's metrics table and `/docs` show the metric names,
units and descriptions of sim_core's catalogue."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient

from app.web import app
from sim_core.metric_catalog import METRICS, Metric

ARGS = {"schedulers": "fcfs,chunked", "hardware": "rtx3050", "workload": "rag", "num_requests": "40",
        "prefix_cache": "true"}  # two request classes and the prefix cache: every kind of row shows
DASHBOARD_ROW = re.compile(r'<th scope="row" title="([^"]*)">([^<]*?)(?: <span class="unit">([^<]*)</span>)?</th>')
DOCS_ROW = re.compile(r'<tr id="metric-[^"]*"><td>([^<]*)</td><td>([^<]*)</td><td><code>([^<]*)</code></td>'
                      r'<td>([^<]*)</td><td>([^<]*)</td></tr>')


@pytest.fixture(scope="module")
def client():
    with TestClient(app) as c:
        yield c


def catalogue_entry(name: str) -> Metric:
    """The catalogue metric a table row's name comes from (`retrieval: P99 TTFT` from `{}: P99 TTFT`)."""
    found = [m for m in METRICS if m.label == name
             or (m.part and re.fullmatch(re.escape(m.label).replace(r"\{\}", ".+"), name))]
    assert len(found) == 1, f"{name!r} is not one catalogue label"
    return found[0]


def dashboard_rows(client) -> list[tuple[str, str, str]]:
    """(name, unit, description) of each row of the dashboard's metrics table, in reading order."""
    page = client.get("/?" + "&".join(f"{k}={v}" for k, v in ARGS.items()))
    assert page.status_code == 200
    table = page.text[page.text.index('class="metrics-grid"'):]
    return [(html.unescape(n), html.unescape(u or ""), html.unescape(d)) for d, n, u in DASHBOARD_ROW.findall(table)]


def test_dashboard_table_shows_catalogue_names_units_and_descriptions(client):
    dashboard = dashboard_rows(client)
    names = [name for name, _, _ in dashboard]
    assert {"Goodput", "P99 ITL", "Prefix cache hit rate", "retrieval: P99 TTFT", "chat: SLO attainment"} <= set(names)
    for name, unit, description in dashboard:
        m = catalogue_entry(name)
        assert unit == m.unit_text and description == m.description, name


def test_docs_render_the_whole_catalogue(client):
    docs = client.get("/docs")
    assert docs.status_code == 200
    rows = [tuple(html.unescape(x) for x in r) for r in DOCS_ROW.findall(docs.text)]
    assert rows == [(m.doc_label, m.unit, m.doc_key, m.better or "", m.description) for m in METRICS]
