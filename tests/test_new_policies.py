"""The policies added after the engine refactor, each by policy code alone: `edf` and `mlfq`."""

from __future__ import annotations

import numpy as np

from sim_core import Scenario
from sim_core.runner import RunOptions, resolve, simulate_requests
from sim_core.workload import Requests

# `mixed` gives each class its own TTFT target (DistServe): summarize 15 s, conversation 0.4 s, code 0.125 s.
MIXED_CLASSES = ("conversation", "code", "summarize")
SUMMARIZE, CONVERSATION, CODE = 2, 0, 1


def run(reqs: Requests, **scenario):
    s = Scenario(hardware="rtx3050", max_model_len=8192, workload="mixed", **scenario)
    return simulate_requests(s, resolve(s), reqs, RunOptions(record_events=True))


def explicit(arrival, prompt, output, request_class, class_names=MIXED_CLASSES) -> Requests:
    return Requests(np.asarray(arrival, np.float64), np.asarray(prompt, np.int64), np.asarray(output, np.int64),
                    np.asarray(request_class, np.int64), class_names)


# ----- edf -----
def test_edf_serves_in_deadline_order_when_deadlines_reverse_arrival_order():
    # Six requests at t=0; the later ones (by id, which is arrival order) have the tighter TTFT targets.
    classes = [SUMMARIZE, SUMMARIZE, CONVERSATION, CONVERSATION, CODE, CODE]
    reqs = explicit(np.zeros(6), [200] * 6, [20] * 6, classes)
    edf = run(reqs, scheduler="edf", max_seqs=1)
    fcfs_like = run(reqs, scheduler="chunked", max_seqs=1)
    assert list(np.argsort(edf.first_scheduled_s, kind="stable")) == [4, 5, 2, 3, 0, 1]
    assert list(np.argsort(fcfs_like.first_scheduled_s, kind="stable")) == [0, 1, 2, 3, 4, 5]
    # The first code request makes its 125 ms TTFT target only under EDF (one sequence at a time: the second
    # waits for the first to finish).
    ttft_ms = (edf.first_token_s - reqs.arrival_s) * 1e3
    assert ttft_ms[4] <= 125
    assert ((fcfs_like.first_token_s - reqs.arrival_s)[[4, 5]] * 1e3 > 125).all()


# ----- mlfq -----
def long_job_then_short_ones(shorts: int, every_s: float, long_output: int = 300) -> Requests:
    """One long request at t=0, then `shorts` short ones every `every_s` seconds from 0.5 s."""
    arrival = np.concatenate([[0.0], 0.5 + every_s * np.arange(shorts)])
    output = np.array([long_output] + [8] * shorts)
    return explicit(arrival, np.full(shorts + 1, 64), output, np.zeros(shorts + 1, np.int64), ("conversation",))


def test_mlfq_demotes_the_long_job_and_short_jobs_overtake_it():
    reqs = long_job_then_short_ones(shorts=5, every_s=0.3)
    mlfq = run(reqs, scheduler="mlfq", max_seqs=1)
    arrival_order = run(reqs, scheduler="chunked", max_seqs=1)
    # In arrival order every short request waits for the long one to finish.
    assert (arrival_order.first_token_s[1:] > arrival_order.finish_s[0]).all()
    # Under mlfq the long request, demoted after its first quantum, is preempted and the short ones finish first.
    assert (mlfq.finish_s[1:] < mlfq.finish_s[0]).all()
    assert mlfq.preemptions[0] >= 1 and (mlfq.preemptions[1:] == 0).all()
    first_preempted_at = mlfq.events[(mlfq.events[:, 0] == 0) & (mlfq.events[:, 2] != 0)][0, 3]
    # Not before the prompt and the top level's quantum of 32 generated tokens are done (the 32nd is sampled, not
    # yet in the KV cache: 64 + 31 computed tokens).
    assert first_preempted_at >= 64 + 32 - 1
    assert mlfq.metrics["completed"] == len(reqs)


def test_mlfq_without_aging_starves_the_long_job_under_a_stream_and_aging_bounds_its_wait():
    # Short requests arrive faster than one at a time can serve them: the queue of shorts never empties.
    reqs = long_job_then_short_ones(shorts=120, every_s=0.1)
    stream_end = reqs.arrival_s[-1]
    starved = run(reqs, scheduler="mlfq", max_seqs=1)
    aged = run(reqs, scheduler="mlfq", max_seqs=1, aging_rate=2.0)  # a level for every 0.5 s waited
    assert starved.finish_s[0] > stream_end  # it only finishes once the stream has dried up
    assert aged.finish_s[0] < stream_end / 2
    assert aged.metrics["completed"] == starved.metrics["completed"] == len(reqs)


def test_a_long_prompt_skips_the_top_levels():
    # Two requests at t=0: the 4000-token prompt's prefill takes ~26 decode iterations here, more than an 8- or
    # 16-iteration quantum, so it joins level 2 and the 20-token prompt (level 0) goes first although it arrived
    # second. With the default 32-iteration top quantum both join level 0 and arrival order decides.
    reqs = explicit([0.0, 0.0], [4000, 20], [4, 4], [0, 0], ("conversation",))
    small_quantum = run(reqs, scheduler="mlfq", max_seqs=1, mlfq_quantum=8)
    default = run(reqs, scheduler="mlfq", max_seqs=1)
    assert small_quantum.first_scheduled_s[1] < small_quantum.first_scheduled_s[0]
    assert default.first_scheduled_s[0] < default.first_scheduled_s[1]
