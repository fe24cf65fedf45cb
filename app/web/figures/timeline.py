"""The engine timeline: per engine step its duration, what it batched, the queue and KV use, one row each on a
shared time axis, a line per scheduler. A run of several engines has no merged step log: the cluster view (the
kv figure) draws each engine's instead, and this card is left out."""

from __future__ import annotations

from ..charts import _ax, _axis, _empty_note, _layout, _ref, _rows, color
from ..runview import RunView
from . import Figure, Results

TIMELINE_ROWS = (("step_ms", "step time (ms)"), ("prefill_tokens", "prefill tokens / step"),
                 ("decode_seqs", "decode seqs / step"), ("waiting", "queued requests"), ("kv_pct", "KV in use (%)"))


def timeline_figure(views: list[RunView], span: list[float] | None = None) -> dict:
    """`span`: the comparison's time_range."""
    n = len(TIMELINE_ROWS)
    layout = _layout(170 * n, hovermode="x unified", margin={"l": 56, "r": 20, "t": 36, "b": 50})
    layout["legend"].update(x=1, xanchor="right")  # the first row's name is at the left, above it
    # Each row's name is written above it, level: a rotated axis title is longer than a short row is high (a
    # slide's embed overprinted them), and a level name reads at a glance.
    names = []
    data = []
    for k, (domain, (key, title)) in enumerate(zip(_rows(n, 0.05), TIMELINE_ROWS, strict=True)):
        bottom = k == n - 1
        layout[_ax("x", k)] = _axis("simulated time (s)" if bottom else "", anchor=_ref("y", k),
                                    showticklabels=bottom, **({"range": span} if k == 0 and span else {}),
                                    **({} if k == 0 else {"matches": "x"}))
        layout[_ax("y", k)] = _axis("", domain=domain, anchor=_ref("x", k), rangemode="tozero")
        names.append({"xref": "paper", "yref": f"{_ref('y', k)} domain", "x": 0, "y": 1, "xanchor": "left",
                      "yanchor": "bottom", "showarrow": False, "text": title, "font": {"size": 11}})
        for v in views:
            y = v.steps[key] if key != "kv_pct" else [round(b * 100 / max(1, v.setup["num_blocks"]), 2)
                                                     for b in v.steps["kv_blocks"]]
            data.append({"type": "scatter", "mode": "lines", "x": v.steps["t"],
                         "y": y, "name": v.scheduler, "legendgroup": v.scheduler, "showlegend": k == 0,
                         "line": {"color": color(v.scheduler), "width": 1.4, "shape": "hv"},
                         "xaxis": _ref("x", k), "yaxis": _ref("y", k),
                         "hovertemplate": f"{v.scheduler}: %{{y:,.4~g}}<extra></extra>"})
    layout["annotations"] = names
    if not any(v.steps["t"] for v in views):
        layout["annotations"].append(_empty_note("No request arrived in this run: the engine never stepped."))
    return {"data": data, "layout": layout}


def _explain(results: Results, figure: dict) -> str:
    per_point = results.views[0].steps["steps_per_point"] if results.views else 1
    text = "Per engine step: its duration, what it batched, the queue and KV use."
    return text + (f" Each point is the maximum over about {per_point:.0f} steps." if per_point > 1 else "")


FIGURE = Figure(
    name="timeline", title="Engine timeline", explain=_explain, order=50, cursor=True,
    build=lambda r: timeline_figure(r.views, r.span),
    shown=lambda r: not r.cluster,  # a cluster's engines each have their row in the cluster view
)
