"""Many runs of one scenario: each scheduler at each arrival rate, spread over local processes.

`sweep` returns, per scheduler, a list of points {rate, metrics}; `knee_rate` finds the saturation knee, the
highest rate up to which SLO attainment stays at or above a target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from .runner import resolve, run, warm_up
from .scenario import Scenario


def _one(scenario: Scenario) -> dict:
    return run(scenario).metrics


def rate_grid(min_rate: float, max_rate: float, step: float) -> list[float]:
    """min, min+step, ... up to max inclusive (with a tolerance for float steps)."""
    if step <= 0 or max_rate < min_rate:
        raise ValueError("need step > 0 and max_rate >= min_rate")
    count = int((max_rate - min_rate) / step + 1e-9) + 1
    return [round(min_rate + k * step, 10) for k in range(count)]


def sweep(scenario: Scenario, schedulers: Sequence[str], rates: Sequence[float], *, workers: int | None = None,
          on_point: Callable[[int, int], None] | None = None) -> dict[str, list[dict]]:
    """Run every (scheduler, rate) pair. `on_point(done, total)` is called as points finish (for progress)."""
    jobs = [scenario.model_copy(update={"scheduler": s, "rate": float(r)}) for s in schedulers for r in rates]
    for s in schedulers:  # fail fast, in this process, on an impossible set-up
        resolve(jobs[list(schedulers).index(s) * len(rates)])
    workers = workers or os.cpu_count() or 1
    warm_up()  # compile (or load) the engine once here, so forked workers inherit it
    results: list[dict | None] = [None] * len(jobs)
    if workers <= 1 or len(jobs) == 1:
        for k, job in enumerate(jobs):
            results[k] = _one(job)
            if on_point:
                on_point(k + 1, len(jobs))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            futures = {pool.submit(_one, job): k for k, job in enumerate(jobs)}
            for done, fut in enumerate(as_completed(futures), start=1):
                results[futures[fut]] = fut.result()
                if on_point:
                    on_point(done, len(jobs))
    out: dict[str, list[dict]] = {}
    for k, job in enumerate(jobs):
        out.setdefault(job.scheduler, []).append({"rate": job.rate, "metrics": results[k]})
    return out


def knee_rate(points: Sequence[dict], target: float = 0.9) -> float | None:
    """Highest rate such that SLO attainment is >= target at it and at every lower swept rate; None if even the
    lowest rate misses the target."""
    knee = None
    for p in sorted(points, key=lambda p: p["rate"]):
        if p["metrics"]["slo_attainment"] >= target:
            knee = p["rate"]
        else:
            break
    return knee
