"""Stepping a pool's engines, for the fleet loop (fleet.py): building them over one request table, taking the next
arrival, stepping one engine (or running it ahead alone: advance) or a lock-step group, and reading what changed.
"""

from __future__ import annotations

import numpy as np

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
    step,
)
from .jit import inline, kernel
from .logs import take_frames
from .queues import followup_pop, heap_pop, heap_push
from .state import DONE, N_FOLLOWUPS, STALLED


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


@kernel
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
def refresh(eng, e, next_t, done_e):
    """Engine e just changed (it stepped, or took a request): its next event goes into next_t. Returns (requests
    it finished since it last changed, whether it is stuck: a bug, which the runner reports)."""
    next_t[e] = next_arrival_s(eng) if idle(eng) else eng.now  # next_event_s, inlined: it runs every step
    finished = eng.loop[DONE] - done_e[e]
    done_e[e] = eng.loop[DONE]
    return finished, eng.loop[STALLED] != 0


@kernel
def advance(eng, until, steps, independent):
    """One step of the engine, or (`independent`: no follow-up turns, so the engines meet only at arrivals and the
    fleets' control events) every step it has before `until`, running ahead alone with its data in cache (the same
    outcome as stepping the engines in time order). Returns the steps so far; the caller's
    refresh counts what they finished and whether the engine is stuck."""
    step(eng)
    steps += 1
    while independent and eng.loop[STALLED] == 0:
        nxt = next_arrival_s(eng) if idle(eng) else eng.now
        if nxt >= until or (steps % CANCEL_CHECK_STEPS == 0 and eng.cfg.cancel[0] != 0):
            break
        step(eng)
        steps += 1
    return steps


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


@inline
def outcomes(engines):
    outs = []
    for e in range(len(engines)):
        take_frames(engines[e], True)
        release_finished(engines[e])  # what async_scheduling still held for the next step
        outs.append(outcome(engines[e]))
    return outs
