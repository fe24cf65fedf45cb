"""Engine invariants on random small scenarios, for every scheduler and every preemption mode (hypothesis).

Each example runs the jitted engine with the event log and KV snapshots on, then `check_invariants` checks what
must hold whatever the policy: every request ends finished or rejected for a reason that is true of it; no KV
block or swap block is leaked, double-freed or held by a request that is not running; the clock never goes back;
each request's timestamps are ordered; tokens are conserved; per-step limits hold; the engine's accumulators agree
with its logs and with Little's law.

The scenarios are deliberately nasty: tiny KV pools (1-120 blocks) that force preemption, swap fallback and
rejection, tiny swap spaces, token budgets down to 16, max_seqs down to 1, short max_model_len, the prefix cache
over prompts that share prefixes, agent sessions (follow-up turns), tight TTFT targets (admission control), aging,
transport overhead and the adaptive budget. The hypothesis profile is derandomized and has no example database,
so a CI run is reproducible.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core import PRESETS, SCHEDULER_NAMES, Scenario
from sim_core.kernel import state as E
from sim_core.kernel.attribution import AT_PREEMPTION
from sim_core.runner import RunOptions, resolve, run, simulate_requests
from sim_core.workload import Requests

try:
    from sim_core.workload import UNIQUE
except ImportError:  # before content segments existed
    UNIQUE = 1 << 40

PREEMPTION_MODES = ("recompute", "swap", "none")
# Small GPUs (and a smaller model), so random pools are a realistic fraction of a real one.
HARDWARE = (("rtx3050", None), ("rtx3050", "qwen2.5-0.5b"), ("l4", "qwen2.5-0.5b"), ("a10g", None))
# KV snapshot times: dense early, sparse later, and one far past any run's end (the final, all-free pool).
FRAME_TIMES = np.concatenate([np.linspace(0.0, 2.0, 41), np.geomspace(2.5, 1e4, 24), [1e9]])
FIELDS = set(Scenario.model_fields)

# SCHED_SIM_EXAMPLES=500 for a deeper local search; CI keeps the default so the suite stays fast.
EXAMPLES = int(os.environ.get("SCHED_SIM_EXAMPLES", "16"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def blocks_for(tokens, block_size):
    return -(-np.asarray(tokens) // block_size)


# -------------------------------------------------------------------------------------------------------------
# Strategies
# -------------------------------------------------------------------------------------------------------------
@st.composite
def scenario_kwargs(draw, scheduler: str, preemption: str) -> dict:
    hardware, model = draw(st.sampled_from(HARDWARE))
    kw = dict(scheduler=scheduler, preemption=preemption, hardware=hardware, model=model,
              block_size=draw(st.sampled_from([8, 16, 32])),
              token_budget=draw(st.one_of(st.none(), st.integers(16, 2048))),
              max_seqs=draw(st.one_of(st.integers(1, 8), st.sampled_from([32, 256]))),
              kv_blocks=draw(st.integers(1, 120)),
              # 0 / ~1 / ~4 host blocks on the small models, or plenty: forces swap's fallback to recompute.
              swap_space_gb=draw(st.sampled_from([0.0, 0.0005, 0.002, 4.0])),
              # 8,192: the default these tests were written with (a prefill-whole scheduler's budget is
              # max_model_len, and llama-3.2-1b's whole 131k context does not fit the small GPU's memory).
              max_model_len=draw(st.one_of(st.just(8192), st.integers(64, 4096))),
              slo_ttft_ms=draw(st.sampled_from([None, 30.0, 300.0, 5000.0])))
    if "prefix_cache" in FIELDS:
        kw["prefix_cache"] = draw(st.booleans())
    if "admission" in FIELDS:
        kw["admission"] = draw(st.sampled_from([None, "admit", "reject", "degrade"]))
    if "aging_rate" in FIELDS:
        kw["aging_rate"] = draw(st.sampled_from([0.0, 0.0, 5.0, 1e4]))
    if "transport_overhead_ms" in FIELDS:
        kw["transport_overhead_ms"] = draw(st.sampled_from([0.0, 20.0]))
    if "adaptive_budget" in FIELDS:
        # Only with chunking: the others refuse it (test_engine.py::test_adaptive_budget_needs_chunked_prefill).
        from sim_core.policies import BY_NAME
        kw["adaptive_budget"] = draw(st.booleans()) and BY_NAME[scheduler].chunked_prefill
    return {k: v for k, v in kw.items() if v is not None}


@st.composite
def explicit_requests(draw) -> Requests:
    """Random arrivals and lengths; with `shared`, prompts start with one of three shared prefixes (content the
    prefix cache can reuse), so tiny pools see sharing, cached blocks and evictions."""
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.01, 0.05, 0.2, 1.0, 5.0]), min_size=n, max_size=n))
    arrival = np.cumsum(np.asarray(gaps, np.float64))
    arrival -= arrival[0]
    own = np.asarray(draw(st.lists(st.integers(1, 500), min_size=n, max_size=n)), np.int64)
    output = np.asarray(draw(st.lists(st.integers(1, 150), min_size=n, max_size=n)), np.int64)
    if not draw(st.booleans()):
        return Requests(arrival, own, output, np.zeros(n, np.int64), ("explicit",))
    prefix_len = draw(st.lists(st.integers(1, 300), min_size=3, max_size=3))
    which = draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))  # -1: no shared prefix
    seg_ids, seg_lens, seg_off = [], [], [0]
    for i in range(n):
        if which[i] >= 0:
            seg_ids.append(1 + which[i])
            seg_lens.append(prefix_len[which[i]])
        seg_ids += [UNIQUE + 2 * i, UNIQUE + 2 * i + 1]
        seg_lens += [int(own[i]), int(output[i])]
        seg_off.append(len(seg_ids))
    prompt = own + np.array([prefix_len[w] if w >= 0 else 0 for w in which], np.int64)
    return Requests(arrival, prompt, output, np.zeros(n, np.int64), ("explicit",), None, None,
                    np.asarray(seg_ids, np.int64), np.asarray(seg_lens, np.int64), np.asarray(seg_off, np.int64))


@st.composite
def simulated(draw, scheduler: str, preemption: str):
    """A finished run: a preset workload through run(), or explicit request arrays through simulate_requests."""
    kw = draw(scenario_kwargs(scheduler, preemption))
    if draw(st.booleans()):
        kw.update(workload=draw(st.sampled_from(sorted(PRESETS))), num_requests=draw(st.integers(1, 30)),
                  rate=draw(st.sampled_from([1.0, 5.0, 20.0, 200.0])),
                  burstiness=draw(st.sampled_from([None, 0.5, 3.0])), seed=draw(st.integers(0, 2**32 - 1)))
        s = Scenario(**{k: v for k, v in kw.items() if v is not None})
        return run(s, kv_frame_times=FRAME_TIMES, record_events=True)
    s = Scenario(**kw)
    return simulate_requests(s, resolve(s), draw(explicit_requests()),
                             RunOptions(kv_frame_times=FRAME_TIMES, record_events=True))


# -------------------------------------------------------------------------------------------------------------
# The invariants
# -------------------------------------------------------------------------------------------------------------
def admission_times(res) -> np.ndarray:
    """When each request entered the waiting queue: arrivals are admitted at step boundaries, so one that lands
    inside a step waits for its end; one that lands between steps (idle server) is admitted on arrival."""
    arrival = res.requests.arrival_s
    if not len(res.steps):
        return arrival.copy()
    start = res.steps[:, E.S_START]
    end = start + res.steps[:, E.S_DURATION]
    k = np.searchsorted(start, arrival, side="right") - 1
    inside = (k >= 0) & (arrival > start[np.maximum(k, 0)]) & (arrival < end[np.maximum(k, 0)])
    return np.where(inside, end[np.maximum(k, 0)], arrival)


def check_invariants(res) -> None:
    s, r, q = res.scenario, res.resolved, res.requests
    sched = r.scheduler
    n, bs, pool = len(q), s.block_size, r.num_blocks
    PROMPT, OUT, ARR = q.prompt_tokens, q.output_tokens, q.arrival_s
    full = PROMPT + OUT
    acc, steps, ev = res.accumulators, res.steps, res.events
    fin = res.status == E.FINISHED
    rej = res.status == E.REJECTED
    caching = getattr(r, "prefix_cache", False)
    assert res.step_stride == 1, "these runs are small: the step log must not be sampled"

    # ---- every request finished or rejected with a reason that is true of it ----
    assert (fin | rej).all(), f"requests left in states {np.unique(res.status[~(fin | rej)])}"
    too_long = full > r.max_model_len
    too_big = blocks_for(full, bs) > pool
    over_budget = ~np.bool_(sched.chunked_prefill) & (full > r.token_budget)
    infeasible = too_long | too_big | over_budget
    reason = res.reject_reason
    assert (reason[fin] == E.REJECT_NONE).all()
    assert ((reason[rej] > 0) & (reason[rej] < len(E.REJECT_REASONS))).all()
    # Reasons are checked in this order by the engine, so each one implies the earlier ones were false.
    assert too_long[reason == E.REJECT_LONGER_THAN_MODEL].all()
    assert (~too_long & too_big)[reason == E.REJECT_LARGER_THAN_KV_POOL].all()
    assert (~too_long & ~too_big & over_budget)[reason == E.REJECT_LONGER_THAN_BUDGET].all()
    assert not fin[infeasible].any(), "a request that cannot fit finished"
    shed_code = getattr(E, "REJECT_SHED", None)
    shed = reason == shed_code if shed_code is not None else np.zeros(n, bool)
    assert (rej == (infeasible | shed)).all(), "a feasible request was rejected, or an infeasible one was not"
    if shed.any():
        assert getattr(r, "admission", "admit") == "reject", "shed without admission control"
        assert (res.generated[shed] == 0).all() and np.isnan(res.first_scheduled_s[shed]).all()
    assert (res.finish_s[rej & ~shed] == ARR[rej & ~shed]).all(), "rejected at arrival"
    assert (res.finish_s[shed] >= ARR[shed]).all()

    # ---- follow-up turns (agent sessions) arrive a think time after their parent ended ----
    parent = q.parents() if hasattr(q, "parents") else np.full(n, -1)
    child = np.where(parent >= 0)[0]
    if len(child):
        assert np.allclose(ARR[child], res.finish_s[parent[child]] + q.think_times()[child], rtol=0, atol=1e-9)

    # ---- per-request timestamps and token counts ----
    a, fs, ft, ff = ARR[fin], res.first_scheduled_s[fin], res.first_token_s[fin], res.finish_s[fin]
    assert (a <= fs).all() and (fs <= ft).all() and (ft <= ff).all()
    assert (ft - a <= ff - a).all()  # TTFT <= E2EL
    assert (res.generated[fin] == OUT[fin]).all(), "tokens generated != tokens asked"
    assert (res.generated[rej] == 0).all()
    m = res.metrics
    if fin.any():
        for key in ("mean", "p50", "p90", "p99", "max"):
            assert m["ttft_ms"][key] <= m["e2el_ms"][key] + 1e-9

    # ---- KV pool and swap space all returned ----
    assert res.free_blocks_at_end == pool, "KV blocks leaked"
    assert res.swap_free_at_end == r.swap_blocks, "swap space leaked"
    assert res.kv_frame_s[-1] == acc[E.A_END_S] and (res.kv_frames[-1] == -1).all()
    if hasattr(res, "ref_counts_at_end"):
        assert (res.ref_counts_at_end == 0).all(), "reference counts not back to 0 (negative: double free)"
    states = getattr(res, "kv_frame_state", None)
    if states is not None:
        held = np.isin(states, [E.BLOCK_USED, E.BLOCK_SHARED])
        assert ((res.kv_frames >= 0) == held).all(), "owner and block state disagree"
        assert not held[-1].any()
        if not caching:
            assert not np.isin(states, [E.BLOCK_SHARED, E.BLOCK_CACHED]).any()

    # ---- the clock ----
    start, dur = steps[:, E.S_START], steps[:, E.S_DURATION]
    assert len(steps) == acc[E.A_STEPS]
    assert (dur > 0).all()
    assert (np.diff(start) >= 0).all(), "clock went back"
    assert (start[:-1] + dur[:-1] <= start[1:]).all(), "steps overlap"
    if len(steps):
        assert start[-1] + dur[-1] <= acc[E.A_END_S]
        assert acc[E.A_BUSY_S] == pytest.approx(dur.sum(), rel=1e-12)
    assert (np.diff(res.kv_frame_s) >= 0).all()

    # ---- per-step limits ----
    tokens = steps[:, E.S_PREFILL_TOKENS] + steps[:, E.S_DECODE_SEQS]
    assert (steps[:, E.S_PREFILL_SEQS] + steps[:, E.S_DECODE_SEQS] <= s.max_seqs).all()
    assert (steps[:, E.S_KV_BLOCKS] <= pool).all()
    if not sched.static_batching:  # static batching pads every prompt to the batch's longest
        budget_col = getattr(E, "S_TOKEN_BUDGET", None)
        if budget_col is not None:
            assert (tokens <= steps[:, budget_col]).all(), "step over its token budget"
            if not getattr(s, "adaptive_budget", False):
                assert (steps[:, budget_col] == r.token_budget).all()
        else:
            assert (tokens <= r.token_budget).all()

    # ---- tokens conserved ----
    prefill, decode = acc[E.A_PREFILL_TOKENS], acc[E.A_DECODE_TOKENS]
    # Speculative decoding: a decoding sequence's step emits its accepted drafts too, in one burst (one ITL gap).
    accepted = acc[E.A_SPEC_ACCEPTED] if hasattr(E, "A_SPEC_ACCEPTED") else 0.0
    assert prefill == steps[:, E.S_PREFILL_TOKENS].sum() and decode == steps[:, E.S_DECODE_SEQS].sum() + accepted
    recomputed = (ev[:, E.E_KIND] == E.EV_PREEMPT_RECOMPUTE).any()
    # Prompt tokens found in the prefix cache are not computed again.
    cached = acc[E.A_CACHED_TOKENS] if hasattr(E, "A_CACHED_TOKENS") else 0.0
    first_hit = np.maximum(res.cached_prefix, 0) if hasattr(res, "cached_prefix") else np.zeros(n, np.int64)
    if not caching:
        assert cached == 0 and (first_hit == 0).all()
    assert (first_hit <= np.maximum(PROMPT - 1, 0)).all(), "a prefix hit must leave a token to compute"
    assert prefill + cached >= PROMPT[fin].sum()
    if sched.static_batching:
        assert res.preemptions.sum() == 0
    else:
        # The last output token's KV is never computed: a finished request computed prompt + output - 1 tokens.
        assert prefill + cached + decode >= (full[fin] - 1).sum()
        if not recomputed:  # swap keeps KV, so without recompute every token is computed exactly once
            assert prefill + cached == PROMPT[fin].sum()
            assert cached == first_hit[fin].sum()
            assert decode == (OUT[fin] - 1).sum()
    assert acc[E.A_ITL_COUNT] == (OUT[fin] - 1).sum() - accepted
    assert res.itl_fine.sum() + res.itl_coarse.sum() == acc[E.A_ITL_COUNT]
    assert (res.max_itl_s[fin] * (1 + 1e-12) >= (ff - ft) / np.maximum(OUT[fin] - 1, 1)).all()

    # ---- event log against the step log and the per-request counters ----
    kinds = ev[:, E.E_KIND]
    preempt_ev = ev[(kinds == E.EV_PREEMPT_RECOMPUTE) | (kinds == E.EV_SWAP_OUT)]
    assert acc[E.A_PREEMPTIONS] == res.preemptions.sum() == len(preempt_ev) == m["preemptions"]
    assert (res.preemptions > 0).sum() == m["preempted_requests"]
    if s.preemption == "none":
        assert len(preempt_ev) == 0
    if s.preemption != "swap":
        assert not (kinds == E.EV_SWAP_OUT).any() and not (kinds == E.EV_SWAP_IN).any()
    for rid in np.unique(ev[kinds == E.EV_SWAP_OUT, E.E_REQUEST]):  # every swap-out is swapped back in
        mine = ev[ev[:, E.E_REQUEST] == rid, E.E_KIND]
        assert (mine == E.EV_SWAP_OUT).sum() == (mine == E.EV_SWAP_IN).sum()
    nsteps = len(steps)
    pre_ev = ev[kinds == E.EV_PREFILL]
    if not sched.static_batching:
        assert (np.bincount(pre_ev[:, E.E_STEP], weights=pre_ev[:, E.E_TOKENS], minlength=nsteps)
                == steps[:, E.S_PREFILL_TOKENS]).all()
        assert (np.bincount(pre_ev[:, E.E_STEP], minlength=nsteps) == steps[:, E.S_PREFILL_SEQS]).all()
        assert (np.bincount(preempt_ev[:, E.E_STEP], minlength=nsteps) == steps[:, E.S_PREEMPTIONS]).all()
    for rid in np.where(fin)[0]:
        mine = pre_ev[pre_ev[:, E.E_REQUEST] == rid]
        assert len(mine) and start[mine[0, E.E_STEP]] == res.first_scheduled_s[rid]
        if res.preemptions[rid] == 0 and not sched.static_batching:
            assert mine[:, E.E_TOKENS].sum() == PROMPT[rid] - first_hit[rid]
            if not sched.chunked_prefill:
                assert len(mine) == 1, "a whole prompt is prefilled in one step without chunking"

    # ---- KV snapshots: owners are running requests holding at most their full length ----
    frames, frame_s = res.kv_frames, res.kv_frame_s
    if sched.static_batching:
        # A static batch holds every member's blocks until its last member finishes.
        batch_end = {t: res.finish_s[fin & (res.first_scheduled_s == t)].max()
                     for t in np.unique(res.first_scheduled_s[fin])}
        held_until = np.array([batch_end.get(t, np.nan) for t in res.first_scheduled_s])
    else:
        held_until = res.finish_s
    for f in range(len(frames)):
        owners = frames[f][frames[f] >= 0]
        if not len(owners):
            continue
        ids, counts = np.unique(owners, return_counts=True)
        t = frame_s[f]
        assert fin[ids].all(), "a block owned by a request that never ran"
        assert (counts <= blocks_for(full[ids], bs)).all(), "a request holds more blocks than its full length"
        assert (res.first_scheduled_s[ids] < t).all(), f"blocks owned at t={t} by a request not yet admitted"
        assert (held_until[ids] > t).all(), f"blocks owned at t={t} by a request that has finished"
    # ... and not while preempted: from its preemption step to its readmission (swap-in or new prefill).
    for rid in np.unique(preempt_ev[:, E.E_REQUEST]):
        mine = ev[ev[:, E.E_REQUEST] == rid]
        for k in np.where((mine[:, E.E_KIND] == E.EV_PREEMPT_RECOMPUTE) | (mine[:, E.E_KIND] == E.EV_SWAP_OUT))[0]:
            back = E.EV_SWAP_IN if mine[k, E.E_KIND] == E.EV_SWAP_OUT else E.EV_PREFILL
            later = mine[k + 1:][mine[k + 1:, E.E_KIND] == back]
            assert len(later), "a preempted request was never readmitted"
            t0, t1 = start[mine[k, E.E_STEP]], start[later[0, E.E_STEP]]
            during = (frame_s > t0) & (frame_s <= t1)
            assert not (frames[during] == rid).any(), "a preempted request still owns blocks"

    # ---- Little's law on the recorded timeline ----
    admit = admission_times(res)
    in_system = fin | shed
    # Exact accounting: each request is in the system from its admission to its finish (or shedding).
    assert acc[E.A_IN_SYSTEM_S] == pytest.approx((res.finish_s - admit)[in_system].sum(), rel=1e-9, abs=1e-9)
    end = acc[E.A_END_S]
    if fin.any() and end > 0:
        # L = lambda W, where L counts from admission and W (E2EL) from arrival: arrivals wait for the step
        # boundary, so lambda W - L lies in [0, completed x longest step / T] (plus time shed requests spent
        # queued, which L counts and W does not).
        L = acc[E.A_IN_SYSTEM_S] / end
        lam_w = fin.sum() / end * (ff - a).mean()
        slack = (fin.sum() * dur.max() + (res.finish_s - admit)[shed].sum()) / end
        assert -slack - 1e-9 <= lam_w - L <= slack + 1e-9

    # ---- where the time went (sim_core/kernel/attribution.py): parts of each finished request's latency ----
    split = res.attribution[fin]
    assert (split >= -1e-9).all(), "a negative part of a request's latency"
    assert np.allclose(split.sum(axis=1), (res.finish_s - ARR)[fin], rtol=1e-9, atol=1e-9)
    # Preemption time only for requests preempted, or in steps that carried another's swap traffic.
    if s.preemption != "swap":
        assert (split[res.preemptions[fin] == 0, AT_PREEMPTION] == 0).all()


# -------------------------------------------------------------------------------------------------------------
# The tests: every scheduler x every preemption mode
# -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preemption", PREEMPTION_MODES)
@pytest.mark.parametrize("scheduler", SCHEDULER_NAMES)
@PROFILE
@given(data=st.data())
def test_invariants_on_random_scenarios(scheduler, preemption, data):
    check_invariants(data.draw(simulated(scheduler, preemption)))


@PROFILE
@given(scheduler=st.sampled_from([n for n in SCHEDULER_NAMES if n != "static"]),
       preemption=st.sampled_from(PREEMPTION_MODES), method=st.sampled_from(["ngram", "draft", "eagle", "mtp"]),
       k=st.integers(0, 6), acceptance=st.sampled_from([None, 0.2, 0.95]), disable_above=st.sampled_from([0, 2]),
       k_policy=st.sampled_from(["fixed", "goodput"]), data=st.data())
def test_invariants_with_speculative_decoding(scheduler, preemption, method, k, acceptance, disable_above, k_policy,
                                              data):
    """Drafts verified in the token budget, KV for k + 1 tokens per decoding sequence, bursts of accepted tokens:
    no leaked block, every request finished or rejected once, tokens conserved (check_invariants)."""
    kw = data.draw(scenario_kwargs(scheduler, preemption))
    if "spec_method" not in FIELDS:
        pytest.skip("no speculative decoding in this build")
    kw.update(spec_method=method, spec_tokens=k, spec_acceptance=acceptance, spec_disable_above=disable_above,
              spec_k_policy=k_policy)
    s = Scenario(**{key: v for key, v in kw.items() if v is not None})
    res = simulate_requests(s, resolve(s), data.draw(explicit_requests()),
                            RunOptions(kv_frame_times=FRAME_TIMES, record_events=True, debug_checks=True))
    check_invariants(res)
    assert (res.generated[res.status == E.FINISHED] == res.requests.output_tokens[res.status == E.FINISHED]).all()


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(SCHEDULER_NAMES), preemption=st.sampled_from(PREEMPTION_MODES),
       kv_blocks=st.integers(3, 12), block_size=st.sampled_from([8, 16]), data=st.data())
def test_tight_pools_force_preemption_yet_everything_finishes(scheduler, preemption, kv_blocks, block_size, data):
    """Many small requests into a pool of a few blocks: most runs preempt; all must still finish cleanly."""
    n = data.draw(st.integers(4, 24))
    cap = kv_blocks * block_size
    prompt = np.asarray(data.draw(st.lists(st.integers(1, cap // 2), min_size=n, max_size=n)), np.int64)
    output = np.asarray(data.draw(st.lists(st.integers(1, cap // 2), min_size=n, max_size=n)), np.int64)
    reqs = Requests(np.zeros(n), prompt, output, np.zeros(n, np.int64), ("explicit",))
    admit = {"admission": "admit"} if "admission" in FIELDS else {}  # no shedding: all must finish
    s = Scenario(scheduler=scheduler, preemption=preemption, hardware="rtx3050", max_model_len=8192, kv_blocks=kv_blocks,
                 block_size=block_size, max_seqs=data.draw(st.sampled_from([2, 4, 256])),
                 swap_space_gb=data.draw(st.sampled_from([0.0005, 4.0])), **admit)
    res = simulate_requests(s, resolve(s), reqs, RunOptions(kv_frame_times=FRAME_TIMES, record_events=True))
    check_invariants(res)
    assert (res.status == E.FINISHED).all()  # every request fits the pool and the default budget
