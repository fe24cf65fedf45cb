"""The search for the highest arrival rate at which a scenario keeps its SLO attainment, given how attainment is
measured (`attainment(scenario, rate)`): bracketing (doubling or halving from the scenario's own rate), then
bisecting geometrically until the bracket is within `tolerance`. capacity.py runs it with the runner; the
predictive autoscaler's probes (cluster_over_time.py, which the runner imports) with the run function the runner
hands them, so that neither imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..deployment import resolve
from ..scenario import MIN_RATE, Scenario

DEFAULT_TARGET = 0.9
DEFAULT_TOLERANCE = 0.03  # the bracket's width relative to its low end
MAX_DOUBLINGS = 20  # from the scenario's rate: a million-fold range up or down
# The highest rate a scenario accepts (its `rate` field's bound): the search never simulates above it. A target
# that every rate meets (0, or one below the attainment of an overloaded run) doubled the rate 20 times, a
# million-fold the requests: 2.85 GB before it was killed.
MAX_RATE = next(m.le for m in Scenario.model_fields["rate"].metadata if getattr(m, "le", None) is not None)
# The narrowest bracket the bisection aims for, relative, and the most bisections it makes: each halves the
# bracket's logarithm, so from a doubling (the widest bracket) 1e-4 takes 13; without a floor a tolerance of 0
# (or one below a float's resolution) never ended: sqrt(lo * hi) rounds to lo once they are adjacent floats.
MIN_TOLERANCE = 1e-4
MAX_BISECTIONS = 64


def slo_attainment(run: Callable, scenario: Scenario, rate: float) -> float:
    """The SLO attainment of `scenario` at `rate` (one seed), simulated by `run` (sim_core.runner.run)."""
    return run(scenario.model_copy(update={"rate": rate, "seeds": 1})).metrics["slo_attainment"]


def bisections_left(lo: float, hi: float, tolerance: float) -> int:
    """How many more bisections the bracket [lo, hi] takes to narrow to `tolerance`: each halves its logarithm."""
    wide, aim = math.log(hi / lo), math.log1p(max(tolerance, MIN_TOLERANCE))
    if wide <= aim:
        return 0
    return MAX_BISECTIONS if aim <= 0.0 else min(MAX_BISECTIONS, math.ceil(math.log2(wide / aim)))


def search_rate(scenario: Scenario, attainment: Callable[[Scenario, float], float], target: float = DEFAULT_TARGET,
                tolerance: float = DEFAULT_TOLERANCE, ceiling: float | None = None,
                progress: Callable[[int, float, int | None], None] | None = None) -> tuple[float | None, int]:
    """(the highest rate meeting `target` SLO attainment for this scenario's seed, simulations run). With a
    `ceiling`, a rate at or above it that meets the target ends the search (a planner needs no more).
    `progress(run, rate, at_most)` is told before each simulation: its number, its rate and, once the bracket is
    found, the most runs the search can take (None while bracketing, whose length depends on the answer)."""
    scenario.require_constant_rate("capacity")
    start = min(scenario.rate or resolve(scenario).rate, MAX_RATE)

    def measured(run: int, rate: float, at_most: int | None = None) -> float:
        if progress is not None:
            progress(run, rate, at_most)
        return attainment(scenario, rate)

    runs = 1
    if measured(runs, start) >= target:
        lo, hi = start, None
        for _ in range(MAX_DOUBLINGS):
            if (ceiling is not None and lo >= ceiling) or lo >= MAX_RATE:
                return lo, runs
            runs += 1
            up = min(2 * lo, MAX_RATE)
            if measured(runs, up) < target:
                hi = up
                break
            lo = up
        if hi is None:
            return lo, runs  # met even a million-fold the scenario's rate: report the highest rate tried
    else:
        lo, hi = None, start
        for _ in range(MAX_DOUBLINGS):
            if hi / 2 < MIN_RATE:
                break
            runs += 1
            if measured(runs, hi / 2) >= target:
                lo = hi / 2
                break
            hi /= 2
        if lo is None:
            return None, runs
    for _ in range(MAX_BISECTIONS):
        mid = (lo * hi) ** 0.5
        if hi / lo <= 1 + max(tolerance, MIN_TOLERANCE) or not lo < mid < hi:
            break
        runs += 1
        at_most = runs - 1 + bisections_left(lo, hi, tolerance) if progress is not None else None
        if measured(runs, mid, at_most) >= target:
            lo = mid
        else:
            hi = mid
    return lo, runs
