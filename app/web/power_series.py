"""A run's GPU power over time, made small enough to draw: per pool of engines (one engine, replicas, the prefill
and the decode pool), the mean board power per held GPU in each of POWER_POINTS equal time buckets, the highest
power any one of its GPUs drew in that bucket, and the GPUs held meanwhile. Read off sim_core/energy.py's own step
functions (engine_powers, power_over_time: each step's modelled power, idle power between steps, none while a
replica is not held), so the buckets' energy is the run's: mean x GPUs held x bucket seconds, summed, is the pool's
GPU energy in metrics.energy (exact while the step log keeps every step, as it does below 2^20 steps).

The dashboard's power figure (figures/power.py) keeps this of each run; a Result is not kept."""

from __future__ import annotations

import numpy as np

from sim_core.energy import EnginePower, engine_powers, power_over_time

POWER_POINTS = 400  # buckets per pool: a line of a few hundred points draws at once and still shows phases


def run_power(result) -> dict | None:
    """What the power figure draws of a finished run: None when its scenario has energy off. `pools`: one entry per
    pool (pool_series), in the deployment's order; `stride`: the step log keeps every stride-th step (1: all)."""
    if not result.scenario.energy:
        return None
    gpus = {pool.role: pool.setup.gpu for pool in result.resolved.deployment}
    first = result.resolved.deployment[0].setup.gpu  # one engine's pool, and an autoscaled fleet's
    engines = engine_powers(result)
    by_pool: dict[str, list[EnginePower]] = {}
    for engine in engines:
        by_pool.setdefault(engine.pool, []).append(engine)
    return {"pools": [pool_series(name, members, gpus.get(name, first)) for name, members in by_pool.items()],
            "stride": max(int(e.stride) for e in engines)}


def pool_series(pool: str, engines: list[EnginePower], gpu, points: int = POWER_POINTS) -> dict:
    """One pool's power over the time its GPUs were held: `edges` (s, points + 1 of them), and per bucket
    `mean_w` (board power per held GPU), `peak_w` (the highest one GPU drew) and `gpus` (GPUs held, on average
    over the bucket); None where no GPU was held. With the pool's GPU and its idle, board and cap figures (W)."""
    model = engines[0].model
    out = {"pool": pool, "gpu": gpu.name, "idle_w": model.idle_w, "board_w": model.board_w, "cap_w": model.cap_w,
           "edges": [], "mean_w": [], "peak_w": [], "gpus": []}
    held = [e.held for e in engines if len(e.held)]
    if not held:
        return out
    lo, hi = float(min(h[:, 0].min() for h in held)), float(max(h[:, 1].max() for h in held))
    if not hi > lo:  # no time held (a run in which no request arrived)
        return out
    edges = np.linspace(lo, hi, points + 1)
    joules, gpu_s = np.zeros(points), np.zeros(points)
    peak = np.full(points, -np.inf)
    for e in engines:
        times, watts = power_over_time(e)
        joules += np.diff(step_integral(times, watts, edges))
        gpu_s += np.diff(step_integral(*held_gpus(e), edges))
        peak = np.maximum(peak, bucket_max(times, watts / e.gpus, edges))
    width = np.diff(edges)
    on = gpu_s > 0
    out.update(edges=_rounded(edges, 6), mean_w=_rounded(np.where(on, joules / np.where(on, gpu_s, 1.0), np.nan), 3),
               peak_w=_rounded(np.where(on, peak, np.nan), 3), gpus=_rounded(gpu_s / width, 4))
    return out


def held_gpus(engine: EnginePower) -> tuple[np.ndarray, np.ndarray]:
    """The GPUs an engine holds over time, as a step function (times s, GPUs): its gpus while one of its held
    intervals runs, 0 otherwise."""
    held = engine.held
    times = np.unique(held.reshape(-1))
    running = np.searchsorted(np.sort(held[:, 0]), times, "right") - np.searchsorted(np.sort(held[:, 1]), times, "right")
    return times, np.where(running > 0, float(engine.gpus), 0.0)


def step_integral(times: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """∫ from the first time to each of `at` of a step function that holds values[i] over [times[i], times[i + 1])
    and its last value afterwards (0 before the first time)."""
    if not len(times):
        return np.zeros(len(at))
    cumulative = np.concatenate([[0.0], np.cumsum(np.diff(times) * values[:-1])])
    k = np.searchsorted(times, at, "right") - 1
    i = np.maximum(k, 0)
    return np.where(k >= 0, cumulative[i] + values[i] * (at - times[i]), 0.0)


def bucket_max(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The highest value a step function takes within each bucket [edges[b], edges[b + 1]): the one holding at the
    bucket's start, and every one that begins inside it (-inf where it is not defined yet)."""
    buckets = len(edges) - 1
    out = np.full(buckets, -np.inf)
    if not len(times):
        return out
    k = np.searchsorted(times, edges[:-1], "right") - 1
    out = np.where(k >= 0, values[np.maximum(k, 0)], out)
    inside = np.searchsorted(edges, times, "right") - 1
    ok = (inside >= 0) & (inside < buckets)
    np.maximum.at(out, inside[ok], values[ok])
    return out


def _rounded(values: np.ndarray, digits: int) -> list:
    """A JSON-ready list: rounded, NaN as None (a gap in the line)."""
    v = np.round(np.asarray(values, np.float64), digits)
    return [None if not np.isfinite(x) else float(x) for x in v]
