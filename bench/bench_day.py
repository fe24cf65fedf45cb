"""The issue's speed point: a 24-hour diurnal day at a mean of 100 req/s (~8.6M requests) on A100 + Llama-3-8B,
autoscaled up to 64 replicas, simulated in one run. Prints the run's wall and CPU seconds and the process's peak
RSS (ru_maxrss); asserts nothing.

    .venv/bin/python bench/bench_day.py [--duration-s 86400] [--peak-s 43200] [--min-rate 40] [--max-rate 160]
                                        [--workload chat] [--autoscaler utilization] [--max-replicas 64]

The day: diurnal:period=86400 from --min-rate (at peak - 12 h) to --max-rate (at --peak-s), mean their average.
The workload is `chat` (half ShareGPT-length first turns, 150 prompt / 240 output tokens at the median, half
follow-ups resending their history): decode-heavy turns beside long-prompt ones, the preset bench_autoscale.py
sizes the autoscalers on. --duration-s shorter than the day simulates its first hours (move --peak-s to sample
the busy part) and prints the per-request figures to extrapolate from. Warm-up first, timed apart: numba's
kernels (compiled or loaded from the cache), on the day's first minute; the day's own figures include the
autoscaler's capacity probes (short constant-rate runs of one replica, its target; a few seconds).

Wall seconds on the shared 2-core machine depend on what else runs: the load average is printed before and
after, and the CPU seconds (this process's) are the figure to compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run  # noqa: E402

DAY_S = 86_400.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(scenario: Scenario):
    wall, cpu = time.perf_counter(), time.process_time()
    res = run(scenario)
    return res, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration-s", type=float, default=DAY_S)
    ap.add_argument("--peak-s", type=float, default=DAY_S / 2)
    ap.add_argument("--min-rate", type=float, default=40.0)
    ap.add_argument("--max-rate", type=float, default=160.0)
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--autoscaler", default="utilization")
    ap.add_argument("--max-replicas", type=int, default=64)
    ap.add_argument("--start-replicas", type=int, default=8)
    args = ap.parse_args()
    text = f"diurnal:period={DAY_S:g},min={args.min_rate:g},max={args.max_rate:g},peak={args.peak_s:g}"
    day = Scenario(hardware="a100", model="llama-3-8b", workload=args.workload, rate_schedule=text,
                   duration=args.duration_s, seed=1, router="least_outstanding", autoscaler=args.autoscaler,
                   min_replicas=1, max_replicas=args.max_replicas, replicas=args.start_replicas)
    print(f"{text} over {args.duration_s:g} s, {args.workload}, {args.autoscaler} up to {args.max_replicas} "
          f"replicas; {load()}", flush=True)
    # The day's first minute: compiles (or loads) the kernels, so the day's figures below are the simulation's.
    warm = day.model_copy(update={"duration": 60.0})
    _, wall, cpu = timed(warm)
    print(f"warm-up (kernels): {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak_rss_mb():.0f} MB",
          flush=True)
    res, wall, cpu = timed(day)
    m = res.metrics
    n = len(res.requests)
    steps = sum(r["steps"] for r in m["replicas"])
    print(f"day: {n:,} requests, {steps:,} engine steps, {len(m['replicas'])} replica slots, "
          f"{max(m['replicas_over_time']['serving']):.0f} serving at most")
    print(f"  {wall:.1f} s wall, {cpu:.1f} s CPU ({cpu / n * 1e6:.1f} us a request, {cpu / steps * 1e6:.2f} us a "
          f"step), peak RSS {peak_rss_mb():.0f} MB; {load()}")
    print(f"  attainment {m['slo_attainment']:.3f}, worst minute {m['slo_attainment_worst_window']:.3f}, "
          f"{m['gpu_hours']:.1f} GPU-hours")


if __name__ == "__main__":
    main()
