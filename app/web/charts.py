"""Every figure of the dashboard, built server-side as plotly JSON (plain dicts: {"data": [...], "layout": {...}}),
drawn in the browser by the vendored plotly.js. A scheduler has the same colour in every figure.

Figures take `RunView`s (see runview.py); the KV view is no plotly figure: its frames (`kv_frames`) and colours
(`kv_figure`) travel to static/js/app.js, which paints them on canvases and moves a time cursor over the figures
that have a time axis.
"""

from __future__ import annotations

import math

from sim_core import SCHEDULER_NAMES

from .runview import RunView

PALETTE = {
    "static": "#868e96", "fcfs": "#e8590c", "spf": "#9c36b5", "chunked": "#1971c2", "slo": "#2f9e44",
    "fair": "#c2255c",
}
SPARE = ("#0c8599", "#f08c00", "#5c7cfa", "#66a80f", "#e64980", "#495057")
FREE_CELL = "#eceff3"
GRID = "#e9ecef"
AXIS = "#495057"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
SEGMENT_STYLE = {  # Gantt segment kind -> (label, colour or None for the scheduler's)
    "queued": ("queued", "#ced4da"),
    "prefill": ("prefill", "dark"),
    "decode": ("decode", None),
    "preempted": ("preempted", "#fa5252"),
    "rejected": ("rejected", "#212529"),
}


def color(name: str) -> str:
    if name in PALETTE:
        return PALETTE[name]
    k = SCHEDULER_NAMES.index(name) if name in SCHEDULER_NAMES else abs(hash(name))
    return SPARE[k % len(SPARE)]


def _mix(hex_color: str, other: str, t: float) -> str:
    a = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b, strict=True))


def _axis(title: str, **extra) -> dict:
    ax = {"title": {"text": title, "font": {"size": 12}}, "gridcolor": GRID, "zeroline": False,
          "linecolor": "#adb5bd", "ticks": "outside", "tickcolor": "#adb5bd", "automargin": True}
    ax.update(extra)
    return ax


def _layout(height: int, **extra) -> dict:
    layout = {
        "height": height, "autosize": True, "font": {"family": FONT, "size": 12, "color": AXIS},
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff",
        "margin": {"l": 64, "r": 24, "t": 40, "b": 52},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "font": {"size": 12}},
        "hoverlabel": {"font": {"family": FONT}},
    }
    layout.update(extra)
    return layout


def _columns(n: int, gap: float = 0.06) -> list[list[float]]:
    width = (1 - gap * (n - 1)) / n
    return [[round(k * (width + gap), 4), round(k * (width + gap) + width, 4)] for k in range(n)]


def _rows(n: int, gap: float = 0.05) -> list[list[float]]:
    """Vertical domains, top row first."""
    height = (1 - gap * (n - 1)) / n
    return [[round(1 - k * (height + gap) - height, 4), round(1 - k * (height + gap), 4)] for k in range(n)]


def _empty_note(text: str) -> dict:
    """A note across the middle of a figure that has nothing to draw (a run in which no request arrived, or none
    finished): an empty plot alone would look like a drawing error."""
    return {"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False, "text": text,
            "font": {"size": 13, "color": AXIS}}


def _ax(kind: str, k: int) -> str:
    """Layout key of the k-th (0-based) x or y axis."""
    return f"{kind}axis" if k == 0 else f"{kind}axis{k + 1}"


def _ref(kind: str, k: int) -> str:
    return kind if k == 0 else f"{kind}{k + 1}"


def time_range(views: list[RunView]) -> list[float] | None:
    """[0, end] of the whole comparison: every per-scheduler time figure (Gantt, engine timeline, KV player) spans
    it, so one moment sits at one place in all of them. None when nothing happened (plotly picks a range)."""
    end = max((v.end_s for v in views), default=0.0)
    for v in views:  # a request rejected on arrival after the last step is drawn too
        for seg in (v.gantt or {}).get("segments", {}).values():
            end = max(end, max(seg["end"], default=0.0))
    return [0.0, round(end, 4)] if end > 0 else None


# ----- latency CDFs -----
CDF_PANELS = (("ttft", "TTFT (ms)", "fraction of requests"), ("itl", "inter-token latency (ms)",
              "fraction of token gaps"), ("e2el", "end-to-end latency, E2EL (ms)", "fraction of requests"))


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis over [lo, hi] > 0: 1-2-5 per decade, every decade's 1 when that is too many,
    1-9 when too few (plotly's own log ticks label one or two values on a narrow range)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def within(mantissas):
        return [m * 10.0 ** e for e in range(first, last + 1) for m in mantissas if lo <= m * 10.0 ** e <= hi]

    ticks = within((1, 2, 5))
    if len(ticks) > 9:
        ticks = within((1,))
    elif len(ticks) < 4:
        ticks = within(range(1, 10))
    return [float(f"{t:.6g}") for t in ticks]


def _ms_text(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def cdf_axis_range(xs: list[float], target: float | None) -> tuple[list[float], bool] | None:
    """The log10 range of a latency panel: its data, padded; a target (SLO) within a decade of the data widens it
    to show the target's line. (range, target shown); None for a panel with no data."""
    xs = [x for x in xs if x > 0]
    if not xs:
        return None
    lo, hi = min(xs), max(xs)
    shown = isinstance(target, int | float) and target > 0 and lo / 10 <= target <= hi * 10
    if shown:
        lo, hi = min(lo, target), max(hi, target)
    pad = max(0.04, 0.03 * (math.log10(hi) - math.log10(lo)))
    return [round(math.log10(lo) - pad, 4), round(math.log10(hi) + pad, 4)], shown


def cdf_figure(views: list[RunView]) -> dict:
    data, layout = [], _layout(340, margin={"l": 60, "r": 20, "t": 40, "b": 56})
    slo = views[0].metrics.get("slo", {}) if views else {}
    targets = {} if slo.get("by_class") else {"ttft": slo.get("ttft_ms"), "itl": slo.get("tpot_ms")}
    shown_targets = {}
    for k, (domain, (key, xtitle, ytitle)) in enumerate(zip(_columns(3, 0.07), CDF_PANELS, strict=True)):
        # Explicit ranges and ticks: autorange would stretch a panel to fit an SLO note's text.
        fitted = cdf_axis_range([x for v in views for x in v.cdf[key]["x"]], targets.get(key))
        ticks = {}
        if fitted:
            span, shown_targets[key] = fitted
            values = log_ticks(10 ** span[0], 10 ** span[1])
            ticks = {"range": span, "tickmode": "array", "tickvals": values, "ticktext": [_ms_text(v) for v in values]}
        layout[_ax("x", k)] = _axis(xtitle, domain=domain, anchor=_ref("y", k), type="log", **ticks,
                                    minor={"showgrid": True, "gridcolor": "#f3f4f6", "dtick": "D1"})
        layout[_ax("y", k)] = _axis(ytitle if k != 1 else "fraction of token gaps", anchor=_ref("x", k),
                                    range=[0, 1.02], tickformat=".0%")
        for v in views:
            c = v.cdf[key]
            data.append({"type": "scatter", "mode": "lines",
                         "x": c["x"], "y": c["y"], "name": v.scheduler, "legendgroup": v.scheduler,
                         "showlegend": k == 0, "line": {"color": color(v.scheduler), "width": 2, "shape": "hv"},
                         "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                         "hovertemplate": f"{v.scheduler}: %{{y:.1%}} under %{{x:.1f}} ms<extra></extra>"})
    shapes, notes = [], []
    for k, (key, label) in enumerate((("ttft", "TTFT SLO"), ("itl", "TPOT SLO"))):
        target = targets.get(key)
        if not isinstance(target, int | float) or key not in shown_targets:
            continue
        note = {"yref": "paper", "y": 0.02, "showarrow": False, "font": {"size": 10, "color": "#868e96"}}
        if shown_targets[key]:
            shapes.append({"type": "line", "xref": _ref("x", k), "yref": "paper", "x0": target, "x1": target,
                           "y0": 0, "y1": 1, "line": {"color": "#868e96", "width": 1, "dash": "dash"}})
            notes.append({**note, "xref": _ref("x", k), "x": _log10(target), "text": f"{label} {target:g} ms",
                          "xanchor": "left"})
        else:  # far outside the data: named at the edge it lies beyond, without stretching the axis to it
            above = target > 10 ** layout[_ax("x", k)]["range"][1]
            notes.append({**note, "xref": f"{_ref('x', k)} domain", "x": 1 if above else 0,
                          "xanchor": "right" if above else "left",
                          "text": f"{label} {target:g} ms →" if above else f"← {label} {target:g} ms"})
    if not any(v.cdf[key]["x"] for v in views for key, _, _ in CDF_PANELS):
        notes.append(_empty_note("No request finished in this run: there are no latencies to plot."))
    layout.update(shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}


def _log10(x: float) -> float:
    return math.log10(x) if x > 0 else 0.0


# ----- step timeline -----
TIMELINE_ROWS = (("step_ms", "step time (ms)"), ("prefill_tokens", "prefill tokens / step"),
                 ("decode_seqs", "decode seqs / step"), ("waiting", "queued requests"), ("kv_pct", "KV in use (%)"))


def timeline_figure(views: list[RunView], span: list[float] | None = None) -> dict:
    """`span`: the comparison's time_range."""
    n = len(TIMELINE_ROWS)
    layout = _layout(170 * n, hovermode="x unified", margin={"l": 70, "r": 20, "t": 36, "b": 50})
    data = []
    for k, (domain, (key, title)) in enumerate(zip(_rows(n, 0.035), TIMELINE_ROWS, strict=True)):
        bottom = k == n - 1
        layout[_ax("x", k)] = _axis("simulated time (s)" if bottom else "", anchor=_ref("y", k),
                                    showticklabels=bottom, **({"range": span} if k == 0 and span else {}),
                                    **({} if k == 0 else {"matches": "x"}))
        layout[_ax("y", k)] = _axis(title, domain=domain, anchor=_ref("x", k), rangemode="tozero")
        for v in views:
            y = v.steps[key] if key != "kv_pct" else [round(b * 100 / max(1, v.setup["num_blocks"]), 2)
                                                     for b in v.steps["kv_blocks"]]
            data.append({"type": "scatter", "mode": "lines", "x": v.steps["t"],
                         "y": y, "name": v.scheduler, "legendgroup": v.scheduler, "showlegend": k == 0,
                         "line": {"color": color(v.scheduler), "width": 1.4, "shape": "hv"},
                         "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                         "hovertemplate": f"{v.scheduler}: %{{y:,.4~g}}<extra></extra>"})
    if not any(v.steps["t"] for v in views):
        layout["annotations"] = [_empty_note("No request arrived in this run: the engine never stepped.")]
    return {"data": data, "layout": layout}


# ----- KV pool animation -----
# What a cell's majority owner is doing, with two shades each so that neighbouring requests stay apart.
# static/js/app.js draws the grids on canvases with these colours; the card's legend lists them.
KV_STATES = (
    ("free", "free", (FREE_CELL, FREE_CELL)),
    ("prefill", "prefilling (no token yet)", ("#f59f00", "#ffd43b")),
    ("decode", "decoding", ("#3b5bdb", "#91a7ff")),
    ("shared", "shared prefix (several requests)", ("#2f9e44", "#69db7c")),
    ("cached", "cached prefix, free to evict", ("#66d9e8", "#66d9e8")),
    ("swapped", "swapped out to host memory", ("#e03131", "#ff8787")),
)


def kv_grid(views: list[RunView]) -> tuple[int, int]:
    """(columns, rows) of the grid every scheduler's pool is drawn on. Cells are the same size for all (as is
    the number of blocks in one, see service.compare): a larger pool is a longer grid, not smaller cells."""
    cells = max((v.kv["cells"] for v in views), default=1)
    cols = max(1, math.ceil(math.sqrt(cells)))
    return cols, max(1, math.ceil(cells / cols))


def kv_figure(views: list[RunView]) -> dict:
    """The KV view's drawing spec (not a plotly figure: app.js paints canvases): the shared grid and the colours
    of each state. The frames travel beside it (kv_frames)."""
    cols, rows = kv_grid(views)
    return {"grid": {"cols": cols, "rows": rows},
            "states": [{"key": key, "label": label, "colors": list(colors)} for key, label, colors in KV_STATES]}


def kv_frames(views: list[RunView], span: list[float] | None = None) -> dict:
    """What the KV player needs: per scheduler the cell grid and its run-length coded frames, played over
    `span` (the comparison's time_range)."""
    horizon = span[1] if span else 0.0
    grid_cols, _ = kv_grid(views)
    steps = max((len(v.kv["frame_s"]) for v in views), default=1)
    # Open at the busiest moment (the highest KV use of any scheduler): a still frame worth looking at.
    peaks = [(max(v.kv["usage"]), v.kv["frame_s"][v.kv["usage"].index(max(v.kv["usage"]))])
             for v in views if v.kv["usage"]]
    start = round(max(peaks)[1] / horizon * (steps - 1)) if peaks and horizon > 0 else 0
    return {"horizon": round(horizon, 4), "steps": steps, "start": int(start),
            "schedulers": [dict(v.kv, name=v.scheduler, color=color(v.scheduler), cols=grid_cols,
                                rows=math.ceil(v.kv["cells"] / grid_cols)) for v in views]}


# ----- Gantt -----
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
    data = []
    for kind, (label, style) in SEGMENT_STYLE.items():
        seg = g["segments"].get(kind)
        if not seg:
            continue
        fill = base if style is None else _mix(base, "#000000", 0.45) if style == "dark" else style
        detailed = kind in ("decode", "rejected")
        if kind == "rejected":  # never served: no first token, so no TTFT to show
            hover = ("<b>request #%{customdata[0]}</b> · rejected at %{customdata[6]:.2f} s"
                     "<br>prompt %{customdata[1]} tokens, output %{customdata[2]} tokens"
                     "<br>never served: no first token<extra></extra>")
        elif detailed:  # the request's story, once per row
            hover = ("<b>request #%{customdata[0]}</b> · " + label + " %{customdata[6]:.2f}–%{customdata[7]:.2f} s"
                     "<br>prompt %{customdata[1]} tokens, output %{customdata[2]} tokens"
                     "<br>TTFT %{customdata[3]:,.0f} ms · max ITL %{customdata[4]:,.0f} ms"
                     " · preemptions %{customdata[5]}"
                     "<br>where its time went (ms): queue %{customdata[8]:,.0f} · prefill %{customdata[9]:,.0f}"
                     "<br>stalled %{customdata[10]:,.0f} · decode %{customdata[11]:,.0f}"
                     " · preemption %{customdata[12]:,.0f} · transport %{customdata[13]:,.0f}<extra></extra>")
        else:
            hover = "#%{customdata[0]} " + label + " %{customdata[1]:.2f}–%{customdata[2]:.2f} s<extra></extra>"
        xs, ys, custom = [], [], []
        for r, start, end in zip(seg["row"], seg["start"], seg["end"], strict=True):
            info = ([rows["id"][r], rows["prompt"][r], rows["output"][r], rows["ttft_ms"][r], rows["itl_max_ms"][r],
                     rows["preemptions"][r], start, end, *rows["attribution_ms"][r]] if detailed
                    else [rows["id"][r], start, end])
            rid = rows["id"][r]
            if kind == "rejected":
                xs.append(start)
                ys.append(rid)
                custom.append(info)
            else:
                xs += [start, end, None]
                ys += [rid, rid, None]
                custom += [info, info, None]
        trace = {"type": "scatter", "x": xs, "y": ys, "name": label, "customdata": custom, "hovertemplate": hover}
        if kind == "rejected":
            trace.update(mode="markers", marker={"symbol": "x-thin", "size": 7, "line": {"width": 2, "color": fill}})
        else:
            trace.update(mode="lines", line={"color": fill, "width": round(max(1.0, row_px * 0.8), 2)})
        data.append(trace)
    ids = rows["id"]
    half = (ids[-1] - ids[0]) / max(1, shown - 1) / 2 if shown > 1 else 0.5
    layout = _layout(height, margin=GANTT_MARGIN, hovermode="y unified", hoverdistance=-1,
                     xaxis=_axis("simulated time (s)", **({"range": span} if span else {"rangemode": "tozero"})),
                     yaxis=_axis("request (by arrival)", range=[ids[-1] + half, ids[0] - half], tickprefix="#",
                                 showgrid=False, nticks=14))
    return {"data": data, "layout": layout}


# ----- goodput vs rate -----
def goodput_figure(sweep: dict) -> dict:
    rates = sweep["rates"]
    layout = _layout(360, margin={"l": 64, "r": 24, "t": 40, "b": 56})
    dom = _columns(2, 0.1)
    layout["xaxis"] = _axis("offered load (requests/s)", domain=dom[0], anchor="y", rangemode="tozero")
    layout["yaxis"] = _axis("goodput (requests/s)", anchor="x", rangemode="tozero")
    layout["xaxis2"] = _axis("offered load (requests/s)", domain=dom[1], anchor="y2", rangemode="tozero")
    layout["yaxis2"] = _axis("SLO attainment (%)", anchor="x2", range=[0, 105])
    top = max(rates) if rates else 1
    data = [{"type": "scatter", "mode": "lines", "x": [0, top], "y": [0, top], "name": "every request on time",
             "line": {"color": "#ced4da", "dash": "dot", "width": 1}, "hoverinfo": "skip"}]
    target = sweep["target_attainment"] * 100
    shapes = [{"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1, "y0": target, "y1": target,
               "line": {"color": "#868e96", "dash": "dash", "width": 1}}]
    notes = [{"xref": "x2 domain", "yref": "y2", "x": 0.01, "y": target, "yanchor": "top", "showarrow": False,
              "text": f"{target:.0f}% target", "font": {"size": 10, "color": "#868e96"}}]
    for i, (name, s) in enumerate(sweep["schedulers"].items()):
        c = color(name)
        x = [p["rate"] for p in s["points"]]
        data += _ci_bands(name, c, s["points"])
        data.append({"type": "scatter", "mode": "lines+markers", "x": x, "y": [p["goodput"] for p in s["points"]],
                     "name": name, "legendgroup": name, "line": {"color": c, "width": 2}, "marker": {"size": 6},
                     "hovertemplate": f"{name}: %{{y:.2f}} req/s good at %{{x:g}} req/s offered<extra></extra>"})
        data.append({"type": "scatter", "mode": "lines+markers", "x": x, "showlegend": False, "legendgroup": name,
                     "y": [round(p["slo_attainment"] * 100, 2) for p in s["points"]], "name": name,
                     "xaxis": "x2", "yaxis": "y2", "line": {"color": c, "width": 2}, "marker": {"size": 6},
                     "hovertemplate": f"{name}: %{{y:.1f}}% on time at %{{x:g}} req/s<extra></extra>"})
        band = s.get("knee_interval")
        if band and band[0] is not None and band[1] is not None and band[1] > band[0]:
            for xref, yref in (("x", "y domain"), ("x2", "y2 domain")):
                shapes.append({"type": "rect", "xref": xref, "yref": yref, "x0": band[0], "x1": band[1], "y0": 0,
                               "y1": 1, "fillcolor": c, "opacity": 0.08, "line": {"width": 0}, "layer": "below"})
        knee = s["knee_rate"]
        if knee is not None:
            for xref in ("x", "x2"):
                shapes.append({"type": "line", "xref": xref, "yref": "paper", "x0": knee, "x1": knee, "y0": 0,
                               "y1": 1, "line": {"color": c, "dash": "dot", "width": 1.5}})
            interval = (f" ({_knee_text(band[0])}–{_knee_text(band[1])})"
                        if band and band[0] != band[1] else "")
            notes.append({"xref": "x", "yref": "paper", "x": knee, "y": 1 - 0.07 * i, "yanchor": "top",
                          "xanchor": "left", "showarrow": False, "text": f" {name} knee {knee:g} req/s{interval}",
                          "font": {"size": 10, "color": c}})
    layout.update(shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}


def _knee_text(knee: float | None) -> str:
    return "none" if knee is None else f"{knee:g}"


def _ci_bands(name: str, c: str, points: list[dict]) -> list[dict]:
    """Over seeds: the 95% band of goodput and of SLO attainment, shaded around each mean line (nothing for one
    seed). A band is its upper edge, then its lower edge filled up to it."""
    if not points or any("ci95" not in p for p in points):
        return []
    x = [p["rate"] for p in points]
    out = []
    for key, axes, scale in (("goodput", {}, 1.0), ("slo_attainment", {"xaxis": "x2", "yaxis": "y2"}, 100.0)):
        low = [p["ci95"].get(key, [p[key]] * 2)[0] * scale for p in points]
        high = [p["ci95"].get(key, [p[key]] * 2)[1] * scale for p in points]
        edge = {"type": "scatter", "mode": "lines", "x": x, "line": {"width": 0, "color": c}, "showlegend": False,
                "legendgroup": name, "hoverinfo": "skip", **axes}
        out.append({**edge, "y": high, "name": f"{name} 95% band"})
        out.append({**edge, "y": low, "name": f"{name} 95% band", "fill": "tonexty", "fillcolor": c,
                    "opacity": 0.2})
    return out
