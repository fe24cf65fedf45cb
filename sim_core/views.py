"""Named views of a run's `Result`, for the faces (the dashboard, reports, notebooks).

A Result keeps the engine's logs as it wrote them: numeric arrays whose columns, and the codes stored in them,
are the engine's own (sim_core.kernel.state: S_* step-log columns, E_* event columns, request status, event kind and KV
block state codes). Faces read them through this module instead, by name, so that the engine may renumber its
columns or codes without a face noticing:

    from sim_core import views
    steps = views.step_columns(result)                 # {"start_s": array, "duration_s": array, ...}
    done = result.status == views.RequestState.FINISHED
    ev = views.event_columns(result)                   # {"request", "step", "kind", "tokens"}
    swaps = ev["kind"] == views.EventKind.SWAP_OUT
    for engine in views.engine_logs(result):           # a cluster's engines (empty for one engine)
        engine.name, engine.pool, engine.steps["waiting"], engine.num_blocks, engine.served

Every function only reads the Result's fields; the arrays returned are views of its arrays, not copies.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import numpy as np

from .kernel import attribution as _attribution
from .kernel import cost_model as _cost_model
from .kernel import state as _state

# Where a request's latency went (Result.attribution's columns, metrics.attribution_ms's keys), in column order;
# TRANSPORT_PART: the column of the time its KV spent crossing between pools.
ATTRIBUTION_PARTS = _attribution.ATTRIBUTION_PARTS
TRANSPORT_PART = _attribution.AT_TRANSPORT
# The kernel groups the cost model charges a step for (step_time's breakdowns), in order.
COST_COMPONENTS = _cost_model.COMPONENTS

class RequestState(IntEnum):
    """A request's status (Result.status holds these codes; after a run, FINISHED or REJECTED)."""

    PENDING = _state.PENDING
    WAITING = _state.WAITING
    RUNNING = _state.RUNNING
    SWAPPED = _state.SWAPPED
    FINISHED = _state.FINISHED
    REJECTED = _state.REJECTED


class EventKind(IntEnum):
    """What an event-log row records (event_columns(result)["kind"])."""

    PREFILL = _state.EV_PREFILL  # a request's prefill tokens computed in a step
    PREEMPT_RECOMPUTE = _state.EV_PREEMPT_RECOMPUTE  # preempted, its KV dropped (recomputed when it resumes)
    SWAP_OUT = _state.EV_SWAP_OUT  # preempted, its KV moved to host memory (`tokens` of it)
    SWAP_IN = _state.EV_SWAP_IN  # its KV back from host memory
    CACHE_HIT = _state.EV_CACHE_HIT  # admitted with `tokens` of its prompt found in the prefix cache


class BlockState(IntEnum):
    """A KV block's state in a recorded frame (Result.kv_frame_state)."""

    FREE = _state.BLOCK_FREE
    USED = _state.BLOCK_USED  # held by one request
    SHARED = _state.BLOCK_SHARED  # a prefix block held by several requests
    CACHED = _state.BLOCK_CACHED  # held by none, but keeping a cached prefix a later request may reuse


# The step log's columns by name, in column order: start_s, duration_s, prefill_tokens, prefill_seqs,
# decode_seqs, kv_blocks, waiting, running, swapped, bytes, flops, preemptions, token_budget, shed.
STEP_COLUMNS: tuple[str, ...] = tuple(sorted(_state.STEP_LOG_COLUMNS, key=_state.STEP_LOG_COLUMNS.__getitem__))
# The event log's columns by name.
EVENT_COLUMNS = {"request": _state.E_REQUEST, "step": _state.E_STEP, "kind": _state.E_KIND,
                 "tokens": _state.E_TOKENS}


def columns_of_steps(steps: np.ndarray) -> dict[str, np.ndarray]:
    """A step log ([logged step, column] as the engine writes it) -> {column name: its values}."""
    steps = np.asarray(steps)
    if steps.ndim != 2 or steps.shape[1] != _state.N_STEP_COLS:
        raise ValueError(f"a step log has {_state.N_STEP_COLS} columns per row (got an array of shape {steps.shape})")
    return {name: steps[:, _state.STEP_LOG_COLUMNS[name]] for name in STEP_COLUMNS}


def step_columns(result) -> dict[str, np.ndarray]:
    """The run's step log by column name (STEP_COLUMNS). Every `result.step_stride`-th step is logged; a run of
    several engines has no merged log (empty columns): see engine_logs."""
    return columns_of_steps(result.steps)


def event_columns(result) -> dict[str, np.ndarray]:
    """The run's event log by column name (EVENT_COLUMNS; `kind` holds EventKind codes). Empty unless the run
    recorded events; complete up to where it stopped if `result.events_complete` is False."""
    events = np.asarray(result.events)
    if events.ndim != 2 or events.shape[1] != _state.N_EVENT_COLS:
        raise ValueError(f"an event log has {_state.N_EVENT_COLS} columns per row (got an array of shape "
                         f"{events.shape})")
    return {name: events[:, col] for name, col in EVENT_COLUMNS.items()}


class EngineView(NamedTuple):
    """One engine of a run of several (replicas behind a router, or a prefill or decode pool's engine)."""

    name: str  # "replica 2", "prefill 0", "decode 1"
    pool: str  # "replicas", "prefill", "decode"
    steps: dict[str, np.ndarray]  # its step log by column name (STEP_COLUMNS), every step_stride-th step
    step_stride: int
    num_blocks: int  # its KV pool
    served: np.ndarray  # bool per request: the requests it took (a pool's engine: its part of their work)
    first_step: int  # its step k is step first_step + k of the run's event log (event_columns(result)["step"])
    kv_frames: np.ndarray  # [frame, block] -> the request holding it, or -1; empty unless frames were asked for
    kv_frame_state: np.ndarray  # [frame, block] -> BlockState
    kv_frame_s: np.ndarray  # each frame's time


def engine_logs(result) -> list[EngineView]:
    """Each engine of a run of several, in the order of Result.engine_logs (a prefill pool's engines first);
    empty for a single engine, whose log is step_columns(result)."""
    logs = result.engine_logs or []
    h = result.handover
    index = {pool: 0 for pool in ("replicas", "prefill", "decode")}
    out = []
    for log in logs:
        k = index[log.pool]
        index[log.pool] += 1
        if log.pool == "replicas":
            served = np.asarray(result.replica_of) == k
        else:  # the hand-over trace names each request's prefill and decode engine, numbered within its pool
            served = np.asarray(h.to_prefill if log.pool == "prefill" else h.to_decode) == k
        out.append(EngineView(log.name, log.pool, columns_of_steps(log.steps), int(log.step_stride),
                              int(log.num_blocks), served, int(log.first_step), log.kv_frames, log.kv_frame_state,
                              log.kv_frame_s))
    return out


def request_engines(result) -> np.ndarray | None:
    """Per request, the engine(s) of a run of several that served it, by name (EngineView.name): its replica
    ("replica 2"), or disaggregated, its prefill engine and the decode engine its KV went to ("prefill 0 → decode 1";
    the prefill engine alone when it never reached a decode engine); "" for a request no engine took. None for a
    single engine."""
    logs = result.engine_logs or []
    if not logs:
        return None
    names = [[log.name for log in logs if log.pool == pool] for pool in ("replicas", "prefill", "decode")]
    n = len(result.requests)
    if result.handover is None:
        first, second = np.asarray(result.replica_of), np.full(n, -1)
        first_names, second_names = names[0], []
    else:
        first, second = np.asarray(result.handover.to_prefill), np.asarray(result.handover.to_decode)
        first_names, second_names = names[1], names[2]
    out = []
    for a, b in zip(first.tolist(), second.tolist(), strict=True):
        text = first_names[a] if 0 <= a < len(first_names) else ""
        if 0 <= b < len(second_names):
            text = f"{text} → {second_names[b]}" if text else second_names[b]
        out.append(text)
    return np.array(out, dtype=str) if out else np.zeros(0, dtype=str)
