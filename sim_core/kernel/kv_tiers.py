"""Lower KV tiers under the GPU block pool: host memory (CPU) and local disk (NVMe), as vLLM's CPU offloading,
SGLang's HiCache and LMCache keep them (issue #23; sim_core/data/kv_tiers.json cites the figures).

Each lower tier holds block *contents* (chained hashes, as the prefix cache keys them), at most `cap` of them,
oldest out first: a ring of 2 x cap positions (a refreshed entry leaves a tombstone behind and moves to the newest
end) and one hash table over both tiers, content -> tier x width + position. A content sits in one lower tier at a
time. What falls out of the CPU tier goes down to disk (if there is one); what falls out of disk is gone.

Policies (TP_POLICY): POLICY_EVICT writes a block down when the GPU pool evicts its cached content (vLLM's native
CPU offload, HiCache); POLICY_STORE writes each full shared block as soon as it is computed (LMCache's
store-on-compute). Writes run on their own copy stream: they take link time and bytes, never a step's time (a
block reused before its copy ends is not modelled). Loads block: a request admitted with its prefix found in a
lower tier waits for those blocks before its prefill (scheduler._admit counts the load time into the step's, in
engine.run_batch), or, with TP_OVERLAP, loads them layer by layer under the step's compute.

Everything lives in the KV_CACHE record (tier_* fields), so the GPU pool's eviction (kv_pool.allocate) can write
down without another argument. With both capacities 0 nothing here runs and the engine is as before.
"""

from __future__ import annotations

import numpy as np

from .jit import allocating_kernel, inline, kernel
from .kv_table import NO_HASH, _table_delete, _table_find, _table_insert

# The tier parameter vector (Config.kv_tiers), built by sim_core/kv_offload.py.
(TP_CPU_BLOCKS, TP_DISK_BLOCKS, TP_POLICY, TP_HOST_BW, TP_DISK_READ_BW, TP_DISK_WRITE_BW, TP_BLOCK_BYTES,
 TP_OVERLAP) = range(8)
N_TIER_PARAMS = 8
POLICY_EVICT, POLICY_STORE = 0, 1
# Lower tiers, and the rows of kv.tier_n (per tier: ring head, ring positions in use, live entries, capacity).
LOW_CPU, LOW_DISK = 0, 1
H_HEAD, H_USED, H_LIVE, H_CAP = range(4)
N_H = 4
# kv.tier_stats: per tier (TIER_GPU, TIER_CPU, TIER_DISK) N_TS figures.
TIER_GPU, TIER_CPU, TIER_DISK = 0, 1, 2
TS_HIT_TOKENS, TS_BYTES_IN, TS_BYTES_OUT, TS_LINK_S, TS_EVICTED, TS_LOAD_S = range(6)
N_TS = 6


@allocating_kernel
def new_tiers(kv, par):
    """Empty lower tiers of par[TP_CPU_BLOCKS] and par[TP_DISK_BLOCKS] blocks (both 0: off, tiny arrays)."""
    cpu, disk = int(par[TP_CPU_BLOCKS]), int(par[TP_DISK_BLOCKS])
    table_size = 2
    while table_size < 2 * (cpu + disk):  # at most half full: tombstones hold no entry
        table_size *= 2
    kv.tier_par = par
    kv.tier_table = np.zeros((2, table_size), np.int64)
    kv.tier_ring = np.zeros((2, max(2 * cpu, 2 * disk, 1)), np.int64)
    kv.tier_n = np.zeros(2 * N_H, np.int64)
    kv.tier_n[LOW_CPU * N_H + H_CAP] = cpu
    kv.tier_n[LOW_DISK * N_H + H_CAP] = disk
    kv.tier_stats = np.zeros(3 * N_TS)
    kv.tier_found = np.zeros(2, np.int64)


@inline
def tiers_on(kv):
    return kv.tier_n[H_CAP] + kv.tier_n[N_H + H_CAP] > 0


@kernel
def _pop_head(kv, t):
    """Free the oldest ring position of tier t; the content it held (now evicted), or NO_HASH (a tombstone)."""
    n, base = kv.tier_n, t * N_H
    head = n[base + H_HEAD]
    h = kv.tier_ring[t, head]
    kv.tier_ring[t, head] = NO_HASH
    n[base + H_HEAD] = (head + 1) % (2 * n[base + H_CAP])
    n[base + H_USED] -= 1
    if h != NO_HASH:
        _table_delete(kv.tier_table, h, t * kv.tier_ring.shape[1] + head)
        n[base + H_LIVE] -= 1
        kv.tier_stats[(t + 1) * N_TS + TS_EVICTED] += 1
    return h


@kernel
def _append(kv, t, h):
    """Put content h at tier t's newest end, making room first; what that evicted (at most one), or NO_HASH."""
    n, base = kv.tier_n, t * N_H
    cap = n[base + H_CAP]
    evicted = NO_HASH
    while n[base + H_LIVE] >= cap or n[base + H_USED] == 2 * cap:
        out = _pop_head(kv, t)
        if out != NO_HASH:
            evicted = out
    pos = (n[base + H_HEAD] + n[base + H_USED]) % (2 * cap)
    kv.tier_ring[t, pos] = h
    n[base + H_USED] += 1
    n[base + H_LIVE] += 1
    _table_insert(kv.tier_table, h, t * kv.tier_ring.shape[1] + pos)
    return evicted


@kernel
def _refresh(kv, code, h):
    """Move the entry `code` (content h) to its tier's newest end; what that evicted, or NO_HASH."""
    width = kv.tier_ring.shape[1]
    t, pos = code // width, code % width
    _table_delete(kv.tier_table, h, code)
    kv.tier_ring[t, pos] = NO_HASH  # a tombstone: its position is freed when the head passes it
    kv.tier_n[t * N_H + H_LIVE] -= 1
    return _append(kv, t, h)


@kernel
def tier_store(kv, h, t):
    """Write content h down to lower tier t (one of no capacity passes it on to disk). Content already in a lower
    tier is only refreshed there (nothing to copy). The CPU tier's oldest entry, pushed out, goes to disk."""
    par, stats = kv.tier_par, kv.tier_stats
    if t == LOW_CPU and kv.tier_n[H_CAP] == 0:
        t = LOW_DISK
    if t == LOW_DISK and kv.tier_n[N_H + H_CAP] == 0:
        return
    block = par[TP_BLOCK_BYTES]
    while True:
        code = _table_find(kv.tier_table, h)
        if code >= 0:
            t = code // kv.tier_ring.shape[1]
            evicted = _refresh(kv, code, h)
        else:
            evicted = _append(kv, t, h)
            stats[(t + 1) * N_TS + TS_BYTES_IN] += block
            bw = par[TP_HOST_BW] if t == LOW_CPU else par[TP_DISK_WRITE_BW]
            stats[(t + 1) * N_TS + TS_LINK_S] += block / bw
        if evicted == NO_HASH or t == LOW_DISK or kv.tier_n[N_H + H_CAP] == 0:
            return
        h, t = evicted, LOW_DISK


@inline
def snapshot_tiers(kv, row):
    """row[LOW_CPU], row[LOW_DISK]: the blocks each lower tier holds now (a KV frame's; untouched when off)."""
    if tiers_on(kv):
        row[LOW_CPU] = kv.tier_n[LOW_CPU * N_H + H_LIVE]
        row[LOW_DISK] = kv.tier_n[LOW_DISK * N_H + H_LIVE]


@kernel
def lower_prefix(kv, req, r, first, total, block_size):
    """How many of r's blocks from index `first` (the end of its GPU-cached prefix) the lower tiers hold, one after
    another (kv.tier_found: how many from each). Like cached_prefix, leaves at least one token to compute."""
    lo = req.hash_off[r]
    limit = min((total - 1) // block_size, req.hash_off[r + 1] - lo)
    width = kv.tier_ring.shape[1]
    kv.tier_found[LOW_CPU] = 0
    kv.tier_found[LOW_DISK] = 0
    j = first
    while j < limit:
        code = _table_find(kv.tier_table, req.hashes[lo + j])
        if code < 0:
            break
        kv.tier_found[code // width] += 1
        j += 1
    return j - first


@kernel
def tier_load(kv, req, r, first, count, block_size):
    """Load r's `count` blocks from index `first`, found by lower_prefix, into the GPU blocks the caller gave it;
    each stays in its tier, refreshed (recently used). Returns the seconds the copies take: host memory over the
    host link, disk at the slower of NVMe reads and the host link (the two hops pipelined)."""
    par, stats = kv.tier_par, kv.tier_stats
    block = par[TP_BLOCK_BYTES]
    cpu, disk = kv.tier_found[LOW_CPU], kv.tier_found[LOW_DISK]
    cpu_s = cpu * block / par[TP_HOST_BW]
    disk_s = disk * block / min(par[TP_DISK_READ_BW], par[TP_HOST_BW])
    _count_load(stats, TIER_CPU * N_TS, cpu * block_size, cpu * block, cpu_s)
    _count_load(stats, TIER_DISK * N_TS, disk * block_size, disk * block, disk_s)
    lo = req.hash_off[r]
    for j in range(first, first + count):
        h = req.hashes[lo + j]
        code = _table_find(kv.tier_table, h)
        if code >= 0:  # (an earlier refresh in this loop may have pushed it out: it is copied already)
            _refresh(kv, code, h)
    return cpu_s + disk_s


@inline
def _count_load(stats, at, tokens, moved, seconds):
    stats[at + TS_HIT_TOKENS] += tokens
    stats[at + TS_BYTES_OUT] += moved
    stats[at + TS_LINK_S] += seconds
    stats[at + TS_LOAD_S] += seconds


@inline
def step_with_loads(kv, compute_s, load_s, layers):
    """A step's time with `load_s` of lower-tier loads: they come first (the prefill needs them), or with
    TP_OVERLAP run layer by layer under the compute (LMCache's layerwise mode, HiCache's layer-wise overlap):
    layer i+1 loads while layer i computes, so the longer of the two shows plus one layer of the other (the
    pipeline's fill). The load time is part of the step's work, not swap traffic (attribution.py)."""
    if kv.tier_par[TP_OVERLAP] > 0:
        return max(compute_s, load_s) + min(compute_s, load_s) / max(layers, 1.0)
    return compute_s + load_s


@kernel
def check_tiers(kv):
    """The lower tiers' invariants: every live ring entry is in the table at its position and nothing else is;
    live counts match and stay within capacity (no leaked or double-counted block)."""
    width = kv.tier_ring.shape[1]
    entries = 0
    for i in range(kv.tier_table.shape[1]):
        if kv.tier_table[0, i] != NO_HASH:
            entries += 1
            code = kv.tier_table[1, i]
            if kv.tier_ring[code // width, code % width] != kv.tier_table[0, i]:
                raise AssertionError("a tier's table entry points at a ring position holding other content")
    live_total = 0
    for t in range(2):
        base = t * N_H
        cap, live, used = kv.tier_n[base + H_CAP], kv.tier_n[base + H_LIVE], kv.tier_n[base + H_USED]
        if live > cap or used > 2 * cap or live > used:
            raise AssertionError("a tier holds more than its capacity")
        seen = 0
        for k in range(used):
            if kv.tier_ring[t, (kv.tier_n[base + H_HEAD] + k) % (2 * cap)] != NO_HASH:
                seen += 1
        if seen != live:
            raise AssertionError("a tier's live count differs from its ring")
        for k in range(used, 2 * cap):
            if kv.tier_ring[t, (kv.tier_n[base + H_HEAD] + k) % (2 * cap)] != NO_HASH:
                raise AssertionError("content outside a tier's ring window (leaked)")
        live_total += live
    if live_total != entries:
        raise AssertionError("tier table entries differ from the tiers' live contents")
