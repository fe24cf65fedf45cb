"""The web's day of autoscaling (issue 41, item 5): the Plan tab's "a day of diurnal load" preset run as the web
runs it, one job on the plan board (app/web/plan_jobs.py): the plan at the schedule's peak, then the cheapest
plan's deployment over the 24 h schedule held static and under each autoscaler. Prints the plan's and the
comparison's wall and CPU seconds, the comparison's CPU seconds per request simulated (what
app/web/plan_autoscaling.CPU_S_PER_COMPARED_REQUEST is measured by), its table and the saving sentence the page
states; asserts nothing.

    .venv/bin/python bench/bench_day_plan.py [--schedule diurnal:period=86400,min=2,max=20] [--duration 86400]
                                             [--gpus a100,h100] [--model llama-3-8b]

Wall seconds on the shared 2-core machine depend on what else runs (the load average is printed); the CPU
seconds are this process's (every thread's: the job runs on the board's own thread).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.plan_report import comparison_lines  # noqa: E402
from app.web import plan_jobs  # noqa: E402
from app.web.inputs import expected_requests  # noqa: E402
from app.web.plan_autoscaling import DAY_PRESET, MAX_COMPARISON_CPU_S, saving_sentence  # noqa: E402
from app.web.plan_page import parse_plan_request  # noqa: E402


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedule", default=DAY_PRESET["rate_schedule"])
    ap.add_argument("--duration", default=DAY_PRESET["duration"])
    ap.add_argument("--gpus", default=",".join(DAY_PRESET["gpus"]))
    ap.add_argument("--model", default=DAY_PRESET["model"])
    args = ap.parse_args()
    pairs = [("model", args.model), ("workload", DAY_PRESET["workload"]), ("rate_schedule", args.schedule),
             ("duration", str(args.duration)), ("gpus", args.gpus), ("tp", ",".join(DAY_PRESET["tp"]))]
    scenario, inputs = parse_plan_request(pairs, page=True)  # the web's own checks, its budget included
    phases: dict[str, tuple[float, float]] = {}
    real = plan_jobs.compare

    def timed(*a, **kw):
        phases["plan"] = (time.perf_counter() - t0, cpu_s() - c0)
        w, c = time.perf_counter(), cpu_s()
        out = real(*a, **kw)
        phases["comparison"] = (time.perf_counter() - w, cpu_s() - c)
        return out

    plan_jobs.compare = timed
    print(f"load average before: {os.getloadavg()}")
    t0, c0 = time.perf_counter(), cpu_s()
    job = plan_jobs.start_plan(scenario, inputs)
    job.state.future.result()
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    print(f"load average after: {os.getloadavg()}")
    if job.error or job.comparison is None:
        print(f"no comparison: {job.error or job.no_plan}")
        return
    c = job.comparison
    per_run, _ = expected_requests(c.rows[0].scenario)
    runs = len(c.rows)
    print(f"job: {wall:.1f} s wall, {cpu:.1f} s CPU; {job.done}/{job.total} steps")
    for name, (w, cp) in phases.items():
        print(f"  {name}: {w:.1f} s wall, {cp:.1f} s CPU")
    compared_cpu = phases["comparison"][1]
    print(f"comparison: {runs} runs of ~{per_run:,.0f} requests: {compared_cpu / (runs * per_run):.3g} CPU s per "
          f"request (the web's job budget: {MAX_COMPARISON_CPU_S:g} CPU s)")
    print("\n".join(comparison_lines(c)))
    print(saving_sentence(c))


if __name__ == "__main__":
    main()
