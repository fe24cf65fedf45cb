"""The one loop that steps a deployment's engines, whatever its shape (runner.run_pools; a single engine runs
engine.simulate, the engine's own inner loop, which compiles in a fraction of this loop's time).

A deployment is one or two pools of engines. Each pool is a fleet (autoscaled.py): its replicas' lives, which its
autoscaler changes (a static pool is a fleet that never scales: its autoscaler never evaluates), and its lock-step
group size (attention-DP ranks step together: pool_steps.step_together). Pool 0 takes the arrivals: the router
(policies/routing.py) sends each to one of its serving engines, on the load it saw at its last look. With two
pools, pool 0 prefills and hands each finished prompt's KV over a link to pool 1, which decodes (handover.py).
The engines share one per-request state (a request is on one engine at a time), each with its own KV cache,
queues, logs and clock; an engine busy with a step when a request reaches it queues it for its next step.

The loop does whatever happens next in simulated time; on a tie, in this order: a KV transfer landing, a fleet's
control event (a replica ready to serve, the autoscaler's evaluation), a request arriving, the step of the engine
whose next event is earliest (pool 0's before pool 1's, the lowest slot first). With one pool and no follow-up
turns the engines meet only at arrivals and control events, so the engine that steps runs ahead alone up to the
next one (pool_steps.advance).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types

from ..policies.autoscaling import never_scales
from ..policies.routing import router_load, sent_load
from .autoscaled import (
    PROVISIONING,
    control,
    count,
    draining,
    new_fleet,
    release_if_drained,
    route,
    serving_list,
    wake,
)
from .engine import route_in
from .handover import (
    after_prefill_step,
    deliver,
    hand_over,
    has_pulls,
    no_link,
    pull,
    send_to_prefill,
    wake_decoders,
)
from .jit import allocating_kernel, entry_nogil, inline, kernel
from .pool_steps import (
    advance,
    collect_turns,
    new_engines,
    next_arrival,
    outcomes,
    refresh,
    step_group,
    take_arrival,
)
from .queues import heap_pop
from .state import F64, I64, N_FOLLOWUPS, RecordType, new_record

RUN = RecordType([
    ("turn_s", F64), ("turn_ids", I64), ("n_turns", types.int64),  # released follow-up turns: a heap by arrival
    ("out_s", F64), ("out_ids", I64), ("n_out", types.int64),  # KV on its way to pool 1: a heap by delivery
    ("routed_to", I64),  # per request: the pool-0 slot the router sent it to, or -1
    ("opened", types.int64),  # open arrivals taken so far
    ("sent", types.int64),  # requests routed so far
    ("next_look_s", types.float64),  # when the router next reads the engines' loads
    ("steps", types.int64),
    ("done", types.int64),  # requests done for good (finished or rejected)
    ("two_pools", types.boolean),  # pool 0 prefills for pool 1
    ("independent", types.boolean),  # Routing.independent: no follow-up turns, an engine may run ahead alone
    ("router", types.int64),  # Routing.router: the load it reads off an engine
    ("block_size", types.int64),  # pool 0's, which prefix_affinity's lookups are in
])


@allocating_kernel
def new_run(total, follow_ups, two_pools, router, block_size):
    """The loop's own state over `total` requests: the heaps it needs (turns only with follow-ups, transfers only
    between two pools), nothing routed yet."""
    run = new_record(RUN)
    run.two_pools, run.router, run.block_size, run.independent = two_pools, router, block_size, not follow_ups
    held = total if follow_ups else 1  # no turns without follow-ups (16 bytes a request otherwise, 140 MB a day)
    run.turn_s, run.turn_ids, run.n_turns = np.zeros(held), np.zeros(held, np.int64), 0
    out = total if two_pools else 1
    run.out_s, run.out_ids, run.n_out = np.zeros(out), np.zeros(out, np.int64), 0
    run.routed_to = np.full(total, -1, np.int64)
    run.opened, run.sent, run.steps, run.done, run.next_look_s = 0, 0, 0, 0, -np.inf
    return run


@allocating_kernel
def new_pools(cfgs, tables, frames, scalings, lockstep, link):
    """Each pool's engines (a list per pool: its starting replicas' ranks) and fleet. Pool 1's engines share pool
    0's per-request state: a request's story follows it across. With two pools a replica goes only once the link
    is done with it too: its held KV sent, its prompts landed."""
    first = new_engines(cfgs[0], tables[0], scalings[0].start * lockstep[0], frames, None)
    engines, fleets = [first], [new_fleet(scalings[0], lockstep[0])]
    if lockstep.shape[0] == 2:
        engines.append(new_engines(cfgs[1], tables[1], scalings[1].start * lockstep[1], frames, first[0]))
        fleets.append(new_fleet(scalings[1], lockstep[1]))
        fleets[0].linked, fleets[1].linked = link.pulls.n_held, link.pulls.heading
    return engines, fleets


@kernel
def earliest(next0, n0, next1, n1):
    """(pool, slot, time) of the engine whose next event comes first (`next0`, `next1`: each pool's next events,
    over the `n0`, `n1` slots that ever held an engine): pool 0's before pool 1's on a tie, then the lowest slot."""
    best_k, best_e, best_t = 0, 0, np.inf
    for e in range(n0):
        if next0[e] < best_t:
            best_e, best_t = e, next0[e]
    for e in range(n1):
        if next1[e] < best_t:
            best_k, best_e, best_t = 1, e, next1[e]
    return best_k, best_e, best_t


@kernel
def first_control(f0, f1, two):
    """The pool whose fleet has the next control event (pool 0 on a tie)."""
    return 1 if two and f1.next_ctl_s < f0.next_ctl_s else 0


@inline
def look(pool, f, run, routing, now):
    """The router reads pool 0's loads again, if its last look is `staleness_s` old. A prefill engine's load is
    read off it now (a decode step may have moved what its queues hold); one pool's were kept as each changed."""
    if now < run.next_look_s:
        return
    if run.two_pools:
        for e in range(len(pool)):
            f.load[e] = router_load(pool[e], run.router)
    f.seen[:] = f.load
    run.next_look_s = now + routing.staleness_s


@inline
def arrive(pool, f, serving, run, turns, routing, link, now):
    """The next request arrives: the router sends it to one of pool 0's serving engines. Returns its slot."""
    r, opened, n_turns = take_arrival(routing, run.opened, turns, run.n_turns)
    run.opened, run.n_turns = opened, n_turns
    look(pool, f, run, routing, now)
    e = route(f, serving, r, routing, run.block_size, run.sent)
    if run.two_pools:
        send_to_prefill(pool[e], e, r, now, link.trace, link.pulls)
    else:
        route_in(pool[e], r, now)
    f.seen[e] += sent_load(pool[e], r)  # the router counts what it sent since it looked
    run.routed_to[r] = e
    run.sent += 1
    return e


@inline
def land(prefill, f0, decode, next_p, run, out, link):
    """The first KV transfer in flight reaches its decode engine (and its prefill engine, draining, may go now).
    Returns the decode engine's slot."""
    r, now = out[1][0], out[0][0]
    run.n_out = heap_pop(out[0], out[1], run.n_out)
    d = deliver(prefill, decode, r, now, link.trace, link.pulls, next_p)
    if f0.scales:
        release_if_drained(f0, prefill, link.trace.to_prefill[r], now)
    return d


@inline
def after_prefills(pools, fleets, span, next_t, done_e, run, heaps, link):
    """Prefill engines span[0] .. span[1] - 1 changed (`pools`, `fleets`: the prefill and decode pools'): prompts
    they finished wait for one of the serving decode engines; a draining one that holds nothing more goes.
    Returns whether one is stuck (a bug, which the runner reports). `heaps`: the turns' and the transfers'."""
    (prefill, decode), (f0, f1), (turns, out) = pools, fleets, heaps
    stuck = False
    for p in range(span[0], span[1]):
        eng = prefill[p]
        # Only a step that finished prompts hands any over: hand_over's and wake_decoders' arguments count ~55
        # array references, a cost the steps that finish none skip.
        if eng.q.size[N_FOLLOWUPS] > 0:
            finals, n_turns, woken = hand_over(eng, p, decode, f1.serving[:f1.n_serving], link, turns, run.n_turns)
            run.n_turns = n_turns
            run.n_out = wake_decoders(decode, woken, eng.now, link, out, run.n_out)
            run.done += finals  # rejected there, or wanting one token: the prompts it finished go on to decode
        stuck = after_prefill_step(eng, p, next_t, done_e, link.pulls.n_held, link.pulls.parked) or stuck
        release_if_drained(f0, prefill, p, eng.now)
    return stuck


@inline
def pull_span(decode, span, run, out, link):
    """Decode engines span[0] .. span[1] - 1, in slot order, pull what prompts they can (handover.pull): before
    after_decodes, which reads nothing pull writes (only the link's arrays and the transfers heap)."""
    for d in range(span[0], span[1]):
        eng = decode[d]
        run.n_out = pull(eng, d, eng.now, link.handover, link.trace, link.pulls, out, run.n_out)


@inline
def after_decodes(decode, f1, span, next_t, done_e, run, turns):
    """Decode engines span[0] .. span[1] - 1 changed (and pulled, pull_span): each releases the turns its requests
    that ended had; a draining one that holds nothing more goes. Returns whether one is stuck."""
    stuck = False
    for d in range(span[0], span[1]):
        eng = decode[d]
        run.n_turns = collect_turns(eng, turns[0], turns[1], run.n_turns)
        finished, stuck_d = refresh(eng, d, next_t, done_e)
        run.done += finished
        stuck = stuck or stuck_d
        release_if_drained(f1, decode, d, eng.now)
    return stuck


@inline
def after_replicas(pool, f, span, next_t, done_e, run, turns):
    """Replicas span[0] .. span[1] - 1 changed (stepped, or took a request): each one's next event, what it
    finished, the turns it released, the load the router would read off it, a drained replica's release.
    Returns whether one is stuck."""
    stuck = False
    for j in range(span[0], span[1]):
        stuck = after_replica(pool, pool[j], f, j, next_t, done_e, run, turns) or stuck
    return stuck


@inline
def step_replica(pool, f, e, until, run, next_t, done_e, turns):
    """One pool of single-engine replicas: engine e steps (step_pool) and does what follows (after_replicas).
    Returns whether it is stuck. The common case, apart from those two: with no loop in it, its arguments cost
    the entry no reference counts (bench_day: ~5 atomic pairs a step fewer)."""
    eng = pool[e]
    run.steps = advance(eng, until, run.steps, run.independent)
    return after_replica(pool, eng, f, e, next_t, done_e, run, turns)


@inline
def after_replica(pool, eng, f, j, next_t, done_e, run, turns):
    """Replica j (`eng`, pool[j]) changed: what replica_changed keeps, then its release if it drained. Returns
    whether it is stuck."""
    stuck, drains = replica_changed(eng, f, j, next_t, done_e, run, turns)
    if drains:
        release_if_drained(f, pool, j, eng.now)
    return stuck


@kernel
def replica_changed(eng, f, j, next_t, done_e, run, turns):
    """after_replicas for replica j: the turns it released, its next event, what it finished, the load the router
    would read off it. Returns (whether it is stuck, whether its replica drains). A kernel, not inline: without
    NRT its reads of the engine's, fleet's and run's arrays are borrowed, where the entry's inlined code paid two
    atomic reference-count updates for each (bench_day's short steps: 16% of the day)."""
    run.n_turns = collect_turns(eng, turns[0], turns[1], run.n_turns)  # a request that ended releases its turn
    finished, stuck = refresh(eng, j, next_t, done_e)
    run.done += finished
    f.load[j] = router_load(eng, run.router)
    return stuck, draining(f, j)


@inline
def step_pool(pool, lockstep, e, until, run):
    """Step engine e of a pool, its lock-step group, or (independent) every step it has before `until`. Returns
    the engines that changed, lo .. hi - 1."""
    if lockstep > 1:
        run.steps += 1
        return step_group(pool, e, lockstep)
    run.steps = advance(pool[e], until, run.steps, run.independent)
    return e, e + 1


@entry_nogil
def simulate_fleet(cfgs, tables, frames, routing, scalings, lockstep, link):
    """Run the deployment (module docstring) until every request has finished or been rejected. `cfgs`, `tables`,
    `scalings`: each pool's Config, RequestTable and Scaling (pairs: one pool's given twice); `lockstep`: each
    pool's lock-step group size, one entry per pool; `link`: what joins two pools (handover.no_link() for one).
    Returns (each pool's Outcomes, the pool-0 slot each request was sent to, each pool's lives, each pool's leaks)."""
    engines, fleets = new_pools(cfgs, tables, frames, scalings, lockstep, link)
    total, two, cancel = routing.arrival_s.shape[0], len(fleets) == 2, cfgs[0].cancel
    run = new_run(total, not routing.independent, two, routing.router, cfgs[0].block_size)
    # Each pool's engines, fleet and per-slot arrays, read out of their containers once: each read inside the loop
    # counts a reference (an atomic add, and its undo), a dozen more a step cost ~20% on bench_day's short steps.
    e0, e1, f0, f1 = engines[0], engines[-1], fleets[0], fleets[-1]
    next0, done0, next1, done1 = f0.next_t, f0.done_e, f1.next_t, f1.done_e
    turns, out, pools = (run.turn_s, run.turn_ids), (run.out_s, run.out_ids), (e0, e1)
    ready, landed = link.pulls.ready_head, link.pulls.landed_head  # what the decode engines may pull (has_pulls)
    serving = serving_list(f0, e0)  # what the router chooses among
    while run.done < total:
        k, e, t_eng = earliest(next0, len(e0), next1, len(e1) if two else 0)
        t_arr = next_arrival(routing, run.opened, turns, run.n_turns)
        t_out = out[0][0] if run.n_out > 0 else np.inf
        if t_eng == np.inf and t_arr == np.inf and t_out == np.inf:
            break  # nothing left to happen, yet not everything finished: the runner reports it
        held = f0.n_serving == 0 and t_arr < np.inf  # scaled to zero: the request waits at the router (wake)
        if held and count(f0, PROVISIONING) == 0 and t_arr <= t_eng and t_arr <= min(f0.next_ctl_s, f1.next_ctl_s):
            wake(f0, e0, cfgs[0], frames, t_arr, scalings[0].delay_s)
            serving = serving_list(f0, e0)
            f0.seen[:] = f0.load
        c = first_control(f0, f1, two)
        t_ctl = f1.next_ctl_s if c == 1 else f0.next_ctl_s
        if held:
            held, t_arr = t_arr <= t_ctl, np.inf
        if t_out <= t_eng and t_out <= t_arr and t_out < np.inf:
            k, lo = 1, land(e0, f0, e1, next0, run, out, link)
            hi = lo + 1
        elif t_ctl <= t_arr and t_ctl <= t_eng:
            control(fleets[c], engines[c], cfgs[c], frames, scalings[c], t_ctl, run.opened, held and c == 0)
            if c == 0:  # the router sees the replicas that came or went
                serving = serving_list(f0, e0)
                f0.seen[:] = f0.load
                run.next_look_s = t_ctl + routing.staleness_s
            continue
        elif t_arr <= t_eng:
            k, lo = 0, arrive(e0, f0, serving, run, turns, routing, link, t_arr)
            hi = lo + 1
        elif not two and f0.lockstep == 1:
            if step_replica(e0, f0, e, min(t_arr, t_ctl), run, next0, done0, turns) or cancel[0] != 0:
                break
            continue
        else:
            lo, hi = step_pool(pools[k], f1.lockstep if k else f0.lockstep, e, min(t_arr, t_ctl), run)
        if not two:
            stuck = after_replicas(e0, f0, (lo, hi), next0, done0, run, turns)
        elif k == 0:
            stuck = after_prefills(pools, (f0, f1), (lo, hi), next0, done0, run, (turns, out), link)
        else:
            if has_pulls(ready, landed, lo, hi):
                pull_span(e1, (lo, hi), run, out, link)
            stuck = after_decodes(e1, f1, (lo, hi), next1, done1, run, turns)
        if stuck or cancel[0] != 0:
            break
    return fleet_outcomes(engines, fleets, run)


@allocating_kernel
def fleet_outcomes(engines, fleets, run):
    """What simulate_fleet returns: each pool's engines' Outcomes, the routing, each pool's lives and leaks."""
    outs, lives, leaked = [outcomes(engines[0])], [fleets[0].lives[:fleets[0].n_lives].copy()], [fleets[0].leaked]
    for k in range(1, len(fleets)):
        outs.append(outcomes(engines[k]))
        lives.append(fleets[k].lives[:fleets[k].n_lives].copy())
        leaked.append(fleets[k].leaked)
    return outs, run.routed_to, lives, leaked


# ---------------------------------------------------------------------------------------------------------
# Python side
# ---------------------------------------------------------------------------------------------------------
class FleetRun(NamedTuple):
    """What simulate_fleet hands back, pool by pool."""

    outs: list  # each pool's engines' Outcomes (a list per pool), slot by slot
    routed_to: np.ndarray  # per request: the pool-0 slot the router sent it to, or -1
    lives: list  # each pool's lives log, [life, autoscaled.LIFE_*]
    leaked: list  # each pool's KV blocks still held by replicas when they were released (a bug if not 0)


def run_fleet(cfgs, tables, frames, routing, scalings, lockstep, link=None) -> FleetRun:
    """Run one pool or two: per pool, its Config, RequestTable, policies.autoscaling.Scaling (static_pools: fleets
    that never scale) and lock-step group size; `link` joins two pools (handover.pool_link)."""
    outs, routed_to, lives, leaked = simulate_fleet(
        _pair(cfgs), _pair(tables), frames, routing, _pair(scalings), np.asarray(lockstep, np.int64),
        no_link() if link is None else link)
    return FleetRun([list(o) for o in outs], np.asarray(routed_to), [np.asarray(x) for x in lives],
                    [int(x) for x in leaked])


def _pair(per_pool) -> tuple:
    """The kernel takes pairs (one type, one compile): one pool's entry given twice."""
    return per_pool[0], per_pool[-1]


def static_pools(engines: tuple[int, ...], lockstep: tuple[int, ...]):
    """Each pool's Scaling for pools of fixed sizes (`engines`, in replicas of `lockstep` engines each): fleets
    that never scale."""
    return tuple(never_scales(n // size) for n, size in zip(engines, lockstep, strict=True))


__all__ = ["FleetRun", "run_fleet", "simulate_fleet", "static_pools"]
