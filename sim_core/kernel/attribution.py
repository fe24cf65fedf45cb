"""Where each request's time went: its end-to-end latency (arrival -> last token) split into six parts, accumulated
per request as the engine runs (RequestState.attribution, one row per request, columns AT_*).

Every moment between a request's arrival and its last token lands in exactly one part, so the parts sum to its
E2EL (the client's transport overhead, which E2EL also counts, is added to `transport` by metrics.py). A request
is settled up to `attr_mark` (the end of the last step it ran in, or the instant it was preempted or handed over);
the time since then is classified by `attr_wait`, what it has been doing since:

  queue          waiting before its first step (W_QUEUE), and waiting in the decode engine's queue after a KV
                 hand-over; also a running request's wait while still prefilling when the step's token budget ran
                 out before its next chunk.
  prefill        a step that computes a chunk of its own prompt counts whole as its prefill time (the chunk is done
                 only when the step is: the request cannot get its tokens any sooner within that step).
  prefill_stall  decode steps made slower by other requests' prefill chunks: the step's time minus what the step
                 would cost with its decodes alone (spec_decode.decodes_alone_seconds: no prefill tokens); and a
                 decoding request's wait when the token budget ran out on others' chunks before its token.
  decode         decode steps at the cost of the decodes alone (the step time when nothing prefills). A decoding
                 request that verifies draft tokens (speculative decoding) is decoding: its step is decode time,
                 the verification and the proposer's passes included.
  preemption     time lost to preemption: waiting after being preempted until it runs again (W_PREEMPTED), the
                 part of a prefill chunk that recomputes KV it had before it was preempted (tokens below
                 `attr_lost`, pro rata), and every step's swap-traffic time (swap out or in: the step waits for it).
  transport      the KV hand-over of disaggregated serving (prefill engine's end of prompt -> KV delivered to the
                 decode engine, link queueing included), plus the client's transport overhead (metrics.py).
"""

from __future__ import annotations

import numpy as np

from ..policies.options import P_SPEC
from .jit import inline, kernel
from .spec_decode import decodes_alone_seconds
from .state import B_DECODE_SEQS, B_PREFILL_TOKENS, B_SCHEDULED

AT_QUEUE, AT_PREFILL, AT_PREFILL_STALL, AT_DECODE, AT_PREEMPTION, AT_TRANSPORT = range(6)
N_ATTR = 6
# The parts by public name, in AT_* order (metrics.attribution_ms's keys).
ATTRIBUTION_PARTS = ("queue", "prefill", "prefill_stall", "decode", "preemption", "transport")
# RequestState.attr_wait: what a request does between the steps it runs in.
W_QUEUE, W_PREEMPTED, W_RUNNING = 0, 1, 2


@inline
def _running_wait(computed, prompt):
    """A running request the budget skipped waits as queueing while it prefills, as a prefill stall once it
    decodes."""
    return AT_QUEUE if computed < prompt else AT_PREFILL_STALL


@kernel
def attribute_step(eng):
    """After the step is costed (eng.step_start -> eng.now) and before its tokens land: settle each of its
    requests up to the step's start, then share the step's time out among the parts."""
    st, batch, n = eng.st, eng.batch, eng.batch.n
    start, end = eng.step_start, eng.now
    swap = batch.swap_s[0]
    body = end - start - swap
    decode_alone = body
    if n[B_PREFILL_TOKENS] > 0 and n[B_DECODE_SEQS] > 0:
        decode_alone = min(body, decodes_alone_seconds(eng, P_SPEC))
    stall = body - decode_alone
    if n[B_PREFILL_TOKENS] == 0 and swap == 0:
        _attribute_decode_step(eng, start, end, body)
        return
    attr, mark, wait, lost = st.attribution, st.attr_mark, st.attr_wait, st.attr_lost
    computed, generated, prompt = st.computed, st.generated, eng.req.prompt_tokens
    for k in range(n[B_SCHEDULED]):
        r = batch.req[k]
        t = batch.tokens[k]
        c = computed[r]
        _settle(attr, mark, wait, r, start, end, _running_wait(c, prompt[r]))
        # (Parts that get nothing are not written: most steps swap nothing, and most decode with no prefill.)
        if swap > 0:
            attr[r, AT_PREEMPTION] += swap
        # A decoding request: the KV of its latest token (and of the drafts it verifies: speculative decoding).
        if generated[r] > 0 and c == prompt[r] + generated[r] - 1:
            attr[r, AT_DECODE] += decode_alone
            if stall > 0:
                attr[r, AT_PREFILL_STALL] += stall
        else:
            redo = body * min(max(lost[r] - c, 0), t) / t
            attr[r, AT_PREEMPTION] += redo
            attr[r, AT_PREFILL] += body - redo


@inline
def _attribute_decode_step(eng, start, end, body):
    """attribute_step for a step that only decodes and swaps nothing (most steps): each request's token takes
    the whole step as decode time."""
    st, batch = eng.st, eng.batch
    attr, mark, wait = st.attribution, st.attr_mark, st.attr_wait
    for k in range(batch.n[B_SCHEDULED]):
        r = batch.req[k]
        _settle(attr, mark, wait, r, start, end, AT_PREFILL_STALL)  # (a decoding request the budget skipped)
        attr[r, AT_DECODE] += body


@inline
def _settle(attr, mark, wait, r, start, end, running_part):
    """Settle r's time since its mark up to `start` in the part its wait was (`running_part` if it waited while
    running), then mark it as running in the step that ends at `end`."""
    gap = start - mark[r]
    if gap > 0:
        w = wait[r]
        attr[r, AT_QUEUE if w == W_QUEUE else (AT_PREEMPTION if w == W_PREEMPTED else running_part)] += gap
    wait[r] = W_RUNNING
    mark[r] = end


@inline
def note_arrival(st, r, arrival_s):
    """r arrives: its clock starts (unless it started on another engine: a disaggregated hand-over)."""
    if np.isnan(st.attr_mark[r]):
        st.attr_mark[r] = arrival_s
        st.attr_wait[r] = W_QUEUE


@inline
def note_first_token(st, r):
    """r's first token lands now (the step that produced it is already attributed, so its row covers arrival ->
    now): keep the row as it stands, the split of its TTFT. Later parts (decode, stalls, a disaggregated hand-over)
    add to `attribution` only."""
    for j in range(N_ATTR):
        st.attr_first[r, j] = st.attribution[r, j]


@inline
def note_preempted(eng, r):
    """r is preempted now: settle its wait so far as a running request's, then it waits as preempted; KV it
    loses (recompute) is recomputed at its return as preemption time."""
    st = eng.st
    now = eng.now
    if now > st.attr_mark[r]:
        st.attribution[r, _running_wait(st.computed[r], eng.req.prompt_tokens[r])] += now - st.attr_mark[r]
        st.attr_mark[r] = now
    st.attr_wait[r] = W_PREEMPTED
    st.attr_lost[r] = max(st.attr_lost[r], st.computed[r])


@inline
def note_handed_over(st, r, at_s):
    """r's prompt KV reached a decode engine at `at_s`: the time since its prefill engine let it go (it ended
    with its first token) was transport; it now queues for admission there."""
    if at_s > st.attr_mark[r]:
        st.attribution[r, AT_TRANSPORT] += at_s - st.attr_mark[r]
        st.attr_mark[r] = at_s
    st.attr_wait[r] = W_QUEUE
