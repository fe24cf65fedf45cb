"""Replica load: how the work of a run of several engines (replicas behind a router, or prefill and decode pools)
spread over its engines: per engine, the requests it served and the time it spent stepping, a bar per scheduler.
An even spread has even bars within a pool; a router that piles work on one engine shows at a glance. It reads the
run's engines (sim_core.views.engine_logs: each one's name, pool and the requests it served) when the run is
simulated; a single engine has nothing to spread."""

from __future__ import annotations

from sim_core.views import RequestState, engine_logs

from ..charts import _axis, _columns, _empty_note, _layout, color
from . import Figure, Results

NAME = "replica-load"
NEEDS_ENGINES = ("Replica load needs several engines: set replicas above 1, or prefill and decode pools "
                 "(prefill_replicas, decode_replicas).")


def engine_load(result) -> list[dict] | None:
    """Per engine of the run: its name, pool, the requests it served (completed: a pool's engine did its part of
    them) and its busy time. None for a single engine. The busy time is the engine's own total of its steps'
    durations (its share of the run's metrics: busy fraction x makespan), exact, where its step log, once long,
    keeps only every step_stride-th step and would give an estimate."""
    engines = engine_logs(result)
    if not engines:
        return None
    finished = result.status == RequestState.FINISHED
    makespan = result.metrics["duration_s"]
    return [{"name": e.name, "pool": e.pool, "served": int((e.served & finished).sum()),
             "busy_s": share["gpu_busy_fraction"] * makespan}
            for e, share in zip(engines, result.metrics["replicas"], strict=True)]


def replica_load_figure(results: Results) -> dict:
    runs = [(v.scheduler, v.kept.get(NAME)) for v in results.views]
    runs = [(name, load) for name, load in runs if load]
    layout = _layout(320, barmode="group", hovermode="closest", margin={"l": 64, "r": 24, "t": 40, "b": 64})
    left, right = _columns(2, 0.1)
    layout["xaxis"] = _axis("engine", domain=left, anchor="y", type="category")
    layout["yaxis"] = _axis("requests served", anchor="x", rangemode="tozero")
    layout["xaxis2"] = _axis("engine", domain=right, anchor="y2", type="category")
    layout["yaxis2"] = _axis("busy time (s)", anchor="x2", rangemode="tozero")
    if not runs:
        layout["annotations"] = [_empty_note(NEEDS_ENGINES)]
        return {"data": [], "layout": layout}
    data = []
    for name, load in runs:
        engines = [e["name"] for e in load]
        served = [e["served"] for e in load]
        busy = [round(e["busy_s"], 4) for e in load]
        total = max(1, sum(served))
        data.append({"type": "bar", "x": engines, "y": served, "name": name, "legendgroup": name,
                     "marker": {"color": color(name)}, "customdata": [s / total for s in served],
                     "hovertemplate": f"{name} · %{{x}}: %{{y:,}} requests (%{{customdata:.0%}})<extra></extra>"})
        data.append({"type": "bar", "x": engines, "y": busy, "name": name, "legendgroup": name, "showlegend": False,
                     "marker": {"color": color(name)}, "xaxis": "x2", "yaxis": "y2",
                     "hovertemplate": f"{name} · %{{x}}: busy %{{y:,.3f}} s<extra></extra>"})
    return {"data": data, "layout": layout}


EXPLAIN = ("Per engine: the requests it served (completed; a pool's engine did its part of them) and the time it "
           "spent stepping, a bar per scheduler. Even bars within a pool: the router spread the work evenly.")


FIGURE = Figure(name=NAME, title="Replica load", explain=EXPLAIN, order=15, build=replica_load_figure,
                keep=engine_load, shown=lambda r: r.cluster)
