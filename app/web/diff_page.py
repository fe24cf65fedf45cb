"""Request-level A/B on the web: the /diff page and /api/diff, for two runs over the same requests (two
schedulers, or two whole scenarios), each given as a scenario query string in its own parameter:

    /diff?a=<QUERY A>&b=<QUERY B>[&by=e2el_ms][&request=ID]   /api/diff?a=...&b=...[&by=...][&top=N][&request=ID]

(QUERY: what the dashboard's URL carries after `?`, URL-encoded as one value; a query naming several schedulers
runs its first, one asking for several seeds its first seed.) The page fills what a query leaves out with the
dashboard's defaults, as the main page does; the API with the scenario model's own, as /api/run does. Both answer
from sim_core.request_diff: the API its JSON document (`requests`, each with its id, `change_ms` per metric and
`causes_ms`; `mean_change_ms`; `causes_ms`), the page its figures (app/web/figures/request_diff.py). `request`
picks one request to compare in full (its timelines and parts under A and under B: request_diff.picked_request),
by its id, or by clicking its point or its timeline on the page (static/js/diff_pick.js).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.request_diff import METRICS, NotCompared, RequestDiff, RequestsDiffer, diff_document
from sim_core.runner import Cancelled

from . import service
from .api import busy, clean, kernels_error, kernels_ready, unprocessable, warming_up
from .cache import DIFF_CACHE_BYTES
from .figures import request_diff as figs
from .http import CLIENT_CLOSED, errors_by_field, run_until_disconnect
from .inputs import WebRequest, page_defaults, parse_request, problems_of, query_to_dict
from .templating import templates

router = APIRouter(include_in_schema=False)
api_router = APIRouter(prefix="/api", tags=["simulation"])

PAGE_TOP = 10  # most-hurt (and most-helped) requests the page lists with their timelines
MAX_TOP = 100
PARAMS = ("a", "b", "by", "top", "request")
EXAMPLE_A = "scheduler=fcfs&hardware=rtx3050&workload=rag&duration=20&token_budget=512&max_model_len=8192"


@dataclass(frozen=True)
class ABRequest:
    a: WebRequest  # one scheduler, one seed
    b: WebRequest
    by: str  # the metric that ranks requests hurt or helped
    top: int
    request: int | None = None  # the request picked to compare in full

    @property
    def names(self) -> tuple[str, str]:
        return self.a.schedulers[0], self.b.schedulers[0]

    def query(self) -> str:
        pairs = [("a", self.a.query(sweep=False)), ("b", self.b.query(sweep=False))]
        return urlencode(pairs + ([("by", self.by)] if self.by != "e2el_ms" else [])
                         + ([("request", str(self.request))] if self.request is not None else []))


def _one_run(side: str, text: str, page: bool, problems: list) -> WebRequest | None:
    try:
        data = query_to_dict(parse_qsl(text.partition("?")[2] if "?" in text else text, keep_blank_values=True))
        for k in ("t", "engine", "rate_min", "rate_max", "rate_step"):  # how a page was viewed, not what it ran
            data.pop(k, None)
        req = parse_request(data, defaults=page_defaults(data) if page else None, uploads=service.upload_info)
    except (ScenarioError, SetupError, TraceError) as e:
        problems += [(side, f"{field}: {msg}") for field, msg in problems_of(e)]
        return None
    if len(req.schedulers) > 1:  # an A/B is one run a side: never one of them picked in silence
        names = ", ".join(req.schedulers)
        problems.append((side, f"names {len(req.schedulers)} schedulers ({names}); run {side.upper()} is one run: "
                               f"keep one, e.g. scheduler={req.schedulers[0]}"))
        return None
    name = req.schedulers[0]
    return WebRequest(req.scenario.model_copy(update={"scheduler": name, "seeds": 1}), (name,), req.upload)


def parse_ab(pairs: list[tuple[str, str]], *, page: bool) -> ABRequest:
    """/diff's or /api/diff's query -> ABRequest, or ScenarioError naming each bad parameter (a, b, by, top)."""
    problems: list[tuple[str, str]] = []
    data = query_to_dict(pairs)
    for k in data:
        if k not in PARAMS:
            problems.append((k, "is not a parameter here: give each run as one scenario query, a=... and b=... "
                                "(URL-encoded), and optionally by and top"))
    runs = {}
    for side in ("a", "b"):
        text = str(data.get(side) or "").strip()
        if not text:
            problems.append((side, f"give run {side.upper()} as one scenario query in {side}, URL-encoded (a query "
                                   f"such as {EXAMPLE_A})"))
        else:
            runs[side] = _one_run(side, text, page, problems)
    by = str(data.get("by") or "e2el_ms")
    if by not in METRICS:
        problems.append(("by", f"must be one of {', '.join(METRICS)} (got {by!r})"))
    top = PAGE_TOP
    if data.get("top") not in (None, ""):
        try:
            top = int(str(data["top"]))
            if not 1 <= top <= MAX_TOP:
                raise ValueError
        except ValueError:
            problems.append(("top", f"must be a whole number from 1 to {MAX_TOP} (got {data['top']!r})"))
    request = _request_id(data.get("request"), problems)
    if problems:
        raise ScenarioError(problems)
    return ABRequest(runs["a"], runs["b"], by, top, request)


def _request_id(given, problems: list) -> int | None:
    """The picked request's id (None when not given); its upper bound is the runs' number of requests, which only
    the runs know (compute checks it)."""
    text = str(given or "").strip()
    if not text:
        return None
    if text.isdigit() and len(text) <= 12:
        return int(text)
    problems.append(("request", f"must be a request id, a whole number from 0 to the runs' number of requests - 1 "
                                f"(got {text[:40]!r})"))
    return None


# ----- the runs and their A/B (cached: a few arrays per A/B, not the runs) -----
@dataclass
class AB:
    doc: dict  # diff_document without `requests`
    diff: RequestDiff


_abs = service.SingleFlightLRU(max_bytes=DIFF_CACHE_BYTES, maxsize=16)


def _key(ab: ABRequest) -> str:
    return f"{ab.a.run_key(ab.names[0])}|{ab.b.run_key(ab.names[1])}|{ab.by}|{ab.top}|{ab.request}"


def compute(ab: ABRequest, cancel=None) -> AB:
    """Both runs (with their event logs, for the timelines) and their A/B; ScenarioError on b if the runs'
    requests differ."""
    def run_both() -> AB:
        ra = service.full_run(ab.a, ab.names[0], cancel)
        rb = service.full_run(ab.b, ab.names[1], cancel)
        try:
            doc, d = diff_document(ra, rb, top=ab.top, by=ab.by, with_requests=False, pick=ab.request)
        except RequestsDiffer as e:
            raise ScenarioError([("b", str(e))]) from None
        except NotCompared as e:
            raise ScenarioError([("request", str(e))]) from None
        return AB(doc, d)
    return _abs.get_or_compute(_key(ab), run_both)


def is_cached(ab: ABRequest) -> bool:
    return _abs.get(_key(ab)) is not None


def api_text(ab: ABRequest, result: AB) -> str:
    """/api/diff's answer as JSON text: the document, then every request as RequestDiff.requests_text writes them
    (several times faster than dicts through json.dumps: bench/bench_diff.py)."""
    import json

    head = json.dumps(clean({"a": {"scheduler": ab.names[0], "query": ab.a.query(sweep=False)},
                             "b": {"scheduler": ab.names[1], "query": ab.b.query(sweep=False)}, **result.doc}),
                      allow_nan=False, separators=(",", ":"))
    return head[:-1] + ',"requests":[' + result.diff.requests_text(",") + "]}"


# ----- /api/diff -----
DIFF_PARAMETERS = [
    {"name": "a", "in": "query", "required": True, "schema": {"type": "string"}, "example": EXAMPLE_A,
     "description": "run A: a scenario query string (what a dashboard URL carries after '?'), URL-encoded as "
                    "one value; a query naming several schedulers runs its first, several seeds its first seed"},
    {"name": "b", "in": "query", "required": True, "schema": {"type": "string"},
     "example": EXAMPLE_A.replace("fcfs", "chunked"),
     "description": "run B, over the same requests as A (same workload, rate, duration or num_requests, seed, "
                    "upload); changes are B minus A"},
    {"name": "by", "in": "query", "required": False, "schema": {"type": "string", "enum": list(METRICS)},
     "description": "the change that ranks the most hurt and most helped requests (default e2el_ms)"},
    {"name": "top", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_TOP},
     "description": f"how many most hurt and most helped requests to list with timelines (default {PAGE_TOP})"},
    {"name": "request", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0},
     "description": "a request id to compare in full: `picked` gives its values, changes, each run's split of its "
                    "E2EL (`parts_ms`) and its timeline in each run; 422 names the ids allowed"},
]


def _api(ab: ABRequest, cancel) -> Response:
    try:
        return Response(api_text(ab, compute(ab, cancel)), media_type="application/json")
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), "query")
    except service.BusyError as e:
        return busy(str(e))
    except Cancelled:
        return JSONResponse({"detail": "cancelled: the client went away"}, status_code=CLIENT_CLOSED)


@api_router.get("/diff", summary="Request-level A/B of two runs over the same requests: ?a=QUERY&b=QUERY",
                openapi_extra={"parameters": DIFF_PARAMETERS})
async def api_diff(request: Request) -> Response:
    """Runs A and B are each one scenario query, URL-encoded, in `a` and `b`. Answers `{"a": {scheduler,
    query}, "b": ..., "requests": [{"id", "arrival_s", "prompt_tokens", "output_tokens", "class", "a": {metric:
    ms}, "b": ..., "change_ms": {metric: B - A}, "causes_ms": {metric: {part: B - A}}}], "mean_change_ms": {metric:
    ms}, "causes_ms": {metric: {part: ms}}, "run_change_ms", "most_hurt", "most_helped", "timelines", ...}` over
    the requests both runs served. Metrics: ttft_ms, tpot_ms, max_itl_ms, e2el_ms (the three but max_itl_ms
    split into queue, prefill, prefill_stall, decode, preemption and transport); each request's values are
    rounded to 6 decimal places, as `sched-sim diff --json` writes them. 422 names the bad parameter; runs over
    different requests are refused on `b`."""
    if not kernels_ready(request):
        return warming_up(request)
    try:
        ab = parse_ab(list(request.query_params.multi_items()), page=False)
    except ScenarioError as e:
        return unprocessable(e.problems, "query")
    return await run_until_disconnect(request, _api, ab, busy=None if is_cached(ab) else busy)


# ----- /diff -----
def page_context(request: Request, cancel) -> tuple[dict, int]:
    pairs = list(request.query_params.multi_items())
    given = dict(pairs)
    ctx: dict = {"request": request, "values": {k: given.get(k, "") for k in ("a", "b")},
                 "picked_id": given.get("request", ""),
                 "by": given.get("by") or "e2el_ms", "metrics": figs.LABELS, "errors": {}, "ab": None}
    if not given.get("a") and not given.get("b"):
        ctx["values"] = {"a": EXAMPLE_A, "b": EXAMPLE_A.replace("fcfs", "chunked")}
        return ctx, 200
    if not kernels_ready(request):
        error = kernels_error(request)  # they never will be: say why instead of "reload"
        ctx["errors"] = {"other": f"the simulator's kernels could not be compiled: {error}" if error else
                         "the simulator's kernels are still compiling; reload in a few seconds"}
        return ctx, 503
    try:
        ab = parse_ab(pairs, page=True)
        result = compute(ab, cancel)
    except (ScenarioError, SetupError, TraceError) as e:
        ctx["errors"] = errors_by_field(problems_of(e))
        return ctx, 422
    except service.BusyError as e:
        ctx["errors"] = {"other": str(e)}
        return ctx, 503
    d, doc = result.diff, result.doc
    ctx.update(ab=ab, names=ab.names, doc=doc, by=ab.by, query=ab.query(),
               query_without_request=replace(ab, request=None).query(),
               values={"a": ab.a.query(sweep=False), "b": ab.b.query(sweep=False)},
               picked=picked_view(doc.get("picked"), ab.names), picked_id=ab.request,
               scatter=figs.scatter_figure(d, ab.by, ab.request), causes=figs.causes_figure(d),
               hurt=_listed(ab, result, doc["most_hurt"]), helped=_listed(ab, result, doc["most_helped"][:5]))
    return ctx, 200


def _listed(ab: ABRequest, result: AB, ids: list[int]) -> list[dict]:
    """The most hurt (or helped) requests as the page lists them: facts, change, its three largest parts and
    both timelines."""
    d, doc = result.diff, result.doc
    pos = {int(r): i for i, r in enumerate(d.ids.tolist())}
    causes = d.causes.get(ab.by)
    out = []
    for r in ids:
        i = pos[r]
        t = doc["timelines"][str(r)]
        parts = []
        if causes is not None:
            order = sorted(range(causes.shape[1]), key=lambda k: -abs(causes[i, k]))
            parts = [(figs.PART_STYLE[figs.ATTRIBUTION_PARTS[k]][0], float(causes[i, k])) for k in order
                     if abs(causes[i, k]) >= 0.05][:3]
        out.append({"id": r, "arrival_s": float(d.arrival_s[i]), "prompt": int(d.prompt_tokens[i]),
                    "output": int(d.output_tokens[i]), "a": float(d.a[ab.by][i]), "b": float(d.b[ab.by][i]),
                    "change": float(d.change[ab.by][i]), "causes": parts,
                    "figure": figs.timelines_figure(t["a"], t["b"], *ab.names)})
    return out


def picked_view(picked: dict | None, names: tuple[str, str]) -> dict | None:
    """"Compare this request": the picked request's rows (each metric, then each part of its E2EL, under A, under B
    and B - A) and its two timelines."""
    if picked is None:
        return None
    rows = [(figs.LABELS[m], picked["a"][m], picked["b"][m]) for m in METRICS]
    rows += [(figs.PART_STYLE[p][0], picked["parts_ms"]["a"][p], picked["parts_ms"]["b"][p])
             for p in figs.ATTRIBUTION_PARTS]
    t = picked["timelines"]
    return {**picked, "rows": [(label, a, b, b - a) for label, a, b in rows],
            "figure": figs.timelines_figure(t["a"], t["b"], *names)}


def _page(request: Request, cancel) -> Response:
    try:
        ctx, status = page_context(request, cancel)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    return templates.TemplateResponse(request, "diff.html", ctx, status_code=status)


def _simulates(pairs: list[tuple[str, str]]) -> bool:
    """Whether answering may simulate: not for the example form (no pair), an invalid pair (its 422, answered at
    once, never behind the simulation lane's line) or a cached one. Parsing takes microseconds: on the event loop."""
    given = dict(pairs)
    if not given.get("a") and not given.get("b"):
        return False
    try:
        return not is_cached(parse_ab(pairs, page=True))
    except (ScenarioError, SetupError, TraceError):
        return False


@router.get("/diff", response_class=HTMLResponse)
async def diff_page(request: Request) -> Response:
    quick = not _simulates(list(request.query_params.multi_items()))
    return await run_until_disconnect(request, _page, request, quick=quick)
