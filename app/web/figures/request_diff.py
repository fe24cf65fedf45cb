"""Request-level A/B (sim_core/request_diff.py) on the dashboard: the results page's "Compare requests: A vs B"
card (this module's FIGURE: pick two of the compared schedulers, open /diff), and the figures the /diff page
(app/web/diff_page.py) draws: who won and who lost (each request's change against its prompt length or arrival
time), where the change came from (the mean change per attribution part), and a most-hurt request's two
timelines, A's above B's (the Gantt's segment kinds and colours)."""

from __future__ import annotations

import numpy as np

from sim_core.metric_catalog import REQUEST_METRICS
from sim_core.views import ATTRIBUTION_PARTS

from ..charts import _axis, _columns, _empty_note, _layout, _mix, color
from ..inputs import WebRequest
from . import Figure, Results
from .attribution import PART_STYLE
from .gantt import SEGMENT_STYLE

LABELS = {m.key: m.label for m in REQUEST_METRICS}
HURT, HELPED = "#c92a2a", "#2b8a3e"  # B slower / B faster
PICKED = "#1c7ed6"  # the ring round the request compared in full


# ----- the results page's card -----
def scheduler_query(req: WebRequest, name: str) -> str:
    """The query of one scheduler's run of a comparison (its first seed: an A/B pairs single runs)."""
    s = req.scenario.model_copy(update={"scheduler": name, "seeds": 1})
    return WebRequest(s, (name,), req.upload).query(sweep=False)


def link_card(results: Results) -> dict | None:
    names = list(results.req.schedulers)
    if len(names) < 2:
        return None
    return {"options": [(n, scheduler_query(results.req, n)) for n in names], "a": names[0], "b": names[1],
            "seeds": results.req.scenario.seeds}


FIGURE = Figure(
    name="request-diff", title="Compare requests: A vs B", order=75, build=link_card,
    template="_figure_request_diff.html", embeds=False, simulates=False,
    shown=lambda r: len(r.req.schedulers) >= 2,
    explain="Every request under two of these schedulers, side by side: which requests B made faster or slower "
            "than A, by how much, and where the difference went (queueing, prefill, stalls, decode, preemption).",
)


# ----- the /diff page's figures -----
def _r(values, digits: int = 3) -> list:
    return np.round(np.asarray(values, np.float64), digits).tolist()


def scatter_figure(d, by: str, picked: int | None = None) -> dict:
    """One point per compared request: its change (B - A) in the chosen metric against its prompt length; menus
    switch the metric and the x axis (arrival time). Red above zero (B slower), green below. The picked request
    (an id among d.ids) is ringed by a second trace, which the menus move with its point."""
    layout = _layout(440, margin={"l": 70, "r": 20, "t": 96, "b": 56}, hovermode="closest", showlegend=False,
                     xaxis=_axis("prompt length (tokens)"), yaxis=_axis(f"change in {LABELS[by]}, B − A (ms)",
                                                                        zeroline=True, zerolinecolor="#868e96"))
    if len(d) == 0:
        layout["annotations"] = [_empty_note("No request was served by both runs: nothing to compare.")]
        return {"data": [], "layout": layout}

    def colours(m):
        return [HURT if c > 0 else HELPED if c < 0 else "#868e96" for c in d.change[m].tolist()]

    custom = np.column_stack([d.ids, d.prompt_tokens, d.output_tokens, np.round(d.arrival_s, 3)]).tolist()
    trace = {"type": "scattergl" if len(d) > 3000 else "scatter", "mode": "markers", "x": d.prompt_tokens.tolist(),
             "y": _r(d.change[by]), "customdata": custom, "name": "requests",
             "marker": {"size": 6, "opacity": 0.75, "color": colours(by)},
             "hovertemplate": "request #%{customdata[0]}: %{y:+,.1f} ms<br>prompt %{customdata[1]}, output "
                              "%{customdata[2]} tokens<br>arrived at %{customdata[3]} s<extra></extra>"}
    at = np.flatnonzero(d.ids == picked)[:1] if picked is not None else np.zeros(0, np.int64)
    ring = {"type": "scatter", "mode": "markers", "x": d.prompt_tokens[at].tolist(), "y": _r(d.change[by][at]),
            "name": "picked", "customdata": d.ids[at].tolist(), "hoverinfo": "skip",
            "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"width": 2.5, "color": PICKED}}}

    def both(main, values):  # the update of a column for the points and the ring (trace indices 0 and 1)
        return [main, _r(values[at])] if len(at) else [main]

    metrics = [by, *(m for m in LABELS if m != by)]
    traces = [0, 1] if len(at) else [0]
    buttons_y = [{"label": LABELS[m], "method": "update",
                  "args": [{"y": both(_r(d.change[m]), d.change[m]),
                            "marker.color": [colours(m), ring["marker"]["color"]][:len(traces)]},
                           {"yaxis.title.text": f"change in {LABELS[m]}, B − A (ms)"}, traces]} for m in metrics]
    buttons_x = [{"label": "vs prompt length", "method": "update",
                  "args": [{"x": both(d.prompt_tokens.tolist(), d.prompt_tokens)},
                           {"xaxis.title.text": "prompt length (tokens)"}, traces]},
                 {"label": "vs arrival time", "method": "update",
                  "args": [{"x": both(_r(d.arrival_s), d.arrival_s)}, {"xaxis.title.text": "arrival time (s)"},
                           traces]}]
    # Two rows of buttons above the plot, both from its left edge (side by side they overlap on a phone).
    menu = {"type": "buttons", "direction": "right", "showactive": True, "yanchor": "bottom", "x": 0,
            "xanchor": "left", "pad": {"r": 4, "t": 0}, "font": {"size": 11}}
    layout["updatemenus"] = [{**menu, "buttons": buttons_y, "y": 1.15}, {**menu, "buttons": buttons_x, "y": 1.02}]
    return {"data": [trace, ring] if len(at) else [trace], "layout": layout}


def causes_figure(d) -> dict:
    """Per split metric (TTFT, TPOT, E2EL), side by side: the mean change per request of each attribution part,
    and their total, the mean change."""
    metrics = list(d.causes)
    causes, means = d.causes_ms(), d.mean_change_ms()
    labels = ["total", *(PART_STYLE[p][0] for p in ATTRIBUTION_PARTS)]
    domains = _columns(len(metrics), gap=0.16)  # room for each panel's part names (stacked on a phone: static/js/slides.js)
    layout = _layout(330, margin={"l": 100, "r": 20, "t": 40, "b": 52}, showlegend=False, hovermode="closest",
                     annotations=[])
    data = []
    for k, m in enumerate(metrics):
        xa, ya = ("x", "y") if k == 0 else (f"x{k + 1}", f"y{k + 1}")
        values = [means[m], *(causes[m][p] for p in ATTRIBUTION_PARTS)]
        data.append({"type": "bar", "orientation": "h", "y": labels, "x": [round(v or 0.0, 3) for v in values],
                     "xaxis": xa, "yaxis": ya, "name": LABELS[m],
                     "marker": {"color": ["#343a40", *(PART_STYLE[p][1] for p in ATTRIBUTION_PARTS)]},
                     "hovertemplate": "%{y}: %{x:+,.1f} ms<extra>" + LABELS[m] + "</extra>"})
        key = "" if k == 0 else str(k + 1)
        layout[f"xaxis{key}"] = _axis(f"{LABELS[m]}, mean change (ms)", domain=domains[k], zeroline=True,
                                      zerolinecolor="#868e96", anchor=ya)
        layout[f"yaxis{key}"] = _axis("", autorange="reversed", ticks="", anchor=xa)
    if len(d) == 0:
        layout["annotations"] = [_empty_note("No request was served by both runs: nothing to compare.")]
    return {"data": data, "layout": layout}


def timelines_figure(segments_a, segments_b, name_a: str, name_b: str) -> dict:
    """One request's timeline in A (top row) and in B (below it): its segments (queued, prefill, decode,
    preempted) as thick line pieces on a shared time axis, coloured as the Gantt colours them."""
    rows = (("A · " + name_a, name_a, segments_a or []), ("B · " + name_b, name_b, segments_b or []))
    data = []
    for kind, (label, style) in SEGMENT_STYLE.items():
        for row, scheduler, segs in rows:
            base = color(scheduler)
            fill = base if style is None else _mix(base, "#000000", 0.45) if style == "dark" else style
            xs, ys = [], []
            for k, start, end in segs:
                if k == kind:
                    xs += [round(start, 4), round(end, 4), None]
                    ys += [row, row, None]
            if xs:
                data.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": label,
                             "line": {"color": fill, "width": 16}, "showlegend": False,
                             "hovertemplate": label + " %{x:.3f} s<extra>" + row + "</extra>"})
    layout = _layout(150, margin={"l": 110, "r": 16, "t": 8, "b": 40}, hovermode="closest", showlegend=False,
                     xaxis=_axis("simulated time (s)"),
                     yaxis=_axis("", categoryorder="array", categoryarray=[rows[1][0], rows[0][0]],
                                 range=[-0.6, 1.6], showgrid=False, ticks=""))
    if not data:
        layout["annotations"] = [_empty_note("No timeline: the runs' logs were bounded.")]
    return {"data": data, "layout": layout}
