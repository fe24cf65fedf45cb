"""Several engines in one compiled loop: replicas behind a router (disaggregated.py: prefill and decode pools).

The loop always does whatever happens next in simulated time: a request arriving (the router picks a replica for
it from the load it can see; policies/routing.py) or a step of the engine whose next event is earliest. A replica
busy with a step when a request reaches it queues the request for its next step, as a real server does.

The engines of a cluster share one request table and one per-request state (a request is on one engine at a
time), each with its own KV cache, queues, logs and clock. Python's side (bottom of the file) builds the inputs
and merges the engines' outcomes into one for the metrics, plus each engine's share (replica_metrics). The
helpers above the loop serve disaggregated.py's loop too.
"""

from __future__ import annotations

import numpy as np

from ..policies.routing import RouterSettings, choose, router_load, sent_load
from .build import engine_over, new_engine, outcome, request_record, sibling_engine
from .engine import (
    CANCEL_CHECK_STEPS,
    account_step,
    batch_seconds,
    begin_step,
    idle,
    land_step,
    next_arrival_s,
    release_finished,
    route_in,
    step,
)
from .jit import entry_nogil, inline
from .logs import take_frames
from .queues import followup_pop, heap_pop, heap_push
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
    DONE,
    E_STEP,
    FINISHED,
    N_FOLLOWUPS,
    N_RUNNING,
    N_SWAPPED,
    N_WAITING,
    REJECTED,
    STALLED,
    FrameSpec,
    Outcome,
)


@inline
def outstanding(eng):
    return eng.q.size[N_WAITING] + eng.q.size[N_RUNNING] + eng.q.size[N_SWAPPED]


@inline
def next_arrival(routing, k, turns, n_turns):
    """When the next request arrives: the next open arrival (`k` taken so far) or the earliest follow-up turn
    released (`turns`: a heap of (arrival time, request), `n_turns` long)."""
    t_open = routing.arrival_s[routing.open_ids[k]] if k < routing.open_ids.shape[0] else np.inf
    return min(t_open, turns[0][0] if n_turns > 0 else np.inf)


@inline
def take_arrival(routing, k, turns, n_turns):
    """The request next_arrival timed (an open arrival first on a tie). Returns (it, open arrivals taken, turns
    left)."""
    t_open = routing.arrival_s[routing.open_ids[k]] if k < routing.open_ids.shape[0] else np.inf
    if n_turns == 0 or t_open <= turns[0][0]:
        return routing.open_ids[k], k + 1, n_turns
    return turns[1][0], k, heap_pop(turns[0], turns[1], n_turns)


@inline
def collect_turns(eng, keys, ids, size):
    """Follow-up turns the engine released (their parent just ended) move to the router's queue: the router
    sends each to a replica when it arrives, like any request."""
    q = eng.q
    while q.size[N_FOLLOWUPS] > 0:
        size = heap_push(keys, ids, size, q.followup_keys[0], q.followup_ids[0])
        followup_pop(q)
    return size


@inline
def new_engines(cfg, table, count, frames, share_with):
    """`count` engines over one request table, all sharing one per-request state (a request is on one engine at a
    time, so its state needs no copy per engine: memory and cache footprint stay those of one engine's)."""
    # The first engine of the first pool owns the per-request state and the histograms; a later pool's shares them.
    first = new_engine(cfg, table, frames) if share_with is None else \
        engine_over(cfg, request_record(table), share_with.st, frames, False)
    root = first if share_with is None else share_with
    # The table's arrival times are written as requests arrive: one copy for all.
    engines = [first if e == 0 else sibling_engine(cfg, first, frames) for e in range(count)]
    # One inter-token-latency histogram for the cluster (the merged result's; per engine nobody reads it): 16 MB
    # an engine otherwise, and each engine's hot bins would compete for the cache as the loop switches engines.
    for eng in engines:
        eng.logs.itl_fine, eng.logs.itl_coarse = root.logs.itl_fine, root.logs.itl_coarse
    return engines


@inline
def argmin(values):
    best = 0
    for i in range(1, values.shape[0]):
        if values[i] < values[best]:
            best = i
    return best


@inline
def refresh(eng, e, next_t, done_e):
    """Engine e just changed (it stepped, or took a request): its next event goes into next_t. Returns (requests
    it finished since it last changed, whether it is stuck: a bug, which the runner reports)."""
    next_t[e] = next_arrival_s(eng) if idle(eng) else eng.now  # next_event_s, inlined: it runs every step
    finished = eng.loop[DONE] - done_e[e]
    done_e[e] = eng.loop[DONE]
    return finished, eng.loop[STALLED] != 0


@inline
def step_together(engines, lo, size):
    """Step engines lo .. lo + size - 1, attention data-parallel ranks of one deployment, in lock-step (each MoE
    layer's all-to-all is a collective across them): every rank starts its step at the group's clock, and the step
    ends for all at the longest rank's. A rank with a batch is charged the whole step (it waits in the collective);
    an idle rank, or one that scheduled nothing, waits through it with its dummy batch's cost neglected (it is never
    the longest: a batch of no tokens)."""
    start = -np.inf
    for j in range(lo, lo + size):
        start = max(start, engines[j].now)
    ran = np.zeros(size, np.bool_)
    costs = np.zeros((size, 3))
    for j in range(lo, lo + size):
        eng = engines[j]
        if idle(eng):
            continue
        eng.now = start
        if begin_step(eng):
            ran[j - lo] = True
            costs[j - lo, 0], costs[j - lo, 1], costs[j - lo, 2] = batch_seconds(eng)
    longest = costs[:, 0].max()
    for j in range(lo, lo + size):
        eng = engines[j]
        if ran[j - lo]:
            account_step(eng, longest, costs[j - lo, 1], costs[j - lo, 2])
            land_step(eng)
        else:
            eng.now = start + longest


@inline
def step_group(engines, e, lockstep):
    """Step engine e alone (lockstep 1), or the lock-step group of `lockstep` engines it is in. Returns the
    engines stepped, lo .. hi - 1."""
    if lockstep == 1:
        step(engines[e])
        return e, e + 1
    lo = e - e % lockstep
    step_together(engines, lo, lockstep)
    return lo, lo + lockstep


@entry_nogil
def simulate_cluster(cfg, table, replicas, frames, routing, lockstep):
    """Run `replicas` engines (one Config, one RequestTable whose arrivals the router hands in) until every request
    has finished or been rejected; `lockstep` engines in a row form one lock-step group (attention-DP ranks of one
    deployment: step_together), 1 for independent replicas. Returns (each replica's Outcome, the replica each
    request was sent to)."""
    engines = new_engines(cfg, table, replicas, frames, None)
    n_rep = len(engines)
    total = routing.arrival_s.shape[0]
    routed_to = np.full(total, -1, np.int64)
    turns, n_turns = (np.zeros(total), np.zeros(total, np.int64)), 0  # released follow-up turns, by arrival
    seen = np.zeros(n_rep, np.int64)
    next_look = -np.inf
    # Each engine's next event, finished count and load (what the router would read off it now), recomputed only
    # for the engine that just changed: the others' do not move (scanning every engine per step or per arrival
    # would cost more than the step at a dozen replicas, and prefix_affinity's load is a scan of the queues).
    next_t, done_e, load = np.full(n_rep, np.inf), np.zeros(n_rep, np.int64), np.zeros(n_rep, np.int64)
    k = 0  # open arrivals routed so far
    sent = 0
    steps = 0
    done = 0
    while done < total:
        first = argmin(next_t)
        t_eng = next_t[first]
        t_arr = next_arrival(routing, k, turns, n_turns)
        if t_arr <= t_eng and t_arr < np.inf:
            r, k, n_turns = take_arrival(routing, k, turns, n_turns)
            if t_arr >= next_look:  # the router looks at the replicas' load again
                seen[:] = load
                next_look = t_arr + routing.staleness_s
            e = choose(engines, seen, r, routing, cfg.block_size, sent)
            lo, hi = e, e + 1  # the engines that changed
            route_in(engines[e], r, t_arr)
            seen[e] += sent_load(engines[e], r)  # the router counts what it sent since it looked
            routed_to[r] = e
            sent += 1
        elif t_eng < np.inf:
            e = first
            if routing.independent:  # nothing links the engines before the next arrival: run this one up to it
                finished, stuck, steps = _advance(engines[e], e, t_arr, next_t, done_e, steps)
                done += finished
                load[e] = router_load(engines[e], routing.router)
                if stuck or cfg.cancel[0] != 0:
                    break
                continue
            lo, hi = step_group(engines, e, lockstep)  # the engines that changed: e, or its lock-step group
            steps += 1
            if steps % CANCEL_CHECK_STEPS == 0 and cfg.cancel[0] != 0:
                break
        else:
            break  # nothing left to happen, yet not everything finished: the runner reports it
        stuck = False
        for j in range(lo, hi):
            n_turns = collect_turns(engines[j], turns[0], turns[1], n_turns)  # a request that ended releases its turn
            finished, stuck_j = refresh(engines[j], j, next_t, done_e)
            load[j] = router_load(engines[j], routing.router)
            done += finished
            stuck = stuck or stuck_j
        if stuck:
            break
    return outcomes(engines), routed_to


@inline
def _advance(eng, e, until, next_t, done_e, steps):
    """Step engine e while its next event comes before `until` (the next arrival): without follow-up turns the
    engines meet only at arrivals, where the router reads them, so each may run ahead alone up to the next one
    (the same outcome as stepping them in time order, with each engine's data staying in cache). Returns
    (requests it finished, whether it is stuck, steps so far)."""
    finished = 0
    while next_t[e] < until:
        step(eng)
        steps += 1
        f, stuck = refresh(eng, e, next_t, done_e)
        finished += f
        if stuck or (steps % CANCEL_CHECK_STEPS == 0 and eng.cfg.cancel[0] != 0):
            return finished, True, steps
    return finished, False, steps


@inline
def outcomes(engines):
    outs = []
    for e in range(len(engines)):
        take_frames(engines[e], True)
        release_finished(engines[e])  # what async_scheduling still held for the next step
        outs.append(outcome(engines[e]))
    return outs


# ---------------------------------------------------------------------------------------------------------
# Python side: the replicas' tables in, one merged Outcome (and each replica's figures) out
# ---------------------------------------------------------------------------------------------------------
# Replicas with no follow-up turns step each engine up to the next arrival at a time (simulate_cluster, _advance);
# False steps them one at a time in time order (the tests check both give the same outcome).
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
    outs, routed_to = simulate_cluster(cfg, routed_table(table), replicas, frames, routing, lockstep)
    outs = list(outs)
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
           "simulate_cluster", "simulate_replicas"]
