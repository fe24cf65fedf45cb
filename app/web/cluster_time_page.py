"""Autoscalers side by side: /cluster-time runs one scenario under each autoscaler policy asked for (and a static
deployment) and draws them on one time axis (figures/cluster_time.py: offered load, replicas by state, queue,
SLO attainment per window), with each run's GPU-hours and attainment beside it:

    /cluster-time?<scenario query>&autoscalers=utilization,predictive,static[&static_replicas=N]

The scenario query is the dashboard's (blank fields take its defaults); its first scheduler runs every policy.
`static`: the same scenario without an autoscaler on static_replicas replicas (default: max_replicas, what the
autoscalers may scale to). Each run is one results page's run of one scheduler, cached with them and bounded by
the same budget (service.compare_seeds), so the page is at most MAX_RUNS such pages' work; the capacity search
behind an autoscaler's default (outside that budget) is held to the web's requests a run (search_problems). The URL is the view:
`/embed/cluster-time` with the same query shows the figure alone (an embed without `autoscalers` is the
results page's: one run per scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.cluster_over_time import PROBE_S
from sim_core.policies.autoscalers import AUTOSCALERS
from sim_core.quoting import quote
from sim_core.rate_schedule import parse as parse_schedule
from sim_core.runner import Cancelled
from sim_core.scenario import AUTOSCALE_FIELDS, MAX_REPLICAS

from . import figures, page_embeds, pages, present, service
from .api import busy, kernels_error, kernels_ready, unprocessable, warming_up
from .charts import DARK_TEXT_BACKGROUNDS, ENGINES, LIGHT_TEXT_BACKGROUNDS, _readable
from .embed_options import EMBED_OPTIONS
from .figures.cluster_time import NAME, Run, cluster_time_figure, summary_rows, windows_csv
from .http import CLIENT_CLOSED, run_until_disconnect
from .inputs import MAX_REQUESTS, PAGE_DEFAULTS, WebRequest, page_defaults, problems_of
from .templating import templates

router = APIRouter(include_in_schema=False)

PARAM, STATIC_PARAM = "autoscalers", "static_replicas"
STATIC = "static"
POLICIES = (*AUTOSCALERS, STATIC)  # every autoscaler, then a static deployment
MAX_RUNS = len(POLICIES)
# Each policy's colour on every row (charts.ENGINES: none is a scheduler's colour, nor a replica state's).
POLICY_COLOURS = dict(zip(POLICIES, (ENGINES[0], ENGINES[2], ENGINES[4], ENGINES[7]), strict=False))
# The scenario fields the page's form shows (any scenario field works in the URL).
FORM_FIELDS = ("hardware", "model", "max_model_len", "workload", "rate_schedule", "duration", "replicas",
               "min_replicas", "max_replicas", "provision_delay_s", "autoscale_target", "autoscale_replica_rate")
VIEW = (PARAM, STATIC_PARAM)


def chip_style(policy: str) -> str:
    """A policy's chip in its colour, its text at WCAG AA on either theme (as charts.text_style for a scheduler)."""
    c = POLICY_COLOURS[policy]
    return (f"--c: {c}; --c-text: {_readable(c, LIGHT_TEXT_BACKGROUNDS, '#000000')}; "
            f"--c-text-dark: {_readable(c, DARK_TEXT_BACKGROUNDS, '#ffffff')}")


EXAMPLE = ("schedulers=fcfs&hardware=a100&workload=chat&rate_schedule=0:2,120:12,300:2&duration=480"
           "&max_replicas=6&provision_delay_s=60&autoscalers=utilization,predictive,static")


@dataclass(frozen=True)
class PolicyRun:
    """One policy's run: its name (utilization, predictive, static), label and request (one scheduler)."""

    policy: str
    label: str
    req: WebRequest


@dataclass(frozen=True)
class ClusterTimeRequest:
    base: WebRequest  # the scenario as given, its first scheduler only
    policies: tuple[str, ...]
    static_replicas: int | None
    runs: tuple[PolicyRun, ...]

    def query(self) -> str:
        """The canonical query: the scenario's, then the policies (and the static size, if given)."""
        extra = f"&{PARAM}={','.join(self.policies)}"
        if self.static_replicas is not None:
            extra += f"&{STATIC_PARAM}={self.static_replicas}"
        return self.base.query(sweep=False) + extra


def _policies(pairs: list[tuple[str, str]]) -> tuple[tuple[str, ...], int | None, list[tuple[str, str]]]:
    """(policies asked for, static replicas, problems) from the query's view parameters."""
    asked = [p.strip() for k, v in pairs if k == PARAM for p in v.split(",") if p.strip()]
    problems = []
    wrong = [p for p in asked if p not in POLICIES]
    if wrong:
        problems.append((PARAM, f"must be one or more of {', '.join(POLICIES)}, comma-separated (got "
                                f"{', '.join(quote(p) for p in wrong)})"))
    policies = tuple(dict.fromkeys(p for p in asked if p in POLICIES)) or (POLICIES if not wrong else ())
    raw = next((v.strip() for k, v in pairs if k == STATIC_PARAM and v.strip()), "")
    size = None
    if raw:
        try:
            size = int(raw)
            if not 1 <= size <= MAX_REPLICAS:
                raise ValueError
        except ValueError:
            problems.append((STATIC_PARAM, f"must be a whole number of replicas between 1 and {MAX_REPLICAS} "
                                           f"(got {quote(raw)})"))
            size = None
    return policies, size, problems


def search_problems(scenario, policies: tuple[str, ...]) -> list[tuple[str, str]]:
    """The capacity search that sets an autoscaler's default (utilization's running target, predictive's capacity
    curve; sim_core.cluster_over_time) simulates PROBE_S s at a constant rate, up to the scenario's peak (a
    replica's share of it for utilization), outside the run's own work and its cancel flag: past the web's
    requests a run at that rate, refused naming the field that skips the search."""
    rate = scenario.offered_rate()
    if scenario.rate_schedule is not None:
        rate = parse_schedule(scenario.rate_schedule).peak_rate(scenario.duration)
    skips = (("utilization", "autoscale_target", rate / max(1, scenario.replicas)),
             ("predictive", "autoscale_replica_rate", rate))
    out = []
    for policy, field, top in skips:
        n = top * PROBE_S
        if policy in policies and getattr(scenario, field) is None and n > MAX_REQUESTS:
            out.append((field, f"{policy}'s default comes from a capacity search that simulates {PROBE_S:g} s at "
                               f"up to {top:g} req/s (~{n:,.0f} requests a run; the web simulates at most "
                               f"{MAX_REQUESTS:,}): set {field} (the CLI has no such limit)"))
    return out


def parse_cluster_time(pairs: list[tuple[str, str]]) -> ClusterTimeRequest:
    """/cluster-time's query -> ClusterTimeRequest, or ScenarioError naming each bad field (the scenario's, or
    autoscalers / static_replicas)."""
    policies, size, problems = _policies(pairs)
    # A blank autoscaler is none given; the autoscaler fields given are checked with one, the first asked for.
    scenario = [(k, v) for k, v in pairs if k not in VIEW and not (k == "autoscaler" and not v.strip())]
    scalers = [p for p in policies if p != STATIC] or list(AUTOSCALERS)
    scaling = any(p != STATIC for p in policies) or any(k in AUTOSCALE_FIELDS and v.strip() for k, v in scenario)
    if scaling and not any(k == "autoscaler" for k, _ in scenario):
        scenario.append(("autoscaler", scalers[0]))
    try:
        base = service.page_request(scenario)
    except ScenarioError as e:
        raise ScenarioError(problems + list(e.problems)) from None
    problems += search_problems(base.scenario, policies)
    if problems:
        raise ScenarioError(problems)
    one = base.schedulers[0]
    base = WebRequest(base.scenario, (one,), base.upload, None)
    runs = []
    for p in policies:
        if p == STATIC:
            n = size or (base.scenario.scaling_bounds[1] if base.scenario.autoscaler else base.scenario.replicas)
            drop = {*AUTOSCALE_FIELDS, "autoscaler", "replicas", "schedulers", "scheduler"}
            fixed = [(k, v) for k, v in scenario if k not in drop] + [("replicas", str(n)), ("schedulers", one)]
            runs.append(PolicyRun(p, f"static {n} replica{'s' if n > 1 else ''}", service.page_request(fixed)))
        else:
            req = WebRequest(base.scenario.model_copy(update={"autoscaler": p}), (one,), base.upload, None)
            runs.append(PolicyRun(p, p, req))
    return ClusterTimeRequest(base, policies, size, tuple(runs))


def comparison(ct: ClusterTimeRequest, cancel=None) -> dict:
    """Each policy's run (compare_seeds: cached, within the web's budget) drawn on one time axis: the card the
    page and the embed show, and its runs' summary rows."""
    views = []
    for run in ct.runs:
        views.append(service.compare_seeds(run.req, cancel).views[0])
    kept = [Run(r.label, POLICY_COLOURS[r.policy], v.kept[NAME], r.label) for r, v in zip(ct.runs, views, strict=True)]
    span = [0.0, max(v.end_s for v in views)] if views else None
    fig = cluster_time_figure(kept, span, ct.base.scenario.rate_schedule)
    # The export's caption: the scenario's settings but the autoscaler's name (the title names every policy).
    unscaled = WebRequest(ct.base.scenario.model_copy(update={"autoscaler": None}), ct.base.schedulers, ct.base.upload)
    shown = figures.Results(unscaled, views[:1])
    info = figures.export_info(shown, f"Cluster over time: {', '.join(r.label for r in ct.runs)}")
    info["warnings"] = [present.short_warning(w) for w in present.warnings_text(views)]  # every run's, not one's
    data = {"figure": fig, "rows": summary_rows(kept), "query": ct.query()}
    figures.attach_export(data, info)
    card = figures.Card(figures.get(NAME), data, figures.get(NAME).explain)
    warnings = pages.warning_groups(views)
    return {"card": card, "views": views, "warnings": warnings, "warnings_summary": pages.warning_summary(warnings),
            "query": ct.base.query(sweep=False), "caption": present.scenario_caption(ct.base)}


def _cached(pairs: list[tuple[str, str]]) -> bool:
    """Whether answering needs no simulation: every run cached, or the query invalid (its 422 is answered at once,
    never behind the simulation lane's line)."""
    try:
        ct = parse_cluster_time(pairs)
        return all(service.is_cached(r.req) for r in ct.runs)
    except (ScenarioError, SetupError, TraceError):
        return True


@router.get("/cluster-time", response_class=HTMLResponse)
async def cluster_time(request: Request) -> Response:
    """The autoscaler comparison page; simulating in the simulation lane (from the cache on a request thread)."""
    pairs = list(request.query_params.multi_items())
    return await run_until_disconnect(request, _page, request, pairs, quick=_cached(pairs),
                                      too_long=pages.too_long_page)


def _page(request: Request, pairs: list[tuple[str, str]], cancel) -> Response:
    ctx: dict[str, Any] = {"request": request, "errors": {}, "ct": None, "result": None, "warming": False,
                           "policies": [(p, chip_style(p)) for p in POLICIES]}
    if not pairs:
        pairs = [(k, v) for k, v in (kv.split("=", 1) for kv in EXAMPLE.split("&"))]
    try:
        with page_embeds.errors_into(ctx):
            ct = parse_cluster_time(pairs)
            ctx["ct"] = ct
            if kernels_error(request):
                ctx["errors"] = {"server": kernels_error(request)}
            elif not kernels_ready(request):
                ctx["warming"] = True
            else:
                ctx["result"] = comparison(ct, cancel)
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    ctx["form"] = _form(pairs, ctx["errors"])
    return templates.TemplateResponse(request, "cluster_time.html", ctx, status_code=page_embeds.status_of(ctx))


def _form(pairs: list[tuple[str, str]], errors: dict[str, str]) -> dict:
    """The page's form: the scenario's fields it shows (the dashboard's own inputs), the policies ticked, the
    static size, the scheduler, and every other scenario parameter carried as it was."""
    given: dict[str, Any] = {}
    for k, v in pairs:
        if k in ("schedulers", "scheduler"):
            given.setdefault("schedulers", []).append(v)
        else:
            given.setdefault(k, v)
    values: dict[str, Any] = {**page_defaults(given), **given}
    built = present.build_form(values, errors, page_defaults=PAGE_DEFAULTS)
    by_name = {f.name: f for _, group in built.groups for f in group} | {f.name: f for f in built.advanced}
    policies, size, _ = _policies(pairs)
    shown = {*FORM_FIELDS, *VIEW, "schedulers", "scheduler"}
    scheduler = next((s["name"] for s in built.schedulers if s["checked"]), built.schedulers[0]["name"])
    return {"fields": [by_name[n] for n in FORM_FIELDS if n in by_name], "policies": policies,
            "static_replicas": "" if size is None else str(size), "scheduler": scheduler,
            "schedulers": [s["name"] for s in built.schedulers],
            "hidden": [(k, v) for k, v in pairs if k not in shown and v != ""]}


@router.get("/embed/cluster-time", response_class=HTMLResponse)
async def embed_cluster_time(request: Request) -> Response:
    """The figure alone for an iframe: with `autoscalers`, the comparison's; without, the results page's (the
    generic embed, one run per scheduler)."""
    if PARAM not in request.query_params:
        return await pages.embed(request, NAME)
    pairs = [(k, v) for k, v in request.query_params.multi_items() if k not in EMBED_OPTIONS]
    return await run_until_disconnect(request, _embed, request, pairs, quick=_cached(pairs),
                                      too_long=pages.too_long_page)


def _embed(request: Request, pairs: list[tuple[str, str]], cancel) -> Response:
    return page_embeds.render(request, NAME, embed_view, cancel)


def embed_view(pairs: list[tuple[str, str]], cancel) -> page_embeds.Shown:
    """The comparison's figure for its embed, captioned with the scenario (every setting away from its default,
    the seeds) and the runs compared; its "Open" link is this page's."""
    ct = parse_cluster_time(pairs)
    shown = comparison(ct, cancel)
    unscaled = WebRequest(ct.base.scenario.model_copy(update={"autoscaler": None}), ct.base.schedulers, ct.base.upload)
    caption = f"{present.export_caption(unscaled)} · {', '.join(r.label for r in ct.runs)}"
    return page_embeds.Shown(shown["card"], f"/cluster-time?{ct.query()}", caption, shown["warnings"])


@router.get("/download/cluster-time.csv")
async def download_csv(request: Request) -> Response:
    """The figure's numbers, a row per run and window (figures.cluster_time.CSV_COLUMNS): with `autoscalers`, the
    comparison's runs; without, the results page's (one per scheduler). Bad input: a 422 in the JSON API's shape."""
    if not kernels_ready(request):
        return warming_up(request)
    return await run_until_disconnect(request, _csv, request, busy=busy)


def _csv(request: Request, cancel) -> Response:
    pairs = list(request.query_params.multi_items())
    try:
        if any(k == PARAM for k, _ in pairs):
            ct = parse_cluster_time(pairs)
            runs = [(r.label, service.compare_seeds(r.req, cancel).views[0].kept[NAME]) for r in ct.runs]
        else:
            req = service.page_request(pairs)
            runs = [(v.scheduler, v.kept[NAME]) for v in service.compare_seeds(req, cancel).views]
    except (ScenarioError, SetupError, TraceError) as e:
        return unprocessable(problems_of(e), "query")
    except service.BusyError as e:
        return busy(str(e))
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    return Response(windows_csv(runs), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="sched-sim-cluster-time.csv"'})
