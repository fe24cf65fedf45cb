"""The highest arrival rate a deployment serves within its SLOs (its capacity), as an interval over seeds.

For one seed: SLO attainment falls as the rate rises past the knee, so the largest rate whose attainment is at
least the target is found by bracketing (doubling or halving from the scenario's own rate) and then bisecting
geometrically until the bracket is within `tolerance`. Attainment is noisy near the knee, so a single seed's
answer is one sample: over N seeds the capacity is reported as a mean with a 95% Student-t interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from ..runner import resolve, run
from ..scenario import MIN_RATE, Scenario
from ..statistics import mean_ci95

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


class CapacitySearch(BaseModel):
    """What a capacity search is asked for, with its bounds: the one definition the command line's flags (and any
    other face) read their ranges and help from (sim_core.fields.field_info(name, CapacitySearch))."""

    target: float = Field(DEFAULT_TARGET, gt=0, le=1,
                          description="the SLO attainment to keep, a fraction (every rate meets 0: no capacity to find)")
    tolerance: float = Field(DEFAULT_TOLERANCE, ge=MIN_TOLERANCE, le=1,
                             description="stop when the rate is known within this fraction, the bracket's relative "
                                         "width (a finer one only refines noise; 0 never ended)")


@dataclass(frozen=True)
class Capacity:
    per_seed: list[float | None]  # the capacity found with each seed (None: not even the lowest rate met it)
    mean: float | None
    ci95: tuple[float, float] | None  # None with a single seed (or when a seed found none)
    runs: int  # simulations the search took


def attainment_at(scenario: Scenario, rate: float) -> float:
    return run(scenario.model_copy(update={"rate": rate, "seeds": 1})).metrics["slo_attainment"]


def max_rate(scenario: Scenario, target: float = DEFAULT_TARGET, tolerance: float = DEFAULT_TOLERANCE,
             attainment: Callable[[Scenario, float], float] = attainment_at,
             ceiling: float | None = None) -> tuple[float | None, int]:
    """(the highest rate meeting `target` SLO attainment for this scenario's seed, simulations run). With a
    `ceiling`, a rate at or above it that meets the target ends the search (a planner needs no more)."""
    scenario.require_constant_rate("capacity")
    start = min(scenario.rate or resolve(scenario).rate, MAX_RATE)
    runs = 1
    if attainment(scenario, start) >= target:
        lo, hi = start, None
        for _ in range(MAX_DOUBLINGS):
            if (ceiling is not None and lo >= ceiling) or lo >= MAX_RATE:
                return lo, runs
            runs += 1
            up = min(2 * lo, MAX_RATE)
            if attainment(scenario, up) < target:
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
            if attainment(scenario, hi / 2) >= target:
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
        if attainment(scenario, mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo, runs


def _seed_search(task: tuple) -> tuple[float | None, int]:
    scenario, target, tolerance, attainment = task
    return max_rate(scenario, target, tolerance, attainment)


def capacity(scenario: Scenario, target: float = DEFAULT_TARGET, tolerance: float = DEFAULT_TOLERANCE,
             attainment: Callable[[Scenario, float], float] = attainment_at, executor=None) -> Capacity:
    """max_rate for each of the scenario's seeds (seed .. seed + seeds - 1), and their mean with a 95% interval.
    The seeds' searches are independent: `executor` (sim_core.studies.executor) runs them side by side; without one they
    run here, one after the other."""
    tasks = [(scenario.model_copy(update={"seed": scenario.seed + k, "seeds": 1}), target, tolerance, attainment)
             for k in range(scenario.seeds)]
    searched = executor.map(_seed_search, tasks) if executor is not None else [_seed_search(t) for t in tasks]
    return summarize([rate for rate, _ in searched], sum(n for _, n in searched))


def summarize(found: list[float | None], runs: int) -> Capacity:
    """The seeds' capacities as a Capacity: their mean and 95% interval (none when a seed found no rate)."""
    if any(r is None for r in found):
        return Capacity(found, None, None, runs)
    mean, low, high = mean_ci95(found)
    return Capacity(found, mean, (low, high) if len(found) > 1 else None, runs)
