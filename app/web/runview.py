"""A run's `Result` -> the compact data the dashboard draws (a `RunView`): latency CDFs as quantile points, the
step log bucketed in time, KV-pool frames aggregated into at most MAX_CELLS cells and run-length encoded, and
Gantt segments for a sample of requests. A Result holds tens of MB (ITL histograms, frames); a RunView a few
hundred KB, so views, not results, are what the server caches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim_core import timeline
from sim_core.tensor_parallel import tp_report
from sim_core.validity import run_warnings, saturation_warning

from .ganttindex import GanttIndex, gantt_index, row_arrays, rows_for
from .kvgrid import cell_codes
from .kvstates import run_lengths, state_runs, swap_frames, tier_frames

MAX_CELLS = 4096  # KV grid cells (blocks are aggregated when the pool is larger)
MIN_CELLS = 256
MAX_FRAMES = 120  # KV animation frames
MIN_FRAMES = 30
RUN_BUDGET = 100_000  # numbers in one scheduler's run-length coded frames (~0.5 MB of JSON)
FRAME_BUDGET = 16_000_000  # frames x blocks the engine may record for one run (int32 each)
CDF_POINTS = 400
STEP_POINTS = 1000  # time buckets of the step timeline
GANTT_ROWS = 200
GANTT_MAX_SEGMENTS = 6000


def frame_count(num_blocks: int) -> int:
    """How many KV frames to show: MAX_FRAMES, fewer for pools so large that frames would not fit."""
    return int(max(8, min(MAX_FRAMES, FRAME_BUDGET // max(1, num_blocks))))


def recorded_frames(num_blocks: int) -> int:
    """How many evenly spaced KV frames to ask the engine for: it keeps between this many and twice as many,
    spread over the whole run however long it turns out to be (one simulation per view)."""
    return int(max(8, min(frame_count(num_blocks), FRAME_BUDGET // (2 * max(1, num_blocks)))))


def pick_frames(res) -> tuple[np.ndarray, np.ndarray]:
    """frame_count() of the recorded frames, the nearest to evenly spaced instants over [0, end]."""
    return pick_pool_frames(res.kv_frames, res.kv_frame_s, res.end_s, frame_count(res.kv_frames.shape[1]))


def pick_pool_frames(frames: np.ndarray, frame_s, end_s: float, want: int) -> tuple[np.ndarray, np.ndarray]:
    """`want` of one pool's recorded frames [frame, block] (at the instants `frame_s`), the nearest to evenly
    spaced instants over [0, end_s]."""
    times = np.asarray(frame_s)
    if len(times) == 0:
        return frames, times
    pick = np.unique(np.clip(np.searchsorted(times, np.linspace(0.0, end_s, want)), 0, len(times) - 1))
    return frames[pick], times[pick]


@dataclass
class RunView:
    scheduler: str
    metrics: dict
    setup: dict  # resolved deployment facts shown beside the metrics
    end_s: float  # simulated time of the last step
    cdf: dict  # name -> {"x": ms, "y": cumulative fraction}
    steps: dict  # column -> list, plus "bucketed": steps per point
    kv: dict
    gantt: dict | None
    gantt_note: str = ""
    cluster: dict | None = None  # several engines: clusterview.cluster_data (None for one engine)
    requests: int = 0
    warnings: tuple[str, ...] = ()  # sim_core.validity: outside the validation set, saturated
    saturation: str = ""  # the saturation warning among `warnings` ("" if none): the page shows it on the run's cards
    gantt_index: GanttIndex | None = None  # every request's timeline when the Gantt shows a sample (zooming in)
    # Several engines: each one's KV data (as `kv`, plus its name, `engine`, and pool), in engine order; `kv` is
    # the busiest's (clusterview.engine_kv).
    engine_kv: list[dict] | None = None
    kept: dict = field(default_factory=dict)  # figure name -> what that figure kept of the run (figures.keep)


def build_view(res, frames: np.ndarray, frame_s: np.ndarray, *, gantt_rows: int = GANTT_ROWS,
               kv_cell: int = 1, kv: dict | None = None) -> RunView:
    """`res`: a run with record_events=True; `frames`, `frame_s`: its KV pool [frame, block] and their instants;
    `kv_cell`: the fewest blocks per KV grid cell (a comparison draws every pool with one cell size). `kv`: the
    KV data already made (a cluster's: one engine's pool, clusterview.engine_kv) in place of the frames'."""
    r = res.resolved
    transport_s = float(getattr(res.scenario, "transport_overhead_ms", 0.0)) / 1e3
    setup = {
        "model": r.setup.model.key, "gpu": r.setup.gpu.name, "hardware": r.setup.gpu.key,
        "quantization": r.setup.quantization, "tp": r.setup.tp, "num_blocks": r.num_blocks,
        "block_size": r.setup.block_size, "token_budget": r.token_budget, "max_model_len": r.max_model_len,
        "rate": r.rate, "slo_ttft_ms": r.slo_ttft_ms, "slo_tpot_ms": r.slo_tpot_ms,
        **tp_report(r.setup.gpu, r.setup.tp, r.setup.scale_out_link),
    }
    gantt, note = gantt_data(res, gantt_rows)
    if kv is None:
        kv = kv_data(frames, frame_s, kv_cell)
        kv.update(first_token_s=first_token_times(res, frames), states=state_runs(res, kv),
                  swap=swap_frames(res, kv))
        if (tiers := tier_frames(res, kv)) is not None:  # the lower KV tiers' use: only with offload on
            kv["tiers"] = tiers
    return RunView(
        scheduler=res.scenario.scheduler, metrics=res.metrics, setup=setup,
        end_s=res.end_s, cdf=cdf_data(res, transport_s), steps=step_data(res),
        kv=kv, gantt=gantt,
        gantt_note=note, requests=len(res.requests), warnings=tuple(run_warnings(res)),
        saturation=saturation_warning(res) or "",
        gantt_index=gantt_index(res) if gantt is not None and gantt["shown"] < len(res.requests) else None,
    )


# ----- latency CDFs -----
def quantile_curve(values: np.ndarray, points: int = CDF_POINTS) -> dict:
    v = np.sort(np.asarray(values, np.float64))
    n = len(v)
    if n == 0:
        return {"x": [], "y": []}
    idx = np.arange(n) if n <= points else np.unique(np.rint(np.linspace(0, n - 1, points)).astype(np.int64))
    return {"x": _r(v[idx], 4), "y": _r((idx + 1) / n, 5)}


def histogram_curve(fine: np.ndarray, coarse: np.ndarray, points: int = CDF_POINTS) -> dict:
    """CDF of values binned in 1 us (fine) and 1 ms (coarse) bins, in ms, sampled at evenly spaced fractions."""
    nz_f, nz_c = np.flatnonzero(fine), np.flatnonzero(coarse)
    x = np.concatenate([(nz_f + 0.5) * 1e-3, (nz_c + 0.5) * 1.0])
    counts = np.concatenate([fine[nz_f], coarse[nz_c]]).astype(np.float64)
    if counts.sum() == 0:
        return {"x": [], "y": []}
    order = np.argsort(x, kind="stable")
    x, cum = x[order], np.cumsum(counts[order])
    cum /= cum[-1]
    idx = np.unique(np.concatenate([[0], np.searchsorted(cum, np.linspace(0, 1, points)[1:] - 1e-12),
                                    [len(x) - 1]]))
    idx = idx[idx < len(x)]
    return {"x": _r(x[idx], 4), "y": _r(cum[idx], 5)}


def cdf_data(res, transport_s: float) -> dict:
    reqs = res.requests
    done = res.finished
    ttft = (res.first_token_s - reqs.arrival_s + transport_s)[done] * 1e3
    e2el = (res.finish_s - reqs.arrival_s + transport_s)[done] * 1e3
    return {"ttft": quantile_curve(ttft), "e2el": quantile_curve(e2el),
            "itl": histogram_curve(res.itl_fine, res.itl_coarse)}


# ----- step timeline -----
STEP_COLUMNS = {  # name -> (step-log column, scale)
    "step_ms": ("duration_s", 1e3),
    "prefill_tokens": ("prefill_tokens", 1.0),
    "decode_seqs": ("decode_seqs", 1.0),
    "waiting": ("waiting", 1.0),
    "kv_blocks": ("kv_blocks", 1.0),
}


def step_data(res, points: int = STEP_POINTS) -> dict:
    """The step log, bucketed into at most `points` equal time buckets (each bucket keeps its maximum, so
    stalls and peaks survive downsampling)."""
    t = res.step_column("start_s")
    cols = {name: res.step_column(c) * scale for name, (c, scale) in STEP_COLUMNS.items()}
    per_point = 1.0
    if len(t) > points * 1.5:
        edges = np.linspace(t[0], t[-1], points + 1)
        bucket = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, points - 1)
        starts = np.flatnonzero(np.diff(bucket, prepend=-1))
        per_point = len(t) / len(starts)
        t = t[starts]
        cols = {name: np.maximum.reduceat(v, starts) for name, v in cols.items()}
    out = {"t": _r(t, 4), "steps_per_point": per_point * res.step_stride}
    out.update({name: _r(v, 3) for name, v in cols.items()})
    return out


# ----- KV pool frames -----
def cell_blocks(num_blocks: int) -> int:
    """Blocks per KV grid cell for a pool of `num_blocks`: one, or as many as keep the grid to MAX_CELLS cells."""
    return max(1, math.ceil(num_blocks / MAX_CELLS))


def kv_data(frames: np.ndarray, frame_s: np.ndarray, min_cell: int = 1, budget: int = RUN_BUDGET) -> dict:
    """Frames [frame, block] (owner or -1) -> per frame the run-length code of its cells (kvgrid.cell_codes):
    [code, length, code, length, ...]. A cell is at least `min_cell` blocks. A fragmented pool (every cell
    different from its neighbour) codes to long runs; past `budget` numbers the cells grow 4x, then frames are
    dropped, to bound the page's size."""
    n_frames, n_blocks = frames.shape if frames.ndim == 2 else (0, 0)
    k = max(min_cell, cell_blocks(n_blocks))
    runs: list[list[int]] = []
    if n_frames and n_blocks:
        runs = run_lengths(cell_codes(frames, k))
        while sum(map(len, runs)) > budget and math.ceil(n_blocks / k) >= 4 * MIN_CELLS:
            k *= 4
            runs = run_lengths(cell_codes(frames, k))
        size = sum(map(len, runs))
        if size > budget:
            keep = sample_ids(n_frames, max(MIN_FRAMES, int(n_frames * budget / size)))
            frames, frame_s, runs = frames[keep], np.asarray(frame_s)[keep], [runs[i] for i in keep]
    n_cells = math.ceil(n_blocks / k) if n_blocks else 0
    cols = max(1, math.ceil(math.sqrt(n_cells)))
    usage = _r((frames >= 0).sum(axis=1) / n_blocks, 4) if n_frames and n_blocks else []
    return {"blocks": int(n_blocks), "k": k, "cells": n_cells, "rows": max(1, math.ceil(n_cells / cols)),
            "cols": cols, "frame_s": _r(np.asarray(frame_s, np.float64), 4), "runs": runs, "usage": usage}


def first_token_times(res, frames: np.ndarray) -> dict[str, float | None]:
    """For each request holding blocks in some frame (by id), when its first token came out (ms precision; None
    if never): the KV view colours a request's blocks as prefilling before it and decoding after."""
    held = np.zeros(len(res.first_token_s), bool)  # a mark per request, not np.unique's sort of every cell
    held[frames[frames >= 0]] = True
    owners = np.flatnonzero(held)
    t = np.round(np.asarray(res.first_token_s, np.float64)[owners], 3)
    return {str(o): (x if math.isfinite(x) else None) for o, x in zip(owners.tolist(), t.tolist(), strict=True)}


# ----- per-request Gantt -----
def sample_ids(n: int, rows: int) -> np.ndarray:
    if n <= rows:
        return np.arange(n)
    return np.unique(np.rint(np.linspace(0, n - 1, rows)).astype(np.int64))


def gantt_data(res, rows: int) -> tuple[dict | None, str]:
    reqs = res.requests
    n = len(reqs)
    ids = sample_ids(n, rows)
    try:
        segs = timeline.request_segments(res, ids)
        while len(segs) > GANTT_MAX_SEGMENTS and len(ids) > 10:
            ids = ids[::2]
            keep = set(ids.tolist())
            segs = [s for s in segs if s[0] in keep]
    except ValueError as e:  # a sampled step log (a very long run) has no per-step timeline
        return None, str(e)
    row_of = {int(r): k for k, r in enumerate(ids)}
    info = rows_for(row_arrays(res), ids)
    by_kind: dict[str, dict[str, list]] = {}
    for rid, kind, start, end in segs:
        d = by_kind.setdefault(timeline.SEGMENT_KINDS[kind], {"row": [], "start": [], "end": []})
        d["row"].append(row_of[int(rid)])
        d["start"].append(round(start, 5))
        d["end"].append(round(end, 5))
    if n == 0:
        note = "no request arrived"
    elif len(ids) == n:
        note = "the only request" if n == 1 else f"all {n} requests"
    else:
        note = f"{len(ids)} of {n} requests, evenly spaced by arrival"
    return {"rows": info, "segments": by_kind, "shown": len(ids), "total": n}, note


def _r(a: np.ndarray, digits: int) -> list:
    return np.round(np.asarray(a, np.float64), digits).tolist()
