"""Scheduling one step (phases 2-4 of engine.py), as vLLM v1's scheduler does: evict for priority, serve the
running requests (a decode token each, or the next chunk of a partial prompt), resume swapped ones, admit waiting
ones in policy order into what is left of the token budget, and describe the batch for the cost model. What to
evict, in which order to admit and whether to admit at all are policy decisions (policies/); the mechanics are
here. Also the request-lifecycle steps shared with the engine: enqueue, reject, release a session's next turn.
"""

from __future__ import annotations

import numpy as np

from ..policies.admission import admission_verdict
from ..policies.fair import lift_returning_tenant, next_tenant, service_cost
from ..policies.options import (
    DEGRADE,
    P_FAIR_INPUT_COST,
    P_FAIR_OUTPUT_COST,
    P_SPEC,
    P_WATERMARK_BLOCKS,
    SHED,
)
from ..policies.ordering import waiting_key
from ..policies.preemption import memory_victim, priority_victim
from ..policies.static_batching import schedule_static_batch
from . import lora
from .attribution import note_preempted
from .batch import add_to_batch
from .cost_model import swap_seconds
from .jit import inline, kernel
from .kv_pool import (
    allocate,
    blocks_for,
    cached_prefix,
    check_pool,
    register_full_blocks,
    release,
    take_cached_prefix,
    take_slot,
)
from .kv_tiers import (
    N_TS,
    TIER_GPU,
    TS_HIT_TOKENS,
    check_tiers,
    lower_prefix,
    tier_load,
    tiers_on,
)
from .logs import log_event
from .lora_slots import LP_GROUPED
from .queues import (
    add_running,
    followup_push,
    remove_running,
    swap_pop,
    swap_push,
    to_compute,
    wait_pop,
    wait_push,
    wait_top,
)
from .spec_decode import SP_GOODPUT, step_goodput_drafts, step_spec_tokens
from .state import (
    A_CACHED_TOKENS,
    A_DEGRADED,
    A_PREEMPTIONS,
    A_SHED,
    B_BUDGET_LEFT,
    B_DECODE_CTX,
    B_DECODE_SEQS,
    B_PREEMPTIONS,
    B_PREFILL_CTX,
    B_PREFILL_PAIRS,
    B_PREFILL_SEQS,
    B_PREFILL_TOKENS,
    B_PRIORITY_PREEMPTED,
    B_SAMPLES,
    B_SCHEDULED,
    B_SHED,
    B_VERIFY_CTX,
    B_VERIFY_PAIRS,
    B_VERIFY_SEQS,
    B_VERIFY_TOKENS,
    BUDGET_NOW,
    DONE,
    EV_CACHE_HIT,
    EV_PREEMPT_RECOMPUTE,
    EV_PREFILL,
    EV_SWAP_IN,
    EV_SWAP_OUT,
    FINISHED,
    KV_BLOCKS,
    KV_SWAP,
    N_RUNNING,
    N_SWAPPED,
    N_WAITING,
    NEXT_IN_QUEUE,
    PREEMPT_NONE,
    PREEMPT_SWAP,
    REJECT_SHED,
    REJECTED,
    RUNNING,
    STALLED,
    SWAPPED,
    WAITING,
)


@kernel
def reject(eng, r, reason, at_s):
    eng.st.status[r] = REJECTED
    eng.st.reject_reason[r] = reason
    eng.st.finish_s[r] = at_s
    eng.loop[DONE] += 1
    release_follow_up(eng, r, at_s)

@inline
def next_in_queue(queue, queue_next):
    """The next request waiting for a free closed-loop slot (taken off the queue), or -1 when none is left."""
    k = queue_next[0]
    if k >= queue.shape[0]:
        return -1
    queue_next[0] = k + 1
    return queue[k]


@inline
def release_follow_up(eng, r, end_s):
    """The next turn of r's session arrives its think time after r ended (closed loop); or, r's end freeing a
    semaphore's slot, the next queued request does."""
    c = eng.req.child[r]
    if c == NEXT_IN_QUEUE:
        c = next_in_queue(eng.req.queue, eng.req.queue_next)
    if c >= 0:
        eng.req.arrival_s[c] = end_s + eng.req.think_s[c]
        followup_push(eng.q, eng.req.arrival_s[c], c)

@inline
def enqueue(eng, r, key):
    t = eng.req.tenant[r]
    lift_returning_tenant(eng.q, t)
    wait_push(eng.q, t, key, r, to_compute(eng, r))


@kernel
def schedule(eng):
    batch, q = eng.batch, eng.q
    batch.n[:] = 0
    batch.n[B_BUDGET_LEFT] = eng.loop[BUDGET_NOW]
    batch.admitted[:] = False
    batch.swap_s[0] = 0.0
    batch.swap_s[1] = 0.0
    if eng.cfg.static_batching:
        schedule_static_batch(eng)
        return
    while True:  # 2. priority preemption
        victim = priority_victim(eng)
        if victim < 0:
            break
        preempt(eng, victim)
    batch.n[B_PRIORITY_PREEMPTED] = 1 if batch.n[B_PREEMPTIONS] > 0 else 0
    schedule_running(eng)
    # vLLM admits nothing new in a step that had to preempt for memory (it would only thrash).
    if batch.n[B_PREEMPTIONS] == 0 or batch.n[B_PRIORITY_PREEMPTED]:
        # Resume swapped requests before taking new ones, except right after evicting running requests for a
        # better waiting one: that one goes first, or the victims would just come straight back.
        if not batch.n[B_PRIORITY_PREEMPTED] and q.size[N_SWAPPED] > 0:
            resume_swapped(eng)
        if q.size[N_WAITING] > 0:
            admit_waiting(eng)
    describe_batch(eng)
    if eng.cfg.debug_checks:
        check_pool(eng.kv, eng.req, q.running, q.size[N_RUNNING])
        check_tiers(eng.kv)


@kernel
def preempt(eng, victim):
    """Evict a running request. Swap copies its KV to host memory if there is room (the copy time is added to the
    step); otherwise (or in recompute mode) its KV is dropped and it waits to be prefilled again, generated
    tokens included."""
    cfg, st, kv, q = eng.cfg, eng.st, eng.kv, eng.q
    note_preempted(eng, victim)
    key = waiting_key(eng, victim)
    remove_running(q, victim)
    st.preemptions[victim] += 1
    held = st.computed[victim]  # KV tokens it loses (recompute) or moves to host (swap)
    if cfg.preempt_mode == PREEMPT_SWAP and kv.n_blocks[victim] <= kv.free[KV_SWAP]:
        eng.batch.swap_s[0] += swap_seconds(cfg.cost, st.computed[victim])
        kv.free[KV_SWAP] -= kv.n_blocks[victim]
        kv.host_blocks[victim] = kv.n_blocks[victim]
        st.status[victim] = SWAPPED
        swap_push(q, key, victim)
        log_event(eng, victim, EV_SWAP_OUT, held)
    else:
        if cfg.prefix_caching:  # its own blocks stay cached for its return, private ones included
            register_full_blocks(kv, eng.req, victim, st.computed[victim], cfg.block_size, 0, True)
        st.computed[victim] = 0
        st.status[victim] = WAITING
        enqueue(eng, victim, key)
        log_event(eng, victim, EV_PREEMPT_RECOMPUTE, held)
    release(kv, victim)
    eng.batch.n[B_PREEMPTIONS] += 1


@kernel
def schedule_running(eng):
    """3. Running requests first: a decode token each, or the next chunk of a partial prompt."""
    # Per-request loops work on local names and call no helper that takes an array or a record: numba counts a
    # reference for every array or record a call (even an inlined one) passes, and per request that adds up.
    prompt, generated, computed, n_blocks = eng.req.prompt_tokens, eng.st.generated, eng.st.computed, eng.kv.n_blocks
    status = eng.st.status
    running, size, free, n, n_hashed = eng.q.running, eng.q.size, eng.kv.free, eng.batch.n, eng.kv.n_hashed
    scheduled, tokens, admitted = eng.batch.req, eng.batch.tokens, eng.batch.admitted
    block_size, caching = eng.cfg.block_size, eng.cfg.prefix_caching
    output = eng.req.output_tokens
    spec_k = step_spec_tokens(eng.cfg.pol, P_SPEC, size[N_RUNNING])  # speculative decoding's drafts (0: off)
    if spec_k > 0 and eng.cfg.pol[P_SPEC + SP_GOODPUT] > 0.0:  # spec_k_policy goodput: this batch's best k
        spec_k = step_goodput_drafts(eng, P_SPEC, spec_k)
    k = 0
    while k < size[N_RUNNING] and n[B_BUDGET_LEFT] > 0:
        r = running[k]
        if status[r] == FINISHED:  # its last token is still in flight (async_scheduling): nothing to schedule
            k += 1
            continue
        need = min(prompt[r] + generated[r] - computed[r], n[B_BUDGET_LEFT])
        drafts = 0  # a decoding sequence verifies its drafts: 1 + drafts tokens, in the budget (vLLM's scheduler)
        if spec_k > 0 and need == 1 and generated[r] > 0:
            drafts = max(0, min(spec_k, output[r] - generated[r] - 1, n[B_BUDGET_LEFT] - 1))
            need += drafts
        new_blocks = 0  # most decode steps fit in the last block: skip the division then
        if computed[r] + need > n_blocks[r] * block_size:
            new_blocks = blocks_for(computed[r] + need, block_size) - n_blocks[r]
        self_preempted = False
        while new_blocks > free[KV_BLOCKS]:
            victim = memory_victim(eng, k)
            preempt(eng, victim)
            if victim == r:
                self_preempted = True
                break
        if self_preempted:
            continue  # running[k] is now the next request
        if new_blocks > 0:
            allocate(eng.kv, r, new_blocks, eng.logs.acc)
        # A block this step fills is findable from now on (compared by multiplication: a division per token costs);
        # draft tokens are not (vLLM caches no speculated token: they may be rejected).
        if caching and computed[r] + need - drafts >= (n_hashed[r] + 1) * block_size:
            register_full_blocks(eng.kv, eng.req, r, computed[r] + need - drafts, block_size, n_hashed[r], False)
        j = n[B_SCHEDULED]  # add_to_batch, spelled out (see above)
        scheduled[j], tokens[j], admitted[j] = r, need, False
        n[B_SCHEDULED] = j + 1
        n[B_BUDGET_LEFT] -= need
        k += 1


@kernel
def resume_swapped(eng):
    """4a. Swap requests back in, best key first, while their next chunk's blocks fit."""
    cfg, st, kv, q, batch = eng.cfg, eng.st, eng.kv, eng.q, eng.batch
    while q.size[N_SWAPPED] > 0 and q.size[N_RUNNING] < cfg.max_num_seqs and batch.n[B_BUDGET_LEFT] > 0:
        r = q.swap_ids[0]
        need = min(eng.req.prompt_tokens[r] + st.generated[r] - st.computed[r], batch.n[B_BUDGET_LEFT])
        total_blocks = blocks_for(st.computed[r] + need, cfg.block_size)
        if total_blocks > kv.free[KV_BLOCKS]:
            return
        swap_pop(q)
        kv.free[KV_SWAP] += kv.host_blocks[r]
        kv.host_blocks[r] = 0
        take_slot(kv, r)
        allocate(kv, r, total_blocks, eng.logs.acc)
        register_scheduled(eng, r, st.computed[r] + need)
        batch.swap_s[0] += swap_seconds(cfg.cost, st.computed[r])
        st.status[r] = RUNNING
        add_running(q, r)
        add_to_batch(batch, r, need, False)
        log_event(eng, r, EV_SWAP_IN, st.computed[r])


@kernel
def admit_waiting(eng):
    """4b. Admit waiting requests in policy order (after any swapped ones) while they fit."""
    if eng.cfg.lora.shape[0] == 0:
        _admit_waiting(eng, 0, 0)
        return
    # LoRA adapters (kernel/lora.py): vLLM's limit on a step's adapters; the grouped order first lets in the
    # adapters with the most waiting requests (and requests past the aging limit), then the rest.
    in_step = lora.mark_running(eng)
    if eng.cfg.lora[LP_GROUPED] != 0:
        lora.choose_next(eng)
        in_step = _admit_waiting(eng, lora.PASS_GROUPED, in_step)
        lora.put_back_skipped(eng)
    _admit_waiting(eng, lora.PASS_LIMIT, in_step)
    lora.put_back_skipped(eng)


@kernel
def _admit_waiting(eng, lora_pass, in_step):
    """admit_waiting's loop; `lora_pass` 0 (no adapters) or lora.PASS_*; returns the step's adapters then."""
    q, n = eng.q, eng.batch.n
    while ((q.size[N_SWAPPED] == 0 or n[B_PRIORITY_PREEMPTED]) and q.size[N_WAITING] > 0
           and q.size[N_RUNNING] < eng.cfg.max_num_seqs and n[B_BUDGET_LEFT] > 0):
        t = next_tenant(q)
        r = wait_top(q, t)
        if lora_pass != 0 and lora.skips(eng, r, in_step, lora_pass):
            lora.skip(eng, r, t)
            continue
        verdict = admission_verdict(eng, r)
        if verdict == SHED:
            wait_pop(q, t, to_compute(eng, r))
            reject(eng, r, REJECT_SHED, eng.now)
            n[B_SHED] += 1
        elif verdict == DEGRADE:  # admit later with a relaxed target: requeue it under its new key
            eng.st.degraded[r] = 1
            eng.logs.acc[A_DEGRADED] += 1
            wait_pop(q, t, to_compute(eng, r))
            enqueue(eng, r, waiting_key(eng, r))
        elif not _admit(eng, r, t):
            return in_step  # head-of-line: later requests wait behind it, as in vLLM
        elif lora_pass != 0:
            in_step = lora.note_admitted(eng, r, in_step, lora_pass)
    return in_step


@kernel
def _admit(eng, r, t):
    """Admit waiting request r (tenant t's heap top) if its blocks fit; False if they do not."""
    cfg, req, st, kv = eng.cfg, eng.req, eng.st, eng.kv
    total = req.prompt_tokens[r] + st.generated[r]
    # Nothing computed (new, or requeued for recompute), unless its prompt's KV was transferred in from a
    # prefill engine (disaggregated serving): then that KV needs fresh blocks here and nothing is recomputed.
    transferred = st.computed[r]
    hits, free_hits, lower = 0, 0, 0
    if cfg.prefix_caching and transferred == 0:
        hits, free_hits = cached_prefix(kv, req, r, total, cfg.block_size)
        if tiers_on(kv):  # every tier is consulted at admission: what follows the GPU's prefix may be lower down
            lower = lower_prefix(kv, req, r, hits, total, cfg.block_size)
    # Blocks loaded from a lower tier need fresh GPU blocks (counted in new_blocks) but no compute.
    cached = (hits + lower) * cfg.block_size + transferred
    need = total - cached
    if need > eng.batch.n[B_BUDGET_LEFT]:
        if not cfg.chunked_prefill:
            return False  # the whole prompt must fit in one step; wait for a step with room
        need = eng.batch.n[B_BUDGET_LEFT]
    if cfg.preempt_mode == PREEMPT_NONE:
        # Nothing can ever be evicted, so a request reserves its whole KV when admitted.
        new_blocks = blocks_for(req.prompt_tokens[r] + req.output_tokens[r], cfg.block_size) - hits
    else:
        new_blocks = blocks_for(cached + need, cfg.block_size) - hits
    # Admit only if the whole remaining prompt fits (vLLM v1's scheduler_reserve_full_isl, v0's can_allocate),
    # keeping `watermark` of the pool free while others run (vLLM v1 keeps none, v0 1%): admitting on the first
    # chunk alone lets half-prefilled prompts evict each other.
    whole = blocks_for(total, cfg.block_size) - hits
    headroom = kv.free[KV_BLOCKS] - (int(cfg.pol[P_WATERMARK_BLOCKS]) if eng.q.size[N_RUNNING] > 0 else 0)
    if max(new_blocks, whole) + free_hits > headroom:
        return False
    wait_pop(eng.q, t, to_compute(eng, r))
    take_slot(kv, r)
    if hits > 0 or lower > 0:
        take_cached_prefix(kv, r, hits)
        st.computed[r] = cached
        eng.logs.acc[A_CACHED_TOKENS] += cached
        log_event(eng, r, EV_CACHE_HIT, cached)
    if st.cached_prefix[r] < 0 and transferred == 0:
        st.cached_prefix[r] = cached
    allocate(kv, r, new_blocks, eng.logs.acc)
    if tiers_on(kv) and transferred == 0:
        _load_lower(eng, r, hits, lower)
    register_scheduled(eng, r, cached + need)
    st.status[r] = RUNNING
    if np.isnan(st.first_scheduled_s[r]):
        st.first_scheduled_s[r] = eng.now
    add_running(eng.q, r)
    add_to_batch(eng.batch, r, need, True)
    return True


@kernel
def _load_lower(eng, r, hits, lower):
    """Count r's GPU prefix hit and load the `lower` blocks after it from the lower tiers: the step waits for them
    before its prefill (or, with layer overlap, for what the compute does not hide: engine.run_batch)."""
    kv, block_size = eng.kv, eng.cfg.block_size
    kv.tier_stats[TIER_GPU * N_TS + TS_HIT_TOKENS] += hits * block_size
    if lower > 0:
        seconds = tier_load(kv, eng.req, r, hits, lower, block_size)
        eng.batch.swap_s[1] += seconds


@inline
def register_scheduled(eng, r, tokens):
    """With prefix caching, r's blocks that its first `tokens` tokens fill become findable as soon as they are
    scheduled, as in vLLM v1 (allocate_slots caches them): a request admitted later in the same step shares them."""
    if eng.cfg.prefix_caching:
        register_full_blocks(eng.kv, eng.req, r, tokens, eng.cfg.block_size, eng.kv.n_hashed[r], False)


@kernel
def describe_batch(eng):
    """The batch's shape for the cost model, and each tenant's service. A request admitted this step is
    prefilling even if the prefix cache left it a single token to compute."""
    prompt, generated, computed, n = eng.req.prompt_tokens, eng.st.generated, eng.st.computed, eng.batch.n
    scheduled, tokens, admitted = eng.batch.req, eng.batch.tokens, eng.batch.admitted
    vtc, tenant, request_class, class_weight = eng.q.vtc, eng.req.tenant, eng.req.request_class, eng.cfg.class_weight
    input_cost, output_cost = eng.cfg.pol[P_FAIR_INPUT_COST], eng.cfg.pol[P_FAIR_OUTPUT_COST]
    record_events = eng.cfg.record_events
    for k in range(n[B_SCHEDULED]):
        r = scheduled[k]
        t = tokens[k]
        weight = class_weight[request_class[r]]
        if not admitted[k] and generated[r] > 0 and computed[r] == prompt[r] + generated[r] - 1:
            n[B_DECODE_SEQS] += 1
            n[B_DECODE_CTX] += computed[r] + 1
            if t > 1:  # verifying d = t - 1 drafts: d more query tokens, each attending to the context before it
                d = t - 1
                n[B_VERIFY_SEQS] += 1
                n[B_VERIFY_TOKENS] += t
                n[B_VERIFY_PAIRS] += d * (computed[r] + 1) + d * (d + 1) // 2
                n[B_VERIFY_CTX] += computed[r] + 1
            vtc[tenant[r]] += service_cost(input_cost, output_cost, weight, 1, True)
        else:
            n[B_PREFILL_TOKENS] += t
            n[B_PREFILL_SEQS] += 1
            n[B_PREFILL_PAIRS] += t * computed[r] + t * (t + 1) // 2
            n[B_PREFILL_CTX] += computed[r]
            vtc[tenant[r]] += service_cost(input_cost, output_cost, weight, t, False)
            if record_events:
                log_event(eng, r, EV_PREFILL, t)
        if computed[r] + t == prompt[r] + generated[r]:
            n[B_SAMPLES] += 1


@inline
def note_empty_step(eng):
    """Nothing could be scheduled: fine if candidates were evicted or shed (the next pass goes on); otherwise
    the engine is stuck, which cannot happen for valid inputs (the runner reports what is left unfinished)."""
    n = eng.batch.n
    eng.logs.acc[A_PREEMPTIONS] += n[B_PREEMPTIONS]
    eng.logs.acc[A_SHED] += n[B_SHED]
    if n[B_PREEMPTIONS] == 0 and n[B_SHED] == 0:
        eng.loop[STALLED] = 1
