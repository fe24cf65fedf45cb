"""Multi-turn chat conversations (the `multiturn` preset): each turn resends its own conversation's history, so
what the prefix cache can reuse lives on the replica that served the earlier turns, and a cache-aware router
that follows it hits far more often than one that spreads turns blindly."""

from __future__ import annotations

import numpy as np

from sim_core import Scenario, run
from sim_core.kernel.content_hash import content_hashes
from sim_core.workload import CHAT_THINK_S, CHAT_TURNS, PRESETS, synthesize


def test_a_follow_up_turn_starts_with_every_block_of_its_parent_turn():
    reqs = synthesize(PRESETS["multiturn"], 2.0, 1.0, None, 120.0, 3)
    hashes, off = content_hashes(*reqs.content(), 16)
    parent = reqs.parents()
    follow = np.flatnonzero(parent >= 0)
    assert len(follow) > 20
    for i in follow:
        p = parent[i]
        # The follow-up's prompt is the parent's prompt and answer plus a new message: longer than both...
        assert reqs.prompt_tokens[i] > reqs.prompt_tokens[p] + reqs.output_tokens[p]
        # ... and its leading blocks are exactly the parent's (prompt and answer) blocks.
        n = off[p + 1] - off[p]
        assert np.array_equal(hashes[off[i]:off[i] + n], hashes[off[p]:off[p + 1]])
    # No prompt shared across conversations: a first turn shares no block with any other request.
    first = np.flatnonzero(parent < 0)
    firsts = np.concatenate([hashes[off[i]:off[i + 1]] for i in first])
    assert len(np.unique(firsts)) == len(firsts)
    # Turns per conversation and think times as the constants say (LMSYS-Chat-1M: 2.0 turns on average).
    assert 0.8 * CHAT_TURNS < len(reqs) / len(first) < 1.2 * CHAT_TURNS
    assert 0.7 * CHAT_THINK_S < reqs.think_times()[follow].mean() < 1.3 * CHAT_THINK_S


def test_the_chat_preset_follow_ups_share_nothing():
    """`chat` draws follow-up lengths from the Azure conversation trace without their history's content: nothing
    for a prefix cache to reuse (which is why multiturn exists)."""
    reqs = synthesize(PRESETS["chat"], 4.0, 1.0, None, 60.0, 1)
    hashes, _ = content_hashes(*reqs.content(), 16)
    assert len(np.unique(hashes)) == len(hashes)


def test_prefix_affinity_follows_conversations_to_their_cache_and_beats_round_robin():
    """4 x A100 + Llama-3-8B with the prefix cache at ~70% of the cluster's saturation rate (one engine saturates
    near 6.5 conversations/s: bench/bench_cluster.py --only prefix). Round robin sends a follow-up back to the
    replica holding its history one time in four; prefix_affinity, weighing a cached prompt token 4 times an
    outstanding KV token, keeps conversations on their cache while the load stays even."""
    base = dict(hardware="a100", model="llama-3-8b", workload="multiturn", prefix_cache=True, seed=1, duration=120,
                rate=18.0, replicas=4)
    rr = run(Scenario(**base, router="round_robin")).metrics
    pa = run(Scenario(**base, router="prefix_affinity", router_cache_weight=4.0)).metrics
    assert rr["completed"] == pa["completed"] > 2000
    assert pa["prefix_cache_hit_rate"] >= 1.5 * rr["prefix_cache_hit_rate"] > 0
    assert pa["ttft_ms"]["mean"] < rr["ttft_ms"]["mean"]
    assert pa["load_imbalance"] < 1.3
