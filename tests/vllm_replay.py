"""Replay a recorded vLLM v1 case (validation/vllm_v1/*.json) through sched-sim and compare step by step.

A fixture holds vLLM's configuration, the requests (as content segments: equal ids, equal tokens) and, per step,
the prompt tokens each request computed, the number of decoding sequences, the requests preempted and the tokens
each newly admitted request found in the prefix cache. The same requests run here with the same configuration
and every other setting at sched-sim's default; `compare` counts the steps whose four decisions are identical.

    python tests/vllm_replay.py            # per-case match figures
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "validation" / "vllm_v1"


def load_cases() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(FIXTURES.glob("*.json"))}


def scenario_for(fixture: dict):
    from sim_core import Scenario

    c = fixture["config"]
    return Scenario(scheduler="chunked" if c["enable_chunked_prefill"] else "fcfs",
                    token_budget=c["max_num_batched_tokens"], max_seqs=c["max_num_seqs"], block_size=c["block_size"],
                    kv_blocks=c["num_blocks"], max_model_len=c["max_model_len"], prefix_cache=c["enable_prefix_caching"],
                    num_requests=len(fixture["requests"]), **({"async_scheduling": True} if c.get("async_scheduling")
                                                               else {}))


def requests_for(fixture: dict):
    """The fixture's requests as sched-sim's workload: all open-loop ones at t=0, follow-up turns after their
    parent with no think time."""
    from sim_core.workload import Requests

    reqs = fixture["requests"]
    assert [r["id"] for r in reqs] == list(range(len(reqs)))
    n = len(reqs)
    seg_ids, seg_lens, seg_off = [], [], [0]
    for r in reqs:
        for sid, length in r["prompt"] + r["output"]:
            seg_ids.append(sid)
            seg_lens.append(length)
        seg_off.append(len(seg_ids))
    parent = np.array([r["parent"] for r in reqs], np.int64)
    return Requests(arrival_s=np.zeros(n), prompt_tokens=np.array([sum(x[1] for x in r["prompt"]) for r in reqs]),
                    output_tokens=np.array([sum(x[1] for x in r["output"]) for r in reqs]),
                    request_class=np.zeros(n, np.int64), class_names=("default",), parent=parent,
                    think_s=np.zeros(n), seg_ids=np.array(seg_ids, np.int64), seg_lens=np.array(seg_lens, np.int64),
                    seg_off=np.array(seg_off, np.int64))


def simulated_steps(fixture: dict) -> list[dict]:
    """sched-sim's decisions for the fixture's requests, in the fixture's per-step format."""
    from sim_core.kernel import state as E
    from sim_core.runner import RunOptions, resolve, simulate_requests

    s = scenario_for(fixture)
    res = simulate_requests(s, resolve(s), requests_for(fixture),
                            RunOptions(record_events=True, debug_checks=True))
    assert res.step_stride == 1, "the step log sampled: raise max_step_records"
    steps = [{"prefill": {}, "decode": int(d), "preempted": [], "cache_hits": {}}
             for d in res.step_column("decode_seqs")]
    for r, k, kind, tokens in res.events.tolist():
        if k >= len(steps):
            continue  # an eviction in a pass that scheduled nothing is logged against the next step
        if kind == E.EV_PREFILL:
            steps[k]["prefill"][str(r)] = int(tokens)
        elif kind == E.EV_PREEMPT_RECOMPUTE:
            steps[k]["preempted"].append(str(r))
        elif kind == E.EV_CACHE_HIT:
            steps[k]["cache_hits"][str(r)] = int(tokens)
    return steps


def compare(fixture: dict) -> tuple[int, int, int | None]:
    """(steps matched, vLLM's steps, the first step that differs or None)."""
    ours = simulated_steps(fixture)
    theirs = fixture["steps"]
    matched, first = 0, None
    for k in range(max(len(ours), len(theirs))):
        a = ours[k] if k < len(ours) else None
        b = theirs[k] if k < len(theirs) else None
        if a is not None and b is not None and _same(a, b):
            matched += 1
        elif first is None:
            first = k
    return matched, len(theirs), first


def _same(a: dict, b: dict) -> bool:
    return (a["prefill"] == b["prefill"] and a["decode"] == b["decode"]
            and sorted(a["preempted"], key=int) == sorted(b["preempted"], key=int) and a["cache_hits"] == b["cache_hits"])


def main() -> int:
    for name, fixture in load_cases().items():
        matched, total, first = compare(fixture)
        where = "" if first is None else f"; first difference at step {first}"
        print(f"{name}: {matched}/{total} steps match ({100 * matched / total:.0f}%){where}")
        if first is not None and "-v" in sys.argv:
            ours = simulated_steps(fixture)
            for k in range(max(0, first - 1), first + 2):
                print("  vllm ", k, fixture["steps"][k] if k < len(fixture["steps"]) else None)
                print("  ours ", k, ours[k] if k < len(ours) else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
