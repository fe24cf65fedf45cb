"""Prefill and decode pools autoscaled separately (scenario fields autoscaler with prefill_replicas and
decode_replicas; issue #36): each pool its own fleet, autoscaler state, provisioning delay and replicas over time,
the scenario's min_replicas and max_replicas bounding each.

What each pool scales on follows NVIDIA Dynamo's planner, which scales prefill and decode workers separately:
its throughput (SLA) planner forecasts the load and sizes each pool by what one of its engines serves within
the SLO, prefill against the TTFT target and decode against the ITL target ("Planner Design", Dynamo docs). The
predictive autoscaler does the same here: the forecast rate (the rate schedule's peak over the coming window, or
the arrivals of the last interval) over each pool's capacity per replica. A pool's capacity per replica is
`autoscale_replica_rate` if set, else what the capacity search finds one replica of that pool serves at the
planning attainment while the other pool is at max_replicas (so it is not the bottleneck); k replicas serve k
times that (the prefill router and the decode hand-over spread requests over a pool's replicas).

A replica of a pool with attention data parallelism is its ranks together (kernel/autoscaled.py); a prefill
replica that drains is released once the KV it holds has crossed to decode, a decode replica once the prompts
on their way to it have landed and finished.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import NamedTuple

import numpy as np

from .cluster_over_time import (
    PLANNING_ATTAINMENT,
    PROBE_S,
    attainment_by_window,
    most_alive,
    probe_scenario,
    replicas_by_window,
    schedule_forecast,
)
from .kernel.autoscaled import LIFE_ASKED_S, LIFE_RELEASED_S
from .policies.autoscalers import DEFAULT_INTERVAL_S, METRIC_RUNNING, SCALE_PREDICTIVE
from .policies.autoscaling import Scaling
from .prices import GPU_PRICES
from .provisioning import provision_delay
from .scenario_errors import ScenarioError
from .studies.rate_search import search_rate, slo_attainment

POOLS = ("prefill", "decode")


class ScaledPools(NamedTuple):
    """What an autoscaled prefill/decode deployment's fleets did, pool by pool."""

    lives: list  # each pool's lives log, [life, kernel.autoscaled.LIFE_*]
    leaked: list  # each pool's KV blocks held by replicas at their release (a bug if not 0)
    scalings: tuple  # each pool's Scaling
    engines: tuple  # each pool's engine slots used


def most_engines(scenario) -> int:
    """The most engines the deployment runs at once: an autoscaled one's at max_replicas."""
    if scenario.autoscaler is None:
        return scenario.engines
    hi = scenario.scaling_bounds[1]
    if scenario.disaggregated:
        return hi * (scenario.pool_ranks("prefill") + scenario.pool_ranks("decode"))
    return hi


def pool_scalings(scenario, resolved, run: Callable) -> tuple[Scaling, Scaling]:
    """Each pool's Scaling record (`run`: the runner's, for the probes that size a replica)."""
    return tuple(_pool_scaling(scenario, resolved, k, run) for k in range(2))


def _pool_scaling(scenario, resolved, k: int, run: Callable) -> Scaling:
    lo, hi = scenario.scaling_bounds
    interval = float(scenario.autoscale_interval_s or DEFAULT_INTERVAL_S)
    pool = resolved.deployment[k]
    delay = float(scenario.provision_delay_s if scenario.provision_delay_s is not None
                  else provision_delay(pool.setup.weight_bytes_per_gpu).total_s)
    per_replica = scenario.autoscale_replica_rate or pool_replica_rate(scenario, POOLS[k], run)
    capacity = np.ascontiguousarray(np.arange(hi + 1) * float(per_replica), np.float64)
    forecast = schedule_forecast(resolved.schedule, scenario.duration, interval, delay)
    start = getattr(scenario, f"{POOLS[k]}_replicas")
    return Scaling(SCALE_PREDICTIVE, lo, hi, start, interval, delay, METRIC_RUNNING, 1.0, 0.0, capacity, forecast)


def pool_probe(scenario, pool: str):
    """The scenario at a constant rate with one replica of `pool` and the other pool at max_replicas."""
    other = POOLS[1 - POOLS.index(pool)]
    hi = scenario.scaling_bounds[1]
    base = probe_scenario(scenario)  # at the peak rate: the search starts from its share per replica
    rate = base.rate / max(1, getattr(scenario, f"{pool}_replicas"))
    return base.model_copy(update={f"{pool}_replicas": 1, f"{other}_replicas": hi, "rate": rate})


def pool_replica_rate(scenario, pool: str, run: Callable) -> float:
    """Requests/s one replica of `pool` serves with PLANNING_ATTAINMENT of them within the SLO."""
    return _probe_rate(pool_probe(scenario, pool), pool, run)


@cache
def _probe_rate(probe, pool: str, run: Callable) -> float:
    found, _ = search_rate(probe, partial(slo_attainment, run), PLANNING_ATTAINMENT)
    if found is None:
        raise ScenarioError([("autoscale_replica_rate", f"one {pool} replica meets the SLO at no rate the capacity "
                                                        f"search tried ({PROBE_S:.0f} s probes); set "
                                                        "autoscale_replica_rate (requests/s one replica serves)")])
    return found


def pools_over_time_metrics(result, scaled: ScaledPools) -> dict:
    """The autoscaled pools' metrics: the run's GPU-hours, cost and SLO attainment per window, and each pool's
    replicas over time and autoscaler (pools_over_time.prefill, pools_over_time.decode)."""
    end = float(result.end_s)
    attainment = attainment_by_window(result, end)
    rated = [a for a in attainment["attainment"] if a is not None]
    pools, gpu_hours, cost, gpus = {}, 0.0, 0.0, 0
    for k, name in enumerate(POOLS):
        pools[name] = _pool_metrics(result.resolved.deployment[k], scaled.lives[k], scaled.leaked[k],
                                    scaled.scalings[k], end, result.scenario.autoscaler)
        gpu_hours += pools[name]["gpu_hours"]
        gpus += pools[name]["gpus"]
        cost = None if cost is None or pools[name]["cost"] is None else cost + pools[name]["cost"]
    output_tokens = float(result.requests.output_tokens[result.finished].sum())
    return {
        "gpus": gpus,  # each pool's most GPUs held at once, summed
        "gpu_hours": gpu_hours,
        "cost": cost,
        "cost_per_hour": cost / (end / 3600.0) if cost is not None and end > 0 else None,
        "cost_per_mtok": cost / output_tokens * 1e6 if cost is not None and output_tokens > 0 else None,
        "slo_attainment_worst_window": min(rated) if rated else None,
        "slo_attainment_by_window": attainment,
        "pools_over_time": pools,
    }


def _pool_metrics(pool, lives: np.ndarray, leaked: int, scaling: Scaling, end: float, policy: str) -> dict:
    gpus = pool.setup.tp * pool.lockstep  # one replica: its attention-DP ranks, each on tp GPUs
    released = np.minimum(lives[:, LIFE_RELEASED_S], end)
    gpu_hours = float(np.maximum(released - lives[:, LIFE_ASKED_S], 0.0).sum()) * gpus / 3600.0
    price = GPU_PRICES.get(pool.setup.gpu.key)
    return {"gpus_per_replica": gpus, "gpus": most_alive(lives, end) * gpus, "gpu_hours": gpu_hours,
            "cost": gpu_hours * price.usd_per_gpu_hour if price is not None else None,
            "replicas_over_time": replicas_by_window(lives, end),
            "autoscaler": {"policy": policy, "provision_delay_s": scaling.delay_s,
                           "interval_s": scaling.interval_s, "min_replicas": scaling.min_replicas,
                           "max_replicas": scaling.max_replicas,
                           "replicas_provisioned": int(len(lives) - scaling.start),
                           "capacity": scaling.capacity.tolist(), "kv_blocks_leaked_on_release": leaked}}

