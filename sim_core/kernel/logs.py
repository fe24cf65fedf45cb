"""What an engine records as it runs, on its `Logs` record (state.py): the step log (every step until
`max_step_records`, then every other one, and so on: bounded memory), the event log (prefill chunks, preemptions,
swaps; only when asked for, and only up to `max_events`), the inter-token-latency histogram and KV-pool frames at given instants.

The growable logs are grown between steps (`make_log_room`), never during one: one step writes at most
3 x max_num_seqs events (each running request is preempted at most once, each swapped one resumed at most once,
each scheduled one prefills at most once) and one step row, so the phases can write without checking.
"""

from __future__ import annotations

import numpy as np

from .jit import allocating_kernel, inline, kernel
from .kv_pool import snapshot
from .kv_tiers import snapshot_tiers
from .state import (
    A_END_S,
    E_KIND,
    E_REQUEST,
    E_STEP,
    E_TOKENS,
    FRAME_DT,
    FRAME_NEXT_S,
    ITL_COARSE_BINS,
    ITL_FINE_BINS,
    L_EVENTS,
    L_EVENTS_FULL,
    L_LOG_STRIDE,
    L_NEXT_FRAME,
    L_STEPS_LOGGED,
    LOGS,
    N_ACC,
    N_EVENT_COLS,
    N_RUNNING,
    N_STEP_COLS,
    STEP,
    new_record,
)

INITIAL_ROWS = 1024


@allocating_kernel
def new_logs(frame_at, frame_capacity, frame_dt, num_blocks, n_tenants, record_events, max_events, own_itl):
    """`frame_at`: instants to snapshot the KV pool at; or, when empty, up to `frame_capacity` snapshots every
    `frame_dt` seconds from 0, the spacing doubling whenever they would not fit (so they span the whole run).
    `own_itl`: False leaves the inter-token-latency histograms empty, for an engine of a cluster that is handed
    the cluster's (16 MB an engine, zeroed for nothing otherwise)."""
    n_frames = frame_at.shape[0] if frame_at.shape[0] > 0 else frame_capacity
    logs = new_record(LOGS)
    logs.steps = np.zeros((INITIAL_ROWS, N_STEP_COLS))
    logs.service = np.zeros((INITIAL_ROWS, n_tenants))
    logs.events = np.zeros((min(INITIAL_ROWS, max_events) if record_events else 1, N_EVENT_COLS), np.int64)
    logs.acc = np.zeros(N_ACC)
    logs.itl_fine = np.zeros(ITL_FINE_BINS if own_itl else 0, np.int64)
    logs.itl_coarse = np.zeros(ITL_COARSE_BINS if own_itl else 0, np.int64)
    logs.frame_at = frame_at
    logs.frame_clock = np.array([0.0, frame_dt])
    logs.frames = np.full((n_frames, num_blocks), -1, np.int32)
    logs.frame_state = np.zeros((n_frames, num_blocks), np.int8)
    logs.frame_s = np.zeros(n_frames)
    logs.frame_tiers = np.zeros((n_frames, 2), np.int64)
    logs.n = np.array([0, 1, 0, 0, 0], np.int64)
    return logs


@allocating_kernel
def _grown(log, rows):
    bigger = np.zeros((rows, log.shape[1]), dtype=log.dtype)
    for i in range(min(log.shape[0], rows)):  # element by element: a slice assignment compiles numba's broadcasting checks
        for j in range(log.shape[1]):
            bigger[i, j] = log[i, j]
    return bigger


@inline
def copy_row(a, src, dst):
    for j in range(a.shape[1]):
        a[dst, j] = a[src, j]


@inline
def make_log_room(eng):
    """Room in the logs for one more step: checked here, so most steps make no call; grown by _grow_logs."""
    cfg, logs = eng.cfg, eng.logs
    steps_full = logs.n[L_STEPS_LOGGED] == logs.steps.shape[0] and logs.steps.shape[0] < cfg.max_step_records
    events_short = cfg.record_events and logs.n[L_EVENTS_FULL] == 0 and \
        logs.n[L_EVENTS] + 3 * cfg.max_num_seqs > logs.events.shape[0]
    if steps_full or events_short:
        _grow_logs(eng, steps_full, events_short)


@allocating_kernel
def _grow_logs(eng, steps_full, events_short):
    """Grow the logs make_log_room found short in place (new arrays in the record), or mark the event log full if
    it may not grow."""
    cfg, logs = eng.cfg, eng.logs
    if steps_full:
        logs.steps = _grown(logs.steps, 2 * logs.steps.shape[0])
        logs.service = _grown(logs.service, 2 * logs.service.shape[0])
    if events_short:
        need = logs.n[L_EVENTS] + 3 * cfg.max_num_seqs
        if need > cfg.max_events:
            logs.n[L_EVENTS_FULL] = 1  # stop here, between steps, so what was logged is whole up to this step
            return
        rows = logs.events.shape[0]
        while rows < need:
            rows *= 2
        # > the current size (short of need), and still >= need (the current size started at most max_events)
        logs.events = _grown(logs.events, min(rows, cfg.max_events))


@inline
def log_event(eng, r, kind, tokens):
    logs = eng.logs
    if not eng.cfg.record_events or logs.n[L_EVENTS_FULL]:
        return
    e = logs.n[L_EVENTS]
    logs.events[e, E_REQUEST] = r
    logs.events[e, E_STEP] = eng.loop[STEP]
    logs.events[e, E_KIND] = kind
    logs.events[e, E_TOKENS] = tokens
    logs.n[L_EVENTS] = e + 1


@inline
def step_log_row(eng):
    """The step log's row for this step, or -1 when the log is sampling past it. A full log keeps every other
    record and samples half as often from then on (bounded memory)."""
    logs = eng.logs
    step = eng.loop[STEP]
    if step % logs.n[L_LOG_STRIDE] != 0:
        return -1
    n = logs.n[L_STEPS_LOGGED]
    if n == eng.cfg.max_step_records:
        for k in range(0, n, 2):
            copy_row(logs.steps, k, k // 2)
            copy_row(logs.service, k, k // 2)
        n = (n + 1) // 2
        logs.n[L_LOG_STRIDE] *= 2
        logs.n[L_STEPS_LOGGED] = n
        if step % logs.n[L_LOG_STRIDE] != 0:
            return -1
    logs.n[L_STEPS_LOGGED] = n + 1
    return n


@inline
def itl_bin(gap):
    """(fine bin, -1) for a gap under ~1 s, else (-1, coarse bin): exact microseconds, then milliseconds up to
    1000 s (the percentiles in metrics.py read these)."""
    us = int(gap * 1e6)
    if us < ITL_FINE_BINS:
        return us, -1
    ms = int(gap * 1e3)
    if ms >= ITL_COARSE_BINS:
        ms = ITL_COARSE_BINS - 1
    return -1, ms


@inline
def take_due_frames(eng):
    """Snapshot the KV pool if an instant has come (checked here, so most steps make no call)."""
    logs = eng.logs
    k = logs.n[L_NEXT_FRAME]
    if logs.frame_at.shape[0] > 0:
        if k < logs.frame_at.shape[0] and logs.frame_at[k] <= eng.now:
            take_frames(eng, False)
    elif logs.frames.shape[0] > 0 and logs.frame_clock[FRAME_NEXT_S] <= eng.now:
        take_spaced_frame(eng)


@kernel
def take_spaced_frame(eng):
    """The next evenly spaced snapshot; when the frames are full, keep every other one and space them twice as
    far apart, so that however long the run, its frames cover all of it."""
    logs = eng.logs
    k = logs.n[L_NEXT_FRAME]
    if k == logs.frames.shape[0]:
        for j in range(0, k, 2):
            copy_row(logs.frames, j, j // 2)
            copy_row(logs.frame_state, j, j // 2)
            logs.frame_s[j // 2] = logs.frame_s[j]
            copy_row(logs.frame_tiers, j, j // 2)
        k = (k + 1) // 2
        logs.frame_clock[FRAME_DT] *= 2.0
    snapshot(eng.kv, eng.q.running, eng.q.size[N_RUNNING], logs.frames[k], logs.frame_state[k])
    snapshot_tiers(eng.kv, logs.frame_tiers[k])
    logs.frame_s[k] = eng.now
    logs.n[L_NEXT_FRAME] = k + 1
    logs.frame_clock[FRAME_NEXT_S] = (k + 1) * logs.frame_clock[FRAME_DT]


@kernel
def take_frames(eng, final):
    """Snapshot the KV pool for every requested instant that has come (all remaining ones when final; evenly
    spaced frames end with one at the end of the run)."""
    kv, q, logs = eng.kv, eng.q, eng.logs
    if final and logs.frame_at.shape[0] == 0:
        if logs.frames.shape[0] > 0:
            take_spaced_frame(eng)
        logs.acc[A_END_S] = eng.now
        return
    now = eng.now
    k = logs.n[L_NEXT_FRAME]
    while k < logs.frame_at.shape[0] and (final or logs.frame_at[k] <= now):
        snapshot(kv, q.running, q.size[N_RUNNING], logs.frames[k], logs.frame_state[k])
        snapshot_tiers(kv, logs.frame_tiers[k])
        logs.frame_s[k] = now
        k += 1
    logs.n[L_NEXT_FRAME] = k
    if final:
        logs.acc[A_END_S] = now
