"""How the waiting queue is ordered: each policy's key (smaller first; ties go to the earlier arrival), and the
re-keying some orders need while requests wait."""

from __future__ import annotations

from ..kernel.jit import inline, kernel
from ..kernel.kv_pool import cached_prefix
from ..kernel.queues import heapify
from ..kernel.state import LPM_KEYED, N_WAITING
from .deadline import deadline_s, slack_key
from .mlfq import mlfq_level
from .options import P_AGING
from .orders import (
    LPM_QUEUE_LIMIT,
    ORDER_CACHED_PREFIX,
    ORDER_DEADLINE,
    ORDER_MLFQ,
    ORDER_PROMPT_LENGTH,
    ORDER_SLACK,
)


@kernel
def waiting_key(eng, r):
    """Priority of request r in the waiting (or swapped) queue.

    Aging subtracts `aging_rate` x seconds waited from the key; as every request's wait grows at the same pace,
    that is the same order as adding aging_rate x arrival time, which keeps keys fixed while requests wait.
    Units of aging_rate are the key's per second: tokens/s for shortest-prompt-first, s/s for least slack and
    earliest deadline, levels/s for the multi-level feedback queue."""
    order = eng.cfg.order
    arrival_s = eng.req.arrival_s[r]
    if order == ORDER_PROMPT_LENGTH:
        key = float(eng.req.prompt_tokens[r])
    elif order == ORDER_SLACK:
        key = slack_key(eng, r)
    elif order == ORDER_DEADLINE:
        key = deadline_s(eng, r)
    elif order == ORDER_MLFQ:
        key = float(mlfq_level(eng, r))
    else:
        key = arrival_s
    return key + eng.cfg.pol[P_AGING] * arrival_s


@inline
def rekey_waiting(eng):
    """Before a step is scheduled: re-key the waiting requests of orders whose keys drift while they wait."""
    if eng.cfg.order == ORDER_SLACK:
        _rekey_on_step_time_drift(eng)
    elif eng.cfg.order == ORDER_CACHED_PREFIX:
        _rekey_by_cached_prefix(eng)


@kernel
def _rekey_on_step_time_drift(eng):
    """Slack keys depend on the measured step time: re-key the queues when it has drifted by over 10%."""
    q = eng.q
    if abs(eng.step_est - eng.keyed_step_est) <= 0.1 * eng.keyed_step_est:
        return
    eng.keyed_step_est = eng.step_est
    for t in range(q.q_size.shape[0]):
        lo, hi = q.q_off[t], q.q_off[t + 1]
        for j in range(lo, lo + q.q_size[t]):
            q.wait_keys[j] = waiting_key(eng, q.wait_ids[j])
        heapify(q.wait_keys[lo:hi], q.wait_ids[lo:hi], q.q_size[t])


@kernel
def _rekey_by_cached_prefix(eng):
    """SGLang's longest prefix match: while the queue is short, longest cached prefix first; past LPM_QUEUE_LIMIT
    waiting requests matching costs more than it saves, so arrival order (one tenant: the heap is [0, n))."""
    q, loop = eng.q, eng.loop
    waiting = q.size[N_WAITING]
    if waiting > LPM_QUEUE_LIMIT and loop[LPM_KEYED] == 0:
        return
    loop[LPM_KEYED] = 1 if waiting <= LPM_QUEUE_LIMIT else 0
    for j in range(waiting):
        r = q.wait_ids[j]
        q.wait_keys[j] = waiting_key(eng, r)
        if loop[LPM_KEYED]:
            total = eng.req.prompt_tokens[r] + eng.st.generated[r]
            hits, _ = cached_prefix(eng.kv, eng.req, r, total, eng.cfg.block_size)
            q.wait_keys[j] = -float(hits)
    heapify(q.wait_keys, q.wait_ids, waiting)


