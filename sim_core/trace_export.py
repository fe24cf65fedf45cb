"""A run as Chrome trace-event JSON, the format ui.perfetto.dev (and chrome://tracing) opens.

    result = run(scenario, record_events=True)
    write_chrome_trace(result, "run.trace.json")

Layout (times in integer microseconds of simulated time):
  process "GPU"       thread "steps": one slice per engine step, named by its batch ("prefill 512 + decode 12"),
                      args = the batch composition; counter tracks "KV blocks in use (of N)" and "queue"
                      (waiting / running / swapped requests)
  process "requests"  one thread per request ("req 17 (prompt 3500, output 200)", tid 1000017) with a slice per phase
                      (queued, prefill, decode, preempted) and an instant "rejected" mark for refused requests
A cluster (replicas, or disaggregated pools) has one process per engine instead of "GPU" (named "replica 2",
"prefill 0", "decode 1", each with its steps and counters); each prefill engine's "KV link" thread has a slice per
KV transfer and a flow arrow to the "KV arrivals" thread of the decode engine it reached. Its engines share the
step slices one engine's trace may have (max_steps in all), and its requests' tracks are drawn as one engine's
are, each request's slices on the engines that served it.
Per-request tracks need `run(..., record_events=True)` and an unsampled step log (`result.step_stride == 1`).
Without them the steps and counters are still exported, and `metadata["notes"]` says what is missing.

Times are rounded to whole microseconds with the same rounding for every instant, so slices that touch in
simulated time touch exactly in the trace, and rounding never makes two of them overlap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .energy import engine_powers, power_over_time
from .kernel import state as E
from .kernel.attribution import ATTRIBUTION_PARTS
from .timeline import DECODE, PREEMPTED, PREFILL, QUEUED, REJECTED, SEGMENT_KINDS, request_segments

GPU_PID, REQUESTS_PID = 1, 2
STEPS_TID = 1
# Perfetto's JSON importer names threads by tid alone, so tids must be unique across processes: request r is
# thread REQUEST_TID_BASE + r (the UI shows "req 17 (...) 1000017").
REQUEST_TID_BASE = 1_000_000
DEFAULT_MAX_REQUESTS = 2000
# A step slice and two counter samples per step (~0.5 kB): 200k steps make a ~100 MB file, about what a browser
# tab opens comfortably. Longer step logs are exported as an evenly spaced sample (said in metadata).
DEFAULT_MAX_STEPS = 200_000
# Perfetto colours slices by name; name the request phases with the reserved colour names it knows.
_PHASE_COLOR = {QUEUED: "grey", PREFILL: "thread_state_running", DECODE: "good", PREEMPTED: "terrible",
                REJECTED: "bad"}


def _us(t_s: float) -> int:
    return int(round(t_s * 1e6))


def _clean(value):
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def step_name(prefill_tokens: int, decode_seqs: int) -> str:
    parts = []
    if prefill_tokens:
        parts.append(f"prefill {prefill_tokens}")
    if decode_seqs:
        parts.append(f"decode {decode_seqs}")
    return " + ".join(parts) or "idle"


def _meta(pid: int, tid: int | None, name: str, args: dict) -> dict:
    ev = {"ph": "M", "pid": pid, "name": name, "args": args}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _step_events(result, rows: np.ndarray, step_numbers: np.ndarray, gaps_are_idle: bool, pid: int = GPU_PID,
                 num_blocks: int | None = None) -> list[dict]:
    """Process `pid`'s step slices and its KV and queue counters (`num_blocks`: its KV pool; default the run's)."""
    num_blocks = int(result.resolved.num_blocks if num_blocks is None else num_blocks)
    kv_name = f"KV blocks in use (of {num_blocks})"
    # Columns only some engine versions log (the adaptive token budget, requests shed by admission control).
    optional_cols = [(name, getattr(E, col)) for name, col in (("token_budget", "S_TOKEN_BUDGET"), ("shed", "S_SHED"))
                     if hasattr(E, col) and getattr(E, col) < rows.shape[1]]
    out: list[dict] = []
    n = len(rows)
    for k in range(n):
        row = rows[k]
        start, end = float(row[E.S_START]), float(row[E.S_START] + row[E.S_DURATION])
        ts, end_us = _us(start), _us(end)
        p_tokens, d_seqs = int(row[E.S_PREFILL_TOKENS]), int(row[E.S_DECODE_SEQS])
        kv, waiting = int(row[E.S_KV_BLOCKS]), int(row[E.S_WAITING])
        running, swapped = int(row[E.S_RUNNING]), int(row[E.S_SWAPPED])
        args = {"step": int(step_numbers[k]), "prefill_tokens": p_tokens,
                "prefill_seqs": int(row[E.S_PREFILL_SEQS]), "decode_seqs": d_seqs, "kv_blocks": kv,
                "waiting": waiting, "running": running, "swapped": swapped,
                "preemptions": int(row[E.S_PREEMPTIONS]), "duration_ms": float(row[E.S_DURATION]) * 1e3}
        for name, col in optional_cols:
            args[name] = int(row[col])
        out.append({"ph": "X", "pid": pid, "tid": STEPS_TID, "ts": ts, "dur": end_us - ts, "cat": "step",
                    "name": step_name(p_tokens, d_seqs), "args": args})
        out.append({"ph": "C", "pid": pid, "ts": ts, "name": kv_name, "args": {"blocks": kv}})
        out.append({"ph": "C", "pid": pid, "ts": ts, "name": "queue",
                    "args": {"waiting": waiting, "running": running, "swapped": swapped}})
        # The engine idles only when nothing is running, waiting or swapped: every block is free then.
        next_start = _us(float(rows[k + 1][E.S_START])) if k + 1 < n else None
        if gaps_are_idle and (next_start is None or next_start > end_us):
            out.append({"ph": "C", "pid": pid, "ts": end_us, "name": kv_name, "args": {"blocks": 0}})
            out.append({"ph": "C", "pid": pid, "ts": end_us, "name": "queue",
                        "args": {"waiting": 0, "running": 0, "swapped": 0}})
    return out


def _request_events(result, ids: np.ndarray) -> list[dict]:
    reqs = result.requests
    segments = request_segments(result, ids)
    # Tokens of each prefill chunk, in the order request_segments emits the prefill slices (step order).
    ev = result.events
    chunk_tokens: dict[int, list[int]] = {}
    if len(ev):
        prefill = ev[ev[:, E.E_KIND] == E.EV_PREFILL]
        order = np.lexsort((np.arange(len(prefill)), prefill[:, E.E_STEP], prefill[:, E.E_REQUEST]))
        for row in prefill[order]:
            chunk_tokens.setdefault(int(row[E.E_REQUEST]), []).append(int(row[E.E_TOKENS]))
    out: list[dict] = []
    for r in ids:
        r = int(r)
        prompt, output = int(reqs.prompt_tokens[r]), int(reqs.output_tokens[r])
        out.append(_meta(REQUESTS_PID, REQUEST_TID_BASE + r, "thread_name", {"name": f"req {r} (prompt {prompt}, output {output})"}))
        out.append(_meta(REQUESTS_PID, REQUEST_TID_BASE + r, "thread_sort_index", {"sort_index": r}))
    common: dict[int, dict] = {}
    next_chunk: dict[int, int] = {}
    for r, kind, start, end in segments:
        if r not in common:
            ttft = result.first_token_s[r] - reqs.arrival_s[r]
            common[r] = {
                "request": r, "class": reqs.class_names[int(reqs.request_class[r])],
                "prompt_tokens": int(reqs.prompt_tokens[r]), "output_tokens": int(reqs.output_tokens[r]),
                "ttft_ms": float(ttft * 1e3) if math.isfinite(ttft) else None,
                "preemptions": int(result.preemptions[r]),
            }
            cached = getattr(result, "cached_prefix", None)  # engines with a prefix cache
            if cached is not None and cached[r] > 0:
                common[r]["cached_prefix_tokens"] = int(cached[r])
            split = getattr(result, "attribution", None)  # where its E2EL went (device side), finished ones
            if split is not None and result.status[r] == E.FINISHED:
                common[r]["time_ms"] = {p: round(float(split[r, k]) * 1e3, 3) for k, p in enumerate(ATTRIBUTION_PARTS)}
        args = dict(common[r])
        ts = _us(start)
        if kind == REJECTED:
            args["reason"] = E.REJECT_REASONS[int(result.reject_reason[r])]
            # Refused at arrival, or (admission control) dropped from the queue later: show the wait first.
            refused = max(float(result.finish_s[r]), start) if math.isfinite(result.finish_s[r]) else start
            if _us(refused) > ts:
                out.append({"ph": "X", "pid": REQUESTS_PID, "tid": REQUEST_TID_BASE + r, "ts": ts, "dur": _us(refused) - ts,
                            "cat": "request", "name": SEGMENT_KINDS[QUEUED], "cname": _PHASE_COLOR[QUEUED],
                            "args": dict(args)})
            out.append({"ph": "i", "s": "t", "pid": REQUESTS_PID, "tid": REQUEST_TID_BASE + r, "ts": _us(refused),
                        "cat": "request", "name": "rejected", "cname": _PHASE_COLOR[REJECTED], "args": args})
            continue
        if kind == PREFILL:
            k = next_chunk.get(r, 0)
            chunks = chunk_tokens.get(r, [])
            if k < len(chunks):
                args["tokens"] = chunks[k]
            next_chunk[r] = k + 1
        out.append({"ph": "X", "pid": REQUESTS_PID, "tid": REQUEST_TID_BASE + r, "ts": ts, "dur": _us(end) - ts,
                    "cat": "request", "name": SEGMENT_KINDS[kind], "cname": _PHASE_COLOR[kind], "args": args})
    return out


# A cluster's engines: engine e is process ENGINE_PID_BASE + e, its steps thread ENGINE_TID_BASE + e (tids are
# unique across processes, as Perfetto's importer needs); a prefill engine's KV link is thread LINK_TID_BASE + e and
# a decode engine's arrivals thread ARRIVAL_TID_BASE + e.
ENGINE_PID_BASE = 10
ENGINE_TID_BASE, LINK_TID_BASE, ARRIVAL_TID_BASE = 100, 10_000, 20_000


def cluster_events(result, max_steps: int, max_requests: int, notes: list[str]) -> list[dict]:
    """One process per engine ("replica 2", "prefill 0", "decode 1") with its steps and counters; in disaggregated
    serving each prefill engine's link carries a slice per KV transfer, with a flow arrow to the decode engine
    it reached."""
    out: list[dict] = []
    logs = result.engine_logs
    per_engine = max(1, max_steps // len(logs))  # the engines share one engine's slices: a trace a viewer opens
    for e, log in enumerate(logs):
        pid = ENGINE_PID_BASE + e
        out += [_meta(pid, None, "process_name", {"name": log.name}),
                _meta(pid, None, "process_sort_index", {"sort_index": 2 + e}),
                _meta(pid, ENGINE_TID_BASE + e, "thread_name", {"name": "steps"})]
        rows = log.steps
        numbers = np.arange(len(rows), dtype=np.int64) * log.step_stride
        if len(rows) > per_engine:
            keep = np.unique(np.linspace(0, len(rows) - 1, per_engine).round().astype(np.int64))
            notes.append(f"{log.name}: {len(rows)} steps logged; the trace shows an evenly spaced sample of "
                         f"{len(keep)} (the engines share {max_steps:,} step slices)")
            rows, numbers = rows[keep], numbers[keep]
        if log.step_stride != 1:
            notes.append(f"{log.name}: its step log was sampled (every {log.step_stride}th step kept)")
        for ev in _step_events(result, rows, numbers, log.step_stride == 1, pid, log.num_blocks):
            if ev.get("tid") == STEPS_TID:
                ev["tid"] = ENGINE_TID_BASE + e
            out.append(ev)
    h = result.handover
    if h is None:
        return out
    moved = np.flatnonzero(h.to_decode >= 0)
    if len(moved) > max_requests:
        notes.append(f"{len(moved)} KV transfers; the trace shows an evenly spaced sample of {max_requests}")
        moved = moved[np.unique(np.linspace(0, len(moved) - 1, max_requests).round().astype(np.int64))]
    n_prefill = sum(log.pool == "prefill" for log in logs)
    for e in range(len(logs)):
        tid, name = (LINK_TID_BASE + e, "KV link") if e < n_prefill else (ARRIVAL_TID_BASE + e, "KV arrivals")
        out.append(_meta(ENGINE_PID_BASE + e, tid, "thread_name", {"name": name}))
    for r in moved:
        r = int(r)
        p, d = int(h.to_prefill[r]), n_prefill + int(h.to_decode[r])
        start, end = _us(float(h.transfer_start[r])), _us(float(h.delivered[r]))
        args = {"request": r, "prompt_tokens": int(result.requests.prompt_tokens[r]),
                "waited_for_link_ms": (float(h.transfer_start[r]) - float(h.prefill_end[r])) * 1e3,
                "transfer_ms": (float(h.delivered[r]) - float(h.transfer_start[r])) * 1e3}
        out.append({"ph": "X", "pid": ENGINE_PID_BASE + p, "tid": LINK_TID_BASE + p, "ts": start,
                    "dur": max(1, end - start), "cat": "kv", "name": f"KV req {r}", "args": args})
        out.append({"ph": "X", "pid": ENGINE_PID_BASE + d, "tid": ARRIVAL_TID_BASE + d, "ts": end, "dur": 1,
                    "cat": "kv", "name": f"KV in req {r}", "args": {"request": r}})
        out.append({"ph": "s", "pid": ENGINE_PID_BASE + p, "tid": LINK_TID_BASE + p, "ts": start, "id": r,
                    "cat": "kv", "name": "KV transfer"})
        out.append({"ph": "f", "bp": "e", "pid": ENGINE_PID_BASE + d, "tid": ARRIVAL_TID_BASE + d, "ts": end,
                    "id": r, "cat": "kv", "name": "KV transfer"})
    return out


POWER_TRACK = "power (W, all its GPUs)"


def power_events(result, max_steps: int, notes: list[str]) -> list[dict]:
    """A counter track of each engine's power (sim_core/energy.py power_over_time: its steps' power, idle power
    between them, none while an autoscaler's replica is released), on the engine's process. Left out, and `notes`
    says why, where it could not integrate to the engine's energy: a strided step log, or more steps than the
    trace shows."""
    engines = engine_powers(result)
    logged = sum(len(e.steps) for e in engines)
    if any(e.stride != 1 for e in engines) or logged > max_steps:
        notes.append(f"the power track is left out: it needs every step of the run, and the trace shows a sample "
                     f"of its {logged:,} logged steps")
        return []
    out: list[dict] = []
    for k, engine in enumerate(engines):
        pid = ENGINE_PID_BASE + k if result.engine_logs else GPU_PID
        times, watts = power_over_time(engine)
        stamps = [_us(t) for t in times.tolist()]
        for i, (ts, w) in enumerate(zip(stamps, watts.tolist(), strict=True)):
            if i + 1 < len(stamps) and stamps[i + 1] == ts:
                continue  # rounded onto the next sample's microsecond: the later value holds from there
            out.append({"ph": "C", "pid": pid, "ts": ts, "name": POWER_TRACK, "args": {"watts": w}})
    return out


def _events_were_recorded(result) -> bool:
    if len(result.events):
        return True
    # Every request that ran was prefilled at least once, which the event log records when it is on.
    return not bool((result.status == E.FINISHED).any())


def chrome_trace(result, max_requests: int = DEFAULT_MAX_REQUESTS, max_steps: int = DEFAULT_MAX_STEPS) -> dict:
    """The run as a Chrome trace-event document ({"traceEvents", "displayTimeUnit", "metadata"})."""
    if max_requests < 0 or max_steps < 1:
        raise ValueError("need max_requests >= 0 and max_steps >= 1")
    notes: list[str] = []  # what the trace leaves out, and why
    rows, step_numbers = _steps_shown(result, max_steps, notes)
    shown = _requests_shown(result, max_requests, notes)
    events: list[dict] = [
        _meta(REQUESTS_PID, None, "process_name", {"name": "requests"}),
        _meta(REQUESTS_PID, None, "process_sort_index", {"sort_index": 1}),
    ]
    if result.engine_logs:  # a cluster: one process per engine, and the KV hand-overs between pools
        events += cluster_events(result, max_steps, max_requests, notes)
    else:
        events += [_meta(GPU_PID, None, "process_name", {"name": "GPU"}),
                   _meta(GPU_PID, None, "process_sort_index", {"sort_index": 0}),
                   _meta(GPU_PID, STEPS_TID, "thread_name", {"name": "steps"})]
        events += _step_events(result, rows, step_numbers,
                               gaps_are_idle=result.step_stride == 1 and len(rows) == len(result.steps))
    if result.scenario.energy:
        events += power_events(result, max_steps, notes)
    if len(shown):
        events += _request_events(result, shown)
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": _clean(_metadata(result, shown, notes))}


def _steps_shown(result, max_steps: int, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, step numbers) of the logged steps the trace shows: all of them, or an evenly spaced sample of
    max_steps; `notes` says when the log or the trace is a sample."""
    stride = int(result.step_stride)
    rows = result.steps
    step_numbers = np.arange(len(rows), dtype=np.int64) * stride
    if len(rows) > max_steps:
        keep = np.unique(np.linspace(0, len(rows) - 1, max_steps).round().astype(np.int64))
        rows, step_numbers = rows[keep], step_numbers[keep]
        notes.append(f"{len(result.steps)} steps logged; the trace shows an evenly spaced sample of {len(rows)}")
    if stride != 1:
        notes.append(f"the step log was sampled (every {stride}th step kept, the run was too long to log every "
                     f"step): step slices and counters are a sample, and per-request tracks are left out; "
                     f"run a shorter scenario for a full timeline")
    return rows, step_numbers


def _requests_shown(result, max_requests: int, notes: list[str]) -> np.ndarray:
    """The requests that get a track: all of them or an evenly spaced sample of max_requests; none without an
    unsampled step log (the step log's note says so) or a complete event log (`notes` says why)."""
    n_req = len(result.requests)
    none = np.zeros(0, np.int64)
    if int(result.step_stride) != 1 or max_requests == 0 or n_req == 0:
        return none
    if not _events_were_recorded(result):
        notes.append("per-request tracks are left out: the run was made without record_events=True")
        return none
    if not result.events_complete:
        notes.append(f"per-request tracks are left out: the event log stopped at its bound of "
                     f"{len(result.events):,} events; run fewer requests for a full timeline")
        return none
    if n_req <= max_requests:
        return np.arange(n_req, dtype=np.int64)
    shown = np.unique(np.linspace(0, n_req - 1, max_requests).round().astype(np.int64))
    notes.append(f"{n_req} requests; request tracks show an evenly spaced sample of {len(shown)}")
    return shown


def _metadata(result, shown: np.ndarray, notes: list[str]) -> dict:
    """What the trace is of (scenario, setup, workload), how much of the run it shows, and the run's metrics."""
    r, s, setup = result.resolved, result.scenario, result.resolved.setup
    stride = int(result.step_stride)
    return {
        "generator": "sched-sim",
        "scenario": s.to_query(),
        "scheduler": s.scheduler,
        "hardware": setup.gpu.key,
        "gpu": setup.gpu.name,
        "model": setup.model.key,
        "quantization": setup.quantization,
        "tp": setup.tp,
        "kv_blocks": int(r.num_blocks),
        "block_size": int(setup.block_size),
        "token_budget": int(r.token_budget),
        "workload": "trace" if s.trace else s.workload,
        "rate": r.rate,
        "slo_ttft_ms": r.slo_ttft_ms,
        "slo_tpot_ms": r.slo_tpot_ms,
        "requests_total": len(result.requests),
        "requests_shown": int(len(shown)),
        "steps_total": int(result.metrics.get("steps", len(result.steps) * stride)),
        "step_stride": stride,
        "time_unit": "microseconds of simulated time",
        "notes": notes,
        "metrics": result.metrics,
    }


def write_chrome_trace(result, path, max_requests: int = DEFAULT_MAX_REQUESTS,
                       max_steps: int = DEFAULT_MAX_STEPS) -> dict:
    """Write the trace to `path` (compact JSON); returns the trace's metadata (its "notes" say what was left out)."""
    trace = chrome_trace(result, max_requests=max_requests, max_steps=max_steps)
    with Path(path).open("w", encoding="utf-8") as f:
        json.dump(trace, f, separators=(",", ":"), allow_nan=False)
    meta = dict(trace["metadata"])
    meta["events"] = len(trace["traceEvents"])
    return meta
