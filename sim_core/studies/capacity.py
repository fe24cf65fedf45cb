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

from ..runner import run
from ..scenario import Scenario
from ..statistics import mean_ci95
from .rate_search import (  # noqa: F401 (the search's bounds, re-exported: the capacity command's and tests' names)
    DEFAULT_TARGET,
    DEFAULT_TOLERANCE,
    MAX_BISECTIONS,
    MAX_DOUBLINGS,
    MAX_RATE,
    MIN_TOLERANCE,
    search_rate,
    slo_attainment,
)


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
    return slo_attainment(run, scenario, rate)


def max_rate(scenario: Scenario, target: float = DEFAULT_TARGET, tolerance: float = DEFAULT_TOLERANCE,
             attainment: Callable[[Scenario, float], float] = attainment_at,
             ceiling: float | None = None) -> tuple[float | None, int]:
    """(the highest rate meeting `target` SLO attainment for this scenario's seed, simulations run): rate_search's
    search, simulated here by the runner unless `attainment` says otherwise."""
    return search_rate(scenario, attainment, target, tolerance, ceiling)


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
