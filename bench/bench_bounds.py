"""How long the clairvoyant bounds (sim_core/bounds.py) take on a 10k-request run, and how close the schedulers
come to them. Prints figures; asserts nothing.

    NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_bounds.py [--requests N]

For each load (the preset's rate, 3x and 30x it: an overloaded queue is the deadline count's worst case, one busy
period holding every request), one run of `chunked` with 10,000 requests on A100 + Llama-3-8B, then the bounds
on its requests, best of 3 after a first call that compiles (or loads) the two kernels: the per-request floors,
SRPT for the mean TTFT and E2EL, the deadline count (twice: TTFT alone and goodput), and all of them together.
Then every scheduler's share of each bound on the first load.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import SCHEDULER_NAMES, Scenario, run  # noqa: E402
from sim_core.bounds import bounds, relaxation  # noqa: E402
from sim_core.runner import resolve  # noqa: E402


def best_of(f, repeat: int = 3) -> float:
    f()  # compile or load from the cache
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    base = dict(workload="chat", hardware="a100", num_requests=args.requests, seed=1)
    print(f"bounds on {args.requests:,} requests (chat, a100 + llama-3-8b, chunked), seconds, best of 3")
    for label, factor in (("preset rate", 1.0), ("3x the preset rate", 3.0), ("30x the preset rate", 30.0)):
        scenario = Scenario(scheduler="chunked", rate=resolve(Scenario(**base)).rate * factor, **base)
        t = time.perf_counter()
        res = run(scenario)
        sim_s = time.perf_counter() - t
        relaxed = relaxation(res)
        parts = {
            "floors and rates": lambda res=res: relaxation(res),
            "SRPT, mean TTFT + E2EL": lambda r=relaxed: (r.ttft_mean_lower_s(), r.e2el_mean_lower_s()),
            "deadline count, TTFT + goodput": lambda r=relaxed: (r.deadline_met_upper(), r.goodput_upper()),
            "all (metrics.bounds)": lambda res=res: bounds(res),
        }
        print(f"\n{label}: {scenario.rate:g} req/s; the simulation itself took {sim_s:.2f} s")
        for name, f in parts.items():
            print(f"  {name:<34} {best_of(f):7.3f}")
        b = bounds(res)
        print(f"  bounds: mean TTFT >= {b['ttft_mean_lower_ms']:.1f} ms, mean E2EL >= {b['e2el_mean_lower_ms']:.0f} "
              f"ms, TTFT deadlines met <= {b['deadline_met_upper']:,}, goodput <= {b['goodput_upper']:.2f} req/s")
    scenario = Scenario(**base)
    print(f"\nevery scheduler's share of the bounds, preset rate ({args.requests:,} requests)")
    print(f"  {'scheduler':<12} {'goodput':>8} {'TTFT deadlines':>15} {'mean TTFT':>10} {'mean E2EL':>10}")
    for name in SCHEDULER_NAMES:
        b = run(scenario.model_copy(update={"scheduler": name}), bounds=True).metrics["bounds"]
        cells = [b["goodput_fraction"], b["deadline_met_fraction"], b["ttft_mean_fraction"], b["e2el_mean_fraction"]]
        print(f"  {name:<12} " + " ".join(f"{'-' if c is None else f'{c:.0%}':>{w}}"
                                            for c, w in zip(cells, (8, 15, 10, 10), strict=True)))


if __name__ == "__main__":
    main()
