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
from .autoscaled import DRAINING, PROVISIONING, control, count, new_fleet, release, route, serving_list, wake
from .engine import route_in
from .handover import after_prefill_step, deliver, hand_over, no_link, pull, send_to_prefill, wake_decoders
from .jit import allocating_kernel, entry_nogil, inline
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
from .queues import heap_pop, outstanding
from .state import F64, I64, RecordType, new_record

RUN = RecordType([
    ("turn_s", F64), ("turn_ids", I64), ("n_turns", types.int64),  # released follow-up turns: a heap by arrival
    ("out_s", F64), ("out_ids", I64), ("n_out", types.int64),  # KV on its way to pool 1: a heap by delivery
    ("routed_to", I64),  # per request: the pool-0 slot the router sent it to, or -1
    ("opened", types.int64),  # open arrivals taken so far
    ("sent", types.int64),  # requests routed so far
    ("next_look_s", types.float64),  # when the router next reads the engines' loads
    ("steps", types.int64),
    ("done", types.int64),  # requests done for good (finished or rejected)
])


@allocating_kernel
def new_run(total, follow_ups, two_pools):
    """The loop's own state over `total` requests: the heaps it needs (turns only with follow-ups, transfers only
    between two pools), nothing routed yet."""
    run = new_record(RUN)
    held = total if follow_ups else 1  # no turns without follow-ups (16 bytes a request otherwise, 140 MB a day)
    run.turn_s, run.turn_ids, run.n_turns = np.zeros(held), np.zeros(held, np.int64), 0
    out = total if two_pools else 1
    run.out_s, run.out_ids, run.n_out = np.zeros(out), np.zeros(out, np.int64), 0
    run.routed_to = np.full(total, -1, np.int64)
    run.opened, run.sent, run.steps, run.done, run.next_look_s = 0, 0, 0, 0, -np.inf
    return run


@allocating_kernel
def new_pools(cfgs, tables, frames, scalings, lockstep):
    """Each pool's engines (a list per pool) and fleet. Pool 1's engines share pool 0's per-request state: a
    request's story follows it across."""
    first = new_engines(cfgs[0], tables[0], scalings[0].start, frames, None)
    engines, fleets = [first], [new_fleet(scalings[0], lockstep[0])]
    if lockstep.shape[0] == 2:
        engines.append(new_engines(cfgs[1], tables[1], scalings[1].start, frames, first[0]))
        fleets.append(new_fleet(scalings[1], lockstep[1]))
    return engines, fleets


@inline
def earliest(fleets, engines):
    """(pool, slot, time) of the engine whose next event comes first: pool 0's before pool 1's on a tie, then the
    lowest slot (among the slots that ever held an engine)."""
    best_k, best_e, best_t = 0, 0, np.inf
    for k in range(len(fleets)):
        next_t = fleets[k].next_t
        for e in range(len(engines[k])):
            if next_t[e] < best_t:
                best_k, best_e, best_t = k, e, next_t[e]
    return best_k, best_e, best_t


@inline
def first_control(fleets):
    """The pool whose fleet has the next control event (the lowest on a tie)."""
    c = 0
    for k in range(1, len(fleets)):
        if fleets[k].next_ctl_s < fleets[c].next_ctl_s:
            c = k
    return c


@inline
def look(engines, fleets, run, routing, now):
    """The router reads pool 0's loads again, if its last look is `staleness_s` old. A prefill engine's load is
    read off it now (a decode step may have moved what its queues hold); one pool's were kept as each changed."""
    if now < run.next_look_s:
        return
    f = fleets[0]
    if len(fleets) == 2:
        for e in range(len(engines[0])):
            f.load[e] = router_load(engines[0][e], routing.router)
    f.seen[:] = f.load
    run.next_look_s = now + routing.staleness_s


@inline
def arrive(engines, fleets, serving, run, routing, link, now, block_size):
    """The next request arrives: the router sends it to one of pool 0's serving engines. Returns its slot."""
    f = fleets[0]
    r, opened, n_turns = take_arrival(routing, run.opened, (run.turn_s, run.turn_ids), run.n_turns)
    run.opened, run.n_turns = opened, n_turns
    look(engines, fleets, run, routing, now)
    e = route(f, serving, r, routing, block_size, run.sent)
    if len(fleets) == 2:
        send_to_prefill(engines[0][e], e, r, now, link.trace, link.pulls)
    else:
        route_in(engines[0][e], r, now)
    f.seen[e] += sent_load(engines[0][e], r)  # the router counts what it sent since it looked
    run.routed_to[r] = e
    run.sent += 1
    return e


@inline
def land(engines, fleets, run, link):
    """The first KV transfer in flight reaches its decode engine. Returns that engine's slot."""
    r, now = run.out_ids[0], run.out_s[0]
    run.n_out = heap_pop(run.out_s, run.out_ids, run.n_out)
    return deliver(engines[0], engines[1], r, now, link.trace, link.pulls, fleets[0].next_t)


@inline
def after_prefill(engines, f, p, run, link):
    """Prefill engine p changed: prompts it finished wait for their decode engines. Returns whether it is stuck."""
    eng = engines[0][p]
    finals, n_turns, woken = hand_over(eng, p, engines[1], link.handover, link.trace, link.pulls,
                                       (run.turn_s, run.turn_ids), run.n_turns)
    run.n_turns = n_turns
    run.n_out = wake_decoders(engines[1], woken, eng.now, link, (run.out_s, run.out_ids), run.n_out)
    run.done += finals  # rejected there, or wanting one token: the prompts it finished go on to decode
    return after_prefill_step(eng, p, f.next_t, f.done_e, link.pulls)


@inline
def after_change(engines, fleets, k, lo, hi, run, routing, link):
    """Engines lo .. hi - 1 of pool k changed (stepped, or took a request or a prompt's KV): each one's next
    event, what it finished, the turns it released, a decode engine's pulls, a drained replica's release.
    Returns whether one is stuck (a bug, which the runner reports)."""
    f, two_pools = fleets[k], len(fleets) == 2
    stuck = False
    if two_pools and k == 0:
        for p in range(lo, hi):
            stuck = after_prefill(engines, f, p, run, link) or stuck
        return stuck
    for j in range(lo, hi):
        eng = engines[k][j]
        if two_pools:  # a decode engine may pull more prompts
            run.n_out = pull(eng, j, eng.now, link.handover, link.trace, link.pulls, (run.out_s, run.out_ids),
                             run.n_out)
        run.n_turns = collect_turns(eng, run.turn_s, run.turn_ids, run.n_turns)  # a request that ended releases its turn
        finished, stuck_j = refresh(eng, j, f.next_t, f.done_e)
        run.done += finished
        if not two_pools:
            f.load[j] = router_load(eng, routing.router)
        stuck = stuck or stuck_j
        if f.state[j] == DRAINING and outstanding(eng) == 0:
            release(f, eng, j, eng.now)
    return stuck


@inline
def step_pool(engines, f, k, e, until, run, independent):
    """Step engine e of pool k, its lock-step group, or (independent) every step it has before `until`. Returns
    the engines that changed, lo .. hi - 1."""
    if f.lockstep > 1:
        run.steps += 1
        return step_group(engines[k], e, f.lockstep)
    run.steps = advance(engines[k][e], until, run.steps, independent)
    return e, e + 1


@entry_nogil
def simulate_fleet(cfgs, tables, frames, routing, scalings, lockstep, link):
    """Run the deployment (module docstring) until every request has finished or been rejected. `cfgs`, `tables`,
    `scalings`: each pool's Config, RequestTable and Scaling (pairs: one pool's given twice); `lockstep`: each
    pool's lock-step group size, one entry per pool; `link`: what joins two pools (handover.no_link() for one).
    Returns (each pool's Outcomes, the pool-0 slot each request was sent to, each pool's lives log, each pool's
    KV blocks leaked on release)."""
    engines, fleets = new_pools(cfgs, tables, frames, scalings, lockstep)
    total, f0 = routing.arrival_s.shape[0], fleets[0]
    run = new_run(total, not routing.independent, len(fleets) == 2)
    serving = serving_list(f0, engines[0])  # what the router chooses among
    while run.done < total:
        k, e, t_eng = earliest(fleets, engines)
        t_arr = next_arrival(routing, run.opened, (run.turn_s, run.turn_ids), run.n_turns)
        t_out = run.out_s[0] if run.n_out > 0 else np.inf
        if t_eng == np.inf and t_arr == np.inf and t_out == np.inf:
            break  # nothing left to happen, yet not everything finished: the runner reports it
        held = f0.n_serving == 0 and t_arr < np.inf  # scaled to zero: the request waits at the router (wake)
        c = first_control(fleets)
        if held and count(f0, PROVISIONING) == 0 and t_arr <= t_eng and t_arr <= fleets[c].next_ctl_s:
            wake(f0, engines[0], cfgs[0], frames, t_arr, scalings[0].delay_s)
            serving, c = serving_list(f0, engines[0]), first_control(fleets)
            f0.seen[:] = f0.load
        t_ctl = fleets[c].next_ctl_s
        if held:
            held, t_arr = t_arr <= t_ctl, np.inf
        if t_out <= t_eng and t_out <= t_arr and t_out < np.inf:
            k, lo = 1, land(engines, fleets, run, link)
            hi = lo + 1
        elif t_ctl <= t_arr and t_ctl <= t_eng:
            control(fleets[c], engines[c], cfgs[c], frames, scalings[c], t_ctl, run.opened, held and c == 0)
            if c == 0:  # the router sees the replicas that came or went
                serving = serving_list(f0, engines[0])
                f0.seen[:] = f0.load
                run.next_look_s = t_ctl + routing.staleness_s
            continue
        elif t_arr <= t_eng:
            k, lo = 0, arrive(engines, fleets, serving, run, routing, link, t_arr, cfgs[0].block_size)
            hi = lo + 1
        else:
            lo, hi = step_pool(engines, fleets[k], k, e, min(t_arr, t_ctl), run, routing.independent)
        if after_change(engines, fleets, k, lo, hi, run, routing, link) or cfgs[0].cancel[0] != 0:
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


def static_pools(engines: tuple[int, ...]):
    """Each pool's Scaling for pools of fixed sizes: fleets that never scale."""
    return tuple(never_scales(n) for n in engines)


__all__ = ["FleetRun", "run_fleet", "simulate_fleet", "static_pools"]
