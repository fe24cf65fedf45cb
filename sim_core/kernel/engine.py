"""The iteration loop: continuous (iteration-level) batching over a paged KV cache, as in vLLM v1.

`simulate(config, requests, frames)` runs one engine to the end; `new_engine` and `step(eng)` let an outer loop
interleave several engines, reading `eng.now`, `next_event_s(eng)` and `load(eng)` between steps. A step:
  1. admit arrivals into the waiting queue (or reject those that can never run, with a reason);
  2. priority preemption: the best waiting request may evict running ones (policies/preemption.py);
  3. schedule running requests first: one token for each decode, the next chunk of a partial prompt; a request
     that needs a KV block when none is free preempts a victim (recompute: free its blocks and requeue it; swap:
     copy its KV to host memory);
  4. resume swapped requests, then admit waiting ones in policy order into the remaining token budget
     (admission control may shed or degrade a request whose TTFT target is out of reach);
  5. cost the step (cost_model.py) and advance the clock; 6. tokens land: a request whose KV now covers all its
     tokens samples one; the first ends its prompt phase, the last finishes it and releases its blocks.
Phases 2-4 are in scheduler.py; static batching replaces them (policies/static_batching.py). The state is the
ENGINE record and its parts (state.py, built by build.py); the block pool is kv_pool.py, the queues queues.py.
Every helper is compiled by numba (jit.py) and also runs as plain Python (NUMBA_DISABLE_JIT=1).

numba's on-disk cache keys each function on its own file only: after editing another sim_core module, clear the
cache (scripts/test.sh keys its cache directory on a hash of all of sim_core).
"""

from __future__ import annotations

import numpy as np

from ..policies.adaptive_budget import adapt_budget
from ..policies.options import P_ASYNC, P_SPEC, P_TRANSPORT_S
from ..policies.ordering import rekey_waiting, waiting_key
from ..policies.static_batching import end_static_batch
from .attribution import attribute_step, note_arrival, note_first_token, note_handed_over
from .build import new_engine, outcome
from .cost_constants import LAYERS
from .cost_model import step_cost
from .jit import entry_nogil, inline, kernel
from .kv_pool import (
    blocks_for,
    release,
)
from .kv_tiers import step_with_loads
from .logs import itl_bin, make_log_room, step_log_row, take_due_frames, take_frames
from .lora import step_seconds as lora_step_seconds
from .queues import (
    followup_pop,
    remove_running,
)
from .scheduler import enqueue, note_empty_step, reject, release_follow_up, schedule
from .spec_decode import accepted_drafts, proposer_passes, proposer_seconds
from .state import (
    A_BUSY_S,
    A_BYTES,
    A_DECODE_TOKENS,
    A_FLOPS,
    A_IN_SYSTEM_S,
    A_ITL_COUNT,
    A_ITL_SUM,
    A_KV_BLOCK_S,
    A_KV_PEAK,
    A_PREEMPTIONS,
    A_PREFILL_TOKENS,
    A_SHED,
    A_SPEC_ACCEPTED,
    A_SPEC_DRAFT_S,
    A_SPEC_DRAFTED,
    A_SPEC_EMITTED,
    A_SPEC_SEQ_STEPS,
    A_SPEC_VERIFY_S,
    A_STEPS,
    A_WAITING_PEAK,
    A_WAITING_S,
    B_DECODE_CTX,
    B_DECODE_SEQS,
    B_PREEMPTIONS,
    B_PREFILL_CTX,
    B_PREFILL_PAIRS,
    B_PREFILL_SEQS,
    B_PREFILL_TOKENS,
    B_SAMPLES,
    B_SCHEDULED,
    B_SHED,
    B_VERIFY_CTX,
    B_VERIFY_PAIRS,
    B_VERIFY_SEQS,
    B_VERIFY_TOKENS,
    BUDGET_NOW,
    DONE,
    FINISHED,
    KV_BLOCKS,
    N_FOLLOWUPS,
    N_RUNNING,
    N_SWAPPED,
    N_WAITING,
    NEXT_OPEN,
    REJECT_LARGER_THAN_KV_POOL,
    REJECT_LONGER_THAN_BUDGET,
    REJECT_LONGER_THAN_MODEL,
    REJECT_NONE,
    S_BYTES,
    S_DECODE_SEQS,
    S_DURATION,
    S_FLOPS,
    S_KV_BLOCKS,
    S_PREEMPTIONS,
    S_PREFILL_SEQS,
    S_PREFILL_TOKENS,
    S_RUNNING,
    S_SHED,
    S_START,
    S_SWAPPED,
    S_TOKEN_BUDGET,
    S_WAITING,
    STALLED,
    STEP,
    WAITING,
)


# ---------------------------------------------------------------------------------------------------------
# Building an engine, running it, handing back what happened
# ---------------------------------------------------------------------------------------------------------
@entry_nogil
def simulate(config, requests, frames):
    """Run one engine until every request has finished or been rejected (Config, RequestTable, FrameSpec ->
    Outcome)."""
    eng = new_engine(config, requests, frames)
    run_to_end(eng)
    return outcome(eng)


@kernel
def run_to_end(eng):
    """Step until every request has finished or been rejected, or the caller cancels the run."""
    while not finished(eng):
        _step(eng)
        if eng.loop[STEP] % CANCEL_CHECK_STEPS == 0 and eng.cfg.cancel[0] != 0:
            break  # the caller gave up: the runner reports the run as cancelled
    release_finished(eng)
    take_frames(eng, True)


# How often a run looks at its cancel flag: a step takes ~5 us, so a cancelled run stops within a few ms.
CANCEL_CHECK_STEPS = 1024


# ---------------------------------------------------------------------------------------------------------
# The stepping interface: an outer loop may interleave several engines, reading each one's clock and load.
# ---------------------------------------------------------------------------------------------------------
@inline
def finished(eng):
    """Every request finished or rejected, or the engine cannot go on (a bug; the runner reports it)."""
    return eng.loop[DONE] == eng.req.arrival_s.shape[0] or eng.loop[STALLED] != 0


@kernel
def step(eng):
    """One iteration, or a jump to the next arrival when there is nothing to do."""
    _step(eng)


@inline
def _step(eng):
    """`step`'s body. `run_to_end` inlines it rather than call `step`: a kernel's compile emits machine code for
    everything linked into it, and `run_to_end` would emit all of it again (~1.7 s of a cold compile)."""
    if begin_step(eng):
        run_batch(eng)
        land_step(eng)


@kernel
def begin_step(eng):
    """A step up to its batch: arrivals in, the batch scheduled. Whether there is a batch to run (run_batch,
    land_step; pool_steps.step_together runs attention-DP ranks' batches in lock-step between the two)."""
    make_log_room(eng)
    admit_arrivals(eng)
    take_due_frames(eng)
    if eng.loop[DONE] == eng.req.arrival_s.shape[0]:
        # Every request ended here (a replica that got them all): free what asynchronous scheduling still holds
        # for a next step that never comes, so the engine reads as idle. Held, it would count as work due now,
        # and a cluster loop would step it again and again, each step returning here.
        release_finished(eng)
        return False
    if idle(eng):
        eng.now = next_arrival_s(eng)
        return False
    rekey_waiting(eng)
    schedule(eng)
    released = release_finished(eng) if eng.cfg.pol[P_ASYNC] != 0 else 0
    if eng.batch.n[B_SCHEDULED] == 0:
        if released == 0:
            note_empty_step(eng)
        return False
    return True


@kernel
def land_step(eng):
    """After run_batch: the step's time shared among its requests, its tokens landed."""
    attribute_step(eng)
    land_tokens(eng)
    if eng.cfg.static_batching:
        end_static_batch(eng)


@kernel
def load(eng):
    """(waiting, running, swapped, free KV blocks): what a router or an outer loop reads."""
    return eng.q.size[N_WAITING], eng.q.size[N_RUNNING], eng.q.size[N_SWAPPED], eng.kv.free[KV_BLOCKS]


@inline
def idle(eng):
    """Nothing waiting, running or swapped out: the engine waits for its next arrival."""
    return eng.q.size[N_WAITING] + eng.q.size[N_RUNNING] + eng.q.size[N_SWAPPED] == 0


@inline
def next_arrival_s(eng):
    """When the next request arrives on its own or as a follow-up turn (inf if none is due)."""
    req, q = eng.req, eng.q
    nxt = np.inf
    if eng.loop[NEXT_OPEN] < req.open_ids.shape[0]:
        nxt = req.arrival_s[req.open_ids[eng.loop[NEXT_OPEN]]]
    if q.size[N_FOLLOWUPS] > 0 and q.followup_keys[0] < nxt:
        nxt = q.followup_keys[0]
    return nxt


@kernel
def next_event_s(eng):
    """When this engine next does something: now while it has work, else its next arrival."""
    return next_arrival_s(eng) if idle(eng) else eng.now


# ---------------------------------------------------------------------------------------------------------
# 1. Arrivals, rejection, follow-up turns
# ---------------------------------------------------------------------------------------------------------
@kernel
def admit_arrivals(eng):
    """Open-loop arrivals due by now (in order), and follow-up turns whose think time has passed."""
    req, q, loop = eng.req, eng.q, eng.loop
    now = eng.now
    while True:
        nxt = loop[NEXT_OPEN]
        if nxt < req.open_ids.shape[0] and req.arrival_s[req.open_ids[nxt]] <= now and (
                q.size[N_FOLLOWUPS] == 0 or req.arrival_s[req.open_ids[nxt]] <= q.followup_keys[0]):
            r = req.open_ids[nxt]
            loop[NEXT_OPEN] += 1
        elif q.size[N_FOLLOWUPS] > 0 and q.followup_keys[0] <= now:
            r = q.followup_ids[0]
            followup_pop(q)
        else:
            return
        _arrive(eng, r)


@kernel
def route_in(eng, r, at_s):
    """Request r arrives at `at_s`, sent here by a router (fleet.py) rather than read from the engine's own
    arrivals. An idle engine's clock moves up to the arrival; a busy one queues it for its next step."""
    if idle(eng) and eng.now < at_s:
        eng.now = at_s
    eng.req.arrival_s[r] = at_s
    _arrive(eng, r)


@kernel
def route_in_prefilled(eng, r, at_s, arrival_s, first_token_s):
    """Request r's prompt KV arrives at `at_s` from a prefill engine (disaggregated serving, fleet.py): it
    joins the waiting queue with its prompt computed and its first token out (at `first_token_s`), so once
    admitted it only decodes. `arrival_s`: when the client sent it (its SLO deadlines count from there)."""
    if idle(eng) and eng.now < at_s:
        eng.now = at_s
    st = eng.st
    eng.req.arrival_s[r] = arrival_s
    st.computed[r] = eng.req.prompt_tokens[r]
    st.generated[r] = 1
    st.first_token_s[r] = first_token_s
    st.last_token_s[r] = first_token_s
    note_handed_over(st, r, at_s)
    _arrive(eng, r)


@inline
def _arrive(eng, r):
    """r joins the waiting queue, or is rejected at once if it can never run here."""
    note_arrival(eng.st, r, eng.req.arrival_s[r])
    reason = _never_fits(eng, r)
    if reason != REJECT_NONE:
        reject(eng, r, reason, eng.req.arrival_s[r])
    else:
        eng.st.status[r] = WAITING
        enqueue(eng, r, waiting_key(eng, r))


@inline
def _never_fits(eng, r):
    """Why request r can never run here (REJECT_*), or REJECT_NONE."""
    cfg = eng.cfg
    full = eng.req.prompt_tokens[r] + eng.req.output_tokens[r]
    if full > cfg.max_model_len:
        return REJECT_LONGER_THAN_MODEL
    if blocks_for(full, cfg.block_size) > cfg.num_blocks:
        return REJECT_LARGER_THAN_KV_POOL
    if not cfg.chunked_prefill and full > cfg.token_budget:
        return REJECT_LONGER_THAN_BUDGET
    return REJECT_NONE


# ---------------------------------------------------------------------------------------------------------
# 5-6. Running the step, tokens landing
# ---------------------------------------------------------------------------------------------------------
@kernel
def run_batch(eng):
    """Cost the step, account for it, log it and advance the clock."""
    seconds, moved, flops = batch_seconds(eng)
    account_step(eng, seconds, moved, flops)


@kernel
def batch_seconds(eng):
    """The scheduled batch's (seconds, bytes moved, FLOPs): compute, speculative decoding's proposer, lower-tier
    KV loads, swaps, LoRA."""
    cfg, n = eng.cfg, eng.batch.n
    # Speculative decoding's verification rows: each a decoding sequence (its KV read once by the decode kernel),
    # its drafts extra tokens through every layer with their attention FLOPs, and all k + 1 positions sampled.
    vt, vs = n[B_VERIFY_TOKENS], n[B_VERIFY_SEQS]
    seconds, moved, flops = step_cost(cfg.cost, n[B_PREFILL_TOKENS] + vt - vs, n[B_PREFILL_SEQS],
                                      n[B_PREFILL_PAIRS] + n[B_VERIFY_PAIRS], n[B_PREFILL_CTX], n[B_DECODE_SEQS],
                                      n[B_DECODE_CTX], n[B_SAMPLES] + vt)
    if vs > 0:
        seconds = _with_proposer(eng, seconds)
    if eng.batch.swap_s[1] > 0:  # lower-tier loads: before the compute, or layer by layer under it
        seconds = step_with_loads(eng.kv, seconds, eng.batch.swap_s[1], cfg.cost[LAYERS])
    seconds += eng.batch.swap_s[0]
    if cfg.lora.shape[0] > 0:  # LoRA adapters: their loads and kernels lengthen the step (kernel/lora.py)
        seconds += lora_step_seconds(eng)
    return seconds, moved, flops


@kernel
def account_step(eng, seconds, moved, flops):
    """Account for a step of `seconds` (its batch's own, or a lock-step group's longest) that moved `moved`
    bytes and did `flops`, log it and advance the clock by it."""
    cfg, n, acc, size = eng.cfg, eng.batch.n, eng.logs.acc, eng.q.size
    used_blocks = cfg.num_blocks - eng.kv.free[KV_BLOCKS]
    waiting, running, swapped = size[N_WAITING], size[N_RUNNING], size[N_SWAPPED]
    acc[A_STEPS] += 1
    acc[A_BUSY_S] += seconds
    acc[A_BYTES] += moved
    acc[A_FLOPS] += flops
    acc[A_KV_BLOCK_S] += used_blocks * seconds
    acc[A_KV_PEAK] = max(acc[A_KV_PEAK], used_blocks)
    acc[A_WAITING_S] += waiting * seconds
    acc[A_WAITING_PEAK] = max(acc[A_WAITING_PEAK], waiting)
    active = n[B_SCHEDULED] if cfg.static_batching else running  # a static batch schedules its unfinished members
    acc[A_IN_SYSTEM_S] += (waiting + active + swapped) * seconds
    acc[A_PREEMPTIONS] += n[B_PREEMPTIONS]
    acc[A_SHED] += n[B_SHED]
    acc[A_PREFILL_TOKENS] += n[B_PREFILL_TOKENS]
    acc[A_DECODE_TOKENS] += n[B_DECODE_SEQS]
    k = step_log_row(eng)
    if k >= 0:
        row = eng.logs.steps[k]
        row[S_START], row[S_DURATION], row[S_PREFILL_TOKENS] = eng.now, seconds, n[B_PREFILL_TOKENS]
        row[S_PREFILL_SEQS], row[S_DECODE_SEQS], row[S_KV_BLOCKS] = n[B_PREFILL_SEQS], n[B_DECODE_SEQS], used_blocks
        row[S_WAITING], row[S_RUNNING], row[S_SWAPPED] = waiting, running, swapped
        row[S_BYTES], row[S_FLOPS], row[S_PREEMPTIONS] = moved, flops, n[B_PREEMPTIONS]
        row[S_TOKEN_BUDGET], row[S_SHED] = eng.loop[BUDGET_NOW], n[B_SHED]
        for t in range(eng.q.vtc.shape[0]):
            eng.logs.service[k, t] = eng.q.vtc[t]
    eng.step_start = eng.now
    eng.now += seconds
    eng.loop[STEP] += 1
    if n[B_PREFILL_TOKENS] > 0:
        eng.step_est = 0.8 * eng.step_est + 0.2 * seconds  # slack estimates use recent prefill steps
    adapt_budget(eng, seconds)


@kernel
def _with_proposer(eng, verify_s):
    """A step that verifies drafts, plus its proposer's time (spec_decode.py), both accounted."""
    n, acc, pol = eng.batch.n, eng.logs.acc, eng.cfg.pol
    draft_s = proposer_seconds(pol, P_SPEC, verify_s, n[B_VERIFY_SEQS], n[B_VERIFY_CTX], proposer_passes(eng, P_SPEC))
    acc[A_SPEC_VERIFY_S] += verify_s
    acc[A_SPEC_DRAFT_S] += draft_s
    return verify_s + draft_s


@kernel
def _land_verified(eng, r, drafts, now):
    """Request r verified `drafts` draft tokens: the accepted ones and the target's bonus token reach the client
    together, one burst (one inter-token gap, as `vllm bench serve` measures ITL between the chunks it receives).
    The rejected drafts' KV slots stay with r, to be overwritten by its next step's drafts (vLLM's KV manager
    keeps them allocated), and are freed with the rest of its blocks."""
    cfg, st, req, acc = eng.cfg, eng.st, eng.req, eng.logs.acc
    a = accepted_drafts(cfg.pol, P_SPEC, r, st.generated[r], drafts)
    st.computed[r] += 1 + a
    acc[A_SPEC_SEQ_STEPS] += 1
    acc[A_SPEC_EMITTED] += 1 + a
    acc[A_SPEC_DRAFTED] += drafts
    acc[A_SPEC_ACCEPTED] += a
    acc[A_DECODE_TOKENS] += a  # run_batch counted one a decoding sequence
    c = req.request_class[r]
    deadline = req.arrival_s[r] + cfg.class_ttft_s[c] - cfg.pol[P_TRANSPORT_S]
    for _ in range(1 + a):
        st.generated[r] += 1
        if now <= deadline + (st.generated[r] - 1) * cfg.class_tpot_s[c]:
            st.on_time_tokens[r] += 1
    gap = now - st.last_token_s[r]
    fine, coarse = itl_bin(gap)
    if fine >= 0:
        eng.logs.itl_fine[fine] += 1
    else:
        eng.logs.itl_coarse[coarse] += 1
    acc[A_ITL_SUM] += gap
    acc[A_ITL_COUNT] += 1
    st.max_itl_s[r] = max(st.max_itl_s[r], gap)
    st.last_token_s[r] = now
    if st.generated[r] == req.output_tokens[r]:
        _finish(eng, r, now)


@kernel
def land_tokens(eng):
    """Tokens land at the end of the step: a request whose KV now covers all its tokens samples one; the first
    ends its prompt phase, the last finishes it. (Per-token work stays in this loop, on local names.)"""
    cfg, st, req = eng.cfg, eng.st, eng.req
    now = eng.now
    computed, generated, prompt, output = st.computed, st.generated, req.prompt_tokens, req.output_tokens
    on_time, first_token_s, last_token_s, max_itl_s = st.on_time_tokens, st.first_token_s, st.last_token_s, st.max_itl_s
    arrival_s, request_class, class_ttft_s, class_tpot_s = req.arrival_s, req.request_class, cfg.class_ttft_s, cfg.class_tpot_s
    itl_fine, itl_coarse, acc = eng.logs.itl_fine, eng.logs.itl_coarse, eng.logs.acc
    transport_s = cfg.pol[P_TRANSPORT_S]
    spec = eng.batch.n[B_VERIFY_SEQS] > 0
    for k in range(eng.batch.n[B_SCHEDULED]):
        r = eng.batch.req[k]
        if spec and eng.batch.tokens[k] > 1 and generated[r] > 0 and computed[r] == prompt[r] + generated[r] - 1:
            _land_verified(eng, r, eng.batch.tokens[k] - 1, now)  # a decoding sequence that verified drafts
            continue
        computed[r] += eng.batch.tokens[k]  # (blocks it filled were registered when scheduled: scheduler.py)
        if computed[r] != prompt[r] + generated[r]:
            continue  # mid-prefill
        generated[r] += 1
        c = request_class[r]
        if now <= arrival_s[r] + class_ttft_s[c] - transport_s + (generated[r] - 1) * class_tpot_s[c]:
            on_time[r] += 1
        if generated[r] == 1:
            first_token_s[r] = now
            note_first_token(st, r)
        else:
            gap = now - last_token_s[r]
            fine, coarse = itl_bin(gap)
            if fine >= 0:
                itl_fine[fine] += 1
            else:
                itl_coarse[coarse] += 1
            acc[A_ITL_SUM] += gap
            acc[A_ITL_COUNT] += 1
            max_itl_s[r] = max(max_itl_s[r], gap)
        last_token_s[r] = now
        if generated[r] == output[r]:
            _finish(eng, r, now)


@kernel
def _finish(eng, r, now):
    """r's last token is out. Its blocks and slot are freed now, or, with asynchronous scheduling (vLLM's
    async_scheduling: step n+1 is scheduled while step n runs, so the scheduler learns of the finish only after
    planning the next step), once the next step is scheduled (release_finished)."""
    eng.st.status[r] = FINISHED
    eng.st.finish_s[r] = now
    eng.loop[DONE] += 1
    release_follow_up(eng, r, now)
    if not eng.cfg.static_batching and eng.cfg.pol[P_ASYNC] == 0:
        remove_running(eng.q, r)
        release(eng.kv, r)


@kernel
def release_finished(eng):
    """Free the blocks and slots of finished requests still in the running list (async_scheduling); how many."""
    q, status = eng.q, eng.st.status
    released = 0
    if eng.cfg.static_batching:
        return released
    k = q.size[N_RUNNING] - 1
    while k >= 0:
        r = q.running[k]
        if status[r] == FINISHED:
            remove_running(q, r)
            release(eng.kv, r)
            released += 1
        k -= 1
    return released
