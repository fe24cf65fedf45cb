"""The JSON API beside the pages: the same scenario model and input checks, answers as JSON.

Bad input gets HTTP 422 with FastAPI's error shape, `{"detail": [{"loc": ["query" | "body", field], "msg": ...}]}`,
one entry per problem, each message saying what is allowed.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from sim_core import GPUS, MODELS, PRESETS, SCHEDULER_NAMES, Scenario, ScenarioError, SetupError, TraceError
from sim_core.catalog import QUANTIZATIONS
from sim_core.policies import BY_NAME
from sim_core.runner import Cancelled
from sim_core.step_time import StepShape, parse_step_shape, step_time_doc

from . import budget, inputs, model_uploads, service
from .http import (
    CLIENT_CLOSED,
    DISCONNECT_POLL_S,
    BodyTooLarge,
    UploadProblem,
    problem_detail,
    read_body,
    read_multipart,
    run_until_disconnect,
)
from .inputs import WebRequest, parse_request, problems_of, query_to_dict
from .lanes import MAX_IN_FLIGHT
from .model_interval import model_intervals
from .warm_progress import warm_progress

router = APIRouter(prefix="/api", tags=["simulation"])
MAX_JSON_BODY_BYTES = 1024 * 1024  # a scenario object is well under 2 KB

SCENARIO_FIELDS = {k: v for k, v in Scenario.model_json_schema()["properties"].items() if k != "trace"}
SCHEDULERS_DOC = ("schedulers to compare, comma-separated (or repeated); default: `scheduler`, whose default is "
                  f"{Scenario.model_fields['scheduler'].default}. One of: {', '.join(SCHEDULER_NAMES)}")


def _query_parameters(extra: list[dict] | None = None) -> list[dict]:
    params = [{"name": "schedulers", "in": "query", "required": False, "schema": {"type": "string"},
               "description": SCHEDULERS_DOC, "example": "fcfs,chunked"}]
    for name, prop in SCENARIO_FIELDS.items():
        schema = {k: v for k, v in prop.items() if k not in ("description", "title")}
        params.append({"name": name, "in": "query", "required": False, "schema": schema,
                       "description": prop.get("description", "")})
    return params + (extra or [])


SWEEP_PARAMETERS = [
    {"name": k, "in": "query", "required": False, "schema": {"type": "number", "exclusiveMinimum": 0},
     "description": d} for k, d in (
        ("rate_min", "lowest arrival rate, requests/s (default: about a twelfth of twice the scenario's rate)"),
        ("rate_max", "highest arrival rate, requests/s (default: twice the scenario's rate)"),
        ("rate_step", f"rate step, requests/s (at most {inputs.MAX_SWEEP_POINTS} rates per scheduler)"))
]
RUN_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {
            "type": "object", "additionalProperties": False,
            "properties": {"schedulers": {"type": "array", "items": {"type": "string", "enum": list(SCHEDULER_NAMES)},
                                          "description": SCHEDULERS_DOC}, **SCENARIO_FIELDS}},
            "example": {"schedulers": ["fcfs", "chunked"], "workload": "rag", "hardware": "a100", "duration": 20}},
        "multipart/form-data": {"schema": {
            "type": "object", "required": ["trace"],
            "properties": {"trace": {"type": "string", "format": "binary",
                                     "description": "CSV with header arrival_s,prompt_tokens,output_tokens "
                                                    f"(at most {inputs.MAX_UPLOAD_BYTES // 2**20} MB, "
                                                    f"{inputs.MAX_UPLOAD_ROWS:,} rows)"},
                           "schedulers": {"type": "string", "description": SCHEDULERS_DOC},
                           **{k: {"type": "string", "description": v.get("description", "")}
                              for k, v in SCENARIO_FIELDS.items()}}}},
    },
}
RUN_EXAMPLE = {"scenario": {"hardware": "a100", "workload": "rag", "duration": 20.0, "...": "..."},
               "query": "schedulers=fcfs,chunked&hardware=a100&workload=rag&duration=20.0",
               "schedulers": {"fcfs": {"metrics": {"ttft_ms": {"mean": 409.7, "p50": 390.6, "p99": 1078.4},
                                                   "goodput": 3.1, "...": "..."},
                                       "resolved": {"model": "llama-3-8b", "num_blocks": 7476, "...": "..."},
                                       "warnings": ["saturated: ..."]}}}


def clean(x: Any) -> Any:
    """JSON-safe copy: non-finite floats become null (JSON has no NaN)."""
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def unprocessable(problems: list[tuple[str, str]], where: str) -> JSONResponse:
    return JSONResponse({"detail": problem_detail(problems, where)}, status_code=422)


def scenario_json(req: WebRequest) -> dict:
    out = req.scenario.model_dump(mode="json", exclude={"scheduler", "trace"})
    if out.get("model_file"):
        out["model_file"] = model_uploads.web_value(out["model_file"])  # the upload's id, not the server's path
    return out


def run_payload(req: WebRequest, cancel=None) -> dict:
    """The answer to /api/run. With `seeds` = N > 1, every scheduler runs seeds seed .. seed + N - 1 and its
    `metrics` are the means, with `ci95` ([low, high] under the same keys) and `seeds` beside them, as in the
    CLI's JSON. With `model_uncertainty`, `model_ci` (the same keys as `ci95`: the 90% interval over an ensemble
    of step-time models spread as the cost model's validation errors) and the ensemble's factors."""
    s = req.scenario
    compared = service.compare_seeds(req, cancel)
    model = model_intervals(req, cancel) if s.model_uncertainty else None
    schedulers = {}
    for v, means, ci in zip(compared.views, compared.means, compared.ci95, strict=True):
        entry = {"metrics": means, "resolved": v.setup, "warnings": list(v.warnings)}
        if s.seeds > 1:
            entry["ci95"] = ci
            entry["seeds"] = [s.seed + k for k in range(s.seeds)]
        if model is not None:
            entry["model_ci"] = model.intervals[v.scheduler]
            entry["model_ensemble"] = {"level": model.level, "step_time_factors": model.factors}
            entry["warnings"] += model.warnings_for(v.scheduler)
        schedulers[v.scheduler] = entry
    return clean({"scenario": scenario_json(req), "query": req.query(sweep=False), "upload": req.upload,
                  "schedulers": schedulers})


def kernels_ready(request: Request) -> bool:
    ready = getattr(request.app.state, "kernels_ready", None)
    return ready is None or ready.is_set()


WARMING_UP = {"detail": "the simulator's kernels are still compiling (the first start on this machine takes from "
                        "about a minute to several); retry shortly"}


def kernels_error(request: Request) -> str | None:
    """Why the kernels could not be compiled (the warm-up failed: they never will be in this process), or None."""
    return getattr(request.app.state, "kernels_error", None)


# Seconds between warm-ups after one failed on an OSError (server._warm_up): a full disk (numba's cache, /tmp), too
# many open files, no memory for a thread; each passes once someone frees the resource, and the server then serves
# by itself.
WARM_UP_RETRY_S = 30


def kernels_retrying(request: Request) -> str | None:
    """Why the last warm-up failed on the machine's state (a full disk...) while the next one is due, or None."""
    return getattr(request.app.state, "kernels_retrying", None)


def warming_up(request: Request | None = None) -> JSONResponse:
    error = kernels_error(request) if request is not None else None
    retrying = kernels_retrying(request) if request is not None else None
    if retrying:
        return JSONResponse({"detail": f"the simulator's kernels could not be loaded or compiled ({retrying}); the "
                                       f"server tries again by itself every {WARM_UP_RETRY_S:g} s (free disk space or "
                                       "memory if that is the cause); retry then", "kernels_retrying": retrying},
                            status_code=503, headers={"Retry-After": str(WARM_UP_RETRY_S)})
    if error:  # no Retry-After: retrying will not help until the server is fixed and restarted
        return JSONResponse({"detail": f"the simulator's kernels could not be compiled, so this server cannot run "
                                       f"simulations until it is restarted: {error}", "kernels_error": error},
                            status_code=503)
    progress = warm_progress(request) if request is not None else None
    doc = WARMING_UP if progress is None else {**WARMING_UP, "progress": {**progress._asdict(), "text": progress.text()}}
    return JSONResponse(doc, status_code=503, headers={"Retry-After": "5"})


def busy(message: str, retry_after: int = 5, limit: tuple[str, float] | None = None, **more: Any) -> JSONResponse:
    """503 + Retry-After; `limit`: the limit reached (its name in /api/catalog's `limits`, its value); `more`:
    further keys of the answer."""
    doc: dict[str, Any] = {"detail": message, "retry_after_s": retry_after, **more}
    if limit is not None:
        doc["limit"] = {"name": limit[0], "value": limit[1]}
    return JSONResponse(doc, status_code=503, headers={"Retry-After": str(retry_after)})


def busy_answer(e: service.BusyError) -> JSONResponse:
    return busy(str(e), e.retry_after, e.limit)


def _line_busy(message: str, retry_after: int, queue: dict | None = None) -> JSONResponse:
    """The 503 of a request not run now (http.run_until_disconnect): when to retry, and its place in the line."""
    return busy(message, retry_after, ("max_in_flight_requests", MAX_IN_FLIGHT), queue=queue)


# Threads for the budget check of requests that may simulate (it generates one workload: milliseconds, a few
# hundred of a large one on a busy machine): their own, so that a burst of new runs never holds up the request
# threads that answer pages, invalid input and cached results.
_CHECKS = anyio.CapacityLimiter(2)


def runs_to_simulate(data: dict) -> tuple[int, bool]:
    """How many runs answering `data` may simulate (a scheduler at a seed each; 0 when none: every run cached, or
    the request invalid, its 422), and whether its budget is still to be checked (service.work_checked). Parsing a
    scenario takes microseconds, so it is done here on the event loop, before the request takes a place in the
    simulation lane's line."""
    try:
        req = parse_request(data, uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS)
    except (ScenarioError, SetupError, TraceError):
        return 0, False
    if service.answers_from_cache(req):
        return 0, False
    return len(req.schedulers) * req.scenario.seeds, not service.work_checked(req)


def landing_or(data: dict) -> dict:
    """`data`, or with no parameters at all the landing page's scenario (its defaults and schedulers): the API
    answers a bare /api/run with the comparison the dashboard opens on, not the model's one-scheduler default."""
    return data or {**inputs.page_defaults({}), "schedulers": list(inputs.PAGE_SCHEDULERS)}


def _run(data: dict, where: str, cancel=None) -> JSONResponse:
    try:
        req = parse_request(data, uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS)
        return JSONResponse(run_payload(req, cancel))
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), where)
    except service.BusyError as e:
        return busy_answer(e)
    except Cancelled:
        return JSONResponse({"detail": "cancelled: the client went away"}, status_code=CLIENT_CLOSED)


def _over_budget(data: dict, where: str) -> JSONResponse | None:
    """The 422 of a request whose whole work is over the web's budget (service.check_work: one workload made,
    milliseconds), or None."""
    try:
        service.check_work(parse_request(data, uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS))
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), where)
    return None


async def _gated_run(request: Request, data: dict, where: str) -> JSONResponse:
    """A run in its turn in the simulation lane's line, or, when it needs no simulation (all cached, or invalid:
    its 422), at once on a request thread. One that would simulate has its budget checked first, on a request
    thread: over budget, it is refused at once, however long the line is."""
    runs, unchecked = runs_to_simulate(data)
    if unchecked and (refused := await anyio.to_thread.run_sync(_over_budget, data, where, limiter=_CHECKS)):
        return refused
    return await run_until_disconnect(request, _run, data, where, busy=_line_busy, quick=not runs, work=runs)


@router.get("/run", summary="Simulate a scenario under one or more schedulers",
            openapi_extra={"parameters": _query_parameters(),
                           "responses": {"200": {"content": {"application/json": {"example": RUN_EXAMPLE}}}}})
async def api_run_get(request: Request) -> JSONResponse:
    """Scenario fields are query parameters (the dashboard's URLs work here too). Answers
    `{"scenario": ..., "query": ..., "schedulers": {name: {"metrics": ..., "resolved": ..., "warnings": [...]}}}`;
    `warnings` says when the GPU, model or weight format is outside the validation set, or the run was still
    saturated when its arrivals ended. Without any parameter, the landing page's scenario and schedulers.
    `metrics.bounds` says what a clairvoyant scheduler could reach on the same requests (lower bounds on mean
    TTFT/E2EL, upper bounds on TTFT deadlines met and goodput, each from a stated relaxation of the engine: see
    the metrics reference below) and the run's share of each."""
    if not kernels_ready(request):
        return warming_up(request)
    try:
        data = landing_or(query_to_dict(request.query_params.multi_items()))
    except ScenarioError as e:
        return unprocessable(e.problems, "query")
    return await _gated_run(request, data, "query")


@router.post("/run", summary="Simulate a scenario given as JSON, or replay an uploaded trace (multipart)",
             openapi_extra={"requestBody": RUN_BODY,
                            "responses": {"200": {"content": {"application/json": {"example": RUN_EXAMPLE}}}}})
async def api_run_post(request: Request) -> JSONResponse:
    """JSON body: a scenario object, optionally with `schedulers` (a list). Multipart: a `trace` CSV file plus
    scenario fields as form fields. Same answer as GET /api/run (with the trace's upload id); an empty object, like
    GET /api/run without parameters, runs the landing page's scenario."""
    if not kernels_ready(request):
        return warming_up(request)
    ctype = request.headers.get("content-type", "")
    if ctype.startswith("multipart/form-data"):
        try:
            blob, filename, fields = await read_multipart(request)
            if blob is None:
                return unprocessable([("trace", "attach the CSV as a file field named 'trace'")], "body")
            up = await run_in_threadpool(service.add_upload, blob, filename)
        except (UploadProblem, service.UploadError) as e:
            return unprocessable([("trace", str(e))], "body")
        if "upload" in fields:
            return unprocessable([("upload", "give either a trace file or an upload id, not both")], "body")
        return await _gated_run(request, {**fields, "upload": up.id}, "body")
    if not ctype.startswith("application/json"):
        return unprocessable([("body", "send a JSON object (application/json) or a multipart/form-data upload "
                                       "with a 'trace' file")], "body")
    try:
        data = json.loads(await read_body(request, MAX_JSON_BODY_BYTES))
    except BodyTooLarge as e:
        return JSONResponse({"detail": f"{e}: a scenario is a small JSON object"}, status_code=413)
    except RecursionError:  # json's decoder recurses once per nested [ or {
        return unprocessable([("body", "is JSON nested too deeply: send a flat object of scenario fields")],
                             "body")
    except ValueError:
        return unprocessable([("body", "is not valid JSON")], "body")
    if not isinstance(data, dict):
        return unprocessable([("body", "must be a JSON object of scenario fields")], "body")
    data = landing_or(data)
    return await _gated_run(request, data, "body")


MODEL_CONFIG_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"type": "object", "description": "a Hugging Face config.json"},
                             "example": {"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096,
                                         "...": "..."}},
        "multipart/form-data": {"schema": {
            "type": "object", "required": ["config"],
            "properties": {"config": {"type": "string", "format": "binary",
                                      "description": "a Hugging Face config.json (at most "
                                                     f"{model_uploads.MAX_CONFIG_BYTES // 1024} KB)"}}}},
    },
}


@router.post("/model-config", summary="Upload a Hugging Face config.json; its id runs it as model_file=<id>",
             openapi_extra={"requestBody": MODEL_CONFIG_BODY})
async def api_model_config(request: Request) -> JSONResponse:
    """Reads the model's architecture from the config (as `sched-sim run --model-config FILE` does) and keeps it by
    content hash: `model_file=<id>` in /api/run, /api/sweep and the dashboard's URLs then simulates that model.
    Answers its id, name, attention, experts and badges; a config the simulator cannot use gets 422 naming the key."""
    try:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            blob, filename, _ = await read_multipart(request, "config")
            if blob is None:
                return unprocessable([("config", "attach the config.json as a file field named 'config'")], "body")
        else:
            blob, filename = await read_body(request, model_uploads.MAX_CONFIG_BYTES), "config.json"
        up = await run_in_threadpool(model_uploads.add, blob, filename)
    except BodyTooLarge as e:
        return JSONResponse({"detail": f"{e}: a Hugging Face config.json is a few KB"}, status_code=413)
    except (UploadProblem, model_uploads.ModelUploadError) as e:
        return unprocessable([("config", str(e))], "body")
    return JSONResponse(model_uploads.describe(up))


@router.get("/sweep", summary="Goodput and SLO attainment against arrival rate, with the saturation knee",
            openapi_extra={"parameters": _query_parameters(SWEEP_PARAMETERS)})
async def api_sweep(request: Request) -> JSONResponse:
    """Runs every scheduler at every rate of the range (the scenario's `rate` is replaced); `knee_rate` is the
    highest rate up to which SLO attainment stays at or above `target_attainment`. With `seeds` = N > 1 each
    point's `metrics` are means over seeds with `ci95` beside them, and `knee_interval` is the knee read off the
    attainment's 95% band (its lower edge's knee, its upper edge's). The sweep runs in the background queue
    (at most MAX_QUEUED_SWEEPS running or queued; past that 503 with Retry-After); this request waits for it
    without holding a thread, and a client that leaves cancels it (unless a page or another client wants it).
    Past the server's time limit (`request_time_limit_s`) the answer is 503 with Retry-After while the sweep goes
    on: the same query asked again finds it, and answers once it is done."""
    if not kernels_ready(request):
        return warming_up(request)
    found = await run_in_threadpool(_start_sweep, request)  # checks the work: generates one workload (ms)
    if not isinstance(found, service.SweepJob):
        return found
    job = found
    service.watch_sweep(job)
    gone, since = False, time.monotonic()
    try:
        waiting = asyncio.wrap_future(job.future)
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=DISCONNECT_POLL_S)
            if not waiting.done() and await request.is_disconnected():
                gone = True
                return JSONResponse({"detail": "cancelled: the client went away"}, status_code=CLIENT_CLOSED)
            if not waiting.done() and time.monotonic() - since > inputs.REQUEST_TIME_LIMIT_S:
                return _sweep_still_running(job)
    finally:
        service.unwatch_sweep(job, gone)
    if job.result is None and job.cancelled:  # its page's Cancel button
        return JSONResponse({"detail": "the sweep was cancelled before it ended; ask again to run it"}, 409)
    if job.problems:  # the scenario's own fault, found by the run: a 422 naming the field, as up front
        return unprocessable(job.problems, "query")
    if job.error:
        return JSONResponse({"detail": job.error}, status_code=500)
    return JSONResponse(clean({"scenario": scenario_json(job.request), "query": job.request.query(), **job.result}))


def _sweep_still_running(job: service.SweepJob) -> JSONResponse:
    """The answer past the server's time limit: the sweep goes on, and the same query asked again finds it (and
    its answer once done). Counted as a poll: nobody asking again within jobs.ABANDONED_S cancels it."""
    service.sweep_polled(job)
    retry = service.sweep_eta(job)
    return busy(f"the sweep is still running after the server's time limit of {inputs.REQUEST_TIME_LIMIT_S:g} s "
                f"({job.done} of {job.total} points done); ask again in about {retry} s: the same query finds it, "
                "and answers once it is done", retry, ("request_time_limit_s", inputs.REQUEST_TIME_LIMIT_S),
                sweep=_sweep_state(job))


def _sweep_state(job: service.SweepJob) -> dict:
    cancelled = job.result is None and job.cancelled
    return {"id": job.id, "status": "cancelled" if cancelled else "running" if job.running else
            ("error" if job.error else "done"), "done": job.done, "total": job.total,
            "cancel": f"/api/sweep/{job.id}/cancel"}


@router.post("/sweep/{job_id}/cancel", include_in_schema=False)  # stops background work: out of the schema fuzz
def api_sweep_cancel(job_id: str) -> JSONResponse:
    """Stop a sweep (its simulation stops within milliseconds; a queued one never starts): its state, `cancelled`.
    A client waiting on /api/sweep for it gets 409."""
    job = service.cancel_sweep(job_id)
    if job is None:
        return JSONResponse({"detail": "no such sweep on this server"}, 404)
    return JSONResponse(_sweep_state(job))


def _start_sweep(request: Request) -> service.SweepJob | JSONResponse:
    try:
        data = query_to_dict(request.query_params.multi_items())
        if not any(data.get(k) not in (None, "") for k in inputs.SWEEP_KEYS):  # no range: propose one
            base = parse_request(data, uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS)
            data.update(service.proposed_sweep(base).query_pairs())
        req = parse_request(data, uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS)
        if req.sweep is None:  # some range fields given, all of them empty
            req = parse_request({**data, **dict(service.proposed_sweep(req).query_pairs())},
                                uploads=service.upload_info, max_seeds=inputs.MAX_API_SEEDS)
        return service.start_sweep(req)
    except ScenarioError as e:
        return unprocessable(e.problems, "query")
    except service.BusyError as e:
        return busy_answer(e)


STEP_TIME_FIELDS = StepShape.model_json_schema()["properties"]
STEP_TIME_EXAMPLE = {"hardware": "a100", "model": "llama-3-8b", "quantization": "fp16", "tp": 1,
                     "prefill_tokens": 512, "context_tokens": 0, "decode_seqs": 0, "decode_context": 0,
                     "step_ms": 40.6, "components_ms": {"linear": 33.7, "attention": 0.6, "elementwise": 3.6,
                                                        "lm_head": 0.6, "communication": 0.0, "overhead": 2.0},
                     "mbu": 0.06, "mfu": 0.57, "bound": "compute"}


@router.get("/step-time", summary="Predict one engine step's time and its breakdown",
            openapi_extra={"parameters": [
                {"name": name, "in": "query", "required": False,
                 "schema": {k: v for k, v in prop.items() if k not in ("description", "title")},
                 "description": prop.get("description", "")} for name, prop in STEP_TIME_FIELDS.items()],
                "responses": {"200": {"content": {"application/json": {"example": STEP_TIME_EXAMPLE}}}}})
def api_step_time(request: Request) -> JSONResponse:
    """A deployment (hardware, model, quantization, tp) and one step's batch: a prefill chunk of
    `prefill_tokens` after `context_tokens` cached, plus `decode_seqs` sequences with `decode_context` tokens of
    context each. Answers the step time, its components (summing to `step_ms`), MBU, MFU and the bound. No
    simulation runs: the cost model alone."""
    try:
        data = query_to_dict(request.query_params.multi_items())
        return JSONResponse(clean(step_time_doc(parse_step_shape(data))))
    except (ScenarioError, SetupError) as e:
        return unprocessable(problems_of(e), "query")


@router.get("/catalog", summary="Schedulers, GPUs, models, workload presets and the web's limits")
async def api_catalog() -> dict:  # async: answered on the event loop, never behind simulations
    return {
        "schedulers": [{"name": s, "summary": BY_NAME[s].summary} for s in SCHEDULER_NAMES],
        "hardware": [{"key": k, "name": g.name, "memory_gb": g.mem_gib, "bandwidth_gbs": g.mem_bw_gbs,
                      "fp16_tflops": g.fp16_tflops, "fp8_tflops": g.fp8_tflops, "default_model": g.default_model,
                      "fp4_tflops": g.fp4_tflops}
                     for k, g in GPUS.items()],
        "models": [{"key": k, "hf_name": m.hf_name, "params_b": m.published_params_b, "layers": m.layers,
                    "max_context": m.max_context, "experts": m.experts, "badges": [b.label for b in m.badges]}
                   for k, m in MODELS.items()],
        "workloads": [{"name": k, "summary": p.summary, "rate": p.rate, "burstiness": p.burstiness,
                       "slo_ttft_ms": p.slo_ttft_ms, "slo_tpot_ms": p.slo_tpot_ms,
                       "classes": [c.name for c in p.classes]} for k, p in PRESETS.items()],
        "quantizations": list(QUANTIZATIONS),
        "limits": budget.web_limits(),
        "page_defaults": {"schedulers": list(inputs.PAGE_SCHEDULERS), **inputs.page_defaults({})},
    }


health_router = APIRouter()


@health_router.get("/healthz", summary="Liveness", tags=["service"])
async def healthz(request: Request):  # async: answered on the event loop, never behind simulations
    error, retrying = kernels_error(request), kernels_retrying(request)
    doc = {"status": "error" if error else "retrying" if retrying else "ok", "kernels_ready": kernels_ready(request),
           "kernels_error": error, "kernels_retrying": retrying,
           "store_problem": getattr(request.app.state, "store_problem", None),
           "warm_up_s": round(getattr(request.app.state, "warmed_up_s", 0.0), 2),
           "cache": service.cache_stats()}
    # A server whose kernels failed to compile can serve no simulation: a 503 takes it out of a load balancer's
    # rotation (and lets an orchestrator restart it) instead of "ok" while every run is refused.
    # One whose warm-up waits for room on the disk is out of rotation too, until it has warmed up.
    return JSONResponse(doc, status_code=503) if error or retrying else doc
