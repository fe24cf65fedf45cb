"""Who is evicted from the running batch: for memory (least progress), or for a better waiting request."""

from __future__ import annotations

from ..kernel.jit import inline, kernel
from ..kernel.kv_pool import blocks_for
from ..kernel.queues import wait_top
from ..kernel.state import FINISHED, KV_BLOCKS, N_RUNNING, N_WAITING, PREEMPT_NONE
from .fair import next_tenant
from .ordering import waiting_key
from .orders import ORDER_MLFQ


@inline
def memory_victim(eng, k):
    """Out of blocks while serving running[k]: evict the not-yet-served running request (running[k] itself
    included) with the least progress; ties go to the later arrival."""
    q, generated, status = eng.q, eng.st.generated, eng.st.status
    victim = q.running[k]
    for j in range(k + 1, q.size[N_RUNNING]):
        c = q.running[j]
        if status[c] == FINISHED:
            continue  # finished, its blocks freed after this pass (async_scheduling)
        if generated[c] < generated[victim] or (generated[c] == generated[victim] and c > victim):
            victim = c
    return victim


@inline
def priority_victim(eng):
    """A running request to evict so the best waiting one can start, or -1: only for schedulers that preempt for
    priority, when the head of the queue does not fit in free memory (or, for mlfq, in the batch); among running
    requests with a strictly worse key, the least progress (a victim requeued with FCFS would otherwise evict those
    that overtook it)."""
    cfg = eng.cfg
    if not cfg.preempts_for_priority or cfg.preempt_mode == PREEMPT_NONE or eng.q.size[N_WAITING] == 0:
        return -1
    return _worse_running_request(eng)


@kernel
def _worse_running_request(eng):
    cfg, req, st, q = eng.cfg, eng.req, eng.st, eng.q
    t = next_tenant(q)
    head = wait_top(q, t)
    head_key = q.wait_keys[q.q_off[t]]
    fits = blocks_for(req.prompt_tokens[head] + st.generated[head], cfg.block_size) <= eng.kv.free[KV_BLOCKS]
    # A multi-level feedback queue is preemptive on priority alone: a full batch makes room too.
    if fits and (cfg.order != ORDER_MLFQ or q.size[N_RUNNING] < cfg.max_num_seqs):
        return -1
    victim = -1
    for k in range(q.size[N_RUNNING]):
        r = q.running[k]
        if st.status[r] != FINISHED and waiting_key(eng, r) > head_key:
            if victim < 0 or st.generated[r] < st.generated[victim] or (
                    st.generated[r] == st.generated[victim] and r > victim):
                victim = r
    return victim
