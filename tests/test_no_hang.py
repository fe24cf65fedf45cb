"""Every run ends, whatever the deployment and however few its requests (issue #35), under every engine profile.

A deployment whose engines mostly sit idle is where an engine loop can spin: a replica or an attention-DP rank
that receives no request, or one that receives all of them, fleets that scale around one request, requests that
arrive only late. Hypothesis draws such runs (replicas 1-4, attention-DP ranks of a MoE model, prefill/decode
pools, autoscaled fleets; 0-3 requests, open loop, late, closed loop or a rate schedule) for each engine in
engines.json (vllm schedules synchronously; sglang and trtllm asynchronously, the case that hung), and checks that
each run ends and that every request finished or was rejected, once.

A hang must fail, not block the suite: each run goes on a worker thread (the kernels release the GIL), and one
that has not ended after HANG_S has its cancel flag set (every engine loop polls it) and fails the test.
bench/no_hang.py runs a larger campaign (SCHED_SIM_EXAMPLES sets the examples per engine here).
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from sim_core import Scenario
from sim_core.engines import ENGINE_NAMES
from sim_core.kernel.state import (
    A_CACHED_TOKENS,
    A_DECODE_TOKENS,
    A_PREEMPTIONS,
    A_PREFILL_TOKENS,
    FINISHED,
    REJECT_NONE,
    REJECTED,
)
from sim_core.runner import RunOptions, make_requests, resolve, simulate_requests

# A tiny run takes milliseconds once compiled: one still going after this long is looping. The first runs may
# compile every loop first (a minute or more on a busy machine), hence their longer limit.
HANG_S = 10.0
COMPILE_S = 900.0
EXAMPLES = int(os.environ.get("SCHED_SIM_EXAMPLES", "6"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow])
# Short requests on a GPU with room to spare: the runs are about when engines go idle, not about load.
BASE = dict(hardware="h100", model="llama-3.2-1b", workload="random", isl=64, osl=4, length_range=0.5)
# With it, about half the requests (34 to 102 tokens in all) are rejected on arrival: requests that end unserved.
SHORT_CONTEXT = dict(max_model_len=64)
MOE = dict(model="qwen3-30b-a3b", attention_dp=True)  # with ep > tp: ep / tp attention data-parallel ranks
LATE_S = 120.0  # "arriving only late": after every engine has long gone idle, and after autoscaler evaluations


# -------------------------------------------------------------------------------------------------------------
# Running with a watchdog
# -------------------------------------------------------------------------------------------------------------
class Hung(AssertionError):
    pass


def run_with_watchdog(scenario: Scenario, requests=None, limit_s: float = HANG_S):
    """(Result, the requests run). A run still going after `limit_s` is cancelled and raises Hung. `requests`: a
    function of the scenario's requests giving those to run (None: all of them)."""
    resolved = resolve(scenario)
    reqs = make_requests(scenario, resolved) if requests is None else requests(make_requests(scenario, resolved))
    cancel = np.zeros(1, np.int64)
    box: dict = {}

    def work():
        try:
            box["result"] = simulate_requests(scenario, resolved, reqs, RunOptions(cancel=cancel))
        except BaseException as e:  # handed to the test's thread
            box["error"] = e

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        cancel[0] = 1
        worker.join(5.0)
        raise Hung(f"the run did not end within {limit_s} s; requests arriving at {reqs.arrival_s.tolist()} s: "
                   f"{scenario.to_query()}")
    if "error" in box:
        raise box["error"]
    return box["result"], reqs


def check_each_request_ended_once(result, reqs):
    """Every request finished (all its tokens out) or was rejected (for a reason), and none was served twice."""
    assert len(result.status) == len(reqs)
    finished, rejected = result.status == FINISHED, result.status == REJECTED
    assert np.all(finished ^ rejected), result.status
    assert np.all(result.reject_reason[rejected] != REJECT_NONE)
    assert np.all(result.reject_reason[finished] == REJECT_NONE)
    assert np.array_equal(result.generated[finished], reqs.output_tokens[finished])
    assert np.all(np.isfinite(result.finish_s))
    if result.replica_of is not None:
        assert np.all(result.replica_of[finished] >= 0)
    # Served once: each request that got a token had its prompt and each output token's KV but the last's
    # computed once, on one engine (or found in the prefix cache); one rejected before any token, nothing. (A
    # preempted request's recompute computes some again, hence the condition. One that got a token and was then
    # rejected: disaggregated serving's decode engine refusing a prompt the prefill engine took.)
    if result.accumulators[A_PREEMPTIONS] == 0:
        served = result.generated > 0
        needed = int(reqs.prompt_tokens[served].sum() + (result.generated[served] - 1).sum())
        acc = result.accumulators
        assert acc[A_PREFILL_TOKENS] + acc[A_DECODE_TOKENS] + acc[A_CACHED_TOKENS] == needed


# -------------------------------------------------------------------------------------------------------------
# Strategies: deployments and arrivals
# -------------------------------------------------------------------------------------------------------------
def deployments():
    replicas = st.builds(dict, replicas=st.integers(1, 4))
    attention_dp = st.builds(lambda ep, rep: dict(MOE, ep=ep, replicas=rep),
                             st.sampled_from([2, 4]), st.integers(1, 2))
    pools = st.builds(dict, prefill_replicas=st.integers(1, 2), decode_replicas=st.integers(1, 2))
    utilization = st.builds(lambda lo, hi, start, t: dict(autoscaler="utilization", min_replicas=lo,
                                                          max_replicas=hi, replicas=min(max(start, 1), hi),
                                                          autoscale_target=t, autoscale_interval_s=5,
                                                          provision_delay_s=2, autoscale_cooldown_s=10),
                            st.integers(0, 1), st.integers(1, 3), st.integers(1, 3), st.sampled_from([1.0, 2.0]))
    predictive = st.builds(lambda hi, rate: dict(autoscaler="predictive", min_replicas=1, max_replicas=hi,
                                                 autoscale_replica_rate=rate, autoscale_interval_s=5,
                                                 provision_delay_s=2),
                           st.integers(1, 3), st.sampled_from([0.2, 5.0]))
    return st.one_of(replicas, attention_dp, pools, utilization, predictive)


@st.composite
def arrivals(draw):
    """(scenario fields, a function of the made requests giving those to run, or None for all of them)."""
    kind = draw(st.sampled_from(["open", "late", "closed", "schedule"]))
    n = draw(st.integers(0 if kind in ("open", "late") else 1, 3))
    limit = dict(SHORT_CONTEXT if draw(st.booleans()) else {}, seed=draw(st.integers(0, 3)))
    if kind == "closed":
        return dict(limit, concurrency=draw(st.integers(1, 2)), num_requests=n), None
    if kind == "schedule":  # the first request at 0 (as every workload), the next ones after a minute of nothing
        return dict(limit, rate_schedule="0:0.000001,60:1", num_requests=n), None
    shift = LATE_S if kind == "late" else 0.0
    return dict(limit, rate=2.0, num_requests=3), lambda reqs: _first(reqs, n, shift)


def _first(reqs, n, shift_s):
    """The first n requests (0 included: a run with no request at all), their arrivals shifted by shift_s."""
    kept = reqs.subset(np.arange(n))
    kept.arrival_s[:] = kept.arrival_s + shift_s
    return kept


# -------------------------------------------------------------------------------------------------------------
# The property
# -------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def compiled():
    """Each deployment's loop compiled (or loaded from the cache) before the examples, whose runs are allowed only
    HANG_S: a cold compile takes longer."""
    for shape in (dict(replicas=1), dict(replicas=2), dict(prefill_replicas=1, decode_replicas=1),
                  dict(autoscaler="utilization", autoscale_target=1.0, max_replicas=2)):
        run_with_watchdog(Scenario(**BASE, **shape, num_requests=2), limit_s=COMPILE_S)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@PROFILE
@given(deployment=deployments(), arrival=arrivals())
def test_every_run_ends_and_every_request_ends_once(engine, deployment, arrival):
    fields, requests = arrival
    scenario = Scenario(**{**BASE, **deployment, **fields, "engine": engine})
    note(scenario.to_query())
    result, reqs = run_with_watchdog(scenario, requests)
    check_each_request_ended_once(result, reqs)


# Issue #35's runs: one request, so one replica or rank serves it and the others never get any (the replica that
# got every request is the one whose held finished request kept it from reading as idle).
ISSUE_DEPLOYMENTS = {
    "two replicas": dict(replicas=2),
    "attention-DP ranks": dict(MOE, ep=2),
    "autoscaled": dict(autoscaler="utilization", autoscale_target=1.0, max_replicas=2, replicas=2),
}


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("deployment", ISSUE_DEPLOYMENTS, ids=str)
def test_one_request_on_several_engines_ends(engine, deployment):
    scenario = Scenario(**{**BASE, **ISSUE_DEPLOYMENTS[deployment], "num_requests": 1, "engine": engine})
    result, reqs = run_with_watchdog(scenario)
    assert result.status.tolist() == [FINISHED]
    check_each_request_ended_once(result, reqs)
