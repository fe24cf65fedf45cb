"""Trace replay modes (sim_core/replay_fields.py, sim_core/trace_formats/sessions.py): timestamps sends each
request at its recorded time whatever the server does; sessions sends each when what it waited for was answered,
plus its recorded think time (Weka subagents fork at the spawning request's answer and join before their agent's
next request); closed hands the requests to a closed loop of users. Checked on the bundled Claude Code (Weka)
session and on Qwen-Bailian rows built from its README's schema (no Bailian sample could be fetched:
sim_core/data/traces/README.md), exhaustively for every request, and on random Weka-shaped sessions (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core import Scenario, ScenarioError, TraceError, parse_scenario, run
from sim_core.kernel.content_hash import content_hashes
from sim_core.replay_fields import REPLAY_MODES
from sim_core.trace_formats import read_trace_records
from sim_core.trace_formats.sessions import recorded_parents, session_requests
from sim_core.traces import read_trace_file_records

WEKA = "weka-cc-trace-0291"
# A 70B model on 4 H100s, as test_trace_formats replays the Weka session; 64-token blocks, the trace's own.
SERVER = dict(
    hardware="h100", tp=4, model="llama-3.3-70b", scheduler="chunked", prefix_cache="on", block_size=64
)
EPS = 1e-6


def weka_run(replay: str | None, **extra):
    return run(Scenario(trace=WEKA, replay=replay, **{**SERVER, **extra}))


def waited_for(parsed) -> list[list[int]]:
    """Every row each row must wait for, from the trace: its parent, and where it is its agent's next request
    after the parent spawned subagents, every request of those subagents (the join)."""
    parent = recorded_parents(parsed)
    agent = parsed.fields.get("agent", np.zeros(len(parent), np.int64))
    first_of = {int(a): int(np.flatnonzero(agent == a)[0]) for a in np.unique(agent)}
    spawned_by: dict[int, list[int]] = {}
    for a, row in first_of.items():
        if parent[row] >= 0 and agent[parent[row]] != a:
            spawned_by.setdefault(int(parent[row]), []).append(a)
    deps = []
    for x in range(len(parent)):
        p = int(parent[x])
        rows = [] if p < 0 else [p]
        if p >= 0 and agent[x] == agent[p]:
            for a in spawned_by.get(p, []):
                rows += np.flatnonzero(agent == a).tolist()
        deps.append(rows)
    return deps


def check_dependencies(parsed, result) -> int:
    """Asserts that no request was sent before each row it waited for had finished plus its think time; the
    number of dependencies checked."""
    _, order = session_requests(parsed)
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))
    sent, done = result.requests.arrival_s[at], result.finish_s[at]
    think = result.requests.think_times()[at]
    checked = 0
    for x, rows in enumerate(waited_for(parsed)):
        for d in rows:
            assert sent[x] >= done[d] - EPS, (x, d)
            checked += 1
        if parsed.fields.get("parent") is not None and rows[:1] == [recorded_parents(parsed)[x]]:
            assert sent[x] >= done[rows[0]] + think[x] - EPS
    return checked


def test_the_modes_are_one_fields_choices_on_every_face():
    assert REPLAY_MODES == ("timestamps", "sessions", "closed")
    with pytest.raises(ScenarioError, match="replay") as caught:
        parse_scenario({"trace": WEKA, "replay": "session"})
    assert "timestamps" in str(caught.value) and "closed" in str(caught.value)
    assert Scenario.from_query(Scenario(trace=WEKA, replay="sessions").to_query()).replay == "sessions"


@pytest.mark.parametrize(
    "data, says",
    [
        ({"replay": "sessions"}, "set trace"),
        ({"trace": WEKA, "replay": "closed"}, "set concurrency"),
        ({"trace": WEKA, "replay": "sessions", "concurrency": 4}, "unset concurrency"),
        ({"trace": WEKA, "replay": "timestamps", "concurrency": 4}, "unset concurrency"),
    ],
)
def test_a_mode_that_cannot_apply_is_refused_naming_the_field(data, says):
    with pytest.raises(ScenarioError, match=says) as caught:
        parse_scenario(data)
    assert "replay" in str(caught.value)


def test_sessions_on_a_trace_without_sessions_is_a_trace_error_naming_the_formats_that_have_them():
    with pytest.raises(TraceError, match="replay: sessions") as caught:
        run(Scenario(trace="azure-code-2023-first200", replay="sessions", num_requests=5))
    assert "weka" in str(caught.value) and "bailian" in str(caught.value)


def test_sessions_on_a_trace_whose_session_field_links_nothing_is_refused_too():
    """BurstGPT's reader keeps Session ID, but the bundled file has no such column: no request waits for another."""
    with pytest.raises(TraceError, match="links no request"):
        run(Scenario(trace="burstgpt-1-first400", replay="sessions", num_requests=5))


def test_sessions_keeps_whole_chains_when_cut_to_num_requests():
    result = weka_run("sessions", num_requests=20)
    parent = result.requests.parents()
    assert (
        result.metrics["completed"] == 20 and (parent[1:] == np.arange(19)).all()
    )  # one chain, its first 20


def test_timestamps_sends_at_the_recorded_times_whatever_the_server_and_is_the_default():
    parsed = read_trace_file_records(WEKA, 10_000)
    fast, slow = weka_run("timestamps"), weka_run("timestamps", tp=2, model="llama-3-8b")
    assert np.array_equal(fast.requests.arrival_s, parsed.requests.arrival_s)
    assert np.array_equal(slow.requests.arrival_s, parsed.requests.arrival_s)
    assert fast.metrics == weka_run(None).metrics
    # Open loop, the session's next request goes out before the server answered the one it waited for.
    deps = waited_for(parsed)
    early = [
        x for x, rows in enumerate(deps) if rows and fast.requests.arrival_s[x] < max(fast.finish_s[rows])
    ]
    assert early


def test_sessions_keeps_every_recorded_dependency_of_the_claude_code_session():
    parsed = read_trace_file_records(WEKA, 10_000)
    result = weka_run("sessions")
    assert result.metrics["completed"] == len(parsed.requests)
    assert check_dependencies(parsed, result) > len(parsed.requests)  # the joins add the subagents' requests
    reqs, order = session_requests(parsed)
    assert reqs.arrival_s[0] == 0.0 and np.isinf(reqs.arrival_s[1:]).all()  # one session, from its start
    # Recorded think times are kept where a request follows its own parent: the main agent's 9 s, 88 s, ...
    follows_parent = recorded_parents(parsed)[order][1:] == order[reqs.parents()[1:]]
    assert follows_parent.sum() == len(order) - 1 - 2  # all but the second subagent's first and the join
    think = parsed.fields["think_s"][order][1:]
    assert np.array_equal(reqs.think_s[1:][follows_parent], think[follows_parent])
    assert reqs.think_s[1:3].tolist() == [9.0, 88.0]


def test_sessions_moves_with_the_servers_speed():
    """A slower server answers later, so in sessions mode every later request goes out later; the first, the
    session's recorded start, stays."""
    fast, slow = weka_run("sessions"), weka_run("sessions", hardware="a100")
    assert fast.requests.arrival_s[0] == slow.requests.arrival_s[0] == 0.0
    later = slow.requests.arrival_s[1:] - fast.requests.arrival_s[1:]
    assert (later >= -EPS).all() and later[-1] > 0


def test_a_subagent_forks_at_its_spawning_answer_and_its_agent_joins_after_it():
    parsed = read_trace_file_records(WEKA, 10_000)
    reqs, order = session_requests(parsed)
    agent = parsed.fields["agent"][order]
    main = np.flatnonzero(agent == 0)
    spawner, joiner = main[15], main[16]
    # Both Explore subagents' requests come between the request that spawned them and the main agent's next.
    assert np.array_equal(np.flatnonzero(agent != 0), np.arange(spawner + 1, joiner))
    assert reqs.parents()[spawner + 1] == spawner and reqs.parents()[joiner] == joiner - 1
    # The recorded spawn: the markers' t less their duration_ms, 0.7 s after the spawning request ended.
    spawn = parsed.requests.arrival_s[order[spawner + 1]]
    assert spawn == pytest.approx(1148.013 - 46.656) == pytest.approx(1180.553 - 79.184, abs=0.02)


def test_closed_hands_requests_to_users_ignoring_the_sessions_order():
    parsed = read_trace_file_records(WEKA, 10_000)
    one = run(Scenario(trace=WEKA, replay="closed", concurrency=1, **SERVER))
    four = run(Scenario(trace=WEKA, replay="closed", concurrency=4, **SERVER))
    assert one.metrics["completed"] == four.metrics["completed"] == len(parsed.requests)
    # One user: each request the moment the previous ended, no think time; four: four at once from 0.
    assert np.all(one.requests.arrival_s[1:] == pytest.approx(one.finish_s[:-1]))
    assert (four.requests.arrival_s == 0.0).sum() == 4
    deps = waited_for(parsed)
    early = [
        x for x, rows in enumerate(deps) if rows and four.requests.arrival_s[x] < max(four.finish_s[rows])
    ]
    assert early  # a session's requests overlap: what they waited for is not kept
    assert one.metrics["duration_s"] < weka_run("sessions").metrics["duration_s"]  # no think time at all


def own_reuse(parsed, order: np.ndarray, block: int) -> float:
    """The share of prompt tokens whose blocks an earlier request (in `order`) listed, from the simulator's content
    hashes at `block` tokens: what an unbounded prefix cache serves when each request is sent after those before."""
    reqs = parsed.requests
    hashes, off = content_hashes(*reqs.content(), block)
    seen, hit = set(), 0
    for i in order.tolist():
        own = hashes[off[i] : off[i] + reqs.prompt_tokens[i] // block].tolist()
        k = 0
        while k < len(own) and own[k] in seen:
            k += 1
        hit += k * block
        seen.update(own)
    return hit / reqs.prompt_tokens.sum()


def test_sessions_prefix_hits_match_the_traces_own_reuse_at_its_block_size():
    parsed = read_trace_file_records(WEKA, 10_000)
    _, order = session_requests(parsed)
    own = own_reuse(parsed, order, 64)
    assert own == pytest.approx(0.897, abs=0.005)  # the README's 89.7%
    assert weka_run("sessions").metrics["prefix_cache_hit_rate"] == pytest.approx(own, rel=0.05)


# ----- Qwen-Bailian: sessions through parent_chat_id, 16-token blocks -----


def bailian_rows(sessions: int = 40, seed: int = 3) -> list[dict]:
    """Conversations in Qwen-Bailian's schema (README: chat_id, parent_chat_id, timestamp, input_length,
    output_length, type, turn, hash_ids of 16-token blocks, the last partial): each turn resends the
    conversation so far, arriving some seconds after the previous turn; some conversations branch (two turns
    answer the same parent)."""
    rng = np.random.default_rng(seed)
    rows, next_id = [], 100
    for s in range(sessions):
        t = float(s) * 3.0
        length = int(rng.integers(200, 2000))
        ids = [0, 1, 2] + list(range(next_id, next_id + -(-(length - 48) // 16)))
        next_id += len(ids)
        turns = [(-1, t, length, ids, 1)]
        for _ in range(int(rng.integers(0, 5))):
            p = len(rows) + (int(rng.integers(len(turns))) if rng.random() < 0.2 else len(turns) - 1)
            _, pt, plen, pids, pturn = turns[p - len(rows)]
            grow = int(rng.integers(30, 600))
            new = pids[: plen // 16] + list(range(next_id, next_id + -(-(plen % 16 + grow) // 16)))
            next_id += len(new)
            turns.append((p, pt + float(rng.uniform(5, 60)), plen + grow, new, pturn + 1))
        for p, at, n, h, turn in turns:
            rows.append(
                {
                    "chat_id": len(rows),
                    "parent_chat_id": p,
                    "timestamp": round(at, 3),
                    "input_length": n,
                    "output_length": int(rng.integers(20, 400)),
                    "type": "text",
                    "turn": turn,
                    "hash_ids": h,
                }
            )
    return rows


def bailian_parsed(rows):
    return read_trace_records("\n".join(json.dumps(r) for r in rows), 10_000)


def test_bailian_sessions_keep_every_parent_and_hit_the_traces_own_reuse(tmp_path):
    rows = bailian_rows()
    path = tmp_path / "bailian.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    parsed = bailian_parsed(rows)
    server = {**SERVER, "model": "llama-3-8b", "tp": 1, "block_size": 16}
    result = run(Scenario(trace=str(path), replay="sessions", **server))
    assert result.metrics["completed"] == len(rows)
    assert check_dependencies(parsed, result) == sum(r["parent_chat_id"] >= 0 for r in rows)
    _, order = session_requests(parsed)
    own = own_reuse(parsed, order, 16)
    assert own > 0.3
    assert result.metrics["prefix_cache_hit_rate"] == pytest.approx(own, rel=0.05)
    # Without recorded response times, a turn waits its recorded gap after the turn before it ended.
    stamps = run(Scenario(trace=str(path), replay="timestamps", **server))
    assert result.requests.arrival_s.sum() > stamps.requests.arrival_s.sum()


# ----- random Weka-shaped sessions: forks and joins at any depth -----


@st.composite
def weka_session(draw):
    """A Weka session line: main-agent requests, some followed by 1-3 subagents (which may nest once)."""
    next_id = [1]

    def requests(depth: int) -> list[dict]:
        out, t = [], 0.0
        for _ in range(draw(st.integers(2 if depth == 0 else 1, 4))):
            n = draw(st.integers(1, 6))
            ids = list(range(next_id[0], next_id[0] + n))
            next_id[0] += n
            api = draw(st.floats(0.1, 5.0))
            out.append(
                {
                    "t": t,
                    "type": "n",
                    "model": "m",
                    "in": n * 16 + draw(st.integers(0, 15)),
                    "out": draw(st.integers(1, 64)),
                    "hash_ids": ids,
                    "api_time": api,
                    "think_time": 0.0 if not out else draw(st.floats(0.0, 3.0)),
                }
            )
            t += api + draw(st.floats(0.5, 3.0))
            if depth < 2 and draw(st.booleans()):
                for _ in range(draw(st.integers(1, 3))):
                    inner = requests(depth + 1)
                    took = max(r["t"] + r["api_time"] for r in inner if r["type"] == "n")
                    out.append(
                        {"t": t + took, "type": "subagent", "duration_ms": took * 1e3, "requests": inner}
                    )
        return out

    return {"id": "x", "models": ["m"], "block_size": 16, "hash_id_scope": "local", "requests": requests(0)}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weka_session())
def test_sessions_never_sends_a_request_before_what_it_waited_for_was_answered(tmp_path_factory, session):
    path = tmp_path_factory.mktemp("weka") / "session.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    parsed = read_trace_file_records(str(path), 10_000)
    server = {**SERVER, "hardware": "a100", "tp": 1, "model": "llama-3-8b", "block_size": 16}
    result = run(Scenario(trace=str(path), replay="sessions", **server))
    assert result.metrics["completed"] == len(parsed.requests)
    check_dependencies(parsed, result)
