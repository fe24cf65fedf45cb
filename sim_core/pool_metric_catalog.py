"""The metrics of autoscaled prefill and decode pools (sim_core/pool_autoscale.py): each pool's own under
`pools_over_time.<pool>`, catalogued in metric_catalog.METRICS (which builds them with its Metric class)."""

from __future__ import annotations

POOLS = ("prefill", "decode")

# (key under the pool, unit, kind, what it is)
_ROWS = (
    ("gpus_per_replica", "count", "count", "GPUs one replica holds (its attention-DP ranks x tp)"),
    ("gpus", "count", "count", "most GPUs held at once"),
    ("gpu_hours", "count", "average", "GPU-hours, each replica from being asked for to its release"),
    ("cost", "$", "usd", "GPU-hours at the GPU's on-demand list price (none where no price is known)"),
    *[(f"replicas_over_time.{phase}", "count", "count", what) for phase, what in (
        ("window_s", "windows' length, seconds"), ("start_s", "windows' starts, seconds (a list)"),
        ("provisioning", "replicas provisioning, on average over each window (a list)"),
        ("serving", "replicas serving, on average over each window (a list)"),
        ("draining", "replicas draining, on average over each window (a list)"))],
    *[(f"autoscaler.{key}", unit, kind, what) for key, unit, kind, what in (
        ("policy", "flag", "flag", "autoscaler policy"),
        ("provision_delay_s", "s", "seconds", "seconds from asking for a replica to its serving"),
        ("interval_s", "s", "seconds", "seconds between its autoscaler's evaluations"),
        ("min_replicas", "count", "count", "fewest replicas"), ("max_replicas", "count", "count", "most replicas"),
        ("replicas_provisioned", "count", "count", "replicas asked for beyond those serving at the start"),
        ("capacity", "req/s", "rate", "planned requests/s of k replicas (a list, k = 0 .. max_replicas)"),
        ("kv_blocks_leaked_on_release", "count", "count", "KV blocks released replicas still held (always 0)"))],
)


def pool_metrics(metric: type) -> list:
    """Each pool's metrics as `metric` (metric_catalog.Metric) entries, shown in the docs only."""
    return [metric(f"pools_over_time.{pool}.{key}", f"{pool.title()} pool: {key.replace('_', ' ')}", unit,
                   f"With an autoscaler on prefill and decode pools: the {pool} pool's {what}.", None, "Deployment",
                   kind, "docs") for pool in POOLS for key, unit, kind, what in _ROWS]
