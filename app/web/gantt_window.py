"""`/gantt/window`: every request of one scheduler's Gantt in flight in a time window, from the cached run
(ganttindex.py), as a plotly figure the page swaps in when the user zooms (static/js/gantt_window.js)."""

from __future__ import annotations

import math
from dataclasses import replace

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.runner import Cancelled

from . import charts, service
from .api import busy, kernels_ready, unprocessable, warming_up
from .figures.gantt import gantt_figure
from .ganttindex import TooMany, window
from .http import CLIENT_CLOSED, run_until_disconnect
from .inputs import problems_of

# Query parameters of /gantt/window that are not scenario fields.
WINDOW_PARAMS = ("gantt", "t0", "t1", "r0", "r1", "t", "engine")
router = APIRouter(include_in_schema=False)


def _bound(request: Request, name: str) -> float:
    """A finite number from the query (a time in s, or a request index), else a 422 naming the field."""
    text = request.query_params.get(name)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ScenarioError([(name, f"a finite number is required (got {text!r})")])
    return value


def _window_answer(request: Request, cancel) -> Response:
    try:
        req = service.page_request([(k, v) for k, v in request.query_params.multi_items() if k not in WINDOW_PARAMS])
        name = request.query_params.get("gantt", "")
        if name not in req.schedulers:
            raise ScenarioError([("gantt", f"one of this comparison's schedulers: {', '.join(req.schedulers)}")])
        t0, t1 = _bound(request, "t0"), _bound(request, "t1")
        if t1 <= t0:
            raise ScenarioError([("t1", f"must be later than t0 ({t0:g} s)")])
        rows = None  # a box zoom's request range (the y axis: request index), else every request
        if "r0" in request.query_params or "r1" in request.query_params:
            rows = (_bound(request, "r0"), _bound(request, "r1"))
            if rows[1] < rows[0]:
                raise ScenarioError([("r1", f"must be at least r0 ({rows[0]:g})")])
        views = service.compare_seeds(req, cancel).views  # the page's Gantts: the first seed's
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), "query")
    except service.BusyError as e:
        return busy(str(e))
    view = next(v for v in views if v.scheduler == name)
    if view.gantt_index is None:
        note = view.gantt_note if view.gantt is None else "this run is too long to keep every request's timeline"
        return JSONResponse({"figure": None, "message": f"No zoomed timeline: {note}."})
    try:
        g = window(view.gantt_index, t0, t1, requests=rows)
    except TooMany as e:
        return JSONResponse({"figure": None, "message": str(e)})
    fig = gantt_figure(replace(view, gantt=g), charts.time_range(views))
    among = f" among #{max(0, math.ceil(rows[0]))}-#{math.floor(rows[1])}" if rows else ""
    note = f"all {g['shown']:,} requests{among} in flight between {t0:.2f} s and {t1:.2f} s (of {g['total']:,})"
    return JSONResponse({"figure": fig, "shown": g["shown"], "ids": g["rows"]["id"], "message": note})


@router.get("/gantt/window")
async def gantt_window(request: Request) -> Response:
    """Every request of one scheduler's Gantt in flight between t0 and t1 (s), optionally only requests r0..r1
    (indices): `gantt=NAME&t0=&t1=[&r0=&r1=]` beside the page's query. {"figure": plotly JSON or null,
    "message": what it shows or why not}."""
    if not kernels_ready(request):
        return warming_up(request)
    try:
        quick = service.is_cached_query([(k, v) for k, v in request.query_params.multi_items()
                                         if k not in WINDOW_PARAMS])  # a zoom into the page's runs: cached
        return await run_until_disconnect(request, _window_answer, request, busy=busy, quick=quick)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
