"""Offered load over time: the requests arriving per window of the run (what the workload offers), the rate
schedule they follow when the scenario has one, and each scheduler's completions per window (what it served).
Where the load changes over time (a rate schedule, a replayed trace) this is how the run's phases read: a burst
that outruns the engine shows as arrivals above completions, and the backlog as completions lagging after it."""

from __future__ import annotations

import numpy as np

from sim_core.rate_schedule import parse as parse_schedule
from sim_core.views import RequestState

from ..charts import SERIES, _axis, _layout, color
from . import Figure, Results

NAME = "offered-load"
WINDOWS = 60  # windows over the run's span: fine enough for its phases, few enough to read each bar's count
OFFERED = SERIES["offered"]


def per_window(result) -> dict:
    """Arrivals and completions of the run counted per window of its span (kept with the run's view)."""
    end = float(max(result.metrics["duration_s"], np.max(result.requests.arrival_s, initial=0.0), 1e-9))
    edges = np.linspace(0.0, end, WINDOWS + 1)
    finished = result.status == RequestState.FINISHED
    arrived, _ = np.histogram(result.requests.arrival_s[np.isfinite(result.requests.arrival_s)], bins=edges)
    done, _ = np.histogram(result.finish_s[finished], bins=edges)
    return {"edges": edges.tolist(), "arrived": arrived.tolist(), "completed": done.tolist()}


def offered_load_figure(results: Results) -> dict | None:
    runs = [(v.scheduler, v.kept.get(NAME)) for v in results.views if v.kept.get(NAME)]
    if not runs:
        return None
    layout = _layout(300, hovermode="x unified", margin={"l": 64, "r": 24, "t": 40, "b": 52})
    layout["xaxis"] = _axis("time (s)", range=results.span)
    layout["yaxis"] = _axis("requests/s", rangemode="tozero")
    first = runs[0][1]
    edges = np.array(first["edges"])
    mids, width = (edges[1:] + edges[:-1]) / 2, float(edges[1] - edges[0])
    data = [{"type": "bar", "x": mids.tolist(), "y": (np.array(first["arrived"]) / width).round(4).tolist(),
             "width": width, "name": "arrivals (offered)", "marker": {"color": OFFERED, "opacity": 0.25},
             "hovertemplate": "offered %{y:.2f} req/s<extra></extra>"}]
    schedule = results.req.scenario.rate_schedule
    if schedule is not None:
        grid = np.linspace(0.0, float(edges[-1]), 400)
        data.append({"type": "scatter", "mode": "lines", "x": grid.round(3).tolist(),
                     "y": np.round(parse_schedule(schedule).rate_at(grid), 4).tolist(),
                     "name": "rate schedule", "line": {"color": OFFERED, "dash": "dash", "width": 2},
                     "hovertemplate": "schedule %{y:.2f} req/s<extra></extra>"})
    for name, counts in runs:
        e = np.array(counts["edges"])
        mid, w = (e[1:] + e[:-1]) / 2, float(e[1] - e[0])
        data.append({"type": "scatter", "mode": "lines", "x": mid.round(3).tolist(),
                     "y": (np.array(counts["completed"]) / w).round(4).tolist(), "name": f"{name} completed",
                     "legendgroup": name,
                     "line": {"color": color(name), "width": 2, "shape": "hvh"},
                     "hovertemplate": f"{name} completed %{{y:.2f}} req/s<extra></extra>"})
    return {"data": data, "layout": layout}


def varies(results: Results) -> bool:
    """Shown where the load changes over time: a rate schedule or a replayed trace."""
    s = results.req.scenario
    return s.rate_schedule is not None or s.trace is not None or bool(results.req.upload)


EXPLAIN = ("Requests arriving per second of each window (bars; the dashed line is the rate schedule they follow) "
           "and each scheduler's completions per second. Completions below arrivals: a backlog is building.")

FIGURE = Figure(name=NAME, title="Offered load", explain=EXPLAIN, order=18, build=offered_load_figure,
                keep=per_window, shown=varies)
