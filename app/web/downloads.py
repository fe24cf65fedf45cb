"""One scheduler's run as a file, from the page: its requests as CSV (sim_core.request_table), its Perfetto
trace (sim_core.trace_export) and its engine's Prometheus metrics at the end of the run (sim_core.prometheus_export,
what `sched-sim run --metrics-out` writes). The query is a page's scenario query naming one scheduler (`scheduler=`); bad input
is a 422 in the JSON API's shape."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sim_core import SCHEDULER_NAMES, ScenarioError, SetupError, TraceError
from sim_core.prometheus_export import exposition_text
from sim_core.prometheus_names import flavour_of_engine
from sim_core.request_table import requests_csv
from sim_core.runner import Cancelled
from sim_core.trace_export import chrome_trace

from . import service
from .api import busy, kernels_ready, unprocessable, warming_up
from .http import CLIENT_CLOSED, run_until_disconnect
from .inputs import page_defaults, parse_request, problems_of, query_to_dict

router = APIRouter(prefix="/download", include_in_schema=False)


def _one_scheduler_run(request: Request, cancel):
    """(scheduler, its Result), or a 422 / 503 response."""
    try:
        data = query_to_dict(request.query_params.multi_items())
        req = parse_request(data, defaults=page_defaults(data), uploads=service.upload_info)
        if len(req.schedulers) != 1:
            raise ScenarioError([("scheduler", "a download is one scheduler's run: give scheduler=NAME (one of "
                                               f"{', '.join(SCHEDULER_NAMES)}) instead of schedulers")])
        name = req.schedulers[0]
        return name, service.full_run(req, name, cancel)
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), "query")
    except service.BusyError as e:
        return busy(str(e))


def _attachment(body: str, media_type: str, filename: str) -> Response:
    return Response(body, media_type=media_type,
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def _download(request: Request, render, cancel) -> Response:
    """One scheduler's run rendered as a file by `render(name, result) -> (body, media type, file name)`."""
    try:
        found = _one_scheduler_run(request, cancel)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    if isinstance(found, Response):
        return found
    return _attachment(*render(*found))


def _requests_csv(name: str, result) -> tuple[str, str, str]:
    return requests_csv(result), "text/csv; charset=utf-8", f"sched-sim-{name}-requests.csv"


def _trace(name: str, result) -> tuple[str, str, str]:
    body = json.dumps(chrome_trace(result), separators=(",", ":"), allow_nan=False)
    return body, "application/json", f"sched-sim-{name}.trace.json"


def _metrics(name: str, result) -> tuple[str, str, str]:
    flavour = flavour_of_engine(result.scenario.engine)
    # The text format's own media type, as a server's /metrics serves it.
    return exposition_text(result, flavour), "text/plain; version=0.0.4; charset=utf-8", f"sched-sim-{name}.prom"


@router.get("/requests.csv")
async def download_requests_csv(request: Request) -> Response:
    """One row per request of one scheduler's run (sim_core.request_table.COLUMNS)."""
    if not kernels_ready(request):
        return warming_up(request)
    return await run_until_disconnect(request, _download, request, _requests_csv, busy=busy)


@router.get("/trace.json")
async def download_trace(request: Request) -> Response:
    """One scheduler's run as a Chrome trace-event file: open it in ui.perfetto.dev."""
    if not kernels_ready(request):
        return warming_up(request)
    return await run_until_disconnect(request, _download, request, _trace, busy=busy)


@router.get("/metrics.prom")
async def download_metrics(request: Request) -> Response:
    """One scheduler's run as its engine's Prometheus /metrics at the end of the run (vLLM's names; SGLang's for
    engine=sglang)."""
    if not kernels_ready(request):
        return warming_up(request)
    return await run_until_disconnect(request, _download, request, _metrics, busy=busy)
