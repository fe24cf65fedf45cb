"""Running the simulations `run` and `compare` ask for, and the checks every simulating command makes first:
impossible deployments, missing traces, runs too large for this machine's memory (sim_core.run_cost); notes on
flags a trace ignores and on runs that will take a while; a trace's replay rate for the commands that search over
rates (sweep, capacity, plan).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sim_core import Scenario, SeedRuns, TraceError, compiled_on_two_cores, resolve, run, run_seeds
from sim_core.input_files import input_file_problem
from sim_core.quoting import quote
from sim_core.run_cost import over_limit, run_cost
from sim_core.runner import least_engine_steps, make_requests
from sim_core.scenario import MAX_REQUESTS
from sim_core.studies import model_error
from sim_core.traces import BUNDLED_TRACES, own_rate, trace_path

from .flags import UsageError, build_scenario, flag_name
from .report import g

# Runs of at least NOTE_STEPS engine steps get a note with the estimate first; workloads under NOTE_REQUESTS
# requests (or traces under NOTE_TRACE_BYTES) are not generated an extra time to check.
NOTE_STEPS = 5_000_000
NOTE_REQUESTS = 2_000
NOTE_TRACE_BYTES = 1 << 20


def check_setup(scenario: Scenario) -> None:
    """Fail before simulating: impossible deployments, missing traces, runs too large to hold in memory."""
    resolved = resolve(scenario)
    if scenario.trace is not None:
        problem = input_file_problem(trace_path(scenario.trace), "a trace, CSV or JSONL,")
        if problem == "no such file":
            raise TraceError(f"no such file {quote(scenario.trace)} (or a bundled sample's name: "
                             f"{', '.join(BUNDLED_TRACES)})")
        if problem:
            raise TraceError(problem)  # shown after "--trace FILE:"
    elif scenario.num_requests is None:
        expected = resolved.rate * scenario.duration
        if expected > MAX_REQUESTS:
            raise UsageError(
                f"--duration: {g(scenario.duration)} s at {g(resolved.rate)} req/s is about "
                f"{expected:,.0f} requests; at most {MAX_REQUESTS:,} (shorten --duration or lower --rate)")
    check_memory(scenario, resolved)


def available_memory_bytes() -> float:
    """The memory this machine can give a new run now (/proc/meminfo's MemAvailable; elsewhere all of RAM)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_memory(scenario: Scenario, resolved) -> None:
    """Refuse, naming the flag and the most it may be, a run whose arrays (every mechanism's: KV blocks of each
    tier, logs, requests, adapters, ...) would not fit in this machine's available memory."""
    reqs = make_requests(scenario, resolved)
    problem = over_limit(run_cost(scenario, resolved, reqs, record_events=True), available_memory_bytes(),
                         limit_text="this machine has {gb} GB available")
    if problem:
        raise UsageError(f"{flag_name(problem[0])}: {problem[1]}")


def _note_ignored_with_trace(scenario: Scenario) -> None:
    if scenario.trace is None:
        return
    ignored = [flag_name(f) for f in ("burstiness", "duration", "seed") if f in scenario.model_fields_set]
    if ignored:
        print(f"note: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect with --trace "
              f"(the trace sets the arrivals and lengths; --rate scales its gaps)", file=sys.stderr)


def trace_rate(scenario: Scenario, searched: str) -> Scenario:
    """A search over arrival rates replays a trace at each rate tried, its recorded gaps scaled (--rate: where it
    starts; default: the trace's own mean rate, made explicit so the plans' scenario strings reproduce it)."""
    if scenario.trace is None:
        return scenario
    check_setup(scenario)
    rate = own_rate(make_requests(scenario.model_copy(update={"rate": None}), resolve(scenario)))
    if rate is None:
        raise UsageError(f"--trace: {searched} replays the trace at other arrival rates, by scaling the gaps "
                         "between its arrivals; this trace's requests all arrive at one instant")
    return scenario if scenario.rate is not None else scenario.model_copy(update={"rate": rate})


def _note_large_run(scenarios: dict[str, Scenario]) -> None:
    """The CLI runs anything (a user's own machine), but says beforehand when a run will take a while."""
    first = next(iter(scenarios.values()))
    expected = first.num_requests or resolve(first).rate * first.duration  # sessions: agent turns are not seen
    if first.trace is None and expected < NOTE_REQUESTS:
        return  # small enough to skip generating the workload twice
    if first.trace is not None and Path(trace_path(first.trace)).stat().st_size < NOTE_TRACE_BYTES:
        return
    reqs = make_requests(first, resolve(first))
    steps = sum(least_engine_steps(reqs, resolve(sc).token_budget) for sc in scenarios.values()) * first.seeds
    if steps >= NOTE_STEPS:
        runs = len(scenarios) * first.seeds
        print(f"note: {len(reqs):,} requests, at least {steps:,} engine steps over {runs} run{'s' * (runs > 1)} "
              f"(prompt + output tokens / token budget); at a few microseconds a step this takes a while",
              file=sys.stderr)


def run_schedulers(args: argparse.Namespace, schedulers: list[str], record_events: bool) -> tuple[Scenario, dict]:
    """The scenario the flags give, run once per scheduler (over its seeds with --seeds): (scenario, results)."""
    base = build_scenario(args)
    _note_ignored_with_trace(base)
    scenarios = {s: build_scenario(args, scheduler=s) for s in schedulers}
    for sc in scenarios.values():
        check_setup(sc)
    _note_large_run(scenarios)
    with compiled_on_two_cores(base):  # a cold numba cache: the engine compiles on two cores
        if base.seeds > 1:
            return base, {s: run_seeds(sc, record_events=record_events, bounds=True) for s, sc in scenarios.items()}
        return base, {s: run(sc, record_events=record_events, bounds=True) for s, sc in scenarios.items()}


def model_ensembles(results: dict) -> dict:
    """With --model-uncertainty: each scheduler's model-error ensemble (its first seed's requests replayed under
    every member's step-time factor); else {}."""
    first = {s: first_seed(r) for s, r in results.items()}
    if not any(r.scenario.model_uncertainty for r in first.values()):
        return {}
    return {s: model_error.ensemble(r.scenario) for s, r in first.items()}


def first_seed(result):
    """A trace shows one run: with --seeds, the first seed's."""
    return result.results[0] if isinstance(result, SeedRuns) else result
