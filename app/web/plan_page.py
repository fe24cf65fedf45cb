"""The dashboard's Plan tab (/plan) and its JSON API (/api/plan): the cheapest deployments that meet an SLO at a
rate, as `sched-sim plan` finds them. The scenario's inputs are the scenario form's own fields (present.build_form,
sim_core.fields); the search space's are sim_core.studies.plan_space.PlanInputs. A valid /plan?... URL starts (or finds)
the plan's background job (plan_jobs.py); the page polls its progress, then shows the plans cheapest first, each
a link to its scenario on the main page, and the Pareto plot of cost per hour against p99 TTFT.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from sim_core import GPUS, PRESETS, SCHEDULER_NAMES, Scenario, ScenarioError, parse_scenario
from sim_core.studies.plan_space import LIST_INPUTS, TP_DEGREES, PlanInputs, parse_plan_inputs
from sim_core.studies.planner import PLAN_FIXED_FIELDS

from ..plan_report import deployment_text
from ..plan_report import plan_doc as cli_plan_doc
from . import charts, present, service
from .accuracy import verdict
from .api import busy_answer, kernels_ready, unprocessable, warming_up
from .http import errors_by_field
from .inputs import WebRequest, _with_web_bounds, query_to_dict, scenario_query_pairs
from .plan_autoscaling import (
    DAY_PRESET,
    autoscaling_context,
    autoscaling_doc,
    comparison_work_problems,
    planned_scenario,
)
from .plan_jobs import (
    PlanJob,
    cancel_plan,
    get_plan_job,
    plan_polled,
    plan_query,
    plan_work_problems,
    start_plan,
)
from .templating import templates

router = APIRouter(include_in_schema=False)
api_router = APIRouter()

# What the Plan tab shows with no query: issue 11's example (chat at 40 req/s on four GPU types, TP 1 and 2).
PLAN_PAGE_DEFAULTS: dict[str, str] = {"model": "llama-3-8b", "workload": "chat", "rate": "40",
                                      "slo_ttft_ms": "1000", "slo_tpot_ms": "100", "duration": "30"}
# The schedulers' box stands ticked at the search's own default, so that no group's boxes mean a default unseen.
PLAN_INPUT_DEFAULTS: dict[str, str] = {"gpus": "l4,l40s,a100,h100", "tp": "1,2",
                                       "schedulers": ",".join(PlanInputs.model_fields["schedulers"].default)}
SCENARIO_FIELDS = ("model", "workload", "rate", "rate_schedule", "slo_ttft_ms", "slo_tpot_ms", "duration", "seeds")
NOT_FOR_PLANS = {"trace": "the Plan tab plans for a workload preset; to plan for a trace (replayed at the plan's "
                          "rate), run sched-sim plan --trace FILE",
                 "upload": "the Plan tab plans for a workload preset; to plan for a trace (replayed at the plan's "
                           "rate), run sched-sim plan --trace FILE",
                 "schedulers": "give the schedulers to consider as schedulers=a,b (a plan input)",
                 "model_file": "the Plan tab plans for a catalogue model; to plan for a config.json, run sched-sim "
                               "plan --model-config FILE"}


def parse_plan_request(pairs: list[tuple[str, str]], *, page: bool) -> tuple[Scenario, PlanInputs]:
    """(the scenario at the plan's rate, the search space) from query pairs (or a JSON object's items), or
    ScenarioError naming every bad input. `page`: the Plan tab's defaults fill what is left out."""
    problems: list[tuple[str, str]] = []
    plan_raw: dict[str, Any] = {}
    for k, v in pairs:
        if k in LIST_INPUTS:  # checkboxes repeat a list input
            plan_raw.setdefault(k, []).append(v)
    problems += _none_chosen(plan_raw)
    data = query_to_dict((k, v) for k, v in pairs if k not in LIST_INPUTS)  # any other key at most once
    plan_raw.update({k: data.pop(k) for k in list(data) if k in PlanInputs.model_fields})
    for k in list(data):
        if k in PLAN_FIXED_FIELDS or k in NOT_FOR_PLANS:
            problems.append((k, NOT_FOR_PLANS.get(k, "is chosen by the plan's search; give the candidates instead "
                                                      "(gpus, tp, schedulers, token_budgets, topologies)")))
            data.pop(k)
    defaults = PLAN_PAGE_DEFAULTS if page else {"model": "llama-3-8b"}
    if data.get("rate_schedule"):  # a schedule sets the rate over time: the default rate would contradict it
        defaults = {k: v for k, v in defaults.items() if k != "rate"}
    fields = {**{k: v for k, v in defaults.items() if k not in data}, **{k: v for k, v in data.items() if v != ""}}
    scenario = inputs = None
    try:
        scenario = parse_scenario(fields)
    except ScenarioError as e:
        problems += _with_web_bounds(e.problems, fields)
    input_defaults = PLAN_INPUT_DEFAULTS if page else {}
    try:
        inputs = parse_plan_inputs({**{k: v for k, v in input_defaults.items() if not plan_raw.get(k)}, **plan_raw})
    except ScenarioError as e:
        problems += e.problems
    if scenario is not None and inputs is not None and not problems:
        if scenario.rate_schedule is None:
            scenario = scenario.model_copy(update={"rate": scenario.rate or PRESETS[scenario.workload].rate})
        problems += (plan_work_problems(planned_scenario(scenario), inputs, at_peak=scenario.rate_schedule is not None)
                     + comparison_work_problems(scenario))
    if problems:
        raise ScenarioError(problems)
    return scenario, inputs


# The candidates the form picks with checkboxes, and what each allows. The form sends each one blank before its
# boxes (templates/plan.html), so a form with every box of one unchecked sends it blank: an error naming it, never
# the defaults planned in silence.
CHOSEN_INPUTS: dict[str, tuple[str, ...]] = {"gpus": tuple(GPUS), "tp": tuple(str(t) for t in TP_DEGREES),
                                             "schedulers": tuple(SCHEDULER_NAMES)}


def _none_chosen(plan_raw: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Each checkbox input given, but with nothing in it (removed from plan_raw): a problem naming it."""
    problems = []
    for name, allowed in CHOSEN_INPUTS.items():
        if name in plan_raw and not any(str(v).strip(" ,") for v in plan_raw[name]):
            del plan_raw[name]
            problems.append((name, f"choose at least one of {', '.join(allowed)}"))
    return problems


# ---------------------------------------------------------------------------------------------------------
# What the page shows
# ---------------------------------------------------------------------------------------------------------
def plan_form(values: dict[str, Any], errors: dict[str, str]) -> dict:
    """The Plan form: the scenario form's own fields for the traffic and SLO, the search space's inputs."""
    form = present.build_form(values, errors, page_defaults=PLAN_PAGE_DEFAULTS)
    by_name = {f.name: f for _, fs in form.groups for f in fs} | {f.name: f for f in form.advanced}
    chosen = {k: _chosen(values.get(k)) for k in ("gpus", "tp", "schedulers")}
    info = PlanInputs.model_fields
    text_inputs = []
    for name, label, placeholder in (("token_budgets", "Token budgets", "each scheduler's own"),
                                     ("topologies", "Topologies", "colocated"),
                                     ("max_gpus", "Max GPUs", f"{info['max_gpus'].default}"),
                                     ("attainment", "SLO attainment", f"{info['attainment'].default:g}"),
                                     ("min_tokens_per_s_per_user", "Min tok/s per user", "none")):
        raw = values.get(name)
        text_inputs.append(present.FormField(
            name, label, "", "text", "" if raw is None else ",".join(_chosen(raw)),
            placeholder=placeholder, help=info[name].description, error=errors.get(name, ""),
            inputmode="decimal" if name in ("max_gpus", "attainment", "min_tokens_per_s_per_user") else "text"))
    known = set(SCENARIO_FIELDS) | set(PlanInputs.model_fields)
    return {
        "scenario_fields": [by_name[n] for n in SCENARIO_FIELDS if n in by_name],
        "chips": [("gpus", "GPUs", [(k, f"{k} · {g.mem_gib:g} GB") for k, g in GPUS.items()]),
                  ("tp", "Tensor parallel", [(str(t), f"TP {t}") for t in TP_DEGREES]),
                  ("schedulers", "Schedulers", [(s, s) for s in SCHEDULER_NAMES])],
        "chosen": chosen,
        "text_inputs": text_inputs,
        "errors": errors,
        "other_errors": [(k, v) for k, v in errors.items() if k not in known],
        "day_preset": DAY_PRESET,  # the one-click "a day of diurnal load" (plan_autoscaling.py)
    }


def _chosen(raw: Any) -> list[str]:
    items = raw if isinstance(raw, list | tuple) else [] if raw is None else [raw]
    return [w.strip() for v in items for w in str(v).split(",") if w.strip()]


def pareto_figure(job: PlanJob) -> dict:
    """Cost per hour against p99 TTFT, every plan a point, the Pareto front joined by a line. Plans are judged on SLO
    attainment (at least the target share of requests within both targets), not on their p99: the legend, a note
    and the dashed line's label say so, so a plan whose p99 TTFT lies above the TTFT target does not read as one
    that fails."""
    plans = job.result.plans
    need = job.inputs.attainment * 100
    # The notes in short lines: plotly does not wrap them, and on a phone (a 250 px plot) one line was cut off.
    layout = charts._layout(380, margin={"l": 64, "r": 24, "t": 88, "b": 56}, showlegend=True)
    layout["xaxis"] = charts._axis("cost ($/hour, on-demand)", rangemode="tozero")
    layout["yaxis"] = charts._axis("p99 TTFT (ms)", rangemode="tozero")
    points = [(p.cost_per_hour, p.metrics["ttft_ms"]["p99"], deployment_text(p.scenario), p.pareto, i + 1,
               p.metrics["slo_attainment"] * 100) for i, p in enumerate(plans) if p.cost_per_hour is not None]
    front = sorted((x, y) for x, y, _, on, _, _ in points if on)
    ink, pale = charts.SERIES["plan"], charts.SERIES["dominated"]
    data = [{"type": "scatter", "mode": "lines", "x": [x for x, _ in front], "y": [y for _, y in front],
             "name": "Pareto front", "line": {"color": ink, "width": 1.5, "shape": "hv"},
             "hoverinfo": "skip"}]
    for on, name, c in ((True, "on the front", ink), (False, "dominated", pale)):
        pts = [p for p in points if p[3] == on]
        data.append({"type": "scatter", "mode": "markers+text", "name": name,
                     "x": [p[0] for p in pts], "y": [p[1] for p in pts], "text": [f"#{p[4]}" for p in pts],
                     "textposition": "top right", "customdata": [[p[2], p[5]] for p in pts],
                     "cliponaxis": False,  # the rightmost plan's "#n" drawn whole
                     "marker": {"color": c, "size": 10, "line": {"color": ink, "width": 1}},
                     "hovertemplate": "%{customdata[0]}: $%{x:.2f}/h, p99 TTFT %{y:.0f} ms, SLO attainment "
                                      "%{customdata[1]:.1f}%<extra></extra>"})
    notes = [{"xref": "paper", "yref": "paper", "x": 0, "y": 1.0, "yanchor": "bottom", "yshift": 26,
              "xanchor": "left", "showarrow": False, "align": "left", "font": {"size": 11, "color": charts.AXIS},
              "text": f"Every plan meets ≥ {need:g}% SLO attainment<br>(TTFT and TPOT): that is the criterion;<br>"
                      "the cheapest comes first."}]
    target = job.result.plans[0].metrics["slo"]["ttft_ms"] if plans else None
    if target:
        ref = charts.SERIES["reference"]
        layout["shapes"] = [{"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": target,
                             "y1": target, "line": {"color": ref, "dash": "dash", "width": 1}}]
        notes.append({"xref": "paper", "yref": "y", "x": 1, "y": target, "xanchor": "right", "yanchor": "bottom",
                      "showarrow": False, "align": "right", "font": {"size": 10, "color": ref},
                      "text": f"TTFT target {target:g} ms: a p99 above it<br>is allowed (up to {100 - need:g}% may "
                              "miss)"})
    layout["annotations"] = notes
    return {"data": data, "layout": layout}


def page_query(scenario: Scenario, inputs: PlanInputs) -> str:
    """The Plan tab's link to a plan (/plan?..., /embed/plan?...): the scenario's fields but those the search
    chooses, then every search input written out (the tab's defaults are not the search's own: none is left to
    a default). The job's own key (plan_jobs.plan_query) is no page query: it names the scenario's GPU."""
    pairs = [(k, v) for k, v in scenario_query_pairs(scenario) if k not in PLAN_FIXED_FIELDS]
    for name in PlanInputs.model_fields:
        value = getattr(inputs, name)
        if value is not None and value != ():
            pairs.append((name, ",".join(map(str, value)) if isinstance(value, tuple) else f"{value:g}"))
    return urlencode(pairs, safe=",")


def plan_caption(job: PlanJob) -> str:
    """What a plan shows, in a line: the traffic, the SLO and its attainment, the candidates and the scenario's
    other settings away from their defaults (an embed's and an export's caption)."""
    s, i = job.scenario, job.inputs
    candidates = f"GPUs {', '.join(i.gpus)} · TP {', '.join(map(str, i.tp))} · {', '.join(i.schedulers)}"
    searched = [f"{k.replace('_', ' ')} {v}" for k, v in i.query_pairs() if k not in ("gpus", "tp", "schedulers", "attainment")]
    details = present.scenario_details(WebRequest(s, (s.scheduler,)))
    return " · ".join([f"{s.model} on {s.workload} at {job.rate:g} req/s, ≥ {i.attainment * 100:g}% SLO attainment",
                       candidates, *searched, *details])


def scenario_link(s: Scenario) -> str:
    """The plan's scenario on the main page (its URL query carries the page's always-present fields too)."""
    return "/?" + WebRequest(s, (s.scheduler,)).query()


def job_context(job: PlanJob) -> dict:
    """What _plan_status.html draws of the job, read once: `running` before `result`, so a plan that ends while
    the fragment renders is drawn still running (the next poll draws its plans) rather than done without its
    table and plot (the plan's thread sets its result, then stops running)."""
    running = job.running
    result = job.result
    out: dict[str, Any] = {"job": job, "running": running, "result": result, "rows": [], "figure": None}
    if result is not None and not running:
        out["rows"] = [{"n": i + 1, "plan": p, "what": deployment_text(p.scenario), "link": scenario_link(p.scenario),
                        "cli": f"sched-sim run --scenario '{p.scenario.to_query()}'", "accuracy": _verdict(p.scenario)}
                       for i, p in enumerate(result.plans)]
        out["figure"] = pareto_figure(job) if result.plans else None
        out["autoscaling"] = autoscaling_context(job.comparison)
        if out["figure"] is not None:
            out["figure"]["export"] = {"title": "Cost against latency", "caption": plan_caption(job), "warnings": []}
    out["page_query"] = page_query(job.scenario, job.inputs)
    return out


def _verdict(s: Scenario) -> dict:
    """The validated error of a plan's model x GPU x engine (app/web/accuracy.py)."""
    return verdict(s.model or GPUS[s.hardware].default_model, s.hardware, s.engine)


def _render(request: Request, name: str, ctx: dict, status: int = 200, headers: dict | None = None) -> Response:
    return templates.TemplateResponse(request, name, {"request": request, **ctx}, status_code=status,
                                      headers={"Vary": "HX-Request", **(headers or {})})


# ---------------------------------------------------------------------------------------------------------
# Routes
# ---------------------------------------------------------------------------------------------------------
@router.get("/plan", response_class=HTMLResponse)
def plan_page(request: Request) -> Response:
    """The Plan tab. With a query, the plan's job is started (or found) and its progress shown."""
    pairs = list(request.query_params.multi_items())
    given: dict[str, Any] = {}
    for k, v in pairs:
        given.setdefault(k, []).append(v) if k in LIST_INPUTS else given.setdefault(k, v)
    values = {**PLAN_PAGE_DEFAULTS, **PLAN_INPUT_DEFAULTS, **given}
    ctx: dict[str, Any] = {"job": None, "busy": None, "query": ""}
    status, errors, retry = 200, {}, 10
    if pairs:
        try:
            scenario, inputs = parse_plan_request(pairs, page=True)
            ctx["query"] = plan_query(scenario, inputs)
            ctx.update(job_context(start_plan(scenario, inputs)))
        except ScenarioError as e:
            errors, status = errors_by_field(e.problems), 422
        except service.BusyError as e:
            ctx["busy"], status, retry = str(e), 503, e.retry_after
    ctx["form"] = plan_form(values, errors)
    headers = {"Retry-After": str(retry)} if status == 503 else None
    return _render(request, "plan.html", ctx, status, headers)


@router.get("/plan/job/{job_id}", response_class=HTMLResponse)
def plan_job_fragment(request: Request, job_id: str) -> Response:
    job = get_plan_job(job_id)
    if job is None:
        return _render(request, "_plan_status.html", {"job": None, "gone": True}, 404)
    plan_polled(job)
    return _render(request, "_plan_status.html", job_context(job))


@router.post("/plan/job/{job_id}/cancel", response_class=HTMLResponse)
def plan_job_cancel(request: Request, job_id: str) -> Response:
    """The plan's Cancel button: the simulation it is running stops within milliseconds."""
    job = cancel_plan(job_id)
    if job is None:
        return _render(request, "_plan_status.html", {"job": None, "gone": True}, 404)
    return _render(request, "_plan_status.html", job_context(job))


def plan_doc(job: PlanJob) -> dict:
    """/api/plan's answer: the job's state and, once done, what `sched-sim plan --json` prints."""
    cancelled = job.result is None and job.cancelled
    doc: dict[str, Any] = {"id": job.id, "query": job.query(), "status": "cancelled" if cancelled else "running"
                           if job.running else ("error" if job.error else "done"), "done": job.done,
                           "total": job.total, "poll": f"/api/plan/{job.id}", "cancel": f"/api/plan/{job.id}/cancel"}
    if job.error and not cancelled:
        doc["error"] = job.error
    if job.result is not None:
        doc.update(cli_plan_doc(job.rate, job.inputs.attainment, job.result))
        for d, p in zip(doc["plans"], job.result.plans, strict=True):
            d["link"] = scenario_link(p.scenario)
            found = _verdict(p.scenario)  # the model's validated error on its model x GPU x engine (/accuracy)
            d["validation"] = {k: found[k] for k in ("text", "optimistic", "pending", "link")}  # no poll: the API's
        if job.no_plan:
            doc["no_plan"] = job.no_plan
        doc.update(autoscaling_doc(job.comparison))  # with a rate schedule: `sched-sim plan --json`'s own key
    return doc


@api_router.get("/api/plan", include_in_schema=False)  # starts background work: kept out of the schema fuzz
def api_plan(request: Request) -> JSONResponse:
    """Start a capacity plan (or find the same one already started): the scenario's fields and the search space
    (gpus, tp, schedulers, token_budgets, topologies, max_gpus, attainment) as query parameters. Answers 202 with
    the job's progress while it runs, 200 with the plans once done; poll `poll`. With `rate_schedule`, the plan is
    for its peak and the answer adds `autoscaling`, `sched-sim plan --rate-schedule --json`'s (plan_autoscaling)."""
    if not kernels_ready(request):
        return warming_up(request)
    try:
        scenario, inputs = parse_plan_request(list(request.query_params.multi_items()), page=False)
        job = start_plan(scenario, inputs)
    except ScenarioError as e:
        return unprocessable(e.problems, "query")
    except service.BusyError as e:
        return busy_answer(e)
    return JSONResponse(plan_doc(job), 202 if job.running else 200)


@api_router.post("/api/plan/{job_id}/cancel", include_in_schema=False)
def api_plan_cancel(job_id: str) -> JSONResponse:
    """Stop a plan: its running simulation stops within milliseconds. Answers the plan's state (`cancelled`)."""
    job = cancel_plan(job_id)
    if job is None:
        return JSONResponse({"detail": "no such plan on this server"}, 404)
    return JSONResponse(plan_doc(job), 200)


@api_router.get("/api/plan/{job_id}", include_in_schema=False)
def api_plan_job(job_id: str) -> JSONResponse:
    """A plan's progress (202) or its plans (200); 404 when the server no longer has it."""
    job = get_plan_job(job_id)
    if job is None:
        return JSONResponse({"detail": "no such plan on this server (finished plans are kept a while); start it "
                                       "again with /api/plan"}, 404)
    return JSONResponse(plan_doc(job), 202 if job.running else 200)
