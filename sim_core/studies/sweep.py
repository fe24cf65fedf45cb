"""Many runs of one scenario: each scheduler at each arrival rate, spread over an executor (local processes or Ray).

`rate_grid` is the one grid of arrival rates every face sweeps over (the CLI's `sweep`, the web's goodput curves,
the range a sweep form proposes); `sweep` returns, per scheduler, a list of points {rate, metrics} (over several
seeds also `ci95`); `knee_rate` finds the saturation knee, the highest rate up to which SLO attainment stays at
or above a target, and `knee_interval` reads it off the attainment's confidence band.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from ..fields import field_info, number_text, range_text
from ..runner import resolve, run
from ..scenario import MIN_RATE, Scenario, ScenarioError
from ..statistics import aggregate
from .executor import LocalExecutor

MAX_RATE_POINTS = 1000  # rates per scheduler; the web asks for fewer
# The lowest rate a sweep takes, about one request in 12 days: the grid rounds rates to 10 decimals,
# so far smaller ones would collapse to 0 (a rate no run can draw arrivals at), and they only make empty runs.
MIN_SWEEP_RATE = MIN_RATE  # a sweep's rates are scenario rates
DEFAULT_POINTS = 9  # rates in a grid given no step


def _one(scenario: Scenario, trace_text: str | None = None) -> dict:
    return run(scenario, trace_text=trace_text).metrics


def rate_grid(rate_min: float, rate_max: float, rate_step: float | None = None, *,
              max_points: int = MAX_RATE_POINTS) -> list[float]:
    """rate_min, rate_min + step, ... up to rate_max inclusive (with a tolerance for float steps). Without a step,
    DEFAULT_POINTS rates evenly spaced.

    Raises ScenarioError naming rate_min, rate_max or rate_step and what each allows, before building anything: the
    rates must be finite and valid scenario rates, and the grid at most `max_points` long."""
    problems = [(name, msg) for name, value in (("rate_min", rate_min), ("rate_max", rate_max))
                if (msg := _rate_problem(value))]
    if rate_step is not None and not (_finite(rate_step) and rate_step > 0):
        problems.append(("rate_step", f"must be a number greater than 0, in requests/s (got {rate_step!r})"))
    if problems:
        raise ScenarioError(problems)
    if rate_max < rate_min:
        raise ScenarioError([("rate_max", f"must be at least rate_min, {number_text(rate_min)} requests/s "
                                          f"(got {number_text(rate_max)})")])
    step = rate_step if rate_step is not None else ((rate_max - rate_min) / (DEFAULT_POINTS - 1) or 1.0)
    steps = (rate_max - rate_min) / step  # may be huge (or inf) for a tiny step: checked before any list exists
    if steps + 1e-9 >= max_points:
        raise ScenarioError([("rate_step", _too_many_text(rate_min, rate_max, step, steps, max_points))])
    count = int(steps + 1e-9) + 1
    return [round(rate_min + k * step, 10) for k in range(count)]


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _rate_problem(value) -> str | None:
    """Why `value` is no scenario rate, or None."""
    rate = field_info("rate")
    allowed = f"must be {range_text('rate')} requests/s"
    if not _finite(value):
        return f"{allowed} (got {value!r})"
    if 0 < value < MIN_SWEEP_RATE:
        return f"must be at least {MIN_SWEEP_RATE:g} requests/s in a sweep (got {number_text(value)})"
    too_low = rate.lo is not None and (value <= rate.lo if rate.lo_exclusive else value < rate.lo)
    too_high = rate.hi is not None and (value >= rate.hi if rate.hi_exclusive else value > rate.hi)
    return f"{allowed} (got {number_text(value)})" if too_low or too_high else None


def _too_many_text(rate_min: float, rate_max: float, step: float, steps: float, max_points: int) -> str:
    count = f"{int(steps + 1e-9) + 1:,}" if steps < 1e15 else "more than 10^15"
    # The smallest step that fits, rounded up to three significant digits so that it does fit.
    needed = (rate_max - rate_min) / (max_points - 1)
    unit = 10 ** (math.floor(math.log10(needed)) - 2)
    needed = math.ceil(needed / unit - 1e-9) * unit
    return (f"a step of {step:g} requests/s gives {count} rates from {number_text(rate_min)} to "
            f"{number_text(rate_max)}; at most {max_points:,} per scheduler: the step must be at least "
            f"{needed:.3g} requests/s")


def nice_step(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that is at least x (a step people read easily)."""
    exp = math.floor(math.log10(x))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10**exp >= x:
            return round(m * 10**exp, 10)
    return 10 ** (exp + 1)


def default_rate_range(rate: float, cap: float | None = None, points: int = 12) -> tuple[float, float, float]:
    """(rate_min, rate_max, rate_step) of a sweep around `rate`: up to twice it (at most `cap`), in about
    `points` nice steps starting at one step.

    Raises ScenarioError naming `rate` when it is not finite or below MIN_SWEEP_RATE (nice_step and the grid's
    rounding would make a step of 0); an infinite cap is no cap."""
    if not (_finite(rate) and rate >= MIN_SWEEP_RATE):
        raise ScenarioError([("rate", f"a sweep is proposed around a rate of at least {MIN_SWEEP_RATE:g} "
                                      f"requests/s (about one request in 12 days); got {rate!r}")])
    top = rate * 2 if cap is None or not _finite(cap) else max(MIN_SWEEP_RATE, min(rate * 2, cap))
    step = max(MIN_SWEEP_RATE, nice_step(top / points))  # the grid takes no smaller step
    top = max(step, math.floor(top / step + 1e-9) * step)
    return step, top, step


def sweep(scenario: Scenario, schedulers: Sequence[str], rates: Sequence[float], *, workers: int | None = None,
          on_point: Callable[[int, int], None] | None = None, executor=None,
          trace_text: str | None = None) -> dict[str, list[dict]]:
    """Run every (scheduler, rate) pair. `on_point(done, total)` is called as runs finish (for progress).
    `executor` (sim_core.studies.executor) runs them; without one, `workers` local processes do. With `scenario.seeds`
    = N > 1 each point runs seeds seed .. seed + N - 1: its `metrics` are the means, with `ci95` ([low, high]
    under the same keys) and `seeds` beside them, as a run's are. `trace_text`: a trace's text (an upload), which
    every point replays at its rate, as a scenario's `trace` file would be."""
    scenario.require_constant_rate("a sweep")
    seeds = [scenario.seed + k for k in range(scenario.seeds)]
    jobs = [scenario.model_copy(update={"scheduler": s, "rate": float(r), "seed": seed, "seeds": 1})
            for s in schedulers for r in rates for seed in seeds]
    for s in schedulers:  # fail fast, in this process, on an impossible set-up
        resolve(scenario.model_copy(update={"scheduler": s, "rate": float(rates[0])}))
    one = _one if trace_text is None else functools.partial(_one, trace_text=trace_text)
    if executor is None:
        with LocalExecutor(workers) as local:
            results = local.map(one, jobs, on_point)
    else:
        results = executor.map(one, jobs, on_point)
    out: dict[str, list[dict]] = {}
    for k in range(0, len(jobs), len(seeds)):
        point: dict = {"rate": jobs[k].rate}
        if len(seeds) > 1:
            point["metrics"], point["ci95"] = aggregate(results[k:k + len(seeds)])
            point["seeds"] = seeds
        else:
            point["metrics"] = results[k]
        out.setdefault(jobs[k].scheduler, []).append(point)
    return out


def _knee(points: Sequence[dict], attainment: Callable[[dict], float], target: float) -> float | None:
    knee = None
    for p in sorted(points, key=lambda p: p["rate"]):
        if attainment(p) >= target:
            knee = p["rate"]
        else:
            break
    return knee


def knee_rate(points: Sequence[dict], target: float = 0.9) -> float | None:
    """Highest rate such that SLO attainment is >= target at it and at every lower swept rate; None if even the
    lowest rate misses the target. Over seeds, read off the mean attainment."""
    return _knee(points, lambda p: p["metrics"]["slo_attainment"], target)


def knee_interval(points: Sequence[dict], target: float = 0.9) -> tuple[float | None, float | None] | None:
    """The knee read off the 95% band of SLO attainment over seeds: (the knee of the band's lower edge, the knee
    of its upper edge). Below the first the target is met on the evidence of every seed; past the second not
    even the band's optimistic edge meets it. None for single-seed points, which have no band."""
    if not points or any("ci95" not in p or "slo_attainment" not in p["ci95"] for p in points):
        return None
    return (_knee(points, lambda p: p["ci95"]["slo_attainment"][0], target),
            _knee(points, lambda p: p["ci95"]["slo_attainment"][1], target))
