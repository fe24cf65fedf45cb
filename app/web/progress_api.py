"""GET /api/progress: what a page's simulation is doing while it runs (run_progress.py keeps it)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sim_core import ScenarioError

from .api import unprocessable
from .run_progress import doing
from .service import page_request

router = APIRouter(prefix="/api", tags=["simulation"])


@router.get("/progress", summary="What a page's simulation is doing while it runs (its capacity searches)")
async def api_progress(request: Request) -> JSONResponse:
    """The page's query (the dashboard's URL parameters). Answers `{"doing": text}` while its runs are in a long
    part that reports (an autoscaler's capacity search: which run of at most how many), else `{"doing": null}`."""
    try:
        req = page_request(list(request.query_params.multi_items()))
    except ScenarioError as e:
        return unprocessable(e.problems, "query")
    return JSONResponse({"doing": doing(req.query())})
