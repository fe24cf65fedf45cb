"""Closed-loop load (concurrency: N users, each sending its next request when its last one ends) and the
fixed-length `random` workload (isl, osl, length_range as vLLM's random dataset)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.cli import main
from sim_core import Scenario
from sim_core.deployment import resolve
from sim_core.kernel.content_hash import content_hashes
from sim_core.runner import make_requests, run
from sim_core.scenario import ScenarioError, parse_scenario
from sim_core.workload import UNIQUE, closed_loop, length_bounds

TRACE = "arrival_s,prompt_tokens,output_tokens\n" + "".join(
    f"{0.05 * k:.2f},{200 + 37 * (k % 11)},{20 + 13 * (k % 7)}\n" for k in range(30))


def in_system(res) -> tuple[np.ndarray, float]:
    """Requests arrived and not yet finished at the midpoint of every interval between two events, and when the
    first user ran out of requests (from then on the loop drains)."""
    a, f = res.requests.arrival_s, res.finish_s
    assert np.isfinite(a).all() and np.isfinite(f).all()
    parent = res.requests.parents()
    last = np.setdiff1d(np.arange(len(a)), parent[parent >= 0])  # a user's last request is nobody's parent
    times = np.unique(np.concatenate([a, f]))
    mids = (times[:-1] + times[1:]) / 2
    counts = np.array([np.sum((a <= t) & (f > t)) for t in mids])
    return counts[mids < f[last].min()], float(f[last].min())


CASES = {
    "preset": dict(workload="chat", num_requests=40),
    "trace": dict(num_requests=30),
    "replicas": dict(workload="chat", num_requests=40, replicas=2),
    "pools": dict(workload="chat", num_requests=40, prefill_replicas=1, decode_replicas=1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_closed_loop_keeps_exactly_n_requests_in_the_system(case):
    s = Scenario(hardware="a100", concurrency=5, seed=3, **CASES[case])
    res = run(s, trace_text=TRACE if case == "trace" else None)
    counts, drain = in_system(res)
    assert drain > 0 and len(counts) > 10
    assert (counts == 5).all(), counts
    assert res.metrics["completed"] == s.num_requests


def test_with_think_time_at_most_n_are_in_the_system_and_each_user_waits_it():
    res = run(Scenario(hardware="a100", workload="chat", num_requests=40, concurrency=5, think_time_s=0.5))
    counts, _ = in_system(res)
    assert counts.max() == 5 and counts.min() < 5
    parent = res.requests.parents()
    follows = parent >= 0
    gaps = res.requests.arrival_s[follows] - res.finish_s[parent[follows]]
    assert np.allclose(gaps, 0.5)


def test_the_closed_loop_sends_the_open_loop_requests_dealt_round_robin():
    s = Scenario(workload="rag", num_requests=50, concurrency=4, prefix_cache=True)
    open_loop = make_requests(s.model_copy(update={"concurrency": None}), resolve(s))
    closed = make_requests(s, resolve(s))
    for f in ("prompt_tokens", "output_tokens", "request_class"):
        assert np.array_equal(getattr(open_loop, f), getattr(closed, f))
    # Content is untouched: what the prefix cache can share is what the open-loop run could.
    for a, b in zip(content_hashes(*open_loop.content(), 16), content_hashes(*closed.content(), 16), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(np.flatnonzero(closed.arrival_s == 0), np.arange(4))
    assert np.isinf(closed.arrival_s[4:]).all()
    assert np.array_equal(closed.parents(), np.r_[np.full(4, -1), np.arange(46)])
    # A user's consecutive requests are not a conversation: neither carries the other's own text (they share
    # only what any requests share: the system prompt, a popular document).
    ids, _, off = closed.content()
    for k in range(4, 50):
        mine, before = set(ids[off[k]:off[k + 1]].tolist()), set(ids[off[k - 4]:off[k - 3]].tolist())
        assert not {x for x in mine & before if x >= UNIQUE}
        assert {x for x in mine if x >= UNIQUE}  # the check above has something to check


def test_sessions_stay_whole_and_a_user_starts_its_next_session_after_the_last_turn():
    s = Scenario(workload="multiturn", num_requests=60, concurrency=3)
    reqs = make_requests(s.model_copy(update={"concurrency": None}), resolve(s))
    closed = closed_loop(reqs, 3, 1.5)
    old, new = reqs.parents(), closed.parents()
    turns = old >= 0
    assert np.array_equal(new[turns], old[turns])  # every follow-up turn keeps its parent and think time
    assert np.array_equal(closed.think_times()[turns], reqs.think_times()[turns])
    heads = np.flatnonzero(~turns)
    assert (new[heads[:3]] == -1).all() and (closed.think_times()[heads[3:]] == 1.5).all()
    for h, prev in zip(heads[3:], heads[:-3], strict=True):  # session j + 3 follows session j's last turn
        t = prev
        while (old == t).any():
            t = int(np.flatnonzero(old == t)[0])
        assert new[h] == t


def test_random_lengths_follow_vllm_random_range_ratio():
    s = Scenario(workload="random", isl=1024, osl=1024, length_range=0.8, num_requests=4000)
    reqs = make_requests(s, resolve(s))
    lo, hi = math.floor(1024 * 0.2), math.ceil(1024 * 1.8)
    assert (lo, hi) == length_bounds(1024, 0.8) == (204, 1844)
    for x in (reqs.prompt_tokens, reqs.output_tokens):
        assert x.min() >= lo and x.max() <= hi
        assert x.min() < lo + 20 and x.max() > hi - 20  # uniform: both ends are reached
        assert abs(x.mean() - 1024) < 30
    default = make_requests(Scenario(workload="random", num_requests=50), resolve(Scenario(workload="random")))
    assert (default.prompt_tokens == 1024).all() and (default.output_tokens == 128).all()
    assert length_bounds(1, 0.9) == (1, 2)  # never a zero-token request


def test_inferencex_lengths_are_uniform_below_each_length():
    """length_range_mode inferencex: [rL, L], as InferenceX's client draws (--random-range-ratio 0.8)."""
    s = Scenario(workload="random", isl=1024, osl=1024, length_range=0.8, length_range_mode="inferencex",
                 num_requests=4000)
    reqs = make_requests(s, resolve(s))
    lo = math.floor(1024 * 0.8)
    assert length_bounds(1024, 0.8, "inferencex") == (lo, 1024)
    for x in (reqs.prompt_tokens, reqs.output_tokens):
        assert x.min() >= lo and x.max() <= 1024
        assert x.min() < lo + 10 and x.max() > 1024 - 10  # uniform: both ends are reached
        assert abs(x.mean() - (lo + 1024) / 2) < 10
    exact = Scenario(workload="random", isl=300, osl=30, length_range_mode="inferencex", num_requests=20)
    reqs = make_requests(exact, resolve(exact))
    assert (reqs.prompt_tokens == 300).all() and (reqs.output_tokens == 30).all()  # no range: exact lengths
    assert length_bounds(10, 0.0, "inferencex") == (1, 10)  # InferenceX would draw 0 tokens; never here


@pytest.mark.parametrize(("fields", "named"), [
    ({"concurrency": 4, "rate": 2}, "rate"),
    ({"concurrency": 4, "rate_schedule": "0:5"}, "rate_schedule"),
    ({"concurrency": 4, "burstiness": 2}, "burstiness"),
    ({"think_time_s": 1}, "think_time_s"),
    ({"concurrency_mode": "semaphore"}, "concurrency_mode"),
    ({"concurrency": 4, "concurrency_mode": "fifo"}, "concurrency_mode"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": 4, "think_time_s": -1}, "think_time_s"),
    ({"isl": 512}, "isl"),
    ({"workload": "chat", "osl": 64}, "osl"),
    ({"workload": "random", "length_range": 1}, "length_range"),
    ({"workload": "chat", "length_range_mode": "inferencex"}, "length_range_mode"),
    ({"workload": "random", "length_range_mode": "below"}, "length_range_mode"),
    ({"workload": "random", "isl": 512, "trace": "t.csv"}, "isl"),
])
def test_closed_loop_and_length_errors_name_the_field(fields, named):
    with pytest.raises(ScenarioError) as e:
        parse_scenario({k: str(v) for k, v in fields.items()})
    assert [f for f, _ in e.value.problems] == [named], e.value.problems


def test_studies_over_rates_refuse_a_closed_loop():
    with pytest.raises(ScenarioError) as e:
        Scenario(concurrency=4).require_constant_rate("a sweep")
    assert e.value.problems[0][0] == "concurrency"


def test_closed_loop_fields_round_trip_the_query_string():
    s = Scenario(workload="random", isl=2048, osl=256, length_range=0.25, concurrency=16, think_time_s=0.5)
    assert Scenario.from_query(s.to_query()) == s


def test_the_cli_runs_a_closed_loop_frontier_point_and_says_so(capsys):
    code = main(["run", "--hardware", "a100", "--workload", "random", "--isl", "1024", "--osl", "1024",
                 "--length-range", "0.8", "--concurrency", "8", "--num-requests", "24"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "random: 24 requests, closed loop of 8 users, seed 0" in out
    assert "prompt 204-1,844 tokens, output 204-1,844 tokens" in out
    assert main(["run", "--concurrency", "8", "--rate", "2"]) != 0
    assert "--rate: with concurrency" in capsys.readouterr().err


def test_session_routing_follows_conversations_not_closed_loop_users():
    # chat requests are each their own conversation: a user's consecutive ones may go anywhere
    res = run(Scenario(hardware="a100", workload="chat", num_requests=60, concurrency=3, replicas=4,
                       router="session"))
    user = np.arange(60) % 3
    assert all(len(set(res.replica_of[user == k])) > 1 for k in range(3))
    # a multiturn conversation's turns stay on one replica, whichever user sends it
    res = run(Scenario(hardware="a100", workload="multiturn", num_requests=60, concurrency=3, replicas=4,
                       router="session"))
    turns = res.requests.conversation_parents()
    follow = np.flatnonzero(turns >= 0)
    assert len(follow) > 5 and (res.replica_of[follow] == res.replica_of[turns[follow]]).all()
    assert res.requests.loop_link.sum() == 60 - len(follow) - 3


SEMAPHORE = {
    "one engine": dict(),
    "replicas": dict(replicas=3),
    "pools": dict(prefill_replicas=1, decode_replicas=2),
}


@pytest.mark.parametrize("case", sorted(SEMAPHORE))
def test_a_semaphore_sends_the_next_request_in_order_whenever_any_slot_frees(case):
    s = Scenario(hardware="a100", workload="chat", num_requests=40, concurrency=5, concurrency_mode="semaphore",
                 seed=2, **SEMAPHORE[case])
    res = run(s)
    a, f = res.requests.arrival_s, res.finish_s
    assert np.isfinite(a).all() and res.metrics["completed"] == 40
    assert (np.diff(a) >= 0).all()  # in list order
    # the k-th request after the first five goes out at the k-th end, so exactly 5 are in flight until the last
    # one is sent
    assert np.allclose(a[5:], np.sort(f)[:35])
    times = np.unique(np.concatenate([a, f]))
    mids = (times[:-1] + times[1:]) / 2
    counts = np.array([np.sum((a <= t) & (f > t)) for t in mids[mids < a[-1]]])
    assert len(counts) > 10 and (counts == 5).all(), counts
    # it differs from the users model, which pins request k to user k mod 5
    users = run(s.model_copy(update={"concurrency_mode": "users"}))
    assert not np.allclose(users.requests.arrival_s, a)
