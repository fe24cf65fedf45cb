"""Embeds of the pages that compare two runs or search many (issue #41): each page's figure alone for an iframe,
through the embed every results-page figure has (templates/embed.html, embed_options.EmbedOptions, static/js/
embed.js's scaling to the frame), at a URL holding the page's own query and the embed's options:

    /embed/vs?a=QUERY&b=QUERY[&figure=cdf]         one figure of /vs: A's above B's, on the pair's shared axes
    /embed/diff?a=QUERY&b=QUERY[&figure=scatter]   /diff's who won and who lost (figure=causes: where from;
                 [&request=ID]                     figure=request: the picked request's timelines under A and B)
    /embed/frontier?<the frontier's query>         the frontier (its job started or found; the frame polls it)
    /embed/plan?<the plan's query>                 the plan's cost against latency (likewise)

`render` is the one way these and /embed/cluster-time answer: a page's `Shown` (its figure as a card, the page's
URL, the scenario's caption with every setting away from its default and the seeds, the runs' warnings) in
embed.html, or a 422 naming each bad field, as the page itself would. A job not done yet is shown as its
progress, which polls the same URL until the figure comes (templates/_embed_page.html).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.quoting import quote
from sim_core.runner import Cancelled

from . import (
    diff_page,
    figures,
    frontier_page,
    pages,
    plan_jobs,
    plan_page,
    present,
    service,
    vs_curves,
    vs_page,
)
from .embed_options import EMBED_OPTIONS, parse_embed_options
from .figures import request_diff as diff_figures
from .figures.frontier import TITLE as FRONTIER_TITLE
from .http import CLIENT_CLOSED, errors_by_field, run_until_disconnect
from .inputs import SWEEP_KEYS, problems_of
from .templating import templates

router = APIRouter(include_in_schema=False)

FIGURE_PARAM = "figure"  # which of a page's figures an embed shows, where it has several
# /vs draws the registry's plotly figures of each side (the generic card's); the metrics table, the KV players
# and the Gantt panels stay on the page.
VS_DEFAULT = "cdf"
DIFF_FIGURES = ("scatter", "causes", "request")
TEMPLATE = "_embed_page.html"


@dataclass(frozen=True)
class Shown:
    """What an embed of a page shows: its card (a figure's template and data), the page it comes from (the
    embed's "Open" link), its caption and the warnings of the runs drawn (pages.warning_groups)."""

    card: figures.Card
    page: str
    caption: str
    warnings: list[dict] = field(default_factory=list)


def page_card(name: str, title: str, panels: list[dict], export: dict | None, progress: dict | None = None
              ) -> figures.Card:
    """A card of templates/_embed_page.html: `panels` ({id, label, figure}: a plotly figure each, labelled when
    there are several), each carrying `export` (what a PNG or SVG of it says beside the plot; None: the one each
    already carries); or, for a job not done yet, its `progress` ({done, total, what})."""
    for p in panels if export is not None else ():
        figures.attach_export(p["figure"], export)
    figure = figures.Figure(name=name, title=title, explain="", build=lambda results: None, order=0,
                            template=TEMPLATE, embeds=False)
    return figures.Card(figure, {"panels": panels, "progress": progress}, "")


@contextmanager
def errors_into(ctx: dict[str, Any]) -> Iterator[None]:
    """A page's failures as ctx["errors"]: a scenario's by field, the server's busy answer as "server"
    (Cancelled goes on: the client left, nothing is drawn)."""
    try:
        yield
    except (ScenarioError, SetupError, TraceError) as e:
        ctx["errors"] = errors_by_field(problems_of(e))
    except service.BusyError as e:
        ctx["errors"] = {"server": str(e)}


def status_of(ctx: dict[str, Any]) -> int:
    return 503 if "server" in ctx["errors"] else 422 if ctx["errors"] else 200


def render(request: Request, name: str, build: Callable[[list[tuple[str, str]], Any], Shown], cancel=None
           ) -> Response:
    """The embed `name` of a page: `build(the query without the embed's options, cancel)` drawn in embed.html
    with the options asked for; a bad option or field is a 422 naming it (the server's busy answer a 503)."""
    options, option_problems = parse_embed_options(request.query_params)
    ctx: dict[str, Any] = {"request": request, "figure": name, "figures": (name,),
                           "errors": errors_by_field(option_problems), "options": options, "caption": "",
                           "caption_warnings": None, "embed": True}
    pairs = [(k, v) for k, v in request.query_params.multi_items() if k not in EMBED_OPTIONS]
    try:
        with errors_into(ctx):
            shown = build(pairs, cancel)
            if not ctx["errors"]:
                ctx.update(card=shown.card, open_href=shown.page, query=shown.page)
                ctx["caption"] = shown.caption if options.caption == "1" else options.caption
                if options.caption == "1":
                    summary = pages.warning_summary(shown.warnings)
                    ctx["caption_warnings"] = {"summary": summary, "groups": shown.warnings}
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    status = status_of(ctx)
    return templates.TemplateResponse(request, "embed.html", ctx, status_code=status,
                                      headers={"Retry-After": "5", **pages.VARY} if status == 503 else pages.VARY)


def pick_figure(pairs: list[tuple[str, str]], allowed: tuple[str, ...], default: str
                ) -> tuple[str, list[tuple[str, str]]]:
    """(the figure asked for in `figure`, the other pairs), or ScenarioError naming `figure` and what it allows."""
    asked = [v for k, v in pairs if k == FIGURE_PARAM]
    rest = [(k, v) for k, v in pairs if k != FIGURE_PARAM]
    chosen = (asked[-1].strip() if asked else "") or default
    if len(asked) > 1 or chosen not in allowed:
        raise ScenarioError([(FIGURE_PARAM, f"must be one of {', '.join(allowed)}, once (got "
                                            f"{', '.join(quote(a) for a in asked)})")])
    return chosen, rest


def pair_caption(a, b_changes: list[tuple[str, str, str]]) -> str:
    """A's caption (every setting away from its default, and the seeds), then what B changes."""
    changed = ", ".join(f"{k} {vb}" for k, _, vb in b_changes) or "the same scenario"
    return f"A: {present.export_caption(a)} · B: {changed}"


# ----- /vs -----
# /vs's curve cards (vs_curves.py): both variants' goodput curves, or frontiers, on one plot; jobs, polled.
VS_CURVES = ("goodput", "frontier")


def vs_figures() -> tuple[str, ...]:
    return tuple(f.name for f in figures.all_figures() if f.template == "_figure_card.html") + VS_CURVES


def vs_curves_view(name: str, pairs: list[tuple[str, str]]) -> Shown:
    """Both variants' goodput curves (over the query's rate grid, or the proposed one) or frontiers (with the
    query's frontier inputs) on one plot: their jobs started or found, shown as their progress until done."""
    vs = vs_page.parse_vs(pairs)
    if name == "goodput":
        status = vs_curves.goodput_status(vs_curves.start_goodput(vs, vs_curves.shared_range(vs, pairs)), vs.names)
        title, keys = vs_curves.goodput_title(vs.names), SWEEP_KEYS
    else:
        asks = vs_curves.frontier_asks(vs, pairs)
        status = vs_curves.frontier_status([frontier_page.start_frontier(a) for a in asks], vs.names)
        title, keys = vs_curves.frontier_title(vs.names), frontier_page.INPUTS
    inputs = urlencode([(k, v) for k, v in pairs if k in keys], safe=",")
    page = f"/vs?{vs.query()}" + (f"&{inputs}" if inputs else "")
    if status["error"]:
        raise ScenarioError([(FIGURE_PARAM, f"{name}: {status['error']}")])
    if status["cancelled"]:
        raise ScenarioError([(FIGURE_PARAM, f"{name}: cancelled on its page; open this again to restart it")])
    if status["running"]:
        progress = {"done": status["done"], "total": status["total"], "what": "points simulated (both variants)"}
        return Shown(page_card("vs", title, [], None, progress), page, "")
    panels = [{"id": f"vs-{name}", "label": "", "figure": status["figure"]}]
    return Shown(page_card("vs", title, panels, None), page, status["caption"])


def vs_view(pairs: list[tuple[str, str]], cancel) -> Shown:
    name, rest = pick_figure(pairs, vs_figures(), VS_DEFAULT)
    if name in VS_CURVES:
        return vs_curves_view(name, rest)
    vs = vs_page.parse_vs(rest)
    sides = vs_page.compute(vs, cancel)
    pc = next((c for c in vs_page.pair_cards(sides) if c["name"] == name), None)
    if pc is None or not all(pc["cards"].values()):
        raise ScenarioError([(FIGURE_PARAM, f"{name} is not drawn for both of these scenarios; choose one of "
                                            f"{', '.join(c['name'] for c in vs_page.pair_cards(sides))}")])
    panels = [{"id": f"{s}-{name}", "label": s.upper(), "figure": pc["cards"][s].data} for s in vs_page.SIDES]
    changes = vs_page.scenario_changes(vs)
    views = [v for s in sides for v in s.results.views]
    # each side's figure exports as that side's own (its scenario's caption, its runs' warnings)
    return Shown(page_card("vs", f"{pc['title']}: A vs B", panels, None), f"/vs?{vs.query()}",
                 pair_caption(vs.a, changes), pages.warning_groups(views))


def _vs_quick(pairs: list[tuple[str, str]]) -> bool:
    if any(k == FIGURE_PARAM and v in VS_CURVES for k, v in pairs):
        return True  # starts or finds jobs, simulating nothing itself
    rest = [(k, v) for k, v in pairs if k not in EMBED_OPTIONS and k != FIGURE_PARAM]
    try:
        vs = vs_page.parse_vs(rest)
    except (ScenarioError, SetupError, TraceError):
        return True  # its 422, at once
    return service.is_cached(vs.a) and service.is_cached(vs.b)


@router.get("/embed/vs")
async def embed_vs(request: Request) -> Response:
    """One figure of /vs alone for an iframe: A's above B's on shared axes (figure: which, default cdf)."""
    quick = _vs_quick(list(request.query_params.multi_items()))
    return await run_until_disconnect(request, render, request, "vs", vs_view, quick=quick,
                                      too_long=pages.too_long_page)


# ----- /diff -----
def diff_view(pairs: list[tuple[str, str]], cancel) -> Shown:
    name, rest = pick_figure(pairs, DIFF_FIGURES, DIFF_FIGURES[0])
    ab = diff_page.parse_ab(rest, page=True)
    result = diff_page.compute(ab, cancel)
    if name == "scatter":
        title, fig = "Who won and who lost", diff_figures.scatter_figure(result.diff, ab.by, ab.request)
    elif name == "request":
        if ab.request is None:
            raise ScenarioError([("request", "give the id of the request to show (figure=request shows one)")])
        title, fig = f"Request #{ab.request}", diff_page.picked_view(result.doc["picked"], ab.names)["figure"]
    else:
        title, fig = "Where the change came from", diff_figures.causes_figure(result.diff)
    a, b = ab.names
    caption = pair_caption(ab.a, vs_page.scenario_changes(ab))
    export = {"title": f"{title}: A {a} vs B {b}", "caption": caption, "warnings": []}
    card = page_card("diff", export["title"], [{"id": f"diff-{name}", "label": "", "figure": fig}], export)
    return Shown(card, f"/diff?{ab.query()}", caption)


def _diff_quick(pairs: list[tuple[str, str]]) -> bool:
    rest = [(k, v) for k, v in pairs if k not in EMBED_OPTIONS and k != FIGURE_PARAM]
    try:
        return diff_page.is_cached(diff_page.parse_ab(rest, page=True))
    except (ScenarioError, SetupError, TraceError):
        return True


@router.get("/embed/diff")
async def embed_diff(request: Request) -> Response:
    """/diff's figure alone for an iframe (figure: scatter, who won and who lost, or causes)."""
    quick = _diff_quick(list(request.query_params.multi_items()))
    return await run_until_disconnect(request, render, request, "diff", diff_view, quick=quick,
                                      too_long=pages.too_long_page)


# ----- the frontier and plans: jobs, polled -----
def frontier_view(pairs: list[tuple[str, str]], cancel) -> Shown:
    job = frontier_page.start_frontier(frontier_page.parse_frontier_request(pairs))
    shown = frontier_page.status(job)
    caption = frontier_page.caption(job.ask)
    page = f"/frontier?{job.ask.query}"
    if shown.get("error"):
        raise ScenarioError([("frontier", shown["error"])])
    if shown.get("cancelled"):
        raise ScenarioError([("frontier", "this frontier was cancelled; open it again to restart it")])
    export = {"title": FRONTIER_TITLE, "caption": caption, "warnings": []}
    if shown.get("figure") is None:
        progress = {"done": job.done, "total": job.total, "what": "points simulated"}
        return Shown(page_card("frontier", FRONTIER_TITLE, [], export, progress), page, caption)
    panels = [{"id": "frontier", "label": "", "figure": shown["figure"]}]
    return Shown(page_card("frontier", FRONTIER_TITLE, panels, export), page, caption)


@router.get("/embed/frontier")
async def embed_frontier(request: Request) -> Response:
    """The frontier alone for an iframe: its job started (or found) from the query, as /frontier's."""
    return await run_in_threadpool(render, request, "frontier", frontier_view)


def plan_view(pairs: list[tuple[str, str]], cancel) -> Shown:
    scenario, inputs = plan_page.parse_plan_request(pairs, page=True)
    job = plan_jobs.start_plan(scenario, inputs)
    shown = plan_page.job_context(job)
    caption = plan_page.plan_caption(job)
    page = f"/plan?{shown['page_query']}"
    title = "Cost against latency"
    export = {"title": title, "caption": caption, "warnings": []}
    if job.error:
        raise ScenarioError([("plan", f"the search failed: {job.error}")])
    if shown["running"]:
        progress = {"done": job.done, "total": job.total, "what": "searches and runs"}
        return Shown(page_card("plan", title, [], export, progress), page, caption)
    if shown["figure"] is None:
        raise ScenarioError([("plan", job.no_plan or "no plan to draw")])
    return Shown(page_card("plan", title, [{"id": "pareto", "label": "", "figure": shown["figure"]}], export),
                 page, caption)


@router.get("/embed/plan")
async def embed_plan(request: Request) -> Response:
    """The plan's cost against latency alone for an iframe: its job started (or found) from the query, as
    /plan's."""
    return await run_in_threadpool(render, request, "plan", plan_view)
