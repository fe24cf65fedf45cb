"""The stepping interface: an outer compiled loop can hold several engines side by side and advance whichever
one's next event comes first (what the cluster simulation does), with exactly the results of running each alone."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from sim_core import Scenario
from sim_core.kernel.build import new_engine, outcome
from sim_core.kernel.engine import finished, load, next_event_s, simulate, step
from sim_core.kernel.logs import take_frames
from sim_core.kernel.queues import to_compute
from sim_core.kernel.state import N_WAITING_TOKENS
from sim_core.runner import class_slos, engine_config, frame_spec, make_requests, request_table, resolve


@njit
def interleave(cfg_a, req_a, cfg_b, req_b, frames):
    a, b = new_engine(cfg_a, req_a, frames), new_engine(cfg_b, req_b, frames)
    steps_a = steps_b = 0
    max_waiting = 0
    while not (finished(a) and finished(b)):
        if not finished(a) and (finished(b) or next_event_s(a) <= next_event_s(b)):
            step(a)
            steps_a += 1
        else:
            step(b)
            steps_b += 1
        max_waiting = max(max_waiting, load(a)[0] + load(b)[0])
    take_frames(a, True)
    take_frames(b, True)
    return outcome(a), outcome(b), steps_a, steps_b, max_waiting


def _inputs(**kw):
    s = Scenario(hardware="rtx3050", max_model_len=8192, num_requests=60, rate=12.0, **kw)
    r = resolve(s)
    reqs = make_requests(s, r)
    cfg = engine_config(s, r, class_slos(s, r, reqs), record_events=True, max_step_records=1 << 20,
                        debug_checks=False)
    return cfg, request_table(reqs, cfg), frame_spec(reqs)


def test_two_engines_stepped_side_by_side_match_each_run_alone():
    cfg_a, req_a, frames = _inputs(scheduler="chunked", seed=1)
    cfg_b, req_b, _ = _inputs(scheduler="spf", seed=2, preemption="swap", kv_blocks=300)
    out_a, out_b, steps_a, steps_b, max_waiting = interleave(cfg_a, req_a, cfg_b, req_b, frames)
    for together, (cfg, req) in ((out_a, (cfg_a, req_a)), (out_b, (cfg_b, req_b))):
        alone = simulate(cfg, req, frames)
        for name in alone._fields:
            x, y = getattr(alone, name), getattr(together, name)
            assert np.array_equal(x, y, equal_nan=True), name
    assert steps_a > 10 and steps_b > 10 and max_waiting > 0


@njit
def _waiting_tokens_drift(cfg, req, frames):
    """Step one engine to the end; after every step compare the waiting-tokens counter the routers read with a
    scan of the waiting heaps. Returns the largest difference seen and the counter at the end."""
    eng = new_engine(cfg, req, frames)
    worst = 0
    while not finished(eng):
        step(eng)
        q = eng.q
        scanned = 0
        for t in range(q.q_size.shape[0]):
            for i in range(q.q_off[t], q.q_off[t] + q.q_size[t]):
                scanned += to_compute(eng, q.wait_ids[i])
        worst = max(worst, abs(scanned - q.size[N_WAITING_TOKENS]))
    return worst, eng.q.size[N_WAITING_TOKENS]


@pytest.mark.parametrize("kw", [dict(scheduler="chunked"), dict(scheduler="fcfs", preemption="recompute", kv_blocks=60),
                                dict(scheduler="slo", admission="degrade"), dict(scheduler="slo"),
                                dict(scheduler="static"), dict(scheduler="fair", workload="multitenant"),
                                dict(scheduler="chunked", preemption="swap", kv_blocks=60)])
def test_the_waiting_tokens_counter_always_equals_the_waiting_requests_sum(kw):
    worst, at_end = _waiting_tokens_drift(*_inputs(**kw))
    assert worst == 0 and at_end == 0
