"""Per-request timelines from a run's event and step logs: what each request was doing when.

Segments are (request, kind, start_s, end_s) with kind one of SEGMENT_KINDS:
  queued     arrival -> first scheduled
  prefill    one step that computed a chunk of its prompt (or of its recomputation after preemption)
  decode     emitting tokens, from the end of its last prefill chunk to its finish or next preemption
  preempted  evicted (recompute or swap) until it is scheduled again
  rejected   a zero-length mark at arrival for a request the server refused
Used by the Perfetto export and the dashboard's Gantt chart. Needs a run with record_events=True, an
unsampled step log (step_stride == 1) and a complete event log (events_complete).
"""

from __future__ import annotations

import numpy as np

from .kernel import state as E

SEGMENT_KINDS = ("queued", "prefill", "decode", "preempted", "rejected")
QUEUED, PREFILL, DECODE, PREEMPTED, REJECTED = range(5)


def step_bounds(result) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every step, indexed by step number. Several engines: their logs one after another,
    as the run's event log numbers their steps (EngineLog.first_step)."""
    if result.step_stride != 1:
        raise ValueError("the step log of this run was sampled; run with fewer steps for a timeline")
    if not result.events_complete:
        raise ValueError(f"the event log of this run stopped at its bound of {len(result.events):,} events; "
                         "run with fewer requests for a timeline")
    steps = np.concatenate([log.steps for log in result.engine_logs]) if result.engine_logs else result.steps
    start = steps[:, E.S_START]
    return start, start + steps[:, E.S_DURATION]


def request_segments(result, request_ids=None) -> list[tuple[int, int, float, float]]:
    """Segments for the given requests (default: all), ordered by request then time."""
    reqs = result.requests
    ids = np.arange(len(reqs)) if request_ids is None else np.asarray(request_ids, np.int64)
    step_start, step_end = step_bounds(result)
    ev = result.events
    wanted = np.zeros(len(reqs), bool)
    wanted[ids] = True
    ev = ev[wanted[ev[:, E.E_REQUEST]]] if len(ev) else ev
    if len(ev):  # by request, then step, then log order: each request's events are one contiguous run
        ev = ev[np.lexsort((np.arange(len(ev)), ev[:, E.E_STEP], ev[:, E.E_REQUEST]))]
    ev_request = ev[:, E.E_REQUEST] if len(ev) else np.zeros(0, np.int64)
    lo, hi = np.searchsorted(ev_request, ids, "left"), np.searchsorted(ev_request, ids, "right")
    # Python lists from here on: this loop runs over every event of a run (on the web, holding the GIL), and
    # list items are several times cheaper to read than numpy scalars. Values are the same doubles.
    kinds, steps = ev[:, E.E_KIND].tolist(), ev[:, E.E_STEP].tolist()
    starts, ends = step_start.tolist(), step_end.tolist()
    arrival, status = reqs.arrival_s.tolist(), result.status.tolist()
    first_sched, first_token = result.first_scheduled_s.tolist(), result.first_token_s.tolist()
    finish_s = result.finish_s.tolist()

    out: list[tuple[int, int, float, float]] = []
    for r, r_lo, r_hi in zip(ids.tolist(), lo.tolist(), hi.tolist(), strict=True):
        if status[r] == E.REJECTED:
            out.append((r, REJECTED, arrival[r], arrival[r]))
            continue
        if first_sched[r] > arrival[r]:
            out.append((r, QUEUED, arrival[r], first_sched[r]))
        decode_from = None  # set while the request is decoding
        preempted_at = None
        for k in range(r_lo, r_hi):
            kind, s = kinds[k], steps[k]
            if kind == E.EV_PREFILL:
                if preempted_at is not None:
                    out.append((r, PREEMPTED, preempted_at, starts[s]))
                    preempted_at = None
                out.append((r, PREFILL, starts[s], ends[s]))
                decode_from = ends[s]
            elif kind in (E.EV_PREEMPT_RECOMPUTE, E.EV_SWAP_OUT):
                t = starts[s]
                # Decoding only once its first token is out (a mid-prompt eviction has no decode before it).
                if decode_from is not None and t > decode_from >= first_token[r]:
                    out.append((r, DECODE, decode_from, t))
                decode_from = None
                preempted_at = t
            elif kind == E.EV_SWAP_IN:
                if preempted_at is not None:
                    out.append((r, PREEMPTED, preempted_at, starts[s]))
                    preempted_at = None
                decode_from = starts[s]
        if decode_from is not None and finish_s[r] > decode_from:
            out.append((r, DECODE, decode_from, finish_s[r]))
    return out
