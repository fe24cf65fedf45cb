"""sched-sim's scheduling decisions against vLLM v1's own scheduler, step for step.

Each fixture in validation/vllm_v1/ was recorded from vLLM's scheduler (record.py there, run in a separate
environment: sched-sim never imports vLLM). Replayed here with the same configuration and every other setting at
both sides' defaults, every step must compute the same prompt tokens for the same requests, decode the same
number of sequences, preempt the same requests and find the same prefix-cache hits.
"""

from __future__ import annotations

import pytest

from tests.vllm_replay import FIXTURES, compare, load_cases, simulated_steps

CASES = load_cases()


def test_the_recorded_cases_cover_what_the_issue_asks_for():
    configs = [c["config"] for c in CASES.values()]
    assert len(CASES) >= 8
    assert {c["enable_chunked_prefill"] for c in configs} == {True, False}
    assert {c["enable_prefix_caching"] for c in configs} == {True, False}
    assert any(s["preempted"] for c in CASES.values() for s in c["steps"]), "no case preempts"
    assert any(s["cache_hits"] for c in CASES.values() for s in c["steps"]), "no case hits the prefix cache"
    assert any(r["parent"] >= 0 for c in CASES.values() for r in c["requests"]), "no multi-turn session"
    for c in CASES.values():
        assert c["vllm_defaults_in_force"]["watermark"] == 0.0
        assert (FIXTURES / "record.py").is_file()


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_matches_vllm(name):
    fixture = CASES[name]
    matched, total, first = compare(fixture)
    if first is not None:
        ours = simulated_steps(fixture)
        theirs = fixture["steps"]
        got = ours[first] if first < len(ours) else "no such step"
        want = theirs[first] if first < len(theirs) else "no such step"
        pytest.fail(f"{name}: {matched}/{total} steps match; step {first}: vLLM {want}, sched-sim {got}")
