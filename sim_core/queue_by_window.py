"""The queue of a run per window of time, on the windows of cluster_over_time (SLO attainment and replicas per
window): the mean number of requests waiting for their first schedule over each window. Any run has one, with or
without an autoscaler, so a static deployment's queue reads beside an autoscaled one's (the dashboard's cluster
over time). Nothing here changes a run or its metrics.
"""

from __future__ import annotations

import numpy as np

from .cluster_over_time import WINDOW_S
from .kernel.state import FINISHED


def waiting_by_window(result, end_s: float, window_s: float = WINDOW_S) -> dict:
    """Per window of `window_s` over [0, end_s] (the windows of cluster_over_time.window_starts): the mean number
    of requests waiting for their first schedule, from arrival to first scheduled. A request that never ran
    (rejected or shed) counts as waiting nowhere: its arrival without a schedule shows in the attainment instead."""
    starts = np.arange(max(1, int(np.ceil(end_s / window_s)))) * window_s  # cluster_over_time.window_starts'
    done = result.status == FINISHED
    begin = np.asarray(result.requests.arrival_s, np.float64)[done]
    until = np.maximum(np.asarray(result.first_scheduled_s, np.float64)[done], begin)
    edges = np.append(starts, starts[-1] + window_s)
    # The queue's integral from 0 to t is sum_i clip(t - begin_i, 0, until_i - begin_i): the time every request
    # spent waiting before t, read at the window edges with sorted arrivals and starts (O(n log n), no n x windows).
    integral = _time_before(np.sort(begin), edges) - _time_before(np.sort(until), edges)
    lengths = np.maximum(np.minimum(edges[1:], max(end_s, 1e-9)) - edges[:-1], 1e-9)  # the last window: cut short
    waiting = np.maximum(np.diff(integral), 0.0) / lengths
    return {"window_s": float(window_s), "start_s": starts.tolist(), "waiting": waiting.tolist()}


def _time_before(times: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """sum over `times` (sorted) of max(0, edge - t), at each edge."""
    k = np.searchsorted(times, edges, side="right")
    before = np.concatenate([[0.0], np.cumsum(times)])
    return k * edges - before[k]
