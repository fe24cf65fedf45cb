"""Perfetto / Chrome trace export: valid trace-event JSON whose slices tell the same story as the run."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import numpy as np
import pytest

from sim_core import SCHEDULER_NAMES, Scenario, run
from sim_core.kernel import state as E
from sim_core.trace_export import (
    GPU_PID,
    REQUEST_TID_BASE,
    REQUESTS_PID,
    STEPS_TID,
    chrome_trace,
    write_chrome_trace,
)


def us(t_s):
    """Seconds to the trace's integer microseconds (scalars or arrays), rounded as the exporter rounds."""
    if isinstance(t_s, np.ndarray):
        return np.array([int(round(float(t) * 1e6)) for t in t_s], dtype=np.int64)
    return int(round(float(t_s) * 1e6))


@pytest.fixture(scope="module")
def rag_run():
    return run(Scenario(hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40, rate=4, seed=3), record_events=True)


@pytest.fixture(scope="module")
def preempting_run():
    result = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="rag", kv_blocks=600, rate=8, num_requests=60),
                 record_events=True)
    assert result.metrics["preemptions"] > 0, "the scenario is meant to preempt"
    return result


def kv_counter_name(trace) -> str:
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "C" and e["name"].startswith("KV blocks in use")}
    assert len(names) == 1
    return names.pop()


def check_trace(result, trace) -> dict:
    """Every structural property the trace must have; returns request id -> its slices, for further checks."""
    # Valid, strict JSON (no NaN), of the trace-event shape Perfetto opens.
    trace = json.loads(json.dumps(trace, allow_nan=False))
    assert set(trace) >= {"traceEvents", "displayTimeUnit", "metadata"}
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    assert events
    for e in events:
        assert e["ph"] in ("X", "C", "i", "M")
        assert isinstance(e["pid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], int) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], int) and e["dur"] >= 0
    names = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in events if e["ph"] == "M"}
    # Perfetto keys thread names by tid alone: a tid must belong to one process.
    tid_pids = defaultdict(set)
    for e in events:
        if "tid" in e:
            tid_pids[e["tid"]].add(e["pid"])
    assert all(len(p) == 1 for p in tid_pids.values())
    assert names[(GPU_PID, None, "process_name")]["name"] == "GPU"
    assert names[(GPU_PID, STEPS_TID, "thread_name")]["name"] == "steps"
    assert names[(REQUESTS_PID, None, "process_name")]["name"] == "requests"

    # Step slices: one per logged step, in time order, never overlapping, named by their batch.
    steps = [e for e in events if e["ph"] == "X" and e["pid"] == GPU_PID and e["tid"] == STEPS_TID]
    assert len(steps) == len(result.steps)
    for a, b in zip(steps, steps[1:], strict=False):
        assert a["ts"] <= b["ts"]
        assert a["ts"] + a["dur"] <= b["ts"]
    for e, row in zip(steps, result.steps, strict=True):
        assert e["ts"] == us(row[E.S_START])
        assert re.fullmatch(r"(prefill \d+)?( \+ )?(decode \d+)?", e["name"]) and e["name"]
        args = e["args"]
        assert args["prefill_tokens"] == row[E.S_PREFILL_TOKENS] and args["decode_seqs"] == row[E.S_DECODE_SEQS]
        for key in ("prefill_seqs", "kv_blocks", "waiting", "running", "swapped", "preemptions"):
            assert key in args

    # Counters: KV blocks within the pool, queue lengths non-negative.
    num_blocks = result.resolved.num_blocks
    kv_name = kv_counter_name(trace)
    assert str(num_blocks) in kv_name
    kv = [e["args"]["blocks"] for e in events if e["ph"] == "C" and e["name"] == kv_name]
    assert kv and 0 <= min(kv) and max(kv) <= num_blocks
    queue = [e["args"] for e in events if e["ph"] == "C" and e["name"] == "queue"]
    assert queue and all(set(q) == {"waiting", "running", "swapped"} and min(q.values()) >= 0 for q in queue)

    # Request tracks: named threads; slices in time order, from arrival to finish, never overlapping.
    by_tid: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e["pid"] == REQUESTS_PID and e["ph"] in ("X", "i"):
            by_tid[e["tid"]].append(e)
    thread_names = {e["tid"]: e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["pid"] == REQUESTS_PID and e["name"] == "thread_name"}
    assert set(by_tid) == set(thread_names)
    reqs = result.requests
    out = {}
    for tid, slices in by_tid.items():
        r = tid - REQUEST_TID_BASE
        assert thread_names[tid] == f"req {r} (prompt {reqs.prompt_tokens[r]}, output {reqs.output_tokens[r]})"
        if result.status[r] == E.REJECTED:
            # Refused at arrival: one mark; shed from the queue later (admission control): queued, then the mark.
            mark = ("i", "rejected", us(result.finish_s[r]))
            if us(result.finish_s[r]) > us(reqs.arrival_s[r]):
                assert [(e["ph"], e["name"], e["ts"]) for e in slices] == [("X", "queued", us(reqs.arrival_s[r])),
                                                                            mark]
                assert slices[0]["ts"] + slices[0]["dur"] == mark[2]
            else:
                assert [(e["ph"], e["name"], e["ts"]) for e in slices] == [mark]
            continue
        assert all(e["ph"] == "X" for e in slices)
        assert slices[0]["ts"] == us(reqs.arrival_s[r])
        assert slices[-1]["ts"] + slices[-1]["dur"] == us(result.finish_s[r])
        for a, b in zip(slices, slices[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"], (r, a, b)
        assert {e["name"] for e in slices} <= {"queued", "prefill", "decode", "preempted"}
        assert "prefill" in {e["name"] for e in slices}
        for e in slices:
            assert e["args"]["request"] == r and e["args"]["preemptions"] == result.preemptions[r]
        out[r] = slices

    meta = trace["metadata"]
    assert meta["scenario"] == result.scenario.to_query()
    assert meta["scheduler"] == result.scenario.scheduler
    assert meta["hardware"] == result.resolved.setup.gpu.key and meta["model"] == result.resolved.setup.model.key
    assert meta["metrics"]["completed"] == result.metrics["completed"]
    assert meta["requests_total"] == len(reqs) and meta["requests_shown"] == len(by_tid)
    return out


def test_trace_is_valid_and_consistent(rag_run):
    trace = chrome_trace(rag_run)
    slices = check_trace(rag_run, trace)
    assert len(slices) == len(rag_run.requests)  # every request has a track
    assert trace["metadata"]["notes"] == []
    # Without preemption a request's prefill chunks add up to its prompt, and it decodes once to its finish.
    for r, sl in slices.items():
        assert sum(e["args"]["tokens"] for e in sl if e["name"] == "prefill") == rag_run.requests.prompt_tokens[r]
        if rag_run.requests.output_tokens[r] > 1:
            assert sl[-1]["name"] == "decode"
    # A step's prefill token count matches the chunks the requests' tracks show inside it.
    step_ts = {e["ts"]: e["args"]["prefill_tokens"] for e in trace["traceEvents"]
               if e["ph"] == "X" and e["pid"] == GPU_PID}
    per_step = defaultdict(int)
    for sl in slices.values():
        for e in sl:
            if e["name"] == "prefill":
                per_step[e["ts"]] += e["args"]["tokens"]
    assert all(step_ts[ts] == tokens for ts, tokens in per_step.items())
    # Each finished request's slices say where its latency went: parts summing to its device-side E2EL.
    for r, sl in slices.items():
        if rag_run.status[r] == E.FINISHED:
            split = sl[0]["args"]["time_ms"]
            e2el_ms = (rag_run.finish_s[r] - rag_run.requests.arrival_s[r]) * 1e3
            assert sum(split.values()) == pytest.approx(e2el_ms, abs=0.01)


def test_preempted_requests_show_preempted_slices(preempting_run):
    slices = check_trace(preempting_run, chrome_trace(preempting_run))
    shown = 0
    for r, sl in slices.items():
        n = sum(e["name"] == "preempted" for e in sl)
        assert n == preempting_run.preemptions[r], r  # one preempted slice per eviction
        shown += n
    assert shown == preempting_run.metrics["preemptions"] > 0


@pytest.mark.parametrize("scheduler", SCHEDULER_NAMES)
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_every_scheduler_exports(scheduler, preemption):
    result = run(Scenario(scheduler=scheduler, preemption=preemption, hardware="rtx3050", max_model_len=8192, workload="rag",
                          kv_blocks=700, rate=6, num_requests=30, seed=2), record_events=True)
    check_trace(result, chrome_trace(result))


def test_rejected_requests_are_instant_marks():
    # max_model_len below the longest rag prompts: those requests are refused at arrival.
    result = run(Scenario(hardware="rtx3050", workload="rag", num_requests=30, rate=4, max_model_len=2048, seed=1),
                 record_events=True)
    assert result.metrics["rejected"] > 0
    trace = chrome_trace(result)
    check_trace(result, trace)
    marks = [e for e in trace["traceEvents"] if e.get("name") == "rejected"]
    assert len(marks) == result.metrics["rejected"]
    assert all(e["args"]["reason"] for e in marks)


@pytest.mark.skipif("slo" not in SCHEDULER_NAMES, reason="no admission-controlling scheduler")
def test_shed_requests_wait_then_get_a_rejected_mark():
    # The deadline-aware scheduler sheds queued requests whose TTFT target is out of reach, after they waited.
    result = run(Scenario(scheduler="slo", hardware="rtx3050", max_model_len=8192, workload="rag", rate=14, num_requests=80, seed=1),
                 record_events=True)
    shed = np.flatnonzero((result.status == E.REJECTED) & (result.finish_s > result.requests.arrival_s))
    assert len(shed) > 0, "the scenario is meant to shed requests from the queue"
    trace = chrome_trace(result)
    check_trace(result, trace)
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["pid"] == REQUESTS_PID and e["ph"] != "M":
            tracks[e["tid"] - REQUEST_TID_BASE].append(e["name"])
    assert all(tracks[int(r)] == ["queued", "rejected"] for r in shed)
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == GPU_PID]
    assert sum(e["args"].get("shed", 0) for e in steps) <= len(shed)


def test_many_requests_are_sampled_evenly(rag_run):
    trace = chrome_trace(rag_run, max_requests=10)
    slices = check_trace(rag_run, trace)
    assert len(slices) == 10 and min(slices) == 0 and max(slices) == len(rag_run.requests) - 1
    meta = trace["metadata"]
    assert meta["requests_shown"] == 10 and any("sample" in n for n in meta["notes"])


def test_sampled_step_log_exports_steps_and_counters_only():
    result = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40, rate=4, seed=3),
                 record_events=True, max_step_records=64)
    assert result.step_stride > 1
    trace = chrome_trace(result)
    check_trace(result, trace)
    assert not [e for e in trace["traceEvents"] if e["pid"] == REQUESTS_PID and e["ph"] != "M"]
    meta = trace["metadata"]
    assert meta["requests_shown"] == 0 and meta["step_stride"] == result.step_stride
    assert any("sampled" in n for n in meta["notes"])
    steps = [e["args"]["step"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert steps == list(range(0, len(steps) * result.step_stride, result.step_stride))


def test_a_capped_event_log_exports_steps_and_says_so():
    result = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="rag", num_requests=40, rate=4, seed=3, max_seqs=8),
                 record_events=True, max_events=60)
    assert not result.events_complete
    trace = chrome_trace(result)
    check_trace(result, trace)
    assert trace["metadata"]["requests_shown"] == 0
    assert any("event log stopped" in n for n in trace["metadata"]["notes"])


def test_run_without_events_exports_steps_and_says_so():
    result = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=20, seed=1))
    trace = chrome_trace(result)
    check_trace(result, trace)
    assert trace["metadata"]["requests_shown"] == 0
    assert any("record_events" in n for n in trace["metadata"]["notes"])


def test_long_step_logs_are_thinned(rag_run):
    trace = chrome_trace(rag_run, max_steps=10)
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == GPU_PID]
    assert len(steps) == 10 and steps[0]["args"]["step"] == 0 and steps[-1]["args"]["step"] == len(rag_run.steps) - 1
    assert any("sample" in n for n in trace["metadata"]["notes"])


def test_idle_gaps_drop_the_counters_to_zero():
    # A light load leaves the GPU idle between requests; the counters must not hold a stale value through it.
    result = run(Scenario(hardware="a100", workload="chat", num_requests=10, rate=0.5, seed=4), record_events=True)
    trace = chrome_trace(result)
    check_trace(result, trace)
    kv_name = kv_counter_name(trace)
    kv = [(e["ts"], e["args"]["blocks"]) for e in trace["traceEvents"] if e["name"] == kv_name]
    assert kv[-1][1] == 0
    starts = us(result.steps[:, E.S_START])
    ends = us(result.steps[:, E.S_START] + result.steps[:, E.S_DURATION])
    idle_from = [int(end) for end, nxt in zip(ends[:-1], starts[1:], strict=True) if nxt > end]
    assert idle_from, "the scenario is meant to leave idle gaps"
    zero_at = {ts for ts, blocks in kv if blocks == 0}
    assert set(idle_from) <= zero_at


def test_write_chrome_trace(tmp_path, rag_run):
    path = tmp_path / "run.trace.json"
    meta = write_chrome_trace(rag_run, path)
    trace = json.loads(path.read_text(encoding="utf-8"))
    assert meta["events"] == len(trace["traceEvents"]) > len(rag_run.steps)
    check_trace(rag_run, trace)


def test_a_clusters_engines_share_one_traces_step_slices():
    """Four replicas' traces hold at most max_steps step slices in all (each engine an even sample of its own
    log, said in the notes), as one engine's would; every request keeps its track."""
    res = run(Scenario(hardware="rtx3050", max_model_len=8192, workload="chat", num_requests=60, rate=20, replicas=4, seed=3),
              record_events=True)
    trace = chrome_trace(res, max_steps=100)
    steps = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "step"]
    per_engine = {}
    for e in steps:
        per_engine[e["pid"]] = per_engine.get(e["pid"], 0) + 1
    assert len(per_engine) == 4 and all(n <= 25 for n in per_engine.values()) and len(steps) <= 100
    assert sum(len(log.steps) for log in res.engine_logs) > 100  # the cap did something
    assert any("the engines share 100 step slices" in n for n in trace["metadata"]["notes"])
    assert trace["metadata"]["requests_shown"] == 60
