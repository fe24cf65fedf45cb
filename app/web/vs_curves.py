"""Both variants' curves on one plot, on /vs (issue #41 item 3: goodput and frontier curves of several variants on
one plot; /vs is its two-variant case, scenario A and scenario B). Each card runs the main page's job once per
variant, with the same inputs for both, and draws both results on one pair of axes (variant_figures.py):

    /vs/curves?a=..&b=..[&rate_min=..&rate_max=..&rate_step=..][&frontier_gpus=..&frontier_isl=..]
        both cards: their forms, and the curves the query asks for (started or found); /vs loads it into its page
        with the curve inputs of its own URL, so a /vs link reproduces the curves drawn
    /vs/goodput?a=..&b=..&rate_min=..&rate_max=..&rate_step=..
        the goodput card's status: each variant's rate sweep (service.start_sweep, the results page's job) over
        ONE rate grid, the main page's (the query's rate_min/max/step as its card checks them); its progress polls
        /vs/goodput/<A's job>/<B's job>, whose Cancel posts .../cancel (both stop)
    /vs/frontier?a=..&b=..&frontier_gpus=..&...
        the frontier card's, likewise: each variant's frontier (frontier_page.start_frontier) with the card's
        inputs; /vs/frontier/<A's job>/<B's job> polls it, .../cancel stops both

A card's status is built from ONE reading of each job (tests/test_job_status_snapshot.py: a job may end while the
page renders). Drawn curves push /vs's URL with the card's inputs, so the link draws them again; /embed/vs with
figure=goodput or figure=frontier embeds them (page_embeds.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from sim_core import ScenarioError, SetupError, TraceError

from . import frontier_page, present, service, variant_names, vs_page
from .figures.frontier import DEFAULT_ISL, DEFAULT_OSL, DEFAULT_WEB_MAX_CONCURRENCY
from .figures.goodput import TITLE as GOODPUT_TITLE
from .figures.goodput import sweep_warnings
from .http import errors_by_field, is_fragment
from .inputs import SWEEP_KEYS, RateRange, WebRequest, problems_of
from .templating import templates
from .variant_figures import series_name, variants_frontier_figure, variants_goodput_figure

router = APIRouter(include_in_schema=False)

DEFAULT_NAMES = tuple(variant_names.DEFAULT_NAMES[s] for s in variant_names.SIDES)  # unless /vs names them


def _side_pairs(req: WebRequest) -> list[tuple[str, str]]:
    return parse_qsl(req.query(sweep=False), keep_blank_values=True)


def _asked(pairs: list[tuple[str, str]], keys: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in pairs if k in keys]


def _of_side(side: str, error: ScenarioError | SetupError | TraceError, shared: tuple[str, ...]) -> ScenarioError:
    """A side's problems, each naming its field; one about a side's own scenario also names the side (one about
    an input both share, the card's, is the same for both)."""
    return ScenarioError([(k, m if k in shared else f"scenario {side.upper()}: {m}") for k, m in problems_of(error)])


# ----- goodput: both variants swept over one rate grid -----
def shared_range(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> RateRange:
    """The rate grid both variants are swept over: the query's rate_min, rate_max and rate_step (checked as the
    main page's card checks them), or, none given, the range the main page proposes around the busier variant's
    rate (service.proposed_sweep), which takes in the other's."""
    given = _asked(pairs, SWEEP_KEYS)
    if given:
        return service.page_request(_side_pairs(vs.a) + given).sweep
    ranges = []
    for side in vs_page.SIDES:
        try:
            ranges.append(service.proposed_sweep(vs.side(side)))
        except ScenarioError as e:  # a closed loop or a rate schedule has no rate to sweep around
            raise _of_side(side, e, SWEEP_KEYS) from None
    return max(ranges, key=lambda r: (r.rate_max, -r.rate_step))


def start_goodput(vs: vs_page.VsRequest, rates: RateRange) -> list[service.SweepJob]:
    """Each variant's sweep over `rates` (found if already started): the results page's sweep job."""
    jobs = []
    for side in vs_page.SIDES:
        req = vs.side(side)
        try:
            jobs.append(service.start_sweep(WebRequest(req.scenario, req.schedulers, req.upload, rates)))
        except (ScenarioError, SetupError, TraceError) as e:  # more work than the web sweeps, or no rate
            raise _of_side(side, e, ()) from None
    return jobs


def goodput_title(names: tuple[str, ...]) -> str:
    return f"{GOODPUT_TITLE}: {' vs '.join(names)}"


def frontier_title(names: tuple[str, ...]) -> str:
    return f"Frontier: throughput per GPU vs tokens/s per user, {' vs '.join(names)}"


def _named(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The variants' names as query parameters, those that are not A and B."""
    sides = zip(variant_names.SIDES, names, DEFAULT_NAMES, strict=True)
    return [(variant_names.NAME_PARAMS[s], n) for s, n, d in sides if n != d]


def _job_ids(jobs: list, names: tuple[str, ...]) -> dict[str, str]:
    """What a card's poll and Cancel ask for: the jobs' ids as a path, and the variants' names as a query (the
    poll draws them)."""
    named = _named(names)
    return {"ids": "/".join(j.id for j in jobs), "named": f"?{urlencode(named)}" if named else ""}


def _progress(jobs: list, reads: list[tuple[Any, Any]], names: tuple[str, ...]) -> dict[str, Any] | None:
    """The part of a card's state that is not its figure, from (result, error) read once per job: its error, its
    cancellation or its progress; None when every job has its result."""
    out: dict[str, Any] = {**_job_ids(jobs, names), "done": sum(j.done for j in jobs),
                           "total": sum(j.total for j in jobs), "figure": None, "error": None, "cancelled": False,
                           "running": False}
    if any(r is None and j.cancelled for j, (r, _) in zip(jobs, reads, strict=True)):
        return {**out, "cancelled": True}
    errors = [f"{v}: {e}" for v, (_, e) in zip(names, reads, strict=True) if e]
    if errors:
        return {**out, "error": "; ".join(errors)}
    if any(r is None for r, _ in reads):
        return {**out, "running": True}
    return None


def goodput_status(jobs: list[service.SweepJob], names: tuple[str, ...] = DEFAULT_NAMES) -> dict[str, Any]:
    """The goodput card's state: progress, the error, or both variants' curves on one plot."""
    reads = [(j.result, j.error) for j in jobs]  # one reading each
    waiting = _progress(jobs, reads, names)
    if waiting is not None:
        return waiting
    reqs = [j.request for j in jobs]
    rates = reqs[0].sweep
    figure = variants_goodput_figure([(v, r) for v, (r, _) in zip(names, reads, strict=True)])
    caption = pair_caption([present.export_caption(r) for r in reqs], names) + (
        f" | both swept over {rates.rate_min:g}–{rates.rate_max:g} req/s in steps of {rates.rate_step:g}")
    warnings = [f"{v}: {w}" for v, r in zip(names, reqs, strict=True) for w in sweep_warnings(r)]
    figure["export"] = {"title": goodput_title(names), "caption": caption, "warnings": warnings}
    knees = [(series_name(v, name), s["knee_rate"])
             for v, (r, _) in zip(names, reads, strict=True) for name, s in r["schedulers"].items()]
    inputs = urlencode(rates.query_pairs())
    return {**_job_ids(jobs, names), "figure": figure, "knees": knees, "caption": caption,
            "query": f"{vs_page.VsRequest(*reqs, names).query()}&{inputs}", "error": None, "running": False,
            "cancelled": False}


def pair_caption(captions: list[str], names: tuple[str, ...]) -> str:
    """Each variant's caption (every setting away from its default, its seed or seeds), named."""
    return " | ".join(f"{v}: {c}" for v, c in zip(names, captions, strict=True))


# ----- frontier: both variants' frontiers with the card's inputs -----
def frontier_asks(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> list[frontier_page.FrontierAsk]:
    """Each variant's frontier: its scenario with the card's inputs (the same for both)."""
    given = _asked(pairs, frontier_page.INPUTS)
    asks = []
    for side in vs_page.SIDES:
        try:
            asks.append(frontier_page.parse_frontier_request(_side_pairs(vs.side(side)) + given))
        except (ScenarioError, SetupError, TraceError) as e:
            raise _of_side(side, e, frontier_page.INPUTS) from None
    return asks


def frontier_status(jobs: list[frontier_page.FrontierJob], names: tuple[str, ...] = DEFAULT_NAMES
                    ) -> dict[str, Any]:
    """The frontier card's state: progress, the error, or both variants' envelopes on one plot."""
    reads = [(j.result, j.error) for j in jobs]  # one reading each
    waiting = _progress(jobs, reads, names)
    if waiting is not None:
        return waiting
    asks = [j.ask for j in jobs]
    figure = variants_frontier_figure([(v, r.points) for v, (r, _) in zip(names, reads, strict=True)],
                                      asks[0].basis)
    caption = pair_caption([frontier_page.caption(a) for a in asks], names)
    figure["export"] = {"title": frontier_title(names), "caption": caption, "warnings": []}
    inputs = asks[0].query.removeprefix(asks[0].scenario_query + "&")
    pair = urlencode([(s, a.scenario_query) for s, a in zip(vs_page.SIDES, asks, strict=True)] + _named(names))
    infeasible = [f"{v} on {hw}: {why}" for v, (r, _) in zip(names, reads, strict=True)
                  for hw, why in r.infeasible.items()]
    return {**_job_ids(jobs, names), "figure": figure, "caption": caption, "infeasible": infeasible,
            "query": f"{pair}&{inputs}", "error": None, "running": False, "cancelled": False}


def frontier_form(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """What the frontier card's form shows: the query's inputs, else its proposal (both variants' GPUs, the main
    page's lengths and users)."""
    given = dict(_asked(pairs, frontier_page.INPUTS))
    gpus = ",".join(v for k, v in pairs if k == "frontier_gpus") or ",".join(
        dict.fromkeys(vs.side(s).scenario.hardware for s in vs_page.SIDES))
    return {"gpus": gpus, "isl": given.get("frontier_isl", DEFAULT_ISL), "osl": given.get("frontier_osl", DEFAULT_OSL),
            "max_concurrency": given.get("frontier_max_concurrency", DEFAULT_WEB_MAX_CONCURRENCY),
            "tp": given.get("frontier_tp", ""), "ep": given.get("frontier_ep", ""),
            "basis": given.get("frontier_basis", "total")}


# ----- the routes -----
def _errors_text(e: ScenarioError) -> str:
    return "; ".join(f"{k}: {m}" for k, m in errors_by_field(e.problems).items())


def goodput_answer(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    """The goodput card's status for the query's rate grid (its sweeps started or found), and its HTTP status."""
    try:
        return goodput_status(start_goodput(vs, shared_range(vs, pairs)), vs.names), 200
    except ScenarioError as e:
        return {"error": _errors_text(e)}, 422
    except service.BusyError as e:
        return {"error": str(e)}, 503


def frontier_answer(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> tuple[dict[str, Any], int]:
    try:
        return frontier_status([frontier_page.start_frontier(a) for a in frontier_asks(vs, pairs)], vs.names), 200
    except ScenarioError as e:
        return {"error": _errors_text(e)}, 422
    except service.BusyError as e:
        return {"error": str(e)}, 503


def goodput_form(vs: vs_page.VsRequest, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """What the goodput card's form shows: the query's rate grid as given, else the proposed one; `disabled` says
    why no grid can be proposed (a variant without a constant rate)."""
    given = dict(_asked(pairs, SWEEP_KEYS))
    if given:
        return {"range": given}
    try:
        rates = shared_range(vs, [])
    except ScenarioError as e:
        return {"disabled": f"Goodput-vs-rate curves: {_errors_text(e)}."}
    return {"range": dict(rates.query_pairs())}


def _render(request: Request, template: str, ctx: dict, code: int = 200, headers: dict | None = None) -> Response:
    return templates.TemplateResponse(request, template, {"request": request, **ctx}, status_code=code,
                                      headers={"Vary": "HX-Request", **(headers or {})})


def _pushed_url(request: Request, vs: vs_page.VsRequest, keys: tuple[str, ...], inputs: str) -> str:
    """/vs's URL with this card's inputs, keeping the other card's from the page's current URL (htmx's
    HX-Current-URL), so the link draws both cards' curves again."""
    current = urlsplit(request.headers.get("HX-Current-URL", ""))
    kept = [(k, v) for k, v in parse_qsl(current.query, keep_blank_values=True)
            if current.path == "/vs" and k in vs_page.CURVE_PARAMS and k not in keys]
    return "/vs?" + "&".join(q for q in (vs.query(), urlencode(kept, safe=","), inputs) if q)


def _card_route(request: Request, keys: tuple[str, ...], answer, template: str) -> Response:
    """A card's Draw: its status fragment (htmx; the URL pushed holds its inputs), or, opened as a page, /vs with
    them (which loads the card)."""
    pairs = list(request.query_params.multi_items())
    try:
        vs = vs_page.parse_vs(pairs)
    except ScenarioError as e:
        return _render(request, template, {"s": {"error": _errors_text(e)}}, 422)
    inputs = urlencode(_asked(pairs, keys), safe=",")
    if not is_fragment(request):
        return Response(status_code=303, headers={"Location": "/vs?" + vs.query() + (f"&{inputs}" if inputs else "")})
    status, code = answer(vs, pairs)
    pushed = {"HX-Push-Url": _pushed_url(request, vs, keys, inputs)} if code == 200 else None
    return _render(request, template, {"s": status}, code, pushed)


@router.get("/vs/goodput", response_class=HTMLResponse)
def vs_goodput(request: Request) -> Response:
    """Start (or find) both variants' sweeps over one rate grid; answer with their progress, polled until the
    curves are drawn."""
    return _card_route(request, SWEEP_KEYS, goodput_answer, "_vs_goodput_status.html")


@router.get("/vs/frontier", response_class=HTMLResponse)
def vs_frontier(request: Request) -> Response:
    """Start (or find) both variants' frontiers with the card's inputs; answer with their progress."""
    return _card_route(request, frontier_page.INPUTS, frontier_answer, "_vs_frontier_status.html")


GONE = "These curves are no longer on the server; draw them again."


def _job_route(request: Request, template: str, find, status, ids: tuple[str, str]) -> Response:
    """A card's poll or Cancel: the status of its two jobs (`find` each by id: get or cancel), with the variants'
    names of the query (a_name, b_name)."""
    problems: list[tuple[str, str]] = []
    names = variant_names.parse_names(list(request.query_params.multi_items()), problems)
    if problems:
        return _render(request, template, {"s": {"error": _errors_text(ScenarioError(problems))}}, 422)
    jobs = [find(key) for key in ids]
    if None in jobs:
        return _render(request, template, {"s": {"error": GONE}}, 404)
    return _render(request, template, {"s": status(jobs, names)})


def _polled_sweep(key: str) -> service.SweepJob | None:
    job = service.get_job(key)
    if job is not None:
        service.sweep_polled(job)
    return job


@router.get("/vs/goodput/{a}/{b}", response_class=HTMLResponse)
def vs_goodput_poll(request: Request, a: str, b: str) -> Response:
    return _job_route(request, "_vs_goodput_status.html", _polled_sweep, goodput_status, (a, b))


@router.post("/vs/goodput/{a}/{b}/cancel", response_class=HTMLResponse)
def vs_goodput_cancel(request: Request, a: str, b: str) -> Response:
    return _job_route(request, "_vs_goodput_status.html", service.cancel_sweep, goodput_status, (a, b))


@router.get("/vs/frontier/{a}/{b}", response_class=HTMLResponse)
def vs_frontier_poll(request: Request, a: str, b: str) -> Response:
    return _job_route(request, "_vs_frontier_status.html", frontier_page.poll_job, frontier_status, (a, b))


@router.post("/vs/frontier/{a}/{b}/cancel", response_class=HTMLResponse)
def vs_frontier_cancel(request: Request, a: str, b: str) -> Response:
    return _job_route(request, "_vs_frontier_status.html", frontier_page.cancel_job, frontier_status, (a, b))


@router.get("/vs/curves", response_class=HTMLResponse)
def vs_curves(request: Request) -> Response:
    """Both cards for /vs's page: their forms, and the status of the curves its URL asks for (started or
    found)."""
    pairs = list(request.query_params.multi_items())
    try:
        vs = vs_page.parse_vs(pairs)
    except ScenarioError as e:
        return _render(request, "_vs_curves.html", {"error": _errors_text(e)}, 422)
    ctx: dict[str, Any] = {"pair_fields": [(side, vs.side(side).query(sweep=False)) for side in vs_page.SIDES]
                           + _named(vs.names), "names": vs.names,
                           "goodput": goodput_form(vs, pairs),
                           "frontier": frontier_form(vs, pairs), "g": None, "f": None}
    codes = [200]
    for key, keys, answer in (("g", SWEEP_KEYS, goodput_answer), ("f", frontier_page.INPUTS, frontier_answer)):
        if _asked(pairs, keys):
            ctx[key], code = answer(vs, pairs)
            codes.append(code)
    return _render(request, "_vs_curves.html", ctx, max(codes))  # a bad input's 422 (or the server's busy 503)
