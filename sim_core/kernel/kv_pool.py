"""The KV block pool, as in vLLM v1's block pool and KV cache manager.

Blocks carry a reference count; the free ones sit in a doubly linked queue and are handed out from its head. With
prefix caching a full block also carries the chained hash of its content, set as soon as the block is scheduled to
be filled (so a request admitted later in the same step already finds it), and stays findable in a hash table
while free; it is evicted only when the head of the queue is handed out for something else. Several blocks may
hold the same content (two requests computing one prefix side by side): each is findable until evicted. A request's
blocks are freed last block first: those without a hash go to the head of the queue (reused first), hashed ones to
its tail (evicted last, least recently freed first), so a prefix's leaves are evicted before its root. Each running
request owns one row of the block table (a "slot"). Everything here works on one KV_CACHE record (state.py).
"""

from __future__ import annotations

import numpy as np

from .content_hash import PRIVATE_BIT
from .jit import allocating_kernel, inline, kernel
from .kv_table import NO_HASH, _table_delete, _table_find, _table_insert, _table_slot
from .kv_tiers import (
    LOW_CPU,
    N_TIER_PARAMS,
    POLICY_EVICT,
    POLICY_STORE,
    TP_POLICY,
    new_tiers,
    tier_store,
    tiers_on,
)
from .state import (
    A_EVICTIONS,
    BLOCK_CACHED,
    BLOCK_FREE,
    BLOCK_SHARED,
    BLOCK_USED,
    KV_BLOCKS,
    KV_CACHE,
    KV_SLOTS,
    new_record,
)

# Rows of KVCache.links.
PL_NEXT, PL_PREV, PL_REF, PL_HASH = range(4)
N_POOL_ROWS = 4


@allocating_kernel
def new_kv_cache(num_blocks, max_num_seqs, max_blocks_per_seq, swap_blocks, prefix_caching, n_requests):
    """An empty pool whose free queue hands out blocks in id order (its lower tiers: kv_tiers.new_tiers)."""
    links = np.zeros((N_POOL_ROWS, num_blocks + 1), np.int64)
    sentinel = num_blocks
    for b in range(num_blocks + 1):
        links[PL_NEXT, b] = b + 1 if b < num_blocks else 0
        links[PL_PREV, b] = b - 1 if b > 0 else sentinel
    if num_blocks == 0:
        links[PL_NEXT, sentinel] = sentinel
    table_size = 2
    while prefix_caching and table_size < 2 * num_blocks:
        table_size *= 2
    kv = new_record(KV_CACHE)
    kv.links = links
    kv.table = np.zeros((2, table_size), np.int64)
    kv.block_table = np.zeros((max_num_seqs, max_blocks_per_seq), np.int64)
    kv.slot_of = np.full(n_requests, -1, np.int64)
    kv.free_slots = np.arange(max_num_seqs - 1, -1, -1).astype(np.int64)
    kv.n_blocks = np.zeros(n_requests, np.int64)
    kv.n_hashed = np.zeros(n_requests, np.int64)
    kv.host_blocks = np.zeros(n_requests, np.int64)
    kv.found = np.zeros(max_blocks_per_seq, np.int64)
    kv.free = np.array([num_blocks, max_num_seqs, swap_blocks], np.int64)
    new_tiers(kv, np.zeros(N_TIER_PARAMS))  # none (build.py gives the engine's its configured ones)
    return kv


@inline
def blocks_for(tokens, block_size):
    return (tokens + block_size - 1) // block_size


# ----- the free queue -----
@inline
def _queue_remove(links, b):
    nxt, prv = links[PL_NEXT, b], links[PL_PREV, b]
    links[PL_NEXT, prv] = nxt
    links[PL_PREV, nxt] = prv


@inline
def _queue_insert_after(links, a, b):
    nxt = links[PL_NEXT, a]
    links[PL_NEXT, a] = b
    links[PL_PREV, b] = a
    links[PL_NEXT, b] = nxt
    links[PL_PREV, nxt] = b


@inline
def _queue_append(links, b):
    sentinel = links.shape[1] - 1
    last = links[PL_PREV, sentinel]
    links[PL_NEXT, last] = b
    links[PL_PREV, b] = last
    links[PL_NEXT, b] = sentinel
    links[PL_PREV, sentinel] = b


# ----- requests' blocks -----
@inline
def take_slot(kv, r):
    kv.free[KV_SLOTS] -= 1
    kv.slot_of[r] = kv.free_slots[kv.free[KV_SLOTS]]


@kernel
def allocate(kv, r, count, acc):
    """Give `count` blocks from the head of the free queue to request r (the caller checked there are enough),
    evicting the cached content of any it takes."""
    links = kv.links
    slot = kv.slot_of[r]
    sentinel = links.shape[1] - 1
    for _ in range(count):
        b = links[PL_NEXT, sentinel]
        _queue_remove(links, b)
        kv.free[KV_BLOCKS] -= 1
        if links[PL_HASH, b] != NO_HASH:
            if _table_delete(kv.table, links[PL_HASH, b], b):
                acc[A_EVICTIONS] += 1
                # Evict-to-lower-tier: the evicted content is written down instead of lost.
                if tiers_on(kv) and kv.tier_par[TP_POLICY] == POLICY_EVICT:
                    tier_store(kv, links[PL_HASH, b], LOW_CPU)
            links[PL_HASH, b] = NO_HASH
        links[PL_REF, b] = 1
        kv.block_table[slot, kv.n_blocks[r]] = b
        kv.n_blocks[r] += 1


@kernel
def cached_prefix(kv, req, r, total, block_size):
    """How many leading blocks of r's first `total` tokens are cached (their ids go to kv.found), and how many of
    those are free (ref 0). At least one token is always left to compute: its step produces the next token."""
    lo = req.hash_off[r]
    limit = min((total - 1) // block_size, req.hash_off[r + 1] - lo)
    hits = 0
    free_hits = 0
    for j in range(limit):
        b = _table_find(kv.table, req.hashes[lo + j])
        if b < 0:
            break
        kv.found[hits] = b
        hits += 1
        if kv.links[PL_REF, b] == 0:
            free_hits += 1
    return hits, free_hits


@kernel
def take_cached_prefix(kv, r, hits):
    """Share r's first `hits` cached blocks, found by cached_prefix."""
    links = kv.links
    slot = kv.slot_of[r]
    for j in range(hits):
        b = kv.found[j]
        if links[PL_REF, b] == 0:
            _queue_remove(links, b)
            kv.free[KV_BLOCKS] -= 1
        links[PL_REF, b] += 1
        kv.block_table[slot, kv.n_blocks[r]] = b
        kv.n_blocks[r] += 1
    kv.n_hashed[r] = hits


@kernel
def register_full_blocks(kv, req, r, tokens, block_size, first, include_private):
    """Give r's blocks from index `first` that its first `tokens` tokens fill their content hash, making them
    findable (vLLM v1 does this when the tokens are scheduled, not once computed). A copy of content already cached
    elsewhere is findable too. Content only r contains (PRIVATE_BIT) is hashed but kept out of the table unless
    include_private: only r itself could find it, after a recompute preemption."""
    lo = req.hash_off[r]
    full = min(tokens // block_size, req.hash_off[r + 1] - lo)
    slot = kv.slot_of[r]
    for j in range(first, full):
        b = kv.block_table[slot, j]
        h = req.hashes[lo + j]
        fresh = kv.links[PL_HASH, b] == NO_HASH
        if fresh:
            kv.links[PL_HASH, b] = h
        if h < PRIVATE_BIT:
            if fresh:
                _table_insert(kv.table, h, b)
                # Store-on-compute: every new full shared block is also written down as it is computed.
                if tiers_on(kv) and kv.tier_par[TP_POLICY] == POLICY_STORE:
                    tier_store(kv, h, LOW_CPU)
        elif include_private and _table_slot(kv.table, h, b) < 0:
            _table_insert(kv.table, h, b)
    if full > kv.n_hashed[r]:
        kv.n_hashed[r] = full


@kernel
def release(kv, r):
    """Drop r's references, last block first. Blocks nobody else holds are free again: those without a hash go to
    the head of the free queue in that order (reused first), hashed ones to its tail (their content stays cached
    until evicted), as vLLM v1's free_blocks. Gives back its slot."""
    links = kv.links
    slot = kv.slot_of[r]
    head = links.shape[1] - 1  # the sentinel: the next block without a hash goes after it
    for j in range(kv.n_blocks[r] - 1, -1, -1):
        b = kv.block_table[slot, j]
        links[PL_REF, b] -= 1
        if links[PL_REF, b] == 0:
            if links[PL_HASH, b] == NO_HASH:
                _queue_insert_after(links, head, b)
                head = b
            else:
                _queue_append(links, b)
            kv.free[KV_BLOCKS] += 1
    kv.n_blocks[r] = 0
    kv.n_hashed[r] = 0
    kv.free_slots[kv.free[KV_SLOTS]] = slot
    kv.free[KV_SLOTS] += 1
    kv.slot_of[r] = -1


# ----- inspection -----
@kernel
def snapshot(kv, running, n_running, owner_out, state_out):
    """Each block's state and an owner: a running request holding it (the latest admitted, if shared)."""
    owner_out[:] = -1
    for k in range(n_running):
        r = running[k]
        for j in range(kv.n_blocks[r]):
            owner_out[kv.block_table[kv.slot_of[r], j]] = r
    for b in range(owner_out.shape[0]):
        ref = kv.links[PL_REF, b]
        if ref > 1:
            state_out[b] = BLOCK_SHARED
        elif ref == 1:
            state_out[b] = BLOCK_USED
        elif kv.links[PL_HASH, b] != NO_HASH:
            state_out[b] = BLOCK_CACHED
        else:
            state_out[b] = BLOCK_FREE


@kernel
def _check_free_queue(kv):
    links = kv.links
    num_blocks = links.shape[1] - 1
    queued = 0
    b = links[PL_NEXT, num_blocks]
    while b != num_blocks:
        if links[PL_REF, b] != 0:
            raise AssertionError("a block in the free queue is referenced")
        queued += 1
        if queued > num_blocks:
            raise AssertionError("the free queue has a cycle")
        b = links[PL_NEXT, b]
    if queued != kv.free[KV_BLOCKS]:
        raise AssertionError("free-queue length differs from the free-block count")


@allocating_kernel
def check_pool(kv, req, running, n_running):
    """Every invariant of the block pool, checked from scratch (tests turn this on; O(pool) per step)."""
    _check_free_queue(kv)
    links = kv.links
    num_blocks = links.shape[1] - 1
    refs = np.zeros(num_blocks, np.int64)
    for k in range(n_running):
        r = running[k]
        for j in range(kv.n_blocks[r]):
            refs[kv.block_table[kv.slot_of[r], j]] += 1
        for j in range(kv.n_hashed[r]):
            h = links[PL_HASH, kv.block_table[kv.slot_of[r], j]]
            if h != NO_HASH and h != req.hashes[req.hash_off[r] + j]:
                raise AssertionError("a request holds a cached block whose content differs from its prompt")
    for b in range(num_blocks):
        if links[PL_REF, b] < 0:
            raise AssertionError("negative reference count")
        if links[PL_REF, b] != refs[b]:
            raise AssertionError("reference count differs from the block tables (leaked or double-freed)")
    entries = 0
    for i in range(kv.table.shape[1]):
        if kv.table[0, i] != NO_HASH:
            entries += 1
            if links[PL_HASH, kv.table[1, i]] != kv.table[0, i]:
                raise AssertionError("hash table entry points at a block with other content")
    for b in range(num_blocks):
        h = links[PL_HASH, b]
        if h != NO_HASH:
            if h < PRIVATE_BIT and _table_slot(kv.table, h, b) < 0:
                raise AssertionError("a block with shared content is missing from the hash table")
            if _table_slot(kv.table, h, b) >= 0:
                entries -= 1
    if entries != 0:
        raise AssertionError("hash-table entries that no block holds (or one block entered twice)")
