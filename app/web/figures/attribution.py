"""The "Where did the time go" figure: per scheduler, one horizontal bar of the mean E2EL split into its parts
(sim_core/kernel/attribution.py defines them; metrics.attribution_ms carries the means). Built as plotly JSON like every
figure (see figures/__init__.py)."""

from __future__ import annotations

from sim_core.views import ATTRIBUTION_PARTS

from ..charts import SERIES, _axis, _empty_note, _layout, color
from ..runview import RunView
from . import Figure

# part -> (label, colour). Waiting grey, compute in the KV view's prefill/decode colours, losses warm; none a
# scheduler's colour (charts.SERIES).
PART_STYLE = {
    "queue": ("queueing", SERIES["queued"]),
    "prefill": ("own prefill", SERIES["prefill"]),
    "prefill_stall": ("prefill stall", SERIES["stall"]),
    "decode": ("decode", SERIES["decode"]),
    "preemption": ("preemption", SERIES["preempted"]),
    "transport": ("transport", SERIES["transport"]),
}
assert tuple(PART_STYLE) == ATTRIBUTION_PARTS


def attribution_figure(views: list[RunView]) -> dict:
    """One stacked bar per scheduler (top to bottom in comparison order), a trace per part."""
    names = [v.scheduler for v in views]
    parts = [v.metrics.get("attribution_ms") or {} for v in views]
    height = 150 + 46 * len(views)
    layout = _layout(height, barmode="stack", margin={"l": 90, "r": 24, "t": 80, "b": 52},
                     xaxis=_axis("mean time per request (ms)", rangemode="tozero"),
                     yaxis=_axis("", autorange="reversed", ticks="", tickfont={"size": 12}),
                     hovermode="closest")
    if not any(p and p.get("decode") is not None for p in parts):
        layout["annotations"] = [_empty_note("No request completed: no latency to split.")]
        return {"data": [], "layout": layout}
    data = []
    for key, (label, fill) in PART_STYLE.items():
        xs = [p.get(key) or 0.0 for p in parts]
        totals = [sum(v or 0.0 for v in p.values()) for p in parts]
        shares = [x / t if t > 0 else 0.0 for x, t in zip(xs, totals, strict=True)]
        data.append({"type": "bar", "orientation": "h", "name": label, "y": names, "x": [round(x, 3) for x in xs],
                     "marker": {"color": fill, "line": {"width": 0}}, "customdata": shares,
                     "hovertemplate": "%{y}: " + label + " %{x:,.1f} ms (%{customdata:.0%} of E2EL)<extra></extra>"})
    # Two parts a row, in order (plotly lists stacked bars' legend backwards by default): three rows fit the top
    # margin, on a phone too.
    layout["legend"].update(traceorder="normal", entrywidth=0.5, entrywidthmode="fraction", font={"size": 11})
    layout["yaxis"]["tickvals"] = names
    layout["yaxis"]["ticktext"] = [f"<span style='color:{color(n)}'>{n}</span>" for n in names]
    return {"data": data, "layout": layout}


FIGURE = Figure(
    name="attribution", title="Where the time went", order=30,
    build=lambda r: attribution_figure(r.means),  # over seeds, as the metrics table
    explain="Each scheduler's mean end-to-end latency per request, split: queueing before it runs, its own prefill "
            "steps, its decode steps stalled behind other requests' prefills (the step time beyond what its decodes "
            "alone cost), decode, time lost to preemption (waiting to come back, recomputing, swapping) and "
            "transport. Hover a Gantt row for one request's split.",
)
