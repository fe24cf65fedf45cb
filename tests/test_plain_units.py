"""Kernel internals driven one by one. Records are plain namespaces only when numba is off, so these run under
NUMBA_DISABLE_JIT=1 (tests/test_plain_python.py starts that run; here they are skipped)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import config

from sim_core.kernel import kv_pool, queues, state
from sim_core.kernel.logs import itl_bin

pytestmark = pytest.mark.skipif(not config.DISABLE_JIT, reason="run by test_plain_python.py with NUMBA_DISABLE_JIT=1")


def _request_table(n: int):
    req = state.new_record(state.REQUEST_TABLE)
    req.hashes, req.hash_off = np.zeros(0, np.int64), np.zeros(n + 1, np.int64)
    return req


def test_the_pool_check_catches_a_corrupted_pool():
    kv = kv_pool.new_kv_cache(4, 1, 4, 0, False, 1)
    running = np.zeros(1, np.int64)
    kv_pool.check_pool(kv, _request_table(1), running, 0)  # consistent: passes
    kv.links[kv_pool.PL_REF, 2] = 1  # referenced but still queued as free
    with pytest.raises(AssertionError, match="free queue is referenced"):
        kv_pool.check_pool(kv, _request_table(1), running, 0)


def test_allocate_release_and_reuse_keep_the_pool_consistent():
    kv = kv_pool.new_kv_cache(6, 2, 4, 0, True, 2)
    acc = np.zeros(state.N_ACC)
    for r in (0, 1):
        kv_pool.take_slot(kv, r)
        kv_pool.allocate(kv, r, 3, acc)
    assert kv.free[state.KV_BLOCKS] == 0
    running = np.array([0, 1], np.int64)
    kv_pool.check_pool(kv, _request_table(2), running, 2)
    kv_pool.release(kv, 1)
    assert kv.free[state.KV_BLOCKS] == 3 and kv.slot_of[1] == -1
    kv_pool.check_pool(kv, _request_table(2), running, 1)


def test_cached_prefix_finds_registered_blocks_and_leaves_a_token_to_compute():
    kv = kv_pool.new_kv_cache(8, 2, 4, 0, True, 2)
    req = _request_table(2)
    req.hashes = np.array([11, 12, 13, 11, 12, 99], np.int64)  # request 1 shares request 0's first two blocks
    req.hash_off = np.array([0, 3, 6], np.int64)
    acc = np.zeros(state.N_ACC)
    kv_pool.take_slot(kv, 0)
    kv_pool.allocate(kv, 0, 3, acc)
    kv_pool.register_full_blocks(kv, req, 0, 48, 16, 0, False)
    assert kv_pool.cached_prefix(kv, req, 1, 48, 16) == (2, 0)  # block 3 differs; all held, none free
    assert kv_pool.cached_prefix(kv, req, 0, 48, 16) == (2, 0)  # a full-prompt hit still computes 1 token


def _free_queue(kv):
    links, sentinel = kv.links, kv.links.shape[1] - 1
    order, b = [], links[kv_pool.PL_NEXT, sentinel]
    while b != sentinel:
        order.append(int(b))
        b = links[kv_pool.PL_NEXT, b]
    return order


def test_freed_blocks_without_a_hash_are_reused_first_and_hashed_ones_evicted_last():
    """vLLM v1's free_blocks: a request's blocks are freed last first; those without a hash go to the head of the
    free queue in that order, hashed ones to its tail."""
    kv = kv_pool.new_kv_cache(6, 1, 6, 0, True, 1)
    req = _request_table(1)
    req.hashes, req.hash_off = np.array([21, 22, 23], np.int64), np.array([0, 3], np.int64)
    acc = np.zeros(state.N_ACC)
    kv_pool.take_slot(kv, 0)
    kv_pool.allocate(kv, 0, 5, acc)  # blocks 0-4; block 5 stays free
    kv_pool.register_full_blocks(kv, req, 0, 40, 16, 0, False)  # 40 tokens fill blocks 0 and 1
    kv_pool.release(kv, 0)
    assert _free_queue(kv) == [4, 3, 2, 5, 1, 0]
    kv_pool.check_pool(kv, req, np.zeros(1, np.int64), 0)


def test_copies_of_the_same_content_stay_findable_until_each_is_evicted():
    """Two blocks holding one prefix (two requests computed it side by side): evicting the copy a lookup finds
    leaves the other one to find, as vLLM's BlockHashToBlockMap keeps every copy."""
    kv = kv_pool.new_kv_cache(4, 3, 4, 0, True, 3)
    req = _request_table(3)
    req.hashes, req.hash_off = np.array([31, 31, 31], np.int64), np.array([0, 1, 2, 3], np.int64)
    acc = np.zeros(state.N_ACC)
    for r in (0, 1):
        kv_pool.take_slot(kv, r)
        kv_pool.allocate(kv, r, 1, acc)
        kv_pool.register_full_blocks(kv, req, r, 16, 16, 0, False)
    kv_pool.check_pool(kv, req, np.array([0, 1], np.int64), 2)
    assert kv_pool.cached_prefix(kv, req, 2, 17, 16) == (1, 0) and kv.found[0] == 0  # the first copy
    kv_pool.release(kv, 0)
    kv_pool.release(kv, 1)
    assert _free_queue(kv) == [2, 3, 0, 1]
    kv_pool.take_slot(kv, 2)
    kv_pool.allocate(kv, 2, 3, acc)  # takes 2, 3 and evicts copy 0
    assert acc[state.A_EVICTIONS] == 1
    assert kv_pool.cached_prefix(kv, req, 2, 17, 16) == (1, 1) and kv.found[0] == 1  # copy 1 is still there
    kv_pool.check_pool(kv, req, np.array([2], np.int64), 1)


def test_private_content_is_hashed_but_findable_only_after_its_request_is_preempted():
    kv = kv_pool.new_kv_cache(4, 2, 2, 0, True, 2)
    req = _request_table(2)
    private = kv_pool.PRIVATE_BIT | 41
    req.hashes, req.hash_off = np.array([private, private], np.int64), np.array([0, 1, 2], np.int64)
    acc = np.zeros(state.N_ACC)
    kv_pool.take_slot(kv, 0)
    kv_pool.allocate(kv, 0, 2, acc)
    kv_pool.register_full_blocks(kv, req, 0, 16, 16, 0, False)
    assert kv.links[kv_pool.PL_HASH, 0] == private and kv_pool.cached_prefix(kv, req, 1, 17, 16)[0] == 0
    kv_pool.register_full_blocks(kv, req, 0, 16, 16, 0, True)  # a recompute preemption keeps it for its return
    assert kv_pool.cached_prefix(kv, req, 1, 17, 16)[0] == 1
    kv_pool.check_pool(kv, req, np.zeros(1, np.int64), 1)
    kv_pool.release(kv, 0)
    assert _free_queue(kv) == [1, 2, 3, 0]  # hashed: evicted last, like any cached block


def test_heaps_pop_in_key_order_with_ties_to_the_smaller_id():
    keys, ids = np.zeros(8), np.zeros(8, np.int64)
    size = 0
    for key, rid in ((3.0, 5), (1.0, 7), (3.0, 2), (2.0, 1), (1.0, 4)):
        size = queues.heap_push(keys, ids, size, key, rid)
    order = []
    while size:
        order.append(int(ids[0]))
        size = queues.heap_pop(keys, ids, size)
    assert order == [4, 7, 1, 2, 5]


def test_itl_bins_are_microseconds_then_milliseconds():
    assert itl_bin(0.25) == (250000, -1)
    assert itl_bin(2.5) == (-1, 2500)
    assert itl_bin(5000.0) == (-1, state.ITL_COARSE_BINS - 1)


def _tiered_kv(cpu: int, disk: int, policy: int = 0):
    from sim_core.kernel import kv_tiers as T
    kv = kv_pool.new_kv_cache(4, 1, 4, 0, True, 1)
    par = np.zeros(T.N_TIER_PARAMS)
    par[T.TP_CPU_BLOCKS], par[T.TP_DISK_BLOCKS], par[T.TP_POLICY] = cpu, disk, policy
    par[T.TP_HOST_BW], par[T.TP_DISK_READ_BW], par[T.TP_DISK_WRITE_BW], par[T.TP_BLOCK_BYTES] = 4.0, 1.0, 2.0, 8.0
    T.new_tiers(kv, par)
    return kv, T


def test_lower_tiers_keep_the_newest_and_demote_host_overflow_to_disk():
    kv, T = _tiered_kv(cpu=2, disk=2)
    for h in (101, 102, 103):  # the third pushes the oldest (101) down to disk
        T.tier_store(kv, h, T.LOW_CPU)
        T.check_tiers(kv)
    width = kv.tier_ring.shape[1]
    where = {h: kv_pool._table_find(kv.tier_table, h) // width for h in (101, 102, 103)}
    assert where == {101: T.LOW_DISK, 102: T.LOW_CPU, 103: T.LOW_CPU}
    T.tier_store(kv, 102, T.LOW_CPU)  # already there: refreshed, nothing copied
    cpu = T.TIER_CPU * T.N_TS
    assert kv.tier_stats[cpu + T.TS_BYTES_IN] == 3 * 8.0
    for h in (104, 105, 106):  # 103 then 102 fall to disk, pushing 101 and 103 out of it for good
        T.tier_store(kv, h, T.LOW_CPU)
        T.check_tiers(kv)
    assert kv_pool._table_find(kv.tier_table, 101) < 0
    assert kv.tier_n[T.H_LIVE] == 2 and kv.tier_n[T.N_H + T.H_LIVE] == 2
    assert kv.tier_stats[T.TIER_DISK * T.N_TS + T.TS_EVICTED] == 2


def test_tier_check_catches_a_leaked_entry():
    kv, T = _tiered_kv(cpu=2, disk=0)
    T.tier_store(kv, 101, T.LOW_CPU)
    kv.tier_ring[0, 3] = 555  # content outside the ring's window
    with pytest.raises(AssertionError, match="leaked"):
        T.check_tiers(kv)


def test_evicting_a_cached_gpu_block_writes_it_down():
    kv, T = _tiered_kv(cpu=4, disk=0)
    req = _request_table(1)
    req.hashes, req.hash_off = np.array([71, 72], np.int64), np.array([0, 2], np.int64)
    acc = np.zeros(state.N_ACC)
    kv_pool.take_slot(kv, 0)
    kv_pool.allocate(kv, 0, 2, acc)
    kv_pool.register_full_blocks(kv, req, 0, 32, 16, 0, False)
    kv_pool.release(kv, 0)
    kv_pool.take_slot(kv, 0)
    kv_pool.allocate(kv, 0, 4, acc)  # takes every block: both cached ones are evicted, and written down
    assert acc[state.A_EVICTIONS] == 2 and kv.tier_n[T.H_LIVE] == 2
    assert T.lower_prefix(kv, req, 0, 0, 33, 16) == 2 and kv.tier_found[T.LOW_CPU] == 2
