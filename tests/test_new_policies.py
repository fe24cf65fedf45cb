"""The policies added after the engine refactor, each by policy code alone: `edf` and `mlfq`."""

from __future__ import annotations

import numpy as np

from sim_core import Scenario
from sim_core.runner import resolve, simulate_requests
from sim_core.workload import Requests

# `mixed` gives each class its own TTFT target (DistServe): summarize 15 s, conversation 0.4 s, code 0.125 s.
MIXED_CLASSES = ("conversation", "code", "summarize")
SUMMARIZE, CONVERSATION, CODE = 2, 0, 1


def run(reqs: Requests, **scenario):
    s = Scenario(hardware="rtx3050", workload="mixed", **scenario)
    return simulate_requests(s, resolve(s), reqs, record_events=True)


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
