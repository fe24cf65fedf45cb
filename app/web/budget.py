"""The web's budget for one request's whole work, and the web's limits as /api/catalog lists them. The limits
themselves are inputs.py's constants (the memory and CPU ones, run_budget.py's, read by sim_core.run_cost's
estimate): the checks, their error messages and the catalog all read them there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim_core import resolve
from sim_core.run_cost import CPU_S_PER_ADAPTER_STEP
from sim_core.runner import least_engine_steps
from sim_core.studies import model_error

from . import lanes
from .inputs import (
    MAX_API_SEEDS,
    MAX_DURATION_S,
    MAX_PAGE_SEEDS,
    MAX_QUEUED_SWEEPS,
    MAX_REQUEST_REQUESTS,
    MAX_REQUEST_STEPS,
    MAX_REQUESTS,
    MAX_SWEEP_POINTS,
    MAX_SWEEP_REQUESTS,
    MAX_SWEEP_STEPS,
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_ROWS,
    MAX_WEB_STEPS,
    REQUEST_TIME_LIMIT_S,
    WebRequest,
)
from .run_budget import MAX_REQUEST_CPU_S, MAX_RUN_BYTES, web_run_cost


def request_work_problems(req: WebRequest, reqs, token_budgets: Mapping[str, int]) -> list[tuple[str, str]]:
    """The whole request's work against the web's budget, before any of it runs: `reqs`, the first seed's
    workload, stands for every seed's (and every model-ensemble member's: `model_uncertainty` replays the first
    seed under model_error.MEMBERS step-time models); `token_budgets`, each scheduler's. Over budget: one problem
    naming the field that multiplies the work (model_uncertainty, seeds, schedulers, the engines, then the run's
    own size), with the estimate, the budget and what would fit."""
    s = req.scenario
    members = model_error.MEMBERS if s.model_uncertainty else 0
    each = s.seeds + members  # runs of each scheduler
    n, runs, engines = len(reqs), len(req.schedulers) * each, s.engines
    total = n * runs
    steps = sum(least_engine_steps(reqs, b) for b in token_budgets.values()) * each * engines
    if total <= MAX_REQUEST_REQUESTS and steps <= MAX_REQUEST_STEPS:
        return cpu_problems(req, reqs, each)
    product = f"{len(req.schedulers)} scheduler(s) x ({s.seeds} seed(s) + {members} ensemble runs)" if members \
        else f"{len(req.schedulers)} scheduler(s) x {s.seeds} seed(s)"
    if total > MAX_REQUEST_REQUESTS:
        what = (f"{product} x {n:,} requests = {total:,} requests simulated; the web simulates at most "
                f"{MAX_REQUEST_REQUESTS:,} per request")
        budget, per_run = MAX_REQUEST_REQUESTS, n
    else:
        what = (f"{product} x {engines} engine(s) is about {steps:,} engine steps; the web runs at most "
                f"{MAX_REQUEST_STEPS:,} per request")
        budget, per_run = MAX_REQUEST_STEPS, max(1, steps // runs)
    fit_runs = budget // per_run  # scheduler runs of this size that fit
    tail = " (the budget is in /api/catalog's limits; the CLI has no such limit)"
    if members and fit_runs >= len(req.schedulers) * s.seeds:
        return [("model_uncertainty", f"{what} — turn it off, or compare fewer schedulers{tail}")]
    if s.seeds > 1 and fit_runs >= len(req.schedulers) * (1 + members):
        return [("seeds", f"{what} — at most {fit_runs // len(req.schedulers) - members} seed(s) with these "
                          f"schedulers{tail}")]
    if len(req.schedulers) > 1 and fit_runs >= each:
        return [("schedulers", f"{what} — at most {fit_runs // each} scheduler(s) of this size: compare fewer "
                               f"schedulers or use fewer seeds{tail}")]
    if engines > 1 and total <= MAX_REQUEST_REQUESTS:
        field = "prefill_replicas" if s.disaggregated else "replicas"
        return [(field, f"{what} — use fewer engines, fewer schedulers or seeds, or a larger token_budget{tail}")]
    field = "num_requests" if s.num_requests is not None else ("rate" if s.rate is not None else "duration")
    return [(field, f"{what} — simulate fewer requests per run{tail}")]


def cpu_problems(req: WebRequest, reqs, runs_each: int) -> list[tuple[str, str]]:
    """The request's CPU seconds, as sim_core.run_cost estimates every scheduler's run (times its seeds and
    ensemble runs), against MAX_REQUEST_CPU_S: the term that weighs most is named (LoRA's adapters walked each
    step, the autoscaler's evaluations, the steps themselves), with the most adapters that fit for LoRA."""
    costs = [web_run_cost(sc, reqs, resolve(sc)) for sc in (req.for_scheduler(n) for n in req.schedulers)]
    total = sum(c.cpu_s for c in costs) * runs_each
    if total <= MAX_REQUEST_CPU_S:
        return []
    s, tail = req.scenario, " (the budget is in /api/catalog's limits; the CLI has no such limit)"
    heaviest = max((t for c in costs for t in c.terms), key=lambda t: t.cpu_s)
    what = (f"{len(req.schedulers)} scheduler(s) x {runs_each} run(s) each is ~{total:,.0f} s of CPU to simulate "
            f"({heaviest.what}); the web simulates at most {MAX_REQUEST_CPU_S:g} s per request")
    if heaviest.field == "lora_adapters":
        walked = sum(c.steps for c in costs) * runs_each * CPU_S_PER_ADAPTER_STEP  # CPU seconds per adapter
        most = max(0, int(s.lora_adapters - (total - MAX_REQUEST_CPU_S) / walked))
        return [("lora_adapters", f"{what} — at most {most:,} adapters with this workload{tail}")]
    if heaviest.field == "autoscale_interval_s":  # every evaluation reads every replica: fewer of them
        return [(heaviest.field, f"{what} — raise it (the HPA evaluates every 15 s){tail}")]
    if heaviest.field in ("autoscale_replica_rate", "autoscale_target"):  # its default comes from a search
        return [(heaviest.field, f"{what} — set {heaviest.field} to skip the search{tail}")]
    return [(heaviest.field, f"{what} — lower it, or simulate fewer requests{tail}")]


def web_limits() -> dict[str, Any]:
    """The web's limits, as /api/catalog lists them (the error messages quote the same constants)."""
    return {"max_requests": MAX_REQUESTS, "max_duration_s": MAX_DURATION_S, "max_upload_bytes": MAX_UPLOAD_BYTES,
            "max_upload_rows": MAX_UPLOAD_ROWS, "max_sweep_points": MAX_SWEEP_POINTS,
            "max_sweep_requests": MAX_SWEEP_REQUESTS, "max_sweep_steps": MAX_SWEEP_STEPS,
            "max_run_steps": MAX_WEB_STEPS, "max_page_seeds": MAX_PAGE_SEEDS, "max_api_seeds": MAX_API_SEEDS,
            "max_request_requests": MAX_REQUEST_REQUESTS, "max_request_steps": MAX_REQUEST_STEPS,
            "request_time_limit_s": REQUEST_TIME_LIMIT_S,
            "max_run_bytes": MAX_RUN_BYTES, "max_request_cpu_s": MAX_REQUEST_CPU_S, "max_queued_sweeps": MAX_QUEUED_SWEEPS,
            **_busy_limits()}


def _busy_limits() -> dict[str, int]:
    """The limits a 503 names (service.BusyError.limit): simulations at once, API requests in the simulation
    lane, plans and frontiers running or queued (lanes.py)."""
    return {"max_simulations": lanes.MAX_SIMULATIONS, "max_in_flight_requests": lanes.MAX_IN_FLIGHT,
            "max_queued_plans": lanes.MAX_QUEUED_PLANS, "max_queued_frontiers": lanes.MAX_QUEUED_FRONTIERS}
