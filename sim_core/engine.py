"""The iteration loop: continuous (iteration-level) batching over a paged KV cache.

One call simulates a whole workload. State is structure-of-arrays indexed by request id (requests are sorted by
arrival). Each step, as in vLLM v1:
  1. admit arrivals into the waiting queue (or reject those that can never run, with a reason);
  2. priority preemption (only for schedulers that order by something other than arrival);
     admission control may shed a request whose TTFT target is already out of reach (it is counted as rejected);
  3. serve running requests first: one token for each decode, the rest of a partial prompt for a request
     mid-prefill; a request that needs a KV block when none is free preempts the running request with the least
     progress (recompute: free its blocks and requeue it; swap: copy its KV to host memory);
  4. resume swapped requests, then admit waiting ones in policy order into the remaining token budget;
  5. advance the clock by the step time from the cost model; requests whose KV now covers all their tokens
     sample one: the first token ends the prompt phase, the last one finishes the request.
`static` batching replaces 3-4 with whole-batch admission. The waiting queue is one heap per tenant (request
class); every policy but `fair` uses a single heap, `fair` picks the backlogged tenant with the least weighted
service (Virtual Token Counter) and serves its heap in arrival order. An optional controller adapts the token
budget to keep step time under a fraction of the ITL target (seed 003).

Everything here is numba-compiled (`@njit(cache=True)`) and also runs as plain Python with NUMBA_DISABLE_JIT=1.
numba's on-disk cache keys on this file alone: after editing cost_model.py or policies.py, clear the cache
(scripts/test.sh keys its cache directory on a hash of sim_core/).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cost_model import step_cost, swap_seconds
from .policies import LPM_QUEUE_LIMIT, ORDER_CACHED_PREFIX, ORDER_SLACK, ORDER_TENANT_SHARE, waiting_key

# Request status.
PENDING, WAITING, RUNNING, SWAPPED, FINISHED, REJECTED = 0, 1, 2, 3, 4, 5
# Why a request was rejected.
REJECT_NONE = 0
REJECT_LONGER_THAN_MODEL = 1  # prompt + output exceed max_model_len
REJECT_LARGER_THAN_KV_POOL = 2  # its KV at full length would not fit in the whole block pool
REJECT_LONGER_THAN_BUDGET = 3  # chunking off and prompt + output exceed the per-step token budget
REJECT_SHED = 4  # admission control: its TTFT target could no longer be met
REJECT_REASONS = (
    "",
    "prompt + output tokens exceed max_model_len",
    "prompt + output KV exceeds the whole KV block pool",
    "prompt + output tokens exceed the token budget and chunked prefill is off",
    "shed by admission control: TTFT target already out of reach",
)
# Admission control for a request whose slack is negative when it reaches the head of the queue.
ADMIT, SHED, DEGRADE = 0, 1, 2
# Policy parameters (a float64 vector, like the cost parameters).
(P_AGING, P_ADMISSION, P_DEGRADE_FACTOR, P_TRANSPORT_S, P_ADAPTIVE, P_HEADROOM, P_ITL_TARGET_S, P_BUDGET_MIN,
 P_BUDGET_MAX, P_BUDGET_INCREASE, P_FAIR_INPUT_COST, P_FAIR_OUTPUT_COST) = range(12)
N_POLICY_PARAMS = 12
# Preemption modes.
PREEMPT_NONE, PREEMPT_RECOMPUTE, PREEMPT_SWAP = 0, 1, 2
# Event kinds in the event log.
EV_PREFILL, EV_PREEMPT_RECOMPUTE, EV_SWAP_OUT, EV_SWAP_IN = 0, 1, 2, 3
# Columns of the step log.
(S_START, S_DURATION, S_PREFILL_TOKENS, S_PREFILL_SEQS, S_DECODE_SEQS, S_KV_BLOCKS, S_WAITING, S_RUNNING,
 S_SWAPPED, S_BYTES, S_FLOPS, S_PREEMPTIONS, S_TOKEN_BUDGET, S_SHED) = range(14)
N_STEP_COLS = 14
# Columns of the event log.
E_REQUEST, E_STEP, E_KIND, E_TOKENS = range(4)
N_EVENT_COLS = 4
# Summary accumulators (exact, unlike the step log, which is sampled once it is full).
(A_STEPS, A_BUSY_S, A_BYTES, A_FLOPS, A_KV_BLOCK_S, A_KV_PEAK, A_WAITING_S, A_WAITING_PEAK, A_IN_SYSTEM_S,
 A_PREEMPTIONS, A_END_S, A_ITL_SUM, A_ITL_COUNT, A_PREFILL_TOKENS, A_DECODE_TOKENS, A_SHED,
 A_DEGRADED, A_EVICTIONS, A_CACHED_TOKENS) = range(19)
N_ACC = 19
# Inter-token-latency histogram: exact microsecond bins below ~1 s, millisecond bins up to 1000 s.
ITL_FINE_BINS = 1 << 20
ITL_COARSE_BINS = 1_000_000


@njit(cache=True)
def _blocks_for(tokens, block_size):
    return (tokens + block_size - 1) // block_size


# ---------------------------------------------------------------------------------------------------------
# Waiting/swapped queues: binary min-heaps of (key, request id); ties go to the smaller id (earlier arrival).
# ---------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _heap_less(keys, ids, a, b):
    return keys[a] < keys[b] or (keys[a] == keys[b] and ids[a] < ids[b])


@njit(cache=True)
def _heap_push(keys, ids, size, key, rid):
    i = size
    keys[i] = key
    ids[i] = rid
    while i > 0:
        parent = (i - 1) // 2
        if _heap_less(keys, ids, i, parent):
            keys[i], keys[parent] = keys[parent], keys[i]
            ids[i], ids[parent] = ids[parent], ids[i]
            i = parent
        else:
            break
    return size + 1


@njit(cache=True)
def _sift_down(keys, ids, i, size):
    while True:
        left = 2 * i + 1
        right = left + 1
        best = i
        if left < size and _heap_less(keys, ids, left, best):
            best = left
        if right < size and _heap_less(keys, ids, right, best):
            best = right
        if best == i:
            return
        keys[i], keys[best] = keys[best], keys[i]
        ids[i], ids[best] = ids[best], ids[i]
        i = best


@njit(cache=True)
def _heap_pop(keys, ids, size):
    """Remove the top; return the new size (the caller read ids[0] before)."""
    size -= 1
    keys[0] = keys[size]
    ids[0] = ids[size]
    _sift_down(keys, ids, 0, size)
    return size


@njit(cache=True)
def _heapify(keys, ids, size):
    """Restore the heap order after keys changed in place."""
    for start in range(size // 2 - 1, -1, -1):
        _sift_down(keys, ids, start, size)


# ---------------------------------------------------------------------------------------------------------
# Waiting queue: one heap per tenant in flat arrays; tenant t's heap lives at [q_off[t], q_off[t + 1]).
# ---------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _wait_push(t, key, rid, wait_keys, wait_ids, q_off, q_size, vtc, ctr):
    lo, hi = q_off[t], q_off[t + 1]
    if q_size[t] == 0 and vtc.shape[0] > 1:
        # Virtual Token Counter: a tenant that returns from idle starts level with the least-served backlogged
        # tenant, so it cannot spend service "saved" while it had nothing to run.
        lowest = -1.0
        for u in range(q_size.shape[0]):
            if u != t and q_size[u] > 0 and (lowest < 0.0 or vtc[u] < lowest):
                lowest = vtc[u]
        if lowest > vtc[t]:
            vtc[t] = lowest
    q_size[t] = _heap_push(wait_keys[lo:hi], wait_ids[lo:hi], q_size[t], key, rid)
    ctr[C_WAITING] += 1


@njit(cache=True)
def _wait_head(q_size, vtc):
    """The tenant whose heap top is served next (least service among backlogged tenants); -1 if none."""
    best = -1
    for t in range(q_size.shape[0]):
        if q_size[t] > 0 and (best < 0 or vtc[t] < vtc[best]):
            best = t
    return best


@njit(cache=True)
def _wait_pop(t, wait_keys, wait_ids, q_off, q_size, ctr):
    lo, hi = q_off[t], q_off[t + 1]
    q_size[t] = _heap_pop(wait_keys[lo:hi], wait_ids[lo:hi], q_size[t])
    ctr[C_WAITING] -= 1


# ---------------------------------------------------------------------------------------------------------
# Scalar state shared by the helpers lives in one small int64 array, so helpers can update it in place.
# ---------------------------------------------------------------------------------------------------------
C_RUNNING, C_WAITING, C_SWAPPED, C_FREE_BLOCKS, C_FREE_SLOTS_TOP, C_SWAP_FREE, C_EVENTS, C_FOLLOWUPS = range(8)
N_COUNTERS = 8  # C_WAITING counts all tenants' heaps together


# ---------------------------------------------------------------------------------------------------------
# KV block pool, as in vLLM v1's block pool: blocks with a reference count; the free ones sit in a doubly linked
# queue, least recently freed at the head. With prefix caching a full block also carries the chained hash of its
# content and stays findable in a hash table while free; it is evicted only when the head of the queue is handed
# out for something else. A request's blocks are freed last-block-first, so a prefix's leaves are evicted before
# its root. Rows of `pool` (columns 0..num_blocks-1 are blocks, column num_blocks is the queue's sentinel):
# ---------------------------------------------------------------------------------------------------------
PL_NEXT, PL_PREV, PL_REF, PL_HASH = range(4)
N_POOL_ROWS = 4  # owners are read off the block tables (see _snapshot), not stored per block
NO_HASH = 0  # block hashes are never 0 (see workload.block_hashes)
PRIVATE_BIT = 1 << 62  # workload.PRIVATE_BIT


@njit(cache=True)
def _new_pool(num_blocks):
    pool = np.zeros((N_POOL_ROWS, num_blocks + 1), np.int64)
    sentinel = num_blocks
    for b in range(num_blocks + 1):  # queue in block order: block 0 is handed out first
        pool[PL_NEXT, b] = b + 1 if b < num_blocks else 0
        pool[PL_PREV, b] = b - 1 if b > 0 else sentinel
    if num_blocks == 0:
        pool[PL_NEXT, sentinel] = sentinel
    return pool


@njit(cache=True)
def _queue_remove(pool, b):
    nxt, prv = pool[PL_NEXT, b], pool[PL_PREV, b]
    pool[PL_NEXT, prv] = nxt
    pool[PL_PREV, nxt] = prv


@njit(cache=True)
def _queue_append(pool, b):
    sentinel = pool.shape[1] - 1
    last = pool[PL_PREV, sentinel]
    pool[PL_NEXT, last] = b
    pool[PL_PREV, b] = last
    pool[PL_NEXT, b] = sentinel
    pool[PL_PREV, sentinel] = b


# Hash table from content hash to block id: open addressing, linear probing, backward-shift deletion.
@njit(cache=True)
def _ht_find(ht, h):
    mask = ht.shape[1] - 1
    i = h & mask
    while ht[0, i] != NO_HASH:
        if ht[0, i] == h:
            return ht[1, i]
        i = (i + 1) & mask
    return -1


@njit(cache=True)
def _ht_insert(ht, h, b):
    mask = ht.shape[1] - 1
    i = h & mask
    while ht[0, i] != NO_HASH:
        i = (i + 1) & mask
    ht[0, i] = h
    ht[1, i] = b


@njit(cache=True)
def _ht_delete(ht, h):
    mask = ht.shape[1] - 1
    i = h & mask
    while ht[0, i] != h:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if ht[0, j] == NO_HASH:
            break
        home = ht[0, j] & mask
        # Move j back into the hole at i unless its home slot lies cyclically in (i, j].
        if (i < j and (home <= i or home > j)) or (i > j and home <= i and home > j):
            ht[0, i] = ht[0, j]
            ht[1, i] = ht[1, j]
            i = j
    ht[0, i] = NO_HASH


@njit(cache=True)
def _take_slot(rid, free_slots, slot_of, ctr):
    ctr[C_FREE_SLOTS_TOP] -= 1
    slot_of[rid] = free_slots[ctr[C_FREE_SLOTS_TOP]]


@njit(cache=True)
def _allocate_blocks(rid, count, pool, ht, block_table, slot_of, n_blocks, ctr, acc):
    """Give `count` blocks from the head of the free queue to request `rid` (the caller checked there are enough),
    evicting the cached content of any it takes."""
    slot = slot_of[rid]
    sentinel = pool.shape[1] - 1
    for _ in range(count):
        b = pool[PL_NEXT, sentinel]
        _queue_remove(pool, b)
        ctr[C_FREE_BLOCKS] -= 1
        if pool[PL_HASH, b] != NO_HASH:
            _ht_delete(ht, pool[PL_HASH, b])
            pool[PL_HASH, b] = NO_HASH
            acc[A_EVICTIONS] += 1
        pool[PL_REF, b] = 1
        block_table[slot, n_blocks[rid]] = b
        n_blocks[rid] += 1


@njit(cache=True)
def _cached_prefix(r, total, block_size, pool, ht, req_hashes, hash_off, found):
    """How many leading blocks of r's first `total` tokens are cached (their ids go to `found`), and how many of
    those are free (ref 0). At least one token is always left to compute: its step produces the next token."""
    limit = min((total - 1) // block_size, hash_off[r + 1] - hash_off[r])
    hits = 0
    free_hits = 0
    for j in range(limit):
        b = _ht_find(ht, req_hashes[hash_off[r] + j])
        if b < 0:
            break
        found[hits] = b
        hits += 1
        if pool[PL_REF, b] == 0:
            free_hits += 1
    return hits, free_hits


@njit(cache=True)
def _take_cached_prefix(r, hits, found, pool, block_table, slot_of, n_blocks, n_hashed, ctr):
    """Share r's first `hits` cached blocks, found by _cached_prefix."""
    slot = slot_of[r]
    for j in range(hits):
        b = found[j]
        if pool[PL_REF, b] == 0:
            _queue_remove(pool, b)
            ctr[C_FREE_BLOCKS] -= 1
        pool[PL_REF, b] += 1
        block_table[slot, n_blocks[r]] = b
        n_blocks[r] += 1
    n_hashed[r] = hits


@njit(cache=True)
def _register_full_blocks(r, computed_tokens, block_size, pool, ht, req_hashes, hash_off, block_table, slot_of,
                          n_hashed, first, include_private):
    """Make r's filled blocks from index `first` on findable by content. If identical content is already cached
    in another block, this copy stays uncached (as in vLLM). Blocks only r contains (PRIVATE_BIT) are skipped
    unless include_private: only r itself could find them, after a recompute preemption."""
    full = min(computed_tokens // block_size, hash_off[r + 1] - hash_off[r])
    slot = slot_of[r]
    for j in range(first, full):
        b = block_table[slot, j]
        h = req_hashes[hash_off[r] + j]
        if h >= PRIVATE_BIT and not include_private:
            break  # every later block of r is private too
        if pool[PL_HASH, b] == NO_HASH and _ht_find(ht, h) < 0:
            _ht_insert(ht, h, b)
            pool[PL_HASH, b] = h
    if full > n_hashed[r]:
        n_hashed[r] = full


@njit(cache=True)
def _release(rid, pool, block_table, free_slots, slot_of, n_blocks, n_hashed, ctr):
    """Drop `rid`'s references, last block first; blocks nobody else holds join the free queue's tail (keeping
    their cached content until evicted). Gives back its slot."""
    slot = slot_of[rid]
    for j in range(n_blocks[rid] - 1, -1, -1):
        b = block_table[slot, j]
        pool[PL_REF, b] -= 1
        if pool[PL_REF, b] == 0:
            _queue_append(pool, b)
            ctr[C_FREE_BLOCKS] += 1
    n_blocks[rid] = 0
    n_hashed[rid] = 0
    free_slots[ctr[C_FREE_SLOTS_TOP]] = slot
    ctr[C_FREE_SLOTS_TOP] += 1
    slot_of[rid] = -1


@njit(cache=True)
def _check_pool(pool, ht, ctr, running, slot_of, block_table, n_blocks, n_hashed, req_hashes, hash_off):
    """Every invariant of the block pool, checked from scratch (tests turn this on; O(pool) per step)."""
    num_blocks = pool.shape[1] - 1
    sentinel = num_blocks
    queued = 0
    b = pool[PL_NEXT, sentinel]
    while b != sentinel:
        if pool[PL_REF, b] != 0:
            raise AssertionError("a block in the free queue is referenced")
        queued += 1
        if queued > num_blocks:
            raise AssertionError("the free queue has a cycle")
        b = pool[PL_NEXT, b]
    if queued != ctr[C_FREE_BLOCKS]:
        raise AssertionError("free-queue length differs from the free-block count")
    refs = np.zeros(num_blocks, np.int64)
    for k in range(ctr[C_RUNNING]):
        r = running[k]
        for j in range(n_blocks[r]):
            refs[block_table[slot_of[r], j]] += 1
        for j in range(n_hashed[r]):
            h = pool[PL_HASH, block_table[slot_of[r], j]]
            if h != NO_HASH and h != req_hashes[hash_off[r] + j]:
                raise AssertionError("a request holds a cached block whose content differs from its prompt")
    for b in range(num_blocks):
        if pool[PL_REF, b] < 0:
            raise AssertionError("negative reference count")
        if pool[PL_REF, b] != refs[b]:
            raise AssertionError("reference count differs from the block tables (leaked or double-freed)")
    entries = 0
    for i in range(ht.shape[1]):
        if ht[0, i] != NO_HASH:
            entries += 1
            if pool[PL_HASH, ht[1, i]] != ht[0, i]:
                raise AssertionError("hash table entry points at a block with other content")
    for b in range(num_blocks):
        if pool[PL_HASH, b] != NO_HASH:
            entries -= 1
    if entries != 0:
        raise AssertionError("hashed blocks and hash-table entries differ")


# KV frame cell states, for the dashboard's block grid.
BLOCK_FREE, BLOCK_USED, BLOCK_SHARED, BLOCK_CACHED = 0, 1, 2, 3


@njit(cache=True)
def _snapshot(pool, running, n_running, slot_of, block_table, n_blocks, owner_out, state_out):
    """Each block's state and an owner: a running request holding it (the latest admitted, if shared)."""
    owner_out[:] = -1
    for k in range(n_running):
        r = running[k]
        for j in range(n_blocks[r]):
            owner_out[block_table[slot_of[r], j]] = r
    for b in range(owner_out.shape[0]):
        ref = pool[PL_REF, b]
        if ref > 1:
            state_out[b] = BLOCK_SHARED
        elif ref == 1:
            state_out[b] = BLOCK_USED
        elif pool[PL_HASH, b] != NO_HASH:
            state_out[b] = BLOCK_CACHED
        else:
            state_out[b] = BLOCK_FREE


@njit(cache=True)
def _remove_running(running, rid, ctr):
    j = 0
    while running[j] != rid:
        j += 1
    for m in range(j, ctr[C_RUNNING] - 1):
        running[m] = running[m + 1]
    ctr[C_RUNNING] -= 1


# ---------------------------------------------------------------------------------------------------------
# Growable logs.
# ---------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _grown(log):
    bigger = np.empty((log.shape[0] * 2, log.shape[1]), dtype=log.dtype)
    bigger[: log.shape[0]] = log
    return bigger


@njit(cache=True)
def _log_event(events, ctr, rid, step, kind, tokens):
    """Append an event; returns the log (a new, larger array when it had to grow)."""
    e = ctr[C_EVENTS]
    if e == events.shape[0]:
        events = _grown(events)
    events[e, E_REQUEST] = rid
    events[e, E_STEP] = step
    events[e, E_KIND] = kind
    events[e, E_TOKENS] = tokens
    ctr[C_EVENTS] = e + 1
    return events


@njit(cache=True)
def _record_itl(gap, itl_fine, itl_coarse):
    us = int(gap * 1e6)
    if us < ITL_FINE_BINS:
        itl_fine[us] += 1
    else:
        ms = int(gap * 1e3)
        if ms >= ITL_COARSE_BINS:
            ms = ITL_COARSE_BINS - 1
        itl_coarse[ms] += 1


@njit(cache=True)
def _deadline_s(r, arrival_s, request_class, class_ttft_s, degraded, pol):
    """When request r must have its first token, in device time (client target minus transport overhead)."""
    target = class_ttft_s[request_class[r]]
    if degraded[r]:
        target *= pol[P_DEGRADE_FACTOR]
    return arrival_s[r] + target - pol[P_TRANSPORT_S]


@njit(cache=True)
def _key(r, order, arrival_s, prompt_tokens, generated, request_class, class_ttft_s, degraded, pol, chunk, step_s):
    return waiting_key(order, arrival_s[r], prompt_tokens[r], prompt_tokens[r] + generated[r],
                       _deadline_s(r, arrival_s, request_class, class_ttft_s, degraded, pol), chunk, step_s,
                       pol[P_AGING])


@njit(cache=True)
def _preempt(victim, key, preempt_mode, step, computed, status, preemptions, host_blocks, n_blocks, running,
             tenant_of, wait_keys, wait_ids, q_off, q_size, vtc, swap_keys, swap_ids, pool, block_table,
             free_slots, slot_of, n_hashed, ctr, cost, events, record_events, ht, req_hashes, hash_off,
             block_size):
    """Evict a running request. Swap copies its KV to host memory if there is room (returns the copy time);
    otherwise (or in recompute mode) its KV is dropped and it waits to be prefilled again, generated tokens
    included. Returns (seconds of swap traffic, event log)."""
    _remove_running(running, victim, ctr)
    preemptions[victim] += 1
    held = computed[victim]  # KV tokens it loses (recompute) or moves to host (swap)
    seconds = 0.0
    if preempt_mode == PREEMPT_SWAP and n_blocks[victim] <= ctr[C_SWAP_FREE]:
        seconds = swap_seconds(cost, computed[victim])
        ctr[C_SWAP_FREE] -= n_blocks[victim]
        host_blocks[victim] = n_blocks[victim]
        status[victim] = SWAPPED
        ctr[C_SWAPPED] = _heap_push(swap_keys, swap_ids, ctr[C_SWAPPED], key, victim)
        kind = EV_SWAP_OUT
    else:
        if req_hashes.shape[0] > 0:  # its own blocks stay cached for its return, private ones included
            _register_full_blocks(victim, computed[victim], block_size, pool, ht, req_hashes, hash_off, block_table,
                                  slot_of, n_hashed, 0, True)
        computed[victim] = 0
        status[victim] = WAITING
        _wait_push(tenant_of[victim], key, victim, wait_keys, wait_ids, q_off, q_size, vtc, ctr)
        kind = EV_PREEMPT_RECOMPUTE
    if record_events:
        events = _log_event(events, ctr, victim, step, kind, held)
    _release(victim, pool, block_table, free_slots, slot_of, n_blocks, n_hashed, ctr)
    return seconds, events


@njit(cache=True, nogil=True)  # nogil: several web requests can simulate in parallel threads
def simulate(
    arrival_s, prompt_tokens, output_tokens, request_class, parent, think_s, req_hashes, hash_off,
    order, chunked_prefill, static_batching, preempts_for_priority, preempt_mode,
    token_budget, max_num_seqs, block_size, num_blocks, swap_blocks, max_model_len,
    cost, pol, class_ttft_s, class_tpot_s, class_weight,
    snapshot_times, record_events, max_step_records, debug_checks,
):
    n = arrival_s.shape[0]
    n_classes = class_ttft_s.shape[0]
    # A request with a parent (the next turn of an agent session) arrives think_s after its parent ends; the
    # others (open loop) arrive at arrival_s, which must be non-decreasing over them.
    arrival_s = arrival_s.copy()
    child = np.full(n, -1, np.int64)
    n_open = 0
    for i in range(n):
        if parent[i] >= 0:
            child[parent[i]] = i
            arrival_s[i] = np.inf
        else:
            n_open += 1
    open_ids = np.zeros(n_open, np.int64)
    k = 0
    for i in range(n):
        if parent[i] < 0:
            open_ids[k] = i
            k += 1
    followup_keys = np.zeros(n)
    followup_ids = np.zeros(n, np.int64)
    # --- per-request state ---
    status = np.zeros(n, np.int8)
    reject_reason = np.zeros(n, np.int8)
    degraded = np.zeros(n, np.int8)  # admitted late with a relaxed TTFT target
    computed = np.zeros(n, np.int64)  # tokens whose KV is on the GPU
    generated = np.zeros(n, np.int64)
    on_time_tokens = np.zeros(n, np.int64)  # tokens delivered by their deadline (token goodput)
    n_blocks = np.zeros(n, np.int64)  # GPU blocks held
    host_blocks = np.zeros(n, np.int64)  # blocks held in host swap space
    slot_of = np.full(n, -1, np.int64)
    first_scheduled_s = np.full(n, np.nan)
    first_token_s = np.full(n, np.nan)
    finish_s = np.full(n, np.nan)
    last_token_s = np.full(n, np.nan)
    max_itl_s = np.zeros(n)
    preemptions = np.zeros(n, np.int64)
    cached_prefix = np.full(n, -1, np.int64)  # prompt tokens found in the prefix cache at first admission
    n_hashed = np.zeros(n, np.int64)  # how many of its blocks are registered in the prefix cache
    prefix_caching = req_hashes.shape[0] > 0
    # --- KV block pool and running slots ---
    max_blocks_per_seq = 1  # block-table width: the longest request that can be admitted at all
    for i in range(n):
        full = prompt_tokens[i] + output_tokens[i]
        need = _blocks_for(full, block_size)
        if max_blocks_per_seq < need <= num_blocks and full <= max_model_len:
            max_blocks_per_seq = need
    pool = _new_pool(num_blocks)
    found = np.zeros(max_blocks_per_seq, np.int64)  # scratch: block ids of a cached prefix
    ht_size = 2
    while prefix_caching and ht_size < 2 * num_blocks:
        ht_size *= 2
    ht = np.zeros((2, ht_size), np.int64)
    block_table = np.zeros((max_num_seqs, max_blocks_per_seq), np.int64)
    free_slots = np.arange(max_num_seqs - 1, -1, -1).astype(np.int64)
    ctr = np.zeros(N_COUNTERS, np.int64)
    ctr[C_FREE_BLOCKS] = num_blocks
    ctr[C_FREE_SLOTS_TOP] = max_num_seqs
    ctr[C_SWAP_FREE] = swap_blocks
    # --- queues: running in admission order; waiting as per-tenant heaps; swapped as one heap ---
    fair = order == ORDER_TENANT_SHARE
    n_tenants = n_classes if fair else 1
    tenant_of = request_class.copy() if fair else np.zeros(n, np.int64)
    q_off = np.zeros(n_tenants + 1, np.int64)
    for i in range(n):
        q_off[tenant_of[i] + 1] += 1
    for t in range(n_tenants):
        q_off[t + 1] += q_off[t]
    q_size = np.zeros(n_tenants, np.int64)
    vtc = np.zeros(n_tenants)  # weighted service received per tenant (fair); all zero otherwise
    running = np.zeros(max_num_seqs, np.int64)
    wait_keys = np.zeros(n)
    wait_ids = np.zeros(n, np.int64)
    swap_keys = np.zeros(n)
    swap_ids = np.zeros(n, np.int64)
    # --- this step's batch ---
    sched_req = np.zeros(max_num_seqs, np.int64)
    sched_tokens = np.zeros(max_num_seqs, np.int64)
    sched_admitted = np.zeros(max_num_seqs, np.bool_)
    static_prompt_pad = 0  # static batching: the active batch's padded prompt length (0: no batch)
    # --- step-time estimate for slack (seed 003): measured prefill steps, starting from the cost model ---
    # The adaptive controller moves the budget, starting low and growing while steps stay fast (a big first
    # step would overshoot the bound before any measurement); fixed otherwise.
    budget_now = int(pol[P_BUDGET_MIN]) if pol[P_ADAPTIVE] != 0.0 and not static_batching else token_budget
    first_chunk = token_budget if token_budget < max_model_len else max_model_len
    est = step_cost(cost, first_chunk, first_chunk * (first_chunk + 1) // 2, 0, 0, 0, 1)
    step_est = est[0]
    keyed_step_est = step_est
    # --- outputs ---
    steps = np.zeros((1024, N_STEP_COLS))
    service = np.zeros((1024, n_tenants))
    n_steps_logged = 0
    log_stride = 1
    events = np.zeros((1024 if record_events else 1, N_EVENT_COLS), np.int64)
    acc = np.zeros(N_ACC)
    itl_fine = np.zeros(ITL_FINE_BINS, np.int64)
    itl_coarse = np.zeros(ITL_COARSE_BINS, np.int64)
    n_frames = snapshot_times.shape[0]
    frames = np.full((n_frames, num_blocks), -1, np.int32)
    frame_state = np.zeros((n_frames, num_blocks), np.int8)
    frame_s = np.zeros(n_frames)
    next_frame = 0

    now = 0.0
    next_open = 0
    done = 0  # finished + rejected
    step = 0
    lpm_keyed = False
    while done < n:
        # 1. Arrivals: open-loop ones in order, and follow-up turns whose think time has passed.
        while True:
            if next_open < n_open and arrival_s[open_ids[next_open]] <= now and (
                    ctr[C_FOLLOWUPS] == 0 or arrival_s[open_ids[next_open]] <= followup_keys[0]):
                i = open_ids[next_open]
                next_open += 1
            elif ctr[C_FOLLOWUPS] > 0 and followup_keys[0] <= now:
                i = followup_ids[0]
                ctr[C_FOLLOWUPS] = _heap_pop(followup_keys, followup_ids, ctr[C_FOLLOWUPS])
            else:
                break
            full = prompt_tokens[i] + output_tokens[i]
            reason = REJECT_NONE
            if full > max_model_len:
                reason = REJECT_LONGER_THAN_MODEL
            elif _blocks_for(full, block_size) > num_blocks:
                reason = REJECT_LARGER_THAN_KV_POOL
            elif not chunked_prefill and full > token_budget:
                reason = REJECT_LONGER_THAN_BUDGET
            if reason != REJECT_NONE:
                status[i] = REJECTED
                reject_reason[i] = reason
                finish_s[i] = arrival_s[i]
                done += 1
                if child[i] >= 0:
                    c = child[i]
                    arrival_s[c] = finish_s[i] + think_s[c]
                    ctr[C_FOLLOWUPS] = _heap_push(followup_keys, followup_ids, ctr[C_FOLLOWUPS], arrival_s[c], c)
            else:
                status[i] = WAITING
                _wait_push(tenant_of[i], _key(i, order, arrival_s, prompt_tokens, generated, request_class,
                                              class_ttft_s, degraded, pol, budget_now, step_est),
                           i, wait_keys, wait_ids, q_off, q_size, vtc, ctr)
        while next_frame < n_frames and snapshot_times[next_frame] <= now:
            _snapshot(pool, running, ctr[C_RUNNING], slot_of, block_table, n_blocks, frames[next_frame],
                      frame_state[next_frame])
            frame_s[next_frame] = now
            next_frame += 1
        if done == n:
            break
        if ctr[C_RUNNING] == 0 and ctr[C_WAITING] == 0 and ctr[C_SWAPPED] == 0:
            # Idle until the next arrival.
            nxt = np.inf
            if next_open < n_open:
                nxt = arrival_s[open_ids[next_open]]
            if ctr[C_FOLLOWUPS] > 0 and followup_keys[0] < nxt:
                nxt = followup_keys[0]
            now = nxt
            continue
        # Slack keys depend on the measured step time: re-key the queues when it has drifted by over 10%.
        if order == ORDER_SLACK and abs(step_est - keyed_step_est) > 0.1 * keyed_step_est:
            keyed_step_est = step_est
            for t in range(n_tenants):
                for j in range(q_off[t], q_off[t] + q_size[t]):
                    wait_keys[j] = _key(wait_ids[j], order, arrival_s, prompt_tokens, generated, request_class,
                                        class_ttft_s, degraded, pol, budget_now, step_est)
                _heapify(wait_keys[q_off[t]:q_off[t + 1]], wait_ids[q_off[t]:q_off[t + 1]], q_size[t])
        # Cache-aware order (SGLang's longest prefix match): while the queue is short, longest cached prefix
        # first; past LPM_QUEUE_LIMIT waiting requests matching costs more than it saves, so arrival order.
        if order == ORDER_CACHED_PREFIX and (ctr[C_WAITING] <= LPM_QUEUE_LIMIT or lpm_keyed):
            lpm_keyed = ctr[C_WAITING] <= LPM_QUEUE_LIMIT
            for j in range(ctr[C_WAITING]):
                r = wait_ids[j]
                wait_keys[j] = _key(r, order, arrival_s, prompt_tokens, generated, request_class, class_ttft_s,
                                    degraded, pol, budget_now, step_est)
                if lpm_keyed:
                    hits, _ = _cached_prefix(r, prompt_tokens[r] + generated[r], block_size, pool, ht,
                                             req_hashes, hash_off, found)
                    wait_keys[j] = -float(hits)
            _heapify(wait_keys, wait_ids, ctr[C_WAITING])

        n_sched = 0
        sched_admitted[:] = False
        budget = budget_now
        swap_s = 0.0
        step_preemptions = 0
        step_shed = 0
        if static_batching:
            # ---- request-level static batching ----
            if static_prompt_pad == 0:
                # Form a batch from the waiting queue in order; each member reserves its whole KV.
                while ctr[C_WAITING] > 0 and ctr[C_RUNNING] < max_num_seqs:
                    t = _wait_head(q_size, vtc)
                    r = wait_ids[q_off[t]]
                    need = _blocks_for(prompt_tokens[r] + output_tokens[r], block_size)
                    if need > ctr[C_FREE_BLOCKS]:
                        break
                    _wait_pop(t, wait_keys, wait_ids, q_off, q_size, ctr)
                    _take_slot(r, free_slots, slot_of, ctr)
                    _allocate_blocks(r, need, pool, ht, block_table, slot_of, n_blocks, ctr, acc)
                    status[r] = RUNNING
                    first_scheduled_s[r] = now
                    running[ctr[C_RUNNING]] = r
                    ctr[C_RUNNING] += 1
                    static_prompt_pad = max(static_prompt_pad, prompt_tokens[r])
            batch = ctr[C_RUNNING]
            longest = 0
            for k in range(batch):
                r = running[k]
                longest = max(longest, generated[r])
                if status[r] == RUNNING:
                    sched_req[n_sched] = r
                    sched_tokens[n_sched] = prompt_tokens[r] + generated[r] - computed[r]
                    n_sched += 1
            # Every member, finished or not, occupies its padded row until the batch ends.
            if longest == 0:
                pad = static_prompt_pad
                p_tokens, p_pairs, p_seqs, d_seqs, d_ctx = batch * pad, batch * (pad * (pad + 1) // 2), batch, 0, 0
                if record_events:
                    for q in range(n_sched):
                        events = _log_event(events, ctr, sched_req[q], step, EV_PREFILL, sched_tokens[q])
            else:
                p_tokens, p_pairs, p_seqs, d_seqs = 0, 0, 0, batch
                d_ctx = batch * (static_prompt_pad + longest)
            p_ctx_read = 0
            samples = batch
        else:
            # ---- continuous batching ----
            # 2. Priority preemption: the best waiting request may evict running ones with worse keys.
            if preempts_for_priority and preempt_mode != PREEMPT_NONE and ctr[C_WAITING] > 0:
                t = _wait_head(q_size, vtc)
                head = wait_ids[q_off[t]]
                head_key = wait_keys[q_off[t]]
                need = _blocks_for(prompt_tokens[head] + generated[head], block_size)
                while need > ctr[C_FREE_BLOCKS]:
                    victim = -1
                    for k in range(ctr[C_RUNNING]):
                        r = running[k]
                        if _key(r, order, arrival_s, prompt_tokens, generated, request_class, class_ttft_s,
                                degraded, pol, budget_now, step_est) > head_key:
                            if victim < 0 or generated[r] < generated[victim] or (
                                    generated[r] == generated[victim] and r > victim):
                                victim = r
                    if victim < 0:
                        break
                    seconds, events = _preempt(
                        victim, _key(victim, order, arrival_s, prompt_tokens, generated, request_class,
                                     class_ttft_s, degraded, pol, budget_now, step_est),
                        preempt_mode, step, computed, status, preemptions, host_blocks, n_blocks, running,
                        tenant_of, wait_keys, wait_ids, q_off, q_size, vtc, swap_keys, swap_ids, pool,
                        block_table, free_slots, slot_of, n_hashed, ctr, cost, events, record_events, ht,
                        req_hashes, hash_off, block_size)
                    swap_s += seconds
                    step_preemptions += 1
            priority_preempted = step_preemptions > 0

            # 3. Running requests first: a decode token each, or the next chunk of a partial prompt.
            k = 0
            while k < ctr[C_RUNNING] and budget > 0:
                r = running[k]
                need = min(prompt_tokens[r] + generated[r] - computed[r], budget)
                new_blocks = 0  # most decode steps fit in the last block: skip the division then
                if computed[r] + need > n_blocks[r] * block_size:
                    new_blocks = _blocks_for(computed[r] + need, block_size) - n_blocks[r]
                self_preempted = False
                while new_blocks > ctr[C_FREE_BLOCKS]:
                    # Out of blocks: evict the not-yet-served running request with the least progress.
                    victim = r
                    for j in range(k + 1, ctr[C_RUNNING]):
                        c = running[j]
                        if generated[c] < generated[victim] or (generated[c] == generated[victim] and c > victim):
                            victim = c
                    seconds, events = _preempt(
                        victim, _key(victim, order, arrival_s, prompt_tokens, generated, request_class,
                                     class_ttft_s, degraded, pol, budget_now, step_est),
                        preempt_mode, step, computed, status, preemptions, host_blocks, n_blocks, running,
                        tenant_of, wait_keys, wait_ids, q_off, q_size, vtc, swap_keys, swap_ids, pool,
                        block_table, free_slots, slot_of, n_hashed, ctr, cost, events, record_events, ht,
                        req_hashes, hash_off, block_size)
                    swap_s += seconds
                    step_preemptions += 1
                    if victim == r:
                        self_preempted = True
                        break
                if self_preempted:
                    continue  # running[k] is now the next request
                _allocate_blocks(r, new_blocks, pool, ht, block_table, slot_of, n_blocks, ctr, acc)
                sched_req[n_sched] = r
                sched_tokens[n_sched] = need
                n_sched += 1
                budget -= need
                k += 1
            # vLLM admits nothing new in a step that had to preempt for memory (it would only thrash).
            blocked = step_preemptions > 0 and not priority_preempted

            # 4a. Resume swapped requests before taking new ones, except right after evicting running requests for
            # a better waiting one: that one goes first, or the victims would just come straight back.
            while not blocked and not priority_preempted and ctr[C_SWAPPED] > 0 and ctr[C_RUNNING] < max_num_seqs and budget > 0:
                r = swap_ids[0]
                need = min(prompt_tokens[r] + generated[r] - computed[r], budget)
                total_blocks = _blocks_for(computed[r] + need, block_size)
                if total_blocks > ctr[C_FREE_BLOCKS]:
                    break
                ctr[C_SWAPPED] = _heap_pop(swap_keys, swap_ids, ctr[C_SWAPPED])
                ctr[C_SWAP_FREE] += host_blocks[r]
                host_blocks[r] = 0
                _take_slot(r, free_slots, slot_of, ctr)
                _allocate_blocks(r, total_blocks, pool, ht, block_table, slot_of, n_blocks, ctr, acc)
                swap_s += swap_seconds(cost, computed[r])
                status[r] = RUNNING
                running[ctr[C_RUNNING]] = r
                ctr[C_RUNNING] += 1
                sched_req[n_sched] = r
                sched_tokens[n_sched] = need
                n_sched += 1
                budget -= need
                if record_events:
                    events = _log_event(events, ctr, r, step, EV_SWAP_IN, computed[r])

            # 4b. Admit waiting requests in policy order.
            while (not blocked and (ctr[C_SWAPPED] == 0 or priority_preempted) and ctr[C_WAITING] > 0
                   and ctr[C_RUNNING] < max_num_seqs and budget > 0):
                t = _wait_head(q_size, vtc)
                r = wait_ids[q_off[t]]
                total = prompt_tokens[r] + generated[r]  # nothing computed: new, or requeued for recompute
                if pol[P_ADMISSION] != ADMIT and generated[r] == 0 and np.isnan(first_scheduled_s[r]):
                    # Admission control: the earliest this request's first token can come, if it starts now.
                    if prefix_caching:
                        total -= block_size * _cached_prefix(r, total, block_size, pool, ht, req_hashes, hash_off,
                                                             found)[0]
                    if chunked_prefill:
                        steps_needed = (total + budget_now - 1) // budget_now
                        earliest = now + steps_needed * step_est
                    else:
                        earliest = now + step_cost(cost, total, total * (total + 1) // 2, 0, 0, 0, 1)[0]
                    if earliest > _deadline_s(r, arrival_s, request_class, class_ttft_s, degraded, pol):
                        if pol[P_ADMISSION] == SHED:
                            _wait_pop(t, wait_keys, wait_ids, q_off, q_size, ctr)
                            status[r] = REJECTED
                            reject_reason[r] = REJECT_SHED
                            finish_s[r] = now
                            done += 1
                            step_shed += 1
                            if child[r] >= 0:
                                c = child[r]
                                arrival_s[c] = now + think_s[c]
                                ctr[C_FOLLOWUPS] = _heap_push(followup_keys, followup_ids, ctr[C_FOLLOWUPS],
                                                              arrival_s[c], c)
                            continue
                        if not degraded[r]:
                            # Degrade: admit later with a relaxed target; requeue it under its new key.
                            degraded[r] = 1
                            acc[A_DEGRADED] += 1
                            _wait_pop(t, wait_keys, wait_ids, q_off, q_size, ctr)
                            _wait_push(t, _key(r, order, arrival_s, prompt_tokens, generated, request_class,
                                               class_ttft_s, degraded, pol, budget_now, step_est),
                                       r, wait_keys, wait_ids, q_off, q_size, vtc, ctr)
                            continue
                total = prompt_tokens[r] + generated[r]
                hits, free_hits = 0, 0
                if prefix_caching:
                    hits, free_hits = _cached_prefix(r, total, block_size, pool, ht, req_hashes, hash_off,
                                                     found)
                cached = hits * block_size
                need = total - cached
                if need > budget:
                    if not chunked_prefill:
                        break  # the whole prompt must fit in one step; wait for a step with room
                    need = budget
                if preempt_mode == PREEMPT_NONE:
                    # Nothing can ever be evicted, so a request reserves its whole KV when admitted.
                    new_blocks = _blocks_for(prompt_tokens[r] + output_tokens[r], block_size) - hits
                else:
                    new_blocks = _blocks_for(cached + need, block_size) - hits
                # Admit only if the whole remaining prompt fits (vLLM v0's can_allocate) with a 1% watermark while
                # others run: admitting on the first chunk alone lets half-prefilled prompts evict each other.
                whole = _blocks_for(total, block_size) - hits
                headroom = ctr[C_FREE_BLOCKS] - (num_blocks // 100 if ctr[C_RUNNING] > 0 else 0)
                if max(new_blocks, whole) + free_hits > headroom:
                    break  # head-of-line: later requests wait behind it, as in vLLM
                _wait_pop(t, wait_keys, wait_ids, q_off, q_size, ctr)
                _take_slot(r, free_slots, slot_of, ctr)
                if hits > 0:
                    _take_cached_prefix(r, hits, found, pool, block_table, slot_of, n_blocks, n_hashed, ctr)
                    computed[r] = cached
                    acc[A_CACHED_TOKENS] += cached
                if cached_prefix[r] < 0:
                    cached_prefix[r] = cached
                _allocate_blocks(r, new_blocks, pool, ht, block_table, slot_of, n_blocks, ctr, acc)
                status[r] = RUNNING
                if np.isnan(first_scheduled_s[r]):
                    first_scheduled_s[r] = now
                running[ctr[C_RUNNING]] = r
                ctr[C_RUNNING] += 1
                sched_req[n_sched] = r
                sched_tokens[n_sched] = need
                sched_admitted[n_sched] = True
                n_sched += 1
                budget -= need

            # Batch shape for the cost model; tenants' service for fair sharing. A request admitted this step is
            # prefilling even if the prefix cache left it a single token to compute.
            p_tokens, p_pairs, p_ctx_read, p_seqs, d_seqs, d_ctx, samples = 0, 0, 0, 0, 0, 0, 0
            for q in range(n_sched):
                r = sched_req[q]
                t = sched_tokens[q]
                if not sched_admitted[q] and generated[r] > 0 and computed[r] == prompt_tokens[r] + generated[r] - 1:
                    d_seqs += 1
                    d_ctx += computed[r] + 1
                    vtc[tenant_of[r]] += pol[P_FAIR_OUTPUT_COST] / class_weight[request_class[r]]
                else:
                    p_tokens += t
                    p_seqs += 1
                    p_pairs += t * computed[r] + t * (t + 1) // 2
                    p_ctx_read += computed[r]
                    vtc[tenant_of[r]] += t * pol[P_FAIR_INPUT_COST] / class_weight[request_class[r]]
                    if record_events:
                        events = _log_event(events, ctr, r, step, EV_PREFILL, t)
                if computed[r] + t == prompt_tokens[r] + generated[r]:
                    samples += 1

        if debug_checks and not static_batching:
            _check_pool(pool, ht, ctr, running, slot_of, block_table, n_blocks, n_hashed, req_hashes, hash_off)
        # 5. Run the step.
        if n_sched == 0:
            acc[A_PREEMPTIONS] += step_preemptions
            acc[A_SHED] += step_shed
            if step_preemptions > 0 or step_shed > 0:
                continue  # candidates were evicted or shed this step; the next pass goes on
            break  # cannot happen for valid inputs; the caller reports any request left unfinished
        seconds, moved, flops = step_cost(cost, p_tokens, p_pairs, p_ctx_read, d_seqs, d_ctx, samples)
        seconds += swap_s
        used_blocks = num_blocks - ctr[C_FREE_BLOCKS]
        n_waiting = ctr[C_WAITING]
        acc[A_STEPS] += 1
        acc[A_BUSY_S] += seconds
        acc[A_BYTES] += moved
        acc[A_FLOPS] += flops
        acc[A_KV_BLOCK_S] += used_blocks * seconds
        acc[A_KV_PEAK] = max(acc[A_KV_PEAK], used_blocks)
        acc[A_WAITING_S] += n_waiting * seconds
        acc[A_WAITING_PEAK] = max(acc[A_WAITING_PEAK], n_waiting)
        active = ctr[C_RUNNING]
        if static_batching:  # finished members keep their rows until the batch ends, but are out of the system
            for k in range(ctr[C_RUNNING]):
                if status[running[k]] == FINISHED:
                    active -= 1
        acc[A_IN_SYSTEM_S] += (n_waiting + active + ctr[C_SWAPPED]) * seconds
        acc[A_PREEMPTIONS] += step_preemptions
        acc[A_SHED] += step_shed
        acc[A_PREFILL_TOKENS] += p_tokens
        acc[A_DECODE_TOKENS] += d_seqs
        if step % log_stride == 0:
            if n_steps_logged == max_step_records:
                # Full: keep every other record and sample half as often from now on (bounded memory).
                for q in range(0, n_steps_logged, 2):
                    steps[q // 2] = steps[q]
                    service[q // 2] = service[q]
                n_steps_logged = (n_steps_logged + 1) // 2
                log_stride *= 2
            if step % log_stride == 0:
                if n_steps_logged == steps.shape[0]:
                    steps = _grown(steps)
                    service = _grown(service)
                row = steps[n_steps_logged]
                row[S_START] = now
                row[S_DURATION] = seconds
                row[S_PREFILL_TOKENS] = p_tokens
                row[S_PREFILL_SEQS] = p_seqs
                row[S_DECODE_SEQS] = d_seqs
                row[S_KV_BLOCKS] = used_blocks
                row[S_WAITING] = n_waiting
                row[S_RUNNING] = ctr[C_RUNNING]
                row[S_SWAPPED] = ctr[C_SWAPPED]
                row[S_BYTES] = moved
                row[S_FLOPS] = flops
                row[S_PREEMPTIONS] = step_preemptions
                row[S_TOKEN_BUDGET] = budget_now
                row[S_SHED] = step_shed
                service[n_steps_logged] = vtc
                n_steps_logged += 1
        now += seconds
        step += 1
        if p_tokens > 0:
            step_est = 0.8 * step_est + 0.2 * seconds  # slack estimates use recent prefill steps
        if pol[P_ADAPTIVE] != 0.0 and not static_batching:
            # Seed 003's controller (chunked-prefill schedulers only; runner refuses the others): back off
            # multiplicatively above the bound; grow additively while under it and the budget limited the step,
            # but never past the budget this step's time scales to at the bound (step time grows at most in
            # proportion to tokens, so that budget keeps the next step under the bound).
            bound = pol[P_HEADROOM] * pol[P_ITL_TARGET_S]
            if seconds > bound:
                budget_now = max(int(pol[P_BUDGET_MIN]), int(budget_now * 0.8))
            elif budget < 16 and budget_now < pol[P_BUDGET_MAX]:
                scaled = int(budget_now * bound / seconds)
                grown = min(budget_now + int(pol[P_BUDGET_INCREASE]), scaled, int(pol[P_BUDGET_MAX]))
                budget_now = max(budget_now, grown)


        # Tokens land at the end of the step: a request whose KV now covers all its tokens samples one.
        for q in range(n_sched):
            r = sched_req[q]
            computed[r] += sched_tokens[q]
            # A block just filled up (compared by multiplication: an integer division per token is measurable).
            if prefix_caching and computed[r] >= (n_hashed[r] + 1) * block_size:
                _register_full_blocks(r, computed[r], block_size, pool, ht, req_hashes, hash_off, block_table,
                                      slot_of, n_hashed, n_hashed[r], False)
            if computed[r] != prompt_tokens[r] + generated[r]:
                continue  # mid-prefill
            generated[r] += 1
            c = request_class[r]
            if now <= arrival_s[r] + class_ttft_s[c] - pol[P_TRANSPORT_S] + (generated[r] - 1) * class_tpot_s[c]:
                on_time_tokens[r] += 1
            if generated[r] == 1:
                first_token_s[r] = now
            else:
                gap = now - last_token_s[r]
                _record_itl(gap, itl_fine, itl_coarse)
                acc[A_ITL_SUM] += gap
                acc[A_ITL_COUNT] += 1
                max_itl_s[r] = max(max_itl_s[r], gap)
            last_token_s[r] = now
            if generated[r] == output_tokens[r]:
                status[r] = FINISHED
                finish_s[r] = now
                done += 1
                if child[r] >= 0:
                    c = child[r]
                    arrival_s[c] = now + think_s[c]
                    ctr[C_FOLLOWUPS] = _heap_push(followup_keys, followup_ids, ctr[C_FOLLOWUPS], arrival_s[c], c)
                if not static_batching:
                    _remove_running(running, r, ctr)
                    _release(r, pool, block_table, free_slots, slot_of, n_blocks, n_hashed, ctr)
        if static_batching:
            batch_done = True
            for k in range(ctr[C_RUNNING]):
                if status[running[k]] != FINISHED:
                    batch_done = False
            if batch_done:  # release the whole batch at once
                for k in range(ctr[C_RUNNING]):
                    _release(running[k], pool, block_table, free_slots, slot_of, n_blocks, n_hashed, ctr)
                ctr[C_RUNNING] = 0
                static_prompt_pad = 0

    while next_frame < n_frames:
        _snapshot(pool, running, ctr[C_RUNNING], slot_of, block_table, n_blocks, frames[next_frame],
                  frame_state[next_frame])
        frame_s[next_frame] = now
        next_frame += 1
    acc[A_END_S] = now
    return (arrival_s, status, reject_reason, generated, first_scheduled_s, first_token_s, finish_s, max_itl_s,
            preemptions, degraded, on_time_tokens, cached_prefix, steps[:n_steps_logged].copy(),
            service[:n_steps_logged].copy(), log_stride, events[: ctr[C_EVENTS]].copy(), acc, itl_fine, itl_coarse,
            frames, frame_state, frame_s, ctr[C_FREE_BLOCKS], ctr[C_SWAP_FREE], pool[PL_REF, :num_blocks].copy())
