"""The prefix cache's content hashes of a workload's blocks, computed once per run before the engine starts (a
kernel of its own, apart from workload.py, whose presets and Requests load without the engine)."""

from __future__ import annotations

import numpy as np

from .jit import entry_nogil

_P1, _M1 = 2147483647, 1000003  # two 31-bit polynomial hashes: products stay below 2**62, so the same
_P2, _M2 = 2147483629, 999983  # arithmetic holds in numba's int64 and in plain Python


# Set on the hash of a block whose prefix includes a segment no other request contains: nobody else can ever
# look it up, so the engine registers such blocks in the prefix cache only for their own request's return after
# a recompute preemption (which is the one lookup that can find them). Saves hash-table work on unique text.
PRIVATE_BIT = 1 << 62


def content_hashes(seg_ids, seg_lens, seg_off, block_size) -> tuple[np.ndarray, np.ndarray]:
    """block_hashes with each segment marked private when it occurs once in the whole workload (a segment a
    request repeats counts as shared: that only costs the saving, never a hit)."""
    _, inverse, counts = np.unique(seg_ids, return_inverse=True, return_counts=True)
    return block_hashes(seg_ids, seg_lens, seg_off, counts[inverse] == 1, block_size)


@entry_nogil  # a run's whole workload: long enough that the web's event loop should not wait on it
def block_hashes(seg_ids, seg_lens, seg_off, seg_private, block_size):
    """Chained content hashes of every full block of every request: H_j = hash(H_{j-1}, content of block j), as
    vLLM and SGLang key their prefix caches. Deterministic (no Python hash() randomisation) and never 0. Blocks
    from the first private segment on carry PRIVATE_BIT (their content is this request's alone)."""
    n = seg_off.shape[0] - 1
    hash_off = np.zeros(n + 1, np.int64)
    for i in range(n):
        total = 0
        for s in range(seg_off[i], seg_off[i + 1]):
            total += seg_lens[s]
        hash_off[i + 1] = hash_off[i] + total // block_size
    hashes = np.zeros(hash_off[n], np.int64)
    for i in range(n):
        h1 = 1
        h2 = 2
        filled = 0
        private = 0
        k = hash_off[i]
        for s in range(seg_off[i], seg_off[i + 1]):
            if seg_private[s]:
                private = PRIVATE_BIT
            sid = seg_ids[s]
            length = seg_lens[s]
            pos = 0
            while pos < length:
                take = min(length - pos, block_size - filled)
                for x in (sid % _P1, pos, take):
                    h1 = (h1 * _M1 + x) % _P1
                    h2 = (h2 * _M2 + x) % _P2
                filled += take
                pos += take
                if filled == block_size:
                    h = (h1 << 31) | h2 | private
                    hashes[k] = h if h != 0 else 1
                    k += 1
                    filled = 0
    return hashes, hash_off
