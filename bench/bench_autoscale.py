"""A diurnal day on A100 + Llama-3-8B (chat): the autoscalers against the cheapest static deployment that meets the
SLO at the peak. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_autoscale.py [--day-s 3600] [--min-rate 2] [--max-rate 40] [--full]
                                              [--static-replicas N]

The static deployment: the fewest replicas whose attainment over the peak (requests arriving while the schedule's
rate is at least PEAK_SHARE of its maximum) is at least the goal, searched upward from the peak rate over one
replica's capacity; it is billed all day. Each autoscaler starts from min_replicas and is billed per replica from
being asked for to its release. Both report attainment over the day and the worst minute.

The default day is an hour (period 3600 s), ~76k requests: the diurnal shape at 1/24 of the time, so provisioning
(~47 s) weighs 24 times what it would over a real day; --full runs the real 86,400 s day (~1.8M requests at these
rates: long on two cores).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run  # noqa: E402
from sim_core.cluster_over_time import attainment_by_window, running_target  # noqa: E402
from sim_core.metrics import request_latencies_s  # noqa: E402
from sim_core.rate_schedule import parse  # noqa: E402
from sim_core.studies.capacity import max_rate  # noqa: E402

GOAL = 0.9
PEAK_SHARE = 0.9


def peak_attainment(res, schedule) -> float:
    """Attainment of the requests that arrived while the rate was within PEAK_SHARE of its peak."""
    rate = schedule.rate_at(res.requests.arrival_s)
    near = rate >= PEAK_SHARE * rate.max()
    return float(request_latencies_s(res)["met_slo"][near].mean())


def worst_minute(res) -> float:
    rated = [a for a in attainment_by_window(res, res.end_s)["attainment"] if a is not None]
    return min(rated)


def cheapest_static(base: Scenario, schedule, peak: float) -> tuple[int, object, float]:
    """(replicas, its run, seconds) of the fewest static replicas meeting GOAL at the peak: from the peak over one
    replica's capacity, down while it still meets it, up until it does."""
    one = base.model_copy(update={"rate_schedule": None, "rate": peak, "duration": 300.0})
    per_replica, _ = max_rate(one, GOAL)
    n = max(1, math.ceil(peak / per_replica))
    found: dict[int, tuple] = {}
    while True:
        t = time.perf_counter()
        res = run(base.model_copy(update={"replicas": n}))
        took = time.perf_counter() - t
        ok = peak_attainment(res, schedule) >= GOAL
        print(f"  static {n:2d} replicas: peak attainment {peak_attainment(res, schedule):.3f}, day "
              f"{res.metrics['slo_attainment']:.3f} ({took:.1f} s)", flush=True)
        found[n] = (ok, res, took)
        if ok and n - 1 >= 1 and n - 1 not in found:
            n -= 1
        elif not ok:
            n += 1
            if n in found:
                return n, found[n][1], found[n][2]
        else:
            return n, res, took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--day-s", type=float, default=3600.0)
    ap.add_argument("--min-rate", type=float, default=2.0)
    ap.add_argument("--max-rate", type=float, default=40.0)
    ap.add_argument("--full", action="store_true", help="a real 86,400 s day")
    ap.add_argument("--static-replicas", type=int, help="the static deployment to compare with (skips the search)")
    args = ap.parse_args()
    day = 86_400.0 if args.full else args.day_s
    text = f"diurnal:period={day:g},min={args.min_rate:g},max={args.max_rate:g}"
    schedule = parse(text)
    base = Scenario(hardware="a100", model="llama-3-8b", workload="chat", rate_schedule=text, duration=day, seed=1,
                    router="least_outstanding")
    peak = schedule.peak_rate(day)
    print(f"{text}: mean {schedule.mean_rate(day):.1f} req/s, peak {peak:.1f} req/s, over {day:g} s", flush=True)
    if args.static_replicas:
        t = time.perf_counter()
        n, static = args.static_replicas, run(base.model_copy(update={"replicas": args.static_replicas}))
        static_s = time.perf_counter() - t
        print(f"  static {n:2d} replicas: peak attainment {peak_attainment(static, schedule):.3f}", flush=True)
    else:
        n, static, static_s = cheapest_static(base, schedule, peak)
    static_hours = n * static.end_s / 3600.0
    rows = [("static", n, static_hours, static.metrics["slo_attainment"], worst_minute(static), static_s)]
    # utilization at its default running target, and at twice and four times it (less headroom).
    policies = [("utilization", {}), ("predictive", {})]
    for k in (2, 4):
        policies.append((f"util x{k}", {"autoscaler": "utilization", "autoscale_target": k * running_target(base.model_copy(update={"autoscaler": "utilization"}), run)}))
    for name, extra in policies:
        t = time.perf_counter()
        res = run(base.model_copy(update={"autoscaler": name, "max_replicas": max(8, n + 2), **extra}))
        took = time.perf_counter() - t
        m = res.metrics
        print(f"  {name}: {m['autoscaler']}", flush=True)
        rows.append((name, int(np.ceil(max(m["replicas_over_time"]["serving"]))), m["gpu_hours"],
                     m["slo_attainment"], m["slo_attainment_worst_window"], took))
    print(f"\n{'deployment':12s} {'replicas':>8s} {'GPU-hours':>10s} {'vs static':>10s} {'attainment':>11s} "
          f"{'worst min':>10s} {'wall s':>7s}")
    for name, reps, hours, att, worst, took in rows:
        print(f"{name:12s} {reps:8d} {hours:10.2f} {hours / static_hours - 1:+10.1%} {att:11.3f} {worst:10.3f} "
              f"{took:7.1f}")


if __name__ == "__main__":
    main()
