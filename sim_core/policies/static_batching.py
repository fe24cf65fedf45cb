"""Request-level static batching: a batch is formed from the queue, padded to its longest prompt, prefilled
together and decoded until its longest request finishes; nothing joins meanwhile. The baseline continuous batching
is measured against (Orca, Yu et al., OSDI '22)."""

from __future__ import annotations

from ..kernel.batch import add_to_batch
from ..kernel.jit import kernel
from ..kernel.kv_pool import allocate, blocks_for, release, take_slot
from ..kernel.logs import log_event
from ..kernel.queues import add_running, to_compute, wait_pop, wait_top
from ..kernel.state import (
    B_DECODE_CTX,
    B_DECODE_SEQS,
    B_PREFILL_PAIRS,
    B_PREFILL_SEQS,
    B_PREFILL_TOKENS,
    B_SAMPLES,
    B_SCHEDULED,
    EV_PREFILL,
    FINISHED,
    KV_BLOCKS,
    N_RUNNING,
    N_WAITING,
    RUNNING,
    STATIC_PAD,
)
from .fair import next_tenant


@kernel
def schedule_static_batch(eng):
    """Form a batch if none is active, then schedule its unfinished members and describe the padded batch."""
    req, st, q, batch, loop = eng.req, eng.st, eng.q, eng.batch, eng.loop
    if loop[STATIC_PAD] == 0:
        _form_batch(eng)
    members = q.size[N_RUNNING]
    longest = 0
    for k in range(members):
        r = q.running[k]
        longest = max(longest, st.generated[r])
        if st.status[r] == RUNNING:
            add_to_batch(batch, r, req.prompt_tokens[r] + st.generated[r] - st.computed[r], False)
    # Every member, finished or not, occupies its padded row until the batch ends.
    pad = loop[STATIC_PAD]
    if longest == 0:
        batch.n[B_PREFILL_TOKENS] = members * pad
        batch.n[B_PREFILL_PAIRS] = members * (pad * (pad + 1) // 2)
        batch.n[B_PREFILL_SEQS] = members
        for k in range(batch.n[B_SCHEDULED]):
            log_event(eng, batch.req[k], EV_PREFILL, batch.tokens[k])
    else:
        batch.n[B_DECODE_SEQS] = members
        batch.n[B_DECODE_CTX] = members * (pad + longest)
    batch.n[B_SAMPLES] = members


@kernel
def _form_batch(eng):
    """Take requests in queue order while each one's whole KV (prompt + output) fits."""
    cfg, req, st, kv, q, loop = eng.cfg, eng.req, eng.st, eng.kv, eng.q, eng.loop
    while q.size[N_WAITING] > 0 and q.size[N_RUNNING] < cfg.max_num_seqs:
        t = next_tenant(q)
        r = wait_top(q, t)
        need = blocks_for(req.prompt_tokens[r] + req.output_tokens[r], cfg.block_size)
        if need > kv.free[KV_BLOCKS]:
            break
        wait_pop(q, t, to_compute(eng, r))
        take_slot(kv, r)
        allocate(kv, r, need, eng.logs.acc)
        st.status[r] = RUNNING
        st.first_scheduled_s[r] = eng.now
        add_running(q, r)
        loop[STATIC_PAD] = max(loop[STATIC_PAD], req.prompt_tokens[r])


@kernel
def end_static_batch(eng):
    """When every member has finished, release the whole batch at once."""
    st, kv, q, loop = eng.st, eng.kv, eng.q, eng.loop
    for k in range(q.size[N_RUNNING]):
        if st.status[q.running[k]] != FINISHED:
            return
    for k in range(q.size[N_RUNNING]):
        release(kv, q.running[k])
    q.size[N_RUNNING] = 0
    loop[STATIC_PAD] = 0
