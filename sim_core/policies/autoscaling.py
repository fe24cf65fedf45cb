"""Autoscalers: how many replicas a cluster wants, decided every `autoscale_interval_s` of simulated time.

Each policy is one entry of AUTOSCALERS (its name, code and what it does) and one small function below; the
fleet loop (kernel/fleet.py, kernel/autoscaled.py) asks `wanted_replicas` at each evaluation and provisions, takes back or drains
replicas to match (provisioning takes `provision_delay_s`; a draining replica gets no new requests and is released
once its running ones finish).

- utilization: target utilisation on one metric vLLM exports on /metrics (vllm:num_requests_waiting,
  vllm:num_requests_running, vllm:kv_cache_usage_perc: vLLM 0.9 renamed vllm:gpu_cache_usage_perc), as the
  Kubernetes HPA or KEDA would scale on it:
  desired = ceil(replicas x mean metric / target), no change within 10% of the target (the HPA's tolerance),
  scale-down only once `autoscale_cooldown_s` has passed since the last change (the HPA's scale-down
  stabilisation window and KEDA's cooldownPeriod both default to 300 s; sim_core/data/startup.json).
- predictive: SLO-driven, as NVIDIA Dynamo's planner: forecast the arrival rate over the next window (from the
  rate schedule when the scenario has one, else the arrivals seen over the last interval) and ask for the fewest
  replicas that serve it within the SLO (the capacity study's answer for 1, 2, 4, ... replicas behind the router,
  interpolated between; or `autoscale_replica_rate` per replica).
  The window it forecasts covers a new replica's provisioning delay plus one interval: what it asks for now
  serves then.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernel.jit import inline
from ..kernel.state import KV_BLOCKS, N_RUNNING, N_WAITING
from .autoscalers import HPA_TOLERANCE, METRIC_RUNNING, METRIC_WAITING, SCALE_UTILIZATION


class Scaling(NamedTuple):
    """What the autoscaled cluster loop needs to know about its autoscaler (built by `scaling_settings`)."""

    policy: int  # SCALE_*
    min_replicas: int
    max_replicas: int  # replicas alive at once (provisioning, serving or draining): each holds its GPUs
    start: int  # replicas serving at time 0
    interval_s: float
    delay_s: float  # provisioning: asked for -> serving
    metric: int  # METRIC_* (utilization)
    target: float  # the metric's target per replica (utilization)
    cooldown_s: float  # utilization: no scale-down sooner than this after the last change
    capacity: np.ndarray  # predictive: [k] requests/s k replicas serve within the SLO (k = 0 .. max_replicas)
    forecast: np.ndarray  # predictive: the forecast rate at evaluation k (time k x interval_s); empty: from arrivals


def never_scales(replicas: int) -> Scaling:
    """A static pool's Scaling: `replicas` serving from the start, and an autoscaler that never evaluates."""
    n = int(replicas)
    return Scaling(SCALE_UTILIZATION, n, n, n, np.inf, 0.0, METRIC_RUNNING, 1.0, 0.0, np.zeros(0), np.zeros(0))


@inline
def replica_metric(eng, metric):
    """One replica's value of the metric vLLM would export now."""
    if metric == METRIC_WAITING:
        return float(eng.q.size[N_WAITING])
    if metric == METRIC_RUNNING:
        return float(eng.q.size[N_RUNNING])
    return 1.0 - eng.kv.free[KV_BLOCKS] / max(1, eng.cfg.num_blocks)


@inline
def by_utilization(total, serving, target):
    """The HPA's rule on the serving replicas' metric (`total`: its sum over them): ceil(serving x mean / target),
    or `serving` while the mean is within HPA_TOLERANCE of the target."""
    ratio = total / max(1, serving) / target
    if abs(ratio - 1.0) <= HPA_TOLERANCE:
        return serving
    return int(np.ceil(serving * ratio - 1e-9))


@inline
def by_forecast(rate, capacity):
    """Dynamo's planner's rule: the fewest replicas whose capacity covers the forecast rate (none for no load:
    with min_replicas 0 the cluster scales to zero)."""
    if rate <= 0.0:
        return 0
    k = 1
    while k < capacity.shape[0] - 1 and capacity[k] < rate:
        k += 1
    return k


@inline
def forecast_rate(scaling, tick, arrived, window_s):
    """The rate predictive plans for at evaluation `tick`: the schedule's peak over the coming window, or the
    arrivals of the last interval (`arrived` of them over `window_s`) where there is no schedule."""
    f = scaling.forecast
    if f.shape[0] > 0:
        return f[min(tick, f.shape[0] - 1)]
    return arrived / window_s if window_s > 0 else 0.0


@inline
def wanted_replicas(scaling, total_metric, serving, current, tick, arrived, window_s):
    """Replicas (provisioning and serving) the autoscaler wants now, within [min, max]."""
    if scaling.policy == SCALE_UTILIZATION:
        want = by_utilization(total_metric, serving, scaling.target)
        if serving == 0:
            want = current
    else:
        want = by_forecast(forecast_rate(scaling, tick, arrived, window_s), scaling.capacity)
    return max(scaling.min_replicas, min(scaling.max_replicas, want))


__all__ = ["Scaling", "never_scales", "replica_metric", "wanted_replicas"]
