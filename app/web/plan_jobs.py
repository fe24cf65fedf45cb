"""Capacity plans for the web: the dashboard's Plan tab and /api/plan. A plan is many simulations, so it runs as a
background job (one at a time, a few queued) whose progress pages poll; each of its simulations takes one of the
server's simulation slots (service.SIM_SLOTS), so a plan shares the CPU with page runs instead of crowding them.

The web bounds a plan's work before it starts (plan_work_problems): at most MAX_PLAN_CANDIDATES candidates and
MAX_PLAN_SEEDS seeds, each run within the web's per-run limits, and about MAX_PLAN_REQUESTS requests simulated in
all (a capacity search is about RUNS_PER_CANDIDATE runs at or below the plan's rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sim_core import Scenario, SetupError, resolve
from sim_core.runner import Cancelled, make_requests
from sim_core.studies.autoscale_compare import compare
from sim_core.studies.plan_space import PlanInputs
from sim_core.studies.planner import no_plan_text, plan

from . import service
from .inputs import MAX_REQUESTS, expected_requests, scenario_query_pairs, work_problems
from .jobs import JobBoard, JobRecord, job_id
from .lanes import MAX_QUEUED_PLANS
from .plan_autoscaling import autoscalers_for, planned_scenario

MAX_PLAN_CANDIDATES = 16
MAX_PLAN_SEEDS = 3
RUNS_PER_CANDIDATE = 16  # a capacity search's bracket and bisection, and the verification's runs, per seed
MAX_PLAN_REQUESTS = 2_000_000  # requests simulated in all, estimated: about a minute or two of one core
KEEP_PLANS = 16  # finished plans kept for their pages


@dataclass
class PlanJob(JobRecord):
    id: str
    scenario: Scenario
    inputs: PlanInputs
    rate: float
    no_plan: str | None = None  # result: a PlanResult
    # With a rate schedule (plan_autoscaling.py): the plan is for its peak, then its cheapest deployment runs over
    # the schedule static and under each of `autoscalers`; `comparison` is set before `result`.
    autoscalers: tuple[str, ...] = ()
    comparison: Any = None

    def query(self) -> str:
        return plan_query(self.scenario, self.inputs)


def plan_query(scenario: Scenario, inputs: PlanInputs) -> str:
    """The Plan tab's canonical query: the scenario's fields (the page's always-present ones too), then the
    search space's inputs that differ from their defaults."""
    return urlencode(scenario_query_pairs(scenario) + inputs.query_pairs(), safe=",:")


def plan_work_problems(scenario: Scenario, inputs: PlanInputs, at_peak: bool = False) -> list[tuple[str, str]]:
    """What makes this plan more work than the web does, each problem naming the input to change. `at_peak`: the
    scenario is a rate schedule's peak held over at most autoscale_compare.PEAK_PLAN_S, so too many requests is
    the schedule's peak to lower, not the duration (which a plan at the peak cuts anyway)."""
    n = inputs.candidates()
    if n > MAX_PLAN_CANDIDATES:
        return [("gpus", f"{n} candidates (GPUs x TP degrees x schedulers x token budgets x topologies); the web "
                         f"plans over at most {MAX_PLAN_CANDIDATES} — choose fewer (the CLI has no such limit)")]
    if scenario.seeds > MAX_PLAN_SEEDS:
        return [("seeds", f"must be at most {MAX_PLAN_SEEDS} for a plan on the web (got {scenario.seeds}); "
                          f"the CLI has no such limit")]
    per_run, _ = expected_requests(scenario)
    if per_run > MAX_REQUESTS:
        if at_peak:
            return [("rate_schedule", f"the plan at the schedule's peak, {scenario.rate:.4g} req/s over "
                                      f"{scenario.duration:g} s, is about {per_run:,.0f} requests per run; the web "
                                      f"runs at most {MAX_REQUESTS:,} — lower the peak to at most "
                                      f"{MAX_REQUESTS / scenario.duration:.4g} req/s (the CLI has no such limit)")]
        return [("duration", f"rate x duration is about {per_run:,.0f} requests per run; the web runs at most "
                             f"{MAX_REQUESTS:,} — shorten duration to at most {MAX_REQUESTS / scenario.rate:.4g} s")]
    total = per_run * n * scenario.seeds * RUNS_PER_CANDIDATE
    if total > MAX_PLAN_REQUESTS:
        field, lower = ("rate_schedule", "lower the schedule's peak") if at_peak else ("duration", "shorten duration")
        return [(field, f"the search would simulate about {total:,.0f} requests ({n} candidates x "
                        f"{scenario.seeds} seed(s) x ~{RUNS_PER_CANDIDATE} runs of {per_run:,.0f}); the web "
                        f"plans at most {MAX_PLAN_REQUESTS:,} — {lower} or choose fewer candidates")]
    return _step_problems(scenario, inputs)


def _step_problems(scenario: Scenario, inputs: PlanInputs) -> list[tuple[str, str]]:
    """One run at the plan's rate must be within the web's engine-step budget at the smallest token budget."""
    for gpu in inputs.gpus:  # the workload's lengths depend on the deployment only through max_model_len
        try:
            resolved = resolve(scenario.model_copy(update={"hardware": gpu}))
            break
        except SetupError:
            continue
    else:
        return []  # the model fits no candidate GPU: the plan says so at once, without simulating
    budgets = list(inputs.token_budgets)
    for sched in ([] if budgets else inputs.schedulers):
        try:
            budgets.append(resolve(scenario.model_copy(update={"hardware": gpu, "scheduler": sched})).token_budget)
        except SetupError:
            continue
    if not budgets:
        return []
    return work_problems(scenario, min(budgets), make_requests(scenario, resolved))


class SlotExecutor:
    """Runs a plan's tasks one after another in the job's thread (inside its cancel_scope: Cancel stops the
    running simulation), each holding one of the server's simulation slots while it runs."""

    name = "web"
    workers = 1

    def __init__(self, cancel=None):
        self.cancel = cancel

    def map(self, fn, tasks, on_done=None) -> list:
        out = []
        for k, task in enumerate(tasks):
            if self.cancel is not None and self.cancel[0]:  # a task that simulates nothing still stops here
                raise Cancelled("the plan was cancelled")
            with service.SIM_SLOTS:
                out.append(fn(task))
            if on_done:
                on_done(k + 1, len(tasks))
        return out


_plans = JobBoard("plan", MAX_QUEUED_PLANS, KEEP_PLANS, busy=lambda retry: service.BusyError(
    f"{MAX_QUEUED_PLANS} plans are already running or queued (the server's limit, max_queued_plans); retry in "
    f"about {retry} s", retry, ("max_queued_plans", MAX_QUEUED_PLANS)))


def start_plan(scenario: Scenario, inputs: PlanInputs) -> PlanJob:
    """The job for this plan: one already running or done, or a new one queued. Raises service.BusyError when
    MAX_QUEUED_PLANS are running or queued (the caller has checked the work with plan_work_problems)."""
    autoscalers = autoscalers_for(scenario)
    job = PlanJob(job_id(plan_query(scenario, inputs)), scenario, inputs, planned_scenario(scenario).rate,
                  autoscalers=autoscalers, total=inputs.candidates() * scenario.seeds * 3 + _compared(autoscalers))
    return _plans.start(job, _run)[0]


def get_plan_job(key: str) -> PlanJob | None:
    return _plans.get(key)


def cancel_plan(key: str) -> PlanJob | None:
    """Stop a plan (its Cancel button): the simulation it is running stops within milliseconds."""
    return _plans.cancel(key)


def plan_polled(job: PlanJob) -> None:
    _plans.polled(job)


def _compared(autoscalers: tuple[str, ...]) -> int:
    """The comparison's runs over a rate schedule (static, then each autoscaler); 0 without one."""
    return 1 + len(autoscalers) if autoscalers else 0


def _run(job: PlanJob) -> None:
    searched = [job.total - _compared(job.autoscalers)]  # the plan's own steps, until it counts them

    def progress(done: int, total: int) -> None:
        searched[0] = total
        job.done, job.total = done, total + _compared(job.autoscalers)

    def compared(done: int, _total: int) -> None:
        job.done = searched[0] + done

    try:
        result = plan(planned_scenario(job.scenario), job.rate, job.inputs.space(), target=job.inputs.attainment,
                      executor=SlotExecutor(job.state.cancel), on_progress=progress)
        if not result.plans:
            job.no_plan = no_plan_text(result, job.scenario.model, job.inputs.max_gpus, job.inputs.attainment)
        elif job.autoscalers:  # one simulation at a time, as the plan's: it holds one of the server's slots
            with service.SIM_SLOTS:
                job.comparison = compare(job.scenario, result.plans, job.autoscalers, on_row=compared)
        job.done = job.total
        job.result = result
    except Exception as e:  # shown on the page; asking for the same plan again retries it
        job.error = f"{type(e).__name__}: {e}"
    finally:
        service.release_memory()
