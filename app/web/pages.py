"""HTML pages and htmx fragments. Every view is a URL: the scenario form is a GET form enhanced with htmx; the
server answers an htmx request with the workspace fragment plus `HX-Push-Url` (the canonical query), and the
same URL loaded cold renders the whole page. Back/forward reload the page (the body opts out of htmx's history
cache), so plots are always drawn fresh.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import escape

from sim_core import ScenarioError, SetupError, TraceError, resolve
from sim_core.quoting import quote
from sim_core.runner import Cancelled
from sim_core.validity import coverage_warnings

from . import charts, figures, model_uploads, present, rendered, service
from .api import kernels_error, kernels_ready, kernels_retrying
from .embed_options import EMBED_OPTIONS, EmbedOptions, parse_embed_options
from .experiment_check import experiment_verdict
from .figures.goodput import goodput_context, sweep_status
from .http import (
    CLIENT_CLOSED,
    UploadProblem,
    errors_by_field,
    is_fragment,
    read_multipart,
    run_until_disconnect,
)
from .inputs import (
    PAGE_SCHEDULERS,
    WebRequest,
    page_defaults,
    problems_of,
)
from .model_interval import model_intervals
from .page_scenario import form_defaults
from .templating import templates
from .warm_progress import warm_progress

router = APIRouter(include_in_schema=False)
VARY = {"Vary": "HX-Request"}


# Query parameters that say how to view the results, not what to simulate: t, the KV view's playback time, and
# engine, the cluster engine whose KV pool it shows.
VIEW_PARAMS = ("t", "engine")


def scenario_params(request: Request, view: tuple[str, ...] = VIEW_PARAMS) -> list[tuple[str, str]]:
    return [(k, v) for k, v in request.query_params.multi_items() if k not in view]


def parse_page(request: Request, view: tuple[str, ...] = VIEW_PARAMS
               ) -> tuple[WebRequest | None, dict[str, Any], dict[str, str]]:
    """(request or None, form values, errors by field) from a page URL's query; `view`: the parameters that are
    not scenario fields."""
    pairs = scenario_params(request, view)
    given: dict[str, Any] = {}
    for k, v in pairs:
        if k == "schedulers":
            given.setdefault(k, []).append(v)
        else:
            given.setdefault(k, v)  # what the user typed, even where a page default exists: the field shows it
    values: dict[str, Any] = {**page_defaults(given), **given}
    values["schedulers"] = values.get("schedulers") or list(PAGE_SCHEDULERS)
    try:
        req = service.page_request(pairs)
    except ScenarioError as e:
        return None, values, errors_by_field(e.problems)
    return req, form_values(req), {}


def fallback_request(request: Request, errors: dict[str, str]) -> WebRequest | None:
    """The page's scenario with the fields in `errors` left at their defaults, or None if that is invalid too.
    A page opened on a URL with a typo shows its results, dimmed, rather than nothing at all."""
    bad = set(errors)
    for _ in range(3):  # leaving a field out can move a cross-field problem onto another one
        pairs = [(k, v) for k, v in scenario_params(request) if k not in bad]
        try:
            return service.page_request(pairs)
        except ScenarioError as e:
            more = {name for name, _ in e.problems} - bad
            if not more:
                return None
            bad |= more
    return None


def form_values(req: WebRequest) -> dict[str, Any]:
    values: dict[str, Any] = dict(req.scenario_pairs())
    values["schedulers"] = list(req.schedulers)
    if req.upload:
        values["upload"] = req.upload
    return values


def workspace_context(request: Request, req: WebRequest | None, values: dict, errors: dict,
                      cancel=None, fallback: WebRequest | None = None, line: dict | None = None) -> tuple[dict, int]:
    """Everything the workspace (form + results) shows, and the HTTP status to send. With errors, `fallback`
    (the scenario without the invalid fields) is simulated instead and shown as stale. `line`: the request is not
    run now (http.run_until_disconnect's busy answer: `message`, `ticket`): the results region says so and polls
    with the ticket that keeps its place."""
    ctx: dict[str, Any] = {"request": request, "req": req, "results": None, "errors": errors, "warming": False,
                           "busy": None, "stale": [], "poll_query": None, "ticket": None,
                           "lazy_fallback": None}
    run = req or fallback
    if run is not None and line is not None:
        ctx.update(busy=line["message"], poll_query=run.query(), ticket=line["ticket"])
    elif run is not None and kernels_error(request):
        ctx["kernels_error"] = kernels_error(request)  # they will never be ready: say why, and do not poll
    elif run is not None and not kernels_ready(request):
        ctx["warming"] = True  # the form answers now; the results region polls until the kernels are ready
        ctx["kernels_retrying"] = kernels_retrying(request)  # a full disk, say: the server retries by itself
        ctx["warm_progress"] = warm_progress(request)  # the warm-up's step, from sim_core.warm_up itself
        ctx["poll_query"] = run.query()
    elif run is not None:
        try:
            ctx["results"] = results_context(run, cancel)
            if req is None:
                ctx["stale"] = list(errors)  # the fields these results leave at their defaults
        except (ScenarioError, SetupError, TraceError) as e:
            if req is not None:
                ctx.update(req=None, errors=errors_by_field(problems_of(e)))
        except service.BusyError as e:
            ctx["busy"] = str(e)  # the results region retries by itself
            ctx["poll_query"] = run.query()
    status = 422 if ctx["errors"] else 200
    upload_id = values.get("upload") or (req.upload if req else None)
    ctx["upload"] = service.get_upload(upload_id) if upload_id else None
    ctx["model_upload"] = model_uploads.get(str(values.get("model_file") or ""))
    ctx["form"] = present.build_form(values, ctx["errors"], page_defaults=form_defaults(values))
    ctx["limits_text"] = present.LIMITS_TEXT
    return ctx, status


def results_context(req: WebRequest, cancel=None, only: str | None = None,
                    figure: figures.Figure | None = None) -> dict:
    """What the results show: every registered figure's card (figures.cards), or with `figure` that one's alone
    (an embed: `card`); `only`: one scheduler of the comparison (an embed's panel), still on the comparison's time
    axis and KV cells."""
    compared = service.compare_seeds(req, cancel)
    views = compared.views
    upload = service.get_upload(req.upload) if req.upload else None
    span = charts.time_range(views)
    means = [replace(v, metrics=m) for v, m in zip(views, compared.means, strict=True)]
    ci95 = compared.ci95
    model = model_intervals(req, cancel) if req.scenario.model_uncertainty else None
    model_ci = [model.intervals.get(v.scheduler, {}) for v in views] if model else []
    if only is not None:
        keep = [k for k, v in enumerate(views) if v.scheduler == only]
        views, means, ci95 = [views[k] for k in keep], [means[k] for k in keep], [ci95[k] for k in keep]
        model_ci = [model_ci[k] for k in keep] if model_ci else []
    runs = figures.Results(req, views, means, ci95, span, model_ci)
    warnings = warning_groups(views) + model_warning_groups(model, views)
    out = {
        "views": views,
        "takeaway": present.takeaway(means),
        "warnings": warnings,
        "warnings_summary": warning_summary(warnings),
        "saturation": {v.scheduler: v.saturation for v in views if v.saturation},
        "bounds_note": present.bounds_note(means),
        "seeds_note": present.seeds_note(req.scenario),
        "summary": present.scenario_summary(req, views, upload),
        "query": req.query(),
        "scenario_query": req.query(sweep=False),
    }
    if figure is not None:
        out["card"] = figure.card(runs)
        return out
    out["cards"] = figures.cards(runs)
    out["experiment"] = experiment_verdict(req, views, cancel) if only is None else None
    return out


def warning_groups(views) -> list[dict]:
    """The runs' warnings (RunView.warnings: sim_core.validity.run_warnings' text, never rewritten here), each once
    and in order, with the schedulers it concerns: none named when it concerns every run shown (a GPU or model
    outside the validation set), else those it does (a saturated run's waiting queue is its own)."""
    texts: dict[str, list[str]] = {}
    for v in views:
        for w in v.warnings:
            texts.setdefault(w, []).append(v.scheduler)
    return [{"text": w, "schedulers": [] if len(names) == len(views) else names} for w, names in texts.items()]


def model_warning_groups(model, views) -> list[dict]:
    """warning_groups' entries for the model intervals (model_interval.ModelIntervals; None: none asked for): each
    pair of schedulers shown whose order on a metric flips within the model's error, with the two named."""
    if model is None:
        return []
    names = [v.scheduler for v in views]
    shown = {f: [n for n in names if f in model.warnings_for(n)] for f in model.flips}
    return [{"text": f, "schedulers": [] if len(who) == len(names) else who} for f, who in shown.items() if who]


def warning_summary(groups: list[dict]) -> str:
    """One line naming every warning of `groups` (warning_groups) by its first clause, the schedulers it concerns
    after it: "hardware rtx3050 is outside the validation set; saturated (fcfs, chunked)". It stands where the
    whole texts would not fit (by the headline, above the first screen's figure; an embed's caption)."""
    heads: dict[str, list[str]] = {}
    for g in groups:
        heads.setdefault(re.split(r": | \(", g["text"], maxsplit=1)[0], []).extend(g["schedulers"])
    return "; ".join(head + (f" ({', '.join(names)})" if names else "") for head, names in heads.items())


def request_warnings(req: WebRequest) -> list[dict]:
    """warning_groups for a figure drawn from the request alone (no run to find saturated): its deployment's
    choices outside the validation set."""
    setup = resolve(req.scenario).setup
    return [{"text": w, "schedulers": []}
            for w in coverage_warnings(setup.gpu.key, setup.model.key, setup.quantization)]


def _render(name: str, ctx: dict, status: int = 200, headers: dict | None = None) -> HTMLResponse:
    return templates.TemplateResponse(ctx["request"], name, ctx, status_code=status,
                                      headers={**VARY, **(headers or {})})


def _rendered(request: Request) -> Response | None:
    """The page as rendered before (rendered.py), unless the kernels' state has changed what it would say."""
    return rendered.get(request) if kernels_ready(request) and not kernels_error(request) else None


def too_long_page(message: str) -> Response:
    return HTMLResponse(f"<p class=\"field-error\">{escape(message)}</p>", 503, headers=VARY)


@router.get("/", response_class=HTMLResponse)
async def index(request: Request) -> Response:
    """The dashboard; simulating in its turn in the simulation lane's line (answered from the cache on a request
    thread), and stopping if the browser leaves before it is done. The query is parsed first, on the event loop
    (microseconds): an invalid one never waits in the line for its 422."""
    req, _, errors = parse_page(request)
    if errors:
        return await run_in_threadpool(_index, request, None, True)
    quick = service.answers_from_cache(req)
    if quick and (kept := _rendered(request)) is not None:
        return kept
    runs = len(req.schedulers) * req.scenario.seeds
    return await run_until_disconnect(request, _index, request, quick=quick, too_long=too_long_page,
                                      busy=lambda message, retry_after, queue: _busy_page(request, message, queue),
                                      work=runs)


def _index(request: Request, cancel, cached_fallback_only: bool = False) -> Response:
    req, values, errors = parse_page(request)
    # An htmx request keeps the results it already shows (static/js/form.js dims them); a page opened cold has none, so it
    # shows the scenario without the invalid fields: at once where its runs are cached, else loaded after the
    # page (stale_results) so that the 422 never waits for a simulation.
    fallback = fallback_request(request, errors) if errors and not is_fragment(request) else None
    lazy = fallback is not None and cached_fallback_only and not service.is_cached(fallback)
    try:
        ctx, status = workspace_context(request, req, values, errors, cancel, None if lazy else fallback)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    if lazy:  # the valid fields alone (what the results show), and the names of those left at their defaults
        ctx["lazy_fallback"] = fallback.query() + "&" + urlencode({STALE_PARAM: ",".join(stale_names(errors))})
    if is_fragment(request):
        headers = {rendered.history_header(request): "/?" + req.query()} if status == 200 and req else {}
        response = _render("_workspace.html", ctx, status, headers)
    else:
        response = _render("index.html", ctx, status)
    if ctx["results"] is not None and not (ctx["busy"] or ctx["stale"]) and req is not None and req.sweep is None:
        rendered.keep(request, response)  # not with a sweep: its card shows (and starts) a job that comes and goes
    return response


def _busy_page(request: Request, message: str, queue: dict) -> Response:
    """The dashboard not run now (its turn is further away than a connection is held): the form, and a results
    region that polls with the ticket keeping its place. No simulation: rendered on the event loop (~ms)."""
    req, values, errors = parse_page(request)
    ctx, _ = workspace_context(request, req, values, errors, line={"message": message, "ticket": queue["ticket"]})
    headers = {"Retry-After": str(queue["retry_after_s"])}
    return _render("_workspace.html" if is_fragment(request) else "index.html", ctx, 503, headers)


# /stale-results' parameter naming the fields its results leave at their defaults (the page's invalid ones).
STALE_PARAM = "stale"
_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def stale_names(names) -> list[str]:
    """Field names as the stale note shows them: names only (nothing else a URL could carry is echoed)."""
    return [n for n in names if _FIELD_NAME.match(n)]


@router.get("/stale-results", response_class=HTMLResponse)
async def stale_results(request: Request) -> Response:
    """The results of a page's scenario without its invalid fields (`/stale-results?<those fields>&stale=<the
    invalid ones' names>`), loaded by its 422 page when they were not cached: in its turn in the line, like any
    run; shown dimmed, naming the fields left at their defaults."""
    return await run_until_disconnect(request, _stale_results, request, too_long=too_long_page)


def _stale_results(request: Request, cancel) -> Response:
    req, values, errors = parse_page(request, VIEW_PARAMS + (STALE_PARAM,))
    try:
        ctx, status = workspace_context(request, None, values, errors, cancel, req)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    if ctx["results"] is not None:
        ctx["stale"] = stale_names(request.query_params.get(STALE_PARAM, "").split(","))
    return _render("_workspace.html", ctx, status)


@router.get("/goodput", response_class=HTMLResponse)
def goodput(request: Request) -> Response:
    """Start (or find) a rate sweep; answer with its progress, which polls until the curves are drawn."""
    req, _, errors = parse_page(request)
    if req is not None and req.sweep is None:
        errors = {"rate_min": "a rate sweep needs rate_min, rate_max and rate_step (requests/s)"}
    if not is_fragment(request):
        return RedirectResponse("/?" + (req.query() if req and not errors else str(request.query_params)), 303,
                                headers=VARY)
    if errors:
        ctx = {"request": request, "g": {"error": "; ".join(f"{k}: {v}" for k, v in errors.items())}}
        return _render("_goodput_status.html", ctx, 422)
    g = goodput_context(req)
    status = 422 if g.get("disabled") else 503 if g.get("error") else 200
    headers = {"HX-Push-Url": "/?" + req.query()} if status == 200 else {}
    return _render("_goodput_status.html", {"request": request, "g": g}, status, headers)


@router.get("/goodput/{job_id}", response_class=HTMLResponse)
def goodput_job(request: Request, job_id: str) -> Response:
    job = service.get_job(job_id)
    if job is None:
        g = {"error": "This sweep is no longer on the server; draw the curves again."}
        return _render("_goodput_status.html", {"request": request, "g": g}, 404)
    service.sweep_polled(job)
    return _render("_goodput_status.html", {"request": request, "g": sweep_status(job)})


@router.post("/goodput/{job_id}/cancel", response_class=HTMLResponse)
def goodput_cancel(request: Request, job_id: str) -> Response:
    """The sweep's Cancel button: its simulation stops within milliseconds; the answer is its status, stopped."""
    job = service.cancel_sweep(job_id)
    if job is None:
        g = {"error": "This sweep is no longer on the server."}
        return _render("_goodput_status.html", {"request": request, "g": g}, 404)
    return _render("_goodput_status.html", {"request": request, "g": sweep_status(job)})


@router.get("/embed/{figure}", response_class=HTMLResponse)
async def embed(request: Request, figure: str) -> Response:
    """One registered figure alone (app/web/figures/), for an iframe (the scenario is the query string, as on the
    main page), with the options of embed_options.EmbedOptions: width, height, scheduler, caption, chrome.
    Simulating in the simulation lane, and stopping if the frame goes away first."""
    fig = figures.get(figure)
    picks_panel = "schedulers" in request.query_params  # as _embed reads `scheduler`
    view = VIEW_PARAMS + EMBED_OPTIONS + (("scheduler",) if picks_panel else ())
    req, _, errors = parse_page(request, view)  # microseconds, on the event loop: an invalid one is answered at once
    invalid = bool(errors) or bool(parse_embed_options(request.query_params)[1])
    quick = fig is None or not fig.simulates or invalid or service.answers_from_cache(req)
    if quick and fig is not None and fig.simulates and (kept := _rendered(request)) is not None:
        return kept
    work = len(req.schedulers) * req.scenario.seeds if req is not None else 1
    return await run_until_disconnect(request, _embed, request, figure, quick=quick, too_long=too_long_page,
                                      busy=_busy_embed, work=work)


def _busy_embed(message: str, retry_after: int, queue: dict) -> Response:
    return HTMLResponse(f"<p class=\"field-error\" id=\"embed-busy\">{escape(message)}</p>", 503,
                        headers={"Retry-After": str(retry_after), **VARY})


def _embed(request: Request, figure: str, cancel) -> Response:
    fig = figures.get(figure)
    names = figures.embeddable()
    if fig is None or not fig.embeds:
        ctx = {"request": request, "figure": figure, "figures": names, "errors": {}, "options": EmbedOptions()}
        return templates.TemplateResponse(request, "embed.html", ctx, status_code=404)
    options, option_problems = parse_embed_options(request.query_params)
    # Beside `schedulers`, `scheduler` picks one panel of the comparison; alone, it is the one scheduler simulated.
    picks_panel = "schedulers" in request.query_params
    if not picks_panel:
        options = replace(options, scheduler=None)
    req, _, errors = parse_page(request, VIEW_PARAMS + EMBED_OPTIONS + (("scheduler",) if picks_panel else ()))
    errors = {**errors_by_field(option_problems), **errors}
    if req is not None and options.scheduler is not None and options.scheduler not in req.schedulers:
        errors["scheduler"] = (f"must be one of the compared schedulers, {', '.join(req.schedulers)} "
                               f"(got {quote(options.scheduler)})")
    ctx: dict[str, Any] = {"request": request, "figure": figure, "figures": names, "errors": errors,
                           "options": options, "caption": "", "caption_warnings": None, "embed": True}
    status = 422 if errors else 200
    if req is not None and not errors:
        shown = WebRequest(req.scenario, (options.scheduler,), req.upload, req.sweep) if options.scheduler else req
        # the scenario and every setting away from its default, the seeds among them (issue #41: "seed 0" with
        # seeds=3, spec decoding left out), as an export of the figure says
        ctx["caption"] = present.export_caption(shown) if options.caption == "1" else options.caption
        try:
            if fig.simulates:
                ctx["results"] = results_context(req, cancel, only=options.scheduler, figure=fig)
                ctx["card"] = ctx["results"]["card"]
                warned = ctx["results"]["warnings"]
            else:  # drawn from the request alone (one scheduler's: that scheduler's alone)
                drawn = fig.embed_request(shown) if fig.embed_request else shown
                ctx["card"] = fig.card(figures.Results(drawn))
                ctx["query"] = drawn.query()
                warned = request_warnings(drawn)
            # The generated caption carries the warnings (a slide shows them with the figure); a caption the
            # query writes is shown as written.
            if options.caption == "1":
                ctx["caption_warnings"] = {"summary": warning_summary(warned), "groups": warned}
        except (ScenarioError, SetupError, TraceError) as e:
            ctx["errors"], status = errors_by_field(problems_of(e)), 422
        except service.BusyError as e:
            ctx["errors"], status = {"server": str(e)}, 503
        except Cancelled:
            return Response(status_code=CLIENT_CLOSED)
    headers = {"Retry-After": "5"} if status == 503 else None
    response = templates.TemplateResponse(request, "embed.html", ctx, status_code=status, headers=headers)
    if fig.simulates and "results" in ctx:
        rendered.keep(request, response)  # 200 only: errors and busy answers are never kept
    return response


@router.post("/upload", response_class=HTMLResponse)
async def upload(request: Request) -> Response:
    """Keep an uploaded CSV trace; answer with the trace field showing it (its id joins the scenario URL)."""
    error, up = "", None
    try:
        data, filename, _ = await read_multipart(request)
        if data is None:
            raise UploadProblem("choose a CSV file with header arrival_s,prompt_tokens,output_tokens")
        up = await run_in_threadpool(service.add_upload, data, filename)
    except (UploadProblem, service.UploadError) as e:
        error = str(e)
    if not is_fragment(request):
        if up is None:
            return HTMLResponse(f"<p>trace: {escape(error)}</p>", 422, headers=VARY)
        return RedirectResponse(f"/?upload={up.id}", 303, headers=VARY)
    headers = {"HX-Trigger-After-Settle": "trace-uploaded"} if up else {}
    ctx = {"request": request, "upload": up, "upload_error": error}
    return _render("_trace_status.html", ctx, 422 if error else 200, headers)


@router.post("/upload-model", response_class=HTMLResponse)
async def upload_model(request: Request) -> Response:
    """Keep an uploaded Hugging Face config.json; answer with the model's status line (its id joins the scenario
    URL as model_file=<id>), or the error naming the key the simulator could not read."""
    error, up = "", None
    try:
        data, filename, _ = await read_multipart(request, "config")
        if data is None:
            raise UploadProblem("choose a model's config.json (a Hugging Face model folder has one)")
        up = await run_in_threadpool(model_uploads.add, data, filename)
    except (UploadProblem, model_uploads.ModelUploadError) as e:
        error = str(e)
    if not is_fragment(request):
        if up is None:
            return HTMLResponse(f"<p>config.json: {escape(error)}</p>", 422, headers=VARY)
        return RedirectResponse(f"/?model_file={up.id}", 303, headers=VARY)
    return _render("_model_config_status.html", {"request": request, "model_upload": up, "model_upload_error": error},
                   422 if error else 200)


FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#1f2328"/><rect x="3" y="3" width="3" height="10" fill="#e8590c"/><rect x="7" y="5" width="3" '
           'height="8" fill="#1971c2"/><rect x="11" y="7" width="2" height="6" fill="#2f9e44"/></svg>')


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})
