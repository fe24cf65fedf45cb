"""Disaggregated serving's seam between pools: pool 0 (prefill) hands each finished prompt's KV over a link to pool 1
(decode), which pulls it when it has the blocks (back-pressure: the prefill engine holds the KV until then, and
parks when all its memory is held). A prefill engine's link carries one transfer at a time (a queue, not parallel
bandwidth). The fleet loop (fleet.py) calls these helpers at its events: a prefill engine changed (hand_over,
wake_decoders, after_prefill_step), a decode engine changed (pull), a transfer landed (deliver), a request
arrived (send_to_prefill). A single pool passes no_link(): arrays of nothing, never read.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .engine import next_event_s, route_in, route_in_prefilled
from .jit import inline
from .kv_pool import PL_PREV, PL_REF, _queue_append, _queue_remove, blocks_for
from .pool_steps import refresh
from .queues import followup_pop, heap_push, outstanding
from .scheduler import next_in_queue
from .state import KV_BLOCKS, N_FOLLOWUPS, NEXT_IN_QUEUE, REJECTED, STALLED, WAITING


class Handover(NamedTuple):
    """Disaggregated serving: what moving a finished prompt to the decode pool needs (per request, and the link)."""

    output_tokens: np.ndarray  # the request's real output length (the prefill table asks for one token)
    child: np.ndarray  # its next conversation turn, or -1 (NEXT_IN_QUEUE: a closed-loop slot frees)
    think_s: np.ndarray
    queue: np.ndarray  # RequestTable.queue and queue_next (the same arrays the decode engines release from)
    queue_next: np.ndarray
    kv_bytes_per_token: float  # per GPU: each tensor-parallel rank sends its shard over its own link
    link_bytes_per_s: float
    link_latency_s: float


class PoolTrace(NamedTuple):
    """Per request, what the fleet loop saw of the hand-overs (filled in as it runs)."""

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
    Python (pool_link), changed in place."""

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
    landed_next: np.ndarray  # per request: the next one delivered to the same decode engine and not yet admitted
    landed_head: np.ndarray  # per decode engine: the first prompt delivered and not yet admitted, or -1


@inline
def hold(kv, count, stack, n):
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
def unhold(kv, count, stack, n):
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
def hand_over(eng, e, decode, serving, link, turns, n_turns):
    """Prompts prefill engine `e` just finished (its table lists each request as its own follow-up, so they come
    out of its follow-up queue at their end time) wait, their KV held, for the decode engine with the least
    work to pull them (among `serving`, the decode pool's serving slots in slot order); rejected ones and
    one-token requests are done. Returns (requests done, turns size, the decode engines that got work: a bit
    each, up to 62, else all). `link`: the PoolLink."""
    q, st = eng.q, eng.st
    handover, trace, pulls = link.handover, link.trace, link.pulls
    finals, woken = 0, 0
    while q.size[N_FOLLOWUPS] > 0:
        r, t_end = q.followup_ids[0], q.followup_keys[0]
        followup_pop(q)
        if st.status[r] == REJECTED or handover.output_tokens[r] <= 1:
            finals += 1
            c = handover.child[r]
            if c == NEXT_IN_QUEUE:
                c = next_in_queue(handover.queue, handover.queue_next)
            if c >= 0:  # the conversation goes on
                n_turns = heap_push(turns[0], turns[1], n_turns, t_end + handover.think_s[c], c)
            continue
        trace.first_token[r], trace.prefill_end[r] = st.first_token_s[r], t_end
        d = serving[0]
        for j in serving[1:]:  # the fewest requests running, waiting or on their way
            if outstanding(decode[j]) + pulls.heading[j] < outstanding(decode[d]) + pulls.heading[d]:
                d = j
        trace.to_decode[r] = d
        pulls.heading[d] += 1
        n = pulls.n_held[e]
        pulls.n_held[e] = hold(eng.kv, blocks_for(eng.req.prompt_tokens[r], eng.cfg.block_size),
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
def settle(eng, d, pulls):
    """Prompts delivered to decode engine `d` keep the blocks promised them until it admits them (or refuses
    them): until then their blocks are still in its free count, and pulling on that room would promise them
    twice (more prompts queued on the decode side than it can hold)."""
    prev, r = -1, pulls.landed_head[d]
    while r >= 0:
        after = pulls.landed_next[r]
        if eng.st.status[r] == WAITING:
            prev = r
        else:
            pulls.reserved[d] -= pulls.reserved_of[r]
            if prev < 0:
                pulls.landed_head[d] = after
            else:
                pulls.landed_next[prev] = after
        r = after


@inline
def pull(eng, d, now, handover, trace, pulls, transfers, n_out):
    """Decode engine `d` pulls the prompts waiting for it, in order, while it has blocks for them beyond those
    promised to prompts on their way or landed and not yet admitted (idle, it pulls the next whatever it needs);
    each crosses its prefill engine's link (one transfer at a time, in pull order). Returns the transfers heap's
    size."""
    cfg = eng.cfg
    settle(eng, d, pulls)
    while pulls.ready_head[d] >= 0:
        r = pulls.ready_head[d]
        need = blocks_for(eng.req.prompt_tokens[r] + 1, cfg.block_size)
        room = eng.kv.free[KV_BLOCKS] - pulls.reserved[d]
        idle = outstanding(eng) == 0 and pulls.reserved[d] == 0
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
def deliver(prefill, decode, r, t_out, trace, pulls, next_p):
    """Request r's KV reached its decode engine: its prefill engine lets the blocks go (and, if it had stalled
    for want of them, steps again), the decode engine queues it. Returns the decode engine."""
    d, p = trace.to_decode[r], trace.to_prefill[r]
    pulls.heading[d] -= 1
    pulls.landed_next[r], pulls.landed_head[d] = pulls.landed_head[d], r  # promised its blocks until admitted
    pulls.n_held[p] = unhold(prefill[p].kv, pulls.held[r], pulls.held_ids[p], pulls.n_held[p])
    if pulls.parked[p]:
        pulls.parked[p] = False
        prefill[p].now = max(prefill[p].now, t_out)
        next_p[p] = next_event_s(prefill[p])
    route_in_prefilled(decode[d], r, t_out, trace.arrived[r], trace.first_token[r])
    return d


@inline
def send_to_prefill(eng, p, r, t_arr, trace, pulls):
    """The router sent request r to prefill engine p at t_arr. An engine parked for want of memory looks again
    from now: the new prompt may fit."""
    trace.arrived[r], trace.to_prefill[r] = t_arr, p
    if pulls.parked[p]:
        pulls.parked[p] = False
        eng.now = max(eng.now, t_arr)
    route_in(eng, r, t_arr)


@inline
def wake_decoders(decode, woken, now, link, transfers, n_out):
    """The decode engines that just got prompts to pull (`woken`: hand_over's bits, -1 for all) pull what they
    can. Returns the transfers heap's size."""
    for j in range(len(decode)):
        if woken == -1 or (j < 62 and (woken >> j) & 1):
            n_out = pull(decode[j], j, now, link.handover, link.trace, link.pulls, transfers, n_out)
    return n_out


@inline
def after_prefill_step(eng, p, next_p, done_p, n_held, parked):
    """A prefill engine changed. One that could schedule nothing because its memory is held for transfers waits
    (parked) until one ends; any other stall is a bug. Returns whether it is stuck. (`n_held`, `parked`: the
    Pulls arrays, passed alone: each array an inlined helper takes counts a reference, Pulls has 13.)"""
    stuck = refresh(eng, p, next_p, done_p)[1]
    if stuck and n_held[p] > 0:
        eng.loop[STALLED] = 0
        parked[p] = True
        stuck = False
    if parked[p]:
        next_p[p] = np.inf
    return stuck


@inline
def has_pulls(ready_head, landed_head, lo, hi):
    """Whether any of decode engines lo .. hi - 1 has prompts waiting for it to pull, or delivered and not yet
    admitted: all pull works on (without either it changes nothing). Asked after each decode step before pull's
    arguments are taken, which count ~25 array references (most steps have nothing to pull)."""
    for d in range(lo, hi):
        if ready_head[d] >= 0 or landed_head[d] >= 0:
            return True
    return False


class PoolLink(NamedTuple):
    """What joins the pools: the hand-over's inputs, the trace it fills in, the back-pressure between pools."""

    handover: Handover
    trace: PoolTrace
    pulls: Pulls


def pool_link(table, kv_bytes_per_token: float, bytes_per_s: float, latency_s: float, pools: tuple[int, int],
              prefill_blocks: int) -> PoolLink:
    """The link between a prefill pool and a decode pool (`pools`: their engines) over `table` (the RequestTable
    before the prefill pool's rewrite), each GPU's link carrying `kv_bytes_per_token`."""
    handover = Handover(table.output_tokens, table.child, table.think_s, table.queue, table.queue_next,
                        float(kv_bytes_per_token), float(bytes_per_s), float(latency_s))
    return PoolLink(handover, *_trace_and_pulls(len(table.arrival_s), pools, prefill_blocks))


def no_link() -> PoolLink:
    """A single pool's link: nothing to hand over (the same types as pool_link's, so one compile serves both)."""
    none = Handover(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
                    np.zeros(1, np.int64), 0.0, 1.0, 0.0)
    return PoolLink(none, *_trace_and_pulls(0, (0, 0), 0))


def _trace_and_pulls(n: int, pools: tuple[int, int], prefill_blocks: int) -> tuple[PoolTrace, Pulls]:
    prefill, decode = pools
    trace = PoolTrace(np.full(n, np.nan), np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(n, np.nan),
                      np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))
    pulls = Pulls(np.full(n, -1, np.int64), np.full(decode, -1, np.int64), np.full(decode, -1, np.int64),
                  np.zeros(decode, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                  np.zeros((prefill, prefill_blocks), np.int64), np.zeros(prefill, np.int64),
                  np.zeros(prefill, np.bool_), np.zeros(prefill), np.zeros(decode, np.int64),
                  np.full(n, -1, np.int64), np.full(decode, -1, np.int64))
    return trace, pulls
