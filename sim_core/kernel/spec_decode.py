"""Speculative decoding in the engine (issue #23): how many draft tokens a decoding sequence proposes, how many the
verification accepts, and what the proposer costs. sim_core/spec_decode.py fills the slots from a scenario.

A decoding sequence's step proposes k draft tokens; the target model verifies them in one forward pass that scores
k + 1 query tokens (the last sampled token and the drafts: counted in the token budget, as vLLM's scheduler does,
and costed as a decoding sequence whose KV is read once plus k more tokens through every layer, their attention
FLOPs over the context and k + 1 sampled positions: engine.py run_batch). The
accepted count a is drawn per step from a per-position acceptance distribution (its CDF is in the slots); the
request emits 1 + a tokens (the accepted drafts and the target's bonus token). The draw is a hash of (seed,
request, position), not a random-number stream: the same request position gets the same draw however the batch
is formed, jitted or not (RULES.md: no random numbers inside kernels).

The slots live in the policy vector (cfg.pol) after the policies' own, at options.P_SPEC; all zero = off.
"""

from __future__ import annotations

import math

from .cost_model import step_cost
from .jit import inline, numeric_entry
from .state import (
    B_DECODE_CTX,
    B_DECODE_SEQS,
    B_SCHEDULED,
    B_VERIFY_CTX,
    B_VERIFY_PAIRS,
    B_VERIFY_SEQS,
    B_VERIFY_TOKENS,
    FINISHED,
    N_RUNNING,
)

# The most draft tokens per step (vLLM's num_speculative_tokens; SGLang's speculative_num_steps defaults to 5).
MAX_SPEC_TOKENS = 16
# Proposer kinds.
SPEC_OFF, SPEC_NGRAM, SPEC_DRAFT, SPEC_EAGLE, SPEC_MTP = 0, 1, 2, 3, 4
SPEC_METHODS = {"ngram": SPEC_NGRAM, "draft": SPEC_DRAFT, "eagle": SPEC_EAGLE, "mtp": SPEC_MTP}
# Slot offsets from options.P_SPEC.
(SP_K,  # draft tokens per step (0: off)
 SP_METHOD,  # SPEC_*
 SP_SEED,  # < 2**31: the acceptance draws' seed
 SP_DISABLE_ABOVE,  # vLLM's speculative_disable_by_batch_size: no drafts while more run (0: never disabled)
 SP_NGRAM_FRAC,  # n-gram proposer: CPU time as a fraction of the verification step
 # A neural proposer's pass over the batch (an EAGLE/MTP head or a draft model), as a roofline:
 #   FIXED + sqrt(((BYTES + EXPERT_BYTES x touched + B x ACT + ctx x KV) / BW)^2 + (B x FLOPS / RATE)^2)
 SP_PASS_FIXED_S, SP_PASS_BYTES, SP_PASS_EXPERT_BYTES, SP_PASS_EXPERT_FRAC, SP_PASS_ACT_BYTES, SP_PASS_FLOPS,
 SP_PASS_KV_BYTES, SP_PASS_BW, SP_PASS_RATE,
 SP_PASSES_PER_DRAFT,  # passes per draft token (1: a chain of k passes; MTP reuses its one module k times)
 # The pass's share of the GPU's measured decode-attention floor (cost_model's DECODE_ATTN_FLOOR_S; 0 without):
 # its attention layers' least time. (Its MoE layers' measured fixed time is in SP_PASS_FIXED_S.)
 SP_PASS_ATTN_FLOOR_S,
 SP_CDF) = range(17)  # SP_CDF + j: P(accepted <= j), j = 0 .. MAX_SPEC_TOKENS
# 1: each step picks its draft count k in 0 .. SP_K for the most expected tokens per second of the step, as
# SmartSpec (arXiv 2406.14066) does with its goodput estimate; 0: always SP_K (after the slots above, so theirs stay).
SP_GOODPUT = SP_CDF + MAX_SPEC_TOKENS + 1
N_SPEC_PARAMS = SP_GOODPUT + 1
_M31 = 2147483647  # 2**31 - 1: every product below stays under 2**62 (RULES.md: no int64 overflow)


@inline
def _mix(x):
    """One round of a multiply-xorshift mix on [0, 2**31)."""
    x = (x * 48271) % _M31
    x ^= x >> 13
    x = (x * 16807 + 12345) % _M31
    x ^= (x << 7) & _M31
    return x


@inline
def spec_uniform(seed, r, position):
    """A uniform draw in [0, 1) for request r's verification step that starts at output position `position`."""
    x = (r % 1000003) * 2048 + position % 2048
    x = _mix(_mix(x % _M31) ^ seed)
    x = _mix(x ^ (position // 2048) % _M31)
    return x / _M31


@inline
def accepted_drafts(pol, base, r, position, drafts):
    """How many of `drafts` draft tokens the verification accepts (the first rejection ends the run)."""
    u = spec_uniform(int(pol[base + SP_SEED]), r, position)
    a = 0
    while a < drafts and u >= pol[base + SP_CDF + a]:
        a += 1
    return a


@inline
def step_spec_tokens(pol, base, running):
    """Draft tokens each decoding sequence may propose this step: k, or none while more than the disable
    threshold run (vLLM's speculative_disable_by_batch_size). Each sequence proposes at most its remaining
    output less the bonus token, and what the token budget leaves (scheduler.py)."""
    above = pol[base + SP_DISABLE_ABOVE]
    if above > 0.0 and running > above:
        return 0
    return int(pol[base + SP_K])


@inline
def proposer_seconds(pol, base, verify_s, seqs, ctx, drafts):
    """The proposer's time for `seqs` speculating sequences over `ctx` context tokens, proposing up to `drafts`
    tokens each: n-gram matching on the CPU (a fraction of the verification step), or `drafts` passes of a
    neural proposer (EAGLE/MTP heads: one layer of the target's kind each; a draft model: all its layers)."""
    method = int(pol[base + SP_METHOD])
    if method == SPEC_NGRAM:
        return pol[base + SP_NGRAM_FRAC] * verify_s
    weight = pol[base + SP_PASS_BYTES]
    if pol[base + SP_PASS_EXPERT_BYTES] > 0.0:
        weight += pol[base + SP_PASS_EXPERT_BYTES] * (1.0 - (1.0 - pol[base + SP_PASS_EXPERT_FRAC]) ** seqs)
    moved = weight + seqs * pol[base + SP_PASS_ACT_BYTES] + ctx * pol[base + SP_PASS_KV_BYTES]
    memory_s = moved / pol[base + SP_PASS_BW]
    compute_s = seqs * pol[base + SP_PASS_FLOPS] / pol[base + SP_PASS_RATE]
    one = pol[base + SP_PASS_FIXED_S] + math.sqrt(memory_s * memory_s + compute_s * compute_s)
    if pol[base + SP_PASS_ATTN_FLOOR_S] > 0.0:
        # As a target step charges it (cost_model's decode attention term): the KV's read time counts toward the floor.
        kv_s = ctx * pol[base + SP_PASS_KV_BYTES] / pol[base + SP_PASS_BW]
        one += max(0.0, pol[base + SP_PASS_ATTN_FLOOR_S] - kv_s)
    return drafts * pol[base + SP_PASSES_PER_DRAFT] * one


@inline
def expected_tokens(pol, base, k):
    """Tokens a sequence that proposes k drafts emits per verification, expected: 1 + sum over j < k of
    P(accepted > j) (acceptance of the first j drafts does not depend on how many follow)."""
    t = 1.0
    for j in range(k):
        t += 1.0 - pol[base + SP_CDF + j]
    return t


@inline
def verify_seconds(cost, seqs, ctx, k):
    """The step time of `seqs` decoding sequences over `ctx` context tokens in all, each verifying k drafts
    (costed as run_batch costs verification rows; k = 0: a plain decode step)."""
    seconds, _, _ = step_cost(cost, seqs * k, 0, k * ctx + seqs * (k * (k + 1) // 2), 0, seqs, ctx, seqs * (k + 1))
    return seconds


@inline
def goodput_seconds(pol, base, cost, seqs, ctx, k):
    """verify_seconds plus the proposer's k passes: the model's time for such a step."""
    seconds = verify_seconds(cost, seqs, ctx, k)
    if k == 0:
        return seconds
    return seconds + proposer_seconds(pol, base, seconds, seqs, ctx, k)


@numeric_entry
def goodput_table(pol, base, cost, seqs, ctx, out):
    """The goodput estimate's terms for k = 0 .. len(out) - 1 drafts: out[k] = (expected tokens per sequence,
    verification step seconds, proposer seconds), from the functions goodput_drafts uses (Python's view of its
    choice: sim_core/spec_decode.py goodput_estimates, the step-time figure's bands)."""
    for k in range(out.shape[0]):
        verify = verify_seconds(cost, seqs, ctx, k)
        out[k, 0] = expected_tokens(pol, base, k)
        out[k, 1] = verify
        out[k, 2] = proposer_seconds(pol, base, verify, seqs, ctx, k) if k > 0 else 0.0
    return out.shape[0]


@inline
def goodput_drafts(pol, base, cost, k_max, seqs, ctx):
    """The k in 0 .. k_max with the most expected tokens per second for this batch (SmartSpec's goodput;
    the smaller k on a tie). k_max is among the candidates, so the pick is never worse than it by this estimate."""
    best_k, best = k_max, -1.0
    for k in range(k_max + 1):
        rate = seqs * expected_tokens(pol, base, k) / goodput_seconds(pol, base, cost, seqs, ctx, k)
        if rate > best:
            best_k, best = k, rate
    return best_k


@inline
def step_goodput_drafts(eng, base, k_max):
    """goodput_drafts for the decoding sequences among the running ones (once per step, before they are
    scheduled: the ones the drafts would go to)."""
    running, status, prompt = eng.q.running, eng.st.status, eng.req.prompt_tokens
    generated, computed = eng.st.generated, eng.st.computed
    seqs, ctx = 0, 0
    for i in range(eng.q.size[N_RUNNING]):
        r = running[i]
        if status[r] != FINISHED and generated[r] > 0 and computed[r] == prompt[r] + generated[r] - 1:
            seqs += 1
            ctx += computed[r] + 1
    if seqs == 0:
        return k_max
    return goodput_drafts(eng.cfg.pol, base, eng.cfg.cost, k_max, seqs, ctx)


@inline
def proposer_passes(eng, base):
    """How many passes the proposer makes this step: k, or with the goodput policy the k the step picked (its
    longest chain of drafts: the scheduler may give a sequence fewer, near its end or the budget's)."""
    pol, n = eng.cfg.pol, eng.batch.n
    passes = int(pol[base + SP_K])
    if pol[base + SP_GOODPUT] > 0.0:
        passes = 0
        scheduled, tokens, admitted = eng.batch.req, eng.batch.tokens, eng.batch.admitted
        prompt, generated, computed = eng.req.prompt_tokens, eng.st.generated, eng.st.computed
        for j in range(n[B_SCHEDULED]):
            r = scheduled[j]
            if not admitted[j] and generated[r] > 0 and computed[r] == prompt[r] + generated[r] - 1:
                passes = max(passes, tokens[j] - 1)
    return passes


@inline
def decodes_alone_seconds(eng, base):
    """The step's time had it held its decoding sequences alone: their one token each, the drafts they verify
    and the proposer's passes, costed as run_batch costs them (attribution.py: what a step's prefill chunks add
    to this is the decodes' prefill stall)."""
    n, cost = eng.batch.n, eng.cfg.cost
    vt, vs = n[B_VERIFY_TOKENS], n[B_VERIFY_SEQS]
    seqs = n[B_DECODE_SEQS]
    seconds = step_cost(cost, vt - vs, 0, n[B_VERIFY_PAIRS], 0, seqs, n[B_DECODE_CTX], seqs - vs + vt)[0]
    if vs > 0:
        seconds += proposer_seconds(eng.cfg.pol, base, seconds, vs, n[B_VERIFY_CTX], proposer_passes(eng, base))
    return seconds
