"""A plan over a rate schedule on the web (issue 41, item 5): the Plan tab and /api/plan take `rate_schedule` as
`sched-sim plan --rate-schedule` does. One background job plans at the schedule's peak (autoscale_compare.at_peak),
then runs the cheapest colocated plan's deployment over the whole schedule held static and under each autoscaler
(autoscale_compare.compare): its progress counts the plan's searches, then those runs; Cancel stops the running
one within milliseconds (the job board's cancel_scope). The answer is the CLI's own: /api/plan's `autoscaling` key
is app.plan_report.comparison_doc, and the page's table draws the same rows.

The comparison's work is bounded before the job is queued (schedule_work_problems): one run of the schedule's
arrivals per row, each within the web's memory per run, and all of them within MAX_COMPARISON_CPU_S of one core.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sim_core import Scenario
from sim_core.run_cost import BYTES_PER_REQUEST
from sim_core.studies.autoscale_compare import Comparison, at_peak, parse_autoscalers

from ..plan_report import comparison_doc, deployment_text
from .inputs import MAX_DURATION_S, MAX_REQUESTS, WebRequest, expected_requests
from .run_budget import MAX_RUN_BYTES

# The form's one-click preset, "a day of diurnal load": a 24 h cosine from 2 req/s to 20 req/s (at noon, the
# schedule's default peak), a chat service's day; for llama-3-8b on A100s the peak needs 3 replicas (on an H100
# one, which leaves an autoscaler nothing to scale: the preset plans on A100s).
DAY_S = 86_400
DAY_SCHEDULE = "diurnal:period=86400,min=2,max=20,peak=43200"  # canonical (RateSchedule.text)
# What the preset fills in (static/js/plan_presets.js): the traffic, and the GPUs the rates are meant for.
DAY_PRESET = {"model": "llama-3-8b", "workload": "chat", "rate": "", "rate_schedule": DAY_SCHEDULE,
              "duration": str(DAY_S), "gpus": ["a100"], "tp": ["1"]}
# A comparison job's budget: at most 10 minutes of one core for its runs (the plan at the peak is bounded apart, by
# plan_jobs.plan_work_problems). A job runs on the board's one thread, one at a time, beside the pages' runs: 10
# minutes keeps a queued plan's wait bounded while a day at the preset's rates fits (bench/bench_day_plan.py).
MAX_COMPARISON_CPU_S = 600.0
# CPU seconds per request simulated by one of the comparison's runs, measured by bench/bench_day_plan.py on this
# project's 2-core build box: the preset's day (3 x A100 static, utilization, predictive; 3 runs of ~950,400 chat
# requests) took 38.7 s of CPU, 1.36e-5 s a request (2026-12-07, load average 10-16).
CPU_S_PER_COMPARED_REQUEST = 1.4e-5


def autoscalers_for(scenario: Scenario) -> tuple[str, ...]:
    """The autoscalers a plan over `scenario`'s schedule is compared with (the CLI's default: the scenario's own
    autoscaler, else utilization and predictive); () without a schedule."""
    return parse_autoscalers(None, scenario) if scenario.rate_schedule is not None else ()


def planned_scenario(scenario: Scenario) -> Scenario:
    """What the plan searches: the schedule's peak as a constant rate (autoscale_compare.at_peak), or the
    scenario itself without a schedule."""
    return at_peak(scenario)[0] if scenario.rate_schedule is not None else scenario


def comparison_work_problems(scenario: Scenario) -> list[tuple[str, str]]:
    """The comparison's runs against the web's limits, before the job is queued: each run's memory (its requests
    at run_cost.BYTES_PER_REQUEST within MAX_RUN_BYTES) and all runs' CPU within MAX_COMPARISON_CPU_S. Over: one
    problem naming `duration` (when a day of this schedule would fit) or `rate_schedule`, with the allowed range."""
    if scenario.rate_schedule is None:
        return []
    runs = 1 + len(autoscalers_for(scenario))
    per_run, _ = expected_requests(scenario)
    fit = min(MAX_RUN_BYTES / BYTES_PER_REQUEST, MAX_COMPARISON_CPU_S / (CPU_S_PER_COMPARED_REQUEST * runs))
    if per_run <= fit:
        return []
    mean = scenario.offered_rate()
    what = (f"{runs} runs (static and {runs - 1} autoscaler(s)) of about {per_run:,.0f} requests each (a mean "
            f"{mean:.4g} req/s over {scenario.duration:g} s); a plan's comparison on the web simulates at most "
            f"{fit:,.0f} requests a run (about {MAX_COMPARISON_CPU_S / 60:g} minutes of one core in all, and "
            f"{MAX_RUN_BYTES / 1e9:g} GB a run; the CLI has no such limit)")
    longest = fit / mean
    if scenario.duration > DAY_S and longest >= DAY_S:
        return [("duration", f"{what} — duration must be at most {longest:,.0f} s with this schedule")]
    return [("rate_schedule", f"{what} — lower its rates to a mean of at most {fit / scenario.duration:.4g} "
                              f"req/s over {scenario.duration:g} s (a diurnal's mean is (min + max) / 2), or "
                              f"shorten duration to at most {longest:,.0f} s")]


def autoscaling_doc(comparison: Comparison | None) -> dict[str, Any]:
    """/api/plan's `autoscaling` key: what `sched-sim plan --json` prints under it; {} without a comparison."""
    return {"autoscaling": comparison_doc(comparison)} if comparison is not None else {}


# ---------------------------------------------------------------------------------------------------------
# What the page shows (templates/_plan_autoscaling.html)
# ---------------------------------------------------------------------------------------------------------
def autoscaling_context(c: Comparison | None) -> dict[str, Any] | None:
    """The comparison's table and its saving sentence, or None without a comparison."""
    if c is None:
        return None
    rows = [{"row": r, "what": _deployment(r), "link": cluster_time_link(r.scenario, r.deployment),
             "why_no_link": why_no_link(r.scenario)} for r in c.rows]
    first = c.rows[0].scenario if c.rows else None
    return {"c": c, "rows": rows, "sentence": saving_sentence(c), "energy": any(r.gpu_kwh is not None for r in c.rows),
            "duration": first.duration if first else None, "seed": first.seed if first else None,
            "deployment": deployment_text(c.plan.scenario) if c.plan else None}


def _deployment(r) -> str:
    s = r.scenario
    if r.deployment == "static":
        return f"static {deployment_text(s)}"
    lo, hi = s.scaling_bounds
    return f"{r.deployment}: {lo}-{hi} x {s.hardware} tp{s.tp} {s.scheduler}"


def saving_sentence(c: Comparison) -> str:
    """The autoscaler that bills the fewest GPU-hours against the static deployment, in one sentence."""
    if c.plan is None or not c.rows:
        return f"No comparison: {c.note}" if c.note else "No comparison."
    static = c.rows[0]
    scaled = [r for r in c.rows[1:] if r.saving is not None]
    if not scaled:
        return f"No autoscaler could run this deployment{f' ({c.note})' if c.note else ''}."
    best = min(scaled, key=lambda r: r.gpu_hours)
    where = (f"the static {deployment_text(static.scenario)} that meets the SLO at the peak "
             f"({static.gpu_hours:.3g} GPU-h, {static.slo_attainment * 100:.1f}% SLO attainment)")
    delta = abs(static.gpu_hours - best.gpu_hours)
    verb = "saves" if best.saving >= 0 else "costs"
    more = "" if best.saving >= 0 else " more"
    alone = (" One replica meets the peak, so an autoscaler that keeps at least one has nothing to scale."
             if static.replicas == 1 and best.scenario.scaling_bounds[0] >= 1 else "")
    return (f"{best.deployment} {verb} {abs(best.saving) * 100:.0f}% of GPU-hours{more} ({delta:.3g} GPU-h) "
            f"against {where}, at {best.slo_attainment * 100:.1f}% SLO attainment.{alone}")


def cluster_time_link(s: Scenario, deployment: str) -> str | None:
    """/cluster-time for this row's deployment, where its page's per-request budget allows the run."""
    if why_no_link(s) is not None:
        return None
    view = {"autoscalers": deployment}
    if deployment == "static":
        view["static_replicas"] = str(s.replicas)
    return f"/cluster-time?{WebRequest(s, (s.scheduler,)).query()}&{urlencode(view, safe=',')}"


def why_no_link(s: Scenario) -> str | None:
    """Why /cluster-time cannot show this run (its per-request limits), or None."""
    n, _ = expected_requests(s)
    if s.duration > MAX_DURATION_S or n > MAX_REQUESTS:
        return (f"/cluster-time runs at most {MAX_DURATION_S:g} s and {MAX_REQUESTS:,} requests in a request "
                f"(this run: {s.duration:g} s, ~{n:,.0f} requests)")
    return None

