"""The engine's queues, on one QUEUES record (state.py).

- running: request ids in admission order (decodes are served in this order);
- waiting: one binary min-heap of (key, request id) per tenant in flat arrays, tenant t's at [q_off[t], q_off[t+1]);
  every policy but fair sharing uses a single tenant. Which tenant goes next is a policy decision (policies/fair.py);
- swapped: one heap of requests whose KV sits in host memory;
- follow-ups: a heap, on arrival time, of session turns waiting out their think time.
Heap ties go to the smaller request id (the earlier arrival). Keys come from the policies; nothing here orders by
anything else.
"""

from __future__ import annotations

import numpy as np

from .jit import allocating_kernel, inline, kernel
from .state import N_FOLLOWUPS, N_RUNNING, N_SWAPPED, N_WAITING, N_WAITING_TOKENS, QUEUES, new_record


@inline
def outstanding(eng):
    """The requests an engine holds: waiting, running or swapped out."""
    return eng.q.size[N_WAITING] + eng.q.size[N_RUNNING] + eng.q.size[N_SWAPPED]


@allocating_kernel
def new_queues(tenant, n_tenants, max_num_seqs):
    n = tenant.shape[0]
    q = new_record(QUEUES)
    q.q_off = np.zeros(n_tenants + 1, np.int64)
    for i in range(n):
        q.q_off[tenant[i] + 1] += 1
    for t in range(n_tenants):
        q.q_off[t + 1] += q.q_off[t]
    q.running = np.zeros(max_num_seqs, np.int64)
    # The heaps are read only below their sizes: left unwritten (np.empty), the memory of the part never used is
    # never touched (each holds every request in the worst case; a cluster has one set per engine).
    q.wait_keys = np.empty(n)
    q.wait_ids = np.empty(n, np.int64)
    q.q_size = np.zeros(n_tenants, np.int64)
    q.vtc = np.zeros(n_tenants)
    q.swap_keys = np.empty(n)
    q.swap_ids = np.empty(n, np.int64)
    q.followup_keys = np.empty(n)
    q.followup_ids = np.empty(n, np.int64)
    q.size = np.zeros(5, np.int64)
    return q


# ----- binary min-heaps of (key, id) -----
@inline
def _heap_less(keys, ids, a, b):
    return keys[a] < keys[b] or (keys[a] == keys[b] and ids[a] < ids[b])


@kernel
def heap_push(keys, ids, size, key, rid):
    """Insert; returns the new size."""
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


@kernel
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


@kernel
def heap_pop(keys, ids, size):
    """Remove the top; returns the new size (the caller read ids[0] before)."""
    size -= 1
    keys[0] = keys[size]
    ids[0] = ids[size]
    _sift_down(keys, ids, 0, size)
    return size


@kernel
def heapify(keys, ids, size):
    """Restore the heap order after keys changed in place."""
    for start in range(size // 2 - 1, -1, -1):
        _sift_down(keys, ids, start, size)


# ----- waiting -----
@inline
def to_compute(eng, r):
    """The tokens waiting request r has to compute once admitted (its prompt, plus what it generated when it is
    back for recompute; less KV that came in from a prefill engine). Constant while it waits, so wait_push and
    wait_pop add and take back the same amount."""
    return eng.req.prompt_tokens[r] + eng.st.generated[r] - eng.st.computed[r]


@inline
def wait_push(q, t, key, r, tokens):
    """r joins tenant t's heap; `tokens`: what it has to compute (wait_pop takes the same back)."""
    lo, hi = q.q_off[t], q.q_off[t + 1]
    q.q_size[t] = heap_push(q.wait_keys[lo:hi], q.wait_ids[lo:hi], q.q_size[t], key, r)
    q.size[N_WAITING] += 1
    q.size[N_WAITING_TOKENS] += tokens


@inline
def wait_pop(q, t, tokens):
    lo, hi = q.q_off[t], q.q_off[t + 1]
    q.q_size[t] = heap_pop(q.wait_keys[lo:hi], q.wait_ids[lo:hi], q.q_size[t])
    q.size[N_WAITING] -= 1
    q.size[N_WAITING_TOKENS] -= tokens


@inline
def wait_top(q, t):
    """The request at the top of tenant t's heap."""
    return q.wait_ids[q.q_off[t]]


# ----- running -----
@inline
def add_running(q, r):
    q.running[q.size[N_RUNNING]] = r
    q.size[N_RUNNING] += 1


@kernel
def remove_running(q, r):
    running = q.running
    j = 0
    while running[j] != r:
        j += 1
    for m in range(j, q.size[N_RUNNING] - 1):
        running[m] = running[m + 1]
    q.size[N_RUNNING] -= 1


# ----- swapped and follow-ups -----
@inline
def swap_push(q, key, r):
    q.size[N_SWAPPED] = heap_push(q.swap_keys, q.swap_ids, q.size[N_SWAPPED], key, r)


@inline
def swap_pop(q):
    q.size[N_SWAPPED] = heap_pop(q.swap_keys, q.swap_ids, q.size[N_SWAPPED])


@inline
def followup_push(q, arrival_s, r):
    q.size[N_FOLLOWUPS] = heap_push(q.followup_keys, q.followup_ids, q.size[N_FOLLOWUPS], arrival_s, r)


@inline
def followup_pop(q):
    q.size[N_FOLLOWUPS] = heap_pop(q.followup_keys, q.followup_ids, q.size[N_FOLLOWUPS])
