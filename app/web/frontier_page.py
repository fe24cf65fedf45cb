"""The Frontier card's background work (app/web/figures/frontier.py draws it): GET /frontier with the scenario
form's fields and the card's (frontier_gpus, frontier_isl, frontier_osl, frontier_max_concurrency,
frontier_basis, frontier_tp, frontier_ep) starts, or finds, a concurrency sweep of the scenario's model in every
viable configuration on each GPU (sim_core.studies.frontier); the card polls /frontier/<id> for its progress,
then its figure; its Cancel button posts /frontier/<id>/cancel. /api/frontier answers the same job as JSON
(`sched-sim frontier --json`'s points, configs, ruled_out, curves and envelope).

A frontier runs as a job like a rate sweep (jobs.JobBoard: one at a time, a few queued, each simulation holding
one of the server's simulation slots, plan_jobs.SlotExecutor) and within the web's bounds: at most MAX_WEB_GPUS
GPUs, MAX_WEB_CONCURRENCY users, MAX_WEB_LENGTH tokens of prompt or output, MAX_WEB_POINTS points in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from sim_core import GPUS, Scenario, ScenarioError, SetupError, parse_scenario, resolve
from sim_core.studies.frontier import (
    BASES,
    REQUESTS_PER_USER,
    ConfigSearch,
    cheapest_at,
    concurrency_grid,
    frontier,
    parallel_configs,
    plan_frontier,
)

from . import present, service
from .accuracy import verdict
from .api import busy_answer
from .figures.frontier import TITLE, frontier_figure
from .http import errors_by_field, is_fragment
from .inputs import WebRequest
from .jobs import JobBoard, JobRecord, job_id
from .lanes import MAX_QUEUED_FRONTIERS
from .plan_jobs import SlotExecutor
from .templating import templates

router = APIRouter(include_in_schema=False)

MAX_WEB_GPUS = 6
MAX_WEB_CONCURRENCY = 256
MAX_WEB_LENGTH = 8192  # ISL and OSL each: a point is then at most 10 x 256 requests of 16k tokens
# Points of one frontier (GPUs x configurations x users): three GPUs of a mixture-of-experts model in all 13 of
# its configurations up to 64 users (273), or six GPUs of a dense model in its four up to 256 users (216).
MAX_WEB_POINTS = 300
INPUTS = ("frontier_gpus", "frontier_isl", "frontier_osl", "frontier_max_concurrency", "frontier_basis",
          "frontier_min_tokens_per_s_per_user", "frontier_tp", "frontier_ep")
# The scenario fields each configuration sets (the card's frontier_tp and frontier_ep narrow them), and those the
# card's own lengths and closed loop replace.
SET_PER_POINT = ("tp", "ep", "attention_dp", "trace", "workload", "isl", "osl", "concurrency", "num_requests")
MAX_FLOOR = 100_000.0  # tokens/s per user the card's "cheapest at" input takes at most


@dataclass(frozen=True)
class FrontierAsk:
    """What the card asks for: the base scenario at its ISL/OSL, the GPUs, the users, the basis, the
    tokens/s-per-user floor ("cheapest at >= X") or None, and the tp/ep degrees to try."""
    base: Scenario
    gpus: tuple[str, ...]
    grid: list[int]
    basis: str
    floor: float | None = None
    search: ConfigSearch = field(default_factory=ConfigSearch)
    scenario_query: str = ""  # the scenario form's canonical query (the dashboard's URL)
    query: str = ""  # the canonical query that asks for it again (/frontier?..., /embed/frontier?...)

    def key(self) -> str:
        return job_id("&".join([self.base.to_query(), ",".join(self.gpus), ",".join(map(str, self.grid)),
                                self.basis, f"{self.floor}", f"{self.search}"]))


@dataclass
class FrontierJob(JobRecord):
    id: str
    ask: FrontierAsk  # result: a FrontierResult


_jobs = JobBoard("frontier", MAX_QUEUED_FRONTIERS, keep=16, busy=lambda retry: service.BusyError(
    f"{MAX_QUEUED_FRONTIERS} frontiers are already running or queued (the server's limit, max_queued_frontiers); "
    f"retry in about {retry} s", retry, ("max_queued_frontiers", MAX_QUEUED_FRONTIERS)))


def _int_input(name: str, raw: Any, lo: int, hi: int, problems: list) -> int | None:
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        problems.append((name, f"must be an integer from {lo} to {hi:,} (got {str(raw)[:40]!r})"))
        return None
    return value


def parse_frontier_request(pairs: list[tuple[str, str]]) -> FrontierAsk:
    """What a query asks for: the scenario form's fields and the card's. Raises ScenarioError naming every bad
    input, or frontier_tp when the configurations that fit would make more than MAX_WEB_POINTS points."""
    gpus = [w.strip() for k, v in pairs if k == "frontier_gpus" for w in v.split(",") if w.strip()]
    rest = [(k, v) for k, v in pairs if k != "frontier_gpus"]
    mine = {k: v for k, v in rest if k in INPUTS}
    problems: list[tuple[str, str]] = []
    unknown = [g for g in gpus if g not in GPUS]
    if unknown or not gpus or len(gpus) > MAX_WEB_GPUS or len(set(gpus)) < len(gpus):
        problems.append(("frontier_gpus", f"choose 1 to {MAX_WEB_GPUS} different GPUs of {', '.join(GPUS)}"
                                          + (f" (unknown: {', '.join(unknown)[:80]})" if unknown else "")))
    isl = _int_input("frontier_isl", mine.get("frontier_isl", 1024), 1, MAX_WEB_LENGTH, problems)
    osl = _int_input("frontier_osl", mine.get("frontier_osl", 1024), 1, MAX_WEB_LENGTH, problems)
    top = _int_input("frontier_max_concurrency", mine.get("frontier_max_concurrency", 64), 1, MAX_WEB_CONCURRENCY,
                     problems)
    basis = mine.get("frontier_basis", "total")
    if basis not in BASES:
        problems.append(("frontier_basis", f"must be one of {', '.join(BASES)} (got {basis[:40]!r})"))
    floor = _floor(mine.get("frontier_min_tokens_per_s_per_user", ""), problems)
    search = ConfigSearch(*(_degrees(name, mine.get(f"frontier_{name}", ""), problems) for name in ("tp", "ep")))
    base = _base(rest, isl or 1, osl or 1, problems)
    if problems:
        raise ScenarioError(problems)
    scenario_query = service.page_request([(k, v) for k, v in rest if k not in INPUTS]).query(sweep=False)
    parsed = {"frontier_isl": isl, "frontier_osl": osl, "frontier_max_concurrency": top, "frontier_basis": basis,
              "frontier_min_tokens_per_s_per_user": floor, "frontier_tp": mine.get("frontier_tp", ""),
              "frontier_ep": mine.get("frontier_ep", "")}
    query = scenario_query + "&" + inputs_query(gpus, parsed)
    ask = FrontierAsk(base, tuple(gpus), concurrency_grid(1, top), basis, floor, search, scenario_query, query)
    _check_points(ask)
    return ask


def inputs_query(gpus: list[str], inputs: dict[str, Any]) -> str:
    """The card's inputs as parsed (a blank one left out): the frontier's part of its canonical query."""
    mine = [("frontier_gpus", ",".join(gpus))] + [(k, f"{v:g}" if isinstance(v, float) else str(v).replace(" ", ""))
                                                  for k, v in inputs.items() if v not in (None, "")]
    return urlencode(mine, safe=",")


def _base(rest: list[tuple[str, str]], isl: int, osl: int, problems: list) -> Scenario | None:
    """The scenario form's scenario as the frontier's base: the random workload at the card's lengths, on the
    page's model (one model on every GPU), without the fields each configuration and point set."""
    try:
        req = service.page_request([(k, v) for k, v in rest if k not in INPUTS])
        if req.scenario.model_file is not None:
            problems.append(("model_file", "a config file path on the server cannot be given over the web"))
        data = {k: v for k, v in req.scenario.model_dump(exclude_defaults=True).items() if k not in SET_PER_POINT}
        if req.scenario.model is None and req.scenario.model_file is None:  # one model on every GPU: the page's
            data["model"] = _page_model(req.scenario)
        return parse_scenario({**data, "workload": "random", "isl": isl, "osl": osl})
    except ScenarioError as e:
        problems += e.problems
        return None


def _degrees(name: str, raw: str, problems: list) -> list[int] | None:
    """frontier_tp / frontier_ep: blank (every degree that fits) or comma-separated integers, checked against the
    scenario field's bounds (frontier.parallel_configs)."""
    words = [w.strip() for w in raw.split(",") if w.strip()]
    if not words:
        return None
    try:
        values = [int(w) for w in words]
        parallel_configs(True, **{f"{name}s": values})
    except ValueError:
        problems.append((f"frontier_{name}", f"give {name} degrees as integers, e.g. 2 or 1,2,4,8; blank for "
                                             f"every one that fits (got {raw[:40]!r})"))
        return None
    except ScenarioError as e:
        problems += [(f"frontier_{name}", m) for k, m in e.problems if k == name]
        return None
    return values


def _check_points(ask: FrontierAsk) -> None:
    """Refuse, naming frontier_tp, a frontier of more than MAX_WEB_POINTS points (or frontier_ep: no configuration
    the lists allow)."""
    try:
        points = plan_frontier(ask.base, ask.gpus, ask.grid, REQUESTS_PER_USER, ask.search).points
    except ScenarioError as e:
        raise ScenarioError([(f"frontier_{k}" if k in ("tp", "ep") else k, m) for k, m in e.problems]) from None
    if points > MAX_WEB_POINTS:
        raise ScenarioError([("frontier_tp", f"{points} points (GPUs x the configurations that fit x users) is more "
                                             f"than this server draws, {MAX_WEB_POINTS}: give fewer tp (or ep) "
                                             f"degrees, GPUs or users")])


def _floor(raw: str, problems: list) -> float | None:
    if not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = None
    if value is None or not 0 < value <= MAX_FLOOR:
        problems.append(("frontier_min_tokens_per_s_per_user", f"must be a number above 0 and at most "
                                                               f"{MAX_FLOOR:,.0f} tokens/s (got {raw[:40]!r})"))
        return None
    return value


def _page_model(s: Scenario) -> str:
    """The model the page runs (its GPU's default when the scenario names none)."""
    try:
        return resolve(s).setup.model.key
    except SetupError as e:
        raise ScenarioError([(e.field, str(e))]) from None


def start_frontier(ask: FrontierAsk) -> FrontierJob:
    job = FrontierJob(ask.key(), ask, total=len(ask.gpus) * len(ask.grid))
    return _jobs.start(job, _run)[0]


def poll_job(key: str) -> FrontierJob | None:
    """The frontier `key` for a page showing its progress (a poll: it is not abandoned), None once forgotten."""
    job = _jobs.get(key)
    if job is not None:
        _jobs.polled(job)
    return job


def cancel_job(key: str) -> FrontierJob | None:
    return _jobs.cancel(key)


def _run(job: FrontierJob) -> None:
    def progress(done: int, total: int) -> None:
        job.done, job.total = done, total

    a = job.ask
    try:
        job.result = frontier(a.base, a.gpus, a.grid, basis=a.basis, executor=SlotExecutor(job.state.cancel),
                              on_point=progress, search=a.search)
    except Exception as e:  # shown on the card; asking for the same frontier again retries it
        job.error = f"{type(e).__name__}: {e}"
    finally:
        service.release_memory()


def status(job: FrontierJob) -> dict[str, Any]:
    """The card's status fragment: progress, the error, or the figure."""
    result, error = job.result, job.error  # one reading: the job may end while the page renders (goodput.py)
    if result is None and job.cancelled:
        return {"job": job, "cancelled": True, "running": False}
    out: dict[str, Any] = {"job": job, "error": error, "figure": None, "running": result is None and error is None,
                           "query": job.ask.query}
    if result is not None:
        floor = job.ask.floor
        cheapest = cheapest_at(result.points, floor) if floor is not None else None
        out["figure"] = frontier_figure(result.points, job.ask.basis, cheapest)
        if floor is not None:
            out["cheapest"] = {"floor": floor, "point": cheapest}
        out["figure"]["export"] = {"title": TITLE, "caption": caption(job.ask), "warnings": []}
        out["infeasible"] = result.infeasible
        out["configs"] = {hw: [c["config"] for c in result.configs if c["hardware"] == hw]
                          for hw in job.ask.gpus if hw not in result.infeasible}
        out["rejected"] = sum(p["rejected"] for p in result.points)  # longer than the model's context
        b = job.ask.base  # its model as named (resolving the base on its own GPU may not fit, as the card's may)
        model = b.model or ("" if b.model_file else GPUS[b.hardware].default_model)
        out["accuracy"] = {hw: verdict(model, hw, b.engine) for hw in out["configs"]}
    return out


def caption(a: FrontierAsk) -> str:
    """What a frontier shows, in a line: the model, the GPUs, the configurations tried, the lengths and users,
    the floor, and the base scenario's other settings away from their defaults (an embed's and an export's)."""
    b = a.base
    tried = ", ".join(f"{k} {','.join(map(str, v))}" for k, v in (("tp", a.search.tps), ("ep", a.search.eps)) if v)
    floor = f", cheapest at ≥ {a.floor:g} tok/s/user" if a.floor is not None else ""
    own = b.model_copy(update={k: Scenario.model_fields[k].default for k in ("isl", "osl")})  # named above
    details = present.scenario_details(WebRequest(own, (own.scheduler,)))
    weights = "" if b.quantization == "auto" else f" {b.quantization}"  # auto: each GPU's checkpoint default
    return " · ".join([f"{b.model}{weights} on {', '.join(a.gpus)}",
                       f"{'configurations with ' + tried if tried else 'every configuration that fits'}, random "
                       f"{b.isl}/{b.osl}, {a.grid[0]}-{a.grid[-1]} users, {REQUESTS_PER_USER} requests each{floor}",
                       *details])


def _render(request: Request, ctx: dict, code: int = 200, headers: dict | None = None) -> Response:
    return templates.TemplateResponse(request, "_frontier_status.html", {"request": request, "f": ctx},
                                      status_code=code, headers={"Vary": "HX-Request", **(headers or {})})


@router.get("/frontier", response_class=HTMLResponse)
def frontier_start(request: Request) -> Response:
    """Start (or find) a frontier; answer with its progress, which polls until the figure is drawn: the card's
    status (htmx), or, for a link opened in a browser, the frontier's own page around it."""
    code, headers, ask = 200, {}, None
    try:
        ask = parse_frontier_request(list(request.query_params.multi_items()))
        ctx = status(start_frontier(ask))
    except ScenarioError as e:
        ctx, code = {"error": "; ".join(f"{k}: {m}" for k, m in errors_by_field(e.problems).items())}, 422
    except service.BusyError as e:
        ctx, code, headers = {"error": str(e)}, 503, {"Retry-After": str(e.retry_after)}
    if is_fragment(request):
        return _render(request, ctx, code, headers)
    page = {"request": request, "f": ctx, "ask": ask, "caption": caption(ask) if ask else "", "title": TITLE,
            "scenario_query": ask.scenario_query if ask else ""}
    return templates.TemplateResponse(request, "frontier.html", page, status_code=code,
                                      headers={"Vary": "HX-Request", **headers})


@router.get("/frontier/{key}", response_class=HTMLResponse)
def frontier_poll(request: Request, key: str) -> Response:
    job = _jobs.get(key)
    if job is None:
        return _render(request, {"error": "This frontier is no longer on the server; draw it again."}, 404)
    _jobs.polled(job)
    return _render(request, status(job))


@router.post("/frontier/{key}/cancel", response_class=HTMLResponse)
def frontier_cancel(request: Request, key: str) -> Response:
    job = _jobs.cancel(key)
    if job is None:
        return _render(request, {"error": "This frontier is no longer on the server."}, 404)
    return _render(request, status(job))


@router.get("/api/frontier")
def api_frontier(request: Request) -> JSONResponse:
    """Start a frontier (or find the same one already started): the scenario's model fields and frontier_gpus,
    frontier_isl, frontier_osl, frontier_max_concurrency, frontier_tp, frontier_ep, frontier_basis (total or
    output) and frontier_min_tokens_per_s_per_user as query parameters, as the results page's Frontier card sends
    them. Answers 202 with the job's progress while it runs, 200 with `points`, `curves` and `envelope` once done;
    ask again with the same query to poll."""
    try:
        job = start_frontier(parse_frontier_request(list(request.query_params.multi_items())))
    except ScenarioError as e:
        return JSONResponse({"detail": [{"field": k, "message": m} for k, m in e.problems]}, 422)
    except service.BusyError as e:
        return busy_answer(e)
    a, r, error = job.ask, job.result, job.error  # one reading: the job may end while this answer is built
    running = r is None and error is None
    doc: dict[str, Any] = {"id": job.id, "status": "running" if running else ("error" if error else "done"),
                           "done": job.done, "total": job.total, "basis": a.basis, "concurrencies": a.grid}
    if error:
        doc["error"] = error
    if r is not None:
        doc.update(points=r.points, infeasible=r.infeasible, configs=r.configs, ruled_out=r.ruled_out,
                   curves=r.curves(), envelope=r.envelope())
        if a.floor is not None:
            doc.update(min_tokens_per_s_per_user=a.floor, cheapest=cheapest_at(r.points, a.floor))
    return JSONResponse(doc, 202 if running else 200)
