"""What a run's load does to its engines, for the cost model (sim_core/run_cost.py, issue #37): a loaded engine's
step time, the most requests/s one engine completes, what an autoscaler's capacity search tries, and how many
engines an autoscaled fleet allocates (its slots: the most replicas its policy asks for at once).

All of it follows from the cost model's floor for a step (bounds.step_floor_s) and the requests themselves
(their arrivals, prompt and output lengths): nothing here is simulated.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .bounds import step_floor_s
from .cluster_over_time import PLANNING_ATTAINMENT, probe_scenario
from .deployment import resolve
from .hardware_profile import profile_constants
from .kernel.cost_model import cost_params
from .policies.autoscalers import AUTOSCALERS, DEFAULT_INTERVAL_S, SCALE_PREDICTIVE
from .provisioning import provision_delay_s
from .runner import make_requests
from .studies.rate_search import search_rate

# A throughput ceiling never below this (requests/s): search_rate's doublings need a positive rate to stop at.
MIN_RATE_CEILING = 1e-3
# The most autoscaler evaluations fleet_metric_peaks looks at one by one; past them, the peak over all times.
MAX_TICKS = 200_000
# The most provisioning delays fleet_metric_peaks steps through (a longer run takes longer ones).
MAX_PERIODS = 64
# The most of the probe's requests slo_rate's model replays: a sample (a tail of TTFTs settles in far fewer).
MAX_PROBE_REQUESTS = 20_000


def loaded_step_s(p, read_s: float, out_rate: float, prompt_rate: float, cap: float, token_budget: int) -> float:
    """A loaded engine's step time: the step carries the decode tokens of the requests running (out_rate x step
    time, at most `cap`) and the prompt tokens arriving meanwhile (at most the token budget), at the cost model's
    floor for that many tokens plus the decode attention's context reads (`read_s` a request)."""
    t = float(step_floor_s(p, 1.0))
    for _ in range(12):  # the fixed point converges in a few rounds: step time grows slowly with the tokens
        batch = min(cap, max(1.0, out_rate * t))
        t = float(step_floor_s(p, batch + min(prompt_rate * t, token_budget))) + batch * read_s
    return t


def step_inputs(scenario, setup, reqs):
    """(the cost model's parameters, the decode attention's context read per request a step, seconds)."""
    p = cost_params(setup, profile_constants(scenario.hardware_profile), cpu_overlap=scenario.async_scheduling,
                    engine=scenario.engine)
    n = len(reqs)
    context = (float(reqs.prompt_tokens.sum()) + float(reqs.output_tokens.sum()) / 2) / n
    return p, context * setup.kv_bytes_per_token_per_gpu / (setup.gpu.mem_bw_gbs * 1e9 * setup.gpu.bw_efficiency)


def batch_cap(scenario, resolved, reqs) -> float:
    """The most requests a step decodes: max_seqs; with LoRA adapters, those of at most max_loras adapters, which
    hold about max(1, requests / adapters) requests each (kernel/lora.py admits no request of another adapter)."""
    cap = float(resolved.max_seqs)
    if scenario.lora_adapters:
        cap = min(cap, scenario.max_loras * max(1.0, len(reqs) / scenario.lora_adapters))
    return cap


def searched_rates(probe, ceiling: float) -> tuple[float | None, list[float]]:
    """(the rate found, every rate tried) by studies/rate_search.search_rate on `probe`, as cluster_over_time's
    search calls it, were attainment met exactly up to `ceiling` requests/s: its own doublings from the probe's
    rate and bisections to its tolerance."""
    tried: list[float] = []

    def attainment(_scenario, rate: float) -> float:
        tried.append(rate)
        return 1.0 if rate <= ceiling else 0.0

    found, _ = search_rate(probe, attainment, PLANNING_ATTAINMENT)
    return found, tried


def throughput_ceiling(scenario, resolved, reqs) -> float:
    """The most requests/s one engine of the first pool completes whatever its SLO: a full batch (batch_cap)
    decoding one token each a step, with the prompt tokens that arrive meanwhile (at most the token budget), at
    the cost model's floor for that step plus the decode attention's context reads. An SLO can only lower it."""
    if not len(reqs):
        return MIN_RATE_CEILING
    prompt, out = float(reqs.prompt_tokens.mean()), max(1.0, float(reqs.output_tokens.mean()))
    p, read_s = step_inputs(scenario, resolved.deployment[0].setup, reqs)
    batch = batch_cap(scenario, resolved, reqs)
    prompts = min(batch * prompt / out, resolved.token_budget)
    step_s = float(step_floor_s(p, batch + prompts)) + batch * read_s
    return max(MIN_RATE_CEILING, min(batch / out, prompts / max(prompt, 1.0)) / step_s)


def autoscaled_slots(scenario, resolved, reqs) -> int:
    """The engines an autoscaled fleet allocates. kernel/autoscaled.scale_up gives a slot its engine the first
    time more replicas are wanted than are alive (draining ones are taken back first, released slots reused), so
    the fleet holds as many engines as the most replicas its policy wants at once: at least those it starts with
    (one, which a request wakes a fleet scaled to zero into), at most max_replicas.

    Predictive with autoscale_replica_rate plans the fewest replicas whose capacity (k x that rate) covers its
    forecast (policies/autoscaling.by_forecast), so the peak forecast bounds it. Utilization: utilization_slots.
    Every other case falls back to max_replicas, the bound the kernel keeps: predictive's capacity is known only
    once its capacity search has run, and follow-up turns arrive when their parent ends (no forecast of them
    before the run)."""
    hi = scenario.scaling_bounds[1]
    least = max(1, scenario.replicas, scenario.scaling_bounds[0])
    if AUTOSCALERS[scenario.autoscaler][0] != SCALE_PREDICTIVE:
        return utilization_slots(scenario, resolved, reqs, least, hi)
    rate = scenario.autoscale_replica_rate
    if rate is None:
        return hi
    peak = peak_forecast_rate(scenario, resolved, reqs)
    if peak is None:
        return hi
    capacity = np.arange(hi + 1) * float(rate)  # cluster_over_time.replica_capacity's, for a rate given
    want = int(np.searchsorted(capacity[1:], peak, side="left")) + 1 if peak > 0 else 0
    return max(least, min(hi, want))


def utilization_slots(scenario, resolved, reqs, least: int, hi: int) -> int:
    """The most replicas the utilization policy asks for at one of its evaluations: by_utilization wants
    ceil(the serving replicas' metric summed / target), the sum as a fluid model of the fleet has it
    (fleet_metric_peaks). A kv_usage target of 1 or more never asks for more (a replica's usage is at most 1);
    one below 1 may double the fleet at every evaluation (max_replicas). The default target on running requests
    is the capacity search's (estimated_running_target; max_replicas with follow-up turns). Follow-up turns, whose
    arrivals are not known before the run, count as in the fleet throughout."""
    target = scenario.autoscale_target
    if (scenario.autoscale_metric or "running") == "kv_usage":
        return hi if target < 1 else least
    unknown = int((~np.isfinite(reqs.arrival_s)).sum())
    if target is None and unknown:  # its capacity search replays follow-up turns, which this model cannot place
        return hi
    target = target or estimated_running_target(scenario, resolved, reqs)
    want = least
    for peak in fleet_metric_peaks(scenario, resolved, reqs, least, hi, target):
        want = max(want, math.ceil((peak + unknown) / target - 1e-9))
    return max(least, min(hi, want, math.ceil(len(reqs) / target)))


def fleet_metric_peaks(scenario, resolved, reqs, least: int, hi: int, target: float):
    """The fleet's metric (running or waiting requests, summed over its replicas) at its highest in each
    provisioning delay of the run, one delay after another (what is asked in one serves by the next): a fluid
    model. In a delay the fleet serves with the most replicas asked before it (`serving`); each request is in
    service from its arrival for its prompt's chunks and its output tokens, one a step, at the step time of a
    replica carrying its share of the load (loaded_step_s); what arrives past what the replicas serve
    (throughput_ceiling each) waits on the replicas it was sent to, which run at most max_seqs each. Running
    counts those in service and the waiting that the replicas they wait on run; waiting counts both in full."""
    finite = np.isfinite(reqs.arrival_s)
    arrival = reqs.arrival_s[finite]
    arrivals = np.sort(arrival)
    if not len(arrivals):
        return
    p, read_s = step_inputs(scenario, resolved.deployment[0].setup, reqs)
    cap, budget = batch_cap(scenario, resolved, reqs), resolved.token_budget
    span = max(float(arrivals[-1] - arrivals[0]), scenario.duration, 1e-3)
    out_rate, prompt_rate = float(reqs.output_tokens.sum()) / span, float(reqs.prompt_tokens.sum()) / span
    steps = np.ceil(reqs.prompt_tokens[finite] / budget) + reqs.output_tokens[finite]
    ceiling = throughput_ceiling(scenario, resolved, reqs)
    running = (scenario.autoscale_metric or "running") == "running"
    interval = scenario.autoscale_interval_s or DEFAULT_INTERVAL_S
    end = float(arrivals[-1] + steps.max() * loaded_step_s(p, read_s, out_rate / least, prompt_rate / least, cap,
                                                              budget))
    ticks = np.arange(1, math.ceil(end / interval) + 1) * interval
    if len(ticks) > MAX_TICKS:  # denser than the arrivals: the peak over all times, right after an arrival
        ticks = arrivals
    period = max(provision_delay_s(scenario, resolved), interval, end / MAX_PERIODS)
    asked, before, replica_s, lowest = least, least, 0.0, 0.0  # replica-seconds served before the delay
    for k in range(math.ceil(end / period) + 1):
        at = ticks[(ticks >= k * period) & (ticks < (k + 1) * period)]
        serving = min(hi, asked)
        step_s = loaded_step_s(p, read_s, out_rate / serving, prompt_rate / serving, cap, budget)
        ends = np.sort(arrival + steps * step_s) if len(at) else arrivals[:0]  # (no evaluation in this delay)
        in_service = np.searchsorted(arrivals, at, side="right") - np.searchsorted(ends, at, side="right")
        # Lindley's recursion over the ticks: what arrived less what the fleet could have served by then.
        behind = np.searchsorted(arrivals, at, side="right") - ceiling * (replica_s + serving * (at - k * period))
        waiting = behind - np.minimum.accumulate(np.minimum(behind, lowest))
        lowest = float(behind.min(initial=lowest))
        replica_s += serving * period
        metric = (np.minimum(in_service + np.minimum(waiting, before * cap), serving * cap) if running
                  else in_service + waiting)
        peak = float(metric.max(initial=0.0))
        yield peak
        before, asked = serving, max(asked, math.ceil(peak / target - 1e-9))


def estimated_running_target(scenario, resolved, reqs) -> float:
    """cluster_over_time.running_target, estimated: the rate the capacity search finds (slo_rate) times the
    mean time a request spends on one replica at that rate (Little's law); at least 1, as running_target."""
    found = slo_rate(scenario, resolved, reqs)
    if found is None or not len(reqs):
        return 1.0
    p, read_s = step_inputs(scenario, resolved.deployment[0].setup, reqs)
    prompt, out = float(reqs.prompt_tokens.mean()), float(reqs.output_tokens.mean())
    step_s = loaded_step_s(p, read_s, found * out, found * prompt, batch_cap(scenario, resolved, reqs),
                           resolved.token_budget)
    return max(1.0, found * (math.ceil(prompt / resolved.token_budget) + out) * step_s)


@lru_cache(maxsize=8)  # a scenario is costed on each of its requests: its probe's sample is kept a while
def _probe_sample(probe) -> tuple[np.ndarray, np.ndarray, float]:
    """(arrivals, prompt tokens, mean output tokens) of the probe's first MAX_PROBE_REQUESTS requests or so, those
    whose arrival is known before the run (follow-up turns arrive when their parent ends)."""
    sample = probe.model_copy(update={"duration": min(probe.duration, MAX_PROBE_REQUESTS / probe.rate)})
    reqs = make_requests(sample, resolve(sample))
    known = np.flatnonzero(np.isfinite(reqs.arrival_s))
    order = known[np.argsort(reqs.arrival_s[known], kind="stable")]
    out = float(reqs.output_tokens.mean()) if len(reqs) else 0.0
    return reqs.arrival_s[order], reqs.prompt_tokens[order].astype(np.float64), out


def slo_rate(scenario, resolved, reqs) -> float | None:
    """The rate cluster_over_time's capacity search finds for one replica, estimated: search_rate's own trials,
    each judged in a fluid model of one engine instead of a simulation. At a trial rate (the probe's requests,
    their gaps rescaled to it) a request meets its TPOT target when the loaded step time does, and its TTFT target
    when its wait for the prompt tokens ahead of it (one server prefilling token_budget tokens a full step:
    Lindley's recursion over the arrivals) plus its own chunks' steps does. Every step time is the cost model's
    floor (bounds.step_floor_s), so this errs high, as throughput_ceiling."""
    probe = probe_scenario(scenario)
    arrivals, prompts, out = _probe_sample(probe)
    if len(arrivals) < 2 or not len(reqs):
        return None
    p, read_s = step_inputs(scenario, resolved.deployment[0].setup, reqs)
    budget, cap = resolved.token_budget, batch_cap(scenario, resolved, reqs)

    def attainment(_probe, rate: float) -> float:
        step_s = loaded_step_s(p, read_s, rate * out, rate * float(prompts.mean()), cap, budget)
        batch = min(cap, max(1.0, rate * out * step_s))
        full_s = float(step_floor_s(p, budget + batch)) + batch * read_s
        gaps = np.diff(arrivals) * (probe.rate / rate)
        backlog = np.concatenate([[0.0], np.cumsum(prompts[:-1] / budget * full_s - gaps)])
        wait = backlog - np.minimum.accumulate(backlog)
        own = np.ceil(prompts / budget) * (np.asarray(step_floor_s(p, np.minimum(prompts, budget) + batch)) +
                                           batch * read_s)
        met = (wait + own <= resolved.slo_ttft_ms / 1e3) & (step_s <= resolved.slo_tpot_ms / 1e3)
        return float(met.mean())

    return search_rate(probe, attainment, PLANNING_ATTAINMENT)[0]


def peak_forecast_rate(scenario, resolved, reqs) -> float | None:
    """The highest rate the predictive policy plans for over the run (policies/autoscaling.forecast_rate). With a
    rate schedule: its peak over every window a forecast reads (cluster_over_time.schedule_forecast: up to the
    last evaluation, an interval past the run, plus the provisioning delay and an interval). Without: the arrivals
    of the last interval over the interval, at most the most arrivals any interval-long window holds (a burst:
    at 1 ms intervals a single arrival forecasts 1000 req/s). None where the arrivals are not known before the
    run (follow-up turns arrive when their parent ends)."""
    interval = scenario.autoscale_interval_s or DEFAULT_INTERVAL_S
    if resolved.schedule is not None:
        last = (math.ceil(scenario.duration / interval) + 1) * interval
        return float(resolved.schedule.peak_rate(last + provision_delay_s(scenario, resolved) + interval))
    arrivals = np.sort(reqs.arrival_s)
    if not np.isfinite(arrivals).all():
        return None
    if not len(arrivals):
        return 0.0
    in_window = np.searchsorted(arrivals, arrivals + interval, side="left") - np.arange(len(arrivals))
    return float(in_window.max()) / interval
