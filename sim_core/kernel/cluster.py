"""Several engines in one compiled loop: replicas behind a router, or prefill and decode pools.

The loop always does whatever happens next in simulated time: a request arriving (the router picks a replica for
it from the load it can see; policies/routing.py) or a step of the engine whose next event is earliest. A replica
busy with a step when a request reaches it queues the request for its next step, as a real server does.

Disaggregated serving (simulate_disaggregated): the router sends requests to a prefill pool; a finished prompt's
KV queues on its prefill engine's link and goes to the decode engine with the least work, which admits it when
its blocks fit and decodes the rest.

The engines of a cluster share one request table and one per-request state (a request is on one engine at a
time), each with its own KV cache, queues, logs and clock. Python's side (bottom of the file) builds the inputs
and merges the engines' outcomes into one for the metrics, plus each engine's share (replica_metrics).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..links import KvLink
from ..metrics import distribution_ms
from ..policies.routing import (
    DEFAULT_CACHE_WEIGHT,
    ROUTER_NAMES,
    ROUTERS,
    Routing,
    choose,
    router_draws,
    router_load,
    sent_load,
)
from .build import engine_over, new_engine, outcome, request_record
from .engine import (
    CANCEL_CHECK_STEPS,
    idle,
    next_arrival_s,
    next_event_s,
    release_finished,
    route_in,
    route_in_prefilled,
    step,
)
from .jit import entry_nogil, inline
from .kv_pool import PL_PREV, PL_REF, _queue_append, _queue_remove, blocks_for
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
    KV_BLOCKS,
    N_FOLLOWUPS,
    N_RUNNING,
    N_SWAPPED,
    N_WAITING,
    NOW,
    REJECTED,
    STALLED,
    FrameSpec,
    Outcome,
)


@inline
def _outstanding(eng):
    return eng.q.size[N_WAITING] + eng.q.size[N_RUNNING] + eng.q.size[N_SWAPPED]


@inline
def _collect_turns(eng, keys, ids, size):
    """Follow-up turns the engine released (their parent just ended) move to the router's queue: the router
    sends each to a replica when it arrives, like any request."""
    q = eng.q
    while q.size[N_FOLLOWUPS] > 0:
        size = heap_push(keys, ids, size, q.followup_keys[0], q.followup_ids[0])
        followup_pop(q)
    return size


@inline
def _engines(cfg, table, count, frames, share_with):
    """`count` engines over one request table, all sharing one per-request state (a request is on one engine at a
    time, so its state needs no copy per engine: memory and cache footprint stay those of one engine's)."""
    # The first engine of the first pool owns the per-request state and the histograms; a later pool's shares them.
    first = new_engine(cfg, table, frames) if share_with is None else \
        engine_over(cfg, request_record(table), share_with.st, frames, False)
    root = first if share_with is None else share_with
    # The table's arrival times are written as requests arrive: one copy for all.
    engines = [first if e == 0 else engine_over(cfg, first.req, root.st, frames, False) for e in range(count)]
    # One inter-token-latency histogram for the cluster (the merged result's; per engine nobody reads it): 16 MB
    # an engine otherwise, and each engine's hot bins would compete for the cache as the loop switches engines.
    for eng in engines:
        eng.logs.itl_fine, eng.logs.itl_coarse = root.logs.itl_fine, root.logs.itl_coarse
    return engines


@inline
def _argmin(values):
    best = 0
    for i in range(1, values.shape[0]):
        if values[i] < values[best]:
            best = i
    return best


@inline
def _refresh(eng, e, next_t, done_e):
    """Engine e just changed (it stepped, or took a request): its next event goes into next_t. Returns (requests
    it finished since it last changed, whether it is stuck: a bug, which the runner reports)."""
    next_t[e] = next_arrival_s(eng) if idle(eng) else eng.clock[NOW]  # next_event_s, inlined: it runs every step
    finished = eng.loop[DONE] - done_e[e]
    done_e[e] = eng.loop[DONE]
    return finished, eng.loop[STALLED] != 0


@entry_nogil
def simulate_cluster(cfg, table, replicas, frames, routing):
    """Run `replicas` engines (one Config, one RequestTable whose arrivals the router hands in) until every request
    has finished or been rejected. Returns (each replica's Outcome, the replica each request was sent to)."""
    engines = _engines(cfg, table, replicas, frames, None)
    n_rep = len(engines)
    total = routing.arrival_s.shape[0]
    routed_to = np.full(total, -1, np.int64)
    turn_keys, turn_ids, n_turns = np.zeros(total), np.zeros(total, np.int64), 0  # released follow-up turns
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
        first = _argmin(next_t)
        t_eng = next_t[first]
        t_open = routing.arrival_s[routing.open_ids[k]] if k < routing.open_ids.shape[0] else np.inf
        t_turn = turn_keys[0] if n_turns > 0 else np.inf
        t_arr = min(t_open, t_turn)
        if t_arr <= t_eng and t_arr < np.inf:
            if t_open <= t_turn:
                r = routing.open_ids[k]
                k += 1
            else:
                r = turn_ids[0]
                n_turns = heap_pop(turn_keys, turn_ids, n_turns)
            if t_arr >= next_look:  # the router looks at the replicas' load again
                seen[:] = load
                next_look = t_arr + routing.staleness_s
            e = choose(engines, seen, r, routing, cfg.block_size, sent)
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
            step(engines[e])
            steps += 1
            if steps % CANCEL_CHECK_STEPS == 0 and cfg.cancel[0] != 0:
                break
        else:
            break  # nothing left to happen, yet not everything finished: the runner reports it
        n_turns = _collect_turns(engines[e], turn_keys, turn_ids, n_turns)  # a request that ended releases its turn
        finished, stuck = _refresh(engines[e], e, next_t, done_e)
        load[e] = router_load(engines[e], routing.router)
        done += finished
        if stuck:
            break
    return _outcomes(engines), routed_to


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
        f, stuck = _refresh(eng, e, next_t, done_e)
        finished += f
        if stuck or (steps % CANCEL_CHECK_STEPS == 0 and eng.cfg.cancel[0] != 0):
            return finished, True, steps
    return finished, False, steps


class Handover(NamedTuple):
    """Disaggregated serving: what moving a finished prompt to the decode pool needs (per request, and the link)."""

    output_tokens: np.ndarray  # the request's real output length (the prefill table asks for one token)
    child: np.ndarray  # its next conversation turn, or -1
    think_s: np.ndarray
    kv_bytes_per_token: float  # per GPU: each tensor-parallel rank sends its shard over its own link
    link_bytes_per_s: float
    link_latency_s: float


class PoolTrace(NamedTuple):
    """Per request, what simulate_disaggregated saw (filled in as it runs)."""

    arrived: np.ndarray
    to_prefill: np.ndarray  # the prefill engine, or -1
    to_decode: np.ndarray  # the decode engine, or -1 (rejected before, or one token was all it wanted)
    first_token: np.ndarray
    prefill_end: np.ndarray
    transfer_start: np.ndarray  # when the decode engine pulled it (it had the blocks) and the link was free
    delivered: np.ndarray  # when its KV reached the decode engine


class Pulls(NamedTuple):
    """Back-pressure between the pools. A prefill engine holds a finished prompt's KV blocks until its decode
    engine has pulled it across; a decode engine pulls the prompts waiting for it, in order, when it has the
    blocks for them (or, idle, the next one whatever it needs: it can free nothing more). Arrays built in
    Python (simulate_pools), changed in place."""

    ready_next: np.ndarray  # per request: the next one waiting for the same decode engine, or -1
    ready_head: np.ndarray  # per decode engine: the first prompt waiting to be pulled, or -1
    ready_tail: np.ndarray
    reserved: np.ndarray  # per decode engine: blocks promised to prompts on their way
    reserved_of: np.ndarray  # per request: the blocks its decode engine promised it
    held: np.ndarray  # per request: the blocks its prefill engine holds for it
    held_ids: np.ndarray  # [prefill engine, k]: the blocks it holds (a stack)
    n_held: np.ndarray  # per prefill engine
    parked: np.ndarray  # per prefill engine: stalled with its memory held, waiting for a transfer to end
    link_free: np.ndarray  # per prefill engine: when its link is free
    heading: np.ndarray  # per decode engine: prompts chosen for it and not yet arrived


@inline
def _hold(kv, count, stack, n):
    """Keep `count` blocks of the prompt a prefill engine just finished: the blocks it freed last sit at the
    tail of the free queue (its own, unless shared), and leave it with their content. Returns the stack size."""
    links = kv.links
    sentinel = links.shape[1] - 1
    for _ in range(min(count, kv.free[KV_BLOCKS])):
        b = links[PL_PREV, sentinel]
        _queue_remove(links, b)
        kv.free[KV_BLOCKS] -= 1
        links[PL_REF, b] += 1
        stack[n] = b
        n += 1
    return n


@inline
def _unhold(kv, count, stack, n):
    """The decode engine has the KV: `count` held blocks go back (cached content kept until evicted)."""
    links = kv.links
    for _ in range(count):
        n -= 1
        b = stack[n]
        links[PL_REF, b] -= 1
        if links[PL_REF, b] == 0:
            _queue_append(links, b)
            kv.free[KV_BLOCKS] += 1
    return n


@inline
def _hand_over(eng, e, decode, handover, trace, pulls, turns, n_turns):
    """Prompts prefill engine `e` just finished (its table lists each request as its own follow-up, so they come
    out of its follow-up queue at their end time) wait, their KV held, for the decode engine with the least
    work to pull them; rejected ones and one-token requests are done. Returns (requests done, turns size, the
    decode engines that got work: a bit each, up to 62, else all)."""
    q, st = eng.q, eng.st
    finals, woken = 0, 0
    while q.size[N_FOLLOWUPS] > 0:
        r, t_end = q.followup_ids[0], q.followup_keys[0]
        followup_pop(q)
        if st.status[r] == REJECTED or handover.output_tokens[r] <= 1:
            finals += 1
            c = handover.child[r]
            if c >= 0:  # the conversation goes on
                n_turns = heap_push(turns[0], turns[1], n_turns, t_end + handover.think_s[c], c)
            continue
        trace.first_token[r], trace.prefill_end[r] = st.first_token_s[r], t_end
        d = 0
        for j in range(1, len(decode)):  # the fewest requests running, waiting or on their way
            if _outstanding(decode[j]) + pulls.heading[j] < _outstanding(decode[d]) + pulls.heading[d]:
                d = j
        trace.to_decode[r] = d
        pulls.heading[d] += 1
        n = pulls.n_held[e]
        pulls.n_held[e] = _hold(eng.kv, blocks_for(eng.req.prompt_tokens[r], eng.cfg.block_size),
                                pulls.held_ids[e], n)
        pulls.held[r] = pulls.n_held[e] - n
        pulls.ready_next[r] = -1
        if pulls.ready_head[d] < 0:
            pulls.ready_head[d] = r
        else:
            pulls.ready_next[pulls.ready_tail[d]] = r
        pulls.ready_tail[d] = r
        woken |= (1 << d) if d < 62 else -1
    return finals, n_turns, woken


@inline
def _pull(eng, d, now, handover, trace, pulls, transfers, n_out):
    """Decode engine `d` pulls the prompts waiting for it, in order, while it has blocks for them beyond those
    promised to prompts on their way (idle, it pulls the next whatever it needs); each crosses its prefill
    engine's link (one transfer at a time, in pull order). Returns the transfers heap's size."""
    cfg = eng.cfg
    while pulls.ready_head[d] >= 0:
        r = pulls.ready_head[d]
        need = blocks_for(eng.req.prompt_tokens[r] + 1, cfg.block_size)
        room = eng.kv.free[KV_BLOCKS] - pulls.reserved[d]
        idle = _outstanding(eng) == 0 and pulls.reserved[d] == 0
        never_fits = blocks_for(eng.req.prompt_tokens[r] + eng.req.output_tokens[r], cfg.block_size) > cfg.num_blocks
        if need > room and not idle and not never_fits:  # (one that never fits goes now, to be refused there)
            break
        pulls.ready_head[d] = pulls.ready_next[r]
        pulls.reserved_of[r] = 0 if never_fits else need
        pulls.reserved[d] += pulls.reserved_of[r]
        p = trace.to_prefill[r]
        trace.transfer_start[r] = max(now, trace.prefill_end[r], pulls.link_free[p])
        pulls.link_free[p] = trace.transfer_start[r] + eng.req.prompt_tokens[r] * handover.kv_bytes_per_token \
            / handover.link_bytes_per_s
        trace.delivered[r] = pulls.link_free[p] + handover.link_latency_s
        n_out = heap_push(transfers[0], transfers[1], n_out, trace.delivered[r], r)
    return n_out


@inline
def _deliver(prefill, decode, r, t_out, trace, pulls, next_p):
    """Request r's KV reached its decode engine: its prefill engine lets the blocks go (and, if it had stalled
    for want of them, steps again), the decode engine queues it. Returns the decode engine."""
    d, p = trace.to_decode[r], trace.to_prefill[r]
    pulls.heading[d] -= 1
    pulls.reserved[d] -= pulls.reserved_of[r]
    pulls.n_held[p] = _unhold(prefill[p].kv, pulls.held[r], pulls.held_ids[p], pulls.n_held[p])
    if pulls.parked[p]:
        pulls.parked[p] = False
        prefill[p].clock[NOW] = max(prefill[p].clock[NOW], t_out)
        next_p[p] = next_event_s(prefill[p])
    route_in_prefilled(decode[d], r, t_out, trace.arrived[r], trace.first_token[r])
    return d


@inline
def _after_prefill_step(eng, p, next_p, done_p, pulls):
    """A prefill engine changed. One that could schedule nothing because its memory is held for transfers waits
    (parked) until one ends; any other stall is a bug. Returns whether it is stuck."""
    stuck = _refresh(eng, p, next_p, done_p)[1]
    if stuck and pulls.n_held[p] > 0:
        eng.loop[STALLED] = 0
        pulls.parked[p] = True
        stuck = False
    if pulls.parked[p]:
        next_p[p] = np.inf
    return stuck


@entry_nogil
def simulate_disaggregated(cfgs, prefill_table, decode_table, pools, frames, routing, handover, trace, pulls):
    """Disaggregated serving: requests prefill on one pool (each prefill table asks for one token: the first),
    their prompt KV then crosses the prefill engine's link to a decode engine, which pulls it when it has the
    blocks and decodes the rest; the prefill engine holds the KV until then (Pulls). A prefill engine's link
    carries one transfer at a time (a queue, not parallel bandwidth). `cfgs`: each pool's Config (its GPUs' cost
    model and KV pool). Fills `trace` (PoolTrace); returns (prefill Outcomes, decode Outcomes)."""
    cfg = cfgs[0]
    prefill = _engines(cfg, prefill_table, pools[0], frames, None)
    decode = _engines(cfgs[1], decode_table, pools[1], frames, prefill[0])  # a request's state follows it across
    n_p, n_d = len(prefill), len(decode)
    total = routing.arrival_s.shape[0]
    turns, n_turns = (np.zeros(total), np.zeros(total, np.int64)), 0  # released follow-up turns, by arrival
    transfers, n_out = (np.zeros(total), np.zeros(total, np.int64)), 0  # KV in flight, by delivery
    seen = np.zeros(n_p, np.int64)
    next_look = -np.inf
    # Each engine's next event (prefill pool, decode pool), recomputed for the engine that just changed.
    next_p, next_d = np.full(n_p, np.inf), np.full(n_d, np.inf)
    done_p, done_d = np.zeros(n_p, np.int64), np.zeros(n_d, np.int64)
    done = 0  # requests done for good: on the prefill side (rejected there, or one token wanted) or decoded
    k, sent, steps = 0, 0, 0
    while done < total:
        p, d = _argmin(next_p), _argmin(next_d)
        t_eng = min(next_p[p], next_d[d])
        t_open = routing.arrival_s[routing.open_ids[k]] if k < routing.open_ids.shape[0] else np.inf
        t_turn = turns[0][0] if n_turns > 0 else np.inf
        t_out = transfers[0][0] if n_out > 0 else np.inf
        t_arr = min(t_open, t_turn)
        if t_out <= t_eng and t_out <= t_arr and t_out < np.inf:  # a request's KV reaches its decode engine
            r = transfers[1][0]
            n_out = heap_pop(transfers[0], transfers[1], n_out)
            d = _deliver(prefill, decode, r, t_out, trace, pulls, next_p)
        elif t_arr <= t_eng and t_arr < np.inf:  # a request arrives: the router picks a prefill engine
            if t_open <= t_turn:
                r = routing.open_ids[k]
                k += 1
            else:
                r = turns[1][0]
                n_turns = heap_pop(turns[0], turns[1], n_turns)
            if t_arr >= next_look:
                for e in range(n_p):
                    seen[e] = router_load(prefill[e], routing.router)
                next_look = t_arr + routing.staleness_s
            p = choose(prefill, seen, r, routing, cfg.block_size, sent)
            trace.arrived[r], trace.to_prefill[r] = t_arr, p
            if pulls.parked[p]:  # it may fit: the engine looks again from now
                pulls.parked[p] = False
                prefill[p].clock[NOW] = max(prefill[p].clock[NOW], t_arr)
            route_in(prefill[p], r, t_arr)
            seen[p] += sent_load(prefill[p], r)
            sent += 1
            d = -1
        elif t_eng < np.inf:
            steps += 1
            if steps % CANCEL_CHECK_STEPS == 0 and cfg.cancel[0] != 0:
                break
            if next_d[d] < next_p[p]:
                step(decode[d])
            else:
                step(prefill[p])
                d = -1
        else:
            break  # nothing left to happen, yet not everything finished: the runner reports it
        if d >= 0:  # a decode engine changed: it may pull more, and a request it ended may release a next turn
            n_out = _pull(decode[d], d, decode[d].clock[NOW], handover, trace, pulls, transfers, n_out)
            n_turns = _collect_turns(decode[d], turns[0], turns[1], n_turns)
            finished, stuck = _refresh(decode[d], d, next_d, done_d)
        else:  # a prefill engine changed: prompts it finished wait for their decode engines
            # Done for good: requests rejected there, or wanting one token (the prompts it finished go on to decode).
            finished, n_turns, woken = _hand_over(prefill[p], p, decode, handover, trace, pulls, turns, n_turns)
            for j in range(n_d):
                if woken == -1 or (j < 62 and (woken >> j) & 1):
                    n_out = _pull(decode[j], j, prefill[p].clock[NOW], handover, trace, pulls, transfers, n_out)
            stuck = _after_prefill_step(prefill[p], p, next_p, done_p, pulls)
        done += finished
        if stuck:
            break
    return _outcomes(prefill), _outcomes(decode)


@inline
def _outcomes(engines):
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
               "attribution")
# Accumulators that are peaks or instants, not totals: the cluster's is the largest replica's.
PEAK_ACCUMULATORS = (A_KV_PEAK, A_WAITING_PEAK, A_END_S)


def simulate_replicas(cfg, table, replicas: int, router: str, staleness_s: float, seed: int,
                      cache_weight: float = DEFAULT_CACHE_WEIGHT, frames: FrameSpec = NO_FRAMES):
    """Run the cluster; returns (one Outcome for the whole cluster, each replica's Outcome, the replica each
    request was sent to). Each engine snapshots its own KV pool per `frames`; the merged Outcome carries no step
    log or KV frames (those are per engine) and the engines' event logs in one (see _pooled_logs)."""
    choices = router_draws(table.child, replicas, router, seed)
    routing = Routing(table.arrival_s, table.open_ids, ROUTERS[router][0], staleness_s, choices, float(cache_weight),
                      BATCH_INDEPENDENT_STEPS and not bool((table.child >= 0).any()))
    outs, routed_to = simulate_cluster(cfg, routed_table(table), replicas, frames, routing)
    outs = list(outs)
    merged = {f: getattr(outs[0], f) for f in PER_REQUEST}  # the engines shared one per-request state
    merged.update(_pooled_logs(outs))
    return Outcome(**merged), outs, routed_to


def simulate_pools(cfgs, table, pools: tuple[int, int], router: str, staleness_s: float, seed: int,
                   kv_bytes_per_token: float, link: KvLink, cache_weight: float = DEFAULT_CACHE_WEIGHT,
                   frames: FrameSpec = NO_FRAMES):
    """Run a disaggregated deployment (`cfgs`: the prefill pool's Config, the decode pool's); returns (one Outcome
    for the whole of it, each engine's Outcome (prefill pool first), the KV-transfer figures, the engine that
    finished each request, the PoolTrace)."""
    prefill_replicas, decode_replicas = pools
    n = len(table.arrival_s)
    decode_table = routed_table(table)
    # A prefill engine computes the prompt and samples the first token; listing each request as its own
    # follow-up (think time 0) hands it back to the cluster loop the moment it is done.
    prefill_table = decode_table._replace(arrival_s=decode_table.arrival_s.copy(),
                                          output_tokens=np.ones(n, np.int64), child=np.arange(n),
                                          think_s=np.zeros(n))
    routing = Routing(table.arrival_s, table.open_ids, ROUTERS[router][0], staleness_s,
                      router_draws(table.child, prefill_replicas, router, seed), float(cache_weight), False)
    handover = Handover(table.output_tokens, table.child, table.think_s, float(kv_bytes_per_token),
                        link.bytes_per_s, link.latency_s)
    trace = PoolTrace(np.full(n, np.nan), np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(n, np.nan),
                      np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))
    pulls = Pulls(np.full(n, -1, np.int64), np.full(decode_replicas, -1, np.int64),
                  np.full(decode_replicas, -1, np.int64), np.zeros(decode_replicas, np.int64), np.zeros(n, np.int64),
                  np.zeros(n, np.int64), np.zeros((prefill_replicas, cfgs[0].num_blocks), np.int64),
                  np.zeros(prefill_replicas, np.int64), np.zeros(prefill_replicas, np.bool_),
                  np.zeros(prefill_replicas), np.zeros(decode_replicas, np.int64))
    p_outs, d_outs = simulate_disaggregated(cfgs, prefill_table, decode_table, pools, frames, routing, handover,
                                            trace, pulls)
    outs = list(p_outs) + list(d_outs)
    # One per-request state followed each request from its prefill engine to its decode engine: it holds the
    # whole story (first token from the prefill side, the rest from the decode side, preemptions on both).
    merged = {f: getattr(outs[0], f) for f in PER_REQUEST}
    merged["arrival_s"] = trace.arrived
    decoded = trace.to_decode >= 0
    # The wait for a busy link, or for the decode engine to have blocks, counts in the transfer time: prefill end
    # -> KV delivered; kv_wait_ms is that wait alone (prefill end -> transfer start).
    transfer = {
        "kv_transfer_ms": distribution_ms(trace.delivered[decoded] - trace.prefill_end[decoded]),
        "kv_wait_ms": distribution_ms(trace.transfer_start[decoded] - trace.prefill_end[decoded]),
        "kv_transfer_bytes": float(table.prompt_tokens[decoded].sum() * kv_bytes_per_token),
        "kv_transfers": int(decoded.sum()),
        "kv_link_busy_s": float((trace.delivered[decoded] - link.latency_s - trace.transfer_start[decoded]).sum()),
    }
    finished_on = np.where(decoded, prefill_replicas + trace.to_decode, trace.to_prefill)
    return Outcome(**merged, **_pooled_logs(outs)), outs, transfer, finished_on, trace


def _pooled_logs(outs) -> dict:
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
        free_blocks_at_end=sum(o.free_blocks_at_end for o in outs),
        swap_free_at_end=sum(o.swap_free_at_end for o in outs),
        ref_counts_at_end=np.concatenate([o.ref_counts_at_end for o in outs]))


def first_steps(outs) -> np.ndarray:
    """Where each engine's steps start in the cluster's step numbering: the rows of the engines' logs before it
    (one row a step where no log was sampled; a sampled log makes timelines refuse anyway)."""
    return np.concatenate([[0], np.cumsum([len(o.steps) for o in outs])[:-1]]).astype(np.int64)


def replica_metrics(outs, members: list[np.ndarray], pools: list[str], makespan_s: float,
                    num_blocks: list[int]) -> dict:
    """Each engine's share of the work (`replicas`, a list; `members[e]`: the requests engine e served, `pools[e]`
    its pool, `num_blocks[e]` its KV pool) and how evenly it was spread: the most tokens one engine served over its
    pool's mean."""
    rows = []
    for e, o in enumerate(outs):
        acc = o.accumulators
        mine = members[e]
        busy = float(acc[A_BUSY_S])
        rows.append({
            "replica": e,
            "pool": pools[e],
            "requests": int(mine.sum()),
            "completed": int((mine & (o.status == FINISHED)).sum()),
            "rejected": int((mine & (o.status == REJECTED)).sum()),
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


__all__ = ["DEFAULT_CACHE_WEIGHT", "PoolTrace", "ROUTERS", "ROUTER_NAMES", "first_steps", "pooled_efficiency",
           "replica_metrics", "routed_table", "simulate_cluster", "simulate_pools", "simulate_replicas"]
