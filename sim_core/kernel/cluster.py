"""Several engines' runs, Python's side: replicas behind a router (simulate_replicas runs them through the fleet loop,
fleet.py), and merging any deployment's engines' outcomes into one for the metrics, plus each engine's share
(replica_metrics) and the pooled efficiency of pools on different GPUs.
"""

from __future__ import annotations

import numpy as np

from ..policies.routing import RouterSettings
from .fleet import run_fleet, static_pools
from .state import (
    A_BUSY_S,
    A_BYTES,
    A_DECODE_TOKENS,
    A_END_S,
    A_FLOPS,
    A_KV_BLOCK_S,
    A_KV_PEAK,
    A_PREEMPTIONS,
    A_PREFILL_TOKENS,
    A_STEPS,
    A_WAITING_PEAK,
    E_STEP,
    FINISHED,
    REJECTED,
    FrameSpec,
    Outcome,
)

# Replicas with no follow-up turns step each engine up to the next arrival at a time (pool_steps.advance); False
# steps them one at a time in time order (the tests check both give the same outcome).
BATCH_INDEPENDENT_STEPS = True
NO_FRAMES = FrameSpec(np.zeros(0), 0, 0.0)
# Outcome fields that hold one value per request (merged from the replica that served each request).
PER_REQUEST = ("arrival_s", "status", "reject_reason", "generated", "first_scheduled_s", "first_token_s",
               "finish_s", "max_itl_s", "preemptions", "degraded", "on_time_tokens", "cached_prefix",
               "attribution", "attr_first")
# Accumulators that are peaks or instants, not totals: the cluster's is the largest replica's.
PEAK_ACCUMULATORS = (A_KV_PEAK, A_WAITING_PEAK, A_END_S)


def simulate_replicas(cfg, table, replicas: int, router: RouterSettings, frames: FrameSpec = NO_FRAMES,
                      lockstep: int = 1):
    """Run the cluster; returns (one Outcome for the whole cluster, each replica's Outcome, the replica each
    request was sent to). Each engine snapshots its own KV pool per `frames`; the merged Outcome carries no step
    log or KV frames (those are per engine) and the engines' event logs in one (see _pooled_logs). `lockstep`:
    engines in a row that step together (PoolSetup.lockstep: attention-DP ranks), 1 for independent replicas."""
    independent = BATCH_INDEPENDENT_STEPS and lockstep == 1 and not bool((table.child != -1).any())
    routing = router.routing(table, replicas, independent)
    ran = run_fleet((cfg,), (routed_table(table),), frames, routing, static_pools((replicas,), (lockstep,)), (lockstep,))
    outs, routed_to = ran.outs[0], ran.routed_to
    merged = {f: getattr(outs[0], f) for f in PER_REQUEST}  # the engines shared one per-request state
    merged.update(pooled_logs(outs))
    return Outcome(**merged), outs, routed_to


def pooled_logs(outs) -> dict:
    """The cluster's accumulators and histograms: totals summed over engines, peaks and the end the largest; and
    one event log for the whole cluster. No step log or KV frames: those are per engine (runner.EngineLog).

    The merged event log numbers steps across the cluster: engine e's step k is step first_steps(outs)[e] + k,
    so an event still names exactly one step, whose times are in engine e's log (timeline.step_bounds joins the
    engines' logs in this order). Engines are listed prefill pool first, so a request's events sort by time
    when sorted by step."""
    acc = np.sum([o.accumulators for o in outs], axis=0)
    for a in PEAK_ACCUMULATORS:
        acc[a] = max(o.accumulators[a] for o in outs)
    first = outs[0]
    events = [o.events.copy() for o in outs]
    for ev, offset in zip(events, first_steps(outs), strict=True):
        ev[:, E_STEP] += offset
    return dict(
        steps=first.steps[:0], tenant_service=first.tenant_service[:0],
        # Timelines need every engine's log unsampled: the merged stride is the coarsest engine's.
        step_stride=max(int(o.step_stride) for o in outs), events=np.concatenate(events),
        events_complete=all(bool(o.events_complete) for o in outs), accumulators=acc,
        itl_fine=first.itl_fine, itl_coarse=first.itl_coarse,  # the engines shared one histogram
        kv_frames=first.kv_frames[:0], kv_frame_state=first.kv_frame_state[:0], kv_frame_s=first.kv_frame_s[:0],
        kv_frame_tiers=first.kv_frame_tiers[:0],
        free_blocks_at_end=sum(o.free_blocks_at_end for o in outs),
        swap_free_at_end=sum(o.swap_free_at_end for o in outs),
        ref_counts_at_end=np.concatenate([o.ref_counts_at_end for o in outs]),
        kv_tiers=np.sum([o.kv_tiers for o in outs], axis=0))


def first_steps(outs) -> np.ndarray:
    """Where each engine's steps start in the cluster's step numbering: the rows of the engines' logs before it
    (one row a step where no log was sampled; a sampled log makes timelines refuse anyway)."""
    return np.concatenate([[0], np.cumsum([len(o.steps) for o in outs])[:-1]]).astype(np.int64)


def replica_metrics(outs, members: list[np.ndarray], pools: list[str], makespan_s: float,
                    num_blocks: list[int]) -> dict:
    """Each engine's share of the work (`replicas`, a list; `members[e]`: the indices of the requests engine e
    served, `pools[e]` its pool, `num_blocks[e]` its KV pool) and how evenly it was spread: the most tokens one
    engine served over its pool's mean."""
    rows = []
    for e, o in enumerate(outs):
        acc = o.accumulators
        mine = members[e]
        busy = float(acc[A_BUSY_S])
        rows.append({
            "replica": e,
            "pool": pools[e],
            "requests": len(mine),
            "completed": int((o.status[mine] == FINISHED).sum()),
            "rejected": int((o.status[mine] == REJECTED).sum()),
            "served_tokens": int(acc[A_PREFILL_TOKENS] + acc[A_DECODE_TOKENS]),
            "gpu_busy_fraction": busy / makespan_s if makespan_s > 0 else 0.0,
            "kv_cache_usage_mean": float(acc[A_KV_BLOCK_S]) / busy / num_blocks[e] if busy > 0 else 0.0,
            "waiting_peak": int(acc[A_WAITING_PEAK]),
            "preemptions": int(acc[A_PREEMPTIONS]),
            "steps": int(acc[A_STEPS]),
        })
    imbalance = 1.0
    for pool in set(pools):
        served = np.array([row["served_tokens"] for row in rows if row["pool"] == pool], float)
        if served.mean() > 0:
            imbalance = max(imbalance, float(served.max() / served.mean()))
    return {"replicas": rows, "load_imbalance": imbalance}


def pooled_efficiency(outs, peaks: list[tuple[float, float]], num_blocks: list[int]) -> dict:
    """Pools on different GPUs: the cluster's MBU, MFU and KV-cache usage over each engine's own peaks and KV pool
    (`peaks[e]`: engine e's (bytes/s, FLOP/s)), replacing the merged figures, which divide by one GPU's."""
    busy = np.array([o.accumulators[A_BUSY_S] for o in outs])
    bw = sum(b * p[0] for b, p in zip(busy, peaks, strict=True))
    flops = sum(b * p[1] for b, p in zip(busy, peaks, strict=True))
    block_s = sum(b * n for b, n in zip(busy, num_blocks, strict=True))
    acc = np.sum([o.accumulators for o in outs], axis=0)
    return {"mbu": float(acc[A_BYTES]) / bw if bw > 0 else 0.0,
            "mfu": float(acc[A_FLOPS]) / flops if flops > 0 else 0.0,
            "kv_cache_usage": {"mean": float(acc[A_KV_BLOCK_S]) / block_s if block_s > 0 else 0.0,
                               "peak": max(o.accumulators[A_KV_PEAK] / n for o, n in zip(outs, num_blocks,
                                                                                         strict=True))}}


def routed_table(table):
    """The request table the engines of a cluster share: no open arrivals of their own (the router hands each
    in) and a private arrival_s (a follow-up turn is timed into it when its parent ends)."""
    return table._replace(arrival_s=np.where(np.isin(np.arange(len(table.arrival_s)), table.open_ids), np.inf,
                                             table.arrival_s), open_ids=np.zeros(0, np.int64))


__all__ = ["NO_FRAMES", "first_steps", "pooled_efficiency", "pooled_logs", "replica_metrics", "routed_table",
           "simulate_replicas"]
