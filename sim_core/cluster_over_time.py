"""An autoscaled cluster (scenario field autoscaler): its settings in (Scaling), and what it cost and how it
served over time out: GPU-hours and dollars (each replica billed from being asked for to its release), SLO
attainment per window and the worst window, and the replicas provisioning, serving and draining per window.

These metrics are added only when an autoscaler runs, so a run without one reports exactly what it did before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, partial

import numpy as np

from .kernel.autoscaled import LIFE_ASKED_S, LIFE_DRAINING_S, LIFE_RELEASED_S, LIFE_SERVING_S
from .kernel.cluster import routed_table
from .kernel.fleet import run_fleet
from .kernel.state import A_BUSY_S
from .metrics import request_latencies_s
from .policies.autoscalers import (
    AUTOSCALERS,
    DEFAULT_COOLDOWN_S,
    DEFAULT_INTERVAL_S,
    SCALE_PREDICTIVE,
    SCALING_METRICS,
)
from .policies.autoscaling import Scaling
from .policies.routing import RouterSettings
from .prices import GPU_PRICES
from .progress import report
from .provisioning import provision_delay_s
from .rate_schedule import parse
from .scenario import AUTOSCALE_FIELDS
from .scenario_errors import ScenarioError
from .studies.rate_search import search_rate, slo_attainment

# SLO attainment and replica counts are reported per window of this many seconds (a minute, as dashboards plot).
WINDOW_S = 60.0
# The SLO attainment the predictive policy sizes one replica for: above the usual 90% goal, since requests that
# arrive while a replica comes up or the rate turns fare worse than at a steady rate.
PLANNING_ATTAINMENT = 0.95
# Seconds of arrivals the capacity search simulates at each trial rate: long enough for a queue that grows past
# the knee to show in the attainment (a fixed count of requests at a high rate lasts too short to).
PROBE_S = 300.0
# Points per forecast window at which the predictive policy reads the rate schedule for its peak.
FORECAST_POINTS = 16


def scaling_settings(scenario, resolved, run: Callable) -> Scaling:
    """The kernel's Scaling record for a scenario with an autoscaler (`run`: the runner's, for the probes that size
    replicas by simulating them)."""
    lo, hi = scenario.scaling_bounds
    interval = scenario.autoscale_interval_s or DEFAULT_INTERVAL_S
    delay = provision_delay_s(scenario, resolved)
    metric = scenario.autoscale_metric or "running"
    predictive = AUTOSCALERS[scenario.autoscaler][0] == SCALE_PREDICTIVE
    capacity = replica_capacity(scenario, run) if predictive else np.zeros(0)
    target = 1.0 if predictive else float(scenario.autoscale_target or running_target(scenario, run))
    forecast = schedule_forecast(resolved.schedule, scenario.duration, interval, delay) if predictive else np.zeros(0)
    return Scaling(AUTOSCALERS[scenario.autoscaler][0], lo, hi, scenario.replicas, float(interval), float(delay),
                   SCALING_METRICS[metric][0], target,
                   float(DEFAULT_COOLDOWN_S if scenario.autoscale_cooldown_s is None else scenario.autoscale_cooldown_s),
                   capacity, forecast)


def schedule_forecast(schedule, duration_s: float, interval_s: float, delay_s: float) -> np.ndarray:
    """The rate predictive plans for at each evaluation k (at k x interval_s): the schedule's peak over the window
    a replica asked for then would serve, [t, t + delay + interval]. Empty without a schedule (it then forecasts
    from the arrivals it saw)."""
    if schedule is None:
        return np.zeros(0)
    ticks = np.arange(int(math.ceil(duration_s / interval_s)) + 2) * interval_s
    offsets = np.linspace(0.0, delay_s + interval_s, FORECAST_POINTS)
    return np.ascontiguousarray(schedule.rate_at(ticks[:, None] + offsets[None, :]).max(axis=1), np.float64)


def replica_capacity(scenario, run: Callable) -> np.ndarray:
    """[k] the requests/s k replicas serve with PLANNING_ATTAINMENT of their requests within the SLO, k = 0 ..
    max_replicas: `autoscale_replica_rate` x k if set, else the capacity study's on a constant rate for 1, 2, 4,
    ... replicas up to what the peak needs, per replica interpolated between (and held past the last). Not one
    replica's times k: behind the router replicas pool their queues (on A100 + Llama-3-8B chat one alone serves
    4.7 req/s at 95%, eight 9.0 each), and planning a few replicas at the many's rate overloads them for as long
    as the load stays low (a real day's slow ramp: a worst minute of 10%; bench/bench_autoscale.py)."""
    hi = scenario.scaling_bounds[1]
    if scenario.autoscale_replica_rate is not None:
        return np.arange(hi + 1) * float(scenario.autoscale_replica_rate)
    probe = probe_scenario(scenario)
    alone = _probe_rate(probe, run)
    need = min(hi, max(1, math.ceil(probe.rate * max(1, scenario.replicas) / alone)))
    return _capacity_curve(probe, alone, need, hi, run)


@cache
def _capacity_curve(probe, alone: float, need: int, hi: int, run: Callable) -> np.ndarray:
    counts = [1]
    while counts[-1] < need:
        counts.append(min(2 * counts[-1], need))
    per = [alone] + [_probe_rate(probe.model_copy(update={"replicas": k, "rate": alone * k}), run) / k
                     for k in counts[1:]]
    k = np.arange(hi + 1)
    capacity = k * np.interp(k, counts, per)  # np.interp holds the ends flat
    return np.ascontiguousarray(np.maximum.accumulate(capacity), np.float64)


def running_target(scenario, run: Callable) -> float:
    """utilization's default target on running requests: what one replica alone holds when it serves the rate it
    can within the SLO, by Little's law that rate times the mean time a request spends there. One alone: the
    HPA reacts only once the metric is past its target, so the target keeps the headroom a lone replica needs (at
    eight pooled replicas' figure, 4x higher on A100 + Llama-3-8B chat, the diurnal hour of
    bench/bench_autoscale.py fell to 79% attainment)."""
    probe = probe_scenario(scenario)
    return _probe_running(probe, _probe_rate(probe, run), run)


@cache
def _probe_running(probe, rate: float, run: Callable) -> float:
    m = run(probe.model_copy(update={"rate": rate})).metrics
    return max(1.0, rate * m["e2el_ms"]["mean"] / 1e3)


def probe_scenario(scenario):
    """The scenario at a constant rate on one replica, for the capacity search (its peak rate to start)."""
    rate = scenario.offered_rate()
    if scenario.rate_schedule is not None:
        rate = parse(scenario.rate_schedule).peak_rate(scenario.duration)
    update = {name: None for name in AUTOSCALE_FIELDS}
    update.update(autoscaler=None, replicas=1, rate_schedule=None, rate=max(rate / max(1, scenario.replicas), 1e-3),
                  num_requests=None, duration=PROBE_S, seeds=1)
    return scenario.model_copy(update=update)


@cache
def _probe_rate(probe, run: Callable) -> float:
    def tell(n: int, rate: float, at_most: int | None) -> None:
        replicas = f"{probe.replicas} replicas serve" if probe.replicas > 1 else "one replica serves"
        how_far = f"run {n} of at most {at_most}" if at_most else f"run {n}, bracketing the rate"
        report(f"Finding what {replicas} within the SLO, for the autoscaler's plan: {how_far} ({rate:.3g} req/s)")

    found, _ = search_rate(probe, partial(slo_attainment, run), PLANNING_ATTAINMENT, progress=tell)
    if found is None:
        # A ScenarioError naming the field (a ValueError still): the web answers it as a 422, not a 500.
        raise ScenarioError([("autoscale_replica_rate", "one replica meets the SLO at no rate the capacity search "
                                                        "tried; set autoscale_replica_rate (requests/s one replica "
                                                        "serves)")])
    return found


def run_autoscaled(scenario, resolved, cfg, table, frames, run: Callable, sessions=None):
    """Run the autoscaled cluster: (each slot's Outcome, the slot each request was sent to, the lives log, KV
    blocks leaked on release). `run`: the runner's, which the autoscaler's probes simulate with."""
    scaling = scaling_settings(scenario, resolved, run)
    router = RouterSettings(scenario.router, scenario.router_staleness_ms / 1e3, scenario.seed,
                            scenario.router_cache_weight, sessions)
    independent = not bool((table.child != -1).any())
    # Random routers draw over the most replicas there can be; choose_serving takes each draw modulo those serving.
    routing = router.routing(table, scaling.max_replicas, independent)
    ran = run_fleet((cfg,), (routed_table(table),), frames, routing, (scaling,), (1,))
    return ran.outs[0], ran.routed_to, ran.lives[0], ran.leaked[0], scaling


def over_time_metrics(result, lives: np.ndarray, leaked: int, scaling: Scaling) -> dict:
    """The autoscaled run's metrics: cost, SLO attainment per window, replicas per window."""
    end = float(result.end_s)
    pool = result.resolved.deployment[0]
    gpus = pool.setup.tp
    released = np.minimum(lives[:, LIFE_RELEASED_S], end)
    replica_s = float(np.maximum(released - lives[:, LIFE_ASKED_S], 0.0).sum())
    gpu_hours = replica_s * gpus / 3600.0
    price = GPU_PRICES.get(pool.setup.gpu.key)
    attainment = attainment_by_window(result, end)
    rated = [a for a in attainment["attainment"] if a is not None]
    cost = gpu_hours * price.usd_per_gpu_hour if price is not None else None
    output_tokens = float(result.requests.output_tokens[result.finished].sum())
    return {
        # The summary's deployment figures are the starting replicas'; over a run whose replicas come and go they
        # are: the most GPUs held at once, the mean price per hour, the run's cost over its output tokens, and the
        # replicas' busy time over the time they were held.
        "gpus": most_alive(lives, end) * gpus,
        "cost_per_hour": cost / (end / 3600.0) if cost is not None and end > 0 else None,
        "cost_per_mtok": cost / output_tokens * 1e6 if cost is not None and output_tokens > 0 else None,
        "gpu_busy_fraction": float(result.accumulators[A_BUSY_S]) / replica_s if replica_s > 0 else 0.0,
        "gpu_hours": gpu_hours,
        "cost": cost,
        "slo_attainment_worst_window": min(rated) if rated else None,
        "slo_attainment_by_window": attainment,
        "replicas_over_time": replicas_by_window(lives, end),
        "autoscaler": {"policy": result.scenario.autoscaler, "provision_delay_s": scaling.delay_s,
                       "interval_s": scaling.interval_s, "min_replicas": scaling.min_replicas,
                       "max_replicas": scaling.max_replicas, "replicas_provisioned": int(len(lives) - scaling.start),
                       "capacity": scaling.capacity.tolist() if scaling.policy == SCALE_PREDICTIVE else None,
                       "target": scaling.target if scaling.policy != SCALE_PREDICTIVE else None,
                       "kv_blocks_leaked_on_release": leaked},
    }


def most_alive(lives: np.ndarray, end_s: float) -> int:
    """The most replicas held at once (asked for and not yet released)."""
    start = lives[:, LIFE_ASKED_S]
    stop = np.minimum(lives[:, LIFE_RELEASED_S], end_s)
    times = np.concatenate([start, stop])
    steps = np.concatenate([np.ones(len(start)), -np.ones(len(stop))])
    order = np.lexsort((steps, times))  # a release before an ask at the same instant
    return int(np.cumsum(steps[order]).max()) if len(order) else 0


def serving_seconds(lives: np.ndarray, end_s: float) -> float:
    """Replica-seconds from ready to released within the run: the time replicas could serve (a draining one
    still finishes, and hands over, what it holds), provisioning not counted."""
    start = np.minimum(lives[:, LIFE_SERVING_S], end_s)
    stop = np.minimum(lives[:, LIFE_RELEASED_S], end_s)
    return float(np.maximum(stop - start, 0.0).sum())


def window_starts(end_s: float) -> np.ndarray:
    return np.arange(max(1, int(math.ceil(end_s / WINDOW_S)))) * WINDOW_S


def attainment_by_window(result, end_s: float) -> dict:
    """Per window of WINDOW_S by arrival time: requests that arrived and the share of them that met their SLO
    (a rejected request did not; None where none arrived)."""
    met = request_latencies_s(result)["met_slo"]
    starts = window_starts(end_s)
    which = np.minimum((result.requests.arrival_s // WINDOW_S).astype(np.int64), len(starts) - 1)
    n = np.bincount(which, minlength=len(starts))
    good = np.bincount(which, weights=met.astype(float), minlength=len(starts))
    return {"window_s": WINDOW_S, "start_s": starts.tolist(), "requests": n.tolist(),
            "attainment": [float(g / k) if k else None for g, k in zip(good, n, strict=True)]}


def replicas_by_window(lives: np.ndarray, end_s: float) -> dict:
    """Per window of WINDOW_S, the mean number of replicas provisioning, serving and draining over it."""
    starts = window_starts(end_s)
    phases = {"provisioning": (LIFE_ASKED_S, LIFE_SERVING_S), "serving": (LIFE_SERVING_S, LIFE_DRAINING_S),
              "draining": (LIFE_DRAINING_S, LIFE_RELEASED_S)}
    out: dict = {"window_s": WINDOW_S, "start_s": starts.tolist()}
    ends = np.minimum(starts + WINDOW_S, max(end_s, 1e-9))
    lengths = np.maximum(ends - starts, 1e-9)  # the last window may be cut short by the run's end
    for name, (a, b) in phases.items():
        begin = lives[:, a]
        finish = np.minimum(np.minimum(lives[:, b], lives[:, LIFE_RELEASED_S]), end_s)
        lo = np.maximum(begin[:, None], starts[None, :])
        hi = np.minimum(finish[:, None], ends[None, :])
        out[name] = (np.clip(hi - lo, 0.0, None).sum(axis=0) / lengths).tolist()
    return out
