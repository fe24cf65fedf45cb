"""A pool of engines as a fleet: its replicas' lives, which an autoscaler changes over the run
(policies/autoscaling.py), and what the fleet loop (fleet.py) keeps per engine. A static pool is a fleet that
never scales: its autoscaler never evaluates (policies/autoscaling.never_scales).

Every `interval_s` the autoscaler evaluates the policy, and each replica it asked for starts serving `delay_s`
later. A replica's life: provisioning (holding its GPUs, not yet serving) -> serving (the router sends it
requests) -> draining (no new requests; the ones it holds run to the end) -> released (its GPUs given back;
checked to hold no KV block). Scaling up takes back a draining replica first (it is warm), then provisions new
ones. The router sees only the serving replicas, refreshed whenever one comes or goes.

A replica is `lockstep` engines in a row (its attention data-parallel ranks; one engine without them): they
come, serve, drain and go together, and the autoscaler counts replicas. A released replica's engine slots are
reused by the next one provisioned, with their prefix caches emptied (a new replica starts cold): slots never
exceed max_replicas x lockstep, so memory stays that of the largest pool. Each life is a row of the fleet's
`lives` log (its first slot, asked for, serving from, draining from, released at), which Python turns into
GPU-hours, cost and replicas over time (sim_core/cluster_over_time.py).

Between prefill and decode pools a replica may be idle yet still hold work for the link (`linked`, per slot: a
prefill engine's KV blocks waiting to be pulled, a decode engine's prompts on their way): it is released only
once that is done too, so no request is lost and no block leaks.
"""

from __future__ import annotations

import numpy as np
from numba import types

from ..policies.autoscalers import METRIC_KV_USAGE, SCALE_UTILIZATION
from ..policies.autoscaling import replica_metric, wanted_replicas
from ..policies.routing import choose_serving
from .build import sibling_engine
from .engine import release_finished
from .jit import allocating_kernel, inline
from .kv_pool import NO_HASH, PL_HASH
from .queues import outstanding
from .state import F64, F64_2D, I64, KV_BLOCKS, RecordType, new_record

OFF, PROVISIONING, SERVING, DRAINING = range(4)
# Columns of the fleet's lives log.
LIFE_SLOT, LIFE_ASKED_S, LIFE_SERVING_S, LIFE_DRAINING_S, LIFE_RELEASED_S = range(5)
N_LIFE_COLS = 5

FLEET = RecordType([
    ("state", I64),  # [slot] OFF / PROVISIONING / SERVING / DRAINING
    ("ready_s", F64),  # [slot] when a provisioning replica starts serving
    ("life", I64),  # [slot] its row of `lives`
    ("lives", F64_2D),  # [life, LIFE_*]; inf where it has not happened (yet)
    ("n_lives", types.int64),
    ("serving", I64),  # the serving slots, in slot order: what the router chooses among
    ("n_serving", types.int64),
    ("next_tick_s", types.float64),  # the autoscaler's next evaluation
    ("tick", types.int64),
    ("last_change_s", types.float64),  # the last scale-up or scale-down (utilization's cooldown)
    ("arrived_at_tick", types.int64),  # open arrivals routed by the last evaluation (predictive's forecast)
    ("leaked", types.int64),  # KV blocks still held by replicas when they were released (a bug if not 0)
    ("next_ctl_s", types.float64),  # the fleet's next control event (next_control_s), kept as it changes
    ("lockstep", types.int64),  # engines in a row that step together (attention-DP ranks), 1: each alone
    ("scales", types.boolean),  # its autoscaler evaluates (a static pool's never does: none of its replicas drains)
    # Per slot, work the link between pools still holds it for (fleet.simulate_fleet sets it: a prefill pool's KV
    # blocks held for transfers, a decode pool's prompts on their way); empty for a single pool.
    ("linked", I64),
    # What the fleet loop keeps per slot, recomputed only for the engine that just changed (scanning every engine
    # per step would cost more than the step at a dozen replicas): its next event, requests finished, the load the
    # router would read off it now, and the load the router saw at its last look (plus what it sent since).
    ("next_t", F64),
    ("done_e", I64),
    ("load", I64),
    ("seen", I64),
    ("seen_serving", I64),  # `seen` of the serving slots, in their order (what the router chooses among)
])


@allocating_kernel
def new_fleet(scaling, lockstep):
    """A fleet of `scaling.start` replicas (each `lockstep` engines) serving from time 0, with room for
    `scaling.max_replicas` alive at once; the autoscaler first evaluates at `scaling.interval_s` (evaluation k at
    k x interval_s; never if inf)."""
    cap, start, interval_s = scaling.max_replicas * lockstep, scaling.start, scaling.interval_s
    f = new_record(FLEET)
    f.lockstep, f.linked, f.scales = lockstep, np.zeros(0, np.int64), interval_s < np.inf
    f.next_t, f.done_e = np.full(cap, np.inf), np.zeros(cap, np.int64)
    f.load, f.seen, f.seen_serving = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.int64)
    f.state = np.zeros(cap, np.int64)
    f.ready_s = np.full(cap, np.inf)
    f.life = np.full(cap, -1, np.int64)
    f.lives = np.full((max(16, 2 * scaling.max_replicas), N_LIFE_COLS), np.inf)
    f.n_lives = 0
    f.serving = np.zeros(cap, np.int64)
    f.n_serving = 0
    f.next_tick_s, f.tick, f.last_change_s, f.arrived_at_tick, f.leaked = interval_s, 1, -np.inf, 0, 0
    for g in range(start):
        begin_life(f, g * lockstep, 0.0, 0.0)
        f.state[g * lockstep:(g + 1) * lockstep] = SERVING
    list_serving(f)
    f.next_ctl_s = next_control_s(f)
    return f


@allocating_kernel
def begin_life(f, e, asked_s, ready_s):
    """Slots e .. e + lockstep - 1 hold a new replica, asked for at `asked_s`, serving from `ready_s`."""
    if f.n_lives == f.lives.shape[0]:
        grown = np.full((2 * f.lives.shape[0], N_LIFE_COLS), np.inf)
        grown[:f.n_lives] = f.lives
        f.lives = grown
    f.lives[f.n_lives, LIFE_SLOT] = e
    f.lives[f.n_lives, LIFE_ASKED_S] = asked_s
    f.lives[f.n_lives, LIFE_SERVING_S] = ready_s
    for j in range(e, e + f.lockstep):
        f.life[j] = f.n_lives
        f.state[j] = PROVISIONING
        f.ready_s[j] = ready_s
    f.n_lives += 1


@inline
def list_serving(f):
    n = 0
    for e in range(f.state.shape[0]):
        if f.state[e] == SERVING:
            f.serving[n] = e
            n += 1
    f.n_serving = n


@inline
def serving_list(f, engines):
    """The serving replicas' engines, in the order of f.serving (what the router chooses among)."""
    return [engines[f.serving[i]] for i in range(f.n_serving)]


@inline
def count(f, state):
    """Replicas in `state`."""
    n = 0
    for e in range(0, f.state.shape[0], f.lockstep):
        if f.state[e] == state:
            n += 1
    return n


@inline
def replica_outstanding(f, engines, e):
    """What replica e (its first slot) still holds: its ranks' requests, and work for the link (f.linked)."""
    n, linked = 0, f.linked
    for j in range(e, e + f.lockstep):
        n += outstanding(engines[j]) + (linked[j] if j < linked.shape[0] else 0)
    return n


@inline
def forget_cache(kv):
    """Empty the prefix cache of a released pool (every block free): the next replica in this slot starts cold."""
    kv.table[:, :] = NO_HASH
    kv.links[PL_HASH, :] = NO_HASH


@inline
def release(f, engines, e, now):
    """Replica e's (its first slot) drained engines give their GPUs back; any KV block they still hold is counted
    as leaked."""
    f.lives[f.life[e], LIFE_RELEASED_S] = now
    for j in range(e, e + f.lockstep):
        eng = engines[j]
        release_finished(eng)  # what async_scheduling still held for the next step
        f.leaked += eng.cfg.num_blocks - eng.kv.free[KV_BLOCKS]
        forget_cache(eng.kv)
        f.state[j] = OFF
        f.life[j] = -1


@inline
def draining(f, e):
    """Whether slot e's replica (its lock-step group) is draining. `scales` read first: the fleet loop asks after
    every step, and a static pool's never drains."""
    return f.scales and f.state[e - e % f.lockstep] == DRAINING


@inline
def release_if_drained(f, engines, e, now):
    """Slot e's replica goes if it is draining and holds nothing any more."""
    first = e - e % f.lockstep
    if draining(f, e) and replica_outstanding(f, engines, first) == 0:
        release(f, engines, first, now)


@inline
def drain(f, engines, e, now):
    """Replica e (its first slot) stops taking requests; released at once if it holds none."""
    f.state[e:e + f.lockstep] = DRAINING
    f.lives[f.life[e], LIFE_DRAINING_S] = now
    release_if_drained(f, engines, e, now)


@inline
def emptiest_serving(f, engines):
    """The serving replica with the fewest requests outstanding (the quickest to drain): its first slot."""
    best, best_n = -1, 1 << 62
    for i in range(0, f.n_serving, f.lockstep):
        e = f.serving[i]
        n = replica_outstanding(f, engines, e)
        if n < best_n:
            best, best_n = e, n
    return best


@allocating_kernel
def scale_up(f, engines, cfg, frames, now, delay_s, more):
    """`more` replicas more: draining ones taken back first (they serve at once), then new ones (serving after
    `delay_s`), in the lowest free slots; a slot never used before gets a new engine."""
    size = f.lockstep
    for e in range(0, f.state.shape[0], size):
        if more > 0 and f.state[e] == DRAINING:
            f.state[e:e + size] = SERVING
            f.lives[f.life[e], LIFE_DRAINING_S] = np.inf
            more -= 1
    for e in range(0, f.state.shape[0], size):
        if more > 0 and f.state[e] == OFF:
            while len(engines) < e + size:
                eng = sibling_engine(cfg, engines[0], frames)
                eng.logs.itl_fine, eng.logs.itl_coarse = engines[0].logs.itl_fine, engines[0].logs.itl_coarse
                engines.append(eng)
            begin_life(f, e, now, now + delay_s)
            more -= 1


@allocating_kernel
def wake(f, engines, cfg, frames, now, delay_s):
    """A request arrived to a cluster scaled to zero: one replica is asked for at once (not at the autoscaler's
    next evaluation), serving `delay_s` later. The request waits at the router meanwhile (its TTFT counts from its
    arrival), as Knative's activator or KEDA's HTTP add-on hold it."""
    f.last_change_s = now
    scale_up(f, engines, cfg, frames, now, delay_s, 1)
    list_serving(f)  # a draining replica taken back serves at once
    f.next_ctl_s = next_control_s(f)


@inline
def evaluate(f, engines, scaling, now, arrived, held):
    """The autoscaler's evaluation at `now` (`arrived`: open arrivals routed so far; `held`: one waits at the
    router of a cluster scaled to zero). Returns how many replicas to add (> 0); drains the ones it sheds itself."""
    total, serving = 0.0, f.n_serving // f.lockstep
    for i in range(f.n_serving):
        total += replica_metric(engines[f.serving[i]], scaling.metric)
    if scaling.metric == METRIC_KV_USAGE:
        total /= f.lockstep  # a replica's KV use is its ranks' mean; requests add up over them
    current = serving + count(f, PROVISIONING)
    want = wanted_replicas(scaling, total, serving, current, f.tick, arrived - f.arrived_at_tick, scaling.interval_s)
    if held:
        want = max(want, 1)  # never cancel the replica a waiting request woke
    f.tick += 1
    f.arrived_at_tick = arrived
    f.next_tick_s = now + scaling.interval_s
    if want > current:
        f.last_change_s = now
        return want - current  # want <= max: draining replicas taken back, then free slots, hold them
    cooled = scaling.policy != SCALE_UTILIZATION or now - f.last_change_s >= scaling.cooldown_s
    if want < current and cooled:
        f.last_change_s = now
        shed = current - want - cancel_provisioning(f, engines, now, current - want)
        # One replica keeps serving whatever the policy says, unless the cluster may scale to zero.
        for _ in range(min(shed, serving - min(1, scaling.min_replicas))):
            drain(f, engines, emptiest_serving(f, engines), now)
            list_serving(f)
    return 0


@inline
def cancel_provisioning(f, engines, now, most):
    """Scaling down sheds replicas still provisioning first, the last asked for first (none has served; a
    serving one is warm): each released now, never serving (its serving time inf). Returns how many."""
    done = 0
    while done < most:
        last = -1
        for e in range(0, f.state.shape[0], f.lockstep):
            if f.state[e] == PROVISIONING and (last < 0 or f.life[e] > f.life[last]):
                last = e
        if last < 0:
            break
        f.lives[f.life[last], LIFE_SERVING_S] = np.inf
        release(f, engines, last, now)
        f.ready_s[last:last + f.lockstep] = np.inf
        done += 1
    return done


@inline
def next_control_s(f):
    """The fleet's next event: the autoscaler's evaluation or a replica ready to serve."""
    t = f.next_tick_s
    for e in range(f.state.shape[0]):
        if f.state[e] == PROVISIONING and f.ready_s[e] < t:
            t = f.ready_s[e]
    return t


@allocating_kernel
def control(f, engines, cfg, frames, scaling, now, arrived, held):
    """The fleet's event at `now`: replicas whose provisioning is done start serving; the autoscaler evaluates
    when due (`held`: a request waits at the router, so it keeps at least one replica)."""
    for e in range(f.state.shape[0]):
        if f.state[e] == PROVISIONING and f.ready_s[e] <= now:
            f.state[e] = SERVING
            # Its idle clock starts now: requests that waited at the router for it (scaled to zero) were sent
            # before it served, and are computed from now on, not from their arrival.
            engines[e].now = max(engines[e].now, now)
    list_serving(f)  # before the evaluation counts them
    if f.next_tick_s <= now:
        more = evaluate(f, engines, scaling, now, arrived, held)
        if more > 0:
            scale_up(f, engines, cfg, frames, now, scaling.delay_s, more)
    list_serving(f)
    f.next_ctl_s = next_control_s(f)


@inline
def route(f, serving_engines, r, routing, block_size, sent):
    """The serving replica request r goes to (the router's choice among them, on the load it saw); returns its
    slot."""
    n, seen, buf = f.n_serving, f.seen, f.seen_serving
    for i in range(n):
        buf[i] = seen[f.serving[i]]
    return f.serving[choose_serving(serving_engines, buf[:n], r, routing, block_size, sent)]
