"""`/kv/engine`: the KV view of one engine of a cluster, from the cached runs (every engine's KV data is kept with
each run's view, clusterview.engine_kv), for the page's engine list to switch to (static/js/kv_player.js): the grid's
spec and every scheduler's frames of that engine, as the page embeds the busiest engine's (figures/kv.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.quoting import quote
from sim_core.runner import Cancelled

from . import charts, service
from .api import busy, kernels_ready, unprocessable, warming_up
from .figures.kv import engine_kv, engine_names
from .http import CLIENT_CLOSED, run_until_disconnect
from .inputs import problems_of

# Query parameters of /kv/engine that are not scenario fields: the engine, and the page's playback time.
ENGINE_PARAMS = ("engine", "t")
router = APIRouter(include_in_schema=False)


def _engine_answer(request: Request, cancel) -> Response:
    try:
        req = service.page_request([(k, v) for k, v in request.query_params.multi_items() if k not in ENGINE_PARAMS])
        name = request.query_params.get("engine", "")
        if req.scenario.engines == 1:
            raise ScenarioError([("engine", "this scenario runs one engine; engine= picks one engine of a cluster "
                                            "(replicas, or prefill_replicas and decode_replicas)")])
        views = service.compare_seeds(req, cancel).views  # the page's KV view: the first seed's runs
        names = engine_names(views)
        if name not in names:
            raise ScenarioError([("engine", f"one of this cluster's engines, {', '.join(names)} (got {quote(name)})")])
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), "query")
    except service.BusyError as e:
        return busy(str(e))
    return JSONResponse({"engine": name, **engine_kv(views, charts.time_range(views), name)})


@router.get("/kv/engine")
async def kv_engine(request: Request) -> Response:
    """One engine's KV view of a cluster comparison: `engine=NAME` ("replica 2", "decode 0") beside the page's
    query. {"engine", "kv": the grid and state colours, "frames": every scheduler's frames of that engine}."""
    if not kernels_ready(request):
        return warming_up(request)
    try:
        quick = service.is_cached_query([(k, v) for k, v in request.query_params.multi_items()
                                         if k not in ENGINE_PARAMS])  # the page's runs: cached
        return await run_until_disconnect(request, _engine_answer, request, busy=busy, quick=quick)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
