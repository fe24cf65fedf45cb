"""Latency distributions: the cumulative distributions of TTFT, inter-token latency and end-to-end latency, one
panel each on a log time axis, a line per scheduler, with the SLO's targets marked."""

from __future__ import annotations

import math

from ..charts import SERIES, _ax, _axis, _columns, _empty_note, _layout, _log10, _ref, color
from ..runview import RunView
from . import Figure

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


# On a dense log axis (1 to 9 in each decade) only these mantissas are labelled: 9 and 10 lie a twentieth of a
# decade apart, too close for two labels side by side.
LABELLED_MANTISSAS = (1, 2, 3, 5)


def _ms_text(v: float) -> str:
    """A tick's label: thousands as "k" ("20k", not "20,000": three panels side by side leave a tick little room)."""
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def tick_texts(values: list[float]) -> list[str]:
    """Labels of log_ticks' values: all of them on a 1-2-5 axis; on a 1-9 axis, the LABELLED_MANTISSAS' only,..."""
    mantissas = [round(v / 10 ** math.floor(math.log10(v) + 1e-9)) for v in values]
    # ... unless that leaves fewer than three labels (a narrow range): then every tick is labelled.
    dense = any(m not in (1, 2, 5) for m in mantissas) and sum(m in LABELLED_MANTISSAS for m in mantissas) >= 3
    return [_ms_text(v) if not dense or m in LABELLED_MANTISSAS else "" for v, m in zip(values, mantissas,
                                                                                         strict=True)]


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


# With model intervals: these percentiles of each panel's metric drawn as points with the model's 90% range as
# horizontal error bars (a percentile's interval is along the latency axis, at its fraction of requests).
MODEL_PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def model_error_bars(views: list[RunView], model_ci: list[dict], key: str, k: int) -> list[dict]:
    """Panel k's (metric `key`: ttft, itl, e2el) error bars: each scheduler's MODEL_PERCENTILES, each with its
    model interval (nothing for a scheduler without one)."""
    out = []
    for v, ci in zip(views, model_ci, strict=False):
        x, ys, low, high = [], [], [], []
        for stat, y in MODEL_PERCENTILES:
            value, interval = (v.metrics.get(f"{key}_ms") or {}).get(stat), (ci.get(f"{key}_ms") or {}).get(stat)
            if isinstance(value, int | float) and value > 0 and isinstance(interval, list) and len(interval) == 2:
                x.append(round(value, 4))
                ys.append(y)
                low.append(round(max(0.0, value - interval[0]), 4))
                high.append(round(max(0.0, interval[1] - value), 4))
        if x:
            out.append({"type": "scatter", "mode": "markers", "x": x, "y": ys, "name": f"{v.scheduler} model 90%",
                        "legendgroup": v.scheduler, "showlegend": False, "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                        "marker": {"color": color(v.scheduler), "size": 5},
                        "error_x": {"type": "data", "symmetric": False, "array": high, "arrayminus": low,
                                    "color": color(v.scheduler), "thickness": 1.5, "width": 4},
                        "hovertemplate": f"{v.scheduler}: %{{x:.1f}} ms at %{{y:.0%}}; the model's 90% range "
                                         "%{customdata}<extra></extra>",
                        "customdata": [f"{a - lo:.1f}-{a + hi:.1f} ms" for a, lo, hi in zip(x, low, high,
                                                                                             strict=True)]})
    return out


def cdf_figure(views: list[RunView], model_ci: list[dict] | None = None) -> dict:
    data, layout = [], _layout(340, margin={"l": 60, "r": 20, "t": 40, "b": 56})
    slo = views[0].metrics.get("slo", {}) if views else {}
    targets = {} if slo.get("by_class") else {"ttft": slo.get("ttft_ms"), "itl": slo.get("tpot_ms")}
    shown_targets = {}
    for k, (domain, (key, xtitle, ytitle)) in enumerate(zip(_columns(3, 0.07), CDF_PANELS, strict=True)):
        # Explicit ranges and ticks: autorange would stretch a panel to fit an SLO note's text.
        bars = model_error_bars(views, model_ci or [], key, k)
        ends = [e for b in bars for x, lo, hi in zip(b["x"], b["error_x"]["arrayminus"], b["error_x"]["array"],
                                                      strict=True) for e in (x - lo, x + hi)]
        fitted = cdf_axis_range([x for v in views for x in v.cdf[key]["x"]] + ends, targets.get(key))
        ticks = {}
        if fitted:
            span, shown_targets[key] = fitted
            values = log_ticks(10 ** span[0], 10 ** span[1])
            ticks = {"range": span, "tickmode": "array", "tickvals": values, "ticktext": tick_texts(values)}
        layout[_ax("x", k)] = _axis(xtitle, domain=domain, anchor=_ref("y", k), type="log", **ticks,
                                    minor={"showgrid": True, "gridcolor": "#f3f4f6", "dtick": "D1"})
        # One 0-100% scale for the three panels: its labels on the first only (the phone's stacked panels show
        # each: static/js/slides.js). Labels in every gap left a half-width panel (/vs) no room for its title,
        # which ran into them.
        layout[_ax("y", k)] = _axis(ytitle, anchor=_ref("x", k), range=[0, 1.02], tickformat=".0%",
                                    showticklabels=k == 0)
        for v in views:
            c = v.cdf[key]
            data.append({"type": "scatter", "mode": "lines",
                         "x": c["x"], "y": c["y"], "name": v.scheduler, "legendgroup": v.scheduler,
                         "showlegend": k == 0, "line": {"color": color(v.scheduler), "width": 2, "shape": "hv"},
                         "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                         "hovertemplate": f"{v.scheduler}: %{{y:.1%}} under %{{x:.1f}} ms<extra></extra>"})
        data += bars
    shapes, notes = [], []
    for k, (key, label) in enumerate((("ttft", "TTFT SLO"), ("itl", "TPOT SLO"))):
        target = targets.get(key)
        if not isinstance(target, int | float) or key not in shown_targets:
            continue
        note = {"yref": "paper", "y": 0.02, "showarrow": False, "font": {"size": 10, "color": SERIES["reference"]}}
        if shown_targets[key]:
            shapes.append({"type": "line", "xref": _ref("x", k), "yref": "paper", "x0": target, "x1": target,
                           "y0": 0, "y1": 1, "line": {"color": SERIES["reference"], "width": 1, "dash": "dash"}})
            # Its text runs into the panel: right of a line in the panel's left half, left of one in its right
            # half (a target past the data is the axis's right end, and text after it ran into the next panel, or
            # off a phone's screen).
            lo, hi = layout[_ax("x", k)]["range"]
            notes.append({**note, "xref": _ref("x", k), "x": _log10(target), "text": f"{label} {target:g} ms",
                          "xanchor": "left" if _log10(target) <= (lo + hi) / 2 else "right"})
        else:  # far outside the data: named at the edge it lies beyond, without stretching the axis to it
            above = target > 10 ** layout[_ax("x", k)]["range"][1]
            notes.append({**note, "xref": f"{_ref('x', k)} domain", "x": 1 if above else 0,
                          "xanchor": "right" if above else "left",
                          "text": f"{label} {target:g} ms →" if above else f"← {label} {target:g} ms"})
    if not any(v.cdf[key]["x"] for v in views for key, _, _ in CDF_PANELS):
        notes.append(_empty_note("No request finished in this run: there are no latencies to plot."))
    layout.update(shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}


FIGURE = Figure(
    name="cdf", title="Latency distributions", order=20, build=lambda r: cdf_figure(r.views, r.model_ci),
    explain=lambda r, data: (
        "Cumulative distributions (log time axis). TTFT and E2EL count requests; ITL counts every gap between "
        "consecutive tokens, so a prefill stall shows as a long right tail." + (
            " Error bars: the P50, P90 and P99 under the step-time model's own error (the 90% range over an "
            "ensemble of models spread as its validation errors)." if r.model_ci else "")),
)
