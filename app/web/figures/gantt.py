"""Requests under each scheduler: one card per scheduler, one row per request (a sample of a long run, evenly
spaced by arrival; zooming in fetches every request of the window from gantt_window.py): queued, prefill chunks,
decode, preempted, with each request's lengths, TTFT and where its time went on hover (and, in a run of several
engines, the engine or engines that served it)."""

from __future__ import annotations

from ..charts import ROW_BARS, SERIES, _axis, _empty_note, _layout, _mix, color
from ..runview import RunView
from . import Figure, Results

SEGMENT_STYLE = {  # Gantt segment kind -> (label, colour or None for the scheduler's)
    "queued": ("queued", SERIES["queued"]),
    "prefill": ("prefill", "dark"),
    "decode": ("decode", None),
    "preempted": ("preempted", SERIES["preempted"]),
    "rejected": ("rejected", SERIES["rejected"]),
}

GANTT_MARGIN = {"l": 64, "r": 20, "t": 36, "b": 50}


def gantt_figure(view: RunView, span: list[float] | None = None) -> dict | None:
    """Segments drawn as thick line pieces, one trace per kind: a single SVG path per trace draws in a fraction
    of the time a bar per segment takes. Hovering anywhere on a row (hovermode "y") describes that request.
    `span`: the comparison's time_range (the x axis of every Gantt and the timeline)."""
    g = view.gantt
    if g is None:
        return None
    rows, shown = g["rows"], g["shown"]  # one row per sampled request, at y = its id
    if shown == 0:
        return {"data": [], "layout": _layout(260, margin=GANTT_MARGIN, xaxis=_axis("simulated time (s)"),
                                              yaxis=_axis("request (by arrival)", showticklabels=False),
                                              annotations=[_empty_note("No request arrived in this run.")])}
    height = int(min(760, max(260, 90 + shown * 3.6)))
    row_px = (height - GANTT_MARGIN["t"] - GANTT_MARGIN["b"]) / max(1, shown)
    base = color(view.scheduler)
    engines = rows.get("engine")  # a run of several engines: the hover names the engine(s) that served it
    data = []
    for kind, (label, style) in SEGMENT_STYLE.items():
        seg = g["segments"].get(kind)
        if not seg:
            continue
        fill = base if style is None else _mix(base, "#000000", 0.45) if style == "dark" else style
        xs, ys, custom = _segment_points(kind, seg, rows, engines)
        trace = {"type": "scatter", "x": xs, "y": ys, "name": label, "customdata": custom,
                 "hovertemplate": _hover(kind, label, engines is not None)}
        if kind == "rejected":
            trace.update(mode="markers", marker={"symbol": "x-thin", "size": 7, "line": {"width": 2, "color": fill}})
        else:
            trace.update(mode="lines", line={"color": fill, "width": round(max(1.0, row_px * 0.8), 2)}, meta=ROW_BARS)
        data.append(trace)
    ids = rows["id"]
    half = (ids[-1] - ids[0]) / max(1, shown - 1) / 2 if shown > 1 else 0.5
    layout = _layout(height, margin=GANTT_MARGIN, hovermode="y unified", hoverdistance=-1,
                     xaxis=_axis("simulated time (s)", **({"range": span} if span else {"rangemode": "tozero"})),
                     yaxis=_axis("request (by arrival)", range=[ids[-1] + half, ids[0] - half], tickprefix="#",
                                 showgrid=False, nticks=14))
    return {"data": data, "layout": layout}


def _hover(kind: str, label: str, several_engines: bool) -> str:
    """A segment's hover: the request's whole story on its decode (or rejected) segment, once per row; a short
    line on the others. Several engines: which served it (customdata[14])."""
    served = "<br>served by %{customdata[14]}" if several_engines else ""
    if kind == "rejected":  # never served: no first token, so no TTFT to show
        return ("<b>request #%{customdata[0]}</b> · rejected at %{customdata[6]:.2f} s"
                "<br>prompt %{customdata[1]} tokens, output %{customdata[2]} tokens"
                "<br>never served: no first token" + served.replace("served by", "sent to") + "<extra></extra>")
    if kind == "decode":
        return ("<b>request #%{customdata[0]}</b> · " + label + " %{customdata[6]:.2f}–%{customdata[7]:.2f} s"
                "<br>prompt %{customdata[1]} tokens, output %{customdata[2]} tokens"
                "<br>TTFT %{customdata[3]:,.0f} ms · max ITL %{customdata[4]:,.0f} ms"
                " · preemptions %{customdata[5]}"
                "<br>where its time went (ms): queue %{customdata[8]:,.0f} · prefill %{customdata[9]:,.0f}"
                "<br>stalled %{customdata[10]:,.0f} · decode %{customdata[11]:,.0f}"
                " · preemption %{customdata[12]:,.0f} · transport %{customdata[13]:,.0f}" + served
                + "<extra></extra>")
    return "#%{customdata[0]} " + label + " %{customdata[1]:.2f}–%{customdata[2]:.2f} s<extra></extra>"


def _segment_points(kind: str, seg: dict, rows: dict, engines) -> tuple[list, list, list]:
    """One kind's segments as line pieces (x, y and hover data; None breaks the line between pieces), or as
    points for rejections."""
    detailed = kind in ("decode", "rejected")
    xs, ys, custom = [], [], []
    for r, start, end in zip(seg["row"], seg["start"], seg["end"], strict=True):
        info = ([rows["id"][r], rows["prompt"][r], rows["output"][r], rows["ttft_ms"][r], rows["itl_max_ms"][r],
                 rows["preemptions"][r], start, end, *rows["attribution_ms"][r]] if detailed
                else [rows["id"][r], start, end])
        if detailed and engines is not None:
            info.append(engines[r])
        rid = rows["id"][r]
        if kind == "rejected":
            xs.append(start)
            ys.append(rid)
            custom.append(info)
        else:
            xs += [start, end, None]
            ys += [rid, rid, None]
            custom += [info, info, None]
    return xs, ys, custom


def panels(results: Results) -> list[dict]:
    """Per scheduler: its Gantt (None when the run has no per-request timeline, `note` says why), which requests
    it shows, and the query of its downloads (one scheduler's run: /download/...?<query>)."""
    return [{"name": v.scheduler, "figure": gantt_figure(v, results.span), "note": v.gantt_note,
             "shown": v.gantt["shown"] if v.gantt else 0, "total": v.gantt["total"] if v.gantt else v.requests,
             "download": results.req.run_key(v.scheduler)} for v in results.views]


FIGURE = Figure(
    name="gantt", title="Requests under each scheduler", order=70, cursor=True, build=panels,
    template="_figure_gantt.html",
    explain="One row per request: queued, prefill chunks, decode, preempted. Hover a row for the request's "
            "lengths, TTFT, worst inter-token gap, preemptions and where its time went.",
)
