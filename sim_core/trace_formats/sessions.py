"""A trace's sessions as the engine replays them (`replay=sessions`): each request is sent when what it waited for
has been answered plus its recorded think (tool, user) time, starting at its session's recorded arrival.

What a request waits for is read from the fields its reader kept: Weka's `parent` (the request before it in its
agent's order; a subagent's first request: the request that spawned it), Bailian's `parent_chat_id`, or a
`session` id alone (the request before it in its session). A Weka subagent forks at its spawning request's
answer and its parent agent's next request joins it: that request waits for every subagent spawned before it.

The engine releases one follow-up per finished request (`Requests.parent`, one parent each), so a fork is
replayed as a chain: each session's requests in depth-first order, a request's subagents before its agent's next
request, siblings in their recorded order. Every recorded dependency is kept (nothing is sent before what it
waited for was answered, plus its think time); what is lost is the overlap of sibling subagents, which run one
after another instead of side by side (trace_0291's two Explore subagents, spawned together and running 44.8 and
75.6 s, take 120 s in turn instead of 76 s at once)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..workload import Requests
from .common import ParsedTrace, in_order

# The fields that link a trace's requests into sessions, by the readers that keep them (trace_formats.FORMATS).
SESSION_FIELDS = ("parent", "parent_chat_id", "session")


def has_sessions(parsed: ParsedTrace) -> bool:
    """Whether the trace links any request to one it waited for (a BurstGPT file without Session IDs links none)."""
    return any(name in parsed.fields for name in SESSION_FIELDS) and bool(
        (recorded_parents(parsed) >= 0).any()
    )


def recorded_parents(parsed: ParsedTrace) -> np.ndarray:
    """Each request's row it waited for (-1: none, a session's first request), from the fields its reader kept."""
    f, n = parsed.fields, len(parsed.requests)
    if "parent" in f:
        return f["parent"].astype(np.int64)
    if "parent_chat_id" in f:
        row_of = {int(c): k for k, c in enumerate(f["chat_id"])}
        return np.array([row_of.get(int(c), -1) for c in f["parent_chat_id"]], np.int64)
    parent = np.full(n, -1, np.int64)
    last: dict[int, int] = {}
    for k, sid in enumerate(
        f["session"].tolist()
    ):  # rows are in arrival order: the previous one is the parent
        if sid >= 0:
            parent[k] = last.get(sid, -1)
            last[sid] = k
    return parent


def _children(parsed: ParsedTrace, parent: np.ndarray) -> list[list[int]]:
    """Each row's children, subagents first (another agent's requests before its own agent's next), then by
    recorded arrival (rows are in arrival order already)."""
    agent = parsed.fields.get("agent")
    kids: list[list[int]] = [[] for _ in range(len(parent))]
    for child in np.flatnonzero(parent >= 0).tolist():
        kids[parent[child]].append(child)
    if agent is not None:
        for p, row in enumerate(kids):
            if len(row) > 1:
                row.sort(key=lambda c, p=p: (agent[c] == agent[p], c))
    return kids


def chain_order(parsed: ParsedTrace, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, pred): the rows in the order the engine replays them, each session depth first from its first
    request, sessions by their first request's arrival; pred[k] is the row order[k] follows in its chain (-1 for
    a session's first). A request whose parent row is missing (cut from the trace) starts a chain of its own."""
    kids = _children(parsed, parent)
    order: list[int] = []
    pred: list[int] = []
    for root in np.flatnonzero(parent < 0).tolist():
        stack, last = [root], -1
        while stack:
            row = stack.pop()
            order.append(row)
            pred.append(last)
            last = row
            stack.extend(reversed(kids[row]))
    return np.array(order, np.int64), np.array(pred, np.int64)


def _think(parsed: ParsedTrace, parent: np.ndarray, order: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Each chained request's wait after the one it follows ended: its recorded think time where it follows its
    own parent and the trace records one (Weka's think_time); otherwise its recorded arrival less the recorded
    end of the one it follows (that one's arrival plus its recorded api_time, or its arrival alone where the
    trace records no response time, as Bailian's: then the wait includes the parent's recorded service time)."""
    arrival = parsed.requests.arrival_s
    api = parsed.fields.get("api_s")
    recorded_end = arrival + (0.0 if api is None else np.nan_to_num(api, nan=0.0))
    think_s = parsed.fields.get("think_s")
    has = pred >= 0
    wait = np.zeros(len(order))
    wait[has] = np.maximum(0.0, arrival[order[has]] - recorded_end[pred[has]])
    if think_s is not None:
        own = has & (pred == parent[order]) & ~np.isnan(think_s[order])
        wait[own] = think_s[order[own]]
    return wait


def session_requests(parsed: ParsedTrace) -> tuple[Requests, np.ndarray]:
    """(requests, order): the trace's requests replayed as sessions (module docstring), request k being the
    trace's row order[k]. A session's first request arrives at its recorded time; every other one (parent >= 0)
    its think time after the one before it in the chain ends."""
    parent = recorded_parents(parsed)
    order, pred = chain_order(parsed, parent)
    think = _think(parsed, parent, order, pred)
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))
    chained = in_order(parsed.requests, order)
    engine_parent = np.where(pred >= 0, at[np.maximum(pred, 0)], -1)
    arrival = np.where(engine_parent < 0, chained.arrival_s, np.inf)
    return dataclasses.replace(chained, arrival_s=arrival, parent=engine_parent, think_s=think), order
