"""The gallery's experiments checked on the dashboard: when a page shows one (its canonical query is one of
theirs), what the experiment expects and whether this run shows it."""

from __future__ import annotations

from urllib.parse import parse_qsl

from sim_core import ScenarioError
from sim_core.studies.experiments import BY_KEY as EXPERIMENTS_BY_KEY
from sim_core.studies.experiments import EXPERIMENTS

from . import service
from .inputs import PAGE_SCHEDULERS, WebRequest, page_defaults, parse_request, query_to_dict


def _page_request(query: str) -> WebRequest:
    data = query_to_dict(parse_qsl(query))
    return parse_request(data, defaults=page_defaults(data), default_schedulers=PAGE_SCHEDULERS)


def _canonical(query: str) -> str | None:
    try:
        return _page_request(query).query(sweep=False)
    except ScenarioError:
        return None


EXPERIMENT_QUERIES = {e.key: _canonical(e.query) for e in EXPERIMENTS}


def experiment_verdict(req: WebRequest, views, cancel=None) -> dict | None:
    """When the page shows one of the gallery's experiments: what it should show and whether it did here."""
    key = next((k for k, q in EXPERIMENT_QUERIES.items() if q == req.query(sweep=False)), None)
    if key is None:
        return None
    e = EXPERIMENTS_BY_KEY[key]

    def run_query(query: str) -> dict[str, dict]:
        if query == e.query:
            return {v.scheduler: v.metrics for v in views}
        other = _page_request(query)
        return {v.scheduler: v.metrics for v in service.compare_seeds(other, cancel).views}

    claims = e.claims(run_query)
    return {"title": e.title, "source": e.source, "expect": e.expect, "claims": claims,
            "held": all(ok for _, ok in claims)}
