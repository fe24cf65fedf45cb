"""Cluster runs on the dashboard: replicas behind a router, or disaggregated prefill/decode pools.

A run of several engines records, per engine, its name and pool, its step log (sim_core.runner.EngineLog,
CLUSTER_STEP_RECORDS rows at most, then every step_stride-th step) and its KV frames, and one event log for the
whole cluster (sim_core.views.engine_logs: EngineView.first_step says where each engine's steps start in it); its
share of the work (metrics["replicas"]), which requests the router sent it (Result.replica_of, or the hand-over
trace's prefill engine), and in disaggregated runs each request's KV transfer (Result.handover: prefill end,
transfer start, delivery, decode engine).

`cluster_view` turns such a Result into a RunView: the single-engine parts (metrics, latency CDFs, the
step-by-step Gantt from the cluster's event log), each engine's KV data (`engine_kv`, the busiest one's as `kv`:
the KV view shows one engine at a time) and `cluster` (compact lists, cached with the view); cluster_page.py draws
the latter as plotly figures and the page's cluster cards.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim_core.views import BlockState, EngineView, RequestState, engine_logs, event_columns

from .charts import ENGINES
from .kvstates import frame_rows, pool_state_runs, pool_swap_frames
from .runview import (
    GANTT_ROWS,
    RUN_BUDGET,
    RunView,
    build_view,
    first_token_times,
    frame_count,
    kv_data,
    pick_pool_frames,
    sample_ids,
)

# Engines get these colours in order (the router row, the per-request bars and the KV transfers agree): none a
# scheduler's (charts.ENGINES).
ENGINE_COLORS = ENGINES
QUEUE_COLORS = {"waiting": "#e03131", "running": "#343a40"}  # neutral: the row names the engine
KV_FILL = "#91a7ff"
TRANSFER_WAIT = "#ced4da"
# Time buckets of one engine's queue/KV row: every logged step (an engine logs CLUSTER_STEP_RECORDS rows at most)
# while the cluster's rows stay within ENGINE_POINTS_TOTAL points; fewer each for a large cluster.
ENGINE_POINTS = 1024
ENGINE_POINTS_TOTAL = 16_384
# Numbers in one engine's run-length coded KV frames (runview.kv_data's budget): every engine's are cached with
# the view (the page sends one engine's), so a cluster shares CLUSTER_RUN_BUDGET, one engine never more than a
# single engine's RUN_BUDGET nor less than ENGINE_MIN_RUNS (a coarse grid, but one to look at).
CLUSTER_RUN_BUDGET = 2 * RUN_BUDGET
ENGINE_MIN_RUNS = RUN_BUDGET // 32
MAX_ROUTE_POINTS = 4000  # arrivals drawn in the router row (evenly spaced by arrival past that)
MAX_TRANSFERS = 2000  # KV transfers drawn (evenly spaced past that)
ROUTER_ROW_PX = 22  # per engine the router can pick
ENGINE_ROW_PX = 92
TRANSFER_ROW_PX = 22  # per prefill engine's link
ROW_GAP_PX = 14
MANY_ENGINES = 16  # past this many, rows get thinner (down to 48 px an engine, 8 px a router or link row)
MARGIN = {"l": 84, "r": 56, "t": 36, "b": 50}
GANTT_NOTE = ("this cluster run recorded no per-step events, so no step-by-step timeline; the cluster view draws "
              "each request from its arrival, first token and finish, coloured by engine")


def engine_color(e: int) -> str:
    return ENGINE_COLORS[e % len(ENGINE_COLORS)]


def cluster_view(res, kv_cell: int = 1) -> RunView:
    """A RunView of a run of several engines (recorded with record_events and KV frames, as the web runs them):
    the single-engine parts (metrics, latency CDFs, the Gantt), every engine's KV data (`engine_kv`; `kv` the
    busiest engine's) and `cluster` (cluster_data). A run without events has no Gantt (None, a note says why)."""
    kvs = engine_kv(res, kv_cell)
    view = build_view(res, np.zeros((0, 0), np.int32), np.zeros(0), kv_cell=kv_cell,
                      kv=kvs[busiest_engine([res.metrics])] if kvs else None)
    if not _events_recorded(res):
        view.gantt, view.gantt_note, view.gantt_index = None, GANTT_NOTE, None
    view.engine_kv = kvs
    view.cluster = cluster_data(res)
    return view


def _events_recorded(res) -> bool:
    """Whether the run logged its events: every request that ran was prefilled at least once, which the event
    log records when it is on."""
    return len(res.events) > 0 or not bool((res.status == RequestState.FINISHED).any())


def busiest_engine(metrics: list[dict]) -> int:
    """The engine that served the most tokens (metrics["replicas"]' served_tokens), summed over the runs whose
    metrics are given (a comparison's schedulers, one deployment); the first on a tie."""
    rows = [m.get("replicas") or [] for m in metrics]
    n = max((len(r) for r in rows), default=0)
    served = [sum(int(r[e].get("served_tokens") or 0) for r in rows if e < len(r)) for e in range(n)]
    return int(np.argmax(served)) if served else 0


def engine_kv(res, kv_cell: int = 1) -> list[dict]:
    """Each engine's KV data as runview.kv_data makes it for one engine (its frames' cells, the first-token
    times of the requests in them, block states, swapped-out requests), plus its name (`engine`) and `pool`. Every
    engine's cells are the same size (the largest any needed), so that switching engines keeps cells comparable.
    Frames: frame_count of the whole cluster's blocks, each engine's share (what the run recorded, see
    run_budget.recorded_frames_for)."""
    engines = engine_logs(res)
    if not engines:
        return []
    want = frame_count(sum(e.num_blocks for e in engines))
    budget = max(ENGINE_MIN_RUNS, min(RUN_BUDGET, CLUSTER_RUN_BUDGET // len(engines)))
    pools = [p for p in res.resolved.deployment for _ in range(p.engines)]
    events = event_columns(res)
    recorded = [_recorded(e) for e in engines]
    picked = [pick_pool_frames(r.frames, r.times, res.end_s, want) for r in recorded]
    out = [_engine_kv(res, e, pool, events, r, pick, kv_cell, budget)
           for e, pool, r, pick in zip(engines, pools, recorded, picked, strict=True)]
    k = max(kv["k"] for kv in out)
    return [kv if kv["k"] == k else _engine_kv(res, e, pool, events, r, pick, k, budget)
            for kv, e, pool, r, pick in zip(out, engines, pools, recorded, picked, strict=True)]


class _Recorded(NamedTuple):
    """The KV snapshots an engine took: owners [frame, block], BlockStates [frame, block], instants."""

    frames: np.ndarray
    states: np.ndarray
    times: np.ndarray


def _recorded(e: EngineView) -> _Recorded:
    """The engine's snapshots, without the rows it never filled: an engine snapshots at its own steps' starts, and
    one that seldom steps (a prefill engine, an idle replica) leaves rows of the room the run made for them
    unwritten, at instant 0 after its last one."""
    if e.kv_frames is None or e.kv_frame_s is None or len(e.kv_frame_s) == 0:
        return _Recorded(np.zeros((0, e.num_blocks), np.int32), np.zeros((0, e.num_blocks), np.int8), np.zeros(0))
    times = np.asarray(e.kv_frame_s, np.float64)
    later = np.flatnonzero(times > 0)
    n = int(later[-1]) + 1 if len(later) else 1  # instants only grow: the rows after the last positive are unwritten
    return _Recorded(np.asarray(e.kv_frames)[:n], np.asarray(e.kv_frame_state)[:n], times[:n])


def _engine_kv(res, e: EngineView, pool, events: dict, rec: _Recorded, pick: tuple[np.ndarray, np.ndarray],
               kv_cell: int, budget: int) -> dict:
    """Engine e's KV data (runview.kv_data) from the frames picked for the page (`pick`: [frame, block] owners and
    their instants) out of those it recorded (`rec`)."""
    frames, frame_s = pick
    kv = kv_data(frames, frame_s, kv_cell, budget)
    kept = frame_rows(rec.times, kv["frame_s"]) if kv["frame_s"] else np.zeros(0, np.int64)
    kv.update(first_token_s=first_token_times(res, frames) if frames.size else {},
              states=pool_state_runs(rec.states, rec.times, kv, owners=rec.frames),
              swap=_engine_swap(res, e, pool, events, rec, kv), engine=e.name, pool=e.pool)
    if len(kept) and e.num_blocks:
        # In use: every block a request holds, running or not (a prefill engine holds a request's KV after its
        # prefill until the decode engine has pulled it; no running request owns those blocks then).
        in_use = ((rec.states[kept] == BlockState.USED) | (rec.states[kept] == BlockState.SHARED)).sum(axis=1)
        kv["usage"] = np.round(in_use / e.num_blocks, 4).tolist()
    return kv


def _engine_swap(res, e: EngineView, pool, events: dict, rec: _Recorded, kv: dict) -> dict | None:
    """What of the engine's KV was swapped out to host memory at each of its frames (kvstates.pool_swap_frames),
    from the cluster's event log cut to the engine's own steps."""
    start = e.steps["start_s"]
    if e.step_stride != 1 or not kv["frame_s"]:  # the events name steps: their start times need every step
        return None
    mine = (events["step"] >= e.first_step) & (events["step"] < e.first_step + len(start))
    ev = {name: col[mine] for name, col in events.items()}
    ev["step"] = ev["step"] - e.first_step
    return pool_swap_frames(ev, start, rec.times, kv, int(pool.setup.block_size), int(pool.swap_blocks))


def cluster_data(res, rows: int = GANTT_ROWS) -> dict:
    """What the cluster cards draw, from a Result with engine_logs (several engines)."""
    logs = engine_logs(res)
    shares = res.metrics.get("replicas") or [{} for _ in logs]
    engines = []
    points = max(100, min(ENGINE_POINTS, ENGINE_POINTS_TOTAL // max(1, len(logs))))
    for e, (log, share) in enumerate(zip(logs, shares, strict=True)):
        engines.append(dict(_engine_rows(log.steps, log.num_blocks, points, log.step_stride), name=log.name, pool=log.pool,
                            num_blocks=int(log.num_blocks), step_stride=int(log.step_stride),
                            color=engine_color(e), share=share))
    pd = res.handover is not None
    reqs = res.requests
    if pd:
        h = res.handover
        routed, arrived, targets = h.to_prefill, h.arrived, [e for e, log in enumerate(logs) if log.pool == "prefill"]
    else:
        routed, arrived, targets = res.replica_of, reqs.arrival_s, list(range(len(logs)))
    return {"engines": engines, "disaggregated": pd, "routes": _routes(routed, arrived, targets),
            "transfers": _transfers(res.handover, len(targets)) if pd else None,
            "requests": _request_bars(res, rows), "end_s": round(float(res.end_s), 4)}


def _engine_rows(steps: dict[str, np.ndarray], num_blocks: int, points: int = ENGINE_POINTS,
                 step_stride: int = 1) -> dict:
    """One engine's step log (sim_core.views columns by name) -> its queue (waiting, running) and KV use (% of its
    pool) over time, bucketed into at most `points` equal time buckets, each keeping its maximum (peaks survive
    downsampling). A row holds each value until the next point (a step line): where the engine sat idle between
    two steps, and after its last, a point at the step's end says it ran nothing (`idle_points`); a bucket that
    ends so keeps that point too, or the line would hold its maximum across the idle time."""
    t = steps["start_s"]
    cols = {"waiting": steps["waiting"], "running": steps["running"],
            "kv_pct": steps["kv_blocks"] * 100.0 / max(1, num_blocks)}
    idle = np.zeros(len(t), bool)
    # (a sampled log's steps are not consecutive: its gaps say nothing of idling)
    if step_stride == 1 and "duration_s" in steps:
        t, cols, idle = idle_points(t, steps["duration_s"], cols)
    bucketed = len(t) > points
    if bucketed:
        edges = np.linspace(t[0], t[-1], points + 1)
        bucket = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
        starts = np.flatnonzero(np.diff(bucket, prepend=-1))
        last = np.append(starts[1:], len(t)) - 1
        ends_idle = idle[last] & (last > starts)
        at, rows = np.flatnonzero(ends_idle) + 1, last[ends_idle]
        t = np.insert(t[starts], at, t[rows])
        cols = {k: np.insert(np.maximum.reduceat(v, starts), at, v[rows]) for k, v in cols.items()}
    return {"t": _r(t, 4), "waiting": _r(cols["waiting"], 0), "running": _r(cols["running"], 0),
            "kv_pct": _r(cols["kv_pct"], 2), "steps_logged": int(len(steps["start_s"])), "bucketed": bucketed}


def idle_points(start: np.ndarray, duration: np.ndarray, cols: dict[str, np.ndarray]
                ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Step-log rows (their starts, durations, columns) with a point added at the end of every step the engine
    did not follow at once with another (and of its last): none running there. A step's `running` counts the
    requests in its batch, finishing ones included, so a line held from an engine's last step to its next drew an
    idle engine as running its last request. Waiting and KV use keep their step's values (no step measured them
    in between). Also returned: which rows are the added points."""
    t = np.asarray(start, np.float64)
    if len(t) == 0:
        return t, cols, np.zeros(0, bool)
    end = t + np.asarray(duration, np.float64)
    idle = np.append(t[1:] > end[:-1] + 1e-9, True)
    at = np.flatnonzero(idle) + 1  # each idle point goes right after its step
    added = at + np.arange(len(at))  # where they land
    out = {k: np.insert(np.asarray(v, np.float64), at, np.asarray(v, np.float64)[idle]) for k, v in cols.items()}
    out["running"][added] = 0
    mask = np.zeros(len(t) + len(at), bool)
    mask[added] = True
    return np.insert(t, at, end[idle]), out, mask


def _routes(routed: np.ndarray, arrived: np.ndarray, targets: list[int]) -> dict:
    """The router's choices: per engine it can pick, how many requests it sent there, and a sample of arrivals
    (time, engine) for the router row."""
    routed = np.asarray(routed, np.int64)
    sent = routed >= 0
    order = np.flatnonzero(sent)[np.argsort(np.asarray(arrived)[sent], kind="stable")]
    pick = order[sample_ids(len(order), MAX_ROUTE_POINTS)]
    return {"targets": targets, "counts": [int((routed == k).sum()) for k in range(len(targets))],
            "t": _r(np.asarray(arrived)[pick], 4), "engine": routed[pick].tolist(), "shown": int(len(pick)),
            "total": int(len(order))}


def _transfers(h, n_prefill: int) -> dict:
    """Disaggregated serving: each KV transfer (a sample past MAX_TRANSFERS, evenly spaced by prefill end):
    its prefill engine, decode engine, prefill end, transfer start (after waiting for the link) and delivery."""
    done = np.flatnonzero(h.to_decode >= 0)
    done = done[np.argsort(h.prefill_end[done], kind="stable")]
    pick = done[sample_ids(len(done), MAX_TRANSFERS)]
    return {"prefill": h.to_prefill[pick].tolist(), "decode": h.to_decode[pick].tolist(),
            "ready": _r(h.prefill_end[pick], 5), "start": _r(h.transfer_start[pick], 5),
            "delivered": _r(h.delivered[pick], 5), "shown": int(len(pick)), "total": int(len(done)),
            "links": n_prefill}


def _request_bars(res, rows: int) -> dict:
    """A sample of requests (evenly spaced by arrival) with the times every run records: arrival, first scheduled,
    first token, finish, and the engine(s) that served it (disaggregated: the prefill engine, then the decode
    engine after the KV transfer)."""
    reqs = res.requests
    ids = sample_ids(len(reqs), rows)
    out = {"id": ids.tolist(), "arrival": _r(reqs.arrival_s[ids], 5),
           "scheduled": _r(res.first_scheduled_s[ids], 5), "first_token": _r(res.first_token_s[ids], 5),
           "finish": _r(res.finish_s[ids], 5), "rejected": (res.status[ids] == RequestState.REJECTED).tolist(),
           "finished": (res.status[ids] == RequestState.FINISHED).tolist(), "prompt": reqs.prompt_tokens[ids].tolist(),
           "output": reqs.output_tokens[ids].tolist(), "total": int(len(reqs))}
    if res.handover is not None:
        h = res.handover
        n_prefill = int(sum(log.pool == "prefill" for log in res.engine_logs))
        out["engine"] = h.to_prefill[ids].tolist()
        out["decode_engine"] = [int(d) + n_prefill if d >= 0 else -1 for d in h.to_decode[ids]]
        out["delivered"] = _r(h.delivered[ids], 5)
    else:
        out["engine"] = res.replica_of[ids].tolist()
    return out


def _r(a, digits: int) -> list:
    """Rounded floats as a list, NaN (never happened) as None."""
    v = np.round(np.asarray(a, np.float64), digits)
    return [None if not np.isfinite(x) else (int(x) if digits == 0 else float(x)) for x in v]


# ----- figures -----
