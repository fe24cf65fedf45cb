"""A twin of the user's own service (issue #39 item 5): /twin takes a Prometheus scrape of a vLLM or SGLang server
(the text a /metrics page serves, several timestamped samples, or a range-query JSON answer) and the deployment the
user names, simulates the load the scrape saw on that deployment, and overlays the two (sim_core/twin.py): the
TTFT, ITL and E2E distributions as their buckets state them, KV usage, throughput, with the differences stated.

GET /twin is the form; the form POSTs the file (multipart) and the page answers with the comparison. The scrape is
not kept: a twin is a file the user holds, not a URL (reloading the answer sends the file again). A scrape that
cannot be read, or a deployment that cannot serve the load, is a 422 naming the problem by field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from sim_core import ScenarioError, SetupError, TraceError
from sim_core.prometheus_parse import ScrapeError, read_scrapes
from sim_core.runner import Cancelled
from sim_core.scenario import Scenario, parse_scenario
from sim_core.studies.prometheus_fit import FIT_MAX_REQUESTS, derive_load, run_window
from sim_core.twin import CLOSE_PCT, differences, latency_rows, load_rows, simulated_rates

from . import pages, present, service
from .api import kernels_error, kernels_ready
from .http import CLIENT_CLOSED, UploadProblem, errors_by_field, read_multipart, run_until_disconnect
from .inputs import PAGE_DEFAULTS, WebRequest, problems_of
from .templating import templates
from .twin_figure import FIGURE_NAME, overlay_figure

router = APIRouter(include_in_schema=False)

FILE_FIELD = "scrape"
# The deployment the form asks for (any scenario field may be posted). The load's lengths and rate come from the
# scrape unless the user states them; `rate` is on the form because a single scrape has no time to derive it from.
# A blank rate is the scrape's: its request counter over its window (the preset's rate would be a guess).
DERIVED_RATE = "from the scrape"
ENGINE_FROM_SCRAPE = "the scrape's (vllm: or sglang: names)"
FORM_FIELDS = ("engine", "hardware", "model", "tp", "max_model_len", "gpu_memory_utilization", "rate")


@router.get("/twin", response_class=HTMLResponse)
async def twin_form(request: Request) -> Response:
    return _render(request, {}, {}, None)


@router.post("/twin", response_class=HTMLResponse)
async def twin_compare(request: Request) -> Response:
    """The scrape beside the simulation of its load: in the simulation lane, stopped if the browser leaves."""
    try:
        data, filename, fields = await read_multipart(request, FILE_FIELD)
    except UploadProblem as e:
        return _render(request, {}, {FILE_FIELD: str(e)}, None)
    if kernels_error(request):
        return _render(request, fields, {"server": kernels_error(request)}, None)
    if not kernels_ready(request):
        return _render(request, fields, {"server": "the simulator is starting (compiling its kernels): send the "
                                                   "form again in a few seconds"}, None)
    return await run_until_disconnect(request, _answer, request, data, filename, fields,
                                      too_long=pages.too_long_page)


def _answer(request: Request, data: bytes | None, filename: str, fields: dict, cancel) -> Response:
    try:
        result = comparison(data, filename, fields, cancel)
        errors: dict[str, str] = {}
    except ScrapeError as e:
        result, errors = None, {FILE_FIELD: str(e)}
    except (ScenarioError, SetupError, TraceError) as e:
        result, errors = None, errors_by_field(problems_of(e))
    except service.BusyError as e:
        result, errors = None, {"server": str(e)}
    except Cancelled:
        return Response(status_code=CLIENT_CLOSED)
    return _render(request, fields, errors, result)


def scrape_text(data: bytes | None, filename: str) -> str:
    if not data or not data.strip():
        raise ScrapeError("no file: choose a Prometheus scrape (the text of a vLLM or SGLang /metrics page, or a "
                          "range-query JSON answer)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScrapeError(f"{filename or 'the file'}: not UTF-8 text (byte {e.start}): a Prometheus scrape is "
                          f"text") from None


def stated_scenario(fields: dict) -> Scenario:
    """The deployment as the form states it: the fields given (blank ones left to the scrape or the defaults)."""
    given = {k: v for k, v in fields.items() if v not in ("", None) and k != "schedulers"}
    return parse_scenario(given)


def comparison(data: bytes | None, filename: str, fields: dict, cancel=None) -> dict:
    """The scrape's window, the load derived from it, its simulation on the stated deployment, and the overlay."""
    source = (filename or "scrape")[:120]
    measured = read_scrapes([(source, scrape_text(data, filename))])
    load, derived = derive_load(stated_scenario(fields), measured)
    req = WebRequest(load, (load.scheduler,), None)
    service.check_work(req)
    result = service.full_run(req, load.scheduler, cancel)
    simulated = run_window(result, measured.flavour)
    latency, other = latency_rows(measured, simulated), load_rows(measured, simulated, simulated_rates(result, measured.flavour))
    return {
        "source": source, "flavour": measured.flavour, "snapshots": measured.snapshots,
        "window_s": measured.seconds, "load_query": load.to_query(), "derived": derived,
        "caption": present.scenario_caption(req), "requests_seen": measured.counters.get("requests"),
        "requests_simulated": int(len(result.requests)), "max_requests": FIT_MAX_REQUESTS,
        "latency": latency, "other": other, "differences": differences(latency + other), "close_pct": CLOSE_PCT,
        "not_modelled": list(measured.unknown), "figure": overlay_figure(measured, simulated),
    }


def _form(fields: dict, errors: dict[str, str]) -> dict:
    values: dict[str, Any] = {**PAGE_DEFAULTS, **{k: v for k, v in fields.items() if k != "schedulers"}}
    values.pop("workload", None)  # the lengths come from the scrape
    values.pop("duration", None)  # as many requests as the scrape's window served
    built = present.build_form(values, errors, page_defaults=PAGE_DEFAULTS)
    by_name = {f.name: f for _, group in built.groups for f in group} | {f.name: f for f in built.advanced}
    scheduler = str(fields.get("scheduler") or Scenario.model_fields["scheduler"].default)
    shown = [by_name[n] for n in FORM_FIELDS if n in by_name]
    shown = [_from_scrape(f, fields) for f in shown]
    return {"fields": shown, "scheduler": scheduler,
            "schedulers": [s["name"] for s in built.schedulers]}


def _from_scrape(f, fields: dict):
    """The rate and the engine left blank are the scrape's: the rate from its request counter, the engine from its
    metrics' prefix (vllm: or sglang:), so an SGLang scrape needs no choice made (a stated one must agree)."""
    if f.name == "rate":
        return replace(f, placeholder=DERIVED_RATE)
    if f.name == "engine":
        return replace(f, options=[("", ENGINE_FROM_SCRAPE), *f.options], value=str(fields.get("engine") or ""))
    return f


def _render(request: Request, fields: dict, errors: dict[str, str], result: dict | None) -> Response:
    status = 503 if "server" in errors else 422 if errors else 200
    ctx = {"request": request, "errors": errors, "result": result, "form": _form(fields, errors),
           "file_field": FILE_FIELD, "figure_name": FIGURE_NAME,
           "other_errors": [(k, v) for k, v in errors.items() if k not in (*FORM_FIELDS, FILE_FIELD, "scheduler")]}
    return templates.TemplateResponse(request, "twin.html", ctx, status_code=status)
