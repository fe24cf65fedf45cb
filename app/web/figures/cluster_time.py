"""Cluster over time: what a deployment did minute by minute, on one time axis, top to bottom: the offered load
(requests arriving per second of each window, and the rate schedule they follow), the replicas of each run by
state (provisioning, serving, draining; stacked), the queue (requests waiting for their first schedule, mean over
each window) and the SLO attainment of each window's arrivals. Its windows are sim_core.cluster_over_time's (the
metrics replicas_over_time and slo_attainment_by_window of an autoscaled run); a run without an autoscaler gets
the same windows here, its replicas serving throughout, so a static deployment reads beside an autoscaled one.

On the results page (a scenario with an autoscaler) each run is a scheduler's; on /cluster-time
(app/web/cluster_time_page.py) each is an autoscaler policy's (or a static deployment's), side by side on the
shared rows: one replicas row per run, its queue and attainment as lines in its colour.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace

import numpy as np

from sim_core.cluster_over_time import WINDOW_S, attainment_by_window
from sim_core.policies.autoscalers import AUTOSCALERS
from sim_core.queue_by_window import waiting_by_window
from sim_core.rate_schedule import parse as parse_schedule
from sim_core.studies.capacity import DEFAULT_TARGET

from ..charts import ENGINES, SERIES, _axis, _layout, _ref, color
from . import Figure, Results

NAME = "cluster-time"
COMPARED = (*AUTOSCALERS, "static")  # what the card's link compares: every autoscaler and a static deployment
OFFERED = SERIES["offered"]
# A replica's states, bottom to top of its stacked bars (none is a scheduler's colour: charts.ENGINES and SERIES
# keep clear of them).
STATES = (("serving", "serving", ENGINES[5]), ("provisioning", "provisioning", ENGINES[1]),
          ("draining", "draining", ENGINES[3]))
# Each row's height in pixels on the page (an embed stretches the figure to its frame; the rows keep their shares).
LOAD_PX, REPLICAS_PX, QUEUE_PX, ATTAIN_PX, GAP_PX = 110, 74, 100, 110, 30
MARGIN = {"l": 72, "r": 24, "t": 44, "b": 52}
ROW_TITLE_CHARS = 11  # a longer row title takes two lines (row_title)
# The time axis' ticks: every k windows, k the first of these to give at most MAX_TICKS ticks (minutes, then
# hours, for 60 s windows).
TICK_WINDOWS = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
MAX_TICKS = 10


def over_time(result) -> dict:
    """What the figure keeps of a run (any run: with an autoscaler its own metrics', else the same windows with
    its engines serving throughout): per window of cluster_over_time.WINDOW_S, the requests that arrived, the
    share that met their SLO, the replicas by state and the mean queue; and the run's GPU-hours."""
    end = float(result.end_s)
    m = result.metrics
    att = m.get("slo_attainment_by_window") or attainment_by_window(result, end)
    n = len(att["start_s"])
    reps = m.get("replicas_over_time")
    if reps is None:
        engines = float(result.scenario.engines)
        reps = {"provisioning": [0.0] * n, "serving": [engines] * n, "draining": [0.0] * n}
    scaler = m.get("autoscaler") or {}
    return {
        "window_s": att["window_s"], "start_s": att["start_s"], "end_s": end, "requests": att["requests"],
        "attainment": att["attainment"], "waiting": waiting_by_window(result, end)["waiting"],
        **{state: reps[state] for state, _, _ in STATES},
        "gpu_hours": m["gpu_hours"] if "gpu_hours" in m else m["gpus"] * end / 3600.0,
        "provisioned": scaler.get("replicas_provisioned"),
    }


@dataclass(frozen=True)
class Run:
    """One run the figure draws: its label (a scheduler's or a policy's name), colour and kept data."""

    label: str
    colour: str
    data: dict
    group: str  # its legend group (a scheduler's name keeps the scheduler's colour its own)


def cluster_time_figure(runs: list[Run], span: list[float] | None, schedule: str | None) -> dict:
    """The rows on one time axis (module doc); `span`: the time axis' range, `schedule`: the scenario's rate
    schedule (drawn over the arrivals), or None."""
    panels = [("load", LOAD_PX)] + [("replicas", REPLICAS_PX)] * len(runs) + [("queue", QUEUE_PX),
                                                                              ("attainment", ATTAIN_PX)]
    plot_px = sum(px for _, px in panels) + GAP_PX * (len(panels) - 1)
    layout = _layout(plot_px + MARGIN["t"] + MARGIN["b"], margin=MARGIN, hovermode="x unified", barmode="stack",
                     bargap=0.05)
    data: list[dict] = []
    top = 1.0
    tallest = max((max(_total(r.data), default=0.0) for r in runs), default=0.0)
    window_s = runs[0].data["window_s"] if runs else WINDOW_S
    # A run in which nothing happened still gets an axis (one window long).
    end = max([r.data["end_s"] for r in runs] + [span[1] if span else 0.0]) or window_s
    ticks = _window_ticks(end, window_s)
    for k, (kind, px) in enumerate(panels):
        domain = [round(max(0.0, top - px / plot_px), 5), round(top, 5)]
        top = domain[0] - GAP_PX / plot_px
        last = k == len(panels) - 1
        layout[f"xaxis{k + 1 if k else ''}"] = _axis("simulated time (s)" if last else "", anchor=_ref("y", k),
                                                      showticklabels=last, **ticks,
                                                      **({"range": [0, end]} if k == 0 else {"matches": "x"}))
        y = f"yaxis{k + 1 if k else ''}"
        if kind == "load":
            layout[y] = _axis(row_title("offered (req/s)"), domain=domain, anchor=_ref("x", k), rangemode="tozero", nticks=4)
            data += _load_traces(runs[0].data, schedule, end) if runs else []
        elif kind == "replicas":
            run = runs[k - 1]
            # Every run's row on one scale (the most replicas any held), a little headroom over the tallest bar.
            layout[y] = _axis(row_title(run.label), domain=domain, anchor=_ref("x", k), range=[0, max(1.0, tallest) * 1.08],
                              nticks=4)
            layout[y]["title"]["font"]["color"] = run.colour
            data += _replica_traces(run, k, first=k == 1)
        elif kind == "queue":
            layout[y] = _axis(row_title("waiting (req)"), domain=domain, anchor=_ref("x", k), rangemode="tozero", nticks=4)
            data += [_line(r, k, r.data["waiting"], "%{y:,.1f} waiting", first=True) for r in runs]
        else:
            layout[y] = _axis(row_title("SLO met (%)"), domain=domain, anchor=_ref("x", k), range=[0, 104], nticks=5,
                              ticksuffix="%")
            data += [_line(r, k, [None if a is None else round(a * 100, 2) for a in r.data["attainment"]],
                           "%{y:.1f}% met the SLO", first=False) for r in runs]
            layout["shapes"] = [{"type": "line", "xref": f"{_ref('x', k)} domain", "x0": 0, "x1": 1,
                                 "yref": _ref("y", k), "y0": DEFAULT_TARGET * 100, "y1": DEFAULT_TARGET * 100,
                                 "line": {"color": SERIES["reference"], "dash": "dot", "width": 1}}]
    layout["legend"] = {**layout["legend"], "y": 1.0, "yanchor": "bottom", "traceorder": "normal"}
    return {"data": data, "layout": layout}


def row_title(text: str) -> str:
    """A row's title on two lines where one would be longer than the row is high (a 960x540 embed gives a row
    about 50 px: "offered (req/s)" ran into the next row's title): its unit under it, or its last words."""
    if " (" in text and text.endswith(")"):
        return text.replace(" (", "<br>(", 1)
    return text.replace(" ", "<br>", 1) if len(text) > ROW_TITLE_CHARS and " " in text else text


def _window_ticks(end: float, window_s: float) -> dict:
    """Ticks at window edges, every few windows (at most MAX_TICKS), the same on every row: plotly picks a
    row of bars' own ticks otherwise, and the rows' grid lines would not line up."""
    windows = max(1.0, end / window_s)
    every = next((k for k in TICK_WINDOWS if windows / k <= MAX_TICKS), TICK_WINDOWS[-1])
    return {"tickmode": "linear", "tick0": 0, "dtick": every * window_s}


def _total(d: dict) -> list[float]:
    return [sum(v) for v in zip(*(d[state] for state, _, _ in STATES), strict=True)]


def _mids(d: dict) -> list[float]:
    return [round(s + d["window_s"] / 2, 4) for s in d["start_s"]]


def _steps(d: dict, ys: list) -> tuple[list, list]:
    """A per-window series as a step line over the whole of each window: a point at each window's middle (where
    the hover reads it) and at the run's two ends, its steps halfway between (shape hvh: the window edges)."""
    if not ys:
        return [], []
    return [0.0, *_mids(d), round(d["start_s"][-1] + d["window_s"], 4)], [ys[0], *ys, ys[-1]]


def _load_traces(d: dict, schedule: str | None, end: float) -> list[dict]:
    rate = (np.asarray(d["requests"], float) / d["window_s"]).round(4).tolist()
    out = [{"type": "bar", "x": _mids(d), "y": rate, "width": d["window_s"], "name": "arrivals (offered)",
            "marker": {"color": OFFERED, "opacity": 0.25},
            "hovertemplate": "offered %{y:.2f} req/s<extra></extra>"}]
    if schedule is not None:
        grid = np.linspace(0.0, max(end, 1e-9), 400)
        out.append({"type": "scatter", "mode": "lines", "x": grid.round(3).tolist(),
                    "y": np.round(parse_schedule(schedule).rate_at(grid), 4).tolist(), "name": "rate schedule",
                    "line": {"color": OFFERED, "dash": "dash", "width": 2},
                    "hovertemplate": "schedule %{y:.2f} req/s<extra></extra>"})
    return out


def _replica_traces(run: Run, k: int, first: bool) -> list[dict]:
    d = run.data
    return [{"type": "bar", "x": _mids(d), "y": [round(v, 3) for v in d[state]], "width": d["window_s"],
             "name": label, "legendgroup": f"state-{state}", "showlegend": first,
             "marker": {"color": colour, "line": {"width": 0}}, "xaxis": _ref("x", k), "yaxis": _ref("y", k),
             "hovertemplate": f"{run.label}: %{{y:.2f}} {label}<extra></extra>"}
            for state, label, colour in STATES]


def _line(run: Run, k: int, ys: list, hover: str, *, first: bool) -> dict:
    x, y = _steps(run.data, ys)
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": run.label, "legendgroup": run.group,
            "showlegend": first, "line": {"color": run.colour, "width": 2, "shape": "hvh"}, "connectgaps": False,
            "xaxis": _ref("x", k), "yaxis": _ref("y", k), "hovertemplate": f"{run.label}: {hover}<extra></extra>"}


def summary_rows(runs: list[Run]) -> list[dict]:
    """Per run, what the card's table shows: GPU-hours, the share of its requests that met the SLO, its worst
    window, the most replicas held at once (mean over a window) and the replicas it provisioned."""
    out = []
    for r in runs:
        d = r.data
        rated = [a for a in d["attainment"] if a is not None]
        arrived = sum(d["requests"])
        met = sum(a * n for a, n in zip(d["attainment"], d["requests"], strict=True) if a is not None)
        out.append({"label": r.label, "colour": r.colour, "gpu_hours": d["gpu_hours"],
                    "attainment": met / arrived if arrived else None, "worst": min(rated) if rated else None,
                    "most": max(_total(d), default=0.0), "provisioned": d["provisioned"]})
    return out


def by_scheduler(results: Results) -> dict | None:
    """The results page's runs, one a scheduler; the link to /cluster-time compares autoscalers on the first."""
    runs = [Run(v.scheduler, color(v.scheduler), v.kept[NAME], v.scheduler) for v in results.views
            if v.kept.get(NAME)]
    if not runs:
        return None
    fig = cluster_time_figure(runs, results.span, results.req.scenario.rate_schedule)
    first = replace(results.req, schedulers=results.req.schedulers[:1])
    return {"figure": fig, "rows": summary_rows(runs), "query": results.query,
            "compare": first.query(sweep=False) + "&autoscalers=" + ",".join(COMPARED)}


CSV_COLUMNS = ("run", "window_start_s", "window_s", "arrivals", "offered_rps", *(s for s, _, _ in STATES),
               "waiting", "slo_attainment")


def windows_csv(runs: list[tuple[str, dict]]) -> str:
    """The figure's numbers as CSV, a row per run and window (CSV_COLUMNS): what it kept of each run, `runs` as
    (label, kept data). slo_attainment is blank for a window without arrivals."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for label, d in runs:
        for i, start in enumerate(d["start_s"]):
            met = d["attainment"][i]
            writer.writerow([label, f"{start:g}", f"{d['window_s']:g}", d["requests"][i],
                             f"{d['requests'][i] / d['window_s']:.6g}", *(f"{d[s][i]:.6g}" for s, _, _ in STATES),
                             f"{d['waiting'][i]:.6g}", "" if met is None else f"{met:.6g}"])
    return out.getvalue()


def autoscaled(results: Results) -> bool:
    return results.req.scenario.autoscaler is not None


EXPLAIN = (f"Per {WINDOW_S:g} s window on one time axis: the load offered, each run's replicas by state (provisioning ones are "
           "billed but do not serve yet; draining ones finish their requests), the requests waiting for their "
           f"first schedule, and the share of each window's arrivals that met the SLO (dotted: {DEFAULT_TARGET:.0%}).")

FIGURE = Figure(name=NAME, title="Cluster over time", explain=EXPLAIN, order=19, build=by_scheduler,
                keep=over_time, shown=autoscaled, template="_figure_cluster_time.html")
