"""The Gantt at scale, its data: a page draws at most runview.GANTT_ROWS requests of a long run (a sample, evenly
spaced by arrival). `GanttIndex` keeps every request's segments compactly beside the run's view (built once, when
the view is), and `window` cuts the rows for [t0, t1] out of it, refusing more than WINDOW_ROWS with a message
saying how many there are. gantt_window.py serves it; static/js/gantt_window.js asks and redraws."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim_core import timeline
from sim_core.views import ATTRIBUTION_PARTS, request_engines
from sim_core.views import TRANSPORT_PART as AT_TRANSPORT

WINDOW_ROWS = 1000  # requests one zoomed Gantt draws at most (the page's sample starts above this many)
INDEX_SEGMENTS = 400_000  # segments kept per run (~8 MB): a longer run's Gantt stays a sample


@dataclass(frozen=True)
class GanttIndex:
    """Every request's Gantt segments and row facts, as arrays (the sample the page shows is a subset)."""

    seg_request: np.ndarray  # int32, sorted by request
    seg_kind: np.ndarray  # int8, timeline.SEGMENT_KINDS
    seg_start: np.ndarray
    seg_end: np.ndarray
    first_seg: np.ndarray  # request -> its first segment (seg_request is sorted); n + 1 entries
    alive_from: np.ndarray  # request -> its first segment's start
    alive_to: np.ndarray  # request -> its last segment's end
    rows: dict  # row_arrays: every request's row facts

    @property
    def requests(self) -> int:
        return len(self.alive_from)


def row_arrays(res) -> dict[str, np.ndarray]:
    """What a Gantt row says about each request (its hover), as arrays over all requests; a run of several
    engines adds `engine`, the engine(s) that served it by name (sim_core.views.request_engines)."""
    reqs = res.requests
    attr = getattr(res, "attribution", None)
    split = np.zeros((len(reqs), len(ATTRIBUTION_PARTS))) if attr is None else np.asarray(attr, np.float64) * 1e3
    split[:, AT_TRANSPORT] += float(getattr(res.scenario, "transport_overhead_ms", 0.0))  # as metrics count it
    out = {"id": np.arange(len(reqs)), "prompt": reqs.prompt_tokens, "output": reqs.output_tokens,
           "ttft_ms": np.round((res.first_token_s - reqs.arrival_s) * 1e3, 1),
           "itl_max_ms": np.round(res.max_itl_s * 1e3, 1), "preemptions": res.preemptions,
           "rejected": res.rejected, "attribution_ms": np.round(split, 1)}
    engines = request_engines(res)
    if engines is not None:
        out["engine"] = engines
    return out


def rows_for(arrays: dict[str, np.ndarray], ids: np.ndarray) -> dict[str, list]:
    """row_arrays for the requests `ids`, as the JSON lists the Gantt figure reads (no TTFT: None)."""
    out = {key: a[ids].tolist() for key, a in arrays.items()}
    out["ttft_ms"] = [v if np.isfinite(v) else None for v in out["ttft_ms"]]
    return out


def gantt_index(res) -> GanttIndex | None:
    """The index of a run whose timeline exists (None past INDEX_SEGMENTS)."""
    segs = timeline.request_segments(res)
    if len(segs) > INDEX_SEGMENTS:
        return None
    a = np.array(segs, np.float64).reshape(-1, 4)
    rid = a[:, 0].astype(np.int32)
    n = len(res.requests)
    first = np.searchsorted(rid, np.arange(n + 1))
    start, end = a[:, 2], a[:, 3]
    alive_from = np.full(n, np.inf)
    alive_to = np.full(n, -np.inf)
    np.minimum.at(alive_from, rid, start)
    np.maximum.at(alive_to, rid, end)
    return GanttIndex(rid, a[:, 1].astype(np.int8), start, end, first, alive_from, alive_to, row_arrays(res))


class TooMany(ValueError):
    """More requests in the window than a Gantt draws."""


def window(index: GanttIndex, t0: float, t1: float, limit: int = WINDOW_ROWS,
           requests: tuple[float, float] | None = None) -> dict:
    """runview's gantt dict for every request alive at some moment of [t0, t1] (arrival to its end); with
    `requests` (lo, hi), only those whose index lies in it (a box zoom over some rows)."""
    alive = (index.alive_from <= t1) & (index.alive_to >= t0)
    if requests is not None:
        ids = np.arange(index.requests)
        alive &= (ids >= requests[0]) & (ids <= requests[1])
    ids = np.flatnonzero(alive)
    if len(ids) > limit:
        which = f" among requests #{max(0, math.ceil(requests[0]))}-#{math.floor(requests[1])}" if requests else ""
        raise TooMany(f"{len(ids):,} requests are in flight between {t0:.2f} s and {t1:.2f} s{which}; zoom in (on "
                      f"time, or drag a box over fewer rows) to at most {limit:,} to see each one; the chart shows "
                      "an even sample meanwhile")
    row_of = np.full(index.requests, -1, np.int64)
    row_of[ids] = np.arange(len(ids))
    take = np.concatenate([np.arange(index.first_seg[r], index.first_seg[r + 1]) for r in ids]) if len(ids) else \
        np.zeros(0, np.int64)
    by_kind: dict[str, dict[str, list]] = {}
    for k, name in enumerate(timeline.SEGMENT_KINDS):
        mine = take[index.seg_kind[take] == k]
        if len(mine):
            by_kind[name] = {"row": row_of[index.seg_request[mine]].tolist(),
                             "start": np.round(index.seg_start[mine], 5).tolist(),
                             "end": np.round(index.seg_end[mine], 5).tolist()}
    return {"rows": rows_for(index.rows, ids), "segments": by_kind, "shown": len(ids), "total": index.requests}
