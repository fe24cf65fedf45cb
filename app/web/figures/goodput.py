"""Goodput vs arrival rate: a rate sweep (a full simulation per rate and scheduler, run in the background by
service.start_sweep) drawn as goodput and SLO attainment per offered rate, each scheduler's knee marked. The card
proposes a range around the scenario's rate and draws the curves on request (/goodput polls the sweep's
progress); an embed sweeps at once, the proposed range unless the query gives one."""

from __future__ import annotations

from typing import Any

from sim_core import ScenarioError

from .. import present, service
from ..charts import _axis, _columns, _layout, color
from ..inputs import WebRequest
from . import Figure, Results


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


def goodput_context(req: WebRequest) -> dict:
    """The card's state for a request: the range it proposes, and with a sweep in the request, the sweep's job
    (started now or found) and its progress or curves; `disabled` says why there are no curves for this scenario."""
    try:
        rates = req.sweep or service.proposed_sweep(req)
    except ScenarioError as e:  # no sensible range around this scenario's rate; the run itself is fine
        return {"disabled": f"Goodput-vs-rate curves: {e.problems[0][1]}."}
    ctx: dict[str, Any] = {"range": rates, "job": None, "error": None, "query": req.query(sweep=False)}
    if req.sweep is not None:
        try:
            ctx["job"] = job = service.start_sweep(req)
        except ScenarioError as e:  # more work than the web sweeps
            return {"disabled": f"Goodput-vs-rate curves: {e.problems[0][1]}."}
        except service.BusyError as e:
            ctx["error"] = str(e)
            return ctx
        ctx.update(sweep_status(job))
    return ctx


def sweep_status(job: service.SweepJob) -> dict:
    if job.result is None and job.cancelled:  # its Cancel button: no error, the form draws it again
        return {"job": job, "error": None, "figure": None, "cancelled": True}
    out: dict[str, Any] = {"job": job, "error": job.error, "figure": None}
    if job.result is not None:
        out["figure"] = goodput_figure(job.result)
        out["knees"] = [(name, s["knee_rate"]) for name, s in job.result["schedulers"].items()]
        out["embed_query"] = job.request.query()
    return out


def sweep_request(req: WebRequest) -> WebRequest:
    """What an embed draws: the curves of the embed's schedulers (one scheduler's: a sweep of it alone), over the
    query's range or the proposed one."""
    return WebRequest(req.scenario, req.schedulers, req.upload, req.sweep or service.proposed_sweep(req))


def _explain(results: Results, g: dict) -> str:
    slo = present.slo_text(results.views[0].metrics) if results.views else "the SLO"
    return ("Each point is a full simulation at that rate. The knee is the highest rate up to which at least "
            f"{service.KNEE_TARGET:.0%} of requests meet {slo}.")


FIGURE = Figure(
    name="goodput", title="Goodput vs arrival rate", order=80, build=lambda r: goodput_context(r.req),
    explain=_explain, template="_figure_goodput.html", simulates=False, embed_request=sweep_request,
)
